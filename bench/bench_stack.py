"""``sandbox --stack`` end to end: time from ``kubectl create`` of N pods to all Running, and memory.

Runs ``kubectl-gpushare sandbox --stack`` as a child process with a generated cluster (every node
labelled ``gpushare=true``, so each gets a device plugin and a kubelet stand-in), waits until every
node's plugin has published ``aliyun.com/gpu-mem``, then:

* schedule - creates ``--pods`` pods of 1 GiB each with the real kubectl (one ``kubectl create -f``
             of a multi-document file) and times until all are Running (polled over HTTP);
* rss      - the child's resident and peak memory (VmRSS, VmHWM) with ``--rss-nodes`` nodes.

Usage: .venv/bin/python bench/bench_stack.py [--nodes 10] [--pods 100] [--rss-nodes 500] [--skip-rss]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "kubectl-gpushare"


def start(workdir: Path, nodes: int) -> tuple[subprocess.Popen[str], str, Path]:
    """Start ``sandbox --stack`` with ``nodes`` 8-GPU nodes of 16 GiB; returns the process, URL, kubeconfig."""
    kubeconfig = workdir / "kc"
    process = subprocess.Popen(
        [str(SCRIPT), "sandbox", "--stack", "--nodes", str(nodes), "--gpus-per-node", "8", "--gpu-memory", "16",
         "--pods", "0", "--kubeconfig", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()
    if not banner.startswith("Sandbox API server listening on "):
        raise SystemExit(f"the sandbox did not start: {banner!r}")
    return process, banner.split()[5], kubeconfig


def get(url: str) -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def wait_plugins(url: str, nodes: int, timeout: float) -> float:
    """Seconds until every node shows ``aliyun.com/gpu-mem`` (its plugin registered)."""
    begin = time.monotonic()
    while time.monotonic() - begin < timeout:
        items = get(f"{url}/api/v1/nodes")["items"]
        ready = sum(1 for n in items if (n["status"].get("allocatable") or {}).get("aliyun.com/gpu-mem"))
        if ready == nodes:
            return time.monotonic() - begin
        time.sleep(0.5)
    raise SystemExit(f"only {ready}/{nodes} device plugins registered within {timeout:.0f}s")


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def bench_schedule(nodes: int, pods: int) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise SystemExit("kubectl is not on PATH")
    with tempfile.TemporaryDirectory(prefix="bst") as tmp:
        workdir = Path(tmp)
        process, url, kubeconfig = start(workdir, nodes)
        try:
            plugins = wait_plugins(url, nodes, 120)
            docs = [
                json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"bench-{i:04d}"},
                            "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                                "limits": {"aliyun.com/gpu-mem": "1"}}}]}})
                for i in range(pods)
            ]
            manifest = workdir / "pods.json"
            manifest.write_text("\n".join(docs))
            env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(workdir / "cache"))
            begin = time.monotonic()
            subprocess.run([kubectl, "create", "-f", str(manifest)], env=env, check=True, capture_output=True,
                           timeout=300)
            created = time.monotonic() - begin
            running = 0
            while running < pods:
                if time.monotonic() - begin > 600:
                    raise SystemExit(f"only {running}/{pods} pods Running after 600 s")
                items = get(f"{url}/api/v1/pods")["items"]
                running = sum(1 for p in items if p["status"].get("phase") == "Running")
                time.sleep(0.1)
            total = time.monotonic() - begin
            rss, hwm = memory_mib(process.pid)
        finally:
            stop(process)
    print(f"schedule: {nodes} nodes ({nodes * 8} GPUs), device plugins up in {plugins:.1f}s; "
          f"kubectl create of {pods} x 1 GiB pods took {created:.2f}s, all Running after {total:.2f}s "
          f"({pods / total:.1f} pods/s); sandbox+stack RSS {rss:.0f} MiB (peak {hwm:.0f} MiB)")


def bench_rss(nodes: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bst") as tmp:
        process, url, _ = start(Path(tmp), nodes)
        try:
            plugins = wait_plugins(url, nodes, 1200)
            cpu_before = cpu_seconds(process.pid)
            time.sleep(10)
            idle_cpu = (cpu_seconds(process.pid) - cpu_before) / 10
            rss, hwm = memory_mib(process.pid)
        finally:
            stop(process)
    verdict = "under" if hwm < 1024 else "OVER"
    print(f"rss: {nodes} nodes, {nodes} device plugins + kubelets registered in {plugins:.1f}s; "
          f"RSS {rss:.0f} MiB, peak {hwm:.0f} MiB ({verdict} 1 GiB); idle CPU {idle_cpu:.0%} of a core")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--rss-nodes", type=int, default=500)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--skip-schedule", action="store_true")
    args = parser.parse_args()
    if not args.skip_schedule:
        bench_schedule(args.nodes, args.pods)
    if not args.skip_rss:
        bench_rss(args.rss_nodes)


if __name__ == "__main__":
    main()
