"""The extender's HTTP application: routes to replies, without a socket.

`ExtenderApp.handle` maps a method, a path and a body to a `Response`; the server in `httpd` only
moves bytes. Tests call the app directly for every route and error path, and the same app runs
behind the real socket, so nothing is tested twice or not at all.

Routes (the prefix is ``/gpushare-scheduler`` unless configured otherwise):

==========================  =====================================================================
``POST <prefix>/filter``    ExtenderFilterResult, 200; bad input goes into ``Error``.
``POST <prefix>/prioritize`` HostPriorityList (0..10 per node), 200.
(any verb)                  400 with a one-line ``Error`` for a body that is not UTF-8 JSON or
                            nests too deep to read (filter replies in its own shape).
``POST <prefix>/bind``      ExtenderBindingResult: 200 with ``Error`` empty, or 200 with ``Error``
                            set (the original used 500, which kube-scheduler reports without the
                            message; 200 + Error shows the real reason in the pod's events).
``GET <prefix>/inspect[/<node>]``  the original's inspect JSON; an unknown node is a 404 with
                            ``error`` set.
``GET /version``            the version as plain text.
``GET /healthz``            200 while the process serves.
``GET /readyz``             200 once the cache is synced and current and, with leader election,
                            only on the leader (so the Service sends kube-scheduler to the
                            leader); else 503.
``GET /metrics``            Prometheus text format.
``POST /mutate``            the admission webhook (`webhook`): AdmissionReview v1, 200, or 400 when
                            malformed. Served by every replica, leader or not, synced or not.
==========================  =====================================================================

Unknown paths get 404 and known paths with another method 405, both with a JSON ``Error`` body. A
body over the size limit gets 413 (`ExtenderApp.too_large`) before it is read.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kubectl_gpushare import __version__, protocol
from kubectl_gpushare.extender import handlers, webhook, wire
from kubectl_gpushare.extender.metrics import ExtenderMetrics
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.ledger import Policy

log = logging.getLogger("kubectl_gpushare.extender")

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""16 MiB: a filter with 5,000 full Node objects (nodeCacheCapable false) is ~10-15 MB."""


@dataclass(frozen=True)
class Response:
    """One HTTP reply."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = field(default=())


@dataclass(frozen=True)
class BindOutcome:
    """What a bind did: ``error`` is "" on success; ``reason`` is a short metric label."""

    error: str = ""
    reason: str = "bound"


class Binder(Protocol):
    """Anything that binds a pod (the real one talks to the API server; see `binder`)."""

    def bind(self, args: wire.BindingArgs) -> BindOutcome:
        """Bind the pod and say how it went."""


class ExtenderApp:
    """Routes requests to the pure handlers and the binder, and records metrics."""

    def __init__(
        self,
        state: ExtenderState,
        binder: Binder,
        *,
        prefix: str = "/gpushare-scheduler",
        policy: Policy = "binpack",
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        ready: Callable[[], bool] = lambda: True,
        unavailable: Callable[[], str] = lambda: "",
        metrics: ExtenderMetrics | None = None,
    ) -> None:
        """Create the app.

        Args:
            state: the extender's model, read by filter, prioritize, inspect and metrics.
            binder: does the bind verb.
            prefix: URL prefix of the extender verbs (kube-scheduler's ``urlPrefix`` path).
            policy: GPU choice and node scoring, ``binpack`` (the original's) or ``spread``.
            max_request_bytes: larger request bodies get 413 without being read.
            ready: whether to report ready (cache synced and current and, with leader election,
                leading).
            unavailable: why filter, prioritize and bind cannot be answered yet ("" when they
                can): until the cache has synced, every node would look unknown.
            metrics: the Prometheus registry wrapper; a fresh one if not given.
        """
        self.state = state
        self.binder = binder
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.policy: Policy = policy
        self.max_request_bytes = max_request_bytes
        self.ready = ready
        self.unavailable = unavailable
        self.metrics = metrics or ExtenderMetrics(state)
        self._post: dict[str, Callable[[bytes], Response]] = {
            f"{self.prefix}/filter": self._filter,
            f"{self.prefix}/prioritize": self._prioritize,
            f"{self.prefix}/bind": self._bind,
            protocol.WEBHOOK_PATH: self._mutate,
        }
        self._get: dict[str, Callable[[], Response]] = {
            f"{self.prefix}/inspect": lambda: self._inspect(None),
            "/version": lambda: Response(200, __version__.encode(), TEXT),
            "/healthz": lambda: Response(200, b"ok", TEXT),
            "/readyz": self._readyz,
            "/metrics": self._metrics,
        }

    # --- entry points ------------------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes = b"") -> Response:
        """Answer one request; never raises."""
        path = path.split("?", 1)[0]
        verb = self._verb(path)
        started = time.perf_counter()
        try:
            response = self._dispatch(method, path, body)
        except Exception:  # the server must keep serving whatever a handler does
            log.exception("internal error serving %s %s", method, path)
            response = Response(500, wire.encode_json({"Error": "internal error; see the extender's log"}))
        if verb:
            self.metrics.observe(verb, time.perf_counter() - started)
        return response

    def too_large(self, path: str, length: int) -> Response:
        """The 413 reply for a body over the limit, in the shape of the verb's reply."""
        message = f"request body of {length} bytes exceeds the limit of {self.max_request_bytes} bytes"
        return self.refuse(413, path, message)

    def refuse(self, status: int, path: str, message: str, *, reason: str = "bad_request") -> Response:
        """A reply refusing a request unread (too large, malformed headers, server busy), in the verb's shape.

        Args:
            status: the HTTP status (400, 413, 503).
            path: the request path, to pick the reply's shape.
            message: the one-line ``Error``.
            reason: the bind-failure metric label, when the verb is bind.
        """
        verb = self._verb(path.split("?", 1)[0])
        log.warning("refused %s with %d: %s", path, status, message)
        headers: tuple[tuple[str, str], ...] = (("Retry-After", "1"),) if status == 503 else ()
        if verb == "filter":
            return Response(status, wire.encode_filter_result(error=message), headers=headers)
        if verb == "bind":
            self.metrics.bind_failed(reason)
        return Response(status, wire.encode_json({"Error": message}), headers=headers)

    # --- routing -----------------------------------------------------------------------------------

    def _verb(self, path: str) -> str:
        if path.startswith(self.prefix + "/"):
            rest = path[len(self.prefix) + 1:]
            verb = rest.split("/", 1)[0]
            if verb in ("filter", "prioritize", "bind", "inspect"):
                return verb
        return ""

    def _dispatch(self, method: str, path: str, body: bytes) -> Response:
        if method == "POST" and path in self._post:
            return self._post[path](body)
        if method in ("GET", "HEAD"):
            if path in self._get:
                return self._get[path]()
            inspect_prefix = f"{self.prefix}/inspect/"
            if path.startswith(inspect_prefix):
                return self._inspect(urllib.parse.unquote(path[len(inspect_prefix):]) or None)
        known = path in self._post or path in self._get or path.startswith(f"{self.prefix}/inspect/")
        if known:
            return Response(405, wire.encode_json({"Error": f"method {method} not allowed on {path}"}),
                            headers=(("Allow", "POST" if path in self._post else "GET"),))
        return Response(404, wire.encode_json({"Error": f"no route for {path}"}))

    # --- verbs ---------------------------------------------------------------------------------------

    def _filter(self, body: bytes) -> Response:
        why = self.unavailable()
        if why:
            return Response(200, wire.encode_filter_result(error=why))
        status, reply = handlers.filter_nodes(body, self.state)
        return Response(status, reply)

    def _prioritize(self, body: bytes) -> Response:
        if self.unavailable():
            return Response(200, wire.encode_host_priorities([]))
        status, reply, error = handlers.prioritize_nodes(body, self.state, self.policy)
        if error:
            log.info("prioritize: %s", error)
        return Response(status, reply)

    def _bind(self, body: bytes) -> Response:
        try:
            args = wire.decode_binding_args(body)
        except wire.WireError as exc:
            self.metrics.bind_failed("bad_request")
            return Response(exc.status, wire.encode_binding_result(str(exc)))
        why = self.unavailable()
        outcome = BindOutcome(why, "unavailable") if why else self.binder.bind(args)
        if outcome.error:
            self.metrics.bind_failed(outcome.reason)
            log.warning("bind %s/%s to %s failed: %s", args.pod_namespace, args.pod_name, args.node, outcome.error)
        else:
            self.metrics.bound()
            log.info("bound %s/%s to %s", args.pod_namespace, args.pod_name, args.node)
        return Response(200, wire.encode_binding_result(outcome.error))

    def _mutate(self, body: bytes) -> Response:
        status, reply = webhook.mutate(body)
        if status != 200:
            log.warning("admission review refused: %s", reply.decode(errors="replace")[:300])
        return Response(status, reply)

    def _inspect(self, node: str | None) -> Response:
        status, body = handlers.inspect_nodes(self.state, node)
        return Response(status, body)

    def _readyz(self) -> Response:
        if self.ready():
            return Response(200, b"ok", TEXT)
        return Response(503, b"not ready: cache not synced or not current, or not the leader", TEXT)

    def _metrics(self) -> Response:
        body, content_type = self.metrics.exposition()
        return Response(200, body, content_type)
