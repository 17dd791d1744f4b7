"""``kubectl gpushare top`` over every node's device plugin against plain inspect, on one sandbox.

    .venv/bin/python bench/bench_top.py            # 1,000 nodes x 8 GPUs / 20,000 pods
    .venv/bin/python bench/bench_top.py --quick    # 100 nodes / 2,000 pods
    .venv/bin/python bench/bench_top.py --nodes 500 --pods 10000 --runs 3

The sandbox runs in this process with one device-plugin pod per node, each the ``pods/proxy``
target of a stand-in usage server (all of them served by one asyncio loop on loopback, a port
each, answering each node's `protocol.UsageReport` built from the pods placed there). Each
command runs as a user runs it (the console script in its own process), median of N interleaved
rounds after a warm-up round. Goal: ``top`` within 2x of ``kubectl inspect gpushare``. The proxy
floor, a process that only fetches every document through the sandbox's ``pods/proxy``, shows what
of ``top``'s time is the stand-in API server relaying 1,000 requests (kube-apiserver does this in Go).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_inspect import BIN, INSPECT, run  # noqa: E402

from kubectl_gpushare import protocol  # noqa: E402
from kubectl_gpushare.sandbox.server import Sandbox  # noqa: E402
from kubectl_gpushare.sandbox.spec import generate_cluster  # noqa: E402

GPUSHARE = str(BIN / "kubectl-gpushare")
PROXY_FLOOR = r"""
from kubectl_gpushare.inspect.usage import fetch_reports
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config

with Client(load_config(), component="bench-floor") as client:
    assert not fetch_reports(client).failures
"""
"""What the proxying alone costs here: every plugin's document through the sandbox, nothing else."""
GIB = 1 << 30
GPUS = 8
GPU_MEMORY = 80


def _plugin_pod(node: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"gpushare-device-plugin-{node}", "namespace": "kube-system",
                     "labels": {"component": "gpushare-device-plugin"}},
        "spec": {"nodeName": node, "containers": [{"name": "plugin", "image": "x", "ports": [
            {"name": protocol.USAGE_PORT_NAME, "containerPort": protocol.USAGE_PORT}]}]},
        "status": {"phase": "Running", "podIP": f"10.{64 + index // 65536}.{index // 256 % 256}.{index % 256}"},
    }  # fmt: skip


def _reports(objects: list[dict[str, Any]], rng: random.Random) -> dict[str, bytes]:
    """Each node's usage document: its placed pods, each using 50-150% of its share."""
    pods: dict[str, list[protocol.UsagePod]] = defaultdict(list)
    for obj in objects:
        meta, spec = obj["metadata"], obj.get("spec", {})
        index = (meta.get("annotations") or {}).get(protocol.ANN_IDX)
        if obj["kind"] != "Pod" or not spec.get("nodeName") or index is None or not index.isdigit():
            continue
        share = int((meta.get("annotations") or {}).get(protocol.ANN_POD, "0")) * GIB
        pods[spec["nodeName"]].append(protocol.UsagePod(
            meta["namespace"], meta["name"], meta.get("uid", ""), int(index), share, int(share * rng.uniform(0.5, 1.5)),
        ))  # fmt: skip
    reports: dict[str, bytes] = {}
    for obj in objects:
        if obj["kind"] != "Node":
            continue
        node = obj["metadata"]["name"]
        placed = pods.get(node, [])
        gpus = [
            protocol.UsageGpu(
                g, f"GPU-{node}-{g}", GPU_MEMORY * GIB, sum(p.allocated_bytes for p in placed if p.gpu == g),
                sum(p.used_bytes or 0 for p in placed if p.gpu == g), protocol.ENFORCE_HARD,
            )
            for g in range(GPUS)
        ]  # fmt: skip
        reports[node] = protocol.encode_usage_report(
            protocol.UsageReport(node, "2026-01-01T00:00:00Z", 10.0, "cgroup-limits", gpus, placed)
        )
    return reports


def _serve(reports: dict[str, bytes], conn: Connection) -> None:
    """In a child process: one asyncio loop, a loopback HTTP/1.1 server per node answering its document."""
    loop = asyncio.new_event_loop()

    def handler(body: bytes) -> Any:
        reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body), body)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while await reader.readuntil(b"\r\n\r\n"):
                    writer.write(reply)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        return serve

    async def start() -> dict[str, int]:
        ports = {}
        for node, body in reports.items():
            server = await asyncio.start_server(handler(body), "127.0.0.1", 0)
            ports[node] = server.sockets[0].getsockname()[1]
        return ports

    conn.send(loop.run_until_complete(start()))
    loop.run_until_complete(loop.run_in_executor(None, conn.recv))  # until the parent says stop


class Plugins:
    """The stand-in plugins in a process of their own (as on real nodes, they share no interpreter with the API)."""

    def __init__(self, reports: dict[str, bytes]) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("fork").Process(target=_serve, args=(reports, child), daemon=True)
        self.process.start()
        self.ports: dict[str, int] = self.conn.recv()

    def stop(self) -> None:
        self.conn.send("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


def start(nodes: int, pods: int) -> tuple[Sandbox, Plugins]:
    """The sandbox with the generated cluster and a plugin per node, each the proxy target of its pod."""
    objects = generate_cluster(nodes, GPUS, pods, 0, gpu_memory=GPU_MEMORY)
    names = [obj["metadata"]["name"] for obj in objects if obj["kind"] == "Node"]
    objects += [_plugin_pod(node, index) for index, node in enumerate(names)]
    plugins = Plugins(_reports(objects, random.Random(0)))
    sandbox = Sandbox(port=0, controllers=False).start()
    sandbox.load(objects)
    for node in names:
        sandbox.register_proxy_target("kube-system", f"gpushare-device-plugin-{node}", protocol.USAGE_PORT,
                                      "127.0.0.1", plugins.ports[node])  # fmt: skip
    return sandbox, plugins


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small cluster")
    parser.add_argument("--runs", type=int, default=None, help="repetitions per command")
    parser.add_argument("--nodes", type=int, default=None, help="cluster size (overrides --quick)")
    parser.add_argument("--pods", type=int, default=None, help="pod count (overrides --quick)")
    args = parser.parse_args()
    nodes, pods = (100, 2000) if args.quick else (1000, 20_000)
    nodes, pods = args.nodes or nodes, args.pods or pods
    runs = args.runs or (3 if args.quick else 5)
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "kubectl_gpushare"), quiet=1)
    sandbox, plugins = start(nodes, pods)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-top-") as tmp:
            env = dict(os.environ, KUBECONFIG=str(sandbox.write_kubeconfig(Path(tmp) / "kubeconfig")))
            commands = {
                "inspect": [INSPECT], "top": [GPUSHARE, "top", "-A"], "top-json": [GPUSHARE, "top", "-A", "-o", "json"],
                "proxy-floor": [sys.executable, "-c", PROXY_FLOOR],
            }
            times: dict[str, list[float]] = {name: [] for name in commands}
            print(f"== {nodes:,} nodes x {GPUS} GPUs, {pods:,} pods, {nodes:,} plugins; median of {runs}")
            for round_number in range(runs + 1):
                for name, command in commands.items():
                    elapsed, _rss, status = run(command, env)
                    assert status == 0, f"{' '.join(command)} exited {status}"
                    if round_number:
                        times[name].append(elapsed)
    finally:
        sandbox.stop()
        plugins.stop()
    inspect, top, top_json, floor = (
        statistics.median(times[name]) for name in ("inspect", "top", "top-json", "proxy-floor")
    )
    print(f"kubectl inspect gpushare     : {inspect:7.2f} s")
    print(f"kubectl gpushare top -A      : {top:7.2f} s   ratio {top / inspect:5.2f} (goal <= 2)")
    print(f"kubectl gpushare top -o json : {top_json:7.2f} s   ratio {top_json / inspect:5.2f}")
    print(f"proxy floor (documents only) : {floor:7.2f} s   ratio {floor / inspect:5.2f}  (the sandbox's pods/proxy)")


if __name__ == "__main__":
    main()
