"""Our kubeconfig resolution agrees with the real kubectl's (``kubectl config view --minify``).

Two files with overlapping names exercise kubectl's merge rule (the first file to define a name or
the current context wins); each scenario's server, user token and namespace must match.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpushare.kube.config import load_config

pytestmark = pytest.mark.integration

FIRST = {
    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
    "users": [{"name": "u", "user": {"token": "first"}}],
    "contexts": [{"name": "alt", "context": {"cluster": "c2", "user": "u2", "namespace": "ns-a"}}],
}
SECOND = {
    "current-context": "main",
    "clusters": [
        {"name": "c", "cluster": {"server": "http://127.0.0.1:10"}},
        {"name": "c2", "cluster": {"server": "http://127.0.0.1:11"}},
    ],
    "users": [{"name": "u", "user": {"token": "second"}}, {"name": "u2", "user": {"token": "other"}}],
    "contexts": [
        {"name": "main", "context": {"cluster": "c", "user": "u"}},
        {"name": "alt", "context": {"cluster": "c", "user": "u"}},
    ],
}


def kubectl_env(tmp_path: Path) -> dict[str, str]:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text(yaml.safe_dump(FIRST))
    second.write_text(yaml.safe_dump(SECOND))
    env = dict(os.environ, KUBECONFIG=os.pathsep.join([str(first), str(second)]), HOME=str(tmp_path))
    env["KUBECACHEDIR"] = str(tmp_path / "cache")
    return env


def run(binary: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("flags", [{}, {"context": "alt"}], ids=["current", "context"])
def test_merged_view_matches_kubectl(tmp_path: Path, kubectl_binaries: list[str], flags: dict[str, str]) -> None:
    env = kubectl_env(tmp_path)
    args = [f"--{key}={value}" for key, value in flags.items()]
    done = run(kubectl_binaries[0], env, "config", "view", "--minify", "--raw", "-o", "json", *args)
    assert done.returncode == 0, done.stderr
    view: dict[str, Any] = json.loads(done.stdout)
    ours = load_config(environ=env, **flags)  # type: ignore[arg-type]
    assert ours.server == view["clusters"][0]["cluster"]["server"]
    assert ours.auth_headers()["Authorization"] == f"Bearer {view['users'][0]['user']['token']}"
    assert ours.namespace == (view["contexts"][0]["context"].get("namespace") or "default")


@pytest.mark.parametrize(
    "flags",
    [{}, {"context": "alt"}, {"context": "main", "cluster": "c2"}, {"context": "alt", "cluster": "c"}],
    ids=["current", "context", "cluster-override", "cluster-override-alt"],
)
def test_server_chosen_matches_the_one_kubectl_calls(
    tmp_path: Path, kubectl_binaries: list[str], flags: dict[str, str]
) -> None:
    # `config view` ignores --cluster/--user, so ask kubectl to call the server and read the URL it
    # logs (nothing listens there; the call fails fast).
    env = kubectl_env(tmp_path)
    args = [f"--{key}={value}" for key, value in flags.items()]
    done = run(kubectl_binaries[0], env, "get", "--raw", "/version", "-v=6", "--request-timeout=2s", *args)
    called = set(re.findall(r"http://127\.0\.0\.1:\d+", done.stderr))
    ours = load_config(environ=env, **flags)  # type: ignore[arg-type]
    assert called == {ours.server}
