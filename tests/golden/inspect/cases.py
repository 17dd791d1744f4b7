"""Golden cases shared by the from-file (unit) and real-kubectl (integration) golden tests.

Loaded by path (`load_cases`) since tests are not a package under --import-mode=importlib.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

GOLDEN = Path(__file__).resolve().parent
REFERENCE_CASES = ("s1", "s2", "s3", "s4")
"""Hand-written from the original tool's documented output; never regenerated."""
HAND_WRITTEN = ("summary.txt", "details.txt")
VIEWS: dict[str, list[str]] = {
    "summary.txt": [],
    "details.txt": ["-d"],
    "wide.txt": ["-o", "wide"],
    "out.json": ["-o", "json"],
    "out.yaml": ["-o", "yaml"],
    "out.csv": ["-o", "csv"],
}
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"


def cases() -> list[str]:
    return sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def cluster_file(case: str) -> Path:
    for name in ("cluster.yaml", "cluster.json"):
        path = GOLDEN / case / name
        if path.exists():
            return path
    raise FileNotFoundError(case)


def cluster_objects(case: str) -> list[dict[str, Any]]:
    path = cluster_file(case)
    document = yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    return list(document["items"])


def expected(case: str, view: str) -> Path:
    return GOLDEN / case / view


def check(case: str, view: str, actual: str) -> None:
    """Compare with the golden file; with GPUSHARE_UPDATE_GOLDEN=1 rewrite it (never the reference views)."""
    path = expected(case, view)
    if UPDATE and not (case in REFERENCE_CASES and view in HAND_WRITTEN):
        path.write_text(actual)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(), f"{case}/{view} differs from the golden file"
