"""Every number-of-seconds flag of every command refuses ``nan`` and ``inf`` (click's FloatRange passes ``nan``)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from kubectl_gpushare.cli import SUBCOMMANDS, load_command
from kubectl_gpushare.kube.flags import FiniteFloatRange

FLOAT_FLAGS = [
    (name, param.opts[-1])
    for name in sorted(SUBCOMMANDS)
    for param in load_command(name).params
    if isinstance(param, click.Option) and isinstance(param.type, click.FloatRange)
]


def test_the_float_flags_are_found() -> None:
    assert ("serve-extender", "--lease-duration") in FLOAT_FLAGS and ("doctor", "--stuck-after") in FLOAT_FLAGS


@pytest.mark.parametrize(("command", "flag"), FLOAT_FLAGS, ids=[f"{c} {f}" for c, f in FLOAT_FLAGS])
@pytest.mark.parametrize("value", ["nan", "-nan", "inf"])
def test_nan_and_infinity_are_usage_errors(command: str, flag: str, value: str) -> None:
    cmd = load_command(command)
    param = next(p for p in cmd.params if flag in p.opts)
    assert isinstance(param.type, FiniteFloatRange)
    result = CliRunner().invoke(cmd, [flag, value])
    assert result.exit_code == 2, result.output
    assert "is not a finite number" in result.output or "is not in the range" in result.output
