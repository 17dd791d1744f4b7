"""Bind gap while the two extender replicas are replaced one after the other, under continuous binds.

Two ``kubectl-gpushare serve-extender --leader-elect`` processes (default timings: lease 12 s, renew
deadline 8 s, retry 1 s) share the sandbox's Lease. A client creates pods and binds each through
whichever replica reports ready (what the Service does), without pause. Each replica in turn is
stopped and started again: first gracefully (SIGTERM, as a Deployment's rollout does: the leader
drains and releases the Lease), then killed (SIGKILL: the Lease must expire). A monitor reads the
API objects four times a second: no GPU may ever hold more than its memory.

Prints the longest gap between two successful binds in each phase (goal: <= the renew deadline,
8 s, for the rolling update) and the number of over-committed GPUs seen (must be 0).

    python bench/bench_rolling.py [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubectl_gpushare import protocol
from kubectl_gpushare.extender.schedsim import ExtenderCallError, ExtenderConfig, HTTPExtender, schedule_one
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

NODES = 32
GPUS = [16] * 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status(port: int, path: str) -> int:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", path)
        code = conn.getresponse().status
        conn.close()
        return code
    except OSError:
        return 0


class Replica:
    """One extender process on a fixed port (a restarted replica keeps its port, as a Service's endpoint)."""

    def __init__(self, name: str, kubeconfig: Path) -> None:
        self.name = name
        self.port = free_port()
        self.kubeconfig = kubeconfig
        self.proc: subprocess.Popen[bytes] | None = None
        self.generation = 0

    def start(self) -> None:
        self.generation += 1
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), PORT=str(self.port), LOG_LEVEL="error",
                   POD_NAME=f"{self.name}-{self.generation}")
        self.proc = subprocess.Popen([sys.executable, "-m", "kubectl_gpushare.cli", "serve-extender", "--leader-elect"],
                                     env=env)
        deadline = time.monotonic() + 60
        while status(self.port, "/healthz") != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"replica {self.name} did not start")
            time.sleep(0.05)

    def stop(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(60)

    def ready(self) -> bool:
        return status(self.port, "/readyz") == 200


def over_committed(sandbox: Sandbox) -> list[str]:
    used: Counter[tuple[str, str]] = Counter()
    for pod in sandbox.objects("pods"):
        ann = pod["metadata"].get("annotations") or {}
        node = pod["spec"].get("nodeName")
        if node and protocol.ANN_IDX in ann:
            used[(node, ann[protocol.ANN_IDX])] += int(ann[protocol.ANN_POD])
    return [f"{node} GPU {gpu}: {amount}" for (node, gpu), amount in used.items() if amount > GPUS[int(gpu)]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="settle 5 s between steps instead of 15")
    args = parser.parse_args()
    settle = 5.0 if args.quick else 15.0
    nodes = [node_object(f"gpu-{i:02d}", GPUS, ip=f"10.0.3.{i}") for i in range(NODES)]
    with Sandbox(port=0, history=10_000) as sandbox, tempfile.TemporaryDirectory() as tmp:
        sandbox.load(nodes)
        kubeconfig = sandbox.write_kubeconfig(Path(tmp) / "kubeconfig")
        replicas = [Replica("a", kubeconfig), Replica("b", kubeconfig)]
        for replica in replicas:
            replica.start()
        while not any(r.ready() for r in replicas):
            time.sleep(0.05)

        stop = threading.Event()
        binds: list[float] = []
        errors: Counter[str] = Counter()
        over: list[str] = []

        api = Client(load_config(str(kubeconfig)), component="bench")

        def client() -> None:
            count = 0
            while not stop.is_set():
                if count > 500:  # keep the cluster from filling: the pod bound 500 binds ago completes
                    api.delete(types.PODS, f"job-{count - 500:05d}", "default")
                count += 1
                name = f"job-{count:05d}"
                sandbox.load([pod_object(name, "default", [1])])
                while not stop.is_set():
                    target = next((r for r in replicas if r.ready()), None)
                    if target is None:
                        time.sleep(0.02)
                        continue
                    pod: dict[str, Any] | None = sandbox.get("pods", "default", name)
                    assert pod is not None
                    if pod["spec"].get("nodeName"):
                        break  # a Binding of unknown outcome landed
                    sched = HTTPExtender(ExtenderConfig(url_prefix=f"http://127.0.0.1:{target.port}/gpushare-scheduler",
                                                        http_timeout=30))
                    try:
                        schedule_one(sched, pod, nodes)
                        break
                    except (ExtenderCallError, OSError) as exc:
                        errors[str(exc).split(":")[0][:60]] += 1
                        time.sleep(0.02)
                binds.append(time.monotonic())

        leaders: list[tuple[float, str]] = []

        def monitor() -> None:
            while not stop.wait(0.25):
                over.extend(over_committed(sandbox))
                ready = ",".join(f"{r.name}-{r.generation}" for r in replicas if r.ready()) or "none"
                if not leaders or leaders[-1][1] != ready:
                    leaders.append((time.monotonic(), ready))

        threads = [threading.Thread(target=client), threading.Thread(target=monitor)]
        for t in threads:
            t.start()
        results: dict[str, float] = {}
        try:
            for phase, sig in (("rolling update (SIGTERM, one replica after the other)", signal.SIGTERM),
                               ("crashes (SIGKILL, one replica after the other)", signal.SIGKILL)):
                time.sleep(settle)
                began = time.monotonic()
                for replica in replicas:
                    replica.stop(sig)
                    replica.start()
                    time.sleep(settle)
                restarted = time.monotonic()
                while not binds or binds[-1] < restarted:  # binding again after the last restart
                    if time.monotonic() - restarted > 60:
                        raise SystemExit(f"{phase}: no bind within 60 s of the last restart")
                    time.sleep(0.05)
                window = [began] + [t for t in binds if t >= began]
                results[phase] = max(b - a for a, b in zip(window, window[1:], strict=False))
        finally:
            stop.set()
            for t in threads:
                t.join(60)
            for replica in replicas:
                if replica.proc is not None and replica.proc.poll() is None:
                    replica.stop(signal.SIGTERM)
            api.close()
        print(f"binds: {len(binds)}; errors answered to the client (retried): {sum(errors.values())}")
        for phase, gap in results.items():
            print(f"longest gap without a successful bind, {phase}: {gap:.2f} s   [goal <= 8 s renew deadline]")
        if os.environ.get("BENCH_VERBOSE"):
            print("ready replicas over time:", [(round(t - leaders[0][0], 1), who) for t, who in leaders])
        print(f"over-committed GPUs seen by the monitor: {len(over)}   [must be 0]")
        if over:
            raise SystemExit(f"over-commit: {over[:5]}")


if __name__ == "__main__":
    main()
