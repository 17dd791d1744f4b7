"""The doctor's seeded cluster: one object (or two) per finding, plus a healthy node and pod.

Shared by the offline (unit) and real-kubectl (integration) doctor tests; both must print the
golden files here byte for byte. Regenerate with GPUSHARE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any, Final

from golden.hostile import HOSTILE
from golden.inspect import build_dra_clusters as dra

from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap
from kubectl_gpushare.sandbox.stack_spec import stack_node_object, stack_pod_object

GOLDEN = Path(__file__).resolve().parent
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"
LONG_AGO_NS = 1_600_000_000 * 10**9
"""An assume time in 2020: always older than --stuck-after, so the golden never depends on the clock."""


def _with_status(node: dict[str, Any], **resources: str) -> dict[str, Any]:
    node["status"]["allocatable"].update(resources)
    return node


def _daemon(name: str, component: str, node: str, *, ready: bool = True) -> dict[str, Any]:
    return pod_object(
        name, "kube-system", [0], node=node, phase="Running", labels={"component": component}, ready=ready
    )


PLUGIN_NODES = ("healthy", "both-plugins", "sick", "mixed", "over", "dra-and-plugin")
"""Labelled nodes that run a Ready device-plugin pod; ``no-daemon`` is labelled and advertises but runs
none; ``unready`` runs one that is Running but not Ready."""


def _hami_node(name: str, memories: list[int], ip: str, **annotations: str) -> dict[str, Any]:
    return stack_node_object(name, "hami", memories, ip=ip, product="NVIDIA-A10", labels={}, annotations=annotations)


CONFINEMENT = "gpushare-device-plugin-confinement"


def confinement(actions: tuple[str, ...] = ("Deny",)) -> list[dict[str, Any]]:
    """The shipped node-confinement policy (trimmed to what doctor reads) and its binding."""
    group = "admissionregistration.k8s.io/v1"
    meta = {"name": CONFINEMENT, "labels": {"app": "gpushare", "component": "gpushare-device-plugin"}}
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]
    return [
        {"apiVersion": group, "kind": "ValidatingAdmissionPolicy", "metadata": meta,
         "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules},
                  "validations": [{"expression": "true"}]}},
        {"apiVersion": group, "kind": "ValidatingAdmissionPolicyBinding", "metadata": dict(meta),
         "spec": {"policyName": CONFINEMENT, "validationActions": list(actions)}},
    ]


def hami_seed() -> list[dict[str, Any]]:
    """HAMi's classic failures, one node or pod each, plus a healthy HAMi node and pod (and an over-committed GPU)."""
    bind_failed = stack_pod_object("bind-failed", "team-h", "hami", [2000], node=None, gpu=None, phase="Pending")
    bind_failed["metadata"]["annotations"] = {"hami.io/bind-phase": "failed", "hami.io/vgpu-node": "hami-stuck"}
    return [
        _hami_node("hami-ok", [24576], "10.9.1.1"),
        _hami_node("hami-stuck", [24576], "10.9.1.2", **{
            "hami.io/node-handshake": "Requesting_2020.09.13 12:26:40",
            "hami.io/mutex.lock": "2020-09-13T12:26:40Z,team-h,bind-failed",
        }),
        _hami_node("hami-over", [8192, 8192], "10.9.1.3", **{"hami.io/mutex.lock": "not-a-time"}),
        stack_pod_object("vgpu-fine", "team-h", "hami", [3000], node="hami-ok", gpu=0, cores=30),
        stack_pod_object("vgpu-big", "team-h", "hami", [6000], node="hami-over", gpu=1),
        stack_pod_object("vgpu-bigger", "team-h", "hami", [6000], node="hami-over", gpu=1),
        bind_failed,
    ]


LONG_AGO: Final = "2020-09-13T12:26:40Z"
"""A creation time always older than --stuck-after."""


def dra_seed() -> list[dict[str, Any]]:
    """DRA's failures: GPUs sold twice, a claim on a device nobody publishes, an over-committed GPU, stuck pods."""
    gi = "1Gi"
    no_class = dra.pending_claim("dra-no-class-gpu", "dra-no-class", "4Gi", namespace="team-d",
                                 device_class=dra.NVIDIA_DRIVER)  # NVIDIA's driver (and its class) not installed
    return [
        dra.device_class(),
        node_object("dra-and-plugin", [16], ip="10.9.2.1"),
        dra.resource_slice("dra-and-plugin", dra.OUR_DRIVER,
                           [dra.our_device(0, "16Gi", gi, "T4", "dra-and-plugin")], "aaaaa"),
        node_object("dra-twice", [], ip="10.9.2.2"),
        dra.resource_slice("dra-twice", dra.OUR_DRIVER, [dra.our_device(0, "80Gi", gi, "H100", "dra-twice")], "bbbbb"),
        dra.resource_slice("dra-twice", dra.NVIDIA_DRIVER, [dra.nvidia_device(0, "dra-twice")], "ccccc"),
        node_object("dra-over", [], ip="10.9.2.3"),
        dra.resource_slice("dra-over", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", gi, "T4", "dra-over")], "ddddd"),
        dra.dra_pod("dra-big", "dra-over", "dra-big-gpu", namespace="team-d"),
        dra.claim("dra-big-gpu", "dra-over", "gpu-0", "10Gi", ["dra-big"], owner="dra-big", namespace="team-d"),
        dra.dra_pod("dra-bigger", "dra-over", "dra-bigger-gpu", namespace="team-d"),
        dra.claim("dra-bigger-gpu", "dra-over", "gpu-0", "8Gi", ["dra-bigger"], owner="dra-bigger", namespace="team-d"),
        dra.claim("dra-ghost", "dra-over", "gpu-5", "2Gi", [], namespace="team-d"),
        dra.dra_pod("dra-no-class", "", "dra-no-class-gpu", phase="Pending", namespace="team-d", created=LONG_AGO),
        no_class,
        dra.dra_pod("dra-waiting", "", "dra-waiting-gpu", phase="Pending", namespace="team-d", created=LONG_AGO),
        dra.pending_claim("dra-waiting-gpu", "dra-waiting", "64Gi", namespace="team-d"),
        dra.dra_pod("dra-no-claim", "", None, phase="Pending", namespace="team-d", created=LONG_AGO),
        dra.dra_pod("dra-new", "", None, phase="Pending", namespace="team-d", created="2999-01-01T00:00:00Z"),
        *_named_twice_and_unreadable(),
    ]


def _named_twice_and_unreadable() -> list[dict[str, Any]]:
    """Pending ``dra-named`` (created long ago), two of whose entries name its claim, and pending ``dra-unreadable``,
    whose ``spec.resourceClaims`` is an object (kube-apiserver admits the first and refuses the second, which only a
    file or a tampered store holds)."""
    named = dra.shared_pod("dra-named", "", "dra-named-gpu", namespace="team-d")
    named["status"]["phase"] = "Pending"
    named["metadata"]["creationTimestamp"] = LONG_AGO
    named["spec"]["resourceClaims"] = [{"name": "one", "resourceClaimName": "dra-named-gpu"},
                                       {"name": "two", "resourceClaimName": "dra-named-gpu"}]
    unreadable = dra.dra_pod("dra-unreadable", "", None, phase="Pending", namespace="team-d", created=LONG_AGO)
    unreadable["spec"]["resourceClaims"] = {"name": "gpu", "resourceClaimName": "dra-named-gpu"}
    return [named, dra.pending_claim("dra-named-gpu", "dra-named", "4Gi", namespace="team-d"), unreadable]


def seed() -> list[dict[str, Any]]:
    both = node_object("both-plugins", [16, 16], ip="10.9.0.3")
    for field in ("capacity", "allocatable"):
        both["status"][field]["nvidia.com/gpu"] = "2"
    mixed = node_object("mixed", [16, 16, 8], ip="10.9.0.6")
    del mixed["metadata"]["annotations"]
    return [
        node_object("healthy", [16, 16], ip="10.9.0.1"),
        node_object("no-plugin", [], ip="10.9.0.2", labels={"gpushare": "true"}),
        both,
        node_object("unlabelled", [], ip="10.9.0.4", labels={"nvidia.com/gpu.present": "true"}),
        _with_status(
            node_object("sick", [16, 16], ip="10.9.0.5"), **{"aliyun.com/gpu-mem": "16", "aliyun.com/gpu-count": "1"}
        ),
        mixed,
        node_object("over", [8], ip="10.9.0.7"),
        node_object("no-daemon", [16], ip="10.9.0.8"),
        node_object("unready", [16], ip="10.9.0.9"),
        _daemon("extender", "gpushare-schd-extender", "healthy"),
        _daemon("extender-unready", "gpushare-schd-extender", "unready", ready=False),
        *(_daemon(f"plugin-{node}", "gpushare-device-plugin", node) for node in PLUGIN_NODES),
        _daemon("plugin-unready", "gpushare-device-plugin", "unready", ready=False),
        unhealthy_configmap("sick", [1]),
        {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "scheduler-config", "namespace": "kube-system"},
            "data": {
                "config.yaml": "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
            },
        },
        pod_object("fine", "team-a", [4], node="healthy", gpu=0, gpu_memory=16),
        pod_object("stuck", "team-a", [4], node="healthy", gpu=1, gpu_memory=16, phase="Pending", assigned=False,
                   assume_time=LONG_AGO_NS),
        pod_object("finished", "team-b", [4], node="healthy", gpu=1, gpu_memory=16, phase="Succeeded"),
        pod_object("bad-index", "team-b", [2], node="healthy", annotations={"ALIYUN_COM_GPU_MEM_IDX": "x"}),
        pod_object("first", "team-c", [6], node="over", gpu=0, gpu_memory=8),
        pod_object("second", "team-c", [6], node="over", gpu=0, gpu_memory=8),
        *hami_seed(),
        *confinement(("Warn",)),  # bound, but only to warn: the plugin is not confined
        *dra_seed(),
    ]


def pool_unusable() -> list[dict[str, Any]]:
    """A DRA node whose pool is incomplete (one slice of a resourceSliceCount of 2): one warning, said once."""
    gi = "1Gi"
    piece = dra.resource_slice("dra-a", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", gi, "T4", "dra-a")], "aaaaa")
    piece["spec"]["pool"]["resourceSliceCount"] = 2
    return [node_object("dra-a", [], ip="10.9.3.1", gpushare=False, dra=True), piece]


def prefilter() -> list[dict[str, Any]]:
    """Pending pods created just now that kube-scheduler's DynamicResources PreFilter refuses at once.

    ``going`` asks for claim ``held``, which its user deleted while pod ``holder`` still uses it (the
    delete-protection finalizer keeps it); ``crowded`` asks for claim ``full``, reserved for 256 running pods
    (ResourceClaimReservedForMaxSize); ``classless``'s claim names a class that does not exist. The consumers are
    real pods: the resourceclaim controller drops a reservation whose pod is gone.
    """
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ns = "team-p"

    def pending(name: str, claim: str) -> dict[str, Any]:
        item = dra.shared_pod(name, "", claim, namespace=ns)
        item["status"]["phase"] = "Pending"
        item["metadata"]["creationTimestamp"] = now
        return item

    held = dra.claim("held", "dra-p", "gpu-0", "4Gi", ["holder"], namespace=ns)
    held["metadata"]["deletionTimestamp"] = now
    users = [f"user-{i}" for i in range(256)]
    devices = [dra.our_device(i, "16Gi", "1Gi", "T4", "dra-p") for i in range(2)]
    return [
        dra.device_class(),
        node_object("dra-p", [], ip="10.9.5.1", gpushare=False, dra=True),
        dra.resource_slice("dra-p", dra.OUR_DRIVER, devices, "ppppp"),
        held, dra.shared_pod("holder", "dra-p", "held", namespace=ns), pending("going", "held"),
        dra.claim("full", "dra-p", "gpu-1", "1Gi", users, namespace=ns),
        *(dra.shared_pod(user, "dra-p", "full", namespace=ns) for user in users), pending("crowded", "full"),
        dra.dra_pod("classless", "", "classless-gpu", phase="Pending", namespace=ns, created=now),
        dra.pending_claim("classless-gpu", "classless", "4Gi", namespace=ns, device_class=dra.NVIDIA_DRIVER),
    ]


def claim_order(first: str, second: str) -> list[dict[str, Any]]:
    """Pending pod ``both`` (created long ago) naming claims ``first`` then ``second``, of: ``absent``, which does
    not exist; ``held``, being deleted (the finalizer keeps it while ``holder`` uses it); ``bad``, pending with a
    request kube-scheduler refuses (not a DNS label). kube-scheduler stops at the first claim missing or being
    deleted in the pod's order (``foreachPodResourceClaim``, PreEnqueue), before any claim's spec is looked at."""
    ns = "team-o"
    both = dra.shared_pod("both", "", first, namespace=ns)
    both["spec"]["resourceClaims"] = [{"name": "one", "resourceClaimName": first},
                                      {"name": "two", "resourceClaimName": second}]
    both["spec"]["containers"][0]["resources"] = {"claims": [{"name": "one"}, {"name": "two"}]}
    both["status"]["phase"] = "Pending"
    both["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    held = dra.claim("held", "dra-o", "gpu-0", "4Gi", ["holder"], namespace=ns)
    held["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
    bad = dra.pending_claim("bad", "both", "4Gi", namespace=ns)
    requests = bad["spec"]["devices"]["requests"]
    requests.append({**requests[0], "name": "Not_A_Label"})
    return [
        dra.device_class(),
        node_object("dra-o", [], ip="10.9.6.1", gpushare=False, dra=True),
        dra.resource_slice("dra-o", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-o")], "ooooo"),
        held, dra.shared_pod("holder", "dra-o", "held", namespace=ns), bad, both,
    ]


def claim_owner() -> list[dict[str, Any]]:
    """Pending pods (created long ago) whose template claims ``status.resourceClaimStatuses`` names: ``mine`` names
    ``theirs-gpu``, made for pod ``theirs`` (its controlling owner), which kube-scheduler refuses as not the pod's
    (``resourceclaim.IsForPod``); ``own`` names ``own-gpu``, allocated and its own, which is."""
    ns = "team-w"
    mine = dra.dra_pod("mine", "", "theirs-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z")
    own = dra.dra_pod("own", "", "own-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z")
    return [
        dra.device_class(),
        node_object("dra-w", [], ip="10.9.7.1", gpushare=False, dra=True),
        dra.resource_slice("dra-w", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-w")], "wwwww"),
        dra.pending_claim("theirs-gpu", "theirs", "4Gi", namespace=ns),
        dra.dra_pod("theirs", "", "theirs-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z"),
        dra.claim("own-gpu", "dra-w", "gpu-0", "4Gi", [], owner="own", namespace=ns), mine, own,
    ]


def claims_not_needed() -> list[dict[str, Any]]:
    """Pending pod ``lean`` (created long ago) with template entries ``a`` and ``b`` whose
    ``status.resourceClaimStatuses`` entries name no claim (absent, null: none was needed, ``resourceclaim.Name`` gives
    no name and kube-scheduler skips them), then ``gpu``, whose claim ``lean-gpu`` waits to be allocated."""
    ns = "team-l"
    lean = dra.dra_pod("lean", "", "lean-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z")
    lean["spec"]["resourceClaims"][:0] = [{"name": "a", "resourceClaimTemplateName": "gpu-mem-4gi"},
                                          {"name": "b", "resourceClaimTemplateName": "gpu-mem-4gi"}]
    lean["status"]["resourceClaimStatuses"][:0] = [{"name": "a"}, {"name": "b", "resourceClaimName": None}]
    return [
        dra.device_class(),
        node_object("dra-l", [], ip="10.9.8.1", gpushare=False, dra=True),
        dra.resource_slice("dra-l", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-l")], "lllll"),
        dra.pending_claim("lean-gpu", "lean", "4Gi", namespace=ns), lean,
    ]


def claim_entries(entries: Any) -> list[dict[str, Any]]:
    """Pending pod ``broken`` (created long ago) whose ``spec.resourceClaims`` is ``entries``, which do not read as
    entries (kube-apiserver refuses such a pod; the sandbox's storage holds what it is given), beside
    a node of our driver and its claim ``broken-gpu``, waiting."""
    ns = "team-u"
    broken = dra.dra_pod("broken", "", "broken-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z")
    broken["spec"]["resourceClaims"] = entries
    return [
        dra.device_class(),
        node_object("dra-u", [], ip="10.9.9.1", gpushare=False, dra=True),
        dra.resource_slice("dra-u", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-u")], "uuuuu"),
        dra.pending_claim("broken-gpu", "broken", "4Gi", namespace=ns), broken,
    ]


def claim_twice() -> list[dict[str, Any]]:
    """Pods each naming one claim from two entries (pod validation refuses only two entries of one name): ``twice``,
    pending (created long ago), its claim ``x`` (6Gi) unallocated, room for it twice on node ``dra-2``'s 16Gi GPU;
    ``placed``, on ``dra-2``, its claim ``y`` (4Gi) allocated and reserved for it (as a file or a tampered store
    may show: kube-scheduler never binds such a pod)."""
    ns = "team-2"
    pods = []
    for name, claim, node in (("twice", "x", ""), ("placed", "y", "dra-2")):
        item = dra.shared_pod(name, node, claim, namespace=ns)
        item["spec"]["resourceClaims"] = [{"name": "one", "resourceClaimName": claim},
                                          {"name": "two", "resourceClaimName": claim}]
        item["spec"]["containers"][0]["resources"] = {"claims": [{"name": "one"}, {"name": "two"}]}
        item["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
        pods.append(item)
    pods[0]["status"]["phase"] = "Pending"
    return [
        dra.device_class(),
        node_object("dra-2", [], ip="10.9.9.3", gpushare=False, dra=True),
        dra.resource_slice("dra-2", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-2")], "22222"),
        dra.pending_claim("x", "twice", "6Gi", namespace=ns), dra.claim("y", "dra-2", "gpu-0", "4Gi", ["placed"],
                                                                        namespace=ns), *pods,
    ]


def claim_others(nic_node: str = "dra-n", nic_users: int = 1) -> list[dict[str, Any]]:
    """Pending pod ``wired`` (created long ago) whose claims are, in order: ``nic``, a claim of another driver (a NIC's)
    created by hand and allocated on ``nic_node`` for ``nic_users`` other pods there; ``wired-link``, made from a
    template for it, its own, of that driver and allocated on node ``dra-n`` too; ``wired-gpu``, ours, waiting.
    kube-scheduler finds every claim, whatever its driver (``foreachPodResourceClaim``), so the pod waits for its GPU
    claim alone, unless the NIC claim is on another node (Filter) or reserved for as many pods as it may be
    (PreFilter's ``resourceclaim in use``)."""
    ns, nic = "team-n", "nic.example.com"
    users = ["peer", *(f"user-{i}" for i in range(nic_users - 1))]
    wired = dra.dra_pod("wired", "", "wired-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z")
    wired["spec"]["resourceClaims"][:0] = [{"name": "nic", "resourceClaimName": "nic"},
                                           {"name": "link", "resourceClaimTemplateName": "nic-link"}]
    wired["status"]["resourceClaimStatuses"][:0] = [{"name": "link", "resourceClaimName": "wired-link"}]
    link = dra.claim("wired-link", "dra-n", "link-0", None, [], driver=nic, owner="wired", namespace=ns)
    link["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] = "link"
    return [
        dra.device_class(),
        node_object("dra-n", [], ip="10.9.9.1", gpushare=False, dra=True),
        dra.resource_slice("dra-n", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-n")], "nnnnn"),
        dra.claim("nic", nic_node, "nic-0", None, users, driver=nic, namespace=ns),
        *(dra.shared_pod(user, nic_node, "nic", namespace=ns) for user in users), link,
        dra.pending_claim("wired-gpu", "wired", "4Gi", namespace=ns), wired,
    ]


def claim_other_deleting() -> list[dict[str, Any]]:
    """Pending pod ``lone`` (created long ago, on no node) whose claims are, in order: ``lone-gpu``, ours, allocated
    on ``dra-q`` and reserved for nobody yet; ``lone-nic``, of another driver (a NIC's class), not allocated and
    being deleted (a finalizer holds it). kube-scheduler stops at the claim being deleted whatever its driver
    (``foreachPodResourceClaim``, PreEnqueue), so the pod is not being bound."""
    ns = "team-q"
    lone = dra.dra_pod("lone", "", "lone-gpu", phase="Pending", namespace=ns, created="2020-01-01T00:00:00Z")
    lone["spec"]["resourceClaims"].append({"name": "nic", "resourceClaimName": "lone-nic"})
    nic = dra.pending_claim("lone-nic", "lone", "1Gi", namespace=ns, device_class="nic.example.com")
    nic["metadata"].update(deletionTimestamp="2020-01-01T00:00:00Z", finalizers=["nic.example.com/hold"])
    del nic["metadata"]["ownerReferences"], nic["metadata"]["annotations"]
    return [
        dra.device_class(),
        node_object("dra-q", [], ip="10.9.9.2", gpushare=False, dra=True),
        dra.resource_slice("dra-q", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-q")], "qqqqq"),
        dra.claim("lone-gpu", "dra-q", "gpu-0", "4Gi", [], owner="lone", namespace=ns), nic, lone,
    ]


def hostile_names() -> list[dict[str, Any]]:
    """Findings on a node, a pod and a namespace named with `HOSTILE`: a node without its device-plugin pod,
    a pod stuck unassigned on it, a finished pod still holding an annotation whose value is hostile too, and a
    pod that does not decode (a warning on stderr)."""
    node = f"gpu{HOSTILE}"
    stuck = pod_object(f"stuck{HOSTILE}", "team-a", [4], node=node, gpu=0, gpu_memory=16, phase="Running",
                       assigned=False, assume_time=LONG_AGO_NS)
    finished = pod_object("finished", f"ns{HOSTILE}", [4], node=node, gpu=0, gpu_memory=16, phase="Succeeded",
                          assigned=True)
    finished["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] = f"0{HOSTILE}"
    undecodable = pod_object(f"broken{HOSTILE}", "team-a", [4])
    undecodable["spec"]["containers"] = 5  # skipped with a warning on stderr that names it
    return [node_object(node, [16], ip="10.9.4.1"), stuck, finished, undecodable]


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(), f"doctor {name} differs from the golden file"
