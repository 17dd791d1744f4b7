"""``kubectl gpushare doctor`` offline: every finding on a seeded cluster, golden text and JSON, verdicts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from golden.doctor import cases
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect.doctor_command import doctor_command
from kubectl_gpushare.kube.errors import EXIT_FINDINGS_ERRORS, EXIT_FINDINGS_WARNINGS
from kubectl_gpushare.kube.stacks.dra import UNUSABLE_EFFECT

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
    "hami-bind-failed": "pod/team-h/bind-failed",
    "hami-handshake-stuck": "node/hami-stuck",
    "stack-gpu-overcommitted": "node/hami-over",
    "node-confinement-missing": "validatingadmissionpolicybinding/gpushare-device-plugin-confinement",
    "gpu-advertised-by-extender-and-dra": "node/dra-and-plugin",
    "gpu-published-by-two-dra-drivers": "node/dra-twice",
    "dra-claim-on-unpublished-device": "resourceclaim/team-d/dra-ghost",
    "dra-claim-unallocatable": "pod/team-d/dra-no-class",
    "dra-claim-named-twice": "pod/team-d/dra-named",
    "dra-claims-unreadable": "pod/team-d/dra-unreadable",
}
DRA_TWICE = {("gpu-overcommitted", "node/dra-over"), ("dra-claim-pending", "pod/team-d/dra-waiting"),
             ("dra-claim-pending", "pod/team-d/dra-no-claim")}
HAMI_MUTEX_STUCK = {("hami-mutex-stuck", "node/hami-stuck"), ("hami-mutex-stuck", "node/hami-over")}
HEALTHY = ["healthy", "fine", "extender", "plugin-healthy"]


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": cases.seed()}))
    return path


@pytest.mark.parametrize(("suffix", "flags"), [("doctor.txt", []), ("doctor.json", ["-o", "json"])])
def test_seeded_cluster_matches_golden_and_exits_with_errors_found(
    seeded: Path, suffix: str, flags: list[str], cli_runner: CliRunner
) -> None:
    result = cli_runner.invoke(doctor_command, ["--from-file", str(seeded), *flags])
    assert result.exit_code == EXIT_FINDINGS_ERRORS, result.stderr
    cases.check(suffix, result.stdout)


def test_every_check_fires_once_on_its_object(seeded: Path, cli_runner: CliRunner) -> None:
    report = json.loads(cli_runner.invoke(doctor_command, ["--from-file", str(seeded), "-o", "json"]).stdout)
    assert (report["apiVersion"], report["kind"]) == ("gpushare.kubectl-gpushare.io/v1", "GPUShareDoctor")
    found = {(f["check"], f["object"]) for f in report["findings"]}
    assert found == set(CHECKS.items()) | HAMI_MUTEX_STUCK | DRA_TWICE
    assert len(report["findings"]) == len(found)
    assert report["summary"] == {"errors": 14, "warnings": 14}


@pytest.mark.parametrize(
    ("keep", "code"),
    [(HEALTHY, 0), ([*HEALTHY, "sick", "plugin-sick"], EXIT_FINDINGS_WARNINGS),
     ([*HEALTHY, "over", "plugin-over", "first", "second"], EXIT_FINDINGS_ERRORS),
     (["healthy", "fine", "plugin-healthy"], EXIT_FINDINGS_ERRORS),
     (["healthy", "fine", "plugin-healthy", "extender-unready"], EXIT_FINDINGS_ERRORS)],
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
    assert late.exit_code == EXIT_FINDINGS_WARNINGS and "assigned-stuck" in late.stdout


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


def _hami_audit(node_annotations: dict[str, str], now_s: float) -> list[tuple[str, str]]:
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.types import NODE_DECODER
    from kubectl_gpushare.sandbox.stack_spec import stack_node_object

    raw = stack_node_object("h", "hami", [8192], ip="10.0.0.1", product="X", labels={}, annotations=node_annotations)
    node = NODE_DECODER.decode(json.dumps(raw).encode())
    report = doctor.audit([node], [], now_ns=int(now_s * 1e9))
    return [(f.check, f.message) for f in report.findings]


NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("annotations", "checks"),
    [
        ({"hami.io/node-handshake": "Requesting_2023-11-14 22:09:00"}, []),  # 260 s: not yet
        ({"hami.io/node-handshake": "Requesting_2023-11-14 22:08:00"}, ["hami-handshake-stuck"]),  # 320 s
        ({"hami.io/node-handshake": "Reported 2020-01-01 00:00:00.1 +0000 UTC m=+1"}, []),
        ({"hami.io/node-handshake-mlu": "Requesting_2023.11.14 22:00:00"}, ["hami-handshake-stuck"]),  # per vendor
        ({"hami.io/node-handshakes": "Requesting_2023.11.14 22:00:00"}, []),  # not HAMi's key
        ({"hami.io/mutex.lock": "2023-11-14T22:10:00Z,ns,p"}, []),
        ({"hami.io/mutex.lock": "2023-11-14T22:00:00Z"}, ["hami-mutex-stuck"]),
        ({"hami.io/mutex.lock": "2023-11-14T23:00:00+01:00,ns,p"}, ["hami-mutex-stuck"]),  # 22:00Z
        ({"hami.io/mutex.lock": "2999-01-01T00:00:00Z,ns,p"}, ["hami-mutex-stuck"]),  # in the future
        ({"hami.io/mutex.lock": "0001-01-01T00:00:00+14:00"}, ["hami-mutex-stuck"]),
        ({"hami.io/mutex.lock": "9999-12-31T23:59:59-23:59"}, ["hami-mutex-stuck"]),
        ({"hami.io/mutex.lock": "2023-11-14T22:00:00Z,only-two"}, ["hami-mutex-stuck"]),
        ({"hami.io/mutex.lock": "\x00" * 5000}, ["hami-mutex-stuck"]),
        ({"hami.io/mutex.lock": ""}, ["hami-mutex-stuck"]),
        ({"hami.io/node-handshake": "Requesting_soon"}, ["invalid-value"]),  # the decoder's one warning
        ({"hami.io/node-nvidia-register": "GPU-1,10"}, ["invalid-value"]),
    ],
    ids=["handshake-fresh", "handshake-stuck", "reported", "handshake-mlu", "handshake-lookalike",
         "lock-fresh", "lock-old", "lock-offset", "lock-future",
         "lock-year-1", "lock-year-9999", "lock-two-parts", "lock-huge", "lock-empty", "handshake-unreadable",
         "register-malformed"],
)
def test_hami_timestamps_are_bounded_and_judged(annotations: dict[str, str], checks: list[str]) -> None:
    assert [check for check, _ in _hami_audit(annotations, NOW)] == checks


@settings(max_examples=200, deadline=None)
@given(handshake=st.text(max_size=80), lock=st.text(max_size=80))
def test_hostile_hami_annotations_never_crash(handshake: str, lock: str) -> None:
    found = _hami_audit({"hami.io/node-handshake": "Requesting_" + handshake, "hami.io/mutex.lock": lock}, NOW)
    assert all(check in ("hami-handshake-stuck", "hami-mutex-stuck", "invalid-value") for check, _ in found)


def test_a_bind_failure_of_a_finished_pod_is_not_reported() -> None:
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.types import POD_DECODER

    raw = [item for item in cases.seed() if item["metadata"]["name"] == "bind-failed"][0]
    pending = POD_DECODER.decode(json.dumps(raw).encode())
    assert [f.check for f in doctor.audit([], [pending], now_ns=0).findings] == ["hami-bind-failed"]
    raw["status"]["phase"] = "Failed"
    failed = POD_DECODER.decode(json.dumps(raw).encode())
    assert doctor.audit([], [failed], now_ns=0).findings == []


def test_a_nano_gpu_card_over_100_percent_is_overcommitted_in_percent() -> None:
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.types import NODE_DECODER, POD_DECODER
    from kubectl_gpushare.sandbox.stack_spec import stack_node_object, stack_pod_object

    node = stack_node_object("nano", "nano-gpu", [0], ip="10.0.0.2", product="", labels={}, annotations={})
    pods = [stack_pod_object(f"p{i}", "ml", "nano-gpu", [60], node="nano", gpu=0) for i in range(2)]
    report = doctor.audit([NODE_DECODER.decode(json.dumps(node).encode())],
                          [POD_DECODER.decode(json.dumps(p).encode()) for p in pods], now_ns=0)
    assert [(f.check, f.message) for f in report.findings] == [
        ("stack-gpu-overcommitted", "nano-gpu GPU 0 holds 120 of 100 %: ml/p0, ml/p1")
    ]


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
    assert result.exit_code == EXIT_FINDINGS_WARNINGS, result.output
    assert [(f["check"], f["object"]) for f in json.loads(result.stdout)["findings"]] == [
        ("device-plugin-not-ready", "node/healthy")]
    report = json.loads(cli_runner.invoke(inspect_command, ["--from-file", str(path), "-o", "json"]).stdout)
    assert report["cluster"]["used"] == 4, "the pod with malformed conditions still counts"


def test_findings_are_capped_with_a_count_per_check_and_json_is_whole(seeded: Path, cli_runner: CliRunner) -> None:
    capped = cli_runner.invoke(doctor_command, ["--from-file", str(seeded), "--limit", "2"]).stdout.splitlines()
    whole = cli_runner.invoke(doctor_command, ["--from-file", str(seeded), "--all"]).stdout.splitlines()
    assert capped[0] == whole[0] == "14 errors, 14 warnings."
    assert capped[2] == "SEVERITY  CHECK                               FINDINGS"
    assert "warning   hami-mutex-stuck                    2" in capped, "one row per check, with its count"
    table = capped.index("") + 1 + capped[capped.index("") + 1:].index("") + 1
    shown = [" ".join(line.split()) for line in capped[table + 1:]]
    assert shown == [" ".join(line.split()) for line in whole[3:5]] + [
        "... 26 more findings (--all or --limit N shows them)"]
    assert len(whole) == 2 + 1 + 28
    report = json.loads(cli_runner.invoke(doctor_command, ["--from-file", str(seeded), "--limit", "2",
                                                          "-o", "json"]).stdout)
    assert len(report["findings"]) == 28


def test_a_pod_bound_around_the_extender_is_named() -> None:
    """nodeName set by hand, aliyun.com/gpu-mem asked, no extender annotations: an error naming the pod."""
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.types import NODE_DECODER, POD_DECODER
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    node = NODE_DECODER.decode(json.dumps(node_object("gpu-a", [16, 16], ip="10.0.0.1")).encode())

    def audit(*pods: dict[str, object]) -> list[tuple[str, str, str]]:
        decoded = [POD_DECODER.decode(json.dumps(p).encode()) for p in pods]
        return [(f.severity, f.check, f.object) for f in doctor.audit([node], decoded, now_ns=0).findings
                if f.check == "bypassed-extender"]

    by_hand = pod_object("by-hand", "ml", [8], node="gpu-a", phase="Running")
    assert audit(by_hand) == [("error", "bypassed-extender", "pod/ml/by-hand")]
    message = next(f.message for f in doctor.audit([node], [POD_DECODER.decode(json.dumps(by_hand).encode())],
                                                   now_ns=0).findings if f.check == "bypassed-extender")
    assert "gpu-a" in message and "ALIYUN_COM_GPU_MEM_IDX" in message and "without" in message
    # Not reported: placed by the extender, not bound yet, no GPU memory asked, or finished.
    placed = pod_object("placed", "ml", [8], node="gpu-a", gpu=1, gpu_memory=16)
    unbound = pod_object("unbound", "ml", [8])
    cpu_only = pod_object("cpu-only", "ml", [0], node="gpu-a", phase="Running")
    finished = pod_object("finished", "ml", [8], node="gpu-a", phase="Succeeded")
    assert audit(placed, unbound, cpu_only, finished) == []


def test_a_node_sharing_through_dra_is_not_told_to_get_the_gpushare_label() -> None:
    from kubectl_gpushare import protocol
    from kubectl_gpushare.dra_objects import decode_slice
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.stacks.dra import DraObjects
    from kubectl_gpushare.kube.types import NODE_DECODER
    from kubectl_gpushare.sandbox.builders import node_object

    gpu = {"nvidia.com/gpu.present": "true"}
    labelled = node_object("dra-labelled", [16], ip="10.9.0.5", dra=True, labels=gpu)
    publishing = node_object("dra-publishing", [], ip="10.9.0.6", labels=gpu)
    plain = node_object("plain", [], ip="10.9.0.7", labels=gpu)
    nodes = [NODE_DECODER.decode(json.dumps(n).encode()) for n in (labelled, publishing, plain)]
    piece = decode_slice({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": protocol.DRA_DRIVER, "nodeName": "dra-publishing",
                 "pool": {"name": "dra-publishing", "generation": 1, "resourceSliceCount": 1}, "devices": []},
    })
    report = doctor.audit(nodes, [], now_ns=0, dra_objects=DraObjects(slices=[piece]))
    assert [(f.check, f.object) for f in report.findings if f.check == "gpu-node-unlabelled"] == [
        ("gpu-node-unlabelled", "node/plain")]


def test_dra_pool_unusable_is_one_warning_per_pool_on_its_node_or_the_pool() -> None:
    """doctor's words for `stacks.dra.pool_states`: incomplete and invalid pools of both drivers, one finding each,
    naming the nodes where the pool fails (a pool over several nodes: the pool is the object)."""
    import msgspec

    from kubectl_gpushare import dra_objects, protocol
    from kubectl_gpushare.inspect import doctor_dra
    from kubectl_gpushare.kube.records import Warnings
    from kubectl_gpushare.kube.stacks import dra

    def wire(name: str, driver: str, pool: str, devices: list[str], count: int = 1,
             **where: object) -> dra_objects.WireResourceSlice:
        return msgspec.convert({"metadata": {"name": name}, "spec": {
            "driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}, **where,
            "devices": [{"name": d, "capacity": {"memory": {"value": "16Gi"}}} for d in devices]}},
            dra_objects.WireResourceSlice)

    slices = [wire("a", protocol.DRA_DRIVER, "n1", ["gpu-0"], count=2, nodeName="n1"),
              wire("b", protocol.NVIDIA_DRA_DRIVER, "nv", ["gpu-0"], nodeName="nv"),
              wire("c", protocol.NVIDIA_DRA_DRIVER, "nv", ["gpu-0"], nodeName="nv"),
              wire("d", protocol.DRA_DRIVER, "shared", ["gpu-0", "gpu-0"], allNodes=True),
              wire("e", protocol.DRA_DRIVER, "fine", ["gpu-0"], nodeName="fine"),
              wire("f", protocol.DRA_DRIVER, "spread", ["gpu-0"], nodeName="s1"),  # its own slice is the pool
              wire("g", protocol.DRA_DRIVER, "spread", ["gpu-0", "gpu-0"], nodeName="s2"),
              wire("h", protocol.DRA_DRIVER, "spread", ["gpu-1", "gpu-1"], nodeName="s3")]
    objects = dra.read(slices, [], Warnings())
    found = [(f.severity, f.check, f.object, f.message.split(";")[0]) for f in doctor_dra.pool_findings(objects)]
    assert found == [
        ("warning", "dra-pool-unusable", "node/n1", f"pool 'n1' of {protocol.DRA_DRIVER} is incomplete (currently "
                                                    "being updated): 1 ResourceSlice(s) of generation 1, "
                                                    "resourceSliceCount 2"),
        ("warning", "dra-pool-unusable", f"resourcepool/{protocol.DRA_DRIVER}/shared",
         f"pool 'shared' of {protocol.DRA_DRIVER} is invalid: duplicate device name 'gpu-0'"),
        ("warning", "dra-pool-unusable", f"resourcepool/{protocol.DRA_DRIVER}/spread",
         f"pool 'spread' of {protocol.DRA_DRIVER} (nodes 's2', 's3') is invalid: duplicate device name 'gpu-0'"),
        ("warning", "dra-pool-unusable", "node/nv", f"pool 'nv' of {protocol.NVIDIA_DRA_DRIVER} is incomplete "
                                                    "(currently being updated): 2 ResourceSlice(s) of generation 1, "
                                                    "resourceSliceCount 1"),  # not validated: not also invalid
    ]


@pytest.mark.parametrize(("suffix", "flags"), [("pool-unusable.txt", []), ("pool-unusable.json", ["-o", "json"])])
def test_an_unusable_pool_is_said_once_as_its_finding(
    tmp_path: Path, suffix: str, flags: list[str], cli_runner: CliRunner
) -> None:
    """The reading's pool warning (every other view prints it on stderr) is doctor's dra-pool-unusable finding
    alone: not on stderr as well, in either format."""
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"kind": "List", "items": cases.pool_unusable()}))
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path), *flags])
    assert result.exit_code == EXIT_FINDINGS_WARNINGS, result.stderr
    assert result.stderr == "", "the finding is the only place the pool is reported"
    assert result.stdout.count("is incomplete (currently being updated)") == 1
    assert result.stdout.count("dra-pool-unusable") == 1
    cases.check(suffix, result.stdout)


@pytest.mark.parametrize(("suffix", "flags"), [("prefilter.txt", []), ("prefilter.json", ["-o", "json"])])
def test_pods_the_dynamicresources_prefilter_refuses_are_errors_at_any_age(
    tmp_path: Path, suffix: str, flags: list[str], cli_runner: CliRunner
) -> None:
    """Pods created just now, far younger than --stuck-after, whose claim is being deleted, reserved for 256 other
    pods, or of a class that does not exist: kube-scheduler refuses them before it tries a node, in the words
    `dra_allocation.prefilter` gives explain (the deleted and the full claims are allocated: read for counting)."""
    path = tmp_path / "prefilter.json"
    path.write_text(json.dumps({"kind": "List", "items": cases.prefilter()}))
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path), *flags])
    assert (result.exit_code, result.stderr) == (EXIT_FINDINGS_ERRORS, ""), result.stderr
    found = {f["object"]: (f["severity"], f["check"], f["message"]) for f in json.loads(
        cli_runner.invoke(doctor_command, ["--from-file", str(path), "-o", "json"]).stdout)["findings"]}
    said = {"going": 'resourceclaim "held" is being deleted', "crowded": "resourceclaim in use",
            "classless": "request gpu: device class gpu.nvidia.com does not exist"}
    assert found == {f"pod/team-p/{pod}": ("error", "dra-claim-unallocatable", f"cannot be scheduled: {words}")
                     for pod, words in said.items()}
    cases.check(suffix, result.stdout)


def test_without_deviceclasses_a_claim_being_deleted_or_in_use_is_still_an_error(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """A file (or a reader) without DeviceClasses: PreFilter's deletion and in-use checks need no class, so doctor
    still reports them as explain does (it assumes our driver's class); only whether a class exists is not asked.
    Before, doctor skipped PreFilter whole without classes and found no problem where explain said why."""
    items = [item for item in cases.prefilter() if item["kind"] != "DeviceClass"]
    path = tmp_path / "noclass.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path), "-o", "json"])
    assert result.exit_code == EXIT_FINDINGS_ERRORS, result.output
    found = {f["object"]: f["message"] for f in json.loads(result.stdout)["findings"]
             if f["check"] == "dra-claim-unallocatable"}
    assert found == {"pod/team-p/going": 'cannot be scheduled: resourceclaim "held" is being deleted',
                     "pod/team-p/crowded": "cannot be scheduled: resourceclaim in use"}


def test_only_the_pools_warning_leaves_stderr(tmp_path: Path, cli_runner: CliRunner) -> None:
    """Doctor drops from stderr the pool warnings its findings repeat, and nothing else: a pod that does not
    decode, read beside the unusable pool, is still warned of."""
    from kubectl_gpushare.sandbox.builders import pod_object

    broken = pod_object("broken", "team-a", [4])
    broken["spec"]["containers"] = 5  # skipped with a warning on stderr that names it
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"kind": "List", "items": [*cases.pool_unusable(), broken]}))
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path)])
    assert result.exit_code == EXIT_FINDINGS_WARNINGS, result.stderr
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == ["warning"]
    assert result.stderr.startswith("warning: pod team-a/broken: cannot be decoded")
    assert result.stdout.count("dra-pool-unusable") == 1


def test_an_unusable_pool_is_still_a_warning_in_the_other_views(tmp_path: Path, cli_runner: CliRunner) -> None:
    """Only doctor turns the warning into a finding: inspect, which has no findings, keeps it on stderr."""
    from kubectl_gpushare.inspect.command import inspect_command

    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"kind": "List", "items": cases.pool_unusable()}))
    result = cli_runner.invoke(inspect_command, ["--from-file", str(path)])
    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "is incomplete" in line] == [
        f"warning: pool 'dra-a' of {protocol.DRA_DRIVER} is incomplete (currently being updated): 1 ResourceSlice(s) "
        f"of generation 1, resourceSliceCount 2; {UNUSABLE_EFFECT}"]


def test_names_from_a_file_cannot_write_escapes_or_forge_rows_in_the_text(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """A node, pod, namespace and annotation value holding ESC, a newline and a tab (a file is not validated as
    the API server validates names): the text output shows them with spaces, one row per finding; JSON is exact."""
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"kind": "List", "items": cases.hostile_names()}))
    text = cli_runner.invoke(doctor_command, ["--from-file", str(path)])
    assert text.exit_code == EXIT_FINDINGS_ERRORS, text.stderr
    assert "\x1b" not in text.stdout and "\t" not in text.stdout and "\r" not in text.stdout
    lines = text.stdout.splitlines()
    assert lines[0] == "2 errors, 3 warnings." and len(lines) == 3 + 5, "one line per finding, none forged"
    assert all(line.split()[0] in ("error", "warning") for line in lines[3:])
    assert "node/gpu [31m ERROR forged [0m" in text.stdout
    assert text.stderr.startswith("warning: pod team-a/broken [31m ERROR forged [0m: cannot be decoded")
    assert text.stderr.count("\n") == 1 and "\t" not in text.stderr, "the warning naming it is one line"
    cases.check("hostile-names.txt", text.stdout)
    report = json.loads(cli_runner.invoke(doctor_command, ["--from-file", str(path), "-o", "json"]).stdout)
    objects = {f["object"] for f in report["findings"]}
    hostile = cases.HOSTILE
    assert {f"node/gpu{hostile}", f"pod/team-a/stuck{hostile}", f"pod/ns{hostile}/finished"} <= objects


def test_a_plugins_pod_names_are_bounded_and_exact_in_json_printable_in_text() -> None:
    """gpu-over-share names a pod from a device plugin's document: a name longer than the API allows makes the
    document unreadable (`protocol.decode_usage_report`); one within bounds is exact in JSON, printable in text."""
    from kubectl_gpushare import protocol
    from kubectl_gpushare.inspect import doctor

    gib = 2**30
    name = "p\x1b[31m" + "x" * 245
    report = protocol.UsageReport("n1", "t", 10, "processes", [
        protocol.UsageGpu(0, "g0", 16 * gib, 4 * gib, 8 * gib, protocol.ENFORCE_OFF, ""),
    ], [protocol.UsagePod("ns\n", name, "u1", 0, 2 * gib, 6 * gib), protocol.UsagePod("b", "c", "u2", 0, 2 * gib)])
    for namespace, pod in (("n" * 64, "p"), ("ns", "p" * 254)):
        long = msgspec.structs.replace(report, pods=[msgspec.structs.replace(report.pods[0], namespace=namespace,
                                                                             name=pod)])
        with pytest.raises(protocol.AnnotationError, match="pod entry out of range"):
            protocol.decode_usage_report(protocol.encode_usage_report(long))
    report = protocol.decode_usage_report(protocol.encode_usage_report(report))
    audited = doctor.audit([], [], now_ns=0, usage={"n1": report})
    (found,) = [f for f in audited.findings if f.check == "gpu-over-share"]
    assert found.object == f"pod/ns\n/{name}"
    assert json.loads(doctor.to_json(audited))["findings"][0]["object"] == found.object
    text = doctor.to_text(audited)
    assert "\x1b" not in text and f"pod/ns /p [31m{'x' * 245} " in text and len(text.splitlines()) == 4


def test_text_cuts_a_megabyte_name_to_the_apis_longest_json_keeps_it(tmp_path: Path, cli_runner: CliRunner) -> None:
    """A node named with a million characters in a hand-made file: doctor's text writes its object with room for
    two names (KIND/NAMESPACE/NAME) and its message with a sentence's, so the line stays a few KB; JSON is exact."""
    from kubectl_gpushare import protocol
    from kubectl_gpushare.sandbox.builders import node_object

    huge = "n" * 1_000_000
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object(huge, [16], ip="10.9.7.1")]}))
    text = cli_runner.invoke(doctor_command, ["--from-file", str(path)])
    (row,) = [line for line in text.stdout.splitlines() if "device-plugin-not-running" in line]
    room = protocol.MAX_SHOWN_NAME * 2
    assert f"  node/{huge[: room - len('node/') - 1]}…  " in row and len(row) < 253 * (2 + protocol.SENTENCE_NAMES) + 80
    report = json.loads(cli_runner.invoke(doctor_command, ["--from-file", str(path), "-o", "json"]).stdout)
    assert f"node/{huge}" in {finding["object"] for finding in report["findings"]}


def test_a_pod_with_ten_thousand_waiting_claims_is_one_short_finding(tmp_path: Path, cli_runner: CliRunner) -> None:
    """A pod whose 10,000 entries each name a waiting claim: doctor names a few of them, as explain does
    (`caps.named`), and answers in bounded time. Before, the message listed every name (70,000 characters)."""
    from golden.inspect import build_dra_clusters as dra

    claims = [dra.pending_claim(f"c{i}", "many", "1Gi", namespace="team-m") for i in range(10_000)]
    many = dra.dra_pod("many", "", None, phase="Pending", namespace="team-m", created="2000-01-01T00:00:00Z")
    many["spec"]["resourceClaims"] = [{"name": f"e{i}", "resourceClaimName": f"c{i}"} for i in range(10_000)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"kind": "List", "items": [dra.device_class(), *claims, many]}))
    started = time.monotonic()
    result = cli_runner.invoke(doctor_command, ["--from-file", str(path), "-o", "json"])
    elapsed = time.monotonic() - started
    found = [(f["check"], f["object"], f["message"]) for f in json.loads(result.stdout)["findings"]]
    assert found == [("dra-claim-pending", "pod/team-m/many",
                      "waits for more than 300s for kube-scheduler to allocate claim(s) c0, c1, c2 and 9,997 more "
                      "(kubectl gpushare explain many -n team-m says why, per node)")]
    assert elapsed < 10, elapsed


def test_every_check_doctor_can_report_is_in_its_help_and_its_page(cli_runner: CliRunner) -> None:
    """Every check name a `Finding` is made with is listed by ``doctor --help`` and in docs/doctor.md.

    The help's list is written by hand; five checks (bypassed-extender, extender-not-ready,
    device-plugin-not-ready, gpu-claimed-by-two-stacks, kai-group-without-reservation) were missing from it.
    """
    import re

    package = Path(__file__).resolve().parents[3] / "kubectl_gpushare"
    made = re.compile(r'Finding\(\s*[A-Z_]+(?:\s+if\s+\w+\s+else\s+[A-Z_]+)?,\s*"([a-z0-9-]+)"')
    checks = {name for path in package.rglob("*.py") for name in made.findall(path.read_text())}
    assert len(checks) > 30, checks  # the pattern still finds them
    listed = cli_runner.invoke(doctor_command, ["--help"], terminal_width=200).output
    page = (package.parent / "docs" / "doctor.md").read_text()
    assert sorted(c for c in checks if not re.search(rf"\b{c}\b(?!-)", listed)) == []
    assert sorted(c for c in checks if f"`{c}`" not in page) == []
