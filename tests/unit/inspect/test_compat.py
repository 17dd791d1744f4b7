from __future__ import annotations

import pytest

from kubectl_gpushare.inspect import compat
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord


def node(name: str, mem: int, count: int, ip: str = "10.0.0.1") -> NodeRecord:
    return NodeRecord(name=name, ip=ip, alloc_mem=mem, alloc_count=count, cap_mem=mem, cap_count=count)


def pod(name: str, node_name: str, request: int, gpu: int = -1, namespace: str = "default") -> PodRecord:
    return PodRecord(
        uid=f"uid-{name}",
        namespace=namespace,
        name=name,
        node=node_name,
        phase="Running",
        request=request,
        gpu_index=gpu,
    )


@pytest.mark.parametrize(
    ("used", "total", "expected"),
    [(29, 100, 28), (57, 100, 56), (58, 100, 57), (29, 50, 57), (87, 150, 57), (114, 200, 56), (5, 45, 11), (0, 0, 0)],
)
def test_percent_truncates_the_float_like_go(used: int, total: int, expected: int) -> None:
    assert compat.percent(used, total) == expected


@pytest.mark.parametrize(
    ("nodes", "unit"),
    [
        pytest.param([node("a", 30, 2)], "GiB", id="gib"),
        pytest.param([node("a", 4 * 16160, 4)], "MiB", id="mib"),
        pytest.param([node("a", 8 * 141, 8)], "MiB", id="over-100-gib-per-gpu-reads-as-mib"),
        pytest.param([node("a", 200, 2)], "GiB", id="exactly-100-is-gib"),
        pytest.param([node("a", 32, 0), node("b", 1000, 2)], "MiB", id="first-node-with-gpus-decides"),
        pytest.param([node("a", 0, 0)], "", id="no-gpu-node"),
    ],
)
def test_memory_unit_heuristic(nodes: list[NodeRecord], unit: str) -> None:
    ledger = Ledger.build(nodes, [])
    assert compat.memory_unit(ledger, [n.name for n in nodes]) == unit


def s1() -> Ledger:
    return Ledger.build(
        [node("gpu-node-1", 30, 2, "192.168.1.11"), node("gpu-node-2", 15, 1, "192.168.1.12")],
        [pod("job-a", "gpu-node-1", 2, 0), pod("job-b", "gpu-node-1", 3, 1, "ml")],
    )


def test_summary_dash_line_follows_the_first_printed_row() -> None:
    # The reference's second S1 ordering: gpu-node-2 first, its row one byte shorter -> 58 dashes.
    text = compat.summary(s1(), ["gpu-node-2", "gpu-node-1"])
    assert text.splitlines()[3] == "-" * 58
    assert compat.summary(s1(), ["gpu-node-1", "gpu-node-2"]).splitlines()[3] == "-" * 59


def test_details_dash_line_is_ten_when_the_first_node_has_no_pods() -> None:
    lines = compat.details(s1(), ["gpu-node-2", "gpu-node-1"]).splitlines()
    dashes = [line for line in lines if line and set(line) == {"-"}]
    assert dashes == ["-" * 10, "-" * 10]


def test_summary_skips_nodes_without_memory_but_they_widen_gpu_columns() -> None:
    ledger = Ledger.build([node("a", 16, 1), node("b", 0, 4)], [])
    lines = compat.summary(ledger, ["a", "b"]).splitlines()
    assert "GPU3(Allocated/Total)" in lines[0]
    assert len(lines) == 5 and lines[1].startswith("a ")


def test_pending_spellings_differ_between_views() -> None:
    ledger = Ledger.build([node("a", 16, 1)], [pod("p", "a", 2)])
    assert "PENDING(Allocated)" in compat.summary(ledger, ["a"])
    assert "Pending(Allocated)" in compat.details(ledger, ["a"])


def test_summary_ignores_gpu_indices_beyond_the_cluster_max_but_details_count_them() -> None:
    ledger = Ledger.build([node("a", 32, 2)], [pod("in", "a", 3, 0), pod("beyond", "a", 5, 7)])
    assert compat.summary(ledger, ["a"]).splitlines()[1].endswith("3/32")
    assert "Allocated :  8 (25%)" in compat.details(ledger, ["a"])


def test_no_headers_gives_the_summary_rows_only() -> None:
    text = compat.summary(s1(), ["gpu-node-1", "gpu-node-2"], headers=False)
    full = compat.summary(s1(), ["gpu-node-1", "gpu-node-2"])
    assert [line.split() for line in text.splitlines()] == [line.split() for line in full.splitlines()[1:3]]
    details = compat.details(s1(), ["gpu-node-1"], headers=False)
    assert "GPU0(Allocated)" not in details and "job-a" in details
