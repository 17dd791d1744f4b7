"""The README's main command: the demo runs the whole stack and prints both inspect views."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_demo_places_pods_through_the_stack_and_shows_both_views() -> None:
    script = Path(sys.executable).parent / "kubectl-gpushare"
    result = subprocess.run([str(script), "demo"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "$ kubectl inspect gpushare\n" in out and "$ kubectl inspect gpushare -d\n" in out
    # Every placeable pod was bound by the extender and admitted by the device plugin on the GPU it chose.
    assert out.count(" -> gpu-node-") == 9
    assert "default/too-big (100 GiB): stays Pending" in out
    # The heterogeneous node shows its two GPU sizes, published by the device plugin.
    assert "gpu-node-3  192.168.1.13  79/80                  0/40" in out
    assert "Allocated/Total GPU Memory In Cluster:\n135/248 (54%)  \n" in out
    assert "Allocated/Total GPU Memory In Cluster:  135/248 (54%)  \n" in out
