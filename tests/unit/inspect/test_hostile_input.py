"""Hostile values in one pod or node never break inspect for the others: warn once, count the rest, exit 0."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from golden import hostile

from kubectl_gpushare.inspect.command import inspect_command

from .hostile import GOOD_POD_MEM, hostile_cluster

VIEWS = [[], ["-d"], ["-o", "wide"], ["-o", "json"], ["-o", "yaml"], ["-o", "csv"], ["-o", "pretty"]]


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": hostile_cluster()}))
    return path


@pytest.mark.parametrize("view", VIEWS, ids=lambda view: " ".join(view) or "summary")
def test_every_view_survives_hostile_values(cli_runner: CliRunner, cluster_file: Path, view: list[str]) -> None:
    start = time.perf_counter()
    result = cli_runner.invoke(inspect_command, ["--from-file", str(cluster_file), *view])
    assert time.perf_counter() - start < 10
    assert result.exit_code == 0, result.stderr
    warnings = result.stderr.splitlines()
    assert warnings and all(line.startswith("warning: ") and len(line) < 300 for line in warnings)
    assert "-400" not in result.stdout


def test_only_valid_claims_are_counted(cli_runner: CliRunner, cluster_file: Path) -> None:
    result = cli_runner.invoke(inspect_command, ["--from-file", str(cluster_file), "-o", "json", "n1", "n-huge"])
    assert result.exit_code == 0, result.stderr
    nodes = {node["name"]: node for node in json.loads(result.stdout)["nodes"]}
    gpus = {gpu["index"]: gpu for gpu in nodes["n1"]["gpus"]}
    # GPU 0: the three 1 GiB pods whose allocation or index was invalid fall back to their limits
    # (negative-allocation, deep-allocation on index 0); huge/absurd/negative limits count 0.
    assert gpus[0]["used"] == 2 and gpus[0]["total"] == 8
    # GPU 1: the good pod plus 1e-9999999, which rounds up to 1 as Quantity.Value() does.
    assert gpus[1]["used"] == GOOD_POD_MEM + 1
    assert all(gpu["used"] <= gpu["total"] for gpu in gpus.values())
    assert nodes["n1"]["pending"] == 1, "the 5,000-digit index is pending"
    assert nodes["n-huge"]["gpuCount"] == 0


def test_each_problem_is_warned_once(cli_runner: CliRunner, cluster_file: Path) -> None:
    result = cli_runner.invoke(inspect_command, ["--from-file", str(cluster_file), "n1"])
    warnings = result.stderr.splitlines()
    assert len(warnings) == len(set(warnings))
    assert len(warnings) <= 6, "at most five messages and a count of the rest"


def test_invalid_utf8_is_read_as_replacement_characters(cli_runner: CliRunner, tmp_path: Path) -> None:
    data = json.dumps({"kind": "List", "items": hostile_cluster()[:4]}).encode()
    path = tmp_path / "latin1.json"
    path.write_bytes(data.replace(b'"good"', b'"g\xf6\xff\xfed"', 1))
    result = cli_runner.invoke(inspect_command, ["--from-file", str(path), "-d", "n1"])
    assert result.exit_code == 0, result.stderr
    assert "g\ufffd\ufffd\ufffdd" in result.stdout
    assert "warning: the input is not valid UTF-8; invalid bytes were read as U+FFFD" in result.stderr.splitlines()


@pytest.mark.parametrize(
    "data",
    [
        b'{"items":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"kind: List\nitems:\n- " + b"[" * 100_000 + b"]" * 100_000,
    ],
    ids=["json", "yaml"],
)
def test_deeply_nested_input_is_a_one_line_usage_error(cli_runner: CliRunner, tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "deep"
    path.write_bytes(data)
    result = cli_runner.invoke(inspect_command, ["--from-file", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert "nested too deeply" in result.stderr


@pytest.mark.parametrize(
    "command",
    [[], ["-o", "json"], ["fit", "1"], ["doctor"], ["explain", "good"]],
    ids=lambda command: " ".join(command) or "inspect",
)
def test_a_dumped_pod_of_the_wrong_type_is_skipped_with_one_warning_by_every_command(
    cli_runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    """``kubectl get -o json`` dumps what the API serves, so a file is read as the API is: one bad pod is left out."""
    from kubectl_gpushare.cli import load_command

    garbage = hostile_cluster()[3]  # the good pod, under another name with an annotation of the wrong type
    garbage = {**garbage, "metadata": {**garbage["metadata"], "name": "garbage", "annotations": {"k": {"x": 1}}}}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": [*hostile_cluster()[:4], garbage]}))
    invoked = load_command(command[0]) if command[:1] in (["fit"], ["doctor"], ["explain"]) else inspect_command
    arguments = command[1:] if invoked is not inspect_command else command
    result = cli_runner.invoke(invoked, ["--from-file", str(path), *arguments])
    assert result.exit_code in (0, 11, 12), result.stderr  # doctor's verdicts: warnings, errors
    assert "Traceback" not in result.stderr
    output = result.stdout + result.stderr
    assert output.count("default/garbage: cannot be decoded") == 1, output
    if command == ["-o", "json"]:
        nodes = {node["name"]: node for node in json.loads(result.stdout)["nodes"]}
        assert nodes["n1"]["used"] == GOOD_POD_MEM, "the neighbours count, nothing from the skipped pod"


def test_explain_reads_past_a_neighbour_of_the_wrong_type_an_item_kind_that_is_no_string_and_a_duplicate(
    cli_runner: CliRunner, tmp_path: Path
) -> None:
    from kubectl_gpushare.cli import load_command

    good = hostile_cluster()[3]
    nameless = {**good, "metadata": {**good["metadata"], "name": ["not", "a", "name"]}}
    kindless = {**good, "kind": 5}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": [*hostile_cluster()[:4], nameless, kindless, good]}))
    result = cli_runner.invoke(load_command("explain"), ["--from-file", str(path), "-A", "good", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["pod"] == "good"
    assert result.stderr.count("cannot be decoded") == 2, "the nameless pod, and the item of no readable kind"
    assert "list item default/good: cannot be decoded (Expected `str`, got `int` - at `$.kind`)" in result.stderr


@pytest.mark.parametrize("view", [["-o", "wide"], ["--group-by", "namespace"], ["-o", "pretty", "-d"]],
                         ids=lambda view: " ".join(view))
def test_our_views_write_hostile_names_printable_and_json_keeps_them(
    cli_runner: CliRunner, tmp_path: Path, view: list[str]
) -> None:
    """Inspect's own views (not the original's summary and -d, which print names as the Go tool did) write names
    holding ESC, a newline and a tab with spaces, one row each; -o json keeps them exact."""
    path = hostile.file_of(tmp_path, hostile.views_cluster())
    result = cli_runner.invoke(inspect_command, ["--from-file", path, *view])
    assert result.exit_code == 0, result.stderr
    hostile.assert_one_line_each(result.stdout)
    shown_node = hostile.NODE.replace(hostile.HOSTILE, hostile.SHOWN)
    lines = result.stdout.splitlines()
    if view == ["-o", "wide"]:
        assert len(lines) == 1 + 2 + 1 + 1 + 1, "header, two nodes, blank, cluster total, waiting pods"
        assert lines[1].startswith(f"{shown_node}  10.9.5.1{hostile.SHOWN}  2 ")
        assert lines[2].startswith("plain" + " " * (len(shown_node) - 3) + "10.9.5.2 "), "columns from shown names"
        assert lines[5].endswith(f"ml/wants (8), ml{hostile.SHOWN}/waiting{hostile.SHOWN} (2)")
    elif view == ["--group-by", "namespace"]:
        assert [re.split(r"  +", line)[0] for line in lines] == ["NAMESPACE", "ml", f"ml{hostile.SHOWN}", "TOTAL"]
    else:
        assert "ERROR forged" in result.stdout
    data = json.loads(cli_runner.invoke(inspect_command, ["--from-file", path, "-o", "json"]).stdout)
    assert [(node["name"], node["ip"]) for node in data["nodes"]] == [
        (hostile.NODE, f"10.9.5.1{hostile.HOSTILE}"), ("plain", "10.9.5.2")]
    assert {(p["namespace"], p["name"]) for p in data["unscheduledPods"]} == {
        ("ml", "wants"), (hostile.NAMESPACE, f"waiting{hostile.HOSTILE}")}
    tenants = json.loads(cli_runner.invoke(inspect_command, ["--from-file", path, "--group-by", "namespace", "-o",
                                                             "json"]).stdout)
    assert [tenant["name"] for tenant in tenants["namespaces"]] == ["ml", hostile.NAMESPACE]


def test_the_other_stacks_view_writes_hostile_names_printable(cli_runner: CliRunner, tmp_path: Path) -> None:
    """A HAMi node, GPU model and pod named with `HOSTILE`: the other-stacks table and its -d blocks stay aligned
    rows, one per GPU and pod (that view is ours; a gpushare-only cluster never shows it)."""
    path = hostile.file_of(tmp_path, hostile.stacks_cluster())
    summary = cli_runner.invoke(inspect_command, ["--from-file", path])
    details = cli_runner.invoke(inspect_command, ["--from-file", path, "-d"])
    for result in (summary, details):
        assert result.exit_code == 0, result.stderr
        hostile.assert_one_line_each(result.stdout)
    rows = summary.stdout.splitlines()
    assert len(rows) == 2 and re.split(r"  +", rows[1])[:2] == ["hami", f"hami{hostile.SHOWN}"]
    assert rows[0].index("IPADDRESS") == rows[1].index("10.9.6.1") and f"A10{hostile.SHOWN}" in rows[1]
    assert details.stdout.splitlines()[1] == f"NAME:       hami{hostile.SHOWN}"
    assert f"0    ml{hostile.SHOWN}  vgpu{hostile.SHOWN}  3000" in details.stdout


def test_the_original_tables_still_print_names_as_the_go_tool_did(cli_runner: CliRunner, tmp_path: Path) -> None:
    """The byte-compatible summary keeps a name's bytes, as the original does: only our own views clean them."""
    path = hostile.file_of(tmp_path, hostile.views_cluster())
    result = cli_runner.invoke(inspect_command, ["--from-file", path])
    assert result.exit_code == 0 and result.stdout.splitlines()[1:3] == ["gpu\x1b[31m", "ERROR  forged\x1b[0m  "
                                                                        "10.9.5.1\x1b[31m"], "the tab splits a cell"


def test_a_warning_naming_a_megabyte_pod_is_one_short_line(cli_runner: CliRunner, tmp_path: Path) -> None:
    """A warning names its object: it is written as the text views write a sentence (`protocol.shown_text`), cut
    and marked, not a megabyte on stderr; -o json keeps the name exact."""
    from kubectl_gpushare import protocol

    huge = "p" * 1_000_000
    pod = hostile_cluster()[3]  # the good pod, under a megabyte name with an index that is no GPU
    pod = {**pod, "metadata": {**pod["metadata"], "name": huge,
                               "annotations": {**pod["metadata"]["annotations"], "ALIYUN_COM_GPU_MEM_IDX": "zz"}}}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": [*hostile_cluster()[:3], pod]}))
    result = cli_runner.invoke(inspect_command, ["--from-file", str(path), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    named = [line for line in result.stderr.splitlines() if "ppp" in line]
    assert len(named) == 1 and named[0].startswith("warning: pod default/ppp") and named[0].endswith("p…")
    assert len(named[0]) == len("warning: ") + protocol.MAX_SHOWN_NAME * protocol.SENTENCE_NAMES
    assert huge in result.stdout


def test_pretty_writes_a_name_holding_rich_markup_or_an_emoji_code_as_it_reads(
    cli_runner: CliRunner, tmp_path: Path
) -> None:
    """``-o pretty`` draws with rich, which would read ``[/]`` as markup (a MarkupError, a traceback), ``[link=...]``
    as a terminal hyperlink and ``:fire:`` as an emoji: names from a file are text, never markup."""
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    path = hostile.file_of(tmp_path, [
        node_object("n[/]", [16], ip="10.9.7.1[red]"),
        pod_object("p:fire:", "ml[link=x]", [4], node="n[/]", gpu=0, gpu_memory=16),
    ])
    result = cli_runner.invoke(inspect_command, ["--from-file", path, "-o", "pretty", "-d"])
    assert result.exit_code == 0, result.stderr
    assert "n[/]" in result.stdout and "10.9.7.1[red]" in result.stdout and "ml[link=x]/p:fire: 4" in result.stdout


@pytest.mark.parametrize("limit", ["-3", "99999999999999999999"])
@pytest.mark.parametrize(
    "argv", [["inspect", "-d"], ["inspect", "-o", "json"], ["fit", "2"]], ids=lambda argv: " ".join(argv)
)
def test_a_pending_pod_with_an_invalid_limit_is_warned_about_in_doctors_words(
    cli_runner: CliRunner, tmp_path: Path, argv: list[str], limit: str
) -> None:
    """Left out of the pending pods as asking nothing, as doctor's invalid-value says: with the same line."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.inspect.fit_command import fit_command
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    wants = pod_object("wants", "ml", [2])
    wants["spec"]["containers"][0]["resources"]["limits"]["aliyun.com/gpu-mem"] = limit
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object("n", [16], ip="10.0.0.1"), wants]}))
    command = inspect_command if argv[0] == "inspect" else fit_command

    result = cli_runner.invoke(command, [*argv[1:], "--from-file", str(path)])
    doctor = json.loads(cli_runner.invoke(doctor_command, ["-o", "json", "--from-file", str(path)]).stdout)

    assert result.exit_code == 0, result.stderr
    (invalid,) = [f["message"] for f in doctor["findings"] if f["check"] == "invalid-value"]
    assert result.stderr == f"warning: {invalid}\n"
    if argv[-1] == "json":
        assert json.loads(result.stdout)["cluster"]["pending"] == 0


@pytest.mark.parametrize("argv", [["-o", "json"], ["-o", "wide"]], ids=lambda argv: " ".join(argv))
def test_a_pending_pod_with_one_invalid_limit_beside_a_valid_one_is_not_waiting(
    cli_runner: CliRunner, tmp_path: Path, argv: list[str]
) -> None:
    """The extender refuses the whole pod and explain says request 0: inspect lists none of it as waiting."""
    from kubectl_gpushare.inspect.explain_command import explain_command
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    wants = pod_object("wants", "ml", [4, 2])
    wants["spec"]["containers"][1]["resources"]["limits"]["aliyun.com/gpu-mem"] = "-3"
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object("n", [16], ip="10.0.0.1"), wants]}))

    result = cli_runner.invoke(inspect_command, [*argv, "--from-file", str(path)])
    explained = json.loads(cli_runner.invoke(explain_command, ["wants", "-n", "ml", "-o", "json", "--from-file",
                                                               str(path)]).stdout)

    assert result.exit_code == 0, result.stderr
    assert (explained["state"], explained["request"]) == ("invalid-request", 0)
    assert result.stderr.count("\n") == 1 and "pod ml/wants container 'sidecar-1'" in result.stderr
    if argv[-1] == "json":
        assert "unscheduledPods" not in json.loads(result.stdout)
    else:
        assert "Waiting" not in result.stdout and "wants" not in result.stdout
