"""Node order for every view: by name by default, or by how full or free nodes are (``--sort``).

The original printed nodes in Go map order, different on every run; a stable, documented order
is what makes its bytes reproducible. Numeric keys put the most interesting node first (fullest
for ``used``/``percent``, emptiest for ``free``, largest for ``total``), ties broken by name.
Pure; reads only the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Final

from kubectl_gpushare.ledger import Ledger

SORT_KEYS: Final = ("name", "used", "free", "total", "percent")


def _used(ledger: Ledger, name: str) -> int:
    return sum(ledger.used(name).values())


def _ratio(ledger: Ledger, name: str) -> Fraction:
    """The exact used/total ratio (the printed percent is truncated, so 28.9% and 28.1% would tie)."""
    total = ledger.gpu_mem_and_count(name)[0]
    return Fraction(_used(ledger, name), total) if total > 0 else Fraction(0)


_NUMERIC: Final[dict[str, Callable[[Ledger, str], int | Fraction]]] = {
    "used": _used,
    "free": lambda ledger, name: ledger.gpu_mem_and_count(name)[0] - _used(ledger, name),
    "total": lambda ledger, name: ledger.gpu_mem_and_count(name)[0],
    "percent": _ratio,
}


def sort_nodes(ledger: Ledger, names: Sequence[str], key: str = "name") -> list[str]:
    """Node names in display order for a ``--sort`` key (see `SORT_KEYS`).

    Raises:
        ValueError: unknown key.
    """
    if key == "name":
        return sorted(names)
    if key not in _NUMERIC:
        raise ValueError(f"unknown sort key {key!r}; use one of {', '.join(SORT_KEYS)}")
    measure = _NUMERIC[key]
    return sorted(names, key=lambda name: (-measure(ledger, name), name))
