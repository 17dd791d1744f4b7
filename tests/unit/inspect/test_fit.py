"""``kubectl gpushare fit`` offline: golden text and JSON, and the ledger rule it shares."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from golden.fit import cases

from kubectl_gpushare.inspect import fit
from kubectl_gpushare.inspect.fit_command import fit_command
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord


@pytest.mark.parametrize("suffix", sorted(cases.OUTPUTS))
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_from_file_matches_golden(name: str, suffix: str, cli_runner: CliRunner) -> None:
    cluster, args = cases.CASES[name]
    argv = [*args, *cases.OUTPUTS[suffix], "--from-file", str(cases.cluster_file(cluster))]
    result = cli_runner.invoke(fit_command, argv, prog_name="kubectl gpushare fit", env={"GPUSHARE_POLICY": None})
    assert result.exit_code == 0, result.stderr
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
    "args", [["0"], ["-3"], ["lots"], ["4", "--count", "0"], ["4", "--policy", "random"], []],
    ids=["zero", "negative", "word", "no-count", "bad-policy", "missing"],
)
def test_bad_arguments_are_usage_errors(args: list[str], cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(fit_command, args)
    assert result.exit_code == 2
