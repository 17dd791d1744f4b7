"""`sandbox.admission` without HTTP: which requests a policy matches, and how its parts decide."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpushare.sandbox.admission import Admission, Attributes
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.resources import BY_PLURAL
from kubectl_gpushare.sandbox.store import Store
from kubectl_gpushare.sandbox.tokens import UserInfo

pytest.importorskip("cel_expr_python")

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
       "spec": {"nodeName": "n1"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def admission(rules: list[dict[str, Any]], *, validations: list[dict[str, Any]] | None = None,
              failure: str = "Fail", exclude: list[dict[str, Any]] | None = None, **spec: Any) -> Admission:
    store = Store()
    constraints: dict[str, Any] = {"resourceRules": rules}
    if exclude:
        constraints["excludeResourceRules"] = exclude
    store.load([
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": "pol"},
         "spec": {"failurePolicy": failure, "matchConstraints": constraints,
                  "validations": validations or [{"expression": "false", "message": "refused"}], **spec}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "bind"}, "spec": {"policyName": "pol", "validationActions": ["Deny"]}},
    ])
    return Admission(store)


def rule(resources: list[str], operations: tuple[str, ...] = ("*",), scope: str = "*") -> dict[str, Any]:
    return {"apiGroups": [""], "apiVersions": ["v1"], "operations": list(operations), "resources": resources,
            "scope": scope}


def write(plural: str, subresource: str = "", operation: str = "UPDATE", user: str = "u",
          extra: dict[str, tuple[str, ...]] | None = None) -> Attributes:
    obj = POD if plural == "pods" else NODE
    namespace = "ns" if plural == "pods" else ""
    old = None if operation == "CREATE" else obj
    new = None if operation == "DELETE" else obj
    return Attributes(operation, BY_PLURAL[plural], subresource, namespace, obj["metadata"]["name"], new, old,
                      UserInfo(user, extra=extra or {}))


def refused(adm: Admission, attrs: Attributes) -> str | None:
    try:
        adm.validate(attrs)
    except ApiError as error:
        assert error.code == 422 and error.reason == "Invalid"
        return error.message
    return None


@pytest.mark.parametrize(("resources", "plural", "sub", "matches"), [
    (["pods"], "pods", "", True),
    (["pods"], "pods", "status", False),
    (["pods/status"], "pods", "status", True),
    (["pods/*"], "pods", "status", True),
    (["pods/*"], "pods", "", True),
    (["*"], "nodes", "status", False),
    (["*/status"], "nodes", "status", True),
    (["*/*"], "pods", "binding", True),
    (["nodes"], "pods", "", False),
], ids=lambda v: str(v))
def test_resource_rules_match_subresources_as_the_api_server_does(
    resources: list[str], plural: str, sub: str, matches: bool
) -> None:
    assert (refused(admission([rule(resources)]), write(plural, sub)) is not None) is matches


def test_operations_scope_and_excluded_rules() -> None:
    assert refused(admission([rule(["pods"], ("CREATE",))]), write("pods")) is None
    assert refused(admission([rule(["pods"], ("DELETE",))]), write("pods", operation="DELETE")) is not None
    assert refused(admission([rule(["*"], scope="Namespaced")]), write("nodes")) is None
    assert refused(admission([rule(["*"], scope="Cluster")]), write("nodes")) is not None
    assert refused(admission([rule(["*"])], exclude=[rule(["nodes"])]), write("nodes")) is None


def test_match_conditions_skip_the_policy_or_follow_its_failure_policy() -> None:
    skip = [{"name": "only-u2", "expression": "request.userInfo.username == 'u2'"}]
    assert refused(admission([rule(["pods"])], matchConditions=skip), write("pods")) is None
    assert refused(admission([rule(["pods"])], matchConditions=skip), write("pods", user="u2")) is not None
    broken = [{"name": "boom", "expression": "request.nope == 1"}]
    message = refused(admission([rule(["pods"])], matchConditions=broken), write("pods"))
    assert message is not None and "denied request: expression 'request.nope == 1' resulted in error: " in message
    assert refused(admission([rule(["pods"])], matchConditions=broken, failure="Ignore"), write("pods")) is None


def test_request_and_objects_as_a_policy_sees_them() -> None:
    checks = [
        {"expression": "request.operation == 'DELETE' && object == null && oldObject.metadata.name == 'p'"},
        {"expression": "request.namespace == 'ns' && request.name == 'p' && !has(request.subResource)"},
        {"expression": "request.resource == {'group': '', 'version': 'v1', 'resource': 'pods'}"},
        {"expression": "request.userInfo.extra['authentication.kubernetes.io/node-name'] == ['n1']"},
        {"expression": "params == null && namespaceObject == null"},
    ]
    adm = admission([rule(["pods"])], validations=checks)
    assert refused(adm, write("pods", operation="DELETE",
                              extra={"authentication.kubernetes.io/node-name": ("n1",)})) is None


def test_a_failing_variable_is_named_where_it_is_used() -> None:
    adm = admission([rule(["pods"])], variables=[{"name": "broken", "expression": "object.nope"},
                                                  {"name": "fine", "expression": "object.metadata.name"}],
                    validations=[{"expression": "variables.fine == 'p'"},
                                 {"expression": "variables.broken == 1"}])
    message = refused(adm, write("pods"))
    assert message is not None
    assert ("denied request: expression 'variables.broken == 1' resulted in error: composited variable \"broken\" "
            "fails to evaluate: expression 'object.nope' resulted in error: ") in message


def test_a_binding_without_its_policy_and_admission_kinds_are_left_alone() -> None:
    store = Store()
    store.load([{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                 "metadata": {"name": "orphan"}, "spec": {"policyName": "gone", "validationActions": ["Deny"]}}])
    assert Admission(store).validate(write("pods")).warnings == []
    policy = Attributes("CREATE", BY_PLURAL["validatingadmissionpolicies"], "", "", "x", {"metadata": {}}, None,
                        UserInfo("u"))
    assert refused(admission([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]),
                   policy) is None


GARBAGE: list[Any] = [None, 5, "x", [1, "a"], {"a": [None]}, True, -1.5]


@pytest.mark.parametrize("junk", GARBAGE, ids=repr)
def test_hostile_stored_policies_never_break_a_write(junk: Any) -> None:
    # Objects seeded with load() skip validation: every field may hold any JSON, and admission must
    # answer with a decision (or an ApiError), never an exception of its own.
    rules = [rule(["*"])]
    specs = [
        {"matchConstraints": junk},
        {"matchConstraints": {"resourceRules": junk}},
        {"matchConstraints": {"resourceRules": [{"operations": junk, "resources": junk, "apiGroups": junk,
                                                 "apiVersions": junk, "resourceNames": junk, "scope": junk}]}},
        {"matchConstraints": {"resourceRules": rules, "namespaceSelector": junk, "objectSelector": junk}},
        {"matchConstraints": {"resourceRules": rules, "objectSelector": {"matchLabels": junk,
                                                                           "matchExpressions": junk}}},
        {"matchConstraints": {"resourceRules": rules}, "validations": junk, "variables": junk,
         "matchConditions": junk, "failurePolicy": junk, "paramKind": junk},
        {"matchConstraints": {"resourceRules": rules},
         "validations": [{"expression": junk, "message": junk, "messageExpression": junk, "reason": junk}]},
    ]
    for spec in specs:
        store = Store()
        store.load([
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
             "metadata": {"name": "pol"}, "spec": spec},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {"name": "b"}, "spec": {"policyName": "pol", "validationActions": junk,
                                                 "matchResources": junk}},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
             "metadata": {"name": "c"}, "spec": junk},
        ])
        try:
            Admission(store).validate(write("pods"))
        except ApiError as error:
            assert error.code in (401, 403, 413, 422) and "\n" not in error.message
