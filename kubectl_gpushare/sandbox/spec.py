"""Cluster specs: a declarative YAML description of a GPU cluster, and a generator for big ones.

Owns how test and demo clusters are described: which nodes (with taints and unhealthy GPUs),
pods and other objects a spec file asks for, built by `builders` (gpushare objects) and
`stack_spec` (other sharing stacks). Generated data never over-commits a GPU and is deterministic
for a seed. Produces plain dicts for `Sandbox.load`; does no I/O except reading a spec file.

A spec file (all keys optional)::

    namespaces: [default, team-a]
    nodes:
      - {name: gpu-a, gpus: 4, gpuMemory: 16, product: Tesla-T4, taints: [{key: k, effect: NoSchedule}]}
      - {name: gpu-b, gpuMemories: [24, 48], unhealthy: [1]}
    pods:
      - {name: train, namespace: team-a, node: gpu-a, gpu: 0, memory: 8, phase: Running}
      - {name: waiting, memory: 4}                      # unbound, Pending
      - {name: greedy, memory: 2, uses: 6GiB}           # sandbox --stack: its container allocates 6 GiB
    generate: {nodes: 100, gpusPerNode: 8, gpuMemory: 80, pods: 2000, seed: 1}
    objects: []                                        # any other Kubernetes objects, verbatim

A node with ``dra: true`` is a GPU node for the DRA driver (labelled ``gpushare.kubectl-gpushare.io/dra``,
no ``aliyun.com/gpu-mem``): under ``sandbox --stack`` the driver runs there and publishes its
ResourceSlice, and pods get its GPUs' memory through ResourceClaims::

    nodes:
      - {name: dra-1, dra: true, gpus: 2, gpuMemory: 16}

Other sharing stacks (``stack:`` on a node; its pods follow it, see `stack_spec`)::

    nodes:
      - {name: hami-1, stack: hami, gpus: 2, gpuMemory: 32768, registerFormat: colon}  # MiB
      - {name: ts-1, stack: nvidia, gpus: 2, replicas: 4}          # time-slicing: 8 slots
      - {name: mig-1, stack: nvidia, mig: {1g.10gb: 7}}
      - {name: nano-1, stack: nano-gpu, gpus: 2}                    # also elastic-gpu
    pods:
      - {name: vgpu, node: hami-1, gpu: 0, memory: 3000, cores: 30}  # amounts in the stack's unit
      - {name: small, node: mig-1, memory: 1, resource: nvidia.com/mig-1g.10gb}
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox import ipam, stack_spec
from kubectl_gpushare.sandbox.builders import (
    DEFAULT_PRODUCT,
    EPOCH,
    namespace_object,
    node_object,
    pod_object,
    timestamp,
    unhealthy_configmap,
)

REQUEST_SIZES = (1, 2, 2, 4, 4, 4, 8, 8, 10, 16, 20, 40)
"""Typical per-pod GPU memory requests (in the memory unit), sampled by the generator."""


class SpecError(ValueError):
    """A spec file that cannot be used; the message says where and why, in one line."""


ANN_USES: Final = "sandbox.kubectl-gpushare.io/uses"
"""Sandbox only: GPU memory in bytes the pod's stand-in container allocates once running (``uses:``)."""
_USES = re.compile(r"\s*(\d{1,7})\s*(GiB|MiB)\s*")
MAX_USES = 1 << 50


def parse_uses(text: str) -> int:
    """Read ``uses: 6GiB`` (or MiB) into bytes.

    Raises:
        SpecError: not ``<n>GiB`` / ``<n>MiB``, zero, or absurdly large.
    """
    match = _USES.fullmatch(text)
    if match is None or int(match.group(1)) == 0:
        raise SpecError(f"uses: {text[:32]!r} is not a positive amount like 6GiB or 512MiB")
    amount = int(match.group(1)) << (30 if match.group(2) == "GiB" else 20)
    if amount > MAX_USES:
        raise SpecError(f"uses: {text[:32]!r} is too large")
    return amount


class TaintSpec(msgspec.Struct, forbid_unknown_fields=True):
    """A node taint."""

    key: str
    effect: str = "NoSchedule"
    value: str | None = None


class NodeSpec(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """One node of a spec file."""

    name: str
    gpus: int = 0
    gpu_memory: int = 0
    gpu_memories: list[int] | None = None
    product: str = DEFAULT_PRODUCT
    ip: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    taints: list[TaintSpec] = []
    unhealthy: list[int] = []
    gpushare: bool = True
    dra: bool = False
    ready: bool = True
    stack: str = protocol.STACK_GPUSHARE
    replicas: int = 1
    mig: dict[str, int] = {}
    register_format: str = "json"


class PodSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One pod of a spec file."""

    name: str
    namespace: str = "default"
    node: str | None = None
    gpu: int | None = None
    memory: int | None = None
    containers: list[int] | None = None
    phase: str | None = None
    assigned: bool | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    stack: str | None = None
    cores: int = 0
    resource: str | None = None
    fraction: float | None = None
    """KAI only: ask ``gpu-fraction`` (0 < f <= 1) instead of ``memory`` MiB."""
    uses: str | None = None
    """GPU memory the pod's container allocates under ``sandbox --stack`` (``6GiB``); see `ANN_USES`."""


class GenerateSpec(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """Options of the generator, as written in a spec file."""

    nodes: int = 10
    gpus_per_node: int = 8
    gpu_memory: int = 80
    pods: int = 0
    seed: int = 0
    namespaces: int = 4
    pending_fraction: float = 0.05
    finished_fraction: float = 0.05
    unindexed_fraction: float = 0.02
    node_prefix: str = "gpu-node-"


class ClusterSpec(msgspec.Struct, forbid_unknown_fields=True):
    """A whole spec file."""

    namespaces: list[str] = []
    nodes: list[NodeSpec] = []
    pods: list[PodSpec] = []
    generate: GenerateSpec | None = None
    objects: list[dict[str, Any]] = []


def _node_ip(index: int) -> str:
    return f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"


def generate_cluster(
    nodes: int = 10,
    gpus_per_node: int = 8,
    pods: int = 0,
    seed: int = 0,
    *,
    gpu_memory: int = 80,
    namespaces: int = 4,
    pending_fraction: float = 0.05,
    finished_fraction: float = 0.05,
    unindexed_fraction: float = 0.02,
    node_prefix: str = "gpu-node-",
    epoch: datetime | None = None,
) -> list[dict[str, Any]]:
    """Generate namespaces, GPU nodes and GPU pods, deterministically for ``seed``.

    Placed pods fill GPUs without ever exceeding a GPU's memory; a pod that fits nowhere is left
    unbound and Pending. 100,000 pods take a few seconds.

    Args:
        nodes: how many GPU nodes (0 for an empty cluster).
        gpus_per_node: GPUs per node.
        pods: how many pods.
        seed: random seed.
        gpu_memory: memory per GPU, in the memory unit (GiB by default).
        namespaces: pods are spread over ``default`` and ``team-1`` .. ``team-(n-1)``.
        pending_fraction: share of pods left unbound and Pending.
        finished_fraction: share of placed pods that are Succeeded or Failed (not counted).
        unindexed_fraction: share of placed pods bound to a node but with no GPU index yet.
        node_prefix: node names are ``<prefix><number>``.
        epoch: nodes are created from this time on and pods an hour later, one per second (default
            a fixed date, so output is identical for a seed; the CLI passes "now" minus that span).

    Returns:
        Objects for `Sandbox.load` (namespaces first, then nodes, then pods); every node has a pod
        range and every Running pod an address in its node's range (`ipam.assign`).
    """
    rng = random.Random(seed)
    start = epoch or EPOCH
    names = ["default"] + [f"team-{i}" for i in range(1, max(namespaces, 1))]
    objects: list[dict[str, Any]] = [namespace_object(name) for name in names]
    width = max(len(str(max(nodes - 1, 0))), 3)
    node_names = [f"{node_prefix}{i:0{width}d}" for i in range(nodes)]
    for i, name in enumerate(node_names):
        objects.append(
            node_object(name, [gpu_memory] * gpus_per_node, ip=_node_ip(i + 1), created=timestamp(i % 3600, start))
        )
    free = [[gpu_memory] * gpus_per_node for _ in range(nodes)]
    open_nodes = list(range(nodes)) if gpus_per_node and gpu_memory > 0 else []
    assume_base = int(start.timestamp()) * 1_000_000_000
    for i in range(pods):
        namespace = names[i % len(names)]
        request = min(rng.choice(REQUEST_SIZES), max(gpu_memory, 1))
        name = f"job-{i:06d}-{rng.randrange(16**5):05x}"
        created = timestamp(3600 + i, start)
        roll = rng.random()
        placed: tuple[int, int] | None = None
        if roll >= pending_fraction and open_nodes:
            for _ in range(8):
                slot = rng.randrange(len(open_nodes))
                node_index = open_nodes[slot]
                gpus = free[node_index]
                fitting = [g for g, f in enumerate(gpus) if f >= request]
                if fitting:
                    placed = (node_index, min(fitting, key=lambda g: (gpus[g], g)))
                    break
                if max(gpus) < min(REQUEST_SIZES):
                    open_nodes[slot] = open_nodes[-1]
                    open_nodes.pop()
                    if not open_nodes:
                        break
        if placed is None:
            objects.append(pod_object(name, namespace, [request], created=created))
            continue
        node_index, gpu = placed
        outcome = rng.random()
        finished = outcome < finished_fraction  # placed once, its GPU memory free again
        if not finished:
            free[node_index][gpu] -= request
            if outcome < finished_fraction + unindexed_fraction:
                objects.append(pod_object(name, namespace, [request], node=node_names[node_index], created=created))
                continue
        objects.append(
            pod_object(
                name,
                namespace,
                [request],
                node=node_names[node_index],
                gpu=gpu,
                gpu_memory=gpu_memory,
                phase=("Succeeded" if outcome < finished_fraction / 2 else "Failed") if finished else None,
                assigned=True if finished else None,
                assume_time=assume_base + i,
                created=created,
            )
        )
    ipam.assign(objects)
    return objects


def _stack_node(node: NodeSpec, memories: list[int], index: int) -> dict[str, Any]:
    if node.stack not in protocol.STACKS or node.register_format not in ("json", "colon") or node.replicas < 1:
        raise SpecError(f"node {node.name}: stack must be one of {', '.join(protocol.STACKS)}, "
                        "registerFormat json or colon, replicas at least 1")
    return stack_spec.stack_node_object(
        node.name, node.stack, memories, ip=node.ip or _node_ip(index + 1), product=node.product,
        labels=node.labels, annotations=node.annotations, replicas=node.replicas, mig=node.mig,
        register_format=node.register_format,
    )


def _stack_pod(pod: PodSpec, stack: str, amounts: list[int]) -> dict[str, Any]:
    if stack not in protocol.STACKS:
        raise SpecError(f"pod {pod.namespace}/{pod.name}: stack must be one of {', '.join(protocol.STACKS)}")
    if pod.fraction is not None and (stack != protocol.STACK_KAI or not 0 < pod.fraction <= 1):
        raise SpecError(f"pod {pod.namespace}/{pod.name}: fraction is for stack kai, in (0, 1]")
    return stack_spec.stack_pod_object(
        pod.name, pod.namespace, stack, amounts, node=pod.node, gpu=pod.gpu, cores=pod.cores,
        resource=pod.resource, phase=pod.phase, labels=pod.labels, annotations=pod.annotations,
        fraction=pod.fraction,
    )


def _add_kai_reservation(
    objects: list[dict[str, Any]], reserved: set[tuple[str, int]], node: str, gpu: int,
    add_namespace: Callable[[str], None],
) -> None:
    """KAI's reservation pod for a shared GPU, once per GPU (its binder runs one per GPU group)."""
    if (node, gpu) not in reserved:
        reserved.add((node, gpu))
        add_namespace(protocol.KAI_RESERVATION_NAMESPACES[0])
        objects.append(stack_spec.kai_reservation_object(node, gpu))


def _from_spec(spec: ClusterSpec) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    seen_namespaces: set[str] = set()

    def add_namespace(name: str) -> None:
        if name not in seen_namespaces:
            seen_namespaces.add(name)
            objects.append(namespace_object(name))

    for name in spec.namespaces or ["default"]:
        add_namespace(name)
    gpu_of: dict[str, list[int]] = {}
    stack_of: dict[str, str] = {}
    reserved: set[tuple[str, int]] = set()
    for index, node in enumerate(spec.nodes):
        memories = node.gpu_memories if node.gpu_memories is not None else [node.gpu_memory] * node.gpus
        if node.gpu_memories is not None and node.gpus and node.gpus != len(node.gpu_memories):
            raise SpecError(f"node {node.name}: gpus={node.gpus} but {len(node.gpu_memories)} gpuMemories")
        if any(m < 0 for m in memories) or node.gpus < 0:
            raise SpecError(f"node {node.name}: GPU counts and memory must not be negative")
        gpu_of[node.name] = memories
        if node.dra and node.stack != protocol.STACK_GPUSHARE:
            raise SpecError(f"node {node.name}: dra: true is a node of kubectl-gpushare's DRA driver, not of "
                            f"stack {node.stack}")
        if node.stack != protocol.STACK_GPUSHARE:
            objects.append(_stack_node(node, memories, index))
            stack_of[node.name] = node.stack
            continue
        taints = [{k: v for k, v in msgspec.structs.asdict(t).items() if v is not None} for t in node.taints]
        objects.append(
            node_object(
                node.name,
                memories,
                ip=node.ip or _node_ip(index + 1),
                product=node.product,
                labels=node.labels,
                annotations=node.annotations,
                taints=taints,
                gpushare=node.gpushare,
                ready=node.ready,
                dra=node.dra,
            )
        )
        if node.unhealthy:
            add_namespace(protocol.UNHEALTHY_CM_NAMESPACE)
            objects.append(unhealthy_configmap(node.name, node.unhealthy))
    for pod in spec.pods:
        requests = pod.containers if pod.containers is not None else [pod.memory or 0]
        if pod.node is not None and pod.node not in gpu_of:
            raise SpecError(f"pod {pod.namespace}/{pod.name}: node {pod.node!r} is not in the spec")
        memories = gpu_of.get(pod.node or "", [])
        if pod.gpu is not None and not 0 <= pod.gpu < max(len(memories), 1):
            raise SpecError(f"pod {pod.namespace}/{pod.name}: node {pod.node} has no GPU {pod.gpu}")
        add_namespace(pod.namespace)
        stack = pod.stack or stack_of.get(pod.node or "", protocol.STACK_GPUSHARE)
        if stack != protocol.STACK_GPUSHARE:
            objects.append(_stack_pod(pod, stack, requests))
            if stack == protocol.STACK_KAI and pod.node and pod.gpu is not None:
                _add_kai_reservation(objects, reserved, pod.node, pod.gpu, add_namespace)
            continue
        objects.append(
            pod_object(
                pod.name,
                pod.namespace,
                requests,
                node=pod.node,
                gpu=pod.gpu if pod.node else None,
                gpu_memory=memories[pod.gpu] if memories and pod.gpu is not None else None,
                phase=pod.phase,
                assigned=pod.assigned,
                labels=pod.labels,
                annotations={**pod.annotations, **({ANN_USES: str(parse_uses(pod.uses))} if pod.uses else {})},
            )
        )
    if spec.generate is not None:
        g = spec.generate
        generated = generate_cluster(
            g.nodes,
            g.gpus_per_node,
            g.pods,
            g.seed,
            gpu_memory=g.gpu_memory,
            namespaces=g.namespaces,
            pending_fraction=g.pending_fraction,
            finished_fraction=g.finished_fraction,
            unindexed_fraction=g.unindexed_fraction,
            node_prefix=g.node_prefix,
        )
        for obj in generated:
            if obj["kind"] == "Namespace":
                if obj["metadata"]["name"] in seen_namespaces:
                    continue
                seen_namespaces.add(obj["metadata"]["name"])
            objects.append(obj)
    for raw in spec.objects:
        if not isinstance(raw, dict) or not raw.get("kind") or not (raw.get("metadata") or {}).get("name"):
            raise SpecError("objects: every entry needs kind and metadata.name")
        objects.append(raw)
    ipam.assign(objects)
    return objects


def parse_spec(text: str, source: str = "<spec>") -> list[dict[str, Any]]:
    """Build the objects a YAML spec describes.

    Raises:
        SpecError: the YAML does not parse or does not match the spec format.
    """
    import yaml

    from kubectl_gpushare.kube import safe_yaml

    try:
        raw = safe_yaml.load(text) or {}
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: ``!!int x``, a 13th month
        raise SpecError(f"{source}: not valid YAML: {protocol.error_reason(exc)}") from None
    try:
        spec = msgspec.convert(raw, ClusterSpec)
    except msgspec.ValidationError as exc:
        raise SpecError(f"{source}: {exc}") from None
    try:
        return _from_spec(spec)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None


def load_spec(path: str | Path) -> list[dict[str, Any]]:
    """Read a YAML spec file and build its objects.

    Raises:
        SpecError: the file cannot be read or is not a valid spec.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not UTF-8 text") from None
    return parse_spec(text, str(path))
