"""Hold every gpushare pod to its memory share with the driver's per-cgroup limits (``--enforce-memory``).

For each pod on the node that holds gpushare memory on a GPU, the pod's cgroup gets, on that GPU:

- ``hard``: soft and hard limit at the share (an allocation past it fails out-of-memory);
- ``soft``: soft limit at the share, hard limit at the GPU's memory (the pod may borrow idle memory
  and is the first evicted under real pressure, as NVIDIA's MPS v3 Memory Partitioning defines it);
- ``off``: nothing (the binary's default: a drop-in for the original device plugin).

Several containers of one pod on one GPU share one limit: the pod cgroup holds them all, and the share
is the pod's (``ALIYUN_COM_GPU_MEM_POD`` times the unit, as `ledger.shares` counts it). kubelet admits
the pod (Allocate), then creates its cgroup, then its containers; while a pod waits for its cgroup
the loop watches the QoS cgroup directories with inotify (`dirwatch`) and looks for it on every new
entry, or, where inotify is not available, polls every `POLL_SECONDS` (three ``stat`` calls per
waiting pod; nothing is watched or polled when no pod waits), so the limit lands before the
containers start in practice. Limits of pods that
end are cleared (a removed cgroup clears its own, NVML says); on start, and every `RESYNC_SECONDS`,
everything is reconciled, and a first pass clears limits left on pod cgroups that no longer hold a
share. Where shares come from annotations the pod's owner may edit (the device plugin's), a limit
stays while its pod has not ended, whatever the annotations say later: a pod cannot lift its own
limit by editing its GPU index; and until the node's pods were listed once (the API unreachable at
start), no limit is cleared and none left by a previous run is swept: an unknown is not an end.

Faults: a pod UID that is not a UUID, a share of 0 or above the GPU's memory, or a GPU index the node
does not have gets no limit and one warning. An NVML error on one GPU is logged once and retried at the
next pass; it never reaches Allocate (which does not call this module). A GPU that cannot enforce
(driver older than r615, MIG, cgroup v1) is reported unenforced with the reason, one log line per GPU,
and sharing goes on as without enforcement.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kubectl_gpushare import protocol
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.dirwatch import DirWatch
from kubectl_gpushare.node.gpus import MEMORY_LIMIT_MAX, BackendError, GpuDevice, LimitsUnsupportedError, MemoryBackend

log = logging.getLogger(__name__)

POLL_SECONDS = 0.01
"""How often a pod waiting for its cgroup is looked for (the goal is the limit within 100 ms)."""
RESYNC_SECONDS = 30.0
"""Full reconcile period: catches anything a missed event or a failed NVML call left behind."""
RETRY_SECONDS = 2.0
"""How soon a failed NVML call is tried again."""
WATCHED_RECHECK_SECONDS = 0.5
"""With inotify, waiting pods are still looked for this often (a safety net, not the path)."""


@dataclass(frozen=True)
class PodShare:
    """A pod's gpushare memory on one GPU of this node, in bytes."""

    uid: str
    namespace: str
    name: str
    gpu: int
    bytes: int


@dataclass(frozen=True)
class NodePods:
    """One read of the node's pods: the shares to hold, and the UIDs of the pods that have not ended.

    Both come from the same list, so a pass never weighs shares of one moment against pods of another
    (and reads the pods once). Iterating gives the shares, so it serves where shares alone are read.
    """

    shares: tuple[PodShare, ...]
    alive: frozenset[str]
    known: bool = True
    """False before the pods were ever listed: no pod is known to have ended, so no limit is lifted."""

    def __iter__(self) -> Iterator[PodShare]:
        return iter(self.shares)


@dataclass(frozen=True)
class Applied:
    """Limits this process set on one pod cgroup on one GPU."""

    share: PodShare
    cgroup: str
    """The path NVML was given."""
    soft: int
    hard: int


@dataclass(frozen=True)
class GpuStatus:
    """What is in force on one GPU: the mode (``off`` where it cannot enforce) and why not."""

    index: int
    uuid: str
    enforcement: str
    reason: str



def _nvml_key(gpu: GpuDevice) -> str:
    """The warn-once key of an NVML failure on a GPU's memory limits (cleared when a limit is set)."""
    return f"nvml:{gpu.uuid}"


class Enforcer:
    """The reconcile loop; `run` on a thread of its own, `wake` it when pods change."""

    def __init__(
        self,
        backend: MemoryBackend,
        layout: cgroups.Layout,
        mode: str,
        gpus: Callable[[], list[GpuDevice]],
        shares: Callable[[], Iterable[PodShare]],
        *,
        poll: float = POLL_SECONDS,
        resync: float = RESYNC_SECONDS,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        """Enforce in ``mode`` the shares that ``shares`` reads (called once per pass).

        Where shares are read from what the pod's owner may edit (the device plugin's annotations),
        ``shares`` returns a `NodePods`: a limit set on a pod it lists alive is kept when the pod's
        share vanishes or moves, so an edit never lifts it, and before the pods are known (not
        listed yet) every limit stays as it is. Plain shares: a vanished share clears its limit.
        """
        if mode not in protocol.ENFORCE_MODES:
            raise ValueError(f"unknown enforcement mode {mode!r}")
        self.backend = backend
        self.layout = layout
        self.mode = mode
        self._gpus = gpus
        self._shares = shares
        self.poll = poll
        self.resync = resync
        self.on_change = on_change
        """Called when a GPU's enforcement status changes (the node annotation is republished)."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._applied: dict[tuple[str, int], Applied] = {}
        self._pending: dict[tuple[str, int], PodShare] = {}
        self._reasons: dict[str, str] = {}
        """GPU uuid -> why it is unenforced (permanent); absent: enforced or not probed yet."""
        self._supported: set[str] = set()
        self._transient: dict[str, str] = {}
        self._warned: set[str] = set()
        self._swept = False
        self._retry_at: float | None = None
        self._watch: DirWatch | None = None
        self._watch_tried = False
        self.use_inotify = True
        self.passes = 0

    # --- what others read -------------------------------------------------------------------

    def status(self) -> list[GpuStatus]:
        """Per GPU: what is enforced now, and why not where it was asked for."""
        out = []
        gpus = self._gpus()  # outside our lock: the plugin's inventory lock is taken there
        with self._lock:
            for gpu in gpus:
                if self.mode == protocol.ENFORCE_OFF:
                    out.append(GpuStatus(gpu.index, gpu.uuid, protocol.ENFORCE_OFF, ""))
                elif gpu.uuid in self._supported:
                    out.append(GpuStatus(gpu.index, gpu.uuid, self.mode, ""))
                else:
                    reason = self._reasons.get(gpu.uuid) or self._transient.get(gpu.uuid) or "not probed yet"
                    out.append(GpuStatus(gpu.index, gpu.uuid, protocol.ENFORCE_OFF, reason))
        return out

    def applied(self) -> dict[tuple[str, int], Applied]:
        """(pod UID, GPU index) -> the limits set now."""
        with self._lock:
            return dict(self._applied)

    def wake(self) -> None:
        """Pods changed: reconcile soon."""
        self._wake.set()
        watch = self._watch
        if watch is not None:
            watch.interrupt()

    def _watcher(self) -> DirWatch | None:
        """The inotify watch on the QoS cgroup directories, opened once (retried each full pass)."""
        if self._watch is None and not self._watch_tried and self.use_inotify:
            self._watch_tried = True
            driver = self.layout.detect()
            if driver is not None:
                root = self.layout.root.rstrip("/")
                self._watch = DirWatch.open(f"{root}/{rel}" for rel in cgroups.qos_dirs(driver).values())
        return self._watch

    # --- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Reconcile now, then on every wake, every resync period, and poll for awaited cgroups.

        Set ``stop`` then call `wake` to end it promptly.
        """
        if self.mode == protocol.ENFORCE_OFF:
            return
        next_full = 0.0
        last = self.status()
        try:
            self._loop(stop, next_full, last)
        finally:
            if self._watch is not None:
                self._watch.close()
                self._watch = None

    def _loop(self, stop: threading.Event, next_full: float, last: list[GpuStatus]) -> None:
        while not stop.is_set():
            now = time.monotonic()
            woken = self._wake.is_set()
            retry = self._retry_at is not None and now >= self._retry_at
            if woken or retry or now >= next_full:
                self._wake.clear()
                try:
                    self.reconcile()
                except Exception:  # never let one bad pass stop enforcement for good
                    log.exception("memory enforcement pass failed; retrying")
                if now >= next_full:
                    next_full = now + self.resync
                    self._watch_tried = False
                status = self.status()
                if status != last and self.on_change is not None:
                    self.on_change()
                last = status
            elif self._pending:
                self._apply_pending()
            watch = self._watcher() if self._pending else None
            if self._pending:
                timeout = WATCHED_RECHECK_SECONDS if watch is not None else self.poll
            else:
                timeout = max(0.0, next_full - time.monotonic())
            if self._retry_at is not None:
                timeout = min(timeout, max(0.0, self._retry_at - time.monotonic()))
            if watch is not None and not self._wake.is_set():
                watch.wait(timeout)
            else:
                self._wake.wait(timeout)

    def reconcile(self) -> None:
        """One full pass: probe GPUs, set what is missing, clear what is stale."""
        if self.mode == protocol.ENFORCE_OFF:
            return
        self.passes += 1
        self._retry_at = None
        gpus = {gpu.index: gpu for gpu in self._gpus()}
        driver = self._driver(gpus.values())
        if driver is None:
            with self._lock:
                self._pending.clear()
            return
        self._probe(gpus.values(), driver)
        read = self._shares()
        pods = read if isinstance(read, NodePods) else NodePods(tuple(read), frozenset())  # plain shares: none kept
        desired = self._desired(gpus, pods.shares)
        with self._lock:
            stale = [key for key in self._applied if key not in desired and key[0] not in pods.alive]
            self._pending = {
                key: share for key, share in desired.items()
                if gpus[share.gpu].uuid in self._supported and not self._current(key, share, gpus)
            }
        if pods.known:  # before the pods were ever listed, no pod is known to have ended
            for key in stale:
                self._clear(key, gpus)
            if not self._swept:
                self._sweep(driver, gpus, {uid for uid, _ in desired} | pods.alive)
        self._apply_pending(driver, gpus)

    # --- internals --------------------------------------------------------------------------

    def _driver(self, gpus: Iterable[GpuDevice]) -> cgroups.Driver | None:
        reason = ""
        if not self.layout.cgroup_v2():
            reason = f"{self.layout.root} is not a cgroup v2 tree (memory limits need cgroup v2)"
        driver = self.layout.detect()
        if not reason and driver is None:
            reason = f"no kubepods cgroup under {self.layout.root} (is the host's cgroup tree mounted there?)"
        if reason:
            for gpu in gpus:
                self._unenforced(gpu, reason, transient=True)
            return None
        return driver

    def _unenforced(self, gpu: GpuDevice, reason: str, *, transient: bool) -> None:
        with self._lock:
            self._supported.discard(gpu.uuid)
            table = self._transient if transient else self._reasons
            first = table.get(gpu.uuid) != reason
            table[gpu.uuid] = reason
        if first:
            log.warning("GPU %d (%s): memory not enforced: %s", gpu.index, gpu.uuid, reason)

    def _probe(self, gpus: Iterable[GpuDevice], driver: cgroups.Driver) -> None:
        for gpu in gpus:
            with self._lock:
                known = gpu.uuid in self._supported or gpu.uuid in self._reasons
            if known:
                continue
            try:
                reason = self.backend.limits_unsupported(gpu.uuid, self.layout.kubepods(driver))
            except BackendError as exc:
                self._unenforced(gpu, f"NVML error, retrying: {exc}", transient=True)
                self._retry_at = time.monotonic() + RETRY_SECONDS
                continue
            if reason:
                self._unenforced(gpu, reason, transient=False)
                continue
            with self._lock:
                self._supported.add(gpu.uuid)
                self._transient.pop(gpu.uuid, None)
            log.info("GPU %d (%s): memory %s-limited per pod (dmem controller: %s)", gpu.index, gpu.uuid,
                     self.mode, "yes" if self.layout.dmem() else "no, the driver's fallback")

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def _limits_failed(self, gpu: GpuDevice, doing: str, exc: BackendError) -> None:
        """Warn that NVML failed ``doing`` a GPU's memory limits: once, until a limit is set on that GPU again."""
        self._warn_once(_nvml_key(gpu), "GPU %d (%s): %s memory limits failed, will retry: %s",
                        gpu.index, gpu.uuid, doing, exc)

    def _desired(self, gpus: dict[int, GpuDevice], shares: Iterable[PodShare]) -> dict[tuple[str, int], PodShare]:
        desired: dict[tuple[str, int], PodShare] = {}
        for share in shares:
            where = f"{share.namespace[:64]}/{share.name[:64]}"
            if not cgroups.valid_uid(share.uid):
                self._warn_once(f"uid:{share.uid[:64]}", "pod %s: UID %r is not a UUID; no memory limit", where,
                                share.uid[:64])
                continue
            gpu = gpus.get(share.gpu)
            if gpu is None:
                self._warn_once(f"gpu:{share.uid}:{share.gpu}", "pod %s: GPU %d is not on this node; no memory limit",
                                where, share.gpu)
                continue
            if not 0 < share.bytes <= gpu.memory:
                self._warn_once(f"bytes:{share.uid}:{share.gpu}:{share.bytes}",
                                "pod %s: share of %d bytes on GPU %d is not within its %d bytes; no memory limit",
                                where, share.bytes, share.gpu, gpu.memory)
                continue
            key = (share.uid, share.gpu)
            if key in desired:  # one pod, one GPU, one share; two records for it disagree: trust neither
                self._warn_once(f"dup:{share.uid}:{share.gpu}", "pod %s: two shares on GPU %d; no memory limit",
                                where, share.gpu)
                desired[key] = PodShare(share.uid, share.namespace, share.name, share.gpu, 0)
                continue
            desired[key] = share
        return {key: share for key, share in desired.items() if share.bytes > 0}

    def _targets(self, share: PodShare, gpu: GpuDevice) -> tuple[int, int]:
        if self.mode == protocol.ENFORCE_HARD:
            return share.bytes, share.bytes
        return share.bytes, gpu.memory

    def _current(self, key: tuple[str, int], share: PodShare, gpus: dict[int, GpuDevice]) -> bool:
        done = self._applied.get(key)
        return done is not None and (done.soft, done.hard) == self._targets(share, gpus[share.gpu])

    def _apply_pending(self, driver: cgroups.Driver | None = None, gpus: dict[int, GpuDevice] | None = None) -> None:
        driver = driver or self.layout.detect()
        if driver is None:
            return
        if gpus is None:
            gpus = {gpu.index: gpu for gpu in self._gpus()}
        with self._lock:
            pending = list(self._pending.items())
        for key, share in pending:
            gpu = gpus.get(share.gpu)
            found = self.layout.find(share.uid, driver) if gpu is not None else None
            if gpu is None or found is None:
                continue
            soft, hard = self._targets(share, gpu)
            try:
                self.backend.set_memory_limits(gpu.uuid, found[1], soft, hard)
            except LimitsUnsupportedError as exc:
                self._unenforced(gpu, str(exc), transient=False)
                with self._lock:
                    self._pending.pop(key, None)
                continue
            except BackendError as exc:
                self._limits_failed(gpu, "setting", exc)
                self._retry_at = time.monotonic() + RETRY_SECONDS
                continue
            self._warned.discard(_nvml_key(gpu))
            with self._lock:
                self._applied[key] = Applied(share, found[1], soft, hard)
                self._pending.pop(key, None)
            log.info("pod %s/%s: GPU %d memory limited (soft %d, hard %d bytes)", share.namespace[:64],
                     share.name[:64], gpu.index, soft, hard)

    def _clear(self, key: tuple[str, int], gpus: dict[int, GpuDevice]) -> None:
        with self._lock:
            done = self._applied.get(key)
        gpu = gpus.get(key[1])
        if done is None:
            return
        local = self.layout.root.rstrip("/") + done.cgroup[len(self.layout.nvml_root.rstrip("/")):]
        if gpu is not None and os.path.isdir(local):
            try:
                self.backend.set_memory_limits(gpu.uuid, done.cgroup, 0, MEMORY_LIMIT_MAX)
            except LimitsUnsupportedError:
                pass
            except BackendError as exc:
                self._limits_failed(gpu, "clearing", exc)
                self._retry_at = time.monotonic() + RETRY_SECONDS
                return
        with self._lock:
            self._applied.pop(key, None)

    def _sweep(self, driver: cgroups.Driver, gpus: dict[int, GpuDevice], keep: set[str]) -> None:
        """Clear limits a previous run left on pod cgroups that hold no share now."""
        failed = any(gpu.uuid in self._transient for gpu in gpus.values())
        for uid, cgroup in self.layout.pods(driver).items():
            if uid in keep:
                continue
            for gpu in gpus.values():
                if gpu.uuid not in self._supported:
                    continue
                try:
                    if self.backend.get_memory_limits(gpu.uuid, cgroup).limited:
                        self.backend.set_memory_limits(gpu.uuid, cgroup, 0, MEMORY_LIMIT_MAX)
                        log.info("cleared a stale memory limit of pod %s on GPU %d", uid, gpu.index)
                except LimitsUnsupportedError:
                    continue
                except BackendError as exc:
                    failed = True
                    self._limits_failed(gpu, "reading", exc)
        if failed:
            self._retry_at = time.monotonic() + RETRY_SECONDS
        else:
            self._swept = True
