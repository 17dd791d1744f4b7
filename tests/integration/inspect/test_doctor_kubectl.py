"""``kubectl gpushare doctor`` through the real kubectl against a seeded sandbox, live and --from-file."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "doctor"
_spec = importlib.util.spec_from_file_location("doctor_golden_cases", GOLDEN / "cases.py")
assert _spec is not None and _spec.loader is not None
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def test_every_finding_live_and_from_kubectls_dump(
    sandbox: Sandbox, kubectl: Callable[..., Any], tmp_path: Path
) -> None:
    sandbox.load(cases.seed())
    dump = kubectl("get", "nodes,pods,configmaps", "-A", "-o", "json").stdout
    (tmp_path / "cluster.json").write_text(dump)
    for golden, flags in (("doctor.txt", []), ("doctor.json", ["-o", "json"])):
        expected = (GOLDEN / golden).read_text()
        for source in ([], ["--from-file", str(tmp_path / "cluster.json")]):
            result = kubectl("gpushare", "doctor", *flags, *source, check=False)
            assert result.returncode == 2, result.stderr
            assert result.stdout == expected, f"{golden} {'offline' if source else 'live'}"


def test_a_healthy_cluster_is_clean(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    names = ("healthy", "fine", "extender", "plugin-healthy")
    sandbox.load([item for item in cases.seed() if item["metadata"]["name"] in names])
    result = kubectl("gpushare", "doctor")
    assert (result.returncode, result.stdout) == (0, "No problems found.\n")
