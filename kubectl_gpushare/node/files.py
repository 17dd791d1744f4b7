"""Replacing a file atomically: readers see the old content or the new, never a torn write.

The data goes to a temporary file in the target's directory (same filesystem, so the rename is
atomic), is fsynced, then renamed over the target; on any failure the temporary file is removed
and the old file is kept. Durability of the rename itself (an fsync of the directory) is left to
callers that need it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(path: str | Path, data: bytes, *, prefix: str, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary ``<prefix>*.tmp`` file and a rename.

    Args:
        path: the file to replace (or create); its directory must exist.
        data: the whole new content.
        prefix: the temporary file's name prefix (a dot keeps it hidden from directory scans).
        mode: the file's permission bits; None keeps mkstemp's 0600.

    Raises:
        OSError: the directory is not writable or the disk is full (the old file is kept).
    """
    fd, temp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
