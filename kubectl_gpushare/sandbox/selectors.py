"""Field selectors for the sandbox, plus the label-selector grammar it shares with the CLI.

Label selectors are parsed by `kubectl_gpushare.kube.selectors` (one grammar for the whole package;
re-exported here for the sandbox's routes and store). Field selectors support ``=``, ``==`` and
``!=`` joined by commas, read as ``fields.ParseSelector`` reads them. Parse errors raise
`SelectorError` with a one-line message the server returns as a 400. `decode_list_options` decodes a
request's whole ListOptions (its numbers and both selectors) for the handlers and the authorizer alike.
Pure functions with no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from kubectl_gpushare.kube.go_query import GoQuery, go_text
from kubectl_gpushare.kube.selectors import (
    LabelSelector,
    Requirement,
    SelectorError,
    labels_match,
    parse_label_selector,
)
from kubectl_gpushare.sandbox import errors

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "ListOptions",
    "Requirement",
    "SelectorError",
    "convert_field_labels",
    "decode_list_options",
    "fields_match",
    "labels_match",
    "parse_field_selector",
    "parse_label_selector",
]

FieldSelector = tuple[tuple[str, bool, str], ...]
"""(field label, equal?, value) terms, all of which must hold."""


_OPERATORS: Final = ("!=", "==", "=")
"""``termOperators``, in the order ``splitTerm`` tries them at each position (``==`` before ``=``)."""


def _split_terms(text: str) -> list[str]:
    """``splitTerms``: the terms between unescaped commas, each with its backslashes kept."""
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``splitTerm``: (field label, operator, raw value) at the first position any operator starts."""
    for index in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, index):
                return term[:index], op, term[index + len(op) :]
    return None


def _unescape_value(raw: str) -> str:
    """``UnescapeValue``: an escaped backslash, comma or ``=`` is literal; another escape or a bare ``=`` is refused."""
    value: list[str] = []
    escaped = False
    for char in raw:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            value.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":  # Go prints the rune with %v: its number
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            value.append(char)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(value)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a field selector's syntax as ``fields.ParseSelector`` does in the ListOptions conversion.

    k8s.io/apimachinery/pkg/fields/selector.go ``parseSelector``: the terms are sorted (as Go sorts
    strings, by bytes, which for valid UTF-8 is code point order), empty ones skipped, and the first
    bad one in that order is the error. The label is not trimmed: `` a=b`` selects on the label
    `` a``. Which field labels a resource supports is a later step (`convert_field_labels`):
    kube-apiserver's handlers run it after ``ValidateListOptions``, so a syntax error and an
    unsupported label are answered at different points.

    Args:
        text: e.g. ``"spec.nodeName=n1,status.phase!=Succeeded"``.

    Raises:
        SelectorError: a term has no operator, or its value an unescaped ``=`` or a bad escape.
    """
    if not text:
        return ()
    terms: list[tuple[str, bool, str]] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        label, op, raw = split
        terms.append((label, op != "!=", _unescape_value(raw)))
    return tuple(terms)


def convert_field_labels(
    selector: FieldSelector, refuse: Callable[[str], str | None], convert: Callable[[str], str]
) -> FieldSelector:
    """The selector as the resource's conversion returns it; refuse the first field label it does not support.

    The handlers' ``FieldSelector.Transform`` through ``ConvertFieldLabel`` (k8s.io/apiserver/pkg/
    endpoints/handlers/get.go ``ListResource``, delete.go ``DeleteCollection``), in the selector's
    sorted term order: each label is refused or replaced by the one the conversion returns (the
    value is kept), and the store selects on that one.

    Args:
        selector: the parsed selector.
        refuse: the kind's words for a label it does not take, None for one it does
            (`resources.Resource.refuse_field_label`).
        convert: the label a taken one selects on (`resources.Resource.convert_field_label`).

    Raises:
        SelectorError: the first refusal.
    """
    converted: list[tuple[str, bool, str]] = []
    for label, equal, value in selector:
        refusal = refuse(label)
        if refusal is not None:
            raise SelectorError(refusal)
        converted.append((convert(label), equal, value))
    return tuple(converted)


def fields_match(selector: FieldSelector, values: Mapping[str, str]) -> bool:
    """Whether every term of ``selector`` holds for an object's field values."""
    return all((values.get(label, "") == value) is equal for label, equal, value in selector)


@dataclass(frozen=True)
class ListOptions:
    """The ListOptions of a list, watch or collection DELETE, as decoded (`decode_list_options`)."""

    timeout_seconds: int | None
    """None: absent."""
    limit: int
    """0: no paging (a negative one too)."""
    labels: LabelSelector
    fields: FieldSelector


def decode_list_options(query: GoQuery) -> ListOptions:
    """``ParameterCodec.DecodeParameters`` of a request's ListOptions, or the 400 it answers first.

    The url.Values conversion (``autoConvert_url_Values_To_v1_ListOptions``, k8s.io/apimachinery/pkg/
    apis/meta/v1/zz_generated.conversion.go) reads ``timeoutSeconds``, then ``limit``, and stops at the
    first ``strconv.ParseInt`` error (`errors.int64_option`); the v1-to-internal conversion
    (``autoConvert_v1_ListOptions_To_internalversion_ListOptions``, apimachinery/pkg/apis/meta/
    internalversion) then parses ``labelSelector`` and ``fieldSelector`` (``labels.Parse``,
    ``fields.ParseSelector``). Nothing refuses a negative ``limit``: the store pages only for one above
    0 (the etcd3 store's ``GetList``: ``paging := opts.Predicate.Limit > 0``), so it lists everything,
    as ``0`` does. The handlers decode (`routes`), and so does ``NewRequestInfo`` to read a selected
    name (`authorization`).

    Raises:
        ApiError: the 400 BadRequest in the failing step's words.
    """
    timeout_seconds = errors.int64_option(query, "timeoutSeconds")
    limit = errors.int64_option(query, "limit") or 0
    try:
        # labels.Parse reads bytes: one that is no UTF-8 is %q-quoted as \xNN and counts as one byte;
        # where its error echoes it raw, Go's JSON writes U+FFFD (`go_text`). It never matches a label:
        # keys and values are ASCII.
        labels = parse_label_selector(query.exact("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"))
    except SelectorError as exc:
        raise errors.bad_request(go_text(str(exc))) from None
    return ListOptions(timeout_seconds, max(limit, 0), labels, fields)
