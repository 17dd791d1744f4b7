"""Write the matrix cases' cluster.json files (run by hand; the files are committed).

    .venv/bin/python tests/golden/inspect/build_clusters.py

Each case is a `kubectl get nodes,pods -A -o json`-shaped List. The expected views next to each
cluster.json are produced with GPUSHARE_UPDATE_GOLDEN=1 and reviewed by eye; the reference
cases s1-s4 are hand-written and never regenerated.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
MEM = "aliyun.com/gpu-mem"
COUNT = "aliyun.com/gpu-count"


def node(name: str, ip: str | None, mem: str | None, count: str | None, labels: dict[str, str] | None = None) -> dict:
    resources: dict[str, str] = {"cpu": "64", "memory": "512Gi"}
    if mem is not None:
        resources[MEM] = mem
    if count is not None:
        resources[COUNT] = count
    addresses = [{"type": "Hostname", "address": name}]
    if ip:
        # node-03 lists its Hostname first: the views must pick the first InternalIP, not addresses[0].
        addresses.insert(1 if name.endswith("3") else 0, {"type": "InternalIP", "address": ip})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"addresses": addresses, "allocatable": dict(resources), "capacity": dict(resources)},
    }


def pod(
    name: str,
    namespace: str,
    node_name: str | None,
    limits: list[str | None],
    *,
    idx: str | None = None,
    allocation: str | None = None,
    phase: str = "Running",
    terminating: bool = False,
    init_limit: str | None = None,
) -> dict:
    annotations: dict[str, str] = {}
    if idx is not None:
        annotations["ALIYUN_COM_GPU_MEM_IDX"] = idx
    if allocation is not None:
        annotations["scheduler.framework.gpushare.allocation"] = allocation
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if annotations:
        metadata["annotations"] = annotations
    if terminating:
        metadata["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    containers = []
    for i, limit in enumerate(limits):
        container: dict[str, Any] = {"name": f"c{i}", "image": "cuda"}
        if limit is not None:
            container["resources"] = {"limits": {MEM: limit}}
        containers.append(container)
    spec: dict[str, Any] = {"containers": containers}
    if init_limit is not None:
        spec["initContainers"] = [{"name": "init", "image": "cuda", "resources": {"limits": {MEM: init_limit}}}]
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": phase}}


def many_nodes() -> list[dict]:
    """12 nodes with 1..8 GPUs, pending, terminating, Unknown, completed and init-container pods."""
    rng = random.Random(7)
    items: list[dict] = []
    gpu_counts = [8, 1, 4, 2, 8, 3, 6, 1, 5, 7, 2, 4]
    for i, gpus in enumerate(gpu_counts):
        items.append(node(f"node-{i:02d}", f"10.0.0.{i + 10}", str(gpus * 16), str(gpus), {"gpushare": "true"}))
    items.append(node("cpu-node", "10.0.1.1", None, None))
    namespaces = ["default", "ml", "team-a"]
    for j in range(40):
        i = rng.randrange(len(gpu_counts))
        gpus = gpu_counts[i]
        kind = rng.random()
        request = str(rng.choice([1, 2, 4, 8]))
        common = {"phase": "Running"}
        if kind < 0.1:
            items.append(pod(f"pending-{j:02d}", namespaces[j % 3], f"node-{i:02d}", [request], phase="Pending"))
            continue
        if kind < 0.2:
            common["phase"] = rng.choice(["Succeeded", "Failed"])
        elif kind < 0.3:
            common["phase"] = "Unknown"
        items.append(
            pod(
                f"job-{j:02d}",
                namespaces[j % 3],
                f"node-{i:02d}",
                [request, None] if j % 5 == 0 else [request],
                idx=str(rng.randrange(gpus)),
                terminating=0.3 <= kind < 0.4,
                init_limit="16" if j % 7 == 0 else None,
                **common,
            )
        )
    items.append(pod("unscheduled", "default", None, ["2"], phase="Pending"))
    items.append(pod("on-cpu-node", "default", "cpu-node", ["2"], idx="0"))
    items.append(pod("no-gpu", "default", "node-00", [None], idx="0"))
    return items


def mib_units() -> list[dict]:
    """Nodes advertising MiB (4 x 16160 and 2 x 24576), pods asking MiB."""
    return [
        node("mib-node-a", "10.1.0.1", str(4 * 16160), "4"),
        node("mib-node-b", "10.1.0.2", str(2 * 24576), "2"),
        pod("trainer", "ml", "mib-node-a", ["8192"], idx="0"),
        pod("infer-1", "ml", "mib-node-a", ["4096"], idx="0"),
        pod("infer-2", "ml", "mib-node-a", ["2048"], idx="3"),
        pod("notebook", "default", "mib-node-b", ["12288"], idx="1"),
        pod("queued", "default", "mib-node-b", ["1024"]),
    ]


def big_gpus() -> list[dict]:
    """8 x 141 GiB GPUs: more than 100 per GPU, so the original's guess labels them MiB."""
    return [
        node("h200-node", "10.2.0.1", str(8 * 141), "8"),
        node("a100-node", "10.2.0.2", str(8 * 80), "8"),
        pod("llm", "ml", "h200-node", ["141"], idx="0"),
        pod("llm-2", "ml", "h200-node", ["70", "29"], idx="7"),
        pod("ft", "ml", "a100-node", ["29"], idx="2"),
    ]


def no_gpu_count() -> list[dict]:
    """A node with gpu-mem but no gpu-count (device plugin not yet patched it) beside a normal one."""
    return [
        node("half-ready", "10.3.0.1", "32", None),
        node("ready", "10.3.0.2", "32", "2"),
        pod("early", "default", "half-ready", ["4"], idx="0"),
        pod("waiting", "default", "half-ready", ["2"]),
        pod("ok", "default", "ready", ["4"], idx="1"),
    ]


def gpushare2() -> list[dict]:
    """gpushare 2.0 allocations: multi-GPU, multi-container, malformed, out-of-range index."""
    return [
        node("node-a", "10.4.0.1", "64", "4"),
        node("node-b", None, "32", "2"),
        pod("spread", "ml", "node-a", ["12"], allocation='{"0":{"0":4,"1":4,"3":4}}'),
        pod("two-containers", "ml", "node-a", ["4", "4"], allocation='{"0":{"2":4},"1":{"2":4}}'),
        pod("bad-key", "ml", "node-a", ["3"], idx="1", allocation='{"0":{"x":3}}'),
        pod("not-json", "ml", "node-a", ["2"], idx="0", allocation="{oops"),
        pod("empty-map", "ml", "node-a", ["1"], idx="3", allocation="{}"),
        pod("beyond", "default", "node-b", ["5"], idx="5"),
        pod("plain", "default", "node-b", ["3"], idx="0"),
    ]


def malformed() -> list[dict]:
    """Bad quantities and annotations: warned once each, counted where possible."""
    bad_node = node("bad-node", "10.5.0.1", "16", "two")
    return [
        node("good-node", "10.5.0.2", "16", "2"),
        bad_node,
        pod("bad-limit", "default", "good-node", ["lots", "2"], idx="0"),
        pod("bad-idx", "default", "good-node", ["3"], idx="one"),
        pod("negative-idx", "default", "good-node", ["1"], idx="-3"),
        pod("ok", "default", "good-node", ["4"], idx="1"),
        pod("on-bad-node", "default", "bad-node", ["4"], idx="0"),
    ]


CASES = {
    "many-nodes": many_nodes,
    "mib-units": mib_units,
    "big-gpus": big_gpus,
    "no-gpu-count": no_gpu_count,
    "gpushare2": gpushare2,
    "malformed": malformed,
}


def main() -> None:
    for name, build in CASES.items():
        directory = HERE / name
        directory.mkdir(exist_ok=True)
        document = {"apiVersion": "v1", "kind": "List", "items": build(), "metadata": {"resourceVersion": ""}}
        (directory / "cluster.json").write_text(json.dumps(document, indent=4) + "\n")


if __name__ == "__main__":
    main()
