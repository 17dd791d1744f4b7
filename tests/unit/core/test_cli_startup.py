"""The CLI must start fast: heavy libraries are imported only by the commands that use them."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "grpc", "rich", "prometheus_client", "pynvml")


def _loaded_after(code: str) -> set[str]:
    probe = (
        f"import sys\n{code}\n"
        f"print('LOADED:', *sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}), file=sys.stderr)"
    )
    err = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stderr
    return set(err.rsplit("LOADED:", 1)[1].split())


def test_importing_the_cli_loads_no_heavy_library() -> None:
    assert _loaded_after("import kubectl_gpushare.cli") == set()


@pytest.mark.parametrize("argv", [["--help"], ["manifests", "--help"]])
def test_group_help_loads_no_heavy_library(argv: list[str]) -> None:
    code = (
        "import sys\nfrom kubectl_gpushare.cli import gpushare\n"
        f"try:\n    gpushare.main({argv!r}, prog_name='kubectl gpushare')\nexcept SystemExit:\n    pass"
    )
    assert _loaded_after(code) == set()


def test_group_help_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kubectl_gpushare.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("inspect", "label-nodes", "serve-extender", "serve-device-plugin", "sandbox", "demo", "manifests"):
        assert f"  {name} " in out
