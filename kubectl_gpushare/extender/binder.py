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
- when the Binding fails, the annotations are removed again (only while they are still ours) and
  the reservation released, so nothing is half-done; an API failure whose outcome is unknown (a
  timeout after the server may have acted) is resolved by reading the pod back.

Transient API faults (429 with Retry-After, 5xx, timeouts) are retried inside the `PodApi`
implementation (`kube.retry`); this module sees only their final outcome.
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
from kubectl_gpushare.extender.state import ExtenderState, Reservation
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
)
NOT_LEADER = "this extender replica is not the leader; retry"
PATCH_ATTEMPTS = 4
"""How often a conflicting annotation patch (the pod changed under us) is re-read and retried."""


class PodApi(Protocol):
    """The three API calls a bind makes (each with bounded retries for transient faults)."""

    def get_pod(self, namespace: str, name: str) -> Pod:
        """Read a pod. Raises `errors.NotFound` if it does not exist."""

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: dict[str, str | None], *, uid: str, resource_version: str
    ) -> Pod:
        """Strategic-merge-patch annotations (None deletes a key) with UID and RV preconditions.

        Raises:
            errors.Conflict: a precondition failed (the pod changed or was replaced).
        """

    def create_binding(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST the pod's Binding to ``node`` with the UID as a precondition."""


class _BindError(Exception):
    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


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
    ) -> None:
        """Create a binder.

        Args:
            api: the API calls (the real client adapter, see `kubeapi`).
            state: the shared ledger, where GPUs are reserved.
            policy: which GPU a pod gets on its node: ``binpack`` (best fit) or ``spread``.
            is_leader: binds are refused unless this says the replica leads.
            clock_ns: source of ``ALIYUN_COM_GPU_MEM_ASSUME_TIME`` (unix nanoseconds).
        """
        self.api = api
        self.state = state
        self.policy: Policy = policy
        self.is_leader = is_leader
        self.clock_ns = clock_ns
        self._in_flight = 0
        self._idle = threading.Condition()

    def drain(self, timeout: float) -> bool:
        """Wait until no bind is in flight (before releasing the Lease); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

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
                return self._bind(args)
            except _BindError as exc:
                return BindOutcome(exc.message, exc.reason)
            except errors.KubeError as exc:
                return BindOutcome(f"bind {args.pod_namespace}/{args.pod_name}: {exc}", "api_error")
            finally:
                with self._idle:
                    self._in_flight -= 1
                    self._idle.notify_all()

    # --- steps -----------------------------------------------------------------------------------------

    def _bind(self, args: wire.BindingArgs) -> BindOutcome:
        pod = self._read(args)
        if pod.spec.node_name:
            return self._already_bound(args, pod)
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
            annotations = self._annotations(reservation)
            patched = self._patch(args, pod, annotations)
            self._create_binding(args, patched, annotations)
        except BaseException:
            self.state.release(args.pod_uid)
            raise
        log.debug("pod %s/%s on %s GPU %d", args.pod_namespace, args.pod_name, args.node, reservation.gpu)
        return BindOutcome()

    def _read(self, args: wire.BindingArgs) -> Pod:
        try:
            pod = self.api.get_pod(args.pod_namespace, args.pod_name)
        except errors.NotFound:
            raise _BindError(f'pods "{args.pod_name}" not found in namespace {args.pod_namespace}',
                              "not_found") from None
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

    def _annotations(self, reservation: Reservation) -> dict[str, str | None]:
        return {
            protocol.ANN_IDX: str(reservation.gpu),
            protocol.ANN_DEV: str(reservation.dev_total),
            protocol.ANN_POD: str(reservation.request),
            protocol.ANN_ASSIGNED: protocol.ASSIGNED_FALSE,
            protocol.ANN_ASSUME_TIME: str(self.clock_ns()),
        }

    def _patch(self, args: wire.BindingArgs, pod: Pod, annotations: dict[str, str | None]) -> Pod:
        """Write the annotations; re-read and retry on conflict; resolve unknown outcomes by reading."""
        for _ in range(PATCH_ATTEMPTS):
            try:
                return self.api.patch_pod_annotations(
                    args.pod_namespace, args.pod_name, annotations,
                    uid=args.pod_uid, resource_version=pod.metadata.resource_version)
            except errors.NotFound:
                raise _BindError(f'pods "{args.pod_name}" not found in namespace {args.pod_namespace}',
                                  "not_found") from None
            except (errors.Conflict, errors.ServerError, errors.TooManyRequests, errors.Unreachable) as exc:
                current = self._read(args)
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

    def _create_binding(self, args: wire.BindingArgs, patched: Pod, annotations: dict[str, str | None]) -> None:
        failure: Exception
        try:
            if not self.is_leader():  # leadership lost while patching: another replica may be binding now
                raise _BindError(NOT_LEADER, "not_leader")
            self.api.create_binding(args.pod_namespace, args.pod_name, args.pod_uid, args.node)
            return
        except _BindError as exc:
            failure = exc
        except errors.KubeError as exc:
            failure = exc
        # The Binding failed or its outcome is unknown: read the pod back to know which.
        try:
            current = self._read(args)
        except (_BindError, errors.KubeError):
            current = None
        if current is not None and current.spec.node_name == args.node and _has(current, annotations):
            return  # it was bound after all
        if current is not None and current.spec.node_name != args.node:
            # Unbound (or bound elsewhere by another scheduler meanwhile): our annotations are wrong there.
            self._roll_back(args, current, annotations)
        if isinstance(failure, _BindError):
            raise failure
        raise _BindError(f"bind {args.pod_namespace}/{args.pod_name} to {args.node}: {failure}", "binding_failed")

    def _roll_back(self, args: wire.BindingArgs, pod: Pod, annotations: dict[str, str | None]) -> None:
        """Remove our annotations from a pod we did not bind, unless someone has rewritten them since."""
        removal: dict[str, str | None] = dict.fromkeys(ANNOTATION_KEYS)
        for _ in range(2 * PATCH_ATTEMPTS):
            if not _has(pod, annotations) or pod.spec.node_name == args.node:
                return
            try:
                self.api.patch_pod_annotations(args.pod_namespace, args.pod_name, removal,
                                               uid=args.pod_uid, resource_version=pod.metadata.resource_version)
                return
            except errors.Conflict:
                try:
                    pod = self._read(args)
                except (_BindError, errors.KubeError):
                    return
            except errors.KubeError as exc:
                log.error("could not remove GPU annotations from unbound pod %s/%s: %s "
                          "(harmless: an unbound pod counts nowhere, and the next bind rewrites them)",
                          args.pod_namespace, args.pod_name, exc)
                return


def _has(pod: Pod, annotations: dict[str, str | None]) -> bool:
    current = pod.metadata.annotations
    return all(current.get(key) == value for key, value in annotations.items())
