"""kube-controller-manager's resourceclaim controller, inside the sandbox.

What ``pkg/controller/resourceclaim/controller.go`` does, as clients see it:

- A pod's ``spec.resourceClaims[]`` entry with ``resourceClaimTemplateName`` gets a claim made from
  the template (``handleClaim``): ``generateName`` ``<pod>-<claim>-`` (both parts cut in proportion
  when longer than 57 characters), the pod as controlling owner (``blockOwnerDeletion``), the
  template's labels and annotations plus ``resource.kubernetes.io/pod-claim-name: <claim>``, the
  template's claim spec. The name is recorded in the pod's ``status.resourceClaimStatuses``. An
  existing claim owned by the pod with that annotation is reused (``findPodResourceClaim``). Pods
  that are done or being deleted get no new claims, nor does an entry whose status entry has no
  ``resourceClaimName`` (absent or null: ``resourceclaim.Name`` gives no name, no claim needed).
- ``syncClaim``: a ``reservedFor`` pod that is gone, replaced (another UID) or done is removed;
  a claim nobody reserves any more is deallocated (``status.allocation`` cleared, the scheduler's
  ``resource.kubernetes.io/delete-protection`` finalizer removed); a claim being deleted that nobody
  reserves loses that finalizer (and any allocation) too; a generated claim whose pod is done or
  replaced is deleted, and so (the garbage collector's part) is one whose pod is gone.

Writes go straight to the store through the registry rules in ``objects.py`` and ``finalization.py``
(a deletion waits on finalizers; removing the last one completes it), as the workload controllers'
do. Differs: a template that does not exist is retried on the next change rather than with backoff,
and there is no event for it (a warning in the log, once).
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Final

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox import finalization, objects
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.follower import StoreFollower
from kubectl_gpushare.sandbox.resources import BY_PLURAL
from kubectl_gpushare.sandbox.store import Change, object_key

log = logging.getLogger(__name__)

PODS: Final = "pods"
CLAIMS: Final = "resourceclaims"
TEMPLATES: Final = "resourceclaimtemplates"
MAX_BASE_LENGTH: Final = 57
"""``maxBaseLen``: room for the hyphen and the 5 random characters in a 63-character name."""


def generate_name(pod: str, claim: str) -> str:
    """The claim's ``generateName`` (``handleClaim``), both names cut in proportion when too long."""
    name = f"{pod}-{claim}-"
    if len(name) > MAX_BASE_LENGTH:
        name = (pod[: len(pod) * MAX_BASE_LENGTH // len(name)] + "-"
                + claim[: len(claim) * MAX_BASE_LENGTH // len(name)])
    return name


def _done(pod: dict[str, Any]) -> bool:
    """``isPodDone`` (controller.go): a terminal phase, or deleted before it was scheduled.

    The second case is a pod its finalizers hold: it will never run, so its claims are released.
    """
    if protocol.pod_phase_terminal((pod.get("status") or {}).get("phase")):
        return True
    spec = pod.get("spec")
    return bool(pod["metadata"].get("deletionTimestamp")) and not (isinstance(spec, dict) and spec.get("nodeName"))


def _owner_uid(claim: dict[str, Any]) -> str:
    for ref in claim["metadata"].get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == "Pod":
            return str(ref.get("uid") or "")
    return ""


def _deallocate(claim: dict[str, Any]) -> None:
    """Drop a claim's allocation and the finalizer that held it, as both of syncClaim's releases do (controller.go)."""
    status = claim.get("status")
    if isinstance(status, dict):
        status.pop("allocation", None)
        status.pop("devices", None)
    meta = claim["metadata"]
    meta["finalizers"] = [f for f in meta["finalizers"] if f != dra.FINALIZER]
    if not meta["finalizers"]:
        del meta["finalizers"]


def _template_claims(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """(pod claim name, template name) for each template-backed entry of ``spec.resourceClaims``."""
    found: list[tuple[str, str]] = []
    entries = (pod.get("spec") or {}).get("resourceClaims")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) \
                and isinstance(entry.get("resourceClaimTemplateName"), str):
            found.append((entry["name"], entry["resourceClaimTemplateName"]))
    return found


class ResourceClaimController(StoreFollower):
    """Follows the store's changes on a thread until `stop`; idle while no claim or template is stored."""

    thread_name = "sandbox-resourceclaims"

    def _active(self) -> bool:
        return bool(self.store.count(CLAIMS) or self.store.count(TEMPLATES))

    def _wants(self, changes: list[Change]) -> bool:
        return self._active()

    def _resync(self) -> None:
        if not self._active():
            return
        with self.store.lock:
            pods = [entry.object() for entry in self.store.entries(PODS)]
            for pod in pods:
                self._safely(self._sync_pod, pod)
            for entry in self.store.entries(CLAIMS):
                self._safely(self._sync_claim, entry.object())

    def _handle(self, changes: list[Change]) -> None:
        pods: dict[str, None] = {}
        claims: dict[str, None] = {}
        claim_namespaces: dict[str, None] = {}
        """Namespaces whose claims may reserve, or be owned by, a pod that changed or went."""
        template_namespaces: dict[str, None] = {}
        """Namespaces whose pods may wait for a template that appeared."""
        for change in changes:
            if change.plural == PODS:
                meta = change.entry.object()["metadata"]
                if change.type != "DELETED":
                    pods[object_key(change.namespace, meta["name"])] = None
                claim_namespaces[change.namespace] = None
            elif change.plural == CLAIMS and change.type != "DELETED":
                claims[object_key(change.namespace, change.entry.object()["metadata"]["name"])] = None
            elif change.plural == TEMPLATES:
                template_namespaces[change.namespace] = None
        with self.store.lock:
            for namespace in template_namespaces:
                for entry in self.store.select(PODS, namespace)[0]:
                    pod = entry.object()
                    if _template_claims(pod):
                        pods[object_key(namespace, pod["metadata"]["name"])] = None
            for namespace in claim_namespaces:
                for entry in self.store.select(CLAIMS, namespace)[0]:
                    claims[object_key(namespace, entry.object()["metadata"]["name"])] = None
            for key in pods:
                found = self.store.get(PODS, key)
                if found is not None:
                    self._safely(self._sync_pod, found.object())
            for key in claims:
                found = self.store.get(CLAIMS, key)
                if found is not None:
                    self._safely(self._sync_claim, found.object())

    def _safely(self, sync: Any, obj: dict[str, Any]) -> None:
        if self._stop.is_set():
            return
        try:
            sync(obj)
        except (ApiError, ValueError, TypeError, KeyError, AttributeError) as exc:
            meta = obj.get("metadata") or {}
            text = f"{obj.get('kind', '')} {meta.get('namespace', '')}/{meta.get('name', '')}: {exc}"
            self._warn_once(text, f"resourceclaim controller: {text}", log)

    # --- pods -> claims (syncPod, handleClaim) -----------------------------------------------------
    def _sync_pod(self, pod: dict[str, Any]) -> None:
        wanted = _template_claims(pod)
        meta = pod["metadata"]
        if not wanted or meta.get("deletionTimestamp") or _done(pod):
            return
        namespace = meta.get("namespace", "default")
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses")
        recorded: dict[Any, Any] = {}
        for status in statuses or []:
            if isinstance(status, dict):
                recorded.setdefault(status.get("name"), status.get("resourceClaimName"))  # Name: the first match
        created: dict[str, str] = {}
        for claim_name, template_name in wanted:
            if claim_name in recorded and recorded[claim_name] is None:
                continue  # handleClaim: resourceclaim.Name gives no name, "no claim needed"
            name = recorded.get(claim_name)
            if isinstance(name, str) and name:
                existing = self.store.get(CLAIMS, object_key(namespace, name))
                if existing is not None and _owner_uid(existing.object()) == meta.get("uid"):
                    continue
            found = self._find_claim(namespace, str(meta.get("uid", "")), claim_name)
            if found is None:
                found = self._create_claim(pod, claim_name, template_name)
            if found is not None and found != name:
                created[claim_name] = found
        if created:
            self._record_statuses(pod, created)

    def _find_claim(self, namespace: str, pod_uid: str, claim_name: str) -> str | None:
        for entry in self.store.select(CLAIMS, namespace)[0]:
            claim = entry.object()
            annotations = claim["metadata"].get("annotations") or {}
            if _owner_uid(claim) == pod_uid and annotations.get(dra.ANN_POD_CLAIM_NAME) == claim_name:
                return str(claim["metadata"]["name"])
        return None

    def _create_claim(self, pod: dict[str, Any], claim_name: str, template_name: str) -> str | None:
        meta = pod["metadata"]
        namespace = meta.get("namespace", "default")
        template = self.store.get(TEMPLATES, object_key(namespace, template_name))
        if template is None:
            raise ValueError(f'resource claim template "{template_name}": not found')
        spec = template.object().get("spec") or {}
        template_meta = spec.get("metadata") or {}
        annotations = dict(template_meta.get("annotations") or {})
        annotations[dra.ANN_POD_CLAIM_NAME] = claim_name
        claim_meta: dict[str, Any] = {
            "generateName": generate_name(str(meta["name"]), claim_name),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
            "annotations": annotations,
        }
        if template_meta.get("labels"):
            claim_meta["labels"] = dict(template_meta["labels"])
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": claim_meta,
                "spec": copy.deepcopy(spec.get("spec") or {})}
        claim = objects.prepare_create(BY_PLURAL[CLAIMS], body, namespace)
        key = object_key(namespace, claim["metadata"]["name"])
        if self.store.get(CLAIMS, key) is not None:
            return None  # a generated name taken: the next change tries another
        self.store.put(CLAIMS, key, claim)
        return str(claim["metadata"]["name"])

    def _record_statuses(self, pod: dict[str, Any], created: dict[str, str]) -> None:
        key = object_key(pod["metadata"].get("namespace", "default"), pod["metadata"]["name"])
        entry = self.store.get(PODS, key)
        if entry is None:
            return
        current = entry.object()
        status = current.setdefault("status", {})
        statuses = [s for s in status.get("resourceClaimStatuses") or []
                    if isinstance(s, dict) and s.get("name") not in created]
        statuses.extend({"name": name, "resourceClaimName": claim} for name, claim in created.items())
        status["resourceClaimStatuses"] = sorted(statuses, key=lambda s: str(s.get("name")))
        self.store.put(PODS, key, current)

    # --- claims (syncClaim) --------------------------------------------------------------------------
    def _sync_claim(self, claim: dict[str, Any]) -> None:
        meta = claim["metadata"]
        namespace = meta.get("namespace", "")
        status = claim.get("status") or {}
        listed = status.get("reservedFor")
        reserved: list[Any] = listed if isinstance(listed, list) else []
        valid = [entry for entry in reserved if self._still_reserved(namespace, entry)]
        key = object_key(namespace, meta["name"])
        if len(valid) < len(reserved):
            updated = copy.deepcopy(claim)
            new_status = updated.setdefault("status", {})
            new_status["reservedFor"] = valid
            if not valid:
                new_status.pop("reservedFor")
                if dra.FINALIZER in (meta.get("finalizers") or []):
                    _deallocate(updated)  # allocated by the scheduler
            if not new_status:
                updated.pop("status")
            if finalization.write(self.store, CLAIMS, key, claim, updated):
                return  # its deletion was waiting on the finalizer just removed
            claim = updated
        elif not valid and meta.get("deletionTimestamp") and dra.FINALIZER in (meta.get("finalizers") or []):
            # syncClaim's other branch (controller.go): deleted and reserved by none, it is deallocated and
            # loses the finalizer "to unblock removal", allocated or not.
            updated = copy.deepcopy(claim)
            _deallocate(updated)
            if updated.get("status") == {}:
                updated.pop("status")
            if finalization.write(self.store, CLAIMS, key, claim, updated):
                return
            claim = updated
        if valid:
            return
        owner = _owner_uid(claim)
        if not owner:
            return
        pod = self._pod_by_uid(namespace, owner, claim)
        if pod is None or _done(pod):
            # not needed by its pod any more (or, for a gone pod, the GC's part): a DELETE, which the
            # claim's finalizers may hold
            finalization.delete(self.store, CLAIMS, key)

    def _pod_by_uid(self, namespace: str, uid: str, claim: dict[str, Any]) -> dict[str, Any] | None:
        for ref in claim["metadata"].get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("uid") == uid and isinstance(ref.get("name"), str):
                entry = self.store.get(PODS, object_key(namespace, ref["name"]))
                pod = entry.object() if entry is not None else None
                return pod if pod is not None and pod["metadata"].get("uid") == uid else None
        return None

    def _still_reserved(self, namespace: str, entry: Any) -> bool:
        if not isinstance(entry, dict):
            return False
        if entry.get("apiGroup") or entry.get("resource") != PODS:
            return True  # only pods are checked (upstream errors out on other consumers)
        found = self.store.get(PODS, object_key(namespace, str(entry.get("name") or "")))
        if found is None:
            return False
        pod = found.object()
        return pod["metadata"].get("uid") == entry.get("uid") and not _done(pod)
