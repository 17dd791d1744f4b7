"""Golden cases for ``kubectl gpushare fit``: (golden name, inspect cluster case, fit arguments).

The clusters are the inspect golden clusters; the same golden file must come out of ``--from-file``
(unit test) and of the real kubectl against the sandbox (integration test). Regenerate with
GPUSHARE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent
INSPECT = GOLDEN.parent / "inspect"
UPDATE = os.environ.get("GPUSHARE_UPDATE_GOLDEN") == "1"

CASES: dict[str, tuple[str, list[str]]] = {
    "s2-4gib-x3": ("s2", ["4", "--count", "3"]),
    "s2-too-big": ("s2", ["16"]),
    "gpushare2-2gib-x4": ("gpushare2", ["2", "--count", "4"]),
    "mib-spread": ("mib-units", ["4000", "--count", "3", "--policy", "spread"]),
    "mixed-stacks-2gib-x2": ("mixed-stacks", ["2", "--count", "2"]),
    "mixed-dra-4gib-x3": ("mixed-dra", ["4Gi", "--count", "3"]),
    "mixed-dra-too-big": ("mixed-dra", ["20", "--count", "2"]),
    "many-nodes-selector": (
        "many-nodes",
        ["5", "--count", "2", "-l", "kubernetes.io/hostname notin (node-00,node-03)"],
    ),
}
OUTPUTS: dict[str, list[str]] = {"txt": [], "json": ["-o", "json"]}
SHORT: frozenset[str] = frozenset({"s2-too-big", "mixed-dra-too-big"})
"""Cases where fewer than --count pods fit: fit exits EXIT_FIT_SHORT (10) there, 0 elsewhere."""


def cluster_file(case: str) -> Path:
    for name in ("cluster.yaml", "cluster.json"):
        if (INSPECT / case / name).exists():
            return INSPECT / case / name
    raise FileNotFoundError(case)


def check(name: str, suffix: str, actual: str) -> None:
    path = GOLDEN / f"{name}.{suffix}"
    if UPDATE:
        path.write_text(actual)
    assert path.exists(), f"missing golden {path}; run with GPUSHARE_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(), f"fit {name}.{suffix} differs from the golden file"
