"""``kubectl gpushare fit`` through the real kubectl against the sandbox: the same golden files as offline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from golden.fit import cases as fit_cases

from kubectl_gpushare.kube.errors import EXIT_FIT_SHORT
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden"



def cluster_objects(case: str) -> list[dict[str, Any]]:
    path = fit_cases.cluster_file(case)
    document = yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    return list(document["items"])


@pytest.mark.parametrize("name", sorted(fit_cases.CASES))
def test_kubectl_gpushare_fit_matches_golden(
    name: str, sandbox: Sandbox, kubectl: Callable[..., Any], kube_env: dict[str, str]
) -> None:
    kube_env.pop("GPUSHARE_POLICY", None)  # the goldens use the default policy unless they name one
    cluster, args = fit_cases.CASES[name]
    sandbox.load(cluster_objects(cluster))
    for suffix, flags in fit_cases.OUTPUTS.items():
        result = kubectl("gpushare", "fit", *args, *flags, check=False)
        assert result.returncode == (EXIT_FIT_SHORT if name in fit_cases.SHORT else 0), result.stderr
        assert result.stdout == (GOLDEN / "fit" / f"{name}.{suffix}").read_text(), f"{name}.{suffix} via kubectl"


def test_live_fit_reads_like_inspect_and_fails_like_it(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load(cluster_objects("s2"))
    bad = kubectl("gpushare", "fit", "4", "-l", "a in (", check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --selector") and bad.stdout == ""
    usage = kubectl("gpushare", "fit", "zero", check=False)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and usage.stderr.startswith("error: ")
