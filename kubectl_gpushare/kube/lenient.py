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

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.shallow import members, split_list
from kubectl_gpushare.kube.types import (
    LIST_META_DECODER,
    RAW_LIST_DECODER,
    ItemT,
    Kind,
    ListMeta,
    ObjectList,
    RawList,
)


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
_META_ONLY: Final = msgspec.json.Decoder(_Meta)


def describe(kind: Kind[ItemT], raw: bytes | msgspec.Raw, error: Exception) -> Undecodable:
    """An `Undecodable` for one object, with its key and version when those fields can be read."""
    namespace, name, version = object_meta(raw)
    return Undecodable(kind.plural, key_of(namespace, name), version, protocol.error_reason(error))


def key_of(namespace: object, name: object) -> str:
    """``namespace/name``, or ``name`` (cluster-scoped), as far as they are strings ("" if the name is not).

    `Undecodable.key`'s rule, also for metadata read as plain data (a YAML item's).
    """
    if isinstance(namespace, str) and namespace and isinstance(name, str) and name:
        return f"{namespace}/{name}"
    return name if isinstance(name, str) else ""


def object_meta(raw: bytes | msgspec.Raw) -> tuple[str, str, str]:
    """``(namespace, name, resourceVersion)`` of an object, as far as they can be read ("" where not).

    An object nested past the decoder somewhere has its metadata found by a flat scan (`kube.shallow`).
    """
    try:
        meta = _ENVELOPE.decode(raw).metadata
    except RecursionError:
        found = members(bytes(raw))  # the object's own members: its metadata, never a scan of any items
        try:
            meta = _META_ONLY.decode(found["metadata"]) if found and "metadata" in found else _Meta()
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            meta = _Meta()
    except (msgspec.DecodeError, UnicodeDecodeError):
        meta = _Meta()
    return meta.namespace, meta.name, meta.resource_version


def skipped(kind: Kind[Any], bad: Undecodable) -> str:
    """The line that says an object was left out because it does not decode (the views' warning)."""
    return skipped_as(kind.kind.lower(), bad)


def skipped_as(noun: str, bad: Undecodable) -> str:
    """`skipped` naming the object by ``noun`` (``list item`` where even its kind is unreadable)."""
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
    except (msgspec.ValidationError, RecursionError, UnicodeDecodeError):  # msgspec raises the last for non-UTF-8
        pass
    raw = raw_list(data)
    items: list[ItemT] = []
    for item in raw.items:
        try:
            items.append(kind.item_decoder.decode(item))
        except (msgspec.ValidationError, RecursionError, UnicodeDecodeError) as exc:
            bad = describe(kind, item, exc)
            on_skip(skipped(kind, bad))
            if on_undecodable is not None:
                on_undecodable(bad)
    return ObjectList(metadata=raw.metadata, items=tuple(items))


_META: Final = msgspec.json.Decoder(ListMeta)


def raw_list(data: bytes) -> RawList:
    """A list page's metadata and its items undecoded; an item nested deeper than msgspec goes is split off alone.

    Raises:
        msgspec.DecodeError: the page is not a list object (bad JSON, or no object at all).
    """
    try:
        return RAW_LIST_DECODER.decode(data)
    except RecursionError:
        pass
    found = split_list(data)
    if found is None:
        raise msgspec.DecodeError("nested too deeply")
    try:
        meta = _META.decode(found.metadata) if found.metadata else ListMeta()
    except RecursionError:
        raise msgspec.DecodeError("nested too deeply") from None
    return RawList(metadata=meta, items=found.items or ())


def list_meta(data: bytes) -> ListMeta:
    """A list page's metadata (its continue token), its items skipped, or split off where one is too deep.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: the page is not a list object.
    """
    try:
        return LIST_META_DECODER.decode(data).metadata
    except RecursionError:
        return raw_list(data).metadata


__all__ = [
    "Undecodable", "decode_page", "describe", "key_of", "list_meta", "object_meta", "raw_list", "skipped",
    "skipped_as",
]
