"""Naming an object that does not fit its type, so it can be skipped without hiding the others.

The API server's schema guarantees well-formed objects, but an aggregated API, a broken admission
webhook, or a hand-edited etcd can serve an object whose fields have the wrong JSON type (an
annotation value that is an object, say). `describe` names such an object by what can still be read
(its key and resourceVersion) as an `Undecodable`, for watch events and for the items
`decode_page` leaves out of a list page.

This module decodes only; what to do with an `Undecodable` is the caller's policy (the informer
keeps the last good copy of the object and reports it, see `kube.informer`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from kubectl_gpushare.kube.types import RAW_LIST_DECODER, ItemT, Kind, ObjectList


class Undecodable(msgspec.Struct, frozen=True):
    """An object that did not decode as its kind.

    Attributes:
        kind: the plural (``pods``).
        key: ``namespace/name`` (``name`` for cluster-scoped objects), or "" if even that is unreadable.
        resource_version: the object's resourceVersion, or "".
        error: why it did not decode, one line.
    """

    kind: str
    key: str
    resource_version: str
    error: str


class _Meta(msgspec.Struct, frozen=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class _Envelope(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)


def describe(kind: Kind[ItemT], raw: bytes | msgspec.Raw, error: Exception) -> Undecodable:
    """An `Undecodable` for one object, with its key and version when those fields can be read."""
    try:
        meta = _ENVELOPE.decode(raw).metadata
    except (msgspec.DecodeError, RecursionError):
        meta = _Meta()
    key = f"{meta.namespace}/{meta.name}" if meta.namespace and meta.name else meta.name
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    return Undecodable(kind.plural, key, meta.resource_version, message)


def skipped(kind: Kind[Any], bad: Undecodable) -> str:
    """The line that says an object was left out because it does not decode (the views' warning)."""
    noun = kind.kind.lower()
    what = f"{noun} {bad.key[:253]}" if bad.key else f"a {noun} with unreadable metadata"
    return f"{what}: cannot be decoded ({bad.error[:200]}); skipped"


def decode_page(
    kind: Kind[ItemT],
    data: bytes,
    on_skip: Callable[[str], None],
    on_undecodable: Callable[[Undecodable], object] | None = None,
) -> ObjectList[ItemT]:
    """Decode one list page, skipping (and reporting) the items that do not decode.

    ``on_skip`` gets one line per skipped item; ``on_undecodable``, if given, gets its `Undecodable`
    (key and resourceVersion), for callers that track objects.

    The whole page is decoded at once (msgspec's fast path); only when that fails is it decoded item
    by item, so one malformed object never hides the rest of the list from any face.

    Raises:
        msgspec.DecodeError: the page itself is not a list (bad JSON, no ``items`` array).
    """
    try:
        return kind.list_decoder.decode(data)
    except msgspec.ValidationError:
        pass
    raw = RAW_LIST_DECODER.decode(data)
    items: list[ItemT] = []
    for item in raw.items:
        try:
            items.append(kind.item_decoder.decode(item))
        except msgspec.ValidationError as exc:
            bad = describe(kind, item, exc)
            on_skip(skipped(kind, bad))
            if on_undecodable is not None:
                on_undecodable(bad)
    return ObjectList(metadata=raw.metadata, items=tuple(items))


__all__ = ["Undecodable", "decode_page", "describe", "skipped"]
