"""The three PATCH formats kube-apiserver accepts, applied to plain JSON values.

* JSON merge patch (RFC 7386, ``application/merge-patch+json``): maps merge, ``null`` deletes,
  lists are replaced.
* Strategic merge patch (``application/strategic-merge-patch+json``): a merge patch in which
  lists with a merge key in the Kubernetes schema (``containers`` by ``name``, ``conditions`` by
  ``type``, ...) are merged element by element, primitive lists with a merge strategy
  (``finalizers``) are unioned, and the directives ``$patch`` (replace/delete/merge),
  ``$retainKeys``, ``$deleteFromPrimitiveList/<k>`` and ``$setElementOrder/<k>`` are honoured.
  The merge keys come from a table keyed by field name rather than the full OpenAPI schema: it
  covers the fields of the kinds the sandbox serves.
* JSON patch (RFC 6902, ``application/json-patch+json``): add, remove, replace, move, copy, test.

Pure functions: inputs are never modified; errors raise `PatchError` (malformed patch documents)
or `PatchConflictError` (a well-formed patch that cannot apply, e.g. a failed ``test``).
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "addresses": "type",
    "taints": "key",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
"""List fields merged element by element, and the key that identifies an element."""

MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})
"""Primitive lists whose patch strategy is merge (values are added, never replaced)."""


class PatchError(ValueError):
    """The patch document is malformed (HTTP 400)."""


class PatchConflictError(ValueError):
    """The patch is well formed but cannot apply to this object (HTTP 422)."""


# --- RFC 7386 ------------------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch; returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- strategic merge patch -----------------------------------------------------------------------
def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch; returns a new value.

    Raises:
        PatchError: the patch is not an object, or uses an unknown ``$patch`` directive.
    """
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch body must be a JSON object")
    return _smp_map(copy.deepcopy(target) if isinstance(target, dict) else {}, patch)


def _smp_map(original: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive!r}")
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(original.get(field), list) and isinstance(value, list):
                original[field] = [item for item in original[field] if item not in value]
            continue
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else {}, value)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, list):
            original[key] = _smp_list(key, current if isinstance(current, list) else [], value)
        else:
            original[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        for key in list(original):
            if key not in retain:
                del original[key]
    return original


def _smp_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    merge_key = MERGE_KEYS.get(field)
    if field in MERGED_PRIMITIVE_LISTS:
        result = list(original)
        result.extend(copy.deepcopy(item) for item in patch if item not in result)
        return result
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        return copy.deepcopy(patch)
    result = [copy.deepcopy(item) for item in original]
    for item in patch:
        key = item.get(merge_key)
        index = next(
            (i for i, existing in enumerate(result) if isinstance(existing, dict) and existing.get(merge_key) == key),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            merged = _smp_map({}, item)
            if merged is not None:
                result.append(merged)
        else:
            merged = _smp_map(result[index], item)
            if merged is None:
                del result[index]
            else:
                result[index] = merged
    return result


# --- RFC 6902 ------------------------------------------------------------------------------------
def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer {path!r}")
    if path == "":
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part, path)
    return node, parts[-1]


def _index(container: list[Any], part: str, path: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(container)
    # ASCII digits, as Go's strconv.Atoi takes them (str.isdigit also takes '²', which int() refuses),
    # and no longer than an int64 (int() refuses 5,000 digits; no list is that long anyway).
    if not (part.isascii() and part.isdigit()) or len(part) > 19 or (len(part) > 1 and part.startswith("0")):
        raise PatchConflictError(f"invalid array index {part!r} in {path}")
    index = int(part)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchConflictError(f"array index {index} out of bounds in {path}")
    return index


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict):
        if part not in node:
            raise PatchConflictError(f"doc is missing path: {path}")
        return node[part]
    if isinstance(node, list):
        return node[_index(node, part, path, allow_end=False)]
    raise PatchConflictError(f"doc is missing path: {path}")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchConflictError(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchConflictError("cannot remove the whole document")
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchConflictError(f"unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchConflictError(f"doc is missing path: {path}")


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new value.

    Raises:
        PatchError: the patch is not a list of operations with the required members.
        PatchConflictError: an operation cannot apply (missing path, failed ``test``).
    """
    if not isinstance(operations, list):
        raise PatchError("json patch body must be a JSON array of operations")
    doc = copy.deepcopy(target)
    for number, operation in enumerate(operations):
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError(f"json patch operation {number} needs 'op' and 'path'")
        op, path = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"json patch operation {number} ({op}) needs 'value'")
        if op in ("move", "copy") and "from" not in operation:
            raise PatchError(f"json patch operation {number} ({op}) needs 'from'")
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(operation["value"]))
        elif op == "remove":
            doc, _ = _remove(doc, path)
        elif op == "replace":
            _get(doc, path)
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, copy.deepcopy(operation["value"]))
        elif op == "move":
            doc, value = _remove(doc, operation["from"])
            doc = _add(doc, path, value)
        elif op == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, operation["from"])))
        elif op == "test":
            if _get(doc, path) != operation["value"]:
                raise PatchConflictError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"unexpected json patch op {op!r}")
    return doc
