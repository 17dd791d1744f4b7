"""The DRA driver on NVML (no ``--fake-gpus``): the machine's GPUs where it has some (``-m gpu``), else the
fake pynvml in NVML's place, through one body (see tests/real_nvml.py).

Every host path the driver uses is under the test's own ``/tmp`` directory (registration and plugin
sockets, the checkpoint, the CDI specs): nothing is written under ``/var/lib/kubelet`` or
``/var/run/cdi``; memory enforcement stays off, so no cgroup is touched.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from dra_helpers import NODE, Claims, Dirs, saved_claims
from real_nvml import NVML_VARIANTS, Nvml, open_nvml, under
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


@pytest.fixture(params=NVML_VARIANTS)
def nvml(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Nvml:
    return open_nvml(request.param, monkeypatch)


def test_the_driver_publishes_and_prepares_the_gpus_nvml_lists(
    nvml: Nvml, start_driver: Any, kubelet: KubeletSim, api: Client, sandbox: Sandbox, dirs: Dirs, claims: Claims
) -> None:
    print(nvml.summary())
    running = start_driver(None, visible_devices="uuid")
    cfg = running.cfg
    assert running.driver is not None and running.driver.backend.name == "nvml"
    assert cfg.enforce_memory == protocol.ENFORCE_OFF
    assert all(under(path, dirs.root) for path in (cfg.registration_dir, cfg.plugin_dir, cfg.cdi_root))

    # the slice: one device per GPU, with NVML's UUID, model and whole GiB
    def one_slice() -> list[Any]:
        found: list[Any] = api.list(types.DRA_SLICES, field_selector=f"spec.nodeName={NODE}")
        return found if len(found) == 1 and len(found[0].spec.devices) == len(nvml.gpus) else []

    published = wait_for(one_slice, timeout=20, what="the node's ResourceSlice with every GPU")[0]
    raw = sandbox.get("resourceslices", None, published.metadata.name)
    assert raw is not None
    devices = raw["spec"]["devices"]
    print(f"{nvml.variant}: slice devices {json.dumps(devices)}")
    assert [(d["name"], d["attributes"]["index"], d["attributes"]["uuid"], d["attributes"]["model"],
             d["capacity"]["memory"]["value"]) for d in devices] == [
        (f"gpu-{gpu.index}", {"int": gpu.index}, {"string": gpu.uuid}, {"string": gpu.name[:64]}, f"{gpu.gib}Gi")
        for gpu in nvml.gpus]
    assert all(d["allowMultipleAllocations"] is True for d in devices)

    # kubelet registers it, then prepares a claim the scheduler put on gpu-0, and unprepares it
    plugin = kubelet.wait_registered(timeout=20)
    assert plugin is not None and plugin.service == "v1.DRAPlugin"
    pod = claims.pod("trainer", {"gpu": "c1"})
    uid = claims.claim("c1", device="gpu-0", memory="1Gi", pods=[pod]).metadata.uid
    assert kubelet.prepare(pod) == {uid: [f"k8s.gpu-mem.kubectl-gpushare.io/claim={uid}-gpu-0"]}
    spec = json.loads(dirs.cdi_spec(uid).read_text())
    print(f"{nvml.variant}: CDI spec {json.dumps(spec)}")
    first = nvml.gpus[0]
    assert spec["devices"] == [{"name": f"{uid}-gpu-0", "containerEdits": {"env": [
        "ALIYUN_COM_GPU_MEM_CONTAINER=1", f"ALIYUN_COM_GPU_MEM_DEV={first.gib}", "ALIYUN_COM_GPU_MEM_IDX=0",
        "ALIYUN_COM_GPU_MEM_POD=1", f"{protocol.ENV_VISIBLE_DEVICES}={first.uuid}"]}}]
    assert uid in saved_claims(cfg.plugin_dir)
    assert kubelet.unprepare(pod) == [uid]
    assert not dirs.cdi_spec(uid).exists()
    assert uid not in saved_claims(cfg.plugin_dir)
    assert not [name for name in os.listdir(cfg.cdi_root) if name.endswith(".tmp")]
    assert running.thread.is_alive() and running.error is None
