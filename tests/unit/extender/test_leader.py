"""Leader election rounds against an in-memory Lease store, with a hand-driven clock."""

from __future__ import annotations

import itertools
import threading
import time

from waiting import wait_for

from kubectl_gpushare.extender.leader import LeaderConfig, LeaderElector
from kubectl_gpushare.kube import errors
from kubectl_gpushare.kube.types import Lease, LeaseSpec, ObjectMeta


class LeaseStore:
    """Stand-in for the API server's Lease endpoint: create fails if present, replace checks the RV.

    Differs from the real API server in keeping one Lease only and in having no watch.
    """

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.versions = itertools.count(1)
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise errors.ServerError(500, "InternalError", "etcd unavailable")

    def get_lease(self, namespace: str, name: str) -> Lease:
        self._check()
        if self.lease is None:
            raise errors.NotFound(404, "NotFound", "no lease")
        return self.lease

    def create_lease(self, namespace: str, name: str, spec: LeaseSpec) -> Lease:
        self._check()
        if self.lease is not None:
            raise errors.Conflict(409, "AlreadyExists", "exists")
        self.lease = Lease(ObjectMeta(name=name, namespace=namespace, resource_version=str(next(self.versions))), spec)
        return self.lease

    def replace_lease(self, namespace: str, name: str, spec: LeaseSpec, resource_version: str) -> Lease:
        self._check()
        if spec.lease_transitions is not None and not 0 <= spec.lease_transitions < 2**31:
            # leaseTransitions is an int32 (kubernetes/api coordination/v1 types.go), never negative
            # (kubernetes/kubernetes pkg/apis/coordination/validation): the API server refuses others.
            raise errors.ApiError(400, "BadRequest", "leaseTransitions out of range")
        assert self.lease is not None
        if self.lease.metadata.resource_version != resource_version:
            raise errors.Conflict(409, "Conflict", "stale")
        self.lease = Lease(ObjectMeta(name=name, namespace=namespace, resource_version=str(next(self.versions))), spec)
        return self.lease


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(store: LeaseStore, clock: Clock, identity: str) -> LeaderElector:
    return LeaderElector(store, LeaderConfig("kube-system", "lease", identity, 12.0, 8.0, 1.0), clock=clock)


def test_first_candidate_creates_the_lease_and_others_wait_until_it_expires() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.now += 11.0
    assert not b.try_acquire_or_renew()  # b saw the record 11 s ago: not expired yet
    clock.now += 1.5
    assert b.try_acquire_or_renew()
    assert store.lease is not None and store.lease.spec.holder_identity == "b"
    assert store.lease.spec.lease_transitions == 1


def test_renewals_keep_the_lease_and_reset_the_observed_time() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    a.try_acquire_or_renew()
    for _ in range(30):
        clock.now += 1.0
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()


def test_released_lease_is_taken_at_once() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    a.try_acquire_or_renew()
    a._leading = True
    a._release()
    assert store.lease is not None and store.lease.spec.holder_identity == ""
    assert b.try_acquire_or_renew()


def test_of_two_candidates_racing_for_an_expired_lease_only_one_wins() -> None:
    store, clock = LeaseStore(), Clock()
    elector(store, clock, "a").try_acquire_or_renew()
    b, c = elector(store, clock, "b"), elector(store, clock, "c")
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.now += 13
    stale = store.lease  # c read the lease before b's write landed
    assert b.try_acquire_or_renew()

    class StaleRead(LeaseStore):
        def get_lease(self, namespace: str, name: str) -> Lease:
            assert stale is not None
            return stale

    racing = StaleRead()
    racing.lease, racing.versions = store.lease, store.versions
    c.api = racing
    assert not c.try_acquire_or_renew()  # its write carries the old resourceVersion: conflict
    assert racing.lease is not None and racing.lease.spec.holder_identity == "b"


def test_leader_that_cannot_renew_steps_down_before_the_lease_expires() -> None:
    store, clock = LeaseStore(), Clock()
    a = elector(store, clock, "a")
    assert a.try_acquire_or_renew()
    a._last_renew, a._leading = clock.now, True
    assert a.is_leader()
    store.fail = True
    clock.now += 7.9
    assert a.is_leader()
    clock.now += 0.2  # past the renew deadline (8 s), before the lease duration (12 s)
    assert not a.is_leader()


def test_stop_steps_down_drains_then_releases() -> None:
    store, clock = LeaseStore(), Clock()
    order: list[str] = []
    a = LeaderElector(store, LeaderConfig("kube-system", "lease", "a"), clock=clock,
                      on_stopped_leading=lambda: order.append("stopped"))
    a.try_acquire_or_renew()
    a._leading, a._last_renew = True, clock.now
    a.stop(drain=lambda: order.append("drained" if not a.is_leader() else "drained-while-leading"))
    assert order == ["stopped", "drained"]
    assert store.lease is not None and store.lease.spec.holder_identity == ""


def test_catch_up_runs_beside_renewals_and_leading_waits_for_it() -> None:
    store, gate, calls = LeaseStore(), threading.Event(), []
    a = LeaderElector(store, LeaderConfig("kube-system", "lease", "a", 1.0, 0.6, 0.05),
                      on_started_leading=lambda: (calls.append(1), gate.wait(10))).start()
    try:
        wait_for(lambda: store.lease is not None)
        renewals: set[str | None] = set()
        started = time.monotonic()
        while time.monotonic() - started < 1.5:  # longer than the lease lasts
            assert store.lease is not None and store.lease.spec.holder_identity == "a"
            renewals.add(store.lease.spec.renew_time)
            assert not a.is_leader()  # not before the catch-up has finished
            time.sleep(0.02)  # the sampling period of the renewals counted over the window (the thing under test)
        assert len(renewals) >= 5
        gate.set()
        wait_for(a.is_leader)
        assert calls == [1]
    finally:
        gate.set()
        a.stop()


def test_catch_up_finishing_after_the_lease_lapsed_does_not_lead_and_a_new_term_catches_up_again() -> None:
    store, gate, calls = LeaseStore(), threading.Event(), []
    a = LeaderElector(store, LeaderConfig("kube-system", "lease", "a", 1.0, 0.3, 0.05),
                      on_started_leading=lambda: (calls.append(1), gate.wait(10))).start()
    try:
        wait_for(lambda: calls == [1])
        catch_up = a._catching_up
        assert catch_up is not None
        store.fail = True  # renewals fail while catching up
        wait_for(lambda: not a._live(), what="the lease to lapse by a's clock (renew deadline 0.3 s)")
        gate.set()
        wait_for(lambda: not catch_up.is_alive(), what="the catch-up to return")
        assert not a.is_leader()
        store.fail = False
        wait_for(a.is_leader)
        assert calls == [1, 1]  # leadership began again with a fresh catch-up
    finally:
        gate.set()
        a.stop()


def test_a_lease_at_the_int32_limit_of_transitions_can_still_be_taken_over() -> None:
    store, clock = LeaseStore(), Clock()
    store.lease = Lease(ObjectMeta(name="lease", namespace="kube-system", resource_version="1"),
                        LeaseSpec(holder_identity="", lease_duration_seconds=12, lease_transitions=2**31 - 1))
    b = elector(store, clock, "b")
    assert b.try_acquire_or_renew()
    assert store.lease.spec.holder_identity == "b" and store.lease.spec.lease_transitions == 2**31 - 1
