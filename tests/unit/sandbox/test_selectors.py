from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.selectors import SelectorError, check_field_labels, fields_match, parse_field_selector


def _allowed(label: str) -> bool:
    return label in {"metadata.name", "spec.nodeName", "status.phase"}


def test_field_selector_describe_node_shape() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed")
    assert fields_match(selector, {"spec.nodeName": "n1", "status.phase": "Running"})
    assert not fields_match(selector, {"spec.nodeName": "n1", "status.phase": "Failed"})
    assert not fields_match(selector, {"spec.nodeName": "n2", "status.phase": "Running"})


def test_field_selector_double_equals_and_missing_field_is_empty() -> None:
    assert fields_match(parse_field_selector("spec.nodeName=="), {})
    assert not fields_match(parse_field_selector("spec.nodeName!="), {})


def test_field_selector_escaped_comma() -> None:
    selector = parse_field_selector(r"metadata.name=a\,b")
    assert selector == (("metadata.name", True, "a,b"),)


@pytest.mark.parametrize("selector", ["spec.nodeName", "foo=bar,nope", "spec.nodeName=a,nope"])
def test_field_selector_syntax_is_refused_before_any_label_is_looked_at(selector: str) -> None:
    with pytest.raises(SelectorError, match="^invalid selector: .*; can't understand '"):
        parse_field_selector(selector)


def test_field_labels_are_checked_apart_from_the_syntax() -> None:
    selector = parse_field_selector("spec.nodeName=a,foo=bar")
    assert selector == (("spec.nodeName", True, "a"), ("foo", True, "bar"))
    with pytest.raises(SelectorError, match="^field label not supported: foo$"):
        check_field_labels(selector, _allowed)
    check_field_labels(selector[:1], _allowed)
