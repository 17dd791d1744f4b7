"""NodePrepareResources and NodeUnprepareResources, decided: the driver's one stateful core.

For each claim kubelet names, `Preparer.prepare` answers with what it prepared or one line of
error, per claim: a bad claim never fails the others or changes anything. A claim prepared before
(this run or, through the checkpoint, an earlier one) is answered from the record, with no API read
and no second write, so kubelet's retries and repeats are idempotent. A new claim is read from the
API server (outside any lock: reads are the slow part), checked (`claims.holding`), and then, under
the lock, its CDI spec is written (complete before it is renamed into place) and the call's claims
recorded in the checkpoint with one durable append for the whole call; if that fails, the call's new
specs are removed again and each claim gets the error. So a claim whose preparation was answered is
in the checkpoint after a crash, and its spec is complete (or missing, and rewritten by `restore`).
`unprepare` removes a claim's spec and record; a claim it never prepared is already unprepared.

In a rolling update (``shared``, a `serialize.SerializeLock`) two instances share the plugin
directory and kubelet may call either: each call then runs whole under the lock, re-reads the
checkpoint first (`CheckpointFile.reload`) and has made its change durable before the lock is
released, so an instance sees every claim the other prepared or unprepared, answers a claim the
other prepared from its record (same CDI ids, no second read or write), and never writes a second,
different spec for it. A lock not got by the call's deadline fails the call's claims (kubelet retries).

It speaks neither gRPC nor HTTP: claims come from a `ClaimSource`, files go through `cdi.CdiDir`
and `checkpoint.CheckpointFile`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.dra import cdi
from kubectl_gpushare.dra.checkpoint import Checkpoint, CheckpointFile, ClaimPod, PreparedClaim, PreparedDevice
from kubectl_gpushare.dra.claims import ClaimRejectedError, holding
from kubectl_gpushare.dra.serialize import LockTimeoutError, SerializeLock
from kubectl_gpushare.dra.slices import PublishedGpu
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import KubeError, NotFound, UndecodableReply
from kubectl_gpushare.node import cgroups

log = logging.getLogger(__name__)

MAX_RESERVED = 256
"""``ResourceClaimReservedForMaxSize``: more consumers than this are not read."""
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


ANSWER_RESERVE = 0.5
"""Seconds of the caller's deadline kept back from the claims' reads, to write the CDI specs and the
checkpoint and send the reply in: a read still unanswered by then fails its claim instead."""
_Outcome = TypeVar("_Outcome")

RELOAD_WAIT = 5.0
"""Seconds `Preparer.prepared` waits for the serialize lock to read what the other instance changed."""


class ClaimSource(Protocol):
    """Where claims are read (the API server; `ApiClaims`)."""

    def claim(self, namespace: str, name: str, deadline: float | None = None) -> dra_objects.ResourceClaim:
        """One claim as stored now, read by `dra_objects`; the read gives up at ``deadline`` (`time.monotonic`).

        Raises:
            NotFound: no such claim; UndecodableReply: the claim does not decode; KubeError: the API
            server failed, could not be reached, or did not answer before ``deadline``; ValueError:
            the claim cannot be read (`dra_objects.InvalidObjectError`).
        """
        ...


class ApiClaims:
    """Claims read through the project's client (one GET each, as the kubeletplugin helper does)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def claim(self, namespace: str, name: str, deadline: float | None = None) -> dra_objects.ResourceClaim:
        """GET the claim (decoded as `dra_objects.WireResourceClaim`) and read it, by ``deadline``."""
        return dra_objects.read_claim(self._client.get(types.DRA_CLAIMS, name, namespace, deadline=deadline))


@dataclass(frozen=True)
class ClaimRef:
    """A claim as kubelet names it: namespace, name and the UID it must still have."""

    namespace: str
    name: str
    uid: str


def _check_ref(ref: ClaimRef) -> str:
    """"" if the reference can be acted on, else why not (before any read or path)."""
    if not cgroups.valid_uid(ref.uid):
        return f"claim UID {ref.uid[:64]!r} is not a UUID"
    if not _NAME.fullmatch(ref.namespace) or not _NAME.fullmatch(ref.name):
        return f"claim {ref.namespace[:64]!r}/{ref.name[:64]!r} is not a valid namespace and name"
    return ""


class Preparer:
    """Prepared claims, their CDI specs and the checkpoint, kept consistent under one lock."""

    def __init__(
        self,
        node: str,
        source: ClaimSource,
        gpus: Callable[[], Mapping[str, PublishedGpu]],
        cdi_dir: cdi.CdiDir,
        checkpoint: CheckpointFile,
        *,
        visible: cdi.VisibleMode = "index",
        cgpu_disable: Callable[[], bool] = lambda: False,
        shared: SerializeLock | None = None,
    ) -> None:
        self.node = node
        self.source = source
        self.gpus = gpus
        self.cdi = cdi_dir
        self.checkpoint = checkpoint
        self.visible: cdi.VisibleMode = visible
        self.cgpu_disable = cgpu_disable
        self._lock = threading.Lock()
        self._claims: dict[str, PreparedClaim] = {}
        self.shared = shared
        """The lock shared with another instance of a rolling update (None: this instance alone)."""
        self.on_change: list[Callable[[], None]] = []
        """Called after prepared claims change (memory enforcement wakes on it)."""
        self.reads = 0
        """Claims read from the API server (tests count idempotence with it)."""

    # --- start -------------------------------------------------------------------------------

    def restore(self) -> int:
        """Load the checkpoint and rewrite any CDI spec of a recorded claim that went missing.

        Returns:
            How many prepared claims were restored.

        Raises:
            OSError: the checkpoint's files cannot be read, or the journal cannot be folded in.
        """
        with nullcontext() if self.shared is None else self.shared.held():  # the other instance may be mid-call
            loaded = self.checkpoint.load()
            with self._lock:
                self._claims = dict(loaded.claims)
                claims = list(self._claims.items())
            for uid, claim in claims:
                problem = self._ensure_spec(uid, claim)
                if problem:  # that claim alone: kubelet's next call for it gets the error (`_again`)
                    log.error("%s", problem)
        if claims:
            log.info("restored %d prepared claim(s) from %s", len(claims), self.checkpoint.path)
        return len(claims)

    def prepared(self) -> dict[str, PreparedClaim]:
        """Claim UID -> what is prepared now (in a rolling update, read again if the other instance changed it)."""
        if self.shared is not None and self.checkpoint.changed():
            try:
                with self.shared.held(time.monotonic() + RELOAD_WAIT):
                    self._reload()
            except OSError as exc:  # what we knew stays; the next look tries again
                log.warning("cannot read the claims the other driver instance prepared: %s", protocol.error_reason(exc))
        with self._lock:
            return dict(self._claims)

    # --- the other instance of a rolling update ------------------------------------------------

    def _reload(self) -> None:
        """Take the claims from the checkpoint files, under the shared lock, if they changed since we last looked.

        Files unchanged since this process last read or wrote them (`CheckpointFile.changed`) mean
        nothing to read: an instance running alone pays two ``stat`` calls per call, not a read of
        every claim.
        """
        if not self.checkpoint.changed():
            return
        loaded = self.checkpoint.reload()
        with self._lock:
            changed = loaded.claims != self._claims
            self._claims = dict(loaded.claims)
        if changed:
            self._changed()

    def _one_at_a_time(
        self, refs: Sequence[ClaimRef], deadline: float | None, call: Callable[[], Mapping[str, _Outcome]]
    ) -> dict[str, _Outcome | str]:
        """``call`` under the lock shared with the other instance, after reading what it changed (if shared).

        The wait for the lock ends `ANSWER_RESERVE` before ``deadline``, so that the claims' error
        reaches kubelet before it stops waiting; the claims then fail, and kubelet retries.
        """
        if self.shared is None:
            return dict(call())
        with ExitStack() as held:
            reason = self._lock_and_reload(self.shared, held, deadline)
            if not reason:
                return dict(call())
        log.warning("%s", reason)
        return {ref.uid: reason for ref in dict.fromkeys(refs)}

    def _lock_and_reload(self, shared: SerializeLock, held: ExitStack, deadline: float | None) -> str:
        """Take ``shared`` into ``held`` and read what the other instance changed: "", or why the call cannot run.

        Only these errors are the claims' here: the call reports its own (an error it raises is not
        taken for the lock's).
        """
        try:
            held.enter_context(shared.held(None if deadline is None else deadline - ANSWER_RESERVE))
        except LockTimeoutError:
            return "another instance of the driver (a rolling update) held its lock until the call's deadline"
        except OSError as exc:
            return f"cannot take the lock shared with another driver instance: {protocol.error_reason(exc)}"
        try:
            self._reload()
        except OSError as exc:
            return f"cannot read the checkpoint {self.checkpoint.path}: {protocol.error_reason(exc)}"
        return ""

    # --- prepare -----------------------------------------------------------------------------

    def prepare(self, refs: Sequence[ClaimRef], deadline: float | None = None) -> dict[str, PreparedClaim | str]:
        """Prepare each claim; claim UID -> the prepared record, or the error to report for it.

        Args:
            refs: the claims kubelet names.
            deadline: when the caller stops waiting (`time.monotonic`; the gRPC call's deadline).
                Claims are read one after another, each read bounded by what is left of it less
                `ANSWER_RESERVE`; a claim not read by then fails alone, and the call still answers
                in time for the claims read (or already prepared).
        """
        return self._one_at_a_time(refs, deadline, lambda: self._prepare(refs, deadline))

    def _prepare(self, refs: Sequence[ClaimRef], deadline: float | None) -> dict[str, PreparedClaim | str]:
        reads_until = None if deadline is None else deadline - ANSWER_RESERVE
        results: dict[str, PreparedClaim | str] = {}
        fresh: dict[str, PreparedClaim] = {}
        for ref in dict.fromkeys(refs):  # a claim named twice is looked at once
            problem = _check_ref(ref)
            if problem:
                results[ref.uid] = problem
                continue
            with self._lock:
                known = self._claims.get(ref.uid)
            if known is not None:
                results[ref.uid] = self._again(ref, known)
                continue
            if ref.uid in fresh:
                results[ref.uid] = fresh[ref.uid]
                continue
            try:
                fresh[ref.uid] = self._build(ref, reads_until)
                results[ref.uid] = fresh[ref.uid]
            except ClaimRejectedError as exc:
                log.warning("NodePrepareResources: %s", exc.message)
                results[ref.uid] = exc.message
        if fresh:
            for uid, outcome in self._commit(fresh).items():
                results[uid] = outcome
        return results

    def _again(self, ref: ClaimRef, known: PreparedClaim) -> PreparedClaim | str:
        if (known.namespace, known.name) != (ref.namespace, ref.name):
            before = f"{known.namespace}/{known.name}"
            return f"claim UID {ref.uid} was prepared for {before}, not {ref.namespace}/{ref.name}"
        return self._ensure_spec(ref.uid, known) or known

    def _ensure_spec(self, uid: str, claim: PreparedClaim) -> str:
        """Rewrite a recorded claim's CDI spec if it went missing (the runtime needs it); "" or why not.

        A spec that cannot be read or written (EIO, EACCES, a directory in its place) fails that
        claim alone, never the call or the start.
        """
        where = f"claim {claim.namespace}/{claim.name}"
        try:
            if self.cdi.read(uid) is not None:
                return ""
        except OSError as exc:
            return f"{where}: cannot read its CDI spec: {exc.strerror or exc}"
        try:
            self.cdi.write(uid, cdi.spec(uid, claim.gpu, claim.env))
        except OSError as exc:
            return f"{where}: cannot write its CDI spec: {exc.strerror or exc}"
        log.warning("%s: its CDI spec was missing; rewritten", where)
        return ""

    def _build(self, ref: ClaimRef, reads_until: float | None = None) -> PreparedClaim:
        """Read (by ``reads_until``) and check one claim; what preparing it will record."""
        where = f"{ref.namespace}/{ref.name}"
        if reads_until is not None and time.monotonic() >= reads_until:
            raise ClaimRejectedError(f"cannot read claim {where}: no time left before the call's deadline "
                                     "(the API server answered too slowly for the claims before it)")
        try:
            self.reads += 1
            claim = self.source.claim(ref.namespace, ref.name, reads_until)
        except NotFound:
            raise ClaimRejectedError(f"claim {where} not found") from None
        except UndecodableReply as exc:  # a field of the wrong type, nested past the decoder: one line, bounded
            raise ClaimRejectedError(str(exc)) from None
        except KubeError as exc:
            raise ClaimRejectedError(f"cannot read claim {where}: {protocol.error_reason(exc)}") from None
        except ValueError as exc:  # dra_objects.InvalidObjectError: no name or namespace
            raise ClaimRejectedError(f"claim {where} cannot be decoded: {protocol.error_reason(exc)}") from None
        held = holding(claim, uid=ref.uid, node=self.node, gpus=self.gpus())
        env = cdi.container_env(held, self.visible, self.cgpu_disable())
        pods = tuple(
            ClaimPod(uid=consumer.uid[:64], name=consumer.name[:253])
            for consumer in claim.reserved_for[:MAX_RESERVED]
            if consumer.resource == "pods" and not consumer.api_group
        )
        return PreparedClaim(
            namespace=ref.namespace,
            name=ref.name,
            pool=self.node,
            gpu=held.gpu.index,
            gpu_uuid=held.gpu.uuid,
            memory_bytes=held.memory,
            cdi_ids=(protocol.dra_cdi_id(ref.uid, held.gpu.index),),
            devices=tuple(PreparedDevice(d.request, d.device, d.memory, d.share_id) for d in held.devices),
            env=env,
            pods=pods,
            prepared_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )

    def _commit(self, fresh: dict[str, PreparedClaim]) -> dict[str, PreparedClaim | str]:
        """Write the specs and save the checkpoint once; roll the call back if it cannot be saved."""
        outcome: dict[str, PreparedClaim | str] = {}
        with self._lock:
            written: list[str] = []
            for uid, claim in fresh.items():
                if uid in self._claims:  # a concurrent call prepared it meanwhile
                    outcome[uid] = self._claims[uid]
                    continue
                try:
                    self.cdi.write(uid, cdi.spec(uid, claim.gpu, claim.env))
                except OSError as exc:
                    reason = exc.strerror or exc
                    outcome[uid] = f"claim {claim.namespace}/{claim.name}: cannot write its CDI spec: {reason}"
                    continue
                written.append(uid)
            if not written:
                return outcome
            claims = dict(self._claims)
            claims.update((uid, fresh[uid]) for uid in written)
            try:
                self.checkpoint.record(Checkpoint(self.node, claims), prepared={uid: fresh[uid] for uid in written})
            except OSError as exc:
                for uid in written:
                    self._quietly_remove(uid)
                    outcome[uid] = f"cannot save the checkpoint: {exc.strerror or exc}"
                return outcome
            self._claims = claims
        for uid in written:
            claim = fresh[uid]
            outcome[uid] = claim
            log.info("prepared claim %s/%s: GPU %d, %d bytes (%s)", claim.namespace, claim.name, claim.gpu,
                     claim.memory_bytes, claim.cdi_ids[0])
        self._changed()
        return outcome

    def _quietly_remove(self, uid: str) -> None:
        try:
            self.cdi.remove(uid)
        except OSError as exc:
            log.error("cannot remove the CDI spec of claim %s: %s", uid, exc)

    # --- unprepare ---------------------------------------------------------------------------

    def unprepare(self, refs: Sequence[ClaimRef], deadline: float | None = None) -> dict[str, str]:
        """Unprepare each claim; claim UID -> "" when done, else the error to report.

        ``deadline`` bounds only the wait for the lock shared with another instance (a rolling update).
        """
        return self._one_at_a_time(refs, deadline, lambda: self._unprepare(refs))

    def _unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        results: dict[str, str] = {}
        removed: list[str] = []
        with self._lock:
            for ref in dict.fromkeys(refs):  # a claim named twice is removed and journalled once
                if not cgroups.valid_uid(ref.uid):
                    results[ref.uid] = f"claim UID {ref.uid[:64]!r} is not a UUID"
                    continue
                try:
                    self.cdi.remove(ref.uid)
                except OSError as exc:
                    results[ref.uid] = f"claim {ref.namespace}/{ref.name}: cannot remove its CDI spec: {exc.strerror}"
                    continue
                results[ref.uid] = ""
                if ref.uid in self._claims and ref.uid not in removed:
                    removed.append(ref.uid)
            if removed:
                claims = {uid: claim for uid, claim in self._claims.items() if uid not in removed}
                try:
                    self.checkpoint.record(Checkpoint(self.node, claims), unprepared=removed)
                except OSError as exc:  # the specs are gone; kubelet retries and the record follows
                    for uid in removed:
                        results[uid] = f"cannot save the checkpoint: {exc.strerror or exc}"
                    return results
                self._claims = claims
        for uid in removed:
            log.info("unprepared claim %s", uid)
        if removed:
            self._changed()
        return results

    def _changed(self) -> None:
        for callback in self.on_change:
            try:
                callback()
            except Exception:  # a listener's bug must not fail kubelet's call
                log.exception("prepared-claims listener failed")
