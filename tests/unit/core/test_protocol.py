"""Table tests for the pure parsers of the wire contract."""

from __future__ import annotations

import pytest

from kubectl_gpushare import protocol


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4", 4),
        ("0", 0),
        ("10G", 10_000_000_000),
        ("2Gi", 2 * 1024**3),
        ("1Ki", 1024),
        ("1500m", 2),
        ("1m", 1),
        ("1e3", 1000),
        ("1.5", 2),
        ("+3", 3),
        (" 7 ", 7),
        ("0.1k", 100),
    ],
    ids=lambda value: repr(value),
)
def test_parse_quantity_rounds_up_like_quantity_value(text: str, expected: int) -> None:
    assert protocol.parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "Gi", "1x", "--1"])
def test_parse_quantity_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        protocol.parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("3", 3), ("+2", 2), ("-1", -1), (None, -1), ("", -1), (" 1", -1), ("1.0", -1), ("x", -1), ("1_0", -1)],
)
def test_parse_gpu_index_follows_atoi(text: str | None, expected: int) -> None:
    assert protocol.parse_gpu_index(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1700000000000000000", 1700000000000000000), ("abc", 0), (None, 0), ("-5", 0), ("1e9", 0)],
)
def test_parse_assume_time_is_unix_nanoseconds_or_zero(text: str | None, expected: int) -> None:
    assert protocol.parse_assume_time(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"0":{"0":4,"1":4}}', {0: 4, 1: 4}),
        ('{"0":{"1":2},"1":{"1":3}}', {1: 5}),
        ("{}", None),
        ("not json", None),
        ("[1,2]", None),
        ('{"a":{"0":1}}', None),
        ('{"0":{"0":1.5}}', None),
        (None, None),
    ],
)
def test_parse_allocation_sums_per_gpu_or_falls_back(text: str | None, expected: dict[int, int] | None) -> None:
    assert protocol.parse_allocation(text) == expected


def test_parse_allocation_reports_a_non_integer_gpu_key() -> None:
    with pytest.raises(protocol.AnnotationError, match="not an integer"):
        protocol.parse_allocation('{"0":{"gpu0":4}}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0,2", {0, 2}), ("", set()), (None, set()), (" 1", {1}), ("x,3", {3}), ("-1,4", {4})],
)
def test_parse_unhealthy_gpus_ignores_entries_that_are_not_indices(text: str | None, expected: set[int]) -> None:
    assert protocol.parse_unhealthy_gpus(text) == expected


def test_node_gpus_round_trip_in_index_order() -> None:
    text = protocol.format_node_gpus(
        [{"index": 1, "memory": 24, "model": "L4"}, {"index": 0, "memory": 80, "model": "A100"}]
    )
    assert protocol.parse_node_gpus(text) == (80, 24)


@pytest.mark.parametrize("text", ["", "nope", '[{"index":1,"memory":3}]', '[{"index":0}]', '[{"index":0,"memory":-1}]'])
def test_parse_node_gpus_rejects_gaps_and_garbage(text: str) -> None:
    assert protocol.parse_node_gpus(text) is None


def test_fake_device_ids_keep_the_original_format() -> None:
    device = protocol.fake_device_id("GPU-a68d8362-b4ac-17f8-b19a-7cd116a45ee1", 7)
    assert device == "GPU-a68d8362-b4ac-17f8-b19a-7cd116a45ee1-_-7"
    assert protocol.uuid_of_fake_device(device) == "GPU-a68d8362-b4ac-17f8-b19a-7cd116a45ee1"
