r"""A faithful port of the parts of Go's ``text/tabwriter`` that the original inspect tool used.

The original writes both views through ``tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)``: minwidth 0,
tabwidth 0, padding 2, pad character space, no flags. Reproducing its bytes, trailing spaces
included, needs its exact rules, which are easy to get subtly wrong:

- text splits into cells at ``\t``; a cell ended by a tab belongs to a column, the text after
  the last tab of a line is a trailing cell that is never padded;
- a column is a run of *consecutive* lines that all have a tab-terminated cell at that index; its
  width is the widest cell in the run (in runes) plus the padding, and runs nest left to right;
- every tab-terminated cell is padded, the last one on a line and empty ones too, so a line that
  ends in ``\t\n`` carries trailing spaces;
- a line without any tab flushes the writer, so such lines split the text into independent
  alignment sections.

This module is pure string processing; it owns no knowledge of what the views print.
"""

from __future__ import annotations

from typing import Final

PADDING: Final = 2


def _format_uniform(lines: list[list[str]], out: list[str]) -> None:
    """A section whose lines all have the same cells: each column is one run over every line.

    The common table (a header and its rows) takes this path, O(cells) with no recursion; its
    bytes equal `_format_section`'s general layout (a test compares the two).
    """
    columns = len(lines[0]) - 1
    widths = [max(len(cells[column]) for cells in lines) + PADDING for column in range(columns)]
    for cells in lines:  # str.ljust pads by code points, as the widths count them
        out.append("".join(map(str.ljust, cells, widths)) + cells[columns] + "\n")


def _format_section(lines: list[list[str]], out: list[str]) -> None:
    """Align one flushed section (lines of cells; the last cell of each line is its trailing cell)."""
    if len(lines) > 1 and len({len(cells) for cells in lines}) == 1:
        _format_uniform(lines, out)
        return
    _format_general(lines, out)


def _format_general(lines: list[list[str]], out: list[str]) -> None:
    """Go's column blocks: a column is a run of consecutive lines that have a cell at its index."""
    _format_block(lines, [], out, 0, len(lines))


def _write_lines(lines: list[list[str]], widths: list[int], out: list[str], start: int, end: int) -> None:
    for index in range(start, end):
        cells = lines[index]
        parts: list[str] = []
        for column, text in enumerate(cells):
            parts.append(text)
            if column < len(widths):
                parts.append(" " * (widths[column] - len(text)))
        parts.append("\n")
        out.append("".join(parts))


def _format_block(lines: list[list[str]], widths: list[int], out: list[str], line0: int, line1: int) -> None:
    """Go's ``Writer.format``: lay out columns right of ``widths`` for lines line0..line1.

    Module-level, not a closure: a recursive nested function is a reference cycle holding the
    section's lines until the cyclic collector runs (5,000 of them in ``-d`` at 5,000 nodes).
    """
    column = len(widths)
    this = line0
    while this < line1:
        if column >= len(lines[this]) - 1:
            this += 1
            continue
        _write_lines(lines, widths, out, line0, this)
        line0 = this
        width = 0
        while this < line1 and column < len(lines[this]) - 1:
            width = max(width, len(lines[this][column]) + PADDING)
            this += 1
        widths.append(width)
        _format_block(lines, widths, out, line0, this)
        widths.pop()
        line0 = this
    _write_lines(lines, widths, out, line0, line1)


def render(text: str) -> str:
    r"""Lay out tab-separated ``text`` exactly as Go's tabwriter (0, 0, 2, ' ', 0) prints it.

    Args:
        text: lines separated by ``\n``, cells by ``\t``. A final line without ``\n`` is kept
            without one, as Go's ``Flush`` does.

    Returns:
        The aligned text; it contains no tab characters.
    """
    out: list[str] = []
    section: list[list[str]] = []
    raw_lines = text.split("\n")
    tail = raw_lines.pop()  # text after the last newline ("" when text ends with one)
    for raw in raw_lines:
        cells = raw.split("\t")
        section.append(cells)
        if len(cells) == 1:
            _format_section(section, out)
            section = []
    if tail:
        section.append(tail.split("\t"))
    if section:
        _format_section(section, out)
        if tail:
            out[-1] = out[-1][:-1]
    return "".join(out)
