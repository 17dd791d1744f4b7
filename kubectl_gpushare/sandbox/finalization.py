"""Finalizers hold a deletion, as kube-apiserver's generic registry does, for every stored kind.

From ``k8s.io/apiserver/pkg/registry/generic/registry/store.go``:

- ``Delete`` / ``updateForGracefulDeletionAndFinalizers``: an object with ``metadata.finalizers``
  is not removed; ``markAsDeleting`` stores it with ``deletionTimestamp`` (now, kept if already
  set), ``deletionGracePeriodSeconds: 0`` and, on the first mark, ``generation`` + 1. A second
  DELETE writes nothing new. The reply is the object itself.
- ``Update`` / ``ShouldDeleteDuringUpdate``: a write that leaves no finalizer on an object whose
  ``deletionTimestamp`` is set and whose grace period is 0 or unset deletes it
  (``deleteWithoutFinalizers``), and watchers see DELETED.

Namespaces (``pkg/registry/core/namespace/storage/storage.go``): a DELETE sets
``deletionTimestamp`` and phase ``Terminating`` and, the first time, sets the garbage collector's
finalizers as its options ask (`namespace_gc_finalizers`: ``orphan`` for ``propagationPolicy:
Orphan``); the namespace controller (``pkg/controller/namespace/deletion``) deletes the content,
then clears ``spec.finalizers`` once none is left; ``ShouldDeleteNamespaceDuringUpdate`` removes
the namespace only when ``spec.finalizers`` is empty too. The sandbox does the controller's part at
once: content held by a finalizer keeps its namespace Terminating until the last of it goes, and
the collector's finalizers go with ``spec.finalizers`` (where the real garbage collector removes
them once it has handled the namespace's dependents, which need not wait for the content).

Pods have no graceful deletion here (the kubelet's confirming delete is taken as done), so a pod
with finalizers is held in the state upstream reaches after that delete: grace period 0.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from kubectl_gpushare.sandbox import errors, objects
from kubectl_gpushare.sandbox.resources import STORED
from kubectl_gpushare.sandbox.store import Store, object_key


def mark_deleting(obj: dict[str, Any]) -> None:
    """``markAsDeleting`` (store.go): the deletion timestamp and a zero grace period."""
    meta = obj["metadata"]
    if not meta.get("deletionTimestamp"):
        generation = meta.get("generation")
        if isinstance(generation, int) and not isinstance(generation, bool) and generation > 0:
            meta["generation"] = generation + 1
        meta["deletionTimestamp"] = objects.now()
    meta["deletionGracePeriodSeconds"] = 0


def deletes_on_update(plural: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether writing ``new`` over ``old`` completes a deletion (``ShouldDeleteDuringUpdate``)."""
    if new["metadata"].get("finalizers"):
        return False
    old_meta = old["metadata"]
    if not old_meta.get("deletionTimestamp"):
        return False
    if old_meta.get("deletionGracePeriodSeconds") not in (None, 0):
        return False
    spec = new.get("spec")
    # ShouldDeleteNamespaceDuringUpdate: the namespace controller's spec.finalizers must be gone too.
    return not (plural == "namespaces" and isinstance(spec, dict) and spec.get("finalizers"))


def write(store: Store, plural: str, key: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Store an update made by the sandbox's own controllers; whether it completed a deletion instead."""
    with store.lock:
        if deletes_on_update(plural, old, new):
            remove(store, plural, key)
            return True
        store.put(plural, key, new)
        return False


def remove(store: Store, plural: str, key: str, *, settle: bool = True) -> dict[str, Any] | None:
    """Remove an object now and return its last state; a Terminating namespace it held goes on."""
    with store.lock:
        removed = store.remove(plural, key)
        if removed is None:
            return None
        obj = removed.object()
        namespace = obj["metadata"].get("namespace") or ""
        if settle and namespace and plural != "namespaces":
            entry = store.get("namespaces", namespace)
            if entry is not None and entry.object()["metadata"].get("deletionTimestamp"):
                _settle_namespace(store, entry.object())
        return obj


def delete(
    store: Store, plural: str, key: str, *, dry_run: bool = False, options: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], bool]:
    """DELETE one stored object by the finalizer rule (``options``: the DeleteOptions a namespace reads).

    Returns:
        (the object as the reply shows it, whether it was removed). Writes nothing when a held
        object is already marked, so a controller that deletes on every pass does not loop.

    Raises:
        KeyError: nothing is stored at ``key``.
    """
    with store.lock:
        entry = store.get(plural, key)
        if entry is None:
            raise KeyError(key)
        if plural == "namespaces":
            return _delete_namespace(store, entry.object(), dry_run, options or {})
        return _delete_object(store, plural, key, entry.object(), dry_run)


_CONTENT: Final = tuple(resource.plural for resource in STORED if resource.namespaced)
"""The kinds a namespace holds, in the order its content is deleted (the namespace controller's
``deleteAllContent`` walks every namespaced kind it can list)."""

GC_FINALIZERS = frozenset({"orphan", "foregroundDeletion"})
"""The garbage collector's own finalizers (metav1 ``FinalizerOrphanDependents``, ``FinalizerDeleteDependents``)."""


def _delete_object(
    store: Store, plural: str, key: str, obj: dict[str, Any], dry_run: bool, *, settle: bool = True
) -> tuple[dict[str, Any], bool]:
    finalizers = obj["metadata"].get("finalizers") or []
    # The garbage collector's part, at once (pkg/controller/garbagecollector/garbagecollector.go:
    # attemptToOrphanWorker and processDeletingDependentsItem remove "orphan" / "foregroundDeletion" once
    # they have handled the dependents); the sandbox's collector deletes dependents when the owner goes.
    held = [f for f in finalizers if f not in GC_FINALIZERS]
    if not held:
        if dry_run:
            return obj, True
        return remove(store, plural, key, settle=settle) or obj, True
    marked = copy.deepcopy(obj)
    if len(held) < len(finalizers):
        marked["metadata"]["finalizers"] = held
    mark_deleting(marked)
    if marked != obj and not dry_run:
        store.put(plural, key, marked)
    return marked, False


def namespace_gc_finalizers(finalizers: list[str], options: Mapping[str, Any]) -> list[str]:
    """A namespace's ``metadata.finalizers`` after its first DELETE, as storage.go ``Delete`` sets them.

    pkg/registry/core/namespace/storage/storage.go: ``orphan`` is kept or added when
    ``shouldHaveOrphanFinalizer`` (``orphanDependents``, else ``propagationPolicy`` is ``Orphan``,
    else it was there) and removed otherwise; ``foregroundDeletion`` likewise by
    ``shouldHaveDeleteDependentsFinalizer`` (``orphanDependents: false``, else ``Foreground``).
    Unchanged finalizers are left as they are; a changed list is rebuilt from Go's map, so without
    duplicates, in an order Go leaves random: here the old order, a new finalizer last.
    """
    orphan = options.get("orphanDependents")
    orphan = orphan if isinstance(orphan, bool) else None  # anything else never gets past Go's decoder
    policy = options.get("propagationPolicy")
    wanted = {
        "orphan": orphan if orphan is not None else (policy == "Orphan" if policy is not None else None),
        "foregroundDeletion": (not orphan) if orphan is not None else (
            policy == "Foreground" if policy is not None else None),
    }
    if all(want is None or want == (name in finalizers) for name, want in wanted.items()):
        return finalizers
    kept = [f for f in dict.fromkeys(finalizers) if wanted.get(f) is not False]
    return kept + [name for name, want in wanted.items() if want and name not in kept]


def _delete_namespace(
    store: Store, namespace: dict[str, Any], dry_run: bool, options: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """storage.go ``Delete``'s first update, stored before the controllers act; a later DELETE changes nothing.

    The reply is that update (``GuaranteedUpdate``'s ``out``, its new resourceVersion included), and
    watchers see the namespace Terminating before its content goes, as the namespace controller acts
    on that update. A dry run writes nothing and replies with the update it would have made.
    """
    meta = namespace["metadata"]
    name = meta["name"]
    if not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = objects.now()
        namespace.setdefault("status", {})["phase"] = "Terminating"
        finalizers = namespace_gc_finalizers(meta.get("finalizers") or [], options)
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        if not dry_run:
            store.put("namespaces", name, namespace)
    if dry_run:
        return namespace, False
    written = copy.deepcopy(namespace)
    for plural in _CONTENT:  # the namespace controller's deleteAllContent, at once
        for entry in store.select(plural, name)[0]:
            content = entry.object()
            key = object_key(name, str(content["metadata"].get("name", "")))
            _delete_object(store, plural, key, content, False, settle=False)
    return written, _settle_namespace(store, namespace)[1]


def refuse_new_content(store: Store, plural: str, namespace: str, name: str, group: str) -> None:
    """No create into a Terminating namespace, or it would hold the namespace for ever.

    NamespaceLifecycle admission (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go)
    refuses it in these words; the sandbox runs no other part of that plugin (namespaces need not exist).

    Raises:
        ApiError: 403 when ``namespace`` exists and is being deleted.
    """
    entry = store.get("namespaces", namespace) if namespace else None
    if entry is None or not entry.object()["metadata"].get("deletionTimestamp"):
        return
    why = f"unable to create new content in namespace {namespace} because it is being terminated"
    cause = {"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
             "field": "metadata.namespace"}
    raise errors.forbidden(plural, name, why, group, [cause])


IMMORTAL_NAMESPACES: Final = frozenset({"default", "kube-system", "kube-public"})
"""The namespaces NamespaceLifecycle's ``Register`` names immortal (``metav1.NamespaceDefault``,
``NamespaceSystem``, ``NamespacePublic``)."""


def refuse_immortal_delete(name: str) -> None:
    """No DELETE of ``default``, ``kube-system`` or ``kube-public``, a dry run's included.

    NamespaceLifecycle admission (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go)
    refuses it first thing in ``Admit``, whatever the options (admission runs on a dry run too), with
    ``errors.NewForbidden`` on the resource ``namespaces``. The namespace's storage calls admission
    after it has found the namespace and checked the preconditions, so a 404 or 409 comes first.

    Raises:
        ApiError: 403 for an immortal namespace.
    """
    if name in IMMORTAL_NAMESPACES:
        raise errors.forbidden("namespaces", name, "this namespace may not be deleted")


def _holds_content(store: Store, namespace: str) -> bool:
    return any(store.select(plural, namespace, limit=1)[0] for plural in _CONTENT)


def _settle_namespace(store: Store, namespace: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The namespace controller's finish: clear ``spec.finalizers`` once empty, then remove it.

    The garbage collector's finalizers go then too (garbagecollector.go ``attemptToOrphanWorker`` and
    ``processDeletingDependentsItem`` remove ``orphan`` / ``foregroundDeletion`` once the dependents
    are handled), so they never hold a namespace for ever.
    """
    name = namespace["metadata"]["name"]
    stored = store.get("namespaces", name)
    before = stored.object() if stored is not None else None
    if not _holds_content(store, name):
        spec = namespace.get("spec")
        if isinstance(spec, dict):
            spec.pop("finalizers", None)
        meta = namespace["metadata"]
        held = [f for f in meta.get("finalizers") or [] if f not in GC_FINALIZERS]
        if len(held) < len(meta.get("finalizers") or []):
            if held:
                meta["finalizers"] = held
            else:
                meta.pop("finalizers", None)
        if not meta.get("finalizers"):
            removed = store.remove("namespaces", name)
            return (removed.object() if removed is not None else namespace), True
    if namespace != before:
        store.put("namespaces", name, namespace)
    return namespace, False
