"""The extender's verbs as pure functions: request in, reply body out.

Filter, prioritize and inspect read the `ExtenderState` and return the encoded reply; they do no
I/O and hold no state of their own, so tests call them directly with a state they build. Bind
needs the API server and lives in `binder`.

Deliberate differences from the original, all inside the wire format:
- with ``NodeNames`` (``nodeCacheCapable: true``) the reply's ``Nodes`` is null; without them the
  reply echoes the scheduler's own Node objects for the passing nodes (the original sent its
  possibly stale cached copies);
- a pod whose containers request no ``aliyun.com/gpu-mem`` gets an ``Error`` naming the problem
  (the original let it pass every node and failed later, at bind).
"""

from __future__ import annotations

from kubectl_gpushare import protocol
from kubectl_gpushare.extender import wire
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube import records
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.types import Pod
from kubectl_gpushare.ledger import Policy


def pod_request(pod: Pod) -> int:
    """The pod's GPU memory request: the sum of its regular containers' gpu-mem limits.

    Raises:
        wire.WireError: a gpu-mem limit is not a quantity, or one too large to count (the
            scheduler should not place a pod whose request nobody can read).
    """
    warnings = Warnings()
    try:
        request, _ = records.pod_request(pod, warnings)
    except ArithmeticError as exc:  # a quantity beyond what the parser can represent
        raise wire.WireError(f"pod {pod_key(pod)}: {protocol.RESOURCE_MEM} limit is not a usable quantity: "
                             f"{type(exc).__name__}") from None
    if warnings:
        raise wire.WireError(warnings.messages[0])
    return request


def pod_key(pod: Pod) -> str:
    """``namespace/name`` of a pod, for messages."""
    return f"{pod.metadata.namespace or 'default'}/{pod.metadata.name or '?'}"


def no_request_error(pod: Pod) -> str:
    """The Error for a pod that asks the extender about a GPU but requests no gpu-mem."""
    return f"pod {pod_key(pod)} requests no {protocol.RESOURCE_MEM} in its containers' limits"


def filter_nodes(body: bytes, state: ExtenderState) -> tuple[int, bytes]:
    """Answer kube-scheduler's filter: the candidates with one GPU that has room for the pod.

    Returns:
        The status and a valid ExtenderFilterResult: 200, with problems of the request in
        ``Error``; 400 (``Error`` set) for a body that is not UTF-8 JSON or nests too deep.
    """
    try:
        args = wire.decode_extender_args(body)
        request = pod_request(args.pod)
    except wire.WireError as exc:
        return exc.status, wire.encode_filter_result(error=str(exc))
    if request <= 0:
        return 200, wire.encode_filter_result(error=no_request_error(args.pod))
    passed, failed = state.filter(args.candidate_names(), request)
    if args.node_names is not None:
        return 200, wire.encode_filter_result(node_names=passed, failed=failed)
    keep = set(passed)
    nodes = [node for node in args.nodes or () if node["metadata"]["name"] in keep]
    return 200, wire.encode_filter_result(node_names=passed, nodes=nodes, failed=failed)


def prioritize_nodes(body: bytes, state: ExtenderState, policy: Policy) -> tuple[int, bytes, str]:
    """Answer prioritize: a 0..10 score per candidate, favouring binpack or spread.

    Returns:
        The status, the HostPriorityList body and an error message ("" on success).
        kube-scheduler ignores prioritize errors, so on bad input the list is empty (status 200,
        or 400 for a body that is not UTF-8 JSON) and the message goes to the log.
    """
    try:
        args = wire.decode_extender_args(body)
        request = pod_request(args.pod)
    except wire.WireError as exc:
        return exc.status, wire.encode_host_priorities([]), str(exc)
    names = args.candidate_names()
    if request <= 0:
        return 200, wire.encode_host_priorities([(name, 0) for name in names]), no_request_error(args.pod)
    return 200, wire.encode_host_priorities(state.scores(names, request, policy)), ""


def inspect_nodes(state: ExtenderState, node: str | None = None) -> tuple[int, bytes]:
    """The original's ``/inspect`` JSON; an unknown node is a 404 with ``error`` set (not a crash)."""
    try:
        nodes = state.inspect(node)
    except KeyError:
        return 404, wire.encode_json({"nodes": [], "error": protocol.REASON_NOT_FOUND.format(node=node)})
    return 200, wire.encode_json({"nodes": nodes})
