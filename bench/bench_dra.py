"""DRA driver speed, measured side by side in one run.

* NodePrepareResources latency with 110 claims on one node (budget: p99 <= 10 ms), end to end: the
  driver runs as ``kubectl-gpushare serve-dra-driver`` in a child process against the sandbox API
  server, and this process plays kubelet over the real unix socket, one call per pod as kubelet
  makes them. Side by side: a first preparation (one GET of the claim, the CDI spec and the
  checkpoint written with fsync) vs kubelet asking again (answered from the record) vs
  NodeUnprepareResources.
* Publishing a node's ResourceSlice: building and creating it for 64 GPUs vs 1 GPU, and the update
  after one GPU turns unhealthy (through the project's client against the sandbox).

Usage: .venv/bin/python bench/bench_dra.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from kubectl_gpushare import protocol  # noqa: E402
from kubectl_gpushare.dra import slices  # noqa: E402
from kubectl_gpushare.dra._api import dra_v1_pb2 as api  # noqa: E402
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as api_grpc  # noqa: E402
from kubectl_gpushare.dra.publisher import SlicePublisher  # noqa: E402
from kubectl_gpushare.kube import types  # noqa: E402
from kubectl_gpushare.kube.client import Client  # noqa: E402
from kubectl_gpushare.kube.config import load_config  # noqa: E402
from kubectl_gpushare.node.fake_backend import FakeBackend  # noqa: E402
from kubectl_gpushare.node.health import GpuState  # noqa: E402
from kubectl_gpushare.node.sockets import dial, target  # noqa: E402
from kubectl_gpushare.sandbox.builders import namespace_object, node_object  # noqa: E402
from kubectl_gpushare.sandbox.server import Sandbox  # noqa: E402

NODE = "gpu-node-1"
VENV_BIN = Path(sys.executable).parent


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def claims(client: Client, round_no: int, count: int) -> list[tuple[str, str]]:
    """``count`` claims of 1 GiB on 8 GPUs, allocated as the scheduler leaves them; (name, uid)."""
    made = []
    for i in range(count):
        name = f"r{round_no}-c{i}"
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": protocol.DRA_DEVICE_CLASS, "capacity": {"requests": {"memory": "1Gi"}}}}]}}}
        uid = client.create(types.DRA_CLAIMS, body, "default").metadata.uid
        status = {"status": {"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": protocol.DRA_DRIVER, "pool": NODE, "device": f"gpu-{i % 8}",
            "shareID": f"00000000-0000-4000-8000-{round_no:06d}{i:06d}", "consumedCapacity": {"memory": "1Gi"}}]}}}}
        client.patch(types.DRA_CLAIMS, name, status, "default", "merge", subresource="status")
        made.append((name, uid))
    return made


def prepare_bench(sandbox: Sandbox, client: Client, kubeconfig: Path, rounds: int) -> dict[str, list[float]]:
    root = tempfile.mkdtemp(prefix="bdra", dir="/tmp")
    reg, plugin, cdi = (os.path.join(root, d) for d in ("reg", "plugin", "cdi"))
    child = subprocess.Popen(
        [str(VENV_BIN / "kubectl-gpushare"), "serve-dra-driver", "--node-name", NODE, "--fake-gpus", "8x80GiB",
         "--plugin-registration-dir", reg, "--plugin-dir", plugin, "--cdi-root", cdi,
         "--kubeconfig", str(kubeconfig), "--log-level", "warning"],
        stderr=subprocess.DEVNULL,
    )
    socket = os.path.join(plugin, "dra.sock")
    timings: dict[str, list[float]] = {"prepare": [], "again": [], "unprepare": []}
    try:
        deadline = time.monotonic() + 30
        while not (os.path.exists(socket) and dial(socket, 1.0)):
            assert time.monotonic() < deadline and child.poll() is None, "the driver did not start"
            time.sleep(0.05)
        with grpc.insecure_channel(target(socket)) as channel:
            stub = api_grpc.DRAPluginStub(channel)
            for round_no in range(rounds):
                made = claims(client, round_no, 110)
                for verb, call in (("prepare", stub.NodePrepareResources), ("again", stub.NodePrepareResources),
                                   ("unprepare", stub.NodeUnprepareResources)):
                    for name, uid in made:
                        refs = [api.Claim(namespace="default", name=name, uid=uid)]
                        request = (api.NodePrepareResourcesRequest(claims=refs) if verb != "unprepare"
                                   else api.NodeUnprepareResourcesRequest(claims=refs))
                        started = time.perf_counter()
                        answer = call(request, timeout=10)
                        timings[verb].append((time.perf_counter() - started) * 1000)
                        assert not answer.claims[uid].error, answer.claims[uid].error
                    if verb == "prepare":
                        assert len(os.listdir(cdi)) == 110
    finally:
        child.terminate()
        child.wait(15)
        shutil.rmtree(root, ignore_errors=True)
    return timings


def publish_bench(client: Client, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"create-64": [], "create-1": [], "update-64": []}
    for n in range(repeats):
        for gpus in (64, 1):
            node = f"pub-{gpus}-{n}"
            backend = FakeBackend.from_spec(f"{gpus}x80GiB", seed=node)
            states = [GpuState(gpu) for gpu in backend.devices()]
            publisher = SlicePublisher(client, node)
            started = time.perf_counter()
            publisher.sync(slices.devices(states, protocol.UNIT_GIB, "remove"))
            out[f"create-{gpus}"].append((time.perf_counter() - started) * 1000)
            if gpus == 64:
                states[5] = GpuState(states[5].gpu, healthy=False, reason="Xid 79")
                started = time.perf_counter()
                assert publisher.sync(slices.devices(states, protocol.UNIT_GIB, "remove"))
                out["update-64"].append((time.perf_counter() - started) * 1000)
                assert len(publisher.current.spec.devices) == 63
    return out


def line(name: str, values: list[float], budget: float | None = None) -> str:
    verdict = "" if budget is None else ("  ok" if pct(values, 0.99) <= budget else f"  OVER {budget} ms")
    return (f"  {name:<26} p50 {pct(values, 0.5):7.2f} ms   p99 {pct(values, 0.99):7.2f} ms   "
            f"n={len(values)}{verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round instead of three")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    sandbox = Sandbox(port=0).start()
    work = Path(tempfile.mkdtemp(prefix="bdra-kc"))
    try:
        kubeconfig = sandbox.write_kubeconfig(work / "kubeconfig")
        sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
        client = Client(load_config(str(kubeconfig)), component="bench")
        prepared = prepare_bench(sandbox, client, kubeconfig, rounds)
        published = publish_bench(client, 5 if args.quick else 20)
    finally:
        sandbox.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("NodePrepareResources, 110 claims on one node (8 GPUs), one claim per call, driver in a child process:")
    print(line("prepare (GET + CDI + ckpt)", prepared["prepare"], 10.0))
    print(line("asked again (from record)", prepared["again"]))
    print(line("unprepare", prepared["unprepare"]))
    ratio = pct(prepared["prepare"], 0.99) / max(pct(prepared["again"], 0.99), 1e-6)
    print(f"  first preparation / repeat (p99): {ratio:.1f}x")
    print("ResourceSlice publishing (build + API write, sandbox):")
    print(line("create, 64 GPUs", published["create-64"]))
    print(line("create, 1 GPU", published["create-1"]))
    print(line("update, 64 GPUs, one unhealthy", published["update-64"]))
    print(f"  64 GPUs / 1 GPU (p50): {pct(published['create-64'], 0.5) / pct(published['create-1'], 0.5):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
