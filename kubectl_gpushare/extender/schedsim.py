r"""A stand-in for kube-scheduler's HTTPExtender client, for tests, benchmarks and the demo.

It calls an extender the way ``pkg/scheduler/extender.go`` does:

- URLs are ``urlPrefix`` with trailing slashes removed, ``/``, and the verb, parsed and written
  on the request line as Go's net/url and net/http do (`go_url`: in the path ``"<>\^`{|}``,
  spaces and bytes beyond ASCII percent-encoded; a query, after a ``?`` in the verb, written as
  it is, spaces and UTF-8 bytes raw, so that an extender reading the request line as Go's server
  does answers 400 to a space; a ``#`` ending the path and never sent; a bad ``%`` escape or a
  control character an error of the call);
- every call is a POST of JSON with the Go field names, on a keep-alive connection, with a
  timeout (``httpTimeout``, 5 s by default);
- any status other than 200 is an error *without reading the body*; a reply that does not decode
  as the verb's result type (``ExtenderFilterResult``, ``HostPriorityList``,
  ``ExtenderBindingResult``: a score past int64, a list for an object) is an error (``<verb>:
  undecodable reply: ...``), and ``null`` is the type's zero value; the reply is read as Go's
  ``encoding/json`` reads it (`_go_decode`: keys case-insensitively, a ``null`` field at its zero
  value, what follows the first JSON value ignored, bytes that are not UTF-8 as U+FFFD); a
  non-empty ``Error`` is an error with that text;
- filter sends ``NodeNames`` when ``nodeCacheCapable`` and full Node objects otherwise; it uses the
  reply's ``NodeNames`` only when cache capable and not null, else ``Nodes.items``, and a returned
  node that was not a candidate is an error; a reply with neither passes no node;
- prioritize scores are multiplied by ``weight`` and by MaxNodeScore/MaxExtenderPriority (10);
- bind sends PodName, PodNamespace, PodUID and Node.

Connections follow Go's ``net/http.Transport`` (src/net/http/transport.go), which kube-scheduler's
client uses: a kept connection the server closed while idle is not reused (``persistConn.readLoop``
peeks while idle and closes the connection on EOF, an error or any unsolicited byte), and a failed
POST is re-sent on a new connection only when the connection was reused and not one byte of the
request was written (``shouldRetryRequest``: ``nothingWrittenError``). A request whose bytes went
out is never re-sent, since the extender may be acting on it (a bind twice); a server that closes
such a connection without answering is an error, and so is a timeout.

Where it differs from kube-scheduler: there is no scheduling framework around it. `schedule_one`
runs one simplified cycle (extender filter, extender prioritize, highest score wins with ties to
the first candidate, extender bind) so that tests can drive real binds through the real wire; it
does not run kube-scheduler's own filter and score plugins, and it has no preemption.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, TypeVar, cast

import msgspec

from kubectl_gpushare.extender import go_url
from kubectl_gpushare.kube.go_format import go_quote

MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10


class ExtenderCallError(Exception):
    """What kube-scheduler would report for a failed extender call."""


@dataclass
class ExtenderConfig:
    """The fields of one ``extenders:`` entry of a KubeSchedulerConfiguration that matter here."""

    url_prefix: str
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    bind_verb: str = "bind"
    weight: int = 1
    node_cache_capable: bool = True
    http_timeout: float = 5.0
    tls_context: ssl.SSLContext | None = None


@dataclass
class FilterOutcome:
    """Filter's answer as the scheduler sees it: passing nodes (objects) and failure reasons."""

    nodes: list[dict[str, Any]]
    failed: dict[str, str] = field(default_factory=dict)
    failed_unresolvable: dict[str, str] = field(default_factory=dict)


# The reply types of kube-scheduler's extender API (k8s.io/kube-scheduler/extender/v1 types.go),
# with their Go field names. A reply that does not decode as its type is the call's error, as
# ``HTTPExtender.send``'s ``json.NewDecoder(resp.Body).Decode(result)`` returns it; a JSON ``null``
# leaves the result at its zero value; keys and nulls as Go reads them (`_go_decode`).
class _ObjectMeta(msgspec.Struct):
    name: str = ""


class _Node(msgspec.Struct):
    metadata: _ObjectMeta = msgspec.field(default_factory=_ObjectMeta)


class _NodeList(msgspec.Struct):
    items: list[_Node] | None = None


class _FilterResult(msgspec.Struct):
    Nodes: _NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] | None = None
    FailedAndUnresolvableNodes: dict[str, str] | None = None
    Error: str = ""


class _HostPriority(msgspec.Struct):
    Host: str = ""
    Score: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] = 0  # int64


class _BindingResult(msgspec.Struct):
    Error: str = ""


_ReplyT = TypeVar("_ReplyT")

_JSON = json.JSONDecoder(parse_constant=lambda name: _refuse(f"invalid character {name!r}"),
                         parse_int=lambda text: int(text) if len(text) <= 40 else float(text))
"""For what msgspec will not read. An integer of more than 40 digits, past int64 wherever it lands, is
read as a float (``int()`` would raise past 4,300 digits): refused in ``Score``, and ignored under a
key naming no field, as Go does."""
_FOLDS_TO_ASCII: Final = {"\u0130": "I", "\u0131": "I", "\u017f": "S", "\u212a": "K"}
"""The non-ASCII runes Go's ``foldName`` folds to an ASCII letter (``unicode.ToUpper(unicode.ToLower(r))``)."""
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _refuse(why: str) -> Any:
    raise ValueError(why)


def _go_decode(payload: bytes, reply: type[_ReplyT]) -> _ReplyT | None:
    """The reply as ``json.NewDecoder(resp.Body).Decode(result)`` reads it into ``reply`` (None: JSON ``null``).

    After Go's src/encoding/json: the first JSON value is read and what follows it is left unread
    (stream.go, ``Decoder.readValue``); bytes that are not UTF-8, and a lone surrogate escape, read as
    U+FFFD (decode.go, ``unquoteBytes``); the rest is `_as_go_reads`. msgspec reads a sound reply,
    Python's decoder the others. A filter reply of 5,000 full Nodes (6.6 MB, ``nodeCacheCapable``
    false) takes about 0.1 s here, where decoding straight into the types took 15 ms but read keys
    only as written and refused every ``null``; with node names (the shipped configuration), 2 ms.

    Raises:
        ValueError: not JSON, or not the type (msgspec's ``ValidationError`` is one).
        RecursionError: nested deeper than the decoders go (Go's stops at 10,000 levels).
    """
    try:
        value = msgspec.json.decode(payload)
    except (msgspec.DecodeError, UnicodeDecodeError):  # trailing bytes, not UTF-8, a lone surrogate, a huge integer
        value, _ = _JSON.raw_decode(payload.decode("utf-8", "replace").lstrip(" \t\r\n"))
    return msgspec.convert(_as_go_reads(value, msgspec.inspect.type_info(reply | None)), reply | None)


def _as_go_reads(value: Any, info: msgspec.inspect.Type) -> Any:
    """``value`` shaped as Go's decoder fills a result of type ``info``, for `msgspec.convert`.

    After src/encoding/json/decode.go: an object's key names its field exactly, else by
    ``foldName`` (case-insensitively; ``object``), and a key naming no field is ignored; ``null``
    sets a pointer, slice or map to nil and leaves any other field as it was (``literalStore``), so
    a list element or map value that is ``null`` is its type's zero value. A value of the wrong type
    is passed on for msgspec to refuse. Where it differs: a key repeated in one object counts once,
    its last value (Go decodes each in turn: a later ``null`` keeps an earlier string, a later object
    merges into an earlier one).
    """
    if isinstance(info, msgspec.inspect.UnionType):  # T | None: a Go pointer, slice or map
        if value is None:
            return None
        info = next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    if value is None:
        return _zero(info)
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(info, msgspec.inspect.StructType) and isinstance(value, dict):
        exact, folded = _field_names(info.cls)
        out: dict[str, Any] = {}
        for key, item in value.items():
            found = exact.get(key) or folded.get(_go_fold(key))
            if found is not None and (item is not None or isinstance(found.type, msgspec.inspect.UnionType)):
                out[found.encode_name] = _as_go_reads(item, found.type)
        return out
    if isinstance(info, msgspec.inspect.DictType) and isinstance(value, dict):
        return {_LONE_SURROGATE.sub("\ufffd", key): _as_go_reads(item, info.value_type) for key, item in value.items()}
    if isinstance(info, msgspec.inspect.ListType) and isinstance(value, list):
        return [_as_go_reads(item, info.item_type) for item in value]
    return value  # the wrong type: msgspec names it


@functools.cache
def _field_names(cls: type[msgspec.Struct]) -> tuple[dict[str, msgspec.inspect.Field],
                                                     dict[str, msgspec.inspect.Field]]:
    """A struct's fields by name, and by Go's folded name (``cachedTypeFields``: byExactName, byFoldedName)."""
    fields = cast(msgspec.inspect.StructType, msgspec.inspect.type_info(cls)).fields
    return {f.encode_name: f for f in fields}, {_go_fold(f.encode_name): f for f in fields}


def _zero(info: msgspec.inspect.Type) -> Any:
    """Go's zero value of a type, as `msgspec.convert` reads it."""
    if isinstance(info, msgspec.inspect.StrType):
        return ""
    if isinstance(info, msgspec.inspect.IntType):
        return 0
    return {} if isinstance(info, msgspec.inspect.StructType) else None


def _go_fold(key: str) -> str:
    """Go's ``foldName`` (src/encoding/json/fold.go) where it can meet our ASCII field names."""
    return "".join(_FOLDS_TO_ASCII.get(ch, ch.upper() if ch.isascii() else ch) for ch in key)


def _name(node: dict[str, Any]) -> str:
    return str(node["metadata"]["name"])


def _server_closed(sock: socket.socket) -> bool:
    """Whether a kept, idle connection must not be reused.

    Go's ``persistConn.readLoop`` peeks while a connection is idle and closes it on EOF, on a read
    error, or on any unsolicited byte (``readLoopPeekFailLocked``), so the next request dials anew.
    Here the same peek is done once, without blocking, just before reuse. Over TLS, bytes on the
    raw socket may be TLS 1.3 session tickets, which the TLS layer consumes without any application
    data (as Go's ``tls.Conn.Read`` does); only a read through the TLS layer tells, and a byte it
    returns would be unsolicited, so the connection is dropped either way.
    """
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        if isinstance(sock, ssl.SSLSocket):
            sock.recv(1)
        else:
            sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, ssl.SSLWantReadError):
        return False  # nothing to read: the connection is alive and idle
    except OSError:
        return True
    finally:
        sock.settimeout(timeout)
    return True  # b"" is EOF; a byte is an unsolicited reply


class _Connection(http.client.HTTPConnection):
    """An HTTP connection that knows how many bytes of the current request were written (``persistConn.nwrite``)."""

    written = 0
    """Bytes of the current request written so far (the caller resets it before each request)."""

    def send(self, data: Any) -> None:
        """Send bytes as ``HTTPConnection.send`` does, counting them."""
        if self.sock is None:
            self.connect()  # http.client's auto_open
        sock = self.sock
        assert sock is not None
        view = memoryview(data).cast("B")
        while view:
            sent = sock.send(view)
            self.written += sent
            view = view[sent:]

    def _validate_path(self, url: str) -> None:
        """Accept the request target as net/http writes it: a space in a query included.

        ``Request.write`` (src/net/http/request.go) writes ``URL.RequestURI()`` as it is and errs only
        on a control byte (``stringContainsCTLByte``), which `go_url.parse` has refused already, as
        ``url.Parse`` does first. ``url.Parse`` keeps ``RawQuery`` unchecked, so a space after a ``?``
        in the verb goes out raw, where http.client would refuse it.
        """

    def _encode_request(self, request: str) -> bytes:
        """The request line's bytes as Go writes a string: UTF-8 (a lone surrogate as the byte it stands for).

        http.client writes ASCII only; Go's ``Request.write`` writes the request line with
        ``fmt.Fprintf``, a query's bytes beyond ASCII raw.
        """
        return request.encode("utf-8", "surrogateescape")


class _TLSConnection(_Connection, http.client.HTTPSConnection):
    """An HTTPS connection that knows how many bytes of the current request were written."""


class HTTPExtender:
    """One extender as kube-scheduler calls it; thread-safe (one keep-alive connection per thread)."""

    def __init__(self, config: ExtenderConfig) -> None:
        """Parse the URL prefix once, as kube-scheduler does at start."""
        self.config = config
        url = urllib.parse.urlsplit(config.url_prefix.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"urlPrefix {go_url.without_password(config.url_prefix)!r} is not an http(s) URL")
        self._scheme = url.scheme
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._local = threading.local()

    def url(self, verb: str) -> str:
        """The URL for a verb: ``TrimRight(urlPrefix, "/") + "/" + verb``."""
        return f"{self.config.url_prefix.rstrip('/')}/{verb}"

    def _connection(self) -> tuple[_Connection, bool]:
        """This thread's connection and whether it is a kept one; one the server closed is replaced."""
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.sock is not None:
            if not _server_closed(conn.sock):
                return conn, True
            conn.close()
        if self._scheme == "https":
            context = self.config.tls_context or ssl.create_default_context()
            conn = _TLSConnection(self._host, self._port, timeout=self.config.http_timeout, context=context)
        else:
            conn = _Connection(self._host, self._port, timeout=self.config.http_timeout)
        self._local.conn = conn
        return conn, False

    def _failed(self, conn: http.client.HTTPConnection, url: go_url.GoURL, exc: BaseException) -> ExtenderCallError:
        """A failed call closes its connection; the error names the URL as net/http's ``*url.Error`` does.

        ``url.Error.Error`` (src/net/url/url.go) writes ``"%s %q: %s"``: the URL Go-quoted, so a ``"``
        or a byte that is not UTF-8 in a raw query is escaped.
        """
        conn.close()
        self._local.conn = None
        return ExtenderCallError(f"Post {go_quote(url.shown)}: {exc}")

    def send(self, verb: str, args: dict[str, Any], reply: type[_ReplyT]) -> _ReplyT | None:
        """POST ``args`` to a verb and decode the reply as ``reply`` (None: JSON null); a non-200 status is an error.

        The URL is parsed for each call, as ``http.NewRequest`` parses it: one it refuses (a ``%``
        that escapes nothing, a control character) is that call's error, in net/url's words, unsent.
        """
        try:
            url = go_url.parse(self.url(verb))
        except go_url.URLError as exc:
            raise ExtenderCallError(str(exc)) from None
        body = json.dumps(args).encode()
        while True:
            conn, reused = self._connection()
            conn.written = 0
            try:
                conn.request("POST", url.request_uri, body=body,
                             headers={"Content-Type": "application/json", "Accept": "application/json"})
            except (http.client.HTTPException, OSError) as exc:
                error = self._failed(conn, url, exc)
                # shouldRetryRequest: only a reused connection, only if nothing was written; a
                # timeout is the request's deadline (a cancelled context), never retried.
                if reused and conn.written == 0 and not isinstance(exc, TimeoutError):
                    continue  # the next connection is a new one: at most one retry
                raise error from None
            try:
                response = conn.getresponse()
                payload = response.read()
            except (http.client.HTTPException, OSError) as exc:
                raise self._failed(conn, url, exc) from None  # written: the extender may act on it
            # A reply that ends the connection (Connection: close, HTTP/1.0) leaves conn.sock None.
            if response.status != 200:
                raise ExtenderCallError(f"failed {verb} with extender at URL "
                                        f"{go_url.without_password(self.url(verb))}, code {response.status}")
            try:
                return _go_decode(payload, reply)
            except (ValueError, msgspec.ValidationError, RecursionError) as exc:  # too deep: Go's fails as well
                raise ExtenderCallError(f"{verb}: undecodable reply: {exc}") from None

    def filter(self, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> FilterOutcome:
        """Call filter as ``HTTPExtender.Filter`` does and return what the scheduler keeps."""
        by_name = {_name(node): node for node in nodes}
        if self.config.node_cache_capable:
            args = {"Pod": pod, "Nodes": None, "NodeNames": list(by_name)}
        else:
            args = {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
        result = self.send(self.config.filter_verb, args, _FilterResult) or _FilterResult()
        if result.Error:
            raise ExtenderCallError(result.Error)
        passing: list[dict[str, Any]] = []
        if self.config.node_cache_capable and result.NodeNames is not None:
            names = result.NodeNames
        elif result.Nodes is not None:
            names = [node.metadata.name for node in result.Nodes.items or []]
        else:
            names = []
        for name in names:
            if name not in by_name:
                raise ExtenderCallError(  # extender.go: %q of urlPrefix as configured (less a password), of the name
                    f"extender {go_quote(go_url.without_password(self.config.url_prefix))} claims a filtered node "
                    f"{go_quote(name)} which is not found in the input node list")
            passing.append(by_name[name])
        return FilterOutcome(passing, dict(result.FailedNodes or {}), dict(result.FailedAndUnresolvableNodes or {}))

    def prioritize(self, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, int]:
        """Scores as they enter kube-scheduler's sum: extender score × weight × 10."""
        if self.config.node_cache_capable:
            args = {"Pod": pod, "Nodes": None, "NodeNames": [_name(node) for node in nodes]}
        else:
            args = {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
        result = self.send(self.config.prioritize_verb, args, list[_HostPriority])
        factor = self.config.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        return {entry.Host: entry.Score * factor for entry in result or []}

    def bind(self, pod: dict[str, Any], node: str) -> None:
        """Delegate the Binding to the extender; raises with its message if it failed."""
        meta = pod["metadata"]
        result = self.send(self.config.bind_verb, {  # Go sends a pod's absent uid as its zero value, ""
            "PodName": meta["name"], "PodNamespace": meta.get("namespace", "default"),
            "PodUID": meta.get("uid", ""), "Node": node,
        }, _BindingResult)
        if result is not None and result.Error:
            raise ExtenderCallError(result.Error)

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def schedule_one(extender: HTTPExtender, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    """One simplified scheduling cycle through the extender; returns the node the pod was bound to.

    Raises:
        ExtenderCallError: filter or bind failed, or no node passed (message like kube-scheduler's).
    """
    outcome = extender.filter(pod, nodes)
    if not outcome.nodes:
        reasons: dict[str, int] = {}
        for reason in (*outcome.failed.values(), *outcome.failed_unresolvable.values()):
            reasons[reason] = reasons.get(reason, 0) + 1
        summary = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        raise ExtenderCallError(f"0/{len(nodes)} nodes are available: {summary}.")
    try:
        scores = extender.prioritize(pod, outcome.nodes) if extender.config.prioritize_verb else {}
    except ExtenderCallError:
        scores = {}  # kube-scheduler ignores prioritize errors
    best = max(outcome.nodes, key=lambda node: scores.get(_name(node), 0))
    node = _name(best)
    extender.bind(pod, node)
    return node
