"""One object the typed decoder cannot read never hides the rest of the cluster from inspect."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def inspect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl-inspect-gpushare", *args], env=env, capture_output=True, text=True, timeout=60)


def test_numeric_quantities_count_and_a_garbage_pod_is_warned_about_once(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    node = node_object("n1", [16], ip="10.0.0.1")
    numeric = pod_object("numeric", "default", [4], node="n1", gpu=0, gpu_memory=16)
    numeric["spec"]["containers"][0]["resources"]["limits"]["aliyun.com/gpu-mem"] = 4  # a JSON number
    garbage = pod_object("garbage", "default", [2], node="n1", gpu=0, gpu_memory=16)
    garbage["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] = {"not": "a string"}
    fine = pod_object("fine", "default", [3], node="n1", gpu=0, gpu_memory=16)
    sandbox.load([node, numeric, garbage, fine])

    result = inspect(kube_env, "-o", "json")

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    (gpu,) = report["nodes"][0]["gpus"]
    assert gpu["used"] == 7, "the numeric limit (4) and the fine pod (3) count"
    assert sorted(pod["name"] for pod in gpu["pods"]) == ["fine", "numeric"]
    warned = [line for line in result.stderr.splitlines() if "default/garbage" in line]
    assert len(warned) == 1 and "skipped" in warned[0], result.stderr


def test_a_node_with_an_undecodable_field_is_skipped_not_fatal(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    bad = node_object("bad", [16], ip="10.0.0.2")
    bad["status"]["addresses"] = "not a list"
    sandbox.load([bad, node_object("good", [16], ip="10.0.0.3")])

    result = inspect(kube_env)

    assert result.returncode == 0, result.stderr
    assert "good" in result.stdout and "bad " not in result.stdout
    assert "node bad: cannot be decoded" in result.stderr


def test_a_named_node_that_does_not_decode_is_a_one_line_error_not_a_traceback(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    bad = node_object("bad", [16], ip="10.0.0.2")
    bad["status"]["addresses"] = "not a list"
    sandbox.load([bad])
    expected = "node bad does not decode as a v1.Node (Expected `array`, got `str` - at `$.status.addresses`)"
    for command in (["kubectl-inspect-gpushare", "bad"], ["kubectl-gpushare", "label-nodes", "bad"]):
        result = subprocess.run(command, env=kube_env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stderr  # EXIT_API, as any other API failure
        assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def _garbage_pod(name: str = "garbage") -> dict[str, Any]:
    pod = pod_object(name, "default", [2], node="n1", gpu=0, gpu_memory=16)
    pod["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] = {"not": "a string"}
    return pod


def _bad_node() -> dict[str, Any]:
    bad = node_object("bad", [16], ip="10.0.0.2")
    bad["status"]["addresses"] = "not a list"
    return bad


POD_SKIPPED = ("warning: pod default/garbage: cannot be decoded (Expected `str`, got `object` - at "
               "`$.metadata.annotations[...]`); skipped")
NODE_SKIPPED = "warning: node bad: cannot be decoded (Expected `array`, got `str` - at `$.status.addresses`); skipped"


@pytest.mark.parametrize(
    ("args", "error", "code"),
    [
        (["gpushare", "explain", "garbage"], 'Failed due to pods "garbage" not found in namespace "default"', 1),
        (["gpushare", "explain", "garbage", "-A"], 'Failed due to pods "garbage" not found in any namespace', 1),
        (["inspect-gpushare", "bad"], 'Failed due to nodes "bad" not found', 1),
        (["gpushare", "fit", "2", "-l", "=x"], "error: --selector: found '=', "
                                                "expected: !, identifier, or 'end of string'", 2),
    ],
)
def test_a_failed_load_from_a_file_first_says_what_it_skipped(
    args: list[str], error: str, code: int, tmp_path: Path, kube_env: dict[str, str]
) -> None:
    """The object "not found" is in the file, skipped: the warning says why, once, before the error."""
    dump = tmp_path / "c.json"
    items = [node_object("n1", [16], ip="10.0.0.1"), _bad_node(), _garbage_pod()]
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    command = [f"kubectl-{args[0]}", *args[1:], "--from-file", str(dump)]

    result = subprocess.run(command, env=kube_env, capture_output=True, text=True, timeout=60)

    assert (result.returncode, result.stdout) == (code, "")
    assert result.stderr.splitlines() == [NODE_SKIPPED, POD_SKIPPED, error]


def test_a_pod_skipped_from_a_live_list_page_is_said_before_explain_fails(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1"), _garbage_pod()])

    result = subprocess.run(["kubectl-gpushare", "explain", "garbage", "-A"], env=kube_env, capture_output=True,
                            text=True, timeout=60)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [POD_SKIPPED, 'Failed due to pods "garbage" not found in any namespace']


@pytest.mark.parametrize(
    "args", [["gpushare", "explain", "fine"], ["gpushare", "doctor"], ["inspect-gpushare", "-o", "json"]]
)
def test_live_views_say_a_pod_skipped_from_a_list_page_once_as_a_warning_line(
    args: list[str], sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    fine = pod_object("fine", "default", [3], node="n1", gpu=0, gpu_memory=16)
    sandbox.load([node_object("n1", [16], ip="10.0.0.1"), _garbage_pod(), fine])

    result = subprocess.run([f"kubectl-{args[0]}", *args[1:]], env=kube_env, capture_output=True, text=True,
                            timeout=60)

    assert result.returncode in (0, 11, 12), result.stderr  # doctor's verdict is its exit code
    said = [line for line in result.stderr.splitlines() if "garbage" in line]
    assert said == [POD_SKIPPED], result.stderr


@pytest.mark.parametrize(
    "args",
    [["gpushare", "explain", "fine"], ["gpushare", "doctor"], ["inspect-gpushare", "-o", "json"],
     ["gpushare", "fit", "2", "-o", "json"]],
)
def test_live_views_say_a_configmap_skipped_from_a_list_as_a_warning_line(
    args: list[str], sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    """The unhealthy-GPU ConfigMaps are read by every live view: one that does not decode is said, once."""
    fine = pod_object("fine", "default", [3], node="n1", gpu=0, gpu_memory=16)
    garbage = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unhealthy-gpu-n1",
                                                                     "namespace": "kube-system"},
               "data": {"gpus": 0}}
    sandbox.load([node_object("n1", [16], ip="10.0.0.1"), fine, garbage])

    result = subprocess.run([f"kubectl-{args[0]}", *args[1:]], env=kube_env, capture_output=True, text=True,
                            timeout=60)

    assert result.returncode in (0, 11, 12), result.stderr  # doctor's verdict is its exit code
    said = [line for line in result.stderr.splitlines() if "unhealthy-gpu-n1" in line]
    assert len(said) == 1 and said[0].startswith("warning: configmap kube-system/unhealthy-gpu-n1: cannot be "
                                                 "decoded"), result.stderr
