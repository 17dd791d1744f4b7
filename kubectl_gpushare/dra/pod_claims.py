"""Which pods on this node use which claims: what memory enforcement needs beyond NodePrepareResources.

Why it exists: kubelet calls ``NodePrepareResources`` once per claim and node. A pod that joins a
claim already prepared there (a shared claim several pods name; the scheduler adds the new pod to
``status.reservedFor``) only gains a pod reference in kubelet's claim cache and the driver is not
called again (kubernetes/kubernetes ``pkg/kubelet/cm/dra/manager.go`` at 001332b0, ``prepareResources``:
``claimInfo.addPodReference(pod.UID)``, then ``if claimInfo.isPrepared() { continue }``). The pods a
prepared claim records are those of its ``reservedFor`` when it was read, so without this module a
pod that joins later is never held to the claim's memory.

The source: a watch of this node's pods (`kube.informer.node_pods`, ``fieldSelector=spec.nodeName=<node>``,
the cache the gpushare device plugin keeps), each pod's claims resolved by the views' rule
(`kube.stacks.dra.claim_names`: ``spec.resourceClaims`` plus ``status.resourceClaimStatuses``, in the
pod's own namespace) and matched to the prepared claims by namespace and name. Weighed against:

- re-reading each prepared claim's ``reservedFor`` on a timer: one GET per claim per period from
  every node; at 5,000 nodes with 110 claims each and a 30 s period, about 18,000 requests a second
  that almost always find nothing new, and a joined pod still waits up to a period;
- watching ResourceClaims: the API has no field selector for a claim's node (only ``metadata.name``
  and ``metadata.namespace``: ``pkg/registry/resource/resourceclaim/strategy.go``,
  ``toSelectableFields``), so every driver would receive every claim change of the cluster;
- kubelet's pod-resources API (a node-local unix socket, no API server and no cluster-wide read):
  its ``v1`` service only lists (``List``, ``Get``; no watch), so a joined pod's limit would wait up
  to a poll period and race its containers' start, where the pod watch sees the pod when it is
  bound, before kubelet admits it; its claims are there only with
  ``KubeletPodResourcesDynamicResources`` (alpha and off from 1.27 to 1.33, so in the older kubelets
  this driver serves over ``v1beta1``; beta and on since 1.34, ``pkg/features/kube_features.go``);
  and it would need a stand-in of its own. It remains the alternative if a cluster-wide pod read is
  not acceptable.

The pod watch costs the API server one list and one watch per node, served from its watch cache,
which indexes pods by ``spec.nodeName`` (``pkg/registry/core/pod/strategy.go``,
``NodeNameTriggerFunc``): kubelet itself watches the same set. It needs ``pods list, watch``, granted
in ``manifests/dra/dra-driver.yaml`` for enforcement only; with ``--enforce-memory off`` this module
is never built and the driver makes no pod request at all.

Hostile input: a pod whose UID is not a lower-case UUID is never recorded (warned once), so no API
value reaches a cgroup path unchecked (`node.cgroups.valid_uid`; the enforcer checks again); a pod
on another node (the selector should exclude it; checked again) or in a terminal phase, and entries
that are not a list of claim references (`kube.types` reads them as none), name nothing. A claim is
only ever looked up in the pod's own namespace, so a pod cannot reach another namespace's claim; a
pod can only add a limit to its own cgroup, never change another pod's. A pod that names a claim it
is not reserved for is held too, harmlessly: kubelet never starts it (``manager.go``: "is not allowed
to use ResourceClaim"), and the claim is not read to tell (that read is what this module avoids).

Nothing here is checkpointed: after a restart the informer lists this node's pods again, and the
API server, not the driver, knows which pods use a claim now (a pod deleted while the driver was down
would otherwise be held from a stale record). The enforcer waits (bounded, `SYNC_SECONDS`) for that
first list before its first pass, whose sweep would otherwise clear the joined pods' limits.

A pod a claim recorded when prepared (``reservedFor``) that the watch then sees deleted or finished
holds nothing more while the claim stays prepared for the others (`PodClaims.ended`). Only an event
ends it, never a pod's absence from the cache, which may only lag kubelet's own watch: so a pod
deleted while the driver was down keeps its record's limit until the claim is unprepared.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass

from kubectl_gpushare import protocol
from kubectl_gpushare.dra.checkpoint import ClaimPod
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.informer import Informer, node_pods
from kubectl_gpushare.kube.stacks.dra import claim_names
from kubectl_gpushare.kube.types import Pod
from kubectl_gpushare.node import cgroups

log = logging.getLogger(__name__)

SYNC_SECONDS = 30.0
"""How long the enforcer's first pass waits for the first list of this node's pods."""
MAX_CLAIMS_PER_POD = 128
"""A pod naming more claims than this is read up to here (far above any real pod)."""
MAX_NAME = 253
"""A claim name is a DNS subdomain: longer ones cannot name any claim."""


@dataclass(frozen=True)
class ClaimUser:
    """A pod of this node and the claims (names in its namespace) it names."""

    uid: str
    namespace: str
    name: str
    claims: frozenset[str]


def claim_user(pod: Pod, node: str) -> ClaimUser | None:
    """What a pod uses, or None where it uses nothing we would act on (see the module docstring)."""
    meta = pod.metadata
    if pod.spec.node_name != node or protocol.pod_phase_terminal(pod.status.phase) or not cgroups.valid_uid(meta.uid):
        return None
    names = frozenset(
        name for _, name in claim_names(pod)[:MAX_CLAIMS_PER_POD] if name and len(name) <= MAX_NAME
    )
    return ClaimUser(meta.uid, meta.namespace, meta.name[:MAX_NAME], names) if names else None


class PodClaims:
    """This node's pods that name claims, kept by a pod watch; ``on_change`` runs when that set changes.

    Args:
        client: the API client.
        node: this node's name.
        on_change: called (on the watch thread; must not block) when a pod starts or stops using a
            claim (the enforcer's `wake`).
    """

    def __init__(self, client: Client, node: str, on_change: Callable[[], None]) -> None:
        self.node = node
        self.on_change = on_change
        self._lock = threading.Lock()
        self._users: dict[str, ClaimUser] = {}
        """Informer key (``namespace/name``) -> what that pod uses."""
        self._warned: set[str] = set()
        self._ended: set[str] = set()
        """UIDs of pods the watch saw deleted or finished, kept while a prepared claim records them."""
        self.informer: Informer[Pod] = node_pods(
            client, node, on_add=self._seen, on_update=lambda _old, new: self._seen(new), on_delete=self._gone,
            name=f"dra-driver-pods-{node}",
        )

    def start(self) -> PodClaims:
        """Start watching; returns self."""
        self.informer.start()
        return self

    def stop(self) -> None:
        """Stop watching."""
        self.informer.stop()

    def wait_synced(self, timeout: float) -> bool:
        """Wait for the first list of this node's pods; False after ``timeout`` seconds."""
        return self.informer.wait_synced(timeout)

    def users(self) -> dict[tuple[str, str], list[ClaimPod]]:
        """(namespace, claim name) -> the pods of this node that name it."""
        with self._lock:
            users = list(self._users.values())
        found: dict[tuple[str, str], list[ClaimPod]] = {}
        for user in users:
            for claim in user.claims:
                found.setdefault((user.namespace, claim), []).append(ClaimPod(user.uid, user.name))
        return found

    def ended(self, recorded: Collection[str]) -> frozenset[str]:
        """Which of ``recorded`` (pods prepared claims were reserved for) the watch saw deleted or finished.

        UIDs not in ``recorded`` are forgotten: a claim records its pods when prepared, before they end.
        """
        with self._lock:
            self._ended.intersection_update(recorded)
            return frozenset(self._ended)

    def _key(self, pod: Pod) -> str:
        return f"{pod.metadata.namespace}/{pod.metadata.name}"

    def _seen(self, pod: Pod) -> None:
        user = claim_user(pod, self.node)
        if user is None and pod.spec.resource_claims and not cgroups.valid_uid(pod.metadata.uid):
            where = self._key(pod)[:130]
            if where not in self._warned:
                self._warned.add(where)
                log.warning("pod %s: UID %r is not a UUID; its claims' memory is not enforced", where,
                            pod.metadata.uid[:64])
        self._put(self._key(pod), user, pod.metadata.uid if protocol.pod_phase_terminal(pod.status.phase) else None)

    def _gone(self, pod: Pod) -> None:
        self._put(self._key(pod), None, pod.metadata.uid)

    def _put(self, key: str, user: ClaimUser | None, ended: str | None = None) -> None:
        with self._lock:
            before = self._users.get(key)
            if user is None:
                self._users.pop(key, None)
            else:
                self._users[key] = user
            newly_ended = ended is not None and ended not in self._ended
            if ended is not None:
                self._ended.add(ended)
        if before != user or newly_ended:
            self.on_change()

