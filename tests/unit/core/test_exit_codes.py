"""kubectl manners shared by every command: one exit-code table, one-line usage errors, bare help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from kubectl_gpushare import __version__
from kubectl_gpushare.cli import SUBCOMMANDS, load_command, run_command
from kubectl_gpushare.kube import errors
from kubectl_gpushare.service import ENV_LOG_LEVEL

BIN = Path(sys.executable).parent


def cli(*args: str, script: str = "kubectl-gpushare") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / script), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_command_help_lists_the_one_exit_code_table(name: str) -> None:
    command = load_command(name)
    text = command.get_help(click.Context(command, info_name=name, **command.context_settings))
    assert "  Exit codes:\n    0    success\n" in text
    assert text.count("Exit codes") == 1, "no command keeps a second, drifting table"


def test_group_help_lists_the_table_too() -> None:
    assert "4    unauthorized (401) or forbidden (403)" in cli("-h").stdout


def test_auth_errors_exit_4_from_every_component() -> None:
    # The daemons exit with ``exc.exit_code``; inspect and label-nodes with the same constants.
    assert errors.Unauthorized(401, "Unauthorized", "x").exit_code == errors.EXIT_AUTH == 4
    assert errors.Forbidden(403, "Forbidden", "x").exit_code == 4
    assert errors.NotFound(404, "NotFound", "x").exit_code == errors.EXIT_API == 1
    assert errors.Unreachable("x").exit_code == errors.EXIT_UNREACHABLE == 3
    assert errors.ConfigError("x").exit_code == errors.EXIT_USAGE == 2


@pytest.mark.parametrize(
    ("script", "args", "needle"),
    [
        ("kubectl-inspect-gpushare", ["--bogus"], "error: No such option '--bogus'"),
        ("kubectl-inspect-gpushare", ["-o", "xml"], "error: Invalid value for '-o'"),
        ("kubectl-gpushare", ["inspect", "--sort", "size"], "error: Invalid value for '--sort'"),
        ("kubectl-gpushare", ["no-such-command"], "error: No such command 'no-such-command'"),
        ("kubectl-gpushare", ["label-nodes", "-l", "-bad=x"], "error: --selector: unable to parse requirement"),
        ("kubectl-gpushare", ["serve-extender", "--port", "x"], "error: "),
        ("kubectl-gpushare", ["sandbox", "--nodes", "many"], "error: Invalid value for '--nodes'"),
        ("kubectl-gpushare", ["fit", "8Zi"], "error: Invalid value for 'MEMORY': invalid quantity"),
        ("kubectl-gpushare", ["fit", "0.5Mi"], "error: Invalid value for 'MEMORY': '0.5Mi' is below 1 MiB"),
        ("kubectl-gpushare", ["fit", "--", "-8Gi"], "error: Invalid value for 'MEMORY': '-8Gi' is not a positive"),
        ("kubectl-gpushare", ["fit", "1e300"], "error: Invalid value for 'MEMORY': quantity '1e300' is out of"),
        ("kubectl-gpushare", ["fit", "8", "--count", "x"], "error: Invalid value for '--count'"),
        ("kubectl-gpushare", ["fit", "8", "--limit", "-1"], "error: Invalid value for '--limit'"),
        ("kubectl-gpushare", ["doctor", "--limit", "lots"], "error: Invalid value for '--limit'"),
        ("kubectl-gpushare", ["explain", "p", "--limit", "1.5"], "error: Invalid value for '--limit'"),
        ("kubectl-gpushare", ["explain", "../nodes"], "error: Invalid value for 'POD'"),
        ("kubectl-gpushare", ["explain", "p", "-n", "Bad NS"], "error: Invalid value for '-n'"),
        ("kubectl-gpushare", ["explain", "p", "-n", "a", "-A"], "error: -n/--namespace and -A"),
        ("kubectl-inspect-gpushare", ["-n", "x" * 64], "error: Invalid value for '-n'"),
        ("kubectl-gpushare", ["label-nodes", "--force=yes"], "error: Option '--force' does not take a value"),
    ],
    ids=["unknown-flag", "bad-choice", "bad-sort", "unknown-command", "bad-selector", "daemon-flag", "sandbox-flag",
         "fit-suffix", "fit-below-unit", "fit-negative", "fit-huge", "fit-count", "fit-limit", "doctor-limit",
         "explain-limit", "explain-pod", "explain-namespace", "explain-n-and-A", "inspect-namespace",
         "label-force-value"],
)
def test_usage_errors_are_one_error_line_and_exit_2(script: str, args: list[str], needle: str) -> None:
    result = cli(*args, script=script)
    assert result.returncode == errors.EXIT_USAGE, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(needle), result.stderr


def test_bare_kubectl_gpushare_prints_help_to_stdout_and_succeeds() -> None:
    result = cli()
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("Usage: kubectl gpushare") and "label-nodes" in result.stdout


@pytest.mark.parametrize("script", ["kubectl-inspect-gpushare", "kubectl-gpushare"])
def test_version(script: str) -> None:
    result = cli("--version", script=script)
    assert result.returncode == 0 and __version__ in result.stdout


def test_ctrl_c_exits_130_at_once_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    @click.command()
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_info:
        run_command(interrupted, "x", [])
    assert exit_info.value.code == errors.EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err.strip() == "interrupted"  # click ends the ^C line first


def test_one_log_level_variable_for_both_daemons() -> None:
    for name in ("serve-extender", "serve-device-plugin"):
        command = load_command(name)
        (option,) = [p for p in command.params if p.name == "log_level"]
        assert isinstance(option, click.Option) and option.envvar is not None
        assert list(option.envvar)[0] == ENV_LOG_LEVEL == "GPUSHARE_LOG_LEVEL"


def test_kubectl_plugin_completion_lists_commands_and_flags() -> None:
    commands = cli("", script="kubectl_complete-gpushare").stdout.splitlines()
    assert commands[-1] == ":4" and {"fit", "doctor", "explain", "inspect"} <= {c.split("\t")[0] for c in commands}
    flags = cli("inspect", "--so", script="kubectl_complete-gpushare").stdout.splitlines()
    assert [f.split("\t")[0] for f in flags] == ["--sort", ":4"]
