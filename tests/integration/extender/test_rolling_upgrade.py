"""Rolling upgrade under load: two leader-elected replicas replaced one after the other while a client binds.

Each replica is stopped (gracefully: the Lease is released; or as a crash: it is not) and a new one
started in its place, while a client creates pods and binds each through whichever replica is ready
(the Service). A monitor reads the API objects throughout: no GPU over its memory, ever. The longest
gap without a successful bind is bounded: within the renew deadline for a graceful handover, within
the lease duration for a crash (with room for a loaded machine). bench/bench_rolling.py measures the
same with the default timings and separate processes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.schedsim import ExtenderCallError, schedule_one
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

FAST = {"leader_elect": True, "lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.25,
        "lease_namespace": "kube-system"}
GPUS = [8, 8]


def over_committed(sandbox: Sandbox) -> list[str]:
    used: Counter[tuple[str, str]] = Counter()
    for pod in sandbox.objects("pods"):
        ann = pod["metadata"].get("annotations") or {}
        if pod["spec"].get("nodeName") and protocol.ANN_IDX in ann:
            used[(pod["spec"]["nodeName"], ann[protocol.ANN_IDX])] += int(ann[protocol.ANN_POD])
    return [f"{key}: {amount}" for key, amount in used.items() if amount > GPUS[int(key[1])]]


def test_replicas_replaced_one_after_the_other_while_binding_never_overcommit(
    sandbox: Sandbox, kubeconfig: Path, extender_factory  # type: ignore[no-untyped-def]
) -> None:
    api = Client(load_config(str(kubeconfig)), component="test")
    nodes = [node_object(f"gpu-{i}", GPUS, ip=f"10.0.0.{i}") for i in range(3)]  # 48 units, pods of 1..3
    sandbox.load(nodes)
    replicas = [extender_factory(identity="a-1", **FAST), extender_factory(identity="b-1", release_lease=False, **FAST)]

    def ready(ext: Any) -> bool:
        return bool(ext.thread.is_alive() and ext.running.app.handle("GET", "/readyz").status == 200)

    stop = threading.Event()
    binds: list[float] = []
    over: list[str] = []
    outcomes: Counter[str] = Counter()

    def client() -> None:
        count = 0
        while not stop.is_set():
            count += 1
            if count > 20:  # the pod bound 20 binds ago completes: the cluster never fills
                api.delete(types.PODS, f"job-{count - 20:04d}", "default")
            name = f"job-{count:04d}"
            sandbox.load([pod_object(name, "default", [1 + count % 3])])
            while not stop.is_set():
                target = next((r for r in list(replicas) if ready(r)), None)
                pod = sandbox.get("pods", "default", name)
                assert pod is not None
                if pod["spec"].get("nodeName"):
                    outcomes["landed"] += 1
                    break
                if target is None:
                    time.sleep(0.02)  # the client's retry pace while no replica is ready (the gap measured)
                    continue
                try:
                    schedule_one(target.scheduler(http_timeout=30), pod, nodes)
                    outcomes["bound"] += 1
                    break
                except ExtenderCallError as exc:
                    outcomes["nodes are available" in str(exc) and "full" or "retried"] += 1
                    if "nodes are available" in str(exc):
                        break  # the cluster is full: the next pod
                    time.sleep(0.02)  # the client's retry pace
                except OSError:
                    outcomes["retried"] += 1
                    time.sleep(0.02)  # the client's retry pace
            if outcomes["full"]:
                return
            binds.append(time.monotonic())

    def monitor() -> None:
        while not stop.wait(0.1):
            over.extend(over_committed(sandbox))

    threads = [threading.Thread(target=client), threading.Thread(target=monitor)]
    wait_for(lambda: any(ready(r) for r in replicas), 20, "a leader")
    for t in threads:
        t.start()
    gaps: dict[str, float] = {}
    try:
        for index, (label, release) in enumerate((("graceful", True), ("crash", False))):
            bound = len(binds)  # replaced while binds flow
            wait_for(lambda: len(binds) >= bound + 3, 20, f"{label}: binds before the replacement")  # noqa: B023
            began = time.monotonic()
            old = replicas[index]
            old.shutdown()  # replica a releases its Lease (if it leads), replica b does not (a crash)
            replicas[index] = extender_factory(identity=f"{'ab'[index]}-2", release_lease=release, **FAST)
            wait_for(lambda: binds and binds[-1] >= began + 0.01 and any(ready(r) for r in replicas),  # noqa: B023
                     20, f"{label}: a bind after the replacement")
            window = [began] + [t for t in binds if t >= began]
            gaps[label] = max(b - a for a, b in zip(window, window[1:], strict=False))
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        api.close()
    assert not over, over[:5]
    assert outcomes["bound"] > 0 and binds and not outcomes["full"], outcomes
    # Handover: released at once when graceful (within the renew deadline, plus room for a loaded
    # machine); after the Lease expires when crashed.
    assert gaps["graceful"] < FAST["renew_deadline"] + 3, gaps
    assert gaps["crash"] < FAST["lease_duration"] + 5, gaps
