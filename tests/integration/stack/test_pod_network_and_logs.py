"""On ``sandbox --stack`` the kubelet stand-in gives each pod an address from its node's range and a log."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from .conftest import StackCluster

pytestmark = pytest.mark.integration

SPEC = "nodes: [{name: gpu-a, gpus: 2, gpuMemory: 16, gpushare: false}, {name: cpu-a}]\n"


def test_admitted_pods_get_distinct_addresses_and_logs_with_their_allocate_environment(
    stack_cluster: Callable[[str], StackCluster],
) -> None:
    cluster = stack_cluster(SPEC)
    cluster.label("gpu-a")
    names = ["p1", "p2", "p3"]
    cluster.create_pods(names, 4)
    cluster.wait_running(names)
    node_range = ipaddress.ip_network(cluster.kubectl("get", "node", "gpu-a", "-o",
                                                      "jsonpath={.spec.podCIDR}").stdout)
    ips = cluster.kubectl("get", "pods", "-o", "jsonpath={.items[*].status.podIP}").stdout.split()
    assert len(set(ips)) == 3 and all(ipaddress.ip_address(ip) in node_range for ip in ips)
    log = cluster.kubectl("logs", "p2").stdout.splitlines()
    assert log[0] == "started container binpack (image cheyang/gpu-player:v2) on node gpu-a by the kubelet stand-in"
    assert log[1] == "environment from the device plugin's Allocate:"
    env = dict(line.split("=", 1) for line in log[2:])
    pod = cluster.sandbox.get("pods", "default", "p2") or {}
    assert env["ALIYUN_COM_GPU_MEM_IDX"] == pod["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"]
    assert env["ALIYUN_COM_GPU_MEM_POD"] == "4" and "NVIDIA_VISIBLE_DEVICES" in env
