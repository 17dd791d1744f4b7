"""Workload controllers inside the sandbox: Deployments, ReplicaSets, StatefulSets and Jobs into pods.

What kube-controller-manager would do, reduced to what tutorials and ``kubectl rollout status`` /
``kubectl wait`` observe: pods with owner references and the template's labels (scale up and down),
a ReplicaSet per Deployment template (older ones scaled to zero), ordinal StatefulSet pods
(``Parallel`` or ``OrderedReady``), Job pods up to ``completions``, the status fields kubectl reads,
and the garbage collector's cascade when an owner is deleted. A pod is ready when its status says
Running with a Ready condition (a kubelet stand-in writes that; without one pods stay Pending).

Level-triggered: it follows the store's change history and reconciles each touched workload from
what is stored. With no workloads stored, a batch of changes costs one count per workload kind.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from typing import Any

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox import finalization, objects
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.follower import StoreFollower
from kubectl_gpushare.sandbox.resources import BY_KIND, BY_PLURAL
from kubectl_gpushare.sandbox.selectors import SelectorError, labels_match, parse_label_selector
from kubectl_gpushare.sandbox.store import Change, object_key

log = logging.getLogger(__name__)

OWNERS = ("deployments", "replicasets", "statefulsets", "jobs")
"""Kinds this controller reconciles (a DaemonSet is stored, not run)."""
_DEPENDENTS = ("pods", "replicasets")
BURST = 500
"""Most pods one reconcile creates; its own writes wake the loop for the rest, so a huge
``replicas`` never holds the store's lock for long (kube-controller-manager's burstReplicas)."""
Key = tuple[str, str, str]  # plural, namespace, name


def pod_ready(pod: dict[str, Any]) -> bool:
    """Running, with a Ready condition that is True (what a kubelet reports)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    conditions = status.get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _active(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return not protocol.pod_phase_terminal(phase) and not pod["metadata"].get("deletionTimestamp")


def _controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    refs = obj.get("metadata", {}).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def _owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(template: Any) -> str:
    """A stable, label-safe hash of a pod template (the ``pod-template-hash`` label)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join("bcdfghjklmnpqrstvwxz2456789"[int(digest[i : i + 2], 16) % 27] for i in range(0, 20, 2))


class Controller(StoreFollower):
    """Reconciles workloads in a background thread until `stop`.

    Args:
        store: the sandbox's store (writes go straight to it, as a controller's would go to etcd
            through the API server's registry rules in ``objects.py``).
    """

    thread_name = "sandbox-controller"

    def _wants(self, changes: list[Change]) -> bool:
        return self._any_owners() or any(change.plural in OWNERS for change in changes)

    def _any_owners(self) -> bool:
        return any(self.store.count(plural) for plural in OWNERS)

    def _resync(self) -> None:
        if not self._any_owners():
            return
        for plural in OWNERS:
            for entry in self.store.entries(plural):
                meta = entry.object()["metadata"]
                self._reconcile_safely((plural, meta.get("namespace", ""), meta["name"]))

    def _handle(self, changes: list[Change]) -> None:
        dirty: dict[Key, None] = {}
        deleted: list[tuple[str, str]] = []
        for change in changes:
            if change.plural in OWNERS:
                meta = change.entry.object()["metadata"]
                if change.type == "DELETED":
                    deleted.append((change.namespace, str(meta.get("uid", ""))))
                dirty[(change.plural, change.namespace, meta["name"])] = None
            if change.plural in _DEPENDENTS:
                ref = _controller_of(change.entry.object())
                plural = BY_KIND[ref["kind"]].plural if ref and ref.get("kind") in BY_KIND else ""
                if ref and plural in OWNERS and isinstance(ref.get("name"), str):
                    dirty[(plural, change.namespace, ref["name"])] = None
        for namespace, uid in deleted:
            self._collect(namespace, uid)
        for key in dirty:
            if self._stop.is_set():
                return
            self._reconcile_safely(key)

    def _reconcile_safely(self, key: Key) -> None:
        try:
            with self.store.lock:
                entry = self.store.get(key[0], object_key(key[1], key[2]))
                if entry is not None:
                    self._reconcile(key[0], entry.object())
        except (ApiError, SelectorError, ValueError, TypeError, KeyError, AttributeError) as exc:
            text = f"{key[0]}/{key[1]}/{key[2]}"
            if text not in self._warned:
                self._warned.add(text)
                log.warning("sandbox controller cannot reconcile %s: %s", text, exc)

    # --- garbage collection ------------------------------------------------------------------
    def _collect(self, namespace: str, uid: str) -> None:
        """Delete what the deleted owner controlled (background cascade), and their dependents.

        A worklist, not recursion: a chain of owners any client can write is as deep as it likes.
        """
        owners = [uid]
        with self.store.lock:
            while owners:
                owner = owners.pop()
                if not owner:
                    continue
                for plural in _DEPENDENTS:
                    for entry in self.store.select(plural, namespace)[0]:
                        obj = entry.object()
                        ref = _controller_of(obj)
                        if ref is None or ref.get("uid") != owner:
                            continue
                        # The collector DELETEs each dependent: one held by finalizers stays until they go,
                        # and its own dependents follow when it does (its DELETED change comes back here).
                        key = object_key(namespace, obj["metadata"]["name"])
                        if self.store.get(plural, key) is None:
                            continue  # already gone with an earlier dependent
                        _, gone = finalization.delete(self.store, plural, key)
                        if gone and plural == "replicasets":
                            owners.append(str(obj["metadata"].get("uid", "")))

    # --- reconcilers -------------------------------------------------------------------------
    def _owned(self, plural: str, owner: dict[str, Any]) -> list[dict[str, Any]]:
        meta = owner["metadata"]
        found = []
        # Narrow by the owner's matchLabels first (labels are kept decoded), then check the owner's uid.
        selector = parse_label_selector(objects.selector_string(owner))
        for entry in self.store.select(plural, meta.get("namespace", ""), selector)[0]:
            obj = entry.object()
            ref = _controller_of(obj)
            if ref is not None and ref.get("uid") == meta["uid"]:
                found.append(obj)
        return found

    def _reconcile(self, plural: str, owner: dict[str, Any]) -> None:
        if owner["metadata"].get("deletionTimestamp"):
            return
        if plural == "replicasets":
            self._replica_set(owner)
        elif plural == "deployments":
            self._deployment(owner)
        elif plural == "statefulsets":
            self._stateful_set(owner)
        elif plural == "jobs":
            self._job(owner)

    def _create_pod(self, owner: dict[str, Any], name: str, extra_labels: dict[str, str]) -> dict[str, Any]:
        meta = owner["metadata"]
        template = copy.deepcopy(owner["spec"]["template"])
        template_meta = template.get("metadata") or {}
        pod_meta: dict[str, Any] = {
            "labels": {**(template_meta.get("labels") or {}), **extra_labels},
            "ownerReferences": [_owner_ref(owner)],
        }
        if template_meta.get("annotations"):
            pod_meta["annotations"] = template_meta["annotations"]
        if name.endswith("-"):
            pod_meta["generateName"] = name
        else:
            pod_meta["name"] = name
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}
        pods = BY_PLURAL["pods"]
        pod = objects.prepare_create(pods, body, meta.get("namespace", "default"))
        key = object_key(pod["metadata"]["namespace"], pod["metadata"]["name"])
        if self.store.get("pods", key) is None:
            self.store.put("pods", key, pod)
        return pod

    def _delete(self, plural: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        finalization.delete(self.store, plural, object_key(meta.get("namespace", ""), meta["name"]))

    def _write_status(self, plural: str, owner: dict[str, Any], status: dict[str, Any]) -> None:
        old = owner.get("status") or {}
        status["observedGeneration"] = owner["metadata"].get("generation", 1)
        conditions = status.get("conditions")
        if conditions:
            kept = {c.get("type"): c for c in old.get("conditions") or [] if isinstance(c, dict)}
            for condition in conditions:
                previous = kept.get(condition["type"])
                same = previous and previous.get("status") == condition["status"]
                stamp = previous.get("lastTransitionTime") if same and previous else objects.now()
                condition["lastTransitionTime"] = stamp
                condition["lastUpdateTime"] = (
                    previous.get("lastUpdateTime", stamp)
                    if same and previous and previous.get("reason") == condition.get("reason")
                    else objects.now()
                )
        if status == old:
            return
        updated = copy.deepcopy(owner)
        updated["status"] = status
        meta = owner["metadata"]
        self.store.put(plural, object_key(meta.get("namespace", ""), meta["name"]), updated)

    def _replica_set(self, rs: dict[str, Any]) -> None:
        wanted = int(rs["spec"].get("replicas", 1))
        pods = self._owned("pods", rs)
        # Failed and Succeeded pods do not count: new ones replace them, and the old ones stay for the pod
        # garbage collector (pkg/controller/replicaset/replica_set.go, controller.FilterActivePods).
        active = [p for p in pods if _active(p)]
        extra = {k: v for k, v in (rs["metadata"].get("labels") or {}).items() if k == "pod-template-hash"}
        for _ in range(min(wanted - len(active), BURST)):
            active.append(self._create_pod(rs, rs["metadata"]["name"] + "-", extra))
        if len(active) > wanted:
            # Unscheduled and not-ready pods go first, then the newest, as the ReplicaSet controller ranks them.
            ranked = sorted(
                active,
                key=lambda p: (
                    bool((p.get("spec") or {}).get("nodeName")),
                    pod_ready(p),
                    str(p["metadata"].get("creationTimestamp", "")),
                ),
            )
            for pod in ranked[: len(active) - wanted]:
                self._delete("pods", pod)
                active.remove(pod)
        ready = sum(1 for p in active if pod_ready(p))
        selector = parse_label_selector(objects.selector_string(rs))
        labelled = sum(1 for p in active if labels_match(selector, p["metadata"].get("labels") or {}))
        status: dict[str, Any] = {"replicas": len(active), "fullyLabeledReplicas": labelled}
        if ready:
            status.update(readyReplicas=ready, availableReplicas=ready)
        self._write_status("replicasets", rs, status)

    def _deployment(self, deploy: dict[str, Any]) -> None:
        spec = deploy["spec"]
        wanted = int(spec.get("replicas", 1))
        name = deploy["metadata"]["name"]
        namespace = deploy["metadata"].get("namespace", "default")
        template = spec["template"]
        digest = template_hash(template)
        sets = self._owned("replicasets", deploy)
        current = next(
            (rs for rs in sets if (rs["metadata"].get("labels") or {}).get("pod-template-hash") == digest), None
        )
        if current is None:
            hashed = {"pod-template-hash": digest}
            rs_template = copy.deepcopy(template)
            rs_template.setdefault("metadata", {}).setdefault("labels", {}).update(hashed)
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {}).update(hashed)
            body = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{digest}",
                    "labels": {**(template.get("metadata", {}).get("labels") or {}), **hashed},
                    "annotations": {"deployment.kubernetes.io/revision": str(len(sets) + 1)},
                    "ownerReferences": [_owner_ref(deploy)],
                },
                "spec": {"replicas": wanted, "selector": selector, "template": rs_template},
            }
            current = objects.prepare_create(BY_PLURAL["replicasets"], body, namespace)
            self.store.put("replicasets", object_key(namespace, current["metadata"]["name"]), current)
            sets.append(current)
        for rs in sets:
            target = wanted if rs is current else 0
            if rs["spec"].get("replicas") != target:
                changed = copy.deepcopy(rs)
                changed["spec"]["replicas"] = target
                new = objects.prepare_update(BY_PLURAL["replicasets"], rs, changed, rs["metadata"]["name"], "")
                self.store.put("replicasets", object_key(namespace, rs["metadata"]["name"]), new)
                self._replica_set(new)
        sets = self._owned("replicasets", deploy)
        totals = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0}
        updated = 0
        for rs in sets:
            rs_status = rs.get("status") or {}
            for field in totals:
                totals[field] += int(rs_status.get(field, 0))
            if (rs["metadata"].get("labels") or {}).get("pod-template-hash") == digest:
                updated = int(rs_status.get("replicas", 0))
        available = totals["availableReplicas"]
        max_unavailable = wanted // 4
        complete = updated == wanted and totals["replicas"] == wanted and available >= wanted
        status: dict[str, Any] = {
            "replicas": totals["replicas"],
            "updatedReplicas": updated,
            "readyReplicas": totals["readyReplicas"],
            "availableReplicas": available,
            "unavailableReplicas": max(wanted - available, 0),
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available >= wanted - max_unavailable else "False",
                    "reason": "MinimumReplicasAvailable"
                    if available >= wanted - max_unavailable
                    else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if available >= wanted - max_unavailable
                    else "Deployment does not have minimum availability.",
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                    "message": f'ReplicaSet "{name}-{digest}" '
                    + ("has successfully progressed." if complete else "is progressing."),
                },
            ],
        }
        for field in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
            if not status[field]:
                del status[field]
        self._write_status("deployments", deploy, status)

    def _stateful_set(self, sts: dict[str, Any]) -> None:
        spec = sts["spec"]
        wanted = int(spec.get("replicas", 1))
        name = sts["metadata"]["name"]
        revision = f"{name}-{template_hash(spec['template'])}"
        parallel = spec.get("podManagementPolicy") == "Parallel"
        by_ordinal: dict[int, dict[str, Any]] = {}
        for pod in self._owned("pods", sts):
            suffix = pod["metadata"]["name"][len(name) + 1 :]
            if not suffix.isdigit():
                continue
            if protocol.pod_phase_terminal((pod.get("status") or {}).get("phase")):
                # The StatefulSet controller deletes a Failed (or Succeeded) pod and creates it again under
                # the same name in the same sync (pkg/controller/statefulset/stateful_set_control.go,
                # processReplica; https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/).
                self._delete("pods", pod)
                continue
            by_ordinal[int(suffix)] = pod
        created = 0
        for ordinal in range(wanted):
            if created >= BURST:
                break
            if ordinal in by_ordinal:
                if not parallel and not pod_ready(by_ordinal[ordinal]):
                    break
                continue
            labels = {
                "statefulset.kubernetes.io/pod-name": f"{name}-{ordinal}",
                "apps.kubernetes.io/pod-index": str(ordinal),
                "controller-revision-hash": revision,
            }
            by_ordinal[ordinal] = self._create_pod(sts, f"{name}-{ordinal}", labels)
            created += 1
            if not parallel:
                break
        for ordinal in sorted(by_ordinal, reverse=True):
            if ordinal >= wanted:
                self._delete("pods", by_ordinal.pop(ordinal))
        pods = [p for p in by_ordinal.values() if _active(p)]
        ready = sum(1 for p in pods if pod_ready(p))
        status: dict[str, Any] = {
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": len(pods),
            "updatedReplicas": len(pods),
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        for field in ("readyReplicas", "availableReplicas"):
            if not status[field]:
                del status[field]
        self._write_status("statefulsets", sts, status)

    def _job(self, job: dict[str, Any]) -> None:
        spec = job["spec"]
        completions = int(spec.get("completions", 1))
        parallelism = int(spec.get("parallelism", 1))
        old = job.get("status") or {}
        pods = self._owned("pods", job)
        succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        active = [p for p in pods if _active(p)]
        done = succeeded >= completions
        backoff = spec.get("backoffLimit", 6)
        given_up = not done and failed > (backoff if isinstance(backoff, int) else 6)
        if not done and not given_up:
            labels = {"batch.kubernetes.io/job-name": job["metadata"]["name"]}
            for _ in range(min(parallelism, completions - succeeded, BURST + len(active)) - len(active)):
                active.append(self._create_pod(job, job["metadata"]["name"] + "-", labels))
        status: dict[str, Any] = {"startTime": old.get("startTime") or objects.now()}
        if active and not done:
            status["active"] = len(active)
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        ready = sum(1 for p in active if pod_ready(p))
        status["ready"] = ready
        if done:
            status["completionTime"] = old.get("completionTime") or objects.now()
            status["conditions"] = [{"type": "Complete", "status": "True"}]
        elif given_up:  # as the Job controller does past backoffLimit: no more pods
            status["conditions"] = [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ]
        self._write_status("jobs", job, status)
