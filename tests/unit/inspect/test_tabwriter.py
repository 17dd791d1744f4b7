from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.inspect import tabwriter
from kubectl_gpushare.inspect.tabwriter import render


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a\tbb\tc\n", "a  bb  c\n", id="trailing-cell-not-padded"),
        pytest.param("a\tb\t\n", "a  b  \n", id="last-tab-terminated-cell-padded"),
        pytest.param("x\t\tz\nlonger\tq\tz\n", "x" + " " * 10 + "z\nlonger  q  z\n", id="empty-cell-padded-to-column"),
        pytest.param("NAME:\tn1\nIPADDRESS:\t10.0.0.1\n", "NAME:       n1\nIPADDRESS:  10.0.0.1\n", id="label-column"),
        pytest.param("a\tb\n\nlong-cell\tc\n", "a  b\n\nlong-cell  c\n", id="blank-line-flushes"),
        pytest.param("a\tb\n---\nlong-cell\tc\n", "a  b\n---\nlong-cell  c\n", id="tab-free-line-flushes"),
        pytest.param("5/45 (11%)\t\n", "5/45 (11%)  \n", id="cluster-footer-two-spaces"),
        pytest.param("é\tx\nab\ty\n", "é   x\nab  y\n", id="width-counts-runes"),
        pytest.param("a\tb\n", "a  b\n", id="single-line"),
        pytest.param("a\tb", "a  b", id="unterminated-last-line"),
        pytest.param("", "", id="empty"),
    ],
)
def test_render_matches_go_tabwriter(text: str, expected: str) -> None:
    assert render(text) == expected


def test_column_blocks_are_runs_of_consecutive_lines() -> None:
    # Line 2 has no second column, so column 1 of lines 1 and 3 are aligned separately,
    # while column 0 spans all three lines (Go's nested column blocks).
    text = "a\tlong-second\tx\nbbbb\tz\nc\td\te\n"
    assert render(text) == "a     long-second  x\nbbbb  z\nc     d  e\n"


def test_detail_section_shares_label_and_namespace_columns() -> None:
    text = (
        "NAME\tNAMESPACE\tGPU0(Allocated)\tGPU1(Allocated)\t\n"
        "job-a\tdefault\t2\t0\t\n"
        "Allocated :\t5 (16%)\t\n"
        "Total :\t30 \t\n"
    )
    assert render(text).splitlines() == [
        "NAME         NAMESPACE  GPU0(Allocated)  GPU1(Allocated)  ",
        "job-a        default    2                0                ",
        "Allocated :  5 (16%)    ",
        "Total :      30         ",
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.text("ab\u00e9x ", max_size=5), min_size=1, max_size=5), min_size=1, max_size=6))
def test_uniform_tables_lay_out_as_go_column_blocks(rows: list[list[str]]) -> None:
    # The fast path for tables whose lines have equal cells against the general block algorithm.
    width = len(rows[0])
    lines = [(row + [""] * width)[:width] for row in rows]
    fast: list[str] = []
    general: list[str] = []
    tabwriter._format_section([list(cells) for cells in lines], fast)
    tabwriter._format_general([list(cells) for cells in lines], general)
    assert fast == general
