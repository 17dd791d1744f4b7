from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubectl_gpushare.inspect import command, report
from kubectl_gpushare.inspect.command import inspect_command

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "inspect"


def invoke(runner: CliRunner, *args: str, case: str = "s2", input: bytes | None = None):  # noqa: A002
    return runner.invoke(inspect_command, ["--from-file", str(GOLDEN / case / "cluster.yaml"), *args], input=input)


def test_json_report_schema(cli_runner: CliRunner) -> None:
    result = invoke(cli_runner, "-o", "json")
    document = json.loads(result.stdout)
    assert document["apiVersion"] == report.API_VERSION and document["kind"] == "GPUShareReport"
    assert document["unit"] == "GiB" and document["basis"] == "allocatable"
    node2 = document["nodes"][1]
    assert node2["name"] == "gpu-node-2" and node2["pending"] == 1 and node2["used"] == 1 and node2["free"] == 14
    assert node2["pendingPods"][0]["name"] == "job-c"
    gpu1 = document["nodes"][0]["gpus"][1]
    assert gpu1 == {
        "index": 1,
        "total": 15,
        "used": 3,
        "free": 12,
        "pods": [
            {
                "namespace": "ml",
                "name": "job-b",
                "uid": "00000000-0000-0000-0000-00000000000b",
                "phase": "Running",
                "memory": 3,
            }
        ],
    }
    assert document["cluster"] == {
        "nodes": 2,
        "gpus": 3,
        "total": 45,
        "used": 6,
        "free": 39,
        "pending": 1,
        "usedPercent": 13,
    }


def test_yaml_equals_json(cli_runner: CliRunner) -> None:
    as_json = json.loads(invoke(cli_runner, "-o", "json").stdout)
    assert yaml.safe_load(invoke(cli_runner, "-o", "yaml").stdout) == as_json


def test_csv_has_a_row_per_gpu_and_pending(cli_runner: CliRunner) -> None:
    rows = list(csv.reader(io.StringIO(invoke(cli_runner, "-o", "csv").stdout)))
    assert rows[0] == list(report.CSV_HEADER)
    assert rows[-1] == ["gpu-node-2", "192.168.1.12", "pending", "1", "", "", "default/job-c=1", ""]
    assert rows[1][-1] == "true"
    assert len(invoke(cli_runner, "-o", "csv", "--no-headers").stdout.splitlines()) == len(rows) - 1


def test_sort_by_free_puts_the_emptiest_node_first(cli_runner: CliRunner) -> None:
    by_name = invoke(cli_runner).stdout.splitlines()
    by_used = invoke(cli_runner, "--sort", "used").stdout.splitlines()
    by_free = invoke(cli_runner, "--sort", "free").stdout.splitlines()
    assert by_name[1].startswith("gpu-node-1") and by_used[1].startswith("gpu-node-1")
    assert by_free[1].startswith("gpu-node-1")  # 25 free vs 14
    percent = invoke(cli_runner, "--sort", "percent", "-o", "json").stdout
    assert [n["name"] for n in json.loads(percent)["nodes"]] == ["gpu-node-1", "gpu-node-2"]


def test_several_node_names_and_flag_order(cli_runner: CliRunner) -> None:
    after = invoke(cli_runner, "gpu-node-2", "-d").stdout
    before = cli_runner.invoke(
        inspect_command, ["-d", "gpu-node-2", "--from-file", str(GOLDEN / "s2" / "cluster.yaml")]
    ).stdout
    assert after == before and "NAME:       gpu-node-2" in after and "gpu-node-1" not in after
    both = invoke(cli_runner, "gpu-node-2", "gpu-node-1").stdout
    assert both == (GOLDEN / "s2" / "summary.txt").read_text()


def test_pretty_draws_bars_without_colour_when_not_a_terminal(cli_runner: CliRunner) -> None:
    result = invoke(cli_runner, "-o", "pretty", "-d")
    assert result.exit_code == 0
    assert "GPU1 ████" in result.stdout and "default/job-c" in result.stdout and "\x1b[" not in result.stdout
    assert "Cluster: 6/45 (13%)" in result.stdout


def test_wide_adds_free_and_largest_free_gpu(cli_runner: CliRunner) -> None:
    lines = invoke(cli_runner, "-o", "wide").stdout.splitlines()
    assert lines[0].split()[-4:] == ["USED%", "FREE", "LARGEST-FREE-GPU", "PODS"]
    assert lines[1].split()[-4:] == ["16%", "25", "13", "2"]
    assert lines[-1] == "Allocated/Total GPU Memory In Cluster:  6/45 (13%)"


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        pytest.param(["-o", "xml"], 2, "Invalid value for '-o'", id="bad-output"),
        pytest.param(["--sort", "size"], 2, "Invalid value for '--sort'", id="bad-sort"),
        pytest.param(["-l", "a=(1"], command.EXIT_USAGE, "error: --selector", id="bad-selector"),
        pytest.param(["nope"], command.EXIT_API, 'Failed due to nodes "nope" not found', id="missing-node"),
    ],
)
def test_errors_are_one_line_with_exit_codes(cli_runner: CliRunner, args: list[str], code: int, needle: str) -> None:
    result = invoke(cli_runner, *args)
    assert result.exit_code == code
    assert needle in result.stderr
    assert result.stdout == ""


def test_unreadable_file_is_a_usage_error(cli_runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{broken")
    result = cli_runner.invoke(inspect_command, ["--from-file", str(bad)])
    assert result.exit_code == command.EXIT_USAGE
    assert result.stderr.startswith("error: --from-file: not a Kubernetes JSON list")
    missing = cli_runner.invoke(inspect_command, ["--from-file", str(tmp_path / "absent.json")])
    assert missing.exit_code == 2 and "No such file or directory" in missing.stderr


def test_malformed_values_warn_once_each(cli_runner: CliRunner) -> None:
    path = GOLDEN / "malformed" / "cluster.json"
    result = cli_runner.invoke(inspect_command, ["--from-file", str(path)])
    assert result.exit_code == 0
    warnings = result.stderr.splitlines()
    assert all(line.startswith("warning: ") for line in warnings)
    assert len(warnings) == len(set(warnings)) >= 4
    assert any("'lots'" in line for line in warnings)


LAZY_CHECK = """
import sys
from kubectl_gpushare.cli import inspect_main
sys.argv = ["kubectl-inspect-gpushare", *sys.argv[1:]]
try:
    inspect_main()
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"kubernetes", "rich", "grpc"})
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
"""


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        pytest.param(["--help"], set(), id="help"),
        pytest.param(["--from-file", str(GOLDEN / "s1" / "cluster.yaml")], set(), id="summary"),
        pytest.param(["--from-file", str(GOLDEN / "s1" / "cluster.yaml"), "-o", "json"], set(), id="json"),
        pytest.param(["--from-file", str(GOLDEN / "s1" / "cluster.yaml"), "-o", "pretty"], {"rich"}, id="pretty"),
    ],
)
def test_inspect_path_imports_no_heavy_packages(args: list[str], allowed: set[str]) -> None:
    result = subprocess.run([sys.executable, "-c", LAZY_CHECK, *args], capture_output=True, text=True, timeout=60)
    line = [x for x in result.stderr.splitlines() if x.startswith("HEAVY=")][0]
    heavy = {name for name in line[len("HEAVY=") :].split(",") if name}
    assert heavy == allowed


def test_help_lists_exit_codes_and_kubectl_flags(cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(inspect_command, ["-h"], prog_name="kubectl inspect gpushare")
    assert result.exit_code == 0, result.output
    assert "Usage: kubectl inspect gpushare [OPTIONS] [NODE]..." in result.stdout
    for flag in (
        "--kubeconfig",
        "--context",
        "--cluster",
        "--user",
        "--as",
        "--as-group",
        "--request-timeout",
        "--selector",
        "--sort",
        "--no-headers",
        "--from-file",
        "Exit codes:",
    ):
        assert flag in result.stdout


def test_progress_line_is_drawn_and_cleared_only_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = command._Progress(enabled=False)
    quiet(5000)
    quiet.clear()
    assert capsys.readouterr().err == ""
    shown = command._Progress(enabled=True)
    shown(10)  # within the first PROGRESS_DELAY: small lists never flash a line
    assert capsys.readouterr().err == ""
    shown.start -= command.PROGRESS_DELAY
    shown(12000)
    shown.clear()
    assert capsys.readouterr().err == "\rlisting pods: 12,000\r\x1b[K"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["gpu-node-1", "-l", "a=b"], "name cannot be provided when a selector is specified"),
        (["-d", "-o", "wide"], "-o wide has no details"),
        (["-d", "-o", "json"], "-o json has no details"),
    ],
    ids=["name-and-selector", "details-wide", "details-json"],
)
def test_combinations_kubectl_refuses_are_refused(cli_runner: CliRunner, args: list[str], needle: str) -> None:
    result = invoke(cli_runner, *args)
    assert result.exit_code == 2 and needle in result.stderr and result.stdout == ""


def test_selector_matching_nothing_says_so_like_kubectl(cli_runner: CliRunner) -> None:
    result = invoke(cli_runner, "-l", "no-such-label=x")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "No resources found\n")


def test_no_headers_gives_rows_only_in_wide(cli_runner: CliRunner) -> None:
    rows = invoke(cli_runner, "-o", "wide", "--no-headers").stdout.splitlines()
    assert rows and all(line.startswith("gpu-node-") for line in rows)


def test_sort_percent_uses_the_exact_ratio() -> None:
    from kubectl_gpushare.inspect import order
    from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord

    nodes = [NodeRecord(name=n, alloc_mem=1000, alloc_count=1) for n in ("a", "b")]
    pods = [PodRecord(uid=n, namespace="x", name=n, node=n, phase="Running", request=r, gpu_index=0)
            for n, r in (("a", 281), ("b", 289))]  # both print as 28%
    assert order.sort_nodes(Ledger.build(nodes, pods), ["a", "b"], "percent") == ["b", "a"]


def test_group_by_namespace_totals_each_tenant(cli_runner: CliRunner) -> None:
    lines = invoke(cli_runner, "--group-by", "namespace").stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "PODS", "NODES", "ALLOCATED(GiB)", "WAITING(GiB)"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows["TOTAL"][2] == str(sum(int(v[2]) for k, v in rows.items() if k != "TOTAL")) == "6"


def test_group_by_namespace_json_and_yaml_are_a_versioned_document_matching_the_table(cli_runner: CliRunner) -> None:
    table = invoke(cli_runner, "--group-by", "namespace").stdout.splitlines()
    document = json.loads(invoke(cli_runner, "--group-by", "namespace", "-o", "json").stdout)
    assert (document["apiVersion"], document["kind"], document["unit"]) == (
        "gpushare.kubectl-gpushare.io/v1", "GPUShareTenants", "GiB")
    as_rows = [[t["name"], *(str(t[k]) for k in ("pods", "nodes", "allocated", "waiting"))]
               for t in document["namespaces"]]
    total = document["total"]
    as_rows.append(["TOTAL", *(str(total[k]) for k in ("pods", "nodes", "allocated", "waiting"))])
    assert as_rows == [line.split() for line in table[1:]]
    assert all("quota" not in t for t in document["namespaces"])
    assert yaml.safe_load(invoke(cli_runner, "--group-by", "namespace", "-o", "yaml").stdout) == document


def test_namespace_filter_shows_one_tenant_against_whole_gpus(cli_runner: CliRunner) -> None:
    text = invoke(cli_runner, "-n", "ml").stdout
    assert text.splitlines()[-1].startswith("3/45")
    assert invoke(cli_runner, "-A").stdout == invoke(cli_runner).stdout


@pytest.mark.parametrize(
    "args",
    [["-n", "ml", "-A"], ["--group-by", "namespace", "-o", "csv"], ["--group-by", "namespace", "-o", "wide"],
     ["--group-by", "namespace", "-d"]],
)
def test_tenant_flag_conflicts_are_usage_errors(cli_runner: CliRunner, args: list[str]) -> None:
    assert invoke(cli_runner, *args).exit_code == 2


@pytest.mark.parametrize(("one_shot", "during"), [(True, False), (False, True)])
def test_one_shot_commands_pause_the_cyclic_collector_and_restore_it(one_shot: bool, during: bool) -> None:
    import gc
    from types import SimpleNamespace

    from kubectl_gpushare.kube.records import Warnings

    seen: list[bool] = []

    def load(options: dict[str, object], progress: object, warnings: Warnings) -> SimpleNamespace:
        seen.append(gc.isenabled())
        return SimpleNamespace(warnings=warnings)

    def render(snapshot: object, options: dict[str, object]) -> None:
        seen.append(gc.isenabled())

    assert gc.isenabled()
    command.run({"from_file": None}, render=render, load=load, one_shot=one_shot)
    assert seen == [during, during]  # --watch (one_shot=False) runs for hours: it keeps collecting
    assert gc.isenabled()


@pytest.mark.parametrize(
    ("failure", "error", "code"),
    [
        ("not-found", 'Failed due to pods "p" not found in namespace "default"', 1),
        ("usage", "Error: pod p is in several namespaces", 2),
        ("interrupt", "interrupted", 130),
    ],
)
def test_the_seam_says_what_a_failed_load_warned_about_once_before_its_error(
    capfd: pytest.CaptureFixture[str], failure: str, error: str, code: int
) -> None:
    """Every command's loader (inspect, fit, explain, doctor, top) fails through this one seam."""
    import click

    from kubectl_gpushare.kube.errors import NotFound
    from kubectl_gpushare.kube.records import Warnings

    def load(options: dict[str, object], progress: object, warnings: Warnings) -> None:
        warnings.add("pod default/p: cannot be decoded (why)\n; skipped")
        warnings.add("pod default/p: cannot be decoded (why)\n; skipped")
        if failure == "not-found":
            raise NotFound(404, "NotFound", 'pods "p" not found in namespace "default"')
        if failure == "usage":
            raise click.UsageError("pod p is in several namespaces")
        raise KeyboardInterrupt

    def render(snapshot: object, options: dict[str, object]) -> None:
        raise AssertionError("nothing to render after a failed load")

    @click.command()
    def probe() -> None:
        command.run({"from_file": None}, render=render, load=load)

    with pytest.raises(SystemExit) as exited:
        probe.main([], standalone_mode=True)
    assert exited.value.code == code
    out, err = capfd.readouterr()
    lines = err.splitlines()  # click's usage lines come between for a usage error
    assert out == "" and lines[0] == "warning: pod default/p: cannot be decoded (why) ; skipped"
    assert lines[-1] == error and sum("warning:" in line for line in lines) == 1


def test_ctrl_c_while_rendering_exits_130_as_while_loading(capfd: pytest.CaptureFixture[str]) -> None:
    """``-o yaml`` of 100,000 pods takes seconds to write: Ctrl-C then is the same "interrupted", not click's Abort."""
    from types import SimpleNamespace

    import click

    from kubectl_gpushare.kube.records import Warnings

    def load(options: dict[str, object], progress: object, warnings: Warnings) -> SimpleNamespace:
        return SimpleNamespace(warnings=warnings)

    def render(snapshot: object, options: dict[str, object]) -> None:
        raise KeyboardInterrupt

    @click.command()
    def probe() -> None:
        command.run({"from_file": None}, render=render, load=load)

    with pytest.raises(SystemExit) as exited:
        probe.main([], standalone_mode=True)
    assert exited.value.code == 130
    assert capfd.readouterr().err == "interrupted\n"
