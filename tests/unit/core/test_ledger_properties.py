"""Property: whatever records come in, no GPU's free memory ever exceeds its total."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import protocol
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord

ints = st.one_of(st.integers(-(2**70), 2**70), st.integers(-3, 70))
nodes = st.builds(
    NodeRecord,
    name=st.sampled_from(["n1", "n2"]),
    alloc_mem=ints,
    alloc_count=ints,
    cap_mem=ints,
    cap_count=ints,
    gpu_mems=st.none() | st.lists(ints, max_size=6).map(tuple),
    unhealthy=st.frozensets(st.integers(-2, 8), max_size=3),
)
pods = st.builds(
    PodRecord,
    uid=st.text("abcdef", min_size=1, max_size=3),
    namespace=st.just("default"),
    name=st.just("p"),
    node=st.sampled_from(["n1", "n2", ""]),
    phase=st.sampled_from(["Running", "Pending", "Succeeded", ""]),
    request=ints,
    gpu_index=ints,
    allocation=st.none() | st.lists(st.tuples(ints, ints), max_size=4).map(tuple),
)
reservations = st.tuples(st.text("xyz", min_size=1, max_size=2), st.sampled_from(["n1", "n2"]), ints, ints)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(nodes, max_size=3),
    st.lists(pods, max_size=12),
    st.lists(reservations, max_size=3),
    st.sampled_from(["allocatable", "capacity"]),
)
def test_no_gpu_ever_has_more_free_memory_than_its_total(
    node_records: list[NodeRecord],
    pod_records: list[PodRecord],
    reserved: list[tuple[str, str, int, int]],
    basis: str,
) -> None:
    ledger = Ledger.build(node_records, pod_records, basis=basis)  # type: ignore[arg-type]
    for uid, name, gpu, mem in reserved:
        ledger.reserve(uid, "default", uid, name, gpu, mem)
    for name in ledger.node_names():
        totals = ledger.gpu_totals(name)
        assert len(totals) <= protocol.MAX_GPUS_PER_NODE
        for index, free in ledger.free(name).items():
            assert free <= totals[index]
        usage = ledger.usage(name)
        assert all(device.used >= 0 for device in usage.devices.values())
        assert all(all(amount > 0 for _, amount in device.pods) for device in usage.devices.values())
    # Removing everything returns every GPU to its total: updates are exact inverses.
    for record in pod_records:
        ledger.remove_pod(record.uid)
    for uid, *_ in reserved:
        ledger.release(uid)
    for name in ledger.node_names():
        assert ledger.used(name) == {}


@settings(max_examples=200, deadline=None)
@given(pods=st.lists(st.tuples(st.integers(-5, 70), st.integers(-3, 40)), max_size=12),
       reserved=st.lists(st.tuples(st.integers(-1, 3), st.integers(1, 10)), max_size=3))
def test_usage_without_pods_has_the_same_devices_and_sums(
    pods: list[tuple[int, int]], reserved: list[tuple[int, int]]
) -> None:
    node = NodeRecord(name="n", alloc_mem=32, alloc_count=2, cap_mem=32, cap_count=2)
    records = [PodRecord(uid=f"u{i}", namespace="ns", name=f"p{i}", node="n", request=mem, gpu_index=gpu)
               for i, (gpu, mem) in enumerate(pods)]
    ledger = Ledger.build([node], records)
    for i, (gpu, mem) in enumerate(reserved):
        ledger.reserve(f"r{i}", "ns", f"r{i}", "n", gpu, mem)
    full, sums = ledger.usage("n"), ledger.usage("n", pods=False)
    assert [(d.index, d.total, d.used) for d in full.devices.values()] == [
        (d.index, d.total, d.used) for d in sums.devices.values()]
    assert (full.gpu_count, full.total_mem) == (sums.gpu_count, sums.total_mem)


@settings(max_examples=200, deadline=None)
@given(st.lists(nodes, max_size=3), st.lists(pods, max_size=12), st.sampled_from(["allocatable", "capacity"]))
def test_a_ledger_of_sums_shows_what_a_full_ledger_shows(
    node_records: list[NodeRecord], pod_records: list[PodRecord], basis: str
) -> None:
    # Distinct uids, as one API list has them: then keeping records changes no number a view shows.
    distinct = list({record.uid: record for record in pod_records}.values())
    full = Ledger.build(node_records, distinct, basis=basis)  # type: ignore[arg-type]
    sums = Ledger.build(node_records, distinct, basis=basis, keep_pods=False)  # type: ignore[arg-type]
    for name in full.node_names():
        assert sums.used(name) == full.used(name)
        assert sums.free(name) == full.free(name)
        assert [(d.index, d.total, d.used) for d in sums.usage(name, pods=False).devices.values()] == [
            (d.index, d.total, d.used) for d in full.usage(name).devices.values()]
