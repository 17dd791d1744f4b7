"""Sandbox speed and memory: is the sandbox ever what a benchmark measures?

Runs the sandbox in a child process seeded with a generated cluster (5,000 nodes x 8 GPUs and
100,000 pods; --quick: 500 nodes, 10,000 pods) and measures, side by side in one run:

* full list of all pods over HTTP (the budget: <= 2 s) vs. what a naive server that re-encodes
  every object per request would need (json.dumps of the same objects) -> ratio;
* a paginated list (limit=500, as kubectl and informers page) vs. the single full list;
* a field-selected list (one node's pods, as the device plugin asks);
* the child's peak RSS (the budget: <= 1.5 GB);
* create throughput over keep-alive HTTP, and watch fan-out latency to 20 watchers.

Usage: .venv/bin/python bench/bench_sandbox.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from kubectl_gpushare.sandbox.builders import pod_object

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import sys, time
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster
nodes, pods = int(sys.argv[1]), int(sys.argv[2])
t0 = time.perf_counter()
objects = generate_cluster(nodes=nodes, gpus_per_node=8, pods=pods, seed=1)
t1 = time.perf_counter()
sb = Sandbox(port=0).start()
sb.load(objects)
del objects
t2 = time.perf_counter()
print(sb.port, round(t1 - t0, 3), round(t2 - t1, 3), flush=True)
sys.stdin.read()
sb.stop()
"""


def rss_mb(pid: int, field: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def get(conn: http.client.HTTPConnection, path: str) -> bytes:
    conn.request("GET", path, headers={"Accept": "application/json"})
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, body[:200]
    return body


def best_of(runs: int, action) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 pods instead of 100,000")
    args = parser.parse_args()
    nodes, pods = (500, 10_000) if args.quick else (5_000, 100_000)

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(nodes), str(pods)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        port_text, gen_s, load_s = child.stdout.readline().split()
        port = int(port_text)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        print(f"cluster: {nodes} nodes x 8 GPUs, {pods} pods (generate {gen_s} s, load {load_s} s in the child)")

        body = get(conn, "/api/v1/pods")
        full = best_of(3, lambda: get(conn, "/api/v1/pods"))
        items = json.loads(body)["items"]
        assert len(items) == pods
        naive = best_of(1, lambda: json.dumps({"kind": "PodList", "items": items}).encode())
        print(
            f"list all pods:        {full:6.3f} s  ({len(body) / 1e6:.0f} MB; budget 2 s) "
            f"{'OK' if full <= 2 else 'OVER BUDGET'}"
        )
        print(f"  naive re-encode:    {naive:6.3f} s  (json.dumps of the same objects, encode only)")
        print(f"  ratio naive/cached: {naive / full:6.1f}x")

        def paged() -> None:
            token = ""
            while True:
                page = get(conn, f"/api/v1/pods?limit=500&continue={token}")
                found = re.search(rb'"continue":"([^"]*)"', page[:300])
                if not found:
                    break
                token = found.group(1).decode()

        paged_s = best_of(3, paged)
        print(
            f"paginated (500/page): {paged_s:6.3f} s  ({pods // 500} pages; ratio to one full list: "
            f"{paged_s / full:.1f}x)"
        )
        decode = best_of(1, lambda: json.loads(body))
        print(f"  client json.loads of the full list: {decode:.3f} s (the client's cost, not the sandbox's)")
        node = "gpu-node-0007" if nodes > 1000 else "gpu-node-007"
        selected = best_of(5, lambda: get(conn, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"))
        print(f"one node's pods:      {selected * 1000:6.1f} ms (fieldSelector over {pods} pods)")
        peak = rss_mb(child.pid)
        print(
            f"sandbox peak RSS:     {peak:6.0f} MB (budget 1536 MB, includes generating the cluster) "
            f"{'OK' if peak <= 1536 else 'OVER BUDGET'}; now {rss_mb(child.pid, 'VmRSS'):.0f} MB"
        )

        latencies: list[float] = []
        ready = threading.Barrier(21)

        def watcher() -> None:
            watch = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            watch.request("GET", "/api/v1/namespaces/bench/pods?watch=true&resourceVersion=0&timeoutSeconds=20")
            response = watch.getresponse()
            ready.wait()
            while True:
                line = response.readline()
                if not line:
                    return
                event = json.loads(line)
                sent = float(event["object"]["metadata"]["annotations"]["sent"])
                latencies.append(time.perf_counter() - sent)
                if event["object"]["metadata"]["name"] == "last":
                    watch.close()
                    return

        threads = [threading.Thread(target=watcher) for _ in range(20)]
        for thread in threads:
            thread.start()
        ready.wait()
        time.sleep(0.2)
        creates = 500
        began = time.perf_counter()
        for i in range(creates):
            pod = pod_object("last" if i == creates - 1 else f"w{i}", "bench", [1])
            pod["metadata"]["annotations"] = {"sent": repr(time.perf_counter())}
            del pod["status"]
            conn.request("POST", "/api/v1/namespaces/bench/pods", body=json.dumps(pod))
            response = conn.getresponse()
            response.read()
            assert response.status == 201
        elapsed = time.perf_counter() - began
        for thread in threads:
            thread.join(timeout=30)
        print(f"creates over HTTP:    {creates / elapsed:6.0f} /s (one keep-alive connection, 20 watchers open)")
        print(
            f"watch fan-out:        {len(latencies)} events, median {statistics.median(latencies) * 1000:.1f} ms, "
            f"p99 {sorted(latencies)[int(len(latencies) * 0.99) - 1] * 1000:.1f} ms"
        )
    finally:
        if child.stdin:
            child.stdin.close()
        child.wait(timeout=60)


if __name__ == "__main__":
    main()
