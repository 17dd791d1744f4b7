"""Which pod an Allocate call is for, and the environment its container gets. Pure.

Kubelet's Allocate names device ids, never a pod, so the plugin must work out which pending pod
kubelet is admitting. The rule (the original's, with its holes closed):

1. Kubelet admits one pod at a time and calls Allocate once per container that asks for
   ``aliyun.com/gpu-mem``, in container order. A pod whose earlier GPU containers this plugin has
   already served is finished first: its next GPU container must ask for exactly this many units.
   (The original compared one container's count with the whole pod's and so never matched pods
   with several GPU containers.)
2. Otherwise the candidates are this node's pods that the extender placed and nobody has
   allocated yet: a request, a GPU index, ``ALIYUN_COM_GPU_MEM_ASSIGNED=false``, still Pending and
   not being deleted, and not claimed by this plugin earlier (the watch cache may lag behind our own
   patch; the original re-listed and could hand the same pod to two containers, swapping GPUs).
   The pod's first GPU container must ask for this many units. Among equal sizes the pod that
   arrived on this node first wins: the order our node-filtered watch saw the binds, which is the
   order kubelet's own watch sees them and admits them in (pods already bound when the plugin
   started come before any that arrived since). Ties go to the oldest assume time, then creation
   time, then namespace/name. The original used the assume time alone, which the extender writes
   before it binds, so two binds racing each other swapped GPUs.
3. On a node with one GPU, a pod that no extender annotated (scheduled without the extender) may
   be adopted: GPU 0, and the plugin writes the annotations itself so inspect and the extender
   count it. (The original returned the GPU but recorded nothing.) Only when the ledger shows room
   for it on GPU 0, counting this node's pods and the claims the caller has not yet seen in its
   cache; otherwise the call fails (`NoRoomError`) instead of over-committing the GPU.

A pod that kubelet could never admit (asking for more units than the node advertises) or that
names a GPU the node lacks is passed over, so one malformed pod cannot take the Allocate calls of
well-formed pods of the same size; it is named in the error only when nothing else fits.

No match is an error that fails the call, so kubelet reports it on the pod instead of starting a
container on a made-up device. This module must not do I/O or keep state; the caller owns both.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord
from kubectl_gpushare.node.gpus import GpuDevice

VisibleMode = Literal["index", "uuid"]


class NoMatchingPodError(LookupError):
    """No pending pod fits an Allocate call; the message is shown in the pod's events."""


class NoRoomError(NoMatchingPodError):
    """The only pod that fits would over-commit its GPU by the ledger; the message says by how much."""


@dataclass(frozen=True)
class Reservation:
    """Memory this plugin handed out that its pod cache may not show yet (an adoption in flight)."""

    namespace: str
    name: str
    gpu: int
    units: int


@dataclass(frozen=True)
class Choice:
    """The pod (and its container) one Allocate call serves.

    Attributes:
        pod: the pod being admitted.
        gpu: the GPU index it goes on.
        container: the index in ``spec.containers`` of the container this call serves.
        first: this is the pod's first GPU container (the call that records the assignment).
        last: this is its last GPU container (the pod is then done).
        adopt: the pod carried no extender annotations (single-GPU node); write them all.
    """

    pod: PodRecord
    gpu: int
    container: int
    first: bool
    last: bool
    adopt: bool = False


def gpu_containers(pod: PodRecord) -> list[int]:
    """Indices of the containers that ask for GPU memory, in the order kubelet allocates them.

    A pod record without per-container requests is treated as one container asking for all.
    """
    if not pod.container_requests:
        return [0] if pod.request > 0 else []
    return [i for i, amount in enumerate(pod.container_requests) if amount > 0]


def container_request(pod: PodRecord, container: int) -> int:
    """What one container asks for (the whole request for a record without per-container data)."""
    if not pod.container_requests:
        return pod.request
    return pod.container_requests[container]


def _order(arrival: Mapping[str, int]) -> Callable[[PodRecord], tuple[int, int, str, str, str]]:
    def key(pod: PodRecord) -> tuple[int, int, str, str, str]:
        return arrival.get(pod.uid, 0), pod.assume_time, pod.created, pod.namespace, pod.name

    return key


def _waiting(pod: PodRecord) -> bool:
    return pod.request > 0 and pod.phase in ("Pending", "") and not pod.terminating


def is_assumed(pod: PodRecord) -> bool:
    """The extender placed this pod and no device plugin has allocated it yet."""
    return _waiting(pod) and pod.assigned == protocol.ASSIGNED_FALSE and pod.gpu_index >= 0


def choose(
    pods: Iterable[PodRecord],
    request: int,
    *,
    progress: Mapping[str, int],
    claimed: Collection[str],
    gpu_units: Sequence[int],
    arrival: Mapping[str, int] | None = None,
    node: str = "",
    unit: str = protocol.UNIT_GIB,
    reserved: Mapping[str, Reservation] | None = None,
) -> Choice:
    """Pick the pod an Allocate call of ``request`` units serves (rules in the module docstring).

    Args:
        pods: this node's pods from the watch cache.
        request: the number of device ids in the container request.
        progress: pod UID -> GPU containers already served, for pods in the middle of admission.
        claimed: UIDs this plugin has finished and must never pick again.
        gpu_units: units advertised per GPU, by index (one GPU enables adoption of unannotated pods).
        arrival: pod UID -> the order in which it arrived on this node (0 or absent: before the
            plugin started).
        node: for the error message.
        unit: for the error message.
        reserved: pod UID -> memory handed out that ``pods`` may not show yet (adoption's room check).

    Raises:
        NoMatchingPodError: nothing fits; the message says what was looked for.
        NoRoomError: the only fitting pod is unannotated and GPU 0 lacks room for it.
    """
    pods = list(pods)
    order = _order(arrival or {})
    by_uid = {pod.uid: pod for pod in pods}
    started = sorted((by_uid[uid] for uid in progress if uid in by_uid), key=order)
    for pod in started:
        containers = gpu_containers(pod)
        done = progress[pod.uid]
        if done < len(containers) and container_request(pod, containers[done]) == request:
            return Choice(pod, pod.gpu_index, containers[done], first=False, last=done + 1 == len(containers))
    capacity = sum(gpu_units)
    misplaced: PodRecord | None = None
    fresh = sorted(
        (pod for pod in pods if pod.uid not in claimed and pod.uid not in progress and is_assumed(pod)), key=order
    )
    for pod in fresh:
        containers = gpu_containers(pod)
        if not containers or container_request(pod, containers[0]) != request or pod.request > capacity:
            continue
        if pod.gpu_index >= len(gpu_units) or gpu_units[pod.gpu_index] <= 0:
            misplaced = misplaced or pod
            continue
        return Choice(pod, pod.gpu_index, containers[0], first=True, last=len(containers) == 1)
    crowded: tuple[PodRecord, int] | None = None
    if len(gpu_units) == 1:
        strays = sorted(
            (
                pod
                for pod in pods
                if pod.uid not in claimed
                and pod.uid not in progress
                and _waiting(pod)
                and pod.gpu_index < 0
                and pod.assigned is None
            ),
            key=lambda pod: (pod.created, pod.namespace, pod.name),
        )
        free: int | None = None
        for pod in strays:
            containers = gpu_containers(pod)
            if not containers or container_request(pod, containers[0]) != request or pod.request > capacity:
                continue
            if free is None:
                free = free_units(pods, node=node, gpu_units=gpu_units, reserved=reserved or {}).get(0, 0)
            if pod.request > free:
                crowded = crowded or (pod, free)
                continue
            return Choice(pod, 0, containers[0], first=True, last=len(containers) == 1, adopt=True)
    if misplaced is not None:
        raise NoMatchingPodError(
            f"gpushare device plugin: pod {misplaced.namespace}/{misplaced.name} has "
            f"{protocol.ANN_IDX}={misplaced.gpu_index}, but node {node or '?'} has no such GPU "
            f"(it has {len(gpu_units)})"
        )
    if crowded is not None:
        pod, room = crowded
        raise NoRoomError(
            f"gpushare device plugin: pod {pod.namespace}/{pod.name} asks for {pod.request} {unit} of "
            f"{protocol.RESOURCE_MEM} without the gpushare scheduler extender's annotations, and GPU 0 of node "
            f"{node or '?'} has {max(room, 0)} {unit} free by the ledger; refusing to over-commit it "
            f"(schedule the pod through the extender)"
        )
    waiting = sum(1 for pod in pods if is_assumed(pod) and pod.uid not in claimed)
    raise NoMatchingPodError(
        f"gpushare device plugin: no pending pod on node {node or '?'} has a container asking for "
        f"{request} {unit} of {protocol.RESOURCE_MEM} with {protocol.ANN_ASSIGNED}=false "
        f"({waiting} placed pod(s) waiting); was the pod scheduled by the gpushare scheduler extender?"
    )


def free_units(
    pods: Iterable[PodRecord], *, node: str, gpu_units: Sequence[int], reserved: Mapping[str, Reservation]
) -> dict[int, int]:
    """GPU index -> free units on this node by the ledger: its pods, plus claims not yet in ``pods``.

    A reservation ends, as in the extender, once its pod shows a GPU index, so nothing counts twice.
    """
    ledger = Ledger()
    total = sum(gpu_units)
    ledger.set_node(
        NodeRecord(
            name=node, alloc_mem=total, alloc_count=len(gpu_units), cap_mem=total, cap_count=len(gpu_units),
            gpu_mems=tuple(gpu_units),
        )
    )
    for uid, claim in reserved.items():
        ledger.reserve(uid, claim.namespace, claim.name, node, claim.gpu, claim.units)
    for pod in pods:
        ledger.set_pod(pod if pod.node == node else msgspec.structs.replace(pod, node=node))
    return ledger.free(node)


def container_env(
    choice: Choice,
    gpu: GpuDevice,
    *,
    container_units: int,
    gpu_units: int,
    visible: VisibleMode = "index",
    cgpu_disable: bool = False,
) -> dict[str, str]:
    """The environment that pins a container to its GPU, with the original's names and values.

    ``ALIYUN_COM_GPU_MEM_POD`` is the pod's whole request and ``_CONTAINER`` this container's;
    ``_DEV`` is this GPU's memory in units (right on heterogeneous nodes).
    """
    env = {
        protocol.ENV_VISIBLE_DEVICES: gpu.uuid if visible == "uuid" else str(gpu.index),
        protocol.ENV_IDX: str(choice.gpu),
        protocol.ENV_POD: str(choice.pod.request),
        protocol.ENV_CONTAINER: str(container_units),
        protocol.ENV_DEV: str(gpu_units),
    }
    if cgpu_disable:
        env[protocol.ENV_CGPU_DISABLE] = "true"
    return env


def assignment_annotations(choice: Choice, *, now_ns: int, gpu_units: int) -> dict[str, str]:
    """The pod annotations that record an allocation (all five extender keys when adopting)."""
    annotations = {protocol.ANN_ASSIGNED: protocol.ASSIGNED_TRUE, protocol.ANN_ASSIGN_TIME: str(now_ns)}
    if choice.adopt:
        annotations.update(
            {
                protocol.ANN_IDX: str(choice.gpu),
                protocol.ANN_POD: str(choice.pod.request),
                protocol.ANN_DEV: str(gpu_units),
                protocol.ANN_ASSUME_TIME: str(now_ns),
            }
        )
    return annotations


def preferred_devices(
    available: Iterable[str], must_include: Iterable[str], size: int, gpu_uuid: str | None
) -> list[str]:
    """Kubelet's device pick for one container: the must-includes, then units of ``gpu_uuid``.

    Steering kubelet to fake devices of the GPU the pod really gets keeps kubelet's own
    bookkeeping (and the pod-resources API) truthful. Falls back to the GPU with most free units,
    then to any available ids, so the answer always has ``size`` ids when kubelet has them.
    """
    chosen = list(dict.fromkeys(must_include))[:size]
    taken = set(chosen)
    by_gpu: dict[str, list[str]] = {}
    for device in available:
        if device not in taken:
            by_gpu.setdefault(protocol.uuid_of_fake_device(device), []).append(device)
    order = sorted(by_gpu, key=lambda uuid: (uuid != gpu_uuid, -len(by_gpu[uuid]), uuid))
    for uuid in order:
        for device in by_gpu[uuid]:
            if len(chosen) >= size:
                return chosen
            chosen.append(device)
    return chosen
