"""Every view over DRA, offline: pretty, fit's policy rounding, explain's allocator answers, hostile objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from golden.inspect import build_dra_clusters as dra
from golden.inspect import cases

from kubectl_gpushare.inspect.command import inspect_command
from kubectl_gpushare.inspect.explain_command import explain_command
from kubectl_gpushare.inspect.fit_command import fit_command
from kubectl_gpushare.kube.stacks.dra import UNUSABLE_EFFECT as UNUSABLE
from kubectl_gpushare.sandbox.builders import node_object

CASE = "mixed-dra"


def write(tmp_path: Path, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def test_pretty_shows_dra_nodes_like_device_plugin_nodes(cli_runner: CliRunner) -> None:
    for view, flags in (("pretty.txt", []), ("pretty-details.txt", ["-d"])):
        result = cli_runner.invoke(inspect_command, ["--from-file", str(cases.cluster_file(CASE)), "-o", "pretty",
                                                     *flags])
        assert result.exit_code == 0, result.stderr
        cases.check(CASE, view, result.stdout)
    assert "GPU2 ░░░░░░░░░░░░░░░░░░░░ 0/16" in cases.expected(CASE, "pretty.txt").read_text()


def policy_node(name: str, policy: dict[str, Any], memory: str = "8Gi") -> list[dict[str, Any]]:
    device = dra.our_device(0, memory, "1Gi", "T4", name)
    device["capacity"]["memory"]["requestPolicy"] = policy
    return [node_object(name, [], ip="10.1.0.1"), dra.resource_slice(name, dra.OUR_DRIVER, [device], "aaaaa")]


@pytest.mark.parametrize(("policy", "memory", "fits"), [
    ({"default": "2Gi", "validRange": {"min": "2Gi", "step": "2Gi"}}, "1", 4),  # 1 GiB rounds up to 2 GiB
    ({"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}, "1", 8),
    ({"default": "1Gi", "validRange": {"min": "1Gi", "max": "4Gi", "step": "1Gi"}}, "6", 0),  # above max
    ({"default": "2Gi", "validValues": ["2Gi", "3Gi", "8Gi"]}, "4", 1),  # 4 GiB takes the 8 GiB value
], ids=["step-rounds-up", "whole-units", "above-max", "valid-values"])
def test_fit_rounds_a_claim_by_the_request_policy(
    tmp_path: Path, cli_runner: CliRunner, policy: dict[str, Any], memory: str, fits: int
) -> None:
    path = write(tmp_path, policy_node("dra", policy))
    result = cli_runner.invoke(fit_command, [memory, "--count", "10", "-o", "json", "--from-file", path])
    assert json.loads(result.stdout)["fits"] == fits, result.stdout


def test_fit_counts_claims_already_held(tmp_path: Path, cli_runner: CliRunner) -> None:
    items = [*policy_node("dra", {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}, "16Gi"),
             dra.claim("held", "dra", "gpu-0", "10Gi", [])]
    report = json.loads(cli_runner.invoke(fit_command, ["4Gi", "-o", "json", "--from-file",
                                                         write(tmp_path, items)]).stdout)
    assert (report["fits"], report["largestFit"], report["nodes"][0]["gpus"][0]["free"]) == (1, 6, 6)


def test_explain_says_a_claim_allocated_elsewhere_pins_the_pod(tmp_path: Path, cli_runner: CliRunner) -> None:
    gi = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    items = [dra.device_class(), *policy_node("dra-1", gi, "16Gi"), *policy_node("dra-2", gi, "16Gi")]
    pod = dra.dra_pod("two-claims", "", "two-claims-gpu", phase="Pending")
    pod["spec"]["resourceClaims"].append({"name": "cache", "resourceClaimName": "cache"})
    items += [pod, dra.pending_claim("two-claims-gpu", "two-claims", "4Gi"), dra.claim("cache", "dra-2", "gpu-0", "2Gi",
                                                                                       ["someone"])]
    result = cli_runner.invoke(explain_command, ["two-claims", "-o", "json", "--from-file", write(tmp_path, items)])
    answer = json.loads(result.stdout)
    assert [(n["name"], n["reason"]) for n in answer["nodes"]] == [
        ("dra-1", "resourceclaim not available on the node"), ("dra-2", "fits on GPU 0 (the allocator's choice)")]
    assert [(c["name"], c["state"]) for c in answer["claims"]] == [("two-claims-gpu", "pending"),
                                                                    ("cache", "allocated")]


def test_explain_without_device_classes_assumes_the_drivers_own(tmp_path: Path, cli_runner: CliRunner) -> None:
    gi = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    items = [*policy_node("dra-1", gi), dra.dra_pod("p", "", "p-gpu", phase="Pending"),
             dra.pending_claim("p-gpu", "p", "4Gi")]
    result = cli_runner.invoke(explain_command, ["p", "--from-file", write(tmp_path, items)])
    assert "node/dra-1: fits on GPU 0" in result.stdout, result.stdout


def test_hostile_dra_objects_are_one_warning_each_and_hide_nothing_else(tmp_path: Path, cli_runner: CliRunner) -> None:
    items = [*cases.cluster_objects(CASE)]
    garbage_slice = dra.resource_slice("dra-a", dra.OUR_DRIVER, [], "zzzzz")
    garbage_slice["spec"]["devices"] = {"not": "a list"}
    deep_claim = dra.claim("deep", "dra-a", "gpu-0", "1Gi", ["x"])
    deep_claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"memory": [[[[[]]]]]}
    absurd = dra.claim("absurd", "dra-a", "gpu-1", "1e400", ["y"])
    items += [garbage_slice, deep_claim, absurd]
    result = cli_runner.invoke(inspect_command, ["--from-file", write(tmp_path, items), "-o", "json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    gpus = {g["index"]: g["used"] for g in report["nodes"][0]["gpus"]}
    assert report["nodes"][0]["name"] == "dra-a" and gpus == {0: 10, 1: 3 + 16, 2: 0}, "absurd: the whole GPU"
    warned = result.stderr.splitlines()
    assert len([line for line in warned if "zzzzz" in line or "default/deep" in line]) == 2, result.stderr
    assert any("absurd" in line and "whole device" in line for line in warned), result.stderr


def test_named_nodes_and_selectors_apply_to_dra_nodes(tmp_path: Path, cli_runner: CliRunner) -> None:
    path = str(cases.cluster_file(CASE))
    named = cli_runner.invoke(inspect_command, ["--from-file", path, "dra-b", "nv-dra", "-o", "json"])
    report = json.loads(named.stdout)
    assert [n["name"] for n in report["nodes"]] == ["dra-b"]
    assert [n["name"] for n in report["stackNodes"]] == ["nv-dra"]
    selected = cli_runner.invoke(inspect_command, ["--from-file", path, "-l", "kubernetes.io/hostname=dra-a"])
    assert selected.stdout.splitlines()[1].split()[:2] == ["dra-a", "10.0.6.1"]


def test_stack_forced_to_another_stack_reads_no_dra(cli_runner: CliRunner) -> None:
    path = str(cases.cluster_file(CASE))
    forced = cli_runner.invoke(inspect_command, ["--from-file", path, "--stack", "gpushare", "-o", "json"])
    report = json.loads(forced.stdout)
    assert [n["name"] for n in report["nodes"]] == ["dra-a", "dra-b", "share-node"]
    assert "stackNodes" not in report, "NVIDIA's DRA nodes are read with --stack auto only"


def test_an_invalid_utf8_byte_in_a_claim_is_one_warning_in_every_view(tmp_path: Path, cli_runner: CliRunner) -> None:
    from kubectl_gpushare.inspect.doctor_command import doctor_command

    items = [*cases.cluster_objects(CASE), dra.claim("mangled", "dra-a", "gpu-2", "1025Mi", ["z"])]
    path = tmp_path / "cluster.json"
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()
    path.write_bytes(data.replace(b'"1025Mi"', b'"1025\xffMi"'))
    assert b"\xff" in path.read_bytes(), "the byte sits in a claim no Node or Pod repeats"
    views = [(inspect_command, ["-o", "json"]), (fit_command, ["1Gi"]), (doctor_command, []),
             (explain_command, ["infer-1", "-n", "default"])]
    for command, flags in views:
        result = cli_runner.invoke(command, ["--from-file", str(path), *flags])
        assert result.exception is None or isinstance(result.exception, SystemExit), (command.name, result.exception)
        assert "not valid UTF-8" in result.stderr + result.stdout, (command.name, result.stderr)
        assert "default/mangled" in result.stderr + result.stdout, (command.name, result.stderr)


def unusable_pool_cluster() -> list[dict[str, Any]]:
    """mixed-dra with dra-a's slice published twice (the publisher's create of unknown outcome that landed
    after its retry: incomplete and invalid) and an older generation of dra-b's pool beside its newest."""
    items = [*cases.cluster_objects(CASE)]
    first = next(i for i in items if i["kind"] == "ResourceSlice" and i["spec"]["nodeName"] == "dra-a")
    again = json.loads(json.dumps(first))
    again["metadata"]["name"] = again["metadata"]["name"][:-5] + "r2d2x"
    old = dra.resource_slice("dra-b", dra.OUR_DRIVER, [dra.our_device(i, "80Gi", "1Gi", "A100", "dra-b")
                                                       for i in range(2)], "oldgn")
    old["spec"]["pool"]["generation"] = 0
    return [*items, again, old]


def test_every_view_reads_a_pool_as_kube_scheduler_gathers_it(tmp_path: Path, cli_runner: CliRunner) -> None:
    """Each GPU once, an old generation ignored, an unusable pool's GPUs unhealthy with their claims, one warning."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command

    path = write(tmp_path, unusable_pool_cluster())
    why = ("pool 'dra-a' of gpu-mem.kubectl-gpushare.io is incomplete (currently being updated): 2 ResourceSlice(s) "
           "of generation 1, resourceSliceCount 1")  # incomplete, so not validated: not also invalid
    result = cli_runner.invoke(inspect_command, ["--from-file", path, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    nodes = {n["name"]: n for n in json.loads(result.stdout)["nodes"]}
    golden = {n["name"]: n for n in json.loads(cases.expected(CASE, "out.json").read_text())["nodes"]}
    for name in ("dra-a", "dra-b"):
        got = [(g["index"], g["used"], g["total"]) for g in nodes[name]["gpus"]]
        assert got == [(g["index"], g["used"], g["total"]) for g in golden[name]["gpus"]], name
    assert [g.get("healthy", True) for g in nodes["dra-a"]["gpus"]] == [False] * 3
    assert [g.get("healthy", True) for g in nodes["dra-b"]["gpus"]] == [True], "the older generation is not read"
    assert [line for line in result.stderr.splitlines() if "pool " in line] == [f"warning: {why}; {UNUSABLE}"]
    for flags in (["-o", "pretty", "-d"], ["-d"], []):
        shown = cli_runner.invoke(inspect_command, ["--from-file", path, *flags])
        assert shown.exit_code == 0 and shown.stderr.count("pool 'dra-a'") == 1, (flags, shown.stderr)
        assert "A100" not in shown.stdout and "/80" not in shown.stdout, (flags, "no GPU of the old generation")
    pretty = cli_runner.invoke(inspect_command, ["--from-file", path, "-o", "pretty"]).stdout
    assert pretty.count("unhealthy") == 3 and pretty.count("GPU0") == 3, pretty  # dra-a, dra-b, share-node
    before = json.loads(cli_runner.invoke(fit_command, ["1Gi", "-o", "json", "--from-file",
                                                        str(cases.cluster_file(CASE))]).stdout)["fits"]
    after = json.loads(cli_runner.invoke(fit_command, ["1Gi", "-o", "json", "--from-file", path]).stdout)["fits"]
    assert before - after == (16 - 10) + (16 - 3), "dra-a's free memory (GPU 2 is tainted) takes no new claim"
    explained = cli_runner.invoke(explain_command, ["waiting", "-n", "default", "--from-file", path]).stdout
    assert "node/dra-a: cannot allocate all claims: its pool 'dra-a' is incomplete" in explained, explained
    doctor = json.loads(cli_runner.invoke(doctor_command, ["--from-file", path, "-o", "json"]).stdout)
    found = [f for f in doctor["findings"] if f["check"] == "dra-pool-unusable"]
    assert [(f["severity"], f["object"]) for f in found] == [("warning", "node/dra-a")]
    assert found[0]["message"].startswith(f"{why}; {UNUSABLE}")
