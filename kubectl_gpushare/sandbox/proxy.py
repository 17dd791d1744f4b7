"""The ``pods/proxy`` subresource: the API server relays a request to a port of a pod.

kube-apiserver (``pkg/registry/core/pod/strategy.go`` ``ResourceLocation``) takes the path segment
as ``name``, ``name:port`` or ``scheme:name:port`` (``utilnet.SplitSchemeNamePort``; anything else
is 400 ``invalid pod request "<id>"``), reads the pod (404 when it is missing), takes the first
container port when none is given, refuses a pod without a global unicast IP (400 ``address not
allowed``) and dials ``podIP:port``; a port is a number there, never resolved by name. A dial or
transport failure is 503 ``error trying to reach service: <err>``
(``apimachinery/pkg/util/proxy/transport.go``). The upstream's status, content type and body come
back as they are.

The sandbox has no pod network, so the in-process stack registers where each pod's port really
listens (`ProxyTargets.register`); a pod with an IP but no registered target answers as a pod
whose port refuses connections does. Only loopback targets are accepted.
"""

from __future__ import annotations

import http.client
import ipaddress
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final

from kubectl_gpushare.kube.go_format import go_quote, trim_string
from kubectl_gpushare.kube.go_http import header_tokens
from kubectl_gpushare.kube.go_query import clean_path, escape_path
from kubectl_gpushare.sandbox import errors
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.framing import FramingError, content_length

PROXY_VERBS: Final = {"GET": "get", "HEAD": "get", "OPTIONS": "get", "POST": "create", "PUT": "update",
                      "PATCH": "patch", "DELETE": "delete"}  # fmt: skip
"""HTTP method -> RBAC verb on ``pods/proxy`` (kube-apiserver's RequestInfoFactory)."""
DIAL_TIMEOUT: Final = 5.0
"""Seconds to connect to a target (the real proxy's dialer uses 30 s; tests want less)."""
READ_TIMEOUT: Final = 60.0
CHUNK: Final = 64 * 1024
WHOLE_BODY: Final = 1 << 20
"""A reply with a Content-Length up to this is read whole and its connection kept for the next request; a longer
one is streamed under its own Content-Length (`forward`)."""
MAX_IDLE_PER_TARGET: Final = 4
_STALE: Final = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
FORWARDED_HEADERS: Final = ("Accept", "Content-Type", "User-Agent")
"""The request headers the pod gets: the caller picks them (`forward`'s ``headers``)."""
_HOP_BY_HOP: Final = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authenticate",
                                "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"})
"""Go's ``httputil.ReverseProxy`` ``hopHeaders`` (src/net/http/httputil/reverseproxy.go), which
``removeHopByHopHeaders`` drops from the pod's reply, with every header its ``Connection`` names."""
_CORS: Final = frozenset({"access-control-allow-credentials", "access-control-allow-headers",
                          "access-control-allow-methods", "access-control-allow-origin"})
"""What ``corsRemovingTransport`` drops (``removeCORSHeaders``, k8s.io/apimachinery/pkg/util/proxy/
upgradeaware.go): the pod proxy wraps its transport (``newThrottledUpgradeAwareProxyHandler(location,
transport, true, ...)`` in pkg/registry/core/pod/rest/subresources.go)."""


def relayed_headers(headers: list[tuple[str, str]], *, head: bool = False) -> list[tuple[str, str]]:
    """The pod's reply headers the API server passes on: all but hop-by-hop and CORS ones, ``Date`` and ``Server`` kept.

    ``UpgradeAwareHandler.ServeHTTP`` relays through ``httputil.NewSingleHostReverseProxy``, whose
    ``ServeHTTP`` copies every header left after `_HOP_BY_HOP` and those ``Connection`` names
    (``copyHeader``); Go's server then writes its own ``Date`` only where the handler set none. The
    content type goes separately, and ``Content-Length`` is the sandbox's own framing of the body,
    but for a reply to a ``HEAD`` (``head``), which has no body to frame: there the pod's own goes
    on, as ``copyHeader`` copied it and Go's server keeps a handler's ``Content-Length`` on a HEAD
    reply (src/net/http/server.go ``response.WriteHeader`` reads it; ``chunkWriter.writeHeader`` adds
    none to an empty HEAD reply). Go's transport read it first (src/net/http/transfer.go
    ``readTransfer``: ``parseContentLength`` for a HEAD reply, repeated values made one), so one line
    goes on, the first value, trimmed, and only one `framing.content_length` reads. A repeated header
    keeps every line, in order (``copyHeader`` adds each value).
    """
    named = header_tokens(value for key, value in headers if key.lower() == "connection")
    dropped = _HOP_BY_HOP | _CORS | named | {"content-type", "content-length"}
    relayed = [(name, value) for name, value in headers if name.lower() not in dropped]
    lengths = [value for name, value in headers if name.lower() == "content-length"]
    if head and lengths:
        try:
            content_length(lengths)
        except FramingError:
            return relayed
        relayed.append(("Content-Length", trim_string(lengths[0])))
    return relayed


class _RawRequestLine:
    """Writes the request line's bytes as they came, where ``http.client`` insists on ASCII.

    The query is one character per byte (``http.server`` reads a request line as Latin-1), so Latin-1
    gives those bytes back. ``_encode_request`` is the hook CPython left for a subclass that must send
    what ``http.client`` would refuse (bpo-38216); ``_validate_path`` still refuses control bytes and
    spaces, which Go's server refuses in a request target too.
    """

    def _encode_request(self, request: str) -> bytes:
        return request.encode("latin-1")


class _HTTPConnection(_RawRequestLine, http.client.HTTPConnection):
    """``HTTPConnection`` sending the raw query (`_RawRequestLine`)."""


class _HTTPSConnection(_RawRequestLine, http.client.HTTPSConnection):
    """``HTTPSConnection`` sending the raw query (`_RawRequestLine`)."""


def split_scheme_name_port(segment: str) -> tuple[str, str, str]:
    """``name``, ``name:port`` or ``scheme:name:port`` -> (scheme, name, port), as Go's utilnet does.

    Raises:
        ApiError: 400 for any other shape, or a scheme other than http/https.
    """
    parts = segment.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        scheme, name, port = "", "", ""
    if not name or scheme not in ("", "http", "https"):
        raise errors.bad_request(f"invalid pod request {go_quote(segment)}")
    return scheme, name, port


class ProxyTargets:
    """Where each (namespace, pod, port) really listens; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}

    def connection(self, key: tuple[str, str, int]) -> tuple[http.client.HTTPConnection | None, bool]:
        """A kept-alive connection to ``(scheme, host, port)``, if one is idle (as Go's transport keeps them)."""
        with self._lock:
            idle = self._idle.get(key)
            return (idle.pop(), True) if idle else (None, False)

    def keep(self, key: tuple[str, str, int], connection: http.client.HTTPConnection) -> None:
        """Put a connection whose reply was read whole back for reuse (a few per target; more are closed)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < MAX_IDLE_PER_TARGET:
                idle.append(connection)
                return
        connection.close()

    def register(self, namespace: str, pod: str, port: int | str, host: str, target_port: int) -> None:
        """Relay ``pods/<pod>:<port>/proxy`` to ``host:target_port``.

        ``port`` is the container port number, or its name (matched against the pod's
        ``containerPort`` entries when a request arrives).

        Raises:
            ValueError: ``host`` is not a loopback address, or the port is out of range.
        """
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"proxy targets must be loopback addresses, not {host!r}")
        if not 0 < target_port < 65536:
            raise ValueError(f"target port {target_port} out of range")
        with self._lock:
            self._targets[(namespace, pod, str(port))] = (host, target_port)

    def unregister(self, namespace: str, pod: str, port: int | str) -> None:
        """Forget a target (the pod's port then refuses connections)."""
        with self._lock:
            found = self._targets.pop((namespace, pod, str(port)), None)
            idle = [c for (_, host, port_), conns in self._idle.items() if (host, port_) == found for c in conns]
            for key in [k for k in self._idle if (k[1], k[2]) == found]:
                del self._idle[key]
        for connection in idle:
            connection.close()

    def close(self) -> None:
        """Close every kept-alive connection (the sandbox stops)."""
        with self._lock:
            idle = [c for conns in self._idle.values() for c in conns]
            self._idle.clear()
        for connection in idle:
            connection.close()

    def lookup(self, namespace: str, pod: str, port: str, names: Mapping[str, str]) -> tuple[str, int] | None:
        """The target for a numeric ``port``, registered by number or by a name in ``names`` (name -> number)."""
        with self._lock:
            found = self._targets.get((namespace, pod, port))
            if found is None:
                for name, number in names.items():
                    if number == port and (namespace, pod, name) in self._targets:
                        return self._targets[(namespace, pod, name)]
            return found


def _container_ports(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    ports: list[tuple[str, str]] = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        for entry in (container or {}).get("ports") or []:
            number = (entry or {}).get("containerPort")
            if isinstance(number, int):
                ports.append((str(entry.get("name") or ""), str(number)))
    return ports


def _proxyable(ip: object) -> bool:
    try:
        address = ipaddress.ip_address(str(ip))
    except ValueError:
        return False
    return not (address.is_unspecified or address.is_multicast or address.is_link_local)


def _pod_ip(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    ips = status.get("podIPs") or []
    if ips and isinstance(ips[0], dict):
        return str(ips[0].get("ip") or "")
    return str(status.get("podIP") or "")


def request_path(subpath: str) -> str:
    """The path the pod gets for a proxy subpath (`routes.Target.proxy_path`), escaped as Go sends it.

    ``ProxyREST.Connect`` (pkg/registry/core/pod/rest/subresources.go) sets the location's path to
    ``net.JoinPreservingTrailingSlash("", subpath)`` (k8s.io/apimachinery/pkg/util/net/http.go:
    ``path.Join``, which cleans ``//``, ``.`` and ``..``, then the subpath's trailing ``/`` again);
    ``UpgradeAwareHandler.ServeHTTP`` adds the request's trailing ``/`` (the subpath has it already),
    and an empty path goes out as ``/`` (``httputil``'s ``singleJoiningSlash``; a GET or HEAD never
    gets here: `forward` redirects it). The location has no
    ``RawPath``, so Go's transport writes ``URL.EscapedPath()``: the decoded path escaped anew
    (`escape_path`), whatever escapes the client used.
    """
    joined = clean_path(subpath) if subpath else ""  # proxy//x (an empty segment kept) starts it with "//"
    if subpath.endswith("/") and not joined.endswith("/"):
        joined += "/"
    return escape_path(joined or "/")


def forward(
    targets: ProxyTargets,
    pod: Mapping[str, Any],
    segment: str,
    method: str,
    path: str,
    raw_query: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    whole_path: str = "",
    chunked: bool = False,
) -> tuple[int, str, list[tuple[str, str]], bytes | Iterator[bytes], int | None]:
    """Relay one request to the pod's target: (status, content type, other headers, body or its chunks, length).

    ``path`` is the decoded subpath (`routes.Target.proxy_path`); the pod gets `request_path`.
    ``headers`` go on as given: the request's `FORWARDED_HEADERS`, which the caller picks.
    The query goes on as it came, byte for byte (``UpgradeAwareHandler.ServeHTTP`` in
    k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go sets ``loc.RawQuery = req.URL.RawQuery``, and
    Go's transport writes ``URL.RequestURI()`` as it is): repeated names, ``;``, bad escapes and bytes
    past ASCII included, none of it re-encoded (`_RawRequestLine`). The body goes framed as it came
    (`_outbound_body`). Response headers come back as the real proxy copies them, less the hop-by-hop ones
    (`relayed_headers`). A reply over `WHOLE_BODY` is streamed; ``length`` is then the pod's
    Content-Length, which ``ReverseProxy`` copies (it is no hop-by-hop header) and Go's server then
    frames the body with, or None for a reply without one (chunked, as Go's server writes a body of
    unknown length that is flushed as it comes).

    A GET or HEAD with an empty ``path`` (``.../proxy``, no trailing ``/``) is not relayed: once the pod,
    its port and its address passed (``ResourceLocation``), upgradeaware.go's ``proxyRedirectsforRootPath``
    answers 301 with ``Location`` the request's decoded path (``whole_path``, ``req.URL.Path``) plus
    ``/`` and the raw query, and no body (so no content type).

    Raises:
        ApiError: 400 for a bad segment or a pod without an address, 503 when the target does not answer.
    """
    scheme, _, port = split_scheme_name_port(segment)
    ports = _container_ports(pod)
    if not port and ports:
        port = ports[0][1]
    meta = pod.get("metadata") or {}
    ip = _pod_ip(pod)
    found = targets.lookup(str(meta.get("namespace", "")), str(meta.get("name", "")), port, dict(ports))
    if found is None and not _proxyable(ip):
        raise errors.bad_request("address not allowed")
    if not path and method in ("GET", "HEAD"):  # "a hack for https://issue.k8s.io/4958", upstream says
        query = raw_query.encode("latin-1").decode(errors="surrogateescape")  # its bytes, held as the path holds them
        return 301, "", [("Location", whole_path + "/" + (f"?{query}" if query else ""))], b"", None
    if found is None:
        where = f"{ip}:{port}" if port else ip
        raise _unreachable(f"dial tcp {where}: connect: connection refused")
    host, target_port = found
    url = request_path(path) + (f"?{raw_query}" if raw_query else "")
    key = (scheme or "http", host, target_port)
    reusable = method in ("GET", "HEAD")
    connection, reused = targets.connection(key) if reusable else (None, False)
    while True:
        if connection is None:
            connection_type = _HTTPSConnection if scheme == "https" else _HTTPConnection
            connection, reused = connection_type(host, target_port, timeout=DIAL_TIMEOUT), False
        try:
            if connection.sock is None:
                connection.connect()
                assert connection.sock is not None
                connection.sock.settimeout(READ_TIMEOUT)
            connection.request(method, url, body=_outbound_body(body, chunked), headers=dict(headers))
            response = connection.getresponse()
            break
        except _STALE as exc:
            connection.close()
            if not reused:
                raise _unreachable(f"{type(exc).__name__}: {exc}") from None
            connection = None  # the target had closed the kept-alive connection: once more, fresh
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise _unreachable(f"{type(exc).__name__}: {exc}") from None
    content_type = response.getheader("Content-Type") or "text/plain; charset=utf-8"
    relayed = relayed_headers(response.getheaders(), head=method == "HEAD")
    if response.length is not None and response.length <= WHOLE_BODY:
        held = connection
        try:
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            held.close()
            raise _unreachable(f"{type(exc).__name__}: {exc}") from None
        if response.will_close or not reusable:
            held.close()
        else:
            targets.keep(key, held)
        return response.status, content_type, relayed, data, None

    def chunks() -> Iterator[bytes]:
        try:
            while chunk := response.read1(CHUNK):
                yield chunk
        except (OSError, http.client.HTTPException):
            return  # the upstream broke off: so does the relayed body
        finally:
            held.close()

    held = connection
    return response.status, content_type, relayed, chunks(), response.length


def _outbound_body(body: bytes, chunked: bool) -> bytes | Iterator[bytes] | None:
    """The request body as Go's reverse proxy sends it to the pod: framed as it came.

    ``ReverseProxy.ServeHTTP`` (src/net/http/httputil/reverseproxy.go) sends ``outreq``, a
    ``req.Clone``: its ``ContentLength`` and ``TransferEncoding`` are the inbound request's (only a
    zero length drops the body, issue 16036). So a body with a Content-Length goes with it, whatever its
    size, and a chunked one (``ContentLength == -1``) goes chunked (src/net/http/transfer.go
    ``newTransferWriter``: an unknown length on HTTP/1.1 is ``Transfer-Encoding: chunked``), no
    Content-Length, after ``probeRequestBody`` saw a first byte; one that ends at once is sent as no
    body, as ``http.client`` does too: ``Content-Length: 0`` on a POST, PUT or PATCH
    (``shouldSendContentLength``), nothing on another method. The chunks are ``CHUNK`` bytes each:
    their boundaries carry no meaning. ``http.client`` frames an iterable body without either header
    chunked by itself (``HTTPConnection._send_request``), as it gives ``bytes`` their Content-Length.
    """
    if not body:
        return None
    if not chunked:
        return body
    return (body[start : start + CHUNK] for start in range(0, len(body), CHUNK))


def _unreachable(why: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", f"error trying to reach service: {why}")
