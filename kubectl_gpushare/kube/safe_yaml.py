"""PyYAML's safe loader, with a tagged value it cannot build refused as ValueError, never KeyError or IndexError.

PyYAML's ``SafeConstructor`` builds an explicitly tagged scalar with plain Python (``constructor.py``,
``construct_yaml_bool``/``_int``/``_float``/``_timestamp``): ``!!bool x`` raises KeyError, an empty ``!!int``
or ``!!float`` IndexError, ``!!int x`` or ``!!timestamp 2024-13-01`` ValueError. Go's sigs.k8s.io/yaml,
which kubectl and kube-apiserver read YAML with, refuses all of them as decode errors. Here they are all one
ValueError, which every reader of hostile YAML (a kubeconfig, a spec, a request body) reports as a value
that cannot be read; nothing ends in a traceback.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import Node

from kubectl_gpushare import protocol


class SafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader`; a tagged scalar its constructor cannot build raises ValueError."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """`yaml.SafeLoader.construct_object`, its KeyError or IndexError on a tagged scalar a ValueError."""
        try:
            return super().construct_object(node, deep)
        except (KeyError, IndexError):
            value = node.value if isinstance(node.value, str) else ""
            raise ValueError(f"{node.tag} value {protocol.printable(value, 64)!r} is not valid") from None


def load(stream: str | bytes | Any) -> Any:
    """`yaml.safe_load` with `SafeLoader`.

    Raises:
        yaml.YAMLError: not YAML.
        ValueError: a value YAML reads but Python cannot hold (``!!bool x``, a 13th month, an empty ``!!int``).
        RecursionError: nested deeper than PyYAML's recursive composer goes.
        UnicodeDecodeError: bytes that are not UTF-8 (or UTF-16 with a byte-order mark).
    """
    return yaml.load(stream, Loader=SafeLoader)  # noqa: S506 - a SafeLoader subclass


__all__ = ["SafeLoader", "load"]
