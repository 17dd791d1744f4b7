"""Golden files for ``kubectl gpushare top`` (the `usage_standin` cluster): table, JSON and YAML.

Regenerate with GPUSHARE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(actual)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(), f"top {name} differs from the golden file"
