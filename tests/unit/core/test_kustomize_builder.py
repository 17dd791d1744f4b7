"""The manifests command's small kustomize builder: RFC 6902 operations and refusal of what it lacks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubectl_gpushare.cli.kustomize import KustomizeError, apply_operation, build, legacy_order


def test_operations_add_append_replace_remove() -> None:
    doc = {"spec": {"args": ["a"], "type": "NodePort", "ports": [{"nodePort": 1}]}}
    apply_operation(doc, {"op": "add", "path": "/spec/args/-", "value": "b"})
    apply_operation(doc, {"op": "add", "path": "/spec/new~1key", "value": 1})
    apply_operation(doc, {"op": "replace", "path": "/spec/type", "value": "ClusterIP"})
    apply_operation(doc, {"op": "remove", "path": "/spec/ports/0/nodePort"})
    assert doc == {"spec": {"args": ["a", "b"], "type": "ClusterIP", "ports": [{}], "new/key": 1}}


@pytest.mark.parametrize("operation", [
    {"op": "move", "from": "/a", "path": "/b"},
    {"op": "replace", "path": "/missing", "value": 1},
    {"op": "remove", "path": "/spec/nope/deeper"},
    {"op": "add", "path": ""},
], ids=["unsupported-op", "replace-missing", "remove-missing-parent", "empty-path"])
def test_bad_operations_are_errors(operation: dict[str, object]) -> None:
    with pytest.raises(KustomizeError):
        apply_operation({"spec": {}}, operation)


def test_unsupported_fields_and_unmatched_patches_are_refused(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [a.yaml]\ncommonLabels: {x: y}\n")
    (tmp_path / "a.yaml").write_text("kind: Service\nmetadata: {name: a}\n")
    with pytest.raises(KustomizeError, match="commonLabels"):
        build(tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [a.yaml]\npatches:\n- path: p.yaml\n  target: {kind: Service, name: b}\n")
    (tmp_path / "p.yaml").write_text("- {op: remove, path: /metadata}\n")
    with pytest.raises(KustomizeError, match="no object matches"):
        build(tmp_path)


def test_a_component_builds_on_its_own_but_not_as_a_resource(tmp_path: Path) -> None:
    component = tmp_path / "comp"
    component.mkdir()
    (component / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [a.yaml]\n")
    (component / "a.yaml").write_text("kind: Service\nmetadata: {name: a}\n")
    assert build(tmp_path, "comp") == [{"kind": "Service", "metadata": {"name": "a"}}]
    (tmp_path / "kustomization.yaml").write_text("resources: [comp]\n")
    with pytest.raises(KustomizeError, match="components:"):
        build(tmp_path)


def test_components_come_after_resources_patch_what_came_before_and_must_be_components(tmp_path: Path) -> None:
    # kustomize's accumulateTarget: resources, then components (on the same objects), then the patches.
    (tmp_path / "comp").mkdir()
    (tmp_path / "comp" / "kustomization.yaml").write_text(
        "kind: Component\nresources: [b.yaml]\npatches:\n- path: p.yaml\n  target: {kind: Service, name: a}\n")
    (tmp_path / "comp" / "b.yaml").write_text("kind: Service\nmetadata: {name: b}\n")
    (tmp_path / "comp" / "p.yaml").write_text("- {op: add, path: /spec, value: {type: ClusterIP}}\n")
    (tmp_path / "a.yaml").write_text("kind: Service\nmetadata: {name: a}\n")
    (tmp_path / "kustomization.yaml").write_text("components: [comp]\nresources: [a.yaml]\n")
    assert build(tmp_path) == [{"kind": "Service", "metadata": {"name": "a"}, "spec": {"type": "ClusterIP"}},
                               {"kind": "Service", "metadata": {"name": "b"}}]
    (tmp_path / "comp" / "kustomization.yaml").write_text("kind: Kustomization\nresources: [b.yaml]\n")
    with pytest.raises(KustomizeError, match="not a kind: Component"):
        build(tmp_path)


def test_one_object_twice_in_a_build_is_refused(tmp_path: Path) -> None:
    # kustomize's resWrangler.Append: "may not add resource with an already registered id".
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "kustomization.yaml").write_text("resources: [role.yaml]\n")
    (tmp_path / "shared" / "role.yaml").write_text("apiVersion: v1\nkind: ClusterRole\nmetadata: {name: r}\n")
    (tmp_path / "comp").mkdir()
    (tmp_path / "comp" / "kustomization.yaml").write_text("kind: Component\nresources: [../shared]\n")
    (tmp_path / "kustomization.yaml").write_text("resources: [shared]\ncomponents: [comp]\n")
    with pytest.raises(KustomizeError, match="may not add .*ClusterRole.*already in the build"):
        build(tmp_path)
    (tmp_path / "kustomization.yaml").write_text("components: [comp]\n")
    assert build(tmp_path) == [{"apiVersion": "v1", "kind": "ClusterRole", "metadata": {"name": "r"}}]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("files", "folder", "message"), [
    # kustomize's FileLoader.New (errIfArgEqualOrHigher): "cycle detected: candidate root ... contains visited root".
    ({"kustomization.yaml": "resources: [.]\n"}, ".", "cycle: . is, or holds, ."),
    ({"a/kustomization.yaml": "resources: [b]\n", "a/b/kustomization.yaml": "resources: [..]\n"}, "a",
     "cycle: a is, or holds, a/b"),
    ({"a/kustomization.yaml": "kind: Component\ncomponents: [.]\n"}, "a", "cycle: a is, or holds, a"),
    ({"kustomization.yaml": "resources: [../../etc]\n"}, ".", "kustomization.yaml: ../../etc is outside the"),
    ({"kustomization.yaml": "components: [/etc]\n"}, ".", "/etc is outside the manifests tree"),
    # kustomize's RestrictionRootOnly: "security; file ... is not in or below ...".
    ({"a/kustomization.yaml": "resources: [../x.yaml]\n", "x.yaml": "kind: Service\nmetadata: {name: x}\n"}, "a",
     "a/kustomization.yaml: file ../x.yaml is not in or below a"),
    ({"kustomization.yaml": "resources: [nope]\n"}, ".", "kustomization.yaml: nope: no such file or folder"),
    ({"kustomization.yaml": "components: [gone]\n"}, ".", "gone: no such folder"),
    ({"kustomization.yaml": "patches: [{path: p.yaml, target: {kind: S, name: a}}]\n"}, ".", "p.yaml: no such file"),
    ({"a/x": ""}, "a", "a/kustomization.yaml: no such file"),
    ({"kustomization.yaml": "resources: [a.yaml]\n", "a.yaml": "kind: [\n"}, ".", "a.yaml: not YAML"),
    ({"kustomization.yaml": "resources: a.yaml\n"}, ".", "resources is not a list"),
    ({"kustomization.yaml": "resources: [{x: 1}]\n"}, ".", "{'x': 1} is not a path"),
    ({"kustomization.yaml": "patches: [{target: {}}]\n"}, ".", "None is not a path"),
    ({"kustomization.yaml": "- a\n"}, ".", "kustomization.yaml: not a mapping"),
    ({"kustomization.yaml": "resources: [a.yaml]\n", "a.yaml": "just text\n"}, ".", "a document is not an object"),
], ids=["lists-itself", "lists-its-parent", "component-lists-itself", "escapes-the-tree", "absolute",
        "file-above-its-folder", "missing-resource", "missing-component", "missing-patch", "no-kustomization",
        "bad-yaml", "resources-not-a-list", "entry-not-a-path", "patch-without-path", "spec-not-a-mapping",
        "document-not-an-object"])
def test_bad_trees_are_one_line_errors_not_tracebacks(
    tmp_path: Path, files: dict[str, str], folder: str, message: str
) -> None:
    with pytest.raises(KustomizeError) as caught:
        build(_tree(tmp_path, files), folder)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_folders_shared_by_two_branches_and_siblings_named_by_dot_dot_are_no_cycle(tmp_path: Path) -> None:
    # What manifests/ does: base and dra-only both list ../viewer; only an ancestor (or itself) is a cycle.
    role = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r}\n"
    _tree(tmp_path, {"shared/kustomization.yaml": "resources: [r.yaml]\n", "shared/r.yaml": role,
                     "a/kustomization.yaml": "resources: [../shared]\n",
                     "b/kustomization.yaml": "resources: [../shared]\n"})
    assert build(tmp_path, "a") == build(tmp_path, "b") == [yaml.safe_load(role)]


@pytest.mark.parametrize(("first", "second", "shown"), [
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: default}\n", "ConfigMap v1 default/x"),
    ("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n",
     "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x, namespace: foo}\n",
     "ClusterRole rbac.authorization.k8s.io/v1 x"),
], ids=["no-namespace-is-default", "cluster-scoped-has-no-namespace"])
def test_one_object_twice_is_refused_as_kustomize_compares_ids(
    tmp_path: Path, first: str, second: str, shown: str
) -> None:
    # kubectl kustomize (v5.5.0) refuses both: "may not add resource with an already registered id".
    _tree(tmp_path, {"kustomization.yaml": "resources: [a.yaml, b.yaml]\n", "a.yaml": first, "b.yaml": second})
    with pytest.raises(KustomizeError, match=f"b.yaml: may not add {shown}, which is already in the build"):
        build(tmp_path)


def test_other_namespaces_and_versions_are_other_objects(tmp_path: Path) -> None:
    # kyaml/resid: Gvk.Equals compares group, version and kind; a namespaced kind's namespaces differ.
    docs = ["apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n",
            "apiVersion: rbac.authorization.k8s.io/v1beta1\nkind: ClusterRole\nmetadata: {name: x}\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a}\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"]
    _tree(tmp_path, {"kustomization.yaml": "resources: [a.yaml]\n", "a.yaml": "---\n".join(docs)})
    assert build(tmp_path) == [yaml.safe_load(doc) for doc in docs]


@pytest.mark.parametrize(("spec", "message"), [
    ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Component\nresources: [a.yaml]\n",
     "apiVersion for Component should be kustomize.config.k8s.io/v1alpha1"),
    ("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Kustomization\nresources: [a.yaml]\n",
     "apiVersion for Kustomization should be kustomize.config.k8s.io/v1beta1"),
    ("kind: Kustomisation\nresources: [a.yaml]\n", "kind should be Kustomization or Component, not 'Kustomisation'"),
    ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n", "kustomization.yaml is empty"),
    ("", "kustomization.yaml is empty"),
], ids=["component-v1beta1", "kustomization-v1alpha1", "misspelt-kind", "only-type", "blank"])
def test_kustomization_files_kustomize_refuses_to_read_are_refused(tmp_path: Path, spec: str, message: str) -> None:
    # kubectl kustomize (v5.5.0): "Failed to read kustomization file ...: <message>" (EnforceFields, CheckEmpty).
    _tree(tmp_path, {"kustomization.yaml": spec, "a.yaml": "kind: Service\nmetadata: {name: a}\n"})
    with pytest.raises(KustomizeError, match=message):
        build(tmp_path)


_PATCHED = "resources: [a.yaml]\npatches: [{path: p.yaml, target: {kind: Service, name: a}}]\n"


@pytest.mark.parametrize(("files", "message"), [
    ({"kustomization.yaml": b"resources: [a.yaml]\n", "a.yaml": b"kind: Service\nmetadata: {name: \xff}\n"},
     "a.yaml: not UTF-8 text"),
    ({"kustomization.yaml": b"resources: [\xff]\n"}, "kustomization.yaml: not UTF-8 text"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n", "a.yaml": b"[" * 50_000 + b"]" * 50_000},
     "a.yaml: nested too deeply"),
    ({"kustomization.yaml": _PATCHED.encode(), "a.yaml": b"kind: Service\nmetadata: {name: a}\n", "p.yaml": b"- 5\n"},
     "patch operation 5 is not a mapping"),
    ({"kustomization.yaml": b"resources: [a.yaml]\npatches: [{path: p.yaml, target: 5}]\n",
      "a.yaml": b"kind: Service\nmetadata: {name: a}\n", "p.yaml": b"- {op: remove, path: /x}\n"},
     "kustomization.yaml: patch target 5 is not a mapping"),
    ({"kustomization.yaml": _PATCHED.encode(), "a.yaml": b"kind: Service\nmetadata: 5\n",
      "p.yaml": b"- {op: remove, path: /x}\n"}, "no object matches"),
], ids=["resource-not-utf8", "kustomization-not-utf8", "nested-too-deeply", "operation-not-a-mapping",
        "target-not-a-mapping", "metadata-not-a-mapping"])
def test_undecodable_deep_or_misshapen_files_are_one_line_errors(
    tmp_path: Path, files: dict[str, bytes], message: str
) -> None:
    # The manifests command turns a KustomizeError into "reinstall the plugin"; anything else was a traceback.
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(KustomizeError) as caught:
        build(tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def obj(api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, object]:
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_legacy_order_puts_kustomizes_first_kinds_first_and_webhooks_last() -> None:
    # kustomize's SortOrderTransformer (legacyIDSorter): defaultOrderFirst in its order, defaultOrderLast
    # last, every other kind between them by group_version_kind ("~G" for the core group).
    objects = [obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "v"),
               obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "m"),
               obj("apps/v1", "DaemonSet", "ds", "kube-system"),
               obj("v1", "Pod", "p", "kube-system"),
               obj("apps/v1", "Deployment", "d", "kube-system"),
               obj("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "vap"),
               obj("rbac.authorization.k8s.io/v1", "ClusterRole", "c"),
               obj("v1", "ServiceAccount", "sa", "kube-system"),
               obj("v1", "Namespace", "ns")]
    assert [doc["kind"] for doc in legacy_order(objects)] == [
        "Namespace", "ServiceAccount", "ClusterRole", "Deployment", "ValidatingAdmissionPolicy", "DaemonSet", "Pod",
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def test_legacy_order_within_a_kind_is_by_version_group_then_namespace_none_last_then_name() -> None:
    # legacyResIDSortString: Kind.version.group|namespace|name, no namespace spelt "~X".
    objects = [obj("apps/v1", "DaemonSet", "a"), obj("apps/v1", "DaemonSet", "b", "x"),
               obj("apps/v1", "DaemonSet", "a", "y"), obj("apps/v1", "DaemonSet", "a", "x")]
    assert [(doc["metadata"].get("namespace"), doc["metadata"]["name"]) for doc in legacy_order(objects)] == [
        ("x", "a"), ("x", "b"), ("y", "a"), (None, "a")]


def test_legacy_order_puts_the_core_namespace_before_another_groups_namespace() -> None:
    # gvkLessThan's one exception (kustomize #5458): "example.io_v1_Namespace" sorts before "~G_v1_Namespace".
    ordered = legacy_order([obj("example.io/v1", "Namespace", "a"), obj("v1", "Namespace", "z")])
    assert [doc["apiVersion"] for doc in ordered] == ["v1", "example.io/v1"]


def test_legacy_order_takes_objects_without_kind_or_metadata() -> None:
    ordered = legacy_order([{"kind": "Service", "metadata": "hostile"}, {"apiVersion": "v1"}, {"kind": None}])
    assert len(ordered) == 3


def test_build_prints_in_legacy_order_not_input_order(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n"
                                     "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    (tmp_path / "kustomization.yaml").write_text("resources: [a.yaml]\n")
    assert [doc["kind"] for doc in build(tmp_path)] == ["Service", "Deployment"]
