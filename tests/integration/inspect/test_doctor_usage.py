"""doctor's ``memory-unenforced`` (from the node annotation) and ``gpu-over-share`` (``--usage``, from the plugins)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import usage_standin
from usage_standin import GIB, plugins, report

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.errors import EXIT_FINDINGS_ERRORS
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def _with_enforcement(node: dict[str, Any], *entries: dict[str, Any]) -> dict[str, Any]:
    memory = int(node["status"]["capacity"][protocol.RESOURCE_MEM]) // len(entries)
    gpus = [{"index": index, "memory": memory, **extra} for index, extra in enumerate(entries)]
    node["metadata"].setdefault("annotations", {})[protocol.ANN_NODE_GPUS] = protocol.format_node_gpus(gpus)
    return node


def _findings(kubectl: Callable[..., Any], *flags: str) -> tuple[int, list[tuple[str, str, str]], list[str], str]:
    result = kubectl("gpushare", "doctor", "-o", "json", "--request-timeout", "2s", *flags, check=False)
    found = json.loads(result.stdout)["findings"]
    wanted = ("memory-unenforced", "gpu-over-share")
    return (result.returncode, [(f["severity"], f["check"], f["object"]) for f in found if f["check"] in wanted],
            [f["message"] for f in found if f["check"] in wanted], result.stderr)  # fmt: skip


def test_gpus_that_cannot_be_enforced_are_a_warning_with_the_reason(
    sandbox: Sandbox, kubectl: Callable[..., Any]
) -> None:
    objects = usage_standin.cluster()
    _with_enforcement(objects[0], {"enforcement": "off", "enforcementReason": "driver 550.54 is older than r615"},
                      {"enforcement": "hard"})  # fmt: skip
    _with_enforcement(objects[1], {"enforcement": "off", "enforcementReason": ""})  # --enforce-memory off: a choice
    _with_enforcement(objects[2], {"enforcement": "off", "enforcementReason": "MIG is enabled"})
    sandbox.load(objects)
    _, found, messages, _ = _findings(kubectl)
    assert found == [("warning", "memory-unenforced", "node/alpha"), ("warning", "memory-unenforced", "node/charlie")]
    assert messages[0] == ("GPU 0 shared without the memory limits the device plugin was asked for: a pod can take "
                           "its neighbours' memory (driver 550.54 is older than r615)")  # fmt: skip
    assert messages[1].endswith("(MIG is enabled)")


def test_a_pod_over_its_share_is_an_error_beside_unenforced_neighbours(
    sandbox: Sandbox, kubectl: Callable[..., Any]
) -> None:
    sandbox.load(usage_standin.cluster())
    with plugins(sandbox) as standins:
        # bravo: one pod alone over its share on an enforced GPU (soft limits let it borrow): a warning.
        standins["bravo"].body = report(
            "bravo", [protocol.UsageGpu(0, "u", 8 * GIB, 3 * GIB, 5 * GIB, protocol.ENFORCE_SOFT)],
            [protocol.UsagePod("team-b", "server", "uid-server", 0, 3 * GIB, 4 * GIB, 8 * GIB, 3 * GIB)],
        )  # fmt: skip
        standins["charlie"].hang.set()
        code, found, messages, stderr = _findings(kubectl, "--usage")
    assert code == EXIT_FINDINGS_ERRORS
    assert found == [
        ("error", "gpu-over-share", "pod/team-a/greedy"), ("warning", "gpu-over-share", "pod/team-b/server")
    ]
    assert messages[0] == ("uses 6656Mi of GPU 0 on alpha, more than its share of 2048Mi: 1 other pod(s) share GPU 0 "
                           "without memory limits and may run out of memory")  # fmt: skip
    assert "charlie: timed out" in stderr
    without = _findings(kubectl)[1]
    assert without == []  # no --usage: no plugin is asked


def test_usage_needs_a_cluster(kubectl: Callable[..., Any], tmp_path: Any) -> None:
    (tmp_path / "empty.json").write_text('{"kind": "List", "items": []}')
    result = kubectl("gpushare", "doctor", "--usage", "--from-file", str(tmp_path / "empty.json"), check=False)
    assert result.returncode == 2 and "--usage" in result.stderr
