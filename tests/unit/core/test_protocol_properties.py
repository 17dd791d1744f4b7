"""Properties of the pure parsers: any input gives a bounded result or the documented error, quickly."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import protocol

T = TypeVar("T")
PROPERTY = settings(max_examples=200, deadline=None)
FAST = 0.25
"""Seconds any single parse may take, with room for a loaded 2-core CI machine."""

huge_ints = st.integers(-(10**30), 10**30) | st.integers(-70, 70)
quantity_like = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.from_regex(r"[0-9]{0,70}", fullmatch=True),
    st.sampled_from(["", "."]) | st.from_regex(r"\.[0-9]{0,40}", fullmatch=True),
    st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"])
    | st.from_regex(r"[eE][+-]?[0-9]{1,12}", fullmatch=True),
)
json_values = st.recursive(
    st.none() | st.booleans() | huge_ints | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=4) | huge_ints.map(str), children, max_size=4),
    max_leaves=20,
)
keys = huge_ints.map(str) | st.text(max_size=3)
memories = huge_ints | st.floats(allow_nan=False) | st.none() | st.booleans()
allocation_like = st.dictionaries(
    keys, st.dictionaries(keys, memories, max_size=4) | json_values, max_size=4
).map(json.dumps)


def timed(parse: Callable[[str], T], text: str) -> T:
    start = time.perf_counter()
    try:
        return parse(text)
    finally:
        assert time.perf_counter() - start < FAST, f"{parse.__name__} took too long on {text[:40]!r}"


@PROPERTY
@given(st.text(max_size=200) | quantity_like)
def test_parse_quantity_gives_an_int64_or_value_error(text: str) -> None:
    try:
        value = timed(protocol.parse_quantity, text)
    except ValueError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    assert -(2**63) <= value <= protocol.MAX_INT64


@PROPERTY
@given(st.integers(-(2**63), 2**63 - 1))
def test_parse_quantity_reads_every_int64_back(value: int) -> None:
    assert protocol.parse_quantity(str(value)) == value


@PROPERTY
@given(st.text(max_size=100) | huge_ints.map(str) | st.from_regex(r"[+-]?[0-9]{15,6000}", fullmatch=True))
def test_integer_and_index_parsers_are_bounded(text: str) -> None:
    value = timed(protocol.parse_int_strict, text)
    assert value is None or -(2**63) <= value <= protocol.MAX_INT64
    index = timed(protocol.parse_gpu_index, text)
    assert index == -1 or 0 <= index < protocol.MAX_GPUS_PER_NODE
    assert timed(protocol.parse_assume_time, text) >= 0
    assert all(0 <= gpu < protocol.MAX_GPUS_PER_NODE for gpu in timed(protocol.parse_unhealthy_gpus, text))


@PROPERTY
@given(st.text(max_size=200) | json_values.map(json.dumps) | allocation_like)
def test_parse_allocation_is_valid_none_or_annotation_error(text: str) -> None:
    try:
        per_gpu = timed(protocol.parse_allocation, text)
    except protocol.AnnotationError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 200
        return
    if per_gpu is not None:
        assert per_gpu
        for gpu, mem in per_gpu.items():
            assert 0 <= gpu < protocol.MAX_GPUS_PER_NODE
            assert 0 < mem <= protocol.MAX_GPU_MEMORY


@PROPERTY
@given(
    st.dictionaries(
        st.integers(0, 9).map(str),
        st.dictionaries(st.integers(0, protocol.MAX_GPUS_PER_NODE - 1).map(str), st.integers(1, 1000), max_size=4),
        max_size=4,
    )
)
def test_parse_allocation_sums_every_valid_claim(raw: dict[str, dict[str, int]]) -> None:
    expected: dict[int, int] = {}
    for gpus in raw.values():
        for gpu, mem in gpus.items():
            expected[int(gpu)] = expected.get(int(gpu), 0) + mem
    assert protocol.parse_allocation(json.dumps(raw)) == (expected or None)


@PROPERTY
@given(
    st.text(max_size=200)
    | json_values.map(json.dumps)
    | st.lists(st.fixed_dictionaries({"index": huge_ints, "memory": huge_ints}), max_size=70).map(json.dumps)
)
def test_parse_node_gpus_is_bounded_or_none(text: str) -> None:
    gpus = timed(protocol.parse_node_gpus, text)
    if gpus is not None:
        assert len(gpus) <= protocol.MAX_GPUS_PER_NODE
        assert all(0 <= memory <= protocol.MAX_GPU_MEMORY for memory in gpus)


@PROPERTY
@given(json_values)
def test_json_depth_matches_the_real_nesting(value: object) -> None:
    def depth(node: object) -> int:
        if isinstance(node, dict):
            return 1 + max((depth(child) for child in node.values()), default=0)
        if isinstance(node, list):
            return 1 + max((depth(child) for child in node), default=0)
        return 0

    assert protocol.json_depth(json.dumps(value)) == depth(value)
