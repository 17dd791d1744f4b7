"""The CLI at scale: lines printed by fit, doctor and explain, and the latency of one completion.

    .venv/bin/python bench/bench_cli_scale.py                 # 1,000 nodes x 8 GPUs, 2,000 pods
    .venv/bin/python bench/bench_cli_scale.py --nodes 100 --pods 300

Against one sandbox API server in its own process. Lines: each text answer as printed by default
(summary first, detail capped at --limit) beside ``--all`` (every detail row, what 0.1.0 printed).
Completion: the wall time of one ``kubectl_complete-inspect-gpushare ""`` (all node names) and of
the same through ``kubectl __complete inspect gpushare ""``, median of N, beside ``kubectl get
nodes -o name``, the same question asked of kubectl itself. Goal: the completer within 2x of it
(kubectl's own completion of node names runs that very command).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_inspect import BIN, SandboxProcess  # noqa: E402

GPUSHARE = str(BIN / "kubectl-gpushare")
KUBECTL = str(BIN / "kubectl")


def lines(args: list[str], env: dict[str, str]) -> int:
    """How many lines a command prints on stdout."""
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode in (0, 10, 11, 12), f"{' '.join(args)} exited {result.returncode}: {result.stderr}"
    return result.stdout.count("\n")


def wall(args: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of a command (output discarded), after one warm-up run."""
    times = []
    for number in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
        if number:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def pending_pod(server: str) -> tuple[str, str]:
    """A Pending pod that asks for GPU memory (the generator leaves some unscheduled)."""
    with urllib.request.urlopen(server + "/api/v1/pods?fieldSelector=status.phase%3DPending&limit=50") as reply:
        items = json.load(reply)["items"]
    pod = next(p for p in items if not p["spec"].get("nodeName"))
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        sandbox = SandboxProcess(args.nodes, args.pods, Path(tmp))
        env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig), KUBECACHEDIR=str(Path(tmp) / "cache"),
                   PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
        try:
            namespace, pod = pending_pod(sandbox.server)
            print(f"== {args.nodes:,} nodes x 8 GPUs, {args.pods:,} pods; explain {namespace}/{pod}")
            answers = {
                "fit 4": [GPUSHARE, "fit", "4"],
                "doctor": [GPUSHARE, "doctor"],
                "explain": [GPUSHARE, "explain", pod, "-n", namespace],
            }
            print(f"{'lines printed':24} {'default':>8} {'--all':>8}")
            for name, command in answers.items():
                print(f"{name:24} {lines(command, env):8,} {lines([*command, '--all'], env):8,}")
            completer = wall([str(BIN / "kubectl_complete-inspect-gpushare"), ""], env, args.runs)
            through = wall([KUBECTL, "__complete", "inspect", "gpushare", ""], env, args.runs)
            reference = wall([KUBECTL, "get", "nodes", "-o", "name"], env, args.runs)
        finally:
            sandbox.stop()
    ratio = completer / reference
    print(f"completion, completer alone    : {completer * 1000:6.0f} ms   ratio {ratio:5.2f} (goal <= 2)")
    print(f"completion, kubectl __complete : {through * 1000:6.0f} ms")
    print(f"kubectl get nodes -o name      : {reference * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
