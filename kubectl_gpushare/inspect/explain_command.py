"""``kubectl gpushare explain POD``: flags, loading and output (the reasoning: `inspect.explain`).

Reads the pod, every node, the active pods and the pod's events from the API (or the pod, nodes and
pods from ``--from-file``), through inspect's loader and error handling. Only click and the
standard library are imported at module level.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import caps
from kubectl_gpushare.inspect.caps import limit_options
from kubectl_gpushare.inspect.command import check_namespace, from_file_option, run
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP
from kubectl_gpushare.kube.flags import complete, kube_options, make_client
from kubectl_gpushare.kube.records import Warnings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kubectl_gpushare.inspect.explain_dra import DraInputs
    from kubectl_gpushare.kube.stacks.dra import DraObjects
    from kubectl_gpushare.kube.types import ConfigMap, Event, KoordDevice, Node, Pod, PodPlacement
    from kubectl_gpushare.ledger import Ledger, Policy, StackClaim, StackNode

POD_PAGE_SIZE: Final = 2000

EPILOG = (
    """\b
Examples:
  kubectl gpushare explain trainer-0 -n ml     # why is it Pending, or where does it run?
  kubectl gpushare explain trainer-0 -n ml -o json
For a pod not on a node yet, each node with GPU sharing says why it does or does not take the pod
(taints, nodeSelector, cordon, not enough memory on one GPU), and the scheduler's FailedScheduling
messages are quoted. For a placed pod: its node, GPU, and who shares that GPU; a pod on a HAMi,
NVIDIA, nano-gpu or elastic-gpu node is located from that stack's annotations, in its GPU's unit.
A pod with ResourceClaims of the DRA driver (gpu-mem.kubectl-gpushare.io): where each claim is
allocated, or, Pending, what kube-scheduler's DRA allocator says on each node of the driver.

"""
    + EXIT_CODES_HELP
)


@dataclass
class _Inputs:
    pod: Pod
    nodes: list[Node]
    ledger: Ledger
    events: list[Event] = field(default_factory=list)
    placement: PodPlacement | None = None
    warnings: Warnings = field(default_factory=Warnings)
    stack_nodes: list[StackNode] = field(default_factory=list)
    stack_claims: dict[str, list[StackClaim]] = field(default_factory=dict)
    dra: DraInputs | None = None


def _pod_not_found(namespace: str, name: str, elsewhere: list[str] | None = None) -> Exception:
    """The NotFound words kubectl uses, plus where a pod of that name does live, when -n was not given."""
    from kubectl_gpushare.kube.errors import NotFound

    hint = ""
    if elsewhere:
        where = caps.named(sorted(elsewhere))
        hint = (f"; a pod of that name is in namespace{'s' if len(elsewhere) > 1 else ''} {where} "
                f"(-n {sorted(elsewhere)[0]}, or -A)")
    return NotFound(404, "NotFound", f'pods "{name}" not found in namespace "{namespace}"{hint}')


def check_pod_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """POD: a pod name or a usage error, before it reaches a URL."""
    from kubectl_gpushare.kube.names import check_object_name

    try:
        return check_object_name(value, "pod")
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def _only_one(name: str, namespaces: list[str]) -> str:
    """The namespace of the one pod called ``name`` (-A); refused when there are none or several."""
    from kubectl_gpushare.kube.errors import NotFound

    namespaces = sorted(set(namespaces))  # a dump may hold one pod twice: that is still one namespace
    if not namespaces:
        raise NotFound(404, "NotFound", f'pods "{name}" not found in any namespace')
    if len(namespaces) > 1:
        raise click.UsageError(f"pod {name} is in several namespaces ({caps.named(namespaces)}): pick one "
                               "with -n")
    return namespaces[0]


def _inputs(
    pod: Pod, nodes: list[Node], pods: list[Pod], events: list[Event], configmaps: list[ConfigMap],
    devices: Sequence[KoordDevice], objects: DraObjects | None, warnings: Warnings,
) -> _Inputs:
    """The whole cluster as inspect reads it (`source.Build`: DRA claims included), other stacks' nodes too."""
    from kubectl_gpushare.inspect.explain_dra import DraInputs
    from kubectl_gpushare.inspect.source import Build, unhealthy_by_node
    from kubectl_gpushare.kube import stacks

    build = Build(nodes, (), cluster_wide=True, stack=stacks.AUTO, warnings=warnings,
                  sick=unhealthy_by_node(configmaps), devices=devices, objects=objects)
    for other in pods:
        build.add_pod(other)
    snapshot = build.snapshot()
    split = build.split  # every stack node, GPUs or none (a view leaves the empty ones out)
    return _Inputs(pod, nodes, snapshot.ledger, events, warnings=warnings,
                   stack_nodes=sorted(split.nodes.values(), key=lambda node: node.name), stack_claims=split.claims,
                   dra=DraInputs(snapshot.dra, snapshot.dra_nodes))


def _load(options: dict[str, Any], progress: Callable[[int], None], warnings: Warnings) -> _Inputs:
    name = options["pod"]
    if options["from_file"] is not None:
        from kubectl_gpushare.inspect.source import (
            DRA_KINDS,
            Others,
            configmaps_of,
            devices_found,
            dra_of,
            parse_documents,
            placement_of,
            read_input,
        )

        data = read_input(options["from_file"])
        others: Others = {kind: [] for kind in ("Pod", "ConfigMap", "Device", *DRA_KINDS)}  # in the same pass
        file_nodes, file_pods = parse_documents(data, warnings, others)
        homes = [p.metadata.namespace for p in file_pods if p.metadata.name == name]
        namespace = _only_one(name, homes) if options["all_namespaces"] else options["namespace"] or "default"
        matches = [p for p in file_pods if (p.metadata.namespace, p.metadata.name) == (namespace, name)]
        if not matches:
            raise _pod_not_found(namespace, name, None if options["namespace"] else homes)
        objects = dra_of(others, warnings, classes=True, nodes=file_nodes, resolve=True)
        inputs = _inputs(matches[0], file_nodes, file_pods, [], configmaps_of(others, warnings),
                         devices_found(others, file_nodes, warnings), objects, warnings)
        inputs.placement = placement_of(others, namespace, name, warnings)
        return inputs
    import msgspec

    from kubectl_gpushare.inspect.source import (
        ACTIVE_PODS,
        dra_from_api,
        koordinator_devices,
        needs_permission,
        placement_in,
        require_namespace,
    )
    from kubectl_gpushare.kube import errors, stacks, types
    from kubectl_gpushare.kube.client import decoded_item

    def namesakes() -> list[str]:
        """Namespaces holding a pod called ``name`` (one field-selected list, names only)."""
        try:
            found = client.list(types.PODS, field_selector=f"metadata.name={name}", on_skip=warnings.add)
        except errors.Forbidden:
            return []  # no cluster-wide list: no hint, and -A cannot look
        return [pod.metadata.namespace for pod in found]

    with make_client(options, "explain") as client:
        if options["all_namespaces"]:
            namespace = _only_one(name, namesakes())
        else:
            namespace = options["namespace"] or client.config.namespace or "default"
        try:
            with needs_permission("get pods", "explain"):
                body = client.request("GET", types.PODS.path(namespace, name))
        except errors.NotFound:
            if options["namespace"]:
                require_namespace(client, namespace)  # -n nosuchns: say so, as kubectl does
            raise _pod_not_found(namespace, name, None if options["namespace"] else namesakes()) from None
        pod = decoded_item(types.PODS, body, namespace, name)  # not a Pod (a proxy's page): one error line
        placement = placement_in(msgspec.Raw(body), namespace, name, warnings)  # as from a file
        with needs_permission("list nodes", "explain"):
            nodes = client.list_nodes(on_skip=warnings.add)
        pods: list[Pod] = []
        with needs_permission("list pods in all namespaces", "explain"):
            for page in client.list_pages(types.PODS, field_selector=ACTIVE_PODS, page_size=POD_PAGE_SIZE,
                                          on_skip=warnings.add):
                pods.extend(page.items)
                progress(len(pods))
        try:
            events = client.list(types.EVENTS, namespace, field_selector=f"involvedObject.name={name}",
                                 on_skip=warnings.add)
        except errors.Forbidden:
            events = []  # events only add the scheduler's words; explain works without them
        try:
            configmaps = client.list(types.CONFIGMAPS, protocol.UNHEALTHY_CM_NAMESPACE, on_skip=warnings.add)
        except errors.Forbidden:
            configmaps = []  # unhealthy GPUs are then judged by capacity != allocatable only
        devices = koordinator_devices(client, nodes, stacks.AUTO, warnings)
        objects = dra_from_api(client, warnings, classes=True, nodes=nodes, resolve=True)
    inputs = _inputs(pod, nodes, pods, events, configmaps, devices, objects, warnings)
    inputs.placement = placement
    return inputs


def _render(inputs: _Inputs, options: dict[str, Any]) -> str:
    from kubectl_gpushare.inspect import explain

    policy: Policy = "spread" if options["policy"] == "spread" else "binpack"
    answer = None
    if inputs.dra is not None and inputs.pod.spec.resource_claims:
        from kubectl_gpushare.inspect.explain_dra import explain_claims

        answer = explain_claims(inputs.pod, inputs.nodes, inputs.ledger, inputs.dra, inputs.events, inputs.placement)
    if answer is None:
        answer = explain.explain(
            inputs.pod, inputs.nodes, inputs.ledger, inputs.events, policy, inputs.placement,
            stack_nodes=inputs.stack_nodes, stack_claims=inputs.stack_claims,
        )
    if options["output"] == "json":
        return explain.to_json(answer)
    return explain.to_text(answer, limit=caps.limit_of(options))


@click.command(
    "explain",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("pod", metavar="POD", callback=check_pod_name, shell_complete=complete("pods"))
@click.option(
    "-n", "--namespace", default=None, callback=check_namespace, shell_complete=complete("namespaces"),
    help="The pod's namespace (default: the context's, else default).",
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Find the pod by name in any namespace (it must be one).")
@click.option(
    "--policy",
    type=click.Choice(["binpack", "spread"]),
    default=lambda: os.environ.get(protocol.ENV_GPU_POLICY, "binpack"),
    show_default="$GPUSHARE_POLICY, else binpack",
    help="The extender's GPU policy.",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@limit_options
@from_file_option
@kube_options
def explain_command(**options: Any) -> None:
    """Why a pod is Pending (does not fit), or where it runs and what shares its GPU.

    The text names at most --limit nodes; -o json names them all.
    """
    if options["namespace"] and options["all_namespaces"]:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces go one at a time")
    run(dict(options, nodes=(), selector=None), render=_render, load=_load)
