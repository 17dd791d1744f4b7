"""kube-scheduler's NodeResourcesFit filter, for the stack's scheduler stand-in (`cli.scheduler`).

What it follows (kube-scheduler ``pkg/scheduler/framework/plugins/noderesources/fit.go``,
``fitsRequest``; the pod's request from ``k8s.io/component-helpers/resource.PodRequests``):

- A node fits a pod when, for every resource the pod requests, what the node's non-terminal pods
  already request plus the pod's request is at most the node's ``status.allocatable``; a resource
  the node does not advertise has allocatable 0, so any request of it fails ("Insufficient
  nvidia.com/gpu"). Requests count, not limits (the API server defaults a missing request to its
  limit, as the sandbox does). CPU is counted in millicores.
- The pod count: the node's pods plus this one must not exceed allocatable ``pods`` ("Too many pods").
- A pod's request is the larger of (the sum of its app containers plus its restartable init
  containers, i.e. sidecars) and (each ordinary init container plus the sidecars started before it),
  then ``spec.overhead`` is added. https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers
  https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers
  https://kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/
- Resources an extender manages with ``ignoredByScheduler: true`` are not checked (the extender does).
- Reasons read as kube-scheduler words them: ``Insufficient <resource>``, ``Too many pods``.

Bad quantities in a pod count as 0, in a node as 0 allocatable: one bad object never stops
scheduling for the others.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kubectl_gpushare import protocol

PODS = "pods"
CPU = "cpu"


def _amount(resource: str, value: object) -> int:
    try:
        text = str(value)
        return max(protocol.parse_milli_quantity(text) if resource == CPU else protocol.parse_quantity(text), 0)
    except ValueError:
        return 0


def _declared(container: object) -> dict[str, object]:
    """One container's raw requests, its limits where a request is missing (as API defaulting does)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return {}
    limits, requests = resources.get("limits"), resources.get("requests")
    merged: dict[str, object] = dict(limits) if isinstance(limits, dict) else {}
    if isinstance(requests, dict):
        merged.update(requests)
    return merged


def container_requests(container: object) -> dict[str, int]:
    """One container's requests (its limits where a request is missing, as API defaulting does)."""
    return {str(name): _amount(str(name), value) for name, value in _declared(container).items()}


def container_resource_names(container: object) -> set[str]:
    """The resources one container names in its requests or limits, whatever the amounts (none parsed)."""
    return {str(name) for name in _declared(container)}


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _max(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        total[name] = max(total.get(name, 0), value)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler counts a pod as asking (CPU in millicores), per resource."""
    spec = pod.get("spec") or {}
    apps: dict[str, int] = {}
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else []:
        _add(apps, container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    inits = spec.get("initContainers")
    for container in inits if isinstance(inits, list) else []:
        own = container_requests(container)
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
            _max(init_peak, running)
    _add(apps, sidecars)
    _max(apps, init_peak)
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        _add(apps, {str(name): _amount(str(name), value) for name, value in overhead.items()})
    return {name: value for name, value in apps.items() if value > 0}


def allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """A node's allocatable resources (CPU in millicores); unreadable values are 0."""
    values = (node.get("status") or {}).get("allocatable") or {}
    if not isinstance(values, dict):
        return {}
    return {str(name): _amount(str(name), value) for name, value in values.items()}


class NodeUsage:
    """What the non-terminal pods bound to each node request, updated as a pass binds more."""

    def __init__(self) -> None:
        self._used: dict[str, dict[str, int]] = {}

    def add(self, node: str, requests: Mapping[str, int]) -> None:
        """Count one more pod with these requests on ``node``."""
        used = self._used.setdefault(node, {})
        _add(used, requests)
        used[PODS] = used.get(PODS, 0) + 1

    def of(self, node: str) -> Mapping[str, int]:
        """What the node's pods request, with their count under ``pods``."""
        return self._used.get(node, {})


def insufficient(requests: Mapping[str, int], node: Mapping[str, Any], used: Mapping[str, int],
                 ignored: Collection[str] = ()) -> list[str]:
    """kube-scheduler's reasons why the node cannot hold the pod (empty: it fits), in resource order."""
    free = allocatable(node)
    reasons: list[str] = []
    if used.get(PODS, 0) + 1 > free.get(PODS, 0):
        reasons.append("Too many pods")
    for name in sorted(requests):
        if name in ignored or name == PODS:
            continue
        want = requests[name]
        if want and used.get(name, 0) + want > free.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def usage(pods: Iterable[Mapping[str, Any]]) -> NodeUsage:
    """What every node's bound, non-terminal pods request."""
    result = NodeUsage()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not protocol.pod_phase_terminal((pod.get("status") or {}).get("phase")):
            result.add(str(node), pod_requests(pod))
    return result
