"""The enforcement loop against the fake driver and a fake cgroup tree (both kubelet layouts)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.enforce import Enforcer, NodePods, PodShare
from kubectl_gpushare.node.fake_backend import FakeBackend, FakeOutOfMemoryError
from kubectl_gpushare.node.gpus import MEMORY_LIMIT_MAX

GiB = 1 << 30
UIDS = [f"00000000-0000-4000-8000-{i:012x}" for i in range(8)]


class Node:
    def __init__(self, root: Path, driver: cgroups.Driver, mode: str) -> None:
        self.root = root
        self.driver = driver
        (root / "cgroup.controllers").write_text("cpu memory dmem\n")
        for rel in cgroups.qos_dirs(driver).values():
            (root / rel).mkdir(parents=True, exist_ok=True)
        self.backend = FakeBackend.from_spec("2x16GiB", seed="n1")
        self.shares: list[PodShare] = []
        self.layout = cgroups.Layout(root=str(root), nvml_root=str(root))
        self.enforcer = Enforcer(self.backend, self.layout, mode, self.backend.devices, lambda: list(self.shares),
                                 resync=3600)
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self.enforcer.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def halt(self) -> None:
        self.stop.set()
        self.enforcer.wake()
        if self.thread:
            self.thread.join(5)

    def pod_cgroup(self, uid: str, qos: str = "burstable") -> Path:
        path = self.root / cgroups.pod_path(uid, qos, self.driver)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def add(self, uid: str, gpu: int, gib: int) -> None:
        self.shares.append(PodShare(uid, "default", f"p-{uid[-4:]}", gpu, gib * GiB))
        self.enforcer.wake()


@pytest.fixture(params=["systemd", "cgroupfs"])
def node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path, request.param, protocol.ENFORCE_HARD)
    yield n
    n.halt()


@pytest.mark.parametrize("qos", cgroups.QOS_CLASSES)
def test_limit_set_once_cgroup_appears_and_cleared_on_delete(node: Node, qos: str) -> None:
    node.start()
    wait_for(lambda: node.enforcer.passes >= 1, what="the first enforcement pass")
    before = node.enforcer.passes
    node.add(UIDS[0], 1, 4)
    wait_for(lambda: node.enforcer.passes > before, what="a pass that sees the new share")
    assert node.backend.limits(1) == {}  # no cgroup yet: nothing to limit
    cg = node.pod_cgroup(UIDS[0], qos)
    wait_for(lambda: node.backend.limits(1) == {str(cg): (4 * GiB, 4 * GiB)})
    # the driver now refuses an allocation past the share
    node.backend.allocate(1, str(cg), 3 * GiB)
    with pytest.raises(FakeOutOfMemoryError):
        node.backend.allocate(1, str(cg), 2 * GiB)
    node.shares.clear()
    node.enforcer.wake()
    wait_for(lambda: node.backend.limits(1) == {})
    assert node.enforcer.applied() == {}


def test_soft_mode_borrows_up_to_the_gpu(tmp_path: Path) -> None:
    n = Node(tmp_path, "cgroupfs", protocol.ENFORCE_SOFT)
    cg = n.pod_cgroup(UIDS[1])
    n.add(UIDS[1], 0, 2)
    n.enforcer.reconcile()
    assert n.backend.limits(0) == {str(cg): (2 * GiB, 16 * GiB)}
    n.backend.allocate(0, str(cg), 5 * GiB)  # past the soft limit: the pressure zone, allowed
    assert n.backend.get_memory_limits(n.backend.devices()[0].uuid, str(cg)).used == 5 * GiB


def test_restart_reconciles_and_clears_stale_limits(node: Node) -> None:
    live, gone = node.pod_cgroup(UIDS[2]), node.pod_cgroup(UIDS[3], "besteffort")
    node.add(UIDS[2], 0, 3)
    node.enforcer.reconcile()
    assert node.backend.limits(0) == {str(live): (3 * GiB, 3 * GiB)}
    # a previous run limited a pod that no longer holds a share; a fresh plugin starts
    node.backend.set_memory_limits(node.backend.devices()[0].uuid, str(gone), GiB, GiB)
    fresh = Enforcer(node.backend, node.layout, protocol.ENFORCE_HARD, node.backend.devices,
                     lambda: list(node.shares))
    fresh.reconcile()
    assert node.backend.limits(0) == {str(live): (3 * GiB, 3 * GiB)}
    assert set(fresh.applied()) == {(UIDS[2], 0)}


def test_node_pods_keep_a_live_pods_limit_and_lift_none_before_the_pods_are_known(node: Node) -> None:
    held, ended, leftover = node.pod_cgroup(UIDS[5]), node.pod_cgroup(UIDS[6]), node.pod_cgroup(UIDS[7])
    node.backend.set_memory_limits(node.backend.devices()[0].uuid, str(leftover), GiB, GiB)  # a previous run's
    shares = (PodShare(UIDS[5], "ns", "held", 0, 2 * GiB), PodShare(UIDS[6], "ns", "ended", 0, 3 * GiB))
    read = NodePods(shares, frozenset({UIDS[5], UIDS[6]}), known=False)
    enforcer = Enforcer(node.backend, node.layout, protocol.ENFORCE_HARD, node.backend.devices, lambda: read)
    enforcer.reconcile()  # before the pods were listed: limits are set, the leftover is not swept
    in_force = {str(held): (2 * GiB, 2 * GiB), str(ended): (3 * GiB, 3 * GiB), str(leftover): (GiB, GiB)}
    assert node.backend.limits(0) == in_force
    read = NodePods((), frozenset(), known=False)  # every share seems gone, and nothing says a pod ended
    enforcer.reconcile()
    assert node.backend.limits(0) == in_force
    # listed: "held" is alive with its share edited away (keeps its limit); "ended" ended; the leftover is swept
    read = NodePods((), frozenset({UIDS[5]}))
    enforcer.reconcile()
    assert node.backend.limits(0) == {str(held): (2 * GiB, 2 * GiB)}


@pytest.mark.parametrize(
    ("uid", "gpu", "size"),
    [("../../../etc", 0, GiB), ("ABCDEF00-0000-4000-8000-000000000004", 0, GiB), (UIDS[4], 0, 0), (UIDS[4], 0, -1),
     (UIDS[4], 0, 17 * GiB), (UIDS[4], 7, GiB), (UIDS[4], -1, GiB), (UIDS[4], 0, 2**70)],
)
def test_hostile_shares_never_produce_a_limit(node: Node, uid: str, gpu: int, size: int,
                                              caplog: pytest.LogCaptureFixture) -> None:
    node.pod_cgroup(UIDS[4])
    node.shares.append(PodShare(uid, "ns", "evil", gpu, size))
    node.enforcer.reconcile()
    node.enforcer.reconcile()
    assert node.backend.limits(0) == {} and node.backend.limits(1) == {}
    assert sum("no memory limit" in r.getMessage() for r in caplog.records) == 1


def test_unsupported_driver_and_mig_left_unenforced_with_reason(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    node.backend.set_limits_unsupported(0, "MIG is enabled")
    node.backend.set_limits_unsupported(1, "driver has no per-cgroup memory limits")
    cg = node.pod_cgroup(UIDS[5])
    node.add(UIDS[5], 0, 1)
    node.enforcer.reconcile()
    node.enforcer.reconcile()
    assert node.backend.limits(0) == {}
    assert [(s.enforcement, s.reason) for s in node.enforcer.status()] == [
        ("off", "MIG is enabled"), ("off", "driver has no per-cgroup memory limits")]
    assert sum("memory not enforced" in r.getMessage() for r in caplog.records) == 2
    node.backend.allocate(0, str(cg), 10 * GiB)  # sharing goes on unlimited


def test_cgroup_v1_is_unenforced(tmp_path: Path) -> None:
    n = Node(tmp_path, "cgroupfs", protocol.ENFORCE_HARD)
    (tmp_path / "cgroup.controllers").unlink()
    n.enforcer.reconcile()
    assert {s.enforcement for s in n.enforcer.status()} == {"off"}
    assert "cgroup v2" in n.enforcer.status()[0].reason


def test_nvml_error_is_retried(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    node.enforcer.reconcile()  # probe while healthy
    cg = node.pod_cgroup(UIDS[6])
    node.backend.fail_next(1, 3)
    node.add(UIDS[6], 1, 2)
    for _ in range(3):
        node.enforcer.reconcile()
    assert node.backend.limits(1) == {}
    retries = [r.getMessage() for r in caplog.records if "will retry" in r.getMessage()]
    assert len(retries) == 1 and re.match(r"GPU 1 \(\S+\): setting memory limits failed, will retry: ", retries[0])
    node.enforcer.reconcile()
    assert node.backend.limits(1) == {str(cg): (2 * GiB, 2 * GiB)}


def test_off_sets_nothing(tmp_path: Path) -> None:
    n = Node(tmp_path, "systemd", protocol.ENFORCE_OFF)
    n.pod_cgroup(UIDS[7])
    n.add(UIDS[7], 0, 1)
    n.enforcer.reconcile()
    assert n.backend.limits(0) == {} and n.backend.limit_calls == 0
    assert MEMORY_LIMIT_MAX == 2**64 - 1


def test_polling_finds_the_cgroup_where_inotify_is_not_available(tmp_path: Path) -> None:
    n = Node(tmp_path, "cgroupfs", protocol.ENFORCE_HARD)
    n.enforcer.use_inotify = False
    n.start()
    try:
        n.add(UIDS[7], 0, 1)
        cg = n.pod_cgroup(UIDS[7], "guaranteed")
        wait_for(lambda: n.backend.limits(0) == {str(cg): (GiB, GiB)})
        assert n.enforcer._watch is None
    finally:
        n.halt()


def test_inotify_watch_is_used_while_a_pod_waits(node: Node) -> None:
    node.start()
    node.add(UIDS[0], 0, 1)
    wait_for(lambda: node.enforcer._watch is not None)
    cg = node.pod_cgroup(UIDS[0], "besteffort")
    wait_for(lambda: node.backend.limits(0) == {str(cg): (GiB, GiB)})
