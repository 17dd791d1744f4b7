"""``kubectl gpushare label-nodes``: mark GPU nodes ``gpushare=true`` so the device plugin runs there.

The device plugin DaemonSet selects nodes by the ``gpushare=true`` label (the original's
convention). This command sets or removes that label on named nodes, on nodes matching ``-l``,
or (with no arguments, or ``--all``) on every node that has NVIDIA GPUs: ``nvidia.com/gpu``
capacity, NVIDIA GPU Feature Discovery's ``nvidia.com/gpu.present``/``nvidia.com/gpu.count``
labels, or a gpushare ``aliyun.com/gpu-mem`` capacity. It prints one ``node/<name> labeled`` line per node, as
``kubectl label`` does, and patches only nodes whose label actually changes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.errors import EXIT_API, EXIT_AUTH, EXIT_CODES_HELP, EXIT_UNREACHABLE, EXIT_USAGE
from kubectl_gpushare.kube.flags import kube_options, make_client

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


def _select(client: Client, names: tuple[str, ...], selector: str | None, all_gpu: bool) -> list[Node]:
    if names:
        return [client.get_node(name) for name in dict.fromkeys(names)]
    nodes: list[Node] = client.list_nodes(label_selector=selector or None)
    return [node for node in nodes if has_nvidia_gpus(node)] if all_gpu else nodes


def _apply(options: dict[str, Any]) -> None:
    remove = options["remove"]
    suffix = " (dry run)" if options["dry_run"] else ""
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
            if not options["dry_run"]:
                body = {"metadata": {"labels": {protocol.LABEL_GPUSHARE: wanted}}}
                client.patch_node(name, body, patch_type="merge")
            click.echo(f"node/{name} {'unlabeled' if remove else 'labeled'}{suffix}")


@click.command(
    "label-nodes",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option(
    "--all", "all_gpu", is_flag=True, help="Every node with NVIDIA GPUs (capacity or GFD labels); the default."
)
@click.option("-l", "--selector", default=None, metavar="SELECTOR", help="Nodes matching this label selector.")
@click.option("--remove", is_flag=True, help="Remove the gpushare label instead of setting it.")
@click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@kube_options
def label_nodes_command(**options: Any) -> None:
    """Label GPU nodes gpushare=true so the gpushare device plugin DaemonSet runs on them.

    With no node names and no -l, every node with NVIDIA GPUs is labelled.
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
    click.echo(f"Failed due to {' '.join(message.split())}", err=True)
    sys.exit(code)
