"""--enforce-memory with DRA: each pod a prepared claim is reserved for is held to the claim's memory on
its GPU (limits over a fake cgroup tree through the fake backend), and released when the claim is; so is
a pod that joins a shared claim later (found by the driver's watch of its node's pods), until it is gone."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from dra_helpers import NODE, Claims, Dirs
from node_agents import cgroup_tree
from waiting import wait_for

from kubectl_gpushare.dra import daemon
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.sandbox.builders import namespace_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
GIB = 1 << 30


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return cgroup_tree(tmp_path)


def test_a_pod_is_held_to_its_claims_memory(start_driver, dirs: Dirs, api: Client, claims: Claims,
                                            tree: Path) -> None:
    running = start_driver("2x16GiB", enforce_memory="hard", cgroup_root=str(tree))
    pod = claims.pod("train", {"a": "c1", "b": "c2"})
    claims.claim("c1", device="gpu-1", memory="4Gi", pods=[pod])
    claims.claim("c2", device="gpu-1", memory="2Gi", pods=[pod])
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        kubelet.prepare(pod)
        cgroup = tree / cgroups.pod_path(pod["metadata"]["uid"], "burstable", "cgroupfs")
        cgroup.mkdir()  # kubelet creates the pod's cgroup after preparing its claims
        backend = running.backend
        wait_for(lambda: backend.limits(1) == {str(cgroup): (6 * GIB, 6 * GIB)}, what="the pod's limit")
        assert backend.limits(0) == {}
        kubelet.unprepare(pod)
        wait_for(lambda: backend.limits(1) == {}, what="the limit cleared")


def pod_cgroup(tree: Path, pod: dict[str, Any]) -> Path:
    """The pod's cgroup, made as kubelet makes it after preparing the pod's claims."""
    cgroup = tree / cgroups.pod_path(pod["metadata"]["uid"], "burstable", "cgroupfs")
    cgroup.mkdir()
    return cgroup


def test_a_pod_that_joins_a_prepared_claim_is_held_to_it_until_it_is_gone(
    start_driver, dirs: Dirs, api: Client, claims: Claims, tree: Path, sandbox: Sandbox
) -> None:
    """kubelet does not call the driver for a pod joining a prepared claim; the driver's pod watch finds it."""
    running = start_driver("2x16GiB", enforce_memory="hard", cgroup_root=str(tree))
    a = claims.pod("a", {"gpu": "shared"})
    uid = claims.claim("shared", device="gpu-1", memory="4Gi", pods=[a]).metadata.uid
    backend = running.backend
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        kubelet.prepare(a)
        held_a = {str(pod_cgroup(tree, a)): (4 * GIB, 4 * GIB)}
        wait_for(lambda: backend.limits(1) == held_a, what="a's limit")
        b = claims.pod("b", {"gpu": "shared"})
        claims.reserve("shared", [a, b])  # the scheduler adds b
        kubelet.prepare(b)  # the claim is prepared: kubelet only adds b, the driver learns nothing
        assert [pod.name for pod in running.driver.preparer.prepared()[uid].pods] == ["a"]
        held_b = {str(pod_cgroup(tree, b)): (4 * GIB, 4 * GIB)}
        wait_for(lambda: backend.limits(1) == held_a | held_b, what="b's limit")
        assert backend.limits(0) == {}
        api.delete(types.PODS, "b", "default")
        wait_for(lambda: backend.limits(1) == held_a, what="b's limit cleared, a's kept")
    watches = {(r.verb, r.query.get("fieldSelector")) for r in sandbox.requests
               if "(dra-driver)" in r.user_agent and r.resource == "pods"}
    assert watches == {("list", f"spec.nodeName={NODE}"), ("watch", f"spec.nodeName={NODE}")}


def test_a_pod_the_claim_was_prepared_for_is_released_when_deleted_while_the_claim_stays_prepared(
    start_driver, dirs: Dirs, api: Client, claims: Claims, tree: Path
) -> None:
    """The record keeps b (reservedFor when prepared), but the watch saw b deleted: b holds nothing more."""
    running = start_driver("2x16GiB", enforce_memory="hard", cgroup_root=str(tree))
    a, b = claims.pod("a", {"gpu": "shared"}), claims.pod("b", {"gpu": "shared"})
    uid = claims.claim("shared", device="gpu-1", memory="4Gi", pods=[a, b]).metadata.uid
    backend = running.backend
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        kubelet.prepare(a)
        kubelet.prepare(b)
        held_a = {str(pod_cgroup(tree, a)): (4 * GIB, 4 * GIB)}
        held_b = {str(pod_cgroup(tree, b)): (4 * GIB, 4 * GIB)}
        wait_for(lambda: backend.limits(1) == held_a | held_b, what="a's and b's limits")
        api.delete(types.PODS, "b", "default")
        wait_for(lambda: backend.limits(1) == held_a, what="b's limit cleared, a's kept")
        assert [pod.name for pod in running.driver.preparer.prepared()[uid].pods] == ["a", "b"]


def test_pods_elsewhere_or_with_hostile_claims_get_no_limit_and_take_none(
    start_driver, dirs: Dirs, api: Client, claims: Claims, tree: Path, sandbox: Sandbox
) -> None:
    """A pod on another node, one naming the claim from another namespace, garbage claim statuses, a UID
    that is no UUID: none is limited, none clears the limit of the claim's pod, none stops the watch."""
    running = start_driver("2x16GiB", enforce_memory="hard", cgroup_root=str(tree))
    sandbox.load([namespace_object("other")])
    a = claims.pod("a", {"gpu": "shared"})
    claims.claim("shared", device="gpu-1", memory="4Gi", pods=[a])
    backend = running.backend
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        kubelet.prepare(a)
        held = {str(pod_cgroup(tree, a)): (4 * GIB, 4 * GIB)}
        wait_for(lambda: backend.limits(1) == held, what="a's limit")
        hostile = [
            claims.pod("elsewhere", {"gpu": "shared"}, node="gpu-node-2"),
            claims.pod("other-namespace", {"gpu": "shared"}, namespace="other"),
        ]
        sandbox.load([
            hostile_pod("statuses-not-a-list", "default", str(uuid.uuid4()), "not a list"),
            hostile_pod("status-names-a-path", "other", str(uuid.uuid4()),
                        [{"name": "gpu", "resourceClaimName": "../default/shared"}]),
            hostile_pod("status-names-another-namespace", "other", str(uuid.uuid4()),
                        [{"name": "gpu", "resourceClaimName": "shared", "namespace": "default"}]),
            hostile_pod("uid-not-a-uuid", "default", "../../../kubepods.slice", [{"name": "gpu"}], by_name=True),
        ])
        hostile += [sandbox.get("pods", ns, name) for ns, name in (
            ("default", "statuses-not-a-list"), ("other", "status-names-a-path"),
            ("other", "status-names-another-namespace"))]
        for pod in hostile:
            pod_cgroup(tree, pod)
        late = claims.pod("late", {"gpu": "shared"})  # a pod seen after all of them: the sync point
        claims.reserve("shared", [a, late])
        kubelet.prepare(late)
        joined = {str(pod_cgroup(tree, late)): (4 * GIB, 4 * GIB)}
        wait_for(lambda: backend.limits(1) == held | joined, what=lambda: f"only a and late limited: "
                 f"{backend.limits(1)}")
        for pod in hostile:
            api.delete(types.PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])
        api.delete(types.PODS, "late", "default")
        wait_for(lambda: backend.limits(1) == held, what="late's limit cleared, a's kept")
    assert backend.limits(0) == {}


def hostile_pod(name: str, namespace: str, uid: str, statuses: object, *, by_name: bool = False) -> dict[str, Any]:
    """A pod on NODE stored as is (no API validation): a claim entry by name or from a template, and ``statuses``."""
    entry: dict[str, Any] = {"name": "gpu"}
    entry["resourceClaimName" if by_name else "resourceClaimTemplateName"] = "shared"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "cuda"}], "resourceClaims": [entry]},
            "status": {"phase": "Running", "resourceClaimStatuses": statuses}}


def join_a_prepared_claim(dirs: Dirs, api: Client, claims: Claims) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pods a and b: a's claim ``shared`` (4 GiB of gpu-1) is prepared, then b joins it (kubelet only adds b)."""
    a = claims.pod("a", {"gpu": "shared"})
    claims.claim("shared", device="gpu-1", memory="4Gi", pods=[a])
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        kubelet.prepare(a)
        b = claims.pod("b", {"gpu": "shared"})
        claims.reserve("shared", [a, b])
        kubelet.prepare(b)
    return a, b


def test_without_enforcement_the_driver_reads_no_pod(
    start_driver, dirs: Dirs, api: Client, claims: Claims, sandbox: Sandbox
) -> None:
    running = start_driver("2x16GiB")
    join_a_prepared_claim(dirs, api, claims)
    assert running.driver.pod_claims is None
    driver_calls = [r for r in sandbox.requests if "(dra-driver)" in r.user_agent]
    assert any(r.resource == "resourceclaims" for r in driver_calls)  # the log holds the driver's calls
    assert not [r for r in driver_calls if r.resource == "pods"]


def test_a_restarted_driver_finds_joined_pods_again_before_its_first_pass(
    start_driver, dirs: Dirs, api: Client, claims: Claims, tree: Path
) -> None:
    """Joined pods are not checkpointed: the restarted driver lists the node's pods before its first pass,
    whose sweep of stale limits would otherwise clear the joined pod's limit until the list arrived."""
    settings = {"enforce_memory": "hard", "cgroup_root": str(tree)}
    first = start_driver("2x16GiB", **settings)
    backend = first.backend
    a, b = join_a_prepared_claim(dirs, api, claims)
    held = {str(pod_cgroup(tree, pod)): (4 * GIB, 4 * GIB) for pod in (a, b)}
    wait_for(lambda: backend.limits(1) == held, what="a's and b's limits")
    first.shutdown()
    calls = backend.limit_calls
    second = start_driver("2x16GiB", backend=backend, **settings)
    wait_for(lambda: second.driver.enforcer.passes >= 1 and second.driver.enforcer.applied().keys() == {
        (pod["metadata"]["uid"], 1) for pod in (a, b)}, what="the restarted driver's limits")
    assert backend.limits(1) == held
    assert backend.limit_calls - calls == 2, "each limit set once, b's never cleared in between"


def test_while_the_pods_cannot_be_listed_claims_are_prepared_and_their_first_pods_held_after_the_wait(
    start_driver, dirs: Dirs, api: Client, claims: Claims, tree: Path, sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The enforcer's wait for the first pod list is bounded and holds up nothing else: kubelet's calls are served."""
    monkeypatch.setattr(daemon, "SYNC_SECONDS", 0.5)
    unlisted = sandbox.inject(method="GET", path=r"/api/v1/pods\?", status=503)  # list and watch of the pods
    running = start_driver("2x16GiB", enforce_memory="hard", cgroup_root=str(tree))
    a = claims.pod("a", {"gpu": "mine"})
    uid = claims.claim("mine", device="gpu-1", memory="4Gi", pods=[a]).metadata.uid
    with KubeletSim(dirs.registration, api) as kubelet:
        kubelet.wait_registered()
        kubelet.prepare(a)
        held = {str(pod_cgroup(tree, a)): (4 * GIB, 4 * GIB)}
        wait_for(lambda: running.backend.limits(1) == held, what="a's limit, from the claim's record")
        assert unlisted.hits >= 1 and not running.driver.pod_claims.wait_synced(0)
        kubelet.unprepare(a)
        assert uid not in running.driver.preparer.prepared()
        wait_for(lambda: running.backend.limits(1) == {}, what="a's limit cleared")
