from __future__ import annotations

from kubectl_gpushare.sandbox.faults import RequestRecord
from kubectl_gpushare.sandbox.rbac import component_of, rules_from_requests, uncovered_requests


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
