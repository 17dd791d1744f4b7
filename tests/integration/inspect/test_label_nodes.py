"""kubectl gpushare label-nodes through the real kubectl, checked with kubectl get."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpushare.inspect import command
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

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


def seed_other_stacks(sandbox: Sandbox) -> None:
    """A fresh GPU node (GFD labels only) beside nodes whose GPUs other stacks already advertise."""
    from kubectl_gpushare.sandbox.stack_spec import stack_node_object

    def other(name: str, stack: str, **extra: Any) -> dict[str, Any]:
        return stack_node_object(name, stack, [16, 16], ip="10.0.1.1", product="Tesla-T4", labels={},
                                 annotations={}, **extra)

    fresh = node_object("fresh", [], ip="10.0.0.5", labels={"nvidia.com/gpu.present": "true"})
    sandbox.load([
        fresh,
        other("plain", "nvidia"),
        other("sliced", "nvidia", replicas=4),
        other("mig", "nvidia", mig={"1g.10gb": 7}),
        other("hami", "hami"),
        other("nano", "nano-gpu"),
    ])


SKIPPED = {
    "hami": "node/hami skipped: HAMi advertises nvidia.com/gpu; name it or pass --force to label it too",
    "mig": "node/mig skipped: NVIDIA's device plugin (MIG) advertises nvidia.com/gpu, nvidia.com/mig-1g.10gb;"
    " name it or pass --force to label it too",
    "nano": "node/nano skipped: nano-gpu advertises nano-gpu/gpu-percent; name it or pass --force to label it too",
    "plain": "node/plain skipped: NVIDIA's device plugin advertises nvidia.com/gpu; name it or pass --force to"
    " label it too",
    "sliced": "node/sliced skipped: NVIDIA's device plugin (time-slicing x4 on 2 GPUs, 16 MiB each) advertises"
    " nvidia.com/gpu; name it or pass --force to label it too",
}


def test_other_stacks_nodes_are_skipped_unless_named_or_forced(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed_other_stacks(sandbox)
    dry = kubectl("gpushare", "label-nodes", "--dry-run")
    expected = ["node/fresh labeled (dry run)"] + [f"{line} (dry run)" for _, line in sorted(SKIPPED.items())]
    assert sorted(dry.stdout.splitlines()) == sorted(expected)
    done = kubectl("gpushare", "label-nodes")
    assert sorted(done.stdout.splitlines()) == sorted(["node/fresh labeled", *SKIPPED.values()])
    assert labelled(kubectl) == ["node/fresh"]
    named = kubectl("gpushare", "label-nodes", "sliced")
    assert named.stdout == "node/sliced labeled\n"
    forced = kubectl("gpushare", "label-nodes", "--force")
    assert sorted(forced.stdout.splitlines()) == [
        "node/fresh not labeled (already so)", "node/hami labeled", "node/mig labeled", "node/nano labeled",
        "node/plain labeled", "node/sliced not labeled (already so)",
    ]
