"""doctor names a pod bound around the extender, through the real kubectl against a sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def test_a_pod_bound_by_hand_with_gpu_memory_is_an_error(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load([
        namespace_object("ml"),
        node_object("gpu-a", [16, 16], ip="10.0.0.1"),
        pod_object("placed", "ml", [8], node="gpu-a", gpu=0, gpu_memory=16),
        pod_object("by-hand", "ml", [8], node="gpu-a", phase="Running"),
    ])
    report = json.loads(kubectl("gpushare", "doctor", "-o", "json", check=False).stdout)
    bypassed = [f for f in report["findings"] if f["check"] == "bypassed-extender"]
    assert [(f["severity"], f["object"]) for f in bypassed] == [("error", "pod/ml/by-hand")]
    text = kubectl("gpushare", "doctor", check=False).stdout
    assert "bypassed-extender" in text and "ml/by-hand" in text
