"""``pip install .`` brings the plugin's dependencies only; ``.[daemons]`` adds what the daemons run on.

One fresh virtualenv, made the way krew users get it: the krew archive's launcher, on its first run,
creates it and installs the archive's wheel (built from this checkout, not editable, so the packaged
manifests are checked too). pip's cache is reused. Needs the package index CI uses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_gpushare import __version__
from kubectl_gpushare.cli.manifests import render
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
DAEMON_MODULES = ("grpc", "google.protobuf", "pynvml", "prometheus_client", "kubernetes")
DAEMON_DISTRIBUTIONS = {"grpcio", "protobuf", "nvidia-ml-py", "prometheus-client", "kubernetes", "tabulate"}
# Runs inspect the way the console script does, then records every module it loaded.
PROBE = ("import atexit, sys; out = sys.argv.pop(1);"
         "atexit.register(lambda: open(out, 'w').write(' '.join(sys.modules)));"
         "from kubectl_gpushare.cli import inspect_main; inspect_main()")


def pip(python: Path, *args: str) -> None:
    result = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def fresh() -> Iterator[Path]:
    """The environment the krew launcher's first run creates (no extras); yields its python."""
    where = Path(tempfile.mkdtemp(prefix="gpushare-lean-"))
    try:
        subprocess.run([sys.executable, str(REPO / "plugin" / "build_krew.py"), "--out", str(where / "krew"),
                        "--manifest", str(where / "krew" / "gpushare.yaml")],
                       check=True, capture_output=True, timeout=300)
        (archive,) = (where / "krew").glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(where / "store", filter="data")
        env = dict(os.environ, KUBECTL_GPUSHARE_HOME=str(where / "home"), KUBECTL_GPUSHARE_PYTHON=sys.executable)
        first = subprocess.run([str(where / "store" / "kubectl-gpushare"), "--version"], env=env,
                               capture_output=True, text=True, timeout=600)
        assert first.returncode == 0, first.stderr[-3000:]
        assert __version__ in first.stdout and "first run, installing" in first.stderr
        (python,) = (where / "home").glob("*/bin/python")
        yield python
    finally:
        shutil.rmtree(where, ignore_errors=True)


def installed(python: Path) -> set[str]:
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
    return {entry["name"].lower().replace("_", "-") for entry in json.loads(listing)}


def test_plain_install_is_lean_and_inspect_loads_no_daemon_module(
    fresh: Path, sandbox: Sandbox, kubeconfig: Path, tmp_path: Path
) -> None:
    assert not installed(fresh) & DAEMON_DISTRIBUTIONS
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1"), pod_object("job", "default", [4], node="gpu-1", gpu=0)])
    modules = tmp_path / "modules.txt"
    result = subprocess.run([str(fresh), "-c", PROBE, str(modules), "--kubeconfig", str(kubeconfig)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "gpu-1" in result.stdout and "4/16" in result.stdout
    loaded = set(modules.read_text().split())
    assert "kubectl_gpushare.inspect.command" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"grpc", "pynvml", "prometheus_client", "kubernetes"}
                or m.startswith("google.protobuf")}
    # The packaged kustomize trees are complete in a non-editable install: each prints what the checkout does.
    for flags, options in (([], {}), (["--managed"], {"managed": True}), (["--dra"], {"dra": True})):
        out = subprocess.run([str(fresh.parent / "kubectl-gpushare"), "manifests", *flags],
                             capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stderr) == (0, ""), flags
        assert out.stdout == render(**options), flags
    assert "kind: DeviceClass" in out.stdout and "name: gpushare-viewer" in out.stdout


@pytest.mark.parametrize(("argv", "missing"), [
    (["serve-extender"], "prometheus_client"),
    (["serve-device-plugin", "--node-name", "n1"], "grpc, google.protobuf, prometheus_client, pynvml"),
    (["serve-device-plugin", "--node-name", "n1", "--fake-gpus", "1x16GiB"],
     "grpc, google.protobuf, prometheus_client"),
    (["demo"], "prometheus_client, grpc, google.protobuf"),
], ids=["extender", "device-plugin", "device-plugin-fake-gpus", "demo"])
def test_daemon_without_the_extra_says_which_to_install_in_one_line(
    fresh: Path, kubeconfig: Path, argv: list[str], missing: str
) -> None:
    result = subprocess.run([str(fresh.parent / "kubectl-gpushare"), *argv, "--kubeconfig", str(kubeconfig)]
                            if argv[0] != "demo" else [str(fresh.parent / "kubectl-gpushare"), *argv],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"needs {missing}," in result.stderr and "pip install 'kubectl-gpushare[daemons]'" in result.stderr


def test_under_krew_the_hint_names_what_works_there(fresh: Path, kubeconfig: Path) -> None:
    # krew's environment is the launcher's own: a pip install elsewhere never reaches it.
    where = fresh.parents[3]  # <where>/home/<version>/bin/python
    env = dict(os.environ, KUBECTL_GPUSHARE_HOME=str(where / "home"), KUBECTL_GPUSHARE_PYTHON=sys.executable)
    result = subprocess.run([str(where / "store" / "kubectl-gpushare"), "serve-extender", "--kubeconfig",
                             str(kubeconfig)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "pipx install 'kubectl-gpushare[daemons]'" in result.stderr
    assert "ghcr.io/kubectl-gpushare/kubectl-gpushare" in result.stderr and "pip install '" not in result.stderr


def wait_for(process: subprocess.Popen[str], text: str, timeout: float = 60) -> None:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return
    pytest.fail(f"never logged {text!r}: {''.join(seen)[-2000:]}")


def test_daemons_extra_runs_both_daemons(fresh: Path, sandbox: Sandbox, kubeconfig: Path) -> None:
    pip(fresh, f"{REPO}[daemons]")
    assert DAEMON_DISTRIBUTIONS - installed(fresh) == {"tabulate"}
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    binary = str(fresh.parent / "kubectl-gpushare")
    plugin_dir = tempfile.mkdtemp(prefix="dp", dir="/tmp")  # short enough for unix socket paths
    kubelet = KubeletSim(plugin_dir).start()
    processes = [
        subprocess.Popen([binary, "serve-extender", "--port", "0", "--kubeconfig", str(kubeconfig)],
                         stderr=subprocess.PIPE, text=True),
        subprocess.Popen([binary, "serve-device-plugin", "--node-name", "gpu-1", "--fake-gpus", "1x16GiB",
                          "--device-plugin-path", plugin_dir, "--kubeconfig", str(kubeconfig), "--usage-port", "0"],
                         stderr=subprocess.PIPE, text=True),
    ]
    try:
        wait_for(processes[0], "cache synced")
        assert kubelet.wait_registered(1, timeout=60)
        for process in processes:
            process.terminate()
            assert process.wait(30) == 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
