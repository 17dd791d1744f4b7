from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.routes import resolve


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes", {}, ("list", "nodes", "", "", "")),
        ("GET", "/api/v1/pods", {"watch": "true"}, ("watch", "pods", "", "", "")),
        ("GET", "/api/v1/watch/namespaces/d/pods", {}, ("watch", "pods", "d", "", "")),
        ("GET", "/api/v1/namespaces/default", {}, ("get", "namespaces", "", "default", "")),
        ("DELETE", "/api/v1/namespaces/default", {}, ("delete", "namespaces", "", "default", "")),
        ("PUT", "/api/v1/namespaces/x/status", {}, ("update", "namespaces", "", "x", "status")),
        ("PATCH", "/api/v1/nodes/n1/status", {}, ("patch", "nodes", "", "n1", "status")),
        ("POST", "/api/v1/namespaces/d/pods/p/binding", {}, ("create", "pods", "d", "p", "binding")),
        ("POST", "/api/v1/namespaces/d/bindings", {}, ("create", "bindings", "d", "", "")),
        ("DELETE", "/api/v1/namespaces/d/configmaps", {}, ("deletecollection", "configmaps", "d", "", "")),
        ("GET", "/apis/coordination.k8s.io/v1/leases", {}, ("list", "leases", "", "", "")),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ks/leases/l", {}, ("update", "leases", "ks", "l", "")),
    ],
)
def test_resolve_maps_urls_to_verbs(
    method: str, path: str, query: dict[str, str], expected: tuple[str, str, str, str, str]
) -> None:
    target = resolve(method, path, query)
    assert target.resource is not None
    assert (target.verb, target.resource.plural, target.namespace, target.name, target.subresource) == expected


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("GET", "/api/v1/namespaces/d/nodes", 404),
        ("GET", "/api/v1/namespaces/d/pods/p/exec", 404),
        ("POST", "/api/v1/namespaces/d/pods/p/log", 405),
        ("GET", "/api/v1/namespaces/d/pods/a/b/c", 404),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces", 404),
        ("GET", "/apis/coordination.k8s.io/v2/leases", 404),
        ("GET", "/api/v1/pods/p", 404),
        ("POST", "/api/v1/pods", 405),
        ("GET", "/api/v1/namespaces/d/bindings", 405),
        ("POST", "/api/v1/nodes/n/status", 405),
        ("PUT", "/api/v1/nodes", 405),
        ("POST", "/api/v1/watch/pods", 405),
    ],
)
def test_resolve_refuses_unknown_routes_and_verbs(method: str, path: str, code: int) -> None:
    with pytest.raises(ApiError) as caught:
        resolve(method, path, {})
    assert caught.value.code == code


def test_discovery_documents() -> None:
    assert resolve("GET", "/version", {}).document["minor"] == "32"
    assert resolve("GET", "/api", {}).document["versions"] == ["v1"]
    assert resolve("GET", "/apis/coordination.k8s.io", {}).document["name"] == "coordination.k8s.io"
    assert "api/v1" in resolve("GET", "/openapi/v3", {}).document["paths"]
