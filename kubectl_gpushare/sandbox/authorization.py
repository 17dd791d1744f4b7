"""Authorization of the read-only caller, as kube-apiserver's filter decides it: before routing, from the path.

``DefaultBuildHandlerChain`` (k8s.io/apiserver/pkg/server/config.go) runs ``WithAuthorization``
outside the API handler, on the attributes ``RequestInfoFactory.NewRequestInfo``
(k8s.io/apiserver/pkg/endpoints/request/requestinfo.go) reads from the method and the decoded path
alone, whether or not a route serves them: a method no route has, or a path nothing serves, is
refused (403) before go-restful could answer 405 or 404. The sandbox has no RBAC engine (no Role
or binding objects are read); a token may carry the rules its user is bound to, matched as RBAC
matches them (`rbac.rule_allows`): the read-only caller holds the ``view`` ClusterRole
(`VIEW_RULES`) and, as every authenticated user, the discovery roles (`DISCOVERY_RULES`); a test's
token may hold more (the shipped ``gpushare-viewer``); ``system:anonymous`` holds
``system:public-info-viewer``'s (`PUBLIC_INFO_RULES`). Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubectl_gpushare.kube.go_format import go_quote
from kubectl_gpushare.kube.go_query import GoQuery, go_bool, go_text
from kubectl_gpushare.sandbox.errors import ApiError, qualified, status_details
from kubectl_gpushare.sandbox.rbac import rule_allows
from kubectl_gpushare.sandbox.selectors import decode_list_options

Rules = Sequence[Mapping[str, Any]]
"""A role's PolicyRules, as a ClusterRole's ``rules`` holds them (``apiGroups``, ``resources``, ``verbs``, ...)."""
_READ: Final = ["get", "list", "watch"]


def _read(group: str, *resources: str) -> dict[str, list[str]]:
    return {"apiGroups": [group], "resources": list(resources), "verbs": _READ}


VIEW_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    _read("", "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
          "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
    _read("", "limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
          "namespaces/status", "replicationcontrollers/status", "pods/log"),
    _read("", "namespaces"),
    _read("discovery.k8s.io", "endpointslices"),
    _read("apps", "controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale", "daemonsets",
          "daemonsets/status", "deployments", "deployments/status", "deployments/scale", "replicasets",
          "replicasets/status", "replicasets/scale"),
    _read("autoscaling", "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
    _read("batch", "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
    _read("extensions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
          "ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status",
          "replicationcontrollers/scale", "networkpolicies"),
    _read("policy", "poddisruptionbudgets", "poddisruptionbudgets/status"),
    _read("networking.k8s.io", "networkpolicies", "ingresses", "ingresses/status"),
)
"""The rules of the ``view`` ClusterRole: those of ``system:aggregate-to-view``, the one role bootstrapped with
its ``rbac.authorization.k8s.io/aggregate-to-view`` label (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/
policy.go; testdata/cluster-roles.yaml, also where DRA is on by default). No node, no ``pods/proxy``, no
``resource.k8s.io`` kind, no CRD: a cluster's own aggregated roles (labelled ``aggregate-to-view``) may add
more there, never here."""
HEALTH_URLS: Final = ("/healthz", "/livez", "/readyz")
"""The health checks: the paths a caller without a token reaches at all in the sandbox (`Sandbox` answers 401
elsewhere), where kube-apiserver's anonymous authentication would let it on to `PUBLIC_INFO_RULES`' ``/version``."""
PUBLIC_INFO_RULES: Final = ({"nonResourceURLs": [*HEALTH_URLS, "/version", "/version/"], "verbs": ["get"]},)
"""The rule of ``system:public-info-viewer`` (bootstrappolicy/policy.go), every caller's: ``system:unauthenticated``
is among its subjects, so it is all ``system:anonymous`` holds."""
DISCOVERY_RULES: Final = ({"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*"],
                           "verbs": ["get"]}, *PUBLIC_INFO_RULES)
"""The ``get`` on non-resource URLs that ``system:discovery`` and ``system:public-info-viewer`` grant every
authenticated user (bootstrappolicy/policy.go); a trailing ``*`` matches any rest (``NonResourceURLMatches``)."""
READONLY_RULES: Final = (*VIEW_RULES, *DISCOVERY_RULES)
"""What the sandbox's read-only caller holds: ``view``, and the discovery roles as every authenticated user."""
_NOSNIFF: Final = {"X-Content-Type-Options": "nosniff"}
_METHOD_VERBS: Final = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                        "DELETE": "delete"}  # fmt: skip
"""A resource request's verb by method (``NewRequestInfo``); any other method's verb is empty."""


@dataclass(frozen=True)
class RequestInfo:
    """The attributes ``NewRequestInfo`` reads from a request (the fields authorization uses)."""

    path: str
    verb: str
    resource_request: bool = False
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def request_info(method: str, path: str, query: GoQuery) -> RequestInfo:
    """What ``NewRequestInfo`` reads from the method and the decoded path (as `routes.resolve` gets it).

    A non-resource request (fewer than three segments after an ``api``/``apis`` prefix, or another
    first segment) has the method in lower case as its verb. A resource request takes its verb from
    ``/watch/`` or ``/proxy/`` after the version, else from the method (`_METHOD_VERBS`); a ``get``
    without a name is a ``list`` (a ``watch`` with a true ``watch`` parameter) whose name is the one
    its field selector requires (`_selected_name`, so a rule's ``resourceNames`` cover it), a
    ``delete`` without one a ``deletecollection``. ``namespaces/<ns>/<resource>/<name>/<subresource>``
    is read as upstream reads it, a namespace's own ``status`` and ``finalize`` included.
    """
    parts = path.strip("/").split("/") if path.strip("/") else []
    info = RequestInfo(path, method.lower())
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return info
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return info
        group, rest = rest[0], rest[1:]
    rest = rest[1:]  # the version
    if rest[0] in ("watch", "proxy") and len(rest) >= 2:
        verb, rest = rest[0], rest[1:]
    else:  # a bare "watch" or "proxy" is an error upstream (a 500); here it is read as a resource
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if go_bool(query.get("watch")) else "list"
        name = _selected_name(query)
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(path, verb, True, group, resource, subresource, namespace, name)


def _selected_name(query: GoQuery) -> str:
    """The name a list or watch selects, as ``NewRequestInfo`` reads it from ``fieldSelector``.

    ``RequiresExactMatch("metadata.name")``: the first ``=`` or ``==`` term on it. None where the
    ListOptions do not decode (`decode_list_options` fails, and upstream reads no name: a selector
    that does not parse, a ``timeoutSeconds`` or ``limit`` that is no int64, the conversion's errors
    the handler would answer 400 once authorized), or the name is no valid path segment
    (``content.IsPathSegmentName``, k8s.io/apimachinery/pkg/api/validate/content/path.go: ``.``,
    ``..``, or one with ``/`` or ``%``).
    """
    try:
        terms = decode_list_options(query).fields
    except ApiError:
        return ""
    name = next((value for label, equal, value in terms if label == "metadata.name" and equal), "")
    return "" if name in (".", "..") or "/" in name or "%" in name else name


def rules_may(rules: Rules, info: RequestInfo) -> bool:
    """Whether any of ``rules`` allows the request (RBAC's authorizer: the union of the roles' rules)."""
    if info.resource_request:
        return any(rule_allows(rule, info.verb, info.group, info.resource, info.subresource, info.name)
                   for rule in rules)
    return any(rule_allows(rule, info.verb, path=info.path) for rule in rules)


def forbidden(user: str, info: RequestInfo) -> ApiError:
    r"""The authorization filter's 403: ``forbiddenMessage`` inside ``apierrors.NewForbidden``.

    ``responsewriters.Forbidden`` (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go).
    The message names the resource and subresource (``pods/proxy``); the prefix and ``details`` the
    resource alone (``pods "p1" is forbidden``), and a non-resource request neither (``forbidden:``,
    empty details). An empty verb (a method without one) leaves two spaces, as Go's ``%s`` does. The
    part ``forbiddenMessage`` writes is `_sanitized`; the prefix is not. The reply carries
    ``X-Content-Type-Options: nosniff``, which ``Forbidden`` sets. A byte of the path that is not UTF-8
    is ``\xNN`` where Go quotes it (``%q``) and U+FFFD where it does not (``%s``, and the JSON details).
    """
    if not info.resource_request:
        denied = f"User {go_quote(user)} cannot {info.verb} path {go_quote(info.path)}"
        return ApiError(403, "Forbidden", f"forbidden: {_sanitized(denied)}", details={}, headers=dict(_NOSNIFF))
    resource = info.resource + (f"/{info.subresource}" if info.subresource else "")
    scope = f"in the namespace {go_quote(info.namespace)}" if info.namespace else "at the cluster scope"
    denied = (f"User {go_quote(user)} cannot {info.verb} resource {go_quote(resource)} in API group "
              f"{go_quote(info.group)} {scope}")
    named = f" {go_quote(info.name)}" if info.name else ""
    message = f"{go_text(qualified(info.resource, info.group))}{named} is forbidden: {_sanitized(denied)}"
    details = status_details(go_text(info.resource), go_text(info.name), go_text(info.group))
    return ApiError(403, "Forbidden", message, details=details, headers=dict(_NOSNIFF))


def _sanitized(text: str) -> str:
    """``responsewriters``' ``sanitizer``: ``&``, ``<`` and ``>`` as HTML entities, so no error looks like HTML."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
