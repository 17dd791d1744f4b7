"""explain, doctor and fit over KAI, Volcano and Koordinator nodes (the golden clusters, read offline)."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner
from golden.inspect import cases

from kubectl_gpushare.inspect import doctor
from kubectl_gpushare.inspect.explain_command import explain_command
from kubectl_gpushare.inspect.fit_command import fit_command
from kubectl_gpushare.kube.types import NODE_DECODER, POD_DECODER, Node, Pod


def _explain(pod: str, namespace: str, cli_runner: CliRunner, case: str = "mixed-schedulers") -> dict[str, Any]:
    args = [pod, "-n", namespace, "-o", "json", "--from-file", str(cases.cluster_file(case))]
    result = cli_runner.invoke(explain_command, args)
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_explain_a_kai_reservation_pod_says_what_it_is(cli_runner: CliRunner) -> None:
    answer = _explain("gpu-reservation-kai-node-a1b2c", "kai-resource-reservation", cli_runner)
    assert (answer["state"], answer["node"], answer["stack"]) == ("placed", "kai-node", "kai")
    assert "reservation pod" in answer["summary"] and "GPU-kai-0" in answer["summary"]
    assert "not a workload" in answer["summary"]
    waiting = _explain("gpu-reservation-kai-node-d3e4f", "kai-resource-reservation", cli_runner)
    assert "not reported yet" in waiting["summary"]


def test_explain_a_kai_fractional_pod_names_its_gpu_and_neighbours(cli_runner: CliRunner) -> None:
    answer = _explain("gpu-sharing", "default", cli_runner)
    assert [(g["id"], g["amount"], g["unit"]) for g in answer["stackGpus"]] == [("GPU-kai-0", 40960, "MiB")]
    assert "default/two-halves (20480)" in answer["summary"]
    pending = _explain("gpu-memory", "ml", cli_runner)
    assert "has not named yet" in pending["summary"]


def test_explain_volcano_and_koordinator_pods(cli_runner: CliRunner) -> None:
    volcano = _explain("gpu-pod2", "default", cli_runner)
    assert (volcano["stack"], volcano["request"], volcano["unit"]) == ("volcano", 3072, "MiB")
    koord = _explain("pod-example", "default", cli_runner)
    assert (koord["stack"], koord["request"], koord["stackGpus"][0]["gpu"]) == ("koordinator", 7555, 0)


def test_fit_promises_nothing_on_other_schedulers_nodes(cli_runner: CliRunner) -> None:
    path = cases.cluster_file("mixed-schedulers")
    result = cli_runner.invoke(fit_command, ["4", "-o", "json", "--from-file", str(path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    placed = {node["name"] for node in report.get("nodes", [])}
    assert placed <= {"share-node"}
    assert report["otherStacks"] == {"hami": 1, "kai": 1, "koordinator": 2, "nvidia": 2, "volcano": 2}


def _decoded(items: list[dict[str, Any]]) -> tuple[list[Node], list[Pod]]:
    nodes = [NODE_DECODER.decode(json.dumps(i).encode()) for i in items if i["kind"] == "Node"]
    pods = [POD_DECODER.decode(json.dumps(i).encode()) for i in items if i["kind"] == "Pod"]
    return nodes, pods


def test_doctor_kai_reservation_on_a_gpushare_node_is_an_error() -> None:
    items = cases.cluster_objects("mixed-schedulers")
    reserved = next(i for i in items if i["metadata"]["name"] == "gpu-reservation-kai-node-a1b2c")
    intruder = json.loads(json.dumps(reserved))
    intruder["metadata"]["name"] = "gpu-reservation-share-node-x"
    intruder["spec"]["nodeName"] = "share-node"
    koord = json.loads(json.dumps(next(i for i in items if i["metadata"]["name"] == "pod-example")))
    koord["metadata"]["name"] = "koord-on-share"
    koord["spec"]["nodeName"] = "share-node"
    nodes, pods = _decoded([*items, intruder, koord])
    report = doctor.audit(nodes, pods, now_ns=0)
    found = [(f.severity, f.object) for f in report.findings if f.check == "gpu-claimed-by-two-stacks"]
    assert found == [("error", "pod/default/koord-on-share"),
                     ("error", "pod/kai-resource-reservation/gpu-reservation-share-node-x")]


def test_doctor_kai_group_without_reservation_and_overfull_gpu() -> None:
    items = cases.cluster_objects("kai")
    orphan = json.loads(json.dumps(next(i for i in items if i["metadata"]["name"] == "gpu-sharing")))
    orphan["metadata"].update(name="orphan", labels={"runai-gpu-group": "g-gone"})
    greedy = json.loads(json.dumps(orphan))
    greedy["metadata"].update(name="greedy", labels={"runai-gpu-group": "g-c"},
                              annotations={"gpu-fraction": "0.9"})
    nodes, pods = _decoded([*items, orphan, greedy])
    report = doctor.audit(nodes, pods, now_ns=0)
    checks = [(f.severity, f.check, f.object) for f in report.findings]
    assert ("warning", "kai-group-without-reservation", "pod/default/orphan") in checks
    over = [f for f in report.findings if f.check == "stack-gpu-overcommitted"]
    assert len(over) == 1 and "GPU-kai-1" in over[0].message and "default/greedy" in over[0].message


def test_doctor_on_the_documented_clusters_finds_nothing_wrong() -> None:
    for case in ("volcano", "koordinator"):
        nodes, pods = _decoded(cases.cluster_objects(case))
        assert doctor.audit(nodes, pods, now_ns=0).findings == [], case


def test_doctor_kai_fractional_pod_on_a_gpushare_node_by_its_multi_gpu_labels_only() -> None:
    """doctor's quick test for "nothing of another stack here" must see ``runai-gpu-group/<n>`` labels too."""
    items = cases.cluster_objects("mixed-schedulers")
    pod = json.loads(json.dumps(next(i for i in items if i["metadata"]["name"] == "pod-example")))
    pod["metadata"].update(name="kai-multi", labels={"runai-gpu-group/0": "g-a", "runai-gpu-group/1": "g-b"},
                           annotations={})
    pod["spec"]["nodeName"] = "share-node"
    nodes, pods = _decoded([*items, pod])
    found = [f for f in doctor.audit(nodes, pods, now_ns=0).findings if f.check == "gpu-claimed-by-two-stacks"]
    assert [(f.object, f.message.split(" on ")[0]) for f in found] == [
        ("pod/default/kai-multi", "a KAI fractional pod")]
