"""The resource.k8s.io/v1 structs speak the upstream JSON names (k8s.io/api resource/v1 types.go at
10b39a39, core/v1 for the pod's claims): every wire name a struct declares is a JSON tag of its Go type."""

from __future__ import annotations

import msgspec
import pytest

from kubectl_gpushare.kube import types

# Go type -> its JSON tags, from types.go (the ones a struct here may use).
UPSTREAM = {
    "ResourceSliceSpec": {"driver", "pool", "nodeName", "nodeSelector", "allNodes", "devices", "perDeviceNodeSelection",
                          "sharedCounters", "partitionTypeAttribute", "skipNodeOperations"},
    "ResourcePool": {"name", "generation", "resourceSliceCount"},
    "Device": {"name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints",
               "bindsToNode", "bindingConditions", "bindingFailureConditions", "allowMultipleAllocations",
               "nodeAllocatableResources"},
    "DeviceCapacity": {"value", "requestPolicy"},
    "CapacityRequestPolicy": {"default", "validValues", "validRange"},
    "CapacityRequestPolicyRange": {"min", "max", "step"},
    "DeviceAttribute": {"int", "bool", "string", "version", "ints", "bools", "strings", "versions"},
    "DeviceTaint": {"key", "value", "effect", "timeAdded"},
    "ResourceSlice": {"metadata", "spec"},
    "ResourceClaim": {"metadata", "spec", "status"},
    "ResourceClaimSpec": {"devices"},
    "DeviceClaim": {"requests", "constraints", "config"},
    "DeviceRequest": {"name", "exactly", "firstAvailable"},
    "ExactDeviceRequest": {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
                           "capacity"},
    "CapacityRequirements": {"requests"},
    "ResourceClaimStatus": {"allocation", "reservedFor", "devices"},
    "AllocationResult": {"devices", "nodeSelector", "allocationTimestamp"},
    "DeviceAllocationResult": {"results", "config"},
    "DeviceRequestAllocationResult": {"request", "driver", "pool", "device", "adminAccess", "tolerations",
                                      "bindingConditions", "bindingFailureConditions", "shareID", "consumedCapacity",
                                      "skipNodeOperations"},
    "ResourceClaimConsumerReference": {"apiGroup", "resource", "name", "uid"},
    "PodResourceClaim": {"name", "resourceClaimName", "resourceClaimTemplateName"},
    "PodResourceClaimStatus": {"name", "resourceClaimName"},
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_struct_wire_names_are_upstream_json_tags(name: str) -> None:
    struct = getattr(types, name)
    wire = {field.encode_name for field in msgspec.structs.fields(struct)}
    assert wire <= UPSTREAM[name], f"{name}: {sorted(wire - UPSTREAM[name])} are not JSON tags of the Go type"


def test_a_claim_from_the_api_decodes_with_share_id_and_consumed_capacity() -> None:
    raw = b"""{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
      "metadata":{"name":"c","namespace":"ns","uid":"u"},
      "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu-mem.kubectl-gpushare.io",
        "allocationMode":"ExactCount","count":1,"capacity":{"requests":{"memory":"4Gi"}}}}]}},
      "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu-mem.kubectl-gpushare.io",
        "pool":"n1","device":"gpu-0","shareID":"s-1","consumedCapacity":{"memory":"4Gi"}}]},
        "nodeSelector":{"nodeSelectorTerms":[]}},
        "reservedFor":[{"resource":"pods","name":"p","uid":"pu"}]}}"""
    claim = types.RESOURCECLAIM_DECODER.decode(raw)
    result = claim.status.allocation.devices.results[0]
    assert (result.share_id, result.consumed_capacity) == ("s-1", {"memory": "4Gi"})
    assert claim.spec.devices.requests[0].exactly.capacity.requests == {"memory": "4Gi"}
    assert claim.status.reserved_for[0].uid == "pu"


def test_a_device_encodes_attribute_values_under_their_type_names() -> None:
    device = types.Device(name="gpu-0", attributes={"index": types.DeviceAttribute(int_value=0),
                                                    "model": types.DeviceAttribute(string_value="L4")},
                          allow_multiple_allocations=True)
    assert msgspec.json.decode(types.ENCODER.encode(device)) == {
        "name": "gpu-0", "attributes": {"index": {"int": 0}, "model": {"string": "L4"}},
        "allowMultipleAllocations": True,
    }
