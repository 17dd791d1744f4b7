"""The explain tests' seeded cluster and the pods asked about (golden files per pod).

Node ``a`` has 10 GiB free in total but at most 6 on one GPU (the classic trap for an 8 GiB pod),
``tainted`` has room but a taint, ``small`` has too little room. Shared by the offline (unit)
and real-kubectl (integration) tests. Regenerate with GPUSHARE_UPDATE_GOLDEN=1 and review.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from golden.inspect import build_dra_clusters as dra

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.stack_spec import stack_node_object, stack_pod_object

GOLDEN = Path(__file__).resolve().parent
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"
CASES: dict[str, tuple[str, str]] = {
    "trap": ("ml", "wants-8"),
    "selector": ("ml", "wants-pool-c"),
    "placed": ("ml", "trainer"),
    "no-request": ("web", "frontend"),
    "affinity": ("ml", "wants-pool-b"),
    "hami-placed": ("ml", "vgpu-0"),
    "nvidia-placed": ("ml", "cuda-job"),
    "dra-placed": ("ml", "dra-infer"),
    "dra-shared": ("ml", "dra-reader"),
    "dra-pending": ("ml", "dra-waiting"),
    "dra-too-big": ("ml", "dra-huge"),
    "dra-no-claim": ("ml", "dra-unmade"),
    "pinned": ("ml", "wants-small"),
    "conflict": ("ml", "wants-two-names"),
    "dra-pinned": ("ml", "dra-pinned"),
    "invalid-request": ("ml", "wants-too-much"),
    "dra-named-twice": ("ml", "dra-twice"),
    "invalid-claims": ("ml", "dra-unreadable"),
}
"""golden name -> (namespace, pod)"""


def required(pod: dict[str, Any], *terms: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with the required node affinity ``terms``."""
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}
    return pod


def names_in(*names: str) -> dict[str, Any]:
    """A term pinning nodes by name (NodeAffinity's PreFilter narrows to them), one requirement per name."""
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]} for name in names]}


def seed() -> list[dict[str, Any]]:
    selective = pod_object("wants-pool-c", "ml", [2])
    selective["spec"]["nodeSelector"] = {"pool": "c"}
    affine = required(pod_object("wants-pool-b", "ml", [2]),
                      {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]})
    beyond_range = pod_object("wants-too-much", "ml", [2])  # a quantity the API takes, beyond any GPU: invalid
    resources = beyond_range["spec"]["containers"][0]["resources"]
    resources["limits"]["aliyun.com/gpu-mem"] = resources["requests"]["aliyun.com/gpu-mem"] = "99999999999999999999"
    return [
        node_object("a", [16, 16], ip="10.8.0.1", labels={"pool": "a"}),
        node_object(
            "tainted", [24], ip="10.8.0.2", taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
        ),
        node_object("small", [8], ip="10.8.0.3", labels={"pool": "b"}),
        node_object("cpu", [], ip="10.8.0.4"),
        pod_object("trainer", "ml", [10], node="a", gpu=0, gpu_memory=16),
        pod_object("notebook", "ml", [10], node="a", gpu=1, gpu_memory=16),
        pod_object("helper", "ml", [2], node="a", gpu=0, gpu_memory=16),
        pod_object("sidecar", "ml", [0, 0], node="a"),
        pod_object("reader", "team-b", [4], node="small", gpu=0, gpu_memory=8),
        pod_object("wants-8", "ml", [8]),
        selective,
        affine,
        required(pod_object("wants-small", "ml", [2]), names_in("small")),
        required(pod_object("wants-two-names", "ml", [2]), names_in("a", "small")),
        pod_object("frontend", "web", [0]),
        beyond_range,
        *stack_seed(),
        *dra_seed(),
    ]


def dra_seed() -> list[dict[str, Any]]:
    """Two nodes of our DRA driver (one tainted), a placed claim, a claim two pods share, and pending pods."""
    return [
        dra.device_class(),
        node_object("dra-1", [], ip="10.8.2.1"),
        dra.resource_slice("dra-1", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-1"),
                                                    dra.our_device(1, "16Gi", "1Gi", "T4", "dra-1")], "aaaaa"),
        node_object("dra-2", [], ip="10.8.2.2",
                    taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
        dra.resource_slice("dra-2", dra.OUR_DRIVER, [dra.our_device(0, "40Gi", "1Gi", "A100", "dra-2")], "bbbbb"),
        dra.dra_pod("dra-infer", "dra-1", "dra-infer-gpu", namespace="ml"),
        dra.claim("dra-infer-gpu", "dra-1", "gpu-0", "12Gi", ["dra-infer"], owner="dra-infer", namespace="ml"),
        dra.shared_pod("dra-reader", "dra-1", "dra-cache", namespace="ml"),
        dra.shared_pod("dra-reader-2", "dra-1", "dra-cache", namespace="ml"),
        dra.claim("dra-cache", "dra-1", "gpu-1", "6Gi", ["dra-reader", "dra-reader-2"], namespace="ml"),
        dra.dra_pod("dra-waiting", "", "dra-waiting-gpu", phase="Pending", namespace="ml"),
        dra.pending_claim("dra-waiting-gpu", "dra-waiting", "8Gi", namespace="ml"),
        dra.dra_pod("dra-huge", "", "dra-huge-gpu", phase="Pending", namespace="ml"),
        dra.pending_claim("dra-huge-gpu", "dra-huge", "12Gi", namespace="ml"),
        dra.dra_pod("dra-unmade", "", None, phase="Pending", namespace="ml"),
        required(dra.dra_pod("dra-pinned", "", "dra-pinned-gpu", phase="Pending", namespace="ml"),
                 names_in("dra-2")),
        dra.pending_claim("dra-pinned-gpu", "dra-pinned", "8Gi", namespace="ml"),
        *twice_and_unreadable(),
    ]


def twice_and_unreadable() -> list[dict[str, Any]]:
    """Pending ``dra-twice``, two of whose entries name its claim (kube-scheduler never binds it), and pending
    ``dra-unreadable``, whose ``spec.resourceClaims`` does not read as entries (kube-apiserver refuses it; the
    sandbox's storage holds it, as a file may)."""
    twice = dra.shared_pod("dra-twice", "", "dra-twice-gpu", namespace="ml")
    twice["status"]["phase"] = "Pending"
    twice["spec"]["resourceClaims"] = [{"name": "one", "resourceClaimName": "dra-twice-gpu"},
                                       {"name": "two", "resourceClaimName": "dra-twice-gpu"}]
    unreadable = dra.dra_pod("dra-unreadable", "", None, phase="Pending", namespace="ml")
    unreadable["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": 7}]
    return [twice, dra.pending_claim("dra-twice-gpu", "dra-twice", "6Gi", namespace="ml"), unreadable]


def stack_seed() -> list[dict[str, Any]]:
    """A HAMi node with two pods on one GPU (MiB) and an NVIDIA time-slicing node (slots)."""
    return [
        stack_node_object("hami-1", "hami", [24576, 24576], ip="10.8.1.1", product="NVIDIA-A10", labels={},
                          annotations={}),
        stack_node_object("ts-1", "nvidia", [16384], ip="10.8.1.2", product="Tesla-T4", labels={}, annotations={},
                          replicas=4),
        stack_pod_object("vgpu-0", "ml", "hami", [3000], node="hami-1", gpu=0, cores=30),
        stack_pod_object("vgpu-1", "ml", "hami", [2000, 1000], node="hami-1", gpu=0),
        stack_pod_object("cuda-job", "ml", "nvidia", [1], node="ts-1", gpu=None),
        stack_pod_object("cuda-other", "team-b", "nvidia", [2], node="ts-1", gpu=None),
    ]


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(), f"explain {name} differs from the golden file"
