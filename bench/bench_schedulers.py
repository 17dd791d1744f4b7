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

from typing import Any

from bench_stacks import GIB_MIB, GPUS, compare

from kubectl_gpushare import protocol
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


if __name__ == "__main__":
    compare("mixed", as_mixed, __doc__.splitlines()[0], f"mixed: {', '.join(DEAL)}")
