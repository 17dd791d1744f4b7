"""``kubectl gpushare explain POD``: why a pod does not fit, or where it sits, in plain words.

For a pod that is not on a node yet, every node is asked the extender's question through the
ledger (`Ledger.fits`, `Ledger.choose_gpu`, `Ledger.largest_free`) after the checks kube-scheduler
makes first and that users forget (taints, ``nodeSelector``, cordoned nodes), and the classic trap
is named: a node with enough free memory in total but no single GPU with that much. The
scheduler's own words come from the pod's ``FailedScheduling`` events. For a pod on a node, it says
which GPU it holds and who shares that GPU. Pure: decoded objects in, an `Explanation` out.

JSON: a versioned ``GPUShareExplanation`` (``gpushare.kubectl-gpushare.io/v1``), fields only added::

    pod, namespace, phase, request, unit, state   # state: placed | pending | no-request | invalid-request |
                                                    #   invalid-claims | completed
    summary                                         # one sentence
    node, gpu, sharing: [{namespace, name, memory}] # placed pods
    nodes: [{name, reason}]                         # pending pods: why each gpushare node says no
    events: [message]                               # the scheduler's FailedScheduling messages
    largestFit                                      # the largest request that fits now
    stack, stackGpus: [{gpu, id, amount, total, free, unit, sharing: [{namespace, name, amount}]}]
                      # a pod on a node of another stack (HAMi, NVIDIA, ...), amounts in its GPU's unit
    claims: [{name, state, node, devices, memory, reason}]
                      # a pod with DRA claims of our driver (`explain_dra`): state allocated | pending |
                      # missing; memory in `unit`

Other stacks: explain places nothing there (their schedulers do); for a pod on such a node it says
where the pod sits from the same stack ledger inspect shows (`ledger.stack_usage`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import msgspec
from msgspec.structs import replace

from kubectl_gpushare import node_affinity, protocol
from kubectl_gpushare.inspect import caps
from kubectl_gpushare.inspect.compat import memory_unit
from kubectl_gpushare.kube.records import invalid_requests, pod_record, pod_request
from kubectl_gpushare.kube.stacks import dra, kai
from kubectl_gpushare.kube.taints import TolerationIndex
from kubectl_gpushare.kube.types import (
    Event,
    Node,
    NodeSelectorTerm,
    Pod,
    PodPlacement,
)
from kubectl_gpushare.ledger import (
    PENDING,
    Ledger,
    Policy,
    StackClaim,
    StackDeviceUsage,
    StackNode,
    stack_usage,
)
from kubectl_gpushare.node_affinity import RequiredAffinity
from kubectl_gpushare.protocol import shown_value

API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1"
FITS_PREFIX: Final = "fits on GPU "
"""How a node verdict that takes the pod begins."""
KIND: Final = "GPUShareExplanation"


class Share(msgspec.Struct):
    """Another pod on the same GPU."""

    namespace: str
    name: str
    memory: int


class NodeVerdict(msgspec.Struct):
    """Why one gpushare node does (or does not) take the pod."""

    name: str
    reason: str


class Holder(msgspec.Struct):
    """Another pod on the same GPU of another stack, with its amount in that GPU's unit."""

    namespace: str
    name: str
    amount: int


class StackShare(msgspec.Struct):
    """What the pod holds on one GPU of another stack, in that GPU's unit, and who else does."""

    gpu: int
    id: str
    amount: int
    total: int
    free: int
    unit: str
    sharing: list[Holder]


class ClaimState(msgspec.Struct, omit_defaults=True):
    """One of the pod's ResourceClaims: allocated (on which node and devices), pending, or missing."""

    name: str
    state: str
    node: str = ""
    devices: list[str] = []
    memory: int = 0
    reason: str = ""


class Explanation(msgspec.Struct, rename="camel", omit_defaults=True):
    """The answer to "why is my pod Pending?" or "where does my pod sit?"."""

    pod: str
    namespace: str
    phase: str
    request: int
    unit: str
    state: str
    summary: str
    largest_fit: int = 0
    node: str = ""
    gpu: int | None = None
    sharing: list[Share] = []
    nodes: list[NodeVerdict] = []
    events: list[str] = []
    stack: str = ""
    stack_gpus: list[StackShare] = []
    claims: list[ClaimState] = []
    prefilter_nodes: list[str] | None = None
    """A pending pod's `narrowed_to`: the only nodes kube-scheduler tries (None: every node)."""
    api_version: str = API_VERSION
    kind: str = KIND


AFFINITY_SHOWN: Final = 400
"""Characters of a pod's required node affinity a verdict quotes; past them it ends in "…" (a pod may hold
a hundred thousand terms: each node's verdict, in JSON too, would repeat them all)."""


def _affinity_text(terms: Sequence[NodeSelectorTerm]) -> str:
    """The terms in words, read only as far as `AFFINITY_SHOWN` characters."""
    def pieces() -> Iterator[str]:
        for i, term in enumerate(terms):
            yield " or " if i else ""
            requirements = (*term.match_expressions[:AFFINITY_SHOWN], *term.match_fields[:AFFINITY_SHOWN])
            if not requirements:
                yield "<empty term>"
            for j, r in enumerate(requirements):
                yield f"{'; ' if j else ''}{r.key[:AFFINITY_SHOWN]} {r.operator[:AFFINITY_SHOWN]}"
                for k, value in enumerate(r.values[:AFFINITY_SHOWN]):
                    yield f"{',' if k else ' ('}{value[:AFFINITY_SHOWN]}"
                yield ")" if r.values else ""

    text = ""
    for piece in pieces():
        text += piece
        if len(text) > AFFINITY_SHOWN:
            return text[:AFFINITY_SHOWN - 1] + "…"
    return text


def required_affinity(placement: PodPlacement | None) -> RequiredAffinity | None:
    """The pod's required node affinity as the scheduler reads it (`node_affinity.required_affinity`); None: none.

    Read once for all the nodes the pod is judged on (`excluded`): a pod's affinity may hold a
    hundred thousand terms.
    """
    return node_affinity.required_affinity(placement.node_terms if placement is not None else ())


def narrowed_to(affinity: RequiredAffinity | None) -> list[str] | None:
    """The node names NodeAffinity's PreFilter narrows a pod to, sorted (None: it narrows nothing, or leaves none)."""
    return sorted(affinity.names) if affinity is not None and affinity.names else None


PREFILTER_LINE: Final = ("kube-scheduler tries only these nodes (NodeAffinity's PreFilter: the metadata.name In "
                         "terms of the pod's required node affinity): ")
"""The text line that lists `Explanation.prefilter_nodes`, before the names."""


LEFT_OUT: Final = ("the pod's required node affinity names other nodes by metadata.name (kube-scheduler: "
                   f"{node_affinity.NOT_IN_PREFILTER_REASON})")
"""The verdict on a node NodeAffinity's PreFilter leaves out, in plain words and the scheduler's (the stand-in's)."""
CONFLICT: Final = (f"{node_affinity.AFFINITY_CONFLICT} (in every term of its required node affinity, the "
                   "metadata.name In requirements have no name in common)")
"""Why no node is even tried for a pod NodeAffinity's PreFilter rejects, in the scheduler's words and plain ones."""


def excluded(
    pod: Pod, node: Node, placement: PodPlacement | None = None, affinity: RequiredAffinity | None = None,
    tolerations: TolerationIndex | None = None,
) -> str | None:
    """Why kube-scheduler drops the node before the extender is asked; None if it does not.

    In kube-scheduler's order: NodeAffinity's PreFilter (a node it leaves out is never filtered),
    then the filters NodeUnschedulable, TaintToleration, NodeAffinity.

    ``affinity``: `required_affinity` of ``placement``, and ``tolerations``: the pod's tolerations
    indexed, when the caller judges many nodes (else read here).
    """
    required = affinity if affinity is not None or placement is None else required_affinity(placement)
    if required is not None and required.left_out(node.metadata.name):
        return LEFT_OUT
    index = tolerations if tolerations is not None else TolerationIndex(pod.spec.tolerations)
    if node.spec.unschedulable and index.kept_off_cordoned():
        return "cordoned (unschedulable)"
    taint = index.untolerated(node.spec.taints)
    if taint is not None:
        value = f"={taint.value}" if taint.value else ""
        return f"tainted {taint.key}{value}:{taint.effect}, which the pod does not tolerate"
    labels = node.metadata.labels
    for key, value in sorted(pod.spec.node_selector.items()):
        if labels.get(key) != value:
            return f"the pod's nodeSelector {key}={value} does not match (node has {key}={labels.get(key, '<unset>')})"
    if required is not None and not required.selector.matches(labels, node.metadata.name):
        terms = placement.node_terms if placement is not None else ()
        return f"the pod's required node affinity ({_affinity_text(terms)}) does not match"
    return None


def _verdict(ledger: Ledger, name: str, dropped: str | None, request: int, unit: str, policy: Policy) -> str:
    """The node's line: why it is ``dropped`` (`excluded`), or whether its GPUs take ``request``."""
    if dropped:
        return dropped
    record = ledger.node(name)
    unhealthy = ""
    if record is not None and (record.cap_count, record.cap_mem) != (record.alloc_count, record.alloc_mem):
        unhealthy = f"; {record.cap_count - record.alloc_count} of its {record.cap_count} GPUs are unhealthy"
    gpu = ledger.choose_gpu(name, request, policy)
    if gpu is not None:
        return f"{FITS_PREFIX}{gpu} ({policy}){unhealthy}"
    if record is not None and record.unhealthy:
        usage = ledger.usage(name)
        sick = [i for i in sorted(record.unhealthy) if i in usage.devices and usage.devices[i].free >= request]
        if sick:
            return (f"GPU {sick[0]} has {usage.devices[sick[0]].free} {unit} free but is unhealthy "
                    f"(ConfigMap {protocol.UNHEALTHY_CM_PREFIX}{name}): nothing new goes there")
    free = ledger.free(name)
    total_free = sum(max(value, 0) for value in free.values())
    largest = ledger.largest_free(name)
    if total_free >= request:
        best = max(free, key=lambda index: (free[index], -index))
        return (
            f"{total_free} {unit} free in total, but the largest free GPU (GPU {best}) has only {largest} {unit}: "
            f"a pod never spans GPUs{unhealthy}"
        )
    return f"only {total_free} {unit} free (largest free GPU: {largest} {unit}){unhealthy}"


def explain(
    pod: Pod,
    nodes: Sequence[Node],
    ledger: Ledger,
    events: Sequence[Event] = (),
    policy: Policy = "binpack",
    placement: PodPlacement | None = None,
    stack_nodes: Sequence[StackNode] = (),
    stack_claims: Mapping[str, list[StackClaim]] | None = None,
) -> Explanation:
    """Explain one pod against the cluster's nodes.

    Args:
        pod: the pod asked about.
        nodes: every node (decoded), for taints, selectors and labels.
        ledger: the ledger of those nodes and the active pods (inspect's snapshot).
        events: the pod's events; ``FailedScheduling`` messages are quoted.
        policy: the extender's GPU policy.
        placement: the pod's required node affinity (`kube.types.PodPlacement`), when known.
        stack_nodes: nodes of other stacks (`inspect.source.stack_ledger`); a pod on one is located there.
        stack_claims: node name -> claims of pods on that stack node.
    """
    meta = pod.metadata
    request, _ = pod_request(pod)
    names = [node.metadata.name for node in nodes]
    unit = memory_unit(ledger, sorted(names)) or protocol.UNIT_GIB
    largest = max((ledger.largest_free(name) for name in names if not _dra_node(ledger, name)), default=0)
    said = [e.message for e in events if e.reason == "FailedScheduling" and e.message]
    base = Explanation(pod=meta.name, namespace=meta.namespace, phase=pod.status.phase or "Pending",
                       request=request, unit=unit, state="", summary="", largest_fit=largest, events=said)
    who = f"Pod {meta.namespace}/{meta.name}"
    if protocol.pod_phase_terminal(pod.status.phase):
        return replace(base, state="completed",
                           summary=f"{who} is {pod.status.phase}; it holds no GPU memory any more.")
    invalid = invalid_requests(pod)
    if invalid:  # the extender refuses the pod: never a fit
        # Placed anyway (bound without the extender), its valid limits are what the ledger holds (`pod_request`).
        held = (f"inspect counts its valid limits, {request} {unit}, on {pod.spec.node_name}"
                if pod.spec.node_name and request > 0 else "no GPU counts it")
        return replace(base, state="invalid-request", request=0,
                       summary=f"{who} has an invalid {protocol.RESOURCE_MEM} request ({'; '.join(invalid)}): the "
                       f"gpushare extender refuses to place it and {held} (kubectl gpushare doctor: invalid-value).")
    if pod.spec.resource_claims_unreadable:  # read as no entries, the pod would pass for one asking nothing
        return replace(base, state="invalid-claims", request=0, node=pod.spec.node_name,
                       summary=f"{who} {dra.UNREADABLE_CLAIMS}{_bound_holding(pod, ledger, unit)}.")
    on_stack = next((n for n in stack_nodes if n.name in (pod.spec.node_name, _hami_node(pod))), None)
    if on_stack is not None and request <= 0:
        return _on_stack(pod, on_stack, (stack_claims or {}).get(on_stack.name, []), base, who)
    if request <= 0:
        return replace(base, state="no-request",
                           summary=f"{who} requests no {protocol.RESOURCE_MEM}; gpushare does not place it.")
    if pod.spec.node_name:
        return _placed(pod, ledger, base, who)
    affinity = required_affinity(placement)
    asks = f"{who} asks for {request} {unit} on one GPU"
    if affinity is not None and affinity.conflict:  # NodeAffinity's PreFilter: no node is tried
        return replace(base, state="pending", largest_fit=0,
                       summary=f"{asks}, but kube-scheduler cannot schedule it: {CONFLICT}.")
    base = replace(base, prefilter_nodes=narrowed_to(affinity))
    gpushare_nodes = [  # a node of the DRA driver serves claims, not aliyun.com/gpu-mem (explain_dra asks it)
        node for node in nodes
        if (r := ledger.node(node.metadata.name)) and r.alloc_mem > 0 and not _dra_node(ledger, r.name)]
    if not gpushare_nodes:
        return replace(base, state="pending",
                           summary=f"{asks}, but no node advertises {protocol.RESOURCE_MEM}: the gpushare device "
                           "plugin runs nowhere (kubectl gpushare doctor; kubectl gpushare label-nodes).")
    index = TolerationIndex(pod.spec.tolerations)
    judged = [(node.metadata.name, excluded(pod, node, placement, affinity, index))  # once per node: affinity is costly
              for node in sorted(gpushare_nodes, key=lambda n: n.metadata.name)]
    verdicts = [NodeVerdict(name, _verdict(ledger, name, dropped, request, unit, policy)) for name, dropped in judged]
    fitting = [v.name for v in verdicts if v.reason.startswith(FITS_PREFIX)]
    usable = [name for name, dropped in judged if dropped is None]
    largest = max((ledger.largest_free(name) for name in usable), default=0)
    base = replace(base, largest_fit=largest)
    if not usable:
        summary = (f"{asks}, but every node with GPU sharing is excluded before GPU memory is even "
                   "considered (taints, nodeSelector, affinity or cordon, below).")
    elif fitting:
        summary = (f"{asks} and fits on {caps.named(fitting)} now; if it stays Pending, the scheduler or the "
                   "extender is not reaching it (see the events).")
    elif any("a pod never spans GPUs" in v.reason for v in verdicts):
        summary = (f"{asks}: some nodes have that much free in total but no single GPU does; the largest "
                   f"request that fits on a node it may use is {largest} {unit}.")
    else:
        summary = (f"{asks}: no GPU it may use has that much free; the largest request that fits on a node it "
                   f"may use is {largest} {unit}.")
    return replace(base, state="pending", summary=summary, nodes=verdicts)


def _dra_node(ledger: Ledger, name: str) -> bool:
    """A node whose GPUs our DRA driver publishes: it serves claims, not ``aliyun.com/gpu-mem`` limits."""
    record = ledger.node(name)
    return record is not None and bool(record.driver)


def _placed(pod: Pod, ledger: Ledger, base: Explanation, who: str) -> Explanation:
    record = pod_record(pod)
    key = record.uid or f"{record.namespace}/{record.name}"  # as the ledger was keyed (source.keyed_pod_record)
    node = pod.spec.node_name
    usage = ledger.usage(node)
    gpu = record.gpu_index if record.gpu_index >= 0 else None
    unit = base.unit
    if gpu is None or gpu not in usage.devices:
        return replace(base, state="placed", node=node,
                           summary=f"{who} is bound to {node} but has no GPU index yet: the device plugin has "
                           "not allocated it (kubectl gpushare doctor).")
    device = usage.devices[gpu]
    others = [Share(p.namespace, p.name, amount) for p, amount in device.pods if p.uid != key]
    sharing = ", ".join(f"{s.namespace}/{s.name} ({s.memory})" for s in others) or "no other pod"
    summary = (f"{who} runs on {node}, GPU {gpu}, holding {record.request} of {device.total} {unit}; "
               f"{device.free} {unit} free there; shared with {sharing}.")
    return replace(base, state="placed", node=node, gpu=gpu, sharing=others,
                       summary=summary)


def _bound_holding(pod: Pod, ledger: Ledger, unit: str) -> str:
    """Where a pod explain cannot read further is bound, and what inspect counts for it there ("" unbound).

    The ledger's records of the pod on its node (its ``aliyun.com/gpu-mem`` limits, the claims reserved
    for it alone), so explain says the number the tables show for it.
    """
    node = pod.spec.node_name
    if not node:
        return ""
    meta = pod.metadata
    key = meta.uid or f"{meta.namespace}/{meta.name}"  # as the ledger was keyed (source.keyed_pod_record)
    held = sum(record.request for record in ledger.pods_on(node) if record.uid == key)
    if held <= 0:
        return f"; it is bound to {node}, where inspect counts nothing for it"
    return f"; it is bound to {node}, where inspect counts {ledger.in_unit(node, unit)(held)} {unit} for it"


def _kai_reserves(pod: Pod) -> str:
    """What a KAI reservation pod holds, in words: its group and the GPU UUID it wrote (if any yet)."""
    group = shown_value(pod.metadata.labels.get(protocol.KAI_LABEL_GROUP, ""))
    uuid = pod.metadata.annotations.get(protocol.KAI_ANN_RESERVED_GPU, protocol.KAI_RESERVED_UNKNOWN)
    if uuid.strip() == protocol.KAI_RESERVED_UNKNOWN:
        return f"it holds one GPU for group {group}, which GPU not reported yet ({protocol.KAI_ANN_RESERVED_GPU}=-1)"
    return f"it holds GPU {shown_value(uuid)} for group {group}"


def _hami_node(pod: Pod) -> str:
    """The node HAMi picked for a pod it is still binding (``hami.io/vgpu-node``), else ""."""
    return pod.metadata.annotations.get(protocol.HAMI_ANN_NODE, "") if not pod.spec.node_name else ""


def _stack_share(device: StackDeviceUsage, mine: list[StackClaim], key: tuple[str, str]) -> StackShare:
    amounts: dict[tuple[str, str], int] = {}
    for claim in device.claims:
        amounts[(claim.namespace, claim.name)] = amounts.get((claim.namespace, claim.name), 0) + claim.amount
    others = [Holder(ns, name, amount) for (ns, name), amount in amounts.items() if (ns, name) != key]
    gpu = device.gpu
    return StackShare(gpu.index, gpu.id, sum(c.amount for c in mine), gpu.total, device.free, gpu.unit, others)


def _on_stack(pod: Pod, node: StackNode, claims: list[StackClaim], base: Explanation, who: str) -> Explanation:
    """Where a pod sits on a node of another stack, from that stack's claims (amounts in each GPU's unit)."""
    key = (pod.metadata.namespace, pod.metadata.name)
    shares: list[StackShare] = []
    for device in stack_usage(node, claims):
        mine = [claim for claim in device.claims if (claim.namespace, claim.name) == key]
        if mine:
            shares.append(_stack_share(device, mine, key))
    where = f"{node.name} ({node.stack})"
    verb = "runs on" if pod.status.phase == "Running" else "is placed on"
    if node.stack == protocol.STACK_KAI and kai.is_reservation(pod):
        return replace(base, state="placed", node=node.name, stack=node.stack, request=0, unit="", largest_fit=0,
                       summary=f"{who} is KAI's reservation pod on {node.name}: {_kai_reserves(pod)}; it is not a "
                       "workload (the pods of its group share that GPU).")
    if not shares:
        return replace(base, state="placed", node=node.name, stack=node.stack, request=0, unit="", largest_fit=0,
                       summary=f"{who} {verb} {where} but holds no GPU there by {node.stack}'s annotations "
                       "(not allocated yet, or its bind failed: kubectl gpushare doctor).")
    parts = []
    for share in shares:
        if share.gpu == PENDING and node.stack == protocol.STACK_KAI:
            gpu = "a GPU its reservation pod has not named yet (or no reservation pod)"
        elif share.gpu == PENDING:
            gpu = "a GPU not in the node's list"
        elif node.stack in (protocol.STACK_NVIDIA, protocol.STACK_NVIDIA_DRA) or (
            node.stack == protocol.STACK_KAI and share.unit != protocol.UNIT_MIB
        ):
            gpu = share.id  # a pool (nvidia.com/gpu, a MIG profile), not one GPU
        else:
            gpu = f"GPU {share.gpu}" + (f" ({share.id})" if share.id else "")
        sharing = ", ".join(f"{h.namespace}/{h.name} ({h.amount})" for h in share.sharing) or "no other pod"
        room = f" of {share.total} {share.unit}; {share.free} {share.unit} free there" if share.gpu != PENDING else (
            f" {share.unit}")
        parts.append(f"{gpu} holding {share.amount}{room}; shared with {sharing}")
    units = {share.unit for share in shares}
    return replace(
        base, state="placed", node=node.name, gpu=shares[0].gpu, stack=node.stack, stack_gpus=shares, largest_fit=0,
        request=sum(share.amount for share in shares) if len(units) == 1 else 0,
        unit=shares[0].unit if len(units) == 1 else "",
        summary=f"{who} {verb} {where}: " + "; and ".join(parts) + ".",
    )


def to_json(explanation: Explanation) -> str:
    """The explanation as indented JSON, ``apiVersion`` and ``kind`` first."""
    data = msgspec.to_builtins(explanation)
    ordered = {"apiVersion": data.pop("apiVersion", API_VERSION), "kind": data.pop("kind", KIND), **data}
    return msgspec.json.format(msgspec.json.encode(ordered), indent=2).decode() + "\n"


def to_text(explanation: Explanation, *, limit: int | None = None) -> str:
    """The summary, then one line per node (at most ``limit``, `inspect.caps`) and the scheduler's messages.

    Nodes are listed by name; when the list is capped, nodes that take the pod come first, so the
    shortened list still shows where it fits. Every string from an object (the summary and verdicts
    name pods and nodes) is written through `protocol.shown_text` here; `to_json` keeps them exact.
    """
    lines = [protocol.shown_text(explanation.summary, _summary_names(explanation)) + "\n"]
    if explanation.prefilter_nodes:
        lines.append(PREFILTER_LINE + protocol.shown_text(caps.named(explanation.prefilter_nodes),
                                                          protocol.SENTENCE_NAMES) + "\n")
    if explanation.nodes:
        shown, hidden = caps.capped(explanation.nodes, limit)
        if hidden:
            ordered = sorted(explanation.nodes, key=lambda v: not v.reason.startswith(FITS_PREFIX))
            shown, hidden = caps.capped(ordered, limit)
        lines.append("\nNodes with GPU sharing:\n")
        lines += [f"  node/{protocol.shown_text(v.name)}: {protocol.shown_text(v.reason, protocol.SENTENCE_NAMES)}\n"
                  for v in shown]
        if hidden:
            lines.append(caps.more_line(hidden, "nodes", indent="  "))
    if explanation.events:
        lines.append("\nThe scheduler said:\n")
        lines += [f"  {protocol.shown_text(message, protocol.SENTENCE_NAMES)}\n"
                  for message in dict.fromkeys(explanation.events)]
    return "".join(lines)


def _summary_names(explanation: Explanation) -> int:
    """Names' room for the summary: a sentence's, and two more for each pod sharing a GPU and each claim it lists."""
    listed = len(explanation.sharing) + sum(len(share.sharing) for share in explanation.stack_gpus)
    listed += len(explanation.claims)
    return protocol.SENTENCE_NAMES + 2 * listed
