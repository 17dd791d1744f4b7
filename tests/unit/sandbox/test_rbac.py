from __future__ import annotations

from kubectl_gpushare.sandbox.faults import RequestRecord
from kubectl_gpushare.sandbox.rbac import component_of, rule_allows, rules_from_requests, uncovered_requests


def record(verb: str, resource: str, sub: str = "", group: str = "", agent: str = "", name: str = "") -> RequestRecord:
    return RequestRecord("GET", verb, resource, sub, "ns", name, 200, agent, "u", group=group)


LOG = [
    record("list", "pods", agent="kubectl-gpushare/0.1.0 (extender)"),
    record("watch", "pods", agent="kubectl-gpushare/0.1.0 (extender)"),
    record("create", "pods", "binding", agent="kubectl-gpushare/0.1.0 (extender)"),
    record("update", "leases", group="coordination.k8s.io", agent="kubectl-gpushare/0.1.0 (extender)", name="lock"),
    record("patch", "nodes", "status", agent="kubectl-gpushare/0.1.0 (device-plugin)"),
    record("", "", agent="kubectl-gpushare/0.1.0 (extender)"),  # discovery: no RBAC
]


def test_component_of_user_agent() -> None:
    assert component_of("kubectl-gpushare/0.1.0 (device-plugin)") == "device-plugin"
    assert component_of("kubectl/v1.32.4 (linux/amd64) kubernetes/abc") == ""


def test_rules_from_requests_per_component() -> None:
    assert rules_from_requests(LOG, component="extender") == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["update"]},
    ]
    assert rules_from_requests(LOG, component="device-plugin") == [
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}
    ]


def test_uncovered_requests_checks_a_role() -> None:
    role = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"], "resourceNames": ["other"]},
    ]
    assert uncovered_requests(LOG, role, component="extender") == [
        "create pods/binding",
        "update coordination.k8s.io/leases",
    ]
    role[1]["resourceNames"] = ["lock"]
    role.append({"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]})
    assert uncovered_requests(LOG, role, component="extender") == []


def test_rule_allows_matches_as_rbac_does() -> None:
    # ResourceMatches, NonResourceURLMatches, ResourceNameMatches (rbac/v1/evaluation_helpers.go)
    assert rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, "get", "", "pods")
    assert not rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, "get", "", "pods", "proxy")
    assert not rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, "list", "", "pods")
    assert not rule_allows({"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"]}, "get", "", "pods")
    assert rule_allows({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, "delete", "x.io", "y", "z")
    assert rule_allows({"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]}, "get", "", "pods", "status")
    assert not rule_allows({"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]}, "get", "", "pods")
    named = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"], "resourceNames": ["a"]}
    assert rule_allows(named, "get", "", "nodes", name="a") and not rule_allows(named, "get", "", "nodes", name="b")
    urls = {"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]}
    assert rule_allows(urls, "get", path="/apis/x/v1") and rule_allows(urls, "get", path="/version")
    assert not rule_allows(urls, "get", path="/version/x") and not rule_allows(urls, "post", path="/version")
    assert not rule_allows({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, "get", path="/api")
    # TrimRight(ruleURL, "*"): every trailing star goes, so "/apis**" covers "/apis/x" as "/apis*" does
    assert rule_allows({"nonResourceURLs": ["/apis**"], "verbs": ["get"]}, "get", path="/apis/x")


def test_uncovered_requests_honours_subresource_wildcards() -> None:
    log = [record("patch", "nodes", "status"), record("get", "pods", "proxy")]
    assert uncovered_requests(log, [{"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]}]) == [
        "get pods/proxy"]
