"""``explain`` for a pod with ResourceClaims of our DRA driver: where its claims sit, or why they are not allocated.

A placed pod: each claim's node and GPU, what it holds there (the ledger's numbers, as inspect shows
them) and who else holds memory on that GPU. A pending pod: first what stops it before any node is
tried (the first of its claims, in the pod's order, not made yet or being deleted; then
NodeAffinity's words, a conflict of ``metadata.name`` terms; then a request kube-scheduler refuses,
the DynamicResources PreFilter's words), then each node of our driver is asked the structured
allocator's question (`kube.dra_allocation.allocate`, after the node checks kube-scheduler makes
first, `explain.excluded`: the affinity's ``metadata.name`` narrowing, cordon, taints, nodeSelector,
affinity), with the allocator's reason and the numbers behind it. Pure: decoded objects in, an
`explain.Explanation` out; the claim's memory is shown in the views' unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from msgspec.structs import replace

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.inspect import caps
from kubectl_gpushare.inspect.compat import memory_unit
from kubectl_gpushare.inspect.explain import (
    CONFLICT,
    FITS_PREFIX,
    ClaimState,
    Explanation,
    NodeVerdict,
    Share,
    excluded,
    narrowed_to,
    required_affinity,
)
from kubectl_gpushare.kube import dra_allocation
from kubectl_gpushare.kube.stacks import dra
from kubectl_gpushare.kube.taints import TolerationIndex
from kubectl_gpushare.kube.types import Event, Node, Pod, PodPlacement
from kubectl_gpushare.ledger import Ledger
from kubectl_gpushare.protocol import shown_value

FALLBACK_CLASS = dra_objects.DeviceClass(protocol.DRA_DEVICE_CLASS, (protocol.DRA_DEVICE_CLASS_SELECTOR,))
"""The DeviceClass manifests/dra installs, assumed where the classes could not be read (a file without them)."""


@dataclass
class DraInputs:
    """The DRA objects read, and the nodes whose GPUs our driver publishes (`inspect.source.StackSplit.add_dra`)."""

    objects: dra.DraObjects
    nodes: Mapping[str, dra.DraNode]


def _units_up(amount: int, unit: str) -> int:
    return -(-amount // protocol.UNIT_BYTES[unit])


def explain_claims(
    pod: Pod,
    nodes: Sequence[Node],
    ledger: Ledger,
    inputs: DraInputs,
    events: Sequence[Event] = (),
    placement: PodPlacement | None = None,
) -> Explanation | None:
    """Explain a pod through its claims of our driver; None when it has none (`explain.explain` answers then)."""
    objects = inputs.objects
    if not pod.spec.resource_claims or not objects or protocol.pod_phase_terminal(pod.status.phase):
        return None
    resolved = dra.claim_index(objects).of(pod)
    classes = objects.classes
    ours = [claim for claim in dra.distinct_claims(resolved)  # a claim two entries name is one claim
            if dra.of_driver(claim, classes, protocol.DRA_DRIVER)]
    missing = [entry for entry in resolved if entry.claim is None]
    if not ours and not (missing and len(missing) == len(resolved) and inputs.nodes):
        return None
    meta = pod.metadata
    names = sorted(node.metadata.name for node in nodes)
    unit = memory_unit(ledger, names) or protocol.UNIT_GIB
    asked = sum(dra.requested_memory(claim) for claim in ours)
    said = [e.message for e in events if e.reason == "FailedScheduling" and e.message]
    base = Explanation(pod=meta.name, namespace=meta.namespace, phase=pod.status.phase or "Pending",
                       request=_units_up(asked, unit), unit=unit, state="", summary="", events=said)
    who = f"Pod {meta.namespace}/{meta.name}"
    allocated = [claim for claim in ours if claim.allocation is not None]
    scheduled = dra.scheduled_claims(resolved, ours)  # other drivers' allocated claims are asked too
    # An unbound pod whose claims are all allocated is being bound (PreBind wrote them), unless the
    # DynamicResources plugin stops it at one of its claims, of any driver (missing or being deleted:
    # `dra.first_unusable`), refuses those claims (reserved for others) or never binds the pod (a claim
    # two entries name, `dra.named_twice`): pending then.
    twice, unusable = dra.named_twice(resolved), dra.first_unusable(resolved)
    if pod.spec.node_name or (ours and len(allocated) == len(ours) and unusable is None and twice is None
                              and not dra_allocation.prefilter(scheduled, classes, meta.uid)):
        return _placed(pod, ledger, ours, dra.pool_nodes(objects), base, who)
    return _pending(pod, nodes, ledger, inputs, ours, scheduled, missing, unusable, base, who, placement, twice)


# --- A placed pod ----------------------------------------------------------------------------------------
def _holders(
    ledger: Ledger, node: str, claim: dra_objects.ResourceClaim
) -> list[tuple[int, int, int, int, list[Share]]]:
    """(GPU, what the claim holds, GPU total, free, others) for each GPU of ``node`` the claim holds memory on."""
    found = []
    for device in ledger.usage(node).devices.values():
        mine = sum(amount for record, amount in device.pods
                   if record.namespace == claim.namespace and claim.name in record.claim.split(","))
        if not mine:
            continue
        others = [Share(record.namespace, record.name, amount) for record, amount in device.pods
                  if not (record.namespace == claim.namespace and claim.name in record.claim.split(","))]
        found.append((device.index, mine, device.total, device.free, others))
    return found


def _placed(pod: Pod, ledger: Ledger, claims: list[dra_objects.ResourceClaim],
            pools: Mapping[tuple[str, str], str], base: Explanation, who: str) -> Explanation:
    node = pod.spec.node_name or next((c.allocation.node_name for c in claims if c.allocation is not None), "")
    record = ledger.node(node)
    if record is not None and record.unit:
        base = replace(base, unit=record.unit)  # a DRA node's amounts are in its own unit
    parts: list[str] = []
    states: list[ClaimState] = []
    first_gpu: int | None = None
    first_sharing: list[Share] = []
    held = 0
    for claim in claims:
        if claim.allocation is None:
            states.append(ClaimState(claim.name, "pending", reason="not allocated, though the pod is bound"))
            parts.append(f"claim {claim.name} is not allocated, though the pod is bound to {node}")
            continue
        devices = [r.device for r in claim.allocation.results if r.driver == protocol.DRA_DRIVER]
        where = claim.allocation.node_name or dra.result_node(claim, claim.allocation.results[0], pools) or node
        holders = _holders(ledger, where, claim)
        amount = sum(mine for _, mine, _, _, _ in holders)
        held += amount
        states.append(ClaimState(claim.name, "allocated", where, devices, amount))
        sharers = [c.name for c in claim.reserved_for if c.resource == "pods" and c.name != pod.metadata.name]
        plural = "s" if len(sharers) > 1 else ""
        through = f"claim {claim.name}" + (f", shared with pod{plural} {caps.named(sharers)}" if sharers else "")
        if not holders:
            parts.append(f"{', '.join(devices) or 'no device'} ({through}), on no GPU {where} publishes "
                         "(kubectl gpushare doctor)")
            continue
        for index, mine, total, free, others in holders:
            if first_gpu is None:
                first_gpu, first_sharing = index, others
            sharing = ", ".join(f"{s.namespace}/{s.name} ({s.memory})" for s in others) or "no other pod"
            parts.append(f"GPU {index} ({through}) holding {mine} of {total} {base.unit}; {free} {base.unit} free "
                         f"there; shared with {sharing}")
    verb = "runs on" if pod.status.phase == "Running" else "is placed on"
    return replace(base, state="placed", node=node, gpu=first_gpu, sharing=first_sharing, claims=states,
                   request=held or base.request, summary=f"{who} {verb} {node}: " + "; and ".join(parts) + ".")


# --- A pending pod ---------------------------------------------------------------------------------------
def _pending(
    pod: Pod, nodes: Sequence[Node], ledger: Ledger, inputs: DraInputs, ours: list[dra_objects.ResourceClaim],
    scheduled: list[dra_objects.ResourceClaim], missing: list[dra.PodClaim], unusable: dra.Unusable | None,
    base: Explanation, who: str, placement: PodPlacement | None, twice: dra.NamedTwice | None = None,
) -> Explanation:
    """Why a pending pod waits, before and then per node of our driver.

    ``scheduled``: the claims PreFilter and Filter are asked of (`dra.scheduled_claims`: ours, and other
    drivers' allocated ones, which may be in use or pin the pod to their nodes). ``twice``: a claim two
    of its entries name, which kube-scheduler never binds, said once PreEnqueue and PreFilter let it through.
    """
    objects = inputs.objects
    unit = base.unit
    classes = objects.classes if objects.classes is not None else {FALLBACK_CLASS.name: FALLBACK_CLASS}
    waiting = [claim for claim in ours if claim.allocation is None]
    states = [ClaimState(entry.name, "missing", reason=entry.missing) for entry in missing]
    states += [ClaimState(claim.name, "pending", memory=_units_up(dra.requested_memory(claim), unit))
               for claim in waiting]
    states += [ClaimState(claim.name, "allocated", claim.allocation.node_name,
                          [r.device for r in claim.allocation.results if r.driver == protocol.DRA_DRIVER])
               for claim in ours if claim.allocation is not None]
    base = replace(base, state="pending", claims=states)
    names = caps.named([claim.name for claim in waiting]) if waiting else ""
    asks = (f"{who} asks for {base.request} {unit} of one GPU through claim(s) {names}" if waiting
            else f"{who} uses allocated claim(s) {caps.named([claim.name for claim in ours])}")
    # The first claim missing or being deleted, in the pod's order, stops it before any PreFilter (PreEnqueue).
    if unusable is not None and unusable.missing:
        return replace(base, summary=f"{who} waits for its claims: {unusable.missing} (kube-controller-manager's "
                                     "resourceclaim controller makes it; kubectl describe pod says why not).")
    affinity = required_affinity(placement)
    stop = unusable.refused if unusable is not None else ""
    stop = stop or (CONFLICT if affinity is not None and affinity.conflict else "")  # NodeAffinity's PreFilter first
    stop = stop or dra.refused_before_nodes(scheduled, classes, pod.metadata.uid)
    if stop:
        return replace(base, summary=f"{asks}, but kube-scheduler cannot schedule it: {stop}.")
    if twice is not None:  # Filter asks the allocator once per entry, PreBind reserves once per entry
        return replace(base, summary=f"{asks}, but {twice.words(caps.named(twice.entries))}.")
    base = replace(base, prefilter_nodes=narrowed_to(affinity))
    inventory = dra_allocation.Inventory(
        objects.published, classes,
        dra_allocation.allocated_state(c.allocation for c in objects.claims if c.allocation is not None),
        {node.metadata.name: node.metadata.labels for node in nodes})
    pinned = [claim for claim in scheduled if claim.allocation is not None]
    verdicts: list[NodeVerdict] = []
    usable: list[str] = []
    tolerations = TolerationIndex(pod.spec.tolerations)
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        name = node.metadata.name
        if name not in inputs.nodes:
            continue
        reason = excluded(pod, node, placement, affinity, tolerations)
        if reason is None and not all(dra_allocation.available_on(claim, name, node.metadata.labels)
                                      for claim in pinned):
            reason = dra_allocation.REASON_NOT_ON_NODE
        if reason is None:
            usable.append(name)
            reason = _allocate(name, waiting, inventory, ledger, inputs.nodes[name], base, objects)
        verdicts.append(NodeVerdict(name, reason))
    fitting = [v.name for v in verdicts if v.reason.startswith(FITS_PREFIX)]
    largest = max((ledger.in_unit(name, unit)(ledger.largest_free(name)) for name in usable), default=0)
    base = replace(base, nodes=verdicts, largest_fit=largest)
    if not verdicts:
        summary = (f"{asks}, but no node publishes GPUs of {protocol.DRA_DRIVER}: the DRA driver runs nowhere "
                   "(kubectl gpushare doctor).")
    elif not usable:
        summary = (f"{asks}, but every node of the DRA driver is excluded before devices are even considered "
                   "(taints, nodeSelector, affinity or cordon, below).")
    elif fitting:
        summary = (f"{asks} and the allocator finds devices on {caps.named(fitting)} now; if it stays Pending, see "
                   "the scheduler's events.")
    else:
        summary = (f"{asks}: no GPU it may use has that much free; the largest free GPU on a node it may use has "
                   f"{largest} {unit}.")
    return replace(base, summary=summary)


def _allocate(name: str, claims: list[dra_objects.ResourceClaim], inventory: dra_allocation.Inventory,
              ledger: Ledger, node: dra.DraNode, base: Explanation, objects: dra.DraObjects) -> str:
    """The allocator's answer for one node: the GPUs it picks, or its reason with the numbers behind it.

    A node whose pool kube-scheduler allocates nothing from (`dra.pool_states`) has that for reason.
    """
    try:
        found = dra_allocation.allocate(name, claims, inventory, new_share_id=lambda: "explain")
    except dra_allocation.AllocationError as exc:
        return dra_allocation.FILTER_ERROR.format(error=exc)
    if not isinstance(found, str):
        gpus = [r.device.removeprefix(protocol.DRA_DEVICE_PREFIX) for a in found for r in a.results]
        return f"{FITS_PREFIX}{', '.join(gpus)} (the allocator's choice)"
    pools = sorted({gpu.pool for gpu in node.gpus if objects.unusable_at(protocol.DRA_DRIVER, gpu.pool, name)})
    if pools:
        return f"{found}: its pool {shown_value(pools[0])} {objects.unusable[(protocol.DRA_DRIVER, pools[0])]}"
    asked = sum(dra.requested_memory(claim) for claim in claims)
    takes = dra.request_units(node, asked) if asked else None
    largest = ledger.largest_free(name)
    detail = f"the largest free healthy GPU has {largest} {node.unit}"
    if takes is not None:
        detail += f", the claim takes {takes} {node.unit} (rounded by the request policy)"
    elif asked:
        detail += f"; no GPU of it takes {_units_up(asked, base.unit)} {base.unit} even empty"
    return f"{found}: {detail}"


__all__ = ["FALLBACK_CLASS", "DraInputs", "explain_claims"]
