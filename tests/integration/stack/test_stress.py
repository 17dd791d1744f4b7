"""The stack's tutorial tests under CPU load: the admission races only show on a busy machine.

Marked ``stress`` (left out of the default run by ``-m "not stress"`` in setup.cfg's addopts); run it
with ``pytest -m stress tests/integration/stack/test_stress.py``. Busy processes, two per CPU (at
least four), spin while the tutorial tests run in a pytest of their own, so every thread of the
stack waits for a core; the test fails when any tutorial test fails, and prints that run's output.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.stress]

TUTORIALS = Path(__file__).with_name("test_tutorials.py")
ROOT = Path(__file__).resolve().parents[3]


def _spin(until: float) -> None:
    while time.monotonic() < until:
        pass


@pytest.mark.timeout(620)
def test_the_tutorials_pass_on_a_busy_machine() -> None:
    context = multiprocessing.get_context("spawn")
    until = time.monotonic() + 600
    count = max(2 * (os.cpu_count() or 1), 4)
    burners = [context.Process(target=_spin, args=(until,), daemon=True) for _ in range(count)]
    for burner in burners:
        burner.start()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-o", "timeout=300",
             "-m", "not stress", str(TUTORIALS)],
            capture_output=True, text=True, timeout=580, cwd=ROOT,
        )
    finally:
        for burner in burners:
            burner.terminate()
        for burner in burners:
            burner.join(5)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
