"""Shell completion through the real kubectl (``kubectl __complete ...``) with our completers on PATH.

kubectl (1.26+) looks for ``kubectl_complete-<plugin path>`` executables (``plugin_completion.go``):
``kubectl_complete-gpushare`` for ``kubectl gpushare`` and ``kubectl_complete-inspect-gpushare``
for ``kubectl inspect gpushare``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def seed(sandbox: Sandbox) -> None:
    sandbox.load([
        namespace_object("ml"), namespace_object("mlops"), namespace_object("web"),
        node_object("gpu-a", [16], ip="10.0.0.1"), node_object("gpu-b", [16], ip="10.0.0.2"),
        node_object("cpu-c", [], ip="10.0.0.3"),
        pod_object("trainer", "ml", [4], node="gpu-a", gpu=0), pod_object("tuner", "ml", [4]),
        pod_object("frontend", "web", [0]),
    ])


def completions(kubectl: Kubectl, *words: str) -> list[str]:
    """The values kubectl offers (descriptions and its directive line dropped)."""
    result = kubectl("__complete", *words)
    lines = result.stdout.splitlines()
    assert lines and lines[-1].startswith(":"), result.stdout
    return [line.split("\t")[0] for line in lines[:-1]]


def test_both_plugins_complete_node_names(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed(sandbox)
    assert completions(kubectl, "inspect", "gpushare", "gpu-") == ["gpu-a", "gpu-b"]
    assert completions(kubectl, "inspect", "gpushare", "") == ["cpu-c", "gpu-a", "gpu-b"]
    assert completions(kubectl, "gpushare", "inspect", "g") == ["gpu-a", "gpu-b"]
    assert completions(kubectl, "gpushare", "label-nodes", "c") == ["cpu-c"]


def test_flags_choices_and_subcommands(sandbox: Sandbox, kubectl: Kubectl) -> None:
    assert completions(kubectl, "inspect", "gpushare", "--so") == ["--sort"]
    assert completions(kubectl, "inspect", "gpushare", "-o", "")[:2] == ["json", "yaml"]
    assert {"fit", "doctor", "explain", "inspect"} <= set(completions(kubectl, "gpushare", ""))


def test_namespaces_and_pods_follow_n(sandbox: Sandbox, kubectl: Kubectl) -> None:
    seed(sandbox)
    assert completions(kubectl, "inspect", "gpushare", "-n", "ml") == ["ml", "mlops"]
    assert completions(kubectl, "gpushare", "explain", "-n", "ml", "t") == ["trainer", "tuner"]
    assert completions(kubectl, "gpushare", "explain", "-n", "web", "") == ["frontend"]
    assert completions(kubectl, "gpushare", "explain", "-A", "f") == ["frontend"]
    assert completions(kubectl, "gpushare", "explain", "-n", "Bad_NS", "") == [], "an impossible -n completes nothing"


def test_contexts_come_from_the_kubeconfig(sandbox: Sandbox, kubectl: Kubectl, kubeconfig: Path) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    extra = dict(config["contexts"][0], name="staging")
    config["contexts"].append(extra)
    kubeconfig.write_text(yaml.safe_dump(config))
    names = completions(kubectl, "gpushare", "doctor", "--context", "")
    assert "staging" in names and config["contexts"][0]["name"] in names
    assert completions(kubectl, "inspect", "gpushare", "--context", "st") == ["staging"]


def test_an_unreachable_cluster_completes_nothing_quietly(kubectl: Kubectl, sandbox: Sandbox) -> None:
    sandbox.stop()
    result = kubectl("__complete", "inspect", "gpushare", "", timeout=30)
    assert result.stdout.splitlines()[-1].startswith(":") and "Traceback" not in result.stderr
    assert [line for line in result.stdout.splitlines()[:-1] if not line.startswith("-")] == []
