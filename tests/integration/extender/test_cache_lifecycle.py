"""The extender cache's lifecycle against the sandbox: a stopped cache leaves no informer running."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from waiting import wait_for

from kubectl_gpushare.extender.cache import ExtenderCache
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def pod_informers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "extender-pods" and t.is_alive()]


@pytest.mark.parametrize("concurrent", [False, True], ids=["after-stop", "during-stop"])
def test_catch_up_racing_stop_leaves_no_pod_informer_running(
    sandbox: Sandbox, kubeconfig: Path, concurrent: bool
) -> None:
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1"), pod_object("p", "default", [2], node="gpu-1", gpu=0,
                                                                         gpu_memory=16)])
    before = set(pod_informers())
    client = Client(load_config(str(kubeconfig)), component="test")
    cache = ExtenderCache(client, ExtenderState()).start()
    try:
        assert cache.synced.wait(15)
        if concurrent:  # the leader's catch-up thread re-lists (slowly) while the daemon shuts down
            slow = sandbox.inject("GET", r"^/api/v1/pods\?(?!.*watch=)", latency=1.0, times=1)
            catching_up = threading.Thread(target=cache.catch_up, kwargs={"timeout": 10.0})
            catching_up.start()
            wait_for(lambda: slow.hits >= 1, what="the catch-up's list to be under way")
            cache.stop()
            catching_up.join(15)
            assert not catching_up.is_alive()
        else:
            cache.stop()
            cache.catch_up(timeout=5.0)  # a catch-up that arrives after stop starts nothing
        wait_for(lambda: not set(pod_informers()) - before, 10, "every pod informer to stop after stop()")
    finally:
        cache.stop()
        client.close()
