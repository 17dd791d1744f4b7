"""The pure ``top`` report: shares from the ledger beside observed usage, unknown never shown as 0."""

from __future__ import annotations

import json

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import top
from kubectl_gpushare.ledger import Ledger, NodeRecord, PodRecord

GIB = 1 << 30


def _ledger() -> Ledger:
    nodes = [NodeRecord("n1", alloc_mem=32, alloc_count=2, cap_mem=32, cap_count=2),
             NodeRecord("n2", alloc_mem=8, alloc_count=1, cap_mem=8, cap_count=1)]  # fmt: skip
    pods = [
        PodRecord("u1", "a", "small", "n1", "Running", 4, gpu_index=0),
        PodRecord("u2", "a", "big", "n1", "Running", 2, gpu_index=0),
        PodRecord("u3", "b", "waiting", "n1", "Pending", 2),  # no GPU yet: not a GPU row
        PodRecord("u4", "b", "other", "n2", "Running", 3, gpu_index=0),
    ]
    return Ledger.build(nodes, pods, basis="allocatable")


def _observed() -> dict[str, top.NodeObserved | None]:
    report = protocol.UsageReport("n1", "t", 10, "processes", [
        protocol.UsageGpu(0, "g0", 16 * GIB, 6 * GIB, 9 * GIB, protocol.ENFORCE_OFF, "old\x1b[2J driver"),
    ], [
        protocol.UsagePod("a", "small", "u1", 0, 4 * GIB, 1 * GIB),
        protocol.UsagePod("a", "big", "u2", 0, 2 * GIB, 2 * GIB),
        protocol.UsagePod("a", "big", "u2", 0, 2 * GIB, 2 * GIB),  # a second process entry: summed
    ])  # fmt: skip
    return {"n1": top.from_report(report), "n2": None}


def test_shares_usage_and_unknowns() -> None:
    report = top.build(_ledger(), ["n1", "n2"], _observed())
    assert [(g.node, g.index, g.allocated_bytes, g.used_bytes, g.enforced) for g in report.gpus] == [
        ("n1", 0, 6 * GIB, 9 * GIB, False), ("n1", 1, 0, None, None), ("n2", 0, 3 * GIB, None, None),
    ]
    assert [(p.name, p.used_bytes, p.over) for p in report.pods] == [
        ("big", 4 * GIB, True), ("small", GIB, False), ("other", None, None),
    ]
    assert report.unknown_nodes == ["n2"]


def test_namespace_and_sort_keep_unknown_last() -> None:
    report = top.build(_ledger(), ["n1", "n2"], _observed(), namespace="a", sort="over")
    assert [p.name for p in report.pods] == ["big", "small"]
    by_used = top.build(_ledger(), ["n1", "n2"], _observed(), sort="used")
    assert [(g.node, g.index) for g in by_used.gpus] == [("n1", 0), ("n1", 1), ("n2", 0)]
    assert [p.name for p in by_used.pods] == ["big", "small", "other"]
    by_share = top.build(_ledger(), ["n1", "n2"], _observed(), sort="allocated", unit=protocol.UNIT_MIB)
    assert [p.allocated_bytes for p in by_share.pods] == [4 << 20, 3 << 20, 2 << 20]


def test_text_shows_unknown_and_never_zero_for_it() -> None:
    text = top.to_text(top.build(_ledger(), ["n1", "n2"], _observed()))
    assert "n2    0    3072Mi     <unknown>" in text
    assert "other  n2    0    3072Mi     <unknown>  <unknown>  <unknown>" in text
    assert top.build(_ledger(), ["n1"], _observed()).gpus[0].reason == "old [2J driver"  # no escape reaches a terminal


def test_hostile_names_are_one_cell_in_the_tables_and_exact_in_json() -> None:
    """Nodes, namespaces and pods named with ESC, a newline and a tab (a device plugin's document or an API
    that validates nothing): each row stays one line, columns measured on the shown names; JSON is exact."""
    from golden import hostile
    from golden.top import cases

    node, namespace, name = hostile.NODE, hostile.NAMESPACE, f"trainer{hostile.HOSTILE}"
    ledger = Ledger.build([NodeRecord(node, alloc_mem=16, alloc_count=1, cap_mem=16, cap_count=1)],
                          [PodRecord("u1", namespace, name, node, "Running", 4, gpu_index=0)], basis="allocatable")
    report = protocol.UsageReport(node, "t", 10, "processes", [
        protocol.UsageGpu(0, "g0", 16 * GIB, 3 * GIB, 9 * GIB, protocol.ENFORCE_OFF, ""),
    ], [protocol.UsagePod(namespace, name, "u1", 0, 3 * GIB, 4 * GIB)])  # fmt: skip
    built = top.build(ledger, [node], {node: top.from_report(report)})
    text = top.to_text(built)
    hostile.assert_one_line_each(text)
    lines = text.splitlines()
    assert len(lines) == 2 + 1 + 2, "GPU table, a blank line, pod table: none forged"
    shown_node = node.replace(hostile.HOSTILE, hostile.SHOWN)
    assert lines[1].startswith(f"{shown_node}  0    4096Mi") and lines[0].index("GPU") == len(shown_node) + 2
    assert lines[4].startswith(f"ml{hostile.SHOWN}  trainer{hostile.SHOWN}  {shown_node}  0")
    cases.check("hostile-names.txt", text)
    data = json.loads(top.to_json(built))
    assert (data["gpus"][0]["node"], data["pods"][0]["namespace"], data["pods"][0]["name"]) == (node, namespace, name)
