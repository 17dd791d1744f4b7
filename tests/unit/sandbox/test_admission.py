"""`sandbox.admission` without HTTP: which requests a policy matches, and how its parts decide."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from kubectl_gpushare.sandbox import admission as admission_module
from kubectl_gpushare.sandbox.admission import Admission, Attributes, spec_causes
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.resources import BY_PLURAL
from kubectl_gpushare.sandbox.store import Store
from kubectl_gpushare.sandbox.tokens import UserInfo
from tests import costly_cel

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


def test_an_expression_over_the_cost_limit_fails_as_cel_go_cancels_it_and_is_never_run() -> None:
    # Nested string concatenation: 8**8 copies of ten characters (1.3 GB) if it ran. kube-apiserver
    # accepts the policy (it only compiles) and cancels the evaluation at PerCallLimit.
    costly = costly_cel.nested_bind(9).replace("v8.size() > 0", "v8.size() > 0 || object.metadata.name == 'p'")
    assert spec_causes(BY_PLURAL["validatingadmissionpolicies"], {"spec": {
        "failurePolicy": "Fail", "matchConstraints": {"resourceRules": [rule(["pods"])]},
        "validations": [{"expression": costly}]}}) == []
    tracemalloc.start()
    try:
        message = refused(admission([rule(["pods"])], validations=[{"expression": costly}]), write("pods"))
        assert refused(admission([rule(["pods"])], validations=[{"expression": costly}], failure="Ignore"),
                       write("pods")) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message == ("pods \"p\" is forbidden: ValidatingAdmissionPolicy 'pol' with binding 'bind' denied request: "
                       f"expression '{costly}' resulted in error: operation cancelled: actual cost limit exceeded")
    assert peak < 64 << 20


def test_a_comprehension_over_a_large_object_is_priced_by_the_request_s_own_sizes() -> None:
    # The same expression passes over a small object and is cancelled over one whose list makes it cost more.
    grow = "object.spec.containers.map(c, c.image + c.image + c.image).all(s, s.contains(object.metadata.name))"
    small = {**POD, "spec": {"containers": [{"image": "registry/app"}] * 3}}
    large = {**POD, "spec": {"containers": [{"image": "i" * 1000}] * 2000}}
    adm = admission([rule(["pods"])], validations=[{"expression": grow}])
    user = UserInfo("u")
    assert refused(adm, Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", small, None, user)) is None
    message = refused(adm, Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", large, None, user))
    assert message is not None and message.endswith("operation cancelled: actual cost limit exceeded")


def test_a_policy_s_validations_share_the_runtime_budget() -> None:
    # Each costs (8,000 / 10)**2 = 640,000 (contains: the product of both traversals), under PerCallLimit;
    # sixteen of them overrun RuntimeCELCostBudget (10,000,000), fifteen do not.
    pod = {**POD, "metadata": {**POD["metadata"], "annotations": {"a": "x" * 8000}}}
    each = {"expression": "object.metadata.annotations.a.contains(object.metadata.annotations.a)"}
    attrs = Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", pod, None, UserInfo("u"))
    assert refused(admission([rule(["pods"])], validations=[each] * 15), attrs) is None
    message = refused(admission([rule(["pods"])], validations=[each] * 16), attrs)
    assert message is not None and message.endswith(
        "denied request: validation failed due to running out of cost budget, no further validation rules will be run")
    assert refused(admission([rule(["pods"])], validations=[each] * 16, failure="Ignore"), attrs) is None
    # A variable's cost counts once, where a validation first uses it.
    shared = {"name": "found", "expression": each["expression"]}
    uses = [{"expression": "variables.found"}] * 16
    assert refused(admission([rule(["pods"])], variables=[shared], validations=uses), attrs) is None


@pytest.mark.timeout(30)
def test_a_variable_no_validation_uses_is_never_run_or_priced() -> None:
    # Each variable doubles the last ([v, v] shares v): 2**48 elements to walk if it ran and were sized.
    # Upstream composition evaluates a variable only where it is first used, so these cost nothing.
    chain = [{"name": "v0", "expression": "[object, object]"}]
    chain += [{"name": f"v{i}", "expression": f"[variables.v{i - 1}, variables.v{i - 1}]"} for i in range(1, 48)]
    used = {"name": "used", "expression": "object.metadata.name"}
    adm = admission([rule(["pods"])], variables=[*chain, used],
                    validations=[{"expression": "variables.used == 'q'",
                                  "messageExpression": "'not q: ' + variables.used"}])
    assert refused(adm, write("pods")) == (
        "pods \"p\" is forbidden: ValidatingAdmissionPolicy 'pol' with binding 'bind' denied request: not q: p")


@pytest.mark.timeout(60)
def test_a_chain_of_variables_each_doubling_the_last_stops_at_the_variable_bound() -> None:
    # cel-go shares [v, v]; the binding copies it, so v5 holds 2**6 copies of the 100,000-character
    # annotation. Each variable is used (by the next, the last by the validation), so each runs until
    # one passes VARIABLE_UNITS; that one fails with the cost-limit error, every later one through it.
    pod = {**POD, "metadata": {**POD["metadata"], "annotations": {"a": "x" * 100_000}}}
    attrs = Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", pod, None, UserInfo("u"))
    chain = [{"name": "v0", "expression": "[object.metadata.annotations.a, object.metadata.annotations.a]"}]
    chain += [{"name": f"v{i}", "expression": f"[variables.v{i - 1}, variables.v{i - 1}]"} for i in range(1, 400)]
    adm = admission([rule(["pods"])], variables=chain, validations=[{"expression": "variables.v399.size() == 2"}])
    tracemalloc.start()
    try:
        message = refused(adm, attrs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message is not None and message.endswith(f"resulted in error: {admission_module.OVER_LIMIT}")
    assert 'composited variable "v398" fails to evaluate' in message and " ... " in message
    assert len(message) < 2 * admission_module.MAX_FAILURE  # not 400 errors nested in one another, middle cut
    assert peak < 64 << 20  # the copies stop near VARIABLE_UNITS (3 Mi characters), not at 2**400 copies


@pytest.mark.timeout(60)
def test_evaluations_copy_what_they_name_and_stop_at_the_conversion_bound() -> None:
    # Every validation names the 200,000-element list; copying it into CEL for each of 51 validations
    # (10,200,000 units) passes CONVERSION_UNITS (10,000,000) at the 50th: it fails with the cost-limit error.
    pod = {**POD, "metadata": {**POD["metadata"], "annotations": {"a": "x"}}, "spec": {"l": [0] * 200_000}}
    attrs = Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", pod, None, UserInfo("u"))
    names = {"expression": "object.metadata.name == 'p'"}
    counts = {"expression": "object.spec.l.size() > 0"}
    message = refused(admission([rule(["pods"])], validations=[counts] * 51), attrs)
    assert message is not None and message.endswith(
        f"expression 'object.spec.l.size() > 0' resulted in error: {admission_module.OVER_LIMIT}")
    assert refused(admission([rule(["pods"])], validations=[counts] * 45), attrs) is None
    # An expression that names no value copies nothing: a thousand of them pass.
    assert refused(admission([rule(["pods"])], validations=[{"expression": "1 < 2"}] * 1000), attrs) is None
    assert refused(admission([rule(["pods"])], validations=[names] * 3), attrs) is None


def test_match_conditions_share_their_own_smaller_budget() -> None:
    # 640,000 each (as above): four pass RuntimeCELCostBudgetMatchConditions (2,500,000), three do not; a
    # false condition does not spare the others (ForInput runs them all before the matcher reads them).
    pod = {**POD, "metadata": {**POD["metadata"], "annotations": {"a": "x" * 8000}}}
    each = {"name": "c", "expression": "object.metadata.annotations.a.contains(object.metadata.annotations.a)"}
    attrs = Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", pod, None, UserInfo("u"))
    assert refused(admission([rule(["pods"])], matchConditions=[each] * 3), attrs) is not None  # applies: refused
    never = {"name": "never", "expression": "false"}
    message = refused(admission([rule(["pods"])], matchConditions=[never, *[each] * 4]), attrs)
    assert message is not None and message.endswith(
        "denied request: validation failed due to running out of cost budget, no further validation rules will be run")
    assert refused(admission([rule(["pods"])], matchConditions=[never, *[each] * 4], failure="Ignore"), attrs) is None
    assert refused(admission([rule(["pods"])], matchConditions=[never, *[each] * 3]), attrs) is None


def test_a_policy_is_evaluated_once_however_many_bindings_apply_it() -> None:
    # Without params every binding sees the same inputs: 20 bindings must not hold the store 20 times.
    from kubectl_gpushare.kube import cel

    adm = admission([rule(["pods"])], validations=[{"expression": "object.metadata.name == 'q'"}])
    adm.store.load([{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                     "metadata": {"name": f"bind{i}"}, "spec": {"policyName": "pol", "validationActions": ["Deny"]}}
                    for i in range(20)])
    before = cel.compile_expression.cache_info()
    message = refused(adm, write("pods"))
    after = cel.compile_expression.cache_info()
    assert message is not None and "with binding 'bind' denied request" in message
    assert (after.hits + after.misses) - (before.hits + before.misses) == 1


def _annotated(length: int) -> Attributes:
    pod = {**POD, "metadata": {**POD["metadata"], "annotations": {"a": "x" * length}}}
    return Attributes("CREATE", BY_PLURAL["pods"], "", "ns", "p", pod, None, UserInfo("u"))


COSTLY = "object.metadata.annotations.a.contains(object.metadata.annotations.a)"  # 640,000 over 8,000 characters


@pytest.mark.parametrize("use", ["variables.v15", "variables['v15']"])
def test_a_variable_used_through_another_or_by_index_is_charged_to_the_budget(use: str) -> None:
    # Sixteen variables of 640,000 each, a chain: using the last uses them all (10,240,000 > the budget).
    chain = [{"name": "v0", "expression": COSTLY}]
    chain += [{"name": f"v{i}", "expression": f"variables.v{i - 1} && {COSTLY}"} for i in range(1, 16)]
    message = refused(admission([rule(["pods"])], variables=chain, validations=[{"expression": use}]),
                      _annotated(8000))
    assert message is not None and message.endswith(admission_module.OUT_OF_BUDGET)
    # Fifteen fit.
    assert refused(admission([rule(["pods"])], variables=chain[:15], validations=[{"expression": "variables.v14"}]),
                   _annotated(8000)) is None


def test_variables_stop_running_once_their_costs_pass_the_budget() -> None:
    # 60 variables of 640,000 each used by one validation: upstream's lazy evaluation runs out of budget
    # after 16; the sandbox ran all 60 (60 near-limit variables held the store for 9 s) before charging them.
    from kubectl_gpushare.kube import cel

    variables = [{"name": f"v{i}", "expression": COSTLY} for i in range(60)]
    use = " && ".join(f"variables.v{i}" for i in range(60))
    adm = admission([rule(["pods"])], variables=variables, validations=[{"expression": use}])
    before = cel.compile_expression.cache_info()
    message = refused(adm, _annotated(8000))
    after = cel.compile_expression.cache_info()
    assert message is not None and message.endswith(admission_module.OUT_OF_BUDGET)
    assert (after.hits + after.misses) - (before.hits + before.misses) <= 18


def test_a_message_expression_past_the_budget_is_the_failure_policy_s_error() -> None:
    # Fifteen passing validations spend 9,600,000; the sixteenth fails, and its 640,000 message expression
    # would overrun the budget: validator.go answers the failure policy's error instead of the denial.
    passing = [{"expression": COSTLY}] * 15
    last = {"expression": "false", "messageExpression": f"string({COSTLY})"}
    message = refused(admission([rule(["pods"])], validations=[*passing, last]), _annotated(8000))
    assert message is not None and message.endswith(f"failed messageExpression: {admission_module.OUT_OF_BUDGET}")
    ignored = admission([rule(["pods"])], validations=[*passing, last], failure="Ignore")
    assert refused(ignored, _annotated(8000)) is None
    message = refused(admission([rule(["pods"])], validations=[*passing[:14], last]), _annotated(8000))
    assert message is not None and message.endswith("denied request: true")
