"""The stateful side of Allocate: one lock, the pods in mid-admission, and the assignment record.

`AllocationBook` serialises Allocate and GetPreferredAllocation calls (as the original's mutex
did), asks `allocator.choose` for the pod, records the assignment on the pod through an
`AssignmentRecorder` before answering, and remembers which pods it has served so a lagging watch
cache can never hand the same pod out twice. If the record cannot be written, Allocate fails, so
no container starts on a GPU nobody recorded.

It does not speak gRPC or HTTP itself: pods come from a `PodSource`, writes go to a recorder.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin import allocator
from kubectl_gpushare.deviceplugin.devices import Inventory
from kubectl_gpushare.deviceplugin.gpus import GpuDevice
from kubectl_gpushare.ledger import PodRecord

log = logging.getLogger(__name__)


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


class AssignmentRecorder(Protocol):
    """Writes the assignment annotations onto a pod."""

    def record(self, pod: PodRecord, annotations: dict[str, str]) -> None:
        """Patch ``annotations`` onto the pod; raise if it could not be written (after retries)."""
        ...


class AllocateError(Exception):
    """An Allocate call that must fail; ``message`` reaches the pod's events through kubelet.

    Attributes:
        retryable: the failure was the API server's (kubelet may retry admission), not a mismatch.
    """

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


@dataclass(frozen=True)
class Allocated:
    """What one container got (for logs, tests and the kubelet stand-in)."""

    pod: PodRecord
    container: int
    gpu: GpuDevice
    env: dict[str, str]


class StaticPods:
    """A `PodSource` over a fixed, replaceable list (unit tests and benchmarks)."""

    def __init__(self, pods: Sequence[PodRecord] = (), arrivals: Mapping[str, int] | None = None) -> None:
        self._pods = list(pods)
        self._arrivals = dict(arrivals or {})

    def set(self, pods: Sequence[PodRecord]) -> None:
        """Replace the list."""
        self._pods = list(pods)

    def pods(self) -> list[PodRecord]:
        """The current list."""
        return list(self._pods)

    def refresh(self) -> list[PodRecord]:
        """The current list (there is nothing fresher)."""
        return list(self._pods)

    def arrivals(self) -> Mapping[str, int]:
        """The arrival order given at construction."""
        return self._arrivals


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
    ) -> None:
        self.node = node
        self.inventory = inventory
        self.inventory_lock = inventory_lock
        self.source = source
        self.recorder = recorder
        self.visible: allocator.VisibleMode = visible
        self.cgpu_disable = cgpu_disable
        self.clock_ns = clock_ns
        self._lock = threading.Lock()
        self._progress: dict[str, int] = {}
        self._claimed: set[str] = set()

    def _choose(self, pods: list[PodRecord], units: int) -> allocator.Choice:
        with self.inventory_lock:
            gpu_count = len(self.inventory.gpus())
        return allocator.choose(
            pods,
            units,
            progress=self._progress,
            claimed=self._claimed,
            gpu_count=gpu_count,
            arrival=self.source.arrivals(),
            node=self.node,
            unit=self.inventory.unit.label,
        )

    def _forget_gone(self, pods: list[PodRecord]) -> None:
        present = {pod.uid for pod in pods}
        self._claimed &= present
        for uid in [uid for uid in self._progress if uid not in present]:
            del self._progress[uid]

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        """Kubelet's device pick for the container about to be allocated (see `allocator.preferred_devices`)."""
        with self._lock:
            try:
                try:
                    choice = self._choose(self.source.pods(), size)
                except allocator.NoMatchingPodError:
                    # Kubelet may ask before our watch has seen the pod: read the API once more, as Allocate does.
                    choice = self._choose(self.source.refresh(), size)
            except allocator.NoMatchingPodError:
                uuid = None
            else:
                with self.inventory_lock:
                    gpu = self.inventory.by_index(choice.gpu)
                uuid = gpu.uuid if gpu else None
        return allocator.preferred_devices(available, must_include, size, uuid)

    def allocate(self, device_ids: Sequence[str]) -> Allocated:
        """Serve one container request: find its pod, record the assignment, return the env.

        Raises:
            AllocateError: no pod matches, the pod names a GPU this node lacks, or the assignment
                could not be recorded.
        """
        units = len(device_ids)
        if units == 0:
            raise AllocateError("gpushare device plugin: Allocate named no devices")
        with self._lock:
            pods = self.source.pods()
            self._forget_gone(pods)
            try:
                choice = self._choose(pods, units)
            except allocator.NoMatchingPodError:
                # Kubelet may have seen the pod before our watch did: read the API once more.
                pods = self.source.refresh()
                try:
                    choice = self._choose(pods, units)
                except allocator.NoMatchingPodError as exc:
                    raise AllocateError(str(exc)) from exc
            pod = choice.pod
            with self.inventory_lock:
                gpu = self.inventory.by_index(choice.gpu)
                gpu_units = self.inventory.units(gpu.uuid) if gpu else 0
                healthy = bool(gpu) and self.inventory.healthy(gpu.uuid if gpu else "")
            if gpu is None:
                raise AllocateError(
                    f"gpushare device plugin: pod {pod.namespace}/{pod.name} has {protocol.ANN_IDX}={choice.gpu}, "
                    f"but node {self.node} has no such GPU"
                )
            if not healthy:
                log.warning("pod %s/%s goes on GPU %d, which is unhealthy", pod.namespace, pod.name, gpu.index)
            if choice.first:
                annotations = allocator.assignment_annotations(choice, now_ns=self.clock_ns(), gpu_units=gpu_units)
                try:
                    self.recorder.record(pod, annotations)
                except Exception as exc:  # any failure to record must fail the call
                    raise AllocateError(
                        f"gpushare device plugin: could not record GPU {gpu.index} on pod "
                        f"{pod.namespace}/{pod.name}: {exc}",
                        retryable=True,
                    ) from exc
            done = self._progress.pop(pod.uid, 0) + 1
            if choice.last:
                self._claimed.add(pod.uid)
            else:
                self._progress[pod.uid] = done
            env = allocator.container_env(
                choice,
                gpu,
                container_units=units,
                gpu_units=gpu_units,
                visible=self.visible,
                cgpu_disable=self.cgpu_disable(),
            )
        log.info(
            "allocated GPU %d (%s) to pod %s/%s container %d: %d %s",
            gpu.index, gpu.uuid, pod.namespace, pod.name, choice.container, units, self.inventory.unit.label,
        )
        return Allocated(pod, choice.container, gpu, env)
