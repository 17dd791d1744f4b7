"""manifests/dra: the driver's kustomize Component, built on its own (the driver without the viewer
role, as before), inside manifests/dra-only (the DRA-only install, with the shared gpushare-viewer role)
and inside an overlay beside manifests/; what kubectl kustomize builds of manifests/dra-only is what
`kubectl gpushare manifests --dra` prints, applying it beside the extender install keeps one viewer
role, the DaemonSet mounts what the driver touches, and its RBAC is exactly the calls the driver makes."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from dra_helpers import NODE, Claims, Dirs
from node_agents import cgroup_tree
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.cli.manifests import DEFAULT_IMAGE, render
from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.node.sockets import target
from kubectl_gpushare.sandbox.server import Sandbox

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests" / "dra"
DRA_ONLY = MANIFESTS.parent / "dra-only"
VIEWER = ("ClusterRole", "", "gpushare-viewer")


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def kustomize(binary: str, folder: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    built = subprocess.run([binary, "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    return {key(doc): doc for doc in yaml.safe_load_all(built.stdout) if doc}


ENFORCEMENT_ROLE = "gpushare-dra-driver-enforcement"
"""The ClusterRole (and binding) the manifest says to drop with --enforce-memory=off."""


def all_documents() -> list[dict[str, Any]]:
    return [doc for name in ("dra-driver.yaml", "deviceclass.yaml")
            for doc in yaml.safe_load_all((MANIFESTS / name).read_text()) if doc]


def documents() -> dict[str, dict[str, Any]]:
    """One document per kind (the driver's own ClusterRole and binding; not the enforcement ones)."""
    return {doc["kind"]: doc for doc in all_documents() if doc["metadata"]["name"] != ENFORCEMENT_ROLE}


def granted(*, enforcement: bool) -> set[tuple[str, str, str]]:
    roles = [doc for doc in all_documents() if doc["kind"] == "ClusterRole"
             and (enforcement or doc["metadata"]["name"] != ENFORCEMENT_ROLE)]
    return {(group, resource, verb) for role in roles for rule in role["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}


def test_every_cluster_role_is_bound_to_the_driver() -> None:
    docs = all_documents()
    roles = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "ClusterRole"}
    bound = {doc["roleRef"]["name"] for doc in docs if doc["kind"] == "ClusterRoleBinding"
             for subject in doc["subjects"] if subject["name"] == documents()["ServiceAccount"]["metadata"]["name"]}
    assert roles == bound == {"gpushare-dra-driver", ENFORCEMENT_ROLE}


@pytest.mark.integration
def test_plugin_prints_what_kubectl_kustomize_builds(kubectl_binaries: list[str]) -> None:
    ours = {key(doc): doc for doc in yaml.safe_load_all(render(dra=True)) if doc}
    assert {kind for kind, _, _ in ours} == {"DeviceClass", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                            "DaemonSet"}
    assert ("ClusterRole", "", ENFORCEMENT_ROLE) in ours and VIEWER in ours
    driver_alone = {k: doc for k, doc in ours.items() if k != VIEWER}
    for binary in kubectl_binaries:
        assert kustomize(binary, DRA_ONLY) == ours, binary
        assert kustomize(binary, MANIFESTS) == driver_alone, binary  # `apply -k manifests/dra`, as before


def test_dra_is_a_kustomize_component_and_dra_only_lists_it_beside_the_viewer() -> None:
    driver = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert (driver["apiVersion"], driver["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert driver["resources"] == ["deviceclass.yaml", "dra-driver.yaml"]
    install = yaml.safe_load((DRA_ONLY / "kustomization.yaml").read_text())
    assert (install["apiVersion"], install["kind"]) == ("kustomize.config.k8s.io/v1beta1", "Kustomization")
    assert (install["resources"], install["components"]) == (["../viewer"], ["../dra"])


def test_the_docs_install_a_dra_only_cluster_with_dra_only() -> None:
    """Where the docs pair a kustomize folder with ``manifests --dra``, it is the one that builds the same."""
    root = MANIFESTS.parents[1]
    for doc in ("README.md", "docs/dra.md", "docs/install.md", "manifests/README.md"):
        text = (root / doc).read_text()
        assert "kubectl apply -k manifests/dra-only" in text, doc
        paired = re.findall(r"apply -k (manifests/\S+).*manifests --dra \|", text)
        assert set(paired) <= {"manifests/dra-only"}, (doc, paired)


@pytest.mark.integration
def test_the_dra_install_beside_the_extender_install_keeps_one_viewer_role(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """Both kustomize routes, then the plugin's: the second and third apply leave the role unchanged."""
    assert "gpushare-viewer created" in kubectl("apply", "-k", str(MANIFESTS.parent)).stdout
    assert "gpushare-viewer unchanged" in kubectl("apply", "-k", str(DRA_ONLY)).stdout
    printed = kubectl("gpushare", "manifests", "--dra").stdout
    assert "gpushare-viewer unchanged" in kubectl("apply", "-f", "-", input=printed).stdout
    (role,) = [r for r in sandbox.objects("clusterroles") if r["metadata"]["name"] == "gpushare-viewer"]
    (shipped,) = [doc for doc in yaml.safe_load_all(printed) if doc and key(doc) == VIEWER]
    assert role["rules"] == shipped["rules"]


@pytest.mark.integration
def test_removing_the_dra_install_beside_the_extender_install_keeps_the_role_only_as_the_readme_says(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The shared role is one object: ``delete -k`` of either install deletes it; ``-k manifests/dra`` does not."""
    readme = " ".join((MANIFESTS.parent / "README.md").read_text().split())
    assert "`kubectl delete -k manifests/dra-only` there also deletes the role" in readme
    assert "delete `-k manifests/dra` instead (the driver alone), or re-apply `manifests/viewer`" in readme

    def viewers() -> list[str]:
        return [r["metadata"]["name"] for r in sandbox.objects("clusterroles") if r["metadata"]["name"] == VIEWER[2]]

    def driver_runs() -> bool:
        return ("DaemonSet", "kube-system", "gpushare-dra-driver") in {key(d) for d in sandbox.objects("daemonsets")}

    kubectl("apply", "-k", str(MANIFESTS.parent))
    kubectl("apply", "-k", str(DRA_ONLY))
    assert driver_runs() and viewers() == [VIEWER[2]]
    kubectl("delete", "-k", str(MANIFESTS))
    assert viewers() == [VIEWER[2]] and not driver_runs()
    kubectl("apply", "-k", str(DRA_ONLY))
    kubectl("delete", "-k", str(DRA_ONLY))
    assert viewers() == []
    assert "gpushare-viewer created" in kubectl("apply", "-k", str(MANIFESTS.parent / "viewer")).stdout


@pytest.mark.integration
def test_an_overlay_adds_the_dra_component_beside_the_extender_and_device_plugin(
    kubectl_binaries: list[str], tmp_path: Path
) -> None:
    """manifests/README.md's overlay, as earlier releases wrote it, builds both with one viewer role."""
    readme = (MANIFESTS.parent / "README.md").read_text()
    (snippet,) = [block for block in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL)
                  if yaml.safe_load(block).get("kind") == "Kustomization"]
    spec = yaml.safe_load(snippet)
    assert (spec["resources"], spec["components"]) == (["../kubectl-gpushare/manifests"],
                                                       ["../kubectl-gpushare/manifests/dra"])
    (tmp_path / "kubectl-gpushare").symlink_to(MANIFESTS.parents[1])  # "next to a checkout of this repository"
    overlay = tmp_path / "my-overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(snippet)
    base = {key(doc): doc for doc in yaml.safe_load_all(render()) if doc}
    dra = {key(doc): doc for doc in yaml.safe_load_all(render(dra=True)) if doc}
    assert base.keys() & dra.keys() == {VIEWER} and base[VIEWER] == dra[VIEWER]
    assert ("DaemonSet", "kube-system", "gpushare-device-plugin-ds") in base
    for binary in kubectl_binaries:
        assert kustomize(binary, overlay) == base | dra, binary


def test_device_class_selects_our_driver() -> None:
    spec = documents()["DeviceClass"]
    assert spec["metadata"]["name"] == protocol.DRA_DEVICE_CLASS
    assert spec["spec"]["selectors"] == [{"cel": {"expression": protocol.DRA_DEVICE_CLASS_SELECTOR}}]


def test_daemonset_mounts_what_the_driver_touches_and_never_runs_beside_the_device_plugin() -> None:
    docs = documents()
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == DEFAULT_IMAGE
    assert container["args"] == ["serve-dra-driver", "--enforce-memory=hard"]
    env = {entry["name"]: entry for entry in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    hosts = {v["hostPath"]["path"] for v in pod["volumes"]}
    wanted = {protocol.DRA_REGISTRATION_DIR, protocol.DRA_PLUGIN_DIR, protocol.DRA_CDI_ROOT, "/sys/fs/cgroup"}
    assert mounts == hosts == wanted
    assert pod["nodeSelector"] == {"gpushare.kubectl-gpushare.io/dra": "true"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpushare", "operator": "NotIn", "values": ["true"]}]}]
    assert env["POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    assert docs["DaemonSet"]["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]


def test_the_first_roll_recipe_in_the_docs_changes_only_the_update_strategy() -> None:
    """docs/dra.md's recipe for the first roll from a driver without POD_UID: no surge, the same pods."""
    docs = (MANIFESTS.parents[1] / "docs" / "dra.md").read_text()
    recipe = re.search(r"\*\*The first roll onto.*?```sh\n(sed .*?) manifests/dra/dra-driver\.yaml", docs, re.S)
    assert recipe is not None
    edited = subprocess.run(["bash", "-c", f"{recipe[1]} {MANIFESTS / 'dra-driver.yaml'}"], capture_output=True,
                            text=True, timeout=30, check=True).stdout
    before = {key(doc): doc for doc in yaml.safe_load_all((MANIFESTS / "dra-driver.yaml").read_text()) if doc}
    after = {key(doc): doc for doc in yaml.safe_load_all(edited) if doc}
    daemonset = ("DaemonSet", "kube-system", "gpushare-dra-driver")
    assert after[daemonset]["spec"].pop("updateStrategy") == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    before[daemonset]["spec"].pop("updateStrategy")
    assert after == before


@pytest.mark.integration
@pytest.mark.parametrize("enforcement", [False, True], ids=["enforcement-off", "enforcement-hard"])
def test_rbac_grants_exactly_what_the_driver_calls(
    start_driver, sandbox: Sandbox, api: Client, claims: Claims, dirs: Dirs, tmp_path: Path, enforcement: bool
) -> None:
    """With enforcement the driver also lists and watches this node's pods: the enforcement role, no more."""
    sandbox.load([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "stale"},
                   "spec": {"driver": protocol.DRA_DRIVER, "nodeName": NODE,
                            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}}}])
    backend = FakeBackend.from_spec("2x16GiB", seed=NODE)
    settings = {"enforce_memory": "hard", "cgroup_root": str(cgroup_tree(tmp_path))} if enforcement else {}
    running = start_driver("2x16GiB", backend=backend, **settings)
    wait_for(lambda: [s for s in api.list(types.DRA_SLICES) if s.metadata.name != "stale"], what="the slice")
    backend.set_health(1, False, "Xid 79")  # an update
    wait_for(lambda: len(api.list(types.DRA_SLICES)[0].spec.devices) == 1, what="the update")
    uid = claims.claim("c1").metadata.uid
    with grpc.insecure_channel(target(os.path.join(dirs.plugin, "dra.sock"))) as channel:
        answer = v1_grpc.DRAPluginStub(channel).NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace="default", name="c1", uid=uid)]), timeout=10)
    assert not answer.claims[uid].error
    publisher = running.driver.publisher  # the slice watch is open: its list and watch are in the log
    wait_for(lambda: publisher.watch is not None and publisher.watch.informer.watching, what="the slice watch")
    if enforcement:  # the pod watch is open: its list and watch are in the log
        wait_for(lambda: running.driver.pod_claims.informer.watching, what="the pod watch")
    used = set()
    for request in sandbox.requests:
        if "(dra-driver)" not in request.user_agent:
            continue
        group = "resource.k8s.io" if request.resource in ("resourceslices", "resourceclaims") else ""
        used.add((group, request.resource, request.verb))
    assert used == granted(enforcement=enforcement)
