"""fit, doctor and -o yaml against plain inspect, measured side by side on one sandbox.

    .venv/bin/python bench/bench_answers.py            # 5,000 nodes x 8 GPUs / 100,000 pods
    .venv/bin/python bench/bench_answers.py --quick    # 100 nodes / 3,000 pods
    .venv/bin/python bench/bench_answers.py --nodes 1000 --pods 20000 --runs 3

Each command runs as a user runs it (the console script against a sandbox API server in its own
process), median of N runs after a warm-up. Goals: ``fit`` and ``doctor`` within 1.2x of plain
``kubectl inspect gpushare``; ``-o yaml`` within 1.5x of ``-o json``; inspect within 2.5x of the
floor: a process that only fetches the same two lists (nodes, then active pods in inspect's pages)
and decodes them into the same typed structs, with no ledger and no output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_inspect import BIN, INSPECT, SandboxProcess, run  # noqa: E402

GPUSHARE = str(BIN / "kubectl-gpushare")

FLOOR = r"""
from kubectl_gpushare.inspect.source import ACTIVE_PODS, POD_PAGE_SIZE
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config

with Client(load_config(), component="bench-floor") as client:
    nodes = client.list_nodes()
    pods = sum(len(page.items) for page in client.list_pages(types.PODS, field_selector=ACTIVE_PODS,
                                                             page_size=POD_PAGE_SIZE))
"""


def median(args: list[str], env: dict[str, str], runs: int, ok: tuple[int, ...] = (0,)) -> float:
    times = []
    for _ in range(runs + 1):  # the first run warms the sandbox's caches and the page cache
        elapsed, _rss, status = run(args, env)
        assert status in ok, f"{' '.join(args)} exited {status}"
        times.append(elapsed)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small cluster")
    parser.add_argument("--runs", type=int, default=None, help="repetitions per command")
    parser.add_argument("--nodes", type=int, default=None, help="cluster size (overrides --quick)")
    parser.add_argument("--pods", type=int, default=None, help="pod count (overrides --quick)")
    args = parser.parse_args()
    nodes, pods = (100, 3000) if args.quick else (5000, 100_000)
    nodes, pods = args.nodes or nodes, args.pods or pods
    runs = args.runs or (3 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="bench-answers-") as tmp:
        sandbox = SandboxProcess(nodes, pods, Path(tmp))
        env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig))
        try:
            print(f"== {nodes:,} nodes x 8 GPUs, {pods:,} pods, median of {runs}")
            inspect = median([INSPECT], env, runs)
            floor = median([sys.executable, "-c", FLOOR], env, runs)
            fit = median([GPUSHARE, "fit", "4", "--count", "10"], env, runs)
            doctor = median([GPUSHARE, "doctor"], env, runs, ok=(0, 1, 2))
            as_json = median([INSPECT, "-o", "json"], env, runs)
            as_yaml = median([INSPECT, "-o", "yaml"], env, runs)
        finally:
            sandbox.stop()
    print(f"floor: fetch + decode the lists : {floor:7.2f} s")
    print(f"kubectl inspect gpushare        : {inspect:7.2f} s   ratio {inspect / floor:5.2f} (goal <= 2.5)")
    print(f"kubectl gpushare fit 4 --count 10: {fit:7.2f} s   ratio {fit / inspect:5.2f} (goal <= 1.2)")
    print(f"kubectl gpushare doctor         : {doctor:7.2f} s   ratio {doctor / inspect:5.2f} (goal <= 1.2)")
    print(f"inspect -o json                 : {as_json:7.2f} s")
    print(f"inspect -o yaml                 : {as_yaml:7.2f} s   ratio {as_yaml / as_json:5.2f} (goal <= 1.5)")


if __name__ == "__main__":
    main()
