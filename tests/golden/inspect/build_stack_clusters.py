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
}


def main() -> None:
    for case, items in CASES.items():
        directory = HERE / case
        directory.mkdir(exist_ok=True)
        document = {"apiVersion": "v1", "kind": "List", "items": items}
        (directory / "cluster.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
