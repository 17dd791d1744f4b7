"""Write the DRA golden cases' cluster.json (run by hand; the files are committed).

    .venv/bin/python tests/golden/inspect/build_dra_clusters.py

``mixed-dra``: one cluster with a device-plugin (extender) node, two nodes of our DRA driver (GiB
and MiB request policies, a tainted GPU, claims reserved for one pod, for two pods and for none)
and an NVIDIA DRA node, as ``kubectl get nodes,pods,resourceslices,resourceclaims -A -o json``
prints them. Objects follow k8s.io/api resource/v1 (field names checked in
tests/unit/inspect/test_dra_views.py); NVIDIA's slice follows NVIDIA/k8s-dra-driver-gpu
``cmd/gpu-kubelet-plugin/deviceinfo.go``. Expected views come from GPUSHARE_UPDATE_GOLDEN=1 and
are reviewed by eye.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))  # run as a script: make ``golden`` importable, as the tests do

from golden.inspect.build_stack_clusters import node, pod  # noqa: E402

OUR_DRIVER = "gpu-mem.kubectl-gpushare.io"
NVIDIA_DRIVER = "gpu.nvidia.com"
API = "resource.k8s.io/v1"


def policy(unit: str) -> dict[str, Any]:
    """The request policy our driver publishes: every claim rounded up to whole units."""
    return {"default": unit, "validRange": {"min": unit, "step": unit}}


def our_device(index: int, memory: str, unit: str, model: str, node_name: str, tainted: bool = False) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": f"gpu-{index}",
        "attributes": {
            "index": {"int": index},
            "uuid": {"string": f"GPU-{node_name}-{index}"},
            "model": {"string": model},
        },
        "capacity": {"memory": {"value": memory, "requestPolicy": policy(unit)}},
        "allowMultipleAllocations": True,
    }
    if tainted:
        device["taints"] = [{"key": f"{OUR_DRIVER}/unhealthy", "effect": "NoSchedule",
                             "timeAdded": "2026-11-20T10:00:00Z"}]
    return device


def resource_slice(node_name: str, driver: str, devices: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    return {
        "apiVersion": API, "kind": "ResourceSlice",
        "metadata": {
            "name": f"00000-{driver}-{node_name}-{suffix}",
            "generateName": f"00000-{driver}-{node_name}-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": f"uid-{node_name}",
                                 "controller": True}],
        },
        "spec": {"driver": driver, "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                 "nodeName": node_name, "devices": devices},
    }


def nvidia_device(index: int, node_name: str) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{node_name}-{index}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.95.5"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pcieBusID": {"string": f"0000:{index + 15:02x}:00.0"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def device_class(name: str = OUR_DRIVER, driver: str = OUR_DRIVER) -> dict[str, Any]:
    """The DeviceClass a driver installs: one CEL selector on the driver name."""
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def claim(
    name: str, node_name: str, device: str, memory: str | None, pods: list[str], *, driver: str = OUR_DRIVER,
    owner: str | None = None, namespace: str = "default",
) -> dict[str, Any]:
    """An allocated claim as kube-scheduler writes it (a share ID and consumedCapacity on shared devices)."""
    exactly: dict[str, Any] = {"deviceClassName": driver, "allocationMode": "ExactCount", "count": 1}
    if memory is not None:
        exactly["capacity"] = {"requests": {"memory": memory}}
    result: dict[str, Any] = {"request": "gpu", "driver": driver, "pool": node_name, "device": device}
    if memory is not None:
        result["shareID"] = f"share-{name}"
        result["consumedCapacity"] = {"memory": memory}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"claim-{name}",
                            "finalizers": ["resource.kubernetes.io/delete-protection"]}
    if owner:
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner,
                                    "uid": f"uid-{namespace}-{owner}", "controller": True,
                                    "blockOwnerDeletion": True}]
    return {
        "apiVersion": API, "kind": "ResourceClaim", "metadata": meta,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        "status": {
            "allocation": {
                "devices": {"results": [result]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{namespace}-{p}"} for p in pods],
        },
    }


def pending_claim(name: str, owner: str, memory: str, namespace: str = "default",
                  device_class: str = OUR_DRIVER) -> dict[str, Any]:
    """A claim made from a template for a pod still Pending: no allocation yet."""
    return {
        "apiVersion": API, "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"claim-{name}",
                     "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": owner,
                                          "uid": f"uid-{namespace}-{owner}", "controller": True}]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1,
            "capacity": {"requests": {"memory": memory}}}}]}},
        "status": {},
    }


def dra_pod(name: str, node_name: str, claim_name: str | None, template: str = "gpu-mem-4gi",
            phase: str = "Running", namespace: str = "default", created: str = "") -> dict[str, Any]:
    """A pod whose claim comes from a template (spec.resourceClaims, status.resourceClaimStatuses).

    ``claim_name`` None: the resourceclaim controller has not made the claim yet (no status entry).
    """
    item = pod(name, node_name, [{}], phase=phase, namespace=namespace)
    item["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    item["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    if claim_name is not None:
        item["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    if created:
        item["metadata"]["creationTimestamp"] = created
    return item


def shared_pod(name: str, node_name: str, claim_name: str, namespace: str = "default") -> dict[str, Any]:
    """A pod naming a claim created by hand (spec.resourceClaims[].resourceClaimName), shared with others."""
    item = pod(name, node_name, [{}], namespace=namespace)
    item["spec"]["resourceClaims"] = [{"name": "cache", "resourceClaimName": claim_name}]
    item["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cache"}]}
    return item


def mixed_dra() -> list[dict[str, Any]]:
    return [
        node("share-node", "10.0.1.1", {"aliyun.com/gpu-mem": "30", "aliyun.com/gpu-count": "2"}),
        pod("share-a", "share-node", [{"aliyun.com/gpu-mem": "4"}],
            {"ALIYUN_COM_GPU_MEM_IDX": "1", "ALIYUN_COM_GPU_MEM_ASSIGNED": "true"}),
        node("dra-a", "10.0.6.1", {}),
        resource_slice("dra-a", OUR_DRIVER, [
            our_device(0, "16Gi", "1Gi", "Tesla T4", "dra-a"),
            our_device(1, "16Gi", "1Gi", "Tesla T4", "dra-a"),
            our_device(2, "16Gi", "1Gi", "Tesla T4", "dra-a", tainted=True),
        ], "x7k2p"),
        dra_pod("infer-1", "dra-a", "infer-1-gpu-4mzqn"),
        claim("infer-1-gpu-4mzqn", "dra-a", "gpu-0", "4Gi", ["infer-1"], owner="infer-1"),
        dra_pod("infer-2", "dra-a", "infer-2-gpu-b8vtd", template="gpu-mem-6gi"),
        claim("infer-2-gpu-b8vtd", "dra-a", "gpu-0", "6Gi", ["infer-2"], owner="infer-2"),
        shared_pod("reader-a", "dra-a", "feature-cache"),
        shared_pod("reader-b", "dra-a", "feature-cache"),
        claim("feature-cache", "dra-a", "gpu-1", "2Gi", ["reader-a", "reader-b"]),
        claim("leftover", "dra-a", "gpu-1", "1Gi", []),
        dra_pod("waiting", "", "waiting-gpu-p2x9c", phase="Pending"),
        pending_claim("waiting-gpu-p2x9c", "waiting", "20Gi"),
        node("dra-b", "10.0.6.2", {}),
        resource_slice("dra-b", OUR_DRIVER, [our_device(0, "24Gi", "1Mi", "NVIDIA L4", "dra-b")], "q4wd8"),
        dra_pod("small", "dra-b", "small-gpu-t6hjs", template="gpu-mem-1536mi"),
        claim("small-gpu-t6hjs", "dra-b", "gpu-0", "1536Mi", ["small"], owner="small"),
        node("nv-dra", "10.0.7.1", {}),
        resource_slice("nv-dra", NVIDIA_DRIVER, [nvidia_device(0, "nv-dra"), nvidia_device(1, "nv-dra")], "m3n8r"),
        dra_pod("trainer", "nv-dra", "trainer-gpu-j5s7w", template="single-gpu"),
        claim("trainer-gpu-j5s7w", "nv-dra", "gpu-1", None, ["trainer"], driver=NVIDIA_DRIVER, owner="trainer"),
    ]


CLUSTERS = {"mixed-dra": mixed_dra}


def main() -> None:
    for name, build in CLUSTERS.items():
        directory = HERE / name
        directory.mkdir(exist_ok=True)
        document = {"apiVersion": "v1", "kind": "List", "items": build()}
        (directory / "cluster.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
