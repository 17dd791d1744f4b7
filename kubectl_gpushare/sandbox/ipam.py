"""Pod addresses in the sandbox: a pod CIDR per node, pod IPs from their node's range.

What a real cluster does, reduced to arithmetic:

- kube-controller-manager's node IPAM (``--allocate-node-cidrs --cluster-cidr=CIDR
  --node-cidr-mask-size=24``, the range allocator; kubernetes.io/docs/reference/command-line-tools-reference/
  kube-controller-manager/ and .../concepts/cluster-administration/networking/) gives every new
  Node a free /24 of the cluster CIDR in ``spec.podCIDR`` and ``spec.podCIDRs`` ("the 0th entry must
  match the podCIDR field", Node API reference), and never changes it afterwards.
- The CNI plugin on the node (flannel/bridge with ``host-local`` IPAM, cni.dev/plugins/current/
  ipam/host-local/) hands each pod a free address of that range; ``.1`` is the bridge's gateway, so
  pods start at ``.2``; the kubelet reports it in ``status.podIP`` and ``status.podIPs``.

``CLUSTER_CIDR`` is 10.64.0.0/10 (16,384 node ranges), not flannel's 10.244.0.0/16 (256), so a
sandbox of 5,000 nodes gets a range on every node; it stays clear of the generated InternalIPs
(10.0.x.x). Everything here is O(1) per node or pod, except one scan of the stored nodes when the
node count changed behind the allocator's back (a ``load``, a delete).
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Iterable
from typing import Any

CLUSTER_CIDR = ipaddress.IPv4Network("10.64.0.0/10")
NODE_MASK = 24
NODE_RANGES = 2 ** (NODE_MASK - CLUSTER_CIDR.prefixlen)
POD_HOSTS = 2 ** (32 - NODE_MASK) - 3
"""Pod addresses per node range: all but the network, the gateway (.1) and broadcast addresses."""

_BASE = int(CLUSTER_CIDR.network_address)


def node_cidr(index: int) -> str:
    """The ``index``-th /24 of the cluster CIDR (wrapping past the last, as a fixed-size test bed may)."""
    network = _BASE + (index % NODE_RANGES) * 2 ** (32 - NODE_MASK)
    return f"{ipaddress.IPv4Address(network)}/{NODE_MASK}"


def pod_ip(cidr: str, ordinal: int) -> str:
    """The ``ordinal``-th pod address of a node's range: .2, .3, ... (host-local's order), reused past .254."""
    network = ipaddress.IPv4Network(cidr, strict=False)
    hosts = max(network.num_addresses - 3, 1)
    return str(network.network_address + 2 + ordinal % hosts)


def _index_of(cidr: object) -> int | None:
    try:
        network = ipaddress.IPv4Network(str(cidr), strict=False)
    except ValueError:
        return None
    if network.prefixlen != NODE_MASK or not network.subnet_of(CLUSTER_CIDR):
        return None
    return (int(network.network_address) - _BASE) >> (32 - NODE_MASK)


class NodeCIDRAllocator:
    """The range allocator: the lowest free /24 for each new node (thread-safe).

    ``stored`` yields the pod CIDRs of every stored node; it is read only when the node count is not
    what the allocator last saw, so creating nodes one by one costs no scan.
    """

    def __init__(self, stored: Callable[[], Iterable[object]], count: Callable[[], int]) -> None:
        self._stored = stored
        self._count = count
        self._used: set[int] = set()
        self._seen = -1
        self._next = 0
        self._lock = threading.Lock()

    def allocate(self) -> str | None:
        """A free node range, or None when the cluster CIDR is exhausted.

        The real allocator then records a ``CIDRNotAvailable`` event and leaves the node without one.
        """
        with self._lock:
            if self._count() != self._seen:
                self._used = {i for i in map(_index_of, self._stored()) if i is not None}
                self._seen = self._count()
                self._next = 0
            if len(self._used) >= NODE_RANGES:
                return None
            while self._next in self._used:
                self._next += 1
            self._used.add(self._next)
            self._seen += 1
            return node_cidr(self._next)


class PodAddresses:
    """host-local IPAM on every node at once: the lowest free address of the node's range per pod.

    A node's taken addresses are read once (``existing``, the podIPs of pods already on it, e.g.
    seeded ones), then kept; `release` frees a deleted pod's address for reuse, as host-local does.
    """

    def __init__(self) -> None:
        self._taken: dict[str, set[str]] = {}
        self._of_pod: dict[str, tuple[str, str]] = {}
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, node: str, cidr: object, pod_uid: str, existing: Callable[[], Iterable[object]]) -> str | None:
        """The pod's address on ``node`` (the same one again for the same pod); None without a valid range."""
        try:
            network = ipaddress.IPv4Network(str(cidr), strict=False)
        except ValueError:
            return None
        with self._lock:
            if pod_uid in self._of_pod:
                return self._of_pod[pod_uid][1]
            taken = self._taken.get(node)
            if taken is None:
                taken = self._taken[node] = {str(ip) for ip in existing() if ip}
            hosts = max(network.num_addresses - 3, 1)
            first = int(network.network_address) + 2
            start = self._next.get(node, 0)
            for step in range(hosts):
                ordinal = (start + step) % hosts
                address = str(ipaddress.IPv4Address(first + ordinal))
                if address not in taken:
                    break
            else:
                return None  # the range is full: a real node's CNI would fail the sandbox creation
            self._next[node] = ordinal + 1
            taken.add(address)
            self._of_pod[pod_uid] = (node, address)
            return address

    def release(self, pod_uid: str) -> None:
        """Free a deleted pod's address."""
        with self._lock:
            node, address = self._of_pod.pop(pod_uid, ("", ""))
            self._taken.get(node, set()).discard(address)


def assign(objects: Iterable[dict[str, Any]]) -> None:
    """Give seeded nodes without a range one each, and their Running pods without an IP an address.

    What the cluster's controllers would have done before the seed was taken; nodes that carry a
    range keep it, and the next free ranges go to the others in order. O(nodes + pods).
    """
    items = list(objects)
    nodes = [o for o in items if o.get("kind") == "Node" and isinstance(o.get("spec", {}), dict)]
    used = {i for i in (_index_of((n.get("spec") or {}).get("podCIDR")) for n in nodes) if i is not None}
    cidr_of: dict[str, str] = {}
    free = (i for i in range(NODE_RANGES) if i not in used)
    for node in nodes:
        spec: dict[str, Any] = node.setdefault("spec", {})
        meta = node.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not spec.get("podCIDR"):
            index = next(free, None)
            if index is None:
                continue
            spec["podCIDR"] = node_cidr(index)
            spec["podCIDRs"] = [spec["podCIDR"]]
        if isinstance(name, str):
            cidr_of[name] = str(spec["podCIDR"])
    prefix_of: dict[str, tuple[int, int]] = {}
    next_of: dict[str, int] = {}
    for pod in items:
        if pod.get("kind") != "Pod":
            continue
        pod_spec, status = pod.get("spec"), pod.get("status")
        if not (isinstance(pod_spec, dict) and isinstance(status, dict)):
            continue
        node_name = pod_spec.get("nodeName")
        if status.get("phase") != "Running" or status.get("podIP") or not isinstance(node_name, str):
            continue
        if node_name not in prefix_of:
            if node_name not in cidr_of:
                continue
            try:
                network = ipaddress.IPv4Network(cidr_of[node_name], strict=False)
            except ValueError:
                continue
            prefix_of[node_name] = (int(network.network_address) + 2, max(network.num_addresses - 3, 1))
        first, hosts = prefix_of[node_name]
        ordinal = next_of.get(node_name, 0)
        next_of[node_name] = ordinal + 1
        address = _dotted(first + ordinal % hosts)
        status["podIP"] = address
        status["podIPs"] = [{"ip": address}]


def _dotted(value: int) -> str:
    return f"{value >> 24 & 255}.{value >> 16 & 255}.{value >> 8 & 255}.{value & 255}"
