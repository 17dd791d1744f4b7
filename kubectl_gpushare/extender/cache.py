"""Feeds the `ExtenderState` from list + watch of nodes, pods and unhealthy-GPU ConfigMaps.

Three `kube.informer.Informer` threads (nodes; pods of all namespaces; ConfigMaps in
``kube-system``) turn API objects into ledger records (`kube.records`) and apply them by UID, so:

- the state is rebuilt from the pods' annotations at start (the original's BuildCache);
- a pod whose GPU index changes moves instead of being counted twice, and a pod re-created under
  the same name (new UID) replaces the old one;
- node capacity and GPU-count changes take effect on the next filter;
- dropped watches resume from the last resourceVersion, and after a 410 the informer re-lists and
  reports the deletions it missed;
- an object that does not decode (a field of the wrong JSON type, say) is logged once per
  version and skipped: the last copy that decoded stays counted, a pod never seen decodable is not
  counted (neither its node nor its request can be read), and its deletion is still applied. A
  value that decodes but does not parse counts as the records module says and is logged once; one
  the parsers cannot hold at all (a 5,000-digit index) leaves the object's previous record in
  place (none for a new one) and is logged once;
- `current` says whether every informer's list or watch has worked recently (``/readyz``).

`catch_up` is what a newly elected leader runs before it binds: it restarts the pod informer with a
fresh list taken *after* the Lease was won, and drops every pod that list does not contain, so no
bind the previous leader made can be missing from this replica's ledger.

This module does no HTTP serving and makes no decisions; it only keeps the state current.
"""

from __future__ import annotations

import logging
import threading
import time

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.state import Assumed, ExtenderState
from kubectl_gpushare.kube import records, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.informer import Informer
from kubectl_gpushare.kube.types import ConfigMap, Node, Pod
from kubectl_gpushare.ledger import PodRecord

log = logging.getLogger("kubectl_gpushare.extender.cache")
_WARNED_LIMIT = 10_000
"""Distinct record warnings remembered (to log each once); the memory is cleared past this."""


class ExtenderCache:
    """The informers that keep one `ExtenderState` in sync with the API server."""

    def __init__(self, client: Client, state: ExtenderState, *, page_size: int = 1000,
                 claim_lifetime: float = 90.0) -> None:
        """Prepare the informers; `start` runs them.

        Args:
            client: the shared API client.
            state: the model to keep current.
            page_size: items per list page.
            claim_lifetime: seconds after its ``ASSUME_TIME`` that an unbound pod's GPU claim can
                still be followed by its Binding (the bind deadline, one request, the unknown-outcome
                grace); counted from when it is first seen if that time is in the future.
        """
        self.claim_lifetime = claim_lifetime
        self.client = client
        self.state = state
        self.page_size = page_size
        self.synced = threading.Event()
        """Set once nodes, pods and ConfigMaps have all been listed once."""
        self._lock = threading.Lock()
        self._resync_seen: set[str] | None = None
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()  # not self._lock: catch_up holds that while joining a thread
        self._nodes: Informer[Node] = Informer(
            client, types.NODES, on_add=self._node, on_update=lambda _old, new: self._node(new),
            on_delete=self._node_gone, page_size=page_size, name="extender-nodes")
        self._configmaps: Informer[ConfigMap] = Informer(
            client, types.CONFIGMAPS, namespace=protocol.UNHEALTHY_CM_NAMESPACE, on_add=self._configmap,
            on_update=lambda _old, new: self._configmap(new), on_delete=self._configmap_gone,
            page_size=page_size, name="extender-configmaps")
        self._pods = self._pod_informer()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _pod_informer(self) -> Informer[Pod]:
        return Informer(self.client, types.PODS, on_add=self._pod, on_update=self._pod_update,
                        on_delete=self._pod_gone, page_size=self.page_size, name="extender-pods")

    # --- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> ExtenderCache:
        """Start the informers; `synced` is set once each has listed once."""
        self._configmaps.start()
        self._nodes.start()
        self._pods.start()
        self._thread = threading.Thread(target=self._wait_synced, name="extender-cache-sync", daemon=True)
        self._thread.start()
        return self

    def _wait_synced(self) -> None:
        for informer in (self._configmaps, self._nodes, self._pods):
            while not self._stop.is_set() and not informer.wait_synced(0.2):
                pass
        if not self._stop.is_set():
            self.synced.set()

    def stop(self) -> None:
        """Stop every informer (a catch-up running meanwhile starts none after this)."""
        with self._lock:
            self._stop.set()
            pods = self._pods
        for informer in (pods, self._nodes, self._configmaps):
            informer.stop()

    def stale_for(self) -> float:
        """Seconds the least current informer has been failing to list or watch (0.0 when all work)."""
        informers = (self._configmaps, self._nodes, self._pods)  # no lock: catch_up may hold it for seconds
        return max(informer.stale_for() for informer in informers)

    def current(self, max_stale: float) -> bool:
        """Whether the cache has synced and no informer has been failing for ``max_stale`` seconds."""
        return self.synced.is_set() and self.stale_for() < max_stale

    def catch_up(self, timeout: float = 60.0) -> None:
        """Re-list pods from scratch and drop any the fresh list lacks (run on winning the Lease).

        Raises:
            TimeoutError: the list did not finish in time (the leader must not bind yet).
        """
        with self._lock:
            if self._stop.is_set():
                return
            old = self._pods
            old.stop()
            self._resync_seen = set()
            self._pods = self._pod_informer()
            fresh = self._pods
            fresh.start()  # under the lock: `stop` either sees this informer or happens before it
        give_up = time.monotonic() + timeout
        synced = fresh.wait_synced(0)
        while not synced and not self._stop.is_set() and self._pods is fresh and time.monotonic() < give_up:
            synced = fresh.wait_synced(min(0.2, max(0.0, give_up - time.monotonic())))
        with self._lock:
            if self._pods is not fresh or self._stop.is_set():
                return  # stopped, or superseded by a later catch-up (a new term), which owns the re-list
            seen, self._resync_seen = self._resync_seen, None
        if not synced or seen is None:
            raise TimeoutError(f"catch-up: the pod list did not finish within {timeout:.0f} s")
        dropped = self.state.drop_pods_except(seen)
        log.info("catch-up: re-listed %d pods, dropped %d stale", len(fresh), dropped)

    # --- callbacks (informer threads) --------------------------------------------------------------------

    def _unreadable(self, what: str, exc: Exception) -> None:
        """Log once that an object could not be turned into a record (its previous record stays)."""
        warnings = records.Warnings()
        warnings.add(f"{what} cannot be read ({protocol.error_reason(exc)}); keeping what was counted for it")
        self._warn_once(warnings)

    def _warn_once(self, warnings: records.Warnings) -> None:
        """Log each distinct problem a record builder reported, the first time only."""
        if not warnings:
            return
        with self._warn_lock:
            if len(self._warned) > _WARNED_LIMIT:
                self._warned.clear()
            new = [message for message in warnings.messages if message not in self._warned]
            self._warned.update(new)
        for message in new:
            log.warning("%s", message)

    def _node(self, node: Node) -> None:
        warnings = records.Warnings()
        try:
            record = records.node_record(node, warnings=warnings)
        except (ValueError, ArithmeticError) as exc:  # a value beyond what the parsers can hold
            self._unreadable(f"node {node.metadata.name}", exc)
            return
        self._warn_once(warnings)
        self.state.set_node(record)

    def _node_gone(self, node: Node) -> None:
        self.state.remove_node(node.metadata.name)

    def _configmap(self, configmap: ConfigMap) -> None:
        node = records.unhealthy_node_name(configmap)
        if node is not None:
            self.state.set_unhealthy(node, records.unhealthy_gpus(configmap))

    def _configmap_gone(self, configmap: ConfigMap) -> None:
        node = records.unhealthy_node_name(configmap)
        if node is not None:
            self.state.set_unhealthy(node, frozenset())

    def _pod(self, pod: Pod) -> None:
        seen = self._resync_seen
        if seen is not None:
            seen.add(pod.metadata.uid)
        warnings = records.Warnings()
        try:
            record = records.pod_record(pod, warnings)
        except (ValueError, ArithmeticError) as exc:  # a value beyond what the parsers can hold
            self._unreadable(f"pod {pod.metadata.namespace}/{pod.metadata.name}", exc)
            return
        self._warn_once(warnings)
        self.state.set_pod(record, self._claim(pod, record))

    def _claim(self, pod: Pod, record: PodRecord) -> Assumed | None:
        """The GPU claim of an unbound pod that carries the extender's annotations, else None."""
        if record.node or protocol.pod_phase_terminal(record.phase):
            return None
        node = protocol.parse_assumed_node(pod.metadata.annotations.get(protocol.ANN_ASSUMED_NODE))
        if node is None or record.gpu_index < 0 or record.request <= 0:
            return None
        left = record.assume_time / 1e9 + self.claim_lifetime - time.time()
        expires = time.monotonic() + min(max(left, 0.0), self.claim_lifetime)
        return Assumed(record.namespace, record.name, node, record.gpu_index, record.request, record.assume_time,
                       expires)

    def _pod_update(self, old: Pod, new: Pod) -> None:
        if old.metadata.uid != new.metadata.uid:
            self.state.remove_pod(old.metadata.uid)  # re-created under the same name
        self._pod(new)

    def _pod_gone(self, pod: Pod) -> None:
        self.state.remove_pod(pod.metadata.uid)
