"""Build the shipped kustomize trees without kustomize, so ``kubectl gpushare manifests`` needs nothing else.

Only what ``manifests/`` uses is supported: ``resources`` (files and folders, also ``../x``),
``components`` (Component folders) and ``patches`` given as a file of RFC 6902 operations (add,
replace, remove) with a ``target`` of kind, name and optional namespace. As in kustomize
(api/internal/target/kusttarget.go, accumulateTarget and accumulateDirectory): a folder's resources
come first, then its components, each adding its objects and patches to the objects gathered so
far, then its own patches; a ``kind: Component`` folder builds on its own as a Kustomization does,
is refused under ``resources:``, and only a Component may be listed under ``components:``; two
objects of one apiVersion, kind, namespace and name are an error (api/resmap/reswrangler.go, Append;
no namespace is ``default``, and a cluster-scoped object has none: kyaml/resid/resid.go).
Paths are kustomize's too (api/internal/loader/fileloader.go, New and errIfArgEqualOrHigher;
loadrestrictions.go, RestrictionRootOnly): a folder that is, or holds, one of the folders that led to
it is a cycle, and a file must lie in or below the folder whose kustomization names it. Beyond
kustomize, nothing may lie outside ``root``: the package ships only that tree.
Anything else is an error, never silently skipped: the tests build every tree with the real
``kubectl kustomize`` and require the same objects, in the same order (`legacy_order`), and, written
by `goyaml.dump_all`, the same bytes.
"""

from __future__ import annotations

import posixpath
from functools import cmp_to_key
from importlib.resources.abc import Traversable
from typing import Any, Final

import yaml

Document = dict[str, Any]


class KustomizeError(ValueError):
    """The tree uses something this builder does not support, or a patch does not apply."""


def _at(root: Traversable, relative: str) -> Traversable:
    """The entry at a ``/``-separated path below ``root`` (package resources have no os.path)."""
    node = root
    for part in relative.split("/"):
        if part not in ("", "."):
            node = node / part
    return node


def build(root: Traversable, folder: str = ".", *, top: bool = True) -> list[Document]:
    """The objects of the kustomization in ``folder`` (relative to ``root``), in the order kustomize prints them.

    kustomize gathers them in input order and sorts the result once, at the end (`legacy_order`).

    Raises:
        KustomizeError: an unsupported field, a Component named in ``resources:`` or another kind in
            ``components:``, two objects with one id, a patch that does not apply, a missing or
            unparsable file, a cycle, or a path outside ``root`` or (for a file) its folder.
    """
    return legacy_order(_accumulate(root, posixpath.normpath(folder), [], "top" if top else "resource", ()))


_ORDER_FIRST: Final = ("Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
                       "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap",
                       "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass", "PersistentVolume",
                       "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget")
_ORDER_LAST: Final = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
_RANK: Final = {**{kind: i - len(_ORDER_FIRST) for i, kind in enumerate(_ORDER_FIRST)},
                **{kind: i + 1 for i, kind in enumerate(_ORDER_LAST)}}
"""Kind -> rank: the kinds kustomize puts first (negative, in this order) and last; every other kind is 0."""


def legacy_order(documents: list[Document]) -> list[Document]:
    """``documents`` in kustomize's default ("legacy") order, the one ``kubectl kustomize`` prints.

    As api/internal/builtins/SortOrderTransformer.go (legacyIDSorter; the same from kustomize api v0.18
    to v0.21, kubectl 1.32 to 1.37), which api/krusty/kustomizer.go (applySortOrder) runs on the whole
    build when the kustomization has no ``sortOptions``: first by kind, the kinds of defaultOrderFirst
    first in that order, those of defaultOrderLast (the webhook configurations) last, every other kind
    in between; kinds of one rank by ``group_version_kind``; objects of one group, version and kind by
    ``Kind.version.group|namespace|name``, where no namespace is ``~X``.
    """
    return sorted(documents, key=cmp_to_key(_legacy_compare))


def _legacy_compare(left: Document, right: Document) -> int:
    """legacyIDSorter.Less and gvkLessThan, as a three-way comparison."""
    (l_group, l_version, l_kind), (r_group, r_version, r_kind) = _gvk(left), _gvk(right)
    if (l_group, l_version, l_kind) != (r_group, r_version, r_kind):
        if _RANK.get(l_kind, 0) != _RANK.get(r_kind, 0):
            return -1 if _RANK.get(l_kind, 0) < _RANK.get(r_kind, 0) else 1
        first = "_".join((l_group or "~G", l_version or "~V", l_kind or "~K"))
        second = "_".join((r_group or "~G", r_version or "~V", r_kind or "~K"))
        if l_kind == r_kind == "Namespace" and "" in (l_group, r_group):
            first, second = second, first  # the core Namespace before a CRD's (kustomize PR #5458, api v0.18)
        return -1 if first < second else 1
    first, second = _legacy_id(left), _legacy_id(right)
    return -1 if first < second else 1 if first > second else 0


def _gvk(doc: Document) -> tuple[str, str, str]:
    """(group, version, kind), the apiVersion split at its first ``/`` (kyaml/resid/gvk.go, ParseGroupVersion)."""
    api_version = _text(doc.get("apiVersion"))
    group, slash, version = api_version.partition("/")
    return (group, version, _text(doc.get("kind"))) if slash else ("", api_version, _text(doc.get("kind")))


def _legacy_id(doc: Document) -> str:
    """legacyResIDSortString: ``Kind.version.group|namespace|name`` (kyaml/resid/gvk.go, Gvk.String)."""
    group, version, kind = _gvk(doc)
    meta = _metadata(doc)
    return "|".join((".".join((kind or "[noKind]", version or "[noVer]", group or "[noGrp]")),
                     _text(meta.get("namespace")) or "~X", _text(meta.get("name")) or "~N"))


def _metadata(doc: Document) -> dict[str, Any]:
    """The object's ``metadata``; a missing or misshapen one is empty, so one bad object gives no traceback."""
    meta = doc.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _text(value: object) -> str:
    """A field as text; an absent or null one is empty, as kyaml reads it."""
    return "" if value is None else str(value)


def _load(root: Traversable, path: str) -> list[Any]:
    """The YAML documents of the file at ``path``; a missing or unparsable file is a KustomizeError.

    Unparsable includes bytes that are not UTF-8 and nesting deeper than PyYAML's recursive
    composer can follow (a RecursionError), not only a YAML syntax error.
    """
    node = _at(root, path)
    if not node.is_file():
        raise KustomizeError(f"{path}: no such file")
    try:
        return list(yaml.safe_load_all(node.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:
        raise KustomizeError(f"{path}: not YAML ({' '.join(str(exc).split())})") from None
    except UnicodeDecodeError:
        raise KustomizeError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise KustomizeError(f"{path}: nested too deeply") from None


def _spec_file(folder: str) -> str:
    return posixpath.normpath(posixpath.join(folder, "kustomization.yaml"))


def _inside(folder: str, entry: object, *, file: bool) -> str:
    """``entry`` of ``folder``'s kustomization as a path below the root; refused where kustomize or the wheel would."""
    if not isinstance(entry, str) or not entry:
        raise KustomizeError(f"{_spec_file(folder)}: {entry!r} is not a path")
    path = posixpath.normpath(posixpath.join(folder, entry))
    if path == ".." or path.startswith(("../", "/")):
        raise KustomizeError(f"{_spec_file(folder)}: {entry} is outside the manifests tree")
    if file and not (folder == "." or path.startswith(folder + "/")):
        raise KustomizeError(f"{_spec_file(folder)}: file {entry} is not in or below {folder}")
    return path


_API_VERSIONS: Final = {"Kustomization": "kustomize.config.k8s.io/v1beta1",
                         "Component": "kustomize.config.k8s.io/v1alpha1"}
"""The apiVersion each kind of kustomization file must have, if it names one."""


def _check_type(folder: str, spec: dict[str, Any]) -> None:
    """Refuse what kustomize's Kustomization.EnforceFields and CheckEmpty refuse (api/types/kustomization.go).

    A kind other than Kustomization or Component, an apiVersion not the kind's, or a file with
    nothing but apiVersion and kind.
    """
    kind = spec.get("kind") or "Kustomization"
    if kind not in _API_VERSIONS:
        raise KustomizeError(f"{_spec_file(folder)}: kind should be Kustomization or Component, not {kind!r}")
    if spec.get("apiVersion") and spec["apiVersion"] != _API_VERSIONS[kind]:
        raise KustomizeError(f"{_spec_file(folder)}: apiVersion for {kind} should be {_API_VERSIONS[kind]}")
    if not set(spec) - {"apiVersion", "kind"}:
        raise KustomizeError(f"{_spec_file(folder)} is empty")


def _accumulate(root: Traversable, folder: str, documents: list[Document], role: str,
                chain: tuple[str, ...]) -> list[Document]:
    """Add ``folder``'s objects to ``documents`` and apply its patches to all of them.

    A Kustomization starts from an empty list (its parent merges the result); a Component
    (``role == "component"``) works on its parent's list, as kustomize's accumulateDirectory does.
    ``chain``: the folders that led here, for kustomize's cycle check.
    """
    for visited in reversed(chain):  # innermost first, as the loader reports it
        if folder in (visited, ".") or visited.startswith(folder + "/"):
            raise KustomizeError(f"cycle: {folder} is, or holds, {visited}, which led to it")
    if not _at(root, folder).is_dir():
        raise KustomizeError(f"{folder}: no such folder")
    (spec, *_) = _load(root, _spec_file(folder)) or [None]
    spec = spec or {}
    if not isinstance(spec, dict):
        raise KustomizeError(f"{_spec_file(folder)}: not a mapping")
    _check_type(folder, spec)
    is_component = spec.get("kind") == "Component"
    if role == "resource" and is_component:
        raise KustomizeError(f"{folder} is a Component: an overlay names it in components:, not resources:")
    if role == "component" and not is_component:
        raise KustomizeError(f"{folder} is listed under components: but is not a kind: Component")
    unsupported = set(spec) - {"apiVersion", "kind", "resources", "components", "patches"}
    if unsupported:
        raise KustomizeError(f"{_spec_file(folder)}: unsupported fields {sorted(unsupported)}")
    for key in ("resources", "components", "patches"):
        if not isinstance(spec.get(key) or [], list):
            raise KustomizeError(f"{_spec_file(folder)}: {key} is not a list")
    seen = {_id(known) for known in documents}  # only this loop adds to ``documents`` until it ends
    for entry in spec.get("resources") or ():
        path = _inside(folder, entry, file=False)
        if _at(root, path).is_dir():
            added = _accumulate(root, path, [], "resource", (*chain, folder))
        elif not _at(root, path).is_file():
            raise KustomizeError(f"{_spec_file(folder)}: {entry}: no such file or folder")
        else:
            added = [doc for doc in _load(root, _inside(folder, entry, file=True)) if doc]
        for doc in added:
            if not isinstance(doc, dict):
                raise KustomizeError(f"{path}: a document is not an object: {str(doc)[:60]!r}")
            doc_id = _id(doc)
            if doc_id in seen:
                raise KustomizeError(f"{path}: may not add {_shown(doc_id)}, which is already in the build")
            seen.add(doc_id)
            documents.append(doc)
    for entry in spec.get("components") or ():
        _accumulate(root, _inside(folder, entry, file=False), documents, "component", (*chain, folder))
    for patch in spec.get("patches") or ():
        if not isinstance(patch, dict):
            raise KustomizeError(f"{_spec_file(folder)}: patch {patch!r} is not a mapping with a path")
        (operations, *_) = _load(root, _inside(folder, patch.get("path"), file=True)) or [None]
        target = patch.get("target") or {}
        if not isinstance(target, dict):
            raise KustomizeError(f"{_spec_file(folder)}: patch target {target!r} is not a mapping")
        matched = [doc for doc in documents if _matches(doc, target)]
        if not isinstance(operations, list) or not matched:
            raise KustomizeError(f"{folder}/{patch['path']}: not an RFC 6902 patch, or no object matches {target}")
        for doc in matched:
            for operation in operations:
                apply_operation(doc, operation)
    return documents


def _id(doc: Document) -> tuple[str, str, str, str]:
    """The object's identity as kustomize compares it (kyaml/resid/resid.go, Equals and EffectiveNamespace).

    A namespaced object without a namespace is in ``default``; a cluster-scoped one is in no namespace,
    whatever its metadata says. Scope is known for the kinds the sandbox serves, as kustomize knows it
    from its OpenAPI schema; any other kind counts as namespaced, as kustomize counts one its schema lacks.
    """
    from kubectl_gpushare.sandbox.resources import BY_KIND

    meta = _metadata(doc)
    api_version, kind = str(doc.get("apiVersion")), str(doc.get("kind"))
    known = BY_KIND.get(kind)
    if known is not None and known.api_version == api_version and not known.namespaced:
        namespace = ""
    else:
        namespace = str(meta.get("namespace") or "default")
    return api_version, kind, namespace, str(meta.get("name"))


def _shown(key: tuple[str, str, str, str]) -> str:
    """``kind apiVersion namespace/name`` (no namespace for a cluster-scoped object), for errors."""
    api_version, kind, namespace, name = key
    return f"{kind} {api_version} {namespace}/{name}" if namespace else f"{kind} {api_version} {name}"


def _matches(doc: Document, target: dict[str, str]) -> bool:
    meta = _metadata(doc)
    return (doc.get("kind") == target.get("kind") and meta.get("name") == target.get("name")
            and ("namespace" not in target or meta.get("namespace") == target["namespace"]))


def apply_operation(doc: Document, operation: dict[str, Any]) -> None:
    """Apply one RFC 6902 ``add``, ``replace`` or ``remove`` to ``doc`` in place.

    Raises:
        KustomizeError: another op, or a path that does not exist where it must.
    """
    if not isinstance(operation, dict):
        raise KustomizeError(f"patch operation {operation!r} is not a mapping")
    op, path = operation.get("op"), str(operation.get("path", ""))
    tokens = [token.replace("~1", "/").replace("~0", "~") for token in path.split("/")[1:]]
    if op not in ("add", "replace", "remove") or not tokens:
        raise KustomizeError(f"unsupported patch operation {operation}")
    parent: Any = doc
    try:
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op == "add":
                parent.insert(index, operation["value"])
            elif op == "replace":
                parent[index] = operation["value"]
            else:
                del parent[index]
        elif op == "add":
            parent[last] = operation["value"]
        else:
            if last not in parent:
                raise KeyError(last)
            if op == "replace":
                parent[last] = operation["value"]
            else:
                del parent[last]
    except (KeyError, IndexError, ValueError, TypeError):
        raise KustomizeError(f"patch path {path} does not apply") from None
