"""The device plugin's host-side duties beyond Allocate: memory enforcement and usage over HTTP.

Glue between the plugin's pod cache (ledger records) and `kubectl_gpushare.node`: each pod that holds
gpushare memory becomes one `PodShare` per GPU in bytes (``ALIYUN_COM_GPU_MEM_POD`` devices times the
unit). Runs on threads of its own; nothing here is on Allocate's path, so an NVML error here never
fails an Allocate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from kubectl_gpushare import ledger, protocol
from kubectl_gpushare.deviceplugin.allocation import PodSource
from kubectl_gpushare.deviceplugin.servicer import Advertisement
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.enforce import Enforcer, NodePods, PodShare
from kubectl_gpushare.node.gpus import GpuBackend, GpuDevice
from kubectl_gpushare.node.http import UsageServer
from kubectl_gpushare.node.usage import Sampler

log = logging.getLogger(__name__)


def node_pods(pods: Iterable[ledger.PodRecord], unit_bytes: int, *, known: bool = True) -> NodePods:
    """Every (pod, GPU) share on this node in bytes, and the pods not ended, from one read of the pods.

    Pods still pending a GPU hold no share. ``known`` False: the pods were never listed (the cache
    has not synced), so the enforcer lifts no limit on what the read lacks.

    A share never exceeds the pod's request (its containers' limits, which cannot change): the
    gpushare 2.0 allocation annotation that `ledger.shares` reads is the pod owner's to edit, and
    the ledger may count a larger claim (that only holds memory back), but a limit raised past the
    request would let the pod take memory the scheduler gave to others.
    """
    out = []
    alive = set()
    for pod in pods:
        if not protocol.pod_phase_terminal(pod.phase):
            alive.add(pod.uid)
        if not ledger.counts(pod):
            continue
        for gpu, units in ledger.shares(pod).items():
            if gpu >= 0 and units > 0:
                out.append(PodShare(pod.uid, pod.namespace, pod.name, gpu, min(units, pod.request) * unit_bytes))
    return NodePods(tuple(out), frozenset(alive), known)


class NodeAgent:
    """Enforcer, sampler and HTTP server of one device plugin."""

    def __init__(
        self,
        node_name: str,
        backend: GpuBackend,
        advertisement: Advertisement,
        source: PodSource,
        unit_bytes: int,
        republish: Callable[[], None],
        *,
        enforce: str,
        layout: cgroups.Layout,
        interval: float,
        port: int | None,
        host: str = "",
        proc_root: str = "/proc",
    ) -> None:
        self._advertisement = advertisement

        def shares() -> NodePods:  # one read of the pod cache per pass, the enforcer's or the sampler's
            known = source.synced()  # before pods(): a list landing in between only adds what is known
            return node_pods(source.pods(), unit_bytes, known=known)

        self.enforcer = Enforcer(backend, layout, enforce, self.gpus, shares, on_change=republish)
        self.sampler = Sampler(node_name, backend, self.gpus, shares, self.enforcer, interval=interval,
                               proc_root=proc_root, layout=layout)
        self.server = UsageServer(self.sampler, host, port) if port is not None else None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def gpus(self) -> list[GpuDevice]:
        """The GPUs advertised now."""
        with self._advertisement.lock:
            return self._advertisement.inventory.gpus()

    @property
    def port(self) -> int | None:
        """The usage port bound (None when serving none)."""
        return self.server.port if self.server else None

    def start(self) -> None:
        """Start enforcing (unless off), sampling, and serving."""
        if self.enforcer.mode != protocol.ENFORCE_OFF:
            self._threads.append(threading.Thread(target=self.enforcer.run, args=(self._stop,),
                                                  name="memory-enforcer", daemon=True))
        if self.server is not None:
            self._threads.append(threading.Thread(target=self.sampler.run, args=(self._stop,),
                                                  name="usage-sampler", daemon=True))
            self.server.start()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop every thread and close the port."""
        self._stop.set()
        self.enforcer.wake()
        if self.server is not None:
            self.server.stop()
        for thread in self._threads:
            thread.join(5)
