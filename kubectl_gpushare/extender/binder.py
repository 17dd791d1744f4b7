"""The bind verb: choose a GPU, write the five annotations, create the Binding, or undo it all.

The order is the original's, because the unmodified gpushare device plugin depends on it: the
annotations (``ALIYUN_COM_GPU_MEM_IDX``, ``_DEV``, ``_POD``, ``_ASSIGNED="false"``,
``_ASSUME_TIME=<unix ns>``) are on the pod before the Binding exists, so kubelet's Allocate finds
them. Around that order this module adds what the original lacked:

- the GPU is chosen and counted in the ledger under one lock hold *before* any API call
  (`ExtenderState.reserve`), so concurrent binds never over-commit a GPU;
- the pod is read fresh from the API server; a pod that already has a node is never re-patched
  (a retried bind of a pod bound to the same node with our annotations succeeds without a write);
- the patch carries the pod's UID and resourceVersion as preconditions; a conflict re-reads the
  pod and tries again a bounded number of times;
- the Binding has three outcomes. Created: done. Refused (a 4xx other than 429: the API says it did
  not happen, `kube.errors.refused`): the annotations are removed again (only while they are still
  ours) and the reservation released. Unknown (a 5xx, a 429, a timeout, a reset connection: it may
  have happened, or may still happen): the
  pod is read back; unless that shows the answer, nothing is rolled back, the reservation is kept
  (marked unsettled) and kube-scheduler gets an error, so it retries. The watch settles it (the
  pod seen bound ends the reservation, its deletion too); `Binder.sweep` reads unsettled pods
  back and releases a reservation only when the API shows it is not held: the pod is gone, counted
  on its node by the watch, or still unbound ``unknown_grace`` seconds after the Binding was sent
  (then our annotations are removed first). A retried bind of an unsettled pod re-sends the same
  Binding when it names the same node, and is refused otherwise until the sweep settles it;
- the whole bind answers within ``deadline`` seconds plus at most one request timeout, below
  kube-scheduler's ``httpTimeout`` (30 s): retries stop at the deadline, and the Binding is not
  sent when less than one request timeout is left (a refusal, rolled back like any other).

Transient API faults (429 with Retry-After, 5xx, timeouts) of reads and patches are retried inside
the `PodApi` implementation (`kube.retry`) within the budget given; the Binding is sent once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NoReturn, Protocol

from kubectl_gpushare import protocol
from kubectl_gpushare.extender import wire
from kubectl_gpushare.extender.app import BindOutcome
from kubectl_gpushare.extender.state import Assumed, ExtenderState, Reservation, Unsettled
from kubectl_gpushare.kube import errors, records
from kubectl_gpushare.kube.types import Pod
from kubectl_gpushare.ledger import Policy

log = logging.getLogger("kubectl_gpushare.extender.binder")

ANNOTATION_KEYS = (
    protocol.ANN_IDX,
    protocol.ANN_DEV,
    protocol.ANN_POD,
    protocol.ANN_ASSIGNED,
    protocol.ANN_ASSUME_TIME,
    protocol.ANN_ASSUMED_NODE,
)
NOT_LEADER = "this extender replica is not the leader; retry"
PATCH_ATTEMPTS = 4
"""How often a conflicting annotation patch (the pod changed under us) is re-read and retried."""
DEFAULT_DEADLINE = 20.0
"""Seconds a bind may take (plus one request timeout): below kube-scheduler's 30 s ``httpTimeout``."""
DEFAULT_UNKNOWN_GRACE = errors.API_REQUEST_TIMEOUT
"""Seconds a Binding of unknown outcome may still land: kube-apiserver's default ``--request-timeout``."""


class PodApi(Protocol):
    """The three API calls a bind makes (reads and patches with bounded retries for transient faults)."""

    def get_pod(self, namespace: str, name: str, *, budget: float | None = None) -> Pod:
        """Read a pod, retrying for at most ``budget`` seconds.

        Raises:
            errors.NotFound: the pod is absent.
            errors.UndecodableReply: the pod the API serves does not decode (a field of the wrong type).
        """

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: dict[str, str | None], *, uid: str, resource_version: str,
        budget: float | None = None,
    ) -> Pod:
        """Strategic-merge-patch annotations (None deletes a key) with UID and RV preconditions.

        Raises:
            errors.Conflict: a precondition failed (the pod changed or was replaced).
            errors.UndecodableReply: the patch was applied, but the pod returned does not decode.
        """

    def create_binding(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST the pod's Binding to ``node`` with the UID as a precondition, once."""


class _BindError(Exception):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class _UnknownOutcomeError(_BindError):
    """The Binding may have happened, or its annotations may still claim the GPU: keep the reservation."""


class _PodGoneError(Exception):
    """The pod no longer exists (deleted, or re-created with another UID)."""


class Binder:
    """Binds pods for kube-scheduler; safe to call from many threads at once."""

    def __init__(
        self,
        api: PodApi,
        state: ExtenderState,
        *,
        policy: Policy = "binpack",
        is_leader: Callable[[], bool] = lambda: True,
        clock_ns: Callable[[], int] = time.time_ns,
        deadline: float = DEFAULT_DEADLINE,
        request_timeout: float = 5.0,
        unknown_grace: float = DEFAULT_UNKNOWN_GRACE,
        sweep_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create a binder.

        Args:
            api: the API calls (the real client adapter, see `kubeapi`).
            state: the shared ledger, where GPUs are reserved.
            policy: which GPU a pod gets on its node: ``binpack`` (best fit) or ``spread``.
            is_leader: binds are refused unless this says the replica leads.
            clock_ns: source of ``ALIYUN_COM_GPU_MEM_ASSUME_TIME`` (unix nanoseconds).
            deadline: seconds a bind may take, retries included (one request may run past it).
            request_timeout: the API client's timeout for one request; the Binding is sent only
                while at least this much of the deadline is left.
            unknown_grace: seconds after which a Binding of unknown outcome that the API still
                does not show is taken as lost.
            sweep_interval: seconds between reads of pods whose Binding's outcome is unknown.
            clock: monotonic seconds, for the deadline and the grace.
        """
        self.api = api
        self.state = state
        self.policy: Policy = policy
        self.is_leader = is_leader
        self.clock_ns = clock_ns
        self.deadline = deadline
        self.request_timeout = request_timeout
        self.unknown_grace = unknown_grace
        self.sweep_interval = sweep_interval
        self.clock = clock
        self._in_flight = 0
        self._idle = threading.Condition()
        self._sweeper: threading.Thread | None = None
        self._closed = threading.Event()
        self._keep_sweeping = False

    def drain(self, timeout: float) -> bool:
        """Wait until no bind is in flight and no Binding's outcome is unknown; False on timeout.

        Run before releasing the Lease: the next leader's fresh list then shows every Binding of
        ours that landed (one still unknown at the timeout is the handover's residual risk).
        """
        give_up = self.clock() + timeout
        with self._idle:
            if not self._idle.wait_for(lambda: self._in_flight == 0, timeout):
                return False
        while self.state.unsettled():
            if self.clock() >= give_up or self._closed.wait(0.05):
                return False
        return True

    def close(self) -> None:
        """Stop the sweep (at shutdown); unsettled reservations die with the process."""
        self._closed.set()
        sweeper = self._sweeper
        if sweeper is not None:
            sweeper.join(timeout=self.sweep_interval + 5)

    def bind(self, args: wire.BindingArgs) -> BindOutcome:
        """Bind one pod; the outcome's ``error`` is "" on success, else the message for the scheduler."""
        with self.state.binding(args.pod_uid) as first:
            if not first:
                return BindOutcome(
                    f"a bind of pod {args.pod_namespace}/{args.pod_name} is already in progress", "in_flight")
            if not self.is_leader():
                return BindOutcome(NOT_LEADER, "not_leader")
            with self._idle:
                self._in_flight += 1
            try:
                return self._bind(args, self.clock() + self.deadline)
            except _BindError as exc:
                return BindOutcome(exc.message, exc.reason)
            except errors.KubeError as exc:
                return BindOutcome(f"bind {args.pod_namespace}/{args.pod_name}: {exc}", "api_error")
            finally:
                with self._idle:
                    self._in_flight -= 1
                    self._idle.notify_all()

    # --- steps -----------------------------------------------------------------------------------------

    def _left(self, deadline: float) -> float:
        return deadline - self.clock()

    def _bind(self, args: wire.BindingArgs, deadline: float) -> BindOutcome:
        pod = self._read(args, deadline)
        if pod.spec.node_name:
            return self._already_bound(args, pod)
        unsettled = self.state.unsettled(args.pod_uid).get(args.pod_uid)
        if unsettled is not None:
            annotations: dict[str, str | None] = dict(unsettled.annotations)
            if unsettled.node == args.node and _has(pod, annotations):
                # The same Binding again: if the first one lands meanwhile, this one reads back as done.
                self._create_binding(args, pod, annotations, deadline, resend=True)
                return BindOutcome()
            if self.clock() - unsettled.since < self.unknown_grace:
                raise _BindError(
                    f"the outcome of an earlier bind of pod {args.pod_namespace}/{args.pod_name} to node "
                    f"{unsettled.node} is not known yet; its GPU stays reserved until the API server shows "
                    "it; retry", "unsettled")
            self.state.release(args.pod_uid)  # unbound long after the Binding was sent: it was lost
        request, _ = records.pod_request(pod)
        if request <= 0:
            raise _BindError(self._cannot_place(args, request, f"it requests no {protocol.RESOURCE_MEM}"),
                             "no_request")
        reservation = self.state.reserve(
            args.pod_uid, args.pod_namespace, args.pod_name, args.node, request, self.policy)
        if isinstance(reservation, str):
            reason = "unknown_node" if reservation.startswith("node ") else "no_fit"
            raise _BindError(self._cannot_place(args, request, reservation), reason)
        try:
            annotations = self._annotations(reservation, args.node)
            patched = self._patch(args, pod, annotations, deadline)
            self._create_binding(args, patched, annotations, deadline)
        except _UnknownOutcomeError:
            raise  # the reservation stays (see `_create_binding`)
        except BaseException:
            self.state.release(args.pod_uid)
            raise
        log.debug("pod %s/%s on %s GPU %d", args.pod_namespace, args.pod_name, args.node, reservation.gpu)
        return BindOutcome()

    def _get(self, args: wire.BindingArgs, budget: float) -> Pod:
        """The pod as the API server has it now; `_PodGoneError` if it was deleted or replaced."""
        try:
            pod = self.api.get_pod(args.pod_namespace, args.pod_name, budget=budget)
        except errors.NotFound:
            raise _PodGoneError() from None
        if pod.metadata.uid != args.pod_uid:
            raise _PodGoneError()
        return pod

    def _read(self, args: wire.BindingArgs, deadline: float) -> Pod:
        left = self._left(deadline)
        if left <= 0:
            raise _BindError(f"bind {args.pod_namespace}/{args.pod_name}: no time left within the bind deadline "
                             f"of {self.deadline:g} s", "deadline")
        try:
            pod = self.api.get_pod(args.pod_namespace, args.pod_name, budget=left)
        except errors.NotFound:
            raise _BindError(f'pods "{args.pod_name}" not found in namespace {args.pod_namespace}',
                              "not_found") from None
        except errors.UndecodableReply as exc:  # refuse this bind alone; no Binding was sent (see `_patch`)
            raise _BindError(f"{exc}; not binding it", "undecodable") from None
        if pod.metadata.uid != args.pod_uid:
            raise _BindError(protocol.BIND_UID_MISMATCH.format(
                name=args.pod_name, namespace=args.pod_namespace, uid=pod.metadata.uid, expected=args.pod_uid),
                "uid_mismatch")
        return pod

    def _already_bound(self, args: wire.BindingArgs, pod: Pod) -> BindOutcome:
        ours = protocol.ANN_IDX in pod.metadata.annotations and protocol.ANN_POD in pod.metadata.annotations
        if pod.spec.node_name == args.node and ours:
            return BindOutcome(reason="already_bound")  # a retried bind that had succeeded: nothing to do
        raise _BindError(
            f"pod {args.pod_namespace}/{args.pod_name} is already assigned to node {pod.spec.node_name}; "
            "not patching it", "already_bound")

    def _cannot_place(self, args: wire.BindingArgs, request: int, why: str) -> str:
        """The original's message, with the node filled in and a short spec instead of a pod dump."""
        spec = f"{{{protocol.RESOURCE_MEM}: {request}}}: {why}"
        return protocol.BIND_CANNOT_PLACE.format(
            node=args.node, name=args.pod_name, namespace=args.pod_namespace, spec=spec)

    def _annotations(self, reservation: Reservation, reservation_node: str) -> dict[str, str | None]:
        return {
            protocol.ANN_IDX: str(reservation.gpu),
            protocol.ANN_DEV: str(reservation.dev_total),
            protocol.ANN_POD: str(reservation.request),
            protocol.ANN_ASSIGNED: protocol.ASSIGNED_FALSE,
            protocol.ANN_ASSUME_TIME: str(self.clock_ns()),
            protocol.ANN_ASSUMED_NODE: reservation_node,
        }

    def _patch(self, args: wire.BindingArgs, pod: Pod, annotations: dict[str, str | None], deadline: float) -> Pod:
        """Write the annotations; re-read and retry on conflict; resolve unknown outcomes by reading.

        No Binding has been sent yet, so any failure here leaves the pod unbound: releasing the
        reservation is safe even when the patch's own outcome stays unknown.
        """
        for _ in range(PATCH_ATTEMPTS):
            try:
                return self.api.patch_pod_annotations(
                    args.pod_namespace, args.pod_name, annotations,
                    uid=args.pod_uid, resource_version=pod.metadata.resource_version,
                    budget=max(0.0, self._left(deadline)))
            except errors.NotFound:
                raise _BindError(f'pods "{args.pod_name}" not found in namespace {args.pod_namespace}',
                                  "not_found") from None
            except errors.UndecodableReply as exc:
                # The pod changed into garbage since it was read; the patch landed on the unbound pod, whose
                # annotations no reader can decode now. No Binding is sent, the reservation is released.
                raise _BindError(f"{exc} after its GPU annotations were written; not binding it",
                                 "undecodable") from None
            except (errors.Conflict, errors.ServerError, errors.TooManyRequests, errors.Unreachable) as exc:
                current = self._read(args, deadline)
                if _has(current, annotations):
                    return current  # the write landed although the reply was lost
                if current.spec.node_name:
                    return self._already_bound_after_race(args, current)
                if not isinstance(exc, errors.Conflict):
                    raise
                pod = current
        raise _BindError(f"pod {args.pod_namespace}/{args.pod_name} kept changing while its GPU annotations "
                          f"were written ({PATCH_ATTEMPTS} conflicts)", "conflict")

    def _already_bound_after_race(self, args: wire.BindingArgs, pod: Pod) -> NoReturn:
        raise _BindError(
            f"pod {args.pod_namespace}/{args.pod_name} was bound to node {pod.spec.node_name} by someone else "
            "during the bind", "already_bound")

    def _create_binding(
        self, args: wire.BindingArgs, patched: Pod, annotations: dict[str, str | None], deadline: float,
        *, resend: bool = False,
    ) -> None:
        """POST the Binding and sort its outcome into done, refused (raise) or unknown (raise `_UnknownOutcomeError`).

        With ``resend`` (the same Binding again, after an unknown outcome) the first one may still
        land, so nothing is rolled back unless the pod is seen bound elsewhere.
        """
        refusal: _BindError | None = None
        if not self.is_leader():  # leadership lost while patching: another replica may be binding now
            refusal = _BindError(NOT_LEADER, "not_leader")
        elif self._left(deadline) < self.request_timeout:
            refusal = _BindError(
                f"bind {args.pod_namespace}/{args.pod_name} to {args.node}: the bind deadline of "
                f"{self.deadline:g} s would pass before the API server could answer the Binding", "deadline")
        if refusal is not None:
            if not resend:
                self._roll_back(args, patched, annotations, deadline)
            raise refusal
        sent_at = self.clock()
        try:
            self.api.create_binding(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
            return
        except errors.KubeError as exc:
            # Refused by the API, or never sent (no connection, no TLS handshake): it did not happen. A timeout,
            # a 5xx or a reset after sending may have (`errors.did_not_happen`); so may a resend's first try.
            failure, definite = exc, errors.did_not_happen(exc) and not resend
        message = f"bind {args.pod_namespace}/{args.pod_name} to {args.node}: {failure}"
        try:
            current = self._get(args, max(0.0, self._left(deadline)))
        except _PodGoneError:
            self.state.release(args.pod_uid)
            raise _BindError(message + " (the pod is gone)", "not_found") from None
        except errors.KubeError as exc:
            if definite and not isinstance(failure, errors.Conflict):
                # It did not happen, but our annotations may still claim the GPU on the unbound pod:
                # keep the reservation until the sweep has removed them (its next round).
                self._keep(args, annotations, sent_at - self.unknown_grace,
                           f"{message}; reading the pod back failed too: {exc}", refused=True)
            self._keep(args, annotations, sent_at, f"{message}; reading the pod back failed too: {exc}")
        if current.spec.node_name == args.node and _has(current, annotations):
            return  # it was bound after all (a lost reply, or a repeated request that landed)
        if current.spec.node_name == args.node:  # on our node, our annotations changed: the watch settles it
            self._keep(args, annotations, sent_at, f"{message}; the pod is on {args.node} without its GPU annotations")
        if current.spec.node_name or definite:
            # Refused, or bound elsewhere by another scheduler meanwhile: our annotations are wrong there.
            if not self._roll_back(args, current, annotations, deadline) and not current.spec.node_name and not resend:
                self._keep(args, annotations, sent_at - self.unknown_grace, message, refused=True)
            if resend:
                self.state.release(args.pod_uid)
            raise _BindError(message, "binding_failed")
        self._keep(args, annotations, sent_at, message)

    def _keep(self, args: wire.BindingArgs, annotations: dict[str, str | None], sent_at: float,
              message: str, *, refused: bool = False) -> NoReturn:
        """Keep the reservation of a Binding of unknown outcome until the API shows what happened.

        ``refused``: the Binding was refused (or never sent) but the annotations could not be removed; ``sent_at``
        is then already past the grace, so the sweep removes them on its next round.
        """
        unsettled = Unsettled(args.pod_namespace, args.pod_name, args.node,
                              tuple((k, v) for k, v in annotations.items() if v is not None), sent_at)
        if refused:
            if self.state.mark_unsettled(args.pod_uid, unsettled):
                log.warning("bind %s/%s to %s: refused or never sent, and its GPU annotations could not be removed "
                            "yet; keeping its GPU reserved until they are",
                            args.pod_namespace, args.pod_name, args.node)
                self._ensure_sweeper()
            raise _UnknownOutcomeError(message, "binding_failed")  # keeps the reservation
        if self.state.mark_unsettled(args.pod_uid, unsettled):
            log.warning("bind %s/%s to %s: outcome unknown; keeping its GPU reserved until the API server "
                        "shows it", args.pod_namespace, args.pod_name, args.node)
            self._ensure_sweeper()
        raise _UnknownOutcomeError(message + "; the outcome is unknown, the GPU stays reserved until the API server "
                       "shows it; retry", "unknown_outcome")

    def _roll_back(
        self, args: wire.BindingArgs, pod: Pod, annotations: dict[str, str | None], deadline: float
    ) -> bool:
        """Remove our annotations from a pod we did not bind, unless someone has rewritten them since.

        Tries until ``deadline`` (and at least once). Returns whether they are gone (or no longer
        ours, or the pod is gone or bound to the node they name); False when that is not known.
        """
        removal: dict[str, str | None] = dict.fromkeys(ANNOTATION_KEYS)
        for attempt in range(2 * PATCH_ATTEMPTS):
            if not _has(pod, annotations) or pod.spec.node_name == args.node:
                return True
            if attempt and self._left(deadline) <= 0:
                break
            try:
                self.api.patch_pod_annotations(args.pod_namespace, args.pod_name, removal,
                                               uid=args.pod_uid, resource_version=pod.metadata.resource_version,
                                               budget=max(0.0, self._left(deadline)))
                return True
            except (errors.NotFound, errors.UndecodableReply):
                return True  # UndecodableReply: the patch was applied, only the pod it returned does not decode
            except errors.Conflict:
                try:
                    pod = self._get(args, max(0.0, self._left(deadline)))
                except _PodGoneError:
                    return True
                except errors.KubeError:
                    return False
            except errors.KubeError as exc:
                log.error("could not remove GPU annotations from unbound pod %s/%s: %s (their GPU stays "
                          "counted on %s until they are removed)", args.pod_namespace, args.pod_name, exc, args.node)
                return False
        return False

    # --- unsettled reservations ------------------------------------------------------------------------

    def start_sweeper(self) -> None:
        """Sweep until `close`, also when nothing of this replica is unsettled.

        While it leads, the sweep removes the expired GPU claims of unbound pods that any replica
        wrote (a leader that crashed mid-bind, a Binding that never landed).
        """
        self._keep_sweeping = True
        self._ensure_sweeper()

    def _ensure_sweeper(self) -> None:
        with self._idle:
            if self._closed.is_set() or (self._sweeper is not None and self._sweeper.is_alive()):
                return
            self._sweeper = threading.Thread(target=self._sweep_loop, name="extender-bind-sweep", daemon=True)
            self._sweeper.start()

    def _sweep_loop(self) -> None:
        while not self._closed.wait(self.sweep_interval):
            try:
                if not self.sweep() and not self._keep_sweeping:
                    with self._idle:  # ended under the lock, so a new mark starts a new sweeper
                        if not self.state.unsettled():
                            self._sweeper = None
                            return
            except Exception:  # the sweep must outlive a bug in one round
                log.exception("sweeping unsettled binds failed")

    def sweep(self) -> int:
        """Read back each pod whose Binding's outcome is unknown; release what the API shows is not held.

        Returns:
            How many reservations are still unsettled.
        """
        for uid, unsettled in self.state.unsettled().items():
            if self._closed.is_set():
                break
            with self.state.binding(uid) as first:
                if first:  # else a retried bind of this pod is settling it now
                    self._settle(uid, unsettled)
        if self._keep_sweeping and self.is_leader():
            now = time.monotonic()  # the cache's clock for claims
            for uid, claim in self.state.assumed().items():
                if self._closed.is_set():
                    break
                if now >= claim.expires:
                    with self.state.binding(uid) as first:
                        if first:
                            self._clean_claim(uid, claim)
        return len(self.state.unsettled())

    def _clean_claim(self, uid: str, claim: Assumed) -> None:
        """Remove an expired GPU claim from an unbound pod (no Binding written with it can land now)."""
        args = wire.BindingArgs(pod_name=claim.name, pod_namespace=claim.namespace, pod_uid=uid, node=claim.node)
        try:
            pod = self._get(args, self.request_timeout)
        except (_PodGoneError, errors.KubeError):
            return  # the watch shows a deletion; an unreadable pod is tried again next round
        annotations = pod.metadata.annotations
        if (pod.spec.node_name or protocol.parse_assumed_node(annotations.get(protocol.ANN_ASSUMED_NODE)) != claim.node
                or protocol.parse_gpu_index(annotations.get(protocol.ANN_IDX)) != claim.gpu
                or protocol.parse_assume_time(annotations.get(protocol.ANN_ASSUME_TIME)) != claim.assume_time):
            return  # bound, or claimed anew since: the watch brings the new state
        log.warning("pod %s/%s is still unbound long after its GPU on %s was claimed for it; removing the claim",
                    claim.namespace, claim.name, claim.node)
        current = {key: annotations[key] for key in ANNOTATION_KEYS if key in annotations}
        self._roll_back(args, pod, dict(current), self.clock() + 2 * self.request_timeout)

    def _settle(self, uid: str, unsettled: Unsettled) -> None:
        args = wire.BindingArgs(pod_name=unsettled.name, pod_namespace=unsettled.namespace, pod_uid=uid,
                                node=unsettled.node)
        where = f"{unsettled.namespace}/{unsettled.name}"
        try:
            pod = self._get(args, self.request_timeout)
        except _PodGoneError:
            log.info("unsettled bind of %s: the pod is gone; releasing its GPU", where)
            self.state.release(uid)
            return
        except errors.KubeError as exc:
            log.info("unsettled bind of %s: cannot read the pod (%s); keeping its GPU reserved", where, exc)
            return
        if pod.spec.node_name:
            # Bound: the watch ends the reservation when it sees the pod on a node with a GPU index.
            # A pod bound without one is counted on its node once the watch shows it; then release.
            if self.state.counted_on(uid) is not None and self.state.unsettled(uid):
                log.info("unsettled bind of %s: the pod is bound to %s; releasing the reservation", where,
                         pod.spec.node_name)
                self.state.release(uid)
            return
        if self.clock() - unsettled.since < self.unknown_grace:
            return  # unbound, but the Binding may still land
        log.warning("unsettled bind of %s: still unbound %.0f s after its Binding; taking it as lost, "
                    "removing its annotations and releasing its GPU", where, self.unknown_grace)
        if self._roll_back(args, pod, dict(unsettled.annotations), self.clock() + 2 * self.request_timeout):
            self.state.release(uid)  # else the next round tries again: the annotations still claim the GPU


def _has(pod: Pod, annotations: dict[str, str | None]) -> bool:
    current = pod.metadata.annotations
    return all(current.get(key) == value for key, value in annotations.items())
