"""Plugin discovery by the real kubectl, the krew archive and manifest, and the krew launcher."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent


def test_kubectl_plugin_list_shows_both_plugins_without_warnings(
    kube_env: dict[str, str], kubectl_binaries: list[str]
) -> None:
    # Only the venv's bin and the system directories: the pip-installed layout a user gets.
    env = dict(kube_env, PATH=os.pathsep.join([str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]))
    for kubectl in kubectl_binaries:
        result = subprocess.run([kubectl, "plugin", "list"], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        found = {Path(line).name for line in result.stdout.splitlines() if line.startswith("/")}
        assert {"kubectl-gpushare", "kubectl-inspect-gpushare"} <= found
        ours = [line for line in result.stderr.splitlines() if "gpushare" in line]
        assert ours == [], ours


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("krew")
    manifest = out / "gpushare.yaml"
    subprocess.run(
        [sys.executable, str(ROOT / "plugin" / "build_krew.py"), "--out", str(out), "--manifest", str(manifest)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (archive,) = out.glob("*.tar.gz")
    return archive, manifest


def test_krew_manifest_matches_archive(built: tuple[Path, Path]) -> None:
    archive, manifest_path = built
    manifest = yaml.safe_load(manifest_path.read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "gpushare"
    assert manifest["spec"]["version"].startswith("v")
    assert len(manifest["spec"]["shortDescription"]) <= 50
    assert "Python" in manifest["spec"]["caveats"]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    with tarfile.open(archive) as tar:
        members = {member.name: member for member in tar.getmembers()}
    for platform in manifest["spec"]["platforms"]:
        assert platform["sha256"] == digest
        assert platform["uri"].endswith(archive.name)
        assert members[platform["bin"]].mode & 0o111
    assert any(name.endswith(".whl") for name in members)


def test_committed_manifest_is_the_fresh_builds_digest_and_all(built: tuple[Path, Path]) -> None:
    # The wheel is built with a pinned backend in an isolated environment, so the digest depends on
    # the content only; it tracks the code (the wheel is inside) and README.md (its description).
    committed = (ROOT / "krew-manifest.yaml").read_text()
    assert committed == built[1].read_text(), (
        "krew-manifest.yaml is stale: run .venv/bin/python plugin/build_krew.py and commit it")


def test_build_without_pip_says_what_it_needs_in_one_line(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    result = subprocess.run([str(venv / "bin" / "python"), str(ROOT / "plugin" / "build_krew.py"), "--out",
                             str(tmp_path / "out"), "--manifest", str(tmp_path / "m.yaml")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("build_krew.py: needs pip in ") and result.stderr.count("\n") == 1


def test_launcher_runs_the_installed_environment(built: tuple[Path, Path], tmp_path: Path) -> None:
    archive, _ = built
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "store", filter="data")
    home = tmp_path / "data"
    from kubectl_gpushare import __version__

    env_bin = home / __version__ / "bin"
    env_bin.mkdir(parents=True)
    for name in ("kubectl-gpushare", "kubectl-inspect-gpushare"):
        script = env_bin / name
        script.write_text(f'#!/bin/sh\necho "{name} $*"\n')
        script.chmod(0o755)
    (home / __version__ / ".complete").write_text("")
    links = tmp_path / "bin"
    links.mkdir()
    (links / "kubectl-gpushare").symlink_to(tmp_path / "store" / "kubectl-gpushare")
    (links / "kubectl-inspect_gpushare").symlink_to(tmp_path / "store" / "kubectl-gpushare")
    env = dict(os.environ, KUBECTL_GPUSHARE_HOME=str(home))
    run = subprocess.run([str(links / "kubectl-gpushare"), "inspect", "-d"], env=env, capture_output=True, text=True)
    assert run.stdout == "kubectl-gpushare inspect -d\n"
    run = subprocess.run([str(links / "kubectl-inspect_gpushare"), "n1"], env=env, capture_output=True, text=True)
    assert run.stdout == "kubectl-inspect-gpushare n1\n"
    bad = subprocess.run(
        [str(links / "kubectl-gpushare")],
        env=dict(env, KUBECTL_GPUSHARE_HOME=str(tmp_path / "fresh"), KUBECTL_GPUSHARE_PYTHON="/nonexistent/python"),
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "needs Python 3.11" in bad.stderr


def test_real_kubectl_completes_the_plugin(kube_env: dict[str, str], kubectl_binaries: list[str]) -> None:
    result = subprocess.run(
        [kubectl_binaries[0], "__complete", "gpushare", "ex"], env=kube_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert [line.split("\t")[0] for line in result.stdout.splitlines()][:1] == ["explain"]


def test_real_kubectl_bare_help_version_and_usage_errors(kube_env: dict[str, str], kubectl_binaries: list[str]) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl_binaries[0], *args], env=kube_env, capture_output=True, text=True, timeout=60)

    bare = run("gpushare")
    assert (bare.returncode, bare.stderr) == (0, "") and bare.stdout.startswith("Usage: kubectl gpushare")
    version = run("inspect", "gpushare", "--version")
    assert version.returncode == 0 and "version" in version.stdout
    usage = run("gpushare", "fit", "--bogus")
    assert usage.returncode == 2 and usage.stdout == "" and usage.stderr.startswith("error: No such option")
    assert usage.stderr.count("\n") == 1
