"""The golden cases through the real kubectl plugin mechanism against the sandbox API server.

Same golden files as the --from-file test: online and offline must print identical bytes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from golden.inspect import cases

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration



def run(kubectl: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("case", cases.cases())
def test_kubectl_inspect_gpushare_matches_golden(
    case: str, sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str]
) -> None:
    sandbox.load(cases.cluster_objects(case))
    for view, flags in cases.VIEWS.items():
        result = run(kubectl_binaries[0], ["inspect", "gpushare", *flags], kube_env)
        assert result.returncode == 0, result.stderr
        assert result.stdout == cases.expected(case, view).read_text(), f"{case}/{view} via kubectl"


@pytest.mark.parametrize("case", ["s2", "s4", "gpushare2"])
def test_both_spellings_and_every_kubectl_print_the_same(
    case: str, sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str]
) -> None:
    sandbox.load(cases.cluster_objects(case))
    golden = cases.expected(case, "details.txt").read_text()
    for kubectl in kubectl_binaries:
        for spelling in (["inspect", "gpushare"], ["gpushare", "inspect"]):
            result = run(kubectl, [*spelling, "-d"], kube_env)
            assert result.returncode == 0, result.stderr
            assert result.stdout == golden, f"{kubectl} {' '.join(spelling)}"


def test_online_json_equals_offline_json_of_kubectl_get(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl_binaries: list[str], tmp_path: Path
) -> None:
    sandbox.load(cases.cluster_objects("many-nodes"))
    dump = run(kubectl_binaries[0], ["get", "nodes,pods", "-A", "-o", "json"], kube_env)
    assert dump.returncode == 0, dump.stderr
    (tmp_path / "cluster.json").write_text(dump.stdout)
    dump_yaml = run(kubectl_binaries[0], ["get", "nodes,pods", "-A", "-o", "yaml"], kube_env)
    (tmp_path / "cluster.yaml").write_text(dump_yaml.stdout)
    online = run(kubectl_binaries[0], ["inspect", "gpushare", "-o", "json"], kube_env)
    for name in ("cluster.json", "cluster.yaml"):
        offline = run(
            kubectl_binaries[0], ["inspect", "gpushare", "-o", "json", "--from-file", str(tmp_path / name)], kube_env
        )
        assert offline.returncode == 0, offline.stderr
        assert offline.stdout == online.stdout == cases.expected("many-nodes", "out.json").read_text()
