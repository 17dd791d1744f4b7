"""The stateful side of Allocate: the claims this plugin made, and the assignment record.

`AllocationBook` asks `allocator.choose` which pod a call serves, under one short lock that does
no I/O: the choice and the claim that keeps every later call off that pod and its memory happen
together, so no two calls can pick the same pod or the same free memory. The assignment is then
written through an `AssignmentRecorder` outside the lock (kubelet's other calls never queue behind
API retries), and Allocate fails if it cannot be written, so no container starts on a GPU nobody
recorded. Claims outlive the write: a lagging or re-listed watch cache may show the pod unassigned
again, so a claim lasts as long as its pod is in the cache and `CLAIM_GRACE` after it leaves.
When the cache has no match, the API is read once more (`SharedRefresh`): calls that needed a
re-read while one was running share its result instead of listing again.

It does not speak gRPC or HTTP itself: pods come from a `PodSource`, writes go to a recorder.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin import allocator
from kubectl_gpushare.deviceplugin.devices import Inventory
from kubectl_gpushare.ledger import PodRecord
from kubectl_gpushare.node.gpus import GpuDevice

log = logging.getLogger(__name__)

CLAIM_GRACE = 300.0
"""Seconds a claim (or a pod found gone) is kept after its pod left the cache: a relist from a
lagging API cache can drop a pod and bring it back, unassigned, moments later."""
MAX_PICKS = 3
"""Pods one Allocate may try when the pod it picked turns out deleted or re-created."""

ErrorKind = Literal["invalid", "precondition", "exhausted", "unavailable", "internal"]


class PodSource(Protocol):
    """This node's pods, as fresh as the watch cache has them."""

    def pods(self) -> list[PodRecord]:
        """Every pod bound to this node."""
        ...

    def refresh(self) -> list[PodRecord]:
        """Re-read this node's pods from the source of truth (the cache may lag kubelet's view)."""
        ...

    def arrivals(self) -> Mapping[str, int]:
        """Pod UID -> order of arrival on this node since the source started (see `allocator.choose`)."""
        ...

    def synced(self) -> bool:
        """Whether `pods` reflects a list of the API (before the first, an empty list says nothing)."""
        ...


class PodGoneError(Exception):
    """The pod no longer exists with the UID that was picked (deleted or re-created); nothing was written."""


class OutcomeUnknownError(Exception):
    """The write got no answer in time: it may still have landed."""


class AssignmentRecorder(Protocol):
    """Writes the assignment annotations onto a pod."""

    def record(self, pod: PodRecord, annotations: dict[str, str]) -> None:
        """Patch ``annotations`` onto the pod with this UID, within a bounded time.

        Raises:
            PodGoneError: the pod was deleted or re-created.
            OutcomeUnknownError: no answer; the patch may have landed.
            Exception: any other failure (the patch did not land).
        """
        ...


class AllocateError(Exception):
    """An Allocate call that must fail; ``message`` reaches the pod's events through kubelet.

    Attributes:
        kind: which gRPC status it maps to (invalid argument, failed precondition, resource
            exhausted, unavailable, internal).
        retryable: the failure was the API server's (kubelet may retry admission), not a mismatch.
    """

    def __init__(self, message: str, retryable: bool = False, kind: ErrorKind | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind: ErrorKind = kind or ("unavailable" if retryable else "precondition")
        self.retryable = self.kind == "unavailable"


@dataclass(frozen=True)
class Allocated:
    """What one container got (for logs, tests and the kubelet stand-in)."""

    pod: PodRecord
    container: int
    gpu: GpuDevice
    env: dict[str, str]


@dataclass
class _Claim:
    """A pod this plugin picked: its memory, the GPU containers served, and since when it is out of the cache."""

    namespace: str
    name: str
    gpu: int
    units: int
    served: int = 1
    absent_since: float | None = None


class StaticPods:
    """A `PodSource` over a fixed, replaceable list (unit tests and benchmarks)."""

    def __init__(self, pods: Sequence[PodRecord] = (), arrivals: Mapping[str, int] | None = None) -> None:
        self._pods = list(pods)
        self._arrivals = dict(arrivals or {})
        self.refreshes = 0

    def set(self, pods: Sequence[PodRecord]) -> None:
        """Replace the list."""
        self._pods = list(pods)

    def pods(self) -> list[PodRecord]:
        """The current list."""
        return list(self._pods)

    def refresh(self) -> list[PodRecord]:
        """The current list (there is nothing fresher)."""
        self.refreshes += 1
        return list(self._pods)

    def synced(self) -> bool:
        """Always: the list is all there is."""
        return True

    def arrivals(self) -> Mapping[str, int]:
        """The arrival order given at construction."""
        return self._arrivals


class SharedRefresh:
    """At most one API re-read at a time; a caller whose need arose before a re-read started shares it.

    Kubelet admits pods one by one, but a burst of binds can make several calls miss the cache at
    once; one list of this node's pending pods answers them all.
    """

    def __init__(self, refresh: Callable[[], list[PodRecord]], clock: Callable[[], float] = time.monotonic) -> None:
        self._refresh = refresh
        self._clock = clock
        self._cond = threading.Condition()
        self._running = False
        self._last: tuple[float, list[PodRecord]] | None = None

    def get(self, needed_since: float) -> list[PodRecord]:
        """Pods from a re-read that started at or after ``needed_since`` (running one if needed)."""
        with self._cond:
            while True:
                if self._last is not None and self._last[0] >= needed_since:
                    return list(self._last[1])
                if not self._running:
                    self._running = True
                    started = self._clock()
                    break
                self._cond.wait()
        result: list[PodRecord] | None = None
        try:
            result = self._refresh()
            return result
        finally:
            with self._cond:
                self._running = False
                if result is not None:
                    self._last = (started, result)
                self._cond.notify_all()


_Picked = tuple[allocator.Choice, GpuDevice, dict[str, str], dict[str, str]]
"""The choice, its GPU, the container env and the annotations to write (empty after the first container)."""


def _shown(device_id: str, limit: int = 80) -> str:
    return repr(device_id if len(device_id) <= limit else device_id[:limit] + "...")


class AllocationBook:
    """Matches Allocate calls to pods and records each assignment exactly once."""

    def __init__(
        self,
        *,
        node: str,
        inventory: Inventory,
        inventory_lock: threading.Lock,
        source: PodSource,
        recorder: AssignmentRecorder,
        visible: allocator.VisibleMode = "index",
        cgpu_disable: Callable[[], bool] = lambda: False,
        clock_ns: Callable[[], int] = time.time_ns,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.inventory = inventory
        self.inventory_lock = inventory_lock
        self.source = source
        self.recorder = recorder
        self.visible: allocator.VisibleMode = visible
        self.cgpu_disable = cgpu_disable
        self.clock_ns = clock_ns
        self.clock = clock
        self._lock = threading.Lock()
        self._claims: dict[str, _Claim] = {}
        self._skip: dict[str, float | None] = {}
        self._refresher = SharedRefresh(source.refresh, clock)

    # --- under the lock ------------------------------------------------------------------------------

    def _expire(self, pods: list[PodRecord], now: float) -> None:
        """Forget claims and skipped pods whose pod has been out of the cache for `CLAIM_GRACE`."""
        present = {pod.uid for pod in pods}
        for uid, claim in list(self._claims.items()):
            if uid in present:
                claim.absent_since = None
            elif claim.absent_since is None:
                claim.absent_since = now
            elif now - claim.absent_since > CLAIM_GRACE:
                del self._claims[uid]
        for uid, since in list(self._skip.items()):
            if uid in present:
                self._skip[uid] = None
            elif since is None:
                self._skip[uid] = now
            elif now - since > CLAIM_GRACE:
                del self._skip[uid]

    def _choose(self, pods: list[PodRecord], units: int) -> allocator.Choice:
        with self.inventory_lock:
            gpus = self.inventory.gpus()
            gpu_units = [0] * (max((gpu.index for gpu in gpus), default=-1) + 1)
            for gpu in gpus:
                gpu_units[gpu.index] = self.inventory.units(gpu.uuid)
        completed = {pod.uid for pod in pods if protocol.pod_phase_terminal(pod.phase)}
        reserved = {
            uid: allocator.Reservation(claim.namespace, claim.name, claim.gpu, claim.units)
            for uid, claim in self._claims.items()
            if uid not in completed
        }
        return allocator.choose(
            pods,
            units,
            progress={uid: claim.served for uid, claim in self._claims.items()},
            claimed={*self._claims, *self._skip},
            gpu_units=gpu_units,
            arrival=self.source.arrivals(),
            node=self.node,
            unit=self.inventory.unit.label,
            reserved=reserved,
        )

    def _claim(self, pods: list[PodRecord], units: int) -> _Picked:
        """Pick the pod, build its env and annotations, and claim it; all or nothing."""
        self._expire(pods, self.clock())
        choice = self._choose(pods, units)
        pod = choice.pod
        where = f"pod {pod.namespace}/{pod.name}"
        with self.inventory_lock:
            gpu = self.inventory.by_index(choice.gpu)
            gpu_units = self.inventory.units(gpu.uuid) if gpu else 0
            healthy = bool(gpu) and self.inventory.healthy(gpu.uuid if gpu else "")
        if gpu is None:
            raise AllocateError(
                f"gpushare device plugin: {where} has {protocol.ANN_IDX}={choice.gpu}, "
                f"but node {self.node} has no such GPU"
            )
        try:
            env = allocator.container_env(
                choice, gpu, container_units=units, gpu_units=gpu_units, visible=self.visible,
                cgpu_disable=self.cgpu_disable(),
            )
            annotations = (
                allocator.assignment_annotations(choice, now_ns=self.clock_ns(), gpu_units=gpu_units)
                if choice.first
                else {}
            )
        except Exception as exc:  # a value no container env can carry: pass the pod over from now on
            self._skip[pod.uid] = None
            log.warning("passing over %s: %s: %s", where, type(exc).__name__, str(exc)[:200])
            raise AllocateError(
                f"gpushare device plugin: {where} cannot be served ({type(exc).__name__}); it is passed over",
                kind="internal",
            ) from exc
        if not healthy:
            log.warning("%s goes on GPU %d, which is unhealthy", where, gpu.index)
        if choice.first:
            self._claims[pod.uid] = _Claim(pod.namespace, pod.name, choice.gpu, pod.request)
        else:
            self._claims[pod.uid].served += 1
        return choice, gpu, env, annotations

    def _release(self, uid: str, gone: bool) -> None:
        with self._lock:
            self._claims.pop(uid, None)
            if gone:
                self._skip[uid] = None

    # --- the calls -----------------------------------------------------------------------------------

    def _pick(self, units: int) -> _Picked:
        needed_since = self.clock()
        pods = self.source.pods()
        with self._lock:
            try:
                return self._claim(pods, units)
            except allocator.NoMatchingPodError:
                pass
        # Kubelet may have seen the pod before our watch did: read the API once more (outside the lock).
        pods = self._fresh(needed_since)
        with self._lock:
            try:
                return self._claim(pods, units)
            except allocator.NoRoomError as exc:
                raise AllocateError(str(exc), kind="exhausted") from exc
            except allocator.NoMatchingPodError as exc:
                log.debug("no pod for %d unit(s) among %s", units, [
                    (p.namespace, p.name, p.phase, p.assigned, p.gpu_index, p.uid in self._claims) for p in pods])
                raise AllocateError(str(exc)) from exc

    def _fresh(self, needed_since: float) -> list[PodRecord]:
        """A re-read's pods (shared, see `SharedRefresh`), updated by whatever the cache learned since."""
        pods = {pod.uid: pod for pod in self._refresher.get(needed_since)}
        pods.update((pod.uid, pod) for pod in self.source.pods())
        return list(pods.values())

    def _check_devices(self, device_ids: Sequence[str]) -> None:
        if not device_ids:
            raise AllocateError("gpushare device plugin: Allocate named no devices", kind="invalid")
        with self.inventory_lock:
            unknown = [device for device in device_ids if not self.inventory.advertises(device)]
        if unknown:
            raise AllocateError(
                f"gpushare device plugin: Allocate named {len(unknown)} device id(s) this plugin never "
                f"advertised, e.g. {_shown(unknown[0])}",
                kind="invalid",
            )
        if len(set(device_ids)) != len(device_ids):
            raise AllocateError("gpushare device plugin: Allocate named a device id twice", kind="invalid")

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        """Kubelet's device pick for the container about to be allocated (see `allocator.preferred_devices`)."""
        needed_since = self.clock()
        uuid = self._peek(self.source.pods(), size)
        if uuid is None:
            # Kubelet may ask before our watch has seen the pod: read the API once more, as Allocate does.
            uuid = self._peek(self._fresh(needed_since), size)
        return allocator.preferred_devices(available, must_include, size, uuid)

    def _peek(self, pods: list[PodRecord], size: int) -> str | None:
        with self._lock:
            try:
                choice = self._choose(pods, size)
            except allocator.NoMatchingPodError:
                return None
        with self.inventory_lock:
            gpu = self.inventory.by_index(choice.gpu)
        return gpu.uuid if gpu else None

    def allocate(self, device_ids: Sequence[str]) -> Allocated:
        """Serve one container request: find its pod, claim it, record the assignment, return the env.

        Raises:
            AllocateError: the ids were never advertised, no pod matches (or only one without room),
                the pod names a GPU this node lacks, or the assignment could not be recorded.
        """
        self._check_devices(device_ids)
        units = len(device_ids)
        for _ in range(MAX_PICKS):
            choice, gpu, env, annotations = self._pick(units)
            pod = choice.pod
            if annotations:
                try:
                    self.recorder.record(pod, annotations)
                except PodGoneError as exc:
                    log.warning("pod %s/%s (uid %s) is gone: %s; picking again", pod.namespace, pod.name, pod.uid, exc)
                    self._release(pod.uid, gone=True)
                    continue
                except OutcomeUnknownError as exc:
                    # The patch may have landed: keep the claim (and its memory) until the cache shows what happened.
                    raise AllocateError(
                        f"gpushare device plugin: no answer recording GPU {gpu.index} on pod "
                        f"{pod.namespace}/{pod.name} ({exc}); it may have been recorded",
                        kind="unavailable",
                    ) from exc
                except Exception as exc:  # the write failed for good: the pod may be picked again
                    self._release(pod.uid, gone=False)
                    raise AllocateError(
                        f"gpushare device plugin: could not record GPU {gpu.index} on pod "
                        f"{pod.namespace}/{pod.name}: {exc}",
                        kind="unavailable",
                    ) from exc
            log.info(
                "allocated GPU %d (%s) to pod %s/%s container %d: %d %s",
                gpu.index, gpu.uuid, pod.namespace, pod.name, choice.container, units, self.inventory.unit.label,
            )
            return Allocated(pod, choice.container, gpu, env)
        raise AllocateError(
            f"gpushare device plugin: the pods picked for {units} {self.inventory.unit.label} were deleted or "
            f"re-created {MAX_PICKS} times in a row; try again",
            kind="unavailable",
        )
