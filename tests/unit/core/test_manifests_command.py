"""`kubectl gpushare manifests` prints the reviewed files from manifests/, with the image swapped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from kubectl_gpushare.cli.manifests import DEFAULT_IMAGE, SCHEDULER_IMAGE, manifests_command

REPO = Path(__file__).resolve().parents[3]


def test_all_prints_extender_and_device_plugin_as_one_stream() -> None:
    out = CliRunner().invoke(manifests_command, []).output
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out) if doc}
    assert {"Deployment", "DaemonSet", "Service", "ClusterRole", "ClusterRoleBinding", "ServiceAccount"} <= kinds
    assert "KubeSchedulerConfiguration" not in kinds
    assert out.count(DEFAULT_IMAGE) == 2


def test_image_is_replaced_everywhere() -> None:
    out = CliRunner().invoke(manifests_command, ["--image", "registry.example/gpushare:dev"]).output
    assert DEFAULT_IMAGE not in out and out.count("registry.example/gpushare:dev") == 2


def test_scheduler_config_is_printed_alone_and_matches_the_repository_file() -> None:
    out = CliRunner().invoke(manifests_command, ["--only", "scheduler-config"]).output
    assert out == (REPO / "manifests" / "kube-scheduler-config.yaml").read_text().strip() + "\n"
    assert yaml.safe_load(out)["kind"] == "KubeSchedulerConfiguration"


def test_help_keeps_the_examples_on_their_own_lines() -> None:
    out = CliRunner().invoke(manifests_command, ["--help"]).output
    assert "\\b" not in out
    assert "\n    kubectl gpushare manifests | kubectl apply -f -\n" in out


def test_managed_adds_scheduler_webhook_and_certificates_with_both_images_replaced() -> None:
    args = ["--managed", "--image", "registry.example/gpushare:dev",
            "--scheduler-image", "registry.k8s.io/kube-scheduler:v1.31.4"]
    out = CliRunner().invoke(manifests_command, args).output
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out) if doc}
    assert {"MutatingWebhookConfiguration", "Certificate", "Issuer", "ConfigMap", "DaemonSet"} <= kinds
    assert out.count("registry.k8s.io/kube-scheduler:v1.31.4") == 1 and SCHEDULER_IMAGE not in out
    assert out.count("registry.example/gpushare:dev") == 2


def test_only_picks_one_component_of_the_chosen_tree() -> None:
    plain = CliRunner().invoke(manifests_command, ["--only", "extender"]).output
    managed = CliRunner().invoke(manifests_command, ["--managed", "--only", "extender"]).output
    assert {doc["kind"] for doc in yaml.safe_load_all(plain)} == {
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"}
    assert "--tls-cert-file" not in plain and "--tls-cert-file" in managed
    webhook = CliRunner().invoke(manifests_command, ["--managed", "--only", "webhook"]).output
    assert {doc["kind"] for doc in yaml.safe_load_all(webhook)} == {"Service", "MutatingWebhookConfiguration"}


def test_managed_only_component_without_managed_is_a_usage_error() -> None:
    result = CliRunner().invoke(manifests_command, ["--only", "webhook"])
    assert result.exit_code == 2 and "add --managed" in result.output


def test_dra_prints_the_driver_its_device_class_and_the_viewer_role() -> None:
    out = CliRunner().invoke(manifests_command, ["--dra", "--image", "registry.example/gpushare:dev"]).output
    docs = [doc for doc in yaml.safe_load_all(out) if doc]
    assert sorted(doc["kind"] for doc in docs) == [
        "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "DaemonSet",
        "DeviceClass", "ServiceAccount"]  # the enforcement role: pods list/watch for --enforce-memory (delete it
    # with enforcement off); gpushare-viewer: for read-only users of the views, as every install carries it
    assert {doc["metadata"]["name"] for doc in docs if doc["kind"] == "ClusterRole"} == {
        "gpushare-dra-driver", "gpushare-dra-driver-enforcement", "gpushare-viewer"}
    assert out.count("registry.example/gpushare:dev") == 1 and "serve-dra-driver" in out


def test_dra_and_managed_are_different_installs() -> None:
    assert CliRunner().invoke(manifests_command, ["--dra", "--managed"]).exit_code == 2
    result = CliRunner().invoke(manifests_command, ["--only", "device-class"])
    assert result.exit_code == 2 and "add --dra" in result.output


def test_viewer_prints_the_read_only_users_cluster_role_alone_and_every_install_carries_it() -> None:
    out = CliRunner().invoke(manifests_command, ["--only", "viewer"]).output
    docs = [doc for doc in yaml.safe_load_all(out) if doc]
    assert [(doc["kind"], doc["metadata"]["name"]) for doc in docs] == [("ClusterRole", "gpushare-viewer")]
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in docs[0]["rules"]), "read-only"
    for flags in ([], ["--managed"], ["--dra"]):
        names = {(doc["kind"], doc["metadata"]["name"])
                 for doc in yaml.safe_load_all(CliRunner().invoke(manifests_command, flags).output) if doc}
        assert ("ClusterRole", "gpushare-viewer") in names, flags
        assert not any(kind.endswith("Binding") and "viewer" in name for kind, name in names), "bound to nobody"


def test_viewer_of_the_dra_install_is_the_extender_installs_one() -> None:
    # One object on a cluster that runs both installs: the same name and rules, so the second apply keeps it.
    alone = CliRunner().invoke(manifests_command, ["--only", "viewer"])
    with_dra = CliRunner().invoke(manifests_command, ["--dra", "--only", "viewer"])
    assert with_dra.exit_code == 0 and with_dra.output == alone.output
    (role,) = [doc for doc in yaml.safe_load_all(CliRunner().invoke(manifests_command, ["--dra"]).output)
               if doc and doc["metadata"]["name"] == "gpushare-viewer"]
    assert role == yaml.safe_load(alone.output)
    result = CliRunner().invoke(manifests_command, ["--dra", "--only", "extender"])
    assert result.exit_code == 2 and "--only extender is not part of the DRA install" in result.output


def test_a_damaged_installation_is_one_error_line_and_prints_no_half_stream(tmp_path: Path) -> None:
    # The real command over a copy of the package whose manifests tree has a cycle and lost a file.
    shutil.copytree(REPO / "kubectl_gpushare", tmp_path / "kubectl_gpushare", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "_api"))
    shipped = tmp_path / "kubectl_gpushare" / "cli" / "_manifests"
    (shipped / "viewer" / "kustomization.yaml").write_text("resources: [viewer.yaml, ../dra-only]\n")
    (shipped / "base" / "device-plugin.yaml").unlink()
    (shipped / "kube-scheduler-config.yaml").write_bytes(b"kind: \xff\n")  # printed as text, in no tree
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    for flags, error in ((["--dra"], "cycle: dra-only is, or holds, dra-only, which led to it"),
                         (["--only", "viewer"], "base/kustomization.yaml: device-plugin.yaml: no such file"),
                         (["--only", "scheduler-config"], "can't decode byte 0xff")):
        result = subprocess.run([sys.executable, "-m", "kubectl_gpushare.cli", "manifests", *flags], env=env,
                                capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (1, ""), flags
        assert result.stderr.startswith("error: the manifests shipped with kubectl-gpushare do not build (")
        assert error in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_an_image_that_is_no_reference_is_refused_not_written_into_the_yaml() -> None:
    # Swapped into the dumped text, a newline there added keys, a space or "{" broke it, and a bracketed
    # IPv6 registry (a valid reference) became a YAML list: now refused, or swapped before dumping.
    for flag in ("--image", "--scheduler-image"):
        for image in ("a\n        privileged: true", "my image", "{a", ""):
            result = CliRunner().invoke(manifests_command, ["--managed", flag, image])
            assert result.exit_code == 2 and "is not an image reference" in result.output, (flag, image)
            assert "privileged" not in result.output.split("Error:")[0]
    allowed = "[fd00::1]:5000/team/gpushare_x.y-z@sha256:" + "a" * 64
    result = CliRunner().invoke(manifests_command, ["--image", allowed])
    assert result.exit_code == 0
    images = [container["image"] for doc in yaml.safe_load_all(result.output) if doc["kind"] == "DaemonSet"
              for container in doc["spec"]["template"]["spec"]["containers"]]
    assert images and set(images) == {allowed}


def test_an_object_nested_too_deeply_to_write_is_one_error_line(tmp_path: Path) -> None:
    # Shallow enough for the builder's YAML reader, too deep for the dumper's recursion: was a RecursionError.
    shutil.copytree(REPO / "kubectl_gpushare", tmp_path / "kubectl_gpushare", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "_api"))
    viewer = tmp_path / "kubectl_gpushare" / "cli" / "_manifests" / "viewer" / "viewer.yaml"
    viewer.write_text(viewer.read_text() + "x: " + "{a: " * 430 + "1" + "}" * 430 + "\n")
    result = subprocess.run([sys.executable, "-m", "kubectl_gpushare.cli", "manifests", "--only", "viewer"],
                            env=dict(os.environ, PYTHONPATH=str(tmp_path)), capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("error: the manifests shipped with kubectl-gpushare do not build (")
    assert "nested too deeply to write" in result.stderr and result.stderr.count("\n") == 1
