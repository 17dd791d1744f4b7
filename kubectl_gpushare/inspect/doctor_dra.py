"""doctor's checks of Dynamic Resource Allocation: GPUs sold twice, claims nobody publishes, pods stuck on claims.

Over-committed GPUs of our driver need no check of their own: their claims are in the ledger as
pods, so ``gpu-overcommitted`` reports them as it reports the device plugin's (and
``stack-gpu-overcommitted`` NVIDIA's). Pure: decoded objects and the clock in, findings out.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import caps
from kubectl_gpushare.inspect.findings import ERROR, WARNING, Finding
from kubectl_gpushare.kube.stacks import dra
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.protocol import shown_value

CHECKS: Final = {
    "gpu-advertised-by-extender-and-dra": "a node advertising aliyun.com/gpu-mem also publishes its GPUs through DRA",
    "gpu-published-by-two-dra-drivers": "our DRA driver and NVIDIA's publish the same GPUs (by UUID)",
    "dra-claim-on-unpublished-device": "a claim is allocated on a device of our driver that no ResourceSlice publishes",
    "dra-claim-unallocatable": "kube-scheduler refuses a pending pod's claim before trying any node: its request or "
                               "class as written, a missing class, a claim being deleted or reserved for the most "
                               "consumers it may have",
    "dra-claim-named-twice": "two entries of a pending pod's spec.resourceClaims name one claim: kube-scheduler "
                             "takes it once per entry and never binds the pod",
    "dra-claim-pending": "a pod has waited for its claim to be allocated (or created) longer than --stuck-after",
    "dra-claims-unreadable": "a pod's spec.resourceClaims does not read as entries (kube-apiserver refuses such a pod: "
                             "a file or a tampered store)",
    "dra-pool-unusable": "a pool of a DRA driver read here is incomplete or invalid: no new claim is allocated from it",
}
"""Check name -> what it finds (doctor's help lists them)."""


def _advertises_gpu_mem(node: Node) -> bool:
    return str(node.status.capacity.get(protocol.RESOURCE_MEM, "0")) not in ("0", "")


def node_findings(nodes: Sequence[Node], objects: dra.DraObjects, ours: Mapping[str, dra.DraNode]) -> Iterable[Finding]:
    """GPUs two components sell: the device plugin and a DRA driver, or two DRA drivers."""
    nvidia = dra.nvidia_uuids(objects)
    nvidia_nodes = {s.spec.node_name for s in objects.nvidia if s.spec.node_name and s.spec.devices}
    for node in nodes:
        name = node.metadata.name
        obj = f"node/{name}"
        drivers = [driver for driver, on in ((protocol.DRA_DRIVER, name in ours and ours[name].gpus),
                                             (protocol.NVIDIA_DRA_DRIVER, name in nvidia_nodes)) if on]
        if drivers and _advertises_gpu_mem(node):
            yield Finding(ERROR, "gpu-advertised-by-extender-and-dra", obj,
                          f"advertises {protocol.RESOURCE_MEM} (the device plugin) and publishes GPUs through DRA "
                          f"({', '.join(drivers)}): kube-scheduler's DRA allocator and the extender each sell the same "
                          "GPU memory without counting the other's pods; run one of them on this node")
        if name not in ours or name not in nvidia_nodes:
            continue
        mine = {gpu.uuid for gpu in ours[name].gpus if gpu.uuid}
        theirs = nvidia.get(name, set())
        both = sorted(mine & theirs)
        if both:
            yield Finding(ERROR, "gpu-published-by-two-dra-drivers", obj,
                          f"GPU(s) {', '.join(shown_value(uuid) for uuid in both[:4])} published by both "
                          f"{protocol.DRA_DRIVER} and {protocol.NVIDIA_DRA_DRIVER}: claims of both drivers can land on "
                          "one GPU, and neither counts the other's")
        elif not mine or not theirs:
            yield Finding(WARNING, "gpu-published-by-two-dra-drivers", obj,
                          f"both {protocol.DRA_DRIVER} and {protocol.NVIDIA_DRA_DRIVER} publish GPUs here, and their "
                          "UUIDs cannot be compared: if they are the same GPUs, claims of both drivers can share one")


def claim_findings(objects: dra.DraObjects) -> Iterable[Finding]:
    """Claims allocated on devices of our driver that no current ResourceSlice publishes."""
    published = {(s.pool, device.name) for s in objects.slices for device in s.devices}
    for claim in objects.claims:
        if claim.allocation is None:
            continue
        for result in claim.allocation.results:
            if result.driver != protocol.DRA_DRIVER or (result.pool, result.device) in published:
                continue
            yield Finding(ERROR, "dra-claim-on-unpublished-device", f"resourceclaim/{claim.namespace}/{claim.name}",
                          f"allocated {shown_value(result.device)} of pool {shown_value(result.pool)}, "
                          "which no ResourceSlice of "
                          f"{protocol.DRA_DRIVER} publishes (now): what it holds is on no GPU the node publishes, so "
                          "that memory may be sold again; delete the pod (and claim) to free it")


def pool_findings(objects: dra.DraObjects) -> Iterable[Finding]:
    """One warning per pool kube-scheduler allocates nothing new from (`dra.pool_states`), in its words.

    A warning, not an error: a publisher mid-update, or one whose create timed out and landed
    after its retry, leaves such a pool for a sync or two; claims allocated there keep their GPUs.
    Each finding's message starts with the reading's warning (`dra.pool_warning`), which doctor
    therefore does not print on stderr as well (`doctor_command`).
    """
    for driver, pool in sorted(objects.unusable):
        nodes = objects.unusable_on.get((driver, pool), ())
        # Slices' node and pool names are unchecked: the object is a node only where it is a node's name, else
        # the pool (quoted where it is no pool name), in JSON too; the text output makes any name printable.
        node = nodes[0] if len(nodes) == 1 and protocol.valid_dns_subdomain(nodes[0]) else ""
        obj = f"node/{node}" if node else f"resourcepool/{driver}/{_pool_shown(pool)}"
        yield Finding(WARNING, "dra-pool-unusable", obj,
                      f"{dra.pool_warning(objects, driver, pool)}; if it lasts, see the "
                      f"driver's log and its slices (kubectl get resourceslices --field-selector spec.driver={driver})")


def _pool_shown(pool: str) -> str:
    """A pool name as is where it is one (DNS subdomains joined by slashes, ``ResourcePool.Name``), else quoted."""
    if len(pool) <= protocol.DNS1123_SUBDOMAIN_MAX and all(protocol.valid_dns_subdomain(p) for p in pool.split("/")):
        return pool
    return shown_value(pool)


def _age(pod: Pod, now: float) -> float | None:
    """Seconds since the pod was created; None when the timestamp cannot be read."""
    try:
        created = datetime.datetime.fromisoformat(pod.metadata.creation_timestamp)
    except ValueError:
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=datetime.UTC)
    return now - created.timestamp()


def entry_findings(pod: Pod) -> Iterable[Finding]:
    """A pod whose ``spec.resourceClaims`` cannot be read (`types.PodSpec.resource_claims_unreadable`), once.

    Asked of every pod that is not finished, whether or not any DRA object was read: read as no entries,
    such a pod would pass for one with no claims, and every other check of its claims says nothing.
    """
    if not protocol.pod_phase_terminal(pod.status.phase) and pod.spec.resource_claims_unreadable:
        yield Finding(ERROR, "dra-claims-unreadable", f"pod/{pod.metadata.namespace}/{pod.metadata.name}",
                      dra.UNREADABLE_CLAIMS)


def pending_findings(
    pods: Iterable[Pod], objects: dra.DraObjects, now: float, stuck_after: float
) -> Iterable[Finding]:
    """Pods waiting on claims of the drivers read here: refused by kube-scheduler (error), or waiting long (warning)."""
    index: dra.ClaimIndex | None = None  # built at the first pending pod: most clusters have none
    classes = objects.classes
    for pod in pods:
        if pod.spec.node_name or pod.status.phase not in ("Pending", "") or not pod.spec.resource_claims:
            continue
        obj = f"pod/{pod.metadata.namespace}/{pod.metadata.name}"
        if index is None:
            index = dra.claim_index(objects)
        resolved = index.of(pod)
        claims = dra.distinct_claims(resolved)  # a claim two entries name is one claim
        ours = [c for c in claims if any(dra.of_driver(c, classes, d) for d in dra.DRIVERS)]
        if claims and not ours:
            continue  # no claim of the drivers read here: not doctor's to judge
        # What kube-scheduler refuses before it tries a node, asked as explain asks it (`explain_dra`): the
        # first claim missing or being deleted in the pod's order (PreEnqueue), then a claim's spec, then the
        # DynamicResources PreFilter (dynamicresources.go: one reserved for as many consumers as it may have,
        # a class that does not exist). A refusal is said whatever the pod's age: it waits until a claim or
        # class changes. Classes not read: whether one exists is not asked.
        unusable = dra.first_unusable(resolved)
        if unusable is not None:
            said = unusable.refused
        else:  # other drivers' allocated claims too: PreFilter refuses one in use whatever its driver
            said = dra.refused_before_nodes(dra.scheduled_claims(resolved, ours), classes, pod.metadata.uid)
        if said:
            yield Finding(ERROR, "dra-claim-unallocatable", obj, f"cannot be scheduled: {said}")
            continue
        twice = dra.named_twice(resolved)  # then Filter and PreBind take the claim once per entry
        if unusable is None and twice is not None:
            yield Finding(ERROR, "dra-claim-named-twice", obj, twice.words(caps.named(twice.entries)))
            continue
        age = _age(pod, now)
        if age is not None and age <= stuck_after:
            continue
        waiting = [c.name for c in ours if c.allocation is None]
        if unusable is not None:
            yield Finding(WARNING, "dra-claim-pending", obj, f"waits: {unusable.missing}")
        elif waiting:
            # What is known: the claims are still unallocated. Doctor asks the allocator nothing (explain does, per
            # node, and may find devices for the same pod: another plugin refuses the node, or no new try yet).
            how_long = f"for more than {stuck_after:g}s" if age is not None else "(created at an unreadable time)"
            yield Finding(WARNING, "dra-claim-pending", obj,
                          f"waits {how_long} for kube-scheduler to allocate claim(s) {caps.named(waiting)} "
                          f"(kubectl gpushare explain {pod.metadata.name} -n {pod.metadata.namespace} says why, "
                          "per node)")


__all__ = ["CHECKS", "claim_findings", "entry_findings", "node_findings", "pending_findings"]
