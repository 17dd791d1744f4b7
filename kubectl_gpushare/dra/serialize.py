"""One lock for the driver instances of a node: prepare and unprepare run one at a time across them.

In a rolling update two instances serve one plugin directory and kubelet may call either for any
claim ("It is not predictable which instance the kubelet will use for which request": kubelet's
pluginwatcher README, "Seamless Upgrade"). k8s.io/dynamic-resource-allocation's kubeletplugin helper
serializes those calls across instances with an exclusive ``flock`` on ``serialize.lock`` in the
plugin directory (``serializeGRPCIfEnabled``, ``lockFile``: opened ``O_RDWR|O_CREATE``, ``LOCK_EX``;
closing the file releases it), and each call loads the shared state from files first. This is that
lock: a thread lock for the calls of this process (an ``flock`` is held per open file, and each call
opens its own), then the file lock. The kernel releases it when its holder dies, SIGKILL included.

Unlike the helper's, which blocks until it gets the lock, a wait here ends at the deadline it is
given (the preparer's: shortly before the call's): kubelet stops waiting then, and the claims get an
error instead of work nobody reads.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

POLL_SECONDS = 0.005
"""How often a wait with a deadline tries the file lock again."""


class LockTimeoutError(OSError):
    """The lock was not free before the deadline (another instance's call is still running)."""


class SerializeLock:
    """The exclusive lock on ``path``, held around one call (`held`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._threads = threading.Lock()

    @contextmanager
    def held(self, deadline: float | None = None) -> Iterator[None]:
        """Hold the lock for the ``with`` body, waiting until ``deadline`` (`time.monotonic`; None: for ever).

        Raises:
            LockTimeoutError: not free before ``deadline``; OSError: the lock file cannot be opened or locked.
        """
        if not self._threads.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic())):
            raise LockTimeoutError(f"{self.path} is held by another call past the deadline")
        try:
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o750, exist_ok=True)  # as the checkpoint's
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                self._lock(fd, deadline)
                yield
            finally:
                os.close(fd)  # releases the flock
        finally:
            self._threads.release()

    def _lock(self, fd: int, deadline: float | None) -> None:
        if deadline is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(f"{self.path} is held by another instance past the deadline") from None
                time.sleep(POLL_SECONDS)
