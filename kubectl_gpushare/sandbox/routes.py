"""The Kubernetes REST surface: turns a parsed HTTP request into a response, without sockets.

Owns URL routing (``/api/v1/...``, ``/apis/<group>/<version>/...``, discovery, OpenAPI), verb
semantics (get, list, watch, create, update, patch, delete, deletecollection, binding), content
negotiation (JSON, YAML bodies, ``meta.k8s.io`` Tables) and the mapping of failures to ``Status``
responses. Storage is delegated to ``store.py`` and object rules to ``objects.py``. It must not
touch sockets or threads beyond waiting on the store for watch events; ``server.py`` does HTTP.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, NoReturn, Protocol

import msgspec

from kubectl_gpushare.kube.deadlines import seconds_duration
from kubectl_gpushare.kube.go_format import go_quote
from kubectl_gpushare.kube.go_query import GoQuery, clean_path, go_bool, go_text
from kubectl_gpushare.sandbox import (
    bodies,
    discovery,
    errors,
    finalization,
    ipam,
    logs,
    objects,
    patch,
    protobuf,
    proxy,
    tables,
)
from kubectl_gpushare.sandbox.admission import Admission, Attributes
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.resources import BY_PLURAL, Resource, resource_for, verbs_of
from kubectl_gpushare.sandbox.selectors import (
    FieldSelector,
    LabelSelector,
    ListOptions,
    SelectorError,
    convert_field_labels,
    decode_list_options,
    fields_match,
    labels_match,
)
from kubectl_gpushare.sandbox.store import Change, Entry, ExpiredError, Store, object_key
from kubectl_gpushare.sandbox.tokens import ANONYMOUS, Tokens, UserInfo

_encode = msgspec.json.Encoder().encode
JSON = "application/json"
DEFAULT_WATCH_TIMEOUT = 1800.0
"""Seconds a watch without ``timeoutSeconds`` (or with 0) lasts: kube-apiserver's ``--min-request-timeout``
(1800), which ``ListResource`` (k8s.io/apiserver/pkg/endpoints/handlers/get.go) stretches by a random
factor of 1 to 2; fixed here, at its low end."""
BLOCK_TIMEOUT = 3.0
"""How long a get, a list (or a watch with ``sendInitialEvents``) at a resourceVersion the store has not reached
waits for it before the 504: the watch cache's ``blockTimeout`` (k8s.io/apiserver/pkg/storage/cacher/
watch_cache.go). Fixed, as upstream's is: a client's retry timing depends on it."""
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class Headers(Protocol):
    """Read access to request headers, case-insensitive (``http.client.HTTPMessage`` fits)."""

    def get(self, name: str, /) -> str | None:
        """The header's value, or None."""
        ...


@dataclass
class Request:
    """An HTTP request as the routes see it (headers looked up case-insensitively)."""

    method: str
    path: str
    query: GoQuery
    """Read once, as kube-apiserver reads it: a name gives its first value (``server.py`` parses it)."""
    headers: Headers
    body: bytes = b""
    user: UserInfo = ANONYMOUS
    """Who sent it (``server.py`` authenticates); admission policies see it as ``request.userInfo``."""
    chunked: bool = False
    """Whether the body came chunked (Go's ``req.ContentLength == -1``): the pod proxy sends it so (`proxy.forward`)."""


@dataclass
class Response:
    """What to send back: a whole body, or a ``stream`` (a watch's chunks; a pod's relayed reply)."""

    status: int
    body: bytes = b""
    content_type: str = JSON
    headers: list[tuple[str, str]] = field(default_factory=list)
    """Header lines besides the content type and framing, in order; a name may repeat (a pod's ``Set-Cookie``)."""
    stream: Iterator[bytes] | None = None
    length: int | None = None
    """The ``stream``'s Content-Length where it is known (a pod's long reply, `proxy.forward`); None: chunked."""
    sized: bool = True
    """Whether the server frames ``body`` with a Content-Length of its own. Not the pod proxy's reply to a HEAD:
    its ``headers`` carry the pod's, or none (`proxy.relayed_headers`), as Go's server keeps a handler's and adds
    none to an empty HEAD reply (src/net/http/server.go ``chunkWriter.writeHeader``: ``!isHEAD || len(p) > 0``)."""


class DroppedConnectionError(Exception):
    """Raised inside a watch stream to break the connection off without the final chunk."""


@dataclass
class Target:
    """A resolved request: which resource, object, subresource and verb."""

    verb: str = ""
    resource: Resource | None = None
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    group: str = ""
    document: dict[str, Any] | None = None
    """The answer for non-resource URLs (discovery, version, OpenAPI)."""
    proxy_path: str = ""
    """For ``pods/proxy``: the path after ``/proxy``, decoded, bytes as surrogate escapes (`proxy.forward`)."""
    request_path: str = ""
    """For ``pods/proxy``: the whole decoded path, as Go's ``URL.Path`` holds it (a redirect's ``Location``)."""
    namespace_missing: bool = False
    """An object's path with an empty {namespace} segment: refused once the handler read what it reads first."""


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    """A JSON response."""
    return Response(status, _encode(body), headers=list((headers or {}).items()))


def error_response(error: ApiError) -> Response:
    """The ``Status`` response for an error."""
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else {}
    return json_response(error.code, error.status(), {**error.headers, **headers})


def resolve(method: str, path: str, query: Mapping[str, str]) -> Target:
    """Route a request to a resource and verb, or to a discovery document.

    ``path`` is the decoded path, as Go's ``URL.Path`` holds it (`kube.go_query.unescape_path`: bytes
    that are not UTF-8 as surrogate escapes): kube-apiserver's ``RequestInfoFactory.NewRequestInfo``
    (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go) splits ``req.URL.Path`` on ``/``, and
    go-restful routes on it, so ``p%31`` names ``p1`` and a ``%2F`` splits a segment in two. Names
    are read as text (`go_text`); the pod proxy's subpath keeps the bytes.

    Raises:
        ApiError: 404 for unknown paths, 405 for verbs a route does not allow, 400 for an empty
            name segment, or a pod proxy path's empty name or namespace
            (`_require_name_and_namespace`); an object's empty namespace is `Target.namespace_missing`.
    """
    if not path.startswith("/"):  # "*", or "" (an opaque "scheme:x" target): Go's mux finds no route for them
        raise errors.path_not_found()
    # go-restful's CurlyRouter (tokenizePath with TrimRightSlashEnabled, v3.11's default) and splitPath
    # both drop the trailing "/"s and keep an empty segment inside: one in a literal's place ("api",
    # "namespaces", a resource, a subresource) matches no route, one in a parameter's place
    # ({namespace}, {name}) matches it as "" (matchesRouteByPathTokens checks nothing of a parameter).
    exact = path.rstrip("/").split("/")[1:]  # "/" is one byte: the text parts line up with these
    parts = [go_text(part) for part in exact]
    if not parts:
        return Target(
            document={"paths": ["/api", "/api/v1", "/apis", "/openapi/v2", "/openapi/v3", "/version", "/healthz"]}
        )
    head = parts[0]
    if len(parts) == 1 and head in ("healthz", "livez", "readyz"):
        return Target(document={"_text": "ok"})
    if head == "version" and len(parts) == 1:
        _discovery_get_only(method)
        return Target(document=dict(discovery.VERSION))
    if head == "openapi":
        return _resolve_openapi(parts)
    if head == "api":
        if len(parts) == 1:
            _discovery_get_only(method)
            return Target(document=discovery.api_versions())
        group, version, rest = "", parts[1], parts[2:]
    elif head == "apis":
        if len(parts) == 1:
            return Target(document=discovery.api_group_list())
        if len(parts) == 2:
            doc = discovery.api_group(parts[1])
            if doc is None:
                raise errors.path_not_found()
            return Target(document=doc)
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise errors.path_not_found()
    if not rest:
        doc = discovery.resource_list(group, version)
        if doc is None:
            raise errors.path_not_found()
        _discovery_get_only(method)
        return Target(document=doc)
    if rest[0] == "watch" and len(rest) > 1:  # the deprecated /api/v1/watch/... form
        if method != "GET":
            raise errors.method_not_allowed()
        rest = rest[1:]
        query = {**query, "watch": "true"}
    namespace = ""
    in_namespace = False  # the path names a namespace, even an empty one (namespaces//pods)
    named = False  # the path has a {name} segment, even an empty one (pods//status)
    if rest[0] == "namespaces" and len(rest) >= 3 and group == "":
        if rest[2] in ("status", "finalize") and len(rest) == 3:
            plural, name, sub, named = "namespaces", rest[1], rest[2], True
            rest = []
        else:
            namespace, rest, in_namespace = rest[1], rest[2:], True
    elif rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest, in_namespace = rest[1], rest[2:], True
    if group == "" and in_namespace and len(rest) >= 3 and rest[0] == "pods" and rest[2] == "proxy":
        verb = proxy.PROXY_VERBS.get(method)
        if verb is None:
            raise errors.method_not_allowed()
        _require_name_and_namespace(rest[1], namespace)
        # The subpath as getRequestOptions (endpoints/handlers/rest.go) builds it from RequestInfo.Parts:
        # what follows "proxy", joined, with a leading "/" and the decoded path's trailing one.
        after = exact[len(exact) - len(rest) + 3:]  # rest is a tail of parts, which line up with exact
        subpath = "".join("/" + part for part in after) + ("/" if path.endswith("/") else "")
        return Target(verb, resource_for("", version, "pods"), namespace, rest[1], "proxy", "", proxy_path=subpath,
                      request_path=path)  # fmt: skip
    if rest:
        if len(rest) > 3:
            raise errors.path_not_found()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        named = len(rest) > 1
    resource = resource_for(group, version, plural)
    if resource is None or (in_namespace and not resource.namespaced):
        raise errors.path_not_found()
    if sub and sub not in resource.subresources:
        raise errors.path_not_found()
    if resource.namespaced and not in_namespace and (named or method not in ("GET",)):
        if named:
            raise errors.path_not_found()
        raise errors.method_not_allowed()
    verb = _verb(method, named, sub, query)
    if not sub and verb not in verbs_of(resource):
        raise errors.method_not_allowed()
    if named and not name:
        raise errors.bad_request(EMPTY_NAME)
    missing = named and in_namespace and not namespace
    return Target(verb, resource, namespace, name, sub, group, namespace_missing=missing)


EMPTY_NAME: Final = "name must be provided"
"""``errEmptyName`` (k8s.io/apiserver/pkg/endpoints/handlers/namer.go), before the handler reads a body."""
NAMESPACE_REQUIRED: Final = "Namespace parameter required."
"""``NamespaceKeyFunc``'s refusal of an empty namespace (registry/generic/registry/store.go), when the store
builds the object's key: after the handler decoded the body (`Api._refuse_without_namespace`)."""


def _scale_body(body: Any) -> dict[str, Any]:
    """A ``scale`` update's body (a patched Scale too) as its handler decodes it: an object, else a 400.

    Raises:
        ApiError: 400 for a body that is no JSON object.
    """
    if not isinstance(body, dict):
        raise errors.bad_request("json: cannot unmarshal into Go value of type autoscaling.Scale")
    return body


def _require_name_and_namespace(name: str, namespace: str) -> None:
    """Refuse a pod proxy path whose {name} or {namespace} segment is empty, as kube-apiserver does.

    The handlers read the name from RequestInfo and refuse an empty one (``errEmptyName`` in
    k8s.io/apiserver/pkg/endpoints/handlers/namer.go: 400 ``name must be provided``); the store then
    builds the object's key, which needs a namespace (``NamespaceKeyFunc`` in
    registry/generic/registry/store.go: 400 ``Namespace parameter required.``). A collection under an
    empty namespace is every namespace's (``NamespaceKeyRootFunc``), so lists and watches go on.

    Raises:
        ApiError: 400 for an empty name, then for an empty namespace.
    """
    if not name:
        raise errors.bad_request(EMPTY_NAME)
    if not namespace:
        raise errors.bad_request(NAMESPACE_REQUIRED)


def _verb(method: str, named: bool, sub: str, query: Mapping[str, str]) -> str:
    if sub in ("binding", "token"):
        if method != "POST":
            raise errors.method_not_allowed()
        return "create"
    if sub == "log":
        if method != "GET":
            raise errors.method_not_allowed()
        return "get"
    table = {
        ("GET", True): "get",
        ("GET", False): "watch" if go_bool(query.get("watch")) else "list",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }
    verb = table.get((method, named))
    if verb is None or (sub in ("status", "scale") and verb not in ("get", "update", "patch")):
        raise errors.method_not_allowed()
    return verb


def _discovery_get_only(method: str) -> None:
    """405 for any method but GET on ``/version``, ``/api``, ``/api/v1`` and ``/apis/<group>/<version>``.

    Each is one go-restful route, ``ws.GET("/")`` (k8s.io/apiserver/pkg/server/routes/version.go,
    endpoints/discovery/legacy.go and version.go ``AddToWebService``), and go-restful matches the
    method exactly, HEAD included: `errors.method_not_allowed`. ``/apis`` and ``/apis/<group>`` are the
    aggregator's ``apisHandler`` and ``apiGroupHandler`` (k8s.io/kube-aggregator/pkg/apiserver/
    handler_apis.go), and ``/healthz``, ``/livez``, ``/readyz`` plain mux handlers (server/healthz/
    healthz.go ``handleRootHealth``): none checks the method, so they answer any.
    """
    if method != "GET":
        raise errors.method_not_allowed()


def _resolve_openapi(parts: list[str]) -> Target:
    if parts == ["openapi", "v2"]:
        return Target(document={"_openapi_v2": True})
    if parts == ["openapi", "v3"]:
        return Target(document=discovery.openapi_root())
    if len(parts) > 2 and parts[1] == "v3":
        doc = discovery.openapi_document("/".join(parts[2:]))
        if doc is not None:
            return Target(document=doc)
    raise errors.path_not_found()


def _content_type(request: Request) -> str:
    return (request.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()


def decode_body(request: Request, *, allow_empty: bool = False) -> Any:
    """Decode a JSON or YAML request body; a missing Content-Type means JSON.

    Raises:
        ApiError: 415 for other media types, 400 for bodies that do not decode or break the bounds
            of ``bodies.py`` (invalid UTF-8, deep nesting, YAML aliases).
    """
    content_type = _content_type(request)
    if not request.body.strip():
        if allow_empty:
            return None
        raise errors.bad_request("the request body is empty; expected a JSON object")
    if content_type in ("", JSON, "*/*", "text/plain"):
        try:
            return bodies.decode_json(request.body)
        except bodies.BodyError as exc:
            raise errors.bad_request(f"error decoding the request body as JSON: {exc}") from None
    if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            return bodies.decode_yaml(request.body)
        except bodies.BodyError as exc:
            raise errors.bad_request(f"error decoding the request body as YAML: {exc}") from None
    if content_type == protobuf.MEDIA_TYPE:
        try:
            return protobuf.decode(request.body)
        except protobuf.UnsupportedKindError as exc:
            raise errors.unsupported_media_type(f"{content_type}: {exc}") from None
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(f"error decoding the request body as protobuf: {exc}") from None
    raise errors.unsupported_media_type(content_type)


def _wants_table(request: Request) -> bool:
    accept = request.headers.get("Accept") or ""
    for option in accept.split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in option.split(";")[1:] if "=" in p}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
        if option.split(";")[0].strip() in (JSON, "*/*", "application/*", "") and "as" not in params:
            return False
    return False


def _check_accept(request: Request) -> None:
    accept = request.headers.get("Accept") or ""
    if not accept:
        return
    types = [option.split(";")[0].strip() for option in accept.split(",")]
    if not any(t in (JSON, "*/*", "application/*", "application/yaml") for t in types):
        raise errors.not_acceptable(accept)


_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}


def _dry_run(request: Request, verb: str) -> bool:
    """Whether a create, update or patch is a dry run: its ``dryRun`` query values, checked by `_check_dry_run`."""
    return _check_dry_run(_OPTIONS_KIND[verb], request.query.every_exact("dryRun"))  # a []string: every value


def _check_dry_run(options_kind: str, values: list[str], causes: Iterable[str] = ()) -> bool:
    """Whether a write is a dry run; any ``dryRun`` value but ``All`` is refused before anything is written.

    kube-apiserver validates the options before the write (``ValidateDryRun`` in
    k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go, called through ``ValidateCreateOptions``,
    ``ValidateUpdateOptions``, ``ValidatePatchOptions`` and ``ValidateDeleteOptions`` from the handlers in
    k8s.io/apiserver/pkg/endpoints/handlers): ``dryRun=true`` is a 422, never a real write. The API
    concepts page: "An invalid or unrecognized dryRun directive will result in an error response and no
    further processing of the request." ``ValidateDryRun`` reports the whole list, supported values
    included, as one ``field.NotSupported(fldPath, dryRun, ["All"])``, whose message shows a
    ``[]string`` with ``%#v`` (``field.Error.ErrorBody`` in k8s.io/apimachinery/pkg/util/validation/field/errors.go):
    ``dryRun: Unsupported value: []string{"Bogus", "All"}: supported values: "All"``.

    ``causes`` are the options' other errors (`_propagation_causes`), answered with it in one 422.
    """
    found = list(causes)
    if any(v != "All" for v in values):
        found.append(f'dryRun: Unsupported value: {errors.go_string_slice(values)}: supported values: "All"')
    if found:
        raise errors.invalid(options_kind, "", found, "meta.k8s.io")
    return bool(values)


PROPAGATION_POLICIES: Final = ("Foreground", "Background", "Orphan")
_SUPPORTED_POLICIES: Final = ", ".join(go_quote(p) for p in (*PROPAGATION_POLICIES, "nil"))
"""``field.NotSupported``'s list: each value ``strconv.Quote``-d."""


def _propagation_causes(options: Mapping[str, Any]) -> list[str]:
    """Why a delete's ``propagationPolicy`` is refused, as ``ValidateDeleteOptions`` refuses it.

    k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go: with ``orphanDependents`` it is
    Invalid, anything but the three policies is NotSupported; the delete handlers answer a 422 on
    ``DeleteOptions.meta.k8s.io``. ``options`` are the body's or the query's (`Api._delete_options`).
    """
    policy = options.get("propagationPolicy")
    causes: list[str] = []
    shown = go_quote(str(policy)[:200])  # %#v of the named string type: strconv.Quote; cut, as the query may be huge
    if policy is not None and options.get("orphanDependents") is not None:
        causes.append(f"propagationPolicy: Invalid value: {shown}: orphanDependents and deletionPropagation cannot "
                      "be both set")
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(f"propagationPolicy: Unsupported value: {shown}: supported values: {_SUPPORTED_POLICIES}")
    return causes


def _query_delete_options(query: GoQuery) -> dict[str, Any]:
    """The DeleteOptions a DELETE without a body carries in its query (``ParameterCodec.DecodeParameters``).

    Each single-valued option is its first value (`GoQuery`), ``dryRun`` every value; an option absent
    from the query stays unset (nil), so only what the query names is validated.
    """
    options: dict[str, Any] = {}
    if "dryRun" in query:
        options["dryRun"] = query.every_exact("dryRun")
    if "propagationPolicy" in query:  # as Go holds it: a refusal quotes a byte that is not UTF-8 as \xNN
        options["propagationPolicy"] = query.exact("propagationPolicy")
    if "orphanDependents" in query:
        options["orphanDependents"] = go_bool(query["orphanDependents"])
    return options


def _validate_list_options(query: Mapping[str, str], *, watch: bool) -> None:
    """Refuse the ListOptions combinations kube-apiserver refuses, before reading or deleting anything.

    ``ValidateListOptions`` / ``validateWatchOptions`` in
    k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go, which ``ListResource``
    (list and watch, k8s.io/apiserver/pkg/endpoints/handlers/get.go) and ``DeleteCollection``
    (handlers/delete.go) both run on the decoded ListOptions and answer as a 422 on
    ``ListOptions.meta.k8s.io``; ``watch`` is the options' own ``watch``, which picks the watch rules
    for a collection DELETE too. ``SetListOptionsDefaults``, which both run first, is applied as with
    the WatchList gate on (as the sandbox serves ``sendInitialEvents``): a watch from resourceVersion
    "" or "0" that sets neither ``sendInitialEvents`` nor ``resourceVersionMatch`` is judged as
    ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan``, which only changes the answer to a
    ``continue`` token (refused with such a match). A client that sends these against a real cluster
    fails, so it fails here too.
    """
    match = query.get("resourceVersionMatch", "")
    send_initial = query.get("sendInitialEvents")
    token = query.get("continue", "")
    rv = query.get("resourceVersion", "")
    if watch and send_initial is None and not match and rv in ("", "0"):
        send_initial, match = "true", "NotOlderThan"  # SetListOptionsDefaults, WatchList on (see above)
    causes: list[str] = []
    with_continue = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"
    if watch:
        if send_initial is not None and match != "NotOlderThan":
            causes.append(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                "NotOlderThan"
            )
        if match:
            if send_initial is None:
                causes.append(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                    "sendInitialEvents is provided"
                )
            if match != "NotOlderThan":
                causes.append(
                    f"resourceVersionMatch: Unsupported value: {go_quote(match[:200])}: "
                    'supported values: "NotOlderThan"'
                )
            if token:
                causes.append(with_continue)
    else:
        if match:
            if not rv:
                causes.append(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
                    "is provided"
                )
            if token:
                causes.append(with_continue)
            if match not in ("Exact", "NotOlderThan"):
                causes.append(
                    f"resourceVersionMatch: Unsupported value: {go_quote(match[:200])}: "
                    'supported values: "Exact", "NotOlderThan", ""'
                )
            if match == "Exact" and rv == "0":
                causes.append(
                    'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
                )
        if send_initial is not None:
            causes.append("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
    if causes:
        raise errors.invalid("ListOptions", "", causes, "meta.k8s.io")


def _refuse_continue_at_a_version(query: Mapping[str, str]) -> None:
    """The etcd3 store's 400 for a continue token paired with a resourceVersion other than "0".

    Asked after the token decodes: ``storage.ValidateListOptions`` (k8s.io/apiserver/pkg/storage,
    called by the etcd3 store's ``GetList``) answers a token that does not decode first.
    """
    if query.get("continue", "") and query.get("resourceVersion", "") not in ("", "0"):
        raise errors.bad_request("specifying resource version is not allowed when using continue")


def _list_options(query: GoQuery, resource: Resource) -> ListOptions:
    """Decode and check a request's ListOptions in kube-apiserver's order, or raise the error it answers first.

    ``ListResource`` (list and watch, k8s.io/apiserver/pkg/endpoints/handlers/get.go) and
    ``DeleteCollection`` (handlers/delete.go) do the same three steps before anything is read or deleted:
    ``ParameterCodec.DecodeParameters`` (`decode_list_options`: ``timeoutSeconds``, ``limit``, then
    the label and field selectors), each error a 400; ``ValidateListOptions`` (`_validate_list_options`,
    the 422); then the field selector's ``Transform`` through ``ConvertFieldLabel``, a 400 for a field
    label the kind does not support, in the kind's words (`Resource.refuse_field_label`), the others as it
    converts them (`Resource.convert_field_label`). ``watch`` is
    the options' own, as upstream reads it.
    """
    options = decode_list_options(query)
    _validate_list_options(query, watch=go_bool(query.get("watch")))
    try:
        fields = convert_field_labels(options.fields, resource.refuse_field_label, resource.convert_field_label)
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    return replace(options, fields=fields)


def _watch_timeout(timeout_seconds: int | None) -> float:
    """How many seconds a watch lasts, as ``ListResource`` (k8s.io/apiserver/pkg/endpoints/handlers/get.go) reads it.

    ``time.Duration(*opts.TimeoutSeconds) * time.Second``: an int64 product, which wraps past 2^63-1
    nanoseconds as Go's does; then a zero duration (absent, 0, or a product that wrapped to 0) is the
    default (`DEFAULT_WATCH_TIMEOUT`), and a negative one ends the watch at once. Never NaN, infinite
    or a 5,000-digit number (`errors.int64_option`), which would hold the stream and its thread open for ever.
    """
    if timeout_seconds is None:
        return DEFAULT_WATCH_TIMEOUT
    nanoseconds = seconds_duration(timeout_seconds)
    return DEFAULT_WATCH_TIMEOUT if nanoseconds == 0 else nanoseconds / 1e9


_UINT64_MAX: Final = (1 << 64) - 1


def _resource_version(query: GoQuery) -> int | None:
    """The request's ``resourceVersion`` as the etcd3 versioner reads it; None when unset or "0".

    ``APIObjectVersioner.ParseResourceVersion`` (k8s.io/apiserver/pkg/storage/etcd3/
    api_object_versioner.go) runs Go's ``strconv.ParseUint(text, 10, 64)`` and wraps its error as a
    storage ``InvalidError`` on the field ``resourceVersion``. The etcd3 store's ``GetList`` answers
    it as ``apierrors.NewBadRequest("invalid resource version: " + err)``, and so does the sandbox for
    every list, watch and get. (kube-apiserver's watch cache, which serves most of them, returns the
    error unconverted, a 500 without a reason: kubernetes/kubernetes#101350, #139485. The sandbox
    keeps its rule that bad input is never a 500 and answers the etcd3 store's 400 instead.)

    Raises:
        ApiError: 400 BadRequest, ``invalid resource version: resourceVersion: Invalid value: "abc":
            strconv.ParseUint: parsing "abc": invalid syntax`` (or ``value out of range`` past 2^64-1).
    """
    text = query.exact("resourceVersion")
    if text in ("", "0"):
        return None
    value = 0
    why = ""
    for char in text:  # ParseUint's loop: a non-digit is a syntax error, an overflow a range error, first come
        if not "0" <= char <= "9":
            why = "invalid syntax"
            break
        value = value * 10 + ord(char) - 48
        if value > _UINT64_MAX:
            why = "value out of range"
            break
    if why:
        quoted = go_quote(text)
        raise errors.bad_request(
            f"invalid resource version: resourceVersion: Invalid value: {quoted}: strconv.ParseUint: "
            f"parsing {quoted}: {why}"
        )
    return value


CONTINUE_VERSION: Final = "meta.k8s.io/v1"
_BASE64_URL = re.compile(r"[A-Za-z0-9_-]*")


def _encode_continue(rv: int, key: str) -> str:
    """The continue token kube-apiserver hands out (``storage.EncodeContinue``: unpadded URL-safe base64)."""
    token = json.dumps({"v": CONTINUE_VERSION, "rv": rv, "start": key}).encode()
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    """(resourceVersion, start key) of a token, refused as ``storage.DecodeContinue`` refuses it.

    k8s.io/apiserver/pkg/storage/continue.go, wrapped by the etcd3 store's list as a 400 ``invalid continue
    token: continue key is not valid...``: the reason names what is wrong (the byte where base64 breaks,
    the JSON error, the field, a start key that is not clean), never the token itself. Go's JSON errors
    are matched for their common shapes (an end too early, a bad character, a field of the wrong type).
    """
    bad = "invalid continue token: continue key is not valid"
    legal = _BASE64_URL.match(token)
    assert legal is not None
    if legal.end() < len(token) or len(token) % 4 == 1:  # RawURLEncoding: no padding, no other alphabet
        at = legal.end() if legal.end() < len(token) else len(token) - 1
        raise errors.bad_request(f"{bad}: illegal base64 data at input byte {at}")
    # Go's encoding/json (DecodeContinue's json.Unmarshal) reads each byte of invalid UTF-8 in a string,
    # and a \uD800-style escape of a lone surrogate, as U+FFFD, as a body's strings are read
    # (`bodies.as_go_reads`), and refuses nesting past its maximum depth (scanner.go pushParseState:
    # "invalid character '[' exceeded max depth"); Python's decoder stops sooner, at its recursion
    # limit, and is answered in those words (naming the outermost bracket).
    text = bodies.as_go_reads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))).decode()
    try:
        # A number is kept to its first 64 characters: still out of int64's range when longer (JSON has no
        # leading zeros), named as Go names it, and never past int()'s 4,300-digit limit (a ValueError).
        decoded = json.loads(text, parse_int=lambda digits: int(digits[:64]), parse_constant=_no_constant)
    except _NotGoJsonError as exc:
        raise errors.bad_request(f"{bad}: {exc}") from None
    except RecursionError:
        raise errors.bad_request(f"{bad}: invalid character {text.lstrip()[:1]!r} exceeded max depth") from None
    except ValueError as exc:
        position = exc.pos if isinstance(exc, json.JSONDecodeError) else 0
        if position >= len(text.rstrip()) or str(exc).startswith("Unterminated"):
            raise errors.bad_request(f"{bad}: unexpected end of JSON input") from None
        raise errors.bad_request(
            f"{bad}: invalid character {text[position]!r} looking for beginning of value") from None
    if not isinstance(decoded, dict):
        raise errors.bad_request(f"{bad}: json: cannot unmarshal {_go_json_type(decoded)} into Go value of type "
                                 "storage.continueToken")
    for field_name, go_type, wanted in (("v", "string", str), ("rv", "int64", int), ("start", "string", str)):
        value = decoded.get(field_name)
        if value is None or (isinstance(value, wanted) and not isinstance(value, bool)
                             and not (isinstance(value, int) and not -(1 << 63) <= value < 1 << 63)):
            continue
        kind = _go_json_type(value)
        if kind == "number" and wanted is int:  # a number that is not an int64 is named with its text
            kind = f"number {json.dumps(value)[:64]}"
        raise errors.bad_request(f"{bad}: json: cannot unmarshal {kind} into Go struct field "
                                 f"continueToken.{field_name} of type {go_type}")
    version, rv, start = decoded.get("v") or "", decoded.get("rv") or 0, decoded.get("start") or ""
    if version != CONTINUE_VERSION:
        raise errors.bad_request(f"{bad}: server does not recognize this encoded version {version}")
    if rv == 0:
        raise errors.bad_request(f"{bad}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not start:
        raise errors.bad_request(f"{bad}: encoded start key empty (version meta.k8s.io/v1)")
    # Against path traversal, a key that path.Clean changes is refused, named as it came; the key is
    # read without its leading "/" (DecodeContinue returns keyPrefix + cleaned[1:]).
    key = start if start.startswith("/") else "/" + start
    if clean_path(key) != key:
        raise errors.bad_request(f"{bad}: {start}")
    return int(rv), key[1:]


class _NotGoJsonError(ValueError):
    """JSON that Python's decoder reads and Go's refuses; the message is Go's."""


def _no_constant(name: str) -> object:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity``, which Python's decoder reads and Go's scanner does not.

    src/encoding/json/scanner.go: "N" or "I" cannot begin a value (``stateBeginValue``), and after "-"
    only a digit may come (``stateNeg``).
    """
    if name.startswith("-"):
        raise _NotGoJsonError("invalid character 'I' in numeric literal")
    raise _NotGoJsonError(f"invalid character {name[0]!r} looking for beginning of value")


def _go_json_type(value: object) -> str:
    """How Go's ``encoding/json`` names a JSON value's kind in an ``UnmarshalTypeError``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), "null")


_DELETE_OPTION_TYPES: Final[dict[str, tuple[str, type]]] = {
    "gracePeriodSeconds": ("int64", int),
    "preconditions": ("v1.Preconditions", dict),
    "orphanDependents": ("bool", bool),
    "propagationPolicy": ("v1.DeletionPropagation", str),
    "dryRun": ("[]string", list),
}
"""DeleteOptions' fields (k8s.io/apimachinery/pkg/apis/meta/v1/types.go), Go type and JSON decoded type."""
_PRECONDITION_TYPES: Final = {"uid": "types.UID", "resourceVersion": "string"}
_INT64: Final = range(-(1 << 63), 1 << 63)


def _mistyped_delete_option(body: dict[str, Any]) -> str | None:
    """The first DeleteOptions field in ``body`` Go's decoder refuses, in ``UnmarshalTypeError``'s words.

    Go's encoding/json (sigs.k8s.io/json) reports the earliest mistyped value in body order, named by its
    innermost struct and its field path; the delete handlers (handlers/delete.go, since kube-apiserver
    1.35, kubernetes/kubernetes#133358) answer it as a 400 BadRequest (a 500 before). A JSON null is an
    unset field, and a null ``dryRun`` element the empty string Go leaves there (replaced in ``body``).
    Differs: a number that is no int64 is shown as Python prints it, not as the literal sent.
    """
    for name, value in body.items():
        if value is None or name not in _DELETE_OPTION_TYPES:
            continue
        go_type, wanted = _DELETE_OPTION_TYPES[name]
        struct, shown = f"DeleteOptions.{name}", _go_json_type(value)
        if wanted is int and shown == "number" and not (isinstance(value, int) and value in _INT64):
            return f"json: cannot unmarshal number {value} into Go struct field {struct} of type {go_type}"
        if isinstance(value, bool) is not (wanted is bool) or not isinstance(value, wanted):
            return f"json: cannot unmarshal {shown} into Go struct field {struct} of type {go_type}"
        if isinstance(value, list):  # dryRun
            for index, item in enumerate(value):
                if item is None:
                    value[index] = ""
                elif not isinstance(item, str):
                    return f"json: cannot unmarshal {_go_json_type(item)} into Go struct field {struct} of type string"
        if isinstance(value, dict):  # preconditions
            for key, inner in value.items():
                if key in _PRECONDITION_TYPES and inner is not None and not isinstance(inner, str):
                    return (f"json: cannot unmarshal {_go_json_type(inner)} into Go struct field "
                            f"Preconditions.preconditions.{key} of type {_PRECONDITION_TYPES[key]}")
    return None


_META_SCHEME: Final = "pkg/apis/meta/internalversion/scheme/register.go:27"
"""The name Go gave the scheme a DELETE's body is decoded with: its ``runtime.NewScheme`` call site."""
_META_ANY_VERSION: Final = frozenset({"Status", "APIVersions", "APIGroupList", "APIGroup", "APIResourceList",
                                      "CreateOptions", "UpdateOptions"})
"""Kinds that scheme registers unversioned besides DeleteOptions: made whatever the apiVersion."""
_META_V1: Final = frozenset({"WatchEvent", "ListOptions", "GetOptions", "PatchOptions", "Table", "TableOptions",
                             "PartialObjectMetadata", "PartialObjectMetadataList"})
"""Kinds that scheme knows in ``meta.k8s.io/v1`` only (``metav1.AddToGroupVersion``, ``AddMetaToScheme``)."""


def _foreign_delete_body(body: Mapping[str, Any]) -> str | None:
    """Why a DELETE's body is no DeleteOptions by its ``apiVersion`` and ``kind``, None when it is one.

    ``DeleteResource`` (handlers/delete.go) decodes the body with the meta scheme
    (k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme) defaulting to ``meta.k8s.io/v1``
    DeleteOptions, which that scheme registers unversioned, so any apiVersion goes with kind
    DeleteOptions (or none). The JSON serializer first reads the two fields (``SimpleMetaFactory.Interpret``
    in runtime/serializer/json/meta.go, then ``schema.ParseGroupVersion``); a kind the scheme does not
    know is ``runtime.NewNotRegisteredErrForKind`` from ``Scheme.New``, one it knows fails the conversion
    into DeleteOptions (kubernetes#132359 shows ``converting (v1.APIResourceList) to (v1.DeleteOptions):
    unknown conversion``). Since 1.35 (kubernetes#133358) each is a 400. Only the single DELETE: a
    deletecollection decodes with its group's scheme, whose words are not modelled here.
    """
    for name in ("apiVersion", "kind"):  # Interpret's anonymous struct: the first mistyped in body order
        value = body.get(name)
        if value is not None and not isinstance(value, str):
            return (f"couldn't get version/kind; json parse error: json: cannot unmarshal {_go_json_type(value)} "
                    f"into Go struct field .{name} of type string")
    api_version, kind = body.get("apiVersion") or "", body.get("kind") or ""
    if api_version.count("/") > 1:
        return f"unexpected GroupVersion string: {api_version}"
    if kind in ("", "DeleteOptions"):
        return None
    group, _, version = api_version.rpartition("/") if api_version != "/" else ("", "", "")
    if not group and not version:
        group, version = "meta.k8s.io", "v1"  # gvkWithDefaults: the default GVK's group and version
    elif not version and group == "meta.k8s.io":
        version = "v1"
    if kind in _META_ANY_VERSION or (group, version, kind in _META_V1) == ("meta.k8s.io", "v1", True):
        return f"converting (v1.{kind}) to (v1.DeleteOptions): unknown conversion"
    shown_version = f"{group}/{version}" if group else version
    return f'no kind "{kind}" is registered for version "{shown_version}" in scheme "{_META_SCHEME}"'


def _delete_precondition_refused(
    resource: Resource, name: str, meta: Mapping[str, Any], preconditions: Mapping[str, Any]
) -> errors.ApiError | None:
    """The 409 for a DELETE whose ``preconditions`` the object fails, None when it meets them.

    A precondition is set when it is not null, so an empty ``uid`` or ``resourceVersion`` fails too.
    A namespace's storage (pkg/registry/core/namespace/storage/storage.go ``Delete``) checks them in its
    own words on ``namespaces``; every other kind's store.go ``Delete`` first calls ``rest.BeforeDelete``
    (k8s.io/apiserver/pkg/registry/rest/delete.go), whose conflict names the kind, not the resource.
    """
    checks = (("uid", "UID", "deleted and then recreated"), ("resourceVersion", "ResourceVersion", "modified"))
    for key, label, why in checks:
        wanted, found = preconditions.get(key), meta.get(key, "")
        if wanted is None or wanted == found:
            continue
        if resource.plural == "namespaces":
            return errors.conflict("namespaces", name, f"Precondition failed: {label} in precondition: {wanted}, "
                                   f"{label} in object meta: {found}")
        return errors.conflict(resource.kind, name, f"the {label} in the precondition ({wanted}) does not match the "
                               f"{label} in record ({found}). The object might have been {why}", resource.group)
    return None


class Api:
    """The REST semantics over a `Store` (one per sandbox).

    Args:
        store: where objects live.
        bookmark_interval: seconds between BOOKMARK events on watches that allow them.
    """

    def __init__(self, store: Store, *, bookmark_interval: float = 5.0) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self.stopping = threading.Event()
        self.proxy_targets = proxy.ProxyTargets()
        self._watch_lock = threading.Lock()
        # Weak, so a stream whose generator never ran (client gone before the headers) is forgotten.
        self._watch_drops: weakref.WeakSet[threading.Event] = weakref.WeakSet()
        self.logs = logs.ContainerLogs()
        """What the fake containers printed (the kubelet stand-in writes it; ``pods/log`` reads it)."""
        self.tokens = Tokens(self._lookup)
        """Bearer tokens, service-account tokens minted here included (``server.py`` authenticates with them)."""
        self.admission = Admission(store)
        self.node_cidrs = ipam.NodeCIDRAllocator(
            lambda: ((e.object().get("spec") or {}).get("podCIDR") for e in store.entries("nodes")),
            lambda: store.count("nodes"))

    def _lookup(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        entry = self.store.get(plural, object_key(namespace, name))
        return None if entry is None else entry.object()

    # --- entry point ---------------------------------------------------------------------------
    def handle(self, request: Request, target: Target) -> Response:
        """Serve a resolved request; errors become ``Status`` responses."""
        try:
            if target.document is not None:
                if "_text" in target.document:
                    return Response(200, b"ok", "text/plain")
                if "_openapi_v2" in target.document:
                    if "protobuf" in (request.headers.get("Accept") or ""):
                        return Response(200, discovery.openapi_v2_protobuf(), discovery.OPENAPI_V2_PROTOBUF)
                    return json_response(200, discovery.openapi_v2_json())
                return json_response(200, target.document)
            return self._dispatch(request, target)
        except ApiError as error:
            return error_response(error)

    def _dispatch(self, request: Request, target: Target) -> Response:
        assert target.resource is not None
        if target.subresource == "proxy":
            return self._proxy(request, target)
        logs_read = target.subresource == "log"  # plain text, whatever the client accepts, as kube-apiserver sends it
        if target.verb in ("get", "list", "watch") and not logs_read:
            _check_accept(request)
        if target.namespace_missing:
            self._refuse_without_namespace(request, target)
        if logs_read:
            options = logs.log_options(request.query, target.name)  # its 400 or 422 comes before the pod's 404
            return Response(200, logs.pod_log(self._entry(target).object(), options, self.logs), "text/plain")
        if target.subresource == "binding" or target.resource.plural == "bindings":
            return self._bind(request, target)
        if target.subresource == "scale":
            return self._scale(request, target)
        if target.subresource == "token":
            return json_response(201, self.tokens.request_token(target.namespace, target.name, decode_body(request)))
        handler = {
            "get": self._get,
            "list": self._list,
            "watch": self._watch,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }[target.verb]
        return handler(request, target)

    def _refuse_without_namespace(self, request: Request, target: Target) -> NoReturn:
        """Refuse an object's request whose {namespace} is empty where the store would, after its body is read.

        The handlers take the name from RequestInfo (an empty one is refused first, by `resolve`), read
        their options and body, and only then call the store, whose key needs the namespace
        (`NAMESPACE_REQUIRED`): a create (``handlers/create.go``: a binding, a token) and an update
        (``update.go``, its ``checkName`` included) decode their body, a delete its DeleteOptions
        (``delete.go``), so a bad body is their 400 first. A get negotiated its output (406, before this
        call); a patch's store call reads the key before it applies the patch (``patch.go``); the
        logs go to the store at once.

        Raises:
            ApiError: what the handler refuses first, else 400 `NAMESPACE_REQUIRED`.
        """
        resource = target.resource
        assert resource is not None
        if target.verb in ("create", "update"):
            _dry_run(request, target.verb)
            body = decode_body(request)
            if target.subresource == "scale":  # an autoscaling/v1 Scale, not the workload
                _scale_body(body)
            elif target.verb == "update":
                objects.check_types(resource, body)
                objects.check_url_name(body, target.name)
            elif target.subresource == "binding":
                objects.check_types(BY_PLURAL["bindings"], body)
        elif target.verb == "delete":
            self._delete_options(request, collection=False)
        raise errors.bad_request(NAMESPACE_REQUIRED)

    def _proxy(self, request: Request, target: Target) -> Response:
        """Relay to the pod's registered target (`sandbox.proxy`)."""
        _, name, _ = proxy.split_scheme_name_port(target.name)
        entry = self.store.get("pods", object_key(target.namespace, name))
        if entry is None:
            raise errors.not_found("pods", name)
        headers = {key: value for key in proxy.FORWARDED_HEADERS if (value := request.headers.get(key))}
        status, content_type, relayed, body, length = proxy.forward(
            self.proxy_targets, entry.object(), target.name, request.method, target.proxy_path, request.query.raw,
            headers, request.body, whole_path=target.request_path, chunked=request.chunked,
        )  # fmt: skip
        if isinstance(body, bytes):
            return Response(status, body, content_type=content_type, headers=relayed, sized=request.method != "HEAD")
        return Response(status, content_type=content_type, headers=relayed, stream=body, length=length)

    # --- reads ---------------------------------------------------------------------------------
    def _entry(self, target: Target) -> Entry:
        assert target.resource is not None
        entry = self.store.get(target.resource.plural, object_key(target.namespace, target.name))
        if entry is None:
            raise errors.not_found(target.resource.plural, target.name, target.resource.group)
        return entry

    def _get(self, request: Request, target: Target) -> Response:
        assert target.resource is not None
        # A get's resourceVersion is "NotOlderThan": cacher.go Get serves it from the watch cache's
        # WaitUntilFreshAndGet, which waits as a list does (the same 504) before it looks the key up.
        self._wait_until_fresh(_resource_version(request.query))  # a 400 when it is no uint64, as for a list
        entry = self._entry(target)
        if _wants_table(request):
            obj = entry.object()
            rv = obj["metadata"].get("resourceVersion", "")
            return json_response(200, tables.table(target.resource, [obj], {"resourceVersion": rv}, _include(request)))
        return Response(200, entry.raw)

    def _list(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        options = _list_options(request.query, resource)
        labels, fields, limit = options.labels, options.fields, options.limit
        after = ""
        token_rv = 0
        token = request.query.get("continue", "")
        if token:
            token_rv, after = _decode_continue(token)
            _refuse_continue_at_a_version(request.query)
            if token_rv < self.store.compacted_rv:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter."
                )
        if request.query.get("resourceVersion") == "0" and not token:
            limit = 0  # served "from the cache", which ignores limit, as kube-apiserver does
        elif not token:
            self._wait_until_fresh(_resource_version(request.query))
        found, rv, last, remaining = self.store.select(
            resource.plural, target.namespace, labels, fields, limit=limit, after=after
        )
        # Every page reports the first page's resourceVersion, as kube-apiserver's snapshot does: a
        # watch started from it replays whatever changed while the client paged (never misses it).
        list_rv = token_rv if token else rv
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if last:
            metadata["continue"] = _encode_continue(list_rv, last)
            if remaining >= 0:
                metadata["remainingItemCount"] = remaining
        if _wants_table(request):
            return json_response(200, tables.table(resource, [e.object() for e in found], metadata, _include(request)))
        return Response(200, _list_body(resource, metadata, [e.raw for e in found]))

    def _wait_until_fresh(self, rv: int | None) -> None:
        """Block until the store reaches ``rv``, as the watch cache's ``waitUntilFreshAndBlock`` does.

        Raises:
            ApiError: 504 ``Too large resource version`` once `BLOCK_TIMEOUT` passes without it.
        """
        if rv is not None and not self.store.wait_for(rv, BLOCK_TIMEOUT):
            raise errors.resource_version_too_large(rv, self.store.resource_version)

    # --- watch ---------------------------------------------------------------------------------
    def open_watches(self) -> int:
        """How many watch streams are being served now (a client's request may not have arrived yet)."""
        with self._watch_lock:
            return len(self._watch_drops)

    def drop_watches(self) -> None:
        """Break off every open watch stream (the clients see a dropped connection)."""
        with self._watch_lock:
            drops = list(self._watch_drops)
        for drop in drops:
            drop.set()
        with self.store.changed:
            self.store.changed.notify_all()

    def _watch(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        options = _list_options(request.query, resource)
        labels, fields = options.labels, options.fields
        query = request.query
        timeout = _watch_timeout(options.timeout_seconds)
        rv = _resource_version(query)  # a 400 when it is no uint64
        send_initial = go_bool(query.get("sendInitialEvents"))
        bookmarks = go_bool(query.get("allowWatchBookmarks"))
        table = _wants_table(request)
        include = _include(request)
        initial: list[Entry] = []
        expired: ApiError | None = None
        if send_initial:
            # Only a watch-list waits (cacher.go Watch: waitUntilWatchCacheFreshAndForceAllEvents); its
            # 504 is the stream's ERROR event (newErrWatcher), not the response's code. A plain watch
            # from a future resourceVersion opens at once and stays quiet until the store passes it.
            try:
                self._wait_until_fresh(rv)
            except ApiError as error:
                expired = error
        with self.store.lock:
            if rv is None or send_initial:
                initial = self.store.select(resource.plural, target.namespace, labels, fields)[0]
                start_rv = self.store.resource_version
                cursor = self.store.cursor_after(start_rv)
            else:
                start_rv = rv
                try:
                    cursor = self.store.cursor_after(start_rv)
                except ExpiredError as exc:
                    expired, cursor = errors.expired(str(exc)), 0
        drop = threading.Event()
        with self._watch_lock:  # registered before the headers go out: a drop right after them counts
            self._watch_drops.add(drop)
        stream = self._stream(
            resource,
            target.namespace,
            labels,
            fields,
            initial,
            cursor,
            start_rv,
            timeout,
            bookmarks=bookmarks,
            send_initial=send_initial,
            table=table,
            include=include,
            expired=expired,
            drop=drop,
        )
        return Response(200, stream=stream)

    def _stream(
        self,
        resource: Resource,
        namespace: str,
        labels: LabelSelector,
        fields: FieldSelector,
        initial: list[Entry],
        cursor: int,
        last_rv: int,
        timeout: float,
        *,
        bookmarks: bool,
        send_initial: bool,
        table: bool,
        include: str,
        expired: ApiError | None,
        drop: threading.Event,
    ) -> Iterator[bytes]:
        headers = [True]

        def event(kind: str, entry: Entry) -> bytes:
            if table:
                obj = tables.table(resource, [entry.object()], {"resourceVersion": ""}, include, headers=headers[0])
                headers[0] = False
                return b'{"type":"' + kind.encode() + b'","object":' + _encode(obj) + b"}\n"
            return b'{"type":"' + kind.encode() + b'","object":' + entry.raw + b"}\n"

        def bookmark(rv: int, end_of_initial: bool = False) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if end_of_initial:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            body = {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}
            return _encode({"type": "BOOKMARK", "object": body}) + b"\n"

        if expired is not None:
            yield _encode({"type": "ERROR", "object": expired.status()}) + b"\n"
            return
        since = last_rv  # cache_watcher.go process: only events newer than the watch's resourceVersion
        try:
            if drop.is_set():
                raise DroppedConnectionError()
            deadline = time.monotonic() + timeout
            for entry in initial:
                yield event("ADDED", entry)
            if send_initial:
                yield bookmark(last_rv, end_of_initial=True)
            last_bookmark = time.monotonic()
            while True:
                if drop.is_set():
                    raise DroppedConnectionError()
                now = time.monotonic()
                if now >= deadline or self.stopping.is_set() or self.store.closed:
                    return
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(0.01, last_bookmark + self.bookmark_interval - now))
                try:
                    changes, cursor = self.store.changes_since(cursor, min(wait, 1.0), drop)
                except ExpiredError as exc:
                    yield _encode({"type": "ERROR", "object": errors.expired(str(exc)).status()}) + b"\n"
                    return
                for change in changes:
                    if drop.is_set():  # a dropped connection carries nothing more, not even what was waiting
                        raise DroppedConnectionError()
                    if change.rv <= since:
                        continue
                    last_rv = change.rv
                    kind = _visible(change, resource, namespace, labels, fields)
                    if kind:
                        yield event(kind, change.entry)
                if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                    # Past the last event sent only when no change is waiting for this watcher: a write
                    # that landed since the wait ended goes out as its event first (cache_watcher.go
                    # sends a bookmark in order with the events, never ahead of them).
                    reached = self.store.caught_up(cursor)
                    if reached is not None and reached >= last_rv:  # never a version the store has not reached
                        last_rv = reached
                        yield bookmark(last_rv)
                    elif reached is None and last_rv > since:
                        yield bookmark(last_rv)
                    last_bookmark = time.monotonic()
        finally:
            with self._watch_lock:
                self._watch_drops.discard(drop)

    # --- writes --------------------------------------------------------------------------------
    def _create(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        dry_run = _dry_run(request, "create")
        body = decode_body(request)
        given = body.get("metadata") if isinstance(body, dict) else None
        given_name = str(given.get("name") or "") if isinstance(given, dict) else ""  # before generateName
        obj = objects.prepare_create(resource, body, target.namespace)
        with self.store.lock:
            if resource.namespaced:
                finalization.refuse_new_content(
                    self.store, resource.plural, obj["metadata"]["namespace"], given_name, resource.group
                )
            key = object_key(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if self.store.get(resource.plural, key) is not None:
                raise errors.already_exists(resource.plural, obj["metadata"]["name"], resource.group)
            warnings = self._admit(request, target, "CREATE", obj, None, dry_run)
            if not dry_run:
                if resource.plural == "nodes":
                    self._assign_pod_cidr(obj)
                self.store.put(resource.plural, key, obj)
        return json_response(201, obj, warnings)

    def _assign_pod_cidr(self, node: dict[str, Any]) -> None:
        """kube-controller-manager's node IPAM: a new node without a pod range gets one (`ipam`)."""
        spec = node.setdefault("spec", {})
        if not isinstance(spec, dict) or spec.get("podCIDR"):
            return
        cidr = self.node_cidrs.allocate()
        if cidr is not None:
            spec["podCIDR"] = cidr
            spec["podCIDRs"] = [cidr]

    def _admit(self, request: Request, target: Target, operation: str, new: dict[str, Any] | None,
               old: dict[str, Any] | None, dry_run: bool, kind: tuple[str, str, str] | None = None) -> dict[str, str]:
        """Validating admission (`sandbox.admission`); returns the response's ``Warning`` header, if any."""
        assert target.resource is not None
        verdict = self.admission.validate(Attributes(
            operation, target.resource, target.subresource, target.namespace,
            target.name or str(((new or {}).get("metadata") or {}).get("name") or ""), new, old, request.user,
            dry_run, kind))  # fmt: skip
        if not verdict.warnings:
            return {}
        return {"Warning": ", ".join('299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"'
                                     for w in verdict.warnings)}

    def _write_update(
        self, request: Request, target: Target, old: dict[str, Any], new: dict[str, Any], dry_run: bool
    ) -> Response:
        resource = target.resource
        assert resource is not None
        old_rv = old["metadata"]["resourceVersion"]
        new["metadata"]["resourceVersion"] = old_rv
        warnings = self._admit(request, target, "UPDATE", new, old, dry_run)
        key = object_key(target.namespace, target.name)
        if finalization.deletes_on_update(resource.plural, old, new):
            # store.go Update: the last finalizer gone from an object being deleted deletes it
            # (deleteWithoutFinalizers), replying with the updated object.
            if not dry_run:
                finalization.remove(self.store, resource.plural, key)
            return json_response(200, new, warnings)
        if new == old or dry_run:
            return json_response(200, new, warnings)
        self.store.put(resource.plural, key, new)
        return json_response(200, new, warnings)

    def _update(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        dry_run = _dry_run(request, "update")
        body = decode_body(request)
        with self.store.lock:
            entry = self.store.get(resource.plural, object_key(target.namespace, target.name))
            if entry is None:
                if resource.plural == "events" and not target.subresource:
                    return self._create(request, target)
                raise errors.not_found(resource.plural, target.name, resource.group)
            old = entry.object()
            new = objects.prepare_update(resource, old, body, target.name, target.subresource)
            return self._write_update(request, target, old, new, dry_run)

    def _patch(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        content_type = _content_type(request)
        kind = PATCH_TYPES.get(content_type)
        if kind is None:
            raise errors.unsupported_media_type(content_type)
        dry_run = _dry_run(request, "patch")
        try:
            body = bodies.decode_json(request.body)
        except bodies.BodyError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from None
        with self.store.lock:
            entry = self._entry(target)
            old = entry.object()
            patched = _apply_patch(kind, old, body, resource, target.name)
            new = objects.prepare_update(resource, old, patched, target.name, target.subresource)
            return self._write_update(request, target, old, new, dry_run)

    def _scale(self, request: Request, target: Target) -> Response:
        """``/scale``: read or set a workload's ``spec.replicas`` through an ``autoscaling/v1`` Scale."""
        resource = target.resource
        assert resource is not None
        body: Any = None
        kind = ""
        dry_run = target.verb != "get" and _dry_run(request, target.verb)
        if target.verb == "update":
            body = decode_body(request)
        elif target.verb == "patch":
            kind = PATCH_TYPES.get(_content_type(request), "")
            if not kind:
                raise errors.unsupported_media_type(_content_type(request))
            try:
                body = bodies.decode_json(request.body)
            except bodies.BodyError as exc:
                raise errors.bad_request(f"error decoding patch: {exc}") from None
        with self.store.lock:
            old = self._entry(target).object()
            scale = objects.scale_of(old)
            if target.verb == "get":
                return json_response(200, scale)
            patched = body if target.verb == "update" else _apply_patch(kind, scale, body, resource, target.name)
            wanted = _scale_body(patched)
            replicas = (wanted.get("spec") or {}).get("replicas", 0) if isinstance(wanted.get("spec"), dict) else 0
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid(
                    "Scale", target.name, [f"spec.replicas: Invalid value: {replicas!r}: must be >= 0"], "autoscaling"
                )
            rv = (
                (wanted.get("metadata") or {}).get("resourceVersion")
                if isinstance(wanted.get("metadata"), dict)
                else None
            )
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(resource.plural, target.name, errors.STALE_RV, resource.group)
            changed = json.loads(json.dumps(old))
            changed["spec"]["replicas"] = replicas
            new = objects.prepare_update(resource, old, changed, target.name, "", check_rv=False)
            scaled = ("autoscaling", "v1", "Scale")
            self._admit(request, target, "UPDATE", objects.scale_of(new), scale, dry_run, scaled)
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new != old and not dry_run:
                self.store.put(resource.plural, object_key(target.namespace, target.name), new)
            return json_response(200, objects.scale_of(new))

    def _delete_options(self, request: Request, *, collection: bool) -> dict[str, Any]:
        """The request's DeleteOptions: its body's alone when it has one, else its query's.

        ``DeleteResource`` and ``DeleteCollection`` (k8s.io/apiserver/pkg/endpoints/handlers/delete.go)
        decode a non-empty body into the options and read the query only when there is no body, so
        ``?dryRun=All`` with a body ``{}`` is a real delete. A body that is not DeleteOptions is a 400.
        """
        if not request.body:
            return _query_delete_options(request.query)
        body = decode_body(request, allow_empty=True)
        if body is None:  # whitespace, or JSON null: options with nothing set
            return {}
        if not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions must be a JSON object")
        foreign = None if collection else _foreign_delete_body(body)
        if foreign is not None:
            raise errors.bad_request(foreign)
        mistyped = _mistyped_delete_option(body)
        if mistyped is not None:
            raise errors.bad_request(mistyped)
        return body

    def _delete(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        options = self._delete_options(request, collection=False)
        dry_run = _check_dry_run("DeleteOptions", options.get("dryRun") or [], _propagation_causes(options))
        with self.store.lock:
            entry = self._entry(target)
            obj = entry.object()
            meta = obj["metadata"]
            refused = _delete_precondition_refused(resource, target.name, meta, options.get("preconditions") or {})
            if refused is not None:
                raise refused
            if resource.plural == "namespaces":
                finalization.refuse_immortal_delete(target.name)
            self._admit(request, target, "DELETE", None, obj, dry_run)
            obj, deleted = finalization.delete(
                self.store, resource.plural, object_key(target.namespace, target.name), dry_run=dry_run,
                options=options,
            )
        # DeleteResource (handlers/delete.go) answers 202 for orphanDependents=false where the object was
        # not deleted at once, else 200: an object held by finalizers (store.go Delete returns it marked),
        # and a namespace always (storage.go Delete returns its first update, wasDeleted false, and leaves
        # its removal to the namespace controller), whatever the stand-in controllers did since.
        if not deleted or resource.plural == "namespaces":
            return json_response(202 if options.get("orphanDependents") is False else 200, obj)
        if resource.plural == "pods":
            obj["metadata"].setdefault("deletionTimestamp", objects.now())
            obj["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            return json_response(200, obj)
        details = {"name": target.name, "kind": resource.plural, "uid": meta.get("uid", "")}
        if resource.group:
            details["group"] = resource.group
        return json_response(200, errors.success(200, details))

    def _delete_collection(self, request: Request, target: Target) -> Response:
        resource = target.resource
        assert resource is not None
        # DeleteCollection (handlers/delete.go) decodes and validates its ListOptions as a list does,
        # before it reads the DeleteOptions or deletes anything.
        selected = _list_options(request.query, resource)
        options = self._delete_options(request, collection=True)
        dry_run = _check_dry_run("DeleteOptions", options.get("dryRun") or [], _propagation_causes(options))
        deleted: list[bytes] = []
        with self.store.lock:
            found = self.store.select(resource.plural, target.namespace, selected.labels, selected.fields)[0]
            if found and resource.namespaced and not target.namespace:
                # Only an empty {namespace} segment gets here (no route deletes across namespaces): the
                # store lists every namespace's objects, then deletes each under the request's empty
                # namespace, whose key it cannot build (store.go DeleteCollection, NamespaceKeyFunc).
                raise errors.bad_request("Namespace parameter required.")
            preconditions = options.get("preconditions") or {}
            for entry in found:
                meta = entry.object()["metadata"]
                # store.go DeleteCollection hands each Delete the options, preconditions included, and
                # answers the first error; kube-apiserver's one worker (--delete-collection-workers 1)
                # stops there, those deleted before it staying deleted. A dry run checks them too.
                refused = _delete_precondition_refused(resource, meta["name"], meta, preconditions)
                if refused is not None:
                    raise refused
                if dry_run:  # what would go, nothing removed (a dry run never persists)
                    deleted.append(entry.raw)
                    continue
                key = object_key(meta.get("namespace", ""), meta["name"])
                if self.store.get(resource.plural, key) is None:
                    continue  # gone with an earlier one (a namespace's content)
                # store.go DeleteCollection calls Delete per object: the finalizer rule holds each.
                gone, _ = finalization.delete(self.store, resource.plural, key)
                deleted.append(_encode(gone))
            rv = self.store.resource_version
        return Response(200, _list_body(resource, {"resourceVersion": str(rv)}, deleted))

    def _bind(self, request: Request, target: Target) -> Response:
        dry_run = _dry_run(request, "create")
        body = decode_body(request)
        objects.check_types(BY_PLURAL["bindings"], body)  # 400 for what Go's decoder refuses
        target_ref = body.get("target") or {}
        if not isinstance(target_ref, dict) or not isinstance(target_ref.get("name") or "", str):
            raise errors.bad_request(
                "json: cannot unmarshal into Go struct field Binding.target of type v1.ObjectReference"
            )
        meta = body["metadata"]
        name = target.name or str(meta.get("name") or "")
        if not name:
            raise errors.invalid("Binding", "", ["metadata.name: Required value"])
        if target.name and meta.get("name") and meta["name"] != target.name:
            raise errors.bad_request(
                f"name in URL ({target.name}) does not match name in Binding object ({meta['name']})"
            )
        node = str(target_ref.get("name") or "")
        if not node:
            raise errors.invalid("Binding", name, ["target.name: Required value"])
        pods = BY_PLURAL["pods"]
        with self.store.lock:
            entry = self.store.get("pods", object_key(target.namespace, name))
            if entry is None:
                raise errors.not_found("pods", name)
            pod = entry.object()
            pod_meta = pod["metadata"]
            if meta.get("uid") and meta["uid"] != pod_meta.get("uid"):
                raise errors.conflict(
                    "pods/binding",
                    name,
                    f"Precondition failed: UID in precondition: {meta['uid']}, "
                    f"UID in object meta: {pod_meta.get('uid')}",
                )
            if pod_meta.get("deletionTimestamp"):
                raise errors.conflict(
                    "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
                )
            spec = pod.setdefault("spec", {})
            if spec.get("nodeName"):
                raise errors.conflict(
                    "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
                )
            spec["nodeName"] = node
            annotations = meta.get("annotations") or {}
            if annotations:
                pod_meta.setdefault("annotations", {}).update(annotations)
            conditions = pod.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": objects.now()})
            if not dry_run:
                self.store.put(pods.plural, object_key(target.namespace, name), pod)
        return json_response(201, errors.success(201))


def _list_body(resource: Resource, metadata: Mapping[str, Any], items: Iterable[bytes]) -> bytes:
    """A list reply around its items' stored JSON, as they are (a list or a delete-collection's answer)."""
    return b"".join((
        b'{"kind":"', resource.list_kind.encode(), b'","apiVersion":"', resource.api_version.encode(),
        b'","metadata":', _encode(metadata), b',"items":[', b",".join(items), b"]}",
    ))


def _apply_patch(kind: str, old: dict[str, Any], body: Any, resource: Resource, name: str) -> Any:
    """Apply a JSON, merge or strategic-merge patch to ``old`` (a copy), with the server's errors.

    Raises:
        ApiError: 400 for a patch that does not apply, 422 for a conflicting or metadata-removing one.
    """
    try:
        if kind == "json":
            patched = patch.json_patch(old, body)
        elif kind == "merge":
            if not isinstance(body, dict):
                raise patch.PatchError("merge patch body must be a JSON object")
            patched = patch.merge_patch(old, body)
        else:
            patched = patch.strategic_merge_patch(old, body)
    except patch.PatchError as exc:
        raise errors.bad_request(str(exc)) from None
    except patch.PatchConflictError as exc:
        raise errors.invalid(resource.kind, name, [str(exc)], resource.group) from None
    except RecursionError:  # decode bounds the body, not what a patch builds from the object
        raise errors.bad_request("the patch nests too deep") from None
    if isinstance(patched, dict) and patched.get("metadata") is None:
        # The patch removed metadata (or nulled it): the object loses its name and uid, which
        # kube-apiserver's update validation refuses as immutable fields changing.
        raise errors.invalid(resource.kind, name, ["metadata: Required value"], resource.group)
    return patched


def _include(request: Request) -> str:
    return request.query.get("includeObject") or "PartialObjectMetadata"


def _visible(change: Change, resource: Resource, namespace: str, labels: LabelSelector, fields: FieldSelector) -> str:
    """The event type a watcher with these filters sees for a change ("" for none)."""
    if change.plural != resource.plural or (namespace and change.namespace != namespace):
        return ""
    if not labels and not fields:
        return change.type
    now = labels_match(labels, change.entry.labels) and fields_match(fields, change.entry.fields)
    if change.type != "MODIFIED" or change.previous is None:
        return change.type if now else ""
    before = labels_match(labels, change.previous.labels) and fields_match(fields, change.previous.fields)
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else ""
