"""Scenario tests for the ledger: the counting rules every component shares."""

from __future__ import annotations

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.ledger import PENDING, Ledger, NodeRecord, PodRecord


def node(name: str = "n1", gpus: int = 2, mem: int = 16, **kw: object) -> NodeRecord:
    """A node with ``gpus`` GPUs of ``mem`` units each, capacity equal to allocatable."""
    fields: dict = {"alloc_mem": gpus * mem, "alloc_count": gpus, "cap_mem": gpus * mem, "cap_count": gpus}
    fields.update(kw)
    return NodeRecord(name=name, **fields)


_uids = iter(range(1_000_000))


def pod(mem: int, gpu: int = PENDING, node_name: str = "n1", phase: str = "Running", **kw: object) -> PodRecord:
    """A pod requesting ``mem`` units, placed on ``gpu`` (or pending)."""
    uid = str(kw.pop("uid", f"uid-{next(_uids)}"))
    name = str(kw.pop("name", f"pod-{uid}"))
    return PodRecord(
        uid=uid, namespace=str(kw.pop("namespace", "default")), name=name, node=node_name, phase=phase,
        request=mem, container_requests=(mem,), gpu_index=gpu, **kw,  # type: ignore[arg-type]
    )


def test_usage_splits_pods_per_gpu_and_pending() -> None:
    ledger = Ledger.build([node()], [pod(2, 0), pod(3, 1), pod(1)])
    usage = ledger.usage("n1")
    assert [(d.index, d.total, d.used) for d in usage.devices.values()] == [(0, 16, 2), (1, 16, 3), (PENDING, 16, 1)]
    assert usage.used == 6


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_completed_pods_do_not_count(phase: str) -> None:
    ledger = Ledger.build([node()], [pod(4, 0, phase=phase)])
    assert ledger.free("n1") == {0: 16, 1: 16}


@pytest.mark.parametrize("phase", ["Pending", "Running", "Unknown", ""])
def test_active_unknown_and_terminating_pods_count(phase: str) -> None:
    ledger = Ledger.build([node()], [pod(4, 0, phase=phase, terminating=True)])
    assert ledger.free("n1")[0] == 12


def test_unscheduled_and_zero_request_pods_do_not_count() -> None:
    ledger = Ledger.build([node()], [pod(4, 0, node_name=""), pod(0, 1)])
    assert ledger.free("n1") == {0: 16, 1: 16}


def test_gpushare2_allocation_spreads_one_pod_over_gpus() -> None:
    ledger = Ledger.build([node()], [pod(8, allocation=((0, 4), (1, 4)))])
    assert ledger.used("n1") == {0: 4, 1: 4}


def test_index_change_moves_the_pod_instead_of_counting_it_twice() -> None:
    ledger = Ledger.build([node()], [pod(4, 0, uid="a")])
    ledger.set_pod(pod(4, 1, uid="a"))
    assert ledger.used("n1") == {1: 4}


def test_completion_frees_memory_and_removal_is_idempotent() -> None:
    ledger = Ledger.build([node()], [pod(4, 0, uid="a")])
    ledger.set_pod(pod(4, 0, uid="a", phase="Succeeded"))
    assert ledger.used("n1") == {}
    ledger.remove_pod("a")
    ledger.remove_pod("a")
    assert ledger.used("n1") == {}


def test_per_gpu_total_is_integer_division_of_the_basis() -> None:
    ledger = Ledger.build([NodeRecord("n1", alloc_mem=31, alloc_count=2, cap_mem=40, cap_count=2)], [])
    assert ledger.gpu_totals("n1") == (15, 15)
    assert Ledger.build([ledger.node("n1")], [], basis="capacity").gpu_totals("n1") == (20, 20)  # type: ignore[list-item]


def test_heterogeneous_gpus_use_published_per_gpu_memory() -> None:
    ledger = Ledger.build([node(gpus=2, mem=16, gpu_mems=(24, 8))], [])
    assert ledger.gpu_totals("n1") == (24, 8)


def test_published_memory_with_the_wrong_count_is_ignored() -> None:
    ledger = Ledger.build([node(gpus=2, mem=16, gpu_mems=(24,))], [])
    assert ledger.gpu_totals("n1") == (16, 16)


def test_capacity_change_takes_effect_at_once() -> None:
    ledger = Ledger.build([node(gpus=1, mem=16)], [pod(10, 0)], basis="capacity")
    ledger.set_node(node(gpus=2, mem=16))
    assert ledger.free("n1") == {0: 6, 1: 16}


def test_pods_beyond_the_gpu_count_are_shown_on_their_own_device() -> None:
    ledger = Ledger.build([node(gpus=1)], [pod(3, 4)])
    assert [(d.index, d.total, d.used) for d in ledger.usage("n1").devices.values()] == [(0, 16, 0), (4, 16, 3)]


def test_pods_on_a_device_are_in_api_order() -> None:
    ledger = Ledger.build([node()], [pod(1, 0, name="b"), pod(1, 0, name="a", namespace="z"), pod(1, 0, name="a")])
    names = [(p.namespace, p.name) for p, _ in ledger.usage("n1").devices[0].pods]
    assert names == [("default", "a"), ("default", "b"), ("z", "a")]


@pytest.mark.parametrize(
    ("request_mem", "expected"),
    [
        (5, None),
        (12, None),
        (13, protocol.REASON_INSUFFICIENT),
        (0, protocol.REASON_INSUFFICIENT),
    ],
)
def test_fits_uses_a_single_gpu_and_the_original_reasons(request_mem: int, expected: str | None) -> None:
    ledger = Ledger.build([node()], [pod(4, 0), pod(6, 1)])
    assert ledger.fits("n1", request_mem) == expected


def test_fits_names_unknown_and_non_gpu_nodes() -> None:
    ledger = Ledger.build([NodeRecord("cpu")], [])
    assert ledger.fits("cpu", 1) == "The node cpu is not for GPU share, need skip"
    assert ledger.fits("ghost", 1) == 'node "ghost" not found'


def test_binpack_partially_used_node_prefers_fullest_gpu_that_fits() -> None:
    ledger = Ledger.build([node(gpus=3)], [pod(4, 0), pod(10, 1), pod(14, 2)])
    assert ledger.choose_gpu("n1", 6) == 1
    assert ledger.choose_gpu("n1", 7) == 0


def test_binpack_ties_go_to_the_lowest_index() -> None:
    assert Ledger.build([node(gpus=4)], []).choose_gpu("n1", 1) == 0


def test_spread_prefers_the_emptiest_gpu() -> None:
    ledger = Ledger.build([node(gpus=3)], [pod(4, 0), pod(1, 2)])
    assert ledger.choose_gpu("n1", 2, "spread") == 1


def test_unhealthy_gpus_are_never_chosen() -> None:
    ledger = Ledger.build([node(gpus=2, unhealthy=frozenset({0}))], [pod(10, 1)])
    assert ledger.choose_gpu("n1", 2) == 1
    assert ledger.fits("n1", 8) == protocol.REASON_INSUFFICIENT


def test_reservation_counts_until_the_bound_pod_replaces_it() -> None:
    ledger = Ledger.build([node(gpus=1)], [])
    ledger.reserve("a", "default", "p", "n1", 0, 10)
    assert ledger.free("n1") == {0: 6}
    ledger.set_pod(pod(10, 0, uid="a", node_name=""))  # annotated, not yet bound: still reserved
    assert ledger.free("n1") == {0: 6} and ledger.is_reserved("a")
    ledger.set_pod(pod(10, 0, uid="a"))
    assert ledger.free("n1") == {0: 6} and not ledger.is_reserved("a")


def test_release_undoes_a_reservation() -> None:
    ledger = Ledger.build([node(gpus=1)], [])
    ledger.reserve("a", "default", "p", "n1", 0, 10)
    ledger.release("a")
    assert ledger.free("n1") == {0: 16}


def test_reservations_show_in_usage() -> None:
    ledger = Ledger.build([node(gpus=1)], [])
    ledger.reserve("a", "default", "p", "n1", 0, 3)
    assert ledger.usage("n1").devices[0].used == 3


@pytest.mark.parametrize(
    ("policy", "expected_order"),
    [("binpack", ["full", "empty"]), ("spread", ["empty", "full"])],
)
def test_score_ranks_nodes_by_policy(policy: str, expected_order: list[str]) -> None:
    ledger = Ledger.build([node("full", gpus=1), node("empty", gpus=1)], [pod(10, 0, node_name="full")])
    ranked = sorted(["empty", "full"], key=lambda n: -ledger.score(n, 2, policy))  # type: ignore[arg-type]
    assert ranked == expected_order
    assert all(0 <= ledger.score(n, 2, policy) <= 10 for n in ranked)  # type: ignore[arg-type]


def test_score_is_zero_where_the_pod_does_not_fit() -> None:
    ledger = Ledger.build([node(gpus=1)], [pod(16, 0)])
    assert ledger.score("n1", 1) == 0


# --- invalid claims never credit free memory (defence in depth below kube.records) -------------------


@pytest.mark.parametrize(
    ("allocation", "expected_used"),
    [
        (((0, -400),), {0: 10}),
        (((0, 0),), {0: 10}),
        (((0, 4), (1, -4)), {0: 4}),
        (((-5, 4),), {PENDING: 4}),
        (((protocol.MAX_GPUS_PER_NODE, 4),), {PENDING: 4}),
    ],
    ids=["negative", "zero", "one-negative-share", "negative-index", "index-beyond-max"],
)
def test_non_positive_shares_and_impossible_indices_are_never_counted(
    allocation: tuple[tuple[int, int], ...], expected_used: dict[int, int]
) -> None:
    ledger = Ledger.build([node()], [pod(10, 0, allocation=allocation)])
    assert ledger.used("n1") == expected_used
    assert all(free <= 16 for free in ledger.free("n1").values())
    assert all(device.used >= 0 for device in ledger.usage("n1").devices.values())


def test_the_issue_scenario_cannot_overcommit_a_gpu() -> None:
    # {"0":{"0":-400}} on one pod once let five 10 GiB pods onto a 16 GiB GPU.
    ledger = Ledger.build([node(gpus=1)], [pod(1, 0, allocation=((0, -400),))], basis="capacity")
    placed = 0
    for uid in range(5):
        gpu = ledger.choose_gpu("n1", 10)
        if gpu is not None:
            ledger.reserve(f"r{uid}", "default", f"r{uid}", "n1", gpu, 10)
            placed += 1
    assert placed == 1


def test_index_beyond_the_node_count_stays_on_its_phantom_device() -> None:
    ledger = Ledger.build([node(gpus=2)], [pod(4, 5)])
    assert ledger.free("n1") == {0: 16, 1: 16}, "a phantom device never frees a real GPU"
    assert ledger.usage("n1").devices[5].used == 4


@pytest.mark.parametrize("count", [-1, protocol.MAX_GPUS_PER_NODE + 1, 10**8])
def test_gpu_count_outside_the_bound_means_no_gpus(count: int) -> None:
    ledger = Ledger.build([NodeRecord(name="n1", alloc_mem=16, alloc_count=count, cap_mem=16, cap_count=count)], [])
    assert ledger.gpu_totals("n1") == ()
    assert ledger.usage("n1").gpu_count == 0


def test_negative_per_gpu_memory_is_ignored() -> None:
    ledger = Ledger.build([node(gpus=2, mem=8, gpu_mems=(-100, 116))], [])
    assert ledger.gpu_totals("n1") == (8, 8)


def test_reserving_no_memory_records_nothing() -> None:
    ledger = Ledger.build([node()], [])
    ledger.reserve("u", "default", "p", "n1", 0, -10)
    assert not ledger.is_reserved("u")
    assert ledger.free("n1") == {0: 16, 1: 16}


def test_fit_counts_and_largest_free_skip_unhealthy_gpus() -> None:
    ledger = Ledger.build([node(gpus=3, unhealthy=frozenset({2}))], [pod(10, gpu=0), pod(3, gpu=1)])
    assert ledger.fit_counts("n1", 4) == {0: 1, 1: 3}
    assert ledger.fit_counts("n1", 7) == {1: 1}
    assert ledger.fit_counts("n1", 0) == {}
    assert ledger.largest_free("n1") == 13
    assert ledger.largest_free("missing") == 0


def test_largest_free_is_never_negative_on_an_overcommitted_gpu() -> None:
    ledger = Ledger.build([node(gpus=1)], [pod(20, gpu=0)])
    assert ledger.largest_free("n1") == 0 and ledger.fit_counts("n1", 1) == {}


def test_a_ledger_of_sums_counts_a_uid_once_and_refuses_to_list_or_remove_pods() -> None:
    node = NodeRecord(name="n", alloc_mem=32, alloc_count=2)
    first = PodRecord(uid="u", namespace="ns", name="a", node="n", phase="Running", request=4, gpu_index=0)
    again = PodRecord(uid="u", namespace="ns", name="a", node="n", phase="Running", request=9, gpu_index=1)
    ledger = Ledger.build([node], [first, again], keep_pods=False)
    assert ledger.used("n") == {0: 4}  # the first copy counts; a sums ledger cannot take it back
    with pytest.raises(RuntimeError, match="sums only"):
        ledger.pods_on("n")
    with pytest.raises(RuntimeError, match="sums only"):
        ledger.usage("n")
    with pytest.raises(RuntimeError, match="cannot remove"):
        ledger.remove_pod("u")
    ledger.remove_pod("never-counted")  # nothing to take back: allowed
    ledger.reserve("r", "ns", "r", "n", 1, 3)
    ledger.release("r")
    assert ledger.used("n") == {0: 4}


def test_in_unit_converts_a_node_counting_in_another_unit_rounding_down() -> None:
    ledger = Ledger.build([NodeRecord("mib", unit=protocol.UNIT_MIB), NodeRecord("gib", unit=protocol.UNIT_GIB),
                           NodeRecord("plain")], [])
    assert ledger.in_unit("mib", protocol.UNIT_GIB)(3 * 1024 + 1023) == 3
    assert ledger.in_unit("gib", protocol.UNIT_MIB)(2) == 2048
    assert ledger.in_unit("gib", protocol.UNIT_GIB)(7) == 7
    assert ledger.in_unit("plain", protocol.UNIT_MIB)(7) == 7
    assert ledger.in_unit("unknown", protocol.UNIT_MIB)(7) == 7
