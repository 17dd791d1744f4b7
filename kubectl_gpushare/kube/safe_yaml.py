"""PyYAML's safe loader, with a tagged value it cannot build refused as ValueError, never another error type.

PyYAML's ``SafeConstructor`` builds an explicitly tagged scalar with plain Python (``constructor.py``,
``construct_yaml_bool``/``_int``/``_float``/``_timestamp``): ``!!bool x`` raises KeyError, an empty ``!!int``
or ``!!float`` IndexError, ``!!timestamp x`` AttributeError (its pattern's failed match is used as a match),
``!!int x`` or ``!!timestamp 2024-13-01`` ValueError. Go's sigs.k8s.io/yaml,
which kubectl and kube-apiserver read YAML with, refuses all of them as decode errors. Here they are all one
ValueError, which every reader of hostile YAML (a kubeconfig, a spec, a request body) reports as a value
that cannot be read; nothing ends in a traceback.

Aliases are shared objects here, but whoever serializes the result (the sandbox stores a spec's objects as
JSON) writes each one out again: a few hundred bytes of nested aliases ("billion laughs") become gigabytes.
`load` refuses a document whose aliases expand it past `MAX_EXPANDED_NODES` nodes and ten times the nodes
it was composed from, as go-yaml refuses "excessive aliasing"; a document without aliases expands to exactly
its own nodes, so it is never refused, however large.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Final

import yaml
from yaml.nodes import Node

from kubectl_gpushare import protocol

_INT_TAG: Final = "tag:yaml.org,2002:int"

MAX_EXPANDED_NODES: Final = 1_000_000
"""Nodes a document may expand to through aliases (past ten times its distinct nodes) before it is refused."""


class SafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader`; a tagged scalar its constructor cannot build raises ValueError; counts its nodes."""

    composed = 0
    """Nodes composed from the text (an alias is not one: it names a node composed before)."""

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        """`yaml.SafeLoader.compose_node`, counting the nodes that are not aliases."""
        if not self.check_event(yaml.AliasEvent):
            self.composed += 1
        return super().compose_node(parent, index)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """`yaml.SafeLoader.construct_object`, its error on a tagged scalar (not a ValueError) a ValueError.

        An integer past Python's ``int()`` digit limit is ``integer too large (N digits)``: Python's own
        ValueError names ``sys.set_int_max_str_digits()``, advice for a programmer, not for whoever wrote
        the document.
        """
        try:
            value = super().construct_object(node, deep)
        except (AttributeError, KeyError, IndexError):
            value = node.value if isinstance(node.value, str) else ""
            raise ValueError(f"{node.tag} value {protocol.printable(value, 64)!r} is not valid") from None
        except ValueError:
            digits = _too_many_digits(node)
            if digits:
                raise ValueError(f"integer too large ({digits:,} digits)") from None
            raise
        if type(value) is int and node.tag == _INT_TAG and _past_decimal_limit(value):
            # A hex, octal or base-60 integer is read past the limit, but no JSON or text holds it later.
            raise ValueError(f"integer too large (more than {sys.get_int_max_str_digits():,} digits)")
        return value


@functools.cache
def _smallest_past_limit(limit: int) -> int:
    smallest: int = 10**limit
    return smallest


def _past_decimal_limit(value: int) -> bool:
    """Whether ``str(value)`` would refuse ``value``: more decimal digits than `sys.get_int_max_str_digits`."""
    limit = sys.get_int_max_str_digits()
    return bool(limit) and value.bit_length() > 3 * limit and abs(value) >= _smallest_past_limit(limit)


def _too_many_digits(node: Node) -> int:
    """The decimal digits of an integer node past ``int()``'s limit (`sys.get_int_max_str_digits`), else 0."""
    limit = sys.get_int_max_str_digits()
    if node.tag != _INT_TAG or not isinstance(node.value, str) or not limit:
        return 0
    digits = sum(ch in "0123456789" for ch in node.value)
    return digits if digits > limit else 0


def load(stream: str | bytes | Any) -> Any:
    """`yaml.safe_load` with `SafeLoader`.

    Raises:
        yaml.YAMLError: not YAML.
        ValueError: a value YAML reads but Python cannot hold (``!!bool x``, a 13th month, an empty ``!!int``,
            ``!!timestamp x``, a 5,000-digit integer: ``integer too large``), or aliases that expand the
            document past `MAX_EXPANDED_NODES`.
        RecursionError: nested deeper than PyYAML's recursive composer goes.
        UnicodeDecodeError: bytes that are not UTF-8 (or UTF-16 with a byte-order mark).
    """
    loader = SafeLoader(stream)  # what yaml.load does, keeping the loader for its count
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    expanded = _expanded_size(data, {})
    if expanded > MAX_EXPANDED_NODES and expanded > 10 * loader.composed:
        raise ValueError(f"its aliases expand it to {expanded:,} nodes from {loader.composed:,} (excessive aliasing)")
    return data


def _expanded_size(value: Any, sizes: dict[int, int]) -> int:
    """Nodes under ``value`` (itself, keys, values, items) as a serializer writes them, aliases each time.

    ``sizes`` memoizes each distinct container by id, so this is linear in the document.
    """
    if not isinstance(value, dict | list):
        return 1
    known = sizes.get(id(value))
    if known is None:
        children = (*value.keys(), *value.values()) if isinstance(value, dict) else value
        known = sizes[id(value)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return known


__all__ = ["MAX_EXPANDED_NODES", "SafeLoader", "load"]
