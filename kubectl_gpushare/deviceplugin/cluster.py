"""The device plugin's view of the API server: this node's pods, its node object, and its writes.

A watch cache (`kube.informer.node_pods`: ``fieldSelector=spec.nodeName=<node>``) keeps this
node's pods as ledger records, converted once per event, so Allocate never lists the API server
(the original listed every Pending pod on every call; on large clusters that overloaded it). The
node is watched too, for the ``cgpu.disable.isolation`` label and to restore ``gpu-count`` if it
goes missing. A pod whose record cannot be built is left out (warned once), never served. Writes
are bounded-retry patches: the assignment annotations on a pod, conditional on its UID and within
`RECORD_BUDGET` (failure fails Allocate), and the node's ``aliyun.com/gpu-count`` plus the per-GPU
annotation (retried in the background until it succeeds, since serving must not wait for it).

Calls made, for the RBAC in ``manifests/base/device-plugin.yaml``: pods list/watch/patch; nodes
list/watch/patch; nodes/status patch.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.allocation import OutcomeUnknownError, PodGoneError
from kubectl_gpushare.deviceplugin.devices import Inventory
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import Conflict, KubeError, NotFound, UndecodableReply, did_not_happen
from kubectl_gpushare.kube.informer import Informer, node_pods
from kubectl_gpushare.kube.records import pod_record
from kubectl_gpushare.kube.retry import RetryPolicy, backoff_delay, call_with_retry
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import PodRecord

log = logging.getLogger(__name__)

API_CALL_TIMEOUT = 3.0
"""Seconds one API request made on Allocate's behalf may take (the kubeconfig's timeout if shorter)."""
RECORD_POLICY = RetryPolicy(attempts=4, base=0.2, cap=1.0, deadline=4.0)
"""Patching a pod during Allocate: kubelet is waiting, so ride out hiccups for a few seconds only."""
REFRESH_POLICY = RetryPolicy(attempts=3, base=0.2, cap=1.0, deadline=2.0)
RECORD_BUDGET = RECORD_POLICY.deadline + API_CALL_TIMEOUT if RECORD_POLICY.deadline else API_CALL_TIMEOUT
"""The longest an assignment write can take (7 s); with a re-read (5 s) an Allocate stays near 12 s, well
inside the 30 s kubelet's stand-in allows, and no other call waits behind it (see `allocation`)."""
PUBLISH_POLICY = RetryPolicy(attempts=2, base=0.2, cap=1.0, deadline=2.0)
"""One publish attempt; the background loop retries (serving must not wait on the API server)."""
PUBLISH_BACKOFF = RetryPolicy(attempts=1_000_000, base=1.0, cap=30.0, deadline=None)


class NodeCluster:
    """Pods and node of one node, cached, plus the writes the plugin makes."""

    def __init__(self, client: Client, node: str) -> None:
        self.client = client
        self.node = node
        timeout = client.config.timeout
        # Calls made while kubelet waits get their own client with a short per-request timeout.
        self.urgent = Client(
            dataclasses.replace(client.config, timeout=min(timeout, API_CALL_TIMEOUT) if timeout else API_CALL_TIMEOUT),
            client.user_agent,
            retry=None,
        )
        self._lock = threading.Lock()
        self._pods: dict[str, PodRecord] = {}
        self._unreadable: set[str] = set()
        self._arrivals: dict[str, int] = {}
        self._arrived = 0
        self._node: Node | None = None
        self._desired: Inventory | None = None
        self._published = threading.Event()
        self._suspect = threading.Event()
        """A watch event showed the node without our gpu-count: `_publish_loop` checks the node itself."""
        self._publish_wake = threading.Event()
        self._stop = threading.Event()
        self._publisher: threading.Thread | None = None
        self.on_pods_changed: list[Callable[[], None]] = []
        """Called (on the watch thread; must not block) after any pod of this node changes."""
        self.pod_informer: Informer[Pod] = node_pods(
            client,
            node,
            on_add=self._pod_changed,
            on_update=lambda old, new: self._pod_changed(new),
            on_delete=self._pod_deleted,
            name=f"device-plugin-pods-{node}",
        )
        self.node_informer: Informer[Node] = Informer(
            client,
            types.NODES,
            field_selector=f"metadata.name={node}",
            on_add=self._node_changed,
            on_update=lambda old, new: self._node_changed(new),
            name=f"device-plugin-node-{node}",
        )

    # --- Cluster protocol --------------------------------------------------------------------------

    @property
    def source(self) -> NodeCluster:
        """This object is its own `PodSource`."""
        return self

    @property
    def recorder(self) -> NodeCluster:
        """This object is its own `AssignmentRecorder`."""
        return self

    def start(self) -> None:
        """Start the watch caches and the node publisher."""
        self.pod_informer.start()
        self.node_informer.start()
        self._publisher = threading.Thread(target=self._publish_loop, name="device-plugin-publish", daemon=True)
        self._publisher.start()

    def wait_synced(self, timeout: float) -> bool:
        """Wait for the first list of this node's pods."""
        return self.pod_informer.wait_synced(timeout)

    def stop(self) -> None:
        """Stop the caches and the publisher."""
        self._stop.set()
        self._publish_wake.set()
        self.pod_informer.stop()
        self.node_informer.stop()
        if self._publisher is not None:
            self._publisher.join(5)
        self.urgent.close()

    # --- pods ----------------------------------------------------------------------------------------

    def _record_of(self, pod: Pod) -> PodRecord | None:
        """The pod's record, or None (warned once per pod) when its values cannot be read at all."""
        try:
            return pod_record(pod)
        except Exception as exc:  # hostile values must not break the cache for the other pods
            meta = pod.metadata
            if meta.uid not in self._unreadable:
                self._unreadable.add(meta.uid)
                log.warning(
                    "pod %s/%s cannot be read (%s: %s); it is never served",
                    meta.namespace, meta.name, type(exc).__name__, str(exc)[:200],
                )
            return None

    def _pod_changed(self, pod: Pod) -> None:
        record = self._record_of(pod)
        with self._lock:
            if record is None:
                self._pods.pop(pod.metadata.uid, None)
            else:
                self._store(record)
        self._notify()

    def _notify(self) -> None:
        for listener in self.on_pods_changed:
            listener()

    def _store(self, record: PodRecord) -> None:
        """Keep a record; a pod new to this node after the first list gets the next arrival number."""
        if record.uid not in self._pods and self.pod_informer.synced.is_set():
            self._arrived += 1
            self._arrivals[record.uid] = self._arrived
        self._pods[record.uid] = record

    def _pod_deleted(self, pod: Pod) -> None:
        with self._lock:
            self._pods.pop(pod.metadata.uid, None)
            self._arrivals.pop(pod.metadata.uid, None)
            self._unreadable.discard(pod.metadata.uid)
        self._notify()

    def arrivals(self) -> dict[str, int]:
        """Pod UID -> order of arrival on this node (pods listed at start are absent: first)."""
        with self._lock:
            return dict(self._arrivals)

    def synced(self) -> bool:
        """Whether the cache holds the first list of this node's pods."""
        return self.pod_informer.synced.is_set()

    def pods(self) -> list[PodRecord]:
        """This node's pods from the cache."""
        with self._lock:
            return list(self._pods.values())

    def refresh(self) -> list[PodRecord]:
        """Read this node's pending pods straight from the API (when the cache may lag kubelet).

        A listed pod replaces a cached one of the same name with another UID (it was re-created).
        Falls back to the cache if the API does not answer within a few seconds.
        """
        try:
            listed = call_with_retry(
                lambda: list(self.urgent.iter_pods(field_selector=f"spec.nodeName={self.node},status.phase=Pending")),
                REFRESH_POLICY,
                stop=self._stop,
            )
        except KubeError as exc:
            log.warning("cannot list this node's pending pods: %s", exc)
            return self.pods()
        records = [record for record in map(self._record_of, listed) if record is not None]
        with self._lock:
            names = {(record.namespace, record.name): record.uid for record in records}
            for uid, cached in list(self._pods.items()):
                if names.get((cached.namespace, cached.name), uid) != uid:
                    del self._pods[uid]
            for record in records:
                self._store(record)
            return list(self._pods.values())

    def record(self, pod: PodRecord, annotations: dict[str, str]) -> None:
        """Patch the assignment annotations onto the pod with this UID, with bounded retries.

        Raises:
            PodGoneError: the pod was deleted, or re-created under its name (the UID precondition failed).
            OutcomeUnknownError: the API did not answer; the patch may have landed.
            KubeError: the patch failed for good. A reply that does not decode is no failure: the patch
                was applied, so the assignment is recorded (a warning says so).
        """
        body = {"metadata": {"uid": pod.uid, "annotations": annotations}}
        unanswered: list[KubeError] = []

        def retrying(attempt: int, error: KubeError, delay: float) -> None:
            if not did_not_happen(error):  # may have landed: a timeout, a 5xx, a 429 (`kube.errors`)
                unanswered.append(error)
            log.warning(
                "patching pod %s/%s failed (%s); retry %d in %.1fs", pod.namespace, pod.name, error, attempt, delay
            )

        try:
            patched = call_with_retry(
                lambda: self.urgent.patch_pod(pod.namespace, pod.name, body),
                RECORD_POLICY,
                stop=self._stop,
                on_retry=retrying,
            )
        except (Conflict, NotFound) as exc:
            raise PodGoneError(str(exc)) from exc
        except UndecodableReply as exc:
            # The API server applied the patch (a 2xx) and answered with a pod this code cannot read: the
            # assignment is recorded. Allocate goes on (the container gets the GPU its pod now names) and
            # the cache learns the pod from the watch, as it does every pod; one the watch cannot decode
            # either keeps its last readable copy there, which Allocate's claim holds while this process runs.
            log.warning("the assignment of pod %s/%s was recorded; the reply to it is unreadable: %s",
                        pod.namespace, pod.name, exc)
            return
        except KubeError as exc:
            if not did_not_happen(exc) or unanswered:
                # One try went unanswered: it may have landed even though a later one failed.
                raise OutcomeUnknownError(str(exc)) from exc
            raise
        if patched.metadata.uid and patched.metadata.uid != pod.uid:
            raise PodGoneError(f"pod {pod.namespace}/{pod.name} was re-created (uid {patched.metadata.uid})")
        self._pod_changed(patched)

    # --- node ----------------------------------------------------------------------------------------

    def _node_changed(self, node: Node) -> None:
        with self._lock:
            self._node = node
            desired = self._desired
        if desired is not None and self._published.is_set():
            if node.status.capacity.get(protocol.RESOURCE_COUNT) != str(len(desired.gpus())):
                # Maybe a stale event from before our own write: the publisher reads the node to be sure.
                self._suspect.set()
                self._publish_wake.set()

    def cgpu_disable(self) -> bool:
        """Whether the node is labelled ``cgpu.disable.isolation=true``."""
        with self._lock:
            node = self._node
        return node is not None and node.metadata.labels.get(protocol.LABEL_CGPU_DISABLE) == "true"

    def publish(self, inventory: Inventory) -> None:
        """Ask for the node to carry this inventory; written now if possible, else retried in the background."""
        with self._lock:
            self._desired = inventory
        self._published.clear()
        try:
            self._write(inventory)
        except KubeError as exc:
            log.warning("cannot publish GPUs on node %s yet (%s); retrying in the background", self.node, exc)
            self._publish_wake.set()

    def _write(self, inventory: Inventory) -> None:
        count = str(len(inventory.gpus()))
        status = {
            "status": {"capacity": {protocol.RESOURCE_COUNT: count}, "allocatable": {protocol.RESOURCE_COUNT: count}}
        }
        meta = {
            "metadata": {
                "annotations": {protocol.ANN_NODE_GPUS: protocol.format_node_gpus(inventory.node_annotation())}
            }
        }
        self._write_node(lambda: self.client.patch_node_status(self.node, status))
        self._write_node(lambda: self.client.patch_node(self.node, meta))
        with self._lock:
            current = self._desired
        if current is inventory:
            self._published.set()
        log.info("published %s GPU(s) on node %s", count, self.node)

    def _write_node(self, write: Callable[[], Node]) -> None:
        """One node write, retried; a reply that does not decode means it landed (retrying would land it again)."""
        try:
            call_with_retry(write, PUBLISH_POLICY, stop=self._stop)
        except UndecodableReply as exc:
            log.warning("node %s was written; the reply to it is unreadable: %s", self.node, exc)

    def _publish_loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._publish_wake.wait()
            self._publish_wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                desired = self._desired
            if desired is not None and self._suspect.is_set():
                self._suspect.clear()
                if not self._lost(desired):
                    continue
                log.warning("node %s lost %s; publishing it again", self.node, protocol.RESOURCE_COUNT)
                self._published.clear()
            if desired is None or self._published.is_set():
                continue
            try:
                self._write(desired)
                failures = 0
            except KubeError as exc:
                failures += 1
                delay = backoff_delay(failures, PUBLISH_BACKOFF, exc)
                log.warning("publishing GPUs on node %s failed (%s); retrying in %.1fs", self.node, exc, delay)
                if self._stop.wait(delay):
                    return
                self._publish_wake.set()


    def _lost(self, desired: Inventory) -> bool:
        """Whether the node as the API server has it now lacks our gpu-count (unreadable or absent: assume so).

        Read with a list of this node alone, which the role grants (``nodes list``), not a GET, which it does not.
        """
        try:
            nodes = self.client.list(types.NODES, field_selector=f"metadata.name={self.node}")
        except KubeError:
            return True
        count = str(len(desired.gpus()))  # another node in the reply (a selector not honoured) is no answer
        return not any(n.metadata.name == self.node and n.status.capacity.get(protocol.RESOURCE_COUNT) == count
                       for n in nodes)
