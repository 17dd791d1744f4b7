"""kubectl inspect gpushare: wall time, memory and start-up, measured side by side in one run.

    .venv/bin/python bench/bench_inspect.py            # 1,000 x 8 GPUs / 30,000 pods and 5,000 / 100,000
    .venv/bin/python bench/bench_inspect.py --quick    # 100 nodes / 3,000 pods, fewer repetitions

For each cluster size a sandbox API server runs in its own process (so the measuring process
stays small and children's peak RSS is their own), seeded by the sandbox's generator. Then:

1. ``kubectl get nodes -o json`` + ``kubectl get pods -A -o json`` (the real kubectl) vs
   ``kubectl-inspect-gpushare`` (default view): wall time, ratio (goal <= 0.2), peak RSS of each
   (goal for inspect <= 250 MB).
2. Decoding the same node and pod list bytes through the ``kubernetes`` package's generated
   models (``ApiClient.deserialize``) vs ``kube.types`` (msgspec): ratio (goal >= 10x).

Finally ``kubectl-inspect-gpushare --help`` and a small-cluster inspect, median of N runs
(goals 150 ms and 400 ms).
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
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
INSPECT = str(BIN / "kubectl-inspect-gpushare")

DECODE = r"""
import json, sys, time, urllib.request
server, mode = sys.argv[1], sys.argv[2]
bodies = [urllib.request.urlopen(server + path).read() for path in ("/api/v1/nodes", "/api/v1/pods")]
if mode == "models":
    import inspect
    from kubernetes.client import ApiClient
    start = time.perf_counter()
    client = ApiClient()
    if "response_text" in inspect.signature(client.deserialize).parameters:  # kubernetes >= 35
        def decode(body, kind): return client.deserialize(body.decode(), kind, "application/json")
    else:
        class Reply:
            def __init__(self, data): self.data = data
        def decode(body, kind): return client.deserialize(Reply(body), kind)
    nodes = decode(bodies[0], "V1NodeList")
    pods = decode(bodies[1], "V1PodList")
    count = len(nodes.items) + len(pods.items)
else:
    from kubectl_gpushare.kube import types
    start = time.perf_counter()
    count = len(types.NODE_LIST_DECODER.decode(bodies[0]).items) + len(types.POD_LIST_DECODER.decode(bodies[1]).items)
print(time.perf_counter() - start, count, sum(len(b) for b in bodies))
"""


def run(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run a command with output discarded; its wall seconds, peak RSS in MB and exit status."""
    start = time.perf_counter()
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if process.stderr is not None:
        process.stderr.close()
    return elapsed, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


class SandboxProcess:
    """A `kubectl gpushare sandbox` server in a child process."""

    def __init__(self, nodes: int, pods: int, workdir: Path) -> None:
        self.kubeconfig = workdir / f"sandbox-{nodes}-{pods}.kubeconfig"
        self.log = open(workdir / f"sandbox-{nodes}-{pods}.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [str(BIN / "kubectl-gpushare"), "sandbox", "--nodes", str(nodes), "--gpus-per-node", "8",
             "--pods", str(pods), "--seed", "0", "--kubeconfig", str(self.kubeconfig)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 600
        while not self.kubeconfig.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"sandbox did not start; see {self.log.name}")
            time.sleep(0.2)
        text = self.kubeconfig.read_text()
        self.server = next(line.split("server:")[1].strip() for line in text.splitlines() if "server:" in line)
        urllib.request.urlopen(self.server + "/api/v1/nodes?limit=1").read()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


def median_run(args: list[str], env: dict[str, str], runs: int) -> float:
    run(args, env)  # warm the page cache
    return statistics.median(run(args, env)[0] for _ in range(runs))


def measure_size(nodes: int, pods: int, workdir: Path, kubectl: str, models: bool) -> None:
    print(f"\n== {nodes:,} nodes x 8 GPUs, {pods:,} pods")
    sandbox = SandboxProcess(nodes, pods, workdir)
    env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig), KUBECACHEDIR=str(workdir / "kubecache"))
    try:
        run([INSPECT], env)  # warm-up: the sandbox builds its caches on first list
        get_nodes = run([kubectl, "get", "nodes", "-o", "json"], env)
        get_pods = run([kubectl, "get", "pods", "-A", "-o", "json"], env)
        inspect = run([INSPECT], env)
        details = run([INSPECT, "-d"], env)
        as_json = run([INSPECT, "-o", "json"], env)
        assert all(result[2] == 0 for result in (get_nodes, get_pods, inspect, details, as_json))
        kubectl_time = get_nodes[0] + get_pods[0]
        print(
            f"kubectl get nodes + get pods -A (-o json): {kubectl_time:8.2f} s   "
            f"peak RSS {max(get_nodes[1], get_pods[1]):7.1f} MB"
        )
        print(f"kubectl-inspect-gpushare (summary)       : {inspect[0]:8.2f} s   peak RSS {inspect[1]:7.1f} MB")
        print(f"kubectl-inspect-gpushare -d              : {details[0]:8.2f} s   peak RSS {details[1]:7.1f} MB")
        print(f"kubectl-inspect-gpushare -o json         : {as_json[0]:8.2f} s   peak RSS {as_json[1]:7.1f} MB")
        print(f"ratio inspect / kubectl                  : {inspect[0] / kubectl_time:8.3f}   (goal <= 0.2)")
        print(f"peak RSS inspect                         : {inspect[1]:8.1f} MB (goal <= 250 MB)")
        if models:
            ours = subprocess.run(
                [sys.executable, "-c", DECODE, sandbox.server, "structs"], capture_output=True, text=True, check=True
            )
            theirs = subprocess.run(
                [sys.executable, "-c", DECODE, sandbox.server, "models"], capture_output=True, text=True, check=True
            )
            ours_s, count, size = ours.stdout.split()
            theirs_s = theirs.stdout.split()[0]
            print(
                f"decode {int(count):,} objects ({int(size) / 1e6:.0f} MB JSON): "
                f"kubernetes models {float(theirs_s):.2f} s, "
                f"kube.types {float(ours_s):.3f} s, ratio {float(theirs_s) / float(ours_s):.1f}x (goal >= 10x)"
            )
    finally:
        sandbox.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small cluster, fewer repetitions")
    parser.add_argument("--runs", type=int, default=None, help="repetitions for the start-up medians")
    parser.add_argument("--no-models", action="store_true", help="skip decoding through the kubernetes models")
    args = parser.parse_args()
    kubectl = shutil.which("kubectl") or str(BIN / "kubectl")
    sizes = [(100, 3000)] if args.quick else [(1000, 30000), (5000, 100000)]
    runs = args.runs or (5 if args.quick else 15)
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as tmp:
        workdir = Path(tmp)
        for nodes, pods in sizes:
            measure_size(nodes, pods, workdir, kubectl, not args.no_models)
        print(f"\n== start-up (median of {runs})")
        empty_env = dict(os.environ, KUBECONFIG=str(workdir / "absent"))
        help_time = median_run([INSPECT, "--help"], empty_env, runs)
        print(f"kubectl-inspect-gpushare --help          : {help_time * 1000:8.0f} ms (goal <= 150 ms)")
        small = SandboxProcess(4, 12, workdir)
        try:
            env = dict(os.environ, KUBECONFIG=str(small.kubeconfig))
            small_time = median_run([INSPECT], env, runs)
            print(f"kubectl-inspect-gpushare, 4 nodes        : {small_time * 1000:8.0f} ms (goal <= 400 ms)")
            via_kubectl = median_run(
                [kubectl, "inspect", "gpushare"], dict(env, PATH=f"{BIN}{os.pathsep}{env['PATH']}"), runs
            )
            print(
                f"kubectl inspect gpushare, 4 nodes        : {via_kubectl * 1000:8.0f} ms "
                "(kubectl's plugin lookup included)"
            )
        finally:
            small.stop()


if __name__ == "__main__":
    main()
