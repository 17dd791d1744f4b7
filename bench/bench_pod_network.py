"""Pod ranges and addresses in the sandbox: what they cost the generator and inspect's load, side by side.

    .venv/bin/python bench/bench_pod_network.py            # 5,000 nodes x 8 GPUs / 100,000 pods
    .venv/bin/python bench/bench_pod_network.py --quick    # 500 nodes / 10,000 pods

Two sandboxes (no controllers) in this process serve the same generated cluster: one as the
generator now writes it (``spec.podCIDR``/``podCIDRs`` on nodes, ``podIP``/``podIPs`` from the node's
range on Running pods, `sandbox.ipam`), one as it did before (no ranges, every pod ``10.244.0.1``).
``kubectl-inspect-gpushare`` runs against each in alternating order, N rounds; the medians and their
ratio are printed (goal <= 1.1: the added bytes are about 4% of the lists). Also: the generator with
and without `ipam.assign` (goal <= 1.2).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubectl_gpushare.sandbox import ipam, spec
from kubectl_gpushare.sandbox.server import Sandbox


def _without_ranges(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        if obj["kind"] == "Node":
            obj["spec"].pop("podCIDR", None)
            obj["spec"].pop("podCIDRs", None)
        elif obj["kind"] == "Pod" and "podIP" in obj["status"]:
            obj["status"]["podIP"] = "10.244.0.1"
            obj["status"].pop("podIPs", None)


def _generator(nodes: int, pods: int, rounds: int) -> tuple[float, float]:
    real = ipam.assign
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for r in range(rounds):
            for with_ranges in (True, False) if r % 2 else (False, True):
                spec.ipam.assign = real if with_ranges else (lambda objects: None)  # type: ignore[assignment]
                start = time.perf_counter()
                spec.generate_cluster(nodes, 8, pods, seed=r)
                times[with_ranges].append(time.perf_counter() - start)
    finally:
        spec.ipam.assign = real  # type: ignore[assignment]
    return min(times[False]), min(times[True])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes / 10,000 pods")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    nodes, pods = (500, 10_000) if args.quick else (5_000, 100_000)
    before, after = _generator(nodes, pods, 3)
    print(f"generator ({nodes} nodes, {pods} pods, best of 3): without ranges {before:.2f}s, "
          f"with {after:.2f}s, ratio {after / before:.2f}")
    new = spec.generate_cluster(nodes, 8, pods, seed=0)
    old = spec.generate_cluster(nodes, 8, pods, seed=0)
    _without_ranges(old)
    workdir = Path(tempfile.mkdtemp(prefix="bench-pod-network-"))
    served: dict[str, tuple[Sandbox, Path]] = {}
    for name, objects in (("without", old), ("with", new)):
        sandbox = Sandbox(port=0, controllers=False).start()
        sandbox.load(objects)
        served[name] = (sandbox, sandbox.write_kubeconfig(workdir / name))
    del old, new
    inspect = Path(sys.executable).parent / "kubectl-inspect-gpushare"
    times: dict[str, list[float]] = {"without": [], "with": []}
    try:
        for r in range(args.rounds):
            for name in ("without", "with") if r % 2 else ("with", "without"):
                start = time.perf_counter()
                subprocess.run([str(inspect)], env=dict(os.environ, KUBECONFIG=str(served[name][1])),
                               capture_output=True, check=True, timeout=600)
                times[name].append(time.perf_counter() - start)
    finally:
        for sandbox, _ in served.values():
            sandbox.stop()
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"inspect ({nodes} nodes, {pods} pods, median of {args.rounds}): without ranges "
          f"{median['without']:.2f}s, with {median['with']:.2f}s, ratio {median['with'] / median['without']:.3f}")


if __name__ == "__main__":
    main()
