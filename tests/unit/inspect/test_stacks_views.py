"""``--stack`` and the other stacks' views: forcing a stack, units never mixed, bad values refused."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kubectl_gpushare.inspect.command import inspect_command

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "inspect"
MIXED = str(GOLDEN / "mixed-stacks" / "cluster.json")


def run(cli_runner: CliRunner, *args: str) -> tuple[int, str, str]:
    result = cli_runner.invoke(inspect_command, list(args), prog_name="kubectl inspect gpushare")
    return result.exit_code, result.stdout, result.stderr


def test_stack_gpushare_shows_only_gpushare_nodes_as_before(cli_runner: CliRunner) -> None:
    code, out, _ = run(cli_runner, "--from-file", MIXED, "--stack", "gpushare")
    assert code == 0
    assert "STACK" not in out and out.startswith("NAME ")
    assert "share-node" in out


def test_forcing_a_stack_reads_every_node_with_it(cli_runner: CliRunner) -> None:
    code, out, _ = run(cli_runner, "--from-file", MIXED, "--stack", "nano-gpu", "-o", "json")
    assert code == 0
    document = json.loads(out)
    assert document["nodes"] == []
    assert {node["stack"] for node in document["stackNodes"]} == {"nano-gpu"}
    assert {node["name"] for node in document["stackNodes"]} == {"nano-node"}


def test_json_keeps_each_gpu_in_its_own_unit_and_cluster_is_gpushare_only(cli_runner: CliRunner) -> None:
    code, out, _ = run(cli_runner, "--from-file", MIXED, "-o", "json")
    assert code == 0
    document = json.loads(out)
    assert document["apiVersion"] == "gpushare.kubectl-gpushare.io/v1"
    assert document["cluster"]["total"] == 30  # gpushare GiB only; no MiB, % or slots added
    units = {(node["stack"], gpu["unit"]) for node in document["stackNodes"] for gpu in node["gpus"]}
    assert units == {("hami", "MiB"), ("nvidia", "slots"), ("nvidia", "GPUs"), ("nano-gpu", "%"), ("elastic-gpu", "%")}


def test_unknown_stack_is_a_usage_error(cli_runner: CliRunner) -> None:
    code, _, err = run(cli_runner, "--from-file", MIXED, "--stack", "slurm")
    assert code == 2 and "--stack" in err
