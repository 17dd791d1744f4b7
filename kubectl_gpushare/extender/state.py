"""The extender's in-memory model: one capacity-basis ledger behind one lock.

Owns what the extender believes about GPU memory: the nodes, the counted pods, the unhealthy-GPU
sets, and the reservations of binds in flight. Watch events, filter, prioritize, bind and the
metrics scrape all go through this object, so every read sees a consistent ledger and every
reservation is decided atomically (choose a GPU and count it under one lock hold): two concurrent
binds can never both take the last free memory of a GPU.

Filter must answer for 5,000 candidate nodes in a few milliseconds, so the state keeps each node's
largest free memory on a healthy GPU, recomputed lazily only for nodes that an event touched since
the last read. The answers are exactly `Ledger.fits`'s (a unit test checks the two agree).

No I/O, no clock, no logging: the cache feeds it, the handlers and the binder read it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.ledger import PENDING, Ledger, NodeRecord, PodRecord, Policy, counts

_NOT_GPUSHARE = -(1 << 62)
"""Marker in the max-free table for a node without gpu-mem capacity."""
_INVALID = -(1 << 61)
"""Marker in the max-free table for a node whose GPUs cannot be accounted (see `_node_max_free`)."""
_MISSING = -(1 << 63)
"""Below every max-free value: what an unknown node compares as."""


@dataclass(frozen=True)
class Reservation:
    """The GPU a bind in flight has claimed.

    Attributes:
        gpu: the chosen GPU index (``ALIYUN_COM_GPU_MEM_IDX``).
        dev_total: that GPU's memory (``ALIYUN_COM_GPU_MEM_DEV``).
        request: the pod's request (``ALIYUN_COM_GPU_MEM_POD``).
    """

    gpu: int
    dev_total: int
    request: int


@dataclass(frozen=True)
class Unsettled:
    """A reservation whose Binding has an unknown outcome (a 5xx, a timeout, a lost reply).

    It stays counted until the API shows what happened: the watch seeing the pod on a node with a
    GPU index (`ExtenderState.set_pod`), the pod's deletion (`remove_pod`), or the binder's sweep
    reading the pod back (`Binder.sweep`).

    Attributes:
        namespace: the pod's namespace.
        name: the pod's name.
        node: the node the Binding named.
        annotations: the five annotations written before the Binding.
        since: when the outcome became unknown (the binder's monotonic clock).
    """

    namespace: str
    name: str
    node: str
    annotations: tuple[tuple[str, str], ...]
    since: float


@dataclass(frozen=True)
class Assumed:
    """An unbound pod whose annotations claim a GPU (`protocol.ANN_ASSUMED_NODE` and the GPU index).

    Some replica wrote them before a Binding that may still land, so every replica counts the claim
    on that node and GPU (as a reservation) until the pod is seen bound, deleted, or without the
    annotations; the leader's sweep removes them once ``expires`` has passed (`Binder.sweep`).

    Attributes:
        namespace: the pod's namespace.
        name: the pod's name.
        node: the node the annotations name.
        gpu: the GPU index they name.
        request: the pod's request (its limits, as every count reads it).
        assume_time: ``ALIYUN_COM_GPU_MEM_ASSUME_TIME`` (unix ns), to clean up only this claim.
        expires: monotonic seconds after which no Binding written with the claim can still land.
    """

    namespace: str
    name: str
    node: str
    gpu: int
    request: int
    assume_time: int
    expires: float


class ExtenderState:
    """A thread-safe ledger (capacity basis, like the original) with a fast filter path."""

    def __init__(self) -> None:
        """Create an empty state; the cache fills it from list + watch."""
        self.lock = threading.RLock()
        self.ledger = Ledger(basis="capacity")
        self._raw_nodes: dict[str, NodeRecord] = {}
        self._unhealthy: dict[str, frozenset[int]] = {}
        self._pod_node: dict[str, str] = {}
        self._reserved_node: dict[str, str] = {}
        self._binding: set[str] = set()
        self._unsettled: dict[str, Unsettled] = {}
        self._assumed: dict[str, Assumed] = {}
        self._held: set[str] = set()
        """Pods whose reservation the binder made (the ledger's reservation is the claim's otherwise)."""
        self._max_free: dict[str, int] = {}
        self._scores: dict[str, dict[tuple[int, str], int]] = {}
        self._dirty: set[str] = set()
        self._invalid: dict[str, str] = {}

    # --- updates (watch events) ------------------------------------------------------------------

    def set_node(self, node: NodeRecord) -> None:
        """Add or refresh a node; capacity and GPU-count changes apply at once."""
        with self.lock:
            self._raw_nodes[node.name] = node
            self._apply_node(node.name)

    def remove_node(self, name: str) -> None:
        """Forget a node (its pods stay recorded and count again if it returns)."""
        with self.lock:
            self._raw_nodes.pop(name, None)
            self.ledger.remove_node(name)
            self._max_free.pop(name, None)
            self._scores.pop(name, None)
            self._dirty.discard(name)

    def set_unhealthy(self, node: str, gpus: frozenset[int]) -> None:
        """Record the unhealthy GPUs of a node (from its ``unhealthy-gpu-<node>`` ConfigMap)."""
        with self.lock:
            if gpus:
                self._unhealthy[node] = gpus
            else:
                self._unhealthy.pop(node, None)
            if node in self._raw_nodes:
                self._apply_node(node)

    def set_pod(self, pod: PodRecord, assumed: Assumed | None = None) -> None:
        """Add or update a pod by UID; a pod whose GPU index changed moves, it is never counted twice.

        ``assumed``: the claim an unbound pod's annotations make (counted as a reservation), or None.
        """
        uid = pod.uid
        with self.lock:
            self._touch(uid)
            self.ledger.set_pod(pod)
            if uid in self._reserved_node and not self.ledger.is_reserved(uid):
                del self._reserved_node[uid]
                self._unsettled.pop(uid, None)
                self._held.discard(uid)
            if counts(pod):
                self._pod_node[uid] = pod.node
                self._dirty.add(pod.node)
            if assumed is not None and not pod.node:
                self._assumed[uid] = assumed
                if uid not in self._held:
                    self._reserve_assumed(uid, assumed)
            elif self._assumed.pop(uid, None) is not None and uid not in self._held:
                self._unreserve(uid)  # bound (counted from its node now), or its claim was removed

    def _reserve_assumed(self, uid: str, assumed: Assumed) -> None:
        old = self._reserved_node.get(uid)
        if old is not None:
            self._dirty.add(old)
        self.ledger.reserve(uid, assumed.namespace, assumed.name, assumed.node, assumed.gpu, assumed.request)
        self._reserved_node[uid] = assumed.node
        self._dirty.add(assumed.node)

    def _unreserve(self, uid: str) -> None:
        node = self._reserved_node.pop(uid, None)
        if node is not None:
            self._dirty.add(node)
        self.ledger.release(uid)

    def remove_pod(self, uid: str) -> None:
        """Forget a deleted pod; a reservation for it ends too."""
        with self.lock:
            self._touch(uid)
            self.ledger.remove_pod(uid)
            self._reserved_node.pop(uid, None)
            self._unsettled.pop(uid, None)
            self._assumed.pop(uid, None)
            self._held.discard(uid)

    def drop_pods_except(self, keep: set[str]) -> int:
        """Forget every counted pod whose UID is not in ``keep`` (after a fresh re-list).

        Reservations of binds in flight are kept; claims of unbound pods the list lacks end.
        Returns how many pods were dropped.
        """
        with self.lock:
            for uid in [uid for uid in self._assumed if uid not in keep]:
                del self._assumed[uid]
                if uid not in self._held:
                    self._unreserve(uid)
            stale = [uid for uid in self._pod_node if uid not in keep]
            for uid in stale:
                self._touch(uid)
                self.ledger.remove_pod(uid)
                self._reserved_node.pop(uid, None)
                self._unsettled.pop(uid, None)
                self._held.discard(uid)
            return len(stale)

    def _touch(self, uid: str) -> None:
        old = self._pod_node.pop(uid, None)
        if old is not None:
            self._dirty.add(old)
        reserved = self._reserved_node.get(uid)
        if reserved is not None:
            self._dirty.add(reserved)

    def _apply_node(self, name: str) -> None:
        node = self._raw_nodes[name]
        unhealthy = self._unhealthy.get(name, frozenset())
        if node.unhealthy != unhealthy:
            node = msgspec.structs.replace(node, unhealthy=unhealthy)
        self.ledger.set_node(node)
        self._dirty.add(name)

    # --- reservations (bind) ---------------------------------------------------------------------

    @contextmanager
    def binding(self, uid: str) -> Iterator[bool]:
        """Mark a pod as being bound; yields False if another bind of the same pod is in flight."""
        with self.lock:
            busy = uid in self._binding
            if not busy:
                self._binding.add(uid)
        try:
            yield not busy
        finally:
            if not busy:
                with self.lock:
                    self._binding.discard(uid)

    def reserve(
        self, uid: str, namespace: str, name: str, node: str, request: int, policy: Policy
    ) -> Reservation | str:
        """Choose a GPU and count the pod on it, atomically.

        Returns:
            The reservation, or the reason the pod does not fit (the original's filter words).
        """
        with self.lock:
            claim = self._assumed.get(uid)
            if claim is not None and uid not in self._held:
                self._unreserve(uid)  # this pod's own earlier claim must not crowd it out
            reason = self.fits_one(node, request)
            gpu = self.ledger.choose_gpu(node, request, policy) if reason is None else None
            if gpu is None:
                if claim is not None and not self.ledger.is_reserved(uid):
                    self._reserve_assumed(uid, claim)
                return reason or protocol.REASON_INSUFFICIENT
            self.ledger.reserve(uid, namespace, name, node, gpu, request)
            self._held.add(uid)
            self._reserved_node[uid] = node
            self._dirty.add(node)
            return Reservation(gpu=gpu, dev_total=self.ledger.gpu_totals(node)[gpu], request=request)

    def release(self, uid: str) -> None:
        """Undo a reservation after a failed bind (or once the API shows an unknown one is not held).

        A claim the watch last saw on the unbound pod's annotations stays counted (their removal
        may have failed, or not reached the watch yet).
        """
        with self.lock:
            self._unreserve(uid)
            self._unsettled.pop(uid, None)
            self._held.discard(uid)
            claim = self._assumed.get(uid)
            if claim is not None:
                self._reserve_assumed(uid, claim)

    def assumed(self) -> dict[str, Assumed]:
        """The claims of unbound pods that no bind of this replica is settling, by pod UID."""
        with self.lock:
            return {uid: claim for uid, claim in self._assumed.items() if uid not in self._held}

    def reserved(self, uid: str) -> bool:
        """Whether a reservation for this pod is outstanding."""
        with self.lock:
            return self.ledger.is_reserved(uid)

    def mark_unsettled(self, uid: str, unsettled: Unsettled) -> bool:
        """Keep a reservation whose Binding's outcome is unknown; False if it has already ended.

        (The watch may have seen the pod bound, or deleted, while the binder waited for its reply.)
        """
        with self.lock:
            if uid not in self._held:
                return False
            self._unsettled[uid] = unsettled
            return True

    def unsettled(self, uid: str | None = None) -> dict[str, Unsettled]:
        """The reservations of unknown outcome, by pod UID (only ``uid``'s when given)."""
        with self.lock:
            if uid is not None:
                found = self._unsettled.get(uid)
                return {uid: found} if found is not None else {}
            return dict(self._unsettled)

    def counted_on(self, uid: str) -> str | None:
        """The node a pod is counted on from the watch (not from a reservation), or None."""
        with self.lock:
            return self._pod_node.get(uid)

    # --- queries ---------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Recompute the max-free entry of every node an event touched.

        A node whose data cannot be accounted (too many GPUs, or anything else that raises) is
        marked invalid with its reason; it fails every filter, and every other node is answered as
        usual. The dirty set is always cleared, so one bad node cannot fail every later request.
        """
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        for name in dirty:
            self._scores.pop(name, None)
            self._invalid.pop(name, None)
            if name not in self._raw_nodes:
                self._max_free.pop(name, None)
                continue
            try:
                self._max_free[name] = self._node_max_free(name)
            except Exception as exc:  # noqa: BLE001 - one node's data must not break the others
                self._max_free[name] = _INVALID
                self._invalid[name] = f"node {name} cannot be used for GPU share: {protocol.error_reason(exc)}"

    def _node_max_free(self, name: str) -> int:
        mem, count = self.ledger.gpu_mem_and_count(name)
        if mem <= 0:
            return _NOT_GPUSHARE
        if count > protocol.MAX_GPUS_PER_NODE:
            raise ValueError(f"{protocol.RESOURCE_COUNT} is {count}, more than {protocol.MAX_GPUS_PER_NODE}")
        return max(self.ledger.free(name).values(), default=-1)

    def fits_one(self, name: str, request: int) -> str | None:
        """Why a pod of ``request`` does not fit on a node (the original's reason), or None."""
        with self.lock:
            self._refresh()
            return self._invalid.get(name) or _reason(name, self._max_free.get(name), request)

    def filter(self, names: list[str], request: int) -> tuple[list[str], dict[str, str]]:
        """Split candidate nodes into those with one GPU that fits and the rest with reasons."""
        with self.lock:
            self._refresh()
            get = self._max_free.get
            passed = [name for name in names if get(name, _MISSING) >= request]
            failed: dict[str, str] = {}
            if len(passed) != len(names):
                invalid = self._invalid.get
                failed = {
                    name: invalid(name) or _reason(name, get(name), request) or protocol.REASON_INSUFFICIENT
                    for name in names
                    if get(name, _MISSING) < request
                }
        return passed, failed

    def scores(self, names: Iterable[str], request: int, policy: Policy) -> list[tuple[str, int]]:
        """0..10 per node for prioritize: how well the pod's best GPU there matches the policy.

        Scores are memoised per node and request size until an event touches the node, so a
        steady cluster answers prioritize for thousands of nodes from the memo.
        """
        key = (request, policy)
        result: list[tuple[str, int]] = []
        with self.lock:
            self._refresh()
            for name in names:
                if name not in self._raw_nodes or name in self._invalid:
                    result.append((name, 0))
                    continue
                cached = self._scores.setdefault(name, {})
                score = cached.get(key)
                if score is None:
                    score = cached[key] = self.ledger.score(name, request, policy)
                result.append((name, score))
        return result

    def inspect(self, name: str | None = None) -> list[dict[str, Any]]:
        """The original's ``/inspect`` view: GPU nodes by name, each GPU with its pods.

        Raises:
            KeyError: ``name`` is not a known node.
        """
        with self.lock:
            self._refresh()
            if name is not None:
                if name not in self._raw_nodes:
                    raise KeyError(name)
                names = [name]
            else:
                names = [n for n in sorted(self._raw_nodes) if self._is_gpu_node(n)]
            return [self._inspect_node(n) for n in names]

    def _is_gpu_node(self, name: str) -> bool:
        return self.ledger.gpu_mem_and_count(name)[0] > 0 and name not in self._invalid

    def _inspect_node(self, name: str) -> dict[str, Any]:
        if name in self._invalid:
            return {"name": name, "totalGPU": 0, "usedGPU": 0, "devs": [], "error": self._invalid[name]}
        usage = self.ledger.usage(name)
        devs = [
            {
                "id": device.index,
                "totalGPU": device.total,
                "usedGPU": device.used,
                "pods": [{"name": pod.name, "namespace": pod.namespace, "usedGPU": amount}
                         for pod, amount in device.pods],
            }
            for device in usage.devices.values()
            if device.index != PENDING
        ]
        return {"name": name, "totalGPU": usage.total_mem, "usedGPU": sum(d["usedGPU"] for d in devs), "devs": devs}

    def gauges(self) -> list[tuple[str, tuple[int, ...], dict[int, int]]]:
        """Per GPU node: name, per-GPU totals, per-GPU used (for the metrics scrape)."""
        with self.lock:
            self._refresh()
            return [
                (name, self.ledger.gpu_totals(name), self.ledger.used(name))
                for name in sorted(self._raw_nodes)
                if self._is_gpu_node(name)
            ]

    def counts(self) -> tuple[int, int]:
        """Number of known nodes and of counted pods."""
        with self.lock:
            return len(self._raw_nodes), len(self._pod_node)


def _reason(name: str, max_free: int | None, request: int) -> str | None:
    if max_free is None:
        return protocol.REASON_NOT_FOUND.format(node=name)
    if max_free == _NOT_GPUSHARE:
        return protocol.REASON_NOT_GPUSHARE.format(node=name)
    if request <= 0 or max_free < request:
        return protocol.REASON_INSUFFICIENT
    return None
