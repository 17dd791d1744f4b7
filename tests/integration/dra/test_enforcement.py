"""--enforce-memory with DRA: each pod a prepared claim is reserved for is held to the claim's memory on
its GPU (limits over a fake cgroup tree through the fake backend), and released when the claim is."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_helpers import Claims, Dirs
from node_agents import cgroup_tree
from waiting import wait_for

from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node import cgroups

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
