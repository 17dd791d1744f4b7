"""Benchmark the scheduler extender on the sandbox: sync, filter latency and throughput, bind, RSS.

Runs the real CLI (``kubectl-gpushare serve-extender``) as a separate process against an
in-process sandbox holding 5,000 nodes x 8 GPUs and 50,000 bound pods (``--quick``: 500 nodes,
5,000 pods), then measures from a client over loopback HTTP with keep-alive, as kube-scheduler
calls it:

- cache sync at start (process start until ``/readyz`` answers 200);
- filter with every node name (``nodeCacheCapable: true``): p50 / p99 round trip, and the
  server-side p50 / p99 read from the extender's own latency histogram; side by side, the same
  filter with full Node objects (``nodeCacheCapable: false``);
- sustained filters per second with several concurrent clients;
- bind of pending pods: p50 / p99 round trip (three API calls each);
- the extender's RSS after all of that.

Side by side, in process: the state's cached max-free filter against `Ledger.fits` per node on
the same ledger, printed as a ratio.

    .venv/bin/python bench/bench_extender.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube import records
from kubectl_gpushare.kube.types import NODE_DECODER, POD_DECODER
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

PREFIX = "/gpushare-scheduler"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> bytes:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{path}: HTTP {response.status}")
    return data


def server_percentiles(port: int, verb: str) -> tuple[float, float]:
    """p50/p99 upper bounds from the extender's histogram buckets (seconds)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    buckets: list[tuple[float, float]] = []
    prefix = 'gpushare_extender_request_duration_seconds_bucket{le="'
    for line in text.splitlines():
        if line.startswith(prefix) and f'verb="{verb}"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    total = buckets[-1][1] if buckets else 0.0

    def at(q: float) -> float:
        for bound, count in buckets:
            if count >= q * total:
                return bound
        return float("nan")

    return at(0.5), at(0.99)


def in_process_filter_ratio(objects: list[dict], names: list[str], repeat: int) -> tuple[float, float]:
    """Mean seconds per 5,000-node filter: cached max-free vs Ledger.fits per node."""
    state = ExtenderState()
    for obj in objects:
        raw = json.dumps(obj).encode()
        if obj["kind"] == "Node":
            state.set_node(records.node_record(NODE_DECODER.decode(raw)))
        elif obj["kind"] == "Pod":
            state.set_pod(records.pod_record(POD_DECODER.decode(raw)))
    state.filter(names, 4)
    started = time.perf_counter()
    for _ in range(repeat):
        state.filter(names, 4)
    fast = (time.perf_counter() - started) / repeat
    started = time.perf_counter()
    for _ in range(repeat):
        [state.ledger.fits(name, 4) for name in names]
    naive = (time.perf_counter() - started) / repeat
    return fast, naive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes and 5,000 pods instead of 5,000 and 50,000")
    args = parser.parse_args()
    nodes, pods = (500, 5_000) if args.quick else (5_000, 50_000)
    duration = 3.0 if args.quick else 10.0

    t = time.perf_counter()
    objects = generate_cluster(nodes=nodes, gpus_per_node=8, pods=pods, seed=7, pending_fraction=0.02)
    print(f"generated {nodes} nodes x 8 GPUs, {pods} pods in {time.perf_counter() - t:.1f}s")
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    pending = [o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]

    with Sandbox(port=0, history=200_000) as sandbox, tempfile.TemporaryDirectory() as tmp:
        sandbox.load(objects)
        kubeconfig = sandbox.write_kubeconfig(Path(tmp) / "kubeconfig")
        port = free_port()
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), PORT=str(port), LOG_LEVEL="error")
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "kubectl_gpushare.cli", "serve-extender"], env=env)
        try:
            while True:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/readyz")
                    if conn.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if proc.poll() is not None:
                    raise SystemExit("extender exited")
                time.sleep(0.05)
            sync = time.perf_counter() - started
            print(f"cache sync (start to ready): {sync:.2f}s   [target <= 10 s]")

            pod = sandbox.get("pods", pending[0]["metadata"]["namespace"], pending[0]["metadata"]["name"])
            body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            reply = json.loads(post(conn, f"{PREFIX}/filter", body))
            print(f"filter: {len(reply['NodeNames'])} of {len(names)} nodes pass, reply {len(json.dumps(reply))} bytes")
            samples = []
            for _ in range(300 if args.quick else 500):
                t = time.perf_counter()
                post(conn, f"{PREFIX}/filter", body)
                samples.append(time.perf_counter() - t)
            p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
            s50, s99 = server_percentiles(port, "filter")
            print(f"filter {len(names)} names, round trip: p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms")
            print(f"filter at the server (histogram bucket bounds): p50 <= {s50 * 1e3:.1f} ms, "
                  f"p99 <= {s99 * 1e3:.1f} ms   [target p50 <= 5 ms, p99 <= 20 ms]")

            node_objects = [sandbox.get("nodes", None, name) for name in names]
            full_args = {"Pod": pod, "Nodes": {"metadata": {}, "items": node_objects}, "NodeNames": None}
            full = json.dumps(full_args).encode()
            objects_samples = []
            for _ in range(10 if args.quick else 20):
                t = time.perf_counter()
                post(conn, f"{PREFIX}/filter", full)
                objects_samples.append(time.perf_counter() - t)
            o50 = percentile(objects_samples, 0.5)
            print(f"filter with {len(names)} full Node objects ({len(full) / 1e6:.1f} MB, nodeCacheCapable false): "
                  f"p50 {o50 * 1e3:.1f} ms, {o50 / p50:.0f}x the NodeNames form")

            count = [0]
            lock = threading.Lock()
            stop = threading.Event()

            def client() -> None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                n = 0
                while not stop.is_set():
                    post(c, f"{PREFIX}/filter", body)
                    n += 1
                with lock:
                    count[0] += n

            threads = [threading.Thread(target=client) for _ in range(4)]
            for th in threads:
                th.start()
            time.sleep(duration)
            stop.set()
            for th in threads:
                th.join()
            print(f"sustained filters/s with 4 clients over {duration:.0f}s: {count[0] / duration:.0f}   "
                  f"[target >= 300]")

            binds = []
            for obj in pending[: min(300, len(pending))]:
                meta = obj["metadata"]
                live = sandbox.get("pods", meta["namespace"], meta["name"])
                node = json.loads(post(conn, f"{PREFIX}/filter", json.dumps(
                    {"Pod": live, "Nodes": None, "NodeNames": names[:50]}).encode()))["NodeNames"]
                if not node:
                    continue
                args_body = json.dumps({"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                        "PodUID": live["metadata"]["uid"], "Node": node[0]}).encode()
                t = time.perf_counter()
                result = json.loads(post(conn, f"{PREFIX}/bind", args_body))
                binds.append(time.perf_counter() - t)
                if result["Error"]:
                    raise RuntimeError(result["Error"])
            print(f"bind ({len(binds)} pods): p50 {percentile(binds, 0.5) * 1e3:.2f} ms, "
                  f"p99 {percentile(binds, 0.99) * 1e3:.2f} ms   [target p99 <= 50 ms]")
            print(f"extender RSS: {rss_mib(proc.pid):.0f} MiB   [target <= 400 MB]")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

    fast, naive = in_process_filter_ratio(objects, names, 20 if args.quick else 10)
    print(f"in process, {len(names)}-node filter: cached max-free {fast * 1e3:.2f} ms vs Ledger.fits per node "
          f"{naive * 1e3:.2f} ms ({naive / fast:.1f}x faster)")


if __name__ == "__main__":
    main()
