"""Hypothesis properties of each stack decoder: hostile text gives a result or one warning, never a crash.

For every decoder: a malformed annotation is warned once and nothing is counted from it; every
counted amount is positive and bounded; no real GPU ends with more free than its total.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import stacks, types
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks import _cards, hami
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode, stack_counts, stack_usage

PROPERTY = settings(max_examples=200, deadline=None)
NOW = 1_800_000_000.0

pieces = st.sampled_from(["GPU-a", "GPU-b", ",", ":", ";", "10", "-1", "32768", "100", "true", "false", "NVIDIA",
                          "0", "", " ", "[", "]", "{", "}", '"', "1e9", "99999999999999999999999"])
hostile_text = st.one_of(st.text(max_size=200), st.lists(pieces, max_size=40).map("".join))
quantity_text = st.one_of(st.text(max_size=30), st.sampled_from(["1", "50", "100", "1e99", "-3", "0.5", "2Gi", ""]))


def node(resources: dict[str, str], annotations: dict[str, str], labels: dict[str, str] | None = None) -> types.Node:
    body = {"metadata": {"name": "n1", "annotations": annotations, "labels": labels or {}},
            "status": {"allocatable": resources, "capacity": resources}}
    return types.NODE_DECODER.decode(json.dumps(body).encode())


def pod(limits: list[dict[str, str]], annotations: dict[str, str]) -> types.Pod:
    body: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": annotations},
        "spec": {"nodeName": "n1", "containers": [{"name": f"c{i}", "resources": {"limits": lim}}
                                                   for i, lim in enumerate(limits)]},
        "status": {"phase": "Running"},
    }
    return types.POD_DECODER.decode(json.dumps(body).encode())


def check_bounded(stack: str, n: types.Node, p: types.Pod) -> tuple[Warnings, int]:
    warnings = Warnings()
    decoded = stacks.stack_node(n, stack, warnings, NOW)
    claims = stacks.stack_claims(p, decoded, warnings)
    for claim in claims:
        assert 0 <= claim.amount <= protocol.MAX_GPUS_PER_NODE * protocol.MAX_GPU_MEMORY
    assert len(decoded.gpus) <= protocol.MAX_GPUS_PER_NODE
    for device in stack_usage(decoded, claims):
        assert device.used >= 0
        if device.gpu.index != PENDING:
            assert device.free <= device.gpu.total
    return warnings, sum(claim.amount for claim in claims)


@PROPERTY
@given(hostile_text)
def test_hami_register_parses_or_raises_annotation_error(text: str) -> None:
    try:
        devices = hami.parse_register(text)
    except protocol.AnnotationError:
        return
    assert len(devices) <= protocol.MAX_GPUS_PER_NODE
    assert all(0 <= d.memory <= protocol.MAX_GPU_MEMORY and protocol.valid_gpu_index(d.index) for d in devices)


@PROPERTY
@given(hostile_text, hostile_text)
def test_hami_hostile_annotations_warn_once_each_and_count_nothing_from_bad_ones(register: str, allocated: str) -> None:
    n = node({"nvidia.com/gpu": "10"}, {protocol.HAMI_ANN_REGISTER: register, protocol.HAMI_ANN_HANDSHAKE: "Reported"})
    warnings, counted = check_bounded("hami", n, pod([{}], {protocol.HAMI_ANN_ALLOCATED: allocated}))
    assert len(warnings) <= 2
    try:
        hami.parse_allocated(allocated)
    except protocol.AnnotationError:
        assert counted == 0
        assert any(protocol.HAMI_ANN_ALLOCATED in message for message in warnings)


@PROPERTY
@given(quantity_text, quantity_text, st.dictionaries(
    st.sampled_from([protocol.NVIDIA_LABEL_REPLICAS, protocol.NVIDIA_LABEL_COUNT, protocol.NVIDIA_LABEL_MEMORY,
                     protocol.NVIDIA_LABEL_STRATEGY, protocol.NVIDIA_LABEL_PRODUCT]), st.text(max_size=30)))
def test_nvidia_hostile_quantities_and_labels_never_crash(capacity: str, limit: str, labels: dict[str, str]) -> None:
    n = node({"nvidia.com/gpu": capacity, "nvidia.com/mig-1g.5gb": capacity}, {}, labels)
    warnings, counted = check_bounded("nvidia", n, pod([{"nvidia.com/gpu": limit}], {}))
    assert len(warnings) <= 3 + len(labels)


@PROPERTY
@given(st.sampled_from(["nano-gpu", "elastic-gpu"]), quantity_text, quantity_text, hostile_text)
def test_percent_stacks_bad_annotation_warns_once_and_counts_nothing(
    stack: str, capacity: str, limit: str, annotation: str
) -> None:
    resource = protocol.NANO_GPU_RESOURCE if stack == "nano-gpu" else protocol.ELASTIC_GPU_RESOURCE_CORE
    prefix = protocol.NANO_GPU_ANN_CONTAINER if stack == "nano-gpu" else protocol.ELASTIC_GPU_ANN_CONTAINER
    n = node({resource: capacity}, {})
    warnings, counted = check_bounded(stack, n, pod([{resource: limit}], {prefix + "c0": annotation}))
    assert len(warnings) <= 2
    if _cards.parse_cards(annotation) is None and not any("limit" in message for message in warnings):
        assert counted == 0


units = st.sampled_from(["MiB", "%", "slots", "GPUs"])
gpu_records = st.builds(StackGPU, index=st.integers(0, 3), total=st.integers(0, 10**6), unit=units)
claim_records = st.builds(
    StackClaim, namespace=st.sampled_from(["a", "b"]), name=st.sampled_from(["p", "q"]), uid=st.text(max_size=3),
    node=st.sampled_from(["n1", "n2"]), gpu=st.integers(-2, 5), amount=st.integers(-10, 10**6), unit=units,
    phase=st.sampled_from(["", "Running", "Succeeded", "Failed"]),
)


@PROPERTY
@given(st.lists(gpu_records, max_size=4, unique_by=lambda gpu: gpu.index), st.lists(claim_records, max_size=30))
def test_stack_usage_counts_each_claim_once_in_its_own_unit(gpus: list[StackGPU], claims: list[StackClaim]) -> None:
    devices = stack_usage(StackNode("n1", "hami", gpus=tuple(gpus)), claims)
    counted = [claim for device in devices for claim in device.claims]
    assert sorted(map(id, counted)) == sorted(id(c) for c in claims if stack_counts(c, "n1"))
    for device in devices:
        assert all(claim.unit == device.gpu.unit for claim in device.claims)
        assert device.used == sum(claim.amount for claim in device.claims) >= 0
        if device.gpu.index != PENDING:
            assert device.free <= device.gpu.total
