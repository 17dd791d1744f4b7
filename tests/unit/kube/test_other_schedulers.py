"""KAI Scheduler, Volcano and Koordinator decoders: documented formats, and one warning per bad value.

Every bad value gives exactly one warning, touches only its pod or GPU, and never credits free
memory (a claim that cannot be placed is pending, never taken off a GPU nor given back to one).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect.source import stack_ledger
from kubectl_gpushare.kube import stacks, types
from kubectl_gpushare.kube.records import Warnings
from kubectl_gpushare.kube.stacks import kai
from kubectl_gpushare.ledger import PENDING, StackDeviceUsage, StackNode, stack_usage

RESERVE = "kai-resource-reservation"
GPU_LABELS = {"nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.product": "A100"}


def make_node(name: str = "n1", resources: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
              labels: dict[str, str] | None = None, capacity: dict[str, str] | None = None) -> types.Node:
    allocatable = resources if resources is not None else {"nvidia.com/gpu": "2"}
    body = {"metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
            "status": {"allocatable": allocatable, "capacity": capacity if capacity is not None else allocatable}}
    return types.NODE_DECODER.decode(json.dumps(body).encode())


def make_pod(name: str, *, namespace: str = "ns", limits: list[dict[str, str]] | None = None,
             annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
             node: str = "n1", phase: str = "Running") -> types.Pod:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": annotations or {},
                     "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": f"c{i}", "resources": {"limits": lim}}
                                                  for i, lim in enumerate(limits or [{}])]},
        "status": {"phase": phase},
    }
    return types.POD_DECODER.decode(json.dumps(body).encode())


def reservation(name: str, group: str, uuid: str | None) -> types.Pod:
    annotations = {} if uuid is None else {protocol.KAI_ANN_RESERVED_GPU: uuid}
    return make_pod(name, namespace=RESERVE, limits=[{"nvidia.com/gpu": "1"}], annotations=annotations,
                    labels={"app": RESERVE, protocol.KAI_LABEL_GROUP: group})


def fractional(name: str, group: str | None, **annotations: str) -> types.Pod:
    return make_pod(name, annotations=annotations, labels={protocol.KAI_LABEL_GROUP: group} if group else {})


def read(nodes: list[types.Node], pods: list[types.Pod], forced: str = stacks.AUTO
         ) -> tuple[dict[str, list[StackDeviceUsage]], Warnings, dict[str, StackNode]]:
    warnings = Warnings()
    decoded, claims = stack_ledger(nodes, pods, warnings, forced)
    usage = {node.name: stack_usage(node, claims.get(node.name, [])) for node in decoded}
    return usage, warnings, {node.name: node for node in decoded}


def by_id(devices: list[StackDeviceUsage]) -> dict[str, StackDeviceUsage]:
    return {device.gpu.id or f"pending-{device.gpu.unit}": device for device in devices}


# --- KAI ---------------------------------------------------------------------------------------------


def test_kai_documented_examples_fraction_and_memory_share_the_reserved_gpu() -> None:
    pods = [reservation("gpu-reservation-a", "g1", "GPU-1111"),
            fractional("gpu-sharing", "g1", **{"gpu-fraction": "0.5"}),
            fractional("gpu-memory", "g1", **{"gpu-memory": "2000"})]
    usage, warnings, nodes = read([make_node(labels=GPU_LABELS)], pods)
    assert not list(warnings)
    assert nodes["n1"].stack == protocol.STACK_KAI
    devices = by_id(usage["n1"])
    shared = devices["GPU-1111"]
    assert (shared.gpu.total, shared.gpu.unit, shared.used) == (40960, "MiB", 20480 + 2000)
    assert {claim.name for claim in shared.claims} == {"gpu-sharing", "gpu-memory"}
    # The reservation pod is no workload: it only takes its GPU out of the whole-GPU pool.
    pool = devices["nvidia.com/gpu"]
    assert (pool.gpu.total, pool.used) == (1, 0)
    assert all(claim.namespace != RESERVE for device in usage["n1"] for claim in device.claims)


def test_kai_reservation_without_uuid_yet_keeps_its_group_pending() -> None:
    pods = [reservation("r", "g1", "-1"), fractional("f", "g1", **{"gpu-fraction": "0.25"})]
    usage, warnings, nodes = read([make_node(labels=GPU_LABELS)], pods)
    assert not list(warnings)
    assert "1 reservation without a GPU yet" in nodes["n1"].note
    pending = by_id(usage["n1"])["pending-MiB"]
    assert (pending.gpu.index, pending.used) == (PENDING, 10240)


def test_kai_multi_gpu_fraction_lands_on_each_group() -> None:
    pods = [reservation("r1", "g1", "GPU-1"), reservation("r2", "g2", "GPU-2"),
            make_pod("multi", annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"},
                     labels={"runai-gpu-group/g1": "g1", "runai-gpu-group/g2": "g2"})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    assert not list(warnings)
    devices = by_id(usage["n1"])
    assert devices["GPU-1"].used == devices["GPU-2"].used == 20480


def test_kai_node_without_kai_pods_stays_nvidia() -> None:
    _, _, nodes = read([make_node(labels=GPU_LABELS)], [make_pod("whole", limits=[{"nvidia.com/gpu": "1"}])])
    assert nodes["n1"].stack == protocol.STACK_NVIDIA


@pytest.mark.parametrize("value", ["0", "-0.5", "1.5", "nan", "NaN", "1e999", "inf", "-inf", "abc", "", "0x1",
                                   "1" * 40])
def test_kai_bad_fraction_is_one_warning_and_no_claim(value: str) -> None:
    pods = [reservation("r", "g1", "GPU-1"), fractional("bad", "g1", **{"gpu-fraction": value}),
            fractional("good", "g1", **{"gpu-fraction": "0.5"})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    messages = list(warnings)
    assert len(messages) == 1 and "ns/bad" in messages[0] and "gpu-fraction" in messages[0]
    gpu = by_id(usage["n1"])["GPU-1"]
    assert [claim.name for claim in gpu.claims] == ["good"] and gpu.used == 20480


def test_kai_whole_fraction_one_is_the_whole_gpu() -> None:
    pods = [reservation("r", "g1", "GPU-1"), fractional("all", "g1", **{"gpu-fraction": "1"})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    assert not list(warnings) and by_id(usage["n1"])["GPU-1"].free == 0


@pytest.mark.parametrize("value", ["-5", "0", "2000.5", "1e3", "99999999999", str(2**70), "abc", " "])
def test_kai_bad_memory_is_one_warning_and_no_claim(value: str) -> None:
    pods = [reservation("r", "g1", "GPU-1"), fractional("bad", "g1", **{"gpu-memory": value})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    messages = list(warnings)
    assert len(messages) == 1 and "gpu-memory" in messages[0]
    assert by_id(usage["n1"])["GPU-1"].used == 0


def test_kai_group_label_without_reservation_is_warned_and_pending() -> None:
    pods = [reservation("r", "g1", "GPU-1"), fractional("orphan", "g-missing", **{"gpu-fraction": "0.5"})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    messages = list(warnings)
    assert len(messages) == 1 and kai.NO_RESERVATION in messages[0] and "ns/orphan" in messages[0]
    devices = by_id(usage["n1"])
    assert devices["GPU-1"].used == 0
    assert devices["pending-MiB"].used == 20480  # shown, but off no GPU's free memory


def test_kai_two_reservations_claiming_one_uuid_warn_once_and_count_both_groups() -> None:
    pods = [reservation("r1", "g1", "GPU-1"), reservation("r2", "g2", "GPU-1"),
            fractional("a", "g1", **{"gpu-fraction": "0.5"}), fractional("b", "g2", **{"gpu-fraction": "0.75"})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    messages = list(warnings)
    assert len(messages) == 1 and "both claim GPU GPU-1" in messages[0]
    shared = [device for device in usage["n1"] if device.gpu.unit == "MiB" and device.gpu.index != PENDING]
    assert len(shared) == 1 and shared[0].used == 20480 + 30720 and shared[0].free < 0  # over, never hidden


@pytest.mark.parametrize("uuid", ["GPU 1", "GPU-\x00", "x" * 300, "\u00e9"])
def test_kai_reservation_with_garbage_uuid_is_one_warning_and_pending(uuid: str) -> None:
    pods = [reservation("r", "g1", uuid), fractional("f", "g1", **{"gpu-fraction": "0.5"})]
    usage, warnings, _ = read([make_node(labels=GPU_LABELS)], pods)
    assert len(list(warnings)) == 1
    assert [device.gpu.index for device in usage["n1"] if device.gpu.unit == "MiB"] == [PENDING]


def test_kai_without_gpu_memory_label_keeps_fractions_as_pending_percent() -> None:
    pods = [reservation("r", "g1", "GPU-1"), fractional("f", "g1", **{"gpu-fraction": "0.5"})]
    usage, _, _ = read([make_node(labels={})], pods)
    devices = by_id(usage["n1"])
    assert devices["GPU-1"].used == 0 and devices["pending-%"].used == 50


def test_kai_forced_stack_reads_a_node_without_kai_pods() -> None:
    warnings = Warnings()
    decoded, _ = stack_ledger([make_node(labels=GPU_LABELS)], [], warnings, forced=protocol.STACK_KAI)
    assert decoded[0].stack == protocol.STACK_KAI


# --- Volcano -------------------------------------------------------------------------------------------

VOLCANO = {"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "2"}


def volcano_pod(name: str, index: str | None, memory: str = "1024") -> types.Pod:
    return make_pod(name, limits=[{"volcano.sh/gpu-memory": memory}],
                    annotations={} if index is None else {protocol.VOLCANO_ANN_GPU_INDEX: index})


def test_volcano_gpu_share_splits_capacity_per_card_and_marks_unhealthy() -> None:
    node = make_node(resources={}, capacity=VOLCANO, annotations={protocol.VOLCANO_ANN_UNHEALTHY: "1,x"})
    usage, warnings, nodes = read([node], [volcano_pod("a", "0"), volcano_pod("b", None)])
    assert nodes["n1"].stack == protocol.STACK_VOLCANO and not list(warnings)
    devices = usage["n1"]
    assert [(d.gpu.index, d.gpu.total, d.used, d.gpu.healthy) for d in devices] == [
        (0, 16384, 1024, True), (1, 16384, 0, False), (PENDING, 0, 1024, True)]


@pytest.mark.parametrize("index", ["abc", "-1", "99", "0,0", "0,,1", "1" * 300])
def test_volcano_bad_gpu_index_is_one_warning_and_no_claim(index: str) -> None:
    node = make_node(resources={}, capacity=VOLCANO)
    usage, warnings, _ = read([node], [volcano_pod("bad", index), volcano_pod("good", "1")])
    assert len(list(warnings)) == 1
    assert [(d.gpu.index, d.used) for d in usage["n1"]] == [(0, 0), (1, 1024)]


def test_volcano_index_beyond_the_node_is_warned_and_pending() -> None:
    node = make_node(resources={}, capacity=VOLCANO)
    usage, warnings, _ = read([node], [volcano_pod("far", "5")])
    assert len(list(warnings)) == 1
    assert [(d.gpu.index, d.used) for d in usage["n1"]] == [(0, 0), (1, 0), (PENDING, 1024)]


@pytest.mark.parametrize("memory", ["-1", "1e999", str(2**70), "abc"])
def test_volcano_bad_pod_memory_is_one_warning(memory: str) -> None:
    node = make_node(resources={}, capacity=VOLCANO)
    usage, warnings, _ = read([node], [volcano_pod("bad", "0", memory)])
    assert len(list(warnings)) == 1 and all(d.used == 0 for d in usage["n1"])


@pytest.mark.parametrize("capacity", [{"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "0"},
                                      {"volcano.sh/gpu-memory": "32768", "volcano.sh/gpu-number": "1e999"},
                                      {"volcano.sh/gpu-memory": "-5", "volcano.sh/gpu-number": "2"}])
def test_volcano_bad_node_capacity_is_warned_never_credited(capacity: dict[str, str]) -> None:
    warnings = Warnings()
    node = stacks.stack_node(make_node(resources={}, capacity=capacity), protocol.STACK_VOLCANO, warnings, 0)
    assert list(warnings)
    assert all(gpu.total == 0 for gpu in node.gpus)


def test_volcano_vgpu_register_and_ids() -> None:
    register = "GPU-a,10,32768,V100,true,hami-core:GPU-b,10,32768,V100,false,hami-core:"
    node = make_node(resources={"volcano.sh/vgpu-number": "20"},
                     annotations={protocol.VOLCANO_ANN_VGPU_REGISTER: register})
    pod = make_pod("v", annotations={protocol.VOLCANO_ANN_VGPU_IDS: "GPU-b,NVIDIA,3000,25:;"})
    usage, warnings, _ = read([node], [pod])
    assert not list(warnings)
    assert [(d.gpu.id, d.used, d.cores_used, d.gpu.healthy) for d in usage["n1"]] == [
        ("GPU-a", 0, 0, True), ("GPU-b", 3000, 25, False)]


@pytest.mark.parametrize("register", ["GPU-a,10", "GPU-a,10,-5,V100,true,hami-core:",
                                      "GPU-a,1,1,T,true,m:GPU-a,1,1,T,true,m:", "x" * 70000])
def test_volcano_bad_register_is_one_warning_and_no_gpus(register: str) -> None:
    warnings = Warnings()
    node = make_node(resources={}, annotations={protocol.VOLCANO_ANN_VGPU_REGISTER: register})
    assert stacks.stack_node(node, protocol.STACK_VOLCANO, warnings, 0).gpus == ()
    assert len(list(warnings)) == 1


# --- Koordinator ------------------------------------------------------------------------------------------

KOORD = {"koordinator.sh/gpu-core": "200", "koordinator.sh/gpu-memory": "32Gi",
         "koordinator.sh/gpu-memory-ratio": "200"}


def koord_pod(name: str, text: str) -> types.Pod:
    return make_pod(name, annotations={protocol.KOORD_ANN_DEVICE_ALLOCATED: text})


def allocated(minor: int, memory: str = "8Gi", core: str = "50") -> str:
    resources = {"koordinator.sh/gpu-core": core, "koordinator.sh/gpu-memory": memory}
    return json.dumps({"gpu": [{"minor": minor, "resources": resources}]})


def test_koordinator_documented_annotation_lands_on_its_minor() -> None:
    usage, warnings, nodes = read([make_node(resources=KOORD)], [koord_pod("p", allocated(1, "20Gi", "100"))])
    assert nodes["n1"].stack == protocol.STACK_KOORDINATOR and not list(warnings)
    assert [(d.gpu.index, d.gpu.total, d.used, d.cores_used) for d in usage["n1"]] == [
        (0, 16384, 0, 0), (1, 16384, 20480, 100)]


def test_koordinator_ratio_only_allocation_is_sized_from_the_gpu() -> None:
    text = json.dumps({"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-memory-ratio": "25"}}]})
    usage, _, _ = read([make_node(resources=KOORD)], [koord_pod("p", text)])
    assert usage["n1"][0].used == 4096


@pytest.mark.parametrize("text", [
    "not json", "{", "[]", '{"gpu": "x"}', '{"gpu":[{"resources":{}}]}', "[" * 100000,
    '{"gpu":[{"minor":-1,"resources":{}}]}', '{"gpu":[{"minor":1.5,"resources":{}}]}',
    allocated(0, "-1Gi"), allocated(0, "1e999"), allocated(0, "lots"),
    '{"gpu":[{"minor":0,"resources":{}},{"minor":0,"resources":{}}]}', "x" * 70000,
])
def test_koordinator_garbage_annotation_is_one_warning_and_no_claim(text: str) -> None:
    usage, warnings, _ = read([make_node(resources=KOORD)], [koord_pod("bad", text), koord_pod("ok", allocated(0))])
    messages = list(warnings)
    assert len(messages) == 1 and "ns/bad" in messages[0]
    assert [(d.gpu.index, d.used) for d in usage["n1"]] == [(0, 8192), (1, 0)]


def test_koordinator_unknown_minor_is_one_warning_and_pending() -> None:
    usage, warnings, _ = read([make_node(resources=KOORD)], [koord_pod("far", allocated(7))])
    assert len(list(warnings)) == 1
    assert [(d.gpu.index, d.used) for d in usage["n1"]] == [(0, 0), (1, 0), (PENDING, 8192)]


# --- Never a traceback ------------------------------------------------------------------------------------

hostile = st.one_of(st.text(max_size=80), st.sampled_from(
    ["0.5", "-1", "nan", "1e999", "2000", "GPU-1", "{", '{"gpu":[{"minor":0}]}', "0,1", ",", ""]))


@settings(max_examples=150, deadline=None)
@given(fraction=hostile, memory=hostile, devices=hostile, uuid=hostile, index=hostile, koord=hostile,
       forced=st.sampled_from([stacks.AUTO, protocol.STACK_KAI, protocol.STACK_VOLCANO, protocol.STACK_KOORDINATOR]))
def test_hostile_values_never_raise_nor_credit(fraction: str, memory: str, devices: str, uuid: str, index: str,
                                               koord: str, forced: str) -> None:
    nodes = [make_node("kai", labels=GPU_LABELS), make_node("vc", resources={}, capacity=VOLCANO),
             make_node("ko", resources=KOORD)]
    pods = [reservation("r", "g1", uuid),
            make_pod("f", node="kai", annotations={"gpu-fraction": fraction, "gpu-memory": memory,
                                                   "gpu-fraction-num-devices": devices},
                     labels={protocol.KAI_LABEL_GROUP: "g1"}),
            make_pod("v", node="vc", limits=[{"volcano.sh/gpu-memory": "100"}],
                     annotations={protocol.VOLCANO_ANN_GPU_INDEX: index}),
            make_pod("k", node="ko", annotations={protocol.KOORD_ANN_DEVICE_ALLOCATED: koord})]
    pods[0] = make_pod("r", namespace=RESERVE, node="kai", limits=[{"nvidia.com/gpu": "1"}],
                       annotations={protocol.KAI_ANN_RESERVED_GPU: uuid}, labels={protocol.KAI_LABEL_GROUP: "g1"})
    usage, _, _ = read(nodes, pods, forced)
    for devices_of_node in usage.values():
        for device in devices_of_node:
            assert device.used >= 0
            assert all(claim.amount >= 0 for claim in device.claims)


def test_inspect_stack_choices_spell_out_every_stack() -> None:
    from kubectl_gpushare.inspect.command import STACK_CHOICES

    assert STACK_CHOICES == stacks.CHOICES


@pytest.mark.parametrize("stack", [protocol.STACK_KAI, protocol.STACK_VOLCANO, protocol.STACK_KOORDINATOR])
def test_forcing_a_stack_on_a_node_it_does_not_run_is_quiet_and_empty(stack: str) -> None:
    warnings = Warnings()
    node = make_node(resources={"cpu": "8"})
    decoded, _ = stack_ledger([node], [make_pod("p", limits=[{"cpu": "1"}])], warnings, forced=stack)
    assert list(warnings) == [] and decoded[0].stack == stack
    assert all(gpu.total == 0 for gpu in decoded[0].gpus)


def koord_device(entries: list[dict[str, Any]]) -> types.KoordDevice:
    body = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": {"name": "n1"},
            "spec": {"devices": entries}}
    return types.KOORD_DEVICE_DECODER.decode(json.dumps(body).encode())


def gpu_entry(minor: Any, memory: str = "16Gi", health: bool = True, uuid: str = "GPU-x") -> dict[str, Any]:
    return {"type": "gpu", "id": uuid, "minor": minor, "health": health,
            "resources": {"koordinator.sh/gpu-memory": memory, "koordinator.sh/gpu-core": "100"}}


def test_koordinator_device_object_gives_uuids_memory_and_health() -> None:
    from kubectl_gpushare.kube.stacks import koordinator

    device = koord_device([gpu_entry(1, "15472384Ki", False, "GPU-b"), gpu_entry(0, "8Gi", True, "GPU-a"),
                           {"type": "rdma", "minor": 0}])
    warnings = Warnings()
    node = koordinator.node(make_node(resources=KOORD), warnings, device)
    assert not list(warnings)
    assert [(g.index, g.id, g.total, g.healthy) for g in node.gpus] == [(0, "GPU-a", 8192, True),
                                                                        (1, "GPU-b", 15110, False)]


@pytest.mark.parametrize("entries", [
    [gpu_entry(None)], [gpu_entry(-1)], [gpu_entry(64)], [gpu_entry(0), gpu_entry(0)],
])
def test_koordinator_unusable_device_object_is_one_warning_and_node_resources(entries: list[dict[str, Any]]) -> None:
    from kubectl_gpushare.kube.stacks import koordinator

    warnings = Warnings()
    node = koordinator.node(make_node(resources=KOORD), warnings, koord_device(entries))
    assert len(list(warnings)) == 1
    assert [(g.index, g.total) for g in node.gpus] == [(0, 16384), (1, 16384)]


@pytest.mark.parametrize("memory", ["-1Gi", "1e999", "lots"])
def test_koordinator_device_bad_memory_is_warned_and_never_credited(memory: str) -> None:
    from kubectl_gpushare.kube.stacks import koordinator

    warnings = Warnings()
    node = koordinator.node(make_node(resources=KOORD), warnings, koord_device([gpu_entry(0, memory)]))
    assert len(list(warnings)) == 1 and node.gpus[0].total == 0


def test_volcano_vgpu_pod_still_binding_counts_on_its_node_and_a_failed_bind_holds_nothing() -> None:
    register = "GPU-a,10,32768,V100,true,hami-core:"
    node = make_node(resources={"volcano.sh/vgpu-number": "10"},
                     annotations={protocol.VOLCANO_ANN_VGPU_REGISTER: register})
    ids = {protocol.VOLCANO_ANN_VGPU_IDS: "GPU-a,NVIDIA,3000,0:;", protocol.VOLCANO_ANN_VGPU_NODE: "n1"}
    binding = make_pod("binding", node="", phase="Pending",
                       annotations={**ids, protocol.VOLCANO_ANN_BIND_PHASE: "allocating"})
    failed = make_pod("failed", annotations={**ids, protocol.VOLCANO_ANN_BIND_PHASE: "failed"})
    usage, warnings, _ = read([node], [binding, failed])
    assert not list(warnings)
    assert [(d.gpu.id, d.used, [c.name for c in d.claims]) for d in usage["n1"]] == [("GPU-a", 3000, ["binding"])]


def test_kai_node_lists_its_reservation_pods_not_as_claims() -> None:
    pods = [reservation("r1", "g1", "GPU-1"), reservation("r2", "g2", "-1"),
            reservation("done", "g3", "GPU-3"), fractional("f", "g1", **{"gpu-fraction": "0.5"})]
    pods[2] = make_pod("done", namespace=RESERVE, limits=[{"nvidia.com/gpu": "1"}], phase="Succeeded",
                       annotations={protocol.KAI_ANN_RESERVED_GPU: "GPU-3"},
                       labels={"app": RESERVE, protocol.KAI_LABEL_GROUP: "g3"})
    usage, _, nodes = read([make_node(labels=GPU_LABELS)], pods)
    first_shared = 1  # after the nvidia.com/gpu pool
    assert nodes["n1"].reservations == ((f"{RESERVE}/r1", first_shared, "GPU-1"), (f"{RESERVE}/r2", PENDING, ""))
    assert {claim.name for device in usage["n1"] for claim in device.claims} == {"f"}


def test_volcano_whole_card_pods_hold_their_cards_and_wait_as_pending_cards() -> None:
    node = make_node(resources={}, capacity=VOLCANO)
    placed = make_pod("placed", limits=[{"volcano.sh/gpu-number": "1"}],
                      annotations={protocol.VOLCANO_ANN_GPU_INDEX: "1"})
    waiting = make_pod("waiting", limits=[{"volcano.sh/gpu-number": "2"}])
    usage, warnings, _ = read([node], [placed, waiting])
    assert not list(warnings)
    found = [(d.gpu.index, d.used, len(d.claims)) for d in usage["n1"]]
    assert found == [(0, 0, 0), (1, 16384, 1), (PENDING, 32768, 2)]
