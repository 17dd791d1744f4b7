"""Pure parts of ``sandbox --stack``: the shipped scheduler configuration, tolerations, requests, hardware."""

from __future__ import annotations

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.cli.scheduler import _duration, extenders_from_config, requested
from kubectl_gpushare.cli.stack import StackAttachment, hardware_of, scheduler_config_text
from kubectl_gpushare.kube.taints import decode_taints, decode_tolerations, untolerated
from kubectl_gpushare.sandbox.builders import node_object


def test_the_shipped_scheduler_configuration_drives_the_scheduler() -> None:
    [extender] = extenders_from_config(scheduler_config_text(), "http://127.0.0.1:1/gpushare-scheduler")
    config = extender.client.config
    assert (config.filter_verb, config.prioritize_verb, config.bind_verb) == ("filter", "prioritize", "bind")
    assert config.node_cache_capable and config.http_timeout == 30.0 and config.weight == 1
    assert extender.managed == {protocol.RESOURCE_MEM: False}
    assert extender.ignorable is False
    assert extender.client.url("filter") == "http://127.0.0.1:1/gpushare-scheduler/filter"


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30.0), ("500ms", 0.5), ("1m30s", 90.0), ("1h", 3600.0),  # Go's time.ParseDuration
    ("infs", 5.0), ("nans", 5.0), ("-5s", 5.0), ("0s", 5.0), ("9" * 5000 + "s", 5.0), ("x", 5.0), (None, 5.0),
])
def test_an_extenders_http_timeout_is_a_go_duration_else_the_default(text: object, seconds: float) -> None:
    assert _duration(text, 5.0) == seconds


def test_a_file_that_is_not_a_scheduler_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="KubeSchedulerConfiguration"):
        extenders_from_config("kind: Pod\n", "http://127.0.0.1:1/x")


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "v"}, True),
    ({"key": "k", "operator": "Exists"}, True),
    ({"operator": "Exists"}, True),
    ({"key": "k", "value": "other"}, False),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
])
def test_tolerations_match_as_kube_scheduler_matches_them(toleration: dict[str, str], tolerated: bool) -> None:
    # the plain JSON the scheduler stand-in holds, decoded as it decodes it, then the shared rule
    taints, tolerations = decode_taints([{"key": "k", "value": "v", "effect": "NoSchedule"}]), decode_tolerations(
        [toleration])
    assert taints is not None and tolerations is not None
    assert (untolerated(taints, tolerations) is None) is tolerated


def limit(value: object) -> dict[str, object]:
    return {"resources": {"limits": {protocol.RESOURCE_MEM: value}}}


@pytest.mark.parametrize(("containers", "total"), [
    ([limit("2"), limit(3)], 5),
    ([{"resources": {"requests": {protocol.RESOURCE_MEM: "4"}}}], 4),
    ([limit("lots"), limit("1")], 1),
    ([limit("-3")], 0),
    (["not-a-container", {"resources": "nope"}], 0),
    ("not-a-list", 0),
])
def test_requests_count_only_valid_amounts(containers: object, total: int) -> None:
    assert requested({"spec": {"containers": containers}}, protocol.RESOURCE_MEM) == total


def test_seed_gpus_become_hardware_and_leave_the_node() -> None:
    same = node_object("a", [16, 16], ip="10.0.0.1")
    mixed = node_object("b", [80, 40], ip="10.0.0.2")
    cpu = node_object("c", [], ip="10.0.0.3")
    assert hardware_of(same) == "2x16GiB" and hardware_of(mixed) == "1x80GiB,1x40GiB" and hardware_of(cpu) is None
    attachment = StackAttachment()
    attachment.prepare([same, mixed, cpu])
    assert attachment.hardware == {"a": "2x16GiB", "b": "1x80GiB,1x40GiB"}
    for node in (same, mixed):
        for key in ("capacity", "allocatable"):
            assert protocol.RESOURCE_MEM not in node["status"][key]
            assert protocol.RESOURCE_COUNT not in node["status"][key]
