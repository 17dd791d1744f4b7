"""`service.SignalRelay`: signals set a daemon's stop Event from a thread, never from the handler."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from kubectl_gpushare.service import SignalRelay

# The main thread holds the Event's lock (as inside ``stop.wait``) when the signal's handler runs.
# A handler that set the Event itself would wait for that lock, held by its own thread, for good.
HELD_LOCK = """
import signal, threading
from kubectl_gpushare.service import SignalRelay
stop = threading.Event()
relay = SignalRelay(stop, [signal.SIGUSR1])
with stop._cond:
    signal.raise_signal(signal.SIGUSR1)
    for _ in range(100):
        pass  # the handler runs between these bytecodes, the lock held
print(stop.wait(30))
relay.close()
"""


def test_a_signal_while_the_main_thread_holds_the_events_lock_sets_it_later() -> None:
    done = subprocess.run([sys.executable, "-c", HELD_LOCK], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


def test_a_signal_sets_the_event_and_close_puts_the_previous_handler_back() -> None:
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGUSR2)
    relay = SignalRelay(stop, [signal.SIGUSR2])
    try:
        assert signal.getsignal(signal.SIGUSR2) is not previous
        signal.raise_signal(signal.SIGUSR2)
        assert stop.wait(30)
    finally:
        relay.close()
    assert signal.getsignal(signal.SIGUSR2) is previous
    assert _relay_ends()


def _relay_ends() -> bool:
    """The relay thread reads EOF once closed and ends (give it a moment on a loaded machine)."""
    for thread in threading.enumerate():
        if thread.name == "signals":
            thread.join(30)
    return not any(thread.name == "signals" and thread.is_alive() for thread in threading.enumerate())
