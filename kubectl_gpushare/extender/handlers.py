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

from typing import Any

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.extender import wire
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube import records
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.types import Pod
from kubectl_gpushare.ledger import Policy


def decode_pod(pod: dict[str, Any]) -> Pod:
    """The ExtenderArgs pod as the typed view the rest of the package reads.

    Raises:
        wire.WireError: the pod does not have the shape of a v1.Pod.
    """
    try:
        return msgspec.convert(pod, Pod)
    except msgspec.ValidationError as exc:
        raise wire.WireError(f"pod {pod_key(pod)} is not a valid v1.Pod: {exc}") from None


def pod_request(pod: dict[str, Any]) -> int:
    """The pod's GPU memory request: the sum of its regular containers' gpu-mem limits.

    Raises:
        wire.WireError: the pod is malformed, or a gpu-mem limit is not a quantity (the scheduler
            should not place a pod whose request nobody can read).
    """
    warnings = Warnings()
    request, _ = records.pod_request(decode_pod(pod), warnings)
    if warnings:
        raise wire.WireError(warnings.messages[0])
    return request


def pod_key(pod: dict[str, Any]) -> str:
    """``namespace/name`` of a pod object, for messages."""
    meta = pod.get("metadata") or {}
    if not isinstance(meta, dict):
        return "?"
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"


def no_request_error(pod: dict[str, Any]) -> str:
    """The Error for a pod that asks the extender about a GPU but requests no gpu-mem."""
    return f"pod {pod_key(pod)} requests no {protocol.RESOURCE_MEM} in its containers' limits"


def filter_nodes(body: bytes, state: ExtenderState) -> bytes:
    """Answer kube-scheduler's filter: the candidates with one GPU that has room for the pod.

    Always a valid ExtenderFilterResult; problems with the request go into ``Error``.
    """
    try:
        args = wire.decode_extender_args(body)
        request = pod_request(args.pod)
    except wire.WireError as exc:
        return wire.encode_filter_result(error=str(exc))
    if request <= 0:
        return wire.encode_filter_result(error=no_request_error(args.pod))
    passed, failed = state.filter(args.candidate_names(), request)
    if args.node_names is not None:
        return wire.encode_filter_result(node_names=passed, failed=failed)
    keep = set(passed)
    nodes = [node for node in args.nodes or () if node["metadata"]["name"] in keep]
    return wire.encode_filter_result(node_names=passed, nodes=nodes, failed=failed)


def prioritize_nodes(body: bytes, state: ExtenderState, policy: Policy) -> tuple[bytes, str]:
    """Answer prioritize: a 0..10 score per candidate, favouring binpack or spread.

    Returns:
        The HostPriorityList body and an error message ("" on success). kube-scheduler ignores
        prioritize errors, so on bad input the list is empty and the message goes to the log.
    """
    try:
        args = wire.decode_extender_args(body)
        request = pod_request(args.pod)
    except wire.WireError as exc:
        return wire.encode_host_priorities([]), str(exc)
    names = args.candidate_names()
    if request <= 0:
        return wire.encode_host_priorities([(name, 0) for name in names]), no_request_error(args.pod)
    return wire.encode_host_priorities(state.scores(names, request, policy)), ""


def inspect_nodes(state: ExtenderState, node: str | None = None) -> tuple[int, bytes]:
    """The original's ``/inspect`` JSON; an unknown node is a 404 with ``error`` set (not a crash)."""
    try:
        nodes = state.inspect(node)
    except KeyError:
        return 404, wire.encode_json({"nodes": [], "error": protocol.REASON_NOT_FOUND.format(node=node)})
    return 200, wire.encode_json({"nodes": nodes})
