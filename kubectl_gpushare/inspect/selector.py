"""Kubernetes label selectors, matched locally (``-l`` with ``--from-file``).

Against a cluster the API server applies ``-l`` itself; offline there is no server, so the same
syntax is evaluated here: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)`` and
``k notin (a,b)``, joined by commas. Pure functions; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Matcher = Callable[[Mapping[str, str]], bool]

_SET = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)\s*$")
_EQ = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)\s*$")


class SelectorError(ValueError):
    """The selector text is not valid label-selector syntax."""


def _split(text: str) -> list[str]:
    """Split at commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _requirement(term: str) -> Matcher:
    if match := _SET.match(term):
        key = match["key"]
        values = {value.strip() for value in match["values"].split(",") if value.strip()}
        if match["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQ.match(term):
        key, value = match["key"], match["value"]
        if match["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS.match(term):
        key = match["key"]
        if match["neg"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"invalid label selector term {term.strip()!r}")


def parse(text: str) -> Matcher:
    """Compile a label selector into a predicate over a label mapping.

    Raises:
        SelectorError: a term is malformed.
    """
    terms = [term for term in _split(text) if term.strip()]
    if not terms and text.strip():
        raise SelectorError(f"invalid label selector {text!r}")
    requirements = [_requirement(term) for term in terms]
    return lambda labels: all(requirement(labels) for requirement in requirements)
