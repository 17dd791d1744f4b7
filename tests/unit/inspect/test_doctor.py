"""``kubectl gpushare doctor`` offline: every finding on a seeded cluster, golden text and JSON, verdicts."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from kubectl_gpushare.inspect.doctor_command import doctor_command


def _load_cases() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "golden" / "doctor" / "cases.py"
    spec = importlib.util.spec_from_file_location("doctor_golden_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cases = _load_cases()
CHECKS = {
    "device-plugin-missing": "node/no-plugin",
    "two-device-plugins": "node/both-plugins",
    "gpu-overcommitted": "node/over",
    "invalid-value": "pod/team-b/bad-index",
    "gpu-node-unlabelled": "node/unlabelled",
    "unhealthy-gpus": "node/sick",
    "mixed-gpus-unannotated": "node/mixed",
    "assigned-stuck": "pod/team-a/stuck",
    "completed-holding": "pod/team-b/finished",
    "device-plugin-not-running": "node/no-daemon",
    "device-plugin-not-ready": "node/unready",
    "unhealthy-gpus-listed": "configmap/kube-system/unhealthy-gpu-sick",
    "scheduler-config-outdated": "configmap/kube-system/scheduler-config",
}
HEALTHY = ["healthy", "fine", "extender", "plugin-healthy"]


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": cases.seed()}))
    return path


@pytest.mark.parametrize(("suffix", "flags"), [("doctor.txt", []), ("doctor.json", ["-o", "json"])])
def test_seeded_cluster_matches_golden_and_exits_2(
    seeded: Path, suffix: str, flags: list[str], cli_runner: CliRunner
) -> None:
    result = cli_runner.invoke(doctor_command, ["--from-file", str(seeded), *flags])
    assert result.exit_code == 2, result.stderr
    cases.check(suffix, result.stdout)


def test_every_check_fires_once_on_its_object(seeded: Path, cli_runner: CliRunner) -> None:
    report = json.loads(cli_runner.invoke(doctor_command, ["--from-file", str(seeded), "-o", "json"]).stdout)
    assert (report["apiVersion"], report["kind"]) == ("gpushare.kubectl-gpushare.io/v1", "GPUShareDoctor")
    found = {(f["check"], f["object"]) for f in report["findings"]}
    assert found == set(CHECKS.items())
    assert report["summary"] == {"errors": 5, "warnings": 8}


@pytest.mark.parametrize(
    ("keep", "code"),
    [(HEALTHY, 0), ([*HEALTHY, "sick", "plugin-sick"], 1), ([*HEALTHY, "over", "plugin-over", "first", "second"], 2),
     (["healthy", "fine", "plugin-healthy"], 2), (["healthy", "fine", "plugin-healthy", "extender-unready"], 2)],
    ids=["clean", "warnings", "errors", "no-extender", "extender-not-ready"],
)
def test_exit_code_is_the_verdict(tmp_path: Path, keep: list[str], code: int, cli_runner: CliRunner) -> None:
    items = [item for item in cases.seed() if item["metadata"]["name"] in keep]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path)])
    assert result.exit_code == code, result.stdout
    if code == 0:
        assert result.stdout == "No problems found.\n"
    if "extender-unready" in keep:
        assert "extender-not-ready" in result.stdout and "kube-system/extender-unready" in result.stdout
        assert "extender-missing" not in result.stdout


def test_a_fresh_assignment_is_not_stuck_until_the_threshold(tmp_path: Path, cli_runner: CliRunner) -> None:
    items = [item for item in cases.seed() if item["metadata"]["name"] in (*HEALTHY, "stuck")]
    items[-1]["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_ASSUME_TIME"] = str(time.time_ns() - 60 * 10**9)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    fresh = cli_runner.invoke(doctor_command, ["--from-file", str(path)])
    assert fresh.exit_code == 0, fresh.stdout
    late = cli_runner.invoke(doctor_command, ["--from-file", str(path), "--stuck-after", "30"])
    assert late.exit_code == 1 and "assigned-stuck" in late.stdout


def test_unreadable_input_is_a_usage_error(tmp_path: Path, cli_runner: CliRunner) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    result = cli_runner.invoke(doctor_command, ["--from-file", str(bad)])
    assert result.exit_code == 2 and result.stdout == "" and result.stderr.startswith("error: --from-file")


@pytest.mark.parametrize(
    ("text", "outdated"),
    [
        ('{"kind": "Policy", "apiVersion": "v1", "extenders": []}', True),
        ("apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n", True),
        ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n", False),
        ("something: else\n", False),
    ],
    ids=["policy", "v1beta2", "v1", "unrelated"],
)
def test_scheduler_configuration_versions(text: str, outdated: bool) -> None:
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.types import ConfigMap, ObjectMeta

    configmap = ConfigMap(metadata=ObjectMeta(name="sched", namespace="kube-system"), data={"cfg": text})
    report = doctor.audit([], [], now_ns=0, configmaps=[configmap])
    assert [f.check for f in report.findings] == (["scheduler-config-outdated"] if outdated else [])
    elsewhere = ConfigMap(metadata=ObjectMeta(name="sched", namespace="team-a"), data={"cfg": text})
    assert doctor.audit([], [], now_ns=0, configmaps=[elsewhere]).findings == []


@pytest.mark.parametrize("suffix", ["json", "yaml"])
@pytest.mark.parametrize("conditions", ["x", 5, [["Ready"]], [{"type": {"a": 1}, "status": "True"}], None])
def test_malformed_conditions_are_not_ready_and_never_hide_the_pod(
    tmp_path: Path, suffix: str, conditions: object, cli_runner: CliRunner
) -> None:
    import yaml

    from kubectl_gpushare.inspect.command import inspect_command

    items = [item for item in cases.seed() if item["metadata"]["name"] in HEALTHY]
    plugin = next(item for item in items if item["metadata"]["name"] == "plugin-healthy")
    plugin["status"]["conditions"] = conditions
    fine = next(item for item in items if item["metadata"]["name"] == "fine")
    fine["status"]["conditions"] = conditions
    path = tmp_path / f"c.{suffix}"
    document = {"kind": "List", "items": items}
    path.write_text(json.dumps(document) if suffix == "json" else yaml.safe_dump(document))
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path), "-o", "json"])
    assert result.exit_code == 1, result.output
    assert [(f["check"], f["object"]) for f in json.loads(result.stdout)["findings"]] == [
        ("device-plugin-not-ready", "node/healthy")]
    report = json.loads(cli_runner.invoke(inspect_command, ["--from-file", str(path), "-o", "json"]).stdout)
    assert report["cluster"]["used"] == 4, "the pod with malformed conditions still counts"
