"""Fetch and decode a large pod list: kube's msgspec Structs vs the `kubernetes` package's models.

Generates a cluster (100,000 pods by default; --quick: 10,000), serves it from the sandbox on
127.0.0.1 and measures, each in a fresh subprocess so peak RSS is per approach:

* fetch  - paginated list over HTTP (limit=500 + continue) into typed objects:
           ``kube.client.Client.iter_pods`` + ``kube.records.pod_record`` vs
           ``kubernetes.client.CoreV1Api.list_pod_for_all_namespaces`` (generated models).
* decode - one PodList JSON document already in memory: ``kube.types.POD_LIST_DECODER`` vs
           ``kubernetes.client.ApiClient().deserialize(..., "V1PodList")``.

Pods are padded with the fields real pods carry (managedFields, env, volumes, tolerations,
conditions) unless --lean, since skipping unread fields is where a typed decoder wins.

Usage: .venv/bin/python bench/bench_decode.py [--quick] [--pods N] [--page-size N] [--lean]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB.

    Reads VmHWM, which starts afresh at exec; ``ru_maxrss`` would carry over the peak of the
    forked parent.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pad(pod: dict[str, Any], index: int) -> dict[str, Any]:
    """Give a generated pod the bulk a real one has (roughly 4 KB of JSON)."""
    meta = pod["metadata"]
    meta.setdefault("labels", {}).update({"pod-template-hash": f"{index:08x}", "team": "ml"})
    meta["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": f"rs-{index}",
            "uid": f"{index:032x}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    meta["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:ownerReferences": {}},
                "f:spec": {"f:containers": {'k:{"name":"main"}': {"f:image": {}, "f:resources": {}}}},
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:05Z",
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:podIP": {}}},
        },
    ]
    spec = pod["spec"]
    for container in spec["containers"]:
        container["env"] = [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(6)]
        container["volumeMounts"] = [
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
        ]
        container["imagePullPolicy"] = "IfNotPresent"
        container["terminationMessagePath"] = "/dev/termination-log"
    spec["volumes"] = [
        {
            "name": "kube-api-access",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                ]
            },
        }
    ]
    spec["tolerations"] = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    spec.update(
        {
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "priority": 0,
            "terminationGracePeriodSeconds": 30,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
    )
    status = pod.setdefault("status", {})
    status["conditions"] = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:05Z"}
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    status.update(
        {
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIPs": [{"ip": "10.128.0.1"}],
            "qosClass": "BestEffort",
            "startTime": "2026-01-01T00:00:01Z",
        }
    )
    return pod


def cluster(pods: int, lean: bool) -> list[dict[str, Any]]:
    from kubectl_gpushare.sandbox.spec import generate_cluster

    objects = generate_cluster(nodes=max(1, pods // 20), gpus_per_node=8, pods=pods, seed=1)
    if not lean:
        index = 0
        for obj in objects:
            if obj.get("kind") == "Pod":
                pad(obj, index)
                index += 1
    return objects


# --- workers (each runs in its own process) -------------------------------------------------------------


def worker_fetch_msgspec(kubeconfig: str, page_size: int) -> dict[str, Any]:
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config
    from kubectl_gpushare.kube.records import Warnings, pod_record

    client = Client(load_config(kubeconfig), component="bench")
    base = rss_mib()
    started = time.perf_counter()
    warnings = Warnings()
    records = [pod_record(pod, warnings) for pod in client.iter_pods(page_size=page_size)]
    elapsed = time.perf_counter() - started
    return {"count": len(records), "seconds": elapsed, "base_mib": base, "peak_mib": rss_mib()}


def worker_fetch_kubernetes(kubeconfig: str, page_size: int, limit: int) -> dict[str, Any]:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    k8s_config.load_kube_config(config_file=kubeconfig)
    api = k8s.CoreV1Api()
    base = rss_mib()
    started = time.perf_counter()
    items: list[Any] = []
    token = None
    while True:
        page = api.list_pod_for_all_namespaces(limit=page_size, _continue=token)
        items.extend(page.items)
        token = page.metadata._continue
        if not token or len(items) >= limit:
            break
    elapsed = time.perf_counter() - started
    return {"count": len(items), "seconds": elapsed, "base_mib": base, "peak_mib": rss_mib()}


def worker_decode_msgspec(path: str) -> dict[str, Any]:
    from kubectl_gpushare.kube.types import POD_LIST_DECODER

    data = Path(path).read_bytes()
    base = rss_mib()
    started = time.perf_counter()
    page = POD_LIST_DECODER.decode(data)
    elapsed = time.perf_counter() - started
    return {"count": len(page.items), "seconds": elapsed, "base_mib": base, "peak_mib": rss_mib()}


def worker_decode_kubernetes(path: str) -> dict[str, Any]:
    from kubernetes.client import ApiClient

    text = Path(path).read_text()
    api = ApiClient()
    base = rss_mib()
    started = time.perf_counter()
    page = api.deserialize(text, "V1PodList", "application/json")
    elapsed = time.perf_counter() - started
    return {"count": len(page.items), "seconds": elapsed, "base_mib": base, "peak_mib": rss_mib()}


def worker_informer_sync(kubeconfig: str, page_size: int) -> dict[str, Any]:
    """What the extender does at start: informers on nodes, pods and configmaps, records built per object."""
    from kubectl_gpushare.kube import types
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config
    from kubectl_gpushare.kube.informer import Informer
    from kubectl_gpushare.kube.records import node_record, pod_record

    client = Client(load_config(kubeconfig), component="bench")
    nodes: dict[str, Any] = {}
    pods: dict[str, Any] = {}
    base = rss_mib()
    started = time.perf_counter()
    informers: list[Informer[Any]] = [
        Informer(
            client,
            types.NODES,
            page_size=page_size,
            on_add=lambda n: nodes.__setitem__(n.metadata.name, node_record(n)),
        ),
        Informer(
            client, types.PODS, page_size=page_size, on_add=lambda p: pods.__setitem__(p.metadata.uid, pod_record(p))
        ),
        Informer(client, types.CONFIGMAPS, page_size=page_size),
    ]
    for informer in informers:
        informer.start()
    for informer in informers:
        informer.wait_synced(120)
    elapsed = time.perf_counter() - started
    for informer in informers:
        informer.stop()
    return {"count": len(pods), "nodes": len(nodes), "seconds": elapsed, "base_mib": base, "peak_mib": rss_mib()}


WORKERS = {
    "fetch-msgspec": lambda a: worker_fetch_msgspec(a.kubeconfig, a.page_size),
    "fetch-kubernetes": lambda a: worker_fetch_kubernetes(a.kubeconfig, a.page_size, a.baseline_pods),
    "informer-sync": lambda a: worker_informer_sync(a.kubeconfig, a.page_size),
    "decode-msgspec": lambda a: worker_decode_msgspec(a.file),
    "decode-kubernetes": lambda a: worker_decode_kubernetes(a.file),
}


def run_worker(name: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", name, *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"worker {name} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="10,000 pods instead of 100,000")
    parser.add_argument("--pods", type=int, default=None)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--lean", action="store_true", help="do not pad pods with real-world fields")
    parser.add_argument(
        "--baseline-pods",
        type=int,
        default=None,
        help="pods the kubernetes models are measured on (default: all with --quick, else 20,000: "
        "its memory grows by ~50 MiB per 1,000 pods, so 100,000 would need ~5 GiB); rates are compared per pod",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return

    from kubectl_gpushare.sandbox.server import Sandbox

    pods = args.pods or (10_000 if args.quick else 100_000)
    baseline = min(pods, args.baseline_pods or (pods if args.quick else 20_000))
    objects = cluster(pods, args.lean)
    pod_objects = [obj for obj in objects if obj.get("kind") == "Pod"]

    def pod_list(items: list[dict[str, Any]]) -> bytes:
        envelope = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        return json.dumps(envelope).encode()

    body = pod_list(pod_objects)
    print(
        f"{pods:,} pods, {len(body) / len(pod_objects):,.0f} bytes of JSON each "
        f"({'lean' if args.lean else 'padded like real pods'}), page size {args.page_size}; "
        f"kubernetes models measured on {baseline:,} pods"
    )

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_file = os.path.join(tmp, "pods.json")
        Path(data_file).write_bytes(body)
        baseline_file = os.path.join(tmp, "baseline.json")
        Path(baseline_file).write_bytes(pod_list(pod_objects[:baseline]))
        del body
        results["decode-msgspec"] = run_worker("decode-msgspec", "--file", data_file)
        results["decode-kubernetes"] = run_worker("decode-kubernetes", "--file", baseline_file)
        with Sandbox(port=0) as sandbox:
            sandbox.load(objects)
            del objects, pod_objects
            kubeconfig = str(sandbox.write_kubeconfig(os.path.join(tmp, "kubeconfig")))
            for name in ("fetch-msgspec", "fetch-kubernetes"):
                results[name] = run_worker(
                    name,
                    "--kubeconfig",
                    kubeconfig,
                    "--page-size",
                    str(args.page_size),
                    "--baseline-pods",
                    str(baseline),
                )
            results["informer-sync"] = run_worker("informer-sync", "--kubeconfig", kubeconfig, "--page-size", "500")

    print(f"{'approach':<20}{'pods':>9}{'seconds':>10}{'pods/s':>12}{'peak RSS MiB':>15}{'over base':>11}")
    for name, result in results.items():
        rate = result["count"] / result["seconds"] if result["seconds"] else float("inf")
        print(
            f"{name:<20}{result['count']:>9,}{result['seconds']:>10.2f}{rate:>12,.0f}"
            f"{result['peak_mib']:>15.0f}{result['peak_mib'] - result['base_mib']:>11.0f}"
        )
    for kind in ("decode", "fetch"):
        ours, theirs = results[f"{kind}-msgspec"], results[f"{kind}-kubernetes"]
        assert ours["count"] == pods and theirs["count"] >= baseline, (ours, theirs)
        ratio = (ours["count"] / ours["seconds"]) / (theirs["count"] / theirs["seconds"])
        print(
            f"{kind}: msgspec is {ratio:.1f}x faster per pod; peak RSS {ours['peak_mib']:.0f} MiB at "
            f"{ours['count']:,} pods vs {theirs['peak_mib']:.0f} MiB at {theirs['count']:,} pods"
        )
    sync = results["informer-sync"]
    print(
        f"informer initial sync (nodes + pods + configmaps, records built): {sync['nodes']:,} nodes and "
        f"{sync['count']:,} pods in {sync['seconds']:.2f}s, peak RSS {sync['peak_mib']:.0f} MiB"
    )


if __name__ == "__main__":
    main()
