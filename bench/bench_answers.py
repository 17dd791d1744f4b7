"""fit, doctor and -o yaml against plain inspect, measured side by side on one sandbox.

    .venv/bin/python bench/bench_answers.py            # 5,000 nodes x 8 GPUs / 100,000 pods
    .venv/bin/python bench/bench_answers.py --quick    # 100 nodes / 3,000 pods
    .venv/bin/python bench/bench_answers.py --nodes 1000 --pods 20000 --runs 3

Each command runs as a user runs it (the console script against a sandbox API server in its own
process), median of N rounds after a warm-up round; each round runs every command once, so drift in
the machine's speed moves all of them alike. Goals: ``fit`` and ``doctor`` within 1.2x of plain
``kubectl inspect gpushare``; ``-o yaml`` within 1.5x of ``-o json``; inspect within 2.5x of the
floor: a process that only fetches the same two lists (nodes, then active pods in inspect's pages)
and decodes them into the same typed structs, with no ledger and no output.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_inspect import BIN, INSPECT, SandboxProcess, run  # noqa: E402

from kubectl_gpushare.kube.errors import EXIT_FINDINGS_ERRORS, EXIT_FINDINGS_WARNINGS  # noqa: E402

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


def medians(commands: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, float]:
    """Median wall time of each command over ``runs`` rounds, after a warm-up round.

    Rounds interleave the commands (each runs once per round), so a machine that speeds up or
    slows down during the benchmark moves every command alike and the ratios stay comparable.
    The warm-up round fills the sandbox's caches and the page cache.
    """
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_number in range(runs + 1):
        for name, args in commands.items():
            elapsed, _rss, status = run(args, env)
            # doctor's verdict is its exit code (kube/errors.py: 11 warnings, 12 errors)
            ok = (0, EXIT_FINDINGS_WARNINGS, EXIT_FINDINGS_ERRORS) if name == "doctor" else (0,)
            assert status in ok, f"{' '.join(args)} exited {status}"
            if round_number:
                times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()}


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
    # Byte-compile the package first, as `pip install` does: an editable checkout under
    # PYTHONDONTWRITEBYTECODE would otherwise compile every module on every run, a cost no user pays.
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "kubectl_gpushare"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-answers-") as tmp:
        sandbox = SandboxProcess(nodes, pods, Path(tmp))
        env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig))
        try:
            print(f"== {nodes:,} nodes x 8 GPUs, {pods:,} pods, median of {runs}")
            times = medians({
                "inspect": [INSPECT],
                "floor": [sys.executable, "-c", FLOOR],
                "fit": [GPUSHARE, "fit", "4", "--count", "10"],
                "doctor": [GPUSHARE, "doctor"],
                "json": [INSPECT, "-o", "json"],
                "yaml": [INSPECT, "-o", "yaml"],
            }, env, runs)  # fmt: skip
            inspect, floor, fit, doctor = times["inspect"], times["floor"], times["fit"], times["doctor"]
            as_json, as_yaml = times["json"], times["yaml"]
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
