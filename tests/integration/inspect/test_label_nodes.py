"""kubectl gpushare label-nodes through the real kubectl, checked with kubectl get."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from kubectl_gpushare.inspect import command
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import node_object

pytestmark = pytest.mark.integration

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def seed(sandbox: Sandbox) -> None:
    sandbox.load(
        [
            node_object("gpu-a", [80, 80], ip="10.0.0.1", gpushare=False),
            node_object("gpu-b", [40], ip="10.0.0.2", gpushare=False),
            node_object("cpu-c", [], ip="10.0.0.3"),
        ]
    )


def labelled(kubectl: Kubectl) -> list[str]:
    return kubectl("get", "nodes", "-l", "gpushare=true", "-o", "name").stdout.split()


def test_all_labels_only_gpu_nodes_and_is_idempotent(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed(sandbox)
    dry = kubectl("gpushare", "label-nodes", "--all", "--dry-run")
    assert dry.stdout.splitlines() == ["node/gpu-a labeled (dry run)", "node/gpu-b labeled (dry run)"]
    assert labelled(kubectl) == []
    first = kubectl("gpushare", "label-nodes", "--all")
    assert first.stdout.splitlines() == ["node/gpu-a labeled", "node/gpu-b labeled"]
    assert labelled(kubectl) == ["node/gpu-a", "node/gpu-b"]
    sandbox.clear_requests()
    again = kubectl("gpushare", "label-nodes", "--all")
    assert all("already so" in line for line in again.stdout.splitlines())
    assert not [r for r in sandbox.requests if r.method == "PATCH"]


def test_named_node_remove_and_missing_node(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed(sandbox)
    kubectl("gpushare", "label-nodes", "gpu-b")
    assert labelled(kubectl) == ["node/gpu-b"]
    kubectl("gpushare", "label-nodes", "gpu-b", "--remove")
    assert labelled(kubectl) == []
    missing = kubectl("gpushare", "label-nodes", "nope", check=False)
    assert missing.returncode == command.EXIT_API
    assert missing.stderr.strip() == 'Failed due to nodes "nope" not found'
    usage = kubectl("gpushare", "label-nodes", "gpu-a", "--all", check=False)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1
    assert usage.stderr.startswith("error: name nodes, or pass --all / -l, not both")


def test_no_arguments_labels_every_nvidia_node_and_says_so(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed(sandbox)
    result = kubectl("gpushare", "label-nodes")
    assert result.stdout.splitlines() == ["node/gpu-a labeled", "node/gpu-b labeled"]
    assert labelled(kubectl) == ["node/gpu-a", "node/gpu-b"]
    removed = kubectl("gpushare", "label-nodes", "--remove")
    assert removed.stdout.splitlines() == ["node/gpu-a unlabeled", "node/gpu-b unlabeled"]
    sandbox.load([node_object("cpu-only", [], ip="10.0.0.9")])
    none = kubectl("gpushare", "label-nodes", "-l", "nope=x")
    assert none.stdout == "" and "no nodes matched the selector" in none.stderr
