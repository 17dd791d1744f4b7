"""Kubernetes label selectors: the one grammar every part of the package parses and matches.

``kubectl inspect gpushare -l``, ``kubectl gpushare fit -l`` and the sandbox's ``labelSelector``
query parameter all read selectors through `parse_label_selector`, so a selector means the same
thing against a live cluster, against ``--from-file`` and inside the sandbox. The grammar is
``k8s.io/apimachinery``'s: equality (``k=v``, ``k==v``, ``k!=v``), sets (``k in (a,b)``,
``k notin (a,b)``), existence (``k``, ``!k``) and integer comparison (``k>n``, ``k<n``), joined by
commas. Keys and values are checked as the API server checks them.

The requirements it builds are `node_affinity.Requirement`, the ones node selectors (pods' affinity,
ResourceSlices', allocations') match with, so both grammars evaluate a requirement by one rule.

Pure and linear in the input's length: no I/O, and no regular expression runs on more than a
length-checked key or value. The only exception any input can raise is `SelectorError` (a
`ValueError`) with a one-line message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from kubectl_gpushare.node_affinity import MAX_NAME, int64_text, valid_label_key, valid_label_value
from kubectl_gpushare.node_affinity import Requirement as Requirement

_SPECIAL: Final = ("!=", "==", "=", "!", ">", "<", "(", ")", ",")
_SPECIAL_CHARS: Final = frozenset("!=><(),")


API_OPERATORS: Final = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
"""``metav1.LabelSelector`` matchExpressions operators, as this grammar writes them."""


class SelectorError(ValueError):
    """A selector that does not parse; the message is the one-line reason."""


def _shown(text: str) -> str:
    """Input quoted in an error message, cut short so a huge selector gives a short line."""
    return text if len(text) <= MAX_NAME else text[:MAX_NAME] + "..."


LabelSelector = tuple[Requirement, ...]
"""Requirements that must all hold; the empty tuple matches every label map."""


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char.isspace():
            i += 1
            continue
        if char in _SPECIAL_CHARS:
            symbol = text[i : i + 2] if text[i : i + 2] in ("!=", "==") else char
            tokens.append(symbol)
            i += len(symbol)
            continue
        start = i
        while i < end and not text[i].isspace() and text[i] not in _SPECIAL_CHARS:
            i += 1
        tokens.append(text[start:i])
    return tokens


def _check_key(key: str) -> str:
    if key in _SPECIAL or key == "":
        raise SelectorError(f"unable to parse requirement: found '{_shown(key)}', expected: identifier")
    if not valid_label_key(key):
        raise SelectorError(f'unable to parse requirement: invalid label key "{_shown(key)}"')
    return key


def _check_value(value: str) -> str:
    if not valid_label_value(value):
        raise SelectorError(f'unable to parse requirement: invalid label value: "{_shown(value)}"')
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
            raise SelectorError(f"found '{_shown(item)}', expected: ',' or ')'")
        else:
            current = _check_value(item)
    values.append(current)
    return values


def _bound(text: str) -> str:
    if not int64_text(text):
        raise SelectorError(
            f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: '{_shown(text)}'"
        )
    return _check_value(text)  # labels.NewRequirement checks every value as a label value: no negative bound


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector; the empty selector matches everything.

    Args:
        text: e.g. ``"gpushare=true,nvidia.com/gpu.product in (Tesla-T4,A10)"``.

    Returns:
        The requirements, in the order written.

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
            requirements.append(Requirement(_check_key(take() or ""), "!"))
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
                    raise SelectorError(f"found '{_shown(peek() or '')}', expected: '(' after {op}")
                items: list[str] = []
                while (item := take()) != ")":
                    if item is None:
                        raise SelectorError("found '', expected: ')'")
                    items.append(item)
                requirements.append(Requirement(key, op, tuple(_set_values(items, op))))
            elif op in (">", "<"):
                take()
                requirements.append(Requirement(key, "gt" if op == ">" else "lt", (_bound(take() or ""),)))
            else:
                raise SelectorError(f"found '{_shown(op)}', expected: '=', '!=', '==', 'in', notin'")
        after = take()
        if after is None:
            break
        if after != ",":
            raise SelectorError(f"found '{_shown(after)}', expected: ',' or 'end of string'")
    return tuple(requirements)


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
