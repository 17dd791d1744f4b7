"""The structured allocator's rules: pools, selectors, consumable capacity, taints, and the plugin's reasons."""

from __future__ import annotations

import itertools
from typing import Any, Final

import pytest
from costly_cel import NESTED_BIND
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare import protocol
from kubectl_gpushare.kube import cel
from kubectl_gpushare.kube import dra_allocation as alloc

pytestmark = pytest.mark.skipif(not cel.available(), reason=cel.INSTALL_HINT)

DRIVER = protocol.DRA_DRIVER
GIB = 2**30
CLASS = dra.decode_class({"metadata": {"name": DRIVER},
                          "spec": {"selectors": [{"cel": {"expression": protocol.DRA_DEVICE_CLASS_SELECTOR}}]}})
CLASSES = {CLASS.name: CLASS}


def gpu(index: int, gib: int = 16, *, shared: bool = True, policy: Any = "range", taints: Any = (),
        model: str = "A100") -> dict[str, Any]:
    capacity: dict[str, Any] = {"value": f"{gib}Gi"}
    if policy == "range":
        capacity["requestPolicy"] = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    elif policy is not None:
        capacity["requestPolicy"] = policy
    body: dict[str, Any] = {"name": f"gpu-{index}", "attributes": {"index": {"int": index}, "model": {"string": model}},
                            "capacity": {"memory": capacity}, "taints": list(taints)}
    if shared:
        body["allowMultipleAllocations"] = True
    else:
        body["capacity"]["memory"].pop("requestPolicy", None)
    return body


def node_slice(node: str, *devices: dict[str, Any], generation: int = 1, count: int = 1, name: str = "",
               driver: str = DRIVER) -> dra.ResourceSlice:
    return dra.decode_slice({"metadata": {"name": name or f"{node}-{generation}"},
                             "spec": {"driver": driver, "nodeName": node, "devices": list(devices),
                                      "pool": {"name": node, "generation": generation, "resourceSliceCount": count}}})


_names = itertools.count()


def claim(memory: str | None = "4Gi", *, count: int | None = None, mode: str | None = None,
          selectors: tuple[str, ...] = (), tolerations: Any = (), klass: str = DRIVER,
          name: str = "") -> dra.ResourceClaim:
    exactly: dict[str, Any] = {"deviceClassName": klass, "selectors": [{"cel": {"expression": s}} for s in selectors],
                               "tolerations": list(tolerations)}
    if memory is not None:
        exactly["capacity"] = {"requests": {"memory": memory}}
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    return dra.decode_claim({"metadata": {"name": name or f"c{next(_names)}", "namespace": "ns"},
                             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})


def share_ids() -> Any:
    counter = itertools.count()
    return lambda: f"share-{next(counter)}"


def run(node: str, claims: list[dra.ResourceClaim], slices: list[dra.ResourceSlice],
        allocated: tuple[dra.Allocation, ...] = ()) -> tuple[dra.Allocation, ...] | str:
    inventory = alloc.Inventory(slices, CLASSES, alloc.allocated_state(allocated))
    return alloc.allocate(node, claims, inventory, share_ids())


def test_shared_gpus_pack_by_consumed_memory_first_fit() -> None:
    slices = [node_slice("n1", gpu(0), gpu(1))]
    held: list[dra.Allocation] = []
    placed = []
    for _ in range(4):
        got = run("n1", [claim("6Gi")], slices, tuple(held))
        assert isinstance(got, tuple)
        held.extend(got)
        placed.append(got[0].results[0].device)
    assert placed == ["gpu-0", "gpu-0", "gpu-1", "gpu-1"]  # 16Gi each: two 6Gi claims per GPU
    result = held[0].results[0]
    assert result.share_id and result.consumed_capacity == {"memory": dra.read_quantity("6Gi")}
    assert held[0].node_name == "n1"
    assert run("n1", [claim("6Gi")], slices, tuple(held)) == alloc.REASON_CANNOT_ALLOCATE
    got = run("n1", [claim("4Gi")], slices, tuple(held))
    assert isinstance(got, tuple) and got[0].results[0].device == "gpu-0"


def test_requests_round_up_to_the_step_and_default_when_absent() -> None:
    slices = [node_slice("n1", gpu(0))]
    got = run("n1", [claim("1500Mi")], slices)
    assert isinstance(got, tuple) and got[0].results[0].consumed_capacity == {"memory": dra.read_quantity("2Gi")}
    got = run("n1", [claim(None)], slices)
    assert isinstance(got, tuple) and got[0].results[0].consumed_capacity == {"memory": dra.read_quantity("1Gi")}


def test_valid_values_round_to_the_next_and_refuse_above_the_last() -> None:
    policy = {"default": "4Gi", "validValues": ["4Gi", "8Gi", "16Gi"]}
    slices = [node_slice("n1", gpu(0, policy=policy))]
    got = run("n1", [claim("5Gi")], slices)
    assert isinstance(got, tuple) and got[0].results[0].consumed_capacity == {"memory": dra.read_quantity("8Gi")}
    assert run("n1", [claim("17Gi")], slices) == alloc.REASON_CANNOT_ALLOCATE


def test_a_range_max_refuses_larger_requests() -> None:
    policy = {"default": "1Gi", "validRange": {"min": "1Gi", "max": "8Gi", "step": "1Gi"}}
    slices = [node_slice("n1", gpu(0, policy=policy))]
    assert run("n1", [claim("9Gi")], slices) == alloc.REASON_CANNOT_ALLOCATE
    assert isinstance(run("n1", [claim("8Gi")], slices), tuple)


def test_an_exclusive_device_is_held_whole_and_records_no_consumption() -> None:
    slices = [node_slice("n1", gpu(0, shared=False))]
    first = run("n1", [claim(None)], slices)
    assert isinstance(first, tuple) and first[0].results[0].share_id == ""
    assert first[0].results[0].consumed_capacity is None
    assert run("n1", [claim(None)], slices, first) == alloc.REASON_CANNOT_ALLOCATE
    assert run("n1", [claim("32Gi")], slices) == alloc.REASON_CANNOT_ALLOCATE  # larger than the device


def test_selectors_of_class_and_claim_both_apply() -> None:
    slices = [node_slice("n1", gpu(0, model="T4"), gpu(1, model="A100"))]
    selector = f'device.attributes["{DRIVER}"].model == "A100"'
    got = run("n1", [claim(selectors=(selector,))], slices)
    assert isinstance(got, tuple) and got[0].results[0].device == "gpu-1"
    other_driver = node_slice("n1", gpu(5), driver="other.example.com", name="other")
    assert run("n1", [claim()], [other_driver]) == alloc.REASON_CANNOT_ALLOCATE  # the class wants our driver
    unknown_domain = 'device.attributes["nvidia.com"].?model.orValue("") == "x"'
    assert run("n1", [claim(selectors=(unknown_domain,))], slices) == alloc.REASON_CANNOT_ALLOCATE


def test_capacity_selectors_see_quantities_by_value() -> None:
    slices = [node_slice("n1", gpu(0, 8), gpu(1, 80))]
    selector = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    got = run("n1", [claim(selectors=(selector,))], slices)
    assert isinstance(got, tuple) and got[0].results[0].device == "gpu-1"


@pytest.mark.parametrize(("selector", "message"), [
    ("device.attributes[", "selector #0: CEL compile error"),
    (NESTED_BIND, "selector #0: CEL compile error: too complex, exceeds cost limit"),
    ("device.nothing == 1", "CEL runtime error"),
    ("1 + 1", "must evaluate to bool"),
])
def test_a_bad_selector_is_an_error_naming_the_claim(selector: str, message: str) -> None:
    bad = claim(selectors=(selector,))
    with pytest.raises(alloc.AllocationError, match=message) as raised:
        run("n1", [bad], [node_slice("n1", gpu(0))])
    assert bad.key in str(raised.value) and "\n" not in str(raised.value)


def test_a_device_without_capacities_is_allocated_whole() -> None:
    """Most drivers' devices publish attributes only: `capacity_fit` gives {} (fits, consumes nothing), not None."""
    plain = {"name": "fpga-0", "attributes": {"index": {"int": 0}}}
    slices = [node_slice("n1", plain, dict(plain, name="fpga-1"))]
    got = run("n1", [claim(None)], slices)
    assert isinstance(got, tuple) and [r.device for r in got[0].results] == ["fpga-0"]
    assert got[0].results[0].consumed_capacity is None
    every = run("n1", [claim(None, mode="All")], slices)
    assert isinstance(every, tuple) and [r.device for r in every[0].results] == ["fpga-0", "fpga-1"]
    assert run("n1", [claim(None, count=2)], slices, every) == alloc.REASON_CANNOT_ALLOCATE


def test_count_and_all_modes() -> None:
    slices = [node_slice("n1", gpu(0, shared=False), gpu(1, shared=False), gpu(2, shared=False))]
    got = run("n1", [claim(None, count=2)], slices)
    assert isinstance(got, tuple) and [r.device for r in got[0].results] == ["gpu-0", "gpu-1"]
    got = run("n1", [claim(None, mode="All")], slices)
    assert isinstance(got, tuple) and len(got[0].results) == 3
    assert run("n1", [claim(None, count=4)], slices) == alloc.REASON_CANNOT_ALLOCATE
    assert run("n1", [claim(None, mode="All")], slices, got) == alloc.REASON_CANNOT_ALLOCATE
    assert run("n2", [claim(None, mode="All")], slices) == alloc.REASON_CANNOT_ALLOCATE
    with pytest.raises(alloc.AllocationError, match="exceeds the claim limit of 32"):
        run("n1", [claim(None, count=33)], slices)


def test_two_claims_of_one_pod_share_the_search() -> None:
    slices = [node_slice("n1", gpu(0, shared=False), gpu(1, shared=False))]
    got = run("n1", [claim(None), claim(None)], slices)
    assert isinstance(got, tuple) and [a.results[0].device for a in got] == ["gpu-0", "gpu-1"]
    assert run("n1", [claim(None), claim(None), claim(None)], slices) == alloc.REASON_CANNOT_ALLOCATE


def test_taints_block_unless_tolerated() -> None:
    taint = {"key": f"{DRIVER}/unhealthy", "value": "xid", "effect": "NoSchedule"}
    slices = [node_slice("n1", gpu(0, taints=[taint]), gpu(1, taints=[{**taint, "effect": "None"}]))]
    got = run("n1", [claim()], slices)
    assert isinstance(got, tuple) and got[0].results[0].device == "gpu-1"
    tolerate = [{"key": f"{DRIVER}/unhealthy", "operator": "Exists"}]
    slices = [node_slice("n1", gpu(0, taints=[taint]))]
    assert run("n1", [claim()], slices) == alloc.REASON_CANNOT_ALLOCATE
    assert isinstance(run("n1", [claim(tolerations=tolerate)], slices), tuple)
    wrong_value = [{"key": f"{DRIVER}/unhealthy", "operator": "Equal", "value": "other"}]
    assert run("n1", [claim(tolerations=wrong_value)], slices) == alloc.REASON_CANNOT_ALLOCATE


def test_only_the_newest_complete_generation_of_a_pool_counts() -> None:
    old = node_slice("n1", gpu(0, 80), generation=1)
    new = node_slice("n1", gpu(0, 8), generation=2)
    assert run("n1", [claim("40Gi")], [old, new]) == alloc.REASON_CANNOT_ALLOCATE
    half = node_slice("n1", gpu(0, 80), generation=3, count=2)
    assert run("n1", [claim("4Gi")], [old, new, half]) == alloc.REASON_CANNOT_ALLOCATE  # incomplete: nothing
    with pytest.raises(alloc.AllocationError, match="being updated"):
        run("n1", [claim(None, mode="All")], [half])


def test_a_pool_with_more_slices_than_its_count_is_incomplete_too() -> None:
    """GatherPools: ``IsIncomplete`` when the slices are not exactly resourceSliceCount (a duplicate slice)."""
    first, second = node_slice("n1", gpu(0, 80)), node_slice("n1", gpu(1, 80), name="n1-dup")
    assert isinstance(run("n1", [claim("4Gi")], [first]), tuple)
    assert run("n1", [claim("4Gi")], [first, second]) == alloc.REASON_CANNOT_ALLOCATE
    with pytest.raises(alloc.AllocationError, match="being updated"):
        run("n1", [claim(None, mode="All")], [first, second])


def pooled(node: str, pool: str, *devices: dict[str, Any], generation: int = 1, count: int = 1) -> dra.ResourceSlice:
    """A slice of ``node`` in a pool named ``pool`` (not the node's name)."""
    return dra.decode_slice({"metadata": {"name": f"{node}-{pool}-{generation}"},
                             "spec": {"driver": DRIVER, "nodeName": node, "devices": list(devices),
                                      "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}})


def test_a_pool_over_several_nodes_is_judged_by_what_each_node_sees_first() -> None:
    """pools_incubating.go GatherPools: the node's slices are the pool when they are resourceSliceCount;
    else all the pool's slices of the generation are counted (checkSlicesInPool)."""
    one_each = [pooled("n1", "p", gpu(0)), pooled("n2", "p", gpu(0))]  # each node's one slice is its pool
    for node in ("n1", "n2"):
        assert isinstance(run(node, [claim(None, mode="All")], one_each), tuple), node
    spread = [pooled("n1", "p", gpu(0), count=2), pooled("n2", "p", gpu(0), count=2)]  # two slices, counted in all
    assert isinstance(run("n1", [claim(None, mode="All")], spread), tuple)
    assert run("n1", [claim()], spread[:1]) == alloc.REASON_CANNOT_ALLOCATE, "the other node's slice is missing"
    three = [*spread, pooled("n3", "p", gpu(0), count=2)]
    with pytest.raises(alloc.AllocationError, match="being updated"):
        run("n1", [claim(None, mode="All")], three)


def test_invalid_devices_and_pools_are_never_allocated() -> None:
    broken = node_slice("n1", gpu(0, policy={"default": "1Gi", "validRange": {"min": "1Gi", "step": "0"}}))
    assert broken.devices[0].invalid and run("n1", [claim()], [broken]) == alloc.REASON_CANNOT_ALLOCATE
    twice = [node_slice("n1", gpu(0), count=2, name="a"), node_slice("n1", gpu(0), count=2, name="b")]
    assert run("n1", [claim()], twice) == alloc.REASON_INVALID_POOLS  # allocator_incubating.go says why


def test_an_invalid_pool_is_the_nodes_reason_only_when_nothing_else_fits() -> None:
    """Allocate (allocator_incubating.go): with no solution, an invalid pool seen on the node makes its
    reason "invalid resource pools were encountered" (ErrFailedAllocationOnNode); a solution from another
    pool is still taken. An incomplete pool is not also invalid (buildPool validates complete pools only)."""
    twice = [node_slice("n1", gpu(0), count=2, name="a"), node_slice("n1", gpu(0), count=2, name="b")]
    other = dra.decode_slice({"metadata": {"name": "other"}, "spec": {
        "driver": DRIVER, "nodeName": "n1", "devices": [gpu(1)],
        "pool": {"name": "other", "generation": 1, "resourceSliceCount": 1}}})
    found = run("n1", [claim()], [*twice, other])
    assert not isinstance(found, str) and [r.pool for r in found[0].results] == ["other"]
    assert run("n1", [claim("20Gi")], [*twice, other]) == alloc.REASON_INVALID_POOLS
    incomplete = [node_slice("n1", gpu(0), count=3, name="a"), node_slice("n1", gpu(0), count=3, name="b")]
    pools = alloc.gather_pools("n1", alloc.Inventory(incomplete, CLASSES))
    assert [(p.incomplete, p.invalid, p.slices) for p in pools] == [(True, "", [])]
    assert run("n1", [claim()], incomplete) == alloc.REASON_CANNOT_ALLOCATE


def test_an_unreadable_consumption_holds_the_whole_device() -> None:
    slices = [node_slice("n1", gpu(0))]
    bad = dra.Allocation((dra.AllocatedDevice("gpu", DRIVER, "n1", "gpu-0", "s", None, invalid="negative"),))
    assert run("n1", [claim("1Gi")], slices, (bad,)) == alloc.REASON_CANNOT_ALLOCATE
    admin = dra.Allocation((dra.AllocatedDevice("gpu", DRIVER, "n1", "gpu-0", "", None, admin_access=True),))
    assert isinstance(run("n1", [claim("1Gi")], slices, (admin,)), tuple)


def test_problems_the_plugin_reports_before_filtering() -> None:
    missing = claim(klass="nothing.example.com")
    assert alloc.prefilter([missing], CLASSES, "pod") == "request gpu: device class nothing.example.com does not exist"
    assert alloc.prefilter([claim()], CLASSES, "pod") == ""
    negative = dra.decode_claim({"metadata": {"name": "neg", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "capacity": {"requests": {"memory": "-1Gi"}}}}]}}})
    assert "negative" in alloc.claim_problem(negative, CLASSES)
    with pytest.raises(alloc.AllocationError, match="ns/neg"):
        run("n1", [negative], [node_slice("n1", gpu(0))])


def test_a_claim_being_deleted_stops_the_pod_before_its_other_claims_are_asked() -> None:
    """dynamicresources.go: foreachPodResourceClaim refuses a claim being deleted while it gathers the
    pod's claims, before the PreFilter loop asks any of them whether it is in use or its class exists."""
    missing = claim(klass="nothing.example.com")
    deleting = dra.ResourceClaim(namespace="ns", name="going", deleting=True)
    assert alloc.prefilter([missing, deleting], CLASSES, "pod") == 'resourceclaim "going" is being deleted'
    full = dra.ResourceClaim(namespace="ns", name="full", allocation=dra.Allocation((), "n1"),
                             reserved_for=tuple(dra.Consumer("pods", f"p{i}", f"u{i}")
                                                for i in range(dra.MAX_RESERVED_FOR)))
    assert alloc.prefilter([full], CLASSES, "pod") == alloc.REASON_IN_USE
    assert alloc.prefilter([full, deleting], CLASSES, "pod") == 'resourceclaim "going" is being deleted'
    assert alloc.prefilter([full], CLASSES, "u0") == "", "a claim reserved for the pod already is not in use"


def test_allocations_encode_with_the_upstream_field_names() -> None:
    got = run("n1", [claim("4Gi")], [node_slice("n1", gpu(0))])
    assert isinstance(got, tuple)
    assert alloc.encode_allocation(got[0]) == {
        "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
                                 "shareID": "share-0", "consumedCapacity": {"memory": "4Gi"}}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}


def test_a_search_that_runs_too_long_gives_the_timeout_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alloc, "MAX_STEPS", 3)
    slices = [node_slice("n1", *(gpu(i, shared=False) for i in range(8)))]
    assert run("n1", [claim(None, count=8)], slices) == alloc.REASON_TIMED_OUT


# --- Properties ------------------------------------------------------------------------------------------
QUANTITIES = st.integers(min_value=0, max_value=64 * 1024).map(lambda mib: dra.read_quantity(f"{mib}Mi"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=24 * 1024), min_size=1, max_size=25),
       st.sampled_from(["range", None, {"default": "2Gi", "validValues": ["2Gi", "4Gi", "8Gi"]}]))
def test_never_over_commits_a_shared_gpu(requests_mib: list[int], policy: Any) -> None:
    slices = [node_slice("n1", gpu(0, 16, policy=policy), gpu(1, 24, policy=policy))]
    held: list[dra.Allocation] = []
    for mib in requests_mib:
        got = run("n1", [claim(f"{mib}Mi")], slices, tuple(held))
        if isinstance(got, tuple):
            held.extend(got)
    used: dict[str, int] = {}
    for allocation in held:
        for result in allocation.results:
            assert result.consumed_capacity is not None
            used[result.device] = used.get(result.device, 0) + result.consumed_capacity["memory"].millis
    assert used.get("gpu-0", 0) <= 16 * GIB * 1000 and used.get("gpu-1", 0) <= 24 * GIB * 1000


@settings(max_examples=300, deadline=None)
@given(QUANTITIES, QUANTITIES, st.sampled_from([
    {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
    {"default": "256Mi", "validRange": {"min": "256Mi", "max": "48Gi", "step": "256Mi"}},
    {"default": "1Gi", "validRange": {"min": "1Gi"}},
    {"default": "4Gi", "validValues": ["4Gi", "8Gi", "16Gi", "40Gi"]},
]))
def test_rounding_is_monotone_and_never_below_the_request(a: dra.Quantity, b: dra.Quantity, policy: Any) -> None:
    capacity = node_slice("n1", gpu(0, 80, policy=policy)).devices[0].capacity["memory"]
    low, high = sorted((a, b), key=lambda q: q.millis)
    rounded_low, rounded_high = alloc.consumed_amount(low, capacity), alloc.consumed_amount(high, capacity)
    assert rounded_low is not None and rounded_high is not None
    assert rounded_low.millis <= rounded_high.millis
    assert rounded_low.millis >= low.millis and rounded_high.millis >= high.millis
    assert protocol.parse_milli_quantity(rounded_high.text) == rounded_high.millis


def test_place_answers_for_every_node_in_order() -> None:
    slices = [node_slice("a", gpu(0, 8)), node_slice("b", gpu(0, 16))]
    inventory = alloc.Inventory(slices, CLASSES)
    placed = alloc.place(["a", "b", "c"], [claim("10Gi")], inventory, share_ids())
    assert placed.node == "b" and placed.reasons == {"a": alloc.REASON_CANNOT_ALLOCATE}
    assert placed.allocations[0].results[0].pool == "b"
    nowhere = alloc.place(["a", "c"], [claim("20Gi")], inventory, share_ids())
    assert nowhere.node is None and nowhere.reasons == {"a": alloc.REASON_CANNOT_ALLOCATE,
                                                        "c": alloc.REASON_CANNOT_ALLOCATE}
    pinned = dra.decode_claim({"metadata": {"name": "x", "namespace": "ns"}, "status": {"allocation": {
        "devices": {"results": []}, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}})
    assert alloc.place(["a", "b"], [pinned], inventory).reasons == {"a": alloc.REASON_NOT_ON_NODE}


def test_a_pools_generation_counts_per_node_as_gather_pools_reads_it() -> None:
    """k8s.io/dynamic-resource-allocation structured/internal/experimental/pools_experimental.go
    (GatherPools, addSlice, checkSlicesInPool): only the slices the node sees are gathered, so their
    newest generation counts when they are resourceSliceCount, whatever another node publishes; only
    when they are not is the whole pool read, and a newer generation there makes them obsolete."""
    def pool_slice(node: str, generation: int, count: int = 1) -> dra.ResourceSlice:
        return dra.decode_slice({"metadata": {"name": f"{node}-{generation}"}, "spec": {
            "driver": DRIVER, "nodeName": node, "devices": [gpu(0)],
            "pool": {"name": "shared", "generation": generation, "resourceSliceCount": count}}})

    old_here, new_there = pool_slice("n1", 1), pool_slice("n2", 2)
    assert isinstance(run("n1", [claim()], [old_here, new_there]), tuple), "n1's one slice is its whole pool"
    assert isinstance(run("n2", [claim()], [old_here, new_there]), tuple)
    partial_here = pool_slice("n1", 1, count=2)
    assert run("n1", [claim()], [partial_here, new_there]) == alloc.REASON_CANNOT_ALLOCATE, "obsolete: ignored"
    assert run("n1", [claim(None, mode="All")], [partial_here, new_there]) == alloc.REASON_CANNOT_ALLOCATE, (
        "an obsolete pool is not incomplete: it is not there, so All finds no device rather than an error")
    complete = [pool_slice("n1", 3, count=2), pool_slice("n2", 3, count=2)]  # its slices on both nodes count
    assert isinstance(run("n1", [claim()], complete), tuple)
    with pytest.raises(alloc.AllocationError, match="being updated"):
        run("n1", [claim(None, mode="All")], complete[:1])


def selector_slice(pool: str, term: dict[str, Any], *devices: dict[str, Any], generation: int = 1, count: int = 1,
                   name: str = "") -> dra.ResourceSlice:
    """A slice of devices the nodes its one-term ``nodeSelector`` matches can use (network-attached GPUs)."""
    return dra.decode_slice({"metadata": {"name": name or f"{pool}-{generation}"},
                             "spec": {"driver": DRIVER, "nodeSelector": {"nodeSelectorTerms": [term]},
                                      "devices": list(devices),
                                      "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}})


RACK_A: Final = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
LABELS: Final = {"n1": {"rack": "a"}, "n2": {"rack": "b"}}


def test_a_node_selector_slice_is_allocated_on_the_nodes_it_matches() -> None:
    """pools_incubating.go GatherPools/NodeMatches: the slice is the node's when its selector matches the
    node's labels; allocator_incubating.go createNodeSelector: the claim gets the slice's requirements."""
    slices = [selector_slice("fabric", RACK_A, gpu(0))]
    inventory = alloc.Inventory(slices, CLASSES, labels=LABELS)
    got = alloc.allocate("n1", [claim("4Gi")], inventory, share_ids())
    assert isinstance(got, tuple) and got[0].results[0].pool == "fabric" and not got[0].node_name
    assert alloc.encode_allocation(got[0])["nodeSelector"] == {"nodeSelectorTerms": [RACK_A]}
    assert alloc.allocate("n2", [claim("4Gi")], inventory, share_ids()) == alloc.REASON_CANNOT_ALLOCATE
    assert alloc.allocate("n3", [claim("4Gi")], inventory, share_ids()) == alloc.REASON_CANNOT_ALLOCATE, (
        "a node whose labels are not known matches no label requirement")
    placed = alloc.place(["n2", "n1"], [claim("4Gi")], inventory, share_ids())
    assert placed.node == "n1" and placed.reasons == {"n2": alloc.REASON_CANNOT_ALLOCATE}


def test_a_claim_allocated_from_a_selector_slice_is_usable_where_the_selector_matches() -> None:
    """dynamicresources.go Filter: an allocated claim's node selector must match the node (REASON_NOT_ON_NODE)."""
    slices = [selector_slice("fabric", RACK_A, gpu(0))]
    inventory = alloc.Inventory(slices, CLASSES, labels={**LABELS, "n3": {"rack": "a"}})
    got = alloc.allocate("n1", [claim("4Gi", name="held")], inventory, share_ids())
    assert isinstance(got, tuple)
    body = {"metadata": {"name": "held", "namespace": "ns"}, "status": {"allocation": alloc.encode_allocation(got[0])}}
    held = dra.decode_claim(body)
    assert held.allocation is not None and held.allocation.selector is not None and not held.problems
    placed = alloc.place(["n2", "n3"], [held], inventory)
    assert placed.node == "n3" and placed.reasons == {"n2": alloc.REASON_NOT_ON_NODE}
    assert alloc.available_on(held, "n1", LABELS["n1"]) and not alloc.available_on(held, "n2", LABELS["n2"])


def test_requirements_of_several_selector_slices_merge_into_one_term_each_once() -> None:
    """createNodeSelector + addNewNodeSelectorRequirements: fields then expressions, no repeats
    (same key, operator and set of values); a node-local device pins the claim to the node instead."""
    gpu_type = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]},
                                     {"key": "gen", "operator": "Gt", "values": ["3"]}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}
    slices = [selector_slice("p1", RACK_A, gpu(0, shared=False)), selector_slice("p2", gpu_type, gpu(0, shared=False))]
    inventory = alloc.Inventory(slices, CLASSES, labels={"n1": {"rack": "a", "gen": "4"}})
    got = alloc.allocate("n1", [claim(None, count=2)], inventory, share_ids())
    assert isinstance(got, tuple)
    assert alloc.encode_allocation(got[0])["nodeSelector"] == {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]},
                             {"key": "gen", "operator": "Gt", "values": ["3"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}
    mixed = alloc.Inventory([*slices[:1], node_slice("n1", gpu(0, shared=False))], CLASSES, labels=inventory.labels)
    pinned = alloc.allocate("n1", [claim(None, count=2)], mixed, share_ids())
    assert isinstance(pinned, tuple) and pinned[0].node_name == "n1"


def test_a_selector_slice_gives_only_the_nodes_it_matches_its_devices() -> None:
    """GatherPools keeps the slices relevant for the node; when they are fewer than resourceSliceCount
    the whole pool is counted (checkSlicesInPool) to judge it complete, but only the node's are used."""
    rack_b = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["b"]}]}
    split = [selector_slice("fabric", RACK_A, gpu(0), count=2, name="a"),
             selector_slice("fabric", rack_b, gpu(1), count=2, name="b")]
    inventory = alloc.Inventory(split, CLASSES, labels=LABELS)
    for node, device in (("n1", "gpu-0"), ("n2", "gpu-1")):
        got = alloc.allocate(node, [claim(None, mode="All")], inventory, share_ids())
        assert isinstance(got, tuple) and [r.device for r in got[0].results] == [device], node
    updating = alloc.Inventory([*split, selector_slice("fabric", rack_b, gpu(2), count=2, name="c")], CLASSES,
                               labels=LABELS)
    with pytest.raises(alloc.AllocationError, match="being updated"):
        alloc.allocate("n1", [claim(None, mode="All")], updating, share_ids())


@pytest.mark.parametrize(("term", "why"), [
    ({"matchExpressions": [{"key": "rack", "operator": "Near", "values": ["a"]}]}, "unknown operator 'Near'"),
    ({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["three"]}]}, "Gt needs one integer value"),
    ({"matchExpressions": [{"key": "rack", "operator": "In", "values": []}]}, "In needs values"),
    ({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}, "is not In or NotIn"),
    ({"matchExpressions": [{"key": f"k{i}", "operator": "Exists"} for i in range(5000)]}, "more than 1024"),
], ids=["unknown-operator", "gt-not-integer", "in-without-values", "field-exists", "thousands"])
def test_a_hostile_slice_selector_is_one_problem_and_matches_no_node(term: dict[str, Any], why: str) -> None:
    bad = selector_slice("fabric", term, gpu(0))
    assert len(bad.problems) == 1 and why in bad.problems[0] and "matches no node" in bad.problems[0]
    inventory = alloc.Inventory([bad, node_slice("n1", gpu(0))], CLASSES, labels={"n1": {"rack": "a", "gen": "4"}})
    got = alloc.allocate("n1", [claim()], inventory, share_ids())
    assert isinstance(got, tuple) and got[0].results[0].pool == "n1", "the other slices are still allocated from"


class _CountingLabels(dict[str, str]):
    """A node's labels that count the look-ups a node selector makes (one per requirement matched)."""

    asked = 0

    def __contains__(self, key: object) -> bool:
        self.asked += 1
        return super().__contains__(key)


def test_allocation_matches_each_selector_slice_against_the_node_once() -> None:
    """`gather_pools` takes the slices `Inventory.on_node` matched; it matched them again (a refactor)."""
    labels = _CountingLabels(rack="a")
    slices = [selector_slice("fabric", RACK_A, gpu(0)), selector_slice("other", RACK_A, gpu(0), name="other-1"),
              node_slice("n1", gpu(0))]
    inventory = alloc.Inventory(slices, CLASSES, labels={"n1": labels})
    got = alloc.allocate("n1", [claim()], inventory, share_ids())
    assert isinstance(got, tuple) and got[0].results[0].pool == "fabric"
    assert labels.asked == 2, "each of the two selector slices asks the node's rack once"


def test_a_slice_selector_must_have_exactly_one_term() -> None:
    """resource/v1 types.go ResourceSliceSpec.NodeSelector: "Must use exactly one term"."""
    two = dra.decode_slice({"metadata": {"name": "two"}, "spec": {
        "driver": DRIVER, "nodeSelector": {"nodeSelectorTerms": [RACK_A, RACK_A]}, "devices": [gpu(0)],
        "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}})
    assert "2 terms: must have exactly one node selector term" in two.problems[0]
    assert not two.allocatable_on("n1", {"rack": "a"})
    with pytest.raises(dra.InvalidObjectError):
        dra.decode_slice({"metadata": {"name": "deep"}, "spec": {
            "driver": DRIVER, "nodeSelector": {"nodeSelectorTerms": [[[[["x"]]]]]}, "devices": [],
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}})
