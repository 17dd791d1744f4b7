"""The other stacks' decoders and the ledger's per-unit counting: formats, detection, hostile values."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import stacks, types
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks import hami
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode, stack_usage

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC).timestamp()
V27 = "GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:GPU-b,10,16384,100,NVIDIA-T4,1,false:"
V28 = json.dumps([
    {"id": "GPU-a", "index": 0, "count": 10, "devmem": 32768, "devcore": 100, "type": "NVIDIA-Tesla V100-PCIE-32GB",
     "numa": 0, "mode": "hami-core", "health": True},
    {"id": "GPU-b", "index": 1, "count": 10, "devmem": 16384, "devcore": 100, "type": "NVIDIA-T4", "numa": 1,
     "mode": "hami-core", "health": False},
])


def make_node(resources: dict[str, str], annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None) -> types.Node:
    body = {
        "metadata": {"name": "n1", "annotations": annotations or {}, "labels": labels or {}},
        "status": {"allocatable": resources, "capacity": resources},
    }
    return types.NODE_DECODER.decode(json.dumps(body).encode())


def make_pod(containers: list[dict[str, str]], annotations: dict[str, str] | None = None, phase: str = "Running",
             name: str = "p") -> types.Pod:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": {"nodeName": "n1", "containers": [
            {"name": f"c{i}", "resources": {"limits": limits}} for i, limits in enumerate(containers)
        ]},
        "status": {"phase": phase},
    }
    return types.POD_DECODER.decode(json.dumps(body).encode())


def usage(node: types.Node, pods: list[types.Pod], forced: str = stacks.AUTO) -> tuple[StackNode, list, Warnings]:
    warnings = Warnings()
    stack = stacks.detect(node, forced)
    assert stack is not None and stack != "gpushare"
    decoded = stacks.stack_node(node, stack, warnings, NOW)
    claims = [claim for pod in pods for claim in stacks.stack_claims(pod, decoded, warnings)]
    return decoded, stack_usage(decoded, claims), warnings


# --- HAMi ---------------------------------------------------------------------------------------


def test_hami_register_formats_v27_and_v28_read_the_same() -> None:
    old, new = hami.parse_register(V27), hami.parse_register(V28)
    as_tuples = [[(d.uuid, d.index, d.count, d.memory, d.cores, d.model, d.healthy) for d in ds] for ds in (old, new)]
    assert as_tuples[0] == as_tuples[1]
    assert as_tuples[0][1] == ("GPU-b", 1, 10, 16384, 100, "NVIDIA-T4", False)


def test_hami_register_v27_with_index_and_mode_fields() -> None:
    devices = hami.parse_register("GPU-x,4,8000,100,NVIDIA-A10,0,true,3,hami-core:")
    assert [(d.uuid, d.index, d.memory) for d in devices] == [("GPU-x", 3, 8000)]


@pytest.mark.parametrize(
    "text",
    ["GPU-a,10,abc,100,T,0,true:", "GPU-a,10,100:", "[{\"id\": 5}]", "[1, 2]", "{}", "GPU-a,10,-5,100,T,0,true:",
     "GPU-a,10,1,100,T,0,maybe:", "GPU-a,10,1,100,T,0,true:GPU-a,10,1,100,T,0,true:", "[" * 50],
)
def test_hami_malformed_register_warns_once_and_counts_nothing(text: str) -> None:
    node = make_node({"nvidia.com/gpu": "10"}, {protocol.HAMI_ANN_REGISTER: text})
    pod = make_pod([{}], {protocol.HAMI_ANN_ALLOCATED: "GPU-a,NVIDIA,3000,0:;"})
    decoded, devices, warnings = usage(node, [pod, pod])
    assert decoded.gpus == ()
    assert len(warnings) == 1 and protocol.HAMI_ANN_REGISTER in warnings.messages[0]
    assert all(device.gpu.index == PENDING for device in devices)


def test_hami_allocations_tolerate_empty_slots_and_count_mib_and_cores() -> None:
    node = make_node({"nvidia.com/gpu": "20"}, {protocol.HAMI_ANN_REGISTER: V28, protocol.HAMI_ANN_CORDON: "GPU-b"})
    pods = [
        make_pod([{}], {protocol.HAMI_ANN_ALLOCATED: "GPU-a,NVIDIA,3000,30:;"}, name="a"),
        make_pod([{}, {}], {protocol.HAMI_ANN_ALLOCATED: ";;GPU-b,NVIDIA,5000,0:,,0,0:;"}, name="b"),
        make_pod([{}], {protocol.HAMI_ANN_ALLOCATED: "GPU-a,NVIDIA,7000,0:;"}, phase="Succeeded", name="done"),
        make_pod([{}], {protocol.HAMI_ANN_ALLOCATED: "GPU-a,NVIDIA,9000,0:;", protocol.HAMI_ANN_BIND_PHASE: "failed"},
                 phase="Pending", name="failed"),
    ]
    decoded, devices, warnings = usage(node, pods)
    assert not warnings
    assert [(d.gpu.index, d.used, d.cores_used, d.gpu.unit, d.gpu.cordoned) for d in devices] == [
        (0, 3000, 30, "MiB", False), (1, 5000, 0, "MiB", True),
    ]
    assert [gpu.healthy for gpu in decoded.gpus] == [True, False]


@pytest.mark.parametrize(
    "text", ["GPU-a,NVIDIA,3000:;", "GPU-a,NVIDIA,x,0:;", ",,5,0:;", "GPU-a,NVIDIA,-1,0:", "a" * 70000]
)
def test_hami_malformed_allocation_warns_and_counts_nothing(text: str) -> None:
    node = make_node({"nvidia.com/gpu": "20"}, {protocol.HAMI_ANN_REGISTER: V27})
    decoded, devices, warnings = usage(node, [make_pod([{}], {protocol.HAMI_ANN_ALLOCATED: text})] * 3)
    assert sum(device.used for device in devices) == 0
    assert len(warnings) == 1 and protocol.HAMI_ANN_ALLOCATED in warnings.messages[0]


def test_hami_unknown_uuid_is_pending_not_on_a_real_gpu() -> None:
    node = make_node({"nvidia.com/gpu": "20"}, {protocol.HAMI_ANN_REGISTER: V27})
    _, devices, _ = usage(node, [make_pod([{}], {protocol.HAMI_ANN_ALLOCATED: "GPU-zzz,NVIDIA,3000,0:;"})])
    assert [(d.gpu.index, d.used) for d in devices] == [(0, 0), (1, 0), (PENDING, 3000)]


@pytest.mark.parametrize(
    ("handshake", "stale"),
    [
        ("Reported 2026-11-22 11:59:00", False),
        ("Requesting_2026-11-22 11:58:00", False),
        ("Requesting_2026-11-22 11:50:00", True),
        ("Requesting_2026.11.22 11:50:00", True),
        ("Requesting_yesterday", None),
        (None, False),
    ],
)
def test_hami_handshake_staleness(handshake: str | None, stale: bool | None) -> None:
    assert hami.handshake_stale(handshake, NOW) is stale


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("2026-11-22T11:00:00Z", (NOW - 3600, "")),
        ("2026-11-22T12:00:00+01:00,ml,trainer-0", (NOW - 3600, "ml/trainer-0")),
        ("2026-11-22T11:00:00Z,ml", None),  # HAMi wants 1 or 3 parts
        ("2026-11-22 11:00:00", None),  # not RFC 3339
        ("", None),
        ("2026-11-22T11:00:00Z" + " " * 2000, None),  # too long to be HAMi's
        ("0001-01-01T00:00:00+14:00", (-62135647200.0, "")),  # parses, no overflow
    ],
)
def test_hami_mutex_lock_is_read_as_hami_reads_it(text: str, parsed: tuple[float, str] | None) -> None:
    assert hami.parse_mutex_lock(text) == parsed


def test_hami_handshake_request_time() -> None:
    assert hami.handshake_requested_at("Requesting_2026.11.22 11:00:00") == NOW - 3600
    assert hami.handshake_requested_at("Reported 2026-11-22 11:00:00") is None
    assert hami.handshake_requested_at("Requesting_" + "9" * 10**6) is None


def test_hami_stale_handshake_is_noted_on_the_node() -> None:
    stuck = "Requesting_2026-11-22 10:00:00"
    node = make_node({}, {protocol.HAMI_ANN_REGISTER: V27, protocol.HAMI_ANN_HANDSHAKE: stuck})
    decoded, _, _ = usage(node, [])
    assert "handshake stale" in decoded.note


# --- NVIDIA -------------------------------------------------------------------------------------


def test_nvidia_time_slicing_counts_slots_from_replicas() -> None:
    labels = {protocol.NVIDIA_LABEL_REPLICAS: "4", protocol.NVIDIA_LABEL_STRATEGY: "time-slicing",
              protocol.NVIDIA_LABEL_COUNT: "2", protocol.NVIDIA_LABEL_PRODUCT: "Tesla-T4-SHARED"}
    node = make_node({"nvidia.com/gpu": "8"}, labels=labels)
    pods = [make_pod([{"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}]), make_pod([{"nvidia.com/gpu": "5"}],
                                                                                    phase="Succeeded", name="old")]
    decoded, devices, _ = usage(node, pods)
    assert [(d.used, d.gpu.total, d.gpu.unit) for d in devices] == [(3, 8, "slots")]
    assert decoded.note == "time-slicing x4 on 2 GPUs"


def test_nvidia_exclusive_counts_whole_gpus_and_mig_per_profile() -> None:
    node = make_node({"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "1"})
    pods = [make_pod([{"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2"}])]
    _, devices, _ = usage(node, pods)
    assert [(d.gpu.id, d.used, d.gpu.total, d.gpu.unit) for d in devices] == [
        ("nvidia.com/gpu", 1, 2, "GPUs"),
        ("nvidia.com/mig-1g.10gb", 2, 7, "slots"),
        ("nvidia.com/mig-3g.40gb", 0, 1, "slots"),
    ]


def test_nvidia_bad_labels_and_limits_warn_and_count_nothing() -> None:
    node = make_node({"nvidia.com/gpu": "8"}, labels={protocol.NVIDIA_LABEL_REPLICAS: "lots"})
    _, devices, warnings = usage(node, [make_pod([{"nvidia.com/gpu": "1e99"}])])
    assert devices[0].used == 0 and devices[0].gpu.unit == "GPUs"
    assert len(warnings) == 2


# --- nano-gpu / elastic-gpu ---------------------------------------------------------------------


def test_nano_gpu_percent_per_card_and_pending_without_annotation() -> None:
    node = make_node({protocol.NANO_GPU_RESOURCE: "200"})
    pods = [
        make_pod([{protocol.NANO_GPU_RESOURCE: "25"}], {"nano-gpu/container-c0": "1"}, name="a"),
        make_pod([{protocol.NANO_GPU_RESOURCE: "40"}], name="waiting"),
        make_pod([{protocol.NANO_GPU_RESOURCE: "40"}], {"nano-gpu/container-c0": "x"}, name="bad"),
    ]
    _, devices, warnings = usage(node, pods)
    assert [(d.gpu.index, d.used, d.gpu.total, d.gpu.unit) for d in devices] == [
        (0, 0, 100, "%"), (1, 25, 100, "%"), (PENDING, 40, 0, "%"),
    ]
    assert len(warnings) == 1 and "nano-gpu/container-c0" in warnings.messages[0]


def test_elastic_gpu_core_split_over_listed_cards() -> None:
    node = make_node({protocol.ELASTIC_GPU_RESOURCE_CORE: "300", protocol.ELASTIC_GPU_RESOURCE_MEMORY: "1000"})
    pods = [make_pod([{protocol.ELASTIC_GPU_RESOURCE_CORE: "200"}], {"elasticgpu.io/container-c0": "0,2"})]
    decoded, devices, _ = usage(node, pods)
    assert [(d.gpu.index, d.used) for d in devices] == [(0, 100), (1, 0), (2, 100)]
    assert decoded.stack == "elastic-gpu" and "gpu-memory 1000" in decoded.note


# --- detection and the per-unit ledger ----------------------------------------------------------


def test_detection_order_and_forcing() -> None:
    both = make_node({protocol.RESOURCE_MEM: "30", "nvidia.com/gpu": "2"})
    assert stacks.detect(both) == "gpushare"
    assert stacks.detect(make_node({"nvidia.com/gpu": "20"}, {protocol.HAMI_ANN_REGISTER: V27})) == "hami"
    assert stacks.detect(make_node({"nvidia.com/gpu": "2"})) == "nvidia"
    assert stacks.detect(make_node({"cpu": "2"})) is None
    assert stacks.detect(both, "nano-gpu") == "nano-gpu"


def test_stack_usage_never_adds_one_unit_to_another() -> None:
    node = StackNode("n1", "hami", gpus=(StackGPU(0, 1000, "MiB"),))
    claims = [
        StackClaim("ns", "a", "a", "n1", 0, 300, "MiB"),
        StackClaim("ns", "b", "b", "n1", 0, 50, "%"),
        StackClaim("ns", "c", "c", "other", 0, 999, "MiB"),
        StackClaim("ns", "d", "d", "n1", 0, -5, "MiB"),
    ]
    devices = stack_usage(node, claims)
    got = [(d.gpu.index, d.gpu.unit, d.used, d.free) for d in devices]
    assert got == [(0, "MiB", 300, 700), (PENDING, "%", 50, -50)]


def test_hami_v28_register_with_mig_profiles_and_deep_junk() -> None:
    with_mig = json.dumps([{"id": "GPU-m", "index": 0, "count": 7, "devmem": 81920, "devcore": 100, "type": "A100",
                            "health": True, "migProfiles": [{"name": "1g.10gb", "memory": 10240, "count": 7}]}])
    assert [(d.uuid, d.memory) for d in hami.parse_register(with_mig)] == [("GPU-m", 81920)]
    deep = '[{"id": "GPU-x", "junk": ' + "[" * 5000 + "]" * 5000 + "}]"
    with pytest.raises(protocol.AnnotationError):
        hami.parse_register(deep)
