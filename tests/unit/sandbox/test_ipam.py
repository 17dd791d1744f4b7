"""Node pod ranges and pod addresses (`sandbox.ipam`): distinct, inside their range, cheap at scale."""

from __future__ import annotations

import ipaddress

from kubectl_gpushare.sandbox import ipam
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.spec import generate_cluster, parse_spec


def test_node_ranges_are_distinct_24s_of_the_cluster_cidr() -> None:
    cidrs = [ipam.node_cidr(i) for i in range(5000)]
    assert len(set(cidrs)) == 5000
    assert cidrs[0] == "10.64.0.0/24" and cidrs[256] == "10.65.0.0/24"
    assert all(ipaddress.ip_network(c).subnet_of(ipam.CLUSTER_CIDR) for c in cidrs[::97])


def test_pod_addresses_skip_the_gateway_and_reuse_what_a_deleted_pod_freed() -> None:
    addresses = ipam.PodAddresses()
    first = addresses.take("n", "10.64.3.0/24", "a", lambda: ["10.64.3.3"])
    assert first == "10.64.3.2"
    assert addresses.take("n", "10.64.3.0/24", "a", list) == first  # the same pod keeps its address
    assert addresses.take("n", "10.64.3.0/24", "b", list) == "10.64.3.4"  # .3 is a seeded pod's
    addresses.release("a")
    assert addresses.take("n", "10.64.3.0/24", "c", list) == "10.64.3.5"  # host-local goes on, then wraps
    assert addresses.take("n", "not a cidr", "d", list) is None


def test_a_full_range_gives_no_address() -> None:
    addresses = ipam.PodAddresses()
    taken = {addresses.take("n", "10.64.0.0/30", str(i), list) for i in range(3)}
    assert taken == {"10.64.0.2", None}


def test_the_allocator_gives_the_lowest_free_range_and_rescans_after_a_load() -> None:
    stored: list[object] = ["10.64.0.0/24", "garbage", None]
    allocator = ipam.NodeCIDRAllocator(lambda: stored, lambda: len(stored))
    assert allocator.allocate() == "10.64.1.0/24"
    stored.append("10.64.1.0/24")
    assert allocator.allocate() == "10.64.2.0/24"
    stored.extend(["10.64.2.0/24", "10.64.3.0/24", "10.64.4.0/24"])  # loaded behind its back
    assert allocator.allocate() == "10.64.5.0/24"


def test_generated_clusters_address_every_running_pod_inside_its_nodes_range() -> None:
    objects = generate_cluster(300, 8, 6000, seed=3)
    cidr = {o["metadata"]["name"]: o["spec"]["podCIDR"] for o in objects if o["kind"] == "Node"}
    assert len(set(cidr.values())) == 300
    running = [o for o in objects if o["kind"] == "Pod" and o["status"]["phase"] == "Running"]
    ips = [p["status"]["podIP"] for p in running]
    assert len(running) > 4000 and len(set(ips)) == len(ips)
    for pod in running:
        network = ipaddress.ip_network(cidr[pod["spec"]["nodeName"]])
        assert ipaddress.ip_address(pod["status"]["podIP"]) in network
        assert pod["status"]["podIPs"] == [{"ip": pod["status"]["podIP"]}]
    ids = {id(p) for p in running}
    assert all("podIP" not in o["status"] for o in objects if o["kind"] == "Pod" and id(o) not in ids)


def test_spec_nodes_and_generated_ones_never_share_a_range() -> None:
    objects = parse_spec("nodes: [{name: a, gpus: 1}, {name: b, gpus: 1}]\n"
                         "pods: [{name: p, node: a, gpu: 0, memory: 1}]\ngenerate: {nodes: 3, pods: 2}\n")
    cidrs = [o["spec"]["podCIDR"] for o in objects if o["kind"] == "Node"]
    assert len(cidrs) == 5 and len(set(cidrs)) == 5
    pod = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "p")
    node_a = next(o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == "a")
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(node_a["spec"]["podCIDR"])


def test_assign_keeps_given_ranges_and_addresses_and_skips_hostile_objects() -> None:
    mine = node_object("m", [16], ip="10.0.0.1")
    mine["spec"]["podCIDR"] = "10.64.0.0/24"
    other = node_object("o", [16], ip="10.0.0.2")
    placed = pod_object("p", "default", [1], node="o", gpu=0, ip="192.0.2.7")
    hostile = [{"kind": "Node", "metadata": "x", "spec": "nope"}, {"kind": "Pod", "spec": [], "status": None}]
    ipam.assign([mine, other, placed, *hostile])
    assert mine["spec"]["podCIDR"] == "10.64.0.0/24" and other["spec"]["podCIDR"] == "10.64.1.0/24"
    assert placed["status"]["podIP"] == "192.0.2.7"
