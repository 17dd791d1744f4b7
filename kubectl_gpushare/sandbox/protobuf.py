"""Kubernetes protobuf request bodies, for the few kinds kubectl sends that way.

kubectl 1.32's typed ``create`` commands (``kubectl create namespace``, ``create configmap``,
``create serviceaccount``, ``create token``) send ``application/vnd.kubernetes.protobuf`` and do not fall back to
JSON on a 415. This decodes the ``k8s<NUL>`` envelope (``runtime.Unknown``) and those kinds' messages
into the JSON-shaped dicts the rest of the sandbox handles; any other kind, or a field this decoder
does not know, is refused as an unsupported media type rather than half-read. Bounded: every length
is checked against the buffer, varints stop at 10 bytes, and nesting is fixed by the schema below.
No I/O.
"""

from __future__ import annotations

from typing import Any

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body is not a well-formed protobuf message (400)."""


class UnsupportedKindError(ValueError):
    """Well-formed, but a kind or field this decoder does not read (415)."""


Field = tuple[int, int, bytes | int]  # number, wire type, payload (bytes for length-delimited, int for varint)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise ProtobufError("varint longer than 10 bytes")


def fields(data: bytes) -> list[Field]:
    """Split one message into its fields (varint and length-delimited; fixed-width ones are refused)."""
    out: list[Field] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtobufError("field number 0")
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, wire, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if length > len(data) - pos:
                raise ProtobufError("length past the end of the message")
            out.append((number, wire, data[pos : pos + length]))
            pos += length
        else:
            raise UnsupportedKindError(f"protobuf wire type {wire} is not read by the sandbox")
    return out


def _text(value: bytes | int) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited field")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ProtobufError("a string field is not UTF-8") from None


def _message(value: bytes | int) -> bytes:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited field")
    return value


def _map_entry(value: bytes | int) -> tuple[str, str]:
    entry = {number: payload for number, _, payload in fields(_message(value))}
    return _text(entry.get(1, b"")), _text(entry.get(2, b""))


def _object_meta(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    names = {1: "name", 2: "generateName", 3: "namespace", 6: "resourceVersion", 5: "uid"}
    for number, _, value in fields(data):
        if number in names:
            meta[names[number]] = _text(value)
        elif number in (11, 12):
            key, text = _map_entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = text
        elif number == 14:
            meta.setdefault("finalizers", []).append(_text(value))
        elif number in (4, 7, 8, 17):  # selfLink, generation, creationTimestamp, managedFields: server-set
            continue
        else:
            raise UnsupportedKindError(f"ObjectMeta field {number} is not read by the sandbox")
    return meta


def _namespace(number: int, value: bytes | int, obj: dict[str, Any]) -> None:
    if number == 2:
        for sub, _, item in fields(_message(value)):
            if sub != 1:
                raise UnsupportedKindError(f"NamespaceSpec field {sub} is not read by the sandbox")
            obj.setdefault("spec", {}).setdefault("finalizers", []).append(_text(item))
    elif number != 3:  # status is the server's
        raise UnsupportedKindError(f"Namespace field {number} is not read by the sandbox")


def _config_map(number: int, value: bytes | int, obj: dict[str, Any]) -> None:
    if number == 2:
        key, text = _map_entry(value)
        obj.setdefault("data", {})[key] = text
    elif number == 4 and isinstance(value, int):
        obj["immutable"] = bool(value)
    else:
        raise UnsupportedKindError(f"ConfigMap field {number} is not read by the sandbox")


def _service_account(number: int, value: bytes | int, obj: dict[str, Any]) -> None:
    if number == 4 and isinstance(value, int):
        obj["automountServiceAccountToken"] = bool(value)
    else:
        raise UnsupportedKindError(f"ServiceAccount field {number} is not read by the sandbox")


def _token_request(number: int, value: bytes | int, obj: dict[str, Any]) -> None:
    """``authentication/v1`` TokenRequest (``k8s.io/api/authentication/v1/generated.proto``): its spec."""
    if number == 3:  # status is the server's
        return
    if number != 2:
        raise UnsupportedKindError(f"TokenRequest field {number} is not read by the sandbox")
    spec: dict[str, Any] = obj.setdefault("spec", {})
    for sub, _, item in fields(_message(value)):
        if sub == 1:
            spec.setdefault("audiences", []).append(_text(item))
        elif sub == 4 and isinstance(item, int):
            spec["expirationSeconds"] = item - (1 << 64) if item >= 1 << 63 else item  # int64, two's complement
        elif sub == 3:
            names = {1: "kind", 2: "apiVersion", 3: "name", 4: "uid"}
            ref: dict[str, str] = spec.setdefault("boundObjectRef", {})
            for key, _, text in fields(_message(item)):
                if key not in names:
                    raise UnsupportedKindError(f"BoundObjectReference field {key} is not read by the sandbox")
                ref[names[key]] = _text(text)
        else:
            raise UnsupportedKindError(f"TokenRequestSpec field {sub} is not read by the sandbox")


_KINDS = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _config_map,
    ("v1", "ServiceAccount"): _service_account,
    ("authentication.k8s.io/v1", "TokenRequest"): _token_request,
}


def decode(body: bytes) -> dict[str, Any]:
    """Decode a ``k8s<NUL>``-framed protobuf object into its JSON form.

    Raises:
        ProtobufError: malformed framing or message.
        UnsupportedKindError: a kind or field outside what the sandbox reads.
    """
    if not body.startswith(_MAGIC):  # not Kubernetes protobuf at all: refused like any other media type
        raise UnsupportedKindError("the body does not start with the k8s protobuf magic")
    envelope = {number: value for number, _, value in fields(body[len(_MAGIC) :])}
    type_meta = {number: value for number, _, value in fields(_message(envelope.get(1, b"")))}
    api_version, kind = _text(type_meta.get(1, b"")), _text(type_meta.get(2, b""))
    if _text(envelope.get(3, b"")):
        raise UnsupportedKindError("compressed protobuf bodies are not read by the sandbox")
    reader = _KINDS.get((api_version, kind))
    if reader is None:
        raise UnsupportedKindError(f"protobuf bodies of {api_version}/{kind} are not read by the sandbox")
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {}}
    for number, _, value in fields(_message(envelope.get(2, b""))):
        if number == 1:
            obj["metadata"] = _object_meta(_message(value))
        else:
            reader(number, value, obj)
    return obj
