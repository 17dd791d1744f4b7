"""`authorization.request_info` reads a request as ``RequestInfoFactory.NewRequestInfo`` does
(k8s.io/apiserver/pkg/endpoints/request/requestinfo.go), and `rules_may` decides as the read-only
caller's roles (`READONLY_RULES`) and the anonymous caller's (`PUBLIC_INFO_RULES`) do."""

from __future__ import annotations

import dataclasses

import pytest

from kubectl_gpushare.kube.go_query import GoQuery
from kubectl_gpushare.sandbox.authorization import (
    PUBLIC_INFO_RULES,
    READONLY_RULES,
    RequestInfo,
    request_info,
    rules_may,
)


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/d/pods", "", RequestInfo("", "list", True, "", "pods", "", "d", "")),
        ("GET", "/api/v1/pods", "watch=1", RequestInfo("", "watch", True, "", "pods", "", "", "")),
        ("GET", "/api/v1/pods", "watch=false", RequestInfo("", "list", True, "", "pods", "", "", "")),
        # a list or watch that selects one name by metadata.name is about that name (RequiresExactMatch)
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1&watch=1",
         RequestInfo("", "watch", True, "", "nodes", "", "", "n1")),
        ("GET", "/api/v1/namespaces/d/pods", "fieldSelector=spec.nodeName%3Dx,metadata.name%3D%3Dp",
         RequestInfo("", "list", True, "", "pods", "", "d", "p")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name!%3Dn1", RequestInfo("", "list", True, "", "nodes")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3D..", RequestInfo("", "list", True, "", "nodes")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Da%2Fb", RequestInfo("", "list", True, "", "nodes")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name", RequestInfo("", "list", True, "", "nodes")),
        # ListOptions that do not decode: NewRequestInfo reads no name (the handler's 400 comes after authorization)
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1&limit=x",
         RequestInfo("", "list", True, "", "nodes")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1&timeoutSeconds=&watch=1",
         RequestInfo("", "watch", True, "", "nodes")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1&labelSelector=a%3D%3D%3D",
         RequestInfo("", "list", True, "", "nodes")),
        ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1&limit=5&labelSelector=a",
         RequestInfo("", "list", True, "", "nodes", "", "", "n1")),
        ("DELETE", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1",
         RequestInfo("", "deletecollection", True, "", "nodes")),
        ("HEAD", "/api/v1/namespaces/d/pods/p", "", RequestInfo("", "get", True, "", "pods", "", "d", "p")),
        ("GET", "/api/v1/watch/namespaces/d/pods", "", RequestInfo("", "watch", True, "", "pods", "", "d", "")),
        ("GET", "/api/v1/namespaces/d", "", RequestInfo("", "get", True, "", "namespaces", "", "d", "d")),
        ("PUT", "/api/v1/namespaces/d/status", "", RequestInfo("", "update", True, "", "namespaces", "status", "d",
                                                              "d")),
        ("DELETE", "/apis/apps/v1/namespaces/d/deployments", "",
         RequestInfo("", "deletecollection", True, "apps", "deployments", "", "d", "")),
        ("POST", "/api/v1/namespaces/d/pods/p/binding", "", RequestInfo("", "create", True, "", "pods", "binding", "d",
                                                                        "p")),
        ("GET", "/api/v1/namespaces/d/pods/p/proxy/a/b", "", RequestInfo("", "get", True, "", "pods", "proxy", "d",
                                                                         "p")),
        ("GET", "/api/v1/proxy/namespaces/d/pods/p/x", "", RequestInfo("", "proxy", True, "", "pods", "", "d", "p")),
        ("FOO", "/api/v1/namespaces/d/configmaps/c", "", RequestInfo("", "", True, "", "configmaps", "", "d", "c")),
        ("OPTIONS", "/api/v1/pods", "", RequestInfo("", "", True, "", "pods", "", "", "")),
        ("POST", "/apis/apps/v1", "", RequestInfo("", "post", False)),
        ("GET", "/api/v1", "", RequestInfo("", "get", False)),
        ("FOO", "/version", "", RequestInfo("", "foo", False)),
        ("GET", "/healthz/x/y/z", "", RequestInfo("", "get", False)),
    ],
)  # fmt: skip
def test_request_info_reads_method_and_path_as_upstream(
    method: str, path: str, query: str, expected: RequestInfo
) -> None:
    info = request_info(method, path, GoQuery(query))
    assert info == dataclasses.replace(expected, path=path)


@pytest.mark.parametrize(
    ("method", "path", "viewer", "anonymous"),
    [
        ("GET", "/api/v1/namespaces/d/pods", True, False),
        ("GET", "/api/v1/namespaces/d/pods/p/log", True, False),
        ("GET", "/api/v1/namespaces/d/pods/p/proxy/x", False, False),
        ("GET", "/api/v1/proxy/namespaces/d/pods/p/x", False, False),
        ("POST", "/api/v1/namespaces/d/pods", False, False),
        ("PATCH", "/api/v1/namespaces/d/pods/p/status", False, False),
        ("FOO", "/api/v1/namespaces/d/pods", False, False),
        ("GET", "/api", True, False),
        ("GET", "/apis/apps", True, False),
        ("GET", "/openapi/v3/apis/apps/v1", True, False),
        ("GET", "/version", True, True),
        ("GET", "/version/", True, True),
        ("GET", "/healthz", True, True),
        ("GET", "/livez", True, True),
        ("HEAD", "/readyz", False, False),
        ("POST", "/livez", False, False),
        ("GET", "/livez/etcd", False, False),
        ("GET", "/", False, False),
        ("GET", "/metrics", False, False),
        ("POST", "/version", False, False),
    ],
)
def test_the_viewer_reads_resources_and_discovery_and_the_anonymous_caller_the_public_info_urls(
    method: str, path: str, viewer: bool, anonymous: bool
) -> None:
    info = request_info(method, path, GoQuery(""))
    assert (rules_may(READONLY_RULES, info), rules_may(PUBLIC_INFO_RULES, info)) == (viewer, anonymous)


# view's resources (bootstrappolicy/policy.go, system:aggregate-to-view): what it lists is read, nothing else
@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("GET", "/api/v1/pods", True),
    ("GET", "/api/v1/namespaces/ml/pods/p", True),
    ("GET", "/api/v1/namespaces/ml/pods/p/log", True),
    ("GET", "/api/v1/namespaces/kube-system/configmaps", True),
    ("GET", "/api/v1/resourcequotas", True),
    ("GET", "/api/v1/namespaces", True),
    ("GET", "/apis/apps/v1/deployments", True),
    ("GET", "/api/v1/nodes", False),  # view has no cluster-scoped kind but namespaces
    ("GET", "/api/v1/nodes/n1", False),
    ("GET", "/api/v1/secrets", False),  # escalating: edit's, not view's
    ("GET", "/api/v1/namespaces/kube-system/pods/p:9445/proxy/usage", False),
    ("GET", "/apis/resource.k8s.io/v1/resourceslices", False),
    ("GET", "/apis/resource.k8s.io/v1/deviceclasses", False),
    ("GET", "/apis/scheduling.koordinator.sh/v1alpha1/devices", False),
    ("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", False),
    ("POST", "/api/v1/namespaces/ml/pods", False),
    ("GET", "/apis", True), ("GET", "/openapi/v3", True), ("GET", "/version", True), ("GET", "/metrics", False),
], ids=lambda value: str(value))  # fmt: skip
def test_the_viewer_holds_view_and_the_discovery_roles_only(method: str, path: str, allowed: bool) -> None:
    assert rules_may(READONLY_RULES, request_info(method, path, GoQuery(""))) is allowed


def test_a_rule_with_resource_names_covers_a_watch_of_that_name_alone() -> None:
    # ResourceNameMatches on the name NewRequestInfo read from the field selector: a watch of one
    # lease by name is allowed by a rule naming it, a list of all is not (rbac/v1/evaluation_helpers.go).
    rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"],
            "resourceNames": ["lock"]}
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    assert rules_may([rule], request_info("GET", path, GoQuery("fieldSelector=metadata.name%3Dlock&watch=true")))
    assert not rules_may([rule], request_info("GET", path, GoQuery("watch=true")))
    assert not rules_may([rule], request_info("GET", path, GoQuery("fieldSelector=metadata.name%3Dother")))
