"""The whole path on one node: our extender places pods (through the scheduler stand-in), the device
plugin pins each container to the GPU the extender chose, on a node with unequal GPUs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
from kubectl_gpushare.extender.schedsim import ExtenderConfig, HTTPExtender, schedule_one
from kubectl_gpushare.extender.server import Running, ServeConfig, serve
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

NODE = "gpu-node-1"


def test_extender_and_device_plugin_agree_on_unequal_gpus(
    kubelet: KubeletSim, start_plugin, sandbox: Sandbox, kubeconfig: Path, api: Client
) -> None:
    sandbox.load([namespace_object("default"), node_object(NODE, [], ip="10.0.0.1", labels={"gpushare": "true"})])
    plugin = start_plugin("2x16GiB,1x24GiB")
    assert kubelet.wait_registered(1) and kubelet.wait_devices(lambda d: len(d) == 56)
    # What kubelet does with the device list: report it in the node's status.
    capacity, allocatable = kubelet.capacity()
    api.patch_node_status(
        NODE,
        {
            "status": {
                "capacity": {protocol.RESOURCE_MEM: str(capacity)},
                "allocatable": {protocol.RESOURCE_MEM: str(allocatable)},
            }
        },
    )

    def node_ready() -> bool:
        node = sandbox.get("nodes", None, NODE)
        return node is not None and protocol.ANN_NODE_GPUS in node["metadata"].get("annotations", {})

    wait_for(node_ready, what="the plugin's per-GPU annotation on the node")

    stop, ready, running = threading.Event(), threading.Event(), []
    cfg = ServeConfig(kube=load_config(str(kubeconfig)), port=0)
    thread = threading.Thread(target=serve, args=(cfg,), kwargs={"stop": stop, "ready": ready, "running": running})
    thread.start()
    try:
        assert ready.wait(20) and running
        extender: Running = running[0]
        assert extender.cache.synced.wait(20)

        def extender_gpus() -> list[int]:
            view = json.loads(extender.app.handle("GET", f"{cfg.url_prefix}/inspect").body)
            return [dev["totalGPU"] for n in view["nodes"] if n["name"] == NODE for dev in n["devs"]]

        # The extender's node cache has the published per-GPU memory.
        wait_for(lambda: extender_gpus() == [16, 16, 24], what=lambda: f"the extender's GPUs: {extender_gpus()}")
        scheduler = HTTPExtender(ExtenderConfig(url_prefix=f"http://127.0.0.1:{extender.port}{cfg.url_prefix}"))
        envs = {}
        for name, size in (("big", 20), ("small", 10)):
            body = pod_object(name, "default", [size])
            created = api.create(types.PODS, body, "default")
            body["metadata"]["uid"] = created.metadata.uid
            node = sandbox.get("nodes", None, NODE)
            assert schedule_one(scheduler, body, [node]) == NODE
            bound = sandbox.get("pods", "default", name)
            assert bound is not None and bound["metadata"]["annotations"][protocol.ANN_ASSIGNED] == "false"
            # The bind reaches the plugin's watch, as it reaches kubelet's.
            wait_for(lambda: plugin.plugin is not None  # noqa: B023
                     and created.metadata.uid in {p.uid for p in plugin.plugin.cluster.pods()},  # noqa: B023
                     what=f"the plugin to see {name} bound")
            envs[name] = kubelet.allocate_pod(bound)["main"]
            annotations = sandbox.get("pods", "default", name)["metadata"]["annotations"]
            assert annotations[protocol.ANN_ASSIGNED] == "true"
            assert envs[name]["ALIYUN_COM_GPU_MEM_IDX"] == annotations[protocol.ANN_IDX]
            assert envs[name]["NVIDIA_VISIBLE_DEVICES"] == annotations[protocol.ANN_IDX]
        scheduler.close()
    finally:
        stop.set()
        thread.join(20)
    # Only the 24 GiB GPU holds a 20 GiB pod: the extender read the plugin's per-GPU memory.
    assert envs["big"]["ALIYUN_COM_GPU_MEM_IDX"] == "2"
    assert envs["big"]["ALIYUN_COM_GPU_MEM_DEV"] == "24"
    assert envs["small"]["ALIYUN_COM_GPU_MEM_DEV"] == ("24" if envs["small"]["ALIYUN_COM_GPU_MEM_IDX"] == "2" else "16")
    assert plugin.plugin is not None
