"""``kubectl gpushare explain`` through the real kubectl against the sandbox, live and from kubectl's dump."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from golden.explain import cases

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "explain"


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_kubectl_gpushare_explain_matches_golden_live_and_offline(
    name: str, sandbox: Sandbox, kubectl: Callable[..., Any], kube_env: dict[str, str], tmp_path: Path
) -> None:
    kube_env.pop("GPUSHARE_POLICY", None)
    sandbox.load(cases.seed())
    (tmp_path / "c.json").write_text(kubectl("get", "nodes,pods", "-A", "-o", "json").stdout)
    namespace, pod = cases.CASES[name]
    for suffix, flags in (("txt", []), ("json", ["-o", "json"])):
        for source in ([], ["--from-file", str(tmp_path / "c.json")]):
            result = kubectl("gpushare", "explain", pod, "-n", namespace, *flags, *source)
            assert result.stdout == (GOLDEN / f"{name}.{suffix}").read_text(), f"{name}.{suffix} {source}"


def test_live_explain_quotes_the_schedulers_event(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load(cases.seed())
    said = "0/4 nodes are available: 1 Insufficient GPU Memory in one device."
    event = {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "wants-8.1", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "wants-8"},
        "reason": "FailedScheduling", "message": said, "type": "Warning",
    }
    kubectl("apply", "-f", "-", input=json.dumps(event))
    text = kubectl("gpushare", "explain", "wants-8", "-n", "ml").stdout
    assert text.endswith(f"\nThe scheduler said:\n  {said}\n")
    missing = kubectl("gpushare", "explain", "ghost", "-n", "ml", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Failed due to pods "ghost" not found in namespace "ml"'
