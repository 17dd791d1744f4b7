"""Two replicas with leader election: one leader binds and is ready; handover without double allocation."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from waiting import holds_for, wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.schedsim import ExtenderCallError
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

FAST = {"leader_elect": True, "lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.25,
        "lease_namespace": "kube-system"}


def ready(ext) -> bool:  # type: ignore[no-untyped-def]
    return ext.running.app.handle("GET", "/readyz").status == 200


def wait_until(predicate: Callable[[], bool], timeout: float) -> float:
    """Wait for ``predicate``; how long it took (the handover times below are what is measured)."""
    started = time.monotonic()
    wait_for(predicate, timeout, getattr(predicate, "__name__", "the condition"))
    return time.monotonic() - started


def check_no_overcommit(sandbox: Sandbox) -> int:
    return check_no_overcommit_of(sandbox, 8)


def check_no_overcommit_of(sandbox: Sandbox, memory: int) -> int:
    used: dict[tuple[str, str], int] = {}
    for pod in sandbox.objects("pods"):
        node = pod["spec"].get("nodeName")
        ann = pod["metadata"].get("annotations") or {}
        if node and protocol.ANN_IDX in ann:
            key = (node, ann[protocol.ANN_IDX])
            used[key] = used.get(key, 0) + int(ann[protocol.ANN_POD])
    assert all(total <= memory for total in used.values()), used
    return sum(used.values())


@pytest.mark.parametrize("crash", [False, True], ids=["graceful", "crash"])
def test_only_the_leader_is_ready_and_a_killed_leader_hands_over(
    sandbox: Sandbox, extender_factory, crash: bool  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object(f"gpu-{i}", [8, 8], ip=f"10.0.0.{i}") for i in range(2)]
                 + [pod_object(f"p{i}", "default", [3]) for i in range(10)])
    a = extender_factory(identity="replica-a", **FAST)
    wait_until(lambda: ready(a), 10)
    b = extender_factory(identity="replica-b", release_lease=not crash, **FAST)
    b.wait_synced()
    holds_for(lambda: ready(a) and not ready(b), 0.6, "a leads and b does not, through a few election rounds")
    metrics = b.running.app.handle("GET", "/metrics").body.decode()
    assert "gpushare_extender_leader 0.0" in metrics
    pod0 = sandbox.get("pods", "default", "p0")
    with pytest.raises(ExtenderCallError, match="not the leader"):
        b.scheduler().bind(pod0, "gpu-0")
    lease = sandbox.get("leases", "kube-system", "gpushare-schd-extender")
    assert lease["spec"]["holderIdentity"] == "replica-a"

    # Binds flow through whichever replica is ready (the Service), while the leader is killed.
    stop = threading.Event()
    outcomes: list[str] = []

    def scheduler_loop() -> None:
        pending = [f"p{i}" for i in range(10)]
        while pending and not stop.is_set():
            target = a if ready(a) else b if ready(b) else None
            if target is None:
                time.sleep(0.05)  # the scheduler's retry pace while no replica is ready (the handover)
                continue
            name = pending[0]
            pod = sandbox.get("pods", "default", name)
            try:
                node = f"gpu-{len(outcomes) % 2}"
                target.scheduler().bind(pod, node)
                outcomes.append(name)
                pending.pop(0)
            except ExtenderCallError as exc:
                if "Insufficient" in str(exc):
                    pending.pop(0)
                time.sleep(0.05)  # the scheduler's retry pace after a refused bind

    loop = threading.Thread(target=scheduler_loop)
    loop.start()
    wait_until(lambda: len(outcomes) >= 2, 10)
    killed_at = time.monotonic()
    a.shutdown()  # graceful: releases the Lease; a crash is simulated on b's side below
    handover = wait_until(lambda: ready(b), 15)
    assert handover < 5  # the stopped leader released the Lease: no waiting for it to expire
    loop.join(30)
    stop.set()
    assert time.monotonic() - killed_at < 30
    total = check_no_overcommit(sandbox)
    assert total == 3 * len([p for p in sandbox.objects("pods") if p["spec"].get("nodeName")])
    assert json.loads(b.running.app.handle("GET", "/gpushare-scheduler/inspect").body)["nodes"]
    if crash:  # now b crashes without releasing: a new replica takes over after the lease expires
        c = extender_factory(identity="replica-c", **FAST)
        c.wait_synced()
        b.shutdown()
        took = wait_until(lambda: ready(c), 15)
        assert 1.0 < took < FAST["lease_duration"] + 2
        assert sandbox.get("leases", "kube-system", "gpushare-schd-extender")["spec"]["holderIdentity"] == "replica-c"


@pytest.mark.slow
def test_crashed_leader_is_replaced_within_15_s_with_default_timings(
    sandbox: Sandbox, extender_factory  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object("gpu-0", [8], ip="10.0.0.1")])
    a = extender_factory(identity="replica-a", leader_elect=True, release_lease=False)
    wait_until(lambda: ready(a), 10)
    b = extender_factory(identity="replica-b", leader_elect=True)
    b.wait_synced()
    a.shutdown()  # no Lease release: as if the process were killed
    took = wait_until(lambda: ready(b), 16)
    assert took < 15


def lease(sandbox: Sandbox) -> dict:  # type: ignore[type-arg]
    obj = sandbox.get("leases", "kube-system", "gpushare-schd-extender")
    assert obj is not None
    return obj


def test_lease_is_renewed_while_the_new_leader_catches_up_longer_than_the_lease_lasts(
    sandbox: Sandbox, extender_factory  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object("gpu-0", [8], ip="10.0.0.1")])
    # Pod lists take 4 s (> the 3 s lease): a's first list, then the re-list of its catch-up.
    slow = sandbox.inject("GET", r"^/api/v1/pods\?(?!.*watch=)", latency=4.0, times=2)
    a = extender_factory(identity="replica-a", **FAST)
    wait_until(lambda: sandbox.get("leases", "kube-system", "gpushare-schd-extender") is not None, 15)
    wait_until(lambda: slow.hits == 2, 5)  # a won and is catching up
    assert not ready(a)
    b = extender_factory(identity="replica-b", **FAST)
    b.wait_synced()
    renewals: set[str] = set()
    while not ready(a):
        spec = lease(sandbox)["spec"]
        assert spec["holderIdentity"] == "replica-a", "another replica took the lease during the catch-up"
        renewals.add(spec["renewTime"])
        assert not ready(b) and not b.running.elector.is_leader()
        assert len(renewals) < 100, "catch-up never finished"
        time.sleep(0.1)  # the sampling period of the renewals counted here (the thing under test)
    assert len(renewals) >= 5  # renewed every 0.25 s while catching up for about 4 s
    holds_for(lambda: lease(sandbox)["spec"]["holderIdentity"] == "replica-a" and ready(a) and not ready(b), 1.0,
              "a keeps the lease and b stays a follower once a caught up")


def test_leader_whose_renewals_fail_stops_leading_within_the_renew_deadline(
    sandbox: Sandbox, extender_factory  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object("gpu-0", [8], ip="10.0.0.1"), pod_object("p0", "default", [3])])
    a = extender_factory(identity="replica-a", **FAST)
    wait_until(lambda: ready(a), 10)
    failing = sandbox.inject(None, r"/leases/gpushare-schd-extender", status=500)
    started = time.monotonic()
    took = wait_until(lambda: not a.running.elector.is_leader(), FAST["renew_deadline"] + 2)
    assert took < FAST["lease_duration"] - 0.25, took  # by its clock (renew deadline 2 s), before the lease ends
    assert failing.hits > 0
    with pytest.raises(ExtenderCallError, match="not the leader"):
        a.scheduler().bind(sandbox.get("pods", "default", "p0"), "gpu-0")
    assert not ready(a)
    holds_for(lambda: not a.running.elector.is_leader(), FAST["lease_duration"] - (time.monotonic() - started),
              "a does not lead again before its lease would have ended")
    sandbox.clear_faults()
    wait_until(lambda: ready(a), 10)  # renewing again: it catches up and leads again


def test_graceful_handover_waits_for_a_binding_of_unknown_outcome(
    sandbox: Sandbox, extender_factory  # type: ignore[no-untyped-def]
) -> None:
    sandbox.load([node_object("gpu-0", [16], ip="10.0.0.1"), pod_object("a", "default", [10]),
                  pod_object("b", "default", [10])])
    a = extender_factory(identity="replica-a", request_timeout=2, **FAST)
    wait_until(lambda: ready(a), 10)
    b = extender_factory(identity="replica-b", **FAST)
    b.wait_synced()
    sandbox.inject("POST", r"/pods/a/binding", latency=3.0, after=True, times=1)  # lands after a's client gave up
    with pytest.raises(ExtenderCallError, match="outcome is unknown"):
        a.scheduler().bind(sandbox.get("pods", "default", "a"), "gpu-0")
    a.shutdown()  # graceful: the Lease is released only once the Binding has landed and been seen
    wait_until(lambda: ready(b), 10)
    with pytest.raises(ExtenderCallError, match="Insufficient GPU Memory"):
        b.scheduler().bind(sandbox.get("pods", "default", "b"), "gpu-0")
    assert check_no_overcommit_of(sandbox, 16) == 10


def hand_edited_lease(spec: dict[str, object]) -> dict[str, object]:
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gpushare-schd-extender", "namespace": "kube-system"},
            "spec": {"renewTime": now, "acquireTime": now, **spec}}


@pytest.mark.parametrize(("spec", "at_least", "at_most", "logged"), [
    ({"holderIdentity": "ghost", "leaseDurationSeconds": -5}, 2.5, 3.0 + 3, "leaseDurationSeconds -5"),
    ({"holderIdentity": "ghost", "leaseDurationSeconds": 0}, 2.5, 3.0 + 3, "leaseDurationSeconds 0"),
    ({"holderIdentity": "ghost", "leaseDurationSeconds": 10**15}, 11.5, 12.0 + 4, "leaseDurationSeconds 10000"),
    ({"leaseDurationSeconds": 10**15}, 0.0, 3.0, "names no holder"),
], ids=["negative", "zero", "huge", "no-holder"])
def test_hand_edited_lease_is_read_with_bounds_and_one_log_line(
    sandbox: Sandbox, extender_factory, caplog, spec, at_least, at_most, logged  # type: ignore[no-untyped-def]
) -> None:
    caplog.set_level("INFO", logger="kubectl_gpushare.extender.leader")
    sandbox.load([node_object("gpu-0", [8], ip="10.0.0.1"), pod_object("p0", "default", [3]),
                  hand_edited_lease(spec)])
    started = time.monotonic()
    ext = extender_factory(identity="replica-a", **FAST)
    wait_until(lambda: ready(ext), at_most + 5)
    took = time.monotonic() - started
    # Never sooner than our own lease duration after the last change (a negative one is no licence to
    # take a live leader's Lease), never later than 4 times it (a huge one is no licence to stall).
    assert at_least <= took <= at_most + 3, took
    lines = [r.getMessage() for r in caplog.records if logged in r.getMessage()]
    assert len(lines) == 1, lines
    ext.scheduler().bind(sandbox.get("pods", "default", "p0"), "gpu-0")
    assert sandbox.get("leases", "kube-system", "gpushare-schd-extender")["spec"]["holderIdentity"] == "replica-a"
    check_no_overcommit(sandbox)


@pytest.mark.parametrize("spec", [{"holderIdentity": ["ghost"]},
                                  {"holderIdentity": "ghost", "leaseDurationSeconds": "12"}],
                         ids=["holder-list", "duration-string"])
def test_lease_of_the_wrong_shape_is_one_log_line_not_a_traceback_a_round(
    sandbox: Sandbox, extender_factory, caplog, spec  # type: ignore[no-untyped-def]
) -> None:
    caplog.set_level("INFO", logger="kubectl_gpushare.extender.leader")
    sandbox.load([node_object("gpu-0", [8], ip="10.0.0.1"), hand_edited_lease(spec)])
    ext = extender_factory(identity="replica-a", **FAST)
    rounds = sum(r.resource == "leases" for r in sandbox.requests)
    wait_for(lambda: sum(r.resource == "leases" for r in sandbox.requests) >= rounds + 4, what="a few rounds")
    assert not ready(ext)  # nobody can tell who holds it: not taken
    mine = [r for r in caplog.records if r.name == "kubectl_gpushare.extender.leader"]
    assert not [r for r in mine if r.exc_info], "a traceback was logged"
    unreadable = [r.getMessage() for r in mine if "cannot be read" in r.getMessage()]
    assert len(unreadable) == 1 and "gpushare-schd-extender" in unreadable[0], unreadable
