"""Unknown namespaces and empty clusters say so, through the real kubectl; stdout stays the original's."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from kubectl_gpushare.kube.errors import EXIT_API, EXIT_USAGE
from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
EMPTY_SUMMARY = "NAME  IPADDRESS  GPU Memory()\n\nAllocated/Total GPU Memory In Cluster:\n0/0 (0%)  \n"
"""The original's bytes on a cluster without GPU-share nodes (reference S3, extender issues #19 and #74)."""


def test_an_unknown_namespace_is_one_not_found_line(sandbox: Sandbox, kubectl: Kubectl) -> None:
    sandbox.load([namespace_object("ml"), node_object("a", [16], ip="10.0.0.1"), pod_object("p", "ml", [4], node="a",
                                                                                            gpu=0)])
    known = kubectl("inspect", "gpushare", "-n", "ml", "-o", "json")
    assert known.returncode == 0, known.stderr
    for args in (["inspect", "gpushare", "-n", "nosuchns"], ["gpushare", "explain", "p", "-n", "nosuchns"]):
        result = kubectl(*args, check=False)
        assert (result.returncode, result.stdout) == (EXIT_API, ""), args
        assert result.stderr == 'Failed due to namespaces "nosuchns" not found\n', args


@pytest.mark.parametrize("namespace", ["Bad_NS", "../nodes", "x" * 64, "-lead", ""])
def test_a_namespace_that_cannot_exist_is_a_usage_error(namespace: str, kubectl: Kubectl) -> None:
    for args in (["inspect", "gpushare", "-n", namespace], ["gpushare", "explain", "p", "-n", namespace]):
        result = kubectl(*args, check=False)
        assert result.returncode == EXIT_USAGE and result.stdout == "", (args, result.stderr)
        assert result.stderr.startswith("error: Invalid value for '-n'") and result.stderr.count("\n") == 1


@pytest.mark.parametrize("pod", ["Bad_Pod", "../../nodes", "a" * 254])
def test_a_pod_name_that_cannot_exist_is_a_usage_error(pod: str, kubectl: Kubectl) -> None:
    result = kubectl("gpushare", "explain", pod, check=False)
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr.startswith("error: Invalid value for 'POD'") and result.stderr.count("\n") == 1


def test_an_empty_cluster_keeps_the_original_bytes_and_says_why_on_stderr(sandbox: Sandbox, kubectl: Kubectl) -> None:
    sandbox.load([node_object("cpu", [], ip="10.0.0.9")])
    result = kubectl("inspect", "gpushare")
    assert result.stdout == EMPTY_SUMMARY, "byte-compatible with the original"
    assert result.stderr == ("No GPU-share nodes found: no node advertises aliyun.com/gpu-mem (kubectl gpushare "
                             "doctor; kubectl gpushare label-nodes)\n")
    gpu = kubectl("inspect", "gpushare", "-o", "json")
    assert gpu.returncode == 0


def test_our_own_views_of_an_empty_cluster_show_no_empty_unit(sandbox: Sandbox, kubectl: Kubectl) -> None:
    # Where the original defines no output (-o wide, -o pretty) there is no "()" or "(?)" to keep.
    sandbox.load([node_object("cpu", [], ip="10.0.0.9")])
    wide = kubectl("inspect", "gpushare", "-o", "wide").stdout
    assert wide.startswith("NAME  IPADDRESS  GPUS  PENDING  ALLOCATED/TOTAL  USED%") and "()" not in wide
    pretty = kubectl("inspect", "gpushare", "-o", "pretty").stdout
    assert pretty.startswith("Shared GPU memory ") and "(?)" not in pretty and "()" not in pretty
