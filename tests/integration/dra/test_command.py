"""``kubectl-gpushare serve-dra-driver`` as a process: it registers, prepares, stops on SIGTERM, keeps
what it answered when killed, and refuses a node the device plugin serves with one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import grpc
import pytest
from dra_helpers import NODE, Claims, Dirs, driver_command
from kubectl_steps import reaped
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra.checkpoint import CheckpointFile
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.sockets import dial, target
from kubectl_gpushare.sandbox.builders import namespace_object, node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def test_the_driver_process_serves_kubelet_and_stops_cleanly_on_sigterm(
    sandbox: Sandbox, kubeconfig: Path, dirs: Dirs, api: Client, claims: Claims
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    env = dict(os.environ, NODE_NAME=NODE, GPUSHARE_LOG_FORMAT="json", GPUSHARE_MEMORY_UNIT="MiB")
    with KubeletSim(dirs.registration, api) as kubelet:
        process = subprocess.Popen(driver_command(dirs, kubeconfig), env=env, stderr=subprocess.PIPE, text=True)
        with reaped(process):
            assert kubelet.wait_registered(timeout=30) is not None
            pod = claims.pod("p", {"gpu": "c1"})
            uid = claims.claim("c1", memory="1536Mi", pods=[pod]).metadata.uid
            assert kubelet.prepare(pod) == {uid: [f"k8s.gpu-mem.kubectl-gpushare.io/claim={uid}-gpu-0"]}
            spec = json.loads(dirs.cdi_spec(uid).read_text())
            assert "ALIYUN_COM_GPU_MEM_POD=1536" in spec["devices"][0]["containerEdits"]["env"]
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert not os.path.exists(os.path.join(dirs.registration, "gpu-mem.kubectl-gpushare.io-reg.sock"))
    assert not os.path.exists(os.path.join(dirs.plugin, "dra.sock"))
    assert dirs.cdi_spec(uid).exists(), "prepared claims stay prepared across a driver restart"
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    config = next(line["msg"] for line in lines if line["msg"].startswith("DRA driver configuration: "))
    effective = json.loads(config.split(": ", 1)[1])
    assert effective["node_name"] == NODE and effective["memory_unit"] == "MiB"
    assert effective["kube"] == {"kubeconfig": str(kubeconfig)}
    assert any(line["msg"] == "DRA driver stopped" for line in lines)


def test_a_node_the_device_plugin_serves_is_refused_in_one_line(
    sandbox: Sandbox, kubeconfig: Path, dirs: Dirs
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [16], ip="10.0.0.1")])
    done = subprocess.run(driver_command(dirs, kubeconfig, "--node-name", NODE), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: refusing to start: node {NODE} advertises aliyun.com/gpu-mem=16 (the gpushare "
                      "device plugin runs there); the device plugin and the DRA driver must not sell the same GPUs"]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["checkpoint.json", "checkpoint.journal"])
def test_a_checkpoint_that_cannot_be_opened_is_one_line_and_exit_2(
    sandbox: Sandbox, kubeconfig: Path, dirs: Dirs, name: str
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    (Path(dirs.plugin) / name).mkdir(parents=True)  # EISDIR on open, as EIO or EACCES would be
    done = subprocess.run(driver_command(dirs, kubeconfig, "--node-name", NODE), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: cannot load the checkpoint in {dirs.plugin}: [Errno 21] Is a directory: "
                      f"'{Path(dirs.plugin) / name}'"]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    ((), "--node-name (or NODE_NAME) is required"),
    (("--node-name", "n1,spec.driver!=x"), "'n1,spec.driver!=x' is not a node name"),
    (("--node-name", "n", "--memory-unit", "KiB"), "Invalid value for '--memory-unit'"),
    (("--node-name", "n", "--fake-gpus", "lots"), "invalid --fake-gpus group 'lots'"),
])
def test_bad_flags_are_one_line_and_exit_2(kubeconfig: Path, dirs: Dirs, args: tuple[str, ...], message: str) -> None:
    command = [a for a in driver_command(dirs, kubeconfig) if a not in ("--fake-gpus", "2x16GiB")] + list(args)
    env = {k: v for k, v in os.environ.items() if k != "NODE_NAME"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_killed_driver_kept_every_answered_preparation_with_a_complete_cdi_spec(
    sandbox: Sandbox, kubeconfig: Path, dirs: Dirs, claims: Claims
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    made = claims.on_both_gpus(24, "512Mi")
    socket = os.path.join(dirs.plugin, protocol.DRA_PLUGIN_SOCKET)
    answered: list[str] = []
    process = subprocess.Popen(driver_command(dirs, kubeconfig), env=dict(os.environ, NODE_NAME=NODE), text=True,
                               stderr=subprocess.DEVNULL)
    with reaped(process), grpc.insecure_channel(target(socket)) as channel:
        wait_for(lambda: os.path.exists(socket) and dial(socket, 1.0), what="the driver serving")
        stub = v1_grpc.DRAPluginStub(channel)

        def prepare_one_by_one() -> None:  # as kubelet does, one pod's claim per call
            for claim in made:
                ref = dra_v1_pb2.Claim(namespace="default", name=claim.metadata.name, uid=claim.metadata.uid)
                try:
                    answer = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[ref]),
                                                       timeout=10)
                except grpc.RpcError:
                    return  # killed
                assert not answer.claims[claim.metadata.uid].error
                answered.append(claim.metadata.uid)

        kubelet = threading.Thread(target=prepare_one_by_one, daemon=True)
        kubelet.start()
        wait_for(lambda: len(answered) >= 6, what="a few preparations answered")
        process.kill()  # no chance to tidy up
        process.wait(10)
        kubelet.join(15)
    saved = CheckpointFile(dirs.plugin, NODE).load().claims
    assert set(answered) <= set(saved), "every answered preparation is in the checkpoint"
    for uid in answered:
        spec = json.loads(dirs.cdi_spec(uid).read_text())  # complete: it parses
        assert spec["devices"][0]["name"] == f"{uid}-gpu-{saved[uid].gpu}"
    assert all(name.endswith(".json") or name.endswith(".tmp") for name in os.listdir(dirs.cdi))


def test_a_gpu_too_small_to_publish_is_named_in_the_log(
    sandbox: Sandbox, kubeconfig: Path, dirs: Dirs, api: Client
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", gpushare=False)])
    env = dict(os.environ, NODE_NAME=NODE)
    command = [a if a != "2x16GiB" else "1x16GiB,1x512MiB" for a in driver_command(dirs, kubeconfig)]
    with KubeletSim(dirs.registration, api) as kubelet:
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        with reaped(process):
            assert kubelet.wait_registered(timeout=30) is not None
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert "GPU 1 (" in stderr and "is not published: an index past 63 or less than one GiB of memory" in stderr
    assert "GPU 0 (" not in stderr.split("is not published")[0].rsplit("\n", 1)[-1]
