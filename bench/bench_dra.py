"""DRA driver speed, measured side by side in one run.

* NodePrepareResources latency with 110 claims on one node (budget: p99 <= 10 ms), end to end: the
  driver runs as ``kubectl-gpushare serve-dra-driver`` in a child process against the sandbox API
  server, and this process plays kubelet over the real unix socket, one call per pod as kubelet
  makes them. Side by side: a first preparation (one GET of the claim, the CDI spec written with
  fsync, the checkpoint recorded durably) vs kubelet asking again (answered from the record) vs
  NodeUnprepareResources. With ``--baseline DIR`` (another checkout of the project, e.g. from
  ``git worktree add`` or ``git archive``) a second driver runs that code on a second node, the
  calls alternate between the two, and the ratios compare them under the same load.
  ``--cdi-tmpfs`` puts the CDI specs on tmpfs, as the default ``/var/run/cdi`` is on most nodes.
  ``--rolling`` adds, side by side, a driver run with ``--pod-uid`` (a rolling update's instance:
  each call under the file lock, the checkpoint re-read when it changed) and two such instances
  sharing one node's directories, the calls alternating between them (each call then re-reads what
  the other wrote), as during a DaemonSet rolling update.
* Publishing a node's ResourceSlice: building and creating it for 64 GPUs vs 1 GPU, and the update
  after one GPU turns unhealthy (through the project's client against the sandbox; each sync reads
  the Node, lists the slices and writes).

Usage: .venv/bin/python bench/bench_dra.py [--quick] [--rounds N] [--baseline DIR] [--cdi-tmpfs] [--rolling]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
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
BASELINE_NODE = "gpu-node-2"
ROLLING_NODE = "gpu-node-3"
PAIR_NODE = "gpu-node-4"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def claims(client: Client, prefix: str, node: str, count: int) -> list[tuple[str, str]]:
    """``count`` claims of 1 GiB on 8 GPUs of ``node``, allocated as the scheduler leaves them; (name, uid)."""
    made = []
    for i in range(count):
        name = f"{prefix}-c{i}"
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": protocol.DRA_DEVICE_CLASS, "capacity": {"requests": {"memory": "1Gi"}}}}]}}}
        uid = client.create(types.DRA_CLAIMS, body, "default").metadata.uid
        status = {"status": {"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": protocol.DRA_DRIVER, "pool": node, "device": f"gpu-{i % 8}",
            "shareID": str(uuid.uuid4()), "consumedCapacity": {"memory": "1Gi"}}]}}}}
        client.patch(types.DRA_CLAIMS, name, status, "default", "merge", subresource="status")
        made.append((name, uid))
    return made


class DriverChild:
    """``serve-dra-driver`` for one node in a child process, from this tree or from ``pythonpath``."""

    def __init__(self, node: str, kubeconfig: Path, pythonpath: str | None, cdi_tmpfs: bool,
                 pod_uid: str = "", beside: DriverChild | None = None) -> None:
        self.node = node
        self.root = beside.root if beside else tempfile.mkdtemp(prefix="bdra", dir="/tmp")
        reg, plugin, self.cdi = (os.path.join(self.root, d) for d in ("reg", "plugin", "cdi"))
        if beside:
            self.cdi = beside.cdi
        elif cdi_tmpfs:
            self.cdi = tempfile.mkdtemp(prefix="bdra-cdi", dir="/dev/shm")
        uid = ["--pod-uid", pod_uid] if pod_uid else []
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath  # ahead of the editable install's finder
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubectl_gpushare.cli", "serve-dra-driver", "--node-name", node,
             "--fake-gpus", "8x80GiB", "--plugin-registration-dir", reg, "--plugin-dir", plugin, "--cdi-root",
             self.cdi, "--kubeconfig", str(kubeconfig), "--log-level", "warning", *uid],
            stderr=subprocess.DEVNULL, env=env, cwd=self.root,  # not this tree: -m puts the cwd first
        )
        socket = os.path.join(plugin, protocol.dra_plugin_socket(pod_uid))
        deadline = time.monotonic() + 30
        while not (os.path.exists(socket) and dial(socket, 1.0)):
            assert time.monotonic() < deadline and self.process.poll() is None, "the driver did not start"
            time.sleep(0.05)
        self.channel = grpc.insecure_channel(target(socket))
        self.stub: api_grpc.DRAPluginStub | Alternating = api_grpc.DRAPluginStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.process.terminate()
        self.process.wait(15)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.cdi, ignore_errors=True)


class Alternating:
    """The DRA calls of two instances on one node, each call to the other one (either may get any call)."""

    def __init__(self, first: DriverChild, second: DriverChild) -> None:
        self.stubs = [api_grpc.DRAPluginStub(first.channel), api_grpc.DRAPluginStub(second.channel)]
        self.calls = 0

    def _next(self) -> api_grpc.DRAPluginStub:
        self.calls += 1
        return self.stubs[self.calls % 2]

    def NodePrepareResources(self, request: object, timeout: float) -> object:  # noqa: N802 - the gRPC name
        return self._next().NodePrepareResources(request, timeout=timeout)

    def NodeUnprepareResources(self, request: object, timeout: float) -> object:  # noqa: N802 - the gRPC name
        return self._next().NodeUnprepareResources(request, timeout=timeout)


def prepare_round(drivers: dict[str, DriverChild], client: Client, round_no: int,
                  timings: dict[str, dict[str, list[float]]]) -> None:
    """110 claims per driver prepared, asked again and unprepared, one claim per call; latencies in ms.

    With two drivers the calls alternate between them (claim i on one, then on the other, the
    order swapped every call), so both see the same moment's load.
    """
    made = {name: claims(client, f"v{number}r{round_no}", driver.node, 110)
            for number, (name, driver) in enumerate(drivers.items())}
    names = list(drivers)
    for verb in ("prepare", "again", "unprepare"):
        for i in range(110):
            for name in names if i % 2 == 0 else reversed(names):
                stub = drivers[name].stub
                claim, uid = made[name][i]
                refs = [api.Claim(namespace="default", name=claim, uid=uid)]
                if verb == "unprepare":
                    call, request = stub.NodeUnprepareResources, api.NodeUnprepareResourcesRequest(claims=refs)
                else:
                    call, request = stub.NodePrepareResources, api.NodePrepareResourcesRequest(claims=refs)
                started = time.perf_counter()
                answer = call(request, timeout=10)
                timings[name][verb].append((time.perf_counter() - started) * 1000)
                assert not answer.claims[uid].error, answer.claims[uid].error
        if verb == "prepare":
            assert all(len(os.listdir(driver.cdi)) == 110 for driver in drivers.values())
    for name, _ in (pair for pairs in made.values() for pair in pairs):
        client.delete(types.DRA_CLAIMS, name, "default")


def prepare_bench(client: Client, kubeconfig: Path, rounds: int, baseline: str | None,
                  cdi_tmpfs: bool, rolling: bool = False) -> dict[str, dict[str, list[float]]]:
    """Timings per variant ("this tree", "baseline" with ``--baseline``, "rolling" and "two pods" with
    ``--rolling``), calls alternating between the variants."""
    variants: dict[str, tuple[str, str | None]] = {"this tree": (NODE, None)}
    if baseline:
        variants["baseline"] = (BASELINE_NODE, baseline)
    drivers: dict[str, DriverChild] = {}
    extra: list[DriverChild] = []
    timings: dict[str, dict[str, list[float]]] = {name: {"prepare": [], "again": [], "unprepare": []}
                                                  for name in variants}
    try:
        for name, (node, pythonpath) in variants.items():
            drivers[name] = DriverChild(node, kubeconfig, pythonpath, cdi_tmpfs)
        if rolling:
            drivers["rolling"] = DriverChild(ROLLING_NODE, kubeconfig, None, cdi_tmpfs, str(uuid.uuid4()))
            old = DriverChild(PAIR_NODE, kubeconfig, None, cdi_tmpfs, str(uuid.uuid4()))
            extra.append(old)
            drivers["two pods"] = DriverChild(PAIR_NODE, kubeconfig, None, cdi_tmpfs, str(uuid.uuid4()), beside=old)
            drivers["two pods"].stub = Alternating(old, drivers["two pods"])
            for name in ("rolling", "two pods"):
                timings[name] = {"prepare": [], "again": [], "unprepare": []}
        for round_no in range(rounds):
            prepare_round(drivers, client, round_no, timings)
    finally:
        for driver in [*drivers.values(), *extra]:
            driver.close()
    return timings


def publish_bench(client: Client, sandbox: Sandbox, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"create-64": [], "create-1": [], "update-64": []}
    for n in range(repeats):
        for gpus in (64, 1):
            node = f"pub-{gpus}-{n}"
            sandbox.load([node_object(node, [], ip="10.0.1.1", gpushare=False)])  # each sync reads its Node
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
    parser.add_argument("--rounds", type=int, default=None, help="rounds of 110 claims (default 3)")
    parser.add_argument("--baseline", metavar="DIR", help="another checkout whose driver runs side by side")
    parser.add_argument("--rolling", action="store_true",
                        help="also a --pod-uid instance, and two sharing one node, calls alternating between them")
    parser.add_argument("--cdi-tmpfs", action="store_true",
                        help="CDI specs under /dev/shm, as /var/run/cdi is tmpfs on most nodes (default: /tmp)")
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    sandbox = Sandbox(port=0).start()
    work = Path(tempfile.mkdtemp(prefix="bdra-kc"))
    try:
        kubeconfig = sandbox.write_kubeconfig(work / "kubeconfig")
        sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False),
                      node_object(BASELINE_NODE, [], ip="10.0.0.2", gpushare=False),
                      node_object(ROLLING_NODE, [], ip="10.0.0.3", gpushare=False),
                      node_object(PAIR_NODE, [], ip="10.0.0.4", gpushare=False)])
        client = Client(load_config(str(kubeconfig)), component="bench")
        prepared = prepare_bench(client, kubeconfig, rounds, args.baseline, args.cdi_tmpfs, args.rolling)
        published = publish_bench(client, sandbox, 5 if args.quick else 20)
    finally:
        sandbox.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("NodePrepareResources, 110 claims on one node (8 GPUs), one claim per call, driver in a child process, "
          f"CDI specs on {'tmpfs' if args.cdi_tmpfs else 'the /tmp file system'}:")
    for name, timings in prepared.items():
        if len(prepared) > 1:
            print(f" {name}{f' ({args.baseline})' if name == 'baseline' else ''}:")
        print(line("prepare (GET + CDI + ckpt)", timings["prepare"], 10.0))
        print(line("asked again (from record)", timings["again"]))
        print(line("unprepare", timings["unprepare"]))
        ratio = pct(timings["prepare"], 0.99) / max(pct(timings["again"], 0.99), 1e-6)
        print(f"  first preparation / repeat (p99): {ratio:.1f}x")
    if "baseline" in prepared:
        ours, theirs = prepared["this tree"], prepared["baseline"]
        for verb in ("prepare", "unprepare"):
            print(f"  {verb}: baseline / this tree  p50 {pct(theirs[verb], 0.5) / pct(ours[verb], 0.5):.2f}x"
                  f"   p99 {pct(theirs[verb], 0.99) / pct(ours[verb], 0.99):.2f}x")
    for name in ("rolling", "two pods"):
        if name in prepared:
            ours, theirs = prepared["this tree"], prepared[name]
            for verb in ("prepare", "again", "unprepare"):
                print(f"  {verb}: {name} / this tree  p50 {pct(theirs[verb], 0.5) / pct(ours[verb], 0.5):.2f}x"
                      f"   p99 {pct(theirs[verb], 0.99) / pct(ours[verb], 0.99):.2f}x")
    print("ResourceSlice publishing (build + API write, sandbox):")
    print(line("create, 64 GPUs", published["create-64"]))
    print(line("create, 1 GPU", published["create-1"]))
    print(line("update, 64 GPUs, one unhealthy", published["update-64"]))
    print(f"  64 GPUs / 1 GPU (p50): {pct(published['create-64'], 0.5) / pct(published['create-1'], 0.5):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
