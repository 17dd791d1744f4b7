"""The protobuf bodies kubectl 1.32 sends for typed creates: decoded, or refused with 400/415, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.sandbox import protobuf


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | 2) + varint(len(data)) + data


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return b"k8s\x00" + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def test_a_namespace_with_labels_decodes() -> None:
    meta = field(1, "team-a") + field(11, field(1, "tier") + field(2, "gpu")) + field(8, b"")
    body = envelope("v1", "Namespace", field(1, meta) + field(2, field(1, "kubernetes")) + field(3, b""))
    assert protobuf.decode(body) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"tier": "gpu"}},
        "spec": {"finalizers": ["kubernetes"]},
    }


def test_a_config_map_decodes() -> None:
    body = envelope("v1", "ConfigMap", field(1, field(1, "cm")) + field(2, field(1, "k") + field(2, "v")))
    assert protobuf.decode(body)["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{}", protobuf.UnsupportedKindError),
        (b"k8s\x00" + b"\x0a\xff\xff\xff\xff\x0f", protobuf.ProtobufError),
        (b"k8s\x00" + b"\x0a" + b"\x80" * 11, protobuf.ProtobufError),
        (envelope("v1", "Namespace", field(1, field(1, b"\xff\xfe"))), protobuf.ProtobufError),
        (envelope("apps/v1", "Deployment", field(1, field(1, "d"))), protobuf.UnsupportedKindError),
        (envelope("v1", "Namespace", field(1, field(99, "x"))), protobuf.UnsupportedKindError),
        (envelope("v1", "ConfigMap", field(3, field(1, "k") + field(2, b"\x00"))), protobuf.UnsupportedKindError),
    ],
)
def test_malformed_and_unsupported_bodies_are_told_apart(body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        protobuf.decode(body)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_escape_as_anything_but_the_two_errors(tail: bytes) -> None:
    try:
        protobuf.decode(b"k8s\x00" + tail)
    except (protobuf.ProtobufError, protobuf.UnsupportedKindError):
        pass


def test_the_openapi_v2_document_parses_back_and_names_every_served_kind() -> None:
    from kubectl_gpushare.sandbox import discovery
    from kubectl_gpushare.sandbox.resources import STORED

    document = {number: value for number, _, value in protobuf.fields(discovery.openapi_v2_protobuf())}
    assert document[1] == b"2.0"
    named = [value for _, _, value in protobuf.fields(document[9])]
    names = {next(v for n, _, v in protobuf.fields(entry) if n == 1) for entry in named}  # type: ignore[arg-type]
    assert b"io.k8s.api.apps.v1.Deployment" in names and len(names) == len(STORED)
    assert set(discovery.openapi_v2_json()["definitions"]) == {name.decode() for name in names}  # type: ignore[union-attr]
