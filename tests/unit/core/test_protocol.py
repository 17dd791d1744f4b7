"""Table tests for the pure parsers of the wire contract."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "Gi", "1x", "--1",
                                  "\u0661\u0662", "\u0661Gi", "1e\u0663"])
def test_parse_quantity_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        protocol.parse_quantity(text)


@pytest.mark.parametrize("text", ["\u0661\u0662", "1Gi\n", "\uff11Gi"])
def test_canonical_quantity_takes_ascii_digits_to_the_very_end(text: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        protocol.canonical_quantity(text)


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
        ("null", None),
        ('{"0":{}}', None),
        ("", None),
        (None, None),
    ],
)
def test_parse_allocation_sums_per_gpu_or_falls_back(text: str | None, expected: dict[int, int] | None) -> None:
    assert protocol.parse_allocation(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "is not JSON"),
        ("[1,2]", "not a map"),
        ('{"a":{"0":1}}', "not a map"),
        ('{"-1":{"0":1}}', "not a map"),
        ('{"0":[1]}', "not a map"),
        ('{"0":{"0":1.5}}', "not an integer in \\[1,"),
        ('{"0":{"0":-400}}', "not an integer in \\[1,"),
        ('{"0":{"0":0}}', "not an integer in \\[1,"),
        ('{"0":{"0":true}}', "not an integer in \\[1,"),
        ('{"0":{"0":"4"}}', "not an integer in \\[1,"),
        ('{"0":{"0":' + "9" * 4000 + "}}", "not an integer in \\[1,"),
        ('{"0":{"0":4,"1":-4}}', "not an integer in \\[1,"),
        ('{"0":{"64":4}}', "not an integer in \\[0, 64\\)"),
        ('{"0":{"-1":4}}', "not an integer in \\[0, 64\\)"),
        ('{"0":{"' + "9" * 5000 + '":4}}', "not an integer in \\[0, 64\\)"),
        ('{"0":{"0":1099511627776},"1":{"0":1}}', "more than"),
        ('{"0":' * 100_000 + "1" + "}" * 100_000, "longer than 16384 bytes"),
        ('{"0":' * 2000 + "1" + "}" * 2000, "nests deeper than 2 levels"),
        ('{"0":{"0":{"0":1}}}', "nests deeper than 2 levels"),
    ],
    ids=lambda value: value[:40],
)
def test_parse_allocation_rejects_every_invalid_claim_whole(text: str, reason: str) -> None:
    # One bad entry invalidates the claim: a pod can never credit free memory to a GPU.
    with pytest.raises(protocol.AnnotationError, match=reason) as caught:
        protocol.parse_allocation(text)
    assert "\n" not in str(caught.value)
    assert len(str(caught.value)) < 200


def test_parse_allocation_keeps_keys_with_brackets_in_strings_out_of_the_depth_count() -> None:
    assert protocol.json_depth('{"a[[[{{": {"b": "]]]}"}}') == 2
    assert protocol.json_depth('[[["\\"[["]]]') == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("7Ei", 7 * 1024**6),
        ("1e-9999999", 1),
        ("-1e-9999999", 0),
        ("0e9999999", 0),
        ("0." + "0" * 60 + "1", 1),
        ("1.000000000000000000000000000000000001", 2),
        ("-1500m", -1),
        ("5.", 5),
        (".5", 1),
    ],
    ids=lambda value: repr(value)[:30],
)
def test_parse_quantity_is_exact_at_the_int64_edges(text: str, expected: int) -> None:
    assert protocol.parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "1e999999",
        "1e9999999",
        "9223372036854775808",
        "-9223372036854775809",
        "8Ei",
        "10E",
        "1e19",
        "9" * 5000,
        "1" * 64 + "e-50",
    ],
    ids=lambda value: value[:20],
)
def test_parse_quantity_rejects_absurd_values_at_once(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match="out of range|longer than 64") as caught:
        protocol.parse_quantity(text)
    assert time.perf_counter() - start < 0.5, "bounded before any big number is built"
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("text", "expected"),
    [("63", 63), ("64", -1), ("9" * 5000, -1), ("9223372036854775808", -1), ("-2", -1), ("-1", -1)],
    ids=lambda value: repr(value)[:20],
)
def test_parse_gpu_index_is_pending_outside_the_gpus_a_node_can_have(text: str, expected: int) -> None:
    assert protocol.parse_gpu_index(text) == expected


def test_parse_int_strict_refuses_beyond_int64_without_converting() -> None:
    assert protocol.parse_int_strict("9223372036854775807") == 2**63 - 1
    assert protocol.parse_int_strict("9223372036854775808") is None
    assert protocol.parse_int_strict("1" * 5000) is None  # int() would raise past 4300 digits


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


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nope",
        '[{"index":1,"memory":3}]',
        '[{"index":0}]',
        '[{"index":0,"memory":-1}]',
        '[{"index":0,"memory":1099511627777}]',
        '[{"index":0,"memory":"80"}]',
        '[{"index":0,"memory":' + "9" * 5000 + "}]",
        "[" + ",".join(f'{{"index":{i},"memory":1}}' for i in range(65)) + "]",
        "[" * 100_000 + "]" * 100_000,
        "[[[{}]]]",
    ],
    ids=lambda value: value[:30],
)
def test_parse_node_gpus_rejects_gaps_and_garbage(text: str) -> None:
    assert protocol.parse_node_gpus(text) is None


def test_fake_device_ids_keep_the_original_format() -> None:
    device = protocol.fake_device_id("GPU-a68d8362-b4ac-17f8-b19a-7cd116a45ee1", 7)
    assert device == "GPU-a68d8362-b4ac-17f8-b19a-7cd116a45ee1-_-7"
    assert protocol.uuid_of_fake_device(device) == "GPU-a68d8362-b4ac-17f8-b19a-7cd116a45ee1"


def test_node_gpus_carry_a_version_that_older_readers_ignore() -> None:
    import json

    text = protocol.format_node_gpus([{"index": 0, "memory": 16, "uuid": "GPU-a"}])
    assert json.loads(text) == [{"index": 0, "memory": 16, "uuid": "GPU-a", "version": protocol.NODE_GPUS_VERSION}]
    assert protocol.parse_node_gpus(text) == (16,)
    assert protocol.parse_node_gpus('[{"index":0,"memory":16}]') == (16,)  # written before versions


@pytest.mark.parametrize("version", [protocol.NODE_GPUS_VERSION + 1, 10**30])
def test_node_gpus_of_a_newer_version_are_never_counted_as_free_memory(version: int) -> None:
    text = f'[{{"index":0,"memory":16,"version":{version}}},{{"index":1,"memory":"a lot","version":{version}}}]'
    assert protocol.parse_node_gpus(text) == (0, 0)


def test_a_newer_node_gpus_version_is_reported_once_with_the_newest_version() -> None:
    seen: list[int] = []
    current = protocol.NODE_GPUS_VERSION
    mixed = f'[{{"index":0,"memory":16,"version":{current + 2}}},{{"index":1,"memory":16,"version":{current + 1}}}]'
    assert protocol.parse_node_gpus(mixed, seen.append) == (0, 0)
    assert seen == [current + 2]
    seen.clear()
    assert protocol.parse_node_gpus(protocol.format_node_gpus([{"index": 0, "memory": 16}]), seen.append) == (16,)
    gap = f'[{{"index":1,"memory":16,"version":{current + 1}}}]'  # malformed (no GPU 0): nothing to say why
    assert protocol.parse_node_gpus(gap, seen.append) is None
    assert seen == []


@pytest.mark.parametrize("version", ["0", "-1", '"2"', "true", "1.5", "null"])
def test_node_gpus_with_a_version_that_is_not_one_are_malformed(version: str) -> None:
    assert protocol.parse_node_gpus(f'[{{"index":0,"memory":16,"version":{version}}}]') is None


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu-1", "gpu-1"), ("node.example.com", "node.example.com"), ("a" * 253, "a" * 253), ("a" * 254, None),
    ("", None), (None, None), ("Node", None), ("-a", None), ("a..b", None), ("a b", None), ("gpu-1\n", None),
])
def test_assumed_node_is_a_bounded_node_name(text: str | None, expected: str | None) -> None:
    assert protocol.parse_assumed_node(text) == expected


@pytest.mark.parametrize(("phase", "terminal"), [
    ("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False), ("Unknown", False),
    ("", False), ("failed", False), (None, False), (["Failed"], False), ({"Failed": 1}, False)])
def test_only_succeeded_and_failed_pods_have_finished(phase: object, terminal: bool) -> None:
    assert protocol.pod_phase_terminal(phase) is terminal


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("gpu-a", None, "gpu-a"),
        ("gpu-a", 5, "gpu-a"),
        ("gpu-a", 4, "gpu-"),
        ("gpu-a", 0, ""),
        ("gpu-a", -3, ""),
        ("", None, ""),
        ("a\x1b[31mb\nc\td\re", None, "a [31mb c d e"),
        ("\x1b[2J\n", None, "[2J"),
        ("  padded  ", None, "padded"),
        ("ab\ncd", 3, "ab"),
        ("ab\ncd", 4, "ab c"),
        ("x\x7f\x85\u2028\u202e\u200by", None, "x" + " " * 5 + "y"),
        ("Tesla T4 \u00e9\u4e2d", None, "Tesla T4 \u00e9\u4e2d"),
    ],
    ids=repr,
)
def test_printable_cuts_then_blanks_what_a_terminal_would_act_on(text: str, limit: int | None, expected: str) -> None:
    """DEL, C1 (NEL), line/paragraph separators, bidi overrides and zero-width characters are spaces too;
    printable non-ASCII passes; the cut comes first, so the result is never longer than ``limit``."""
    assert protocol.printable(text, limit) == expected


@settings(max_examples=300)
@given(st.text(), st.one_of(st.none(), st.integers(-5, 300)))
def test_printable_is_printable_bounded_and_stable(text: str, limit: int | None) -> None:
    shown = protocol.printable(text, limit)
    assert shown.isprintable() and shown == shown.strip()
    assert len(shown) <= (len(text) if limit is None else max(limit, 0))
    assert protocol.printable(shown) == shown, "applying it twice changes nothing"


@pytest.mark.parametrize("names", [-1, 0, 1, 2, protocol.SENTENCE_NAMES])
def test_shown_text_is_printable_with_the_apis_longest_name_for_each_name(names: int) -> None:
    """A real name (253 characters at most) is never cut; a hand-made one is, at 253 per name the text holds."""
    room = protocol.MAX_SHOWN_NAME * max(names, 1)
    assert protocol.shown_text("a" * 253, names) == "a" * 253
    assert protocol.shown_text("a" * (room + 1), names) == "a" * (room - 1) + "…", "a cut one says so"
    assert protocol.shown_text("\x1b[2J" + "b" * 10**6, names) == ("[2J" + "b" * 10**6)[: room - 2] + "…"


@pytest.mark.parametrize(
    ("error", "limit", "expected"),
    [
        (ValueError("bad quantity\n  at line 2"), 200, "bad quantity"),
        (ValueError("x" * 500), 120, "x" * 120),
        (ValueError(""), 200, "ValueError"),
        (KeyError(), 200, "KeyError"),
        (ValueError("\n"), 200, "ValueError"),
        (ValueError(" \t \u2028 "), 200, "ValueError"),
        (ValueError("\n  in <file>, line 3\nmore"), 200, "in <file>, line 3"),
        (ValueError("first  \r\nsecond"), 200, "first"),
        (RecursionError("maximum recursion depth exceeded"), 200, "nested too deeply"),
        (RecursionError("maximum recursion depth exceeded"), 6, "nested"),
        (TypeError(""), 4, "Type"),
    ],
    ids=repr,
)
def test_error_reason_is_the_first_line_that_says_something(error: BaseException, limit: int, expected: str) -> None:
    """An empty, blank or newline-first message neither raises IndexError nor quotes nothing."""
    assert protocol.error_reason(error, limit) == expected


def test_error_reason_quotes_a_decoders_own_first_line() -> None:
    """msgspec's and PyYAML's messages: the first line as they write it; YAML's context lines left out."""
    import msgspec
    import yaml

    with pytest.raises(msgspec.ValidationError) as invalid:
        msgspec.json.decode(b'{"a": "x"}', type=dict[str, int])
    assert protocol.error_reason(invalid.value) == "Expected `int`, got `str` - at `$[...]`"
    with pytest.raises(yaml.YAMLError) as unparsed:
        yaml.safe_load("a: [b")
    assert protocol.error_reason(unparsed.value) == "while parsing a flow sequence"
    with pytest.raises(RecursionError) as deep:
        msgspec.json.decode(b"[" * 100_000)
    assert protocol.error_reason(deep.value) == "nested too deeply"


@settings(max_examples=300)
@given(st.text(), st.integers(1, 300))
def test_error_reason_is_one_bounded_line_and_keeps_a_plain_first_line(message: str, limit: int) -> None:
    reason = protocol.error_reason(ValueError(message), limit)
    assert reason and len(reason) <= limit and len(reason.splitlines()) == 1 and reason == reason.strip()
    first = message.splitlines()[0] if message else ""
    if first and first == first.strip():
        assert reason == first[:limit].rstrip(), "the old `str(exc).splitlines()[0][:N]` for a plain first line"
