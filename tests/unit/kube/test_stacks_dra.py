"""kube.stacks.dra: ResourceSlices and ResourceClaims as the views' records, hostile ones included."""

from __future__ import annotations

import json
import random
from typing import Any, Final

import msgspec
import pytest
from golden.inspect import cases

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.inspect import doctor_dra
from kubectl_gpushare.kube import dra_allocation
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks import dra
from kubectl_gpushare.kube.types import Pod
from kubectl_gpushare.ledger import PENDING, Ledger, NodeRecord

OURS = protocol.DRA_DRIVER
NVIDIA = protocol.NVIDIA_DRA_DRIVER


def device(index: int | str, memory: object = "16Gi", unit: str = "1Gi", **extra: Any) -> dict[str, Any]:
    name = index if isinstance(index, str) else f"gpu-{index}"
    capacity: dict[str, Any] = {"value": memory}
    if unit:
        capacity["requestPolicy"] = {"default": unit, "validRange": {"min": unit, "step": unit}}
    return {"name": name, "attributes": {"uuid": {"string": f"GPU-{name}"}, "model": {"string": "T4"}},
            "capacity": {"memory": capacity}, "allowMultipleAllocations": True, **extra}


def slice_(node: str, devices: list[dict[str, Any]], driver: str = OURS, generation: int = 1,
           name: str = "") -> dra_objects.WireResourceSlice:
    body = {"metadata": {"name": name or f"{node}-{driver}-{generation}"},
            "spec": {"driver": driver, "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                     "nodeName": node, "devices": devices}}
    return msgspec.convert(body, dra_objects.WireResourceSlice)


def result(node: str, gpu: str, memory: object | None = "4Gi", driver: str = OURS, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"request": "gpu", "driver": driver, "pool": node, "device": gpu, **extra}
    if memory is not None:
        found.update(shareID="s", consumedCapacity={"memory": memory})
    return found


def claim(name: str, results: list[dict[str, Any]], pods: list[str] | None = None,
          node: str = "") -> dra_objects.WireResourceClaim:
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if node:
        allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    body = {"metadata": {"name": name, "namespace": "ns", "uid": f"claim-{name}"},
            "status": {"allocation": allocation,
                       "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in (pods or [])]}}
    return msgspec.convert(body, dra_objects.WireResourceClaim)


def view(slices: list[dra_objects.WireResourceSlice], claims: list[dra_objects.WireResourceClaim],
         extra: list[NodeRecord] = ()) -> tuple[Ledger, Warnings, dra.DraObjects]:  # type: ignore[assignment]
    warnings = Warnings()
    objects = dra.read(slices, claims, warnings)
    nodes = dra.our_nodes(objects, warnings)
    records = dra.with_gpus([*(NodeRecord(name) for name in nodes), *extra], nodes)
    pods = dra.claim_records(objects, dra.units(records, nodes), {"uid-a": "Running"})
    return Ledger.build(records, pods), warnings, objects


def used(ledger: Ledger, node: str) -> dict[int, tuple[int, int]]:
    return {d.index: (d.used, d.total) for d in ledger.usage(node).devices.values()}


def test_a_node_of_our_driver_counts_consumed_memory_per_gpu_in_gib() -> None:
    ledger, warnings, _ = view(
        [slice_("n", [device(0), device(1, "24Gi")])],
        [claim("a", [result("n", "gpu-0", "4Gi")], ["a"]), claim("b", [result("n", "gpu-1", "6Gi")], ["b"])],
    )
    assert used(ledger, "n") == {0: (4, 16), 1: (6, 24)} and not warnings
    record = ledger.node("n")
    assert record is not None and (record.driver, record.unit, record.alloc_mem, record.alloc_count) == (
        OURS, "GiB", 40, 2)
    (pod,) = [p for p in ledger.pods_on("n") if p.name == "a"]
    assert (pod.uid, pod.phase, pod.claim, pod.allocation) == ("uid-a", "Running", "a", ((0, 4),))


def test_mib_policies_count_in_mib_totals_round_down_and_consumption_up() -> None:
    ledger, _, _ = view([slice_("n", [device(0, "16000Mi", "1Mi")])],
                        [claim("a", [result("n", "gpu-0", "1536Mi")], ["a"]),
                         claim("b", [result("n", "gpu-0", "1000001")], ["b"])])  # bytes: a little under 1 MiB
    assert used(ledger, "n") == {0: (1536 + 1, 16000)}
    assert dra.node_unit([dra_objects.DeviceCapacity(dra_objects.read_quantity("16G"))]) == "MiB"


def test_whole_device_when_consumed_capacity_is_missing_or_unreadable() -> None:
    ledger, warnings, _ = view(
        [slice_("n", [device(0), device(1)])],
        [claim("exclusive", [result("n", "gpu-0", None)], ["a"]),
         claim("garbage", [result("n", "gpu-1", "-3Gi")], ["b"])],
    )
    assert used(ledger, "n") == {0: (16, 16), 1: (16, 16)}
    assert any("counted as using the whole device" in m for m in warnings), warnings.messages


def test_admin_access_holds_nothing_and_other_drivers_are_not_ours() -> None:
    ledger, _, _ = view(
        [slice_("n", [device(0)])],
        [claim("admin", [result("n", "gpu-0", "4Gi", adminAccess=True)], ["a"]),
         claim("theirs", [result("n", "gpu-0", "4Gi", driver="other.example.com")], ["b"])],
    )
    assert used(ledger, "n") == {0: (0, 16)}


def test_a_shared_claim_counts_once_under_its_name_and_a_pods_claims_are_summed() -> None:
    ledger, _, _ = view(
        [slice_("n", [device(0), device(1)])],
        [claim("cache", [result("n", "gpu-0", "2Gi")], ["a", "b"]),
         claim("leftover", [result("n", "gpu-0", "1Gi")], []),
         claim("a-1", [result("n", "gpu-1", "3Gi")], ["a"]), claim("a-2", [result("n", "gpu-1", "5Gi")], ["a"])],
    )
    pods = {p.name: (p.uid, p.allocation, p.claim) for p in ledger.pods_on("n")}
    assert pods == {"cache": ("claim-cache", ((0, 2),), "cache"), "leftover": ("claim-leftover", ((0, 1),), "leftover"),
                    "a": ("uid-a", ((1, 8),), "a-1,a-2")}


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    ledger, _, _ = view([slice_("n", [device(0, "8Gi")], generation=1), slice_("n", [device(0), device(1)],
                                                                             generation=2)], [])
    assert used(ledger, "n") == {0: (0, 16), 1: (0, 16)}


def pool_slice(node: str, devices: list[dict[str, Any]], name: str, count: int = 1, generation: int = 1,
               driver: str = OURS, pool: str = "") -> dra_objects.WireResourceSlice:
    """A slice of ``node`` in the pool ``pool`` (by default the node's name)."""
    wire = slice_(node, devices, driver, generation, name)
    return msgspec.structs.replace(wire, spec=msgspec.structs.replace(
        wire.spec, pool=dra_objects.WirePool(name=pool or node, generation=generation, resource_slice_count=count)))


def pool_warnings(warnings: Warnings) -> list[str]:
    return [warning for warning in warnings if warning.startswith("pool ")]


def test_a_pool_listing_a_device_twice_keeps_each_gpu_once_with_its_memory_but_unhealthy() -> None:
    """GatherPools: invalid (duplicate device name); the allocator allocates no new claim from it, in one slice or two.

    Two slices of a pool published as one are also incomplete: the publisher's create of unknown
    outcome that landed after its retry. The claim already there still holds its memory, once.
    """
    two = [slice_("n", [device(0, "80Gi"), device(1)], name="a"), slice_("n", [device(0)], name="b")]
    held = [claim("held", [result("n", "gpu-0", "4Gi")], ["a"])]
    for slices, why in ((two, "is incomplete (currently being updated): 2 ResourceSlice(s) of generation 1, "
                              "resourceSliceCount 1"),  # buildPool validates complete pools only
                        ([slice_("n", [device(0, "80Gi"), device(0), device(1)])],
                         "is invalid: duplicate device name 'gpu-0'")):
        ledger, warnings, objects = view([*slices, slice_("m", [device(0)])], held)
        assert used(ledger, "n") == {0: (4, 80), 1: (0, 16)}, "each GPU once, the first copy, its claim counted once"
        record = ledger.node("n")
        assert record is not None and record.unhealthy == frozenset({0, 1}) and ledger.free("n") == {}
        assert ledger.free("m") == {0: 16}, "another node's pool is untouched"
        assert objects.unusable == {(OURS, "n"): why}
        assert pool_warnings(warnings) == [f"pool 'n' of {OURS} {why}; {dra.UNUSABLE_EFFECT}"]
        assert not any("published twice" in warning for warning in warnings), "the pool's one warning says it"


@pytest.mark.parametrize(("published", "count"), [(1, 2), (3, 2)], ids=["fewer", "more"])
def test_an_incomplete_pool_keeps_its_gpus_and_claims_but_takes_no_new_claim(published: int, count: int) -> None:
    slices = [pool_slice("n", [device(i)], f"s{i}", count) for i in range(published)]
    ledger, warnings, objects = view(slices, [claim("held", [result("n", "gpu-0", "4Gi")], ["a"])])
    assert used(ledger, "n") == {i: (4 if i == 0 else 0, 16) for i in range(published)}
    assert ledger.free("n") == {}, "kube-scheduler allocates no new claim from an incomplete pool"
    why = f"is incomplete (currently being updated): {published} ResourceSlice(s) of generation 1, " \
          f"resourceSliceCount {count}"
    assert objects.unusable == {(OURS, "n"): why} and len(pool_warnings(warnings)) == 1


def test_only_the_newest_generation_decides_whether_a_pool_is_usable() -> None:
    """An older generation's slices are ignored (GatherPools' addSlice), duplicates and counts included."""
    old = [pool_slice("n", [device(0, "80Gi"), device(0)], "old", count=3, generation=1),
           pool_slice("n", [device(0, "80Gi")], "old2", count=3, generation=1)]
    ledger, warnings, objects = view([*old, pool_slice("n", [device(0), device(1)], "new", generation=2)], [])
    assert used(ledger, "n") == {0: (0, 16), 1: (0, 16)} and ledger.free("n") == {0: 16, 1: 16}
    assert objects.unusable == {} and pool_warnings(warnings) == []


def pooled(node: str, pool: str, count: int, driver: str) -> dra_objects.WireResourceSlice:
    return pool_slice(node, [device(0)], f"{node}-{pool}", count, driver=driver, pool=pool)


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_a_pool_over_several_nodes_is_judged_by_what_each_node_sees(driver: str) -> None:
    """GatherPools is per node (pools_incubating.go): a node's own slices are its pool when they are
    resourceSliceCount, else all the pool's are counted; a device name is unique on each node only."""
    for slices in ([pooled("n1", "p", 1, driver), pooled("n2", "p", 1, driver)],  # each node's slice is its pool
                   [pooled("n1", "p", 2, driver), pooled("n2", "p", 2, driver)]):  # gpu-0 on each node: no repeat
        warnings = Warnings()
        objects = dra.read(slices, [], warnings)
        assert objects.unusable == {} and pool_warnings(warnings) == [], slices
    objects = dra.read([pooled("n1", "p", 3, driver), pooled("n2", "p", 3, driver)], [], None)
    assert list(objects.unusable) == [(driver, "p")] and "2 ResourceSlice(s)" in objects.unusable[(driver, "p")]


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_a_slice_for_all_nodes_is_seen_by_each_node_of_its_pool(driver: str) -> None:
    """GatherPools adds an allNodes slice on every node: with each node's own slices it makes the count,
    and a device name it shares with a node's slice is repeated there."""
    def everywhere(name: str, *devices: dict[str, Any], count: int = 2) -> dra_objects.WireResourceSlice:
        wire = pool_slice("x", list(devices), name, count, driver=driver, pool="p")
        return msgspec.structs.replace(wire, spec=msgspec.structs.replace(wire.spec, node_name=None, all_nodes=True))

    fine = [pooled("n1", "p", 3, driver), pooled("n2", "p", 3, driver), everywhere("all", device(1), count=3)]
    assert dra.read(fine, [], None).unusable == {}, "each node sees 2 of 3; all the pool's 3 are published"
    clash = [pooled("n1", "p", 2, driver), everywhere("all", device(0))]
    assert dra.read(clash, [], None).unusable == {(driver, "p"): "is invalid: duplicate device name 'gpu-0'"}
    only = [everywhere("a", device(0)), everywhere("b", device(1))]
    assert dra.read(only, [], None).unusable == {}, "a pool of slices for all nodes only is the pool"


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_which_generation_counts_is_judged_per_node(driver: str) -> None:
    """pools_experimental.go GatherPools gathers the slices a node sees: their newest generation is the
    pool when they are resourceSliceCount, whatever another node publishes; else checkSlicesInPool reads
    the whole pool and a newer generation there makes the node's slices obsolete (ignored, no warning)."""
    def shown_nodes(objects: dra.DraObjects) -> set[str]:
        if driver == OURS:
            return set(dra.our_nodes(objects, None))
        return set(dra.nvidia_nodes(objects, {}, None))

    def at(node: str, generation: int, count: int = 1) -> dra_objects.WireResourceSlice:
        return pool_slice(node, [device(0)], f"{node}-{generation}", count, generation, driver, "p")

    warnings = Warnings()
    objects = dra.read([at("n1", 1), at("n2", 2)], [], warnings)
    assert shown_nodes(objects) == {"n1", "n2"} and objects.unusable == {} and pool_warnings(warnings) == []
    warnings = Warnings()
    objects = dra.read([at("n1", 1, count=2), at("n2", 2)], [], warnings)
    assert shown_nodes(objects) == {"n2"} and objects.unusable == {} and pool_warnings(warnings) == []
    objects = dra.read([at("n1", 1), at("n1", 2, count=2), at("n2", 1)], [], None)
    assert shown_nodes(objects) == {"n1", "n2"}, "n1's own newest generation counts; n2's complete one too"
    assert objects.unusable_on == {(driver, "p"): ("n1",)}, "only n1 sees generation 2, which lacks a slice"


RACKS: Final = {"n1": {"rack": "a"}, "n2": {"rack": "b"}, "n3": {"rack": "a"}, "n4": {"rack": "b"}}
"""The nodes read by the property test below: n4 has no slice of its own, so only a selector gives it the pool."""

Gathered = list[tuple[tuple[str, str], tuple[str, ...], str]]
"""Per pool a node sees: (driver, pool), the names of the slices of its generation the node sees, and
"ok", "invalid" or "incomplete"."""


def upstream_pools(node: str, slices: list[dra_objects.ResourceSlice]) -> Gathered:
    """A reference model of GatherPools for one node, written from k8s.io/dynamic-resource-allocation
    structured/internal/incubating/pools_incubating.go as plainly as it reads (no speed-ups), to judge
    the one implementation (`kube.dra_pools`) by: slicesOnNode[node] then slicesShared in their order,
    perDeviceNodeSelection skipped (no partitionable devices), the highest generation per pool, the first
    slice's resourceSliceCount, checkSlicesInPool over every slice, validateDeviceNames on complete pools."""
    labels = RACKS.get(node, {})
    relevant: dict[tuple[str, str], list[dra_objects.ResourceSlice]] = {}
    for s in [s for s in slices if s.node_name == node] + [s for s in slices if not s.node_name]:
        if s.node_name:
            matches = s.node_name == node
        elif s.all_nodes:
            matches = True
        elif s.node_selector is not None:
            matches = s.node_selector.matches(labels, node)
        else:
            continue  # perDeviceNodeSelection without partitionable devices, or nothing known
        if not matches:
            continue
        key = (s.driver, s.pool)
        if key not in relevant or s.generation > relevant[key][0].generation:
            relevant[key] = [s]
        elif s.generation == relevant[key][0].generation:
            relevant[key].append(s)
    gathered: Gathered = []
    for key in sorted(relevant):
        pool = relevant[key]
        generation, count = pool[0].generation, pool[0].slice_count
        names = tuple(sorted(s.name for s in pool))
        if len(pool) != count:
            everywhere = [s for s in slices if (s.driver, s.pool) == key]
            if any(s.generation > generation for s in everywhere):
                continue  # obsolete: ignored on this node
            if sum(s.generation == generation for s in everywhere) != count:
                gathered.append((key, names, "incomplete"))
                continue
        devices = [d.name for s in pool for d in s.devices]
        gathered.append((key, names, "invalid" if len(set(devices)) < len(devices) else "ok"))
    return gathered


def random_slice(index: int, rng: random.Random) -> dra_objects.WireResourceSlice:
    """A slice of pool p: on a node, for all nodes, selecting a rack or a node by name, or per device."""
    where = rng.choice(["n1", "n2", "n3", "all", "rack", "name", "per-device"])
    spec: dict[str, Any] = {
        "driver": OURS, "devices": [device(rng.randint(0, 3)) for _ in range(rng.randint(0, 2))],
        "pool": {"name": "p", "generation": rng.randint(1, 3), "resourceSliceCount": rng.randint(1, 4)}}
    if where.startswith("n"):
        spec["nodeName"] = where
    elif where == "all":
        spec["allNodes"] = True
    elif where == "rack":
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "rack", "operator": "In", "values": [rng.choice("ab")]}]}]}
    elif where == "name":
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [rng.choice(["n1", "n4", "gone"])]}]}]}
    else:
        spec["perDeviceNodeSelection"] = True
    return msgspec.convert({"metadata": {"name": f"s{index}"}, "spec": spec}, dra_objects.WireResourceSlice)


@pytest.mark.parametrize("seed", range(300))
def test_the_views_and_the_allocator_gather_each_nodes_pools_as_upstream(seed: int) -> None:
    """One rule (`kube.dra_pools`), upstream's: for every node, the allocator gathers the pools the reference
    model of GatherPools does; the views keep the node's own slices of a pool it does not ignore and call the
    pool unusable there exactly when it is incomplete or invalid; and the allocator gathers the same from the
    slices the views publish to explain (which allocates from those). Before, a node's shared slices were read allNodes
    first (not in their order: the wrong slice gave the count), a node seeing only allNodes slices was not
    judged by the views, an incomplete pool was also called invalid, and explain allocated from the slices some
    node uses only (one no node used, such as a per-device one, no longer counted toward its pool)."""
    rng = random.Random(seed)
    wires = [random_slice(i, rng) for i in range(rng.randint(1, 6))]
    objects = dra.read(wires, [], None, labels=RACKS)
    checked = [dra_objects.read_slice(wire) for wire in wires]
    inventory = dra_allocation.Inventory(checked, {}, labels=RACKS)
    kept = dra_allocation.Inventory(objects.published, {}, labels=RACKS)
    for node in [*RACKS, "elsewhere"]:
        want = upstream_pools(node, checked)
        pools = dra_allocation.gather_pools(node, inventory)
        assert [((p.driver, p.name), tuple(s.name for s in p.slices),
                 "incomplete" if p.incomplete else "invalid" if p.invalid else "ok") for p in pools] == [
            (key, () if state == "incomplete" else names, state) for key, names, state in want], (seed, node)
        own = {s.name for s in checked if s.node_name == node}
        assert sorted(own & {name for _, names, _ in want for name in names}) == sorted(
            s.name for s in objects.slices if s.node_name == node), (seed, node)
        if node in RACKS:  # the views judge the nodes read
            assert objects.unusable_at(OURS, "p", node) == any(state != "ok" for _, _, state in want), (seed, node)
        again = dra_allocation.gather_pools(node, kept)
        assert [(p.slices, p.incomplete, p.invalid) for p in again] == [
            (p.slices, p.incomplete, p.invalid) for p in pools], (seed, node)


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_the_first_slice_a_node_sees_of_a_pool_gives_its_count_own_then_shared_in_their_order(driver: str) -> None:
    """GatherPools reads slicesOnNode then slicesShared (in their order), and the first slice of the
    generation gives resourceSliceCount: n2 sees the rack-b slice (count 1) first, then the allNodes one
    (count 2): 2 seen of 1, and generation 3 exists, so the pool is obsolete on n2 and ignored. Read allNodes
    first (as before), the count was 2 and the pool complete on n2."""
    def shared(name: str, count: int, **spec: Any) -> dra_objects.WireResourceSlice:
        wire = pool_slice("x", [device(name)], name, count, 2, driver, "p")
        if "node_selector" in spec:
            spec["node_selector"] = msgspec.convert(spec["node_selector"], dra_objects.WireNodeSelector)
        return msgspec.structs.replace(wire, spec=msgspec.structs.replace(wire.spec, node_name=None, **spec))

    rack_b = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["b"]}]}]}
    slices = [shared("rack-b", 1, node_selector=rack_b), shared("all", 2, all_nodes=True),
              pool_slice("n3", [device(0)], "n3", 1, 3, driver, "p")]
    objects = dra.read(slices, [], None, labels=RACKS)
    assert objects.unusable == {}, "n3's generation 3 is complete; every other node ignores generation 2"
    kept = objects.slices if driver == OURS else objects.nvidia
    assert len(kept) == 1, "only n3's slice is used: n2 and n4 ignore the obsolete generation 2 too"
    if driver == OURS:
        inventory = dra_allocation.Inventory([dra_objects.read_slice(w) for w in slices], {}, labels=RACKS)
        assert dra_allocation.gather_pools("n2", inventory) == []
        assert [s.name for p in dra_allocation.gather_pools("n3", inventory) for s in p.slices] == ["n3"]


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_nodes_that_see_only_a_pools_slices_for_all_nodes_are_judged_too(driver: str) -> None:
    """n1 sees its own slice and the allNodes one: 2 of 3 (the pool publishes 2), incomplete; every other node
    sees the allNodes slice alone: 1 of 3, incomplete as well. Before, only n1 was named."""
    def everywhere(count: int) -> dra_objects.WireResourceSlice:
        wire = pool_slice("x", [device(1)], "all", count, driver=driver, pool="p")
        return msgspec.structs.replace(wire, spec=msgspec.structs.replace(wire.spec, node_name=None, all_nodes=True))

    objects = dra.read([pooled("n1", "p", 3, driver), everywhere(3)], [], None, labels=RACKS)
    assert objects.unusable_on == {(driver, "p"): ("", "n1")}
    assert all(objects.unusable_at(driver, "p", node) for node in [*RACKS, "elsewhere"])
    assert dra.pool_warning(objects, driver, "p").startswith(
        f"pool 'p' of {driver} (nodes 'n1' and every other node) is incomplete (currently being updated): "
        "2 ResourceSlice(s) of generation 1, resourceSliceCount 3")
    fine = dra.read([pooled("n1", "p", 2, driver), everywhere(2)], [], None, labels=RACKS)
    assert fine.unusable == {}, "2 of 2 on n1; 1 of 2 elsewhere, but the pool publishes its 2"


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_a_node_selector_slice_counts_toward_its_pool_only_on_the_nodes_it_matches(driver: str) -> None:
    """GatherPools/NodeMatches: a node sees a nodeSelector slice when the selector matches its labels (the
    allocator's rule, `node_affinity`); its devices are not one node's, so they are not shown."""
    def rack(name: str, value: str, count: int) -> dra_objects.WireResourceSlice:
        wire = pool_slice("x", [device(1)], name, count, driver=driver, pool="p")
        selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": [value]}]}]}
        return msgspec.structs.replace(wire, spec=msgspec.structs.replace(
            wire.spec, node_name=None, node_selector=msgspec.convert(selector, dra_objects.WireNodeSelector)))

    slices = [pooled("n1", "p", 2, driver), pooled("n2", "p", 2, driver), rack("rack-a", "a", 2)]
    objects = dra.read(slices, [], None, labels=RACKS)
    assert objects.unusable_on == {(driver, "p"): ("n2", "n3")}, "n1 (rack a) sees 2 of 2; n2 1 and n3 (rack a) 1, of 3"
    assert "is incomplete" in objects.unusable[(driver, "p")]
    alone = dra.read([rack("rack-a", "a", 1)], [], None, labels=RACKS)
    assert alone.unusable == {} and len(alone.slices or alone.nvidia) == 1
    nobody = dra.read([rack("rack-c", "c", 1)], [], None, labels=RACKS)
    assert not (nobody.slices or nobody.nvidia), "a slice no node read sees is used by no node"


class _CountingLabels(dict[str, dict[str, str]]):
    """Node labels that count how often each node's are looked up (once per selector a node is matched against)."""

    def __init__(self, labels: dict[str, dict[str, str]]) -> None:
        super().__init__(labels)
        self.asked: dict[str, int] = {}

    def get(self, key: str, default: Any = None) -> Any:
        self.asked[key] = self.asked.get(key, 0) + 1
        return super().get(key, default)


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_each_node_is_matched_against_each_selector_slice_once(driver: str) -> None:
    """`dra_pools.gather` asks once whether a node sees a selector slice (it used to ask again when listing what each
    node sees, allNodes slices included); the pool is judged as before."""
    def on_no_node(name: str, **spec: Any) -> dra_objects.WireResourceSlice:
        wire = pool_slice("x", [device(9)], name, 4, driver=driver, pool="p")
        if "node_selector" in spec:
            spec["node_selector"] = msgspec.convert(spec["node_selector"], dra_objects.WireNodeSelector)
        return msgspec.structs.replace(wire, spec=msgspec.structs.replace(wire.spec, node_name=None, **spec))

    def rack(value: str) -> dict[str, Any]:
        return {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": [value]}]}]}

    labels = _CountingLabels(RACKS)
    slices = [pooled("n1", "p", 4, driver), on_no_node("everyone", all_nodes=True),
              on_no_node("rack-a", node_selector=rack("a")), on_no_node("rack-b", node_selector=rack("b"))]
    objects = dra.read(slices, [], None, labels=labels)
    assert {node: labels.asked.get(node) for node in RACKS} == {"n1": 2, "n2": 2, "n3": 2, "n4": 2}
    assert objects.unusable_on == {(driver, "p"): ("n1", "n2", "n3", "n4")}, "3 of 4 on n1, 2 of 4 elsewhere"


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_a_slice_selecting_nodes_by_name_asks_only_those_nodes(driver: str) -> None:
    """A pool per node whose slice selects its node by ``metadata.name In`` costs each node one match, not one
    per pool (5,000 such pools were 25 million matches); a selector by labels keeps asking every node."""
    def selecting(pool: str, *terms: dict[str, Any]) -> dra_objects.WireResourceSlice:
        wire = pool_slice("x", [device(0)], f"{pool}-slice", 1, driver=driver, pool=pool)
        selector = msgspec.convert({"nodeSelectorTerms": list(terms)}, dra_objects.WireNodeSelector)
        return msgspec.structs.replace(wire, spec=msgspec.structs.replace(wire.spec, node_name=None,
                                                                          node_selector=selector))

    def named(*names: str) -> dict[str, Any]:
        return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}

    labels = _CountingLabels(RACKS)
    slices = [selecting("p1", named("n1")), selecting("p2", named("n2")), selecting("p3", named("gone"))]
    objects = dra.read(slices, [], None, labels=labels)
    asked = {node: count for node, count in labels.asked.items() if node}  # "": is it an allNodes slice
    assert asked == {"n1": 1, "n2": 1}, "each node matched once, against the one selector naming it"
    assert len(objects.slices or objects.nvidia) == 2, "p1 and p2 are seen (by n1, n2); p3 by no node read"
    labels = _CountingLabels(RACKS)
    by_labels = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["b"]}]}
    objects = dra.read([selecting("p", by_labels)], [], None, labels=labels)
    asked = {node: count for node, count in labels.asked.items() if node}
    assert asked == {"n1": 1, "n2": 1, "n3": 1, "n4": 1}, "a term by labels may match any node"
    assert len(objects.slices or objects.nvidia) == 1


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_a_hostile_node_selector_is_one_warning_and_matches_no_node(driver: str) -> None:
    """NVIDIA's slices are read unchecked, but a selector refused is warned about in our words, once."""
    hostile = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["a"]}]}]}
    wire = pool_slice("x", [device(0)], "bad", pool="p", driver=driver)
    wire = msgspec.structs.replace(wire, spec=msgspec.structs.replace(
        wire.spec, node_name=None, node_selector=msgspec.convert(hostile, dra_objects.WireNodeSelector)))
    warnings = Warnings()
    objects = dra.read([wire, pooled("n1", "p", 1, driver)], [], warnings, labels=RACKS)
    assert [(w, warnings.count(w)) for w in warnings if "bad" in w] == [(
        "ResourceSlice bad: spec.nodeSelector cannot be used (term 0: rack: Gt needs one integer value); "
        "it matches no node", 1)]
    kept = objects.slices if driver == OURS else objects.nvidia
    assert [s.name if isinstance(s, dra_objects.ResourceSlice) else s.metadata.name for s in kept] == ["n1-p"]
    assert objects.unusable == {}


def test_a_claim_on_a_device_of_no_one_node_is_not_counted_on_a_gpu_of_the_same_name() -> None:
    """A claim pinned to n1 by its node-local device also holds gpu-1 of a rack slice: that gpu-1 is not n1's
    (`shared_pools`), for our driver as for NVIDIA's."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}]}
    fabric = pool_slice("x", [device(1)], "fabric", pool="fabric")
    fabric = msgspec.structs.replace(fabric, spec=msgspec.structs.replace(
        fabric.spec, node_name=None, node_selector=msgspec.convert(selector, dra_objects.WireNodeSelector)))
    held = claim("a", [result("n1", "gpu-0"), result("fabric", "gpu-1", "8Gi")], ["a"], node="n1")
    warnings = Warnings()
    objects = dra.read([slice_("n1", [device(0), device(1)]), fabric], [held], warnings, labels=RACKS)
    nodes = dra.our_nodes(objects, warnings)
    records = dra.with_gpus([NodeRecord(name) for name in nodes], nodes)
    ledger = Ledger.build(records, dra.claim_records(objects, dra.units(records, nodes), {"uid-a": "Running"}))
    assert used(ledger, "n1") == {0: (4, 16), 1: (0, 16)}
    nv_fabric = msgspec.structs.replace(fabric, spec=msgspec.structs.replace(fabric.spec, driver=NVIDIA))
    nv_held = claim("a", [result("n1", "gpu-0", None, driver=NVIDIA), result("fabric", "gpu-1", None, driver=NVIDIA)],
                    ["a"], node="n1")
    objects = dra.read([slice_("n1", [device(0, "80Gi", ""), device(1, "80Gi", "")], driver=NVIDIA), nv_fabric],
                       [nv_held], Warnings(), labels=RACKS)
    nodes_nv = dra.nvidia_nodes(objects, {}, None)
    assert [(c.gpu, c.amount) for c in dra.nvidia_claims(objects, nodes_nv, {})["n1"]] == [(0, 81920)]


def test_an_unusable_pool_names_the_nodes_where_it_fails_and_is_unhealthy_only_there() -> None:
    """GatherPools judges per node: a pool over several nodes fails on some; the warning names them (a few)."""
    fine = pool_slice("ok", [device(0)], "ok", pool="p")
    twice = pool_slice("bad", [device(0), device(0)], "bad", pool="p")
    ledger, warnings, objects = view([fine, twice], [])
    assert pool_warnings(warnings) == [
        f"pool 'p' of {OURS} (node 'bad') is invalid: duplicate device name 'gpu-0'; {dra.UNUSABLE_EFFECT}"]
    assert ledger.free("ok") == {0: 16} and ledger.free("bad") == {}, "unhealthy where the pool fails only"
    many = [pool_slice(f"n{i}", [device(0)], f"n{i}", count=9, pool="p") for i in range(5)]
    _, warnings, objects = view(many, [])
    assert objects.unusable_on == {(OURS, "p"): ("n0", "n1", "n2", "n3", "n4")}
    assert pool_warnings(warnings)[0].startswith(
        f"pool 'p' of {OURS} (nodes 'n0', 'n1', 'n2' and 2 more) is incomplete (currently being updated): "
        "5 ResourceSlice(s) of generation 1, resourceSliceCount 9;")
    _, warnings, _ = view([pool_slice("n", [device(0)], "n", count=2)], [])
    assert pool_warnings(warnings)[0].startswith(f"pool 'n' of {OURS} is incomplete"), "its own node not repeated"


def test_nvidia_devices_of_an_unusable_pool_are_shown_once_and_unhealthy() -> None:
    slices = [slice_("nv", [device(0, "80Gi", ""), device(1, "80Gi", "")], NVIDIA, name="a"),
              slice_("nv", [device(0, "80Gi", "")], NVIDIA, name="b"), slice_("ok", [device(0, "80Gi", "")], NVIDIA)]
    warnings = Warnings()
    objects = dra.read(slices, [], warnings)
    nodes = dra.nvidia_nodes(objects, {}, warnings)
    assert [(g.id, g.healthy) for g in nodes["nv"].gpus] == [("gpu-0", False), ("gpu-1", False)]
    assert [g.healthy for g in nodes["ok"].gpus] == [True]
    assert list(objects.unusable) == [(NVIDIA, "nv")] and len(pool_warnings(warnings)) == 1


def test_devices_we_cannot_read_are_left_out_or_credit_nothing() -> None:
    ledger, warnings, _ = view(
        [slice_("n", [device(0, "-16Gi"), device("gpu-01"), device(1, "1e400"), device(2, "8Gi", "")])],
        [claim("on-bad", [result("n", "gpu-0", "4Gi")], ["a"]), claim("beyond", [result("n", "gpu-7", "2Gi")], ["b"])],
    )
    assert used(ledger, "n") == {0: (4, 0), 1: (0, 0), 2: (0, 8), 7: (2, 2)}, "a phantom GPU 7 credits nothing"
    assert ledger.free("n") == {0: -4, 1: 0, 2: 8}
    text = " ".join(warnings)
    assert "gpu-01" in text and "not gpu-<index>" in text and "not allocatable" in text


def test_a_tainted_gpu_is_unhealthy_and_claims_on_unknown_nodes_are_not_counted() -> None:
    taint = {"taints": [{"key": f"{OURS}/unhealthy", "effect": "NoSchedule"}]}
    ledger, _, _ = view([slice_("n", [device(0), device(1, **taint)])],
                        [claim("elsewhere", [result("gone", "gpu-0")], ["a"], node="gone")])
    record = ledger.node("n")
    assert record is not None and record.unhealthy == frozenset({1})
    assert ledger.pods() == []


def test_unreadable_slices_and_claims_are_one_warning_each() -> None:
    too_many = slice_("n", [device(i % 64) for i in range(200)])
    nameless = msgspec.convert({"metadata": {"namespace": "ns"}}, dra_objects.WireResourceClaim)
    _, warnings, objects = view([too_many], [nameless])
    assert objects.slices == [] and objects.claims == []
    assert [m.split(":")[0] for m in warnings] == ["ResourceSlice n-gpu-mem.kubectl-gpushare.io-1",
                                                   "a ResourceClaim without a valid metadata.name; not counted"]


def test_a_device_plugin_node_keeps_its_numbers_and_counts_claims_in_its_guessed_unit() -> None:
    plugin = NodeRecord("p", alloc_mem=30, alloc_count=2, cap_mem=30, cap_count=2)
    ledger, _, _ = view([slice_("p", [device(0)])], [claim("a", [result("p", "gpu-1", "2Gi")], ["a"])], [plugin])
    assert used(ledger, "p") == {0: (0, 15), 1: (2, 15)}
    record = ledger.node("p")
    assert record is not None and record.driver == ""


def test_nvidia_dra_gpus_are_whole_unless_shared() -> None:
    nvidia = [
        device(0, "80Gi", "", allowMultipleAllocations=None),
        device("gpu-0-mig-9-4-4", "40Gi", "", allowMultipleAllocations=None),
        device(1, "80Gi", ""),
    ]
    warnings = Warnings()
    objects = dra.read([slice_("nv", nvidia, driver=NVIDIA)], [
        claim("whole", [result("nv", "gpu-0", None, driver=NVIDIA)], ["a"]),
        claim("part", [result("nv", "gpu-1", "10Gi", driver=NVIDIA)], ["b"]),
        claim("ghost", [result("nv", "gpu-9", None, driver=NVIDIA)], ["c"]),
    ], warnings)
    nodes = dra.nvidia_nodes(objects, {"nv": "10.0.0.9"}, warnings)
    node = nodes["nv"]
    assert [(g.index, g.id, g.total, g.unit) for g in node.gpus] == [
        (0, "gpu-0", 1, "GPUs"), (1, "gpu-0-mig-9-4-4", 1, "GPUs"), (2, "gpu-1", 81920, "MiB")]
    assert (node.stack, node.ip, node.note) == (protocol.STACK_NVIDIA_DRA, "10.0.0.9", NVIDIA)
    claims = dra.nvidia_claims(objects, nodes, {})
    assert [(c.name, c.gpu, c.amount, c.unit) for c in claims["nv"]] == [
        ("a", 0, 1, "GPUs"), ("b", 2, 10240, "MiB"), ("c", PENDING, 1, "GPUs")]
    assert dra.nvidia_uuids(objects) == {"nv": {"GPU-gpu-0", "GPU-gpu-0-mig-9-4-4", "GPU-gpu-1"}}


# --- Field names against k8s.io/api (kubernetes/api 10b39a39, 2026-07-24) ------------------------------
RESOURCE_V1_JSON_TAGS = frozenset("""
adminAccess allNodes allocation allocationMode allocationTimestamp allowMultipleAllocations apiGroup attributes
bindingConditions bindingFailureConditions bindsToNode bool bools capacity capacityKey capacityMultiplier cel
conditions config constraints consumedCapacity consumesCounters controller count counterSet counters data
deallocationRequested default device deviceClassName deviceMultiplier deviceSelector devices distinctAttribute
driver effect exactly expression extendedResourceName firstAvailable generation hardwareAddress int interfaceName
ints ips items key mapping matchAttribute max metadata min name networkData nodeAllocatableResourceMappings
nodeAllocatableResources nodeName nodeSelector opaque operator overhead parameters partitionTypeAttribute
perContainer perDeviceNodeSelection perPod pool request requestPolicy requests reservedFor resource
resourceSliceCount results selectors shareID sharedCounters skipNodeOperations source spec status step string
strings suitableNodes taint taints timeAdded tolerationSeconds tolerations uid validRange validValues value version
versions
""".split())
"""Every ``json:"..."`` tag of k8s.io/api ``resource/v1/types.go``."""
META_JSON_TAGS = frozenset("""
apiVersion kind name namespace uid generateName annotations labels finalizers ownerReferences blockOwnerDeletion
controller matchFields matchExpressions nodeSelectorTerms operator values key
""".split())
"""ObjectMeta, OwnerReference and NodeSelector tags (k8s.io/apimachinery meta/v1, k8s.io/api core/v1)."""
POD_CLAIM_JSON_TAGS = frozenset({"resourceClaims", "resourceClaimStatuses", "resourceClaimName",
                                 "resourceClaimTemplateName", "claims", "name"})
"""k8s.io/api core/v1: PodSpec.resourceClaims, PodStatus.resourceClaimStatuses, ResourceRequirements.claims."""
MAPS = (("devices", "attributes"), ("devices", "capacity"), ("capacity", "requests"), ("consumedCapacity",),
        ("annotations",), ("labels",))
"""Fields (by the end of their path) whose keys are names the user or the driver chose, not field names."""


def _keys(value: object, path: tuple[str, ...] = ()) -> set[str]:
    found: set[str] = set()
    is_map = any(path[-len(end):] == end for end in MAPS)
    if isinstance(value, dict):
        for key, item in value.items():
            if not is_map:
                found.add(key)
            found |= _keys(item, (*path, "*" if is_map else key))
    elif isinstance(value, list):
        for item in value:
            found |= _keys(item, path)
    return found


def test_the_golden_clusters_dra_objects_use_upstream_field_names() -> None:
    kinds = ("ResourceSlice", "ResourceClaim")
    objects = [item for item in cases.cluster_objects("mixed-dra") if item["kind"] in kinds]
    assert objects
    unknown = set().union(*(_keys(item) for item in objects)) - RESOURCE_V1_JSON_TAGS - META_JSON_TAGS
    assert unknown == set()
    pods = [item for item in cases.cluster_objects("mixed-dra") if item.get("spec", {}).get("resourceClaims")]
    pod_keys = set().union(*(_keys({k: item[k]["resourceClaims" if k == "spec" else "resourceClaimStatuses"]}
                                   for k in ("spec", "status") if k in item) for item in pods))
    assert pod_keys - {"spec", "status"} <= POD_CLAIM_JSON_TAGS


def test_pod_claim_fields_decode_under_their_upstream_names() -> None:
    body = {"metadata": {"name": "p"}, "spec": {"resourceClaims": [
        {"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "c", "resourceClaimName": "shared"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}}
    pod = msgspec.json.decode(json.dumps(body), type=Pod)
    assert [(c.name, c.resource_claim_name, c.resource_claim_template_name) for c in pod.spec.resource_claims] == [
        ("gpu", None, "t"), ("c", "shared", None)]
    assert pod.status.resource_claim_statuses[0].resource_claim_name == "p-gpu-x"
    assert json.loads(msgspec.json.encode(pod))["spec"]["resourceClaims"][0] == {
        "name": "gpu", "resourceClaimTemplateName": "t"}


@pytest.mark.parametrize("hostile", [
    {"spec": {"driver": OURS, "devices": "not a list"}},
    {"metadata": {"name": "x" * 300}, "spec": {"driver": OURS}},
    {"metadata": {"name": "deep"}, "spec": {"driver": OURS, "pool": {"name": "n", "generation": -1,
                                                                      "resourceSliceCount": 1}, "nodeName": "n"}},
])
def test_hostile_slices_never_raise(hostile: dict[str, Any]) -> None:
    warnings = Warnings()
    try:
        wire = msgspec.convert(hostile, dra_objects.WireResourceSlice)
    except msgspec.ValidationError:
        return  # the list decoder skips such an item with a warning (kube.lenient)
    objects = dra.read([wire], [], warnings)
    assert objects.slices == [] and len(warnings) == 1


def test_a_file_decodes_an_allocated_claims_requests_only_while_it_waits() -> None:
    from kubectl_gpushare.inspect.source import dra_of

    def raw(body: dict[str, Any]) -> msgspec.Raw:
        return msgspec.Raw(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **body}).encode())

    meta = {"namespace": "ns", "uid": "u"}
    requests = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": protocol.DRA_DEVICE_CLASS, "capacity": {"requests": {"memory": "4Gi"}}}}]}}
    allocated = json.loads(msgspec.json.encode(claim("held", [result("n", "gpu-0")], ["a"], node="n")))
    broken_spec = {**allocated, "metadata": {"name": "broken", **meta}, "spec": {"devices": "not a claim spec"}}
    waits = {"metadata": {"name": "waits", **meta}, "spec": requests}
    found = {"ResourceSlice": [msgspec.Raw(msgspec.json.encode(slice_("n", [device(0)])))], "ResourceClaim": [
        raw({**allocated, "spec": requests}), raw(broken_spec), raw(waits),
        raw({"metadata": {"name": "bad", **meta}, "status": "not a status"})]}
    warnings = Warnings()
    objects = dra_of(found, warnings, pending=True)
    by_name = {c.name: c for c in objects.claims}
    assert list(by_name) == ["held", "broken", "waits"]  # the file's order; the allocated claims count
    assert by_name["held"].requests == () and by_name["broken"].allocation is not None
    assert dra.requested_memory(by_name["waits"]) == 4 * 2**30
    assert [m.split(":")[0] for m in warnings] == ["ResourceClaim ns/bad"]
    assert [c.name for c in dra_of(found, Warnings()).claims] == ["held", "broken"]


@pytest.mark.parametrize("tally", [False, True])
def test_other_drivers_allocated_claims_are_kept_to_resolve_pods_claims_and_counted_nowhere(tally: bool) -> None:
    from kubectl_gpushare.inspect.source import dra_of

    wire = claim("nic", [result("n", "nic-0", None, "nic.example.com")], ["b"], node="n")
    nic = json.loads(msgspec.json.encode(wire))
    nic["metadata"].update(deletionTimestamp="2020-01-01T00:00:00Z", ownerReferences=[
        {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "uid-b", "controller": True}])
    nameless = {**nic, "metadata": {"namespace": "ns"}}  # unreadable, another driver's: nothing said
    found = {"ResourceSlice": [msgspec.Raw(msgspec.json.encode(slice_("n", [device(0)])))], "ResourceClaim": [
        msgspec.Raw(msgspec.json.encode(claim("held", [result("n", "gpu-0")], ["a"], node="n"))),
        *(msgspec.Raw(json.dumps(item).encode()) for item in (nic, nameless))]}

    def read(resolve: bool) -> tuple[dra.DraObjects, list[str], list[tuple[str, tuple[tuple[int, int], ...]]]]:
        warnings = Warnings()
        objects = dra_of(found, warnings, classes=True, tally=tally, resolve=resolve)
        nodes = dra.our_nodes(objects, warnings)
        records = dra.claim_records(objects, dra.units(dra.with_gpus([NodeRecord("n")], nodes), nodes), {})
        return objects, list(warnings), [(r.name, r.allocation) for r in records]

    objects, warnings, records = read(True)
    assert (read(False)[1:], read(False)[0].others) == ((warnings, records), [])
    assert ([c.name for c in objects.claims], [c.name for c in objects.others]) == (["held"], ["nic"])
    assert (records, warnings) == ([("a", ((0, 4),))], [])
    other = objects.others[0]
    assert (other.deleting, other.owner_known, other.owner.uid if other.owner else None) == (
        (True, False, None) if tally else (True, True, "uid-b"))
    pod = msgspec.convert({"metadata": {"name": "b", "namespace": "ns", "uid": "uid-b"}, "spec": {
        "resourceClaims": [{"name": "nic", "resourceClaimName": "nic"}]}}, Pod)
    resolved = dra.claim_index(objects).of(pod)
    assert [(e.name, e.claim is other) for e in resolved] == [("nic", True)]
    assert dra.first_unusable(resolved) == dra.Unusable("nic", 'resourceclaim "nic" is being deleted',
                                                        refused='resourceclaim "nic" is being deleted')


def test_spec_problem_names_the_invalid_request_or_class_and_nothing_else() -> None:
    def claim(exactly: dict[str, Any]) -> dra_objects.ResourceClaim:
        return dra_objects.decode_claim({"metadata": {"name": "c", "namespace": "n"},
                                         "spec": {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}})

    negative = claim({"deviceClassName": "x", "count": -1})
    assert dra.spec_problem(negative, None).startswith("claim c: spec.devices.requests[0].exactly.count")
    plain = claim({"deviceClassName": "x"})
    broken = dra_objects.DeviceClass("x", invalid="spec.selectors[0]: too long")
    assert dra.spec_problem(plain, {"x": broken}) == "class x: spec.selectors[0]: too long"
    assert dra.spec_problem(plain, None) == ""
    assert dra.spec_problem(plain, {"x": dra_objects.DeviceClass("x")}) == ""


@pytest.mark.parametrize("driver", [OURS, NVIDIA])
def test_an_unusable_pool_with_hostile_names_forges_no_doctor_column(driver: str) -> None:
    """Slices' node and pool names are unchecked: doctor's object column (tab-separated) quotes a pool
    name that is not one, and names no node that is not one."""
    hostile = [pool_slice("n1\tERROR\tforged", [device(i)], f"s{i}", 3, driver=driver, pool="p\nERROR\tx")
               for i in range(2)]
    found = list(doctor_dra.pool_findings(dra.read(hostile, [], None)))
    assert [f.object for f in found] == [f"resourcepool/{driver}/'p\\nERROR\\tx'"]
    fine = [pool_slice("n1", [device(i)], f"s{i}", 3, driver=driver, pool="a.b/c") for i in range(2)]
    assert [f.object for f in doctor_dra.pool_findings(dra.read(fine, [], None))] == ["node/n1"]
    fine = [pool_slice(f"n{i}", [device(i)], f"s{i}", 3, driver=driver, pool="a.b/c") for i in range(2)]
    assert [f.object for f in doctor_dra.pool_findings(dra.read(fine, [], None))] == [f"resourcepool/{driver}/a.b/c"]
