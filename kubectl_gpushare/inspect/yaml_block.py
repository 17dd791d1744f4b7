"""Block YAML for the reports' plain data, written directly, byte for byte what PyYAML writes.

PyYAML spends most of ``-o yaml`` building a node graph for each scalar in Python (4x the time of
``-o json`` at 3,000 pods). The reports are only mappings, lists, ints, bools and short strings,
so this module writes them itself, in PyYAML's block layout (``sort_keys=False``, sequences in a
mapping not indented). Quoting is not hand-rolled: a string is written plain only when it is
made of name characters and PyYAML's own resolver reads it back as a string; ``''`` only when it
is also free of anything a single-quoted scalar would escape. Anything else (spaces, non-ASCII,
control characters, empty lists inside lists) makes `dump` return None, and the caller hands the
whole document to PyYAML, so the output never depends on which path wrote it.
"""

from __future__ import annotations

import re
from typing import Final

import yaml
from yaml.resolver import Resolver

Data = dict[str, "Data"] | list["Data"] | str | int | bool | None
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*\Z")
_STR_TAG: Final = "tag:yaml.org,2002:str"
_resolver: Final = Resolver()
_TYPED_FIRST: Final = frozenset(_resolver.yaml_implicit_resolvers)
"""First characters of PyYAML's implicit types (int, bool, null, timestamp...): a name starting with
any other character resolves to a string without running the resolver (most pod names and uids)."""
_WILDCARD: Final = None in _TYPED_FIRST or bool(_resolver.yaml_path_resolvers)


class _UnsupportedError(Exception):
    """A value outside the shapes written here; PyYAML writes the document instead."""


def _scalar(value: Data, cache: dict[str, str]) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise _UnsupportedError
    written = cache.get(value)
    if written is None:
        if value == "":
            written = "''"
        elif _NAME.match(value) is None:
            raise _UnsupportedError
        elif (value[0] not in _TYPED_FIRST and not _WILDCARD) or _resolver.resolve(  # type: ignore[no-untyped-call]
            yaml.ScalarNode, value, (True, False)
        ) == _STR_TAG:
            written = value
        else:
            written = f"'{value}'"  # looks like a number, bool, null or date: PyYAML single-quotes it
        cache[value] = written
    return written


def _mapping(data: dict[str, Data], indent: int, first: str, out: list[str], cache: dict[str, str]) -> None:
    """Keys at ``indent``; the first key follows ``first`` (``"- "`` in a list) on the current line.

    Hot loop (one pass per pod and GPU): exact-type dispatch, and strings looked up in ``cache``
    before `_scalar` decides how to write them.
    """
    pad = " " * indent
    lead = first
    for key, value in data.items():
        if cache.get(key) != key and _scalar(key, cache) != key:  # a key PyYAML would quote (or not a string)
            raise _UnsupportedError
        kind = type(value)
        if kind is str:
            written = cache.get(value)  # type: ignore[arg-type]
            out.append(f"{lead}{key}: {_scalar(value, cache) if written is None else written}\n")
        elif kind is int:
            out.append(f"{lead}{key}: {value}\n")
        elif kind is dict and value:
            out.append(f"{lead}{key}:\n")
            _mapping(value, indent + 2, " " * (indent + 2), out, cache)  # type: ignore[arg-type]
        elif kind is list and value:
            out.append(f"{lead}{key}:\n")
            _sequence(value, indent, out, cache)  # type: ignore[arg-type]
        elif kind is dict:
            out.append(f"{lead}{key}: {{}}\n")
        elif kind is list:
            out.append(f"{lead}{key}: []\n")
        else:
            out.append(f"{lead}{key}: {_scalar(value, cache)}\n")
        lead = pad


def _sequence(data: list[Data], indent: int, out: list[str], cache: dict[str, str]) -> None:
    """Items at ``indent`` (PyYAML does not indent a sequence inside a mapping)."""
    pad = " " * indent
    for item in data:
        if isinstance(item, dict) and item:
            _mapping(item, indent + 2, f"{pad}- ", out, cache)
        elif isinstance(item, (dict, list)):
            raise _UnsupportedError
        else:
            out.append(f"{pad}- {_scalar(item, cache)}\n")


def dump(data: dict[str, Data]) -> str | None:
    """``data`` as PyYAML's ``dump(sort_keys=False)`` writes it, or None when it needs PyYAML."""
    if not data:
        return None
    out: list[str] = []
    try:
        _mapping(data, 0, "", out, {})
    except _UnsupportedError:
        return None
    return "".join(out)
