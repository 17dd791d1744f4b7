"""Build the shipped kustomize trees without kustomize, so ``kubectl gpushare manifests`` needs nothing else.

Only what ``manifests/`` uses is supported: ``resources`` (files and folders, also ``../x``) and
``patches`` given as a file of RFC 6902 operations (add, replace, remove) with a ``target`` of
kind, name and optional namespace. A ``kind: Component`` folder (``manifests/dra``) builds on its
own as a Kustomization does, and, as in kustomize (api/internal/target/kusttarget.go), is refused
when ``resources:`` names it: overlays take it through ``components:``, which this builder lacks.
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
        KustomizeError: an unsupported field, a Component named in ``resources:``, or a patch that
            does not apply.
    """
    spec = yaml.safe_load(_at(root, posixpath.join(folder, "kustomization.yaml")).read_text()) or {}
    if not top and spec.get("kind") == "Component":
        raise KustomizeError(f"{folder} is a Component: an overlay names it in components:, not resources:")
    unsupported = set(spec) - {"apiVersion", "kind", "resources", "patches"}
    if unsupported:
        raise KustomizeError(f"{folder}/kustomization.yaml: unsupported fields {sorted(unsupported)}")
    documents: list[Document] = []
    for entry in spec.get("resources") or ():
        path = posixpath.normpath(posixpath.join(folder, entry))
        if _at(root, path).is_dir():
            documents.extend(build(root, path, top=False))
        else:
            documents.extend(doc for doc in yaml.safe_load_all(_at(root, path).read_text()) if doc)
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
