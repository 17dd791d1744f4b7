"""Both install trees built by the real ``kubectl kustomize``, every object checked, and the same as
``kubectl gpushare manifests`` prints, byte for byte; every kustomization folder under manifests/
builds the same with the plugin's builder as with the real one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kubectl_gpushare import protocol
from kubectl_gpushare.cli.goyaml import dump_all
from kubectl_gpushare.cli.kustomize import build
from kubectl_gpushare.cli.manifests import COMPONENTS, DEFAULT_IMAGE, SCHEDULER_IMAGE, manifests_command

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"
Doc = dict[str, Any]


def printed(binary: str, tree: str | Path) -> str:
    """What ``kubectl kustomize`` prints for ``tree`` (a folder of manifests/, or any absolute path)."""
    result = subprocess.run([binary, "kustomize", str(MANIFESTS / tree)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def kustomize(binary: str, tree: str) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(printed(binary, tree)) if doc]


def key(doc: Doc) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def index(docs: list[Doc]) -> dict[tuple[str, str, str], Doc]:
    found = {key(doc): doc for doc in docs}
    assert len(found) == len(docs), "two objects with the same kind, namespace and name"
    return found


@pytest.fixture(scope="module", params=["base", "managed"])
def tree(request: pytest.FixtureRequest) -> str:
    return "." if request.param == "base" else "managed"


INSTALLS = {"plain": ((), "."), "managed": (("--managed",), "managed"), "dra": (("--dra",), "dra-only")}
"""The manifests command's installs: its flags, and the folder ``kubectl kustomize`` builds for it."""


def manifests(*args: str) -> Result:
    return CliRunner().invoke(manifests_command, args, catch_exceptions=False)


@pytest.mark.parametrize("install", INSTALLS)
def test_plugin_prints_what_kubectl_kustomize_prints_byte_for_byte(kubectl_binaries: list[str], install: str) -> None:
    # Same objects, in kustomize's order (kinds it puts first, webhooks last), same keys and quoting.
    flags, folder = INSTALLS[install]
    ours = manifests(*flags)
    assert ours.exit_code == 0, ours.output
    for binary in kubectl_binaries:
        assert ours.output == printed(binary, folder), binary


@pytest.mark.parametrize("install", INSTALLS)
def test_only_prints_its_objects_as_kubectl_kustomize_prints_them(kubectl_binaries: list[str], install: str) -> None:
    flags, folder = INSTALLS[install]
    parts = [part for part in re.split(r"(?m)^---\n", printed(kubectl_binaries[0], folder)) if part]
    checked = 0
    for component in set(COMPONENTS) - {"scheduler-config"}:
        ours = manifests(*flags, "--only", component)
        if ours.exit_code == 2:  # not part of this install: the command says so
            continue
        wanted = {key(doc) for doc in yaml.safe_load_all(ours.output)}
        assert wanted, component
        assert ours.output == "---\n".join(part for part in parts if key(yaml.safe_load(part)) in wanted), component
        checked += 1
    assert checked >= 3


FOLDERS = sorted(str(path.parent.relative_to(MANIFESTS)) for path in MANIFESTS.rglob("kustomization.yaml"))


def test_every_folder_is_one_the_builder_is_checked_on() -> None:
    # The builder's docstring promises every tree is built by both; a new folder joins FOLDERS by itself.
    assert {".", "base", "managed", "viewer", "dra", "dra-only"} <= set(FOLDERS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_builder_builds_each_folder_as_kubectl_kustomize_does(kubectl_binaries: list[str], folder: str) -> None:
    ours = dump_all(build(MANIFESTS, folder))
    for binary in kubectl_binaries:
        assert ours == printed(binary, folder), binary


UNUSUAL = r"""
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: a-hook}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: z-hook}
---
apiVersion: example.io/v1
kind: Namespace
metadata: {name: a-crd-namespace}
---
apiVersion: v1
kind: Namespace
metadata: {name: z-core-namespace}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds, namespace: b}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds0}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds, namespace: a}
---
apiVersion: zeta.io/v1
kind: Widget
metadata: {name: w}
---
apiVersion: alpha.io/v2
kind: Widget
metadata: {name: w}
---
apiVersion: alpha.io/v1
kind: Widget
metadata: {name: w}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, annotations: {empty: "", n: "1"}}
spec: {replicas: 2, paused: false, revisionHistoryLimit: null, strategy: {}, selector: {matchLabels: {}},
       template: {spec: {containers: [], volumes: [{name: a, emptyDir: {}}, {name: b}]}}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: values
  labels: {a10: x, a2: x, A: x, _b: x, "1": x, b-1: x, b.1: x, b1: x, a02: x, a002: x, é: x, Z: x}
data:
  {empty: "", t: "true", y: "y", N: "N", octal: "017", octal2: "0o17", hex: "0x1F", bin: "0b101", exp: "1e3",
   dot: ".5", dotx: ".x", b60: "1:20", date: "2024-01-02", stamp: "2001-12-14T21:59:43.10Z", num: "12345",
   under: "1_000", tilde: "~", nul: "null", colon: "a: b", hash: "a #b", lead: " lead", trail: "trail ",
   star: "*x", bang: "!x", dash: "- x", quote: "'x'", dq: '"x"', uni: "größe ✓", minus: "-", ip: "10.0.0.1",
   version: "1.2", inf: ".inf", tab: "a\tb", multi: "one\ntwo\n", multi2: "one\ntwo", multi3: "one\n\n",
   multi4: " lead\nx", long: "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor
   incididunt ut labore et dolore magna aliqua", word: "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij\
   abcdefghijabcdefghij"}
"""


def test_builder_orders_and_writes_unusual_objects_as_kubectl_kustomize_does(
    kubectl_binaries: list[str], tmp_path: Path
) -> None:
    # Kinds first and last, other kinds by group and version, then namespace (none last) and name;
    # keys in go-yaml's order (a2 before a10), and strings quoted, folded or in blocks as kustomize does.
    (tmp_path / "objects.yaml").write_text(UNUSUAL, encoding="utf-8")
    (tmp_path / "kustomization.yaml").write_text("resources: [objects.yaml]\n")
    ours = dump_all(build(tmp_path))
    assert [(doc["kind"], doc["metadata"]["name"]) for doc in yaml.safe_load_all(ours)][:3] == [
        ("Namespace", "z-core-namespace"), ("Namespace", "a-crd-namespace"), ("ConfigMap", "values")]
    for binary in kubectl_binaries:
        assert ours == printed(binary, tmp_path), binary


def rules(doc: Doc) -> set[tuple[str, str, str, str]]:
    return {(group, resource, verb, ",".join(rule.get("resourceNames", [])))
            for rule in doc["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def bindings(docs: dict[tuple[str, str, str], Doc], account: str) -> set[tuple[str, str, str]]:
    """(binding kind, role kind, role name) bound to the kube-system service account ``account``."""
    return {(kind, doc["roleRef"]["kind"], doc["roleRef"]["name"])
            for (kind, _, _), doc in docs.items() if kind in ("ClusterRoleBinding", "RoleBinding")
            for subject in doc["subjects"]
            if subject == {"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}}


def test_base_tree_is_the_extender_and_the_device_plugin(kubectl_binaries: list[str]) -> None:
    docs = index(kustomize(kubectl_binaries[0], "."))
    assert {kind for kind, _, _ in docs} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                             "RoleBinding", "Deployment", "DaemonSet", "Service",
                                             "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert rules(docs["ClusterRole", "", "gpushare-schd-extender"]) == {
        ("", "nodes", "list", ""), ("", "nodes", "watch", ""), ("", "pods", "get", ""), ("", "pods", "list", ""),
        ("", "pods", "watch", ""), ("", "pods", "patch", ""), ("", "pods/binding", "create", "")}
    assert rules(docs["ClusterRole", "", "gpushare-device-plugin"]) == {
        ("", "pods", "list", ""), ("", "pods", "watch", ""), ("", "pods", "patch", ""), ("", "nodes", "list", ""),
        ("", "nodes", "watch", ""), ("", "nodes", "patch", ""), ("", "nodes/status", "patch", "")}
    service = docs["Service", "kube-system", "gpushare-schd-extender"]
    assert service["spec"]["type"] == "NodePort" and service["spec"]["ports"][0]["nodePort"] == 32766
    for kind, name in (("Deployment", "gpushare-schd-extender"), ("DaemonSet", "gpushare-device-plugin-ds")):
        container = docs[kind, "kube-system", name]["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == DEFAULT_IMAGE
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


@pytest.fixture(scope="module")
def managed(kubectl_binaries: list[str]) -> dict[tuple[str, str, str], Doc]:
    return index(kustomize(kubectl_binaries[0], "managed"))


def test_managed_tree_is_the_base_plus_scheduler_webhook_and_certificates(
    kubectl_binaries: list[str], managed: dict[tuple[str, str, str], Doc]
) -> None:
    base = index(kustomize(kubectl_binaries[0], "."))
    assert set(base) < set(managed)
    assert set(managed) - set(base) == {
        ("ServiceAccount", "kube-system", "gpushare-scheduler"),
        ("ClusterRoleBinding", "", "gpushare-scheduler-as-kube-scheduler"),
        ("ClusterRoleBinding", "", "gpushare-scheduler-as-volume-scheduler"),
        ("RoleBinding", "kube-system", "gpushare-scheduler-authentication-reader"),
        ("Role", "kube-system", "gpushare-scheduler-leader-election"),
        ("RoleBinding", "kube-system", "gpushare-scheduler-leader-election"),
        ("ConfigMap", "kube-system", "gpushare-scheduler-config"),
        ("Deployment", "kube-system", "gpushare-scheduler"),
        ("Service", "kube-system", "gpushare-webhook"),
        ("MutatingWebhookConfiguration", "", "gpushare-scheduler"),
        ("Issuer", "kube-system", "gpushare-selfsigned"), ("Issuer", "kube-system", "gpushare-ca"),
        ("Certificate", "kube-system", "gpushare-ca"), ("Certificate", "kube-system", "gpushare-extender-tls"),
    }
    for unchanged in (("DaemonSet", "kube-system", "gpushare-device-plugin-ds"),
                      ("ClusterRole", "", "gpushare-schd-extender"), ("Role", "kube-system", "gpushare-schd-extender")):
        assert managed[unchanged] == base[unchanged]


def test_second_scheduler_is_least_privilege_and_leader_elected(managed: dict[tuple[str, str, str], Doc]) -> None:
    assert bindings(managed, "gpushare-scheduler") == {
        ("ClusterRoleBinding", "ClusterRole", "system:kube-scheduler"),
        ("ClusterRoleBinding", "ClusterRole", "system:volume-scheduler"),
        ("RoleBinding", "Role", "extension-apiserver-authentication-reader"),
        ("RoleBinding", "Role", "gpushare-scheduler-leader-election"),
    }
    assert rules(managed["Role", "kube-system", "gpushare-scheduler-leader-election"]) == {
        ("coordination.k8s.io", "leases", "get", "gpushare-scheduler"),
        ("coordination.k8s.io", "leases", "update", "gpushare-scheduler")}
    config = yaml.safe_load(managed["ConfigMap", "kube-system", "gpushare-scheduler-config"]["data"]["config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1" and config["kind"] == "KubeSchedulerConfiguration"
    assert config["leaderElection"] == {"leaderElect": True, "resourceNamespace": "kube-system",
                                        "resourceName": "gpushare-scheduler"}
    assert [p["schedulerName"] for p in config["profiles"]] == [protocol.SCHEDULER_NAME]
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "https://gpushare-schd-extender.kube-system.svc:12345" + protocol.EXTENDER_PREFIX
    assert extender["enableHTTPS"] is True
    # Everything else is the base kube-scheduler file's extender (one configuration, two deliveries).
    (plain,) = yaml.safe_load((MANIFESTS / "kube-scheduler-config.yaml").read_text())["extenders"]
    for field in ("filterVerb", "prioritizeVerb", "bindVerb", "weight", "httpTimeout", "nodeCacheCapable",
                  "managedResources", "ignorable"):
        assert extender[field] == plain[field], field
    deployment = managed["Deployment", "kube-system", "gpushare-scheduler"]
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] >= 2 and pod["serviceAccountName"] == "gpushare-scheduler"
    (container,) = pod["containers"]
    assert container["image"] == SCHEDULER_IMAGE
    assert "--config=/etc/gpushare-scheduler/config.yaml" in container["command"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/gpushare-scheduler"]]["configMap"]["name"] == "gpushare-scheduler-config"
    ca = volumes[mounts[str(Path(extender["tlsConfig"]["caFile"]).parent)]]["secret"]
    assert ca["secretName"] == "gpushare-extender-tls" and ca["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_webhook_routes_gpu_pods_to_https_on_every_extender_replica(managed: dict[tuple[str, str, str], Doc]) -> None:
    config = managed["MutatingWebhookConfiguration", "", "gpushare-scheduler"]
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    opt_out = {"key": protocol.LABEL_WEBHOOK, "operator": "NotIn", "values": [protocol.WEBHOOK_DISABLED]}
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}, opt_out]
    assert hook["objectSelector"]["matchExpressions"] == [opt_out]
    target = hook["clientConfig"]["service"]
    assert target["path"] == protocol.WEBHOOK_PATH
    service = managed["Service", target["namespace"], target["name"]]
    assert service["spec"]["publishNotReadyAddresses"] is True  # followers serve it too
    (port,) = service["spec"]["ports"]
    assert port["port"] == target["port"]
    extender = managed["Deployment", "kube-system", "gpushare-schd-extender"]
    assert service["spec"]["selector"] == extender["spec"]["selector"]["matchLabels"]
    pod = extender["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert port["targetPort"] in [p["name"] for p in container["ports"]]
    # The extender serves HTTPS with cert-manager's certificate, which also fills the caBundle.
    certificate_ref = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    namespace, name = certificate_ref.split("/")
    certificate = managed["Certificate", namespace, name]["spec"]
    assert f"{target['name']}.{target['namespace']}.svc" in certificate["dnsNames"]
    assert "gpushare-schd-extender.kube-system.svc" in certificate["dnsNames"]
    args = dict(arg.split("=", 1) for arg in container["args"] if "=" in arg)
    mount = next(m for m in container["volumeMounts"] if args["--tls-cert-file"].startswith(m["mountPath"] + "/"))
    assert args["--tls-private-key-file"].startswith(mount["mountPath"] + "/")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == certificate["secretName"]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    scheduler_service = managed["Service", "kube-system", "gpushare-schd-extender"]["spec"]
    assert scheduler_service["type"] == "ClusterIP" and "nodePort" not in scheduler_service["ports"][0]
    issuer = managed["Issuer", namespace, certificate["issuerRef"]["name"]]["spec"]
    assert managed["Certificate", namespace, issuer["ca"]["secretName"]]["spec"]["isCA"] is True


NEEDED = {"serviceaccounts", "services", "configmaps", "deployments.apps", "daemonsets.apps",
          "clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
          "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
          "mutatingwebhookconfigurations.admissionregistration.k8s.io",
          "validatingadmissionpolicies.admissionregistration.k8s.io",
          "validatingadmissionpolicybindings.admissionregistration.k8s.io"}
CERT_MANAGER = "cert-manager.io/v1"


def test_both_trees_pass_a_server_side_dry_run(kubectl, kubectl_binaries: list[str], tree: str) -> None:  # type: ignore[no-untyped-def]
    served = set(kubectl("api-resources", "-o", "name").stdout.split())
    if not NEEDED <= served:
        pytest.skip(f"the sandbox does not serve {sorted(NEEDED - served)} yet")
    docs = kustomize(kubectl_binaries[0], tree)
    if "certificates.cert-manager.io" not in served:  # cert-manager's CRDs are not in the sandbox
        docs = [doc for doc in docs if doc["apiVersion"] != CERT_MANAGER]
    result = kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(docs))
    assert result.stdout.count("(server dry run)") == len(docs), result.stdout
