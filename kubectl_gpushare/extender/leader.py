"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Only the leader binds and reports ready, so with two replicas behind one Service kube-scheduler
always reaches the one whose ledger holds every reservation. The algorithm is client-go's:

- a candidate reads the Lease every ``retry_period``; it takes the Lease when it is free, released
  (empty holder) or expired, writing with the Lease's resourceVersion so two candidates cannot
  both win;
- expiry is judged by *this* process's monotonic clock from when it last saw the Lease change,
  never by comparing wall clocks across machines;
- the leader renews every ``retry_period`` and steps down when it has not renewed for
  ``renew_deadline``, which is shorter than ``lease_duration``, so it stops binding before anyone
  else can take over; `is_leader` turns false by the clock alone, even while a renewal request
  hangs;
- on winning, the catch-up (``on_started_leading``) runs in its own thread while the loop keeps
  renewing, as client-go runs ``OnStartedLeading`` beside it; the replica leads (binds, reports
  ready) only once the catch-up has finished and the Lease is still live;
- on a clean stop the leader releases the Lease (empty holder), so the other replica takes over
  within one retry period.

Timings default to 12 s / 8 s / 1 s (lease / renew deadline / retry) rather than client-go's
15 / 10 / 2, so that even a crashed leader is replaced within 15 s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from kubectl_gpushare.kube import errors
from kubectl_gpushare.kube.types import Lease, LeaseSpec

log = logging.getLogger("kubectl_gpushare.extender.leader")

MAX_LEASE_TRANSITIONS = 2**31 - 1
"""``leaseTransitions`` is an int32 (kubernetes/api coordination/v1 types.go): one more is refused,
and a Lease no replica could write again would leave the extender without a leader."""

MAX_LEASE_FACTOR = 4.0
"""A Lease's duration is believed up to this many times ours: a hand-edited huge one cannot stall takeover."""


class LeaseApi(Protocol):
    """The Lease calls leader election makes."""

    def get_lease(self, namespace: str, name: str) -> Lease:
        """Read the Lease; raises `errors.NotFound` if it does not exist."""

    def create_lease(self, namespace: str, name: str, spec: LeaseSpec) -> Lease:
        """Create the Lease; raises `errors.Conflict` if someone else created it first."""

    def replace_lease(self, namespace: str, name: str, spec: LeaseSpec, resource_version: str) -> Lease:
        """PUT the Lease with a resourceVersion precondition; raises `errors.Conflict` if stale."""


@dataclass(frozen=True)
class LeaderConfig:
    """Where the Lease lives, who we are, and the timings."""

    namespace: str
    name: str
    identity: str
    lease_duration: float = 12.0
    renew_deadline: float = 8.0
    retry_period: float = 1.0


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs the election loop in a thread; `is_leader` is what the binder and readiness ask."""

    def __init__(
        self,
        api: LeaseApi,
        config: LeaderConfig,
        *,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create an elector; call `start` to run it."""
        self.api = api
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self._leading = False
        self._last_renew = 0.0
        self._lock = threading.Lock()
        self._epoch = 0
        """Bumped whenever leadership begins or ends, so a stale catch-up cannot make us leader."""
        self._catching_up: threading.Thread | None = None
        self._acquired = False
        """Whether the last successful round took the Lease from another holder (or created it)."""
        self._observed: tuple[str, str, str] | None = None  # holder, renewTime, resourceVersion
        self._observed_at = 0.0
        self._warned: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_leader(self) -> bool:
        """Whether this replica leads now: caught up, and the Lease renewed within the renew deadline."""
        return self._leading and self.clock() - self._last_renew < self.config.renew_deadline

    def _live(self) -> bool:
        """Whether we hold the Lease by our last renewal (leading or still catching up)."""
        return self._last_renew > 0 and self.clock() - self._last_renew < self.config.renew_deadline

    def start(self) -> LeaderElector:
        """Start the election loop in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True, drain: Callable[[], object] = lambda: None) -> None:
        """Stop campaigning and step down.

        Args:
            release: give the Lease up so another replica takes over at once (False: a crash).
            drain: called after stepping down and before releasing, to let binds in flight finish.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.config.retry_period + 5)
        with self._lock:
            held = self._leading or self._catching_up is not None or self._live()
            self._epoch += 1  # a catch-up still running must not make us leader afterwards
            self._catching_up = None
        self._set_leading(False)
        if held:
            drain()
            if release:
                self._release()

    # --- loop ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock()  # a renewal counts from before its request: the Lease's renewTime
            try:
                won = self.try_acquire_or_renew()
            except errors.UndecodableReply as exc:  # a Lease of the wrong shape: say so once, not a warning a round
                self._warn_once(f"unreadable {exc}", logging.WARNING, "leader election: the lease cannot be read: %s; "
                                "not taking it until it is fixed or deleted", exc)
                won = False
            except errors.KubeError as exc:
                log.warning("leader election: %s", exc)
                won = False
            except Exception:  # a bug must not silently end the campaign while we still lead
                log.exception("leader election: unexpected error")
                won = False
            if won:
                if self._acquired and (self._leading or self._catching_up is not None):
                    log.warning("leader election: the lease was held by someone else meanwhile; catching up again")
                    self._step_down()
                self._last_renew = started
                if not self._leading and self._catching_up is None:
                    self._begin_leading()
            elif (self._leading or self._catching_up is not None) and not self._live():
                log.error("leader election: could not renew the lease for %.0f s; stepping down",
                          self.config.renew_deadline)
                self._step_down()
            elif self._observed and self._observed[0] != self.config.identity and (
                    self._leading or self._catching_up is not None):
                self._step_down()
            self._stop.wait(self.config.retry_period)

    def _begin_leading(self) -> None:
        """Run the catch-up beside the loop (as client-go runs OnStartedLeading), which keeps renewing."""
        log.info("leader election: %s acquired %s/%s; catching up before binding", self.config.identity,
                 self.config.namespace, self.config.name)
        with self._lock:
            self._epoch += 1
            epoch = self._epoch
            thread = threading.Thread(target=self._catch_up, args=(epoch,), name="leader-catch-up", daemon=True)
            self._catching_up = thread
        thread.start()

    def _catch_up(self, epoch: int) -> None:
        try:
            self.on_started_leading()
        except Exception as exc:  # no leadership on a failed catch-up: the loop starts another
            log.error("leader election: catching up failed (%s); not leading yet", exc)
            with self._lock:
                if self._epoch == epoch:
                    self._catching_up = None
            return
        with self._lock:
            if self._epoch != epoch:
                return  # stepped down (or stopped) meanwhile
            self._catching_up = None
            if self._stop.is_set() or not self._live():
                log.warning("leader election: the lease lapsed while catching up; not leading")
                return
            self._leading = True
        log.info("leader election: %s became the leader of %s/%s", self.config.identity,
                 self.config.namespace, self.config.name)

    def _step_down(self) -> None:
        with self._lock:
            self._epoch += 1
            self._catching_up = None
        self._set_leading(False)

    def _set_leading(self, leading: bool) -> None:
        """Called with False to step down (leading starts in `_catch_up`, once caught up)."""
        with self._lock:
            was, self._leading = self._leading, leading
        if was and not leading:
            log.info("leader election: %s stopped leading", self.config.identity)
            self.on_stopped_leading()

    def try_acquire_or_renew(self) -> bool:
        """One round: take or renew the Lease if we may; True if we hold it afterwards."""
        cfg = self.config
        now = _now_micro()
        try:
            lease = self.api.get_lease(cfg.namespace, cfg.name)
        except errors.NotFound:
            spec = LeaseSpec(holder_identity=cfg.identity, lease_duration_seconds=round(cfg.lease_duration),
                             acquire_time=now, renew_time=now, lease_transitions=0)
            try:
                self.api.create_lease(cfg.namespace, cfg.name, spec)
            except errors.Conflict:
                return False
            self._observe(cfg.identity, now, "")
            self._acquired = True
            return True
        spec = lease.spec
        holder = spec.holder_identity or ""
        self._observe(holder, spec.renew_time or "", lease.metadata.resource_version)
        if not holder and not self._leading:
            self._warn_once("no holder", logging.INFO, "leader election: the lease %s/%s names no holder "
                            "(released, or edited by hand); taking it", cfg.namespace, cfg.name)
        held_by_other = holder and holder != cfg.identity
        if held_by_other and self.clock() - self._observed_at < self._duration(spec.lease_duration_seconds):
            return False
        transitions = spec.lease_transitions or 0
        new = LeaseSpec(
            holder_identity=cfg.identity,
            lease_duration_seconds=round(cfg.lease_duration),
            acquire_time=spec.acquire_time if holder == cfg.identity else now,
            renew_time=now,
            lease_transitions=transitions if holder == cfg.identity else min(transitions + 1, MAX_LEASE_TRANSITIONS),
        )
        try:
            updated = self.api.replace_lease(cfg.namespace, cfg.name, new, lease.metadata.resource_version)
        except errors.Conflict:
            return False
        self._observe(cfg.identity, now, updated.metadata.resource_version)
        self._acquired = holder != cfg.identity
        return True

    def _duration(self, seconds: object) -> float:
        """The Lease's duration, bounded: not below ours (two leaders), not above `MAX_LEASE_FACTOR` x ours (stall)."""
        ours = self.config.lease_duration
        longest = MAX_LEASE_FACTOR * ours
        if seconds is None:
            return ours
        if not isinstance(seconds, int) or isinstance(seconds, bool) or not ours <= seconds <= longest:
            bounded = ours if not isinstance(seconds, int) or seconds < ours else longest
            shown = str(seconds)[:40]
            self._warn_once(f"duration {shown}", logging.WARNING, "leader election: the lease %s/%s has "
                            "leaseDurationSeconds %s; waiting %.0f s for it instead", self.config.namespace,
                            self.config.name, shown, bounded)
            return bounded
        return float(seconds)

    def _warn_once(self, key: str, level: int, message: str, *args: object) -> None:
        if key not in self._warned:
            if len(self._warned) > 100:
                self._warned.clear()
            self._warned.add(key)
            log.log(level, message, *args)

    def _observe(self, holder: str, renew_time: str, resource_version: str) -> None:
        record = (holder, renew_time, resource_version)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock()

    def _release(self) -> None:
        cfg = self.config
        try:
            lease = self.api.get_lease(cfg.namespace, cfg.name)
            if lease.spec.holder_identity != cfg.identity:
                return
            now = _now_micro()
            self.api.replace_lease(cfg.namespace, cfg.name, LeaseSpec(
                holder_identity="", lease_duration_seconds=1, acquire_time=now, renew_time=now,
                lease_transitions=lease.spec.lease_transitions or 0), lease.metadata.resource_version)
            log.info("leader election: released %s/%s", cfg.namespace, cfg.name)
        except errors.KubeError as exc:
            log.warning("leader election: could not release the lease: %s", exc)
