"""The stack scheduler's NodeResourcesFit: what a pod requests and what a node can still hold."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.cli import noderesources


def _container(**requests: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": dict(requests)}}


def _node(**allocatable: str) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "status": {"allocatable": dict(allocatable)}}


def test_cpu_is_counted_in_millicores_and_limits_stand_in_for_missing_requests() -> None:
    pod = {"spec": {"containers": [_container(cpu="250m", memory="1Gi"),
                                   {"name": "l", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}
    assert noderesources.pod_requests(pod) == {"cpu": 1250, "memory": 2**30, "nvidia.com/gpu": 1}


def test_init_containers_count_by_their_peak_sidecars_add_and_overhead_adds() -> None:
    pod = {"spec": {
        "initContainers": [_container(cpu="2"), {**_container(cpu="500m", memory="1Gi"), "restartPolicy": "Always"},
                           _container(cpu="3")],
        "containers": [_container(cpu="1", memory="2Gi")],
        "overhead": {"cpu": "100m", "memory": "64Mi"},
    }}
    # cpu: max(app 1 + sidecar 0.5, init 2, init 3 + sidecar 0.5) = 3.5, plus 0.1 overhead.
    assert noderesources.pod_requests(pod) == {"cpu": 3600, "memory": 3 * 2**30 + 64 * 2**20}


def test_garbage_quantities_count_zero() -> None:
    pod = {"spec": {"containers": [_container(cpu="lots", memory="-1Gi"), "not a container", {"resources": 5}],
                    "initContainers": "x", "overhead": ["y"]}}
    assert noderesources.pod_requests(pod) == {}
    assert noderesources.allocatable({"status": {"allocatable": {"cpu": "1e999", "pods": "3"}}}) == {
        "cpu": 0, "pods": 3}


def test_reasons_are_kube_schedulers_words_for_every_resource_that_does_not_fit() -> None:
    node = _node(cpu="4", memory="8Gi", pods="2")
    used = noderesources.usage([
        {"spec": {"nodeName": "n", "containers": [_container(cpu="3")]}, "status": {"phase": "Running"}},
        {"spec": {"nodeName": "n", "containers": [_container(cpu="3")]}, "status": {"phase": "Failed"}},  # done
    ]).of("n")
    assert used == {"cpu": 3000, "pods": 1}
    assert noderesources.insufficient({"cpu": 1000}, node, used) == []
    assert noderesources.insufficient({"cpu": 1001, "memory": 9 * 2**30, "nvidia.com/gpu": 1}, node, used) == [
        "Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu"]
    assert noderesources.insufficient({}, node, {"pods": 2}) == ["Too many pods"]
    # A resource an extender checks itself (ignoredByScheduler: true) is not judged here.
    assert noderesources.insufficient({protocol.RESOURCE_MEM: 4}, node, used, ignored={protocol.RESOURCE_MEM}) == []


@pytest.mark.parametrize(("text", "milli"), [("1", 1000), ("1500m", 1500), ("0.1", 100), ("1.0001", 1001),
                                             ("2k", 2_000_000), ("1Ki", 1_024_000)])
def test_milli_quantities_round_up(text: str, milli: int) -> None:
    assert protocol.parse_milli_quantity(text) == milli


@pytest.mark.parametrize("text", ["", "abc", "1" * 80, "1e30"])
def test_bad_milli_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        protocol.parse_milli_quantity(text)


@pytest.mark.parametrize("container", [
    {"resources": {"limits": {"cpu": "1", "a": "x"}, "requests": {"b": "0", "c": "-1", "d": [1], "e": "1e999"}}},
    {"resources": {"limits": {"a": "1"}, "requests": "garbage"}}, {"resources": {"limits": None}},
    {"resources": []}, {"name": "no-resources"}, "not-a-container",
])
def test_resource_names_are_those_requests_count_whatever_their_quantities(container: object) -> None:
    # IsInterested reads names only: a malformed, zero or negative quantity still names its resource.
    assert noderesources.container_resource_names(container) == set(noderesources.container_requests(container))


def test_a_malformed_or_zero_quantity_still_names_its_resource() -> None:
    container = {"resources": {"limits": {"aliyun.com/gpu-mem": "lots"}, "requests": {"cpu": "0", "memory": "-1"}}}
    assert noderesources.container_resource_names(container) == {"aliyun.com/gpu-mem", "cpu", "memory"}
