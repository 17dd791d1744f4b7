"""What doctor's checks produce: a `Finding` with its severity. Shared by `doctor` and `doctor_dra`."""

from __future__ import annotations

from typing import Final

import msgspec

ERROR: Final = "error"
"""Breaks scheduling or over-commits a GPU."""
WARNING: Final = "warning"
"""Likely wrong."""


class Finding(msgspec.Struct, frozen=True):
    """One problem: how bad, which check found it, on which object, in plain words."""

    severity: str
    check: str
    object: str
    message: str


__all__ = ["ERROR", "WARNING", "Finding"]
