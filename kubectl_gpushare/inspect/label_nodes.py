"""``kubectl gpushare label-nodes``: mark GPU nodes ``gpushare=true`` so the device plugin runs there.

The device plugin DaemonSet selects nodes by the ``gpushare=true`` label (the original's
convention). This command sets or removes that label on named nodes, on nodes matching ``-l``,
or (with no arguments, or ``--all``) on every node that has NVIDIA GPUs: ``nvidia.com/gpu``
capacity, NVIDIA GPU Feature Discovery's ``nvidia.com/gpu.present``/``nvidia.com/gpu.count``
labels, or a gpushare ``aliyun.com/gpu-mem`` capacity. It prints one ``node/<name> labeled`` line per node, as
``kubectl label`` does, and patches only nodes whose label actually changes.

A node whose GPUs another sharing stack already advertises (NVIDIA's device plugin, with or without
time-slicing or MIG, HAMi, nano-gpu, elastic-gpu: `kube.stacks.detect`, the rule inspect reads
nodes with) is skipped with one line saying why: a second device plugin would advertise the same
GPUs again. Naming the node, or ``--force``, labels it anyway.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.errors import EXIT_API, EXIT_AUTH, EXIT_CODES_HELP, EXIT_UNREACHABLE, EXIT_USAGE
from kubectl_gpushare.kube.flags import complete, kube_options, make_client

if TYPE_CHECKING:
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.types import Node

NVIDIA_GPU: Final = "nvidia.com/gpu"
GFD_PRESENT: Final = "nvidia.com/gpu.present"
LABEL_VALUE: Final = "true"

EPILOG = """\b
Examples:
  kubectl gpushare label-nodes                 # every node with NVIDIA GPUs
  kubectl gpushare label-nodes gpu-1 gpu-2     # these nodes
  kubectl gpushare label-nodes -l pool=a100 --dry-run
  kubectl gpushare label-nodes --remove        # unlabel every GPU node
Nodes whose GPUs another stack advertises (nvidia.com/gpu from NVIDIA's device plugin, time-slicing,
MIG, HAMi, nano-gpu, elastic-gpu) are skipped, one line each, unless named or --force'd.
Needs list, get and patch on nodes.

""" + EXIT_CODES_HELP


def has_nvidia_gpus(node: Node) -> bool:
    """Whether a node has NVIDIA GPUs by any of the signs a cluster commonly carries."""
    capacity = node.status.capacity
    labels = node.metadata.labels
    for resource in (NVIDIA_GPU, protocol.RESOURCE_MEM):
        value = capacity.get(resource, "0")
        if value not in ("0", ""):
            return True
    return labels.get(GFD_PRESENT) == "true" or labels.get(protocol.LABEL_GPU_COUNT, "0") not in ("0", "")


STACK_NAMES: Final = {
    protocol.STACK_NVIDIA: "NVIDIA's device plugin",
    protocol.STACK_HAMI: "HAMi",
    protocol.STACK_NANO_GPU: "nano-gpu",
    protocol.STACK_ELASTIC_GPU: "elastic-gpu",
}


def other_stack(node: Node) -> str | None:
    """Why another sharing stack owns this node's GPUs, or None when gpushare may take them.

    The stack is `kube.stacks.detect`'s (a node already advertising ``aliyun.com/gpu-mem`` is
    gpushare's); the sharing mode (time-slicing, MPS, MIG) is the stack decoder's own note.
    """
    from kubectl_gpushare.kube import stacks

    stack = stacks.detect(node)
    if stack is None or stack == protocol.STACK_GPUSHARE:
        return None
    what = STACK_NAMES.get(stack, stack)
    decoded = stacks.stack_node(node, stack, None, 0.0)
    # Extended resources (a domain-prefixed name) are what a device plugin advertises.
    resources = sorted(name for name in node.status.capacity if "/" in name)
    modes = [decoded.note] if decoded.note else []
    if any(resource.startswith(protocol.NVIDIA_MIG_PREFIX) for resource in resources):
        modes.append("MIG")
    advertised = ", ".join(resources[:3]) + (", ..." if len(resources) > 3 else "")
    detail = f" ({'; '.join(modes)})" if modes else ""
    on = f" advertises {advertised}" if advertised else " manages its GPUs"
    return f"{what}{detail}{on}"


def _select(client: Client, names: tuple[str, ...], selector: str | None, all_gpu: bool) -> list[Node]:
    if names:
        return [client.get_node(name) for name in dict.fromkeys(names)]
    nodes: list[Node] = client.list_nodes(label_selector=selector or None)
    if not all_gpu:
        return nodes
    from kubectl_gpushare.kube import stacks

    # A sharing stack's node (nano-gpu, elastic-gpu) is listed too, so that its skip line says why.
    return [node for node in nodes if has_nvidia_gpus(node) or stacks.detect(node) is not None]


def _apply(options: dict[str, Any]) -> None:
    remove = options["remove"]
    suffix = " (dry run)" if options["dry_run"] else ""
    # Named nodes are the user's explicit choice; --all and -l skip other stacks' nodes unless --force.
    respect_stacks = not (remove or options["force"] or options["nodes"])
    with make_client(options, "label-nodes") as client:
        nodes = _select(client, options["nodes"], options["selector"], options["all_gpu"])
        if not nodes:
            what = "matched the selector" if options["selector"] else "have NVIDIA GPUs"
            click.echo(f"no nodes {what}; nothing to do", err=True)
            return
        for node in sorted(nodes, key=lambda n: n.metadata.name):
            name = node.metadata.name
            current = node.metadata.labels.get(protocol.LABEL_GPUSHARE)
            wanted = None if remove else LABEL_VALUE
            if current == wanted:
                click.echo(f"node/{name} not {'unlabeled' if remove else 'labeled'} (already so){suffix}")
                continue
            owner = other_stack(node) if respect_stacks else None
            if owner is not None:
                click.echo(f"node/{name} skipped: {owner}; name it or pass --force to label it too{suffix}")
                continue
            if not options["dry_run"]:
                body = {"metadata": {"labels": {protocol.LABEL_GPUSHARE: wanted}}}
                client.patch_node(name, body, patch_type="merge")
            click.echo(f"node/{name} {'unlabeled' if remove else 'labeled'}{suffix}")


@click.command(
    "label-nodes",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("nodes", nargs=-1, metavar="[NODE]...", shell_complete=complete("nodes"))
@click.option(
    "--all", "all_gpu", is_flag=True, help="Every node with NVIDIA GPUs (capacity or GFD labels); the default."
)
@click.option("-l", "--selector", default=None, metavar="SELECTOR", help="Nodes matching this label selector.")
@click.option("--remove", is_flag=True, help="Remove the gpushare label instead of setting it.")
@click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@click.option(
    "--force", is_flag=True, help="Also label nodes whose GPUs another stack (NVIDIA, HAMi, ...) advertises."
)
@kube_options
def label_nodes_command(**options: Any) -> None:
    """Label GPU nodes gpushare=true so the gpushare device plugin DaemonSet runs on them.

    With no node names and no -l, every node with NVIDIA GPUs is labelled, except nodes another
    sharing stack already serves.
    """
    if not (options["nodes"] or options["selector"]):
        options["all_gpu"] = True
    if options["nodes"] and (options["all_gpu"] or options["selector"]):
        raise click.UsageError("name nodes, or pass --all / -l, not both")
    from kubectl_gpushare.kube import errors
    from kubectl_gpushare.kube.selectors import SelectorError, parse_label_selector

    try:
        parse_label_selector(options["selector"])
    except SelectorError as exc:
        raise click.UsageError(f"--selector: {exc}") from None
    try:
        _apply(options)
    except errors.ConfigError as exc:
        code, message = EXIT_USAGE, str(exc)
    except errors.Unreachable as exc:
        code, message = EXIT_UNREACHABLE, str(exc)
    except (errors.Unauthorized, errors.Forbidden) as exc:
        code, message = EXIT_AUTH, f"{exc} (label-nodes needs list, get and patch on nodes)"
    except errors.KubeError as exc:
        code, message = EXIT_API, str(exc)
    else:
        return
    click.echo(f"Failed due to {protocol.one_line(message)}", err=True)
    sys.exit(code)
