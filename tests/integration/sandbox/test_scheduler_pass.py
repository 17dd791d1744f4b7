"""One pod the sandbox's storage holds with fields of the wrong type never stops the stand-in's pass.

kube-apiserver decodes a pod into its Go struct and refuses such an object; the sandbox's storage
(`Sandbox.load`) may hold one, as an etcd written around the API server could. The scheduler
stand-in reads every pod each pass (its change signature, the nodes' usage, the order of the
queue): a pod it cannot read there is left out of the pass, logged once, and the others are scheduled.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.cli.scheduler import SchedulerLoop
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox
from tests.scheduler_loop import scheduler_loop

pytestmark = pytest.mark.integration


@pytest.fixture
def loop(sandbox: Sandbox, kubeconfig: Path) -> Iterator[SchedulerLoop]:
    """One Ready node and a scheduler stand-in driven by `run_once`."""
    sandbox.load([node_object("n1", [], ip="10.0.0.1")])
    with scheduler_loop(sandbox, kubeconfig) as standin:
        yield standin


def bound(sandbox: Sandbox, name: str) -> str:
    return str(((sandbox.get("pods", "default", name) or {}).get("spec") or {}).get("nodeName") or "")


def _with(path: str, value: object, *, bound_to: str = "") -> dict[str, Any]:
    pod = pod_object("hostile", "default", [0])
    if bound_to:
        pod["spec"]["nodeName"] = bound_to
    *parents, last = path.split(".")
    target = pod
    for key in parents:
        target = target.setdefault(key, {})
    target[last] = copy.deepcopy(value)
    return pod


@pytest.mark.parametrize(("hostile", "problem"), [
    (_with("spec", "x"), "spec is not an object"),
    (_with("status", "x"), "status is not an object"),
    (_with("status", "x", bound_to="n1"), "status is not an object"),
    (_with("metadata.creationTimestamp", 5), "metadata.creationTimestamp is not a string"),
    (_with("metadata.uid", [1]), "metadata.uid is not a string"),
    (_with("spec.schedulerName", [1]), "spec.schedulerName is not a string"),
    (_with("spec.nodeName", {"n": 1}), "spec.nodeName is not a string"),
    (_with("spec.containers", 5), None),  # read as no containers: nothing to log
], ids=["spec", "status", "status-bound", "creationTimestamp", "uid", "schedulerName", "nodeName", "containers"])
def test_a_pod_of_the_wrong_shape_fails_alone_and_the_others_are_scheduled(
        sandbox: Sandbox, loop: SchedulerLoop, caplog: pytest.LogCaptureFixture, hostile: dict[str, Any],
        problem: str | None) -> None:
    sandbox.load([hostile, pod_object("fine", "default", [0])])
    for _ in range(2):  # logged once, not every pass
        loop.run_once()
        sandbox.load([pod_object("nudge", "kube-system", [0])])  # a change: the next pass is not skipped
    assert bound(sandbox, "fine") == "n1"
    records = [r for r in caplog.records if r.name == "kubectl_gpushare.scheduler"]
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records]  # no traceback
    about = [r.getMessage() for r in records if "default/hostile" in r.getMessage()]
    assert about == ([f"pod default/hostile cannot be read ({problem}): "
                      + ("read with an empty status" if problem.startswith("status") else "it is not scheduled")]
                     if problem else []), about


@pytest.mark.parametrize("hostile", [
    _with("metadata.creationTimestamp", None), _with("metadata.uid", None, bound_to="n1"),
    _with("spec.nodeName", None), _with("spec.schedulerName", None), _with("metadata.resourceVersion", None),
], ids=["creationTimestamp", "uid-of-a-bound-pod", "nodeName", "schedulerName", "resourceVersion"])
def test_a_null_string_field_is_read_as_absent_as_go_decodes_it(
        sandbox: Sandbox, loop: SchedulerLoop, caplog: pytest.LogCaptureFixture, hostile: dict[str, Any]) -> None:
    # encoding/json leaves a string "" for null (decode.go literalStore). Before, a null creationTimestamp
    # met a string in the queue's sort (a bound pod's null uid in the signature's): every pass failed.
    sandbox.load([hostile, pod_object("fine", "default", [0])])
    loop.run_once()
    assert bound(sandbox, "fine") == "n1" and bound(sandbox, "hostile") == "n1"
    records = [r for r in caplog.records if r.name == "kubectl_gpushare.scheduler"]
    assert not [r for r in records if r.exc_info or "hostile" in r.getMessage()], [r.getMessage() for r in records]


def test_a_node_is_ready_by_its_first_ready_condition(sandbox: Sandbox, loop: SchedulerLoop) -> None:
    # The node lifecycle controller reads Ready with GetNodeCondition (pkg/controller/util/node), the
    # first condition of that type; a later duplicate does not lift node.kubernetes.io/not-ready.
    n1 = sandbox.get("nodes", "", "n1")
    assert n1 is not None
    n1["status"]["conditions"] = [{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]
    sandbox.load([n1, pod_object("p", "default", [0])])
    loop.run_once()
    assert bound(sandbox, "p") == ""
    stored = sandbox.get("pods", "default", "p")
    assert stored is not None
    message = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"][0]["message"]
    assert message == "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."
