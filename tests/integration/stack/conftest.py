"""A sandbox with the whole stack (`cli.stack.running_stack`) in the test process, driven by the real kubectl."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from waiting import wait_for

from kubectl_gpushare.cli.stack import Stack, StackAttachment, running_stack
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import parse_spec

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


class StackCluster:
    """The running stack plus helpers that wait on conditions in the sandbox."""

    def __init__(self, sandbox: Sandbox, stack: Stack, kubectl: Kubectl) -> None:
        self.sandbox = sandbox
        self.stack = stack
        self.kubectl = kubectl

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        wait_for(predicate, timeout, what)

    def phases(self) -> dict[str, str]:
        """Pod name -> phase, for the test's pods (not the stack's own pods in kube-system)."""
        return {p["metadata"]["name"]: (p.get("status") or {}).get("phase", "") for p in self.sandbox.objects("pods")
                if p["metadata"].get("namespace") != "kube-system"}

    def node_gpu_mem(self, node: str) -> str | None:
        obj = self.sandbox.get("nodes", None, node) or {}
        return ((obj.get("status") or {}).get("allocatable") or {}).get("aliyun.com/gpu-mem")

    def label(self, node: str) -> None:
        self.kubectl("label", "node", node, "gpushare=true")
        self.wait(lambda: self.node_gpu_mem(node) not in (None, "0"), f"the device plugin on {node}")

    def create_pods(self, names: list[str], gib: int | str) -> None:
        items = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "binpack"}},
                "spec": {"containers": [{"name": "binpack", "image": "cheyang/gpu-player:v2",
                                         "resources": {"limits": {"aliyun.com/gpu-mem": str(gib)}}}]},
            }
            for name in names
        ]
        self.kubectl("create", "-f", "-", input="\n".join(json.dumps(item) for item in items))

    def wait_running(self, names: list[str], timeout: float = 30.0) -> None:
        self.wait(lambda: all(self.phases().get(n) == "Running" for n in names), f"{names} Running", timeout)


@pytest.fixture
def stack_cluster(sandbox: Sandbox, kubeconfig: Path, kubectl: Kubectl) -> Iterator[Callable[[str], StackCluster]]:
    """``stack_cluster(spec_yaml)``: load the spec (stack mode: GPUs are hardware) and start the stack."""
    with ExitStack() as stack:

        def start(spec: str, enforce: str = "off") -> StackCluster:
            attachment = StackAttachment()
            sandbox.load(attachment.prepare(parse_spec(spec)))
            running = stack.enter_context(running_stack(sandbox, kubeconfig, attachment.hardware, enforce=enforce))
            return StackCluster(sandbox, running, kubectl)

        yield start
