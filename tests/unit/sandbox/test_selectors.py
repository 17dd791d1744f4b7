from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.selectors import (
    SelectorError,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)

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
        "app in ()",
        "app=web,",
        "a b",
        "app=we b",
        "-bad=x",
        "app>x",
        "Bad_Prefix/x=y",
        "app=" + "v" * 64,
    ],
)
def test_label_selector_rejects_malformed_input(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(selector)


def _allowed(label: str) -> bool:
    return label in {"metadata.name", "spec.nodeName", "status.phase"}


def test_field_selector_describe_node_shape() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed", _allowed)
    assert fields_match(selector, {"spec.nodeName": "n1", "status.phase": "Running"})
    assert not fields_match(selector, {"spec.nodeName": "n1", "status.phase": "Failed"})
    assert not fields_match(selector, {"spec.nodeName": "n2", "status.phase": "Running"})


def test_field_selector_double_equals_and_missing_field_is_empty() -> None:
    assert fields_match(parse_field_selector("spec.nodeName==", _allowed), {})
    assert not fields_match(parse_field_selector("spec.nodeName!=", _allowed), {})


def test_field_selector_escaped_comma() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b", _allowed)
    assert selector == (("metadata.name", True, "a,b"),)


@pytest.mark.parametrize("selector", ["spec.nodeName", "foo=bar", "spec.nodeName=a,nope"])
def test_field_selector_rejects_unknown_labels_and_missing_operators(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(selector, _allowed)
