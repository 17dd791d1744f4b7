"""Device plugin speed and memory, measured side by side in one run.

* First ListAndWatch reply for a node of 8 x 80 GiB GPUs (budget: <= 100 ms), over a real unix
  socket: GiB units (640 devices) vs MiB in 16 MiB steps (40,960) vs the largest list that fits
  kubelet's 4 MiB limit; cold (message built) vs warm (cached message, a second stream).
* Allocate latency with 110 pods on the node (budget: p99 <= 10 ms), end to end: the plugin runs as
  ``kubectl-gpushare serve-device-plugin`` in a child process against the sandbox API server, and
  this process plays kubelet (GetPreferredAllocation, then Allocate, which patches the pod).
  Side by side: the candidate lookup from our watch cache vs the original's per-call API list
  (``fieldSelector=spec.nodeName=<node>,status.phase=Pending``).
* The child's RSS (budget: <= 100 MB) in GiB units and with 40,960 MiB-step devices.

Usage: .venv/bin/python bench/bench_device_plugin.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from kubectl_gpushare import protocol  # noqa: E402
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api  # noqa: E402
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc  # noqa: E402
from kubectl_gpushare.deviceplugin.allocation import AllocationBook, StaticPods  # noqa: E402
from kubectl_gpushare.deviceplugin.devices import (  # noqa: E402
    Inventory,
    MemoryUnit,
    check_budget,
    smallest_fitting_size,
)
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim  # noqa: E402
from kubectl_gpushare.deviceplugin.servicer import Advertisement, DevicePluginServicer  # noqa: E402
from kubectl_gpushare.kube import types  # noqa: E402
from kubectl_gpushare.kube.client import Client  # noqa: E402
from kubectl_gpushare.kube.config import load_config  # noqa: E402
from kubectl_gpushare.node.fake_backend import FakeBackend  # noqa: E402
from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object  # noqa: E402
from kubectl_gpushare.sandbox.server import Sandbox  # noqa: E402

NODE = "gpu-node-1"
VENV_BIN = Path(sys.executable).parent


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class _NoRecord:
    def record(self, pod: object, annotations: dict[str, str]) -> None:
        return None


def first_reply(unit: MemoryUnit, sock_dir: str, repeats: int) -> tuple[int, int, float, float, float]:
    """(devices, bytes, start-up encode ms, first reply ms, second stream ms) for 8 x 80 GiB.

    The plugin encodes its device list once at start-up (as `daemon.Plugin` does), so kubelet's
    first ListAndWatch only pays for gRPC; the encode time is shown separately.
    """
    backend = FakeBackend.from_spec("8x80GiB", seed=NODE)
    size = check_budget(backend.devices(), unit)
    encode: list[float] = []
    cold: list[float] = []
    warm: list[float] = []
    count = 0
    for _ in range(repeats):
        advertisement = Advertisement(Inventory.of(backend.devices(), unit))
        started = time.perf_counter()
        advertisement.message()
        encode.append((time.perf_counter() - started) * 1000)
        book = AllocationBook(
            node=NODE,
            inventory=advertisement.inventory,
            inventory_lock=advertisement.lock,
            source=StaticPods(),
            recorder=_NoRecord(),
        )
        path = os.path.join(sock_dir, "law.sock")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_grpc.add_DevicePluginServicer_to_server(DevicePluginServicer(advertisement, book), server)
        server.add_insecure_port(f"unix://{path}")
        server.start()
        with grpc.insecure_channel(f"unix://{path}") as channel:
            grpc.channel_ready_future(channel).result(timeout=5)
            stub = api_grpc.DevicePluginStub(channel)
            for bucket in (cold, warm):
                started = time.perf_counter()
                stream = stub.ListAndWatch(api.Empty())
                message = next(stream)
                bucket.append((time.perf_counter() - started) * 1000)
                count = len(message.devices)
                stream.cancel()
        advertisement.close()
        server.stop(0).wait()
    return count, size, statistics.median(encode), statistics.median(cold), statistics.median(warm)


def rss_mb(pid: int) -> tuple[float, float]:
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def start_child(kubeconfig: Path, plugin_dir: str, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, NODE_NAME=NODE, GPUSHARE_LOG_LEVEL="warning")
    return subprocess.Popen(
        [
            str(VENV_BIN / "kubectl-gpushare"),
            "serve-device-plugin",
            "--fake-gpus",
            "8x80GiB",
            "--device-plugin-path",
            plugin_dir,
            "--kubeconfig",
            str(kubeconfig),
            *extra,
        ],
        env=env,
        stderr=subprocess.DEVNULL,
    )


def stop_child(child: subprocess.Popen[bytes]) -> None:
    child.terminate()
    try:
        child.wait(15)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def seed_pods(client: Client, round_no: int, pending: int) -> list[dict]:
    created = []
    for i in range(pending):
        body = pod_object(
            f"pending-{round_no}-{i}",
            "default",
            [1 + i % 8],
            node=NODE,
            gpu=i % 8,
            phase="Pending",
            assigned=False,
            assume_time=round_no * 1000 + i,
        )
        pod = client.create(types.PODS, body, "default")
        body["metadata"]["uid"] = pod.metadata.uid
        created.append(body)
    return created


def allocate_bench(sandbox: Sandbox, client: Client, kubeconfig: Path, rounds: int) -> dict[str, float]:
    running = 60
    pending = 50  # 60 running + 50 pending = 110 pods on the node, kubelet's default maximum
    sandbox.load(
        [pod_object(f"running-{i}", "default", [2], node=NODE, gpu=i % 8, assume_time=i) for i in range(running)]
    )
    plugin_dir = tempfile.mkdtemp(prefix="dpb", dir="/tmp")
    kubelet = KubeletSim(plugin_dir).start()
    child = start_child(kubeconfig, plugin_dir)
    latencies: list[float] = []
    try:
        assert kubelet.wait_registered(1, timeout=30), "plugin did not register"
        kubelet.wait_devices(lambda d: len(d) == 640, timeout=30)
        stub = kubelet.plugin().stub
        by_gpu: dict[str, list[str]] = {}
        for device in kubelet.devices():
            by_gpu.setdefault(protocol.uuid_of_fake_device(device), []).append(device)
        for round_no in range(rounds):
            pods = seed_pods(client, round_no, pending)
            time.sleep(0.5)  # let the plugin's watch see them, as kubelet's would
            for pod in pods:
                size = int(pod["spec"]["containers"][0]["resources"]["limits"][protocol.RESOURCE_MEM])
                available = [d for ids in by_gpu.values() for d in ids]
                preferred = stub.GetPreferredAllocation(
                    api.PreferredAllocationRequest(
                        container_requests=[
                            api.ContainerPreferredAllocationRequest(available_deviceIDs=available, allocation_size=size)
                        ]
                    )
                )
                chosen = list(preferred.container_responses[0].deviceIDs)
                started = time.perf_counter()
                stub.Allocate(
                    api.AllocateRequest(container_requests=[api.ContainerAllocateRequest(devices_ids=chosen)])
                )
                latencies.append((time.perf_counter() - started) * 1000)
            for pod in pods:
                client.delete(types.PODS, pod["metadata"]["name"], "default")
        rss, peak = rss_mb(child.pid)
    finally:
        stop_child(child)
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
    # Side by side: the candidate lookup itself, watch cache vs the original's per-call list.
    from kubectl_gpushare.deviceplugin.cluster import NodeCluster

    cluster = NodeCluster(client, NODE)
    cluster.pod_informer.start()
    cluster.pod_informer.wait_synced(30)
    cache_ms, list_ms = [], []
    selector = f"spec.nodeName={NODE},status.phase=Pending"
    for _ in range(200):
        started = time.perf_counter()
        cluster.pods()
        cache_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        list(client.iter_pods(field_selector=selector))
        list_ms.append((time.perf_counter() - started) * 1000)
    cluster.pod_informer.stop()
    return {
        "samples": len(latencies),
        "p50": pct(latencies, 0.50),
        "p99": pct(latencies, 0.99),
        "max": max(latencies),
        "rss": rss,
        "peak": peak,
        "cache_ms": statistics.median(cache_ms),
        "list_ms": statistics.median(list_ms),
    }


def rss_bench(kubeconfig: Path, *extra: str, devices: int) -> tuple[float, float]:
    plugin_dir = tempfile.mkdtemp(prefix="dpr", dir="/tmp")
    kubelet = KubeletSim(plugin_dir).start()
    child = start_child(kubeconfig, plugin_dir, *extra)
    try:
        assert kubelet.wait_registered(1, timeout=30), "plugin did not register"
        kubelet.wait_devices(lambda d: len(d) == devices, timeout=30)
        time.sleep(0.5)
        return rss_mb(child.pid)
    finally:
        stop_child(child)
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeats, rounds = (3, 2) if args.quick else (7, 5)

    print("== first ListAndWatch reply, 8 x 80 GiB GPUs (budget 100 ms) ==")
    sock_dir = tempfile.mkdtemp(prefix="dpl", dir="/tmp")
    gpus = FakeBackend.from_spec("8x80GiB", seed=NODE).devices()
    fit = smallest_fitting_size(gpus, MemoryUnit("MiB"))
    try:
        for label, unit in (
            ("GiB", MemoryUnit("GiB")),
            ("MiB x16", MemoryUnit("MiB", 16)),
            (f"MiB x{fit}", MemoryUnit("MiB", fit or 16)),
        ):
            count, size, encode, cold, warm = first_reply(unit, sock_dir, repeats)
            print(
                f"  {label:<9} {count:>6} devices  {size / 2**20:5.2f} MiB of 4 MiB  encode at start {encode:6.1f} ms  "
                f"first reply {cold:6.1f} ms  next stream {warm:6.1f} ms"
            )
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)
    print("  plain MiB (655,360 devices) is refused at start: ~30 MiB, over kubelet's 4 MiB limit")

    sandbox = Sandbox(port=0).start()
    try:
        sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", labels={"gpushare": "true"})])
        kubeconfig = sandbox.write_kubeconfig(Path(tempfile.mkdtemp(prefix="dpk")) / "kubeconfig")
        client = Client(load_config(str(kubeconfig)), component="bench")
        print(f"\n== Allocate with 110 pods on the node, end to end over gRPC + API patch ({rounds} rounds) ==")
        result = allocate_bench(sandbox, client, kubeconfig, rounds)
        print(
            f"  {result['samples']} calls  p50 {result['p50']:.2f} ms  p99 {result['p99']:.2f} ms  "
            f"max {result['max']:.2f} ms  (budget p99 10 ms)"
        )
        print(
            f"  candidate lookup: watch cache {result['cache_ms'] * 1000:.1f} us vs per-call API list "
            f"{result['list_ms']:.2f} ms -> {result['list_ms'] / max(result['cache_ms'], 1e-6):,.0f}x"
        )
        print("\n== plugin process RSS (budget 100 MB) ==")
        print(f"  GiB, after {result['samples']} Allocates: RSS {result['rss']:.1f} MB (peak {result['peak']:.1f} MB)")
        rss, peak = rss_bench(kubeconfig, "--memory-unit", "MiB", "--unit-size", "16", devices=40960)
        print(f"  MiB x16, 40,960 devices: RSS {rss:.1f} MB (peak {peak:.1f} MB)")
        client.close()
        shutil.rmtree(kubeconfig.parent, ignore_errors=True)
    finally:
        sandbox.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
