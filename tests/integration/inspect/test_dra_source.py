"""inspect reads ResourceSlices and ResourceClaims from the API only where they are served and allowed.

A cluster without ``resource.k8s.io/v1`` (the list answers 404), or a user who may not list it
(403), gets the views it got before: one request more, at most one warning line. ``--from-file``
reads the same objects from kubectl's JSON and YAML and prints what the live cluster prints.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from golden.inspect import cases

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
CASE = "mixed-dra"
DRA_PATHS = r"^/apis/resource\.k8s\.io/"


def inspect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kubectl-inspect-gpushare", *args], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


def shown_nodes(stdout: str) -> tuple[list[str], list[str]]:
    report = json.loads(stdout)
    return [n["name"] for n in report["nodes"]], [n["name"] for n in report.get("stackNodes", [])]


def test_slices_then_claims_are_listed_once_each(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load(cases.cluster_objects(CASE))
    sandbox.clear_requests()
    result = inspect(kube_env, "-o", "json")
    assert result.stdout == cases.expected(CASE, "out.json").read_text() and result.stderr == ""
    dra = [(r.verb, r.resource) for r in sandbox.requests if r.group == "resource.k8s.io"]
    assert dra == [("list", "resourceslices"), ("list", "resourceclaims")]


def test_a_cluster_without_dra_costs_one_request_and_prints_what_it_did(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    sandbox.load(cases.cluster_objects("mixed-stacks"))
    sandbox.inject(method="GET", path=DRA_PATHS, status=404)
    sandbox.clear_requests()
    for view, flags in cases.VIEWS.items():
        result = inspect(kube_env, *flags)
        assert result.stdout == cases.expected("mixed-stacks", view).read_text() and result.stderr == "", view
    dra = [(r.verb, r.resource, r.status) for r in sandbox.requests if r.group == "resource.k8s.io"]
    assert dra == [("list", "resourceslices", 404)] * len(cases.VIEWS), "no claims are asked for without slices"

    sandbox.load(cases.cluster_objects(CASE))
    gpushare, stack = shown_nodes(inspect(kube_env, "-o", "json").stdout)
    assert "dra-a" not in gpushare and "nv-dra" not in stack, "DRA nodes are plain nodes without resource.k8s.io/v1"


def test_forbidden_slices_or_claims_are_one_warning_and_the_rest_is_shown(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    sandbox.load(cases.cluster_objects(CASE))
    sandbox.inject(method="GET", path=r"^/apis/resource\.k8s\.io/v1/resourceslices", status=403, times=1)
    result = inspect(kube_env, "-o", "json")
    assert shown_nodes(result.stdout) == (["share-node"], [])
    assert result.stderr.splitlines() == [
        "warning: cannot list resourceslices.resource.k8s.io: GPUs shared through DRA are not shown"]

    sandbox.inject(method="GET", path=r"^/apis/resource\.k8s\.io/v1/resourceclaims", status=403, times=1)
    result = inspect(kube_env, "-o", "json")
    report = json.loads(result.stdout)
    assert shown_nodes(result.stdout) == (["dra-a", "dra-b", "share-node"], ["nv-dra"])
    assert [node["used"] for node in report["nodes"]] == [0, 0, 4], "the GPUs are shown, no claim counted"
    assert result.stderr.splitlines() == [
        "warning: cannot list resourceclaims.resource.k8s.io: DRA GPUs are shown without claims"]


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_from_file_reads_the_dra_objects_kubectl_writes(
    output: str, sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    sandbox.load(cases.cluster_objects(CASE))
    dump = subprocess.run(
        ["kubectl", "get", "nodes,pods,resourceslices,resourceclaims", "-A", "-o", output], env=kube_env,
        capture_output=True, text=True, timeout=60,
    )
    assert dump.returncode == 0, dump.stderr
    (tmp_path / f"cluster.{output}").write_text(dump.stdout)
    for view, flags in cases.VIEWS.items():
        live = inspect(kube_env, *flags)
        offline = inspect(kube_env, *flags, "--from-file", str(tmp_path / f"cluster.{output}"))
        assert offline.stdout == live.stdout == cases.expected(CASE, view).read_text(), view
        assert offline.stderr == live.stderr == ""


def test_a_claim_nested_past_the_decoder_in_a_file_is_skipped_alone_with_one_warning(
        kube_env: dict[str, str], tmp_path: Path) -> None:
    """kube-apiserver takes opaque parameters 5,000 deep (10 KiB, OpaqueParametersMaxLength); msgspec does not."""
    listing = json.loads(cases.cluster_file(CASE).read_text())
    deep = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "deep", "namespace": "default", "uid": "claim-deep"},
            "spec": {"devices": {"config": [{"opaque": {"driver": "gpu-mem.kubectl-gpushare.io", "parameters": 0}}]}}}
    text = json.dumps({**listing, "items": [*listing["items"], deep]})
    text = text.replace('"parameters": 0', '"parameters": ' + "[" * 5000 + "]" * 5000)
    (tmp_path / "deep.json").write_text(text)
    result = inspect(kube_env, "--from-file", str(tmp_path / "deep.json"))
    assert result.stdout == cases.expected(CASE, "summary.txt").read_text()
    assert result.stderr.count("\n") == 1 and "ResourceClaim default/deep: cannot be decoded" in result.stderr


def rack_pool() -> list[dict[str, object]]:
    """Pool ``p`` of 2 slices a node should see: dra-1's and dra-2's own, and a third for the nodes of rack a.

    dra-1 (rack a) sees its own and the rack's: 2, complete. dra-2 (rack b) sees 1 of the 3 published:
    incomplete (pools_incubating.go GatherPools, NodeMatches). A fourth slice's selector does not parse.
    """
    from golden.inspect import build_dra_clusters as dra

    from kubectl_gpushare.sandbox.builders import node_object

    items: list[dict[str, object]] = []
    for name, rack in (("dra-1", "a"), ("dra-2", "b")):
        items.append(node_object(name, [], ip="10.1.0.1", labels={"example.com/rack": rack}, dra=True))
        own = dra.resource_slice(name, dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", name)], "aaaaa")
        own["spec"]["pool"] = {"name": "p", "generation": 1, "resourceSliceCount": 2}
        items.append(own)
    for suffix, operator in (("rack", "In"), ("bad", "Near")):
        shared = dra.resource_slice("x", dra.OUR_DRIVER, [dra.our_device(1, "16Gi", "1Gi", "T4", "x")], suffix)
        spec = shared["spec"]
        del spec["nodeName"]
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "example.com/rack", "operator": operator, "values": ["a"]}]}]}
        spec["pool"] = {"name": "p" if suffix == "rack" else "q", "generation": 1, "resourceSliceCount": 2}
        shared["metadata"].pop("ownerReferences")
        items.append(shared)
    return items


def test_a_node_selector_slice_counts_toward_its_pool_where_it_matches_live_and_from_a_file(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    items = rack_pool()
    sandbox.load(items)
    live = inspect(kube_env, "-o", "json")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    offline = inspect(kube_env, "--from-file", str(path), "-o", "json")
    for result in (live, offline):
        warned = result.stderr.splitlines()
        pool = [line for line in warned if "pool 'p'" in line]
        assert len(pool) == 1 and "(node 'dra-2')" in pool[0] and "is incomplete" in pool[0], result.stderr
        bad = [line for line in warned if "-bad" in line]
        assert len(bad) == 1 and "unknown operator 'Near'" in bad[0] and "matches no node" in bad[0], result.stderr
        assert any("-rack" in line and "not local to one node" in line for line in warned), result.stderr
        gpus = {n["name"]: [g.get("healthy", True) for g in n["gpus"]] for n in json.loads(result.stdout)["nodes"]}
        assert gpus == {"dra-1": [True], "dra-2": [False]}, result.stdout
    assert live.stdout == offline.stdout
