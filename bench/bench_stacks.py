"""inspect on a HAMi cluster vs the same-size gpushare cluster (goal: HAMi within 1.3x).

    .venv/bin/python bench/bench_stacks.py            # 5,000 nodes x 8 GPUs, 100,000 pods
    .venv/bin/python bench/bench_stacks.py --quick    # 500 nodes, 10,000 pods

The gpushare cluster comes from the sandbox's generator; the HAMi cluster is the same placement
rewritten as HAMi would leave it (register annotation in the v2.8 JSON format, one
``hami.io/vgpu-devices-allocated`` per pod, memory in MiB). Both are written as
``kubectl get nodes,pods -A -o json`` files and read by ``kubectl-inspect-gpushare --from-file``
(default view and ``-o json``) in a child process: median wall time of ``--runs`` runs each, and
the ratio HAMi / gpushare. Offline on purpose: it times what differs (decoding and counting),
not the API server.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.spec import generate_cluster
from kubectl_gpushare.sandbox.stack_spec import stack_node_object, stack_pod_object

INSPECT = str(Path(sys.executable).parent / "kubectl-inspect-gpushare")
GPUS = 8
GIB_MIB = 1024


def as_hami(objects: list[dict[str, Any]], gpu_memory: int) -> list[dict[str, Any]]:
    """The same nodes and placements as HAMi objects (GiB become MiB)."""
    result: list[dict[str, Any]] = []
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == "Node":
            ip = obj["status"]["addresses"][0]["address"]
            result.append(stack_node_object(meta["name"], "hami", [gpu_memory * GIB_MIB] * GPUS, ip=ip,
                                            product="NVIDIA-A100-SXM4-80GB", labels={}, annotations={}))
        elif obj["kind"] == "Pod":
            limits = obj["spec"]["containers"][0].get("resources", {}).get("limits", {})
            request = int(limits.get(protocol.RESOURCE_MEM, "0"))
            index = meta.get("annotations", {}).get(protocol.ANN_IDX)
            result.append(stack_pod_object(
                meta["name"], meta["namespace"], "hami", [request * GIB_MIB], node=obj["spec"].get("nodeName"),
                gpu=int(index) if index is not None else None, phase=obj["status"]["phase"],
            ))
        else:
            result.append(obj)
    return result


def padded(pod: dict[str, Any], index: int) -> dict[str, Any]:
    """A generated pod with the bulk a real one has (`bench_decode.pad`), as ``kubectl get -o json`` prints
    it: without ``managedFields``, which kubectl leaves out unless ``--show-managed-fields``."""
    from bench_decode import pad

    pod = pad(pod, index)
    del pod["metadata"]["managedFields"]
    return pod


def timed(args: list[str], runs: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system) of the child, over ``runs`` runs.

    CPU time is the figure compared: on a shared machine wall time mostly measures the neighbours.
    """
    walls, cpus = zip(*(timed_once(args) for _ in range(runs)), strict=True)
    return statistics.median(walls), statistics.median(cpus)


def timed_once(args: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of the child; an exit code not in ``ok`` stops."""
    start = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"{' '.join(args)} failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def compare(other: str, convert: Callable[[list[dict[str, Any]], int], list[dict[str, Any]]],
            description: str, detail: str = "", then: Callable[[dict[str, Path], int], None] | None = None,
            paddable: bool = False) -> None:
    """Time inspect over a gpushare cluster and the same cluster converted to ``other``; print the ratios.

    ``then`` gets both files (``gpushare`` and ``other``) and ``--runs``, for more figures over them.
    ``paddable``: ``convert`` keeps each pod's own fields, so ``--padded`` (real pods' bulk) is offered.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="500 nodes and 10,000 pods")
    parser.add_argument("--runs", type=int, default=3, help="repetitions per measurement (median)")
    if paddable:
        parser.add_argument("--padded", action="store_true",
                            help="pods carry the bulk a Deployment's pods have as kubectl prints them (about 3.5 KB)")
    args = parser.parse_args()
    nodes, pods = (500, 10_000) if args.quick else (5_000, 100_000)
    gpu_memory = 80
    gpushare = generate_cluster(nodes, GPUS, pods, seed=0, gpu_memory=gpu_memory)
    if getattr(args, "padded", False):
        gpushare = [padded(obj, index) if obj["kind"] == "Pod" else obj for index, obj in enumerate(gpushare)]
    converted = convert(gpushare, gpu_memory)
    shape = "padded pods" if getattr(args, "padded", False) else "the generator's lean pods (about 1 KB)"
    print(f"== {nodes:,} nodes x {GPUS} GPUs, {pods:,} pods ({shape}); {detail or other}; median of {args.runs}")
    with tempfile.TemporaryDirectory(prefix="bench-stacks-") as tmp:
        files = {}
        for name, items in (("gpushare", gpushare), (other, converted)):
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            files[name] = path
            print(f"{name:9s} input: {path.stat().st_size / 1e6:7.1f} MB, {len(items):,} objects")
        for flags in ([], ["-o", "json"]):
            results = {
                name: timed([INSPECT, "--from-file", str(path), *flags], args.runs) for name, path in files.items()
            }
            view = " ".join(flags) or "summary"
            (share_wall, share_cpu), (other_wall, other_cpu) = results["gpushare"], results[other]
            print(
                f"{view:10s} CPU gpushare {share_cpu:6.2f} s  {other} {other_cpu:6.2f} s  "
                f"ratio {other_cpu / share_cpu:5.2f} (goal <= 1.3)   wall {share_wall:6.2f} s / {other_wall:6.2f} s"
            )
        if then is not None:
            then(files, args.runs)


if __name__ == "__main__":
    compare("hami", as_hami, __doc__.splitlines()[0])
