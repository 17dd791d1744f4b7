"""kube-scheduler's HTTP extender wire format: decoding requests, encoding replies.

kube-scheduler's extender types (``k8s.io/kube-scheduler/extender/v1``) carry no JSON tags, so
replies use the Go field names exactly (``NodeNames``, ``FailedNodes``, ...), pointer fields are
sent as ``null`` rather than left out, and map keys are sorted as Go sorts them. Requests are read
case-insensitively, as Go's decoder reads them, so pre-1.16 schedulers that send ``nodenames`` or
``podName`` work too.

This module owns the byte format only: no ledger, no I/O. Malformed input raises `WireError` with
a one-line message that the app sends back in the verb's ``Error`` field; a body that is not UTF-8
JSON at all, or nests too deep for the decoder's stack, raises `UnreadableBodyError` (the app answers 400).
The pod is decoded once, straight into `kube.types.Pod`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.types import Pod

_decode_top = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_json = msgspec.json.Decoder().decode
_decode_pod = msgspec.json.Decoder(Pod).decode
_decode_names = msgspec.json.Decoder(list[str] | None).decode
_encode_json = msgspec.json.Encoder().encode
_T = TypeVar("_T")

class WireError(ValueError):
    """A request body that is not a valid extender request; the message is the reply's Error."""

    status: ClassVar[int] = 200
    """The HTTP status the extender answers it with (filter, prioritize and bind alike)."""


class UnreadableBodyError(WireError):
    """A body that is not UTF-8 JSON, or nests too deep to read safely: answered with 400."""

    status: ClassVar[int] = 400


class ExtenderArgs(msgspec.Struct, frozen=True):
    """Body of filter and prioritize: the pod, and the candidate nodes in one of two forms.

    Attributes:
        pod: the v1.Pod, decoded into the fields gpushare reads.
        node_names: candidate names (``nodeCacheCapable: true``), else None.
        nodes: candidate v1.Node objects (``nodeCacheCapable: false``), else None; kept as JSON
            because the reply echoes the passing ones back.
    """

    pod: Pod
    node_names: list[str] | None
    nodes: list[dict[str, Any]] | None

    def candidate_names(self) -> list[str]:
        """Candidate node names in request order, from NodeNames or else from the Node objects."""
        if self.node_names is not None:
            return self.node_names
        return [_node_name(node) for node in self.nodes or ()]


class BindingArgs(msgspec.Struct, frozen=True):
    """Body of bind: which pod (with its UID as a precondition) goes on which node."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def _guarded(decode: Callable[[bytes], _T], data: bytes) -> _T:
    """Run one decoder, turning a nesting too deep for the C decoder's stack into `UnreadableBodyError`."""
    try:
        return decode(data)
    except RecursionError:
        raise UnreadableBodyError("request body nests too deep to read") from None


def _lower_keys(body: bytes) -> dict[str, msgspec.Raw]:
    """Decode a JSON object's top level and lower-case its keys, as Go's case-insensitive match does.

    Raises:
        UnreadableBodyError: the body is not UTF-8 or nests too deep.
        WireError: the body is empty, not JSON, or not an object.
    """
    if not body or not body.strip():
        raise WireError("empty request body")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableBodyError(f"request body is not UTF-8 (byte {exc.start})") from None
    try:
        raw = _guarded(_decode_top, body)
    except msgspec.ValidationError:
        raise WireError("request body is not a JSON object") from None
    except msgspec.DecodeError as exc:
        raise WireError(f"malformed JSON: {exc}") from None
    return {key.lower(): value for key, value in raw.items()}


def _node_name(node: Any) -> str:
    if isinstance(node, dict):
        meta = node.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            return str(meta["name"])
    raise WireError("a node in Nodes.items has no metadata.name")


def _pod_key(raw: msgspec.Raw) -> str:
    """``namespace/name`` of a pod that did not decode, best effort, for the error message (at most 253 characters)."""
    try:
        meta = _decode_json(raw).get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
    except (msgspec.DecodeError, AttributeError):
        return "?"
    namespace = namespace if isinstance(namespace, str) and namespace else "default"
    return f"{namespace}/{name if isinstance(name, str) and name else '?'}"[:253]


def decode_extender_args(body: bytes) -> ExtenderArgs:
    """Read an ExtenderArgs body (filter, prioritize).

    Raises:
        UnreadableBodyError: the body is not UTF-8 or nests too deep.
        WireError: the body is empty, not JSON, has no pod (or one that is not a v1.Pod), or has
            neither NodeNames nor Nodes.
    """
    raw = _lower_keys(body)
    pod_raw = raw.get("pod")
    if pod_raw is None or bytes(pod_raw).strip() == b"null":
        raise WireError("arg or pod is nil")
    try:
        pod = _guarded(_decode_pod, pod_raw)
    except msgspec.DecodeError as exc:
        raise WireError(f"pod {_pod_key(pod_raw)} is not a valid v1.Pod: {protocol.error_reason(exc)}") from None
    names: list[str] | None = None
    if "nodenames" in raw:
        try:
            names = _guarded(_decode_names, raw["nodenames"])
        except msgspec.DecodeError:
            raise WireError("NodeNames is not a list of strings") from None
    items: list[dict[str, Any]] | None = None
    nodes = _guarded(_decode_json, raw["nodes"]) if "nodes" in raw else None
    if nodes is not None:
        if not isinstance(nodes, dict) or not isinstance(nodes.get("items") or [], list):
            raise WireError("Nodes is not a v1.NodeList")
        items = list(nodes.get("items") or [])
        for item in items:
            _node_name(item)
    if names is None and items is None:
        raise WireError("cannot get node names")
    return ExtenderArgs(pod=pod, node_names=names, nodes=items)


def decode_binding_args(body: bytes) -> BindingArgs:
    """Read an ExtenderBindingArgs body.

    Raises:
        WireError: the body is empty, not JSON, or misses PodName, PodNamespace, PodUID or Node.
    """
    raw = _lower_keys(body)
    fields = {}
    for key, label in (("podname", "PodName"), ("podnamespace", "PodNamespace"), ("poduid", "PodUID"),
                       ("node", "Node")):
        value = _guarded(_decode_json, raw[key]) if key in raw else None
        if not isinstance(value, str) or not value:
            raise WireError(f"{label} is missing or not a string")
        fields[key] = value
    return BindingArgs(
        pod_name=fields["podname"], pod_namespace=fields["podnamespace"], pod_uid=fields["poduid"],
        node=fields["node"],
    )


def encode_filter_result(
    *,
    node_names: list[str] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    failed: dict[str, str] | None = None,
    error: str = "",
) -> bytes:
    """Encode an ExtenderFilterResult with the Go field names, in Go's field order.

    ``nodes`` is wrapped as a v1.NodeList (``{"metadata":{},"items":[...]}``) when given; the
    failed-node map is key-sorted as Go's encoder sorts maps.
    """
    return _encode_json({
        "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
        "NodeNames": node_names,
        "FailedNodes": None if failed is None else dict(sorted(failed.items())),
        "FailedAndUnresolvableNodes": None,
        "Error": error,
    })


def encode_host_priorities(scores: list[tuple[str, int]]) -> bytes:
    """Encode a HostPriorityList: ``[{"Host": name, "Score": 0..10}, ...]``."""
    return _encode_json([{"Host": host, "Score": score} for host, score in scores])


def encode_binding_result(error: str = "") -> bytes:
    """Encode an ExtenderBindingResult: ``{"Error": ""}`` on success."""
    return _encode_json({"Error": error})


def encode_json(value: Any) -> bytes:
    """Encode any other reply body (inspect, errors) compactly."""
    return _encode_json(value)
