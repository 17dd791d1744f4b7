"""The DRA driver's pure rules: the slice's devices, a claim's holding, the CDI spec, the checkpoint."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare import dra_objects
from kubectl_gpushare.dra import cdi, checkpoint, slices
from kubectl_gpushare.dra.claims import ClaimRejectedError, holding
from kubectl_gpushare.node.gpus import GpuDevice
from kubectl_gpushare.node.health import GpuState

UID = "0b6ef1a3-3c5f-4ad6-9d0b-5f1f0e8c9a10"
GIB = 1 << 30


def state(index: int, gib: float = 16, healthy: bool = True, name: str = "NVIDIA L4") -> GpuState:
    return GpuState(GpuDevice(index, f"GPU-{index}", name, int(gib * GIB), index), healthy)


def claim(*results: dict[str, Any], uid: str = UID) -> dra_objects.ResourceClaim:
    return dra_objects.decode_claim({"metadata": {"name": "c", "namespace": "ns", "uid": uid},
                                     "status": {"allocation": {"devices": {"results": list(results)}}}})


def result(device: str = "gpu-0", memory: str | None = "4Gi") -> dict[str, Any]:
    found: dict[str, Any] = {"request": "gpu", "driver": "gpu-mem.kubectl-gpushare.io", "pool": "n1", "device": device}
    if memory is not None:
        found["consumedCapacity"] = {"memory": memory}
    return found


def published(*states: GpuState, unit: str = "GiB") -> dict[str, slices.PublishedGpu]:
    return {gpu.device: gpu for gpu in slices.published(states, unit, "remove")}


def test_memory_is_rounded_down_to_whole_units_as_the_device_plugin_counts_it() -> None:
    (gpu,) = slices.devices([state(0, gib=79.6)], "GiB", "remove")
    assert gpu.capacity["memory"].value == "79Gi"
    (gpu,) = slices.devices([state(0, gib=79.6)], "MiB", "remove")
    assert gpu.capacity["memory"].value == "81510Mi"


def test_a_one_unit_gpu_has_no_step_as_types_go_requires_min_plus_step_within_capacity() -> None:
    (gpu,) = slices.devices([state(0, gib=1)], "GiB", "remove")
    policy = gpu.capacity["memory"].request_policy
    assert policy is not None and policy.valid_range is not None
    assert (policy.valid_range.min, policy.valid_range.step) == ("1Gi", None)


def test_a_gpu_below_one_unit_and_unhealthy_ones_are_not_published() -> None:
    names = [d.name for d in slices.devices([state(0, gib=0.5), state(1, healthy=False), state(2)], "GiB", "remove")]
    assert names == ["gpu-2"]


def test_long_model_names_are_cut_to_the_attribute_limit() -> None:
    (gpu,) = slices.devices([state(0, name="N" * 300)], "GiB", "remove")
    assert gpu.attributes["model"].string == "N" * 64


def test_dropped_fields_name_the_missing_feature_gates() -> None:
    desired = slices.devices([state(0, healthy=False)], "GiB", "taint")
    stored = (dra_objects.WireDevice(name="gpu-0"),)
    assert slices.dropped_features(desired, stored) == ["DRAConsumableCapacity", "DRADeviceTaints"]
    assert slices.dropped_features(desired, desired) == []


def test_a_result_without_consumed_capacity_holds_the_whole_gpu() -> None:
    held = holding(claim(result(memory=None)), uid=UID, node="n1", gpus=published(state(0)))
    assert (held.memory, held.units) == (16 * GIB, 16)


def test_memory_is_counted_in_units_rounded_up_for_the_environment() -> None:
    held = holding(claim(result(memory="1500Mi")), uid=UID, node="n1", gpus=published(state(0)))
    assert held.units == 2
    assert cdi.container_env(held, "uuid")["NVIDIA_VISIBLE_DEVICES"] == "GPU-0"


def test_two_requests_on_one_gpu_add_up() -> None:
    held = holding(claim(result(memory="4Gi"), result(memory="2Gi")), uid=UID, node="n1", gpus=published(state(0)))
    assert held.units == 6 and len(held.devices) == 2


@pytest.mark.parametrize("memory", ["4.5", "1e400", "NaN", "4Gi ", "0x10"])
def test_odd_quantities_are_refused_or_read_exactly(memory: str) -> None:
    try:
        held = holding(claim(result(memory=memory)), uid=UID, node="n1", gpus=published(state(0)))
    except ClaimRejectedError as exc:
        assert "on gpu-0" in exc.message
    else:
        assert 0 < held.memory <= 16 * GIB


@pytest.mark.parametrize("uid", ["../x", "", "0B6EF1A3-3C5F-4AD6-9D0B-5F1F0E8C9A10", UID + "/..", UID[:-1]])
def test_cdi_file_names_come_only_from_uuids(uid: str) -> None:
    with pytest.raises(cdi.InvalidClaimUidError):
        cdi.spec_name(uid)


def test_cdi_file_name_is_the_transient_spec_name() -> None:
    assert cdi.spec_name(UID) == f"k8s.gpu-mem.kubectl-gpushare.io-claim_{UID}.json"


def _prepared(gpu: int = 0, memory: int = 4 * GIB) -> checkpoint.PreparedClaim:
    return checkpoint.PreparedClaim(
        namespace="ns", name="c", pool="n1", gpu=gpu, gpu_uuid="GPU-0", memory_bytes=memory, cdi_ids=("x",),
        devices=(checkpoint.PreparedDevice("gpu", "gpu-0", memory, "s"),), env={})


def test_the_checkpoint_round_trips_with_upstream_style_names(tmp_path: Path) -> None:
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.save(checkpoint.Checkpoint("n1", {UID: _prepared()}))
    saved = json.loads((tmp_path / "checkpoint.json").read_text())
    assert saved["apiVersion"] == "gpushare.kubectl-gpushare.io/v1alpha1" and saved["kind"] == "DRAClaimCheckpoint"
    assert saved["claims"][UID]["devices"][0]["shareID"] == "s"
    assert file.load().claims == {UID: _prepared()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.journal", "checkpoint.json"]
    assert (tmp_path / "checkpoint.journal").read_bytes() == b""


OTHER = "11111111-2222-4333-8444-555555555555"


def test_changes_are_journal_lines_folded_into_the_document_at_the_next_start(tmp_path: Path) -> None:
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.load()
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared()}), prepared={UID: _prepared()})  # no journal yet
    document = (tmp_path / "checkpoint.json").read_bytes()
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared(), OTHER: _prepared(1)}), prepared={OTHER: _prepared(1)})
    file.record(checkpoint.Checkpoint("n1", {OTHER: _prepared(1)}), unprepared=[UID])
    assert (file.saves, file.records) == (1, 2)
    assert (tmp_path / "checkpoint.json").read_bytes() == document, "a change does not rewrite the document"
    lines = (tmp_path / "checkpoint.journal").read_bytes().splitlines()
    assert [sorted(json.loads(line)) for line in lines] == [["prepared"], ["unprepared"]]
    assert json.loads(lines[1]) == {"unprepared": [UID]}
    again = checkpoint.CheckpointFile(str(tmp_path), "n1")
    assert again.load().claims == {OTHER: _prepared(1)}
    assert json.loads((tmp_path / "checkpoint.json").read_text())["claims"].keys() == {OTHER}
    assert (tmp_path / "checkpoint.journal").read_bytes() == b""


def test_replaying_a_journal_the_document_already_holds_changes_nothing(tmp_path: Path) -> None:
    # a crash after the document was rewritten and before the journal was emptied
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.save(checkpoint.Checkpoint("n1", {}))
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared()}), prepared={UID: _prepared()})
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared(), OTHER: _prepared()}), prepared={OTHER: _prepared()})
    file.record(checkpoint.Checkpoint("n1", {OTHER: _prepared()}), unprepared=[UID])
    journal = (tmp_path / "checkpoint.journal").read_bytes()
    file.save(checkpoint.Checkpoint("n1", {OTHER: _prepared()}))
    (tmp_path / "checkpoint.journal").write_bytes(journal)
    assert checkpoint.CheckpointFile(str(tmp_path), "n1").load().claims == {OTHER: _prepared()}


def test_a_torn_last_line_is_dropped_and_the_lines_before_it_kept(tmp_path: Path) -> None:
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.save(checkpoint.Checkpoint("n1", {}))
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared()}), prepared={UID: _prepared()})
    with open(tmp_path / "checkpoint.journal", "ab") as journal:
        journal.write(checkpoint.encode(checkpoint.Checkpoint("n1", {OTHER: _prepared()}))[:40])
    assert checkpoint.CheckpointFile(str(tmp_path), "n1").load().claims == {UID: _prepared()}
    assert not [p for p in tmp_path.iterdir() if "unreadable" in p.name]


@pytest.mark.parametrize("bad", [b"{", b'{"prepared": 5}', b"[" * 10000, b'{"prepared":{"../x":{}}}'])
def test_an_unreadable_journal_line_ends_the_journal_which_is_moved_aside(tmp_path: Path, bad: bytes) -> None:
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.save(checkpoint.Checkpoint("n1", {}))
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared()}), prepared={UID: _prepared()})
    good = json.dumps({"prepared": {OTHER: json.loads(checkpoint.encode(checkpoint.Checkpoint("n1", {
        OTHER: _prepared()})))["claims"][OTHER]}}).encode()
    with open(tmp_path / "checkpoint.journal", "ab") as journal:
        journal.write(bad + b"\n" + good + b"\n")
    assert checkpoint.CheckpointFile(str(tmp_path), "n1").load().claims == {UID: _prepared()}
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("checkpoint.journal.unreadable-")]
    assert aside.read_bytes().endswith(bad + b"\n" + good + b"\n")


def test_journals_moved_aside_within_one_second_are_all_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In a rolling update each instance re-reads the journal at every call: two unreadable ones can
    # be moved aside within one second, and the second must not replace the first.
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.0)  # one second for all of them
    writer, reader = checkpoint.CheckpointFile(str(tmp_path), "n1"), checkpoint.CheckpointFile(str(tmp_path), "n1")
    writer.save(checkpoint.Checkpoint("n1", {}))
    reader.load()
    bad = [b'{"prepared": 5}\n', b'{"prepared": 6}\n', b'{"prepared": 7}\n']
    for line in bad:
        with open(tmp_path / "checkpoint.journal", "ab") as journal:
            journal.write(line)
        assert reader.reload().claims == {}
    aside = sorted(p for p in tmp_path.iterdir() if p.name.startswith("checkpoint.journal.unreadable-"))
    assert sorted(p.read_bytes() for p in aside) == sorted(bad), "each one kept, none overwritten"


def test_a_failed_append_leaves_the_journal_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.save(checkpoint.Checkpoint("n1", {}))
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared()}), prepared={UID: _prepared()})
    before = (tmp_path / "checkpoint.journal").read_bytes()

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)  # the disk, not our code, fails
    with pytest.raises(OSError):
        file.record(checkpoint.Checkpoint("n1", {UID: _prepared(), OTHER: _prepared()}), prepared={OTHER: _prepared()})
    monkeypatch.undo()
    assert (tmp_path / "checkpoint.journal").read_bytes() == before
    file.record(checkpoint.Checkpoint("n1", {}), unprepared=[UID])
    assert checkpoint.CheckpointFile(str(tmp_path), "n1").load().claims == {}


def test_a_journal_deleted_behind_our_back_makes_the_next_change_rewrite_the_document(tmp_path: Path) -> None:
    file = checkpoint.CheckpointFile(str(tmp_path), "n1")
    file.save(checkpoint.Checkpoint("n1", {}))
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared()}), prepared={UID: _prepared()})
    os.unlink(tmp_path / "checkpoint.journal")
    file.record(checkpoint.Checkpoint("n1", {UID: _prepared(), OTHER: _prepared()}), prepared={OTHER: _prepared()})
    assert file.saves == 2
    assert checkpoint.CheckpointFile(str(tmp_path), "n1").load().claims == {UID: _prepared(), OTHER: _prepared()}


@pytest.mark.parametrize("text", [
    b"{", b"[]", b'{"node":"n1","apiVersion":"v9","kind":"DRAClaimCheckpoint"}',
    b'{"node":"n2","apiVersion":"gpushare.kubectl-gpushare.io/v1alpha1","kind":"DRAClaimCheckpoint"}',
    b"[" * 10000,
])
def test_an_unreadable_checkpoint_is_moved_aside_never_overwritten(tmp_path: Path, text: bytes) -> None:
    (tmp_path / "checkpoint.json").write_bytes(text)
    assert checkpoint.CheckpointFile(str(tmp_path), "n1").load().claims == {}
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("checkpoint.json.unreadable-")]
    assert aside.read_bytes() == text
    assert not os.path.exists(tmp_path / "checkpoint.json")


@pytest.mark.parametrize("entry", [("../etc", _prepared()), (UID, _prepared(gpu=64)), (UID, _prepared(memory=-1))])
def test_out_of_bounds_entries_are_dropped(tmp_path: Path, entry: tuple[str, checkpoint.PreparedClaim]) -> None:
    good = "11111111-2222-4333-8444-555555555555"
    data = checkpoint.encode(checkpoint.Checkpoint("n1", {entry[0]: entry[1], good: _prepared()}))
    assert list(checkpoint.decode(data, "n1").claims) == [good]


@pytest.mark.parametrize(("memory", "message"), [
    ("-4Gi", "consumed memory -4Gi on gpu-0 is outside (0, 16Gi]"),
    ("lots", "consumed memory 'lots' on gpu-0 is not a quantity"),
    ("9" * 60 + "Ei", "on gpu-0 is not a quantity"),
    ("1Pi", "consumed memory 1Pi on gpu-0 is outside (0, 16Gi]"),
    ("0", "consumed memory 0 on gpu-0 is outside (0, 16Gi]"),
])
def test_memory_the_claim_reader_refuses_is_named_as_written(memory: str, message: str) -> None:
    with pytest.raises(ClaimRejectedError) as caught:
        holding(claim(result(memory=memory)), uid=UID, node="n1", gpus=published(state(0)))
    assert message in caught.value.message


def test_another_unreadable_capacity_of_our_result_refuses_the_claim() -> None:
    bad = {**result(), "consumedCapacity": {"memory": "4Gi", "other": "-1"}}
    with pytest.raises(ClaimRejectedError) as caught:
        holding(claim(bad), uid=UID, node="n1", gpus=published(state(0)))
    assert caught.value.message == "consumed capacity on gpu-0 cannot be read: quantity '-1' is negative"
