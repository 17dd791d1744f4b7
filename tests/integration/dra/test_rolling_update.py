"""A rolling update with maxSurge: two driver instances on one node, each on sockets named after its pod.

kubelet (the stand-in, as kubelet 1.33+) keeps both registered and calls the newest, falling back to
the older when the newest goes; either instance may get any call, so a claim one prepared is known to
the other, is prepared once whoever is asked and however the calls interleave, and survives the old
instance being killed. A pod UID that is not a UUID never reaches a path: one line, exit 2.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from dra_helpers import NODE, Claims, Dirs, RunningDriver, driver_command, saved_claims
from kubectl_steps import reaped
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra.checkpoint import Checkpoint, CheckpointFile, PreparedClaim, PreparedDevice
from kubectl_gpushare.dra.daemon import Config
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.node.sockets import CHANNEL_OPTIONS, MAX_SOCKET_PATH, target
from kubectl_gpushare.sandbox.builders import namespace_object, node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
OLD = "0b0f6e1c-0000-4000-8000-000000000001"
NEW = "0b0f6e1c-0000-4000-8000-000000000002"


def _sockets(dirs: Dirs, uid: str) -> tuple[str, str]:
    return (os.path.join(dirs.registration, f"{protocol.DRA_DRIVER}-{uid}-reg.sock"),
            os.path.join(dirs.plugin, f"dra-{uid}.sock"))


class Instance:
    """One driver instance's DRA socket, called directly over gRPC (as kubelet calls whichever it picked)."""

    def __init__(self, dirs: Dirs, uid: str) -> None:
        self.channel = grpc.insecure_channel(target(_sockets(dirs, uid)[1]), options=CHANNEL_OPTIONS)
        self.stub = v1_grpc.DRAPluginStub(self.channel)

    def prepare(self, *made: Any) -> dict[str, Any]:
        request = dra_v1_pb2.NodePrepareResourcesRequest(claims=_refs(made))
        return dict(self.stub.NodePrepareResources(request, timeout=20).claims)

    def unprepare(self, *made: Any) -> dict[str, Any]:
        request = dra_v1_pb2.NodeUnprepareResourcesRequest(claims=_refs(made))
        return dict(self.stub.NodeUnprepareResources(request, timeout=20).claims)


def _refs(made: tuple[Any, ...]) -> list[dra_v1_pb2.Claim]:
    """The claims as kubelet names them in a request."""
    return [dra_v1_pb2.Claim(namespace="default", name=c.metadata.name, uid=c.metadata.uid) for c in made]


def _reads(*running: RunningDriver) -> int:
    """The claims these instances read (and prepared), together."""
    return sum(r.driver.preparer.reads for r in running)


def _cdi_ids(answer: Any) -> list[str]:
    assert not answer.error, answer.error
    return [cdi for device in answer.devices for cdi in device.cdi_device_ids]


def _two(start_driver, kubelet: KubeletSim, dirs: Dirs) -> tuple[RunningDriver, RunningDriver]:
    old = start_driver(pod_uid=OLD)
    assert kubelet.wait_registered(endpoint=os.path.abspath(_sockets(dirs, OLD)[1]), timeout=20) is not None
    new = start_driver(pod_uid=NEW)
    assert kubelet.wait_registered(endpoint=os.path.abspath(_sockets(dirs, NEW)[1]), timeout=20) is not None
    _wait_called(kubelet, dirs, NEW)
    return old, new


def _two_called_directly(
    start_driver, kubelet: KubeletSim, dirs: Dirs
) -> tuple[tuple[RunningDriver, RunningDriver], list[Instance]]:
    """Both instances running (`_two`), and each one's DRA socket called directly, the old first."""
    return _two(start_driver, kubelet, dirs), [Instance(dirs, OLD), Instance(dirs, NEW)]


def _wait_called(kubelet: KubeletSim, dirs: Dirs, uid: str) -> None:
    """Until kubelet calls the instance of ``uid`` (registered, and its connection up)."""
    endpoint = os.path.abspath(_sockets(dirs, uid)[1])
    wait_for(lambda: getattr(kubelet.plugin(), "endpoint", None) == endpoint, what=f"kubelet calling {uid}")


def test_each_instance_serves_sockets_of_its_own_and_kubelet_calls_the_newest(
    start_driver, kubelet: KubeletSim, dirs: Dirs
) -> None:
    _two(start_driver, kubelet, dirs)
    assert [p.endpoint for p in kubelet.plugins()] == [os.path.abspath(_sockets(dirs, uid)[1]) for uid in (OLD, NEW)]
    assert kubelet.plugin().endpoint == os.path.abspath(_sockets(dirs, NEW)[1])
    assert sorted(os.listdir(dirs.registration)) == sorted(os.path.basename(_sockets(dirs, u)[0]) for u in (OLD, NEW))
    assert not os.path.exists(os.path.join(dirs.plugin, protocol.DRA_PLUGIN_SOCKET)), "no fixed name beside them"
    assert os.path.exists(os.path.join(dirs.plugin, "serialize.lock"))


def test_the_default_registration_socket_with_a_pod_uid_fits_a_unix_socket_path() -> None:
    cfg = Config(node_name=NODE, pod_uid=OLD)
    assert len(os.fsencode(cfg.registration_socket)) == MAX_SOCKET_PATH, "107 bytes: the limit, exactly"
    assert cfg.plugin_socket == f"{protocol.DRA_PLUGIN_DIR}/dra-{OLD}.sock"
    with pytest.raises(ValueError, match="is not a UUID"):
        Config(node_name=NODE, pod_uid="../x")


def test_without_a_pod_uid_the_fixed_names_are_served(start_driver, kubelet: KubeletSim, dirs: Dirs) -> None:
    start_driver()
    assert kubelet.wait_registered(timeout=20).endpoint == os.path.abspath(os.path.join(dirs.plugin, "dra.sock"))
    assert os.listdir(dirs.registration) == [protocol.DRA_REGISTRATION_SOCKET]
    assert not os.path.exists(os.path.join(dirs.plugin, "serialize.lock")), "one instance: no cross-instance lock"


def test_claims_prepared_by_either_instance_are_known_to_the_other(
    start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    (old, new), instances = _two_called_directly(start_driver, kubelet, dirs)
    made = claims.on_both_gpus(6, "1Gi")
    first = {c.metadata.uid: _cdi_ids(instances[i % 2].prepare(c)[c.metadata.uid]) for i, c in enumerate(made)}
    reads = _reads(old, new)
    assert reads == 6
    for i, claim in enumerate(made):  # asked again of the other instance: answered from the shared record
        assert _cdi_ids(instances[(i + 1) % 2].prepare(claim)[claim.metadata.uid]) == first[claim.metadata.uid]
    assert _reads(old, new) == reads, "no second read, no second preparation"
    assert set(saved_claims(dirs.plugin)) == set(first)
    for i, claim in enumerate(made[:3]):  # unprepared by the instance that did not prepare it
        assert instances[(i + 1) % 2].unprepare(claim)[claim.metadata.uid].error == ""
        assert not dirs.cdi_spec(claim.metadata.uid).exists()
    assert set(saved_claims(dirs.plugin)) == {c.metadata.uid for c in made[3:]}
    assert set(old.driver.preparer.prepared()) == set(new.driver.preparer.prepared()) == set(saved_claims(dirs.plugin))


def test_concurrent_prepares_on_both_instances_land_once_each(
    start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    (old, new), instances = _two_called_directly(start_driver, kubelet, dirs)
    made = claims.on_both_gpus(8, "1Gi")
    calls = [(instance, claim) for claim in made for instance in instances] * 2  # each claim 4 times, both sides
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda call: call[0].prepare(call[1]), calls))
    ids: dict[str, set[tuple[str, ...]]] = {}
    for (_, claim), answer in zip(calls, answers, strict=True):
        ids.setdefault(claim.metadata.uid, set()).add(tuple(_cdi_ids(answer[claim.metadata.uid])))
    assert all(len(seen) == 1 for seen in ids.values()), "one CDI id per claim, whoever answered"
    assert _reads(old, new) == 8, "each claim read and prepared once"
    assert set(saved_claims(dirs.plugin)) == set(ids)
    specs = {uid: json.loads(dirs.cdi_spec(uid).read_text()) for uid in ids}
    assert all(spec["devices"][0]["name"].startswith(uid) for uid, spec in specs.items())


def test_prepares_during_the_hand_over_land_once_and_the_new_instance_unprepares_them(
    start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    old = start_driver(pod_uid=OLD)
    assert kubelet.wait_registered(timeout=20) is not None
    pods = [claims.pod(f"p{i}", {"gpu": f"c{i}"}) for i in range(16)]
    made = [claims.claim(f"c{i}", device=f"gpu-{i % 2}", memory="1Gi", pods=[pod]) for i, pod in enumerate(pods)]
    prepared: list[str] = []
    errors: list[str] = []
    rolling = threading.Event()

    def kubelet_syncs_pods() -> None:  # pods start one after another while the DaemonSet rolls
        for number, pod in enumerate(pods[:12]):
            if number == 4:
                rolling.wait(30)
            try:
                prepared.extend(kubelet.prepare(pod))
            except Exception as exc:  # noqa: BLE001 - the test reports it
                errors.append(str(exc))

    syncing = threading.Thread(target=kubelet_syncs_pods, daemon=True)
    syncing.start()
    wait_for(lambda: len(prepared) == 4, what="the first pods prepared by the old instance")
    rolling.set()  # the next pods are prepared while the new instance starts and the old one stops
    new = start_driver(pod_uid=NEW)
    assert kubelet.wait_registered(endpoint=os.path.abspath(_sockets(dirs, NEW)[1]), timeout=20) is not None
    old.shutdown()  # SIGTERM: it removes its own sockets and kubelet deregisters it
    wait_for(lambda: len(kubelet.plugins()) == 1, what="the old instance deregistered")
    syncing.join(60)
    for pod in pods[12:]:  # after the hand-over: the new instance alone
        prepared.extend(kubelet.prepare(pod))
    assert not errors and sorted(prepared) == sorted(c.metadata.uid for c in made)
    assert _reads(old, new) == 16, "each claim prepared once"
    assert not any(os.path.exists(path) for path in _sockets(dirs, OLD)), "the old instance removed its sockets"
    assert set(saved_claims(dirs.plugin)) == set(prepared)
    for pod in pods:  # the new instance unprepares what either prepared
        kubelet.unprepare(pod)
    assert saved_claims(dirs.plugin) == {} and not any(dirs.cdi_spec(uid).exists() for uid in prepared)


def test_kubelet_falls_back_to_the_older_instance_when_the_newest_goes(
    start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    old, new = _two(start_driver, kubelet, dirs)
    first = claims.pod("p1", {"gpu": "c1"})
    uid = claims.claim("c1", memory="1Gi", pods=[first]).metadata.uid
    assert list(kubelet.prepare(first)) == [uid] and new.driver.preparer.reads == 1
    new.shutdown()  # the new pod failed: its sockets go, the old instance is called again
    wait_for(lambda: [p.endpoint for p in kubelet.plugins()] == [os.path.abspath(_sockets(dirs, OLD)[1])],
             what="only the old instance registered")
    second = claims.pod("p2", {"gpu": "c2"})
    other = claims.claim("c2", device="gpu-1", memory="1Gi", pods=[second]).metadata.uid
    assert list(kubelet.prepare(second)) == [other] and old.driver.preparer.reads == 1
    assert kubelet.unprepare(first) == [uid], "what the new instance prepared, the old one unprepares"
    assert set(saved_claims(dirs.plugin)) == {other} and not dirs.cdi_spec(uid).exists()


def _command(dirs: Dirs, kubeconfig: Path, *extra: str) -> list[str]:
    return driver_command(dirs, kubeconfig, "--node-name", NODE, *extra)


def test_killing_the_old_instance_mid_way_loses_nothing(
    sandbox: Sandbox, kubeconfig: Path, start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    made = claims.on_both_gpus(24, "512Mi")
    process = subprocess.Popen(_command(dirs, kubeconfig, "--pod-uid", OLD), text=True, stderr=subprocess.DEVNULL)
    with reaped(process):
        assert kubelet.wait_registered(endpoint=os.path.abspath(_sockets(dirs, OLD)[1]), timeout=30) is not None
        new = start_driver(pod_uid=NEW)
        assert kubelet.wait_registered(endpoint=os.path.abspath(_sockets(dirs, NEW)[1]), timeout=20) is not None
        old = Instance(dirs, OLD)
        answered: list[str] = []

        def old_prepares_one_by_one() -> None:  # calls kubelet sent the old instance before the new one registered
            for claim in made:
                try:
                    answer = old.prepare(claim)[claim.metadata.uid]
                except grpc.RpcError:
                    return  # killed
                _cdi_ids(answer)
                answered.append(claim.metadata.uid)

        calls = threading.Thread(target=old_prepares_one_by_one, daemon=True)
        calls.start()
        wait_for(lambda: len(answered) >= 6, what="a few preparations answered by the old instance")
        process.send_signal(signal.SIGKILL)  # no chance to remove its sockets or finish a call
        process.wait(10)
        calls.join(15)
    assert all(os.path.exists(path) for path in _sockets(dirs, OLD)), "a killed instance leaves its sockets"
    before = new.driver.preparer.reads
    answers = Instance(dirs, NEW).prepare(*made)  # kubelet retries every pod on the instance left
    assert {uid: _cdi_ids(answer) for uid, answer in answers.items()} == {
        c.metadata.uid: [f"{protocol.DRA_CDI_KIND}={c.metadata.uid}-gpu-{i % 2}"] for i, c in enumerate(made)}
    assert new.driver.preparer.reads - before <= len(made) - len(answered), "what the old one answered is known"
    saved = saved_claims(dirs.plugin)
    assert set(saved) == {c.metadata.uid for c in made}
    for uid in saved:
        assert json.loads(dirs.cdi_spec(uid).read_text())["devices"][0]["name"] == f"{uid}-gpu-{saved[uid]['gpu']}"
    assert all(not answer.error for answer in Instance(dirs, NEW).unprepare(*made).values())
    assert saved_claims(dirs.plugin) == {}


def _record(name: str) -> PreparedClaim:
    return PreparedClaim(namespace="default", name=name, pool=NODE, gpu=0, gpu_uuid="GPU-0", memory_bytes=1 << 30,
                         cdi_ids=("x",), devices=(PreparedDevice("gpu", "gpu-0", 1 << 30, "s"),), env={})


def test_each_instance_reads_what_the_other_appended_unprepared_or_compacted(tmp_path: Path) -> None:
    first, second = CheckpointFile(str(tmp_path), NODE), CheckpointFile(str(tmp_path), NODE)
    first.save(Checkpoint(NODE))
    first.load()
    second.load()
    state: dict[str, PreparedClaim] = {}
    for step in range(40):
        writer, reader = (first, second) if step % 3 else (second, first)
        assert writer.reload().claims == state, f"step {step}: the writer sees every change before its own"
        uid = f"00000000-0000-4000-8000-{step:012d}"
        if step % 5 == 4:  # an unprepare of an earlier claim
            gone = sorted(state)[0]
            del state[gone]
            writer.record(Checkpoint(NODE, dict(state)), unprepared=[gone])
        elif step % 7 == 6:  # a compaction: the document replaced, the journal emptied in place
            state[uid] = _record(f"c{step}")
            writer.save(Checkpoint(NODE, dict(state)))
        else:
            state[uid] = _record(f"c{step}")
            writer.record(Checkpoint(NODE, dict(state)), prepared={uid: state[uid]})
        assert reader.reload().claims == state, f"step {step}: the other instance sees it"
    assert CheckpointFile(str(tmp_path), NODE).load().claims == state


def test_a_killed_newest_instance_is_passed_over_for_the_one_that_answers(
    sandbox: Sandbox, kubeconfig: Path, start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    old = start_driver(pod_uid=OLD)
    _wait_called(kubelet, dirs, OLD)
    process = subprocess.Popen(_command(dirs, kubeconfig, "--pod-uid", NEW), text=True, stderr=subprocess.DEVNULL)
    with reaped(process):
        _wait_called(kubelet, dirs, NEW)
        first = claims.pod("p1", {"gpu": "c1"})
        uid = claims.claim("c1", memory="1Gi", pods=[first]).metadata.uid
        assert list(kubelet.prepare(first)) == [uid] and old.driver.preparer.reads == 0, "the new pod prepared it"
        process.send_signal(signal.SIGKILL)  # its sockets stay: kubelet does not deregister it
        process.wait(10)
    _wait_called(kubelet, dirs, OLD)
    assert len(kubelet.plugins()) == 2, "both still registered"
    second = claims.pod("p2", {"gpu": "c2"})
    other = claims.claim("c2", device="gpu-1", memory="1Gi", pods=[second]).metadata.uid
    assert list(kubelet.prepare(second)) == [other] and old.driver.preparer.reads == 1
    assert kubelet.unprepare(first) == [uid] and set(saved_claims(dirs.plugin)) == {other}


def test_a_torn_append_of_a_killed_instance_is_folded_before_the_other_appends(tmp_path: Path) -> None:
    uid_a, uid_b = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
    claim = _record

    killed, survivor = CheckpointFile(str(tmp_path), NODE), CheckpointFile(str(tmp_path), NODE)
    killed.save(Checkpoint(NODE))  # both instances hold the journal open, as after their first change
    killed.load()
    survivor.load()
    killed.record(Checkpoint(NODE, {uid_a: claim("a")}), prepared={uid_a: claim("a")})
    with open(tmp_path / "checkpoint.journal", "ab") as journal:  # the append the kill cut short, never answered
        journal.write(b'{"prepared":{"00000000-0000-4000-8000-0000000')
    assert set(survivor.reload().claims) == {uid_a}
    survivor.record(Checkpoint(NODE, {uid_a: claim("a"), uid_b: claim("b")}), prepared={uid_b: claim("b")})
    assert set(CheckpointFile(str(tmp_path), NODE).reload().claims) == {uid_a, uid_b}
    assert not [p for p in os.listdir(tmp_path) if "unreadable" in p], "nothing moved aside, nothing lost"


def test_the_files_count_as_changed_only_after_the_other_instance_wrote_them(tmp_path: Path) -> None:
    # What lets an instance alone skip the re-read at each call: its own writes do not count as changes.
    uid_a, uid_b = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
    mine, other = CheckpointFile(str(tmp_path), NODE), CheckpointFile(str(tmp_path), NODE)
    mine.load()
    other.load()
    assert not mine.changed()
    mine.save(Checkpoint(NODE))
    mine.record(Checkpoint(NODE, {uid_a: _record("a")}), prepared={uid_a: _record("a")})
    assert not mine.changed(), "our own save and append"
    assert other.changed()
    assert set(other.reload().claims) == {uid_a} and not other.changed(), "read: nothing new"
    other.record(Checkpoint(NODE, {uid_a: _record("a"), uid_b: _record("b")}), prepared={uid_b: _record("b")})
    assert mine.changed() and not other.changed()
    other.save(Checkpoint(NODE, {uid_b: _record("b")}))  # a compaction by the other
    assert mine.changed() and set(mine.reload().claims) == {uid_b} and not mine.changed()


def test_an_unreadable_line_the_other_instance_appended_is_named_where_the_file_has_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uid_a = "00000000-0000-4000-8000-00000000000a"
    writer, reader = CheckpointFile(str(tmp_path), NODE), CheckpointFile(str(tmp_path), NODE)
    writer.save(Checkpoint(NODE))
    reader.load()
    writer.record(Checkpoint(NODE, {uid_a: _record("a")}), prepared={uid_a: _record("a")})
    assert set(reader.reload().claims) == {uid_a}  # line 1 read: the next reload reads from its end
    journal = tmp_path / "checkpoint.journal"
    size = journal.stat().st_size
    with open(journal, "ab") as handle:
        handle.write(b'{"prepared":{"x":' + b"[" * 100 + b"}}\n")
    with caplog.at_level(logging.ERROR, logger="kubectl_gpushare.dra.checkpoint"):
        assert set(reader.reload().claims) == {uid_a}, "what came before is kept"
    assert [m for m in caplog.messages if f"cannot be read past line 1 after byte {size}: " in m], caplog.messages


@pytest.mark.parametrize("uid", ["../../../etc/cron.d/x", "0B0F6E1C-0000-4000-8000-000000000001", "x" * 5000,
                                 "0b0f6e1c-0000-4000-8000-000000000001/../a"])
def test_a_hostile_pod_uid_is_refused_in_one_line_before_any_path(kubeconfig: Path, dirs: Dirs, uid: str) -> None:
    done = subprocess.run(_command(dirs, kubeconfig, "--pod-uid", uid), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "is not a pod UID" in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr and len(lines[0]) < 400
    assert not os.path.exists(dirs.registration) or os.listdir(dirs.registration) == []
    assert not os.path.exists(dirs.plugin)


def test_the_pod_uid_also_comes_from_the_environment(kubeconfig: Path, dirs: Dirs) -> None:
    env = dict(os.environ, POD_UID="not-a-uid")
    done = subprocess.run(_command(dirs, kubeconfig), capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2 and "'not-a-uid' is not a pod UID" in done.stderr


def test_a_call_that_cannot_get_the_lock_answers_its_error_before_the_deadline(
    start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    start_driver(pod_uid=OLD)
    _wait_called(kubelet, dirs, OLD)
    made = claims.claim("c1", memory="1Gi")
    instance = Instance(dirs, OLD)
    assert _cdi_ids(instance.prepare(made)[made.metadata.uid])
    refs = _refs((made,))
    fd = os.open(os.path.join(dirs.plugin, protocol.DRA_SERIALIZE_LOCK), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the other instance, mid-call (an flock is per open file, even in one process)
        for call, request in ((instance.stub.NodePrepareResources, dra_v1_pb2.NodePrepareResourcesRequest),
                              (instance.stub.NodeUnprepareResources, dra_v1_pb2.NodeUnprepareResourcesRequest)):
            answer = call(request(claims=refs), timeout=3)  # an answer, not DEADLINE_EXCEEDED: kubelet reads why
            assert "held its lock until the call's deadline" in answer.claims[made.metadata.uid].error
    finally:
        os.close(fd)
    assert instance.unprepare(made)[made.metadata.uid].error == "", "once free, kubelet's retry goes through"
    assert saved_claims(dirs.plugin) == {} and not dirs.cdi_spec(made.metadata.uid).exists()


def test_a_checkpoint_that_cannot_be_read_again_fails_the_call_naming_the_checkpoint(
    start_driver, kubelet: KubeletSim, dirs: Dirs, claims: Claims
) -> None:
    start_driver(pod_uid=OLD)
    _wait_called(kubelet, dirs, OLD)
    first, made = claims.claim("c0", memory="1Gi"), claims.claim("c1", memory="1Gi")
    assert _cdi_ids(Instance(dirs, OLD).prepare(first)[first.metadata.uid])  # the checkpoint and its journal
    journal = os.path.join(dirs.plugin, "checkpoint.journal")
    os.replace(journal, journal + ".kept")
    os.mkdir(journal)  # the other instance's change cannot be read: nothing is answered from a stale view
    error = Instance(dirs, OLD).prepare(made)[made.metadata.uid].error
    assert error.startswith(f"cannot read the checkpoint {os.path.join(dirs.plugin, 'checkpoint.json')}: "), error
    assert "lock" not in error and not dirs.cdi_spec(made.metadata.uid).exists()
    os.rmdir(journal)
    os.replace(journal + ".kept", journal)
    assert _cdi_ids(Instance(dirs, OLD).prepare(made)[made.metadata.uid]), "readable again: kubelet's retry prepares"
