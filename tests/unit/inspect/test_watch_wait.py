"""How ``inspect -w``'s main thread waits for an event (`watch._set_within`)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest

from kubectl_gpushare.inspect import watch


def test_an_event_set_by_another_thread_is_seen_within_the_poll() -> None:
    event = threading.Event()
    threading.Timer(0.2, event.set).start()
    start = time.monotonic()
    assert watch._set_within(event, 30)
    assert time.monotonic() - start < 10  # 0.2 s and one poll, with room for a loaded machine


def test_an_event_never_set_is_given_up_at_the_timeout() -> None:
    start = time.monotonic()
    assert not watch._set_within(threading.Event(), 0.3)
    assert 0.3 <= time.monotonic() - start < 10


@pytest.fixture
def interrupting_alarm() -> Iterator[None]:
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_ctrl_c_while_waiting_leaves_the_event_usable(interrupting_alarm: None) -> None:
    """KeyboardInterrupt lands in the wait (a sleep), never inside the Event's lock bookkeeping."""
    event = threading.Event()
    for attempt in range(200):
        with pytest.raises(KeyboardInterrupt):
            # Armed inside the block: on a loaded machine the alarm may fire before the next line runs,
            # and a KeyboardInterrupt outside pytest.raises ends the whole (xdist worker) session.
            signal.setitimer(signal.ITIMER_REAL, 0.001 + attempt % 5 * 0.0003)
            watch._set_within(event, 5)
        assert not event._cond._lock.locked()  # type: ignore[attr-defined]
    threading.Timer(0.05, event.set).start()
    assert watch._set_within(event, 30)
