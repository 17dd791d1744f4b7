"""Random JSON bodies on every write route: the answer is a 2xx or a 4xx ``Status``, never a 500."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

POD = {"kind": "Pod", "metadata": {"name": "p1", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
ROUTES = [
    ("POST", "/api/v1/namespaces/default/pods", "application/json"),
    ("PUT", "/api/v1/namespaces/default/pods/p1", "application/json"),
    ("PUT", "/api/v1/namespaces/default/pods/p1/status", "application/json"),
    ("PATCH", "/api/v1/namespaces/default/pods/p1", "application/merge-patch+json"),
    ("PATCH", "/api/v1/namespaces/default/pods/p1", "application/strategic-merge-patch+json"),
    ("PATCH", "/api/v1/namespaces/default/pods/p1", "application/json-patch+json"),
    ("POST", "/api/v1/namespaces/default/pods/p1/binding", "application/json"),
    ("POST", "/api/v1/namespaces/default/bindings", "application/json"),
    ("DELETE", "/api/v1/namespaces/default/pods/p1", "application/json"),
    ("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", "application/json"),
    ("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", "application/json"),
    ("POST", "/api/v1/namespaces/default/serviceaccounts/sa/token", "application/json"),
]
KEYS = st.sampled_from(
    ["metadata", "name", "spec", "status", "target", "op", "path", "value", "from", "$patch", "containers", "labels"]
    + ["annotations", "uid", "resourceVersion", "preconditions", "dryRun", "kind", "apiVersion", "nodeName", "x"]
    + ["validations", "expression", "matchConstraints", "resourceRules", "policyName", "validationActions",
       "boundObjectRef", "expirationSeconds", "audiences", "failurePolicy", "variables", "matchConditions"]
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "p1", "/metadata", "/spec/containers/0", "add", "remove", "replace", "move", "test"]),
    st.sampled_from(["copy", "Pod", "v1", "delete", "merge", "/", "/metadata/name", "/spec/containers/-"]),
    st.sampled_from(["true", "object.x ==", "Deny", "Warn", "Fail", "Ignore", "pods", "*", 600]),
)
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4))


@pytest.fixture(scope="module")
def shared() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        sb.load([{"kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "default"}}])
        yield sb


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(ROUTES), body=JSON)
def test_random_bodies_never_get_a_500(shared: Sandbox, route: tuple[str, str, str], body: Any) -> None:
    shared.store.remove("pods", "default/p1")
    shared.load([json.loads(json.dumps(POD))])
    method, path, content_type = route
    conn = http.client.HTTPConnection("127.0.0.1", shared.port, timeout=10)
    conn.request(method, path, body=json.dumps(body).encode(), headers={"Content-Type": content_type})
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    assert response.status < 500, (route, body, answer)
    if response.status >= 400:
        assert answer["kind"] == "Status" and answer["code"] == response.status
    listed = shared.objects("pods")
    assert all(isinstance(p.get("metadata"), dict) and p["metadata"].get("name") for p in listed), listed
