"""Label and field selectors: parsing and matching, as ``k8s.io/apimachinery`` defines them.

Pure functions with no I/O. Label selectors support equality (``k=v``, ``k==v``, ``k!=v``), sets
(``k in (a,b)``, ``k notin (a,b)``), existence (``k``, ``!k``) and ``k>n`` / ``k<n``; field
selectors support ``=``, ``==`` and ``!=`` joined by commas. Parse errors raise `SelectorError`
with a one-line message the server returns as a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SPECIAL = ("!=", "==", "=", "!", ">", "<", "(", ")", ",")


class SelectorError(ValueError):
    """A selector that does not parse; the message is the one-line reason."""


@dataclass(frozen=True)
class Requirement:
    """One label requirement: ``key op values``."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label map satisfies this requirement."""
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            actual = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return actual > bound if self.op == "gt" else actual < bound


LabelSelector = tuple[Requirement, ...]


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
            continue
        for symbol in _SPECIAL:
            if text.startswith(symbol, i):
                tokens.append(symbol)
                i += len(symbol)
                break
        else:
            start = i
            while i < len(text) and not text[i].isspace() and not any(text.startswith(s, i) for s in _SPECIAL):
                i += 1
            tokens.append(text[start:i])
    return tokens


def _check_key(key: str) -> str:
    if key in _SPECIAL or key == "":
        raise SelectorError(f"unable to parse requirement: found '{key}', expected: identifier")
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or len(name) > 63 or not _NAME.match(name):
        raise SelectorError(f'unable to parse requirement: invalid label key "{key}"')
    return key


def _check_value(value: str) -> str:
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise SelectorError(f'unable to parse requirement: invalid label value: "{value}"')
    return value


def _set_values(items: list[str], op: str) -> list[str]:
    if not items:
        raise SelectorError(f"for '{op}' operator, the values set can't be empty")
    values, current = [], ""
    for item in items:
        if item == ",":
            values.append(current)
            current = ""
        elif current:
            raise SelectorError(f"found '{item}', expected: ',' or ')'")
        else:
            current = _check_value(item)
    values.append(current)
    return values


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector; the empty selector matches everything.

    Raises:
        SelectorError: the text is not a valid selector.
    """
    if not text or not text.strip():
        return ()
    tokens = _tokens(text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str | None:
        nonlocal pos
        token = peek()
        pos += 1
        return token

    requirements: list[Requirement] = []
    while True:
        token = take()
        if token is None:
            raise SelectorError("found '', expected: identifier")
        if token == "!":
            key = take() or ""
            requirements.append(Requirement(_check_key(key), "!"))
        else:
            key = _check_key(token)
            op = peek()
            if op is None or op == ",":
                requirements.append(Requirement(key, "exists"))
            elif op in ("=", "==", "!="):
                take()
                value = peek()
                if value is None or value == ",":
                    value = ""
                else:
                    take()
                    if value in _SPECIAL:
                        raise SelectorError(f"found '{value}', expected: identifier for value")
                requirements.append(Requirement(key, "!=" if op == "!=" else "=", (_check_value(value),)))
            elif op in ("in", "notin"):
                take()
                if take() != "(":
                    raise SelectorError(f"found '{peek() or ''}', expected: '(' after {op}")
                items: list[str] = []
                while (item := take()) != ")":
                    if item is None:
                        raise SelectorError("found '', expected: ')'")
                    items.append(item)
                values = _set_values(items, op)
                requirements.append(Requirement(key, op, tuple(values)))
            elif op in (">", "<"):
                take()
                bound = take() or ""
                if not re.fullmatch(r"-?\d+", bound):
                    raise SelectorError(
                        f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: "
                        f"{bound!r}"
                    )
                requirements.append(Requirement(key, "gt" if op == ">" else "lt", (bound,)))
            else:
                raise SelectorError(f"found '{op}', expected: '=', '!=', '==', 'in', notin'")
        after = take()
        if after is None:
            break
        if after != ",":
            raise SelectorError(f"found '{after}', expected: ',' or 'end of string'")
    return tuple(requirements)


def labels_match(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether every requirement of ``selector`` holds for ``labels``."""
    return all(requirement.matches(labels) for requirement in selector)


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


def parse_field_selector(text: str | None, allowed: Callable[[str], bool]) -> FieldSelector:
    """Parse a field selector, refusing field labels the resource does not support.

    Args:
        text: e.g. ``"spec.nodeName=n1,status.phase!=Succeeded"``.
        allowed: says whether a field label is selectable for the resource listed.

    Raises:
        SelectorError: a term has no operator, or names an unsupported field label.
    """
    if not text or not text.strip():
        return ()
    terms: list[tuple[str, bool, str]] = []
    for raw in _split_unescaped(text, ","):
        term = _field_term(raw)
        if term is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
        if not allowed(term[0]):
            raise SelectorError(f"field label not supported: {term[0]}")
        terms.append(term)
    return tuple(terms)


def fields_match(selector: FieldSelector, values: Mapping[str, str]) -> bool:
    """Whether every term of ``selector`` holds for an object's field values."""
    return all((values.get(label, "") == value) is equal for label, equal, value in selector)
