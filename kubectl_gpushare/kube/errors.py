"""The small, explicit set of errors the Kubernetes API layer raises.

Every failure that leaves `kubectl_gpushare.kube` is one of these, so the faces catch a handful of
classes instead of `http.client`, `ssl`, `OSError` or `yaml` internals. Each error carries a one-line
message fit to show a user and an ``exit_code`` the CLI can return as is.

This module owns the error taxonomy and the mapping from an HTTP status plus a ``Status`` body to
an error class. It does no I/O; of the package it imports only `protocol`, and that only once an API
error is built (`api_error`), so ``--help`` reading the exit-code table here stays light.
"""

# The names follow the API reasons (NotFound, Conflict, ...) that callers already know, not pep8-naming's
# "Error" suffix rule.
# ruff: noqa: N818

from __future__ import annotations

from typing import ClassVar, Final

# The one exit-code table every command shares (listed at the foot of every --help). A code means
# the same thing whichever command returns it, so scripts can branch on it.
EXIT_OK: Final = 0
"""Success."""
EXIT_API: Final = 1
"""The API server answered with an error (4xx/5xx other than 401/403), or a command failed at run time."""
EXIT_USAGE: Final = 2
"""Usage error: bad flags or arguments, no usable kubeconfig, unreadable input file, refused configuration."""
EXIT_CONFIG: Final = EXIT_USAGE
"""A kubeconfig or in-cluster configuration problem is a usage error."""
EXIT_UNREACHABLE: Final = 3
"""The API server could not be reached (connection refused, TLS failure, ``--request-timeout`` passed)."""
EXIT_AUTH: Final = 4
"""The API server rejected the credentials (401) or the RBAC permissions (403)."""
EXIT_START: Final = 5
"""A server could not start: port or socket in use, TLS files unreadable, GPU backend failed."""
EXIT_FIT_SHORT: Final = 10
"""``fit`` ran, and fewer than ``--count`` pods fit (a "no" answer, as ``kubectl diff`` exits 1 on a diff).

The answers of question-commands sit at 10 and up so they never read as a failure to run (1-5)."""
EXIT_FINDINGS_WARNINGS: Final = 11
"""``doctor`` ran and found warnings, no errors."""
EXIT_FINDINGS_ERRORS: Final = 12
"""``doctor`` ran and found errors."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted by Ctrl-C (128 + SIGINT, as shells report it)."""

EXIT_CODES_HELP: Final = """\b
Exit codes:
  0    success
  1    API error (e.g. not found, 5xx) or a failure at run time
  2    usage error: bad flags or arguments, no usable kubeconfig, unreadable input
  3    API server unreachable within --request-timeout
  4    unauthorized (401) or forbidden (403)
  5    a server could not start (port or socket in use, GPU backend failed)
  10   fit: fewer than --count pods fit
  11   doctor: warnings found (no errors)
  12   doctor: errors found
  130  interrupted (Ctrl-C)"""
"""The table above as click help text (``\\b`` keeps click from rewrapping it)."""


API_REQUEST_TIMEOUT: Final = 60.0
"""Seconds after which a write whose outcome is unknown can no longer land: kube-apiserver's default
``--request-timeout`` (1m0s).

The API server bounds each non-long-running request's context at its arrival plus
``--request-timeout`` (a ``timeout`` query parameter may shorten it, never lengthen it:
``staging/src/k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go``, ``WithRequestDeadline``);
the flag is ``staging/src/k8s.io/apiserver/pkg/server/options/server_run_options.go`` (``AddUniversalFlags``)
and its default ``RequestTimeout: time.Duration(60) * time.Second`` is set in
``staging/src/k8s.io/apiserver/pkg/server/config.go`` (``NewConfig``). At the deadline the client
gets a 504 (``asyncFinisher`` in ``.../endpoints/handlers/finisher/finisher.go``); the handler may
run on, but its storage write runs under the expired context, so only a write already handed to
etcd at that instant can still commit. Measured from the moment the client gave up on the request
(never earlier than the server received it), so a write that has not shown by then never will. A
cluster that raises the flag needs this raised too.
"""


class KubeError(Exception):
    """Base class of every error raised by `kubectl_gpushare.kube`.

    Attributes:
        exit_code: the process exit code a CLI should return for this error.
    """

    exit_code: ClassVar[int] = EXIT_API

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(KubeError):
    """The kubeconfig (or in-cluster configuration) is missing, malformed or names unknown entries."""

    exit_code: ClassVar[int] = EXIT_CONFIG


class Unreachable(KubeError):
    """The API server did not answer: connection refused, DNS, TLS handshake or timeout.

    Attributes:
        url: the URL that was requested.
        timeout: True when the request ran out of time (as opposed to failing outright).
        sent: False only where no byte of the request can have reached the server: the connection
            or its TLS handshake failed, or the deadline had passed before asking (`not_sent`). True
            (the default) wherever that is not certain, a failure on a kept-alive connection included:
            the request may have been delivered, so a write may have landed.
    """

    exit_code: ClassVar[int] = EXIT_UNREACHABLE

    def __init__(self, message: str, url: str = "", timeout: bool = False, *, sent: bool = True) -> None:
        super().__init__(message)
        self.url = url
        self.timeout = timeout
        self.sent = sent


class ReplyTooLarge(KubeError):
    """A reply was longer than the caller's bound, or took longer than its deadline to arrive; it was dropped."""


class UndecodableReply(KubeError):
    """The API server answered, but with an object that does not decode as its kind (a field of the wrong type).

    `kube.client` raises it for every reply of one object (get, create, replace, patch), with one
    message: ``pod default/a does not decode as a v1.Pod (<why>)``. Not a refusal: a write whose
    reply is undecodable has happened. Lists and watches skip such an object instead (`kube.lenient`).
    """


class ApiError(KubeError):
    """The API server answered with an error status.

    Attributes:
        status: the HTTP status code (the ``Status`` body's ``code`` when that is absent).
        reason: the ``Status`` body's machine-readable reason (``NotFound``, ``Conflict``, ...).
    """

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class BadRequest(ApiError):
    """400: the request was malformed (bad selector, bad patch)."""


class Unauthorized(ApiError):
    """401: no or invalid credentials."""

    exit_code: ClassVar[int] = EXIT_AUTH


class Forbidden(ApiError):
    """403: the credentials lack RBAC permission for this verb and resource."""

    exit_code: ClassVar[int] = EXIT_AUTH


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409: a resourceVersion or uid precondition failed, or the object already exists."""


class Expired(ApiError):
    """410: the resourceVersion (watch start or list continue token) is too old; re-list.

    Attributes:
        continue_token: for an expired list ``continue`` token, the token the server offers to
            resume with an inconsistent snapshot ("" if none).
    """

    def __init__(self, status: int, reason: str, message: str, continue_token: str = "") -> None:
        super().__init__(status, reason, message)
        self.continue_token = continue_token


class Invalid(ApiError):
    """422: the object failed validation."""


class TooManyRequests(ApiError):
    """429: the server throttled the request.

    Attributes:
        retry_after: seconds the server asked to wait (the ``Retry-After`` header), if given.
    """

    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(status, reason, message)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed; often transient.

    Attributes:
        retry_after: seconds the server asked to wait (``Retry-After`` on a 503), if given.
    """

    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(status, reason, message)
        self.retry_after = retry_after


_BY_STATUS: Final[dict[int, type[ApiError]]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Expired,
    422: Invalid,
}


def api_error(status: int, reason: str = "", message: str = "", retry_after: float | None = None) -> ApiError:
    """Build the error class that matches an HTTP status.

    Args:
        status: HTTP status code of the reply.
        reason: ``Status.reason`` from the body, if any.
        message: ``Status.message`` from the body, if any, as one line cut to the CLI's bound
            (`protocol.one_line`); a generic message is used otherwise.
        retry_after: the reply's ``Retry-After`` in seconds, kept for 429 and 5xx.

    Returns:
        An `ApiError` subclass instance (plain `ApiError` for statuses without their own class).
    """
    from kubectl_gpushare import protocol  # not at import: --help reads the exit codes here and stays light

    # The server's words as the CLI writes an error line (`protocol.one_line`), here once for every face: a
    # daemon's log line quoting this error is as bounded as the CLI's, however long the Status message.
    text = (
        protocol.one_line(message)
        if message
        else f"the server answered HTTP {status}" + (f" ({reason})" if reason else "")
    )
    if status == 429:
        return TooManyRequests(status, reason or "TooManyRequests", text, retry_after)
    if status >= 500:
        return ServerError(status, reason or "InternalError", text, retry_after)
    cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason, text)


def refused(exc: KubeError) -> bool:
    """Whether the API answered that a write did not happen (a 4xx other than 429): its outcome is known.

    Anything else (a 5xx, a 429, a timeout, a dropped connection) leaves the outcome unknown: the
    write may have landed, or may still land within `API_REQUEST_TIMEOUT`, unless it was never sent
    (`not_sent`; `did_not_happen` is either).
    """
    return isinstance(exc, ApiError) and 400 <= exc.status < 500 and exc.status != 429


def not_sent(exc: BaseException) -> bool:
    """Whether the request never left this process (`Unreachable` with ``sent`` False): a write that cannot land."""
    return isinstance(exc, Unreachable) and not exc.sent


def did_not_happen(exc: KubeError) -> bool:
    """Whether a write that raised ``exc`` is known not to have happened: the API refused it, or it was never sent.

    What holds a reservation for a write of unknown outcome releases it at once where this is True,
    and keeps it otherwise (`refused`).
    """
    return refused(exc) or not_sent(exc)


def write_failure(action: str, exc: KubeError) -> str:
    """The log line for a write that raised ``exc``, worded by what is known of its outcome (`refused`).

    ``cannot <action>: ...`` only where the API answered that the write did not happen. A write answered
    2xx with an object that does not decode has happened; a timeout, a 5xx, a 429 or a connection lost
    leaves it unknown, and the line says so: saying it failed would send whoever reads the log after a
    problem that is not there, or make them redo a write that landed. A write never sent (`not_sent`:
    no connection, no TLS handshake, no time left to ask) cannot land: ``<action>: not sent, nothing
    changed: ...``.
    """
    if isinstance(exc, UndecodableReply):
        return f"{action}: the write landed, but its reply does not decode: {exc}"
    if refused(exc):
        return f"cannot {action}: {exc}"
    if not_sent(exc):
        return f"{action}: not sent, nothing changed: {exc}"
    why = ""
    if isinstance(exc, ApiError):
        why = f" (HTTP {exc.status})"
    elif isinstance(exc, Unreachable) and exc.timeout:
        why = " (timed out)"
    return f"{action}: outcome unknown{why}; the write may have landed: {exc}"


__all__ = [
    "EXIT_API",
    "EXIT_AUTH",
    "EXIT_CODES_HELP",
    "EXIT_CONFIG",
    "EXIT_FINDINGS_ERRORS",
    "EXIT_FINDINGS_WARNINGS",
    "EXIT_FIT_SHORT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_START",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "ApiError",
    "BadRequest",
    "ConfigError",
    "Conflict",
    "Expired",
    "Forbidden",
    "Invalid",
    "KubeError",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "api_error",
    "did_not_happen",
    "not_sent",
    "refused",
    "write_failure",
]
