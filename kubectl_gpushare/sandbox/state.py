"""Saving and restoring the sandbox's objects, so a restart with ``--state`` loses nothing.

The file is JSON: ``{"resourceVersion": N, "items": [<object>, ...]}``. Saving writes a temporary
file next to the target and renames it over the target, so a crash mid-save leaves the old file
intact. Restoring keeps each object's resourceVersion and continues the global counter after the
saved one, so clients' cached resourceVersions stay comparable.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgspec

from kubectl_gpushare.sandbox.store import Store


class _State(msgspec.Struct):
    resourceVersion: int = 0  # noqa: N815 - the wire name
    items: list[dict[str, object]] = []


def save_state(store: Store, path: Path) -> None:
    """Write every object atomically to ``path``.

    Raises:
        OSError: the directory is not writable or the disk is full (the old file is kept).
    """
    with store.lock:
        rv = store.resource_version
        raws = [entry.raw for _, entry in store.iter_all()]
    body = b'{"resourceVersion":' + str(rv).encode() + b',"items":[' + b",".join(raws) + b"]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def load_state(store: Store, path: Path) -> int:
    """Load objects saved by `save_state`; returns how many.

    Raises:
        ValueError: the file is not a saved sandbox state.
    """
    try:
        state = msgspec.json.decode(path.read_bytes(), type=_State)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"{path}: not a sandbox state file ({exc})") from None
    count = store.load(state.items, keep_versions=True)
    store.set_resource_version(state.resourceVersion)
    return count
