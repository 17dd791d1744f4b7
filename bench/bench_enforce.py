"""Memory enforcement and usage sampling at 110 pods on a node, measured side by side in one run.

* Pod cgroup appearing -> limit set (goal: p99 <= 100 ms): the enforcement loop runs on its thread
  against the fake driver and a fake cgroup tree (systemd layout); 110 pods are bound, then their
  cgroups appear one by one as kubelet would create them, and this process times from ``mkdir`` to
  the limit being in the fake driver. Side by side: inotify (the default) vs the 10 ms polling
  fallback, and a single pod on the node.
* One usage sample's CPU time at 110 pods: from the driver's per-cgroup ``currentUsed`` (limits in
  force) vs from NVML's process list mapped through a fake ``/proc/<pid>/cgroup`` tree (fallback).

The fake driver answers in microseconds; a real NVML call adds its own cost (not measured here).

Usage: .venv/bin/python bench/bench_enforce.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubectl_gpushare import protocol  # noqa: E402
from kubectl_gpushare.node import cgroups  # noqa: E402
from kubectl_gpushare.node.enforce import Enforcer, PodShare  # noqa: E402
from kubectl_gpushare.node.fake_backend import FakeBackend  # noqa: E402
from kubectl_gpushare.node.usage import Sampler  # noqa: E402

GiB = 1 << 30
GPUS = "8x80GiB"


def uid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012x}"


def tree(base: Path) -> Path:
    root = base / "cgroup"
    for rel in cgroups.qos_dirs("systemd").values():
        (root / rel).mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpu memory dmem\n")
    return root


def appear_to_limit(pods: int, rounds: int, inotify: bool = True) -> list[float]:
    """Milliseconds from a pod cgroup's mkdir to its limit, for every pod of every round."""
    delays: list[float] = []
    qos = cgroups.QOS_CLASSES
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            root = tree(Path(tmp))
            backend = FakeBackend.from_spec(GPUS, seed="bench")
            shares = [PodShare(uid(r * 1000 + i), "bench", f"p{i}", i % 8, (1 + i % 5) * GiB) for i in range(pods)]
            enforcer = Enforcer(backend, cgroups.Layout(str(root), str(root)), protocol.ENFORCE_HARD,
                                backend.devices, lambda s=shares: s)
            enforcer.use_inotify = inotify
            stop = threading.Event()
            thread = threading.Thread(target=enforcer.run, args=(stop,), daemon=True)
            thread.start()
            while enforcer.passes < 1:  # the first reconcile ran: from here on, cgroups are found by polling
                time.sleep(0.001)
            time.sleep(0.02)
            for i, share in enumerate(shares):
                path = root / cgroups.pod_path(share.uid, qos[i % 3], "systemd")
                started = time.perf_counter()
                path.mkdir()
                while str(path) not in backend.limits(share.gpu):
                    time.sleep(0.0002)
                delays.append((time.perf_counter() - started) * 1000)
            stop.set()
            enforcer.wake()
            thread.join(5)
    return delays


def sample_cpu(pods: int, samples: int, limits: bool) -> float:
    """CPU milliseconds of one usage sample with ``pods`` pods."""
    with tempfile.TemporaryDirectory() as tmp:
        root = tree(Path(tmp))
        proc = Path(tmp) / "proc"
        backend = FakeBackend.from_spec(GPUS, seed="bench")
        shares = [PodShare(uid(i), "bench", f"p{i}", i % 8, 2 * GiB) for i in range(pods)]
        mode = protocol.ENFORCE_HARD if limits else protocol.ENFORCE_OFF
        enforcer = Enforcer(backend, cgroups.Layout(str(root), str(root)), mode, backend.devices, lambda: shares)
        for i, share in enumerate(shares):
            path = root / cgroups.pod_path(share.uid, "burstable", "systemd")
            path.mkdir()
            if limits:
                continue
            pid = 10_000 + i
            (proc / str(pid)).mkdir(parents=True)
            (proc / str(pid) / "cgroup").write_text(f"0::/{cgroups.pod_path(share.uid, 'burstable', 'systemd')}/c\n")
            backend.add_process(share.gpu, pid, GiB)
        enforcer.reconcile()
        sampler = Sampler("bench", backend, backend.devices, lambda: shares, enforcer, proc_root=str(proc))
        sampler.sample()
        started = time.process_time()
        for _ in range(samples):
            report = sampler.sample()
        spent = (time.process_time() - started) * 1000 / samples
        assert len(report.pods) == pods and all(p.used_bytes is not None for p in report.pods)
        return spent


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    rounds, samples = (1, 20) if args.quick else (5, 200)
    full = appear_to_limit(110, rounds)
    polled = appear_to_limit(110, rounds, inotify=False)
    single = appear_to_limit(1, rounds * 20)
    print(f"cgroup appears -> limit set, 110 pods ({len(full)} cgroups): p50 {statistics.median(full):.1f} ms, "
          f"p99 {pct(full, 0.99):.1f} ms, max {max(full):.1f} ms (goal p99 <= 100 ms: "
          f"{pct(full, 0.99) / 100:.2f}x of budget)")
    print(f"  polling instead of inotify: p50 {statistics.median(polled):.1f} ms, p99 {pct(polled, 0.99):.1f} ms "
          f"(polled / inotify p99: {pct(polled, 0.99) / max(pct(full, 0.99), 1e-9):.2f}x)")
    ratio = pct(full, 0.99) / max(pct(single, 0.99), 1e-9)
    print(f"cgroup appears -> limit set, 1 pod ({len(single)} cgroups): p50 {statistics.median(single):.1f} ms, "
          f"p99 {pct(single, 0.99):.1f} ms; 110 pods / 1 pod p99: {ratio:.2f}x")
    by_limits = sample_cpu(110, samples, limits=True)
    by_procs = sample_cpu(110, samples, limits=False)
    print(f"one usage sample, 110 pods: {by_limits:.2f} ms CPU from cgroup limits, {by_procs:.2f} ms CPU from "
          f"NVML processes + /proc (ratio {by_procs / max(by_limits, 1e-9):.2f}x)")


if __name__ == "__main__":
    main()
