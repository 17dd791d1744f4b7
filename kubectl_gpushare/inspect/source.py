"""Where the inspect views get their nodes and pods: the API server, or a file written by kubectl.

From the API it makes as few requests as the data allows: without node names, ONE node list
(paginated, ``-l`` passed to the server) and ONE paginated pod list of all namespaces with
``fieldSelector=status.phase!=Succeeded,status.phase!=Failed`` so completed pods never cross the
wire; with node names, one GET per named node and the same pod list (narrowed to
``spec.nodeName=<node>`` when one node is named). It never asks per node. Pages are decoded into
`kube.types` structs and reduced to ledger records page by page, so memory holds records, not JSON;
for the views that show sums only (``keep_pods=False``) the ledger counts each record and lets it go.

Offline, it reads what ``kubectl get nodes,pods -A -o json`` (or ``-o yaml``) writes: a ``List``
of Nodes and Pods, a NodeList/PodList, a single object, or several YAML documents.

Both paths end in the same `Snapshot`: a ledger on the ``allocatable`` basis plus the node names
the original tool would have shown, sorted by name. This module renders nothing.
"""

from __future__ import annotations

import functools
import io
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any, Final, Literal, TypeVar

import msgspec

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.kube import lenient, selectors, shallow, stacks, types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import Forbidden, NotFound
from kubectl_gpushare.kube.records import (
    Warnings,
    invalid_requests,
    node_ip,
    node_record,
    pod_record,
    unhealthy_gpus,
    unhealthy_node_name,
)
from kubectl_gpushare.kube.stacks import dra, kai
from kubectl_gpushare.kube.stacks.dra import DraNode, DraObjects
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord, StackClaim, StackNode
from kubectl_gpushare.protocol import shown_value

ACTIVE_PODS: Final = "status.phase!=Succeeded,status.phase!=Failed"
"""The field selector that leaves completed pods on the server (they never count)."""
POD_PAGE_SIZE: Final = 2000
"""Pods per page: large enough that round trips stay few at 100,000 pods, small enough to bound memory."""

Progress = Callable[[int], None]


class InputError(ValueError):
    """A ``--from-file`` input is unreadable or not a list of Kubernetes nodes and pods."""


@dataclass
class Snapshot:
    """Everything a view needs: the ledger, which nodes to show, and what looked malformed."""

    ledger: Ledger
    names: list[str]
    warnings: Warnings
    stack_nodes: list[StackNode] = field(default_factory=list)
    """Nodes of other sharing stacks (HAMi, NVIDIA, KAI, Volcano, ...), by name; empty on gpushare-only clusters."""
    stack_claims: dict[str, list[StackClaim]] = field(default_factory=dict)
    """Node name -> claims of pods on that stack node (the ledger's `stack_usage` counts them)."""
    unscheduled: list[PodRecord] = field(default_factory=list)
    """Active pods that request GPU memory but are on no node yet (cluster-wide views only)."""
    quotas: list[types.ResourceQuota] = field(default_factory=list)
    """ResourceQuotas, read only for ``--group-by namespace``."""
    dra: DraObjects = field(default_factory=lambda: DraObjects(served=False))
    """The DRA objects read (empty where the API serves no ``resource.k8s.io/v1``)."""
    dra_nodes: dict[str, DraNode] = field(default_factory=dict)
    """Nodes shown whose GPUs our DRA driver publishes (``fit`` rounds requests by their policies)."""


READS_DRA: Final = (stacks.AUTO, protocol.STACK_GPUSHARE)
"""``--stack`` values under which DRA objects are read (our driver's GPUs are gpushare's; NVIDIA's need auto)."""


def node_ips(nodes: Iterable[types.Node]) -> dict[str, str]:
    """Node name -> the IP the views show (`StackSplit.add_dra` gives it to the nodes of DRA slices)."""
    return {node.metadata.name: node_ip(node) for node in nodes}


def waiting(record: PodRecord, node_name: str) -> bool:
    """Whether a pod asks for GPU memory and no node has it yet (shown apart from the nodes)."""
    return not node_name and record.request > 0


def not_found(name: str) -> NotFound:
    """The error the API server gives for a missing node (the original prints its message)."""
    return NotFound(404, "NotFound", f'nodes "{name}" not found')


def require_namespace(client: Client, namespace: str) -> None:
    """Fail as kubectl does for a namespace that does not exist (one GET).

    A user who may not read namespaces (a tenant's RBAC often allows pods only) is not refused:
    the namespace is then taken on trust, as before.

    Raises:
        NotFound: ``namespaces "<name>" not found``, kubectl's words.
    """
    try:
        client.request("GET", f"/api/v1/namespaces/{namespace}")
    except NotFound:
        raise NotFound(404, "NotFound", f'namespaces "{namespace}" not found') from None
    except Forbidden:
        return


def keyed_pod_record(pod: types.Pod, warnings: Warnings | None = None) -> PodRecord:
    """`pod_record`, keyed by namespace/name when the pod has no uid (hand-written files leave it out).

    The ledger keys pods by uid, so pods without one would replace each other.
    """
    record = pod_record(pod, warnings)
    if record.uid:
        return record
    return msgspec.structs.replace(record, uid=f"{record.namespace}/{record.name}")


class PodKeys:
    """Ledger keys for the pods of one snapshot: `keyed_pod_record`, and a uid two pods share keys the later apart.

    The API gives each object its own uid, but a hand-merged or hand-written dump may not; the ledger
    keys pods by uid, so the second pod would replace the first and its memory would show as free.
    A pod listed twice (same namespace and name) is still one pod. Only a hash of each owner is
    kept, so a streamed list of 100,000 pods holds no record for this.
    """

    def __init__(self, warnings: Warnings | None) -> None:
        self._owners: dict[str, int] = {}
        self._warnings = warnings

    def record(self, pod: types.Pod) -> PodRecord:
        """The pod's record, keyed as the ledger should count it (one warning per pod sharing a uid)."""
        record = keyed_pod_record(pod, self._warnings)
        owner = hash((record.namespace, record.name))
        if self._owners.setdefault(record.uid, owner) == owner:
            return record
        if self._warnings is not None:
            self._warnings.add(f"pod {record.namespace}/{record.name}: uid {shown_value(record.uid)} "
                               "is another pod's too; both are counted")
        return msgspec.structs.replace(record, uid=f"{record.uid}/{record.namespace}/{record.name}")


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _snapshot(
    ledger: Ledger,
    node_list: Sequence[NodeRecord],
    named: bool,
    warnings: Warnings,
    stack_nodes: Sequence[StackNode] = (),
    stack_claims: dict[str, list[StackClaim]] | None = None,
) -> Snapshot:
    if named:
        names = sorted({node.name for node in node_list})
    else:
        names = sorted(node.name for node in node_list if node.alloc_mem > 0)
    shown_stacks = sorted((node for node in stack_nodes if named or node.gpus), key=lambda node: node.name)
    return Snapshot(ledger, names, warnings, shown_stacks, stack_claims or {})


class StackSplit:
    """Splits nodes between gpushare (the `Ledger`) and the other stacks' decoders, and collects claims."""

    def __init__(self, forced: str, warnings: Warnings, devices: Iterable[types.KoordDevice] = ()) -> None:
        self.forced = forced
        self.warnings = warnings
        self.devices = {device.metadata.name: device for device in devices}
        """Koordinator ``Device`` objects by node name (none where the API does not serve them)."""
        self.now = time.time()
        self.nodes: dict[str, StackNode] = {}
        self.claims: dict[str, list[StackClaim]] = {}
        self.nvidia: dict[str, types.Node] = {}
        """NVIDIA (and forced KAI) nodes: one becomes a KAI node if KAI pods sit on it."""
        self.kai_pods: dict[str, list[types.Pod]] = {}
        self.dra_nodes: dict[str, dra.DraNode] = {}
        """Nodes whose GPUs our DRA driver publishes (`add_dra`)."""
        self.nvidia_dra: dict[str, StackNode] = {}

    def gpushare(self, node: types.Node) -> bool:
        """Whether the node is read as gpushare (kept for `node_record`); else it is decoded here."""
        stack = stacks.detect(node, self.forced)
        if stack is None or stack == protocol.STACK_GPUSHARE:
            return True
        name = node.metadata.name
        self.nodes[name] = stacks.stack_node(node, stack, self.warnings, self.now, self.devices.get(name))
        if stack in (protocol.STACK_NVIDIA, protocol.STACK_KAI):
            self.nvidia[name] = node
            if stack == protocol.STACK_KAI:
                self.kai_pods[name] = []
        return False

    def gpushare_records(self, nodes: Iterable[types.Node], sick: dict[str, frozenset[int]]) -> list[NodeRecord]:
        """Ledger records of the gpushare nodes (with their unhealthy GPUs); the others are decoded here."""
        return [
            node_record(node, sick.get(node.metadata.name, frozenset()), self.warnings)
            for node in nodes
            if self.gpushare(node)
        ]

    def add_dra(self, records: list[NodeRecord], objects: dra.DraObjects, ips: dict[str, str]) -> list[NodeRecord]:
        """Read the DRA objects: our driver's GPUs into ``records`` (returned), NVIDIA's nodes as stack nodes.

        Only nodes in ``records`` (the nodes being read) are taken; NVIDIA's DRA nodes need the
        ``auto`` reading, and a node another stack already reads stays with it.
        """
        if not objects:
            return records
        known = {record.name for record in records}
        self.dra_nodes = {name: node for name, node in dra.our_nodes(objects, self.warnings).items() if name in known}
        if self.forced == stacks.AUTO:
            nvidia = dra.nvidia_nodes(objects, ips, self.warnings)
            self.nvidia_dra = {name: node for name, node in nvidia.items() if name in known and name not in self.nodes}
            self.nodes.update(self.nvidia_dra)
        return dra.with_gpus(records, self.dra_nodes)

    def dra_records(
        self, records: list[NodeRecord], objects: dra.DraObjects, phases: dict[str, str]
    ) -> list[PodRecord]:
        """The claims on our driver's GPUs as pod records (their NVIDIA claims go to the stack claims)."""
        if not objects.claims:
            return []
        self.nvidia_dra_claims(objects, phases)
        return dra.claim_records(objects, dra.units(records, self.dra_nodes), phases)

    def nvidia_dra_claims(self, objects: dra.DraObjects, phases: dict[str, str]) -> None:
        """Add the claims on NVIDIA's DRA GPUs of the nodes read to the stack claims."""
        if self.nvidia_dra and objects.claims:
            for node, found in dra.nvidia_claims(objects, self.nvidia_dra, phases).items():
                self.claims.setdefault(node, []).extend(found)

    def result(self) -> tuple[list[StackNode], dict[str, list[StackClaim]]]:
        """The stack nodes by name and their claims, once every node and pod went through."""
        self.finish()
        return sorted(self.nodes.values(), key=lambda node: node.name), self.claims

    def finish(self) -> None:
        """Turn NVIDIA nodes with KAI pods into KAI nodes (a reservation pod names a GPU others share)."""
        for name, pods in self.kai_pods.items():
            node, found = kai.node(self.nodes[name], self.nvidia[name], pods, self.warnings)
            self.nodes[name] = node
            if found:
                self.claims.setdefault(name, []).extend(found)
        self.kai_pods = {}

    def add_pod(self, pod: types.Pod) -> None:
        """Record the pod's claims if it sits on a stack node (or HAMi chose one and is still binding it)."""
        annotations = pod.metadata.annotations
        chosen = annotations.get(protocol.HAMI_ANN_NODE) or annotations.get(protocol.VOLCANO_ANN_VGPU_NODE, "")
        node = self.nodes.get(pod.spec.node_name or chosen)
        if node is not None and node.name in self.nvidia and kai.is_kai_pod(pod):
            self.kai_pods.setdefault(node.name, []).append(pod)
            return
        if node is not None:
            found = stacks.stack_claims(pod, node, self.warnings)
            if found:
                self.claims.setdefault(node.name, []).extend(found)


def stack_ledger(
    nodes: Iterable[types.Node], pods: Iterable[types.Pod], warnings: Warnings, forced: str = stacks.AUTO,
    devices: Iterable[types.KoordDevice] = (),
) -> tuple[list[StackNode], dict[str, list[StackClaim]]]:
    """Nodes of other stacks (by name) and their pods' claims, as inspect reads them, for doctor and explain."""
    split = StackSplit(forced, warnings, devices)
    for node in nodes:
        split.gpushare(node)
    if split.nodes:
        for pod in pods:
            split.add_pod(pod)
    return split.result()


def devices_found(
    found: Mapping[str, Sequence[Any]], nodes: Sequence[types.Node], warnings: Warnings, forced: str = stacks.AUTO
) -> list[types.KoordDevice]:
    """Koordinator's ``Device`` objects of a file dump, collected by kind (`parse_documents` ``others``; JSON only).

    Decoded only when one of ``nodes`` is Koordinator's (``forced`` as `devices_of`'s); one that does
    not decode is one warning (`decoded_of`).
    """
    if not _has_koordinator(nodes, forced):
        return []
    return decoded_of(found, types.KOORD_DEVICES, warnings)


# --- from the API ----------------------------------------------------------------------------------


def _has_koordinator(nodes: Iterable[types.Node], forced: str) -> bool:
    return any(stacks.detect(node, forced) == protocol.STACK_KOORDINATOR for node in nodes)


def koordinator_devices(
    client: Client, nodes: Sequence[types.Node], forced: str, warnings: Warnings
) -> list[types.KoordDevice]:
    """Koordinator's ``Device`` objects, read only when a node is Koordinator's (one request then).

    Not served (404: no Koordinator CRD): none, silently. Forbidden: none, and a warning; either
    way Koordinator GPUs are read from the nodes' resources.
    """
    return devices_of(lambda: client.list(types.KOORD_DEVICES, on_skip=warnings.add), nodes, forced, warnings)


def devices_of(
    list_devices: Callable[[], Sequence[types.KoordDevice]], nodes: Sequence[types.Node], forced: str,
    warnings: Warnings,
) -> list[types.KoordDevice]:
    """`koordinator_devices` with the listing passed in (the API, or ``inspect -w``'s informer).

    ``list_devices`` is called only when a node is Koordinator's; it raises NotFound (not served)
    or Forbidden as the API answers.
    """
    if not _has_koordinator(nodes, forced):
        return []
    try:
        return list(list_devices())
    except NotFound:
        return []
    except Forbidden:
        resource = f"devices.{protocol.KOORD_DEVICE_GROUP}"
        warnings.add(f"cannot list {resource}: Koordinator GPUs are read from node resources")
        return []


def unhealthy_of(
    list_configmaps: Callable[[], Iterable[types.ConfigMap]], warnings: Warnings
) -> dict[str, frozenset[int]]:
    """`unhealthy_by_node` of the unhealthy-GPU ConfigMaps ``list_configmaps`` lists (the API, or an informer).

    Without permission to list them, GPUs are shown as healthy and a warning says why.
    """
    try:
        return unhealthy_by_node(list_configmaps())
    except Forbidden:
        warnings.add(f"cannot list configmaps in {protocol.UNHEALTHY_CM_NAMESPACE}: unhealthy GPUs are not marked")
        return {}


@dataclass(frozen=True)
class Confinement:
    """What the cluster shows of the device plugin's node confinement (doctor's ``node-confinement-missing``).

    Attributes:
        served: whether the API serves ``admissionregistration.k8s.io/v1`` policies (Kubernetes 1.30+).
        policies: every ValidatingAdmissionPolicy.
        bindings: every ValidatingAdmissionPolicyBinding.
    """

    served: bool
    policies: tuple[types.AdmissionPolicy, ...] = ()
    bindings: tuple[types.AdmissionPolicyBinding, ...] = ()


def confinement_from_api(client: Client, warnings: Warnings) -> Confinement | None:
    """The policies and bindings, two list calls; None (and a warning) when they may not be listed.

    Not served (404: Kubernetes before 1.30) is an answer, not an error: nothing can confine the plugin.
    """
    try:
        policies: list[types.AdmissionPolicy] = client.list(types.ADMISSION_POLICIES, on_skip=warnings.add)
        bindings: list[types.AdmissionPolicyBinding] = client.list(types.ADMISSION_POLICY_BINDINGS,
                                                                   on_skip=warnings.add)
    except NotFound:
        return Confinement(served=False)
    except Forbidden:
        warnings.add("cannot list validatingadmissionpolicies and validatingadmissionpolicybindings: whether the "
                     "device plugin is kept to its node is not checked")
        return None
    return Confinement(True, tuple(policies), tuple(bindings))


CONFINEMENT_KINDS: Final = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
"""The kinds `Confinement` is read from."""


def confinement_of(found: Mapping[str, Sequence[Any]], warnings: Warnings) -> Confinement | None:
    """The policies and bindings collected by `parse_documents` (``others``; JSON ones only; `decoded_of`).

    None (not checked) when it holds neither kind: a dump of ``nodes,pods`` says nothing about policies,
    so their absence is not reported.
    """
    policies = decoded_of(found, types.ADMISSION_POLICIES, warnings)
    bindings = decoded_of(found, types.ADMISSION_POLICY_BINDINGS, warnings)
    if not policies and not bindings:
        return None
    return Confinement(True, tuple(policies), tuple(bindings))


DRA_RESOURCES: Final = f"resourceslices.{protocol.DRA_API_GROUP}"


WireClaims = Sequence[dra_objects.WireResourceClaim | dra_objects.ResourceClaim]
"""ResourceClaims as listed: wire structs, or (`_claim_wires` ``tally``) already read for counting."""


def node_labels(nodes: Iterable[types.Node]) -> dict[str, Mapping[str, str]]:
    """Node name -> labels, which ResourceSlices' node selectors are matched against (`dra.read`)."""
    return {node.metadata.name: node.metadata.labels for node in nodes}


def dra_from_api(
    client: Client, warnings: Warnings, *, claims: bool = False, classes: bool = False, pending: bool = False,
    tally: bool = False, nodes: Iterable[types.Node] = (), resolve: bool = False,
) -> dra.DraObjects:
    """The DRA objects the views read: one list of ResourceSlices, then ResourceClaims if they matter.

    A cluster without ``resource.k8s.io/v1`` answers the slice list with 404: nothing more is read
    and nothing is said. Without permission to list slices (or claims): one warning, and the views
    show what they can. Claims are listed when a slice of a driver read here exists, or always
    with ``claims`` (doctor: a claim may name devices no slice publishes); DeviceClasses with
    ``classes`` (explain and doctor ask the allocator, which needs them; unreadable: not read).
    Unallocated claims are kept with ``pending`` (or ``claims``, ``classes``). With ``tally``, plain
    allocated claims are read for counting only (`_claim_wires`), for views that need no more of them.
    ``nodes``: the nodes read, whose labels slices' node selectors match. With ``resolve`` (explain, doctor),
    other drivers' allocated claims are kept too, for resolving pods' claims (`dra.read`).
    """
    keep = claims or classes or pending

    def list_claims() -> WireClaims:
        if tally:
            raws = client.list_raw(types.DRA_CLAIMS, page_size=POD_PAGE_SIZE)
            return _claim_wires(raws, warnings, pending=keep, tally=True)
        return [*client.list(types.DRA_CLAIMS, on_skip=warnings.add, page_size=POD_PAGE_SIZE)]

    listed: list[bool] = []  # classes are read only where the slices could be

    def list_slices() -> list[dra_objects.WireResourceSlice]:
        slices = client.list(types.DRA_SLICES, on_skip=warnings.add)
        listed.append(True)
        return slices

    objects = dra_of_lists(list_slices, list_claims, warnings, claims=claims, pending=keep, nodes=nodes,
                           resolve=resolve)
    if classes and listed:
        try:
            objects.classes = dra.read_classes(client.list(types.DRA_CLASSES, on_skip=warnings.add), warnings)
        except (NotFound, Forbidden):
            warnings.add(f"cannot list deviceclasses.{protocol.DRA_API_GROUP}: claims are judged without their classes")
    return objects


def dra_of_lists(
    list_slices: Callable[[], Sequence[dra_objects.WireResourceSlice]], list_claims: Callable[[], WireClaims],
    warnings: Warnings, *, claims: bool = False, pending: bool = False, nodes: Iterable[types.Node] = (),
    resolve: bool = False,
) -> dra.DraObjects:
    """`dra_from_api`'s rules with the listings passed in (the API, or ``inspect -w``'s informers).

    Each listing raises NotFound or Forbidden as the API answers: slices not served, nothing read
    and nothing said; forbidden, one warning. ``list_claims`` is called only where a slice of a
    driver read here exists (or with ``claims``); unreadable, one warning.
    """
    try:
        slices = list_slices()
    except NotFound:
        return dra.DraObjects(served=False)
    except Forbidden:
        warnings.add(f"cannot list {DRA_RESOURCES}: GPUs shared through DRA are not shown")
        return dra.DraObjects()
    relevant = [wire for wire in slices if wire.spec.driver in dra.DRIVERS]
    wire_claims: WireClaims = []
    if relevant or claims:
        try:
            wire_claims = list_claims()
        except (NotFound, Forbidden):
            warnings.add(f"cannot list resourceclaims.{protocol.DRA_API_GROUP}: DRA GPUs are shown without claims")
    return dra.read(relevant, wire_claims, warnings, pending=pending, labels=node_labels(nodes), resolve=resolve)


VIEWER_ROLE: Final = "gpushare-viewer"
"""The ClusterRole (manifests/viewer/viewer.yaml, in every install) granting the views' reads ``view`` does not."""
Permission = Literal["get nodes", "list nodes", "get pods", "list pods in all namespaces"]
"""A permission the views cannot do without, as a 403's hint names it."""
_GRANTED_BY: Final[dict[Permission, str]] = {"get nodes": VIEWER_ROLE, "list nodes": VIEWER_ROLE, "get pods": "view",
                                             "list pods in all namespaces": "view"}
"""Which ClusterRole, bound cluster-wide, grants each permission the views cannot do without (docs/install.md)."""


@contextmanager
def needs_permission(permission: Permission, command: str = "inspect") -> Iterator[None]:
    """Name the RBAC permission a 403 is about, and the ClusterRole that grants it, so the user knows what to ask for.

    Args:
        permission: what the request needs (``list nodes``): `_GRANTED_BY` names the role that grants it.
        command: the command that needs it, as the message names it.
    """
    try:
        yield
    except Forbidden as exc:
        hint = f"{command} needs permission to {permission}: bind the ClusterRole {_GRANTED_BY[permission]}"
        raise Forbidden(exc.status, exc.reason, f"{exc.message} ({hint})") from None


def from_api(
    client: Client,
    node_names: Sequence[str] = (),
    selector: str | None = None,
    progress: Progress | None = None,
    unhealthy: bool = False,
    stack: str = stacks.AUTO,
    keep_pods: bool = True,
    warnings: Warnings | None = None,
    command: str = "inspect",
) -> Snapshot:
    """Fetch nodes and active pods from the API server.

    Args:
        client: a `kube.client.Client`.
        node_names: nodes to show (``[NODE]...``); empty for every GPU-share node.
        selector: a label selector for nodes (``-l``), applied by the server.
        progress: called with the number of pods read so far after each page.
        unhealthy: also read the unhealthy-GPU ConfigMaps (one more request; the views that mark
            unhealthy GPUs ask for it, the compatible text does not). Without permission to list
            them, GPUs are shown as healthy and a warning says why.
        stack: ``auto`` to detect each node's sharing stack, or one stack to read every node with.
        keep_pods: False for views that show sums only (the summary, ``fit``): the ledger then
            counts each pod as its page is read and keeps no records (`Ledger` ``keep_pods``).
        warnings: where problems go as they are met, so a caller can say them when a later read
            fails (a new collection when None).
        command: the command the user ran, as a 403's hint names it (`needs_permission`).

    Raises:
        SelectorError: ``selector`` is malformed (checked here first, by the same grammar as offline).
        KubeError: from the client (``NotFound`` for a named node that does not exist).
    """
    warnings = warnings if warnings is not None else Warnings()
    matches = selectors.matcher(selector)
    names = _unique(node_names)
    if names:
        with needs_permission("get nodes", command):
            decoded = [client.get_node(name) for name in names]
        if selector:
            decoded = [node for node in decoded if matches(node.metadata.labels)]
    else:
        with needs_permission("list nodes", command):
            decoded = client.list_nodes(label_selector=selector or None, on_skip=warnings.add)
    sick: dict[str, frozenset[int]] = {}
    if unhealthy:
        sick = unhealthy_of(
            lambda: client.list(types.CONFIGMAPS, protocol.UNHEALTHY_CM_NAMESPACE, on_skip=warnings.add), warnings
        )
    devices = koordinator_devices(client, decoded, stack, warnings)
    cluster_wide = not names and not selector
    objects = (dra_from_api(client, warnings, pending=cluster_wide, tally=True, nodes=decoded)
               if stack in READS_DRA else dra.DraObjects(served=False))
    build = Build(decoded, names, cluster_wide=cluster_wide, stack=stack, warnings=warnings, sick=sick,
                  devices=devices, objects=objects, keep_pods=keep_pods)
    if build.reads_pods:
        field_selector = ACTIVE_PODS
        if len(names) == 1:
            field_selector = f"spec.nodeName={names[0]},{ACTIVE_PODS}"
        seen = 0
        with needs_permission("list pods in all namespaces", command):
            pages = client.list_pages(
                types.PODS, field_selector=field_selector, page_size=POD_PAGE_SIZE, on_skip=warnings.add
            )
            for page in pages:
                for pod in page.items:
                    build.add_pod(pod)
                seen += len(page.items)
                if progress is not None:
                    progress(seen)
    return build.snapshot()


def from_objects(
    nodes: Sequence[types.Node],
    pods: Iterable[types.Pod],
    names: Sequence[str] = (),
    *,
    cluster_wide: bool,
    stack: str = stacks.AUTO,
    warnings: Warnings | None = None,
    sick: Mapping[str, frozenset[int]] | None = None,
    devices: Iterable[types.KoordDevice] = (),
    objects: dra.DraObjects | None = None,
) -> Snapshot:
    """The snapshot of objects already decoded (a file, or ``inspect -w``'s informers), as `from_api` builds it.

    Args:
        nodes: the nodes read (`choose_nodes`: the named ones, or those ``-l`` matches).
        pods: the pods (completed ones are left out here, as the API leaves them out for `from_api`).
        names: the node names given (``[NODE]...``), each once.
        cluster_wide: no names and no selector (pods waiting for a node are shown then).
        stack: ``auto``, or the one stack every node is read as.
        warnings: where problems go (a new collection when None).
        sick: node -> unhealthy GPU indices (`unhealthy_by_node`).
        devices: Koordinator ``Device`` objects (`devices_of`).
        objects: the DRA objects (`dra_of` / `dra_of_lists`); None: none served.
    """
    warnings = warnings if warnings is not None else Warnings()
    build = Build(nodes, names, cluster_wide=cluster_wide, stack=stack, warnings=warnings, sick=sick,
                  devices=devices, objects=objects)
    if build.reads_pods:
        for pod in pods:
            build.add_pod(pod)
    return build.snapshot()


class Build:
    """One snapshot being built: nodes and the other kinds first, then each active pod (`add_pod`).

    The one place the rules live (which node is whose, which pod counts where, which waits), for
    `from_api` (which streams pods page by page, so 100,000 of them are never held) and
    `from_objects` (files and ``inspect -w``), so the views cannot differ by where objects came from.
    """

    def __init__(
        self,
        nodes: Sequence[types.Node],
        names: Sequence[str],
        *,
        cluster_wide: bool,
        stack: str,
        warnings: Warnings,
        sick: Mapping[str, frozenset[int]] | None = None,
        devices: Iterable[types.KoordDevice] = (),
        objects: dra.DraObjects | None = None,
        keep_pods: bool = True,
    ) -> None:
        self.names = names
        self.cluster_wide = cluster_wide
        self.warnings = warnings
        self.objects = objects if objects is not None else dra.DraObjects(served=False)
        self.split = split = StackSplit(stack, warnings, devices)
        self.nodes = split.add_dra(split.gpushare_records(nodes, dict(sick or {})), self.objects, node_ips(nodes))
        wanted = {node.name for node in self.nodes if names or node.alloc_mem > 0}
        wanted |= {name for name, node in split.nodes.items() if names or node.gpus}
        self.wanted = wanted
        # With one node named, `from_api` asks the server for that node's pods only.
        self.only = names[0] if len(names) == 1 else None
        self.ledger = Ledger.build(self.nodes, (), basis="allocatable", keep_pods=keep_pods)
        self.unscheduled: list[PodRecord] = []
        self.claiming: list[types.Pod] = []  # pods on no node with claims: few; their claims may wait
        self.reserved = dra.reserved_pods(self.objects.claims)
        self.phases: dict[str, str] = {}
        # The claims on our driver's GPUs by holder (made records at the end, with the pods' phases);
        # a pod counted by its claims builds no record of its own.
        self.held: dict[str, dra.Holding] = {}
        if self.objects.claims:
            units = dra.units(self.nodes, split.dra_nodes)
            held = dra.claim_holdings(self.objects, units)  # on nodes of `units` only: all shown, commonly
            self.held = held if wanted.issuperset(units) else {
                uid: holding for uid, holding in held.items() if dra.holding_node(holding) in wanted}
        self.keys = PodKeys(warnings)

    @property
    def reads_pods(self) -> bool:
        """Whether any node shown can hold pods (else `from_api` lists none, and none is shown waiting)."""
        return bool(self.wanted)

    def add_pod(self, pod: types.Pod) -> None:
        """Count one pod: on its gpushare node, as a claim on its stack node, or as waiting for a node."""
        node_name = pod.spec.node_name
        if protocol.pod_phase_terminal(pod.status.phase) or (self.only is not None and node_name != self.only):
            return
        if self.reserved and pod.metadata.uid in self.reserved:
            self.phases[pod.metadata.uid] = pod.status.phase
        split = self.split
        if node_name in self.wanted and node_name not in split.nodes:
            if not self.held or pod.metadata.uid not in self.held:
                self.ledger.set_pod(self.keys.record(pod))
            return
        if self.cluster_wide and not node_name:
            record = pod_record(pod, self.warnings)  # an invalid limit: not pending, and said (as doctor)
            # A valid limit beside an invalid one still asks nothing: the extender refuses the pod (explain's
            # invalid-request), so it waits for no node.
            if waiting(record, node_name) and not invalid_requests(pod):
                self.unscheduled.append(record)
            elif pod.spec.resource_claims and self.objects.claims:
                self.claiming.append(pod)
        if split.nodes:  # a HAMi pod still binding has no node yet but counts on its vgpu-node
            split.add_pod(pod)

    def snapshot(self) -> Snapshot:
        """The snapshot, once every pod went through `add_pod`."""
        split, objects, phases = self.split, self.objects, self.phases
        split.nvidia_dra_claims(objects, phases)
        for record in dra.holding_records(self.held, phases):
            self.ledger.set_pod(record)
        split.finish()
        snapshot = _snapshot(
            self.ledger, self.nodes, bool(self.names), self.warnings, list(split.nodes.values()), split.claims
        )
        snapshot.unscheduled = self.unscheduled + _dra_waiting(self.claiming, objects, snapshot)
        snapshot.dra, snapshot.dra_nodes = objects, split.dra_nodes
        return snapshot


def choose_nodes(nodes: Iterable[types.Node], node_names: Sequence[str], selector: str | None) -> list[types.Node]:
    """The nodes a view reads of ``nodes``: the named ones (each once, in order), then those ``-l`` matches.

    What `from_api` asks the server for, applied to objects already read.

    Raises:
        NotFound: a named node is not among ``nodes``.
        SelectorError: ``selector`` is malformed.
    """
    matches = selectors.matcher(selector)
    by_name = {node.metadata.name: node for node in nodes}
    names = _unique(node_names)
    if names:
        missing = [name for name in names if name not in by_name]
        if missing:
            raise not_found(missing[0])
        chosen = [by_name[name] for name in names]
    else:
        chosen = list(by_name.values())
    return [node for node in chosen if matches(node.metadata.labels)] if selector else chosen


def _dra_waiting(pods: Sequence[types.Pod], objects: dra.DraObjects, snapshot: Snapshot) -> list[PodRecord]:
    """Pods waiting for their claims of our driver to be allocated, in the views' unit (`dra.waiting_records`)."""
    if not pods or not objects.claims:
        return []
    from kubectl_gpushare.inspect.compat import memory_unit

    return dra.waiting_records(pods, objects, memory_unit(snapshot.ledger, snapshot.names) or protocol.UNIT_GIB)


# --- from a file -----------------------------------------------------------------------------------


MAX_INPUT_BYTES: Final = 4 * 2**30
"""The most ``--from-file`` reads, 4 GiB: ``kubectl get nodes,pods,resourceslices,resourceclaims -A -o json``
of 5,000 nodes and 100,000 pods with a real pod's bulk (each allocated through a ResourceClaim) is
about 1.1 GB as kubectl indents it (0.45 GB as YAML). A larger file, or a stream that does not end
(``/dev/zero``, a pipe), is refused before it fills memory. kubectl itself has no such option to copy."""
_READ_CHUNK: Final = 1 << 20
"""Bytes asked for at a time from a pipe or device (a regular file is read in one call of its size)."""


def read_input(stream: IO[bytes], limit: int = MAX_INPUT_BYTES) -> bytes:
    """Everything ``stream`` (a ``--from-file`` file, or stdin) holds, never reading more than ``limit`` + 1 bytes.

    A regular file larger than ``limit`` is refused unread; a smaller one is read in one call of
    its size (one buffer, as a plain ``read()``). A pipe or device is read a chunk at a time until
    it ends or passes ``limit``, into a buffer that grows in place, so what was read is held once.

    Raises:
        InputError: the input is larger than ``limit`` bytes, or reading it failed.
    """
    try:
        return _read_bounded(stream, limit)
    except OSError as exc:  # stdin opened for writing only (EBADF), /proc/self/mem (EIO), a disk error
        raise InputError(f"the input cannot be read: {exc.strerror or protocol.error_reason(exc)}") from None


def _read_bounded(stream: IO[bytes], limit: int) -> bytes:
    size = _regular_size(stream)
    if size is not None and size > limit:
        raise _too_large(limit)
    first = stream.read(min(size + 1 if size else _READ_CHUNK, limit + 1))  # a byte past the size: did it grow?
    if len(first) > limit:
        raise _too_large(limit)
    more = stream.read(min(_READ_CHUNK, limit + 1 - len(first))) if first else b""
    if not more:
        return first  # a regular file, or a short stream: one read, no copy
    buffer = io.BytesIO()  # grows by realloc; getvalue() hands over its bytes without a copy
    buffer.write(first)
    while more:
        buffer.write(more)
        if buffer.tell() > limit:
            raise _too_large(limit)
        more = stream.read(min(_READ_CHUNK, limit + 1 - buffer.tell()))
    return buffer.getvalue()


def _regular_size(stream: IO[bytes]) -> int | None:
    """The size of a regular file behind ``stream``; None for a pipe, a device or a stream without a file."""
    try:
        status = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _too_large(limit: int) -> InputError:
    return InputError(f"the input is larger than {limit:,} bytes, the most that is read")


class _Document(msgspec.Struct):
    kind: str = ""
    items: list[msgspec.Raw] | None = None


class _KindOnly(msgspec.Struct):
    kind: str = ""


_DOCUMENT_DECODER: Final = msgspec.json.Decoder(_Document)
_KIND_DECODER: Final = msgspec.json.Decoder(_KindOnly)
_ITEM_KINDS: Final = {"NodeList": "Node", "PodList": "Pod"}


YAML_C_DEPTH: Final = 256
"""Flow nesting above which YAML is read by the pure-Python loader: libyaml's C composer recurses on
the C stack and crashes the process on ~100,000 nested brackets, the Python one raises RecursionError."""
_BRACKET_BYTES: Final = re.compile(rb"[\[\]{}]")


def _bracket_depth(data: bytes) -> int:
    """An upper bound on flow nesting: brackets are counted even inside quoted strings."""
    depth = deepest = 0
    for bracket in _BRACKET_BYTES.findall(data):
        depth = depth + 1 if bracket in b"[{" else depth - 1
        deepest = max(deepest, depth)
    return deepest


Others = dict[str, list[Any]]
"""Kind -> the raw items of that kind (``msgspec.Raw`` from JSON, mappings from YAML), collected in passing.

Nodes and Pods are collected from JSON only: a YAML one is converted, and its mapping not kept alive."""


def _document(data: bytes) -> _Document:
    """The file's list, its kind and items undecoded.

    Past an item nested deeper than msgspec goes, a flat scan splits the items (`kube.shallow`), so
    only that item is refused, where it is decoded.

    Raises:
        RecursionError: the file is nested too deeply even at its top level.
    """
    try:
        return _DOCUMENT_DECODER.decode(data)
    except RecursionError:
        found = shallow.split_list(data)
        if found is None or any(bytes(item)[:1] != b"{" for item in found.items or ()):
            raise  # no object here to save from a deep neighbour: the input itself is too deep
        return _Document(found.kind, list(found.items) if found.items is not None else None)


OwnKind = tuple[str | None, str]
"""An item's own ``kind`` ("" where it has none) and "", or None and why, where it is there but not a string."""


def listed_kind(own: str | None, default: str) -> str | None:
    """The kind a listed item is read as: its own, else its list's (the items of a ``NodeList`` are Nodes).

    The one rule of every ``--from-file`` reader (`parse_documents`).
    ``own`` None is a ``kind`` that is not a string (a number, null, an object, a list), "" an absent
    or empty one: the item is then its list's kind where the list names one (the API leaves the
    items of a ``PodList`` without one), else None: nothing says what it is, and `parse_documents`
    skips it with one warning (`unkinded`; kubectl writes every item of a plain ``List`` with its kind).
    """
    if own:
        return own
    return default or None


NO_KIND: Final = "Object missing required field `kind`"
"""Why an item of a plain ``List`` without a kind is skipped (msgspec's words for a missing field)."""


def _raw_kind(raw: msgspec.Raw) -> OwnKind:
    """A JSON item's own kind (`OwnKind`; found by a flat scan where the item nests too deeply to decode)."""
    try:
        return _KIND_DECODER.decode(raw).kind, ""
    except msgspec.ValidationError as exc:  # not an object, or a kind that is not a string
        return None, protocol.error_reason(exc)
    except RecursionError:
        found = shallow.members(bytes(raw))
        if found is None:
            return None, "nested too deeply"
        try:
            return (msgspec.json.decode(found["kind"], type=str), "") if "kind" in found else ("", "")
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return None, f"{protocol.error_reason(exc)} - at `$.kind`"


def _yaml_kind(item: object) -> OwnKind:
    """A YAML item's own kind (`OwnKind`), in JSON's words where it is not a string or not a mapping (`_raw_kind`).

    The loader reads every scalar as a string, so a plain scalar that YAML 1.1 resolves to another
    type (``5``, ``null``, ``~``, ``true``, ``yes``) is that type, as sigs.k8s.io/yaml (go-yaml v2,
    YAML 1.1) reads it for kubectl. Quoting is not kept, so ``"5"`` reads as a number too: either way
    no kind is called that. An empty kind is no kind.
    """
    if not isinstance(item, dict):
        return None, f"Expected `object`, got `{_yaml_type(item)}`"
    value = item.get("kind", "")
    if isinstance(value, str) and (not value or _yaml_type(value) == "str"):
        return value, ""
    return None, f"Expected `str`, got `{_yaml_type(value)}` - at `$.kind`"


def _yaml_type(value: object) -> str:
    """The JSON type name msgspec's errors use for a value the YAML loader read (`_plain_scalar_type`)."""
    if isinstance(value, str):
        return _plain_scalar_type(value)
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else type(value).__name__


@functools.cache
def _yaml_resolver() -> Any:
    import yaml

    return yaml.resolver.Resolver()


def _plain_scalar_type(value: str) -> str:
    """What YAML 1.1 reads a plain scalar as: ``str``, ``int``, ``float``, ``bool``, ``null``, ``timestamp``..."""
    import yaml

    return str(_yaml_resolver().resolve(yaml.ScalarNode, value, (True, False))).rpartition(":")[2]


_NODE_OR_POD: Final[dict[str, types.Kind[Any]]] = {"Node": types.NODES, "Pod": types.PODS}


def _skipped(plural: types.Kind[Any], item: object, why: str) -> str:
    """The API path's warning for a YAML item of a list that does not convert (keyed by `lenient.key_of`)."""
    key = lenient.key_of(*_yaml_key(item))
    return lenient.skipped(plural, lenient.Undecodable(plural.plural, key, "", why))


def unkinded(namespace: object, name: object, why: str) -> str:
    """The warning for a listed item whose kind is not a string, in `lenient.skipped`'s words.

    ``list item ml/x: cannot be decoded (Expected `str`, got `int` - at `$.kind`); skipped``
    """
    return lenient.skipped_as("list item", lenient.Undecodable("", lenient.key_of(namespace, name), "", why))


def _yaml_key(item: object) -> tuple[object, object]:
    """A YAML item's ``metadata.namespace`` and ``metadata.name``, whatever they are (None where absent)."""
    meta = item.get("metadata") if isinstance(item, dict) else None
    return (meta.get("namespace"), meta.get("name")) if isinstance(meta, dict) else (None, None)


def _json_objects(
    data: bytes, others: Others | None = None, warnings: Warnings | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield ``(kind, decoded struct)`` for each Node and Pod in a JSON document; collect ``others`` in passing.

    In a list, a Node or Pod that does not decode (a field of the wrong type, nested too deeply) is
    skipped with one warning, as the API path skips it from a list page (`lenient.decode_page`);
    a file that is one such object is unreadable.
    """
    try:
        document = _document(data)
        raws = document.items if document.items is not None else [msgspec.Raw(data)]
        default_kind = _ITEM_KINDS.get(document.kind, "")
        for raw in raws:
            own, why = _raw_kind(raw)
            kind = listed_kind(own, default_kind)
            if kind is None:
                if warnings is not None:
                    warnings.add(unkinded(*lenient.object_meta(raw)[:2], why or NO_KIND))
            elif kind in _NODE_OR_POD:
                if others is not None and kind in others:
                    others[kind].append(raw)
                try:
                    yield kind, _NODE_OR_POD[kind].item_decoder.decode(raw)
                except (msgspec.ValidationError, RecursionError) as exc:
                    if document.items is None:
                        raise
                    if warnings is not None:
                        plural = _NODE_OR_POD[kind]
                        warnings.add(lenient.skipped(plural, lenient.describe(plural, raw, exc)))
            elif others is not None and kind in others:
                others[kind].append(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InputError(f"not a Kubernetes JSON list: {exc}") from None
    except RecursionError:
        raise InputError("not a Kubernetes JSON list: nested too deeply") from None


def _yaml_objects(
    text: str, deep: bool, others: Others | None = None, warnings: Warnings | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield ``(kind, decoded struct)`` for each Node and Pod in YAML documents; collect ``others`` in passing.

    Scalars are read as strings and coerced by field type, so a hand-written ``gpu-mem: 30`` or an
    unquoted timestamp reads the same as kubectl's quoted output. In a list, a Node or Pod that does
    not convert is skipped with one warning, as in JSON (`_json_objects`).
    """
    import yaml

    loader = yaml.BaseLoader if deep else getattr(yaml, "CBaseLoader", yaml.BaseLoader)
    try:
        documents = list(yaml.load_all(text, Loader=loader))  # noqa: S506 - BaseLoader builds only str/list/dict
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise InputError("not valid YAML: nested too deeply") from None
    for document in documents:
        if not isinstance(document, dict):
            if document in (None, ""):
                continue
            raise InputError("not a Kubernetes object or list: a YAML document is not a mapping")
        items = document.get("items")
        default_kind = _ITEM_KINDS.get(str(document.get("kind", "")), "")
        objects = items if isinstance(items, list) else [document]
        for item in objects:
            own, why = _yaml_kind(item)  # an item that is not a mapping is skipped with a warning, as in JSON
            kind = listed_kind(own, default_kind)
            if kind is None:
                if warnings is not None:
                    warnings.add(unkinded(*_yaml_key(item), why or NO_KIND))
                continue
            plural = _NODE_OR_POD.get(kind)
            if plural is None:
                if others is not None and kind in others:
                    others[kind].append(item)
                continue
            if not isinstance(item, dict):  # an item of a NodeList or PodList: JSON's words for it
                if warnings is not None:
                    warnings.add(_skipped(plural, item, why))
                continue
            try:
                converted = msgspec.convert(item, plural.item_decoder.type, strict=False)
            except (RecursionError, msgspec.ValidationError) as exc:
                if isinstance(items, list):
                    if warnings is not None:
                        warnings.add(_skipped(plural, item, protocol.error_reason(exc)))
                    continue
                if isinstance(exc, RecursionError):
                    raise InputError(f"{kind}: nested too deeply") from None
                name = _yaml_key(item)[1]
                raise InputError(f"{kind} {'?' if name is None else name}: {exc}") from None
            yield kind, converted


def _replace_invalid_utf8(data: bytes, warnings: Warnings | None) -> bytes:
    """Invalid UTF-8 becomes U+FFFD, as Go's JSON encoder (so kubectl) would have written it."""
    if warnings is not None:
        warnings.add("the input is not valid UTF-8; invalid bytes were read as U+FFFD")
    return data.decode("utf-8", errors="replace").encode()


_T = TypeVar("_T")


def decode_raw(decoder: msgspec.json.Decoder[_T], raw: msgspec.Raw, warnings: Warnings | None = None) -> _T:
    """One raw item of a dump, decoded; invalid UTF-8 in it is read as U+FFFD (`_replace_invalid_utf8`).

    `parse_documents` replaces invalid bytes only when a Node or Pod holds one; the other kinds are
    collected undecoded, so each is mended here, when (and only if) its decoding meets one.
    """
    try:
        return decoder.decode(raw)
    except UnicodeDecodeError:
        return decoder.decode(_replace_invalid_utf8(bytes(raw), warnings))


class _NameMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _Named(msgspec.Struct):
    metadata: _NameMeta = msgspec.field(default_factory=_NameMeta)


_NAMED_DECODER: Final = msgspec.json.Decoder(_Named)


def raw_key(raw: msgspec.Raw) -> tuple[str, str]:
    """``(namespace, name)`` of a raw JSON object, decoding nothing else."""
    try:
        meta = decode_raw(_NAMED_DECODER, raw).metadata
    except RecursionError:  # nested past the decoder elsewhere: the flat scan finds the metadata
        return lenient.object_meta(raw)[:2]
    except msgspec.DecodeError:  # a name or namespace of the wrong type: no key, so no pod is this one
        return "", ""
    return meta.namespace, meta.name


def _json_only(items: Sequence[Any]) -> list[msgspec.Raw]:
    """The JSON items of a collection (ConfigMaps, Devices and admission policies are read from JSON dumps only)."""
    return [item for item in items if isinstance(item, msgspec.Raw)]


def decoded_of(
    found: Mapping[str, Sequence[Any]], kind: types.Kind[types.ItemT], warnings: Warnings
) -> list[types.ItemT]:
    """The JSON items of ``kind`` collected by `parse_documents` (``others``), decoded.

    One that does not decode (mistyped, or nested past msgspec's depth) is skipped with the warning
    the API path writes for it (`lenient.skipped`, a list's ``on_skip``): a file and a cluster say alike.
    Invalid UTF-8 in one is read as U+FFFD and said once, as in a node, a pod or a DRA object (`decode_raw`).
    """
    decoded: list[types.ItemT] = []
    for raw in _json_only(found.get(kind.kind, ())):
        try:
            decoded.append(decode_raw(kind.item_decoder, raw, warnings))
        except (msgspec.DecodeError, RecursionError) as exc:  # msgspec's ValidationError is a DecodeError
            warnings.add(lenient.skipped(kind, lenient.describe(kind, raw, exc)))
    return decoded


DRA_KINDS: Final = ("ResourceSlice", "ResourceClaim", "DeviceClass")


def dra_of(
    found: Mapping[str, Sequence[Any]], warnings: Warnings, *, classes: bool = False, pending: bool = False,
    tally: bool = False, nodes: Iterable[types.Node] = (), resolve: bool = False,
) -> dra.DraObjects:
    """The ResourceSlices and ResourceClaims of a file dump, collected by kind (`parse_documents` ``others``).

    JSON or YAML. An item that does not decode is one warning. With ``classes``, DeviceClasses too,
    where the file has some (else they are not read). ``nodes``: the file's nodes, whose labels
    slices' node selectors match. ``pending``, ``tally`` and ``resolve`` as `dra_from_api`.
    """
    if not found.get("ResourceSlice") and not found.get("ResourceClaim"):
        return dra.DraObjects(served=False)
    slices = _wires(found.get("ResourceSlice", ()), dra_objects.WireResourceSlice, "ResourceSlice", warnings,
                    keep=lambda wire: wire.spec.driver in dra.DRIVERS)
    claims = _claim_wires(found.get("ResourceClaim", ()), warnings, pending=classes or pending, tally=tally)
    objects = dra.read(slices, claims, warnings, pending=classes or pending, labels=node_labels(nodes),
                       resolve=resolve)
    if classes and found.get("DeviceClass"):
        wires = _wires(found["DeviceClass"], dra_objects.WireDeviceClass, "DeviceClass", warnings)
        objects.classes = dra.read_classes(wires, warnings)
    return objects


def _named(message: str, kind: str, item: msgspec.Raw | dict[str, Any]) -> str:
    """A decoding error (``a <kind>: ...``) with the object's name in it, where it can be read."""
    anonymous = f"a {kind}:"
    if not message.startswith(anonymous):
        return message
    if isinstance(item, msgspec.Raw):
        try:
            namespace, name = raw_key(item)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return message
    else:
        meta = item.get("metadata")
        namespace, name = ("", "")
        if isinstance(meta, dict):
            namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    key = f"{namespace}/{name}" if namespace else name
    return f"{kind} {key[:253]}:{message[len(anonymous):]}" if key else message


_W = TypeVar("_W", dra_objects.WireResourceSlice, dra_objects.WireResourceClaim, dra_objects.WireDeviceClass)
_WIRE_DECODERS: Final[dict[type, Any]] = {
    dra_objects.WireResourceSlice: types.DRA_SLICE_DECODER,
    dra_objects.WireResourceClaim: types.DRA_CLAIM_DECODER,
    dra_objects.WireDeviceClass: types.DRA_CLASS_DECODER,
}


def _wires(
    items: Sequence[msgspec.Raw] | Sequence[dict[str, Any]], wire: type[_W], kind: str, warnings: Warnings,
    keep: Callable[[_W], bool] | None = None,
) -> list[_W]:
    """Wire structs of JSON items (decoded straight from the buffer, as a list page is) or of YAML items.

    YAML items have every scalar as a string and are read as kubectl wrote them (non-strict). ``keep``
    drops the ones not wanted; one that does not decode is one warning.
    """
    decoder = _WIRE_DECODERS[wire]
    found: list[_W] = []
    for item in items:
        try:
            if isinstance(item, msgspec.Raw):
                decoded = decode_raw(decoder, item, warnings)
            else:
                decoded = msgspec.convert(item, wire, strict=False)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, TypeError) as exc:
            reason = protocol.error_reason(exc)
            warnings.add(f"{_named(f'a {kind}: cannot be decoded ({reason})', kind, item)}; skipped")
            continue
        if keep is None or keep(decoded):
            found.append(decoded)
    return found


_ALLOCATED_CLAIM_DECODER: Final = msgspec.json.Decoder(dra_objects.WireAllocatedClaim)
_TALLY_CLAIM_DECODER: Final = msgspec.json.Decoder(dra_objects.WireTallyClaim)


def _claim_wires(
    items: Sequence[msgspec.Raw] | Sequence[dict[str, Any]], warnings: Warnings, *, pending: bool,
    tally: bool = False,
) -> list[dra_objects.WireResourceClaim | dra_objects.ResourceClaim]:
    """`_wires` of ResourceClaims; a JSON claim's requests are decoded only while it waits (``pending``).

    An allocated claim counts by its allocation (`dra.read` drops its requests), so its ``spec``
    is skipped, undecoded; an unallocated one is decoded whole (or, without ``pending``, left out).
    With ``tally`` (views that count allocated claims and ask only unallocated ones what they
    request: inspect, fit), a JSON claim that is allocated and plain is read for counting only
    (`dra_objects.tally_claim`: no annotations, finalizers or owner) and returned already read; the
    order is the input's.
    """
    if not items or not isinstance(items[0], msgspec.Raw):
        return [*_wires(items, dra_objects.WireResourceClaim, "ResourceClaim", warnings)]
    found: list[dra_objects.WireResourceClaim | dra_objects.ResourceClaim] = []
    selectors: dict[bytes, str | None] = {}
    for item in items:
        assert isinstance(item, msgspec.Raw)
        if tally:
            try:
                wire = _TALLY_CLAIM_DECODER.decode(item)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
                wire = None  # read whole below, for its one warning
            claim = dra_objects.tally_claim(wire, selectors) if wire is not None else None
            if claim is not None:
                found.append(claim)
                continue
        try:
            lean = decode_raw(_ALLOCATED_CLAIM_DECODER, item, warnings)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            lean = None  # decoded whole, for its one warning
        if lean is not None and lean.status.allocation is not None:
            found.append(dra_objects.WireResourceClaim(metadata=lean.metadata, status=lean.status))
        elif pending or lean is None:
            found += _wires([item], dra_objects.WireResourceClaim, "ResourceClaim", warnings)
    return found


def placement_of(
    found: Mapping[str, Sequence[Any]], namespace: str, name: str, warnings: Warnings
) -> types.PodPlacement | None:
    """The required node affinity of pod ``namespace/name`` among JSON Pods collected by `parse_documents`.

    YAML Pods are read without it (None). One that does not decode (a mistyped affinity, one nested past
    the decoder) is one warning and None: the pod is explained without it, rather than not at all.
    A file holding the pod twice gives the first one's, as explain reads the first (its ``matches[0]``):
    the request and the affinity explained are one object's.
    """
    for raw in _json_only(found.get("Pod", ())):
        if raw_key(raw) == (namespace, name):
            return placement_in(raw, namespace, name, warnings)
    return None


def placement_in(raw: msgspec.Raw, namespace: str, name: str, warnings: Warnings) -> types.PodPlacement | None:
    """The required node affinity of pod ``namespace/name`` from its JSON (a file's item, or the API's reply).

    One that does not decode (a mistyped affinity, one nested past the decoder) is one warning and None:
    the pod is explained without it, rather than not at all.
    """
    try:
        return decode_raw(types.POD_PLACEMENT_DECODER, raw)
    except (msgspec.DecodeError, RecursionError) as exc:  # msgspec's ValidationError is a DecodeError
        warnings.add(f"pod {namespace}/{name}: its affinity cannot be decoded ({protocol.error_reason(exc)}); "
                     "explained without it")
        return None


def configmaps_of(found: Mapping[str, Sequence[Any]], warnings: Warnings) -> list[types.ConfigMap]:
    """ConfigMaps collected by `parse_documents` (``others``; JSON ones only; `decoded_of`)."""
    return decoded_of(found, types.CONFIGMAPS, warnings)


def list_quotas(client: Client, warnings: Warnings) -> list[types.ResourceQuota]:
    """Every ResourceQuota (quotas are few; one that does not decode is warned about and left out)."""
    quotas = client.list(types.RESOURCEQUOTAS, on_skip=warnings.add)
    return quotas


def quotas_of(
    list_quotas: Callable[[], Sequence[types.ResourceQuota]], warnings: Warnings
) -> list[types.ResourceQuota]:
    """The ResourceQuotas ``--group-by namespace`` shows (the API, or ``inspect -w``'s informer).

    Without permission to list them, the QUOTA column is left out and a warning says why.
    """
    try:
        return list(list_quotas())
    except Forbidden:
        warnings.add("cannot list resourcequotas: the QUOTA column is left out")
        return []


def unhealthy_by_node(configmaps: Iterable[types.ConfigMap]) -> dict[str, frozenset[int]]:
    """Node -> GPU indices its unhealthy-GPU ConfigMap lists (the extender's source of truth)."""
    found: dict[str, frozenset[int]] = {}
    for configmap in configmaps:
        node = unhealthy_node_name(configmap)
        if node:
            found[node] = unhealthy_gpus(configmap)
    return found


def parse_documents(
    data: bytes, warnings: Warnings | None = None, others: Others | None = None
) -> tuple[list[types.Node], list[types.Pod]]:
    """Decode nodes and pods from ``kubectl get ... -o json`` or ``-o yaml`` output.

    Invalid UTF-8 is read with U+FFFD in its place (and a warning), so one bad byte in one pod's
    annotation does not hide the cluster; nor does one listed Node or Pod that does not decode (it
    is skipped with a warning, as from the API). Items of the kinds ``others`` names are collected there
    undecoded, in the same pass (a 200 MB file is walked once).

    Raises:
        InputError: the data is neither, nests too deeply, or holds no Node and no Pod.
    """
    stripped = data.lstrip()
    if not stripped:
        raise InputError("the input is empty; expected the output of `kubectl get nodes,pods -A -o json`")
    if stripped[:1] in (b"{", b"["):
        try:
            objects = list(_json_objects(data, others, warnings))
        except UnicodeDecodeError:
            for found in (others or {}).values():
                found.clear()
            objects = list(_json_objects(_replace_invalid_utf8(data, warnings), others, warnings))
    else:
        try:
            text = data.decode()
        except UnicodeDecodeError:
            text = _replace_invalid_utf8(data, warnings).decode()
        objects = list(_yaml_objects(text, deep=_bracket_depth(data) > YAML_C_DEPTH, others=others, warnings=warnings))
    nodes = [obj for kind, obj in objects if kind == "Node"]
    pods = [obj for kind, obj in objects if kind == "Pod"]
    if not nodes and not pods:
        raise InputError("the input holds no Node and no Pod; expected `kubectl get nodes,pods -A -o json` output")
    return nodes, pods


def from_documents(
    data: bytes, node_names: Sequence[str] = (), selector: str | None = None, stack: str = stacks.AUTO,
    quotas: bool = False, warnings: Warnings | None = None,
) -> Snapshot:
    """Build a snapshot from kubectl's JSON or YAML output, applying the same filters as `from_api`.

    With ``quotas``, the snapshot's ResourceQuotas too (``--group-by namespace``). Problems go to
    ``warnings`` as they are met (`from_api`'s), so an object skipped before a failure is still said.

    Raises:
        InputError: the data cannot be read.
        NotFound: a named node is not in the data.
        SelectorError: ``selector`` is malformed.
    """
    warnings = warnings if warnings is not None else Warnings()
    others: Others = {kind: [] for kind in ("ConfigMap", "Device", "ResourceQuota", *DRA_KINDS)}
    decoded_nodes, decoded_pods = parse_documents(data, warnings, others)
    names = _unique(node_names)
    chosen = choose_nodes(decoded_nodes, names, selector)
    cluster_wide = not names and not selector
    sick = unhealthy_by_node(configmaps_of(others, warnings))
    devices = devices_found(others, chosen, warnings, stack)
    objects = (dra_of(others, warnings, pending=cluster_wide, tally=True, nodes=decoded_nodes)
               if stack in READS_DRA else dra.DraObjects(served=False))
    snapshot = from_objects(chosen, decoded_pods, names, cluster_wide=cluster_wide, stack=stack, warnings=warnings,
                            sick=sick, devices=devices, objects=objects)
    if quotas:
        snapshot.quotas = decoded_of(others, types.RESOURCEQUOTAS, warnings)
    return snapshot
