"""The shipped manifests: least-privilege RBAC derived from the calls the extender really makes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from waiting import wait_for

from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap
from kubectl_gpushare.sandbox.rbac import uncovered_requests
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).parents[3] / "manifests"


def role_rules() -> dict[str, list[dict[str, list[str]]]]:
    """scope ("cluster" or a namespace) -> the extender's RBAC rules there, as the manifest writes them."""
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "base" / "extender.yaml").read_text()) if d]
    scoped: dict[str, list[dict[str, list[str]]]] = {}
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "Role"):
            scope = "cluster" if doc["kind"] == "ClusterRole" else doc["metadata"]["namespace"]
            scoped.setdefault(scope, []).extend(doc["rules"])
    return scoped


def rules() -> dict[str, set[tuple[str, str, str]]]:
    """scope ("cluster" or a namespace) -> {(apiGroup, resource, verb)} granted to the extender."""
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "base" / "extender.yaml").read_text()) if d]
    granted: dict[str, set[tuple[str, str, str]]] = {}
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        scope = "cluster" if doc["kind"] == "ClusterRole" else doc["metadata"]["namespace"]
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.setdefault(scope, set()).add((group, resource, verb))
    bindings = {d["roleRef"]["name"] for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert bindings == {"gpushare-schd-extender"}
    return granted


def test_rbac_covers_every_call_and_nothing_more(sandbox: Sandbox, extender_factory) -> None:  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16, 16], ip="10.0.0.1"), unhealthy_configmap("gpu-1", [1]),
                  pod_object("job", "default", [4]), pod_object("fail", "default", [4])])
    ext = extender_factory(leader_elect=True, lease_duration=3.0, renew_deadline=2.0, retry_period=0.2)
    wait_for(lambda: ext.running.app.handle("GET", "/readyz").status == 200, what="the extender to lead")
    sched = ext.scheduler()
    sched.bind(sandbox.get("pods", "default", "job"), "gpu-1")
    sandbox.inject("POST", r"/pods/fail/binding", status=409)
    with pytest.raises(Exception, match="bind default/fail"):
        sched.bind(sandbox.get("pods", "default", "fail"), "gpu-1")  # exercises the rollback patch

    def lease_updates() -> int:
        return sum(r.resource == "leases" and r.verb == "update" for r in sandbox.requests)

    before = lease_updates()
    wait_for(lambda: lease_updates() >= before + 2, what="a few lease renewals")
    ext.shutdown()  # releases the lease
    used: set[tuple[str, str, str, str]] = set()
    for record in sandbox.requests:
        if "(extender)" not in record.user_agent or not record.resource:
            continue
        resource = record.resource + (f"/{record.subresource}" if record.subresource else "")
        used.add((record.namespace or "cluster", record.group, resource, record.verb))
    granted = rules()
    assert {("cluster", "", "nodes", "watch"), ("cluster", "", "pods", "list"), ("default", "", "pods", "patch"),
            ("default", "", "pods/binding", "create"), ("kube-system", "coordination.k8s.io", "leases", "update"),
            ("kube-system", "", "configmaps", "watch")} <= used
    for namespace, group, resource, verb in sorted(used):
        rule = (group, resource, verb)
        allowed = rule in granted["cluster"] or rule in granted.get(namespace, set())
        assert allowed, f"the extender calls {verb} {group}/{resource} in {namespace} without RBAC"
    scoped = role_rules()
    for namespace in {record.namespace for record in sandbox.requests if record.namespace}:
        mine = [r for r in sandbox.requests if r.namespace == namespace]
        missing = uncovered_requests(mine, scoped["cluster"] + scoped.get(namespace, []), component="extender")
        assert not missing, f"the extender's resourceNames forbid what it calls in {namespace}: {missing}"
    needed = {(g, r, v) for _, g, r, v in used}
    for scope, grants in granted.items():
        unused = grants - needed
        assert not unused, f"{scope} grants more than the extender uses: {sorted(unused)}"


def test_scheduler_config_names_the_routes_the_extender_serves() -> None:
    config = yaml.safe_load((MANIFESTS / "kube-scheduler-config.yaml").read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    (ext,) = config["extenders"]
    assert ext["urlPrefix"].endswith("/gpushare-scheduler")
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == ("filter", "prioritize", "bind")
    assert ext["weight"] > 0 and ext["nodeCacheCapable"] is True
    assert ext["managedResources"] == [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}]
    deployment = next(d for d in yaml.safe_load_all((MANIFESTS / "base" / "extender.yaml").read_text())
                      if d and d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--leader-elect" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_lease_rights_name_only_the_extenders_lease() -> None:
    """get/update on any Lease in kube-system would let the extender take over kube-scheduler's or
    kube-controller-manager's leader election; only create, which RBAC cannot limit by name, is unnamed."""
    deployment = next(d for d in yaml.safe_load_all((MANIFESTS / "base" / "extender.yaml").read_text())
                      if d and d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    (lease_name,) = [a.split("=", 1)[1] for a in args if a.startswith("--lease-name=")]
    lease_rules = [r for r in role_rules()["kube-system"] if "leases" in r["resources"]]
    for rule in lease_rules:
        if set(rule["verbs"]) != {"create"}:
            assert rule.get("resourceNames") == [lease_name], rule
    assert {v for r in lease_rules for v in r["verbs"]} == {"get", "create", "update"}
