"""Saving and restoring the sandbox's objects, so a restart with ``--state`` loses nothing.

The file is JSON: ``{"kind": "GpushareSandboxState", "version": 1, "resourceVersion": N,
"items": [<object>, ...]}``; the marker comes first, so a file can be recognised from its first
bytes. Files of the earlier, unmarked format (exactly ``resourceVersion`` and ``items``) still load.
Anything else is refused when loading and is never overwritten when saving: ``--state`` pointed at
the wrong file must not destroy it. Saving writes a temporary file next to the target and renames
it over the target, so a crash mid-save leaves the old file intact. Restoring keeps each object's
resourceVersion and continues the global counter after the saved one, so clients' cached
resourceVersions stay comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.node.files import replace_file
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.objects import check_types
from kubectl_gpushare.sandbox.resources import BY_KIND
from kubectl_gpushare.sandbox.store import Store

STATE_KIND: Final = "GpushareSandboxState"
STATE_VERSION: Final = 1
_HEAD: Final = b'{"kind":"' + STATE_KIND.encode() + b'","version":'
_LEGACY_HEAD: Final = b'{"resourceVersion":'


class StateFileError(ValueError):
    """The file is not a sandbox state (refused on load, never overwritten on save)."""


class _State(msgspec.Struct, forbid_unknown_fields=True):
    kind: str
    version: int
    resourceVersion: int  # noqa: N815 - the wire name
    items: list[dict[str, object]]


class _LegacyState(msgspec.Struct, forbid_unknown_fields=True):
    resourceVersion: int  # noqa: N815 - the wire name
    items: list[dict[str, object]]


def is_state_file(path: Path) -> bool:
    """Whether ``path`` starts like a file `save_state` wrote (any version, or the unmarked format)."""
    with path.open("rb") as handle:
        head = handle.read(len(_HEAD))
    return head == _HEAD or head.startswith(_LEGACY_HEAD)


def save_state(store: Store, path: Path) -> None:
    """Write every object atomically to ``path``.

    Raises:
        StateFileError: ``path`` exists and is not a sandbox state (it is left alone).
        OSError: the directory is not writable or the disk is full (the old file is kept).
    """
    if path.exists() and not (path.is_file() and is_state_file(path)):
        raise StateFileError(f"{path}: not a sandbox state file; refusing to overwrite it")
    with store.lock:
        rv = store.resource_version
        raws = [entry.raw for _, entry in store.iter_all()]
    body = b"".join((_HEAD, str(STATE_VERSION).encode(), b',"resourceVersion":', str(rv).encode(), b',"items":['))
    body += b",".join(raws) + b"]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, body, prefix=f".{path.name}.")


def load_state(store: Store, path: Path) -> int:
    """Load objects saved by `save_state`; returns how many.

    Raises:
        StateFileError: the file is not a sandbox state, has an unknown version or invalid objects.
        OSError: the file cannot be read.
    """
    if not path.is_file():
        raise StateFileError(f"{path}: not a regular file")
    data = path.read_bytes()
    try:
        if data.lstrip().startswith(_LEGACY_HEAD):
            legacy = msgspec.json.decode(data, type=_LegacyState)
            rv, items = legacy.resourceVersion, legacy.items
        else:
            state = msgspec.json.decode(data, type=_State)
            if state.kind != STATE_KIND:
                raise StateFileError(f"{path}: not a sandbox state file (kind {state.kind[:40]!r})")
            if state.version != STATE_VERSION:
                raise StateFileError(f"{path}: sandbox state version {state.version} is not supported")
            rv, items = state.resourceVersion, state.items
    except UnicodeDecodeError:  # msgspec's, for a string that is not UTF-8 (its offset is not the file's)
        raise StateFileError(f"{path}: not a sandbox state file (a string is not UTF-8)") from None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise StateFileError(f"{path}: not a sandbox state file ({protocol.error_reason(exc)})") from None
    for item in items:  # the types the store relies on (Sandbox.load trusts its caller; a file is not trusted)
        resource = BY_KIND.get(str(item.get("kind", "")))
        if resource is None:
            raise StateFileError(f"{path}: invalid object in sandbox state: unknown kind {item.get('kind')!r:.40}")
        try:
            check_types(resource, item)
        except ApiError as exc:
            raise StateFileError(f"{path}: invalid object in sandbox state: {exc.message}") from None
    try:
        count = store.load(items, keep_versions=True)
    except ValueError as exc:
        raise StateFileError(f"{path}: invalid object in sandbox state: {exc}") from None
    store.set_resource_version(rv)
    return count
