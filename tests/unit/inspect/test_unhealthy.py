"""Unhealthy GPUs (listed in unhealthy-gpu-<node> ConfigMaps) are marked in the views and never offered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubectl_gpushare.inspect.command import inspect_command
from kubectl_gpushare.inspect.fit_command import fit_command
from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap


@pytest.fixture
def sick(tmp_path: Path) -> Path:
    items = [
        node_object("n", [16, 16], ip="10.0.0.1"),
        pod_object("p", "default", [4], node="n", gpu=0, gpu_memory=16),
        unhealthy_configmap("n", [1]),
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    return path


def test_wide_marks_the_gpu_and_leaves_it_out_of_largest_free(sick: Path, cli_runner: CliRunner) -> None:
    lines = cli_runner.invoke(inspect_command, ["-o", "wide", "--from-file", str(sick)]).stdout.splitlines()
    assert lines[1].split()[3:5] == ["4/16", "0/16!"]
    assert lines[1].split()[-2] == "12", "the healthy GPU's 12 is the largest free, not the unhealthy 16"
    assert lines[-1].startswith("! unhealthy GPU")


def test_json_says_healthy_false_only_where_listed(sick: Path, cli_runner: CliRunner) -> None:
    report = json.loads(cli_runner.invoke(inspect_command, ["-o", "json", "--from-file", str(sick)]).stdout)
    assert [gpu.get("healthy", True) for gpu in report["nodes"][0]["gpus"]] == [True, False]


def test_csv_ends_with_a_healthy_column(sick: Path, cli_runner: CliRunner) -> None:
    text = cli_runner.invoke(inspect_command, ["-o", "csv", "--from-file", str(sick)]).stdout
    rows = [line.split(",") for line in text.splitlines()]
    assert rows[0][-1] == "HEALTHY"
    assert [(row[2], row[-1]) for row in rows[1:]] == [("0", "true"), ("1", "false")]


def test_fit_never_offers_an_unhealthy_gpu(sick: Path, cli_runner: CliRunner) -> None:
    report = json.loads(cli_runner.invoke(fit_command, ["4", "-o", "json", "--from-file", str(sick)]).stdout)
    assert report["fits"] == 3 and report["largestFit"] == 12
    assert {gpu["index"] for node in report["nodes"] for gpu in node["gpus"]} == {0}


@pytest.mark.parametrize("flags", [[], ["-d"]], ids=["summary", "details"])
def test_the_compatible_text_is_unchanged(sick: Path, flags: list[str], cli_runner: CliRunner) -> None:
    """The default and -d views stay byte-compatible with the original, so they do not mark GPUs."""
    text = cli_runner.invoke(inspect_command, [*flags, "--from-file", str(sick)]).stdout
    assert "!" not in text and "unhealthy" not in text.lower() and "4/32 (12%)" in text


def _quota_cluster(tmp_path: Path) -> Path:
    quota = {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "ml"},
        "status": {"hard": {"requests.aliyun.com/gpu-mem": "20"}, "used": {"requests.aliyun.com/gpu-mem": "12"}},
    }
    items = [
        node_object("n", [16, 16], ip="10.0.0.1"),
        pod_object("p", "ml", [12], node="n", gpu=0, gpu_memory=16),  # no uids: keyed by namespace/name
        pod_object("q", "web", [2], node="n", gpu=1, gpu_memory=16),
        quota,
    ]
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    return path


def test_group_by_namespace_shows_the_gpu_memory_quota(tmp_path: Path, cli_runner: CliRunner) -> None:
    path = _quota_cluster(tmp_path)
    result = cli_runner.invoke(inspect_command, ["--group-by", "namespace", "--from-file", str(path)])
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0][-1] == "QUOTA(USED/HARD)"
    assert rows[1] == ["ml", "1", "1", "12", "0", "12/20"] and rows[2] == ["web", "1", "1", "2", "0", "-"]


def test_group_by_namespace_json_carries_the_quota(tmp_path: Path, cli_runner: CliRunner) -> None:
    path = _quota_cluster(tmp_path)
    result = cli_runner.invoke(inspect_command, ["--group-by", "namespace", "-o", "json", "--from-file", str(path)])
    document = json.loads(result.stdout)
    assert document["kind"] == "GPUShareTenants"
    assert document["namespaces"] == [
        {"name": "ml", "pods": 1, "nodes": 1, "allocated": 12, "waiting": 0, "quota": {"used": "12", "hard": "20"}},
        {"name": "web", "pods": 1, "nodes": 1, "allocated": 2, "waiting": 0},
    ]
    assert document["total"] == {"pods": 2, "nodes": 1, "allocated": 14, "waiting": 0}
