from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpushare.sandbox.resources import BY_PLURAL
from kubectl_gpushare.sandbox.selectors import SelectorError, convert_field_labels, fields_match, parse_field_selector


def _allowed(label: str) -> str | None:
    known = label in {"metadata.name", "spec.nodeName", "status.phase"}
    return None if known else f"field label not supported: {label}"


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
    assert selector == (("foo", True, "bar"), ("spec.nodeName", True, "a"))
    with pytest.raises(SelectorError, match="^field label not supported: foo$"):
        convert_field_labels(selector, _allowed, str)
    assert convert_field_labels(selector[1:], _allowed, str) == selector[1:]


# fields.ParseSelector (k8s.io/apimachinery/pkg/fields/selector.go): sorted terms, empty ones
# skipped, split at the first operator, the value unescaped.
@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("spec.nodeName=a,,metadata.name!=b,", (("metadata.name", False, "b"), ("spec.nodeName", True, "a"))),
        ("a==b", (("a", True, "b"),)),
        (" a=b", ((" a", True, "b"),)),
        (r"a=x\=y\\", (("a", True, "x=y\\"),)),
        ("", ()),
    ],
)
def test_field_selector_is_read_as_fields_parse_selector_reads_it(text: str, terms: tuple[Any, ...]) -> None:
    assert parse_field_selector(text) == terms


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zz,aa", "invalid selector: 'zz,aa'; can't understand 'aa'"),  # the first in sorted order
        ("  ", "invalid selector: '  '; can't understand '  '"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
        ("a=!=b", "invalid field selector: unescaped character in value: 61"),
        (r"a=b\x", r"invalid field selector: invalid escape sequence: \x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_field_selector_errors_are_fields_parse_selectors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as refused:
        parse_field_selector(text)
    assert str(refused.value) == message


def test_pods_spec_host_is_converted_to_spec_node_name_and_its_value_kept() -> None:
    # pkg/apis/core/v1/conversion.go: Pod's field label conversion func, for old v1 clients.
    pods = BY_PLURAL["pods"]
    selector = parse_field_selector("spec.host!=n1,status.podIPs=")
    assert convert_field_labels(selector, pods.refuse_field_label, pods.convert_field_label) == (
        ("spec.nodeName", False, "n1"), ("status.podIPs", True, ""))
    assert pods.field_values({"metadata": {}, "status": {"podIPs": [{"ip": "10.0.0.2"}]}})["status.podIPs"] == ""


def test_field_labels_are_checked_in_sorted_term_order() -> None:
    with pytest.raises(SelectorError, match="^field label not supported: spec.aa$"):
        convert_field_labels(parse_field_selector("spec.zz=x,spec.aa=y"), _allowed, str)
