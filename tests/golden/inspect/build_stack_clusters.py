"""Write the other-stack golden cases' cluster.json files (run by hand; the files are committed).

    .venv/bin/python tests/golden/inspect/build_stack_clusters.py

HAMi in both register formats (v2.7 colon/comma and v2.8 JSON) with empty container slots, a
Succeeded pod, a failed bind and a cordoned GPU; NVIDIA time-slicing replicas and MIG; nano-gpu;
elastic-gpu;
and a mixed cluster with every stack beside gpushare. Expected views come from
GPUSHARE_UPDATE_GOLDEN=1 and are reviewed by eye.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
UUID = "GPU-{node}-{index}"


def node(name: str, ip: str, resources: dict[str, str], annotations: dict[str, str] | None = None,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    status = {"cpu": "64", "memory": "512Gi", **resources}
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1", "kind": "Node", "metadata": meta,
        "status": {"addresses": [{"type": "InternalIP", "address": ip}], "allocatable": status, "capacity": status},
    }


def pod(name: str, node_name: str, containers: list[dict[str, str]], annotations: dict[str, str] | None = None,
        phase: str = "Running", namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    if annotations:
        meta["annotations"] = annotations
    specs = [
        {"name": f"c{i}", "image": "cuda", "resources": {"limits": limits} if limits else {}}
        for i, limits in enumerate(containers)
    ]
    spec: dict[str, Any] = {"nodeName": node_name, "containers": specs} if node_name else {"containers": specs}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def hami_register_v27(name: str) -> str:
    return "".join(
        f"{UUID.format(node=name, index=i)},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:" for i in range(2)
    )


def hami_register_v28(name: str) -> str:
    return json.dumps([
        {"id": UUID.format(node=name, index=i), "index": i, "count": 10, "devmem": 81920, "devcore": 100,
         "type": "NVIDIA-A100-SXM4-80GB", "numa": 0, "mode": "hami-core", "health": i != 1}
        for i in range(2)
    ])


def hami_cluster(name: str, register: str, ip: str) -> list[dict[str, Any]]:
    gpu0, gpu1 = UUID.format(node=name, index=0), UUID.format(node=name, index=1)
    vgpu = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}
    return [
        node(name, ip, {"nvidia.com/gpu": "20"}, {
            "hami.io/node-nvidia-register": register,
            "hami.io/node-handshake": "Reported 2026-11-22 10:00:00",
            "hami.io/device-cordon": gpu1,
        }, {"gpu": "on"}),
        pod(f"{name}-train", name, [vgpu], {
            "hami.io/vgpu-devices-allocated": f"{gpu0},NVIDIA,3000,30:;", "hami.io/bind-phase": "success"}),
        # An init/sidecar container without GPU leaves an empty slot; ",,0,0:" is an empty device.
        pod(f"{name}-sidecar", name, [{}, vgpu], {
            "hami.io/vgpu-devices-allocated": f";;{gpu1},NVIDIA,5000,0:,,0,0:;", "hami.io/bind-phase": "success"}),
        pod(f"{name}-done", name, [vgpu], {"hami.io/vgpu-devices-allocated": f"{gpu0},NVIDIA,7000,0:;"},
            phase="Succeeded"),
        # Chosen by HAMi's scheduler, bind not landed yet: counts on hami.io/vgpu-node already.
        pod(f"{name}-binding", "", [vgpu], {
            "hami.io/vgpu-devices-allocated": f"{gpu1},NVIDIA,2000,10:;", "hami.io/vgpu-node": name,
            "hami.io/bind-phase": "allocating"}, phase="Pending"),
        pod(f"{name}-failed-bind", name, [vgpu], {
            "hami.io/vgpu-devices-allocated": f"{gpu0},NVIDIA,9000,0:;", "hami.io/bind-phase": "failed"},
            phase="Pending"),
    ]


def nvidia_timeslicing() -> list[dict[str, Any]]:
    labels = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
              "nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "15360",
              "nvidia.com/gpu.product": "Tesla-T4-SHARED"}
    return [
        node("ts-node", "10.0.2.1", {"nvidia.com/gpu": "8"}, labels=labels),
        node("whole-node", "10.0.2.2", {"nvidia.com/gpu": "4"}, labels={"nvidia.com/gpu.product": "NVIDIA-H100"}),
        pod("infer-a", "ts-node", [{"nvidia.com/gpu": "1"}]),
        pod("infer-b", "ts-node", [{"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "1"}]),
        pod("infer-old", "ts-node", [{"nvidia.com/gpu": "3"}], phase="Succeeded"),
        pod("train", "whole-node", [{"nvidia.com/gpu": "2"}]),
    ]


def nvidia_mig() -> list[dict[str, Any]]:
    return [
        node("mig-node", "10.0.3.1", {"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"},
             labels={"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        pod("small", "mig-node", [{"nvidia.com/mig-1g.10gb": "1"}]),
        pod("small-2", "mig-node", [{"nvidia.com/mig-1g.10gb": "2"}]),
        pod("medium", "mig-node", [{"nvidia.com/mig-3g.40gb": "1"}]),
    ]


def nano_gpu() -> list[dict[str, Any]]:
    return [
        node("nano-node", "10.0.4.1", {"nano-gpu/gpu-percent": "200"}),
        pod("quarter", "nano-node", [{"nano-gpu/gpu-percent": "25"}],
            {"nano-gpu/assume": "true", "nano-gpu/container-c0": "0"}),
        pod("half", "nano-node", [{"nano-gpu/gpu-percent": "50"}, {"nano-gpu/gpu-percent": "30"}],
            {"nano-gpu/assume": "true", "nano-gpu/container-c0": "1", "nano-gpu/container-c1": "0"}),
        pod("waiting", "nano-node", [{"nano-gpu/gpu-percent": "40"}]),
    ]


def elastic_gpu() -> list[dict[str, Any]]:
    return [
        node("egpu-node", "10.0.5.1", {"elasticgpu.io/gpu-core": "400", "elasticgpu.io/gpu-memory": "61440"}),
        pod("two-cards", "egpu-node", [{"elasticgpu.io/gpu-core": "200", "elasticgpu.io/gpu-memory": "4096"}],
            {"elasticgpu.io/assumed": "true", "elasticgpu.io/container-c0": "1,2"}),
        pod("slice", "egpu-node", [{"elasticgpu.io/gpu-core": "30"}],
            {"elasticgpu.io/assumed": "true", "elasticgpu.io/container-c0": "0"}),
    ]


def gpushare() -> list[dict[str, Any]]:
    return [
        node("share-node", "10.0.1.1", {"aliyun.com/gpu-mem": "30", "aliyun.com/gpu-count": "2"}),
        pod("share-a", "share-node", [{"aliyun.com/gpu-mem": "4"}],
            {"ALIYUN_COM_GPU_MEM_IDX": "1", "ALIYUN_COM_GPU_MEM_ASSIGNED": "true"}),
    ]


def pod_meta(item: dict[str, Any], labels: dict[str, str] | None = None, scheduler: str = "") -> dict[str, Any]:
    if labels:
        item["metadata"]["labels"] = labels
    if scheduler:
        item["spec"]["schedulerName"] = scheduler
    return item


def kai() -> list[dict[str, Any]]:
    """KAI's documented examples (docs/gpu-sharing/gpu-sharing.yaml, gpu-memory.yaml) on a 2-GPU node.

    Group g-a has its reservation pod running on GPU-kai-0; g-b's reservation has no UUID yet ("-1");
    a multi-GPU fraction spans g-a and g-c (g-c reserved on GPU-kai-1); a whole-GPU pod takes the rest.
    """
    labels = {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.memory": "81920",
              "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    reserve = "kai-resource-reservation"

    def reservation(name: str, group: str, uuid: str) -> dict[str, Any]:
        return pod_meta(pod(name, "kai-node", [{"nvidia.com/gpu": "1"}], {"run.ai/reserve_for_gpu_index": uuid},
                            namespace=reserve), {"app": reserve, "runai-gpu-group": group})

    return [
        node("kai-node", "10.0.6.1", {"nvidia.com/gpu": "4"}, labels=labels),
        reservation("gpu-reservation-kai-node-a1b2c", "g-a", "GPU-kai-0"),
        reservation("gpu-reservation-kai-node-d3e4f", "g-b", "-1"),
        reservation("gpu-reservation-kai-node-g5h6i", "g-c", "GPU-kai-1"),
        pod_meta(pod("gpu-sharing", "kai-node", [{}], {"gpu-fraction": "0.5"}), {"runai-gpu-group": "g-a"},
                 "kai-scheduler"),
        pod_meta(pod("gpu-memory", "kai-node", [{}], {"gpu-memory": "2000"}, namespace="ml"),
                 {"runai-gpu-group": "g-b"}, "kai-scheduler"),
        pod_meta(pod("two-halves", "kai-node", [{}], {"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}),
                 {"runai-gpu-group/g-a": "g-a", "runai-gpu-group/g-c": "g-c"}, "kai-scheduler"),
        pod("whole", "kai-node", [{"nvidia.com/gpu": "1"}]),
    ]


def volcano() -> list[dict[str, Any]]:
    """Volcano gpu-share as its user guide shows it (89424 over 8 cards; pods of 1024), and a vGPU node."""
    vgpu = "".join(f"GPU-vc-{i},10,32768,NVIDIA-Tesla V100-PCIE-32GB,{'true' if i == 0 else 'false'},hami-core:"
                   for i in range(2))
    return [
        node("volcano-node", "10.0.7.1", {"volcano.sh/gpu-memory": "89424", "volcano.sh/gpu-number": "8"},
             {"volcano.sh/gpu-unhealthy-ids": "7"}),
        pod_meta(pod("gpu-pod1", "volcano-node", [{"volcano.sh/gpu-memory": "1024"}],
                     {"volcano.sh/gpu-index": "0", "volcano.sh/predicate-time": "1598233413446125395"}),
                 scheduler="volcano"),
        pod_meta(pod("gpu-pod2", "volcano-node", [{"volcano.sh/gpu-memory": "1024"}, {"volcano.sh/gpu-memory": "2048"}],
                     {"volcano.sh/gpu-index": "0"}), scheduler="volcano"),
        pod_meta(pod("whole-card", "volcano-node", [{"volcano.sh/gpu-number": "1"}], {"volcano.sh/gpu-index": "3"}),
                 scheduler="volcano"),
        node("vgpu-node", "10.0.7.2", {"volcano.sh/vgpu-number": "20"}, {"volcano.sh/node-vgpu-register": vgpu}),
        pod_meta(pod("vgpu-pod", "vgpu-node", [{"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}],
                     {"volcano.sh/vgpu-ids-new": "GPU-vc-0,NVIDIA,3000,25:;"}), scheduler="volcano"),
    ]


def koord_device(name: str) -> dict[str, Any]:
    """The node's ``Device`` as koordlet reports it (the shape of Koordinator's device scheduling guide).

    The memory is NVML's (15472384Ki, a T4), so it differs from the node's even split; GPU 1 is unhealthy.
    """
    devices = [
        {"type": "gpu", "id": f"GPU-{name}-{minor}", "minor": minor, "health": minor == 0,
         "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "15472384Ki",
                       "koordinator.sh/gpu-memory-ratio": "100"}}
        for minor in range(2)
    ]
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": {"name": name},
            "spec": {"devices": devices}}


def koordinator() -> list[dict[str, Any]]:
    """Koordinator's fine-grained device scheduling example: 2 GPUs, a 50% share and a whole card.

    koord-node has its Device object (per-GPU UUID, memory and health); koord-plain has none, so its
    GPUs come from the node's resources.
    """
    resources = {"koordinator.sh/gpu-core": "200", "koordinator.sh/gpu-memory": "32Gi",
                 "koordinator.sh/gpu-memory-ratio": "200"}

    def allocated(minor: int, core: str, memory: str) -> str:
        shares = {"koordinator.sh/gpu-core": core, "koordinator.sh/gpu-memory": memory,
                  "koordinator.sh/gpu-memory-ratio": core}
        return json.dumps({"gpu": [{"minor": minor, "resources": shares}]}, separators=(",", ":"))

    half, whole = allocated(0, "50", "7736192Ki"), allocated(1, "100", "15472384Ki")
    return [
        node("koord-node", "10.0.8.1", resources, labels={"node.koordinator.sh/gpu-model": "Tesla-T4"}),
        koord_device("koord-node"),
        node("koord-plain", "10.0.8.2", resources),
        pod_meta(pod("pod-example", "koord-node", [{"koordinator.sh/gpu-memory-ratio": "50"}],
                     {"scheduling.koordinator.sh/device-allocated": half}), scheduler="koord-scheduler"),
        pod_meta(pod("pod-whole", "koord-node", [{"koordinator.sh/gpu-memory-ratio": "100"}],
                     {"scheduling.koordinator.sh/device-allocated": whole}), scheduler="koord-scheduler"),
        pod_meta(pod("plain-half", "koord-plain", [{"koordinator.sh/gpu-memory-ratio": "50"}],
                     {"scheduling.koordinator.sh/device-allocated": half}), scheduler="koord-scheduler"),
    ]


def schedulers_malformed() -> list[dict[str, Any]]:
    """One bad value of each kind on KAI, Volcano and Koordinator nodes: each is warned, none credited."""
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.product": "A100"}
    reserve = "kai-resource-reservation"

    def reservation(name: str, group: str, uuid: str) -> dict[str, Any]:
        return pod_meta(pod(name, "kai-bad", [{"nvidia.com/gpu": "1"}], {"run.ai/reserve_for_gpu_index": uuid},
                            namespace=reserve), {"app": reserve, "runai-gpu-group": group})

    def kai_pod(name: str, group: str, annotations: dict[str, str]) -> dict[str, Any]:
        return pod_meta(pod(name, "kai-bad", [{}], annotations), {"runai-gpu-group": group})

    koord = {"koordinator.sh/gpu-core": "200", "koordinator.sh/gpu-memory": "32Gi",
             "koordinator.sh/gpu-memory-ratio": "200"}

    def koord_pod(name: str, text: str) -> dict[str, Any]:
        return pod(name, "koord-bad", [{}], {"scheduling.koordinator.sh/device-allocated": text})

    return [
        node("kai-bad", "10.0.9.1", {"nvidia.com/gpu": "3"}, labels=labels),
        reservation("gpu-reservation-a", "g-a", "GPU-bad-0"),
        reservation("gpu-reservation-b", "g-b", "GPU-bad-0"),  # a second reservation naming the same UUID
        kai_pod("good", "g-a", {"gpu-fraction": "0.5"}),
        kai_pod("same-gpu", "g-b", {"gpu-fraction": "0.75"}),
        kai_pod("nan", "g-a", {"gpu-fraction": "NaN"}),
        kai_pod("huge", "g-a", {"gpu-fraction": "1e999"}),
        kai_pod("over-one", "g-a", {"gpu-fraction": "1.5"}),
        kai_pod("negative-mib", "g-a", {"gpu-memory": "-2000"}),
        kai_pod("absurd-mib", "g-a", {"gpu-memory": "99999999999"}),
        kai_pod("orphan", "g-gone", {"gpu-memory": "1000"}),
        node("volcano-bad", "10.0.9.2", {"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "2"}),
        pod("bad-index", "volcano-bad", [{"volcano.sh/gpu-memory": "1024"}], {"volcano.sh/gpu-index": "0,zero"}),
        pod("far-index", "volcano-bad", [{"volcano.sh/gpu-memory": "1024"}], {"volcano.sh/gpu-index": "9"}),
        node("koord-bad", "10.0.9.3", koord),
        koord_pod("garbage", "{not json"),
        koord_pod("unknown-minor", '{"gpu":[{"minor":7,"resources":{"koordinator.sh/gpu-memory":"1Gi"}}]}'),
        koord_pod("deep", "[" * 5000),
    ]


CASES = {
    "hami-v27": hami_cluster("hami-a", hami_register_v27("hami-a"), "10.0.0.1"),
    "hami-v28": hami_cluster("hami-b", hami_register_v28("hami-b"), "10.0.0.2"),
    "nvidia-timeslicing": nvidia_timeslicing(),
    "nvidia-mig": nvidia_mig(),
    "nano-gpu": nano_gpu(),
    "elastic-gpu": elastic_gpu(),
    "mixed-stacks": [
        *gpushare(),
        *hami_cluster("hami-a", hami_register_v27("hami-a"), "10.0.0.1"),
        *hami_cluster("hami-b", hami_register_v28("hami-b"), "10.0.0.2"),
        *nvidia_timeslicing(), *nvidia_mig(), *nano_gpu(), *elastic_gpu(),
    ],
    "kai": kai(),
    "volcano": volcano(),
    "koordinator": koordinator(),
    "schedulers-malformed": schedulers_malformed(),
    "mixed-schedulers": [
        *gpushare(), *hami_cluster("hami-b", hami_register_v28("hami-b"), "10.0.0.2"), *kai(), *volcano(),
        *koordinator(), *nvidia_timeslicing(),
    ],
}


def main() -> None:
    for case, items in CASES.items():
        directory = HERE / case
        directory.mkdir(exist_ok=True)
        document = {"apiVersion": "v1", "kind": "List", "items": items}
        (directory / "cluster.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
