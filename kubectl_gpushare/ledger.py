"""The one model of which GPU memory is used by whom.

Nodes and pods come in as small frozen records; per-GPU totals, used and free memory, pending pods
and the choice of GPU for a new pod come out. `kubectl inspect gpushare`, the scheduler extender
and the device plugin all read their numbers from here, so they cannot disagree.

The ledger is pure: no I/O, no clock, no threads, no logging. It is mutable so that a long-running
component can apply watch events in O(pods on one node); callers that share one ledger between
threads hold their own lock around it.

Counting rules (the original gpushare's, kept on purpose so mixed deployments agree):
- a pod's request is the sum of its regular containers' ``aliyun.com/gpu-mem`` limits;
- pods with no request, no node, or phase Succeeded/Failed do not count; terminating and Unknown
  pods still count (their containers may still hold the memory);
- a pod's share is its gpushare 2.0 allocation annotation when present, else its whole request on
  the GPU named by ``ALIYUN_COM_GPU_MEM_IDX``; without an index it is *pending* (device -1);
- per-GPU total is the node's memory divided by its GPU count (integer division), unless the
  device plugin published per-GPU memory (heterogeneous nodes).

Invalid claims never credit free memory (defence in depth; `kube.records` already turns them into
valid records and warns): a share of zero or less is not counted, an allocation with no positive
share falls back to the request on ``gpu_index``, an index outside ``[0, MAX_GPUS_PER_NODE)``
counts as pending, and an index at or beyond the node's GPU count stays on its own phantom device
(shown by inspect, as the original does, but never part of any real GPU's free memory). A node
count outside ``[0, MAX_GPUS_PER_NODE]`` or a negative memory total means no GPUs. So for any
records, no GPU's free memory ever exceeds its total.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, Literal

import msgspec

from kubectl_gpushare import protocol

Basis = Literal["allocatable", "capacity"]
Policy = Literal["binpack", "spread"]

PENDING: Final = -1
"""Device index of memory requested by pods that have no GPU index yet."""
MAX_SCORE: Final = 10
"""kube-scheduler's MaxExtenderPriority: extender scores run from 0 to 10."""


class NodeRecord(msgspec.Struct, frozen=True, gc=False):
    """What the ledger needs to know about a node."""

    name: str
    ip: str = "unknown"
    alloc_mem: int = 0
    alloc_count: int = 0
    cap_mem: int = 0
    cap_count: int = 0
    gpu_mems: tuple[int, ...] | None = None
    unhealthy: frozenset[int] = frozenset()
    labels: tuple[tuple[str, str], ...] = ()
    driver: str = ""
    """The DRA driver whose ResourceSlice gave the GPUs (`protocol.DRA_DRIVER`); "" for the device plugin's."""
    unit: str = ""
    """The memory unit when known for sure (a DRA node's, from its slice); "" where the views guess it."""


class PodRecord(msgspec.Struct, frozen=True, gc=False):
    """What the ledger needs to know about a pod."""

    uid: str
    namespace: str
    name: str
    node: str = ""
    phase: str = ""
    request: int = 0
    container_requests: tuple[int, ...] = ()
    gpu_index: int = PENDING
    allocation: tuple[tuple[int, int], ...] | None = None
    assigned: str | None = None
    assume_time: int = 0
    terminating: bool = False
    created: str = ""
    claim: str = ""
    """The DRA ResourceClaim(s) the memory is allocated to (comma-separated); "" for the extender's pods."""


def counts(pod: PodRecord) -> bool:
    """Whether a pod holds GPU memory on its node."""
    return pod.request > 0 and bool(pod.node) and not protocol.pod_phase_terminal(pod.phase)


def _device(index: int) -> int:
    return index if protocol.valid_gpu_index(index) else PENDING


def shares(pod: PodRecord) -> dict[int, int]:
    """GPU index -> memory this pod holds (index -1: requested, no GPU assigned yet); every amount > 0."""
    if pod.allocation:
        result: dict[int, int] = {}
        for gpu, mem in pod.allocation:
            if mem > 0:
                device = _device(gpu)
                result[device] = result.get(device, 0) + mem
        if result:
            return result
    return {_device(pod.gpu_index): pod.request} if pod.request > 0 else {}


class DeviceUsage(msgspec.Struct, frozen=True, gc=False):
    """One GPU (or the pending pseudo-device -1) of a node (a struct: views build 45,000 at 5,000 nodes)."""

    index: int
    total: int
    used: int
    pods: list[tuple[PodRecord, int]] = []
    phantom: bool = False
    """A GPU index pods name beyond the node's count: shown with the per-GPU total, as the original
    does, but it does not exist, so none of it is free."""

    @property
    def free(self) -> int:
        """Memory still unallocated on this GPU (negative if over-committed; never positive on a phantom)."""
        free = self.total - self.used
        return min(free, 0) if self.phantom else free


class NodeUsage(msgspec.Struct, frozen=True, gc=False):
    """A node's devices with their usage; devices are ordered by index, pending (-1) last."""

    node: NodeRecord
    gpu_count: int
    total_mem: int
    devices: dict[int, DeviceUsage]

    @property
    def used(self) -> int:
        """Memory used on every device of the node, pending included."""
        return sum(device.used for device in self.devices.values())


class _Reservation(msgspec.Struct, frozen=True, gc=False):
    node: str
    gpu: int
    mem: int
    namespace: str
    name: str


class Ledger:
    """Per-GPU accounting over a set of nodes and pods; see the module docstring for the rules."""

    def __init__(self, basis: Basis = "allocatable", *, keep_pods: bool = True) -> None:
        """Create an empty ledger.

        Args:
            basis: which node status gives totals: ``allocatable`` (what inspect shows, as the
                original tool does) or ``capacity`` (what the extender schedules against).
            keep_pods: hold each counted pod's record, so pods can be updated, removed and listed.
                False gives a ledger of sums for views that show no pods (inspect's summary,
                ``fit``): every pod is counted once, by the same rules, and its record let go, so a
                100,000-pod cluster never sits in memory. Such a ledger counts the first copy of a
                uid and ignores later ones, and refuses to list or remove pods.
        """
        self.basis: Basis = basis
        self.keep_pods = keep_pods
        self._nodes: dict[str, NodeRecord] = {}
        self._pods: dict[str, PodRecord] = {}
        self._node_pods: dict[str, dict[str, None]] = {}
        self._counted: set[str] = set()  # keep_pods=False: the uids counted
        self._used: dict[str, dict[int, int]] = {}
        self._reserved: dict[str, _Reservation] = {}

    @classmethod
    def build(
        cls,
        nodes: Iterable[NodeRecord],
        pods: Iterable[PodRecord],
        basis: Basis = "allocatable",
        *,
        keep_pods: bool = True,
    ) -> Ledger:
        """Build a ledger from full lists of nodes and pods (``keep_pods`` as for the constructor)."""
        ledger = cls(basis, keep_pods=keep_pods)
        for node in nodes:
            ledger.set_node(node)
        for pod in pods:
            ledger.set_pod(pod)
        return ledger

    # --- updates ---------------------------------------------------------------------------------

    def set_node(self, node: NodeRecord) -> None:
        """Add or replace a node (capacity and per-GPU changes take effect at once)."""
        self._nodes[node.name] = node

    def remove_node(self, name: str) -> None:
        """Forget a node; its pods stay recorded and count again if the node returns."""
        self._nodes.pop(name, None)

    def set_pod(self, pod: PodRecord) -> None:
        """Add or update a pod by UID; a pod that no longer counts is dropped.

        A reservation for the same UID ends once the pod is seen on a node with a GPU index, so a
        bind that the extender reserved is never counted twice.
        """
        uid = pod.uid
        if uid in self._pods:
            self._drop(uid)
        if uid in self._reserved and pod.node and (pod.gpu_index >= 0 or pod.allocation):
            self._unreserve(uid)
        if not counts(pod):
            return
        if self.keep_pods:
            self._pods[uid] = pod
            on_node = self._node_pods.get(pod.node)
            if on_node is None:
                on_node = self._node_pods[pod.node] = {}
            on_node[uid] = None
        elif uid in self._counted:
            return  # a ledger of sums cannot take back the first copy's share
        else:
            self._counted.add(uid)
        self._add_used(pod.node, shares(pod), 1)

    def remove_pod(self, uid: str) -> None:
        """Forget a pod (deleted, or completed) and any reservation for it.

        Raises:
            RuntimeError: the ledger keeps sums only and counted this pod.
        """
        if uid in self._counted:
            raise RuntimeError("a ledger of sums (keep_pods=False) cannot remove a pod it counted")
        self._drop(uid)
        self._unreserve(uid)

    def reserve(self, uid: str, namespace: str, name: str, node: str, gpu: int, mem: int) -> None:
        """Count ``mem`` on ``node``/``gpu`` for a pod being bound, before the API knows about it.

        A reservation of no memory (``mem <= 0``) only ends an earlier one for the same pod.
        """
        self._unreserve(uid)
        if mem <= 0:
            return
        gpu = _device(gpu)
        self._reserved[uid] = _Reservation(node, gpu, mem, namespace, name)
        self._add_used(node, {gpu: mem}, 1)

    def release(self, uid: str) -> None:
        """Undo `reserve` after a failed bind."""
        self._unreserve(uid)

    def is_reserved(self, uid: str) -> bool:
        """Whether a reservation for this pod is outstanding."""
        return uid in self._reserved

    def _drop(self, uid: str) -> None:
        old = self._pods.pop(uid, None)
        if old is None:
            return
        on_node = self._node_pods.get(old.node)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self._node_pods[old.node]
        self._add_used(old.node, shares(old), -1)

    def _unreserve(self, uid: str) -> None:
        reservation = self._reserved.pop(uid, None)
        if reservation is not None:
            self._add_used(reservation.node, {reservation.gpu: reservation.mem}, -1)

    def _add_used(self, node: str, amounts: dict[int, int], sign: int) -> None:
        used = self._used.setdefault(node, {})
        for gpu, mem in amounts.items():
            value = used.get(gpu, 0) + sign * mem
            if value:
                used[gpu] = value
            else:
                used.pop(gpu, None)
        if not used:
            del self._used[node]

    # --- queries ---------------------------------------------------------------------------------

    def node(self, name: str) -> NodeRecord | None:
        """The node record, or None if unknown."""
        return self._nodes.get(name)

    def in_unit(self, name: str, unit: str) -> Callable[[int], int]:
        """Amounts of a node in ``unit``: a node counting in another unit (DRA: MiB) is converted, rounded down."""
        record = self._nodes.get(name)
        if record is None or not record.unit or record.unit == unit:
            return lambda amount: amount
        mine, theirs = protocol.UNIT_BYTES[record.unit], protocol.UNIT_BYTES[unit]
        return lambda amount: amount * mine // theirs

    def node_names(self) -> list[str]:
        """All known node names, sorted."""
        return sorted(self._nodes)

    def _holding_pods(self) -> None:
        if not self.keep_pods:
            raise RuntimeError("this ledger keeps sums only (keep_pods=False): it cannot list pods")

    def pods(self) -> list[PodRecord]:
        """Every counted pod (RuntimeError on a ledger of sums)."""
        self._holding_pods()
        return list(self._pods.values())

    def pods_on(self, name: str) -> list[PodRecord]:
        """Counted pods on a node, in namespace/name order (the API server's list order).

        Raises:
            RuntimeError: the ledger keeps sums only.
        """
        self._holding_pods()
        uids = self._node_pods.get(name, {})
        return sorted((self._pods[uid] for uid in uids), key=_api_order)

    def gpu_mem_and_count(self, name: str) -> tuple[int, int]:
        """The node's total GPU memory and GPU count on this ledger's basis."""
        node = self._nodes.get(name)
        if node is None:
            return 0, 0
        mem, count = (node.cap_mem, node.cap_count) if self.basis == "capacity" else (node.alloc_mem, node.alloc_count)
        if not 0 <= count <= protocol.MAX_GPUS_PER_NODE:
            count = 0
        return max(mem, 0), count

    def gpu_totals(self, name: str) -> tuple[int, ...]:
        """Per-GPU memory for GPUs 0..count-1 of a node."""
        node = self._nodes.get(name)
        mem, count = self.gpu_mem_and_count(name)
        if node is None or count <= 0:
            return ()
        if node.gpu_mems is not None and len(node.gpu_mems) == count and min(node.gpu_mems) >= 0:
            return node.gpu_mems
        return (mem // count,) * count

    def used(self, name: str) -> dict[int, int]:
        """GPU index -> memory used on a node (reservations included)."""
        return dict(self._used.get(name, {}))

    def usage(self, name: str, *, pods: bool = True) -> NodeUsage:
        """Every device of a node with its pods, the way the inspect views show them.

        Devices 0..count-1 always appear; a device named by a pod beyond the count, and the
        pending device -1, appear when some pod uses them, with the per-GPU total. With
        ``pods=False`` the devices carry no pod lists (the summary view needs only the sums, which
        the ledger keeps already; listing 100,000 pods per call is the costly part).
        """
        node = self._nodes.get(name) or NodeRecord(name=name)
        mem, count = self.gpu_mem_and_count(name)
        totals = self.gpu_totals(name)
        default_total = mem // count if count > 0 else 0
        if not pods:
            used = self._used.get(name, {})
            sums = {index: DeviceUsage(index, total, used.get(index, 0)) for index, total in enumerate(totals)}
            for index in sorted(used):  # a phantom device beyond the count, then pending last
                if index not in sums and index != PENDING:
                    sums[index] = DeviceUsage(index, default_total, used[index], phantom=True)
            if PENDING in used:
                sums[PENDING] = DeviceUsage(PENDING, default_total, used[PENDING])
            return NodeUsage(node, count, mem, sums)
        per_device: dict[int, list[tuple[PodRecord, int]]] = {index: [] for index in range(len(totals))}
        for pod in self.pods_on(name):
            for gpu, amount in shares(pod).items():
                per_device.setdefault(gpu, []).append((pod, amount))
        for uid, reservation in self._reserved.items():
            if reservation.node == name:
                placeholder = PodRecord(
                    uid=uid, namespace=reservation.namespace, name=reservation.name, node=name,
                    request=reservation.mem, gpu_index=reservation.gpu,
                )
                per_device.setdefault(reservation.gpu, []).append((placeholder, reservation.mem))
        devices: dict[int, DeviceUsage] = {}
        for index in sorted(per_device, key=lambda i: (i == PENDING, i)):
            total = totals[index] if 0 <= index < len(totals) else default_total
            entries = per_device[index]
            devices[index] = DeviceUsage(index, total, sum(amount for _, amount in entries), entries,
                                         phantom=index >= len(totals))
        return NodeUsage(node=node, gpu_count=count, total_mem=mem, devices=devices)

    def free(self, name: str) -> dict[int, int]:
        """Healthy GPU index -> free memory on a node (unhealthy GPUs are left out)."""
        node = self._nodes.get(name)
        if node is None:
            return {}
        used = self._used.get(name, {})
        unhealthy = node.unhealthy
        return {
            index: total - used.get(index, 0)
            for index, total in enumerate(self.gpu_totals(name))
            if index not in unhealthy
        }

    def largest_free(self, name: str) -> int:
        """The most free memory on one healthy GPU of a node: the largest request it still takes (>= 0)."""
        return max(0, max(self.free(name).values(), default=0))

    def fit_counts(self, name: str, request: int) -> dict[int, int]:
        """Healthy GPU index -> how many more pods of ``request`` fit on it, one GPU each (no entry if 0).

        The same rule as `fits` and `choose_gpu` (a pod fits a GPU whose free memory is at least its
        request), counted: placing pods one by one on any GPU that fits ends with these numbers,
        whatever the policy.
        """
        if request <= 0:
            return {}
        return {index: free // request for index, free in self.free(name).items() if free >= request}

    def fits(self, name: str, request: int) -> str | None:
        """Why a pod of ``request`` cannot go on a node, as the original words it; None if it fits."""
        if name not in self._nodes:
            return protocol.REASON_NOT_FOUND.format(node=name)
        mem, _ = self.gpu_mem_and_count(name)
        if mem <= 0:
            return protocol.REASON_NOT_GPUSHARE.format(node=name)
        if request <= 0 or not any(free >= request for free in self.free(name).values()):
            return protocol.REASON_INSUFFICIENT
        return None

    def choose_gpu(self, name: str, request: int, policy: Policy = "binpack") -> int | None:
        """The GPU a pod of ``request`` goes on, or None if no single GPU has room.

        binpack is the original's best fit (least free memory that still fits); spread takes the
        most free memory. Ties go to the lowest index.
        """
        return _choose(self.free(name), request, policy)

    def score(self, name: str, request: int, policy: Policy = "binpack") -> int:
        """A 0..10 node score for kube-scheduler's prioritize: how well the pod fits this node.

        binpack favours the node whose chosen GPU is left fullest; spread the emptiest. A node the
        pod does not fit scores 0.
        """
        free = self.free(name)
        gpu = _choose(free, request, policy)
        if gpu is None:
            return 0
        total = self.gpu_totals(name)[gpu]
        if total <= 0:
            return 0
        free_after = free[gpu] - request
        emptiness = free_after / total
        fill = 1 - emptiness if policy == "binpack" else emptiness
        return max(0, min(MAX_SCORE, round(fill * MAX_SCORE)))


def _choose(free: dict[int, int], request: int, policy: Policy) -> int | None:
    """`Ledger.choose_gpu` over a node's free memory per healthy GPU."""
    if request <= 0:
        return None
    candidates = [(amount, index) for index, amount in free.items() if amount >= request]
    if not candidates:
        return None
    return min(candidates, key=POLICIES[policy])[1]


def _api_order(pod: PodRecord) -> tuple[str, str]:
    # The API server lists in byte order of the UTF-8 keys; comparing str by code point gives the
    # same order (UTF-8 preserves it) without encoding every name on every call.
    return pod.namespace, pod.name


POLICIES: Final[dict[str, Callable[[tuple[int, int]], tuple[int, int]]]] = {
    "binpack": lambda candidate: (candidate[0], candidate[1]),
    "spread": lambda candidate: (-candidate[0], candidate[1]),
}
"""Sort keys over (free, index): the smallest key wins."""


# --- Other sharing stacks (HAMi, NVIDIA time-slicing/MIG, nano-gpu, elastic-gpu), read-only -----------


class StackGPU(msgspec.Struct, frozen=True, gc=False):
    """One GPU of a node run by another sharing stack, or one pool of identical slots (NVIDIA, MIG).

    ``unit`` is the GPU's own unit (``MiB``, ``%``, ``slots``, ``GPUs``); amounts in other units are
    never added to it.
    """

    index: int
    total: int
    unit: str
    id: str = ""
    model: str = ""
    cores: int = 0
    """Total core percent (HAMi); 0 where the stack does not track cores."""
    cordoned: bool = False
    healthy: bool = True


class StackNode(msgspec.Struct, frozen=True, gc=False):
    """A node read through a stack decoder: which stack, and its GPUs in their own units."""

    name: str
    stack: str
    ip: str = "unknown"
    gpus: tuple[StackGPU, ...] = ()
    note: str = ""
    """A short remark shown beside the node (sharing mode, a stale handshake)."""
    reservations: tuple[tuple[str, int, str], ...] = ()
    """KAI's reservation pods: (``namespace/name``, GPU index or -1, GPU UUID or ""), not workloads."""


class StackClaim(msgspec.Struct, frozen=True, gc=False):
    """One container's (or pod's) share of one GPU, in the unit the stack counts it in."""

    namespace: str
    name: str
    uid: str
    node: str
    gpu: int
    amount: int
    unit: str
    phase: str = ""
    cores: int = 0


class StackDeviceUsage(msgspec.Struct, frozen=True, gc=False):
    """One GPU of a stack node with the claims counted on it (index -1: claimed, no GPU known)."""

    gpu: StackGPU
    used: int
    cores_used: int
    claims: list[StackClaim]

    @property
    def free(self) -> int:
        """What is still unclaimed, in the GPU's unit (negative if over-committed)."""
        return self.gpu.total - self.used


def _claim_order(claim: StackClaim) -> tuple[bytes, bytes]:
    return claim.namespace.encode(), claim.name.encode()


def stack_counts(claim: StackClaim, node: str) -> bool:
    """Whether a claim holds something on ``node``: positive, on that node, pod not completed."""
    return claim.amount > 0 and claim.node == node and not protocol.pod_phase_terminal(claim.phase)


def stack_usage(node: StackNode, claims: Iterable[StackClaim]) -> list[StackDeviceUsage]:
    """Per-GPU usage of a stack node, GPUs by index and pending devices (-1, one per unit) last.

    A claim counts only in its GPU's unit: a claim whose unit differs from its GPU's goes to the
    pending device of its own unit, so MiB are never added to % or slots. A claim naming no GPU of
    the node is pending as well (shown, never taken off a real GPU's free amount). Claims on a GPU
    come in namespace/name order (the API server's), so a file and a live cluster print the same.
    """
    by_index = {gpu.index: gpu for gpu in node.gpus}
    per_device: dict[tuple[int, str], list[StackClaim]] = {(gpu.index, gpu.unit): [] for gpu in node.gpus}
    for claim in claims:
        if not stack_counts(claim, node.name):
            continue
        gpu = by_index.get(claim.gpu)
        key = (gpu.index, gpu.unit) if gpu is not None and gpu.unit == claim.unit else (PENDING, claim.unit)
        per_device.setdefault(key, []).append(claim)
    result: list[StackDeviceUsage] = []
    for index, unit in sorted(per_device, key=lambda key: (key[0] == PENDING, key[0], key[1])):
        entries = sorted(per_device[(index, unit)], key=_claim_order)
        gpu = by_index[index] if index != PENDING else StackGPU(index=PENDING, total=0, unit=unit)
        used = sum(claim.amount for claim in entries)
        cores = sum(max(claim.cores, 0) for claim in entries)
        result.append(StackDeviceUsage(gpu, used, cores, entries))
    return result
