"""Build the shipped kustomize trees without kustomize, so ``kubectl gpushare manifests`` needs nothing else.

Only what ``manifests/`` uses is supported: ``resources`` (files and folders, also ``../x``),
``components`` (Component folders) and ``patches`` given as a file of RFC 6902 operations (add,
replace, remove) with a ``target`` of kind, name and optional namespace. As in kustomize
(api/internal/target/kusttarget.go, accumulateTarget and accumulateDirectory): a folder's resources
come first, then its components, each adding its objects and patches to the objects gathered so
far, then its own patches; a ``kind: Component`` folder builds on its own as a Kustomization does,
is refused under ``resources:``, and only a Component may be listed under ``components:``; two
objects of one apiVersion, kind, namespace and name are an error (api/resmap/reswrangler.go, Append).
Anything else is an error, never silently skipped: the tests build every tree with the real
``kubectl kustomize`` and require the same objects.
"""

from __future__ import annotations

import posixpath
from importlib.resources.abc import Traversable
from typing import Any

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
    """The objects of the kustomization in ``folder`` (relative to ``root``), in kustomize's input order.

    Raises:
        KustomizeError: an unsupported field, a Component named in ``resources:`` or another kind in
            ``components:``, two objects with one id, or a patch that does not apply.
    """
    return _accumulate(root, folder, [], "top" if top else "resource")


def _accumulate(root: Traversable, folder: str, documents: list[Document], role: str) -> list[Document]:
    """Add ``folder``'s objects to ``documents`` and apply its patches to all of them.

    A Kustomization starts from an empty list (its parent merges the result); a Component
    (``role == "component"``) works on its parent's list, as kustomize's accumulateDirectory does.
    """
    spec = yaml.safe_load(_at(root, posixpath.join(folder, "kustomization.yaml")).read_text()) or {}
    is_component = spec.get("kind") == "Component"
    if role == "resource" and is_component:
        raise KustomizeError(f"{folder} is a Component: an overlay names it in components:, not resources:")
    if role == "component" and not is_component:
        raise KustomizeError(f"{folder} is listed under components: but is not a kind: Component")
    unsupported = set(spec) - {"apiVersion", "kind", "resources", "components", "patches"}
    if unsupported:
        raise KustomizeError(f"{folder}/kustomization.yaml: unsupported fields {sorted(unsupported)}")
    for entry in spec.get("resources") or ():
        path = posixpath.normpath(posixpath.join(folder, entry))
        if _at(root, path).is_dir():
            added = _accumulate(root, path, [], "resource")
        else:
            added = [doc for doc in yaml.safe_load_all(_at(root, path).read_text()) if doc]
        for doc in added:
            if any(_id(doc) == _id(known) for known in documents):
                raise KustomizeError(f"{path}: may not add {_id(doc)}, which is already in the build")
            documents.append(doc)
    for entry in spec.get("components") or ():
        _accumulate(root, posixpath.normpath(posixpath.join(folder, entry)), documents, "component")
    for patch in spec.get("patches") or ():
        operations = yaml.safe_load(_at(root, posixpath.join(folder, patch["path"])).read_text())
        target = patch.get("target") or {}
        matched = [doc for doc in documents if _matches(doc, target)]
        if not isinstance(operations, list) or not matched:
            raise KustomizeError(f"{folder}/{patch['path']}: not an RFC 6902 patch, or no object matches {target}")
        for doc in matched:
            for operation in operations:
                apply_operation(doc, operation)
    return documents


def _id(doc: Document) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return str(doc.get("apiVersion")), str(doc.get("kind")), str(meta.get("namespace", "")), str(meta.get("name"))


def _matches(doc: Document, target: dict[str, str]) -> bool:
    meta = doc.get("metadata") or {}
    return (doc.get("kind") == target.get("kind") and meta.get("name") == target.get("name")
            and ("namespace" not in target or meta.get("namespace") == target["namespace"]))


def apply_operation(doc: Document, operation: dict[str, Any]) -> None:
    """Apply one RFC 6902 ``add``, ``replace`` or ``remove`` to ``doc`` in place.

    Raises:
        KustomizeError: another op, or a path that does not exist where it must.
    """
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
