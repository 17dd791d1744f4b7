"""The resource.k8s.io/v1 wire structs speak the upstream JSON names (k8s.io/api resource/v1 types.go at
10b39a39, core/v1 for the pod's claims): every wire name a struct declares is a JSON tag of its Go type,
and what the DRA driver writes with them holds only the fields it sets."""

from __future__ import annotations

import msgspec
import pytest

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.kube import types

# Go type -> (the struct here, its JSON tags from types.go: the ones a struct here may use).
UPSTREAM: dict[str, tuple[type[msgspec.Struct], set[str]]] = {
    "ResourceSliceSpec": (dra.WireSliceSpec, {
        "driver", "pool", "nodeName", "nodeSelector", "allNodes", "devices", "perDeviceNodeSelection",
        "sharedCounters", "partitionTypeAttribute", "skipNodeOperations"}),
    "ResourcePool": (dra.WirePool, {"name", "generation", "resourceSliceCount"}),
    "Device": (dra.WireDevice, {
        "name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints",
        "bindsToNode", "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations",
        "nodeAllocatableResources"}),
    "DeviceCapacity": (dra.WireCapacity, {"value", "requestPolicy"}),
    "CapacityRequestPolicy": (dra.WireRequestPolicy, {"default", "validValues", "validRange"}),
    "CapacityRequestPolicyRange": (dra.WireRange, {"min", "max", "step"}),
    "DeviceAttribute": (dra.WireAttribute, {"int", "bool", "string", "version", "ints", "bools", "strings",
                                            "versions"}),
    "DeviceTaint": (dra.WireTaint, {"key", "value", "effect", "timeAdded"}),
    "ResourceSlice": (dra.WireResourceSlice, {"metadata", "spec"}),
    "ResourceClaim": (dra.WireResourceClaim, {"metadata", "spec", "status"}),
    "ResourceClaimSpec": (dra.WireClaimSpec, {"devices"}),
    "DeviceClaim": (dra.WireDeviceClaim, {"requests", "constraints", "config"}),
    "DeviceRequest": (dra.WireRequest, {"name", "exactly", "firstAvailable"}),
    "ExactDeviceRequest": (dra.WireExactRequest, {
        "deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity"}),
    "CapacityRequirements": (dra.WireCapacityRequirements, {"requests"}),
    "ResourceClaimStatus": (dra.WireClaimStatus, {"allocation", "reservedFor", "devices"}),
    "AllocationResult": (dra.WireAllocation, {"devices", "nodeSelector", "allocationTimestamp"}),
    "DeviceAllocationResult": (dra.WireDeviceResults, {"results", "config"}),
    "DeviceRequestAllocationResult": (dra.WireResult, {
        "request", "driver", "pool", "device", "adminAccess", "tolerations", "bindingConditions",
        "bindingFailureConditions", "shareID", "consumedCapacity", "skipNodeOperations"}),
    "ResourceClaimConsumerReference": (dra.WireConsumer, {"apiGroup", "resource", "name", "uid"}),
    "DeviceToleration": (dra.WireToleration, {"key", "operator", "value", "effect", "tolerationSeconds"}),
    "DeviceSelector": (dra.WireSelector, {"cel"}),
    "CELDeviceSelector": (dra.WireCelSelector, {"expression"}),
    "DeviceClass": (dra.WireDeviceClass, {"metadata", "spec"}),
    "DeviceClassSpec": (dra.WireClassSpec, {"selectors", "config", "extendedResourceName"}),
    "ResourceClaimTemplate": (dra.WireResourceClaimTemplate, {"metadata", "spec"}),
    "ResourceClaimTemplateSpec": (dra.WireTemplateSpec, {"metadata", "spec"}),
    "PodResourceClaim": (types.PodResourceClaim, {"name", "resourceClaimName", "resourceClaimTemplateName"}),
    "PodResourceClaimStatus": (types.PodResourceClaimStatus, {"name", "resourceClaimName"}),
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_struct_wire_names_are_upstream_json_tags(name: str) -> None:
    struct, tags = UPSTREAM[name]
    wire = {field.encode_name for field in msgspec.structs.fields(struct)}
    assert wire <= tags, f"{name}: {sorted(wire - tags)} are not JSON tags of the Go type"


def test_a_claim_from_the_api_decodes_with_share_id_and_consumed_capacity() -> None:
    raw = b"""{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
      "metadata":{"name":"c","namespace":"ns","uid":"u"},
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu-mem.kubectl-gpushare.io",
        "allocationMode":"ExactCount","count":1,"capacity":{"requests":{"memory":"4Gi"}}}}]}},
      "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu-mem.kubectl-gpushare.io",
        "pool":"n1","device":"gpu-0","shareID":"s-1","consumedCapacity":{"memory":"4Gi"}}]},
        "nodeSelector":{"nodeSelectorTerms":[]}},
        "reservedFor":[{"resource":"pods","name":"p","uid":"pu"}]}}"""
    claim = types.DRA_CLAIM_DECODER.decode(raw)
    assert claim.status.allocation is not None
    result = claim.status.allocation.devices.results[0]
    assert (result.share_id, result.consumed_capacity) == ("s-1", {"memory": "4Gi"})
    exactly = claim.spec.devices.requests[0].exactly
    assert exactly is not None and exactly.capacity is not None and exactly.capacity.requests == {"memory": "4Gi"}
    assert claim.status.reserved_for[0].uid == "pu"


def test_a_device_encodes_only_the_fields_set_under_their_upstream_names() -> None:
    device = dra.WireDevice(name="gpu-0", attributes={"index": dra.WireAttribute(int_=0),
                                                      "model": dra.WireAttribute(string="L4")},
                            allow_multiple_allocations=True)
    assert msgspec.json.decode(types.ENCODER.encode(device)) == {
        "name": "gpu-0", "attributes": {"index": {"int": 0}, "model": {"string": "L4"}},
        "allowMultipleAllocations": True,
    }


def test_a_slice_written_by_the_driver_holds_only_what_it_sets() -> None:
    body = dra.WireResourceSlice(
        metadata=dra.WireMeta(generate_name="00000-d-n-", owner_references=[
            dra.WireOwnerReference(api_version="v1", kind="Node", name="n", uid="u", controller=True)]),
        spec=dra.WireSliceSpec(driver="d", pool=dra.WirePool(name="n", generation=1, resource_slice_count=1),
                               node_name="n"),
    )
    assert msgspec.json.decode(types.ENCODER.encode(body)) == {
        "metadata": {"generateName": "00000-d-n-", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u", "controller": True}]},
        "spec": {"driver": "d", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n"},
    }
