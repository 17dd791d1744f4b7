"""One open watch stream, decoded line by line into typed events.

The API server sends one JSON object per line: ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|
"ERROR", "object": {...}}``. Each object is decoded with its kind's Struct decoder; an ERROR line
carries a ``Status`` and is raised (410 as `Expired`, so the caller re-lists). An object that does
not decode as its kind arrives as an event whose object is a `kube.lenient.Undecodable` (its key
and version), so one bad object does not end the stream; a line that is not a watch event at all
raises `UndecodableEventError`.

This module owns reading and closing the stream. Opening it (URL, headers, auth) is
`kube.client.Client.watch`; resuming and re-listing is `kube.informer`.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from typing import Generic

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.errors import KubeError, Unreachable, api_error
from kubectl_gpushare.kube.lenient import Undecodable, describe
from kubectl_gpushare.kube.shallow import members
from kubectl_gpushare.kube.types import ItemT, Kind, WatchEvent


class UndecodableEventError(KubeError):
    """A watch line that is not a watch event at all; the stream cannot be trusted past it (re-list)."""


def _raw_event(line: bytes) -> types.RawWatchEvent:
    """A watch line's type and undecoded object; an object nested past the decoder is split off by a flat scan.

    Raises:
        msgspec.DecodeError: the line is not an event.
    """
    try:
        return types.RAW_WATCH_EVENT_DECODER.decode(line)
    except RecursionError:
        found = members(line)
        if found is None or "type" not in found:
            raise msgspec.DecodeError("nested too deeply") from None
        try:
            kind = msgspec.json.decode(found["type"], type=str)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            raise msgspec.DecodeError("an event type that is not a string") from None
        return types.RawWatchEvent(kind, found.get("object", msgspec.Raw(b"null")))


class Watch(Generic[ItemT]):
    """An open watch stream: iterate for typed events; `close` from any thread to stop it.

    The stream ends when the server closes it (``timeoutSeconds``), on `close`, or by raising:
    `Expired` for a 410 ERROR event (re-list), another `ApiError` for other ERROR events,
    `Unreachable` if the connection breaks, `UndecodableEventError` for a line that is not an event.
    """

    def __init__(self, kind: Kind[ItemT], connection: http.client.HTTPConnection, response: http.client.HTTPResponse):
        self.kind: Kind[ItemT] = kind
        self._connection = connection
        self._response = response
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[WatchEvent[ItemT] | WatchEvent[Undecodable]]:
        decoder = self.kind.item_decoder
        try:
            while not self._closed.is_set():
                try:
                    line = self._response.readline()
                except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
                    if self._closed.is_set():
                        return
                    raise Unreachable(f"watch of {self.kind.plural} broke: {protocol.error_reason(exc)}") from None
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                try:
                    raw = _raw_event(line)
                    if raw.type == "ERROR":
                        status = types.STATUS_DECODER.decode(raw.object)
                        raise api_error(status.code or 500, status.reason, status.message)
                except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as exc:
                    raise UndecodableEventError(f"watch of {self.kind.plural}: undecodable event: {exc}") from None
                try:
                    event: WatchEvent[ItemT] | WatchEvent[Undecodable]
                    event = WatchEvent(raw.type, decoder.decode(raw.object))
                except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as exc:
                    event = WatchEvent(raw.type, describe(self.kind, raw.object, exc))
                yield event
        finally:
            self.close()

    def close(self) -> None:
        """Stop the stream; safe to call from another thread and more than once."""
        if self._closed.is_set():
            return
        self._closed.set()
        sock = self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a reader blocked in another thread
            except OSError:
                pass
        self._connection.close()

    def __enter__(self) -> Watch[ItemT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["UndecodableEventError", "Watch"]
