"""`kubectl gpushare manifests` prints the reviewed files from manifests/, with the image swapped."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from kubectl_gpushare.cli.manifests import DEFAULT_IMAGE, manifests_command

REPO = Path(__file__).resolve().parents[3]


def test_all_prints_extender_and_device_plugin_as_one_stream() -> None:
    out = CliRunner().invoke(manifests_command, []).output
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out) if doc}
    assert {"Deployment", "DaemonSet", "Service", "ClusterRole", "ClusterRoleBinding", "ServiceAccount"} <= kinds
    assert "KubeSchedulerConfiguration" not in kinds
    assert out.count(DEFAULT_IMAGE) == 2


def test_image_is_replaced_everywhere() -> None:
    out = CliRunner().invoke(manifests_command, ["--image", "registry.example/gpushare:dev"]).output
    assert DEFAULT_IMAGE not in out and out.count("registry.example/gpushare:dev") == 2


def test_scheduler_config_is_printed_alone_and_matches_the_repository_file() -> None:
    out = CliRunner().invoke(manifests_command, ["--only", "scheduler-config"]).output
    assert out == (REPO / "manifests" / "kube-scheduler-config.yaml").read_text().strip() + "\n"
    assert yaml.safe_load(out)["kind"] == "KubeSchedulerConfiguration"


def test_help_keeps_the_examples_on_their_own_lines() -> None:
    out = CliRunner().invoke(manifests_command, ["--help"]).output
    assert "\\b" not in out
    assert "\n    kubectl gpushare manifests | kubectl apply -f -\n" in out
