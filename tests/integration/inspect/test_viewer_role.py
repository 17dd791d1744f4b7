"""A read-only user runs every view with Kubernetes' ``view`` plus the shipped ``gpushare-viewer``, through kubectl.

The sandbox's read-only token holds ``view``'s rules (bootstrappolicy/policy.go); the second user
holds those and the rules of ``manifests/viewer/viewer.yaml``, read at test time. On a mixed cluster
(annotations, DRA, another driver's slices, Koordinator devices) that user sees what the admin sees;
with ``view`` alone a view stops at the first read ``view`` lacks, on one line that names the
permission and the ClusterRole to bind. ``gpushare-viewer`` grants exactly what the views use beyond ``view``,
and a DRA-only install (``kubectl gpushare manifests --dra``) brings it as the extender install does.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from golden.inspect import cases
from kubectl_steps import interruptible
from viewer_role import USER, viewer_kubeconfig, viewer_rules
from waiting import wait_for

from kubectl_gpushare.cli.manifests import render
from kubectl_gpushare.sandbox.authorization import VIEW_RULES
from kubectl_gpushare.sandbox.rbac import rule_allows, uncovered_requests
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

VIEWS: dict[str, list[str]] = {
    **{f"inspect {' '.join(flags)}".strip(): ["inspect", "gpushare", *flags] for flags in cases.VIEWS.values()},
    "inspect NODE": ["inspect", "gpushare", "share-node"],
    "inspect -w": ["inspect", "gpushare", "-w"],  # with view alone only: it never ends by itself
    "gpushare inspect": ["gpushare", "inspect"],
    "top": ["gpushare", "top", "-A"],
    "fit": ["gpushare", "fit", "4"],
    "explain": ["gpushare", "explain", "infer-1"],
    "doctor": ["gpushare", "doctor"],
}
NODES_FORBIDDEN = ('Failed due to nodes{name} is forbidden: User "sandbox-viewer" cannot {verb} resource "nodes" '
                   'in API group "" at the cluster scope ({command} needs permission to {verb} nodes: bind the '
                   'ClusterRole gpushare-viewer)\n')  # fmt: skip


def mixed_cluster(sandbox: Sandbox) -> None:
    """gpushare annotations, our DRA driver's and NVIDIA's slices and claims, and a Koordinator node."""
    sandbox.load(cases.cluster_objects("mixed-dra") + cases.cluster_objects("koordinator"))


def test_with_view_alone_each_view_says_on_one_line_which_permission_and_role_it_lacks(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    mixed_cluster(sandbox)
    view_only = str(sandbox.write_kubeconfig(tmp_path / "view", token=Sandbox.READONLY_TOKEN))
    for name, args in VIEWS.items():
        result = kubectl(*args, "--kubeconfig", view_only, check=False)
        verb, named = ("get", ' "share-node"') if name == "inspect NODE" else ("list", "")
        command = name if name in ("doctor", "explain", "top", "fit") else "inspect"
        assert (result.returncode, result.stdout) == (4, ""), f"{name}: {result.stderr}"
        assert result.stderr == NODES_FORBIDDEN.format(name=named, verb=verb, command=command), name


def test_with_view_and_gpushare_viewer_every_view_shows_what_the_admin_sees(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    mixed_cluster(sandbox)
    viewer = str(viewer_kubeconfig(sandbox, tmp_path / "viewer"))
    for name, args in VIEWS.items():
        if name == "inspect -w":
            continue  # its watches are the next test's
        admin = kubectl(*args, check=False)
        assert admin.stdout and admin.returncode != 4, f"{name}: {admin.stderr}"  # doctor exits with its findings
        mine = kubectl(*args, "--kubeconfig", viewer, check=False)
        assert (mine.returncode, mine.stdout, mine.stderr) == (admin.returncode, admin.stdout, admin.stderr), name
    refused = [(r.verb, r.path) for r in sandbox.requests if r.user == USER and r.status == 403]
    assert refused == []


def test_a_dra_only_install_brings_the_role_a_read_only_user_runs_inspect_with(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    mixed_cluster(sandbox)
    kubectl("apply", "-f", "-", input=render(dra=True))  # what `kubectl gpushare manifests --dra` prints
    role = sandbox.get("clusterroles", None, "gpushare-viewer")
    assert role is not None, "the DRA install did not create gpushare-viewer"
    viewer = str(viewer_kubeconfig(sandbox, tmp_path / "viewer", rules=role["rules"]))
    admin = kubectl("inspect", "gpushare")
    mine = kubectl("inspect", "gpushare", "--kubeconfig", viewer, check=False)
    assert (mine.returncode, mine.stdout, mine.stderr) == (0, admin.stdout, admin.stderr)
    assert "dra-a " in mine.stdout and "nv-dra " in mine.stdout  # our DRA driver's GPUs and NVIDIA's
    assert [r.path for r in sandbox.requests if r.user == USER and r.status == 403] == []


def test_gpushare_viewer_grants_exactly_the_reads_beyond_view_that_the_views_make(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]], kube_env: dict[str, str],
    tmp_path: Path,
) -> None:
    mixed_cluster(sandbox)
    viewer = viewer_kubeconfig(sandbox, tmp_path / "viewer")
    for name, args in VIEWS.items():
        if name != "inspect -w":
            kubectl(*args, "--kubeconfig", str(viewer), check=False)
    watch = interruptible(["kubectl-inspect-gpushare", "-w", "--kubeconfig", str(viewer)], env=kube_env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    watched = {"nodes", "pods", "resourceslices", "resourceclaims", "devices"}
    try:
        wait_for(lambda: watched <= {r.resource for r in sandbox.requests if r.user == USER and r.verb == "watch"},
                 what=f"inspect -w to watch {sorted(watched)}")
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=30) == 130
    mine = [r for r in sandbox.requests if r.user == USER]
    granted = viewer_rules()
    assert uncovered_requests(mine, [*VIEW_RULES, *granted]) == []
    beyond_view = {(r.group, r.resource, r.verb) for r in mine
                   if not any(rule_allows(rule, r.verb, r.group, r.resource, r.subresource) for rule in VIEW_RULES)}
    in_role = {(group, resource, verb) for rule in granted for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}  # fmt: skip
    assert in_role == beyond_view, "gpushare-viewer grants what no view uses, or lacks what one does"


def test_doctor_says_what_it_cannot_read_beyond_nodes_and_still_reports(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    mixed_cluster(sandbox)
    nodes_only = [rule for rule in viewer_rules() if rule["resources"] == ["nodes"]]
    sandbox.add_token("nodes-only", "bob", readonly=True, rules=nodes_only)
    kubeconfig = str(sandbox.write_kubeconfig(tmp_path / "bob", token="nodes-only"))
    result = kubectl("gpushare", "doctor", "--kubeconfig", kubeconfig, check=False)
    assert result.returncode not in (0, 4) and result.stdout.startswith("1 error, 0 warnings."), result.stderr
    assert result.stderr.splitlines() == [
        "warning: cannot list devices.scheduling.koordinator.sh: Koordinator GPUs are read from node resources",
        "warning: cannot list validatingadmissionpolicies and validatingadmissionpolicybindings: whether the device "
        "plugin is kept to its node is not checked",
        "warning: cannot list resourceslices.resource.k8s.io: GPUs shared through DRA are not shown",
    ]


def test_with_gpushare_viewer_alone_each_view_says_it_needs_view_for_the_pods(
    sandbox: Sandbox, kubectl: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    # docs/install.md: without ``view`` the line names ``list pods in all namespaces`` and the role ``view``.
    mixed_cluster(sandbox)
    sandbox.add_token("gpushare-viewer-alone", "carol", rules=viewer_rules())
    kubeconfig = str(sandbox.write_kubeconfig(tmp_path / "carol", token="gpushare-viewer-alone"))
    for name, args in VIEWS.items():
        result = kubectl(*args, "--kubeconfig", kubeconfig, check=False)
        assert (result.returncode, result.stdout) == (4, ""), f"{name}: {result.stderr}"
        *warned, failed = result.stderr.splitlines()
        assert warned in ([], ["warning: cannot list configmaps in kube-system: unhealthy GPUs are not marked"]), name
        if name == "explain":  # the pod first, in its namespace
            assert failed == ('Failed due to pods "infer-1" is forbidden: User "carol" cannot get resource "pods" in '
                              'API group "" in the namespace "default" (explain needs permission to get pods: bind '
                              'the ClusterRole view)'), failed  # fmt: skip
        else:
            command = name if name in ("doctor", "top", "fit") else "inspect"
            assert failed == ('Failed due to pods is forbidden: User "carol" cannot list resource "pods" in API group '
                              f'"" at the cluster scope ({command} needs permission to list pods in all namespaces: '
                              'bind the ClusterRole view)'), name  # fmt: skip
