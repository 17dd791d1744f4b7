"""``kubectl gpushare fit`` offline: golden text and JSON, and the ledger rule it shares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from golden import hostile
from golden.fit import cases

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import fit
from kubectl_gpushare.inspect.fit_command import fit_command
from kubectl_gpushare.kube.errors import EXIT_FIT_SHORT, EXIT_USAGE
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord


@pytest.mark.parametrize("suffix", sorted(cases.OUTPUTS))
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_from_file_matches_golden(name: str, suffix: str, cli_runner: CliRunner) -> None:
    cluster, args = cases.CASES[name]
    argv = [*args, *cases.OUTPUTS[suffix], "--from-file", str(cases.cluster_file(cluster))]
    result = cli_runner.invoke(fit_command, argv, prog_name="kubectl gpushare fit", env={"GPUSHARE_POLICY": None})
    assert result.exit_code == (EXIT_FIT_SHORT if name in cases.SHORT else 0), result.stderr
    cases.check(name, suffix, result.stdout)


def node(name: str, gpus: int = 2, mem: int = 16, unhealthy: frozenset[int] = frozenset()) -> NodeRecord:
    return NodeRecord(name=name, alloc_mem=gpus * mem, alloc_count=gpus, cap_mem=gpus * mem, cap_count=gpus,
                      unhealthy=unhealthy)


def pod(uid: str, node_name: str, gpu: int, mem: int) -> PodRecord:
    return PodRecord(
        uid=uid, namespace="default", name=uid, node=node_name, phase="Running", request=mem, gpu_index=gpu
    )


def test_classic_trap_enough_in_total_but_no_single_gpu() -> None:
    # 10 free on the node, but 5 on each GPU: an 8 does not fit, and fit says the largest is 5.
    ledger = Ledger.build([node("a")], [pod("p", "a", 0, 11), pod("q", "a", 1, 11)])
    report = fit.plan(ledger, ["a"], 8)
    assert (report.fits, report.largest_fit, report.nodes, report.placements) == (0, 5, [], [])
    assert "Only 0 of the 1 pods asked for fit." in fit.to_text(report)


def test_unhealthy_gpus_never_count_and_are_never_the_largest_free() -> None:
    ledger = Ledger.build([node("a", unhealthy=frozenset({0})), node("b", gpus=1, mem=8)], [])
    report = fit.plan(ledger, ["a", "b"], 8, count=3)
    assert [(n.name, [g.index for g in n.gpus], n.fits) for n in report.nodes] == [("a", [1], 2), ("b", [0], 1)]
    assert report.fits == 3 and report.largest_fit == 16
    assert all(p.gpu != 0 or p.node == "b" for p in report.placements)


@pytest.mark.parametrize("policy", ["binpack", "spread"])
def test_placements_follow_the_extender_choice_and_leave_the_ledger_unchanged(policy: str) -> None:
    ledger = Ledger.build([node("a"), node("b", gpus=1)], [pod("p", "a", 1, 10)])
    before = {name: ledger.free(name) for name in ("a", "b")}
    report = fit.plan(ledger, ["a", "b"], 4, count=100, policy=policy)  # type: ignore[arg-type]
    assert {name: ledger.free(name) for name in ("a", "b")} == before
    assert len(report.placements) == report.fits == 4 + 1 + 4
    first = report.placements[0]
    best = max(["a", "b"], key=lambda n: (ledger.score(n, 4, policy), [-ord(c) for c in n]))  # type: ignore[arg-type]
    assert first.node == best and first.gpu == ledger.choose_gpu(best, 4, policy)  # type: ignore[arg-type]


def test_json_is_versioned_and_counts_agree() -> None:
    ledger = Ledger.build([node("a")], [])
    data = json.loads(fit.to_json(fit.plan(ledger, ["a"], 5, count=2)))
    assert (data["apiVersion"], data["kind"]) == ("gpushare.kubectl-gpushare.io/v1", "GPUShareFit")
    assert data["request"] == 5 and data["fits"] == 6 == sum(n["fits"] for n in data["nodes"])
    assert data["nodes"][0]["gpus"] == [{"index": 0, "free": 16, "fits": 3}, {"index": 1, "free": 16, "fits": 3}]


@pytest.mark.parametrize(
    "args",
    [["0"], ["-3"], ["lots"], ["4", "--count", "0"], ["4", "--policy", "random"], [], ["8Zi"], ["1e99"],
     ["x" * 200], ["-1Gi"], ["4", "--limit", "-1"], ["4", "--limit", "many"], ["4", "--count", "1e3"]],
    ids=["zero", "negative", "word", "no-count", "bad-policy", "missing", "bad-suffix", "huge", "long",
         "negative-quantity", "negative-limit", "word-limit", "float-count"],
)
def test_bad_arguments_are_usage_errors(args: list[str], cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(fit_command, args)
    assert result.exit_code == EXIT_USAGE


def _fit(cli_runner: CliRunner, cluster: str, *args: str) -> Result:
    argv = [*args, "--from-file", str(cases.cluster_file(cluster))]
    return cli_runner.invoke(fit_command, argv, env={"GPUSHARE_POLICY": None})


@pytest.mark.parametrize("memory", ["4Gi", "4096Mi", "4194304Ki", "4e0"])
def test_quantities_in_bytes_mean_the_same_as_the_nodes_unit(memory: str, cli_runner: CliRunner) -> None:
    plain = _fit(cli_runner, "s2", "4", "--count", "3", "-o", "json")
    quantity = _fit(cli_runner, "s2", memory, "--count", "3", "-o", "json")
    assert quantity.exit_code == 0, quantity.stderr
    assert quantity.stdout == plain.stdout and json.loads(quantity.stdout)["request"] == 4


def test_quantities_convert_to_mib_on_mib_nodes(cli_runner: CliRunner) -> None:
    result = _fit(cli_runner, "mib-units", "4000Mi", "-o", "json")
    assert json.loads(result.stdout)["request"] == 4000 == json.loads(_fit(cli_runner, "mib-units", "4000",
                                                                            "-o", "json").stdout)["request"]
    half = _fit(cli_runner, "mib-units", "0.5Gi", "-o", "json")
    assert json.loads(half.stdout)["request"] == 512


@pytest.mark.parametrize(
    ("memory", "needle"),
    [("0.5Gi", "is below 1 GiB, the unit"), ("1.5Gi", "is not a whole number of GiB"),
     ("8G", "is not a whole number of MiB"), ("500m", "is below 1 MiB")],
)
def test_fractions_of_the_unit_are_refused(memory: str, needle: str, cli_runner: CliRunner) -> None:
    # One line through the real console script: tests/unit/core/test_exit_codes.py.
    result = _fit(cli_runner, "s2", memory)
    assert result.exit_code == EXIT_USAGE and result.stdout == ""
    assert f"Invalid value for 'MEMORY': {memory!r} {needle}" in result.stderr


def test_fewer_than_count_exits_fit_short_with_the_answer_printed(cli_runner: CliRunner) -> None:
    enough = _fit(cli_runner, "s2", "4", "--count", "3")
    assert enough.exit_code == 0
    short = _fit(cli_runner, "s2", "4", "--count", "100")
    assert short.exit_code == EXIT_FIT_SHORT == 10
    assert "Only " in short.stdout and "of the 100 pods asked for fit." in short.stdout


def test_detail_is_capped_in_text_and_whole_in_json(cli_runner: CliRunner) -> None:
    capped = _fit(cli_runner, "many-nodes", "5", "--limit", "3").stdout.splitlines()
    whole = _fit(cli_runner, "many-nodes", "5", "--all").stdout.splitlines()
    unlimited = _fit(cli_runner, "many-nodes", "5", "--limit", "0").stdout.splitlines()
    assert whole == unlimited and len(whole) > len(capped)
    rows = json.loads(_fit(cli_runner, "many-nodes", "5", "--limit", "3", "-o", "json").stdout)["nodes"]
    gpus = sum(len(node["gpus"]) for node in rows)
    assert capped[3:6] == whole[3:6] and capped[6] == f"... {gpus - 3} more GPUs that take a pod (--all or --limit N" \
        " shows them)"


def test_hostile_node_names_from_a_file_are_one_cell_in_text_and_exact_in_json(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """A node named with ESC, a newline and a tab (a file is not validated as the API server validates names):
    each row stays one line with the cleaned name measured for the columns; JSON keeps the name exact."""
    path = hostile.file_of(tmp_path, hostile.views_cluster())
    text = cli_runner.invoke(fit_command, ["2", "--count", "3", "--from-file", path], env={"GPUSHARE_POLICY": None})
    assert text.exit_code == 0, text.stderr
    hostile.assert_one_line_each(text.stdout)
    lines = text.stdout.splitlines()
    assert len(lines) == 1 + 1 + 4 + 1 + 4, "summary, GPU table (header + 3), placements (header + 3)"
    assert lines[3] == f"{hostile.NODE.replace(hostile.HOSTILE, hostile.SHOWN)}  0    8          4"
    assert [line.index("GPU") for line in (lines[2], lines[7])] == [27, 5 + 27], "columns measured on the shown name"
    cases.check("hostile-names", "txt", text.stdout)
    report = json.loads(cli_runner.invoke(fit_command, ["2", "--count", "3", "-o", "json", "--from-file", path],
                                          env={"GPUSHARE_POLICY": None}).stdout)
    assert [node["name"] for node in report["nodes"]] == [hostile.NODE, "plain"]
    assert {p["node"] for p in report["placements"]} == {hostile.NODE, "plain"}


def test_a_megabyte_node_name_is_cut_to_the_apis_longest_in_text() -> None:
    name = "n" * 1_000_000
    ledger = Ledger.build([NodeRecord(name, alloc_mem=16, alloc_count=1, cap_mem=16, cap_count=1)], [],
                          basis="allocatable")
    report = fit.plan(ledger, [name], 4)
    assert report.nodes[0].name == name, "the report (and its JSON) keeps the name"
    rows = fit.to_text(report).splitlines()
    assert rows[3] == "n" * (protocol.MAX_SHOWN_NAME - 1) + "…  0    16         4"
    assert max(map(len, rows)) < 400
