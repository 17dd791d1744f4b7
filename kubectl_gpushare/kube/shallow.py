"""A JSON object's or array's top level read without recursion, for values nested deeper than decoders go.

msgspec (like every JSON decoder here) recurses once per nesting level, even to skip a value, and
stops with `RecursionError` near Python's recursion limit (about 1,000 levels). The API accepts
deeper objects: a ResourceClaim's opaque driver parameters may be up to 10 KiB of JSON
(``OpaqueParametersMaxLength``), about 5,000 levels of ``[[[...]]]``, and Go's decoder allows
10,000. One such object must not make a whole list, a watch stream or a file unreadable for every
view, so this module finds a list's ``kind``, ``metadata`` and each item (or a watch event's
``type`` and ``object``) with a flat scan of its tokens; each item is then decoded on its own, and
only the deep one fails.

The scan is a few times slower than msgspec and runs only when msgspec refused the input.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

_TOKENS: Final = re.compile(rb'"(?:[^"\\]|\\.)*+"|"|[\[\]{}:,]', re.DOTALL)
"""A JSON string (escapes included), a lone quote (a string never closed), or a structural character.

The lone quote ends the scan at the first unclosed string: without it every escaped quote after it
would start a new search to the end of the input, quadratic time (seconds for 40 KB).
"""


class ShallowList(msgspec.Struct, frozen=True, gc=False):
    """The top level of a JSON list object: its ``kind``, its ``metadata`` and its items, undecoded."""

    kind: str
    metadata: msgspec.Raw
    items: tuple[msgspec.Raw, ...] | None
    """None where the object has no ``items`` array (a single object, not a list)."""


def _top_level(data: bytes) -> list[tuple[bytes, msgspec.Raw]] | None:
    """(key, value) of each member of a top-level object, or (b"", element) of an array; None if unreadable."""
    text = data.strip()
    obj = text[:1] == b"{"
    if not obj and text[:1] != b"[":
        return None
    found: list[tuple[bytes, msgspec.Raw]] = []
    depth = 0
    begin: int | None = None  # where the current value began (None: before a key, or none)
    key = last = b""

    def close(end: int) -> None:
        value = text[begin:end].strip() if begin is not None else b""
        if value:
            found.append((key, msgspec.Raw(value)))

    for match in _TOKENS.finditer(text):
        token = match.group()
        mark = token[:1]
        if mark == b'"':
            if len(token) == 1:
                return None  # a string that is never closed
            if depth == 1:
                last = token
        elif mark in b"{[":
            depth += 1
            if depth == 1:
                begin = None if obj else match.end()
        elif mark in b"}]":
            depth -= 1
            if depth == 0:
                close(match.start())
                return found if match.end() == len(text) else None
            if depth < 0:
                return None
        elif depth == 1:
            if mark == b":" and obj:
                key, begin = last, match.end()
            elif mark == b",":
                close(match.start())
                begin = None if obj else match.end()
    return None


def members(data: bytes) -> dict[str, msgspec.Raw] | None:
    """A JSON object's members by key (the last of a repeated key), values undecoded; None if not one."""
    found = _top_level(data)
    if found is None or data.strip()[:1] != b"{":
        return None
    result: dict[str, msgspec.Raw] = {}
    for key, value in found:
        try:
            result[msgspec.json.decode(key, type=str)] = value
        except (msgspec.DecodeError, UnicodeDecodeError):  # msgspec raises the latter for non-UTF-8
            return None
    return result


def split_list(data: bytes) -> ShallowList | None:
    """The ``kind``, ``metadata`` and ``items`` of a JSON object, each item's JSON apart; None if not one."""
    found = members(data)
    if found is None:
        return None
    try:
        kind = msgspec.json.decode(found["kind"], type=str) if "kind" in found else ""
    except (msgspec.DecodeError, UnicodeDecodeError):
        kind = ""
    items: tuple[msgspec.Raw, ...] | None = None
    if "items" in found and bytes(found["items"])[:1] == b"[":
        elements = _top_level(bytes(found["items"]))
        if elements is None:
            return None
        items = tuple(value for _, value in elements)
    return ShallowList(kind, found.get("metadata", msgspec.Raw()), items)


__all__ = ["ShallowList", "members", "split_list"]
