from __future__ import annotations

import threading

import pytest

from kubectl_gpushare.node.fake_backend import FakeBackend, FakeSpecError, fake_uuid, parse_fake_gpus
from kubectl_gpushare.node.gpus import BackendError, HealthEvent

GIB = 1 << 30


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("4x80GiB", [80 * GIB] * 4),
        ("2x16GiB,1x24GiB", [16 * GIB, 16 * GIB, 24 * GIB]),
        ("24GiB", [24 * GIB]),
        ("1x15109MiB", [15109 << 20]),
        (" 2 x 16Gi ", [16 * GIB] * 2),
    ],
    ids=["homogeneous", "heterogeneous", "no-count", "mib", "spaces-and-k8s-suffix"],
)
def test_parse_fake_gpus_reads_counts_and_sizes(spec: str, expected: list[int]) -> None:
    assert [memory for memory, _ in parse_fake_gpus(spec)] == expected


def test_parse_fake_gpus_takes_a_model_name() -> None:
    assert parse_fake_gpus("2x80GiB:NVIDIA H100 80GB HBM3") == [(80 * GIB, "NVIDIA H100 80GB HBM3")] * 2


@pytest.mark.parametrize("spec", ["", "4x", "x80GiB", "4x80", "0x16GiB", "4x0GiB", "4x80TiB", "65x1GiB", "a,b",
                                  "99999999999x1GiB", "60x1GiB,5x1GiB", f"1x{'9' * 5000}GiB"])
def test_parse_fake_gpus_rejects_bad_specs_with_the_expected_form(spec: str) -> None:
    with pytest.raises(FakeSpecError, match="fake-gpus"):
        parse_fake_gpus(spec)


@pytest.mark.parametrize("spec", ["x" * 5000, "0x1GiB:" + "m" * 5000, "1x" + "9" * 5000 + "GiB"])
def test_parse_fake_gpus_names_a_hostile_group_without_echoing_it_whole(spec: str) -> None:
    with pytest.raises(FakeSpecError) as raised:
        parse_fake_gpus(spec)
    assert len(str(raised.value)) < 200


def test_fake_uuids_are_stable_per_node_and_distinct_across_nodes() -> None:
    assert fake_uuid("a", 0) == fake_uuid("a", 0)
    assert len({fake_uuid("a", 0), fake_uuid("a", 1), fake_uuid("b", 0)}) == 3
    assert len(fake_uuid("a", 0)) == 40 and fake_uuid("a", 0).startswith("GPU-")


def test_from_spec_wraps_spec_errors_as_backend_errors() -> None:
    with pytest.raises(BackendError, match="expected"):
        FakeBackend.from_spec("lots")


def test_injected_events_reach_the_sink_and_application_xids_do_not() -> None:
    backend = FakeBackend.from_spec("2x16GiB", seed="n")
    events: list[HealthEvent] = []
    got = threading.Event()
    stop = threading.Event()

    def sink(event: HealthEvent) -> None:
        events.append(event)
        if len(events) == 2:
            got.set()

    thread = threading.Thread(target=backend.watch_health, args=(stop, sink))
    thread.start()
    try:
        assert not backend.inject_xid(1, 43)
        assert backend.inject_xid(1, 79)
        removed = backend.remove_gpu(0)
        assert got.wait(5)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert events[0] == HealthEvent(fake_uuid("n", 1), healthy=False, reason="Xid 79")
    assert events[1].removed and events[1].uuid == removed.uuid
    assert [g.index for g in backend.devices()] == [1]
