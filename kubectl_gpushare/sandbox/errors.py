"""The API errors the sandbox answers with, as Kubernetes ``Status`` objects.

Owns the mapping from a failure to its HTTP code, ``reason`` and message wording (modelled on
``k8s.io/apimachinery/pkg/api/errors``). It does no I/O; the server turns an `ApiError` into a
response.
"""

from __future__ import annotations

import json
from typing import Any

from kubectl_gpushare.kube.go_format import go_quote, parse_int64
from kubectl_gpushare.kube.go_query import GoQuery


class ApiError(Exception):
    """A request the sandbox refuses; rendered as a ``Status`` body with ``code`` and ``reason``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after
        self.headers = headers or {}
        """Headers the writer of this error sets besides the Status (``Retry-After`` aside)."""

    def status(self) -> dict[str, Any]:
        """The ``Status`` object kube-apiserver would send for this error.

        Keys in ``metav1.Status``'s field order (``details`` before ``code``), as Go's encoder
        writes them; ``details`` whenever it is set, ``{}`` included (``NewTimeoutError`` sets an
        empty one).
        """
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # StatusReasonUnknown is "", which omitempty leaves out
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def status_details(kind: str, name: str, group: str = "") -> dict[str, Any]:
    """``metav1.StatusDetails`` as Go's encoder writes it: ``name``, ``group``, ``kind``.

    Field order and ``omitempty`` of k8s.io/apimachinery/pkg/apis/meta/v1/types.go: an empty name,
    group or kind is left out.
    """
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return details


def qualified(plural: str, group: str) -> str:
    """The resource name as error messages print it: ``pods``, ``leases.coordination.k8s.io``."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, name: str, group: str = "") -> ApiError:
    """404 for a named object that does not exist."""
    return ApiError(
        404, "NotFound", f'{qualified(plural, group)} "{name}" not found', details=status_details(plural, name, group)
    )


def path_not_found() -> ApiError:
    """404 for a URL the server does not serve."""
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def already_exists(plural: str, name: str, group: str = "") -> ApiError:
    """409 for a create whose name is taken."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        details=status_details(plural, name, group),
    )


def conflict(plural: str, name: str, why: str, group: str = "") -> ApiError:
    """409 for a failed precondition (stale resourceVersion, UID mismatch, already bound)."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        details=status_details(plural, name, group),
    )


def forbidden(
    plural: str, name: str, why: str, group: str = "", causes: list[dict[str, str]] | None = None
) -> ApiError:
    """403 from an admission check: apimachinery ``NewForbidden`` (no name in the message when empty)."""
    target = f'{qualified(plural, group)} "{name}"' if name else qualified(plural, group)
    details = status_details(plural, name, group)
    if causes:
        details["causes"] = causes
    return ApiError(403, "Forbidden", f"{target} is forbidden: {why}", details=details)


STALE_RV = "the object has been modified; please apply your changes to the latest version and try again"


def bad_request(message: str) -> ApiError:
    """400 for a request the server cannot decode or understand."""
    return ApiError(400, "BadRequest", message)


def int64_option(query: GoQuery, name: str) -> int | None:
    """An int64 query option as kube-apiserver converts it (None: absent), or the 400 it answers.

    ``runtime.Convert_Slice_string_To_int64`` and ``Convert_Slice_string_To_Pointer_int64``
    (k8s.io/apimachinery/pkg/runtime/conversion.go) read the first value with
    ``strconv.ParseInt(value, 10, 64)`` and return its error as it is, which the handler
    (``getRequestOptions``, ``ListResource`` in k8s.io/apiserver/pkg/endpoints/handlers) answers as a
    400 BadRequest in the error's words (`go_format.parse_int64`: "invalid syntax", or "value out of
    range" past int64, 5,000 digits included). An empty value is a syntax error.
    """
    if name not in query:
        return None
    try:
        return parse_int64(query.exact(name))  # Go holds bytes: one that is no UTF-8 is quoted as \xNN
    except ValueError as exc:
        raise bad_request(str(exc)) from None


_CAUSE_TYPES = {"Forbidden": "FieldValueForbidden", "Required value": "FieldValueRequired",
                "Too long": "FieldValueTooLong", "Too many": "FieldValueTooMany",
                "Unsupported value": "FieldValueNotSupported", "Duplicate value": "FieldValueDuplicate",
                "Not found": "FieldValueNotFound", "Internal error": "InternalError"}
"""A cause's reason by the words its message starts with (apimachinery ``field.ErrorType`` and its
``String()``; the API server's ``NewInvalid`` sets ``Type: metav1.CauseType(err.Type)``); others are Invalid."""


def _cause(cause: str) -> dict[str, str]:
    field, _, body = cause.partition(": ")
    body = body or cause
    reason = next((t for words, t in _CAUSE_TYPES.items() if body.startswith(words)), "FieldValueInvalid")
    # metav1.StatusCause's Field is omitempty: an error at field.NewPath("") (": Forbidden: ...") has none
    return {"reason": reason, "message": body, "field": field} if field else {"reason": reason, "message": body}


def go_string_slice(values: list[str]) -> str:
    """A ``[]string`` as Go's ``%#v`` prints it (``[]string{"a", "b"}``): how ``field.Error`` shows a list value."""
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def invalid(kind: str, name: str, causes: list[str], group: str = "") -> ApiError:
    """422 for an object that decodes but fails validation (``details.causes`` is what kubectl lists).

    The message names the kind qualified by its group, as apimachinery's ``NewInvalid`` does
    (``GroupKind.String()``: ``TokenRequest.authentication.k8s.io``; a core kind alone).
    """
    details = status_details(kind, name, group)
    details["causes"] = [_cause(cause) for cause in causes]
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {_aggregate(causes)}', details=details)


def _aggregate(messages: list[str]) -> str:
    """An ``ErrorList.ToAggregate()`` as ``%v`` prints it: one error alone, several (repeats dropped) as ``[a, b]``.

    ``aggregate.Error`` in k8s.io/apimachinery/pkg/util/errors/errors.go.
    """
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def method_not_allowed() -> ApiError:
    """405 for a method no route at the path has: go-restful's answer, as kube-apiserver writes it.

    go-restful's router (jsr311.go ``detectRoute``) refuses it with a ``ServiceError`` carrying an
    ``Allow`` header, and kube-apiserver's ``serviceErrorHandler`` (k8s.io/apiserver/pkg/server/
    handler.go) writes only ``NewGenericServerResponse(405, "", GroupResource{}, "", ...)``: the generic
    message, no resource, empty details, no ``Allow``.
    """
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                    details={})  # fmt: skip


def expired(message: str) -> ApiError:
    """410 for a resourceVersion or continue token older than the kept history."""
    return ApiError(410, "Expired", message)


def resource_version_too_large(requested: int, current: int) -> ApiError:
    """504 for a resourceVersion the store has not reached after the wait (``storage.NewTooLargeResourceVersionError``).

    k8s.io/apiserver/pkg/storage/errors.go: ``NewTimeoutError("Too large resource version: N, current: M",
    resourceVersionTooHighRetrySeconds)`` (1 s, storage/cacher/watch_cache.go) with the cause
    ``ResourceVersionTooLarge``; ``NewTimeoutError`` prefixes ``Timeout: ``.
    """
    return ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        details={"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                 "retryAfterSeconds": 1},
        retry_after=1,
    )


def too_large(limit: int) -> ApiError:
    """413 for a request body over the limit."""
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def unsupported_media_type(content_type: str) -> ApiError:
    """415 for a body content type the endpoint does not accept."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        f'application/json, application/yaml (got "{content_type}")',
    )


def too_many_requests(retry_after: int) -> ApiError:
    """429 with a Retry-After, as the API priority-and-fairness filter answers."""
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        details={"retryAfterSeconds": retry_after},
        retry_after=retry_after,
    )


def internal(message: str) -> ApiError:
    """500 for a server-side failure."""
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def unauthorized() -> ApiError:
    """401 for a request without valid credentials."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def not_acceptable(accept: str) -> ApiError:
    """406 for an Accept header the sandbox cannot serve (protobuf only)."""
    return ApiError(
        406,
        "NotAcceptable",
        f"only the following media types are accepted: application/json, application/yaml (asked for {accept})",
    )


REQUEST_TIMEOUT_MESSAGE = "Timeout: request did not complete within requested timeout - context deadline exceeded"
"""How ``asyncFinisher`` words a write abandoned at its deadline while its storage call runs on
(``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/finisher/finisher.go``: ``NewTimeoutError``
of ``"request did not complete within requested timeout - " + ctx.Err()``). Only writes (create,
update, patch, delete, deletecollection) go through the finisher."""

ALLOTTED_TIMEOUT_MESSAGE = "Timeout: request did not complete within the allotted timeout"
"""How the timeout filter words a request whose handler has not answered by the deadline: every read,
and a write not yet at its finisher (``staging/src/k8s.io/apiserver/pkg/server/filters/timeout.go``,
``WithTimeoutForNonLongRunningRequests``: ``NewTimeoutError("request did not complete within the
allotted timeout", 0)``). client-go shows it as ``the server was unable to return a response in the
time allotted, but may still be processing the request``: the filter writes it as text/plain
(`handler_timeout_body`), so client-go cannot decode it and words the 504 itself
(``NewGenericServerResponse`` in ``k8s.io/apimachinery/pkg/api/errors/errors.go``)."""


INVALID_TIMEOUT_IN_URL = "invalid timeout specified in the request URL"
"""The start of the 400 for a ``timeout`` parameter that is not a Go duration (``invalidTimeoutInURL`` in
``staging/src/k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go``; Go's parse error follows)."""


def request_timeout() -> ApiError:
    """504 ``Timeout`` for a write abandoned at its deadline by its finisher (`REQUEST_TIMEOUT_MESSAGE`)."""
    return ApiError(504, "Timeout", REQUEST_TIMEOUT_MESSAGE, details={})  # NewTimeoutError: RetryAfterSeconds 0


HANDLER_TIMEOUT_CONTENT_TYPE = "text/plain; charset=utf-8"
"""The timeout filter's 504 sets no Content-Type, so Go's ``net/http`` sniffs one from the body
(``http.DetectContentType``: JSON text is ``text/plain; charset=utf-8``)."""


def handler_timeout_body() -> bytes:
    """The body of the timeout filter's 504 (`ALLOTTED_TIMEOUT_MESSAGE`), byte for byte.

    ``baseTimeoutWriter.timeout`` in ``staging/src/k8s.io/apiserver/pkg/server/filters/timeout.go``
    encodes ``err.ErrStatus`` with ``json.NewEncoder``: not negotiated, so no ``kind`` or
    ``apiVersion`` (its TypeMeta is empty and omitted), and ``Encode`` ends it with a newline.
    """
    status = ApiError(504, "Timeout", ALLOTTED_TIMEOUT_MESSAGE, details={}).status()
    del status["kind"], status["apiVersion"]
    return json.dumps(status, separators=(",", ":")).encode() + b"\n"


def status_for(code: int, message: str = "injected fault") -> ApiError:
    """An error for an arbitrary status code (fault injection), with the reason the real server uses."""
    reasons = {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Expired",
        413: "RequestEntityTooLarge",
        415: "UnsupportedMediaType",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
    }
    return ApiError(code, reasons.get(code, "InternalError" if code >= 500 else "BadRequest"), message)


def success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``Status`` body for a successful action (binding, delete of most kinds)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    if code != 200:
        body["code"] = code
    return body
