"""A kube-scheduler stand-in that runs continuously, for ``sandbox --stack`` and the demo.

Every pass it takes the unscheduled pods whose ``spec.schedulerName`` is ``default-scheduler`` (or
unset) and, one at a time, does what kube-scheduler does around its extenders: its own filters
in kube-scheduler's default order (pkg/scheduler/apis/config/v1 ``default_plugins.go``):
NodeUnschedulable (``spec.unschedulable``, passed by a toleration of its taint), TaintToleration
(a not-Ready node's ``node.kubernetes.io/not-ready`` taint, then the node's NoSchedule/NoExecute
taints, against the pod's tolerations, `kube.taints`), NodeAffinity (``nodeSelector`` and the
required node affinity, `node_affinity`, with its PreFilter's narrowing to the ``metadata.name``
of ``matchFields``), NodeResourcesFit on every resource the node advertises, `cli.noderesources`,
and DynamicResources for pods with ResourceClaims, `cli.dynamicresources`: claims allocated and
reserved through the claim's status before the Binding), then, for pods that name one of an
extender's ``managedResources`` in any container's requests or limits (`is_interested`), the
extender's filter, prioritize and bind over HTTP (`extender.schedsim.HTTPExtender`); other pods are
bound with a Binding. A pod no node fits gets a
``FailedScheduling`` Warning Event and a ``PodScheduled=False`` condition with the reasons (written when they change)
(``SchedulerError`` when a plugin, an extender call or the Binding fails rather than rejects: kube-scheduler's
``handleSchedulingFailure``, pkg/scheduler/schedule_one.go), and is retried with backoff (1 s
doubling to 16 s), at once when nodes or bound pods change. A pod whose claims do not exist yet (or
one being deleted) is not tried (PreEnqueue) until they do. Reads come from the sandbox's store in-process; every write
goes through the API.

Not done: scheduling profiles, preferred node affinity (scoring), inter-pod affinity and spreading,
preemption, priority queues. Where it differs: a pod whose ``spec.affinity`` or ``spec.tolerations``
does not have the API's shape (kube-apiserver refuses such a pod; the sandbox's storage may hold
one) matches no node by its affinity and tolerates no taint, and stays Pending with the reason.
A pod whose metadata, spec, ``spec.nodeName`` or ``spec.schedulerName`` has the wrong type is
left out of every pass (`unreadable_pod`, logged once; one whose status alone is malformed is read
with an empty status; a ``null`` in one of those strings is read as absent, as Go decodes it).
Any other pod whose cycle raises is logged in one line (``cannot schedule ns/pod: ...``) and
retried with backoff; the pods after it in the pass are still tried. A pod whose required node
affinity asks more than `AFFINITY_BUDGET` terms of its nodes in one cycle fails that cycle
(upstream asks them all, stalling its loop) and resumes from the verdicts kept on its next; so does
one whose affinity takes more than `AFFINITY_COMPILE_BUDGET` to compile (upstream compiles it at
once), the next cycle compiling on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import yaml

from kubectl_gpushare import protocol
from kubectl_gpushare.cli import noderesources
from kubectl_gpushare.cli.dynamicresources import (
    SCHEDULER_ERROR,
    DynamicResources,
    PassState,
    PodClaims,
    SchedulingError,
    Unschedulable,
    has_claims,
)
from kubectl_gpushare.extender.schedsim import ExtenderCallError, ExtenderConfig, HTTPExtender
from kubectl_gpushare.kube import deadlines, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import API_REQUEST_TIMEOUT, KubeError, did_not_happen, write_failure
from kubectl_gpushare.kube.taints import NOT_READY, TolerationIndex, decode_taints, decode_tolerations
from kubectl_gpushare.kube.types import Taint
from kubectl_gpushare.node_affinity import (
    AFFINITY_CONFLICT,
    NOT_IN_PREFILTER_REASON,
    NodeSelector,
    RequiredAffinity,
    required_affinity,
)

log = logging.getLogger("kubectl_gpushare.scheduler")

SCHEDULER_NAMES = frozenset({"default-scheduler", ""})
BACKOFF_START, BACKOFF_MAX = 1.0, 16.0


class StoreView(Protocol):
    """The store's change counter."""

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""


class SandboxView(Protocol):
    """The reads the loops need from the sandbox."""

    @property
    def store(self) -> StoreView:
        """The object store (only its resourceVersion is read)."""

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """Every stored object of a resource."""

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """One stored object, or None."""


@dataclass
class Extender:
    """One ``extenders:`` entry: how to call it, which resources it manages, whether errors are ignorable."""

    client: HTTPExtender
    managed: dict[str, bool]
    """resource name -> ignoredByScheduler."""
    ignorable: bool


def _duration(text: object, default: float) -> float:
    """Seconds of a ``metav1.Duration`` field (Go's ``time.ParseDuration``); ``default`` when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return default
    try:
        nanoseconds = deadlines.parse_duration(text)
    except ValueError:
        return default
    return nanoseconds / 1e9 if nanoseconds > 0 else default


def extenders_from_config(text: str, url_prefix: str) -> list[Extender]:
    """The extenders of a KubeSchedulerConfiguration, each pointed at ``url_prefix`` (the running extender).

    Raises:
        ValueError: the configuration is not a KubeSchedulerConfiguration with extenders.
    """
    config = yaml.safe_load(text)
    if not isinstance(config, dict) or config.get("kind") != "KubeSchedulerConfiguration":
        raise ValueError("not a KubeSchedulerConfiguration")
    result: list[Extender] = []
    for entry in config.get("extenders") or []:
        managed = {
            str(item["name"]): bool(item.get("ignoredByScheduler", False))
            for item in entry.get("managedResources") or []
            if isinstance(item, dict) and item.get("name")
        }
        cfg = ExtenderConfig(
            url_prefix=url_prefix,
            filter_verb=str(entry.get("filterVerb") or ""),
            prioritize_verb=str(entry.get("prioritizeVerb") or ""),
            bind_verb=str(entry.get("bindVerb") or ""),
            weight=int(entry.get("weight") or 1),
            node_cache_capable=bool(entry.get("nodeCacheCapable", False)),
            http_timeout=_duration(entry.get("httpTimeout"), 5.0),
        )
        result.append(Extender(HTTPExtender(cfg), managed, bool(entry.get("ignorable", False))))
    return result


def pod_reference(pod: Mapping[str, Any]) -> types.ObjectReference:
    """The ``involvedObject`` of an Event about a pod held as plain JSON (the stand-ins' Events)."""
    meta = pod["metadata"]
    return types.ObjectReference(kind="Pod", namespace=meta.get("namespace", "default"), name=meta["name"],
                                 uid=meta.get("uid", ""), api_version="v1")


def requested(pod: Mapping[str, Any], resource: str) -> int:
    """What a pod asks of ``resource``: the sum of container limits (requests when no limit); bad values count 0."""
    total = 0
    containers = (pod.get("spec") or {}).get("containers")
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            continue
        limits, requests = resources.get("limits"), resources.get("requests")
        value = limits.get(resource) if isinstance(limits, dict) else None
        if value is None and isinstance(requests, dict):
            value = requests.get(resource)
        if value is None:
            continue
        try:
            total += max(protocol.parse_quantity(str(value)), 0)
        except ValueError:
            continue
    return total


def is_interested(pod: Mapping[str, Any], managed: Iterable[str]) -> bool:
    """Whether kube-scheduler would call an extender managing ``managed`` for this pod.

    As ``HTTPExtender.IsInterested`` (kubernetes pkg/scheduler/extender.go): an extender without
    managedResources is asked about every pod; otherwise a pod is its when any container or init
    container names one of them in requests or limits, whatever the amount (a "0" still asks).
    """
    names = set(managed)
    if not names:
        return True
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            if not names.isdisjoint(noderesources.container_resource_names(container)):
                return True
    return False


NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
"""NodeAffinity's ``ErrReasonPod`` (pkg/scheduler/framework/plugins/nodeaffinity), for the selector and the affinity."""
AFFINITY_BUDGET = 1_000_000
"""Terms of a pod's required node affinity one cycle asks of its nodes (about a second) before it stops.

A term counts its requirements (`NodeSelector.verdict`): one term may hold 285,000.

Upstream asks every term of every node: a pod of 142,000 terms no index narrows holds its loop
for minutes at 2,000 nodes. Here the cycle fails past this (`AFFINITY_OVER_BUDGET`) and the pod
is retried with backoff, the nodes judged so far keeping their verdicts (`NodeSelector.verdict`),
so the next cycle goes on where this one stopped and the pod is placed where upstream places it,
later; the other pods are tried in between. No pod of realistic terms comes near it.
"""
AFFINITY_COMPILE_BUDGET = 400_000
"""Work (`node_affinity.WORK_PER_TERM` and its kin) one cycle spends compiling a pod's required node affinity.

About 0.1 s (0.4 s on a loaded 2-core machine): the largest affinity a pod can hold (285,000
requirements, or 1.5M values) takes 3-6 s to compile at once, which held the loop on the pod's
first cycle. Past this the cycle fails (`AFFINITY_OVER_BUDGET`) and the next goes on compiling
where it stopped; every term is still compiled and checked before any node is judged by them.
Upstream compiles them at once (``GetRequiredNodeAffinity``, on its PreFilter).
"""
AFFINITY_OVER_BUDGET = "node affinity ran out of its budget of terms this attempt (resumed on the next)"
"""The reason of a cycle stopped by `AFFINITY_BUDGET` (the same each time: the pod's condition is written once)."""


@dataclass
class _Budget:
    """What a cycle may still ask of the pod's affinity terms (`AFFINITY_BUDGET`)."""

    nodes: int
    """The nodes of the cycle (for the FitError's count)."""
    left: int
    compile_left: int
    """What is left of `AFFINITY_COMPILE_BUDGET`."""


@dataclass(frozen=True)
class Placement:
    """What TaintToleration and NodeAffinity (``GetRequiredNodeAffinity``) read of a pod, decoded once per cycle."""

    tolerations: TolerationIndex = TolerationIndex(())
    """The pod's tolerations, indexed once per pod version: a pod may hold 85,000 (3 MiB), asked of every
    taint of every node each cycle; the index answers as ``FindMatchingUntoleratedTaint`` would in a few
    lookups per taint (`kube.taints.TolerationIndex`)."""
    node_selector: tuple[tuple[str, str], ...] = ()
    """``spec.nodeSelector``, (key, value) pairs all of which a node's labels must hold."""
    affinity: RequiredAffinity | None = None
    """The required node affinity, PreFilter's names and Filter's selector; None: the pod has none."""
    problem: str = ""
    """What of the pod's placement fields is unreadable ("" when all are)."""


def placement(pod: Mapping[str, Any]) -> Placement:
    """The pod's tolerations and required node affinity, typed once; never raises on a malformed pod.

    The affinity is read by `node_affinity.required_affinity` (lazy: a term that does not parse
    matches nothing, ``GetRequiredNodeAffinity``; PreFilter's names), as ``explain`` reads it. A
    ``spec.affinity`` that does not decode becomes a selector matching no node; unreadable
    tolerations tolerate nothing, while a ``null`` field of one is "" as Go reads it (`types.Toleration`).
    """
    spec = pod.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    problems: list[str] = []
    tolerations = decode_tolerations(spec.get("tolerations"))
    if tolerations is None:
        problems.append("spec.tolerations is not a list of tolerations: it tolerates no taint")
    affinity: RequiredAffinity | None = None
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        problems.append("spec.nodeSelector is not a map of strings: it matches no node")
        affinity = RequiredAffinity(NodeSelector(error="unreadable"))
        selector = {}
    if spec.get("affinity") and affinity is None:
        try:
            terms = msgspec.convert({"spec": {"affinity": spec["affinity"]}}, types.PodPlacement).node_terms
        except msgspec.ValidationError as exc:
            problems.append(f"spec.affinity is not a v1.Affinity ({str(exc)[:120]}): it matches no node")
            affinity = RequiredAffinity(NodeSelector(error="unreadable"))
        else:
            affinity = required_affinity(terms)
    return Placement(TolerationIndex(tolerations or ()), tuple(selector.items()), affinity, "; ".join(problems))


def _placement_fields(pod: Mapping[str, Any]) -> object:
    """What `placement` reads of a pod: two versions equal in it are placed alike."""
    spec = pod.get("spec")
    return (spec.get("tolerations"), spec.get("nodeSelector"), spec.get("affinity")) if isinstance(spec, dict) else spec


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The object's ``status.conditions`` entry of type ``kind`` ({} when none, or when they are malformed)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return {}


def _ready(node: Mapping[str, Any]) -> bool:
    """Whether the node's first ``Ready`` condition is True: a later duplicate does not count.

    So the node lifecycle controller reads it (``GetNodeCondition``,
    pkg/controller/util/node/controller_utils.go) before it taints the node `NOT_READY`.
    """
    return _condition(node, "Ready").get("status") == "True"


def unreadable(node: Mapping[str, Any]) -> str | None:
    """What makes a Node's fields that the filters read malformed, or None when they are readable.

    kube-apiserver decodes a Node into its Go struct and refuses such an object; the sandbox may
    store one. It fails the filters alone (`SchedulerLoop._fits`), so the other nodes still take pods.
    """
    spec, status, meta = node.get("spec") or {}, node.get("status") or {}, node.get("metadata") or {}
    if not isinstance(spec, dict) or not isinstance(status, dict) or not isinstance(meta, dict):
        return "spec, status or metadata is not an object"
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(value, str) for value in labels.values()):
        return "metadata.labels is not a map of strings"  # a number label would break Gt/Lt matching
    for path, items in (("spec.taints", spec.get("taints")), ("status.conditions", status.get("conditions"))):
        if not isinstance(items or [], list) or not all(isinstance(item, dict) for item in items or []):
            return f"{path} is not a list of objects"
    return None


STATUS_UNREADABLE = "status is not an object"
_POD_STRINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("metadata", ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")),
    ("spec", ("nodeName", "schedulerName")),
)
"""The pod's string fields every pass reads (the queue's order, the signature, the bound pods)."""


def unreadable_pod(pod: Mapping[str, Any]) -> str | None:
    """What makes the pod fields every pass reads malformed, or None when they are readable.

    kube-apiserver decodes a Pod into its Go struct and refuses such an object; the sandbox may
    store one. `SchedulerLoop.run_once` leaves it out of the pass (logged once), so it never stops
    the others; one whose status alone is malformed (`STATUS_UNREADABLE`) is read with an empty one.
    """
    if not isinstance(pod.get("metadata"), dict):
        return "metadata is not an object"
    for part, names in _POD_STRINGS:
        fields = pod.get(part)
        if fields is not None and not isinstance(fields, dict):
            return f"{part} is not an object"
        for name in names:
            if fields and fields.get(name) is not None and not isinstance(fields[name], str):
                return f"{part}.{name} is not a string"
    status = pod.get("status")
    if status is not None and not isinstance(status, dict):
        return STATUS_UNREADABLE
    return None


def _nulls_dropped(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod without a JSON ``null`` in the string fields `unreadable_pod` checks (the pod itself if none).

    Go's encoding/json leaves a string field "" for ``null`` (decode.go, ``literalStore``), so to
    kube-apiserver such a field is absent; read as absent here too, it never meets a string in a sort.
    """
    nulls = [(part, name) for part, names in _POD_STRINGS for name in names
             if name in (pod.get(part) or {}) and pod[part][name] is None]
    if not nulls:
        return pod
    copied = {**pod, **{part: dict(pod[part]) for part, _ in nulls}}
    for part, name in nulls:
        del copied[part][name]
    return copied


_POD_IDENTITY: tuple[str, ...] = ("namespace", "name", "uid")
_NODE_IDENTITY: tuple[str, ...] = ("name",)


def _version_key(meta: object, identity: tuple[str, ...]) -> tuple[str, ...] | None:
    """The key of one version of an object in a per-version cache: its ``identity`` fields and resourceVersion.

    None when it has no resourceVersion (then nothing is cached for it). `SchedulerLoop.run_once`
    keeps the keys of the pass's objects, `_node_facts` and `_placement` look them up: one rule.
    """
    if not isinstance(meta, dict):
        return None
    version = meta.get("resourceVersion")
    if not isinstance(version, str) or not version:
        return None
    return (*(str(meta.get(field, "")) for field in identity), version)


def _keep_only(cache: dict[Any, Any], keys: Container[object]) -> None:
    """Drop the entries of ``cache`` whose key is not in ``keys`` (the objects of the latest pass)."""
    for gone in [key for key in cache if key not in keys]:
        del cache[gone]


def _active(pod: Mapping[str, Any]) -> bool:
    return not protocol.pod_phase_terminal((pod.get("status") or {}).get("phase"))


class SchedulerLoop:
    """The loop, on one thread; `wake` makes it look again now."""

    def __init__(self, sandbox: SandboxView, api: Client, extenders: list[Extender], nodes: object = None, *,
                 request_timeout: float = API_REQUEST_TIMEOUT, affinity_budget: int = AFFINITY_BUDGET,
                 compile_budget: int = AFFINITY_COMPILE_BUDGET) -> None:
        """Nothing runs until `start`; ``request_timeout`` is the API server's (`DynamicResources`).

        ``affinity_budget``: the terms of a pod's required node affinity one cycle asks (`AFFINITY_BUDGET`);
        ``compile_budget``: the work one cycle spends compiling them (`AFFINITY_COMPILE_BUDGET`).
        """
        self.sandbox = sandbox
        self.affinity_budget = affinity_budget
        self.compile_budget = compile_budget
        self.api = api
        self.extenders = extenders
        self._ignored = frozenset(resource for e in extenders for resource, skip in e.managed.items() if skip)
        """The extenders' ``ignoredByScheduler`` resources, which NodeResourcesFit leaves to them."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._backoff: dict[str, tuple[float, float, object]] = {}
        """pod uid -> (retry at, current backoff, cluster signature at the failure)."""
        self.scheduled = 0
        self._seen_rv = -1
        self.dra = DynamicResources(api, request_timeout)
        self._logged: set[tuple[object, str]] = set()
        """Malformed nodes and pods, and pods over `AFFINITY_BUDGET`, already logged (`_warn_once`)."""
        self._placements: dict[tuple[str, ...], tuple[str, object, Placement]] = {}
        """(namespace, name, uid) -> the resourceVersion of the pod's latest version, what `placement` read
        of it (`_placement_fields`) and its result; only the pods of the latest pass are kept.

        A new version whose fields `placement` reads are the same (the scheduler's own status write)
        keeps the placement, and so the verdicts its affinity keeps (`AFFINITY_BUDGET`), not decoded again.
        """
        self._node_cache: dict[tuple[str, ...], tuple[str | None, tuple[Taint, ...]]] = {}
        """(node name, resourceVersion) -> `_node_facts`; only the versions of the latest pass are kept."""

    def start(self) -> None:
        """Start the loop thread."""
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and close the extender connections."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
        for extender in self.extenders:
            extender.client.close()

    def wake(self) -> None:
        """Look at the pods again now."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # one bad pass must not end scheduling
                log.exception("scheduling pass failed")
            self._wake.wait(0.2)
            self._wake.clear()

    def run_once(self) -> None:
        """One pass over the pending pods; skipped while nothing changed and no retry is due."""
        rv = self.sandbox.store.resource_version
        retry_at = min((at for at, _, _ in self._backoff.values()), default=float("inf"))
        if rv == self._seen_rv and min(retry_at, self.dra.settles_at()) > time.monotonic():
            return  # nothing changed, no retry due, no write of unknown outcome settles yet
        self._seen_rv = rv
        self.dra.settle(self.sandbox)  # an allocation released here retries its pod at once (the signature)
        pods = self._readable_pods()
        nodes = self.sandbox.objects("nodes")
        signature = (
            tuple((n["metadata"]["name"], n["metadata"].get("resourceVersion")) for n in nodes),
            tuple(sorted(p["metadata"].get("uid", "") for p in pods if (p.get("spec") or {}).get("nodeName"))),
            self._dra_signature(),
        )
        _keep_only(self._node_cache, {_version_key(n["metadata"], _NODE_IDENTITY) for n in nodes})
        _keep_only(self._backoff, {p["metadata"].get("uid", "") for p in pods})
        _keep_only(self._placements, {key[:-1] for p in pods if (key := _version_key(p["metadata"], _POD_IDENTITY))})
        now = time.monotonic()
        used = noderesources.usage(pods)
        dra_state: PassState | None = None
        for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", "")):
            if self._stop.is_set():
                return
            spec = pod.get("spec") or {}
            meta = pod["metadata"]
            if spec.get("nodeName") or meta.get("deletionTimestamp") or not _active(pod):
                continue
            if spec.get("schedulerName", "") not in SCHEDULER_NAMES:
                continue
            uid = meta.get("uid", "")
            retry_at, backoff, seen = self._backoff.get(uid, (0.0, 0.0, None))
            if now < retry_at and seen == signature:
                continue
            try:
                if has_claims(pod):
                    dra_state = dra_state or self.dra.begin_pass(self.sandbox, nodes)
                    if not self.dra.pre_enqueue(pod, dra_state):
                        continue  # its claims are not all made yet: the controller's write wakes it
                node = self.schedule(pod, nodes, used, dra_state)
            except Exception as exc:  # noqa: BLE001 - one pod's failure never ends the pass for the pods after it
                backoff = min(max(backoff * 2, BACKOFF_START), BACKOFF_MAX)
                self._backoff[uid] = (time.monotonic() + backoff, backoff, signature)
                if not isinstance(exc, (Unschedulable, ExtenderCallError, SchedulingError)):  # a malformed pod or node
                    log.warning("cannot schedule %s/%s: %s", meta.get("namespace"), meta.get("name"),
                                protocol.error_reason(exc))
                    continue
                # handleSchedulingFailure (pkg/scheduler/schedule_one.go): SchedulerError unless the status
                # is a rejection (IsRejected); an extender's or a bind's error is none.
                self._unschedulable(pod, str(exc), None if isinstance(exc, Unschedulable) else SCHEDULER_ERROR)
                continue
            self._backoff.pop(uid, None)
            self.scheduled += 1
            used.add(node, noderesources.pod_requests(pod))  # later pods of this pass see what this one holds
            self._event(pod, "Scheduled", f"Successfully assigned {meta.get('namespace')}/{meta['name']} to {node}",
                        "Normal")

    def _readable_pods(self) -> list[dict[str, Any]]:
        """The stored pods this pass reads: `unreadable_pod` ones left out, each logged once.

        One whose status alone is malformed is read with an empty status: its phase unknown, it
        counts on its node as a running pod would, and is scheduled if unbound.
        """
        readable: list[dict[str, Any]] = []
        for pod in self.sandbox.objects("pods"):
            problem = unreadable_pod(pod)
            if problem is None:
                readable.append(_nulls_dropped(pod))
                continue
            meta = pod.get("metadata")
            name = f"{meta.get('namespace')}/{meta.get('name')}" if isinstance(meta, dict) else "?"
            self._warn_once((f"pod {name}", problem), "pod %s cannot be read (%s): %s", name, problem,
                            "read with an empty status" if problem == STATUS_UNREADABLE else "it is not scheduled")
            if problem == STATUS_UNREADABLE:
                readable.append(_nulls_dropped({**pod, "status": {}}))
        return readable

    def _dra_signature(self) -> tuple[object, ...]:
        """What retries a pod with claims at once (the plugin's events): slices, classes, claims (de)allocated."""
        versions = tuple((o["metadata"].get("name"), o["metadata"].get("resourceVersion"))
                         for kind in ("resourceslices", "deviceclasses") for o in self.sandbox.objects(kind))
        claims = tuple(sorted((str(o["metadata"].get("uid", "")), bool((o.get("status") or {}).get("allocation")))
                              for o in self.sandbox.objects("resourceclaims")))
        return versions, claims, tuple(sorted(self.dra.in_flight))

    def schedule(self, pod: dict[str, Any], nodes: list[dict[str, Any]], used: noderesources.NodeUsage,
                 dra_state: PassState | None = None) -> str:
        """One cycle: own filters, extender filter and prioritize, claims' PreBind, bind; returns the node.

        ``used`` is what bound, unfinished pods request on each node; ``dra_state`` what this pass
        read of ResourceSlices, DeviceClasses and claims (needed for a pod with claims).

        Raises:
            Unschedulable: no node fits (kube-scheduler's FitError message): a rejection.
            ExtenderCallError: an extender's filter or bind call failed, or the Binding did.
            SchedulingError: the DynamicResources plugin failed (a claim it cannot evaluate or write).
        """
        reasons: dict[str, int] = {}
        wants = noderesources.pod_requests(pod)
        where = self._placement(pod)
        if where.affinity is not None and where.affinity.conflict:  # NodeAffinity's PreFilter rejects it
            raise Unschedulable(f"0/{len(nodes)} nodes are available: {AFFINITY_CONFLICT}.")
        claims: PodClaims | None = None
        if dra_state is not None and has_claims(pod):
            try:
                claims = self.dra.pre_filter(pod, dra_state)
            except Unschedulable as exc:  # FitError with a PreFilter message
                raise Unschedulable(f"0/{len(nodes)} nodes are available: {exc}.") from None
        budget = _Budget(len(nodes), self.affinity_budget, self.compile_budget)
        candidates = [n for n in nodes if self._fits(pod, wants, n, used, reasons, where, budget)
                      and self._claims_fit(claims, n, dra_state, reasons)]
        interested = [e for e in self.extenders if is_interested(pod, e.managed)]
        scores: dict[str, int] = {}
        for extender in interested:
            if not candidates or not extender.client.config.filter_verb:
                continue
            try:
                outcome = extender.client.filter(pod, candidates)
            except ExtenderCallError:
                if extender.ignorable:
                    continue
                raise
            for reason in (*outcome.failed.values(), *outcome.failed_unresolvable.values()):
                reasons[reason] = reasons.get(reason, 0) + 1
            candidates = outcome.nodes
        if not candidates:
            # kube-scheduler's FitError: "<count> <reason>" strings, sorted as strings.
            summary = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
            raise Unschedulable(f"0/{len(nodes)} nodes are available: {summary}.")
        for extender in interested:
            if extender.client.config.prioritize_verb:
                try:
                    for host, score in extender.client.prioritize(pod, candidates).items():
                        scores[host] = scores.get(host, 0) + score
                except ExtenderCallError:
                    pass  # kube-scheduler ignores prioritize errors
        best = max(candidates, key=lambda n: scores.get(n["metadata"]["name"], 0))["metadata"]["name"]
        binder = next((e for e in interested if e.client.config.bind_verb), None)
        binding_unknown = False
        try:
            if claims is not None and dra_state is not None:
                self.dra.reserve(claims, str(best), dra_state)
                self.dra.pre_bind(pod, claims, str(best))
            # Set before the call: whatever it raises, the Binding may have been sent (the extender
            # may have created it, the API server may have stored it) unless the API refused it.
            binding_unknown = True
            if binder is not None:
                binder.client.bind(pod, best)
            else:
                meta = pod["metadata"]
                try:
                    self.api.bind_pod(meta.get("namespace", "default"), meta["name"], meta.get("uid", ""), best)
                except KubeError as exc:
                    binding_unknown = not did_not_happen(exc)
                    raise ExtenderCallError(f"binding rejected: {exc}") from None
        except (ExtenderCallError, SchedulingError):
            self._unreserve(pod, claims, binding_unknown)
            raise
        except Exception as exc:  # our own code failed: that cycle fails alike, the loop goes on
            # No input is known to reach this: the last two (a pod stored with a null uid bound by an
            # extender, a bindVerb beyond ASCII) were errors of the stand-in's own, fixed where they rose.
            meta = pod["metadata"]
            reason = protocol.error_reason(exc)
            log.warning("binding cycle of %s/%s failed: %s", meta.get("namespace"), meta.get("name"), reason)
            self._unreserve(pod, claims, binding_unknown)
            raise SchedulingError(f"binding cycle failed: {reason}") from None
        return str(best)

    def _unreserve(self, pod: Mapping[str, Any], claims: PodClaims | None, binding_unknown: bool) -> None:
        """Every Reserve plugin's Unreserve after a failed PreBind or Bind; never raises.

        kube-scheduler's binding cycle runs them for every failure of PreBind or Bind, whatever the
        error (``handleBindingCycleError``, pkg/scheduler/schedule_one.go); DynamicResources' takes the
        pod out of ``reservedFor`` of all its claims (pkg/scheduler/framework/plugins/dynamicresources/
        dynamicresources.go), so a claim PreBind wrote before a later one failed is released too.
        `DynamicResources.unreserve` keeps what an unknown outcome may still show. If Unreserve itself
        fails, the reservations stay (the safe side) and the cycle's own failure is what is reported.
        """
        if claims is None:
            return
        try:
            self.dra.unreserve(pod, claims, binding_unknown=binding_unknown)
        except Exception as exc:  # noqa: BLE001 - the failed cycle is reported by the caller
            meta = pod["metadata"]
            log.warning("unreserve %s/%s failed, reservations kept: %s", meta.get("namespace"), meta.get("name"),
                        protocol.error_reason(exc))

    def _claims_fit(self, claims: PodClaims | None, node: Mapping[str, Any], dra_state: PassState | None,
                    reasons: dict[str, int]) -> bool:
        """The DynamicResources filter (after the others, as in kube-scheduler's default plugin order)."""
        if claims is None or dra_state is None:
            return True
        reason = self.dra.filter(claims, str(node["metadata"]["name"]), dra_state)
        if reason:
            reasons[reason] = reasons.get(reason, 0) + 1
        return not reason

    def _fits(self, pod: Mapping[str, Any], wants: Mapping[str, int], node: Mapping[str, Any],
              used: noderesources.NodeUsage, reasons: dict[str, int], where: Placement, budget: _Budget) -> bool:
        """The pod's own filters on one node, in kube-scheduler's order; the first that fails counts its reason.

        Raises:
            Unschedulable: the affinity's terms took the cycle's ``budget`` (`AFFINITY_BUDGET`) before this node.
        """
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}

        def fail(reason: str) -> bool:
            reasons[reason] = reasons.get(reason, 0) + 1
            return False

        node_name = str(meta.get("name") or "")
        if where.affinity is not None and where.affinity.left_out(node_name):
            return fail(NOT_IN_PREFILTER_REASON)  # not filtered at all: upstream never looks at such a node
        problem, taints = self._node_facts(node)
        if problem:
            name = meta.get("name")
            self._warn_once((name, problem), "node %s cannot be read (%s): no pod is scheduled onto it", name, problem)
            return fail("node(s) could not be read")
        if (node.get("spec") or {}).get("unschedulable") and where.tolerations.kept_off_cordoned():
            return fail("node(s) were unschedulable")
        taint = where.tolerations.untolerated(taints)
        if taint is not None:
            return fail(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")
        if any(labels.get(k) != v for k, v in where.node_selector):
            return fail(NODE_AFFINITY_REASON)
        if where.affinity is not None and not self._affinity_matches(pod, where.affinity, labels, node_name, budget):
            return fail(NODE_AFFINITY_REASON)
        missing = noderesources.insufficient(wants, node, used.of(node["metadata"]["name"]), self._ignored)
        for reason in missing:  # NodeResourcesFit reports every resource that does not fit
            reasons[reason] = reasons.get(reason, 0) + 1
        return not missing

    def _warn_once(self, key: tuple[object, str], message: str, *args: object) -> None:
        """Log a warning the first time ``key`` (what it is about, and the problem) comes up, not every pass."""
        if key not in self._logged:
            self._logged.add(key)
            log.warning(message, *args)

    def _affinity_matches(self, pod: Mapping[str, Any], affinity: RequiredAffinity, labels: Mapping[str, str],
                          node_name: str, budget: _Budget) -> bool:
        """NodeAffinity's Filter on one node, within the cycle's ``budget`` of terms and of compiling them.

        Raises:
            Unschedulable: the budget is spent (`AFFINITY_OVER_BUDGET`), logged once for the pod.
        """
        if not affinity.compiled:
            budget.compile_left -= affinity.compile(budget.compile_left)
            if not affinity.compiled:
                self._over_budget(pod, budget, "is too large to compile in one cycle (more than %d units of work)",
                                  self.compile_budget)
        if budget.left <= 0:
            self._over_budget(pod, budget, "asks more than %d terms in one cycle", self.affinity_budget)
        matched, asked = affinity.selector.verdict(labels, node_name)
        budget.left -= asked
        return matched

    def _over_budget(self, pod: Mapping[str, Any], budget: _Budget, why: str, most: int) -> None:
        """End the cycle past its affinity budget (`AFFINITY_OVER_BUDGET`), the pod logged once for ``why``.

        Raises:
            Unschedulable: always.
        """
        meta = pod["metadata"]
        logged = (f"pod {meta.get('namespace')}/{meta.get('name')} {meta.get('uid', '')}", why)
        self._warn_once(logged, f"pod %s/%s: its required node affinity {why}: the cycle stops there and the next "
                        "goes on where it stopped", meta.get("namespace"), meta.get("name"), most)
        raise Unschedulable(f"0/{budget.nodes} nodes are available: {AFFINITY_OVER_BUDGET}.")

    def _node_facts(self, node: Mapping[str, Any]) -> tuple[str | None, tuple[Taint, ...]]:
        """What makes the node unreadable (`unreadable`, or taints that do not decode) and its taints typed.

        A node that is not Ready leads its taints with `NOT_READY`, as the node lifecycle controller's would.

        Worked out once per node version (name, resourceVersion), not once per pod and node.
        """
        key = _version_key(node.get("metadata"), _NODE_IDENTITY)
        if key is not None and key in self._node_cache:
            return self._node_cache[key]
        problem = unreadable(node)
        taints = decode_taints(node["spec"].get("taints")) if not problem and node.get("spec") else ()
        if taints is not None and not problem and not _ready(node):
            taints = (NOT_READY, *taints)
        facts = (problem or "spec.taints is not a list of taints", ()) if taints is None else (problem, taints)
        if key is not None:
            self._node_cache[key] = facts
        return facts

    def _placement(self, pod: Mapping[str, Any]) -> Placement:
        """`placement` of the pod, worked out once per pod version or fields it reads (`_placement_fields`).

        A malformed placement is logged then, once: a hostile affinity costs its decoding once.
        """
        meta = pod["metadata"]
        key = _version_key(meta, _POD_IDENTITY)
        earlier = self._placements.get(key[:-1]) if key is not None else None
        if key is not None and earlier is not None and earlier[0] == key[-1]:  # the same version
            return earlier[2]
        read = _placement_fields(pod)
        if earlier is not None and earlier[1] == read:  # another version, the same fields (a status write)
            where = earlier[2]
        else:
            where = placement(pod)
            if where.problem:
                log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), where.problem)
        if key is not None:
            self._placements[key[:-1]] = (key[-1], read, where)
        return where

    def _unschedulable(self, pod: dict[str, Any], message: str, reason: str | None = None) -> None:
        """Record a failed cycle: a FailedScheduling Event each time, the PodScheduled condition when it changes.

        As kube-scheduler's ``updatePod`` with ``podutil.UpdatePodCondition`` (pkg/api/v1/pod/util.go):
        a condition with the same status, reason and message is not written again, and one whose
        status stays keeps its ``lastTransitionTime``. So a retry that fails as before leaves the
        pod's resourceVersion alone, and its placement stays decoded (`_placement`).
        """
        meta = pod["metadata"]
        condition = {"type": "PodScheduled", "status": "False", "reason": reason or "Unschedulable", "message": message,
                     "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        old = _condition(pod, "PodScheduled")
        if old.get("status") == "False" and isinstance(old.get("lastTransitionTime"), str):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
        if any(old.get(field) != condition[field] for field in ("status", "reason", "message")):
            try:
                self.api.patch(types.PODS, meta["name"], {"status": {"conditions": [condition]}},
                               meta.get("namespace", "default"), "merge", subresource="status")
            except KubeError as exc:
                log.warning("%s", write_failure(f"mark {meta.get('namespace')}/{meta['name']} unschedulable", exc))
        self._event(pod, "FailedScheduling", message, "Warning")

    def _event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None:
        try:
            self.api.create_event(pod_reference(pod), reason, message, kind, component="default-scheduler")
        except KubeError as exc:
            meta = pod["metadata"]
            log.warning("%s", write_failure(f"record {reason} for {meta.get('namespace')}/{meta['name']}", exc))
