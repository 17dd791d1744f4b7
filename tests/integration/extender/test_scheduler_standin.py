"""The stack's scheduler stand-in asks the running extender about every pod kube-scheduler would.

kube-scheduler's ``HTTPExtender.IsInterested`` (pkg/scheduler/extender.go) calls an extender for a
pod when any container or init container *names* one of its managedResources in requests or
limits, whatever the amount; an extender with no managedResources is asked about every pod. A
stand-in that asked only when the amount was positive would bind a pod the real scheduler
leaves Pending with the extender's error.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.cli import noderesources
from kubectl_gpushare.cli.scheduler import SchedulerLoop, extenders_from_config
from kubectl_gpushare.cli.stack import scheduler_config_text
from kubectl_gpushare.extender.schedsim import ExtenderCallError
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


@pytest.fixture
def loop(sandbox: Sandbox, kubeconfig: Path, extender_factory: Callable[..., Any]) -> Iterator[SchedulerLoop]:
    """A scheduler stand-in configured from the shipped configuration, pointed at a synced extender."""
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory()
    ext.wait_synced()
    api = Client(load_config(str(kubeconfig)), component="test-scheduler")
    standin = SchedulerLoop(sandbox, api, extenders_from_config(scheduler_config_text(), ext.url))
    try:
        yield standin
    finally:
        standin.stop()
        api.close()


def _schedule(sandbox: Sandbox, loop: SchedulerLoop, pod: dict[str, Any]) -> str:
    sandbox.load([pod])
    stored = sandbox.get("pods", "default", pod["metadata"]["name"])
    assert stored is not None
    return loop.schedule(stored, sandbox.objects("nodes"), noderesources.usage(sandbox.objects("pods")))


def _gpu_mem_in_init_container_only() -> dict[str, Any]:
    pod = pod_object("init-gpu", "default", [0])
    quantity = {protocol.RESOURCE_MEM: "4"}
    pod["spec"]["initContainers"] = [{"name": "warm-up", "image": "busybox",
                                      "resources": {"limits": dict(quantity), "requests": dict(quantity)}}]
    return pod


def _gpu_mem_of_zero() -> dict[str, Any]:
    pod = pod_object("zero-gpu", "default", [0])
    quantity = {protocol.RESOURCE_MEM: "0"}
    pod["spec"]["containers"][0]["resources"] = {"limits": dict(quantity), "requests": dict(quantity)}
    return pod


@pytest.mark.parametrize("make", [_gpu_mem_in_init_container_only, _gpu_mem_of_zero], ids=["init-container", "zero"])
def test_a_pod_naming_gpu_mem_goes_to_the_extender_whatever_the_amount(
    sandbox: Sandbox, loop: SchedulerLoop, make: Callable[[], dict[str, Any]]
) -> None:
    pod = make()
    with pytest.raises(ExtenderCallError, match=f"requests no {protocol.RESOURCE_MEM}"):
        _schedule(sandbox, loop, copy.deepcopy(pod))
    stored = sandbox.get("pods", "default", pod["metadata"]["name"])
    assert stored is not None and not stored["spec"].get("nodeName"), "bound without asking the extender"


def test_a_pod_without_gpu_mem_is_bound_by_the_scheduler_itself(sandbox: Sandbox, loop: SchedulerLoop) -> None:
    node = _schedule(sandbox, loop, pod_object("cpu-only", "default", [0]))
    stored = sandbox.get("pods", "default", "cpu-only")
    assert node == "gpu-1" and stored is not None and stored["spec"]["nodeName"] == "gpu-1"
    assert protocol.ANN_IDX not in (stored["metadata"].get("annotations") or {})


@pytest.mark.parametrize("bad_spec", [{"taints": "x"}, {"taints": [1]}], ids=["taints-string", "taint-number"])
def test_a_node_with_unreadable_taints_fails_alone_and_the_loop_binds_on_the_others(
    sandbox: Sandbox, kubeconfig: Path, bad_spec: dict[str, Any]
) -> None:
    # The API refuses such a node over HTTP (400, as kube-apiserver's typed decoding); seeded into
    # storage directly, it still drops out alone (one unreadable object never stops the loop).
    bad = node_object("gpu-0", [], ip="10.0.0.1")
    bad["spec"] = {**bad.get("spec", {}), **bad_spec}
    sandbox.load([bad, node_object("gpu-1", [], ip="10.0.0.2")])
    api = Client(load_config(str(kubeconfig)), component="test-scheduler")
    try:
        sandbox.load([pod_object("cpu-only", "default", [0])])
        standin = SchedulerLoop(sandbox, api, [])
        standin.run_once()
        stored = sandbox.get("pods", "default", "cpu-only")
        assert stored is not None and stored["spec"].get("nodeName") == "gpu-1"
    finally:
        api.close()
