"""Every view over what ``sandbox --stack`` makes of DRA: claims its scheduler allocated, beside an extender node.

The claims, their consumedCapacity, shareIDs and reservedFor are written by the stack's scheduler
stand-in (the structured allocator) and its resourceclaim controller, not by hand, and read here
through the real kubectl, as a user would read a cluster.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import cel

from .conftest import StackCluster
from .test_dra_stack import DEPLOYMENT, TEMPLATE, _binpack_pods, _condition

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not cel.available(), reason=cel.INSTALL_HINT)]

SPEC = """\
nodes:
  - {name: dra-1, dra: true, gpus: 1, gpuMemory: 16}
  - {name: share-1, gpus: 1, gpuMemory: 16}
"""


@pytest.mark.slow
def test_inspect_explain_fit_doctor_and_top_read_the_stacks_claims(stack_cluster: Any) -> None:
    cluster: StackCluster = stack_cluster(SPEC)
    kubectl = cluster.kubectl
    cluster.label("share-1")
    cluster.wait(lambda: bool(cluster.sandbox.objects("resourceslices")), "the DRA driver's ResourceSlice", 60)
    kubectl("create", "-f", "-", input=TEMPLATE + "---\n" + DEPLOYMENT.replace("REPLICAS", "5"))
    cluster.create_pods(["extender-pod"], 6)

    def settled() -> bool:
        pods = _binpack_pods(cluster)
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        waiting = [p for p in pods if _condition(p).get("status") == "False"]
        return len(running) == 4 and len(waiting) == 1 and cluster.phases().get("extender-pod") == "Running"

    cluster.wait(settled, "4 binpack-1 pods Running, 1 unschedulable, the extender's pod Running", 90)
    running = sorted(p["metadata"]["name"] for p in _binpack_pods(cluster) if p["status"]["phase"] == "Running")
    waiting = next(p["metadata"]["name"] for p in _binpack_pods(cluster) if _condition(p).get("status") == "False")

    summary = kubectl("inspect", "gpushare").stdout.splitlines()
    assert [line.split()[:4] for line in summary[1:3]] == [["dra-1", summary[1].split()[1], "16/16", "16/16"],
                                                           ["share-1", summary[2].split()[1], "6/16", "6/16"]]
    assert summary[-1].startswith("22/32 (68%)")
    details = kubectl("inspect", "gpushare", "-d", "dra-1").stdout
    assert sorted(line.split()[0] for line in details.splitlines() if line.startswith("binpack-1")) == running

    report = json.loads(kubectl("inspect", "gpushare", "-o", "json").stdout)
    dra_node = next(n for n in report["nodes"] if n["name"] == "dra-1")
    assert (dra_node["driver"], dra_node["unit"]) == (protocol.DRA_DRIVER, "GiB")
    assert {(p["name"], p["memory"], p["phase"]) for p in dra_node["gpus"][0]["pods"]} == {
        (name, 4, "Running") for name in running}

    placed = kubectl("gpushare", "explain", running[0]).stdout
    assert placed.startswith(f"Pod default/{running[0]} runs on dra-1: GPU 0 (claim {running[0]}-gpu-mem-")
    assert "holding 4 of 16 GiB; 0 GiB free there; shared with " in placed
    pending = kubectl("gpushare", "explain", waiting).stdout
    assert ("node/dra-1: cannot allocate all claims: the largest free healthy GPU has 0 GiB, the claim takes 4 GiB "
            "(rounded by the request policy)") in pending, pending
    assert pending.startswith(f"Pod default/{waiting} asks for 4 GiB of one GPU through claim(s) {waiting}-gpu-mem-")

    fit = json.loads(kubectl("gpushare", "fit", "4", "--count", "3", "-o", "json", check=False).stdout)
    assert [(n["name"], n["fits"]) for n in fit["nodes"]] == [("share-1", 2)], "dra-1 is full, share-1 has 10 GiB"

    doctor = kubectl("gpushare", "doctor", "-o", "json", check=False)
    checks = {f["check"] for f in json.loads(doctor.stdout)["findings"]}
    assert not checks & {"gpu-overcommitted", "gpu-advertised-by-extender-and-dra", "dra-claim-on-unpublished-device",
                         "dra-claim-unallocatable"}, doctor.stdout

    top = json.loads(kubectl("gpushare", "top", "-A", "-o", "json", check=False).stdout)
    assert sorted(p["name"] for p in top["pods"] if p["node"] == "dra-1") == running
