"""The example spec file: it loads, `sandbox --help` and the README point at it, and it runs with --stack."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from kubectl_gpushare.sandbox.command import SPEC_EXAMPLE
from kubectl_gpushare.sandbox.spec import load_spec

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_the_example_ships_and_loads() -> None:
    shipped = resources.files("kubectl_gpushare.sandbox") / "examples" / "cluster.yaml"
    assert shipped.read_text() == (ROOT / SPEC_EXAMPLE).read_text()
    kinds = [obj["kind"] for obj in load_spec(ROOT / SPEC_EXAMPLE)]
    # 4 gpushare/CPU nodes and 5 of other schedulers; 3 gpushare pods, 6 others and KAI's reservation pod.
    assert kinds.count("Node") == 9 and kinds.count("Pod") == 10 and "ConfigMap" in kinds


def test_help_and_readme_point_at_the_example() -> None:
    script = Path(sys.executable).parent / "kubectl-gpushare"
    help_text = subprocess.run([str(script), "sandbox", "--help"], capture_output=True, text=True, timeout=60,
                               check=True).stdout
    assert SPEC_EXAMPLE in " ".join(help_text.split()).replace("- ", "-")
    assert "--stack" in help_text
    assert SPEC_EXAMPLE in (ROOT / "README.md").read_text()


def test_the_example_runs_with_the_stack(stack_cluster) -> None:  # type: ignore[no-untyped-def]
    cluster = stack_cluster((ROOT / SPEC_EXAMPLE).read_text())
    cluster.wait_running(["waiting"])  # placed on the labelled mixed node, beside the seeded pods
    assert cluster.node_gpu_mem("t4-node") is None
    cluster.label("t4-node")
    assert "t4-node" in cluster.kubectl("inspect", "gpushare").stdout
