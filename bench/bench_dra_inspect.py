"""inspect on a cluster shared through our DRA driver vs the same cluster through annotations (goal: within 1.3x).

    .venv/bin/python bench/bench_dra_inspect.py            # 5,000 nodes x 8 GPUs, 100,000 pods
    .venv/bin/python bench/bench_dra_inspect.py --quick    # 500 nodes, 10,000 pods
    .venv/bin/python bench/bench_dra_inspect.py --padded   # pods with a real pod's bulk (both clusters)

The annotation cluster comes from the sandbox's generator (the extender's and device plugin's
annotations on every pod). The DRA cluster is the same placement as our driver and kube-scheduler
leave it: every node a plain Node with one ResourceSlice (8 ``gpu-<index>`` devices with a
``memory`` capacity and the driver's 1 GiB request policy), every pod a pod with a
``spec.resourceClaims`` template entry and one ResourceClaim (allocated on its GPU with
``consumedCapacity``, a share ID and ``reservedFor`` its pod; unallocated for a pod still Pending;
deallocated and gone for a finished one, as the resourceclaim controller leaves it). Both are read
offline by ``kubectl-inspect-gpushare --from-file`` (default view and ``-o json``) in a child
process, as `bench_stacks`: median CPU seconds of ``--runs`` runs and the ratio DRA / annotations.
A line times the decoding alone of each file (every object into the structs inspect reads, in
msgspec's C code, no Python per object): the DRA side's extra there is a floor no reading avoids.
A third file is the DRA cluster with its claims left out: its summary, timed beside the other two in
interleaved rounds, plus the claims' decoding alone (the decoding line's difference between the two DRA
files) is the least any reading of the claims could cost, the floor of the goal's ratio.
The last lines time ``kubectl gpushare doctor --from-file`` beside the summary on each file, in
interleaved rounds (goal: within 1.2x, as `bench_answers` sets it for doctor against the API).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
from bench_stacks import GPUS, INSPECT, compare, timed_once

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.errors import EXIT_FINDINGS_ERRORS, EXIT_FINDINGS_WARNINGS

GPUSHARE = str(Path(INSPECT).parent / "kubectl-gpushare")

DRIVER = protocol.DRA_DRIVER
API = f"{protocol.DRA_API_GROUP}/{protocol.DRA_API_VERSION}"
POLICY = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}


def dra_slice(node: str, gpu_memory: int) -> dict[str, Any]:
    devices = [{
        "name": protocol.dra_device_name(index),
        "attributes": {"index": {"int": index}, "uuid": {"string": f"GPU-{node}-{index}"},
                       "model": {"string": "NVIDIA A100-SXM4-80GB"}},
        "capacity": {"memory": {"value": f"{gpu_memory}Gi", "requestPolicy": POLICY}},
        "allowMultipleAllocations": True,
    } for index in range(GPUS)]
    return {
        "apiVersion": API, "kind": "ResourceSlice",
        "metadata": {"name": f"{protocol.dra_slice_generate_name(node)}x7k2p",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": f"uid-{node}",
                                          "controller": True}]},
        "spec": {"driver": DRIVER, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "nodeName": node, "devices": devices},
    }


def dra_claim(pod: dict[str, Any], request: int, node: str | None, gpu: int | None) -> dict[str, Any]:
    meta = pod["metadata"]
    name = f"{meta['name']}-gpu-mem-abcde"
    memory = f"{request}Gi"
    claim: dict[str, Any] = {
        "apiVersion": API, "kind": "ResourceClaim",
        "metadata": {
            "name": name, "namespace": meta["namespace"], "uid": f"claim-{meta['uid']}",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu-mem"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": protocol.DRA_DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1,
            "capacity": {"requests": {"memory": memory}}}}]}},
        "status": {},
    }
    if node is not None and gpu is not None:
        claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        claim["status"] = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node,
                                         "device": protocol.dra_device_name(gpu), "shareID": f"share-{meta['uid']}",
                                         "consumedCapacity": {"memory": memory}}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}],
        }
    return claim


def as_dra(objects: list[dict[str, Any]], gpu_memory: int) -> list[dict[str, Any]]:
    """The same nodes and placements, shared through our DRA driver's slices and claims.

    Every pod of both clusters first gets the UID kube-apiserver would have given it (a claim's
    ``reservedFor`` names its pod by UID; the generator's file pods have none).
    """
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["metadata"]["uid"] = f"uid-{obj['metadata']['namespace']}-{obj['metadata']['name']}"
    result: list[dict[str, Any]] = []
    for obj in objects:
        if obj["kind"] == "Node":
            node = {**obj, "status": {**obj["status"], "allocatable": {
                k: v for k, v in obj["status"]["allocatable"].items() if not k.startswith("aliyun.com/")}}}
            node["status"]["capacity"] = node["status"]["allocatable"]
            result += [node, dra_slice(obj["metadata"]["name"], gpu_memory)]
        elif obj["kind"] == "Pod":
            container = obj["spec"]["containers"][0]
            limits = container.get("resources", {}).get("limits", {})
            request = int(limits.get(protocol.RESOURCE_MEM, "0"))
            meta = {k: v for k, v in obj["metadata"].items() if k != "annotations"}
            index = obj["metadata"].get("annotations", {}).get(protocol.ANN_IDX)
            claim_name = f"{meta['name']}-gpu-mem-abcde"
            pod = {
                **obj, "metadata": meta,
                "spec": {**obj["spec"], "resourceClaims": [
                    {"name": "gpu-mem", "resourceClaimTemplateName": "gpu-mem"}],
                         "containers": [{**container, "resources": {"claims": [{"name": "gpu-mem"}]}}]},
                "status": {**obj["status"], "resourceClaimStatuses": [
                    {"name": "gpu-mem", "resourceClaimName": claim_name}]},
            }
            result.append(pod)
            if not protocol.pod_phase_terminal(obj["status"]["phase"]) and request > 0:
                node = obj["spec"].get("nodeName")
                gpu = int(index) if index is not None else None  # bound without a GPU: left unallocated
                result.append(dra_claim(pod, request, node, gpu))
        else:
            result.append(obj)
    return result


FLOOR = """
import gc, sys, time
import msgspec
from kubectl_gpushare import dra_objects
from kubectl_gpushare.inspect import source
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.records import Warnings
gc.disable()  # as inspect runs
data = open(sys.argv[1], "rb").read()
tally = msgspec.json.Decoder(dra_objects.WireTallyClaim)
start = time.process_time()
others = {kind: [] for kind in ("ConfigMap", "Device", *source.DRA_KINDS)}
source.parse_documents(data, Warnings(), others)
claims = [tally.decode(raw) for raw in others["ResourceClaim"]]
slices = [types.DRA_SLICE_DECODER.decode(raw) for raw in others["ResourceSlice"]]
print(time.process_time() - start)
"""


def floor(files: dict[str, Path], runs: int) -> dict[str, float]:
    """The decoding alone, in C (no Python per object), of each file: what no reading of the claims avoids."""
    seconds = {
        name: statistics.median(
            float(subprocess.run([sys.executable, "-c", FLOOR, str(path)], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(runs))
        for name, path in files.items()
    }
    print(f"{'decoding':10s} CPU gpushare {seconds['gpushare']:6.2f} s  dra {seconds['dra']:6.2f} s  "
          f"(nodes, pods, claims and slices into their structs; the DRA side's extra alone is "
          f"{seconds['dra'] - seconds['gpushare']:.2f} s)")
    return seconds


class _Listed(msgspec.Struct):
    items: list[msgspec.Raw]


class _Kind(msgspec.Struct):
    kind: str = ""


def without_claims(path: Path) -> Path:
    """The file at ``path`` with its ResourceClaims left out, beside it."""
    kind = msgspec.json.Decoder(_Kind)
    kept = [bytes(raw) for raw in msgspec.json.decode(path.read_bytes(), type=_Listed).items
            if kind.decode(raw).kind != "ResourceClaim"]
    bare = path.with_name(f"{path.stem}-without-claims.json")
    bare.write_bytes(b'{"apiVersion":"v1","kind":"List","items":[' + b",".join(kept) + b"]}")
    return bare


def claims_floor(files: dict[str, Path], decoding: dict[str, float], runs: int) -> None:
    """The least any reading of the claims could cost: the claim-free DRA file's summary plus the claims' decoding.

    The three summaries are timed in interleaved rounds (each round runs all three), so the ratios
    are side by side; the claims' decoding is `floor`'s difference between the two DRA files.
    """
    bare = without_claims(files["dra"])
    order = {"gpushare": files["gpushare"], "dra": files["dra"], "bare": bare}
    cpu: dict[str, list[float]] = {name: [] for name in order}
    for _ in range(runs):
        for name, path in order.items():
            cpu[name].append(timed_once([INSPECT, "--from-file", str(path)])[1])
    share, full, without = (statistics.median(cpu[name]) for name in order)
    bare_decoding = statistics.median(
        float(subprocess.run([sys.executable, "-c", FLOOR, str(bare)], capture_output=True, text=True,
                             check=True).stdout) for _ in range(runs))
    claims = decoding["dra"] - bare_decoding
    print(f"{'no claims':10s} CPU gpushare {share:6.2f} s  dra {full:6.2f} s  dra without its claims {without:6.2f} s "
          f"(ratio {without / share:4.2f}); the claims' decoding alone {claims:4.2f} s, so no reading of the claims "
          f"goes below {without + claims:4.2f} s, ratio {(without + claims) / share:4.2f} (goal <= 1.3)")


def doctor(files: dict[str, Path], runs: int) -> None:
    """doctor --from-file beside the summary on each file: median CPU seconds, each round running both."""
    verdicts = (0, EXIT_FINDINGS_WARNINGS, EXIT_FINDINGS_ERRORS)  # doctor's verdict is its exit code
    for name, path in files.items():
        inspect, audit = [], []
        for _ in range(runs):
            inspect.append(timed_once([INSPECT, "--from-file", str(path)])[1])
            audit.append(timed_once([GPUSHARE, "doctor", "--from-file", str(path)], verdicts)[1])
        share, doctor_cpu = statistics.median(inspect), statistics.median(audit)
        print(f"{'doctor':10s} CPU {name:8s} inspect {share:6.2f} s  doctor {doctor_cpu:6.2f} s  "
              f"ratio {doctor_cpu / share:5.2f} (goal <= 1.2)")


def then(files: dict[str, Path], runs: int) -> None:
    """The decoding floor, the claims' floor, then doctor beside inspect."""
    decoding = floor(files, runs)
    claims_floor(files, decoding, runs)
    doctor(files, runs)


if __name__ == "__main__":
    compare("dra", as_dra, __doc__.splitlines()[0], "the same placement through DRA slices and claims", then,
            paddable=True)
