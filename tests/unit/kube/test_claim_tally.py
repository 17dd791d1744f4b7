"""Claims read for counting only (`dra_objects.tally_claim`) count exactly as claims read whole, hostile ones too."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.inspect.source import dra_of
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks import dra

OURS = protocol.DRA_DRIVER
NODES = ("n1", "n2")


def slice_raw(node: str) -> msgspec.Raw:
    devices = [{"name": f"gpu-{i}", "capacity": {"memory": {"value": "16Gi", "requestPolicy": {
        "default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}}, "allowMultipleAllocations": True}
        for i in range(2)]
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-s"},
            "spec": {"driver": OURS, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": node, "devices": devices}}
    return msgspec.Raw(json.dumps(body).encode())


def selector(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def claim_raw(name: str, results: list[dict[str, Any]], pods: list[dict[str, Any]], node_selector: object = None,
              namespace: str = "ns", allocated: bool = True, deleting: bool = False) -> msgspec.Raw:
    status: dict[str, Any] = {"reservedFor": pods}
    if allocated:
        status["allocation"] = {"devices": {"results": results}}
        if node_selector is not None:
            status["allocation"]["nodeSelector"] = node_selector
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": f"claim-{name}",
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}},
            "status": status}
    if deleting:  # a finalizer keeps it
        body["metadata"] |= {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["example.com/keep"]}
    return msgspec.Raw(json.dumps(body).encode())


def pod_ref(name: str, **extra: Any) -> dict[str, Any]:
    return {"resource": "pods", "name": name, "uid": f"uid-{name}", **extra}


def counted(claims: list[msgspec.Raw], tally: bool) -> tuple[list[Any], list[str], list[str], list[bool]]:
    """(records, warnings, claim names, whether each is being deleted) of one reading, tallied or read whole."""
    warnings = Warnings()
    found = {"ResourceSlice": [slice_raw(node) for node in NODES], "ResourceClaim": claims}
    objects = dra_of(found, warnings, pending=True, tally=tally)
    units = {node: (protocol.UNIT_GIB, {0: 16, 1: 16}) for node in NODES}
    records = dra.claim_records(objects, units, {"uid-a": "Running", "uid-b": "Pending"})
    return ([msgspec.structs.asdict(r) for r in records], list(warnings), [c.name for c in objects.claims],
            [c.deleting for c in objects.claims])


def both(claims: list[msgspec.Raw]) -> tuple[list[Any], list[str], list[str]]:
    """The records, warnings and claim names, the same read whole or tallied (and which claims are being deleted)."""
    whole = counted(claims, tally=False)
    assert counted(claims, tally=True) == whole
    return whole[:3]


def result(device: str = "gpu-0", memory: object = "4Gi", node: str = "n1", **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": OURS, "pool": node, "device": device, "shareID": "s",
            "consumedCapacity": {"memory": memory}, **extra}


def test_plain_claims_count_the_same_and_a_pod_with_two_claims_sums_them() -> None:
    records, warnings, names = both([
        claim_raw("c1", [result()], [pod_ref("a")], selector("n1")),
        claim_raw("c2", [result("gpu-1", "2Gi")], [pod_ref("a")], selector("n1")),
        claim_raw("c3", [result(node="n2")], [pod_ref("b")]),
    ])
    assert warnings == [] and names == ["c1", "c2", "c3"]
    by_name = {r["name"]: r for r in records}
    assert by_name["a"]["allocation"] == ((0, 4), (1, 2)) and by_name["a"]["claim"] == "c1,c2"
    assert by_name["b"]["node"] == "n2" and by_name["b"]["request"] == 4


def test_claims_read_whole_where_tallying_would_lose_something() -> None:
    """Each of these is read whole (its warning, its truncation, its whole-device count) either way."""
    records, warnings, _ = both([
        claim_raw("long-share", [result(shareID="x" * 65)], [pod_ref("a")]),
        claim_raw("bad-qty", [result(memory="-4Gi")], [pod_ref("b")]),
        claim_raw("int-qty", [result(memory=4 * 2**30)], [pod_ref("c")]),
        claim_raw("null-selector", [result()], [pod_ref("d")], None),
        claim_raw("odd-selector", [result()], [pod_ref("e")], {"nodeSelectorTerms": "no"}),
        claim_raw("many", [result()] * 33, [pod_ref("f")]),
        claim_raw("x" * 254, [result()], [pod_ref("g")]),
        claim_raw("no-ns", [result()], [pod_ref("h")], namespace=""),
        claim_raw("long-consumer", [result()], [pod_ref("i" * 254)]),
        claim_raw("two-pods", [result()], [pod_ref("j"), pod_ref("k")]),
        claim_raw("admin", [result(adminAccess=True)], [pod_ref("l")]),
        claim_raw("unallocated", [], [], allocated=False),
    ])
    shown = {r["name"]: r for r in records}
    assert set(shown) >= {"a", "b", "c", "d", "f", "two-pods"} and "e" not in shown and "l" not in shown
    assert shown["a"]["request"] == shown["b"]["request"] == 16  # invalid results count the whole GPU
    assert shown["c"]["request"] == 4
    warned = " ".join(warnings)
    assert "ns/odd-selector: cannot be decoded" in warned and "more than 32 allocation results" in warned


@pytest.mark.parametrize(("field", "value"), [
    ("labels", 5), ("annotations", {"a": 5}), ("finalizers", [1]), ("ownerReferences", "x"),
    ("deletionTimestamp", 5), ("creationTimestamp", 5), ("resourceVersion", 5), ("generateName", 5),
])
def test_a_claim_whose_metadata_the_whole_reading_refuses_is_refused_tallied_too(field: str, value: object) -> None:
    """The tally decodes no more of the metadata than it counts by, but checks all of it: else a view
    would count (silently) what doctor and explain skip (with a warning)."""
    body = json.loads(bytes(claim_raw("odd", [result()], [pod_ref("a")], selector("n1"))))
    body["metadata"][field] = value
    records, warnings, names = both([msgspec.Raw(json.dumps(body).encode())])
    assert (records, names) == ([], [])
    assert warnings and "ns/odd: cannot be decoded" in warnings[0] and field in warnings[0]


def test_an_unallocated_claim_is_read_whole_for_what_it_asks_an_allocated_one_for_counting() -> None:
    raws = [claim_raw("held", [result()], [pod_ref("a")], selector("n1")), claim_raw("waits", [], [], allocated=False)]
    objects = dra_of({"ResourceClaim": raws, "ResourceSlice": [slice_raw("n1")]}, Warnings(), pending=True, tally=True)
    held, waits = objects.claims
    assert held.allocation is not None and not held.annotations  # read for counting only
    assert waits.allocation is None and waits.requests and waits.annotations  # asked what it requests
    both(raws)


names = st.sampled_from(["a", "b", "", "x" * 254, "ü"])
quantities = st.one_of(st.sampled_from(["1Gi", "4Gi", "0", "-1Gi", "1e999", "1.5Gi", "", "16Gi", "١Gi"]),
                       st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.booleans())
results = st.fixed_dictionaries({
    "request": st.sampled_from(["gpu", "r" * 129]),
    "driver": st.sampled_from([OURS, protocol.NVIDIA_DRA_DRIVER, "other.example.com", "d" * 64]),
    "pool": st.sampled_from([*NODES, "gone", "p" * 254]),
    "device": st.sampled_from(["gpu-0", "gpu-1", "gpu-9", "cpu", "gpu-01"]),
}, optional={
    "shareID": st.sampled_from(["s", "s" * 65]),
    "consumedCapacity": st.dictionaries(st.sampled_from(["memory", f"{OURS}/memory", "cores"]), quantities,
                                        max_size=2),
    "adminAccess": st.booleans(),
})
consumers = st.fixed_dictionaries({"resource": st.sampled_from(["pods", "jobs"]), "name": names,
                                   "uid": st.sampled_from(["uid-a", "uid-b", "", "u" * 65])},
                                  optional={"apiGroup": st.sampled_from(["", "batch"])})
selectors = st.one_of(st.none(), st.sampled_from(NODES).map(selector), st.just({"nodeSelectorTerms": []}),
                      st.just([1, 2]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, st.lists(results, max_size=3), st.lists(consumers, max_size=3), selectors,
                          st.booleans(), st.booleans()), max_size=6),
       )
def test_any_claims_count_the_same_read_whole_or_tallied(claims: list[Any]) -> None:
    raws = [claim_raw(name or "", found, pods, node_selector, allocated=allocated, deleting=deleting)
            for name, found, pods, node_selector, allocated, deleting in claims]
    both(raws)


def test_the_tally_decoder_reads_what_it_declares() -> None:
    wire = msgspec.json.decode(bytes(claim_raw("c", [result()], [pod_ref("a")], selector("n1"))),
                               type=dra_objects.WireTallyClaim)
    claim = dra_objects.tally_claim(wire, {})
    assert claim is not None and claim.allocation is not None
    assert (claim.key, claim.uid, claim.allocation.node_name) == ("ns/c", "claim-c", "n1")
    assert claim.reserved_for == (dra_objects.Consumer("pods", "a", "uid-a"),) and not claim.deleting


def test_a_claim_being_deleted_is_tallied_as_being_deleted() -> None:
    """kube-scheduler's PreFilter refuses a pod whose claim is being deleted (`dra_allocation.prefilter`):
    doctor, which reads allocated claims for counting, must still see that."""
    raw = claim_raw("c", [result()], [pod_ref("a")], selector("n1"), deleting=True)
    claim = dra_objects.tally_claim(msgspec.json.decode(bytes(raw), type=dra_objects.WireTallyClaim), {})
    assert claim is not None and claim.deleting
    both([raw])
