"""The device plugin's view of the API server: this node's pods, its node object, and its writes.

A watch cache (`kube.informer.Informer` with ``fieldSelector=spec.nodeName=<node>``) keeps this
node's pods as ledger records, converted once per event, so Allocate never lists the API server
(the original listed every Pending pod on every call; on large clusters that overloaded it). The
node is watched too, for the ``cgpu.disable.isolation`` label and to restore ``gpu-count`` if it
goes missing. Writes are bounded-retry patches: the assignment annotations on a pod (failure fails
Allocate) and the node's ``aliyun.com/gpu-count`` plus the per-GPU annotation (retried in the
background until it succeeds, since serving must not wait for it).

Calls made, for the RBAC in ``manifests/base/device-plugin.yaml``: pods list/watch/patch; nodes
list/watch/patch; nodes/status patch.
"""

from __future__ import annotations

import logging
import threading

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.devices import Inventory
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import KubeError
from kubectl_gpushare.kube.informer import Informer
from kubectl_gpushare.kube.records import pod_record
from kubectl_gpushare.kube.retry import RetryPolicy, backoff_delay, call_with_retry
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import PodRecord

log = logging.getLogger(__name__)

RECORD_POLICY = RetryPolicy(attempts=5, base=0.2, cap=2.0, deadline=10.0)
"""Patching a pod during Allocate: kubelet is waiting, so ride out hiccups for at most ~10 s."""
REFRESH_POLICY = RetryPolicy(attempts=3, base=0.2, cap=1.0, deadline=3.0)
PUBLISH_POLICY = RetryPolicy(attempts=2, base=0.2, cap=1.0, deadline=2.0)
"""One publish attempt; the background loop retries (serving must not wait on the API server)."""
PUBLISH_BACKOFF = RetryPolicy(attempts=1_000_000, base=1.0, cap=30.0, deadline=None)


class NodeCluster:
    """Pods and node of one node, cached, plus the writes the plugin makes."""

    def __init__(self, client: Client, node: str) -> None:
        self.client = client
        self.node = node
        self._lock = threading.Lock()
        self._pods: dict[str, PodRecord] = {}
        self._arrivals: dict[str, int] = {}
        self._arrived = 0
        self._node: Node | None = None
        self._desired: Inventory | None = None
        self._published = threading.Event()
        self._publish_wake = threading.Event()
        self._stop = threading.Event()
        self._publisher: threading.Thread | None = None
        self.pod_informer: Informer[Pod] = Informer(
            client,
            types.PODS,
            field_selector=f"spec.nodeName={node}",
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

    # --- pods ----------------------------------------------------------------------------------------

    def _pod_changed(self, pod: Pod) -> None:
        record = pod_record(pod)
        with self._lock:
            self._store(record)

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

    def arrivals(self) -> dict[str, int]:
        """Pod UID -> order of arrival on this node (pods listed at start are absent: first)."""
        with self._lock:
            return dict(self._arrivals)

    def pods(self) -> list[PodRecord]:
        """This node's pods from the cache."""
        with self._lock:
            return list(self._pods.values())

    def refresh(self) -> list[PodRecord]:
        """Read this node's pending pods straight from the API (when the cache may lag kubelet).

        Falls back to the cache if the API does not answer within a few seconds.
        """
        try:
            listed = call_with_retry(
                lambda: list(self.client.iter_pods(field_selector=f"spec.nodeName={self.node},status.phase=Pending")),
                REFRESH_POLICY,
                stop=self._stop,
            )
        except KubeError as exc:
            log.warning("cannot list this node's pending pods: %s", exc)
            return self.pods()
        with self._lock:
            for pod in listed:
                self._store(pod_record(pod))
            return list(self._pods.values())

    def record(self, pod: PodRecord, annotations: dict[str, str]) -> None:
        """Patch the assignment annotations onto a pod, with bounded retries.

        Raises:
            KubeError: the patch failed for good (Allocate must then fail).
        """
        body = {"metadata": {"annotations": annotations}}
        patched = call_with_retry(
            lambda: self.client.patch_pod(pod.namespace, pod.name, body),
            RECORD_POLICY,
            stop=self._stop,
            on_retry=lambda attempt, error, delay: log.warning(
                "patching pod %s/%s failed (%s); retry %d in %.1fs", pod.namespace, pod.name, error, attempt, delay
            ),
        )
        if patched.metadata.uid and patched.metadata.uid != pod.uid:
            raise KubeError(f"pod {pod.namespace}/{pod.name} was re-created (uid {patched.metadata.uid})")
        self._pod_changed(patched)

    # --- node ----------------------------------------------------------------------------------------

    def _node_changed(self, node: Node) -> None:
        with self._lock:
            self._node = node
            desired = self._desired
        if desired is not None and self._published.is_set():
            count = str(len(desired.gpus()))
            if node.status.capacity.get(protocol.RESOURCE_COUNT) != count:
                log.warning("node %s lost %s; publishing it again", self.node, protocol.RESOURCE_COUNT)
                self._published.clear()
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
        call_with_retry(lambda: self.client.patch_node_status(self.node, status), PUBLISH_POLICY, stop=self._stop)
        call_with_retry(lambda: self.client.patch_node(self.node, meta), PUBLISH_POLICY, stop=self._stop)
        with self._lock:
            current = self._desired
        if current is inventory:
            self._published.set()
        log.info("published %s GPU(s) on node %s", count, self.node)

    def _publish_loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            self._publish_wake.wait()
            self._publish_wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                desired = self._desired
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
