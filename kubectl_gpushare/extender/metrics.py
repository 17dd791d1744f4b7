"""Prometheus metrics of the extender, on a registry of its own.

Request latency and bind outcomes are recorded as they happen; GPU memory gauges are pulled from
the `ExtenderState` at scrape time by a custom collector (prometheus_client's idiom for exporting
a model), so they can never drift from what filter and bind see. Each app gets its own registry,
so tests and embedders can run several extenders in one process.

Must not change the state: the collector only reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from kubectl_gpushare.extender.state import ExtenderState

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _LedgerCollector(Collector):
    """Per-node and per-GPU allocated/total gauges, read from the state at scrape time."""

    def __init__(self, state: ExtenderState, is_leader: Callable[[], bool]) -> None:
        self._state = state
        self._is_leader = is_leader

    def collect(self) -> Iterator[Metric]:
        node_total = GaugeMetricFamily(
            "gpushare_node_gpu_memory_total", "GPU memory of a node (capacity basis).", labels=["node"])
        node_used = GaugeMetricFamily(
            "gpushare_node_gpu_memory_allocated", "GPU memory allocated to pods on a node.", labels=["node"])
        gpu_total = GaugeMetricFamily(
            "gpushare_gpu_memory_total", "Memory of one GPU.", labels=["node", "gpu"])
        gpu_used = GaugeMetricFamily(
            "gpushare_gpu_memory_allocated", "Memory of one GPU allocated to pods.", labels=["node", "gpu"])
        for name, totals, used in self._state.gauges():
            node_total.add_metric([name], sum(totals))
            node_used.add_metric([name], sum(amount for gpu, amount in used.items() if gpu >= 0))
            for index, total in enumerate(totals):
                gpu = str(index)
                gpu_total.add_metric([name, gpu], total)
                gpu_used.add_metric([name, gpu], used.get(index, 0))
        nodes, pods = self._state.counts()
        yield node_total
        yield node_used
        yield gpu_total
        yield gpu_used
        yield GaugeMetricFamily("gpushare_extender_cached_nodes", "Nodes in the extender's cache.", value=nodes)
        yield GaugeMetricFamily("gpushare_extender_cached_pods", "GPU pods counted in the cache.", value=pods)
        yield GaugeMetricFamily(
            "gpushare_extender_unsettled_binds",
            "Binds whose Binding had an unknown outcome, their GPU still reserved until the API shows it.",
            value=len(self._state.unsettled()))
        yield GaugeMetricFamily(
            "gpushare_extender_leader", "1 while this replica is the leader (or runs without election).",
            value=1 if self._is_leader() else 0)


class ExtenderMetrics:
    """The extender's metrics; `exposition` renders them for ``GET /metrics``."""

    def __init__(self, state: ExtenderState, is_leader: Callable[[], bool] = lambda: True) -> None:
        """Create a private registry with the request, bind and ledger metrics."""
        self.registry = CollectorRegistry(auto_describe=False)
        self._latency = Histogram(
            "gpushare_extender_request_duration_seconds", "Time to answer an extender request, by verb.",
            ["verb"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self._binds = Counter("gpushare_extender_binds", "Pods bound by the extender.", registry=self.registry)
        self._failures = Counter(
            "gpushare_extender_bind_failures", "Binds that failed, by reason.", ["reason"], registry=self.registry)
        self.registry.register(_LedgerCollector(state, is_leader))

    def observe(self, verb: str, seconds: float) -> None:
        """Record how long one request of ``verb`` took."""
        self._latency.labels(verb).observe(seconds)

    def bound(self) -> None:
        """Count a successful bind."""
        self._binds.inc()

    def bind_failed(self, reason: str) -> None:
        """Count a failed bind under a short reason label."""
        self._failures.labels(reason).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition body and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
