"""Turn decoded API objects into the ledger's records, tolerating malformed values.

The API server guarantees well-formed JSON, not well-formed *values*: a hand-written annotation, a
quantity in a CRD-generated pod, or a half-upgraded device plugin can put anything in the fields
gpushare reads. These functions count what can be counted, treat the rest as absent, and report each
distinct problem once through an optional `Warnings` collector, so `kubectl inspect gpushare` can
warn once instead of crashing or flooding.

This module owns the mapping from `kube.types` to `ledger` records. It does no I/O and applies no
counting rules itself (which pods count is the ledger's business).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.types import ConfigMap, Container, Node, Pod, QuantityValue
from kubectl_gpushare.ledger import PENDING, NodeRecord, PodRecord


class Warnings:
    """An ordered collection of distinct warning messages, with how often each occurred.

    Pass one instance to many `pod_record` / `node_record` calls and show ``messages`` (or
    `summary`) once at the end.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, message: str) -> None:
        """Record one occurrence of a problem."""
        self._counts[message] = self._counts.get(message, 0) + 1

    @property
    def messages(self) -> list[str]:
        """Distinct messages in first-seen order."""
        return list(self._counts)

    def discard(self, message: str) -> None:
        """Forget a message (a command that reports the problem another way: doctor's findings)."""
        self._counts.pop(message, None)

    def count(self, message: str) -> int:
        """How many times a message was recorded."""
        return self._counts.get(message, 0)

    def summary(self, limit: int = 5) -> list[str]:
        """At most ``limit`` messages, plus a final line saying how many more were left out."""
        shown = self.messages[:limit]
        hidden = len(self._counts) - len(shown)
        if hidden > 0:
            shown.append(f"... and {hidden} more warning(s)")
        return shown

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)

    def __bool__(self) -> bool:
        return bool(self._counts)


def _quantity(
    value: QuantityValue | None,
    what: str | Callable[[], str],
    warnings: Warnings | None,
    maximum: int = protocol.MAX_GPU_MEMORY,
) -> int:
    """Parse a quantity in ``[0, maximum]``, or return 0 and record a warning when it is not one.

    ``what`` names the value in a warning; a callable is only called when there is one to write.
    """
    if value is None:
        return 0
    amount, problem = protocol.checked_quantity(value, maximum)
    if problem and warnings is not None:
        warnings.add(f"{what() if callable(what) else what}: {problem}, counted as 0")
    return amount


def read_quantity(
    value: QuantityValue | None, what: str, warnings: Warnings | None, maximum: int = protocol.MAX_GPU_MEMORY
) -> int:
    """`_quantity` for the stack decoders (`kube.stacks`): one rule for every quantity read."""
    return _quantity(value, what, warnings, maximum)


def pod_request(pod: Pod, warnings: Warnings | None = None) -> tuple[int, tuple[int, ...]]:
    """The pod's GPU-memory request and the per-container requests behind it.

    As the original components count it: the sum of the regular containers' ``aliyun.com/gpu-mem``
    limits (init containers and requests are ignored).

    Returns:
        ``(total, per_container)`` with one entry per ``spec.containers`` item, in order.
    """
    amounts: list[int] = []
    for container in pod.spec.containers:
        amount, problem = _container_request(container)
        if problem and warnings is not None:
            warnings.add(f"{_where(pod)} {problem}, counted as 0")
        amounts.append(amount)
    return sum(amounts), tuple(amounts)


def invalid_requests(pod: Pod) -> list[str]:
    """Why each of the pod's ``aliyun.com/gpu-mem`` limits that is not a valid request is not one.

    `pod_request`'s rule and words (doctor's ``invalid-value``), without its ", counted as 0": the
    extender refuses such a pod (`extender.handlers.pod_request`), even beside a valid limit, so
    explain calls it an invalid request (not "no request", never a fit) and inspect lists it as
    waiting for no node. Each line reads ``container 'main' limit aliyun.com/gpu-mem: <why>``.
    """
    return [problem for container in pod.spec.containers if (problem := _container_request(container)[1])]


def _container_request(container: Container) -> tuple[int, str]:
    """``(amount, "")`` for a container's valid (or absent) gpu-mem limit, else ``(0, why)`` naming the limit."""
    value = container.resources.limits.get(protocol.RESOURCE_MEM)
    if value is None:
        return 0, ""
    amount, problem = protocol.checked_quantity(value, protocol.MAX_GPU_MEMORY)
    if problem:
        return 0, f"container {container.name!r} limit {protocol.RESOURCE_MEM}: {problem}"
    return amount, ""


def requests_gpu_memory(pod: Pod) -> bool:
    """Whether any container (regular or init) names ``aliyun.com/gpu-mem`` in limits or requests.

    This is kube-scheduler's "interested in" test for an extender with managedResources.
    """
    for container in (*pod.spec.containers, *pod.spec.init_containers):
        if protocol.RESOURCE_MEM in container.resources.limits or protocol.RESOURCE_MEM in container.resources.requests:
            return True
    return False


def _allocation(text: str, pod: Pod, warnings: Warnings | None) -> tuple[tuple[int, int], ...] | None:
    """The valid allocation claim, or None: an invalid one counts the pod's limits on its index GPU."""
    try:
        per_gpu = protocol.parse_allocation(text)
    except protocol.AnnotationError as exc:
        if warnings is not None:
            warnings.add(f"{_where(pod)}: {exc}; counting its limits on {protocol.ANN_IDX} instead")
        return None
    return None if per_gpu is None else tuple(sorted(per_gpu.items()))


def _where(pod: Pod) -> str:
    return f"pod {pod.metadata.namespace}/{pod.metadata.name}"


def pod_record(pod: Pod, warnings: Warnings | None = None) -> PodRecord:
    """Build the ledger's view of a pod.

    Runs once per pod of every list (100,000 in a large cluster), so messages are only formatted
    when there is something to warn about.

    Args:
        pod: the decoded pod.
        warnings: collects one message per malformed quantity or annotation; None to ignore them.

    Returns:
        The pod's `PodRecord`. Malformed values count as absent: a bad, negative or absurd limit as
        0 for that container, a bad GPU index (or one outside ``[0, MAX_GPUS_PER_NODE)``) as -1
        (pending), an invalid allocation as no allocation (the pod's limits then count on its
        ``ALIYUN_COM_GPU_MEM_IDX`` GPU, or as pending), a bad assume time as 0.
    """
    meta = pod.metadata
    annotations: Mapping[str, str] = meta.annotations
    request, per_container = pod_request(pod, warnings)

    idx_text = annotations.get(protocol.ANN_IDX)
    gpu_index = protocol.parse_gpu_index(idx_text)
    if gpu_index == PENDING and idx_text is not None and idx_text != "-1" and warnings is not None:
        warnings.add(
            f"{_where(pod)}: annotation {protocol.ANN_IDX}={protocol.shown_value(idx_text)} is not a GPU index "
            f"in [0, {protocol.MAX_GPUS_PER_NODE}); shown as pending"
        )

    assume_text = annotations.get(protocol.ANN_ASSUME_TIME)
    assume_time = protocol.parse_assume_time(assume_text)
    if assume_time == 0 and assume_text and assume_text.strip() != "0" and warnings is not None:
        warnings.add(
            f"{_where(pod)}: annotation {protocol.ANN_ASSUME_TIME}={protocol.shown_value(assume_text)} "
            "is not unix nanoseconds"
        )

    allocation_text = annotations.get(protocol.ANN_ALLOCATION)
    return PodRecord(
        meta.uid,
        meta.namespace,
        meta.name,
        pod.spec.node_name,
        pod.status.phase,
        request,
        per_container,
        gpu_index,
        None if allocation_text is None else _allocation(allocation_text, pod, warnings),
        annotations.get(protocol.ANN_ASSIGNED),
        assume_time,
        meta.deletion_timestamp is not None,
        meta.creation_timestamp,
    )


def node_ip(node: Node) -> str:
    """The node's first ``InternalIP`` address, or ``"unknown"`` (what the inspect views print)."""
    for address in node.status.addresses:
        if address.type == "InternalIP" and address.address:
            return address.address
    return "unknown"


def node_ready(node: Node) -> bool:
    """Whether the node's ``Ready`` condition is ``True`` (a node that reports none counts as ready)."""
    for condition in node.status.conditions:
        if condition.type == "Ready":
            return condition.status == "True"
    return True


def node_record(node: Node, unhealthy: frozenset[int] = frozenset(), warnings: Warnings | None = None) -> NodeRecord:
    """Build the ledger's view of a node.

    Args:
        node: the decoded node.
        unhealthy: GPU indices the node's unhealthy-GPU ConfigMap lists (see `unhealthy_gpus`).
        warnings: collects one message per malformed quantity or annotation; None to ignore them.

    Returns:
        The node's `NodeRecord`; malformed or absurd quantities count as 0 (a GPU count outside
        ``[0, MAX_GPUS_PER_NODE]`` leaves the node without gpushare GPUs) and a malformed per-GPU
        annotation as absent (GPUs are then assumed equal, as the original does).
    """
    name = node.metadata.name
    status = node.status
    gpus_text = node.metadata.annotations.get(protocol.ANN_NODE_GPUS)
    newer: list[int] = []
    gpu_mems = protocol.parse_node_gpus(gpus_text, newer.append)
    if gpus_text and gpu_mems is None and warnings is not None:
        warnings.add(f"node {name}: annotation {protocol.ANN_NODE_GPUS} is malformed; assuming equal GPUs")
    if newer and warnings is not None:  # the same words on every read: warned once per node and version
        version = str(newer[0]) if newer[0] < 10**12 else f"{str(newer[0])[:12]}..."
        warnings.add(
            f"node {name}: annotation {protocol.ANN_NODE_GPUS} is version {version}, newer than "
            f"version {protocol.NODE_GPUS_VERSION} that this kubectl-gpushare reads; its GPUs count with no "
            "free memory until kubectl-gpushare is upgraded"
        )

    def quantity(field: str, values: Mapping[str, QuantityValue], resource: str) -> int:
        # A node holds at most MAX_GPUS_PER_NODE GPUs of at most MAX_GPU_MEMORY each.
        maximum = protocol.MAX_GPUS_PER_NODE
        if resource == protocol.RESOURCE_MEM:
            maximum *= protocol.MAX_GPU_MEMORY
        return _quantity(values.get(resource), lambda: f"node {name} {field} {resource}", warnings, maximum)

    return NodeRecord(
        name=name,
        ip=node_ip(node),
        alloc_mem=quantity("allocatable", status.allocatable, protocol.RESOURCE_MEM),
        alloc_count=quantity("allocatable", status.allocatable, protocol.RESOURCE_COUNT),
        cap_mem=quantity("capacity", status.capacity, protocol.RESOURCE_MEM),
        cap_count=quantity("capacity", status.capacity, protocol.RESOURCE_COUNT),
        gpu_mems=gpu_mems,
        unhealthy=unhealthy,
        labels=tuple(sorted(node.metadata.labels.items())),
    )


def unhealthy_node_name(configmap: ConfigMap) -> str | None:
    """The node an unhealthy-GPU ConfigMap is about, or None if it is not such a ConfigMap."""
    meta = configmap.metadata
    if meta.namespace != protocol.UNHEALTHY_CM_NAMESPACE or not meta.name.startswith(protocol.UNHEALTHY_CM_PREFIX):
        return None
    return meta.name[len(protocol.UNHEALTHY_CM_PREFIX) :] or None


def unhealthy_gpus(configmap: ConfigMap | None) -> frozenset[int]:
    """GPU indices listed in an unhealthy-GPU ConfigMap (empty for None or a ConfigMap without them)."""
    if configmap is None:
        return frozenset()
    return protocol.parse_unhealthy_gpus(configmap.data.get(protocol.UNHEALTHY_CM_KEY))


__all__ = [
    "Warnings",
    "invalid_requests",
    "node_ip",
    "node_ready",
    "node_record",
    "pod_record",
    "pod_request",
    "read_quantity",
    "requests_gpu_memory",
    "unhealthy_gpus",
    "unhealthy_node_name",
]
