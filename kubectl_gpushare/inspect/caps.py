"""Summary first, detail capped: the one rule ``fit``, ``doctor`` and ``explain`` cap their text with.

At a thousand nodes an uncapped answer is thousands of lines (``fit`` listed every GPU, ``doctor``
every finding, ``explain`` every node), and the answer itself scrolls away. So, as kube-capacity
and ``kubectl top`` users expect, the text views print their summary first and at most ``--limit``
rows of each detail list, then one line saying how many were left out and how to see them
(``--all``). ``-o json`` is never capped: scripts get everything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import click

DEFAULT_LIMIT: Final = 20
"""Detail rows a text view shows per list unless ``--limit`` or ``--all`` says otherwise."""
MAX_LIMIT: Final = 10_000_000

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def limit_options(function: F) -> F:
    """``--limit N`` and ``--all``, the same on every command that caps its detail."""
    function = click.option(
        "--all", "show_all", is_flag=True, help="Show every detail row (text); -o json always has them all."
    )(function)
    return click.option(
        "--limit",
        type=click.IntRange(0, MAX_LIMIT),
        default=DEFAULT_LIMIT,
        show_default=True,
        metavar="N",
        help="Detail rows per list in the text view (0: no cap, as --all).",
    )(function)


def limit_of(options: dict[str, Any]) -> int | None:
    """The cap the options ask for; None shows everything."""
    if options.get("show_all") or not options.get("limit", DEFAULT_LIMIT):
        return None
    limit: int = options.get("limit", DEFAULT_LIMIT)
    return limit


def capped(rows: Sequence[T], limit: int | None) -> tuple[Sequence[T], int]:
    """The rows to show and how many are left out."""
    if limit is None or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def more_line(hidden: int, what: str, indent: str = "") -> str:
    """The line that stands for the rows left out, saying how to see them."""
    return f"{indent}... {hidden:,} more {what} (--all or --limit N shows them)\n"


def named(names: Sequence[str], most: int = 3) -> str:
    """A few names for a sentence: ``a, b, c`` or ``a, b, c and 997 more``."""
    if len(names) <= most + 1:
        return ", ".join(names)
    return f"{', '.join(names[:most])} and {len(names) - most:,} more"


__all__ = ["DEFAULT_LIMIT", "capped", "limit_of", "limit_options", "more_line", "named"]
