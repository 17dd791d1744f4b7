from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.spec import SpecError, generate_cluster, load_spec, parse_spec


def test_generator_is_deterministic_and_never_overcommits_a_gpu() -> None:
    objects = generate_cluster(nodes=20, gpus_per_node=4, pods=600, seed=7, gpu_memory=16)
    assert objects == generate_cluster(nodes=20, gpus_per_node=4, pods=600, seed=7, gpu_memory=16)
    assert objects != generate_cluster(nodes=20, gpus_per_node=4, pods=600, seed=8, gpu_memory=16)
    used: dict[tuple[str, int], int] = defaultdict(int)
    phases = Counter()
    for obj in objects:
        if obj["kind"] != "Pod":
            continue
        phases[obj["status"]["phase"]] += 1
        annotations = obj["metadata"].get("annotations", {})
        node = obj["spec"].get("nodeName")
        limit = int(obj["spec"]["containers"][0]["resources"]["limits"][protocol.RESOURCE_MEM])
        if node and protocol.ANN_IDX in annotations and obj["status"]["phase"] not in ("Succeeded", "Failed"):
            assert annotations[protocol.ANN_POD] == str(limit)
            assert annotations[protocol.ANN_DEV] == "16"
            used[(node, int(annotations[protocol.ANN_IDX]))] += limit
    assert used and max(used.values()) <= 16
    assert phases["Running"] > 0 and phases["Pending"] > 0 and phases["Succeeded"] + phases["Failed"] > 0


def test_generated_nodes_carry_gpushare_resources_labels_and_addresses() -> None:
    nodes = [o for o in generate_cluster(nodes=3, gpus_per_node=8, gpu_memory=80) if o["kind"] == "Node"]
    assert [n["metadata"]["name"] for n in nodes] == ["gpu-node-000", "gpu-node-001", "gpu-node-002"]
    node = nodes[0]
    for key in ("capacity", "allocatable"):
        assert node["status"][key][protocol.RESOURCE_MEM] == "640"
        assert node["status"][key][protocol.RESOURCE_COUNT] == "8"
    labels = node["metadata"]["labels"]
    assert labels[protocol.LABEL_GPUSHARE] == "true"
    assert labels[protocol.LABEL_GPU_COUNT] == "8" and labels[protocol.LABEL_GPU_MEMORY] == "81920"
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "10.0.0.1"}


def test_empty_cluster() -> None:
    assert [o["kind"] for o in generate_cluster(nodes=0, pods=10)] == ["Namespace"] * 4 + ["Pod"] * 10


def test_spec_file_builds_nodes_pods_unhealthy_configmap_and_generated_part(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        """
namespaces: [default, team-a]
nodes:
  - {name: gpu-a, gpus: 2, gpuMemory: 16, taints: [{key: gpu, value: "yes", effect: NoSchedule}]}
  - {name: gpu-b, gpuMemories: [24, 48], unhealthy: [1], labels: {zone: z1}}
pods:
  - {name: train, namespace: team-a, node: gpu-a, gpu: 1, memory: 8}
  - {name: waiting, memory: 4}
  - {name: two, node: gpu-b, gpu: 0, containers: [2, 3], phase: Pending, assigned: false}
generate: {nodes: 2, gpusPerNode: 1, pods: 3, seed: 1, nodePrefix: gen-}
objects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: extra, namespace: default}, data: {a: b}}
"""
    )
    objects = load_spec(path)
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert by_name[("Node", "gpu-a")]["spec"]["taints"] == [{"key": "gpu", "effect": "NoSchedule", "value": "yes"}]
    node_b = by_name[("Node", "gpu-b")]
    assert node_b["status"]["capacity"][protocol.RESOURCE_MEM] == "72"
    assert protocol.parse_node_gpus(node_b["metadata"]["annotations"][protocol.ANN_NODE_GPUS]) == (24, 48)
    assert by_name[("ConfigMap", "unhealthy-gpu-gpu-b")]["data"] == {"gpus": "1"}
    train = by_name[("Pod", "train")]
    assert train["metadata"]["annotations"][protocol.ANN_IDX] == "1"
    assert train["metadata"]["annotations"][protocol.ANN_DEV] == "16"
    assert by_name[("Pod", "waiting")]["status"]["phase"] == "Pending"
    two = by_name[("Pod", "two")]
    assert two["metadata"]["annotations"][protocol.ANN_ASSIGNED] == "false"
    assert two["metadata"]["annotations"][protocol.ANN_POD] == "5"
    assert ("Node", "gen-000") in by_name and ("ConfigMap", "extra") in by_name
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"].count("default") == 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("nodes: [{name: a, gpus: 1, gpuMemory: 8, colour: red}]", "colour"),
        ("pods: [{name: p, node: nowhere}]", "nowhere"),
        ("nodes: [{name: a, gpus: 1, gpuMemory: 8}]\npods: [{name: p, node: a, gpu: 3}]", "no GPU 3"),
        ("nodes: {name: a}", "Expected `array`"),
        ("nodes: [", "not valid YAML"),
        ("nodes: !!int", "not valid YAML: tag:yaml.org,2002:int value '' is not valid"),
        ("nodes: [{name: a, gpus: !!bool x}]", "not valid YAML: tag:yaml.org,2002:bool value 'x' is not valid"),
        ("nodes: !!timestamp 2024-13-01", "not valid YAML: month must be in 1..12"),
        ("nodes: " + "[" * 20_000, "not valid YAML: nested too deeply"),
        ("nodes: [{name: a, gpus: " + "1" * 5000 + "}]", "not valid YAML: integer too large (5,000 digits)"),
        ("nodes: [{}]\n\x00", "not valid YAML: unacceptable character #x0000: special characters are not allowed"),
        ("objects: [{kind: Pod}]", "metadata.name"),
    ],
)
def test_bad_spec_gives_one_line_error(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "spec.yaml")
    message = str(caught.value)
    assert fragment in message and "\n" not in message and message.startswith("spec.yaml")


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="No such file"):
        load_spec(tmp_path / "absent.yaml")


def test_a_spec_file_that_is_not_utf8_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"nodes: [{name: caf\xe9}]\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value) == f"{path}: not UTF-8 text"
