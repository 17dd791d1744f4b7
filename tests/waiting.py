"""Waiting on conditions in tests, never on fixed sleeps.

`wait_for` polls a condition until it holds and returns its value, or fails naming what it waited
for; `holds_for` checks that a condition keeps holding through a window, which is what a negative
check ("no third pod appears", "b never leads") needs: it fails at the first poll that breaks it
instead of sleeping and looking once. The poll interval below is the one sleep that stands for a
condition; the other sleeps left in the suite are the thing under test (a lease left to expire, a
load generator's pace), each with a comment saying so.

Timeouts are generous on purpose: the suite runs on a loaded 2-core machine, and a wait that
succeeds returns as soon as its condition holds, so a long timeout costs nothing when all is well.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_INTERVAL = 0.02
"""Seconds between two looks at a condition: short next to every timeout, long next to a look's cost."""


def _describe(what: str | Callable[[], str], condition: object) -> str:
    if callable(what):
        return what()
    return what or getattr(condition, "__name__", repr(condition))


def poll(condition: Callable[[], T], timeout: float = 20.0, interval: float = POLL_INTERVAL) -> T:
    """Call ``condition`` until it returns something truthy or ``timeout`` passes; return its last value.

    For callers that assert on the value themselves (``assert poll(lambda: job.done()) ...``) or
    must not fail here; `wait_for` fails with a message instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)  # the poll interval, between two looks at the condition


def wait_for(
    condition: Callable[[], T],
    timeout: float = 20.0,
    what: str | Callable[[], str] = "",
    interval: float = POLL_INTERVAL,
) -> T:
    """Wait until ``condition()`` is truthy and return that value.

    Args:
        condition: looked at every ``interval`` seconds (and once more at the deadline).
        timeout: seconds before the test fails.
        what: names the condition in the failure message; a callable is called only then (to show
            the state at that moment).
        interval: seconds between two looks.

    Raises:
        AssertionError: the condition did not hold within ``timeout``.
    """
    value = poll(condition, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {_describe(what, condition)}")
    return value


def holds_for(
    condition: Callable[[], object],
    seconds: float,
    what: str | Callable[[], str] = "",
    interval: float = POLL_INTERVAL,
) -> None:
    """Check that ``condition()`` stays truthy for ``seconds``, looking every ``interval``.

    The window is the thing under test (how long "never" is checked for), so its length is fixed;
    a broken condition fails at once.

    Raises:
        AssertionError: the condition was false at some look.
    """
    deadline = time.monotonic() + seconds
    while True:
        if not condition():
            raise AssertionError(f"no longer holds: {_describe(what, condition)}")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)  # the poll interval, between two looks at the condition
