"""Stress: 2,000 pods bound concurrently onto 50 mixed nodes, with API faults and an extender restart.

The faults include Bindings whose outcome the extender cannot know: replies lost after the Binding
took effect, Bindings that land after the client's timeout, connections reset before the server
read them, reads of pods that fail, and pod watches that break off and lag. A monitor reads the
API objects throughout: no GPU ever holds more than its memory. Afterwards every bound pod's
annotations agree with the extender's ``/inspect``, with a ledger rebuilt from a fresh list, and
with ``kubectl inspect gpushare -o json`` run through the real kubectl.

The extender crashes midway with Bindings in flight (they land after the crash), and some
Bindings land after the unknown-outcome grace: the next replica counts each pod from the claim its
annotations make (they name the node), so the invariant holds across the crash. A Binding that
lands after its claim was removed leaves a pod bound without a GPU index; it is counted on no GPU
(the device plugin adopts it only where there is room), and the test allows exactly those.
"""

from __future__ import annotations

import json
import queue
import random
import re
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.schedsim import ExtenderCallError, ExtenderConfig, HTTPExtender, schedule_one
from kubectl_gpushare.kube import records
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.ledger import Ledger
from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 50
PODS = 2000
WORKERS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, tuple[int, ...]]]:
    objects: list[dict[str, Any]] = []
    totals: dict[str, tuple[int, ...]] = {}
    for i in range(NODES):
        gpus = rng.choice([1, 2, 4, 8])
        memories = [rng.choice([16, 24, 40, 80])] * gpus
        if i % 10 == 3 and gpus > 1:  # a few heterogeneous nodes (per-GPU memory annotation)
            memories = [16] * (gpus // 2) + [40] * (gpus - gpus // 2)
        name = f"gpu-{i:02d}"
        objects.append(node_object(name, memories, ip=f"10.0.1.{i}"))
        totals[name] = tuple(memories)
    objects.append(node_object("cpu-00", [], ip="10.0.2.1"))
    objects.append(unhealthy_configmap("gpu-07", [0]))
    for j in range(PODS):
        containers = [rng.choice([1, 1, 1, 2, 2, 3, 4, 6, 8])]
        if j % 7 == 0:
            containers.append(rng.choice([1, 2]))
        objects.append(pod_object(f"job-{j:04d}", f"team-{j % 4}", containers))
    return objects, totals


LATE_AFTER_GRACE = r"/namespaces/team-3/pods/job-0[0-9]{2}3/binding"
"""Pods whose Binding lands after the grace (and may find its claim removed)."""


def api_use(sandbox: Sandbox) -> tuple[Counter[tuple[str, int]], list[str]]:
    """Memory per (node, GPU) that the bound pods' annotations claim, read from the API objects,
    and the bound pods that claim no GPU other than those whose Binding was made to land late."""
    used: Counter[tuple[str, int]] = Counter()
    unclaimed: list[str] = []
    for p in sandbox.objects("pods"):
        ann = p["metadata"].get("annotations") or {}
        node = p["spec"].get("nodeName")
        if node and protocol.ANN_IDX in ann:
            used[(node, int(ann[protocol.ANN_IDX]))] += int(ann[protocol.ANN_POD])
        elif node and not late_after_grace(p):
            unclaimed.append(f"{p['metadata']['name']} bound to {node} without GPU annotations")
    return used, unclaimed


def late_after_grace(pod: dict[str, Any]) -> bool:
    meta = pod["metadata"]
    return re.search(LATE_AFTER_GRACE, f"/namespaces/{meta['namespace']}/pods/{meta['name']}/binding") is not None


def test_concurrent_binds_with_faults_and_restart_never_overcommit(
    sandbox: Sandbox, kubeconfig: Path, extender_factory, kubectl  # type: ignore[no-untyped-def]
) -> None:
    rng = random.Random(2024)
    objects, totals = cluster(rng)
    sandbox.load(objects)
    port = free_port()
    # A claim lives bind deadline + one request + grace = 4 + 1 + 3 s after it was written.
    settings = {"request_timeout": 1.0, "unknown_grace": 3.0, "bind_deadline": 4.0}
    ext = extender_factory(port=port, **settings)
    ext.wait_synced(30)
    nodes = [o for o in objects if o["kind"] == "Node"]
    url = f"http://127.0.0.1:{port}/gpushare-scheduler"
    # Half the workers call as a nodeCacheCapable scheduler (names), half send full Node objects.
    schedulers = [HTTPExtender(ExtenderConfig(url_prefix=url, http_timeout=30, node_cache_capable=cache))
                  for cache in (True, False)]

    work: queue.Queue[tuple[str, str, int]] = queue.Queue()
    for o in objects:
        if o["kind"] == "Pod":
            work.put((o["metadata"]["namespace"], o["metadata"]["name"], 0))
    outcome: Counter[str] = Counter()
    lock = threading.Lock()

    def worker(sched: HTTPExtender) -> None:
        while True:
            try:
                namespace, name, attempt = work.get(timeout=0.5)
            except queue.Empty:
                return
            pod = sandbox.get("pods", namespace, name)
            assert pod is not None
            if pod["spec"].get("nodeName"):  # an earlier Binding of unknown outcome landed
                result = "bound"
            else:
                try:
                    schedule_one(sched, pod, nodes)
                    result = "bound"
                except ExtenderCallError as exc:
                    text = str(exc)
                    if "nodes are available" in text:
                        result = "unschedulable"
                    elif attempt < 60:
                        time.sleep(min(0.5, 0.05 * (attempt + 1)))  # the scheduler's backoff: the load's pace
                        work.put((namespace, name, attempt + 1))
                        result = "retried"
                    else:
                        result = "gave-up"
            with lock:
                outcome[result] += 1

    over: list[str] = []
    done = threading.Event()

    def monitor() -> None:
        """No GPU over its memory, ever: the API objects, read again and again while binds run."""
        while not done.wait(0.25):
            used, unclaimed = api_use(sandbox)
            over.extend(unclaimed)
            for (node, gpu), amount in used.items():
                if amount > totals[node][gpu]:
                    over.append(f"{node} GPU {gpu}: {amount} > {totals[node][gpu]}")

    faults = [
        sandbox.inject("PATCH", r"/api/v1/namespaces/team-1/pods/", status=409, times=40),
        sandbox.inject("GET", r"/api/v1/namespaces/team-2/pods/job-0[0-4]", status=429, retry_after=1, times=5),
        sandbox.inject("PATCH", r"/api/v1/namespaces/team-3/pods/", status=500, times=30),
        sandbox.inject("POST", r"/binding", status=500, times=30),
    ]
    unknown = [  # outcomes the extender cannot know; all used up in the first part of the run
        sandbox.inject("POST", r"/namespaces/team-0/pods/[^/]*/binding", status=500, after=True, times=25),
        sandbox.inject("POST", r"/namespaces/team-1/pods/[^/]*/binding", latency=1.5, after=True, times=15),
        sandbox.inject("POST", r"/namespaces/team-2/pods/[^/]*/binding", drop_watch=True, times=20),
        sandbox.inject("GET", r"/namespaces/team-[03]/pods/[^/?]*(\?|$)", status=500, times=120),
    ]
    lagging = sandbox.inject("GET", r"^/api/v1/pods\?watch=true", latency=2.0, times=2)
    late = sandbox.inject("POST", LATE_AFTER_GRACE, latency=5.0, after=True, times=4)  # lands after the 3 s grace
    threads = [threading.Thread(target=worker, args=(schedulers[i % 2],)) for i in range(WORKERS)]
    watcher = threading.Thread(target=monitor)
    watcher.start()
    for t in threads:
        t.start()
    def processed() -> int:
        return outcome["bound"] + outcome["unschedulable"]

    wait_for(lambda: processed() >= PODS // 3, 180, lambda: f"a third of the pods processed: {outcome}")
    sandbox.drop_watches()  # pods watch resumes 2 s late, twice
    wait_for(lambda: processed() >= PODS // 2, 180, lambda: f"half of the pods processed: {outcome}")
    # Crash with Bindings in flight: they land 2.5 s after they were sent, after the crash.
    in_flight = sandbox.inject("POST", r"/binding", latency=2.5, after=True, times=6)
    wait_for(lambda: in_flight.hits >= 3, 60, "Bindings in flight")
    ext.shutdown()  # the new replica rebuilds its ledger from the annotations, claims of unbound pods included
    ext = extender_factory(port=port, **settings)
    sandbox.drop_watches()
    for t in threads:
        t.join(180)

    def settled() -> bool:  # an unschedulable pod's stale claim ends with its lifetime
        return not ext.running.state.unsettled() and not any(
            protocol.ANN_IDX in (p["metadata"].get("annotations") or {}) and not p["spec"].get("nodeName")
            for p in sandbox.objects("pods"))

    wait_for(settled, 30, "unknown outcomes and claims to settle")
    done.set()
    watcher.join()
    sandbox.clear_faults()
    assert not over, over[:5]
    assert all(f.hits > 0 for f in faults + unknown + [lagging, late, in_flight])
    assert outcome["gave-up"] == 0
    assert outcome["bound"] > PODS * 0.75, outcome
    assert outcome["bound"] + outcome["unschedulable"] == PODS

    # 1. No GPU over capacity, every bound pod fully and correctly annotated; unbound pods carry nothing.
    pods = sandbox.objects("pods")
    used: Counter[tuple[str, int]] = Counter()
    bound = 0
    for p in pods:
        ann = p["metadata"].get("annotations") or {}
        request = sum(int(c["resources"]["limits"][protocol.RESOURCE_MEM]) for c in p["spec"]["containers"]
                      if c.get("resources"))
        node = p["spec"].get("nodeName")
        if not node:
            assert protocol.ANN_IDX not in ann, f"unbound pod {p['metadata']['name']} kept annotations"
            continue
        bound += 1
        if protocol.ANN_IDX not in ann and late_after_grace(p):
            continue  # its Binding landed after its claim was removed: counted on no GPU
        gpu = int(ann[protocol.ANN_IDX])
        assert 0 <= gpu < len(totals[node])
        assert int(ann[protocol.ANN_POD]) == request
        assert int(ann[protocol.ANN_DEV]) == totals[node][gpu]
        assert ann[protocol.ANN_ASSIGNED] == "false" and int(ann[protocol.ANN_ASSUME_TIME]) > 0
        assert not (node == "gpu-07" and gpu == 0), "unhealthy GPU was used"
        used[(node, gpu)] += request
    assert bound == outcome["bound"]
    for (node, gpu), amount in used.items():
        assert amount <= totals[node][gpu], f"{node} GPU {gpu}: {amount} > {totals[node][gpu]}"

    # 2. The extender's /inspect agrees (once its watch has caught up).
    def inspect_used() -> Counter[tuple[str, int]]:
        view = json.loads(ext.running.app.handle("GET", "/gpushare-scheduler/inspect").body)
        return Counter({(n["name"], d["id"]): d["usedGPU"] for n in view["nodes"] for d in n["devs"] if d["usedGPU"]})

    wait_for(lambda: inspect_used() == used, 20, "extender /inspect to agree with the annotations")

    # 3. A ledger rebuilt from scratch agrees.
    client = Client(load_config(str(kubeconfig)), component="test")
    fresh = Ledger.build([records.node_record(n) for n in client.list_nodes()],
                         [records.pod_record(p) for p in client.iter_pods()], basis="capacity")
    client.close()
    rebuilt = Counter({(n, g): amount for n in fresh.node_names() for g, amount in fresh.used(n).items()
                       if amount and g >= 0})
    assert rebuilt == used

    # 4. `kubectl inspect gpushare` (through the real kubectl) agrees, GPU by GPU.
    report = json.loads(kubectl("inspect", "gpushare", "-o", "json", timeout=120).stdout)
    shown = Counter({(n["name"], g["index"]): g["used"] for n in report["nodes"] for g in n["gpus"]
                     if g["used"] and g["index"] >= 0})
    assert shown == used
