from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.selectors import SelectorError, fields_match, parse_field_selector


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
