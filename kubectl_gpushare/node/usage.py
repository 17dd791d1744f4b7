"""What each pod really holds on each GPU, sampled every ``--usage-interval`` (default 10 s).

Where the driver supports per-cgroup limits (r615+, not MIG), the pod's use is its cgroup's
``currentUsed`` (``nvmlDeviceGetMemoryLimits_v1``, which answers for limited and unlimited cgroups
alike, so this holds with ``--enforce-memory off`` too). Elsewhere (older drivers, MIG) it is the sum
over NVML's running processes on the GPU (compute and graphics), each mapped to its pod through
``/proc/<pid>/cgroup``. NVML reports PIDs of the host's PID namespace, so that mapping needs
the plugin to run with ``hostPID: true``; without it the PIDs name nothing here and pod use is unknown
(``usedBytes`` null), while each GPU's total use is still reported (``nvmlDeviceGetMemoryInfo_v2``:
what ``nvidia-smi`` shows, the driver's own reserve left out).
Nothing is written to the Kubernetes API: the sample is served over HTTP (`node.http`).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Iterable

from kubectl_gpushare import protocol
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.enforce import Enforcer, GpuStatus, PodShare
from kubectl_gpushare.node.gpus import MEMORY_LIMIT_MAX, BackendError, GpuDevice, MemoryBackend

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 10.0
MAX_PROC_CGROUP_BYTES = 8192


class Sampler:
    """Builds `protocol.UsageReport` samples; `run` keeps the latest one fresh."""

    def __init__(
        self,
        node: str,
        backend: MemoryBackend,
        gpus: Callable[[], list[GpuDevice]],
        shares: Callable[[], Iterable[PodShare]],
        enforcer: Enforcer | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
        proc_root: str = "/proc",
        layout: cgroups.Layout | None = None,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.node = node
        self.backend = backend
        self._gpus = gpus
        self._shares = shares
        self.enforcer = enforcer
        self.interval = interval
        self.proc_root = proc_root.rstrip("/")
        self.layout = layout
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self._capable: dict[str, bool] = {}
        self._latest: protocol.UsageReport | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def latest(self) -> protocol.UsageReport:
        """The last sample (taking one if none was taken yet)."""
        with self._lock:
            report = self._latest
        return report if report is not None else self.refresh()

    def refresh(self) -> protocol.UsageReport:
        """Take a sample now and keep it as the latest."""
        report = self.sample()
        with self._lock:
            self._latest = report
        return report

    def run(self, stop: threading.Event) -> None:
        """Sample every interval until ``stop``."""
        while not stop.is_set():
            try:
                self.refresh()
            except Exception:  # a bad sample must not end sampling
                log.exception("usage sample failed")
            stop.wait(self.interval)

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def sample(self) -> protocol.UsageReport:
        """One sample of every GPU and every pod share on the node."""
        gpus = {gpu.index: gpu for gpu in self._gpus()}
        status: dict[int, GpuStatus] = {s.index: s for s in self.enforcer.status()} if self.enforcer else {}
        applied = self.enforcer.applied() if self.enforcer else {}
        shares = [s for s in self._shares()
                  if s.gpu in gpus and 0 < s.bytes <= gpus[s.gpu].memory and cgroups.valid_uid(s.uid)]
        by_process: dict[tuple[str, int], int] = {}
        process_gpus: set[int] = set()
        used_gpu: dict[int, int | None] = {}
        for index, gpu in gpus.items():
            try:
                used_gpu[index] = self.backend.memory_used(gpu.uuid)
            except BackendError as exc:
                self._warn_once(f"used:{gpu.uuid}", "GPU %d: cannot read memory use: %s", index, exc)
                used_gpu[index] = None
        from_cgroups: dict[tuple[str, int], tuple[int, int, int]] = {}
        for share in shares:
            key = (share.uid, share.gpu)
            if key not in applied:
                seen = self._cgroup_use(share, gpus[share.gpu])
                if seen is not None:
                    from_cgroups[key] = seen
        for index, gpu in gpus.items():
            if any(s.gpu == index and (s.uid, index) not in applied and (s.uid, index) not in from_cgroups
                   for s in shares):
                if self._processes(gpu, by_process):
                    process_gpus.add(index)
        pods: list[protocol.UsagePod] = []
        sources: set[str] = set()
        for share in shares:
            key = (share.uid, share.gpu)
            used: int | None = None
            limit: int | None = None
            soft: int | None = None
            done = applied.get(key)
            if done is not None:
                try:
                    got = self.backend.get_memory_limits(gpus[share.gpu].uuid, done.cgroup)
                    used, sources = got.used, sources | {"cgroup-limits"}
                    limit = got.hard if got.hard != MEMORY_LIMIT_MAX else None
                    soft = got.soft or None
                except BackendError as exc:
                    self._warn_once(f"limits:{share.gpu}", "GPU %d: cannot read pod limits: %s", share.gpu, exc)
            elif key in from_cgroups:
                used, hard, soft_now = from_cgroups[key]
                sources = sources | {"cgroup-limits"}
                limit = hard if hard != MEMORY_LIMIT_MAX else None
                soft = soft_now or None
            elif share.gpu in process_gpus:
                used, sources = by_process.get(key, 0), sources | {"processes"}
            pods.append(protocol.UsagePod(
                namespace=share.namespace, name=share.name, uid=share.uid, gpu=share.gpu,
                allocated_bytes=share.bytes, used_bytes=_bounded(used), limit_bytes=_bounded(limit),
                soft_limit_bytes=_bounded(soft),
            ))
        report_gpus = []
        for index, gpu in sorted(gpus.items()):
            st = status.get(index)
            report_gpus.append(protocol.UsageGpu(
                index=index, uuid=gpu.uuid, total_bytes=gpu.memory,
                allocated_bytes=sum(s.bytes for s in shares if s.gpu == index),
                used_bytes=_bounded(used_gpu.get(index)),
                enforcement=st.enforcement if st else protocol.ENFORCE_OFF, reason=st.reason if st else "",
            ))
        source = "cgroup-limits" if "cgroup-limits" in sources else "processes" if sources else "none"
        return protocol.UsageReport(
            node=self.node,
            sampled_at=self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            interval_seconds=self.interval,
            source=source,
            gpus=report_gpus,
            pods=sorted(pods, key=lambda p: (p.namespace, p.name, p.gpu)),
        )

    def _cgroup_use(self, share: PodShare, gpu: GpuDevice) -> tuple[int, int, int] | None:
        """(currentUsed, hard, soft) of the pod's cgroup where the driver tracks cgroups, else None."""
        layout = self.layout
        if layout is None or not layout.cgroup_v2():
            return None
        driver = layout.detect()
        if driver is None:
            return None
        capable = self._capable.get(gpu.uuid)
        if capable is None:
            try:
                capable = not self.backend.limits_unsupported(gpu.uuid, layout.kubepods(driver))
            except BackendError:
                return None
            self._capable[gpu.uuid] = capable
        found = layout.find(share.uid, driver) if capable else None
        if found is None:
            return None
        try:
            got = self.backend.get_memory_limits(gpu.uuid, found[1])
        except BackendError:
            return None
        return got.used, got.hard, got.soft

    def _processes(self, gpu: GpuDevice, into: dict[tuple[str, int], int]) -> bool:
        """Add each of the GPU's processes to its pod's total; False if NVML cannot list them."""
        try:
            procs = self.backend.processes(gpu.uuid)
        except BackendError as exc:
            self._warn_once(f"procs:{gpu.uuid}", "GPU %d: cannot list processes: %s", gpu.index, exc)
            return False
        for proc in procs:
            try:
                with open(f"{self.proc_root}/{int(proc.pid)}/cgroup", "rb") as fh:
                    text = fh.read(MAX_PROC_CGROUP_BYTES).decode("utf-8", "replace")
            except OSError:
                continue  # exited, or not in our PID namespace (no hostPID)
            uid = cgroups.uid_of_proc_cgroup(text)
            if uid:
                into[(uid, gpu.index)] = into.get((uid, gpu.index), 0) + max(0, proc.used)
        return True


def _bounded(value: int | None) -> int | None:
    return value if value is None or 0 <= value <= protocol.MAX_INT64 else None


