"""The device plugin on NVML (no ``--fake-gpus``): the machine's GPUs where it has some (``-m gpu``), else
the fake pynvml in NVML's place, through one body (see tests/real_nvml.py).

Everything the plugin touches on the host is the test's own: the device-plugin directory (a fresh
``/tmp`` directory), the cgroup tree (a directory tree under tmp_path shaped like kubelet's, so
``--enforce-memory`` probes the driver without touching ``/sys/fs/cgroup``) and the usage port (an
ephemeral one on loopback). Nothing is written under ``/var/lib/kubelet``.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from node_agents import cgroup_tree
from real_nvml import GIB, NVML_VARIANTS, Nvml, open_nvml, under
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NODE = "gpu-node-1"
NOT_PROBED = "not probed yet"


@pytest.fixture(params=NVML_VARIANTS)
def nvml(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Nvml:
    return open_nvml(request.param, monkeypatch)


def _per_gpu(devices: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for device, health in devices.items():
        if health == "Healthy":
            uuid = protocol.uuid_of_fake_device(device)
            counts[uuid] = counts.get(uuid, 0) + 1
    return counts


@pytest.mark.parametrize("enforce", [protocol.ENFORCE_HARD, protocol.ENFORCE_SOFT])
def test_the_plugin_serves_the_gpus_nvml_lists(
    nvml: Nvml, enforce: str, kubelet: KubeletSim, start_plugin: Any, pods: Any, sandbox: Sandbox,
    plugin_dir: str, tmp_path: Path,
) -> None:
    print(nvml.summary())
    tree = cgroup_tree(tmp_path)
    running = start_plugin(None, enforce_memory=enforce, cgroup_root=str(tree), usage_port=0, usage_interval=0.1)
    plugin = running.plugin
    assert plugin is not None and plugin.backend.name == "nvml"
    assert running.socket.startswith(plugin_dir + "/") and under(running.cfg.cgroup_root, tmp_path)
    assert running.cfg.proc_root == "/proc"  # read only: NVML's process ids are mapped to pods through it

    # registered, and every GPU's whole GiB advertised, healthy, under its NVML UUID
    assert kubelet.wait_registered(1, timeout=20)
    assert kubelet.registrations[0].resource_name == protocol.RESOURCE_MEM
    want = {gpu.uuid: gpu.gib for gpu in nvml.gpus}
    devices = kubelet.wait_devices(lambda d: _per_gpu(dict(d)) == want, timeout=20)
    assert _per_gpu(devices) == want, f"healthy per GPU {_per_gpu(devices)}; health {sorted(set(devices.values()))}"
    assert kubelet.capacity() == (sum(want.values()), sum(want.values()))

    # the node: gpu-count and the per-GPU annotation with NVML's UUIDs, models and sizes
    def published() -> dict[str, Any] | None:
        node = sandbox.get("nodes", None, NODE)
        count = node["status"].get("capacity", {}).get(protocol.RESOURCE_COUNT) if node else None
        return node if count == str(len(nvml.gpus)) else None

    node = wait_for(published, what="gpu-count published")
    assert node["status"]["allocatable"][protocol.RESOURCE_COUNT] == str(len(nvml.gpus))

    def entries() -> list[dict[str, Any]]:
        current = sandbox.get("nodes", None, NODE)
        return list(json.loads(current["metadata"]["annotations"].get(protocol.ANN_NODE_GPUS, "[]")))

    assert [(e["index"], e["uuid"], e["model"], e["memoryBytes"], e["memory"], e["unit"]) for e in entries()] == [
        (gpu.index, gpu.uuid, gpu.name, gpu.memory, gpu.gib, "GiB") for gpu in nvml.gpus]

    # Allocate for a pod the extender put on GPU 0
    body = pods.create("real-gpu", [1], gpu=0, assume_time=1)
    env = kubelet.allocate_pod(body)["main"]
    assert env == {
        protocol.ENV_VISIBLE_DEVICES: "0",
        protocol.ENV_IDX: "0",
        protocol.ENV_POD: "1",
        protocol.ENV_CONTAINER: "1",
        protocol.ENV_DEV: str(nvml.gpus[0].gib),
    }
    held = kubelet.allocations[body["metadata"]["uid"]]["main"]
    assert {protocol.uuid_of_fake_device(d) for d in held} == {nvml.gpus[0].uuid}
    assert pods.annotations("real-gpu")[protocol.ANN_ASSIGNED] == "true"

    # what the driver enforces, on the node and over HTTP
    def probed() -> list[tuple[str, str]] | None:
        found = [(e.get("enforcement", ""), e.get("enforcementReason", "")) for e in entries()]
        done = len(found) == len(nvml.gpus) and all(mode == enforce or (mode == protocol.ENFORCE_OFF and reason
                                                    not in ("", NOT_PROBED)) for mode, reason in found)
        return found if done else None

    enforcement = wait_for(probed, timeout=20, what="every GPU probed for per-cgroup limits")
    print(f"{nvml.variant} --enforce-memory={enforce}: node annotation says {enforcement}")
    if nvml.pre_r615:
        assert [mode for mode, _ in enforcement] == [protocol.ENFORCE_OFF] * len(nvml.gpus)
        assert all(nvml.unenforced_reason_says() in reason for _, reason in enforcement), enforcement

    port = plugin.node.port

    def usage() -> protocol.UsageReport | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{protocol.USAGE_PATH}", timeout=10) as resp:
            report = protocol.decode_usage_report(resp.read())
        has_pod = any(p.name == "real-gpu" for p in report.pods)
        return report if has_pod and [(g.enforcement, g.reason) for g in report.gpus] == enforcement else None

    report = wait_for(usage, timeout=20, what="the usage report with the pod and the node's enforcement")
    print(f"{nvml.variant}: usage gpus {[(g.index, g.total_bytes, g.used_bytes, g.enforcement) for g in report.gpus]}")
    assert [(g.index, g.uuid, g.total_bytes) for g in report.gpus] == [
        (gpu.index, gpu.uuid, gpu.memory) for gpu in nvml.gpus]
    assert all(g.used_bytes is not None and 0 <= g.used_bytes <= g.total_bytes for g in report.gpus)
    pod = next(p for p in report.pods if p.name == "real-gpu")
    assert (pod.gpu, pod.allocated_bytes) == (0, GIB)

    # still serving: a second pod on the last GPU is allocated after the probe
    last = nvml.gpus[-1]
    env = kubelet.allocate_pod(pods.create("after-probe", [2], gpu=last.index, assume_time=2))["main"]
    assert (env[protocol.ENV_IDX], env[protocol.ENV_DEV]) == (str(last.index), str(last.gib))
    assert running.thread.is_alive() and running.error is None
