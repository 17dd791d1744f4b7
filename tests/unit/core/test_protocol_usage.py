"""The usage document's decoder and the node annotation's enforcement keys: bounded, hostile input refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubectl_gpushare import protocol

GIB = 1 << 30


def _doc(**changes: object) -> bytes:
    body: dict[str, object] = {
        "apiVersion": protocol.USAGE_API_VERSION, "kind": protocol.USAGE_KIND, "node": "n1",
        "sampledAt": "2026-01-01T00:00:00Z", "intervalSeconds": 10, "source": "processes",
        "gpus": [{"index": 0, "uuid": "GPU-0", "totalBytes": 16 * GIB, "allocatedBytes": GIB, "usedBytes": GIB,
                  "enforcement": "hard", "reason": "", "future": {"fields": "are ignored"}}],
        "pods": [{"namespace": "a", "name": "p", "uid": "u", "gpu": 0, "allocatedBytes": GIB}],
    }  # fmt: skip
    body.update(changes)
    return json.dumps(body).encode()


def test_a_document_decodes_and_round_trips() -> None:
    report = protocol.decode_usage_report(_doc())
    assert report.gpus[0].enforcement == protocol.ENFORCE_HARD and report.pods[0].used_bytes is None
    assert protocol.decode_usage_report(protocol.encode_usage_report(report)) == report


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"gpus": [{"index": 0, "uuid": "a", "totalBytes": 1, "allocatedBytes": 0}] * 2}, "twice"),
        ({"intervalSeconds": -1}, "interval"),
        ({"node": "n" * 300}, "node name"),
        ({"gpus": [{"index": 64, "uuid": "a", "totalBytes": 1, "allocatedBytes": 0}]}, "out of range"),
        ({"gpus": [{"index": 0, "uuid": "a", "totalBytes": 1, "allocatedBytes": 0, "enforcement": "max"}]}, "range"),
        ({"gpus": [{"index": 0, "uuid": "a", "totalBytes": 1, "allocatedBytes": 0, "reason": "x" * 5000}]}, "range"),
        ({"pods": [{"namespace": "a", "name": "p", "uid": "u", "gpu": 0, "allocatedBytes": -1}]}, "pod entry"),
        ({"kind": "Other"}, "unknown version"),
        ({"pods": "not a list"}, "usage document"),
    ],
)
def test_out_of_range_documents_are_refused(changes: dict[str, object], words: str) -> None:
    with pytest.raises(protocol.AnnotationError, match=words):
        protocol.decode_usage_report(_doc(**changes))


@given(st.binary(max_size=512))
def test_any_bytes_decode_or_raise_the_one_error(data: bytes) -> None:
    try:
        protocol.decode_usage_report(data)
    except protocol.AnnotationError:
        pass


def test_enforcement_keys_of_the_node_annotation() -> None:
    text = json.dumps([
        {"index": 0, "memory": 16, "enforcement": "hard"},
        {"index": 1, "memory": 16, "enforcement": "off", "enforcementReason": "MIG\x1b[2J enabled " + "x" * 500},
        {"index": 2, "memory": 16},
        {"index": 3, "memory": 16, "enforcement": "maybe"},
        {"index": 4, "memory": 16, "enforcement": "soft", "enforcementReason": 7},
        {"index": -1, "memory": 16, "enforcement": "hard"},
    ])  # fmt: skip
    found = protocol.parse_node_gpu_enforcement(text)
    assert sorted(found) == [0, 1]
    assert found[0] == protocol.GpuEnforcement("hard", "")
    assert found[1].mode == "off" and found[1].reason.startswith("MIG [2J enabled x")
    assert len(found[1].reason) <= protocol.MAX_ENFORCEMENT_REASON


@pytest.mark.parametrize("text", [None, "", "{", "[[]]", json.dumps({"index": 0}), "[" * 10_000, "x" * 100_000])
def test_a_malformed_annotation_says_nothing(text: str | None) -> None:
    assert protocol.parse_node_gpu_enforcement(text) == {}


def _entry(uid: str, used: int | None, limit: int | None, name: str = "web-0") -> protocol.UsagePod:
    return protocol.UsagePod("ns", name, uid, 0, 4 << 30, used, limit)


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([_entry("u1", 3, 8)], protocol.PodUsage(3, 8)),
        ([_entry("u1", 3, 8), _entry("u2", 1, 6)], protocol.PodUsage(4, 14)),
        ([_entry("u1", None, None), _entry("u2", 1, 6)], protocol.PodUsage(None, None)),
        ([_entry("u1", 1, 6), _entry("u2", None, None)], protocol.PodUsage(None, None)),
        ([_entry("u1", 1, None), _entry("u2", 2, 6)], protocol.PodUsage(3, None)),
        ([_entry("u1", 1, 6), _entry("u2", 2, None)], protocol.PodUsage(3, None)),
        ([_entry("u1", protocol.MAX_INT64, protocol.MAX_INT64), _entry("u2", 1, 1)],
         protocol.PodUsage(protocol.MAX_INT64, protocol.MAX_INT64)),
    ],
    ids=["one", "summed", "unknown-first", "unknown-second", "limit-unknown-first", "limit-unknown-second", "capped"],
)
def test_pod_usage_by_name_merges_entries_of_one_name(entries: list[protocol.UsagePod],
                                                      expected: protocol.PodUsage) -> None:
    other = _entry("u9", 5, 5, name="web-1")
    assert protocol.pod_usage_by_name([*entries, other]) == {
        ("ns", "web-0", 0): expected, ("ns", "web-1", 0): protocol.PodUsage(5, 5),
    }
