"""Decoding resource.k8s.io/v1 objects once, with bounds: what is read, what is refused, what is distrusted."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare import protocol

DRIVER = protocol.DRA_DRIVER


def device(name: str = "gpu-0", memory: object = "16Gi", *, shared: bool = True, policy: Any = None,
           **extra: Any) -> dict[str, Any]:
    capacity: dict[str, Any] = {"value": memory}
    if policy is not None:
        capacity["requestPolicy"] = policy
    body: dict[str, Any] = {"name": name, "attributes": {"index": {"int": 0}, "uuid": {"string": "GPU-1"},
                                                         "driverVersion": {"version": "550.54.15"}},
                            "capacity": {"memory": capacity}, **extra}
    if shared:
        body["allowMultipleAllocations"] = True
    return body


GIB_POLICY = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}


def slice_body(*devices: dict[str, Any], node: str = "n1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-slice"},
            "spec": {"driver": DRIVER, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "nodeName": node, "devices": list(devices), **spec}}


def claim_body(memory: object = "4Gi", *, status: Any = None, **exactly: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": DRIVER, **exactly}
    if memory is not None:
        request["capacity"] = {"requests": {"memory": memory}}
    body: dict[str, Any] = {"metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
                            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}
    if status is not None:
        body["status"] = status
    return body


def test_a_slice_of_shared_gpus_reads_attributes_capacity_and_policy() -> None:
    got = dra.decode_slice(slice_body(device(policy=GIB_POLICY)))
    assert (got.name, got.driver, got.pool, got.node_name, got.generation) == ("n1-slice", DRIVER, "n1", "n1", 1)
    gpu = got.devices[0]
    assert gpu.invalid == "" and gpu.allow_multiple_allocations
    assert gpu.attributes["index"] == 0 and gpu.attributes["uuid"] == "GPU-1"
    assert gpu.attributes["driverVersion"] == dra.parse_version("550.54.15")
    memory = gpu.capacity["memory"]
    assert memory.value.text == "16Gi" and memory.value.value == 16 * 2**30 and memory.value.binary
    assert memory.request_policy is not None and memory.request_policy.valid_range is not None
    assert memory.request_policy.valid_range.step == dra.read_quantity("1Gi")
    assert got.allocatable_on("n1") and not got.allocatable_on("n2")


def test_json_bytes_and_mappings_decode_the_same() -> None:
    body = slice_body(device(policy=GIB_POLICY))
    assert dra.decode_slice(json.dumps(body).encode()) == dra.decode_slice(body)


@pytest.mark.parametrize(("bad", "reason"), [
    (device(memory="-16Gi"), "negative"),
    (device(memory="1e400"), "out of range"),
    (device(memory="16 Gigs"), "invalid quantity"),
    (device(memory=True), "not a quantity"),
    (device(name="GPU_0"), "not a DNS label"),
    (device(policy={"validRange": {"min": "1Gi", "step": "1Gi"}}), "default must be within validRange"),
    (device(policy={"default": "1Gi", "validRange": {"min": "1Gi", "step": "0"}}), "step must be at least 1"),
    (device(policy={"default": "1Gi", "validValues": ["4Gi", "2Gi"]}), "sorted"),
    (device(policy={"default": "3Gi", "validValues": ["1Gi", "2Gi"]}), "one of validValues"),
    (device(policy={"default": "1Gi", "validRange": {"min": "1Gi", "max": "32Gi"}}), "min <= max <= capacity"),
    (device(policy=GIB_POLICY, shared=False), "does not allow multiple allocations"),
    (device(consumesCounters=[{"counterSet": "x", "counters": {}}]), "not supported here"),
    ({**device(), "attributes": {f"a{i}": {"int": i} for i in range(40)}}, "more than 32"),
    ({**device(), "attributes": {"index": {"int": 1, "string": "x"}}}, "exactly one value"),
    ({**device(), "attributes": {"index": {"int": 2**63}}}, "int attribute outside int64"),
    ({**device(), "attributes": {"index": {"int": -(2**63) - 1}}}, "int attribute outside int64"),
    ({**device(), "attributes": {"uuid": {"string": "x" * 65}}}, "longer than 64 characters"),
    ({**device(), "attributes": {"index": {"int": 1, "ints": [1]}}}, "exactly one value"),
    ({**device(), "attributes": {"uuid": {"string": "x", "bool": True}}}, "exactly one value"),
    ({**device(), "attributes": {"driverVersion": {"version": "v550"}}}, "not a semantic version"),
    ({**device(), "attributes": {"bad name!": {"int": 1}}}, "not a qualified name"),
])
def test_a_bad_device_is_kept_invalid_and_warned_the_others_still_count(bad: dict[str, Any], reason: str) -> None:
    got = dra.decode_slice(slice_body(device("gpu-0"), {**bad, "name": "GPU_0" if bad["name"] == "GPU_0" else "gpu-1"}))
    good, broken = got.devices
    assert good.invalid == "" and good.capacity
    assert reason in broken.invalid and not broken.capacity
    assert len(got.problems) == 1 and reason in got.problems[0] and "\n" not in got.problems[0]


@pytest.mark.parametrize("value", [{"int": 2**63 - 1}, {"int": -(2**63)}, {"int": 0}, {"string": "x" * 64},
                                   {"string": ""}, {"bool": False}, {"ints": [1, 2]}])
def test_an_attribute_of_one_value_within_bounds_is_read_as_that_value(value: dict[str, Any]) -> None:
    got = dra.decode_slice(slice_body({**device(), "attributes": {"a": value}})).devices[0]
    (wanted,) = value.values()
    assert got.invalid == "" and got.attributes["a"] == (tuple(wanted) if isinstance(wanted, list) else wanted)


def test_pool_generations_judge_what_a_node_sees_as_gather_pools_does() -> None:
    """pools_experimental.go GatherPools: a node's slices are the pool when they are resourceSliceCount; else
    checkSlicesInPool reads the whole pool: a newer generation makes them obsolete, and the generation is
    ``IsIncomplete`` unless it has exactly resourceSliceCount slices (the first's)."""
    pools = dra.PoolGenerations([("d", "a", 1), ("d", "a", 2), ("d", "a", 2), ("d", "b", 3), ("d", "b", 3),
                                 ("d", "c", 0)])
    used, incomplete, obsolete = dra.PoolView.USED, dra.PoolView.INCOMPLETE, dra.PoolView.OBSOLETE
    assert pools.judge("d", "a", 1, 5, 5) is used, "complete on the node: another node's newer generation aside"
    assert pools.judge("d", "a", 1, 1, 5) is obsolete
    assert [pools.judge("d", "a", 2, 1, 2), pools.judge("d", "b", 3, 1, 1), pools.judge("d", "b", 3, 2, 1),
            pools.judge("d", "c", 0, 1, 2)] == [used, used, incomplete, incomplete]
    assert pools.judge("d", "unknown", 0, 1, 2) is incomplete, "a pool never counted: the node's slices are all"


def test_a_repeated_device_name_is_not_allocatable() -> None:
    got = dra.decode_slice(slice_body(device("gpu-0"), device("gpu-0")))
    assert got.devices[0].invalid == "" and "duplicate" in got.devices[1].invalid
    assert got.repeated == "gpu-0" and dra.repeated_device([got]) == "gpu-0", "GatherPools: the pool is invalid"
    one, other = dra.decode_slice(slice_body(device("gpu-0"))), dra.decode_slice(slice_body(device("gpu-1")))
    assert (one.repeated, dra.repeated_device([one]), dra.repeated_device(iter([one, other]))) == ("", None, None)
    assert dra.repeated_device([one, other, one]) == "gpu-0", "over the slices of one pool"


@pytest.mark.parametrize(("body", "reason"), [
    ({"metadata": {}, "spec": {}}, "without a valid metadata.name"),
    ({"metadata": {"name": "s"}, "spec": {"devices": "many"}}, "cannot be decoded"),
    ({"metadata": {"name": "s"}, "spec": {"driver": "Not A Driver"}}, "is not a driver name"),
    (slice_body(*[device(f"gpu-{i}") for i in range(129)]), "more than 128 devices"),
    (slice_body(allNodes=True), "exactly one of nodeName"),
    ({**slice_body(), "spec": {**slice_body()["spec"], "pool": {"name": "p", "generation": -1,
                                                                "resourceSliceCount": 1}}}, "generation >= 0"),
])
def test_an_unreadable_slice_is_one_line_naming_it(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(dra.InvalidObjectError, match=reason) as raised:
        dra.decode_slice(body)
    assert "\n" not in str(raised.value)


def test_json_nested_past_the_decoder_is_refused_not_a_crash() -> None:
    deep = b'{"metadata":{"name":"x","namespace":"y"},"spec":{"devices":{"config":[' + b"[" * 100_000
    deep += b"]" * 100_000 + b"]}}}"
    with pytest.raises(dra.InvalidObjectError, match="cannot be decoded"):
        dra.decode_claim(deep)
    with pytest.raises(dra.InvalidObjectError, match="cannot be decoded"):
        dra.decode_claim(b"\xff not json")


def test_an_undecodable_object_is_named_by_the_key_its_caller_knows_else_by_its_metadata() -> None:
    # A reply about a claim asked for by name: the error names that claim, as the views name one that
    # does not decode (``ResourceClaim ns/name: cannot be decoded``), whatever the bytes say.
    with pytest.raises(dra.InvalidObjectError) as raised:
        dra.decode_wire(b'{"metadata": 1}', dra.WireResourceClaim, "ResourceClaim", "ml/asked")
    assert str(raised.value) == ("ResourceClaim ml/asked: cannot be decoded (Expected `object`, got `int` - at "
                                 "`$.metadata`)")
    with pytest.raises(dra.InvalidObjectError) as raised:
        dra.decode_wire(b'{"metadata": 1}', dra.WireResourceClaim, "ResourceClaim")
    assert str(raised.value).startswith("a ResourceClaim: cannot be decoded (")
    with pytest.raises(dra.InvalidObjectError) as raised:
        dra.decode_wire({"metadata": {"name": "c", "namespace": "ml"}, "spec": 5}, dra.WireResourceClaim,
                        "ResourceClaim")
    assert str(raised.value).startswith("ResourceClaim ml/c: cannot be decoded (")


@pytest.mark.parametrize("body", [b'{"metadata":{"name":"\xff\xfe"}}', b'{"metadata":{"name":"c","namespace":"n"},'
                                  b'"spec":{"devices":{"requests":[{"name":"\xc3"}]}}}'])
def test_a_string_that_is_not_utf8_is_refused_not_a_crash(body: bytes) -> None:
    with pytest.raises(dra.InvalidObjectError, match="cannot be decoded"):
        dra.decode_slice(body)
    with pytest.raises(dra.InvalidObjectError, match="cannot be decoded"):
        dra.decode_claim(body)


def test_a_claim_reads_requests_allocation_node_and_consumers() -> None:
    status = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1",
                                                      "device": "gpu-0", "shareID": "s-1",
                                                      "consumedCapacity": {"memory": "4Gi"}}]},
                             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                 {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
              "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]}
    got = dra.decode_claim(claim_body(status=status, selectors=[{"cel": {"expression": "true"}}]))
    assert got.key == "ns/c" and got.spec_invalid == "" and got.unsupported == ""
    exactly = got.requests[0].exactly
    assert exactly is not None and exactly.count == 1 and exactly.allocation_mode == dra.MODE_EXACT_COUNT
    assert exactly.capacity == {"memory": dra.read_quantity("4Gi")} and exactly.selectors == ("true",)
    assert got.allocation is not None and got.allocation.node_name == "n1"
    result = got.allocation.results[0]
    assert (result.pool, result.device, result.share_id) == ("n1", "gpu-0", "s-1")
    assert result.consumed_capacity == {"memory": dra.read_quantity("4Gi")}
    assert got.reserved_for == (dra.Consumer("pods", "p", "pu"),)


@pytest.mark.parametrize(("body", "reason"), [
    (claim_body("-4Gi"), "negative"),
    (claim_body("9Ei"), "out of range"),
    (claim_body(count=-1), "must be greater than zero"),
    (claim_body(allocationMode="Some"), "Unsupported value"),
    (claim_body(allocationMode="All", count=2), "must not be specified"),
    (claim_body(selectors=[{"cel": {"expression": ""}}]), "Required value"),
    (claim_body(selectors=[{}]), "Required value"),
    (claim_body(deviceClassName=""), "deviceClassName: Required value"),
])
def test_a_claim_whose_requests_cannot_be_read_says_why_in_one_line(body: dict[str, Any], reason: str) -> None:
    got = dra.decode_claim(body)
    assert reason in got.spec_invalid and "\n" not in got.spec_invalid


def test_features_not_allocated_here_are_named_not_guessed() -> None:
    body = claim_body()
    body["spec"]["devices"]["requests"].append(
        {"name": "alt", "firstAvailable": [{"name": "a", "deviceClassName": DRIVER}]})
    body["spec"]["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/uuid"}]
    got = dra.decode_claim(body)
    assert got.spec_invalid == ""
    assert "firstAvailable" in got.unsupported and "constraints" in got.unsupported
    assert got.requests[1] == dra.DeviceRequest("alt")


def test_an_unreadable_consumed_capacity_counts_as_the_whole_device() -> None:
    status = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0", "shareID": "a",
         "consumedCapacity": {"memory": "-40Gi"}},
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-1", "shareID": "b",
         "consumedCapacity": {"memory": "2Gi"}}]}}}
    got = dra.decode_claim(claim_body(status=status))
    assert got.allocation is not None
    bad, good = got.allocation.results
    assert bad.consumed_capacity is None and "negative" in bad.invalid
    assert good.consumed_capacity == {"memory": dra.read_quantity("2Gi")}
    assert len(got.problems) == 1 and "whole device" in got.problems[0]


def test_templates_and_classes_decode() -> None:
    template = dra.decode_template({"metadata": {"name": "t", "namespace": "ns"},
                                    "spec": {"metadata": {"annotations": {"a": "b"}},
                                             "spec": claim_body()["spec"]}})
    assert template.name == "t" and template.claim.annotations == {"a": "b"}
    assert template.claim.requests[0].exactly is not None
    klass = dra.decode_class({"metadata": {"name": DRIVER},
                              "spec": {"selectors": [{"cel": {"expression": protocol.DRA_DEVICE_CLASS_SELECTOR}}]}})
    assert klass.selectors == (protocol.DRA_DEVICE_CLASS_SELECTOR,) and klass.invalid == ""
    broken = dra.decode_class({"metadata": {"name": "x"}, "spec": {"selectors": [{}]}})
    assert "Required value" in broken.invalid


@pytest.mark.parametrize(("name", "found"), [("memory", True), (f"{DRIVER}/memory", True), ("other.io/memory", False)])
def test_capacity_names_resolve_with_the_drivers_domain(name: str, found: bool) -> None:
    gpu = dra.decode_slice(slice_body(device())).devices[0]
    assert (dra.lookup_capacity(gpu, name, DRIVER) is not None) is found


@pytest.mark.parametrize(("a", "b", "order"), [
    ("1.0.0", "2.0.0", -1), ("1.10.0", "1.9.0", 1), ("1.0.0-alpha", "1.0.0", -1), ("1.0.0-alpha.1", "1.0.0-alpha", 1),
    ("1.0.0-alpha.beta", "1.0.0-alpha.1", 1), ("1.0.0+build", "1.0.0", 0), ("1.0.0-2", "1.0.0-10", -1),
])
def test_versions_compare_by_semver_precedence(a: str, b: str, order: int) -> None:
    left, right = dra.parse_version(a), dra.parse_version(b)
    assert left is not None and right is not None
    assert dra.compare_versions(left, right) == order and dra.compare_versions(right, left) == -order


@pytest.mark.parametrize(("millis", "binary", "text"), [
    (4 * 2**30 * 1000, True, "4Gi"), (1536 * 1000, True, "1536"), (1500, False, "1500m"), (0, True, "0"),
    (10**12 * 1000, False, "1T"), (2**20 * 1000, True, "1Mi"), (2**20 * 1000, False, "1048576"),
])
def test_computed_quantities_print_as_go_does(millis: int, binary: bool, text: str) -> None:
    assert dra.quantity_from_millis(millis, binary).text == text


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=30))
def test_garbage_anywhere_in_a_claim_is_refused_or_read_never_a_crash(garbage: object) -> None:
    for path in (("spec",), ("spec", "devices"), ("status",), ("status", "allocation"), ("metadata", "labels")):
        body = claim_body(status={"allocation": {"devices": {"results": []}}})
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = garbage
        try:
            got = dra.decode_claim(body)
        except dra.InvalidObjectError as exc:
            assert "\n" not in str(exc)
            continue
        assert isinstance(got, dra.ResourceClaim)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from(["", "m", "Ki", "Mi", "Gi", "k", "G", "e3"]))
def test_any_quantity_is_read_non_negative_and_round_trips_or_is_refused(number: int, suffix: str) -> None:
    text = f"{number}{suffix}"
    try:
        got = dra.read_quantity(text)
    except ValueError:
        return
    assert got.millis >= 0 and protocol.parse_milli_quantity(got.text) == got.millis


def test_wire_structs_name_the_upstream_go_fields() -> None:
    """The JSON names the wire structs decode are those of k8s.io/api resource/v1 (json tags)."""
    names = {f.encode_name for f in msgspec.structs.fields(dra.WireResult)}
    assert names == {"request", "driver", "pool", "device", "adminAccess", "shareID", "consumedCapacity"}
    names = {f.encode_name for f in msgspec.structs.fields(dra.WireExactRequest)}
    assert names == {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
                     "capacity"}
    names = {f.encode_name for f in msgspec.structs.fields(dra.WireDevice)}
    assert {"allowMultipleAllocations", "consumesCounters", "bindingConditions"} <= names
    names = {f.encode_name for f in msgspec.structs.fields(dra.WireRequestPolicy)}
    assert names == {"default", "validValues", "validRange"}
    names = {f.encode_name for f in msgspec.structs.fields(dra.WirePool)}
    assert names == {"name", "generation", "resourceSliceCount"}


def test_repeated_capacities_are_checked_alike_and_quantities_of_another_type_are_not_confused() -> None:
    """A policy is checked once per distinct capacity (`_ranged_capacity`); ``1``, ``1.0`` and ``True`` stay apart."""
    one = {"default": 1, "validRange": {"min": 1, "step": 1}}
    truth = {"default": True, "validRange": {"min": True, "step": True}}
    got = dra.decode_slice(slice_body(
        device("gpu-0", 1, policy=one), device("gpu-1", True, policy=truth), device("gpu-2", 1.0, policy=one),
        device("gpu-3", "16Gi", policy=GIB_POLICY), device("gpu-4", "16Gi", policy={**GIB_POLICY, "default": "1.5Gi"}),
        device("gpu-5", "16Gi", policy=GIB_POLICY)))
    invalid = {d.name: d.invalid for d in got.devices}
    assert not invalid["gpu-0"] and not invalid["gpu-2"] and not invalid["gpu-3"] and not invalid["gpu-5"]
    assert invalid["gpu-1"] and "multiple of step" in invalid["gpu-4"]
    assert got.devices[3].capacity == got.devices[5].capacity
    assert got.devices[3].capacity["memory"].request_policy.valid_range.step.value == 2**30  # type: ignore[union-attr]


def _with(body: dict[str, Any], part: str, **fields: Any) -> dict[str, Any]:
    return {**body, part: {**body[part], **fields}}


_OURS = _with(slice_body(device()), "metadata", uid="u1", resourceVersion="7")


@pytest.mark.parametrize(("body", "expected"), [
    (_OURS, dra.SliceIdentity("n1-slice", "u1", "7", DRIVER, "n1")),
    (_with(_OURS, "spec", devices="garbage", pool=5), dra.SliceIdentity("n1-slice", "u1", "7", DRIVER, "n1")),
    (_with(_OURS, "metadata", labels=[1], ownerReferences="x"), dra.SliceIdentity("n1-slice", "u1", "7", DRIVER, "n1")),
    (_with(_OURS, "spec", nodeName=None, allNodes=True), dra.SliceIdentity("n1-slice", "u1", "7", DRIVER, "")),
    (_with(_OURS, "spec", driver=5), None),
    (_with(_OURS, "spec", nodeName={"name": "n1"}), None),
    (_with(_OURS, "metadata", name=7), None),
    (_with(_OURS, "metadata", name="../x"), None),
    (_with(_OURS, "metadata", name=""), None),
    (_with(_OURS, "metadata", namespace="a"), None),
    ({**_OURS, "spec": "garbage"}, None),
    ([_OURS], None),
], ids=["whole", "garbage-devices-and-pool", "garbage-metadata-elsewhere", "no-node", "driver-int", "node-object",
        "name-int", "name-no-path-segment", "no-name", "namespaced", "spec-string", "not-an-object"])
def test_a_slice_says_whose_it_is_past_garbage_elsewhere_or_not_at_all(body: Any, expected: Any) -> None:
    assert dra.slice_identity(msgspec.json.encode(body)) == expected


def test_a_slice_nested_past_the_decoder_has_no_identity_and_bytes_that_are_not_json_neither() -> None:
    deep = b'{"metadata":{"name":"s"},"spec":{"devices":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    assert dra.slice_identity(deep) is None  # msgspec recurses to skip it: unreadable, so left alone
    assert dra.slice_identity(b"\xff\xfe") is None
    assert dra.slice_identity(b"<html>") is None


def test_a_slice_is_published_by_the_driver_and_node_its_own_fields_name() -> None:
    ours = dra.SliceIdentity("s", "", "", DRIVER, "n1")
    assert ours.published_by(DRIVER, "n1")
    assert not ours.published_by(DRIVER, "n2")
    assert not ours.published_by("other.example.com", "n1")


@pytest.mark.parametrize("before", [0, 64, 10_000])
def test_a_claims_controller_is_its_first_controller_reference_however_many_come_before(before: int) -> None:
    # apimachinery metav1 GetControllerOfNoCopy (IsControlledBy, which resourceclaim.IsForPod asks for
    # kube-scheduler and kubelet) scans every ownerReferences entry for the first with controller true.
    # Before, only the first 64 were read: a pod's claim whose controller came later was "not created for
    # pod" in explain and doctor, while kube-scheduler used it.
    body = claim_body()
    body["metadata"]["ownerReferences"] = [
        *({"apiVersion": "v1", "kind": "ConfigMap", "name": f"o{i}", "uid": f"o{i}"} for i in range(before)),
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True},
        {"apiVersion": "v1", "kind": "Pod", "name": "q", "uid": "later-uid", "controller": True}]
    owner = dra.decode_claim(body).owner
    assert owner is not None and (owner.kind, owner.uid) == ("Pod", "pod-uid")
