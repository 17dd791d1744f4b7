"""Hostile pods and nodes: invalid claims never credit free memory, each problem is warned once."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import records, types
from kubectl_gpushare.ledger import Ledger


def pod(limits: list[str], annotations: dict[str, str], name: str = "p") -> types.Pod:
    containers = [
        {"name": f"c{i}", "resources": {"limits": {protocol.RESOURCE_MEM: mem}}} for i, mem in enumerate(limits)
    ]
    body = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"nodeName": "n1", "containers": containers},
        "status": {"phase": "Running"},
    }
    return types.POD_DECODER.decode(json.dumps(body).encode())


def node(count: str, mem: str = "16", annotation: str | None = None) -> types.Node:
    meta: dict[str, Any] = {"name": "n1"}
    if annotation is not None:
        meta["annotations"] = {protocol.ANN_NODE_GPUS: annotation}
    resources = {protocol.RESOURCE_MEM: mem, protocol.RESOURCE_COUNT: count}
    body = {"metadata": meta, "status": {"allocatable": resources, "capacity": resources}}
    return types.NODE_DECODER.decode(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("allocation", "idx", "shares"),
    [
        ('{"0":{"0":-400}}', "0", {0: 10}),
        ('{"0":{"0":0}}', "1", {1: 10}),
        ('{"0":{"0":4,"1":-4}}', "1", {1: 10}),
        ('{"0":{"0":1.5}}', "0", {0: 10}),
        ('{"0":{"99":10}}', "0", {0: 10}),
        ('{"0":{"0":-400}}', None, {-1: 10}),
        ('{"0":{"0":-400}}', "99", {-1: 10}),
        ('{"0":' * 100_000 + "1" + "}" * 100_000, "0", {0: 10}),
    ],
    ids=["negative", "zero", "one-bad-entry", "float", "gpu-beyond-64", "no-idx", "idx-beyond-64", "deep"],
)
def test_invalid_allocation_counts_the_limits_on_the_index_gpu_or_pending(
    allocation: str, idx: str | None, shares: dict[int, int]
) -> None:
    annotations = {protocol.ANN_ALLOCATION: allocation}
    if idx is not None:
        annotations[protocol.ANN_IDX] = idx
    warnings = records.Warnings()
    rec = records.pod_record(pod(["10"], annotations), warnings)
    assert rec.allocation is None
    ledger = Ledger.build([records.node_record(node("2"))], [rec])
    assert {index: device.used for index, device in ledger.usage("n1").devices.items() if device.used} == shares
    assert all(free <= 8 for free in ledger.free("n1").values())
    assert any(protocol.ANN_ALLOCATION in message for message in warnings.messages)
    assert all(len(message) < 300 for message in warnings.messages)


def test_the_issue_scenario_never_inflates_a_gpu() -> None:
    # One pod claiming -400 on GPU 0 once made inspect show -400/16 and let five 10 GiB pods onto 16 GiB.
    hostile = pod(["1"], {protocol.ANN_IDX: "0", protocol.ANN_ALLOCATION: '{"0":{"0":-400}}'})
    ledger = Ledger.build([records.node_record(node("1"))], [records.pod_record(hostile)], basis="capacity")
    assert ledger.free("n1") == {0: 15}
    assert ledger.choose_gpu("n1", 10) == 0
    ledger.reserve("a", "default", "a", "n1", 0, 10)
    assert ledger.choose_gpu("n1", 10) is None


@pytest.mark.parametrize(
    ("limit", "counted"),
    [("-4", 0), ("1e999999", 0), ("1e9999999", 0), ("1e-9999999", 1), ("9" * 5000, 0), ("2000000000000", 0)],
    ids=["negative", "1e999999", "1e9999999", "1e-9999999", "5000-digits", "beyond-max-gpu-memory"],
)
def test_negative_or_absurd_limits_count_zero_quickly_and_warn(limit: str, counted: int) -> None:
    warnings = records.Warnings()
    start = time.perf_counter()
    rec = records.pod_record(pod([limit, "2"], {protocol.ANN_IDX: "0"}), warnings)
    assert time.perf_counter() - start < 0.5
    assert rec.container_requests == (counted, 2)
    assert rec.request == counted + 2
    assert bool(warnings) is (counted == 0)
    assert all(len(message) < 300 for message in warnings.messages)


@pytest.mark.parametrize("idx", ["9" * 5000, "64", "-2", "1e3"], ids=["5000-digits", "64", "-2", "float"])
def test_gpu_index_outside_what_a_node_can_have_is_pending_and_warned(idx: str) -> None:
    warnings = records.Warnings()
    rec = records.pod_record(pod(["2"], {protocol.ANN_IDX: idx}), warnings)
    assert rec.gpu_index == -1
    (message,) = warnings.messages
    assert "is not a GPU index in [0, 64)" in message
    assert len(message) < 300


def test_index_minus_one_is_plain_pending_without_a_warning() -> None:
    warnings = records.Warnings()
    assert records.pod_record(pod(["2"], {protocol.ANN_IDX: "-1"}), warnings).gpu_index == -1
    assert not warnings


@pytest.mark.parametrize(
    ("count", "expected"),
    [("64", 64), ("65", 0), ("1e8", 0), ("1e7", 0), ("-1", 0), ("1e99999999", 0), ("0", 0)],
)
def test_gpu_count_outside_0_to_64_leaves_the_node_without_gpus(count: str, expected: int) -> None:
    warnings = records.Warnings()
    start = time.perf_counter()
    rec = records.node_record(node(count, mem="64"), warnings=warnings)
    ledger = Ledger.build([rec], [])
    assert (rec.alloc_count, rec.cap_count) == (expected, expected)
    assert len(ledger.gpu_totals("n1")) == expected
    assert time.perf_counter() - start < 0.5
    assert bool(warnings) is (count not in ("64", "0"))


def test_node_gpus_annotation_beyond_bounds_is_ignored_with_a_warning() -> None:
    text = "[" + ",".join(f'{{"index":{i},"memory":1}}' for i in range(65)) + "]"
    warnings = records.Warnings()
    rec = records.node_record(node("2", annotation=text), warnings=warnings)
    assert rec.gpu_mems is None
    assert len(warnings) == 1


@pytest.mark.parametrize(("version", "shown"), [(2, "version 2,"), (10**30, "version 100000000000...,")])
def test_node_gpus_of_a_newer_version_count_no_memory_and_say_why_in_one_warning(version: int, shown: str) -> None:
    text = f'[{{"index":0,"memory":16,"version":{version}}},{{"index":1,"memory":16,"version":{version}}}]'
    warnings = records.Warnings()
    for _ in range(3):  # every read of the node says the same: one message, however often it is read
        rec = records.node_record(node("2", "32", annotation=text), warnings=warnings)
        assert rec.gpu_mems == (0, 0)
    (message,) = warnings.messages
    assert warnings.count(message) == 3
    assert message.startswith(f"node n1: annotation {protocol.ANN_NODE_GPUS} is {shown} newer than version 1")
    assert "no free memory" in message and len(message) < 300


def test_distinct_hostile_values_are_not_held_after_their_pods_are_gone() -> None:
    # Caches keyed by annotation or quantity text would keep every distinct hostile value alive.
    import gc
    import tracemalloc

    def garbage(number: int) -> str:
        return f"{number:08d}" + "x" * 100_000

    records.pod_record(pod([garbage(0)], {protocol.ANN_IDX: garbage(0)}))  # warm up lazily built state
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(1, 60):
            records.pod_record(pod([garbage(number)], {protocol.ANN_IDX: garbage(number)}), records.Warnings())
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1_000_000, f"{held:,} bytes still held after 59 pods with 200 kB of garbage each"
