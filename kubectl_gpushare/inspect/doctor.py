"""``kubectl gpushare doctor``: an audit of a gpushare install, one finding per line.

Checks nodes and pods (from the API or ``--from-file``) for what breaks GPU sharing in practice,
each finding with a severity (``error`` breaks scheduling or over-commits a GPU; ``warning`` is
likely wrong). Numbers come from the same records and ledger inspect uses, so an over-committed
GPU here is over-committed in the tables too. Pure: decoded objects and the clock in, findings out.

The JSON is a versioned ``GPUShareDoctor`` (``gpushare.kubectl-gpushare.io/v1``); fields are only
ever added::

    summary: {errors, warnings}
    findings: [{severity, check, object, message}]
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import caps, doctor_dra, tabwriter
from kubectl_gpushare.inspect.findings import ERROR, WARNING, Finding
from kubectl_gpushare.inspect.label_nodes import NVIDIA_GPU, has_nvidia_gpus
from kubectl_gpushare.inspect.source import Confinement, PodKeys, StackSplit, keyed_pod_record, node_ips
from kubectl_gpushare.kube import stacks
from kubectl_gpushare.kube.errors import EXIT_FINDINGS_ERRORS, EXIT_FINDINGS_WARNINGS, EXIT_OK
from kubectl_gpushare.kube.records import (
    Warnings,
    node_record,
    unhealthy_gpus,
    unhealthy_node_name,
)
from kubectl_gpushare.kube.stacks import hami, kai
from kubectl_gpushare.kube.stacks.dra import DraObjects, reserved_pods
from kubectl_gpushare.kube.types import ConfigMap, KoordDevice, Node, Pod, QuantityValue
from kubectl_gpushare.ledger import PENDING, Ledger, NodeRecord, PodRecord, StackClaim, StackNode, stack_usage
from kubectl_gpushare.protocol import shown_value

API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1"
KIND: Final = "GPUShareDoctor"
DEFAULT_STUCK_AFTER: Final = 300.0
"""Seconds a pod may stay ``ALIYUN_COM_GPU_MEM_ASSIGNED=false`` before it is reported (kubelet
normally allocates within seconds of the bind)."""
SYSTEM_NAMESPACE: Final = protocol.UNHEALTHY_CM_NAMESPACE
"""Where ConfigMaps are audited (kube-system): unhealthy-GPU lists and scheduler configurations."""
COMPONENT_LABEL: Final = "component"
EXTENDER_COMPONENT: Final = "gpushare-schd-extender"
DEVICE_PLUGIN_COMPONENT: Final = "gpushare-device-plugin"
"""Pod labels of the shipped (and the original) extender Deployment and device-plugin DaemonSet."""
CONFINEMENT_POLICY: Final = "gpushare-device-plugin-confinement"
"""The shipped ValidatingAdmissionPolicy (and binding) that keeps the device plugin to its node; a policy
labelled ``component=gpushare-device-plugin`` counts too (renamed by an overlay)."""


class Summary(msgspec.Struct, frozen=True):
    """How many findings of each severity."""

    errors: int
    warnings: int


class DoctorReport(msgspec.Struct, rename="camel"):
    """Every finding, errors first, then by check and object."""

    summary: Summary
    findings: list[Finding]
    api_version: str = API_VERSION
    kind: str = KIND

    @property
    def exit_code(self) -> int:
        """The verdict, from the shared exit-code table: 0 clean, 11 warnings only, 12 errors."""
        if self.summary.errors:
            return EXIT_FINDINGS_ERRORS
        return EXIT_FINDINGS_WARNINGS if self.summary.warnings else EXIT_OK


def _has(values: Mapping[str, QuantityValue], resource: str) -> bool:
    return str(values.get(resource, "0")) not in ("0", "")


def _node_findings(node: Node, record: NodeRecord) -> Iterable[Finding]:
    name = node.metadata.name
    obj = f"node/{name}"
    labels = node.metadata.labels
    capacity = node.status.capacity
    labelled = labels.get(protocol.LABEL_GPUSHARE) == "true"
    shares = _has(capacity, protocol.RESOURCE_MEM)
    if labelled and not shares:
        yield Finding(ERROR, "device-plugin-missing", obj,
                      f"labelled {protocol.LABEL_GPUSHARE}=true but advertises no {protocol.RESOURCE_MEM}: "
                      "the gpushare device plugin is not running there")
    if not labelled and has_nvidia_gpus(node) and not shares:
        yield Finding(WARNING, "gpu-node-unlabelled", obj,
                      f"has NVIDIA GPUs but no {protocol.LABEL_GPUSHARE}=true label, so no GPU sharing there "
                      "(kubectl gpushare label-nodes)")
    if shares and _has(capacity, NVIDIA_GPU):
        yield Finding(ERROR, "two-device-plugins", obj,
                      f"advertises both {NVIDIA_GPU} and {protocol.RESOURCE_MEM}: two device plugins hand out "
                      "the same GPUs, so pods of both kinds can land on one GPU")
    if shares and (record.cap_mem, record.cap_count) != (record.alloc_mem, record.alloc_count):
        yield Finding(WARNING, "unhealthy-gpus", obj,
                      f"capacity {record.cap_mem}/{record.cap_count} GPUs but allocatable "
                      f"{record.alloc_mem}/{record.alloc_count}: the device plugin reports unhealthy GPUs")
    if shares and record.cap_count > 0 and record.gpu_mems is None and record.cap_mem % record.cap_count:
        yield Finding(WARNING, "mixed-gpus-unannotated", obj,
                      f"{record.cap_mem} over {record.cap_count} GPUs does not divide evenly (mixed GPU sizes?) and "
                      f"annotation {protocol.ANN_NODE_GPUS} is missing: every GPU is assumed to have "
                      f"{record.cap_mem // record.cap_count}")


def _pod_findings(pod: Pod, record: PodRecord, now_ns: int, stuck_after: float) -> Iterable[Finding]:
    """A pod's own findings; ``record`` is its `pod_record` (the ledger's, so its annotations are parsed once)."""
    meta = pod.metadata
    annotations = meta.annotations
    if protocol.pod_phase_terminal(pod.status.phase):
        if protocol.ANN_IDX in annotations:
            yield Finding(WARNING, "completed-holding", f"pod/{meta.namespace}/{meta.name}",
                          f"{pod.status.phase} but still annotated {protocol.ANN_IDX}={annotations[protocol.ANN_IDX]}; "
                          "it no longer counts, delete it to tidy up")
        return
    if pod.spec.node_name and protocol.ANN_IDX not in annotations and record.request > 0:
        # The extender writes its annotations before it binds: a bound pod without them was bound by hand
        # (nodeName set) or by another scheduler. The device plugin, matching Allocate by size, may give
        # it the GPU another pod was placed on.
        yield Finding(ERROR, "bypassed-extender", f"pod/{meta.namespace}/{meta.name}",
                      f"holds {protocol.RESOURCE_MEM} on {pod.spec.node_name} without the extender's "
                      f"{protocol.ANN_IDX} annotation: it was bound without the gpushare scheduler extender, so "
                      "no GPU was chosen for it and the device plugin may hand it another pod's GPU; delete it "
                      "and create it without nodeName")
    if record.assigned == protocol.ASSIGNED_FALSE and pod.spec.node_name:
        assumed = record.assume_time
        if assumed and now_ns - assumed > stuck_after * 1e9:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(assumed // 1_000_000_000))
            yield Finding(WARNING, "assigned-stuck", f"pod/{meta.namespace}/{meta.name}",
                          f"bound to {pod.spec.node_name} at {when} but still {protocol.ANN_ASSIGNED}=false after "
                          f"more than {stuck_after:g}s: the device plugin on that node has not allocated it")


def _workload_findings(nodes: Sequence[Node], pods: Sequence[Pod]) -> Iterable[Finding]:
    """The extender and the device plugin, judged by their pods' ``Ready`` condition (what serves)."""
    live = [pod for pod in pods if not protocol.pod_phase_terminal(pod.status.phase)]
    shares = [node for node in nodes if _has(node.status.capacity, protocol.RESOURCE_MEM)]
    extenders = [pod for pod in live if pod.metadata.labels.get(COMPONENT_LABEL) == EXTENDER_COMPONENT]
    selector = f"pods/{COMPONENT_LABEL}={EXTENDER_COMPONENT}"
    if shares and not extenders:
        yield Finding(ERROR, "extender-missing", selector,
                      "no scheduler-extender pod exists: kube-scheduler cannot pick a GPU, and pods asking "
                      f"for {protocol.RESOURCE_MEM} stay Pending (kubectl gpushare manifests --only extender)")
    elif shares and not any(pod.status.ready for pod in extenders):
        names = ", ".join(sorted(f"{pod.metadata.namespace}/{pod.metadata.name}" for pod in extenders))
        yield Finding(ERROR, "extender-not-ready", selector,
                      f"no scheduler-extender pod is Ready ({names}): kube-scheduler cannot reach it, and pods "
                      f"asking for {protocol.RESOURCE_MEM} stay Pending")
    plugins: dict[str, list[Pod]] = {}
    for pod in live:
        if pod.metadata.labels.get(COMPONENT_LABEL) == DEVICE_PLUGIN_COMPONENT:
            plugins.setdefault(pod.spec.node_name, []).append(pod)
    for node in nodes:
        labelled = node.metadata.labels.get(protocol.LABEL_GPUSHARE) == "true"
        if not (labelled and _has(node.status.capacity, protocol.RESOURCE_MEM)):
            continue
        on_node = plugins.get(node.metadata.name, [])
        if not on_node:
            yield Finding(WARNING, "device-plugin-not-running", f"node/{node.metadata.name}",
                          f"no device-plugin pod ({COMPONENT_LABEL}={DEVICE_PLUGIN_COMPONENT}) on this "
                          "node: new pods cannot get their GPU")
        elif not any(pod.status.ready for pod in on_node):
            names = ", ".join(sorted(f"{pod.metadata.namespace}/{pod.metadata.name}" for pod in on_node))
            yield Finding(WARNING, "device-plugin-not-ready", f"node/{node.metadata.name}",
                          f"the device-plugin pod on this node is not Ready ({names}): new pods may not get "
                          "their GPU")


def _confinement_findings(confinement: Confinement | None, pods: Sequence[Pod]) -> Iterable[Finding]:
    """The device plugin runs but no policy keeps it to its own node (docs/operating.md, "Node confinement")."""
    plugins = [pod for pod in pods if pod.metadata.labels.get(COMPONENT_LABEL) == DEVICE_PLUGIN_COMPONENT
               and not protocol.pod_phase_terminal(pod.status.phase)]
    if confinement is None or not plugins:
        return
    risk = "a broken-into GPU node can rewrite any pod's GPU assignment or any node's capacity"
    if not confinement.served:
        yield Finding(WARNING, "node-confinement-missing", f"validatingadmissionpolicy/{CONFINEMENT_POLICY}",
                      "the API server serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies "
                      f"(Kubernetes before 1.30), so nothing keeps the device plugin to its own node: {risk}")
        return
    ours = sorted(p.metadata.name for p in confinement.policies
                  if p.metadata.name == CONFINEMENT_POLICY or p.metadata.labels.get(COMPONENT_LABEL)
                  == DEVICE_PLUGIN_COMPONENT)
    if not ours:
        yield Finding(WARNING, "node-confinement-missing", f"validatingadmissionpolicy/{CONFINEMENT_POLICY}",
                      f"the device plugin runs ({len(plugins)} pod(s)) but no ValidatingAdmissionPolicy keeps it to "
                      f"its own node: {risk} (kubectl gpushare manifests --only device-plugin; Kubernetes 1.30+)")
        return
    denying = {b.spec.policy_name for b in confinement.bindings if "Deny" in b.spec.validation_actions}
    if not denying.intersection(ours):
        yield Finding(WARNING, "node-confinement-missing", f"validatingadmissionpolicybinding/{ours[0]}",
                      f"ValidatingAdmissionPolicy {ours[0]} has no binding with validationActions Deny, so it "
                      f"refuses nothing and the device plugin is not kept to its own node: {risk}")


_OUTDATED_SCHEDULER_APIS: Final = (
    ("kubescheduler.config.k8s.io/v1beta2", "removed in Kubernetes 1.28"),
    ("kubescheduler.config.k8s.io/v1beta3", "removed in Kubernetes 1.29"),
)


def _scheduler_config_finding(configmap: ConfigMap) -> Finding | None:
    """A kube-scheduler configuration kept in a ConfigMap that today's kube-scheduler refuses."""
    obj = f"configmap/{configmap.metadata.namespace}/{configmap.metadata.name}"
    for key, text in sorted(configmap.data.items()):
        compact = " ".join(text.split())
        if "kind: Policy" in compact or '"kind": "Policy"' in compact or '"kind":"Policy"' in compact:
            return Finding(ERROR, "scheduler-config-outdated", obj,
                           f"{key} is a scheduler Policy (--policy-config-file, removed in Kubernetes 1.23): "
                           "use KubeSchedulerConfiguration v1 (kubectl gpushare manifests --only scheduler-config)")
        if "KubeSchedulerConfiguration" in compact:
            for api, removed in _OUTDATED_SCHEDULER_APIS:
                if api in compact:
                    return Finding(ERROR, "scheduler-config-outdated", obj,
                                   f"{key} is a KubeSchedulerConfiguration {api.rsplit('/', 1)[1]} ({removed}): "
                                   "use kubescheduler.config.k8s.io/v1")
    return None


def _configmap_findings(configmaps: Sequence[ConfigMap]) -> Iterable[Finding]:
    for configmap in configmaps:
        outdated = _scheduler_config_finding(configmap)
        if outdated is not None:
            yield outdated
        node = unhealthy_node_name(configmap)
        gpus = unhealthy_gpus(configmap)
        if node and gpus:
            listed = ",".join(str(index) for index in sorted(gpus))
            yield Finding(WARNING, "unhealthy-gpus-listed",
                          f"configmap/{configmap.metadata.namespace}/{configmap.metadata.name}",
                          f"marks GPU(s) {listed} of node {node} unhealthy: the extender places nothing there")


def _overcommitted(ledger: Ledger, name: str) -> bool:
    return any(d.index != PENDING and d.used > d.total for d in ledger.usage(name, pods=False).devices.values())


def _ledger_findings(ledger: Ledger, names: Sequence[str]) -> Iterable[Finding]:
    """Over-committed GPUs with the pods on them (``ledger`` keeps pods)."""
    for name in names:
        usage = ledger.usage(name)
        for device in usage.devices.values():
            if device.index == PENDING or device.used <= device.total:
                continue
            pods = ", ".join(f"{pod.namespace}/{pod.name}" for pod, _ in device.pods)
            yield Finding(ERROR, "gpu-overcommitted", f"node/{name}",
                          f"GPU {device.index} holds {device.used} of {device.total}: {pods}")


def _utc(seconds: float) -> str:
    """A unix time as ``YYYY-MM-DDTHH:MM:SSZ``, clamped to years 1..9999 so any parsed time prints."""
    clamped = min(max(seconds, -62_135_596_800.0), 253_402_300_799.0)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clamped))


def _hami_node_findings(node: Node, now: float) -> Iterable[Finding]:
    """HAMi's node-side failures: a handshake left at ``Requesting_`` and a node lock nobody releases."""
    obj = f"node/{node.metadata.name}"
    annotations = node.metadata.annotations
    for key in sorted(k for k in annotations if k.startswith(protocol.HAMI_ANN_HANDSHAKE)):
        if key != protocol.HAMI_ANN_HANDSHAKE and not key.startswith(protocol.HAMI_ANN_HANDSHAKE + "-"):
            continue  # NVIDIA's is hami.io/node-handshake, other vendors' hami.io/node-handshake-<vendor>
        requested = hami.handshake_requested_at(annotations[key])
        if requested is not None and now - requested > protocol.HAMI_HANDSHAKE_STALE_SECONDS:
            yield Finding(WARNING, "hami-handshake-stuck", obj,
                          f"{shown_value(key)} still Requesting_ since {_utc(requested)} (more than "
                          f"{protocol.HAMI_HANDSHAKE_STALE_SECONDS}s): HAMi's device plugin there is not answering, "
                          "so its scheduler treats those devices as gone")
    lock = annotations.get(protocol.HAMI_ANN_MUTEX_LOCK)
    if lock is None:
        return
    parsed = hami.parse_mutex_lock(lock)
    if parsed is None:
        yield Finding(WARNING, "hami-mutex-stuck", obj,
                      f"{protocol.HAMI_ANN_MUTEX_LOCK}={shown_value(lock)} has no readable time: "
                      "HAMi cannot expire it, so no pod is bound to this node until the annotation is removed")
        return
    taken, holder = parsed
    by = f" by {holder}" if holder else ""
    if now - taken > protocol.HAMI_MUTEX_STALE_SECONDS:
        yield Finding(WARNING, "hami-mutex-stuck", obj,
                      f"{protocol.HAMI_ANN_MUTEX_LOCK} taken{by} at {_utc(taken)}, more than "
                      f"{protocol.HAMI_MUTEX_STALE_SECONDS}s ago: a bind never released it; binds on this node wait "
                      "until HAMi expires it or the annotation is removed")
    elif taken - now > protocol.HAMI_MUTEX_STALE_SECONDS:
        yield Finding(WARNING, "hami-mutex-stuck", obj,
                      f"{protocol.HAMI_ANN_MUTEX_LOCK} taken{by} at {_utc(taken)}, in the future (clock skew?): "
                      "HAMi will not expire it before then")


def _hami_pod_findings(pod: Pod) -> Iterable[Finding]:
    """A pod HAMi failed to bind: it holds no GPU and kube-scheduler may keep retrying it."""
    meta = pod.metadata
    if (meta.annotations.get(protocol.HAMI_ANN_BIND_PHASE) != hami.BIND_FAILED
            or protocol.pod_phase_terminal(pod.status.phase)):
        return
    node = pod.spec.node_name or meta.annotations.get(protocol.HAMI_ANN_NODE, "")
    on = f" to {shown_value(node)}" if node else ""
    yield Finding(ERROR, "hami-bind-failed", f"pod/{meta.namespace}/{meta.name}",
                  f"{protocol.HAMI_ANN_BIND_PHASE}=failed: HAMi could not bind it{on}; it holds no GPU "
                  "(see the HAMi scheduler's log, then delete the pod to retry)")


def _stack_findings(stack_nodes: Sequence[StackNode], claims: Mapping[str, list[StackClaim]]) -> Iterable[Finding]:
    """A GPU of another stack whose claims exceed what it has, counted in its own unit."""
    for node in stack_nodes:
        for device in stack_usage(node, claims.get(node.name, [])):
            if device.gpu.index == PENDING or device.used <= device.gpu.total:
                continue
            pods = ", ".join(f"{claim.namespace}/{claim.name}" for claim in device.claims)
            which = f" ({device.gpu.id})" if device.gpu.id else ""
            yield Finding(ERROR, "stack-gpu-overcommitted", f"node/{node.name}",
                          f"{node.stack} GPU {device.gpu.index}{which} holds {device.used} of {device.gpu.total} "
                          f"{device.gpu.unit}: {pods}")


def _enforcement_findings(node: Node) -> Iterable[Finding]:
    """GPUs where the device plugin was asked to enforce memory limits and cannot (it says why).

    ``--enforce-memory off`` (the binary's default, a drop-in for Alibaba's plugin) is the operator's
    choice, reported with an empty reason: `top` shows it (ENFORCED no), doctor does not.
    """
    if not _has(node.status.capacity, protocol.RESOURCE_MEM):
        return
    found = protocol.parse_node_gpu_enforcement(node.metadata.annotations.get(protocol.ANN_NODE_GPUS))
    by_reason: dict[str, list[int]] = {}
    for index, enforcement in sorted(found.items()):
        if enforcement.mode == protocol.ENFORCE_OFF and enforcement.reason:
            by_reason.setdefault(enforcement.reason, []).append(index)
    for reason, indices in sorted(by_reason.items()):
        listed = ", ".join(str(index) for index in indices)
        yield Finding(WARNING, "memory-unenforced", f"node/{node.metadata.name}",
                      f"GPU {listed} shared without the memory limits the device plugin was asked for: a pod can "
                      f"take its neighbours' memory ({reason})")


def _usage_findings(reports: Mapping[str, protocol.UsageReport | None]) -> Iterable[Finding]:
    """Pods using more than their share: an error where unenforced neighbours share the GPU, else a warning."""
    for node, report in sorted(reports.items()):
        if report is None:
            continue
        enforced = {gpu.index: gpu.enforcement != protocol.ENFORCE_OFF for gpu in report.gpus}
        on_gpu: dict[int, set[tuple[str, str]]] = {}
        for pod in report.pods:
            on_gpu.setdefault(pod.gpu, set()).add((pod.namespace, pod.name))
        for pod in report.pods:
            if pod.used_bytes is None or pod.used_bytes <= pod.allocated_bytes:
                continue
            neighbours = len(on_gpu[pod.gpu] - {(pod.namespace, pod.name)})
            at_risk = neighbours > 0 and not enforced.get(pod.gpu, False)
            obj = f"pod/{pod.namespace}/{pod.name}"  # bounded by protocol.decode_usage_report
            risk = (f"{neighbours} other pod(s) share GPU {pod.gpu} without memory limits and may run out of memory"
                    if at_risk else "no unenforced neighbour is at risk")  # fmt: skip
            yield Finding(ERROR if at_risk else WARNING, "gpu-over-share", obj,
                          f"uses {pod.used_bytes >> 20}Mi of GPU {pod.gpu} on {node}, more than "
                          f"its share of {pod.allocated_bytes >> 20}Mi: {risk}")


_OTHER_STACK_KEYS: Final = (
    protocol.HAMI_ANN_ALLOCATED, protocol.VOLCANO_ANN_GPU_INDEX, protocol.VOLCANO_ANN_VGPU_IDS,
    protocol.KOORD_ANN_DEVICE_ALLOCATED,
)
"""Pod annotations by which another stack says it holds (part of) a GPU."""


def _two_stack_findings(pod: Pod, gpushare_nodes: frozenset[str]) -> Iterable[Finding]:
    """A pod on a gpushare node that another stack placed there: one GPU counted by two schedulers."""
    if pod.spec.node_name not in gpushare_nodes or protocol.pod_phase_terminal(pod.status.phase):
        return
    meta = pod.metadata
    if not _kai_labelled(meta.labels) and all(key not in meta.annotations for key in _OTHER_STACK_KEYS):
        return  # nearly every pod: what follows would find nothing
    by = "a KAI reservation pod" if kai.is_reservation(pod) else ""
    if not by and kai.groups(pod):
        by = "a KAI fractional pod"
    key = next((key for key in _OTHER_STACK_KEYS if key in meta.annotations), "")
    if not by and key:
        by = f"placed by another scheduler ({key})"
    if by:
        yield Finding(ERROR, "gpu-claimed-by-two-stacks", f"pod/{meta.namespace}/{meta.name}",
                      f"{by} on gpushare node {pod.spec.node_name}: its GPU is also shared by gpushare, and neither "
                      "scheduler counts the other's pods")


def _kai_labelled(labels: Mapping[str, str]) -> bool:
    """Whether a label names a KAI GPU group (``runai-gpu-group``, or one of the ``runai-gpu-group/<n>`` labels)."""
    return any(key.startswith(protocol.KAI_LABEL_GROUP) for key in labels)


def _stack_warning(message: str) -> Finding:
    """A decoder's warning as a finding: a KAI group without its reservation pod is a warning, the rest errors."""
    kind, _, rest = message.partition(" ")  # "pod NAMESPACE/NAME ..." or "node NAME ...": name the object
    obj = f"{kind}/{rest.split(' ', 1)[0].rstrip(':')}"
    if kai.NO_RESERVATION in message:
        return Finding(WARNING, "kai-group-without-reservation", obj, message)
    return Finding(ERROR, "invalid-value", obj, message)


_GPUSHARE_ONLY_CHECKS: Final = frozenset({"gpu-node-unlabelled"})
"""Node checks that only make sense for a node meant for gpushare: dropped for nodes of another stack."""


def _without_other_stacks(
    findings: list[Finding], nodes: Sequence[Node], detected: Sequence[str | None], objects: DraObjects
) -> list[Finding]:
    """Drop gpushare advice on nodes of another sharing stack (a second device plugin over their GPUs).

    A node that shares its GPUs through DRA (labelled for our driver, or publishing slices of ours or
    NVIDIA's) is such a node too: labelling it ``gpushare=true`` would sell its GPUs twice. ``detected``:
    each node's `stacks.detect`.
    """
    others = {
        f"node/{node.metadata.name}" for node, stack in zip(nodes, detected, strict=True)
        if stack not in (None, protocol.STACK_GPUSHARE) or node.metadata.labels.get(protocol.LABEL_DRA) == "true"
    }
    others.update(f"node/{piece.node_name}" for piece in objects.slices if piece.node_name)
    others.update(f"node/{piece.spec.node_name}" for piece in objects.nvidia if piece.spec.node_name)
    return [f for f in findings if not (f.check in _GPUSHARE_ONLY_CHECKS and f.object in others)]


_WORKLOADS: Final = frozenset({EXTENDER_COMPONENT, DEVICE_PLUGIN_COMPONENT})

Reread = Callable[[Sequence[str]], Iterable[Pod]]
"""Pods on the given nodes, read again: names the pods of over-committed GPUs."""


def audit(
    nodes: Sequence[Node],
    pods: Iterable[Pod],
    *,
    now_ns: int,
    stuck_after: float = DEFAULT_STUCK_AFTER,
    configmaps: Sequence[ConfigMap] = (),
    reread: Reread | None = None,
    usage: Mapping[str, protocol.UsageReport | None] | None = None,
    devices: Sequence[KoordDevice] = (),
    confinement: Confinement | None = None,
    dra_objects: DraObjects | None = None,
) -> DoctorReport:
    """Run every check.

    Pods are read once, as they come (a page at a time from the API): each is checked and counted
    in a ledger of sums, and only the few pods later checks need (the extender's and the device
    plugin's, pods on other stacks' nodes) are kept, so 100,000 pods never sit in memory. Nodes
    with an over-committed GPU (rare: an error) have their pods read again through ``reread`` to
    name them; the finding reports what that second read shows.

    Args:
        nodes: every node (not only gpushare ones: unlabelled GPU nodes are a finding).
        pods: every pod, completed ones included; iterated once when ``reread`` is given.
        configmaps: ConfigMaps of the unhealthy-GPU namespace (others are ignored).
        now_ns: the current time, unix nanoseconds (passed in, so the audit is reproducible).
        stuck_after: seconds before an unassigned bound pod is reported.
        reread: pods on the given nodes, read again; None reads ``pods`` twice (held as a list).
        usage: node -> its device plugin's usage document (None: it did not answer), for
            ``gpu-over-share``; None skips that check.
        devices: Koordinator's ``Device`` objects, where the API serves them (per-GPU memory, as inspect reads it).
        confinement: the cluster's admission policies and bindings, for ``node-confinement-missing``;
            None skips that check (they could not be read).
        dra_objects: ResourceSlices, ResourceClaims and DeviceClasses (`inspect.source.dra_from_api`):
            claims on our driver's GPUs count in the ledger as pods do; `doctor_dra` adds its checks.
    """
    if reread is None:
        held = list(pods)
        pods = held

        def reread(names: Sequence[str]) -> Iterable[Pod]:
            wanted = set(names)
            return (pod for pod in held if pod.spec.node_name in wanted)

    findings: list[Finding] = []
    record_warnings = Warnings()
    node_records = [node_record(node, warnings=record_warnings) for node in nodes]  # the checks' and the ledger's
    for node, read in zip(nodes, node_records, strict=True):
        findings.extend(_node_findings(node, read))
        findings.extend(_hami_node_findings(node, now_ns / 1e9))
        findings.extend(_enforcement_findings(node))
    findings.extend(_usage_findings(usage or {}))
    findings.extend(_configmap_findings([c for c in configmaps if c.metadata.namespace == SYSTEM_NAMESPACE]))
    split = StackSplit(stacks.AUTO, record_warnings, devices)
    keys = PodKeys(record_warnings)
    for node in nodes:
        split.gpushare(node)
    objects = dra_objects or DraObjects(served=False)
    node_records = split.add_dra(node_records, objects, node_ips(nodes))
    ledger = Ledger.build(node_records, (), basis="capacity", keep_pods=False)
    workloads: list[Pod] = []
    waiting: list[Pod] = []  # pending pods with claims: few, kept for doctor_dra
    reserved = reserved_pods(objects.claims)
    phases: dict[str, str] = {}
    detected = [stacks.detect(node) for node in nodes]
    gpushare_nodes = frozenset(
        node.metadata.name for node, stack in zip(nodes, detected, strict=True) if stack == protocol.STACK_GPUSHARE
    )
    for pod in pods:
        record = keys.record(pod)
        findings.extend(_pod_findings(pod, record, now_ns, stuck_after))
        findings.extend(_hami_pod_findings(pod))
        findings.extend(_two_stack_findings(pod, gpushare_nodes))
        findings.extend(doctor_dra.entry_findings(pod))
        ledger.set_pod(record)
        if split.nodes:
            split.add_pod(pod)
        if pod.metadata.labels.get(COMPONENT_LABEL) in _WORKLOADS:
            workloads.append(pod)
        if reserved and pod.metadata.uid in reserved:
            phases[pod.metadata.uid] = pod.status.phase
        if objects and not pod.spec.node_name and pod.spec.resource_claims:  # the last converts: asked least
            waiting.append(pod)
    claim_records = split.dra_records(node_records, objects, phases)
    for record in claim_records:
        ledger.set_pod(record)
    findings.extend(_workload_findings(nodes, workloads))
    findings.extend(_confinement_findings(confinement, workloads))
    over = [name for name in sorted(ledger.node_names()) if _overcommitted(ledger, name)]
    if over:
        names = set(over)
        again = Ledger.build((record for record in node_records if record.name in names),
                             (keyed_pod_record(pod) for pod in reread(over)), basis="capacity")
        for record in claim_records:
            if record.node in names:
                again.set_pod(record)
        findings.extend(_ledger_findings(again, over))
    if objects:
        findings.extend(doctor_dra.node_findings(nodes, objects, split.dra_nodes))
        findings.extend(doctor_dra.claim_findings(objects))
        findings.extend(doctor_dra.pending_findings(waiting, objects, now_ns / 1e9, stuck_after))
    findings.extend(doctor_dra.pool_findings(objects))  # every pool warning of the reading, as a finding
    findings.extend(_stack_findings(*split.result()))
    findings.extend(_stack_warning(message) for message in record_warnings)
    findings = _without_other_stacks(findings, nodes, detected, objects)
    findings.sort(key=lambda f: (f.severity != ERROR, f.check, f.object, f.message))
    errors = sum(1 for finding in findings if finding.severity == ERROR)
    return DoctorReport(Summary(errors, len(findings) - errors), findings)


def to_json(report: DoctorReport) -> str:
    """The report as indented JSON, ``apiVersion`` and ``kind`` first."""
    data = msgspec.to_builtins(report)
    ordered = {"apiVersion": data.pop("apiVersion"), "kind": data.pop("kind"), **data}
    return msgspec.json.format(msgspec.json.encode(ordered), indent=2).decode() + "\n"


def to_text(report: DoctorReport, *, headers: bool = True, limit: int | None = None) -> str:
    """The verdict first, then one line per finding, at most ``limit`` of them (`inspect.caps`).

    Objects and messages are written through `protocol.shown_text` (control characters as spaces, cut to
    the API's longest names); `to_json` keeps them exact, JSON escaping them itself.

    When findings are left out, a count per check comes between the verdict and the findings, so
    every check that fired is named however many objects it fired on.
    """
    errors, warnings = report.summary.errors, report.summary.warnings
    if not report.findings:
        return "No problems found.\n"
    lines = [f"{errors} error{'' if errors == 1 else 's'}, {warnings} warning{'' if warnings == 1 else 's'}.\n"]
    shown, hidden = caps.capped(report.findings, limit)
    if hidden:
        counts = Counter((f.severity, f.check) for f in report.findings)
        rows = ["SEVERITY\tCHECK\tFINDINGS\n"] if headers else []
        rows += [f"{severity}\t{check}\t{count}\n" for (severity, check), count in counts.items()]
        lines += ["\n", tabwriter.render("".join(rows))]
    rows = ["SEVERITY\tCHECK\tOBJECT\tMESSAGE\n"] if headers else []
    # The one rendering point for what objects said: names and values (pods, nodes, annotations) from the
    # cluster or a file pass `protocol.shown_text` here, so none writes an escape sequence, a tab, a newline or
    # a megabyte; an object is KIND/NAMESPACE/NAME (two names' room).
    rows += [f"{f.severity}\t{f.check}\t{protocol.shown_text(f.object, 2)}\t"
             f"{protocol.shown_text(f.message, protocol.SENTENCE_NAMES)}\n" for f in shown]
    lines += ["\n", tabwriter.render("".join(rows))]
    if hidden:
        lines.append(caps.more_line(hidden, "findings"))
    return "".join(lines)
