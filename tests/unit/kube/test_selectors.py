"""The one label-selector grammar (kube.selectors): apimachinery's semantics, and no crash on any input."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_gpushare.kube.selectors import SelectorError, labels_match, matcher, parse_label_selector

LABELS = {"app": "web", "tier": "gpu", "gpushare": "true", "rank": "5"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("app in (web,db)", True),
        ("app in (db, cache)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("app notin (web)", False),
        ("app=web,tier=gpu", True),
        ("app=web,tier=cpu", False),
        ("app in (web),!missing,gpushare=true", True),
        ("rank>3", True),
        ("rank<3", False),
        ("missing>3", False),
        ("tier=", False),
        ("tier in ()", False),  # "()" is the one value "" (parseValues)
        ("app in (,web)", True),
    ],
    ids=lambda value: str(value),
)
def test_label_selector_matches_like_apimachinery(selector: str, expected: bool) -> None:
    assert labels_match(parse_label_selector(selector), LABELS) is expected


def test_label_selector_empty_value_matches_empty_label() -> None:
    assert labels_match(parse_label_selector("tier="), {"tier": ""})


def test_label_selector_prefixed_keys() -> None:
    selector = parse_label_selector("nvidia.com/gpu.product=Tesla-T4")
    assert labels_match(selector, {"nvidia.com/gpu.product": "Tesla-T4"})


@pytest.mark.parametrize(
    "selector",
    [
        "=web",
        "app in web",
        "app in (web",
        "app=web,",
        "a b",
        "app=we b",
        "-bad=x",
        "app>x",
        "Bad_Prefix/x=y",
        "app=" + "v" * 64,
        "rank>" + "9" * 40,
        "rank>-5",  # labels.NewRequirement: a bound is a label value too, which cannot start with "-"
        "/rank",  # validation.IsQualifiedName: a prefix, when "/" is written, is not empty
        "rank>\u0663",
        "a=(1",
        "!",
        "app notin",
    ],
)
def test_label_selector_rejects_malformed_input(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(selector)


_KEY_REASON = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
               "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_VALUE_REASON = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                 "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                 "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_INTEGER = "for 'Gt', 'Lt' operators, the value must be an integer"
LABEL_SELECTOR_ERRORS = [
    # k8s.io/apimachinery/pkg/labels/selector.go: Parser.parse, parseRequirement's errors wrapped
    ("a,", "found '', expected: identifier after ','"),
    ("a=b,,c", "found ',', expected: identifier after ','"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("=x", "found '=', expected: !, identifier, or 'end of string'"),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a notin", "unable to parse requirement: found '' expected: '('"),
    ("a in (", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
    ("a in (x,", "unable to parse requirement: found '', expected: ',', or identifier"),
    ("a=(", "unable to parse requirement: found '(', expected: identifier"),
    ("a=!b", "unable to parse requirement: found '!', expected: identifier"),
    # validateLabelKey with no path, NewRequirement's field.ErrorList aggregated
    ("-bad=x", f'unable to parse requirement: <nil>: Invalid value: "-bad": name part {_KEY_REASON}'),
    ("/a", 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'),
    ("a/b/c", f'unable to parse requirement: <nil>: Invalid value: "a/b/c": a valid label key {_KEY_REASON} with '
              "an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
    ("\v", f'unable to parse requirement: <nil>: Invalid value: "\\v": name part {_KEY_REASON}'),
    ("a=-x", f'unable to parse requirement: values[0][a]: Invalid value: "-x": {_VALUE_REASON}'),
    ("a>x", f'unable to parse requirement: values[0]: Invalid value: "x": {_INTEGER}'),
    ("a>", f'unable to parse requirement: values[0]: Invalid value: "": {_INTEGER}'),
    ("a>-x", f'unable to parse requirement: [values[0]: Invalid value: "-x": {_INTEGER}, '
             f'values[0][a]: Invalid value: "-x": {_VALUE_REASON}]'),
    ("a in (z,-y)", f'unable to parse requirement: values[0][a]: Invalid value: "-y": {_VALUE_REASON}'),  # sorted
]
"""(selector, labels.Parse's error), one for each error path the parser can reach."""


@pytest.mark.parametrize(("selector", "message"), LABEL_SELECTOR_ERRORS)
def test_label_selector_errors_are_labels_parses(selector: str, message: str) -> None:
    with pytest.raises(SelectorError) as refused:
        parse_label_selector(selector)
    assert str(refused.value) == message


def test_gt_and_lt_read_any_number_of_leading_zeros_as_parse_int_does() -> None:
    # strconv.ParseInt (src/strconv/atoi.go) skips leading zeros in its digit loop: only the value's
    # range counts, so a bound or a label of 20 digits and more can still be a small integer.
    zeros = "0" * 30
    assert matcher(f"rank>{zeros}4")(LABELS)
    assert not matcher(f"rank<{zeros}5")(LABELS)
    assert matcher("rank<9")({"rank": zeros + "8"})
    # A huge bound is only too long a label value, not "not an integer", and never a ValueError of int().
    with pytest.raises(SelectorError) as refused:
        parse_label_selector("rank>" + "0" * 100_000 + "1")
    assert "must be no more than 63 bytes" in str(refused.value)
    assert "must be an integer" not in str(refused.value)
    hostile = {"rank": "0" * 100_000 + "1"}  # a label from a file, as ParseInt reads it: 1, and no int() of it all
    assert matcher("rank<9")(hostile)
    assert not matcher("rank>1")(hostile)


def test_bytes_that_are_not_utf8_count_one_byte_each_as_go_counts_them() -> None:
    # Python hands argv's bytes that are not UTF-8 over as surrogate escapes (os.fsdecode); Go's
    # len() counts each as the one byte it is, so 30 of them are no more than 63 bytes.
    escaped = os.fsdecode(b"\xff" * 30)
    for selector in (f"k={escaped}", escaped):
        with pytest.raises(SelectorError) as refused:
            parse_label_selector(selector)
        assert "no more than 63 bytes" not in str(refused.value)
        assert "\\xff" * 30 in str(refused.value)  # quoted as Go's %q quotes those bytes
    with pytest.raises(SelectorError, match="must be no more than 63 bytes"):
        parse_label_selector("k=" + os.fsdecode(b"\xff" * 64))


def test_a_bad_values_path_names_its_valid_key_whole() -> None:
    # validateLabelValue: field.Invalid(path.Key(k), ...); the key passed IsLabelKey first, so it is at
    # most 253 + 1 + 63 bytes and upstream names it whole: only the echoed bad input is cut.
    key = "a" * 200 + ".example.com/" + "n" * 63
    with pytest.raises(SelectorError) as refused:
        parse_label_selector(f"{key}=-x")
    assert str(refused.value).startswith(f'unable to parse requirement: values[0][{key}]: Invalid value: "-x": ')


def test_a_sets_many_bad_values_are_counted_past_the_third_so_the_message_stays_short() -> None:
    three = (f'values[0][k]: Invalid value: "-a0": {_VALUE_REASON}, '
             f'values[1][k]: Invalid value: "-a1": {_VALUE_REASON}, ')
    with pytest.raises(SelectorError) as refused:
        parse_label_selector("k in (-a0,-a1,-a2)")
    assert str(refused.value) == (f"unable to parse requirement: [{three}"
                                  f'values[2][k]: Invalid value: "-a2": {_VALUE_REASON}]')
    with pytest.raises(SelectorError) as refused:
        parse_label_selector("k in (" + ",".join(f"-a{i}" for i in range(10_000)) + ")")
    message = str(refused.value)
    assert message.startswith(f"unable to parse requirement: [{three}") and message.endswith(", and 9997 more]")
    assert len(message) < 1200


def test_matcher_is_the_parsed_selector() -> None:
    assert matcher("app in (web),rank<6")(LABELS)
    assert not matcher("app in (web),rank<5")(LABELS)
    assert matcher(None)({})


def test_comparison_ignores_non_integer_and_huge_label_values() -> None:
    selector = parse_label_selector("rank>3")
    assert not labels_match(selector, {"rank": "x"})
    assert not labels_match(selector, {"rank": "9" * 5000})


# Text built from the grammar's own pieces finds more edge cases than uniform noise.
_PIECES = st.sampled_from(
    ["a", "app", "web", "nvidia.com/gpu", "-", ".", "_", "/", "=", "==", "!=", "!", ">", "<", "(", ")", ",", " ",
     "in", "notin", "3", "-7", "\t", "\u0663", "é"]
)
_SELECTOR_TEXT = st.one_of(st.text(max_size=80), st.lists(_PIECES, max_size=40).map("".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_SELECTOR_TEXT, labels=st.dictionaries(st.sampled_from(["a", "app", "rank"]), st.text(max_size=8)))
def test_any_text_parses_or_raises_selector_error_and_matching_never_raises(text: str, labels: dict[str, str]) -> None:
    try:
        selector = parse_label_selector(text)
    except SelectorError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return
    labels_match(selector, labels)
    assert parse_label_selector(",".join(_render(r) for r in selector)) == selector if selector else True


def _render(requirement: object) -> str:
    from kubectl_gpushare.kube.selectors import Requirement

    assert isinstance(requirement, Requirement)
    key, op, values = requirement.key, requirement.op, requirement.values
    if op == "exists":
        return key
    if op == "!":
        return f"!{key}"
    if op in ("in", "notin"):
        return f"{key} {op} ({','.join(values)})"
    symbol = {"gt": ">", "lt": "<"}.get(op, op)
    return f"{key}{symbol}{values[0]}"


@settings(max_examples=30, deadline=None)
@given(unit=_SELECTOR_TEXT.filter(bool), repeat=st.integers(min_value=2_000, max_value=20_000))
def test_long_garbage_is_answered_in_bounded_time(unit: str, repeat: int) -> None:
    text = (unit * (repeat // len(unit) + 1))[:repeat]
    started = time.perf_counter()
    try:
        parse_label_selector(text)
    except SelectorError as exc:
        # labels.Parse's words name a bad key or value with validation's long reasons, echoing at most
        # 63 characters of the input, for at most three errors (a set of bad values counts the rest):
        # under 1 kB each (a 317-byte key in the path, 63 characters %q-quoted, the regex reason).
        assert len(str(exc)) < 4000, "the message must stay one bounded line"
    assert time.perf_counter() - started < 2.0
