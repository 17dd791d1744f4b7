"""kube-scheduler's DynamicResources plugin, for the stack's scheduler stand-in (`cli.scheduler`).

The plugin's extension points, after ``pkg/scheduler/framework/plugins/dynamicresources``:

- PreEnqueue (``foreachPodResourceClaim``, the views' rule: `kube.stacks.dra.resolve_claims` and
  ``first_unusable``): a pod whose claims do not all exist yet (a template claim not yet in
  ``status.resourceClaimStatuses``, a named claim not created, a generated claim not owned by the
  pod) or one of whose claims is being deleted is not tried at all, and gets no event or condition:
  the resourceclaim controller's write (or a new claim) wakes it. An entry whose status names no
  claim (none needed) is skipped.
- PreFilter: ``foreachPodResourceClaim`` again (upstream: a claim deleted or replaced after the pod
  was queued): the first of those claims in the pod's order, in its words; then an allocated
  claim that cannot take one more consumer, a claim whose allocation is in flight for another
  pod, a request naming a class that does not exist: the pod is unschedulable with that message
  (``0/N nodes are available: <message>.``).
- Filter: an allocated claim, of any driver, must be usable on the node (its node selector); the others are
  allocated on the node by `kube.dra_allocation` (the structured allocator), or the node is
  rejected with ``cannot allocate all claims`` (``invalid resource pools were encountered`` when
  a pool of the node is invalid). A claim the allocator cannot evaluate (a CEL error,
  a request it does not support) is the filter's error: the pod gets ``SchedulerError``.
- Reserve: the chosen node's allocations are in flight: counted by every later decision of this
  scheduler until the API shows them (`in_flight`), so two pods scheduled back to back never
  over-commit a device, and a write whose outcome is unknown is kept counted until the API shows
  what happened (below).
- PreBind (``bindClaim``), before the Binding: the scheduler's finalizer is added to a claim it
  allocates, then ``status.allocation`` and the pod in ``status.reservedFor`` are written through the
  status subresource, retried on a conflict; a claim allocated elsewhere meanwhile fails the pod's
  cycle. Unreserve (a later claim's PreBind or the Binding failed, whatever the error): the pod
  leaves ``reservedFor`` of every claim the API shows it in (those written earlier in the cycle
  too), once the API shows the pod unbound; a write whose outcome is unknown is left alone until
  the API shows it.

An unknown outcome (a 5xx, 429, a timeout, a dropped connection; not a write never sent, which
cannot land: `errors.did_not_happen`) becomes a known one by a rule,
never by a guess, so an allocation is released only when it can no longer land:

- The status write is conditional: it carries the ``metadata.resourceVersion`` it was built on, as
  kube-scheduler's ``bindClaim`` sends ``UpdateStatus`` the claim object it read (with its
  resourceVersion), so the API server refuses it with a 409 once the claim changed.
- A later read showing the claim at another resourceVersion settles it: it landed iff the claim
  shows an allocation (then that counts, from the API); else it never can.
- While the claim is still at the precondition, the write may still be executing in the API server,
  which gives up on a request ``--request-timeout`` after receiving it (`kube.errors.API_REQUEST_TIMEOUT`,
  1m by default): once that long has passed since this scheduler gave up on the write, it did not
  land. The allocation leaves `in_flight` and the pod is tried again at once.
- An allocation whose status write was never sent (its re-read or finalizer update failed, or an
  earlier claim of the pod failed first) or was refused can never land: released at once.
- A Binding of unknown outcome (kube-scheduler's does not carry a resourceVersion, so only the time
  rule applies): Unreserve leaves the pod's reservations until ``--request-timeout`` has passed
  since, as a Binding landing after the pod left ``reservedFor`` would bind a pod kubelet refuses
  to start; the pod's retry reuses them.

kube-scheduler itself drops its in-flight allocation when the write fails, whatever the error
(``RemoveClaimPendingAllocation`` in ``bindClaim``'s defer); this stand-in deliberately keeps it
until the outcome is known, as the house rule wants.

Reads come from the sandbox's store, once per scheduling pass; writes go through the API.
Not done: PostFilter's deallocation of claims to make room, binding conditions, extended
resources backed by DRA, scoring (the first node that fits, in node order, wins).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import msgspec

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.kube import dra_allocation as alloc
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import PATCH_CONTENT_TYPES, Client
from kubectl_gpushare.kube.errors import (
    API_REQUEST_TIMEOUT,
    Conflict,
    KubeError,
    NotFound,
    UndecodableReply,
    did_not_happen,
    write_failure,
)
from kubectl_gpushare.kube.stacks import dra as dra_views

log = logging.getLogger("kubectl_gpushare.scheduler")

SCHEDULER_ERROR = "SchedulerError"
"""``v1.PodReasonSchedulerError``: the PodScheduled reason when a plugin fails rather than rejects."""
CONFLICT_RETRIES = 5


class StoreReader(Protocol):
    """The sandbox reads the plugin needs."""

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """Every stored object of a resource."""


@dataclass(frozen=True)
class LostWrite:
    """A claim status write of unknown outcome: what settles it."""

    resource_version: str
    """The precondition it carried: once the claim shows another, the write has landed or never will."""
    settles_at: float
    """`time.monotonic` instant past which it can no longer land (the API server's request timeout)."""


class Unschedulable(Exception):  # noqa: N818 - the framework's status name
    """No node can take the pod now; the message is kube-scheduler's."""


class SchedulingError(Exception):
    """A plugin failed (not a rejection); the pod's condition reason is ``SchedulerError``."""


@dataclass
class PodClaims:
    """One pod's claims for one scheduling cycle, and what Filter found for each node."""

    pod_uid: str
    claims: list[dra.ResourceClaim]
    to_allocate: list[dra.ResourceClaim]
    allocations: dict[str, tuple[dra.Allocation, ...]] = field(default_factory=dict)


@dataclass
class PassState:
    """What one scheduling pass reads: claims by key, and the allocator's inventory."""

    claims: dict[tuple[str, str], dra.ResourceClaim | str]
    """(namespace, name) -> the claim, or why it cannot be read."""
    inventory: alloc.Inventory
    allocations: list[dra.Allocation]


def _claims_pod(pod: Mapping[str, Any]) -> types.Pod:
    """The pod fields `dra_views.resolve_claims` reads (any JSON in its claim lists: `types.PodSpec`)."""
    meta, spec, status = (part if isinstance(part := pod.get(name), dict) else {}
                          for name in ("metadata", "spec", "status"))
    return msgspec.convert({"metadata": {key: str(meta.get(key) or "") for key in ("namespace", "name", "uid")},
                            "spec": {"resourceClaims": spec.get("resourceClaims")},
                            "status": {"resourceClaimStatuses": status.get("resourceClaimStatuses")}}, types.Pod)


def _resolved(pod: types.Pod, state: PassState) -> list[dra_views.PodClaim]:
    """The pod's claims as kube-scheduler resolves them from this pass's read (`dra_views.resolve_claims`).

    A stored claim that does not decode counts as there (its problem is PreFilter's `SchedulingError`):
    here as a bare claim of that name, whose owner is not known.
    """
    namespace = pod.metadata.namespace

    def get(name: str) -> dra.ResourceClaim | None:
        found = state.claims.get((namespace, name))
        return dra.ResourceClaim(namespace, name, owner_known=False) if isinstance(found, str) else found

    return dra_views.resolve_claims(pod, get)


def _node_labels(nodes: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Node name -> labels, which slices' and allocations' node selectors match (string pairs only)."""
    found: dict[str, dict[str, str]] = {}
    for node in nodes:
        meta = node.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if isinstance(name, str):
            found[name] = ({k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
                           if isinstance(labels, dict) else {})
    return found


def has_claims(pod: Mapping[str, Any]) -> bool:
    """Whether the pod asks for any ResourceClaim (the plugin has nothing to do otherwise).

    Anything but an empty list or ``null`` in ``spec.resourceClaims`` asks: an empty object, string, 0
    or false does not read as entries (`types.PodSpec.resource_claims_unreadable`), and `pre_enqueue`
    keeps such a pod waiting, as it keeps any other it cannot read.
    """
    spec = pod.get("spec") or {}
    return isinstance(spec, dict) and spec.get("resourceClaims") not in (None, [])


class DynamicResources:
    """The plugin's state across passes: the allocations it made that the API does not show yet."""

    def __init__(self, api: Client, request_timeout: float = API_REQUEST_TIMEOUT) -> None:
        """Nothing in flight.

        Args:
            api: where the writes go.
            request_timeout: the API server's ``--request-timeout``: how long after this scheduler
                gave up on a write it may still land.
        """
        self.api = api
        self.request_timeout = request_timeout
        self.in_flight: dict[str, dra.Allocation] = {}
        """claim UID -> the allocation written (or being written) for it."""
        self.lost: dict[str, LostWrite] = {}
        """claim UID -> its status write of unknown outcome (the claim is in `in_flight` too)."""
        self._unknown_bindings: dict[str, float] = {}
        """pod UID -> `time.monotonic` instant past which its Binding of unknown outcome can no longer land."""
        self._warned: set[str] = set()
        self._slices: dict[tuple[str, str], dra.ResourceSlice | None] = {}

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    # --- once per pass ---------------------------------------------------------------------------
    def settles_at(self) -> float:
        """The `time.monotonic` instant the next write of unknown outcome settles (inf: none pending)."""
        return min([w.settles_at for w in self.lost.values()], default=float("inf"))

    def settle(self, store: StoreReader) -> None:
        """Drop the in-flight allocations whose outcome the API now shows, or that can no longer land."""
        if not self.in_flight:
            return
        found: dict[str, dra.ResourceClaim] = {}
        for obj in store.objects("resourceclaims"):
            uid = (obj.get("metadata") or {}).get("uid")
            if isinstance(uid, str) and uid in self.in_flight:
                try:
                    found[uid] = dra.decode_claim(obj)
                except dra.InvalidObjectError:
                    continue  # not live: dropped below, as begin_pass does
        self._settle(found)

    def _settle(self, claims: Mapping[str, dra.ResourceClaim]) -> None:
        now = time.monotonic()
        for uid in [u for u in self._unknown_bindings if self._unknown_bindings[u] <= now]:
            del self._unknown_bindings[uid]
        for uid in list(self.in_flight):
            claim, lost = claims.get(uid), self.lost.get(uid)
            if claim is None or claim.allocation is not None:
                pass  # gone, or the API shows an allocation (counted from the API now)
            elif lost is None:
                continue  # being written in this cycle
            elif claim.resource_version != lost.resource_version:
                log.info("claim %s changed and shows no allocation: its status write of unknown outcome did "
                         "not land; its allocation is released", claim.key)
            elif now >= lost.settles_at:
                log.info("claim %s: its status write of unknown outcome did not land within the API server's "
                         "request timeout (%gs); its allocation is released", claim.key, self.request_timeout)
            else:
                continue  # it may still land
            self._forget(uid)

    def begin_pass(self, store: StoreReader, nodes: list[dict[str, Any]]) -> PassState:
        """Decode the slices, classes and claims once; settle in-flight allocations (`settle`).

        ``nodes``: the pass's nodes, already read by the caller, whose labels node selectors match.
        """
        claims: dict[tuple[str, str], dra.ResourceClaim | str] = {}
        allocations: list[dra.Allocation] = []
        by_uid: dict[str, dra.ResourceClaim] = {}
        for obj in store.objects("resourceclaims"):
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            try:
                claim = dra.decode_claim(obj)
            except dra.InvalidObjectError as exc:
                claims[key] = str(exc)
                self._warn(str(exc))
                continue
            claims[key] = claim
            by_uid[claim.uid] = claim
            for problem in claim.problems:
                self._warn(problem)
            if claim.allocation is not None:
                allocations.append(claim.allocation)
        self._settle(by_uid)
        allocations.extend(self.in_flight.values())
        classes: dict[str, dra.DeviceClass] = {}
        for obj in store.objects("deviceclasses"):
            try:
                klass = dra.decode_class(obj)
            except dra.InvalidObjectError as exc:
                self._warn(str(exc))
                continue
            classes[klass.name] = klass
        slices = self._decode_slices(store.objects("resourceslices"))
        labels = _node_labels(nodes)
        return PassState(claims, alloc.Inventory(slices, classes, alloc.allocated_state(allocations), labels),
                         allocations)

    def _decode_slices(self, objects: list[dict[str, Any]]) -> list[dra.ResourceSlice]:
        cache: dict[tuple[str, str], dra.ResourceSlice | None] = {}
        result: list[dra.ResourceSlice] = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("name", "")), str(meta.get("resourceVersion", "")))
            if key in self._slices:
                decoded = self._slices[key]
            else:
                try:
                    decoded = dra.decode_slice(obj)
                    for problem in decoded.problems:
                        self._warn(problem)
                except dra.InvalidObjectError as exc:
                    self._warn(f"{exc}; not allocated from")
                    decoded = None
            cache[key] = decoded
            if decoded is not None:
                result.append(decoded)
        self._slices = cache
        return result

    # --- per pod ---------------------------------------------------------------------------------
    def pre_enqueue(self, pod: Mapping[str, Any], state: PassState) -> bool:
        """Whether every claim of the pod exists, is not being deleted and (generated) is the pod's: else it waits.

        A pod that asks for claims (`has_claims`) whose ``spec.resourceClaims`` does not read as a list
        of entries (`types.PodSpec.resource_claims_unreadable`: kube-apiserver's validation refuses such a pod,
        the sandbox's storage may hold one) waits too, warned about once: which claims it needs is
        not known, and scheduling it without them would start it with none prepared.
        """
        decoded = _claims_pod(pod)
        if decoded.spec.resource_claims_unreadable:
            meta = decoded.metadata
            self._warn(f"pod {meta.namespace}/{meta.name}: spec.resourceClaims cannot be read; "
                       "the pod is not scheduled")
            return False
        return dra_views.first_unusable(_resolved(decoded, state)) is None

    def pre_filter(self, pod: Mapping[str, Any], state: PassState) -> PodClaims:
        """The pod's claims, checked as PreFilter checks them.

        Raises:
            Unschedulable: the PreFilter message (the caller adds ``0/N nodes are available: ...``).
            SchedulingError: a claim that cannot be read at all.
        """
        decoded = _claims_pod(pod)
        resolved = _resolved(decoded, state)
        unusable = dra_views.first_unusable(resolved)  # podResourceClaims: foreachPodResourceClaim's error
        if unusable is not None:
            raise Unschedulable(unusable.upstream)
        claims: list[dra.ResourceClaim] = []
        # One claim per entry, a claim two entries name taken twice, as kube-scheduler takes it
        # (dynamicresources.go podResourceClaims, claimStore): Filter allocates it twice and PreBind
        # reserves it twice, so such a pod is never bound (`dra_views.named_twice` says why).
        for entry in resolved:
            found = state.claims.get((decoded.metadata.namespace, entry.claim.name if entry.claim else ""))
            if isinstance(found, str):
                raise SchedulingError(alloc.FILTER_ERROR.format(error=found))
            if found is not None:
                claims.append(found)
        uid = decoded.metadata.uid
        message = alloc.prefilter(claims, state.inventory.classes, uid)
        if message:
            raise Unschedulable(message)
        to_allocate = [c for c in claims if c.allocation is None]
        for claim in to_allocate:
            if claim.uid in self.in_flight:
                raise Unschedulable(f"resource claim {claim.key} is in the process of being allocated")
        return PodClaims(uid, claims, to_allocate)

    def filter(self, claims: PodClaims, node: str, state: PassState) -> str:
        """The node's rejection reason ("" when the pod's claims can be had there).

        Raises:
            SchedulingError: the allocator cannot evaluate a claim (wrapped as the framework wraps it).
        """
        labels = state.inventory.labels_of(node)
        if any(not alloc.available_on(claim, node, labels) for claim in claims.claims):
            return alloc.REASON_NOT_ON_NODE
        if not claims.to_allocate:
            return ""
        try:
            found = alloc.allocate(node, claims.to_allocate, state.inventory)
        except alloc.AllocationError as exc:
            raise SchedulingError(alloc.FILTER_ERROR.format(error=exc)) from None
        if isinstance(found, str):
            return found
        claims.allocations[node] = found
        return ""

    def reserve(self, claims: PodClaims, node: str, state: PassState) -> None:
        """Count the node's allocations as in flight, for this pass and the next ones.

        All or nothing: paired up first, so a mismatch raises before anything is counted (an
        allocation left in `in_flight` with no write ever sent would hold its device for good).
        """
        for claim, allocation in list(zip(claims.to_allocate, claims.allocations.get(node, ()), strict=True)):
            self.in_flight[claim.uid] = allocation
            state.allocations.append(allocation)
        state.inventory = alloc.Inventory(state.inventory.slices, state.inventory.classes,
                                          alloc.allocated_state(state.allocations), state.inventory.labels)

    def pre_bind(self, pod: Mapping[str, Any], claims: PodClaims, node: str) -> None:
        """Write each claim's allocation (if new) and the pod's reservation, before the Binding.

        Raises:
            SchedulingError: a write was refused (the claim was allocated elsewhere, deleted ...).
        """
        allocations = dict(zip((c.uid for c in claims.to_allocate), claims.allocations.get(node, ()), strict=True))
        written: set[str] = set()
        try:
            for claim in claims.claims:
                if any(c.uid == claims.pod_uid for c in claim.reserved_for):
                    continue
                try:
                    self._bind_claim(pod, claim, allocations.get(claim.uid))
                except KubeError as exc:
                    if claim.uid not in self.lost:  # refused, or no write that allocates was sent
                        raise SchedulingError(f"add allocation and reservation to claim {claim.key}: {exc}") from None
                    raise SchedulingError(  # unknown outcome: counted until the API shows it, or it cannot land
                        f"add allocation and reservation to claim {claim.key}: {exc} (outcome unknown: the "
                        f"allocation stays counted until the API shows it, at most {self.request_timeout:g}s)"
                    ) from None
                written.add(claim.uid)
        finally:
            # An allocation neither written nor lost (refused, never sent because an earlier claim
            # failed, or failed before its status write) can never land: it leaves in_flight now.
            for uid in allocations:
                if uid not in written and uid not in self.lost:
                    self._forget(uid)

    def _forget(self, uid: str) -> None:
        self.in_flight.pop(uid, None)
        self.lost.pop(uid, None)

    def _get(self, claim: dra.ResourceClaim) -> ClaimReply:
        return _claim_reply(claim, self.api.request("GET", types.DRA_CLAIMS.path(claim.namespace, claim.name)))

    def _patch(self, claim: dra.ResourceClaim, body: Mapping[str, Any],
               subresource: str | None = None) -> ClaimReply:
        """A merge patch of the claim; `UndecodableReply` when it landed but its reply is not JSON."""
        path = types.DRA_CLAIMS.path(claim.namespace, claim.name, subresource)
        return _claim_reply(claim, self.api.request("PATCH", path, body=msgspec.json.encode(body),
                                                    content_type=PATCH_CONTENT_TYPES["merge"]))

    def _bind_claim(self, pod: Mapping[str, Any], claim: dra.ResourceClaim, allocation: dra.Allocation | None) -> None:
        """``bindClaim``: conditional writes (the resourceVersion), re-read and retried on a conflict."""
        meta = pod.get("metadata") or {}
        consumer = {"resource": "pods", "name": meta.get("name", ""), "uid": meta.get("uid", "")}
        for _ in range(CONFLICT_RETRIES):
            current = self._get(claim)
            if current.claim.deleting or current.claim.uid != claim.uid:
                raise SchedulingError(f"claim {claim.key} got deleted in the meantime")
            version = current.version
            body: dict[str, Any] = {"status": {}}
            try:
                if allocation is not None:
                    if current.claim.allocation is not None:
                        raise SchedulingError(f"claim {claim.key} got allocated elsewhere in the meantime")
                    finalizers = current.wire.metadata.finalizers
                    if dra.FINALIZER not in finalizers:  # added in a normal update first
                        try:
                            updated = self._patch(claim, {"metadata": {"finalizers": [*finalizers, dra.FINALIZER],
                                                                       "resourceVersion": version}})
                        except UndecodableReply:
                            continue  # the finalizer landed; the claim read again shows it and its resourceVersion
                        version = updated.version
                    body["status"]["allocation"] = alloc.encode_allocation(allocation)
                elif current.claim.allocation is None:
                    raise SchedulingError(f"claim {claim.key} is not allocated any more")
                reserved = current.wire.status.reserved_for
                if len(reserved) >= dra.MAX_RESERVED_FOR:  # PreFilter's rule, on the claim as it is now
                    raise SchedulingError(f"claim {claim.key}: {alloc.REASON_IN_USE}")
                body["status"]["reservedFor"] = [*map(_consumer, reserved), consumer]
                # Conditional on the resourceVersion read, as kube-scheduler's bindClaim
                # (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go) sends
                # UpdateStatus the claim object it read: a changed claim answers 409, so a lost write
                # is settled by the claim's next resourceVersion (see the module docstring).
                if not version:  # unconditional: a lost reply would never settle
                    raise SchedulingError(f"claim {claim.key}: the API answered it without a resourceVersion")
                body["metadata"] = {"resourceVersion": version}
                self._send_status(claim, body, version if allocation is not None else None)
                return
            except Conflict:
                continue
        raise SchedulingError(f"add reservation to claim {claim.key}: it kept changing ({CONFLICT_RETRIES} conflicts)")

    def _send_status(self, claim: dra.ResourceClaim, body: Mapping[str, Any], precondition: str | None) -> None:
        """The status write; one that allocates (``precondition`` given) and has an unknown outcome is noted lost."""
        try:
            self._patch(claim, body, "status")
        except UndecodableReply as exc:
            # A 2xx: the write landed (only its reply does not decode), as kube-scheduler's bindClaim
            # counts any UpdateStatus without an error as done; the pod goes on to its Binding.
            log.warning("%s", write_failure(f"add allocation and reservation to claim {claim.key}", exc))
        except KubeError as exc:
            if precondition is not None and not did_not_happen(exc):
                self.lost[claim.uid] = LostWrite(precondition, time.monotonic() + self.request_timeout)
            raise

    def unreserve(self, pod: Mapping[str, Any], claims: PodClaims, *, binding_unknown: bool = False) -> None:
        """Take the pod's reservations back once the API shows the Binding did not land.

        Called when PreBind (any claim) or the Binding fails. Only what a fresh read shows is
        removed: a claim write whose outcome is unknown and not shown yet is left as it lands. A
        Binding whose reply was lost may have landed: while the pod shows bound, or cannot be read,
        the reservations stay (the resourceclaim controller drops them if the pod goes away; a retry
        of an unbound pod reuses them). ``binding_unknown``: this cycle's Binding has an unknown
        outcome, so it may still land for the API server's request timeout although the pod shows
        unbound: until then the reservations stay too (a pod bound to a claim not reserved for it
        would never start). Allocations stay until the controller frees them.
        """
        uid = claims.pod_uid
        if binding_unknown:
            self._unknown_bindings[uid] = time.monotonic() + self.request_timeout
        if self._unknown_bindings.get(uid, 0.0) > time.monotonic():
            meta = pod.get("metadata") or {}
            log.info("unreserve %s/%s: its Binding of unknown outcome may still land; reservations kept",
                     meta.get("namespace"), meta.get("name"))
            return
        if not self._unbound(pod):
            return
        for claim in claims.claims:
            try:
                current = self._get(claim)
            except KubeError as exc:
                log.warning("unreserve %s: %s", claim.key, exc)
                continue
            listed = current.wire.status.reserved_for
            reserved = [_consumer(r) for r in listed if r.uid != claims.pod_uid]
            if len(reserved) == len(listed):
                continue
            version = current.version
            if not version:
                log.warning("unreserve %s: the API answered it without a resourceVersion", claim.key)
                continue
            try:
                self._patch(claim, {"metadata": {"resourceVersion": version},
                                    "status": {"reservedFor": reserved or None}}, "status")
            except KubeError as exc:
                log.warning("%s", write_failure(f"unreserve {claim.key}", exc))

    def _unbound(self, pod: Mapping[str, Any]) -> bool:
        """Whether the API shows the pod (this UID) not bound to a node; False when that is unknown."""
        meta = pod.get("metadata") or {}
        try:
            current = self.api.get_pod(str(meta.get("namespace", "default")), str(meta.get("name", "")))
        except NotFound:
            return True  # gone: nothing can run on the reservation
        except KubeError as exc:
            log.warning("unreserve %s/%s: the pod cannot be read, reservations kept: %s",
                        meta.get("namespace"), meta.get("name"), exc)
            return False
        return current.metadata.uid != meta.get("uid") or not current.spec.node_name


class ClaimReply(NamedTuple):
    """The API's reply about a claim, decoded by the claim structs the views read (`dra_objects`)."""

    wire: dra.WireResourceClaim
    """As sent: what is written back (finalizers, ``reservedFor``) is written back whole."""
    claim: dra.ResourceClaim
    """Checked (`dra_objects.read_claim`): what the plugin decides by."""

    @property
    def version(self) -> str:
        """``metadata.resourceVersion`` as sent, the precondition of a write that follows."""
        return self.wire.metadata.resource_version


def _claim_reply(claim: dra.ResourceClaim, reply: bytes) -> ClaimReply:
    """The API's reply about ``claim``, decoded and checked by the one claim decoder the views read claims by.

    Raises:
        UndecodableReply: named by the claim asked about (the reply's own name is not trusted), in the
            views' words: ``ResourceClaim <ns>/<name>: cannot be decoded (<why>)`` (`dra_objects.decode_wire`:
            not JSON, a string in it not UTF-8, nested deeper than msgspec goes (opaque parameters:
            kube-apiserver accepts 10,000 levels), a field of the wrong type), or ``ResourceClaim
            <ns>/<name>: the reply is invalid (<why>)`` (`dra_objects.read_claim`: no name or namespace).
            For a write: the write was answered 2xx, so it landed.
    """
    try:
        wire = dra.decode_wire(reply, dra.WireResourceClaim, "ResourceClaim", claim.key)
    except dra.InvalidObjectError as exc:
        raise UndecodableReply(str(exc)) from None
    try:
        return ClaimReply(wire, dra.read_claim(wire))
    except dra.InvalidObjectError as exc:
        raise UndecodableReply(f"ResourceClaim {claim.key}: the reply is invalid ({exc})") from None


def _consumer(consumer: dra.WireConsumer) -> dict[str, str]:
    """A ``reservedFor`` entry as written back (``ResourceClaimConsumerReference``: apiGroup omitted when empty)."""
    found = {"resource": consumer.resource, "name": consumer.name, "uid": consumer.uid}
    return {"apiGroup": consumer.api_group, **found} if consumer.api_group else found


__all__ = ["SCHEDULER_ERROR", "ClaimReply", "DynamicResources", "LostWrite", "PassState", "PodClaims",
           "SchedulingError", "Unschedulable", "has_claims"]
