"""inspect on a mixed cluster of six sharing stacks vs the same-size gpushare cluster (goal: within 1.3x).

    .venv/bin/python bench/bench_schedulers.py            # 5,000 nodes x 8 GPUs, 100,000 pods
    .venv/bin/python bench/bench_schedulers.py --quick    # 500 nodes, 10,000 pods

The gpushare cluster comes from the sandbox's generator. The mixed cluster is the same placement
with the nodes dealt in turn to gpushare, HAMi, NVIDIA KAI Scheduler, Volcano gpu-share,
Koordinator DeviceShare and NVIDIA time-slicing, each node and pod rewritten as that stack leaves
it (`sandbox.stack_spec`; KAI gets one reservation pod per shared GPU, memory in MiB). Both are read
offline by ``kubectl-inspect-gpushare --from-file`` (default view and ``-o json``) in a child
process, as `bench_stacks`: median CPU seconds of ``--runs`` runs and the ratio mixed / gpushare.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench_stacks import GIB_MIB, GPUS, INSPECT, timed

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.spec import generate_cluster
from kubectl_gpushare.sandbox.stack_spec import kai_reservation_object, stack_node_object, stack_pod_object

DEAL = (protocol.STACK_GPUSHARE, protocol.STACK_HAMI, protocol.STACK_KAI, protocol.STACK_VOLCANO,
        protocol.STACK_KOORDINATOR, protocol.STACK_NVIDIA)
REPLICAS = 4


def as_mixed(objects: list[dict[str, Any]], gpu_memory: int) -> list[dict[str, Any]]:
    """The same nodes and placements, node i run by ``DEAL[i % len(DEAL)]``."""
    stack_of: dict[str, str] = {}
    result: list[dict[str, Any]] = []
    reserved: set[tuple[str, int]] = set()
    for obj in objects:
        if obj["kind"] != "Node":
            continue
        name = obj["metadata"]["name"]
        stack = DEAL[len(stack_of) % len(DEAL)]
        stack_of[name] = stack
        if stack == protocol.STACK_GPUSHARE:
            result.append(obj)
            continue
        ip = obj["status"]["addresses"][0]["address"]
        result.append(stack_node_object(name, stack, [gpu_memory * GIB_MIB] * GPUS, ip=ip, product="NVIDIA-A100",
                                        labels={}, annotations={}, replicas=REPLICAS if stack == "nvidia" else 1))
    for obj in objects:
        if obj["kind"] == "Node":
            continue
        node = obj.get("spec", {}).get("nodeName")
        stack = stack_of.get(node or "", protocol.STACK_GPUSHARE)
        if obj["kind"] != "Pod" or stack == protocol.STACK_GPUSHARE:
            result.append(obj)
            continue
        meta = obj["metadata"]
        limits = obj["spec"]["containers"][0].get("resources", {}).get("limits", {})
        request = int(limits.get(protocol.RESOURCE_MEM, "0"))
        index = meta.get("annotations", {}).get(protocol.ANN_IDX)
        gpu = int(index) if index is not None else None
        amount = 1 if stack == protocol.STACK_NVIDIA else request * GIB_MIB
        result.append(stack_pod_object(meta["name"], meta["namespace"], stack, [amount], node=node, gpu=gpu,
                                       phase=obj["status"]["phase"]))
        if stack == protocol.STACK_KAI and node and gpu is not None and (node, gpu) not in reserved:
            reserved.add((node, gpu))
            result.append(kai_reservation_object(node, gpu))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 nodes and 10,000 pods")
    parser.add_argument("--runs", type=int, default=3, help="repetitions per measurement (median)")
    args = parser.parse_args()
    nodes, pods = (500, 10_000) if args.quick else (5_000, 100_000)
    gpu_memory = 80
    gpushare = generate_cluster(nodes, GPUS, pods, seed=0, gpu_memory=gpu_memory)
    mixed = as_mixed(gpushare, gpu_memory)
    print(f"== {nodes:,} nodes x {GPUS} GPUs, {pods:,} pods; mixed: {', '.join(DEAL)}; median of {args.runs}")
    with tempfile.TemporaryDirectory(prefix="bench-schedulers-") as tmp:
        files = {}
        for name, items in (("gpushare", gpushare), ("mixed", mixed)):
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            files[name] = path
            print(f"{name:9s} input: {path.stat().st_size / 1e6:7.1f} MB, {len(items):,} objects")
        for flags in ([], ["-o", "json"]):
            results = {
                name: timed([INSPECT, "--from-file", str(path), *flags], args.runs) for name, path in files.items()
            }
            view = " ".join(flags) or "summary"
            (share_wall, share_cpu), (mixed_wall, mixed_cpu) = results["gpushare"], results["mixed"]
            print(
                f"{view:10s} CPU gpushare {share_cpu:6.2f} s  mixed {mixed_cpu:6.2f} s  "
                f"ratio {mixed_cpu / share_cpu:5.2f} (goal <= 1.3)   wall {share_wall:6.2f} s / {mixed_wall:6.2f} s"
            )


if __name__ == "__main__":
    main()
