"""The sandbox HTTP server: `Sandbox`, an in-process Kubernetes API server on 127.0.0.1.

Owns sockets, threads, authentication, fault injection and the request log; REST semantics live in
``routes.py`` and state in ``store.py``. HTTP/1.1 with keep-alive on the standard library's
``ThreadingHTTPServer``: every request body is read in full (kubectl sends one with DELETE), before
authentication, but one whose client awaits ``100 Continue``, read where kube-apiserver's handler reads it,
and watches are streamed with chunked transfer encoding. Body framing is strict (``framing.py``): a bad chunk
size gets 400 and a closed connection, a bad Content-Length Go's plain 400 before any handler
(`framing.header_fields_refused`), a body over ``max_body`` 413. Each connection may sit idle ``idle_timeout``
seconds between requests and has ``read_timeout`` seconds to send one request (head and body); then it is
closed. A request that is not long-running has a deadline, as kube-apiserver gives it one: its arrival plus
its ``timeout`` query parameter (a Go duration; one that does not parse is a 400 on any path, before
authentication and routing), capped at ``request_timeout`` (``--request-timeout``). Only an injected latency
makes a request that slow: held before it is handled past its deadline, it is answered 504 at the deadline by
the timeout filter's reply and never takes effect (held ``in_transit``, its deadline starts when the hold
ends); a read whose handling is slow gets that reply too, while a write whose commit is slow (``after`` with
``latency``) gets the finisher's 504 at the deadline and lands when its latency ends, if that is within
``request_timeout`` past the deadline (the unknown outcome) and `Sandbox.stop` has not run by then (a request
still held or committing at stop is dropped, so memory and the saved state agree). Tests and other processes
inject faults in-process (`Sandbox.inject`) or over HTTP (``admin.py``, ``/_sandbox/``).

Where it deliberately differs from kube-apiserver:

* The admission chain is ValidatingAdmissionPolicy only (``admission.py``): namespaces need not
  exist, no quota, no defaulting webhooks.
* No real RBAC engine: with ``auth=True`` there are bearer tokens only; `ADMIN_TOKEN` may do
  anything, `READONLY_TOKEN` holds ``view``'s rules (get, list and watch of the resources ``view``
  lists; anything else gets RBAC's 403, before routing: ``authorization.py``), a token added with
  rules (`Sandbox.add_token`) holds those, and no token gets 401, but on the health checks, which a caller without
  one may ``GET`` as ``system:anonymous`` (``system:public-info-viewer``; another method gets 403).
  Extra tokens can be added with `Sandbox.add_token`, so each component shows up under its own
  user in the request log, and service-account tokens can be requested through the TokenRequest
  API (``tokens.py``): bound to a pod, they name its node as kube-apiserver's do, and admission
  policies see that user.
* No etcd: state is in memory (saved to a JSON file with ``state_file``); the watch history is
  bounded by ``history`` events, and older resourceVersions get 410 Expired.
* JSON and YAML only (no protobuf), no server-side apply (415), no graceful deletion (pods go
  at once unless finalizers hold them, ``finalization.py``), no ``events.k8s.io`` group, no managedFields.
"""

from __future__ import annotations

import base64
import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.deadlines import SECOND, long_running, long_running_request, parse_duration
from kubectl_gpushare.kube.errors import API_REQUEST_TIMEOUT
from kubectl_gpushare.kube.go_handler import GoHeadHandler
from kubectl_gpushare.kube.go_http import (
    ReplyConnection,
    at_least_1_1,
    connection_header,
    expectation,
    is_h2_preface,
    reply_connection,
)
from kubectl_gpushare.kube.go_query import GoQuery, GoUrl, go_bool, go_text, unescape_path
from kubectl_gpushare.sandbox import admin, errors
from kubectl_gpushare.sandbox.authorization import (
    DISCOVERY_RULES,
    HEALTH_URLS,
    PUBLIC_INFO_RULES,
    READONLY_RULES,
    Rules,
    forbidden,
    request_info,
    rules_may,
)
from kubectl_gpushare.sandbox.claim_controller import ResourceClaimController
from kubectl_gpushare.sandbox.controller import Controller
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.faults import Fault, Faults, RequestLog, RequestRecord
from kubectl_gpushare.sandbox.framing import (
    BodyTooLargeError,
    DeadlineReader,
    FramingError,
    chunked,
    content_length,
    drain,
    header_fields_refused,
    read_chunked,
)
from kubectl_gpushare.sandbox.logs import ContainerLogs
from kubectl_gpushare.sandbox.routes import (
    WRITE_VERBS,
    Api,
    DroppedConnectionError,
    Request,
    Response,
    Target,
    error_response,
    resolve,
)
from kubectl_gpushare.sandbox.store import Store
from kubectl_gpushare.sandbox.tokens import ANONYMOUS, Identity, UserInfo, static_user

DEFAULT_MAX_BODY = protocol.API_MAX_REQUEST_BYTES
"""kube-apiserver's limit for a request body (3 MiB); larger bodies get 413."""
DRAIN_LIMIT = 64 * 1024 * 1024
"""Oversized bodies up to this size are read and dropped (keep-alive survives); larger ones close."""
DEFAULT_IDLE_TIMEOUT = 90.0
"""Seconds a connection may sit idle between requests (kube-apiserver's IdleTimeout, and Go
clients' idle pool timeout: the client usually closes first, so keep-alive is never cut mid-use)."""
DEFAULT_READ_TIMEOUT = 60.0
"""Seconds a client has to send one request, head and body, once its first byte arrived."""

_log = logging.getLogger(__name__)


def _fault_error(fault: Fault) -> ApiError:
    if fault.status == 429:
        return errors.too_many_requests(fault.retry_after or 1)
    error = errors.status_for(fault.status or 500)
    error.retry_after = fault.retry_after
    return error


class _HandlerTimeoutError(Exception):
    """The request's deadline passed before its handler answered: the timeout filter answers for it."""


class _StoppedError(Exception):
    """`Sandbox.stop` ran while the request was held: it never lands, and its connection is closed unanswered."""


def _handler_timeout_response() -> Response:
    """The 504 ``WithTimeoutForNonLongRunningRequests`` writes at the deadline (`errors.handler_timeout_body`)."""
    return Response(504, errors.handler_timeout_body(), content_type=errors.HANDLER_TIMEOUT_CONTENT_TYPE)


def _wire_header_value(value: str) -> str:
    """A header value as Go's net/http writes it: one line, trimmed, its UTF-8 bytes.

    CR and LF become spaces (``net/http/header.go``: ``headerNewlineToSpace``, then ``TrimSpace``). A
    value carries text from stored objects (a policy's warning message), so it must never split the
    response or fail ``http.server``'s Latin-1 encoding after the write took effect.
    """
    one_line = value.replace("\n", " ").replace("\r", " ").strip()
    try:  # a byte that is not UTF-8, kept as a surrogate escape (a decoded request path), as that byte
        return one_line.encode("utf-8", "surrogateescape").decode("latin-1")
    except UnicodeEncodeError:  # another lone surrogate (`load` may store one) as "?"
        return one_line.encode("utf-8", "replace").decode("latin-1")


class _Server(ThreadingHTTPServer):
    # Handler threads must not keep the process alive, and the server must not track them:
    # long-lived watch threads would otherwise pile up in a list until shutdown.
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128
    sandbox: Sandbox

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.open_connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line instead of socketserver's traceback: a client's misbehaviour is not a crash."""
        exc = sys.exc_info()[1]
        _log.warning("sandbox: connection from %s ended: %s: %s", client_address, type(exc).__name__, exc)

    def close_open_connections(self) -> None:
        """Shut down every client connection, so clients see the server go away (as on a restart)."""
        with self.connections_lock:
            connections = list(self.open_connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(GoHeadHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    target: GoUrl
    """The request target as Go splits it (set by `parse_request` once it accepted the request)."""
    chunked: bool = False
    """Whether the body is chunked, as Go's ``readTransfer`` reads it (`framing.chunked`; set by `parse_request`)."""
    length: int = 0
    """The request's Content-Length, none being 0 (`framing.content_length`; set by `parse_request` once
    `framing.header_fields_refused` passed it, so read once; a chunked body's is ignored)."""
    reply_connection: ReplyConnection = ReplyConnection(close=True, header=None)
    """What Go's server does with the connection after the reply, as the request asks (`_take_headers`)."""
    awaits_continue: bool = False
    """Whether the client waits for ``100 Continue`` before it sends the body (`_take_headers`; `Sandbox._read_body`
    sends it and clears this; still set when the reply goes out, the connection closes after it: `Sandbox._send`)."""

    def setup(self) -> None:
        """Disable Nagle and read through a `DeadlineReader`.

        Headers and body go out as two writes, and a delayed ACK would cost 40 ms; the reader cuts
        off idle and trickling clients.
        """
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile.close()
        sandbox = self.server.sandbox
        self.reader = DeadlineReader(self.connection, sandbox.idle_timeout, sandbox.read_timeout)
        self.rfile = io.BufferedReader(self.reader)
        if isinstance(self.connection, ssl.SSLSocket):  # under the idle timeout the reader just set
            self.connection.do_handshake()
        with self.server.connections_lock:
            self.server.open_connections.add(self.connection)

    def finish(self) -> None:
        """Forget the connection once the client or the server closed it (then `GoHeadHandler.finish`)."""
        with self.server.connections_lock:
            self.server.open_connections.discard(self.connection)
        super().finish()

    def start_request(self) -> None:
        """The next request's first byte starts the read deadline (see `DeadlineReader`)."""
        self.reader.start_request()

    def parse_request(self) -> bool:
        """Refuse a request head Go's server refuses, as it does; keep the target split.

        The head as `GoHeadHandler.read_head` reads (and refuses) it, its framing and Host judged by
        `framing.header_fields_refused`, then `GoHeadHandler.take_head`. Before any handler, and so before
        routing, authentication, faults and the request log.
        """
        fields = self.read_head()
        if fields is None:
            return False
        read = self.request_line
        self.target = read.url
        refused = header_fields_refused(fields, read)
        if refused is not None:
            return self.refuse(refused)
        self.chunked = chunked(fields, read.version)
        self.take_head(fields)
        self.length = content_length(self.headers.get_all("Content-Length") or [])  # cannot fail: checked above
        return self._take_headers(is_h2_preface(read, fields))

    def _take_headers(self, h2_preface: bool) -> bool:
        """Act on ``Connection`` and ``Expect`` as Go's server does.

        ``headers`` are the fields as Go folds them (`GoHeadHandler.take_head`); both rules are Go's server's,
        the extender's too. ``Connection`` (`go_http.reply_connection`: ``shouldClose``'s tokens in any
        value, ``wantsClose``' and ``wantsHttp10KeepAlive``'s in the first, the HTTP/2 preface's head closed
        after its reply). ``Expect`` (`go_http.expectation`): a ``100-continue`` on HTTP/1.1 with a body
        awaits ``100 Continue``, sent when the handler first reads the body (`awaits_continue`,
        `Sandbox._serve`); any other expectation is ``sendExpectationFailed``'s ``417`` with
        ``Connection: close``, before any handler.
        """
        self.reply_connection = reply_connection(self.request_line.version, self.headers.get_all("Connection") or [],
                                                 h2_preface)
        self.close_connection = self.reply_connection.close
        expect = expectation(self.request_line.version, self.headers.get_all("Expect") or [], self._announces_body())
        self.awaits_continue = expect == "continue"
        if expect == "fail":
            self.expectation_failed()
            return False
        return True

    def send_connection(self) -> None:
        """The ``Connection`` header Go's server adds to a reply whose handler set none, if any.

        src/net/http/server.go ``chunkWriter.writeHeader``: a reply after which the connection closes (as the
        request asked, `reply_connection`, or as the server decided: an awaited body left unread, broken
        framing) says ``Connection: close`` on ``ProtoAtLeast(1, 1)`` only, so a closing reply to an HTTP/1.0
        request says nothing; one to an HTTP/1.0 request that keeps the connection (``keep-alive`` in its first
        value) says ``Connection: keep-alive``, as the extender's replies do (`go_http.connection_header`).
        Called for replies with a length (or to a HEAD): an HTTP/1.0 stream closes (`Sandbox._send`).
        """
        value = connection_header(self.request_line.version, self.reply_connection, self.close_connection)
        if value is not None:
            self.send_header("Connection", value)

    def _announces_body(self) -> bool:
        """Go's ``req.ContentLength != 0`` where ``readTransfer`` (src/net/http/transfer.go) read the framing.

        Chunked is -1; a Content-Length counts as `framing.content_length` reads it (``00`` is no
        body). Another Transfer-Encoding, or a bad or conflicting Content-Length, never gets here: Go
        refuses them before any ``100 Continue`` (`framing.header_fields_refused`).
        """
        return self.chunked or self.length > 0

    def send_response(self, code: int, message: str | None = None) -> None:
        """The status line and ``Date``, without the ``Server: BaseHTTP/...`` header ``http.server`` adds.

        Go's net/http writes ``Date`` on every reply (``cw.writeHeader``'s ``appendTime``,
        src/net/http/server.go) but never a ``Server`` header, and kube-apiserver sets none.
        """
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the per-request access log; the request log records requests instead."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.server.sandbox._serve(self)

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise type every unknown handler attribute as do_GET

        def __getattr__(self, name: str) -> Callable[[], None]:
            """``do_<METHOD>`` for every method, so ``http.server`` never answers its own HTML 501.

            Go's ``readRequest`` (src/net/http/request.go) takes any token as the method (``validMethod``;
            `read_request_line` refused the rest), and kube-apiserver's chain serves it: authentication,
            then routing, where a method no route has is go-restful's 405 (`routes.resolve`).
            """
            if name.startswith("do_"):
                return self.do_GET
            raise AttributeError(name)


class Sandbox:
    """An embedded Kubernetes API server; also a context manager.

    Args:
        port: TCP port on 127.0.0.1 (0 picks a free one).
        auth: require bearer tokens (`ADMIN_TOKEN` or `READONLY_TOKEN`).
        state_file: load objects from this JSON file on start and save them on stop (and every
            ``save_interval`` seconds while running).
        history: how many change events watches can resume from.
        max_body: largest request body accepted (413 above it).
        bookmark_interval: seconds between BOOKMARK events on watches that allow them.
        save_interval: seconds between periodic saves of ``state_file`` (0 disables them).
        idle_timeout: seconds a connection may wait between requests before it is closed.
        read_timeout: seconds a client has to send a whole request once it started.
        request_timeout: the longest deadline (seconds after its arrival) of a request that is not
            long-running, which its ``timeout`` parameter may shorten: kube-apiserver's
            ``--request-timeout`` (`kube.errors.API_REQUEST_TIMEOUT`). Only an injected ``latency``
            can reach it (504 ``Timeout``).
        https: serve HTTPS with a CA made at start (written into `write_kubeconfig`'s kubeconfig;
            needs the ``cryptography`` package). kubectl sends tokens only over HTTPS.
        controllers: run the workload controllers (Deployments, ReplicaSets, StatefulSets, Jobs into
            pods; owner deletion cascades) and the resourceclaim controller (claims from templates,
            reservations of gone pods dropped). Idle while no workload, claim or template is stored.
    """

    ADMIN_TOKEN = "sandbox-admin-token"
    READONLY_TOKEN = "sandbox-readonly-token"
    ADMIN_USER = "sandbox-admin"
    READONLY_USER = "sandbox-viewer"

    def __init__(
        self,
        port: int = 0,
        auth: bool = False,
        state_file: str | Path | None = None,
        *,
        history: int = 10_000,
        max_body: int = DEFAULT_MAX_BODY,
        bookmark_interval: float = 5.0,
        save_interval: float = 30.0,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        request_timeout: float = API_REQUEST_TIMEOUT,
        controllers: bool = True,
        https: bool = False,
    ) -> None:
        self.port = port
        self.idle_timeout = idle_timeout
        self.read_timeout = read_timeout
        self.request_timeout = request_timeout
        self.auth = auth
        self.state_file = Path(state_file) if state_file else None
        self.max_body = max_body
        self.save_interval = save_interval
        self.store = Store(history=history)
        self.api = Api(self.store, bookmark_interval=bookmark_interval)
        self.controller = Controller(self.store) if controllers else None
        self.claim_controller = ResourceClaimController(self.store) if controllers else None
        self.https = https
        self.ca_pem: bytes | None = None
        """The CA certificate (PEM) clients must trust when ``https`` is on (set by `start`)."""
        self.faults = Faults()
        self.log = RequestLog()
        self.api.tokens.add(self.ADMIN_TOKEN, Identity(UserInfo(self.ADMIN_USER, groups=(
            "system:masters", "system:authenticated"))))  # fmt: skip
        self.api.tokens.add(self.READONLY_TOKEN, Identity(static_user(self.READONLY_USER), rules=READONLY_RULES))
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._saver: threading.Thread | None = None
        self._stop_saving = threading.Event()
        self._save_lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._stopped = threading.Event()
        """Set by `stop` (under ``_commit_lock``): requests still held or committing slowly then never land."""

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Sandbox:
        """Load saved state (if any), bind 127.0.0.1 and serve in a background thread.

        Raises:
            OSError: the port cannot be bound, or the state file cannot be read.
            ValueError: the state file exists but is not a sandbox state (``state.StateFileError``).
        """
        if self._server is not None:
            return self
        self._stopped = threading.Event()  # a request left held by an earlier stop stays dropped
        if self.state_file is not None and self.state_file.exists():
            from kubectl_gpushare.sandbox.state import load_state

            load_state(self.store, self.state_file)
        context = None
        if self.https:
            from kubectl_gpushare.sandbox.tls import make_server_tls

            made = make_server_tls()
            self.ca_pem, context = made.ca_pem, made.context
        server = _Server(("127.0.0.1", self.port), _Handler)
        if context is not None:  # the handshake runs in each connection's thread (see `_Handler.setup`)
            server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        server.sandbox = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="sandbox-http", daemon=True)
        self._thread.start()
        if self.controller is not None:
            self.controller.start()
        if self.claim_controller is not None:
            self.claim_controller.start()
        if self.state_file is not None and self.save_interval > 0:
            self._saver = threading.Thread(target=self._save_periodically, name="sandbox-save", daemon=True)
            self._saver.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open watches, and save state if a state file is set.

        A request still held by a ``latency`` (in transit or not) or committing slowly (``latency``
        with ``after``) is dropped: it never lands, neither in memory nor in the saved state, so the
        two agree; one that landed before is saved. (A kube-apiserver that goes away leaves such a
        write's outcome unknown either way.)

        Raises:
            OSError: the state file cannot be written (serving has stopped regardless).
            ValueError: the state file is no longer a sandbox state (left alone).
        """
        server, self._server = self._server, None
        if server is None:
            return
        self.api.proxy_targets.close()
        # Refuse new connections first, so a client whose watch ends below cannot reconnect to a
        # server that is going away; then end the watches and close the open connections.
        server.shutdown()
        server.server_close()
        with self._commit_lock:  # waits for a held request being applied; none lands after this
            self._stopped.set()
        if self.controller is not None:
            self.controller.stop()
        if self.claim_controller is not None:
            self.claim_controller.stop()
        self.api.stopping.set()
        self.store.close()
        server.close_open_connections()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._stop_saving.set()
        if self._saver is not None:
            self._saver.join(timeout=10)
        self.save()

    def save(self) -> None:
        """Write state to ``state_file`` atomically (no-op without one).

        Raises:
            OSError: the file cannot be written (the old one is kept).
            ValueError: ``state_file`` exists and is not a sandbox state (it is left alone).
        """
        if self.state_file is None:
            return
        from kubectl_gpushare.sandbox.state import save_state

        with self._save_lock:
            save_state(self.store, self.state_file)

    def _save_periodically(self) -> None:
        while not self._stop_saving.wait(self.save_interval):
            try:
                self.save()
            except (OSError, ValueError):  # a full disk must not kill the server; the save on stop reports it
                continue

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:<port>`` (``https://`` with ``https`` on)."""
        return f"{'https' if self.https else 'http'}://127.0.0.1:{self.port}"

    # --- configuration and seeding -----------------------------------------------------------
    def write_kubeconfig(self, path: str | Path, token: str | None = None, *, context: str = "sandbox") -> Path:
        """Write a kubeconfig that points kubectl and clients at this sandbox.

        Args:
            path: where to write it (parent directories are created).
            token: bearer token to embed; defaults to `ADMIN_TOKEN` when ``auth`` is on.
            context: the context (and cluster and user) name.

        Returns:
            The path written.
        """
        import yaml

        if token is None and self.auth:
            token = self.ADMIN_TOKEN
        user: dict[str, Any] = {"token": token} if token else {}
        cluster: dict[str, Any] = {"server": self.url}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": "default"}}],
            "current-context": context,
            "preferences": {},
        }
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(config, sort_keys=False))
        return target

    def register_proxy_target(self, namespace: str, pod: str, port: int | str, host: str, target_port: int) -> None:
        """Serve ``pods/<pod>:<port>/proxy/...`` by relaying to ``host:target_port`` (loopback only).

        ``port`` is the pod's container port number or its name (see `sandbox.proxy`).
        """
        self.api.proxy_targets.register(namespace, pod, port, host, target_port)

    def unregister_proxy_target(self, namespace: str, pod: str, port: int | str) -> None:
        """Stop relaying to a pod's port: requests then answer 503 as for a port nothing listens on."""
        self.api.proxy_targets.unregister(namespace, pod, port)

    def add_token(self, token: str, user: str, *, readonly: bool = False, rules: Rules | None = None) -> None:
        """Accept another bearer token, logged as ``user``.

        Args:
            token: the bearer token.
            user: its user's name.
            readonly: the user holds ``view``, as `READONLY_TOKEN`'s does (`READONLY_RULES`).
            rules: PolicyRules the user holds (beside ``view`` when ``readonly``), e.g. a shipped ClusterRole's
                ``rules``. With either, every request they do not allow is RBAC's 403; with neither, none is.
        """
        held = None if not readonly and rules is None else (
            *(READONLY_RULES if readonly else DISCOVERY_RULES), *(rules or ()))
        self.api.tokens.add(token, Identity(static_user(user), rules=held))

    def request_token(self, namespace: str, service_account: str, *, pod: str | None = None,
                      node: str | None = None, expiration: int = 3600) -> str:
        """A service-account token, as ``kubectl create token`` gets one (the TokenRequest API, in-process).

        Args:
            namespace: the ServiceAccount's namespace (and the pod's).
            service_account: its name; it must exist.
            pod: bind the token to this pod (it must run as the ServiceAccount); the token then
                names the pod's node, as kube-apiserver 1.30+ does.
            node: bind the token to this Node instead.
            expiration: seconds the token is valid, 600 to 2^32.

        Raises:
            ApiError: what the API would answer (404 no ServiceAccount or bound object, 400, 422).
        """
        spec: dict[str, Any] = {"expirationSeconds": expiration}
        if pod is not None:
            spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": pod}
        elif node is not None:
            spec["boundObjectRef"] = {"kind": "Node", "apiVersion": "v1", "name": node}
        with self.store.lock:
            answered = self.api.tokens.request_token(namespace, service_account, {"spec": spec})
        return str(answered["status"]["token"])

    def load(self, objects: Iterable[dict[str, Any]]) -> int:
        """Seed objects directly (no HTTP, no validation); returns the count.

        Fast even for 100,000 pods. A small load (up to half the watch history, 5,000 objects by
        default) reaches running watches as ordinary ADDED/MODIFIED events; a larger one is
        inserted in bulk and expires running watches (410), so informers re-list and see it.

        Raises:
            ValueError: an object has an unknown kind or no name (nothing is loaded).
        """
        return self.store.load(objects)

    @property
    def logs(self) -> ContainerLogs:
        """The fake containers' lines that ``kubectl logs`` reads (the node side: a kubelet stand-in writes them)."""
        return self.api.logs

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A stored object by resource plural (``pods``), namespace (None/"" for cluster) and name."""
        from kubectl_gpushare.sandbox.store import object_key

        entry = self.store.get(resource, object_key(namespace or "", name))
        return None if entry is None else entry.object()

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """Every stored object of a resource, in key order."""
        return [entry.object() for entry in self.store.entries(resource)]

    # --- test hooks ----------------------------------------------------------------------------
    def inject(
        self,
        method: str | None = None,
        path: str = r".",
        status: int | None = None,
        retry_after: int | None = None,
        latency: float = 0.0,
        times: int | None = None,
        drop_watch: bool = False,
        after: bool = False,
        in_transit: bool = False,
    ) -> Fault:
        """Add a fault for requests whose method and target (path + query) match.

        Args:
            method: HTTP method to match (None for any).
            path: regular expression searched in the path and query string.
            status: answer with this status and a matching ``Status`` body (429 gets Retry-After).
            retry_after: seconds for the Retry-After header (default 1 with 429).
            latency: seconds to wait before handling the request.
            times: fire at most this many times (None for always).
            drop_watch: break the connection off (watches: after the response headers).
            after: handle the request first, then fail it: the write takes effect but the client
                sees the error (or the dropped connection), as when a reply is lost.
            in_transit: with ``latency``, hold the request before it reaches the server (a network
                or proxy in between): its deadline starts when the hold ends, so a client whose
                timeout is shorter sees its own timeout rather than the server's 504.

        Returns:
            The fault; its ``hits`` counts how often it fired.
        """
        import re

        return self.faults.add(Fault(method, re.compile(path), status, retry_after, latency, times, drop_watch, after,
                                     in_transit))

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        self.faults.clear()

    def open_watches(self) -> int:
        """How many watch streams the server is serving now."""
        return self.api.open_watches()

    def drop_watches(self) -> None:
        """Break off every open watch stream now."""
        self.api.drop_watches()

    @property
    def requests(self) -> list[RequestRecord]:
        """The request log, oldest first."""
        return self.log.snapshot()

    def clear_requests(self) -> None:
        """Forget the request log."""
        self.log.clear()

    # --- serving -----------------------------------------------------------------------------
    def _authenticate(self, handler: _Handler) -> Identity | None:
        header = handler.headers.get("Authorization") or ""
        if header.startswith("Bearer "):
            found = self.api.tokens.authenticate(header[7:].strip())
            if found is not None:
                return found
        if not self.auth:
            return Identity(ANONYMOUS) if not header else Identity(static_user("system:unknown-token"))
        return None

    def _answer_global_options(self, handler: _Handler) -> None:
        """``OPTIONS *``: Go's server answers it itself, before any handler (so unauthenticated, unlogged).

        src/net/http/server.go: ``serverHandler.ServeHTTP`` hands a request whose ``RequestURI`` is
        ``*`` and method ``OPTIONS`` to ``globalOptionsHandler`` (kube-apiserver's ``http.Server`` keeps
        ``DisableGeneralOptionsHandler`` off), which sets ``Content-Length: 0`` and discards the body
        (up to 4 KiB; the connection closes past that): a 200 with nothing else.
        """
        try:
            body = self._read_body(handler)  # it reads the body: an awaited 100 Continue goes out
            if isinstance(body, ApiError) or len(body) > 4096:
                handler.close_connection = True
            handler.send_response(200)
            handler.send_header("Content-Length", "0")
            handler.send_connection()
            handler.end_headers()
        except OSError:
            self._close(handler)

    def _read_body(self, handler: _Handler) -> bytes | ApiError:
        """The request body, or the error to answer; broken framing also closes the connection.

        A client that awaits ``100 Continue`` gets it now, as Go's ``expectContinueReader.Read`` sends
        it on the handler's first read of the body (src/net/http/server.go), and its body's first byte
        starts a read deadline of its own (`DeadlineReader.start_request`): the head's was ended. Once
        the body is read, so is the request: its read deadline ends (`DeadlineReader.end_request`).

        Raises:
            OSError: the client went away or ran out of time (the caller closes without answering).
        """
        if handler.awaits_continue:
            handler.awaits_continue = False
            handler.send_response_only(100)
            handler.end_headers()
            handler.reader.start_request()
        body = self._framed_body(handler)
        handler.reader.end_request()
        return body

    def _framed_body(self, handler: _Handler) -> bytes | ApiError:
        """`_read_body`'s reading, by the request's framing (chunked, or its Content-Length)."""
        try:
            if handler.chunked:  # nothing but "chunked" gets here (`framing.header_fields_refused`)
                if handler.headers.get("Content-Length") is not None:  # chunked wins, but the sender is suspect
                    handler.close_connection = True
                return read_chunked(handler.rfile, self.max_body)
        except FramingError as exc:
            handler.close_connection = True
            return errors.bad_request(f"malformed request body: {exc}")
        except BodyTooLargeError:
            handler.close_connection = True
            return errors.too_large(self.max_body)
        length = handler.length
        if length > self.max_body:
            if length <= DRAIN_LIMIT:  # read and drop it, so the client gets the 413 and can go on
                drain(handler.rfile, length)
            else:
                handler.close_connection = True
            return errors.too_large(self.max_body)
        body = handler.rfile.read(length) if length > 0 else b""
        if len(body) != length:
            raise ConnectionAbortedError("the client closed the connection inside the body")
        return body

    def _serve(self, handler: _Handler) -> None:
        received = time.monotonic()  # the request's arrival (WithRequestReceivedTimestamp): its deadline counts from it
        stopped = self._stopped  # this run's: `stop` sets it, a later `start` makes another
        # The target split as url.ParseRequestURI splits it (`parse_request` refused what it refuses): no
        # fragment (a '#' belongs to the path or the query, wherever it stands), an absolute-form target's
        # scheme and authority dropped, and no path at all after "scheme:" without a "/" (an opaque URL)
        # or "*" for the asterisk form, which no route serves. The query is read once, as
        # req.URL.Query(): routing, options, timeout and the pod proxy share it.
        split = handler.target
        query = GoQuery(split.query)
        # Routing, authorization and the log see the decoded path, as kube-apiserver sees req.URL.Path
        # (url.ParseRequestURI unescapes it). `exact` keeps bytes that are not UTF-8 for the pod proxy;
        # `path` is its text.
        exact = unescape_path(split.path)
        path = go_text(exact)
        method = handler.command
        if method == "OPTIONS" and handler.path == "*":
            self._answer_global_options(handler)
            return
        # A body is read here, before authentication, unless its client awaits 100 Continue: that one
        # is read where kube-apiserver's handler reads it, past authentication, authorization and routing
        # (below), so a request refused there gets no 100 Continue.
        body: bytes | ApiError | None = None
        if handler.awaits_continue:
            handler.reader.end_request()  # the head is read; the body's own deadline starts with its 100 Continue
        else:
            try:
                body = self._read_body(handler)
            except OSError:  # gone, or too slow: nobody to answer (kube-apiserver just closes, too)
                self._close(handler)
                return
        if admin.is_admin_path(path):
            try:
                answer = self._serve_admin(handler, method, path, body)
            except OSError:
                self._close(handler)
                return
            self._send(handler, method, answer)
            return
        user = ""
        target = Target()
        response: Response
        try:
            # A request held in transit has not reached the server: the hold comes before anything the
            # server does with it (its framing, the deadline, routing, authentication), and the request
            # arrives when the hold ends (WithRequestReceivedTimestamp, which DefaultBuildHandlerChain in
            # k8s.io/apiserver/pkg/server/config.go puts outside authentication and the deadline, starts
            # its clock then).
            fault = self.faults.take(method, handler.path, in_transit=True)
            if fault is not None:
                if stopped.wait(fault.latency):
                    raise _StoppedError
                received = time.monotonic()
            if isinstance(body, ApiError):  # read before authentication (no 100 Continue awaited)
                raise body
            # WithRequestDeadline wraps authentication and routing (DefaultBuildHandlerChain in
            # k8s.io/apiserver/pkg/server/config.go: the API handler is the chain's innermost), so a
            # malformed timeout is a 400 for anyone, on any path, a 404 one included. Then
            # authentication and authorization, which also wrap the router: a path nothing serves is
            # a 404, and a method no route there has a 405, only for a caller who may know it.
            unrouted: ApiError | None = None
            try:
                target = resolve(method, exact, query)  # the log names what a 401 was for, too
            except ApiError as exc:
                unrouted = exc
            deadline = self._deadline(received, method, path, query, None if unrouted else target)
            identity = self._authenticate(handler)
            if identity is None and path not in HEALTH_URLS:
                raise errors.unauthorized()
            # On a health check: anonymous authentication is open to those alone, and ``system:anonymous``
            # holds ``system:public-info-viewer`` alone.
            identity = identity or Identity(ANONYMOUS, rules=PUBLIC_INFO_RULES)
            user = identity.user.username
            if identity.rules is not None:  # WithAuthorization, outside the router: a 405 or 404 is for those
                info = request_info(method, exact, query)  # it allows
                if not rules_may(identity.rules, info):
                    raise forbidden(user, info)
            if unrouted is not None:
                raise unrouted
            # The handler reads the body: now 100 Continue goes out. A write's handler reads it, and so does
            # the pod proxy, which ReverseProxy sends on (httputil/reverseproxy.go: req.Clone); a read (get,
            # list, watch, discovery, health) never does.
            if body is None and (target.verb in WRITE_VERBS or target.subresource == "proxy"):
                try:
                    body = self._read_body(handler)
                except OSError:  # gone, or too slow: nobody to answer
                    self._close(handler)
                    return
                if isinstance(body, ApiError):
                    raise body
            if fault is None:  # the faults that act in the server, once it has authenticated and routed the request
                fault = self.faults.take(method, handler.path)
            committing = (fault is not None and fault.after and not fault.in_transit and fault.latency > 0
                          and deadline is not None)
            held = fault.latency if fault is not None and not fault.in_transit and not committing else 0.0
            if held > 0:
                self._hold(held, deadline, stopped)
            if fault is not None and not fault.after:
                if fault.drop_watch:
                    self._drop(handler, target)
                    self._record(handler, method, target, 0, user, query, path)
                    return
                if fault.status is not None:
                    raise _fault_error(fault)
            request = Request(method, path, query, handler.headers, body if isinstance(body, bytes) else b"",
                              identity.user, chunked=handler.chunked)
            if committing:
                assert fault is not None and deadline is not None
                response = self._commit_slowly(request, target, fault.latency, deadline, stopped)
            elif fault is not None and fault.latency > 0 and deadline is not None:  # held: lands before stop, or never
                response = self._land(request, target, stopped)
            else:
                response = self.api.handle(request, target)
            if fault is not None and fault.after:  # the request took effect; the client never hears so
                if fault.drop_watch:
                    self._record(handler, method, target, 0, user, query, path)
                    self._drop(handler, target)
                    return
                if fault.status is not None:
                    response = error_response(_fault_error(fault))
        except ApiError as error:
            response = error_response(error)
        except _HandlerTimeoutError:
            response = _handler_timeout_response()
        except _StoppedError:  # the server went away while it was held: the client hears nothing
            self._record(handler, method, target, 0, user, query, path)
            self._close(handler)
            return
        except Exception as exc:  # noqa: BLE001 - a bug must answer 500, never kill the connection thread
            response = error_response(errors.internal(f"{type(exc).__name__}: {exc}"))
        # Recorded before sending, so a client that has its answer always finds it in the log.
        self._record(handler, method, target, response.status, user, query, path)
        self._send(handler, method, response)

    def _deadline(self, received: float, method: str, path: str, query: GoQuery,
                  target: Target | None) -> float | None:
        """When a request must be answered: None for a long-running one, else ``received`` plus `_allotted`.

        ``WithRequestDeadline`` asks ``LongRunningFunc`` with the request's ``RequestInfo``, which
        ``RequestInfoFactory`` reads from the path and query whether or not anything serves it
        (``k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``): for a path no route knows
        (``target`` None) the sandbox reads the subresource and ``watch`` the same way.

        Raises:
            ApiError: 400 for a ``timeout`` that is not a Go duration (`_allotted`).
        """
        if target is not None:
            unbounded = long_running_request(target.verb, target.subresource)
        else:
            unbounded = long_running(path) or (method == "GET" and go_bool(query.get("watch")))
        return None if unbounded else received + self._allotted(query)

    @staticmethod
    def _hold(latency: float, deadline: float | None, stopped: threading.Event) -> None:
        """Hold a request ``latency`` seconds before it is handled, ending early at its deadline or at `stop`.

        The timeout filter answers at the deadline whatever the handler is doing
        (``timeoutHandler.ServeHTTP`` in ``k8s.io/apiserver/pkg/server/filters/timeout.go`` selects on
        the request context's ``Done``), so a hold past the deadline ends there.

        Raises:
            _HandlerTimeoutError: the deadline came first (the request never lands).
            _StoppedError: `stop` came first.
        """
        if stopped.wait(latency if deadline is None else min(latency, max(0.0, deadline - time.monotonic()))):
            raise _StoppedError
        if deadline is not None and time.monotonic() >= deadline:  # an oversleep past it included
            raise _HandlerTimeoutError  # the filter has answered; the handler's context is done: it never lands

    def _land(self, request: Request, target: Target, stopped: threading.Event) -> Response:
        """Handle a request that was held, unless `stop` has run: it lands before `stop` saves the state, or never.

        Raises:
            _StoppedError: `stop` ran first.
        """
        with self._commit_lock:  # `stop` sets ``stopped`` under it, then saves
            if stopped.is_set():
                raise _StoppedError
            try:
                return self.api.handle(request, target)
            except ApiError as error:
                return error_response(error)
            except Exception as exc:  # noqa: BLE001 - a bug must answer 500, as `_serve` does
                return error_response(errors.internal(f"{type(exc).__name__}: {exc}"))

    def _allotted(self, query: GoQuery) -> float:
        """Seconds a request that is not long-running may take: its ``timeout`` parameter, capped at `request_timeout`.

        ``WithRequestDeadline`` (``k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go``):
        the first ``timeout`` value (``URL.Query().Get``: a pair with ``;`` or a bad escape is skipped),
        read by ``time.ParseDuration``; absent, empty, zero, negative
        or not shorter than ``--request-timeout``, the server's own timeout applies.

        Raises:
            ApiError: 400 ``BadRequest`` for a value that is not a duration, worded as
                ``parseTimeout`` words it (``invalid timeout specified in the request URL - <Go's error>``).
        """
        value = query.exact("timeout")  # Go reads bytes, UTF-8 or not
        if not value:
            return self.request_timeout
        try:
            seconds = parse_duration(value) / SECOND
        except ValueError as exc:
            raise errors.bad_request(f"{errors.INVALID_TIMEOUT_IN_URL} - {exc}") from None
        return seconds if 0 < seconds < self.request_timeout else self.request_timeout

    def _commit_slowly(self, request: Request, target: Target, latency: float, deadline: float,
                       stopped: threading.Event) -> Response:
        """Handle a request whose write takes ``latency`` to commit; past ``deadline``, answer 504 and let it land.

        kube-apiserver runs a write's storage call on a goroutine of its own and answers 504
        ``Timeout`` when the request's deadline passes first, while that call may still complete
        (``asyncFinisher`` in ``endpoints/handlers/finisher/finisher.go``): the unknown outcome.
        The call runs under the request's context, so only a write already on its way to etcd at
        the deadline commits after it. The sandbox allows up to `request_timeout` past the deadline,
        the bound clients assume (`kube.errors.API_REQUEST_TIMEOUT`, counted from when the client
        gave up, which is the deadline for a client that sent its timeout); a commit ending later
        never lands, nor does one still pending when `stop` runs. A write's 504 is the finisher's
        (`errors.REQUEST_TIMEOUT_MESSAGE`; when the deadline is the request's own, the timeout
        filter may win that race upstream); a read (``after`` on a GET) has no finisher, so its
        504 is the timeout filter's (`_handler_timeout_response`).
        """
        outcome: list[Response] = []
        done = threading.Event()
        expires = deadline + self.request_timeout
        lands = time.monotonic() + latency <= expires

        def commit() -> None:
            # The slow commit itself, ended early by `stop`; one that cannot land waits no longer than it may.
            stopped.wait(latency if lands else max(0.0, expires - time.monotonic()))
            late = not lands or time.monotonic() > expires  # a loaded machine's oversleep included
            try:
                outcome.append(error_response(errors.request_timeout()) if late else
                               self._land(request, target, stopped))
            except _StoppedError:
                outcome.append(error_response(errors.request_timeout()))
            done.set()

        threading.Thread(target=commit, name="sandbox-slow-commit", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            if target.verb in WRITE_VERBS:  # the finisher answers (it runs the storage call)
                raise errors.request_timeout()
            raise _HandlerTimeoutError  # a read has no finisher: the timeout filter answers
        return outcome[0]

    def _serve_admin(self, handler: _Handler, method: str, path: str, body: bytes | ApiError | None) -> Response:
        """The test hooks' API (``admin.py``); a body awaited after ``100 Continue`` is read once the caller may use it.

        Raises:
            OSError: the client went away while its awaited body was read (`_serve`'s caller closes).
        """
        if isinstance(body, ApiError):
            return error_response(body)
        identity = self._authenticate(handler)
        if self.auth and identity is None:
            return error_response(errors.unauthorized())
        if self.auth and identity is not None and identity.user.username != self.ADMIN_USER:
            return error_response(ApiError(
                403, "Forbidden", f'User "{identity.user.username}" cannot use the sandbox admin API ({path})'))
        if body is None:
            body = self._read_body(handler)
            if isinstance(body, ApiError):
                return error_response(body)
        return admin.handle(method, path, body, self.faults, self.drop_watches)

    def _record(
        self, handler: _Handler, method: str, target: Target, status: int, user: str, query: GoQuery, path: str
    ) -> None:
        resource = target.resource
        self.log.append(
            RequestRecord(
                method=method,
                verb=target.verb,
                resource=resource.plural if resource else "",
                subresource=target.subresource,
                namespace=target.namespace,
                name=target.name,
                status=status,
                user_agent=handler.headers.get("User-Agent") or "",
                user=user,
                query=query.first_values(),
                path=path,
                group=resource.group if resource else "",
            )
        )

    def _send(self, handler: _Handler, method: str, response: Response) -> int:
        """Write the reply; one to a request whose awaited body was never read (its ``100 Continue`` never sent) closes.

        Go's ``chunkWriter.writeHeader`` (src/net/http/server.go) sets ``closeAfterReply`` (``Connection:
        close``) when the body is an ``expectContinueReader`` that has not seen EOF: the body is left unread.
        """
        if handler.awaits_continue:
            handler.close_connection = True
        try:
            handler.send_response_only(response.status)
            if not any(key.lower() == "date" for key, _ in response.headers):  # a pod's own (`proxy.relayed_headers`)
                handler.send_header("Date", handler.date_time_string())
            if response.content_type:  # none for a reply without a body Go could sniff (a proxy's 301)
                handler.send_header("Content-Type", response.content_type)
            handler.send_header("Cache-Control", "no-cache, private")
            for key, value in response.headers:
                handler.send_header(key, _wire_header_value(value))
            if response.stream is None:
                if response.sized:  # a pod's reply to a HEAD carries its own, or none (`proxy.relayed_headers`)
                    handler.send_header("Content-Length", str(len(response.body)))
                handler.send_connection()
                handler.end_headers()
                if method != "HEAD":
                    handler.wfile.write(response.body)
                return response.status
            if response.length is not None:
                return self._send_sized(handler, method, response, response.stream, response.length)
            if not at_least_1_1(handler.request_line.version):
                return self._send_to_close(handler, response.status, response.stream)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.send_connection()  # chunkWriter.writeHeader names closeAfterReply on a stream too
            handler.end_headers()
            try:
                for chunk in response.stream:
                    handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except DroppedConnectionError:
                self._close(handler)
                return response.status
            except OSError:
                raise
            except Exception:  # noqa: BLE001 - a bug mid-stream: end the stream the way a crash would
                self._close(handler)
                return response.status
            handler.wfile.write(b"0\r\n\r\n")
        except OSError:
            handler.close_connection = True
        return response.status

    def _send_sized(self, handler: _Handler, method: str, response: Response, stream: Iterator[bytes],
                    length: int) -> int:
        """The rest of `_send` for a stream of known length: framed by ``Content-Length``, as Go frames a relayed reply.

        Go's server writes a body whose handler set ``Content-Length`` as it comes; one that ends
        short leaves the connection unusable, so it is closed (``chunkWriter`` in src/net/http/server.go
        checks the written length and ``finishRequest`` closes). A stream that breaks off does that here.

        Raises:
            OSError: the client went away (`_send` closes the connection).
        """
        handler.send_header("Content-Length", str(length))
        handler.send_connection()
        handler.end_headers()
        written = 0
        try:
            for chunk in stream:
                if method != "HEAD":
                    handler.wfile.write(chunk[: max(0, length - written)])  # never past what was announced
                written += len(chunk)
        except OSError:
            raise
        except Exception:  # noqa: BLE001 - a bug mid-body: end it the way a crash would
            written = -1
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if written != length:
            self._close(handler)
        return response.status

    def _send_to_close(self, handler: _Handler, status: int, stream: Iterator[bytes]) -> int:
        """The rest of `_send` for a stream without a length to an HTTP/1.0 request: its bytes, then a close.

        src/net/http/server.go ``chunkWriter.writeHeader``: HTTP/1.0 has no chunked encoding, so a reply
        without a Content-Length is not chunked, its end is the connection's close (``closeAfterReply``), and
        it says no ``Connection`` (``close`` goes to HTTP/1.1 only).

        Raises:
            OSError: the client went away (`_send` closes the connection).
        """
        handler.close_connection = True
        handler.end_headers()
        try:
            for chunk in stream:
                handler.wfile.write(chunk)
        except DroppedConnectionError:
            pass
        except OSError:
            raise
        except Exception:  # noqa: BLE001 - a bug mid-stream: it ends at the close, as any HTTP/1.0 stream does
            pass
        self._close(handler)
        return status

    def _drop(self, handler: _Handler, target: Target) -> None:
        if target.verb == "watch":
            self._abort_stream(handler)
        else:
            self._close(handler)

    def _abort_stream(self, handler: _Handler) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            if at_least_1_1(handler.request_line.version):  # not chunked to HTTP/1.0 (`_send_to_close`)
                handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            handler.wfile.flush()
        except OSError:
            pass
        self._close(handler)

    @staticmethod
    def _close(handler: _Handler) -> None:
        handler.close_connection = True
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
