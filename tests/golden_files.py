"""Comparing a reply with its golden file under tests/golden/ (regenerate with GPUSHARE_UPDATE_GOLDEN=1).

Wire compatibility is checked in bytes: a golden file holds a body exactly as the server sent it, and
regenerating one is a change a reviewer reads in the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"


def golden(relative: str, body: bytes) -> None:
    """Assert ``body`` equals tests/golden/``relative`` byte for byte (with GPUSHARE_UPDATE_GOLDEN=1, write it)."""
    path = GOLDEN / relative
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert body == path.read_bytes(), f"reply differs from tests/golden/{relative}"
