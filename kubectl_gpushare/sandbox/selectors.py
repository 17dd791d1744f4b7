"""Field selectors for the sandbox, plus the label-selector grammar it shares with the CLI.

Label selectors are parsed by `kubectl_gpushare.kube.selectors` (one grammar for the whole package;
re-exported here for the sandbox's routes and store). Field selectors support ``=``, ``==`` and
``!=`` joined by commas. Parse errors raise `SelectorError` with a one-line message the server
returns as a 400. Pure functions with no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubectl_gpushare.kube.selectors import (
    LabelSelector,
    Requirement,
    SelectorError,
    labels_match,
    parse_label_selector,
)

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "check_field_labels",
    "fields_match",
    "labels_match",
    "parse_field_selector",
    "parse_label_selector",
]

FieldSelector = tuple[tuple[str, bool, str], ...]
"""(field label, equal?, value) terms, all of which must hold."""


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _field_term(raw: str) -> tuple[str, bool, str] | None:
    for op, equal in (("!=", False), ("==", True), ("=", True)):
        index = raw.find(op)
        if index >= 0:
            return raw[:index].strip(), equal, raw[index + len(op) :]
    return None


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a field selector's syntax, as ``fields.ParseSelector`` does in the ListOptions conversion.

    Which field labels a resource supports is a later step (`check_field_labels`): kube-apiserver's
    handlers run it after ``ValidateListOptions``, so a syntax error and an unsupported label are
    answered at different points.

    Args:
        text: e.g. ``"spec.nodeName=n1,status.phase!=Succeeded"``.

    Raises:
        SelectorError: a term has no operator.
    """
    if not text or not text.strip():
        return ()
    terms: list[tuple[str, bool, str]] = []
    for raw in _split_unescaped(text, ","):
        term = _field_term(raw)
        if term is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
        terms.append(term)
    return tuple(terms)


def check_field_labels(selector: FieldSelector, allowed: Callable[[str], bool]) -> None:
    """Refuse the first field label the resource listed does not support.

    The handlers' ``FieldSelector.Transform`` through ``ConvertFieldLabel`` (k8s.io/apiserver/pkg/
    endpoints/handlers/get.go ``ListResource``, delete.go ``DeleteCollection``).

    Raises:
        SelectorError: ``field label not supported: <label>``.
    """
    for label, _equal, _value in selector:
        if not allowed(label):
            raise SelectorError(f"field label not supported: {label}")


def fields_match(selector: FieldSelector, values: Mapping[str, str]) -> bool:
    """Whether every term of ``selector`` holds for an object's field values."""
    return all((values.get(label, "") == value) is equal for label, equal, value in selector)
