"""Koordinator's Device objects from the API: read when served, one request, and only for Koordinator nodes."""

from __future__ import annotations

import json
import subprocess

import pytest
from golden.inspect import cases

from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration
DEVICES = r"^/apis/scheduling\.koordinator\.sh/"


def inspect_json(env: dict[str, str]) -> tuple[dict[str, tuple[int, bool]], str]:
    result = subprocess.run(["kubectl-inspect-gpushare", "-o", "json"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    gpus = {f"{node['name']}/{gpu['index']}": (gpu["total"], gpu["healthy"])
            for node in report.get("stackNodes", []) for gpu in node["gpus"] if node["name"] == "koord-node"}
    return gpus, result.stderr


def test_device_objects_are_read_once_and_fall_back_to_node_resources(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    sandbox.load(cases.cluster_objects("koordinator"))
    sandbox.clear_requests()
    served, stderr = inspect_json(kube_env)
    assert served == {"koord-node/0": (15110, True), "koord-node/1": (15110, False)} and stderr == ""
    assert [(r.verb, r.resource) for r in sandbox.requests if r.resource == "devices"] == [("list", "devices")]

    sandbox.inject(method="GET", path=DEVICES, status=404, times=1)
    missing, stderr = inspect_json(kube_env)
    assert missing == {"koord-node/0": (16384, True), "koord-node/1": (16384, True)} and stderr == ""

    sandbox.inject(method="GET", path=DEVICES, status=403)
    forbidden, stderr = inspect_json(kube_env)
    assert forbidden == missing
    assert "cannot list devices.scheduling.koordinator.sh" in stderr and len(stderr.splitlines()) == 1


def test_no_device_request_without_koordinator_nodes(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load(generate_cluster(nodes=3, gpus_per_node=2, pods=10, seed=2))
    sandbox.clear_requests()
    inspect_json(kube_env)
    assert "devices" not in {r.resource for r in sandbox.requests}


def test_explain_and_doctor_read_the_device_objects_as_inspect_does(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load(cases.cluster_objects("koordinator"))
    sandbox.clear_requests()
    explain = subprocess.run(["kubectl-gpushare", "explain", "pod-example"], env=kube_env, capture_output=True,
                             text=True, timeout=60)
    assert explain.returncode == 0 and explain.stderr == "", explain.stderr
    # The Device object's 15110 MiB and UUID, not the node resources' even split (16384 MiB each).
    assert "GPU 0 (GPU-koord-node-0) holding 7555 of 15110 MiB" in explain.stdout, explain.stdout
    doctor = subprocess.run(["kubectl-gpushare", "doctor"], env=kube_env, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in doctor.stderr
    devices = [(r.verb, r.resource) for r in sandbox.requests if r.resource == "devices"]
    assert devices == [("list", "devices"), ("list", "devices")]

    sandbox.inject(method="GET", path=DEVICES, status=403)
    explain = subprocess.run(["kubectl-gpushare", "explain", "pod-example"], env=kube_env, capture_output=True,
                             text=True, timeout=60)
    assert "holding 7555 of 16384 MiB" in explain.stdout
    assert "cannot list devices.scheduling.koordinator.sh" in explain.stderr
