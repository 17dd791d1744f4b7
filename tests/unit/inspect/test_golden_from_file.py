"""Every golden case rendered offline with --from-file must match its golden files byte for byte."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from golden.inspect import cases

from kubectl_gpushare.inspect.command import inspect_command


@pytest.mark.parametrize("view", sorted(cases.VIEWS))
@pytest.mark.parametrize("case", cases.cases())
def test_from_file_view_matches_golden(case: str, view: str, cli_runner: CliRunner) -> None:
    args = ["--from-file", str(cases.cluster_file(case)), *cases.VIEWS[view]]
    result = cli_runner.invoke(inspect_command, args, prog_name="kubectl inspect gpushare")
    assert result.exit_code == 0, result.stderr
    cases.check(case, view, result.stdout)


@pytest.mark.parametrize("case", cases.REFERENCE_CASES)
def test_reference_goldens_are_hand_written_files(case: str) -> None:
    # The reference bytes are committed files, so an accidental regeneration shows up in review.
    for view in cases.HAND_WRITTEN:
        text = cases.expected(case, view).read_text()
        assert text.endswith("  \n"), "the cluster footer ends with the tab writer's two spaces"


def test_from_stdin_matches_from_file(cli_runner: CliRunner) -> None:
    data = cases.cluster_file("s2").read_bytes()
    result = cli_runner.invoke(inspect_command, ["--from-file", "-"], input=data)
    assert result.exit_code == 0
    assert result.stdout == cases.expected("s2", "summary.txt").read_text()
