"""Decoding one object at a time, so one object that does not fit its type cannot hide the others.

The API server's schema guarantees well-formed objects, but an aggregated API, a broken admission
webhook, or a hand-edited etcd can serve an object whose fields have the wrong JSON type (a quantity
as a number, say). Decoding a whole list page or watch stream as typed Structs would then fail for
every object. These helpers describe such an object by what can still be read (its key and
resourceVersion) as an `Undecodable`, and decode the rest of a page item by item.

This module decodes only; what to do with an `Undecodable` is the caller's policy (the informer
keeps the last good copy of the object and reports it, see `kube.informer`).
"""

from __future__ import annotations

from typing import Final

import msgspec

from kubectl_gpushare.kube.types import ItemT, Kind, ListMeta


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


class _RawPage(msgspec.Struct, frozen=True):
    metadata: ListMeta = ListMeta()
    items: list[msgspec.Raw] | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_RAW_PAGE: Final = msgspec.json.Decoder(_RawPage)


def describe(kind: Kind[ItemT], raw: bytes | msgspec.Raw, error: Exception) -> Undecodable:
    """An `Undecodable` for one object, with its key and version when those fields can be read."""
    try:
        meta = _ENVELOPE.decode(raw).metadata
    except (msgspec.DecodeError, RecursionError):
        meta = _Meta()
    key = f"{meta.namespace}/{meta.name}" if meta.namespace and meta.name else meta.name
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    return Undecodable(kind.plural, key, meta.resource_version, message)


def decode_page(kind: Kind[ItemT], data: bytes) -> tuple[ListMeta, list[ItemT], list[Undecodable]]:
    """A list page decoded item by item: its metadata, the items that decode, and those that do not.

    Raises:
        msgspec.DecodeError: the page itself (not one of its items) is not a list.
    """
    page = _RAW_PAGE.decode(data)
    good: list[ItemT] = []
    bad: list[Undecodable] = []
    for raw in page.items or ():
        try:
            good.append(kind.item_decoder.decode(raw))
        except (msgspec.DecodeError, RecursionError) as exc:
            bad.append(describe(kind, raw, exc))
    return page.metadata, good, bad


__all__ = ["Undecodable", "decode_page", "describe"]
