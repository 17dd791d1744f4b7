"""Wake up when a directory appears under a few parents: Linux inotify through libc (no dependency).

The enforcement loop waits on this while a pod waits for its cgroup, so the limit lands within a
millisecond or so of kubelet's ``mkdir`` instead of at the next poll. inotify(7): ``IN_CREATE`` and
``IN_MOVED_TO`` report an entry created in or moved into a watched directory, ``IN_ONLYDIR`` refuses
non-directories as watch targets; the fd is readable while events are queued. Where inotify is not
available (not Linux, no libc symbol, watch limit reached, a parent missing) `DirWatch.open` returns
None and the caller polls instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
from collections.abc import Iterable

log = logging.getLogger(__name__)

IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC


class DirWatch:
    """An inotify fd watching some directories, plus a pipe so another thread can interrupt a wait."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    @classmethod
    def open(cls, directories: Iterable[str]) -> DirWatch | None:
        """Watch ``directories`` for new entries; None where inotify cannot (the caller polls)."""
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            init, add = libc.inotify_init1, libc.inotify_add_watch
        except (OSError, AttributeError):
            return None
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None
        for path in directories:
            if add(fd, os.fsencode(path), IN_CREATE | IN_MOVED_TO | IN_ONLYDIR) < 0:
                log.debug("inotify cannot watch %s (errno %d); polling instead", path, ctypes.get_errno())
                os.close(fd)
                return None
        return cls(fd)

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True if a directory entry appeared (events are drained)."""
        # poll(2), not select(2): select refuses fds numbered 1024 and up, which a busy agent reaches.
        poller = select.poll()
        for fd in (self._fd, self._wake_r):
            poller.register(fd, select.POLLIN)
        ready = [fd for fd, _ in poller.poll(max(0.0, timeout) * 1000)]
        created = self._fd in ready
        for fd in ready:
            try:
                while os.read(fd, 65536):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
        return created

    def interrupt(self) -> None:
        """End a `wait` now (from any thread)."""
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        """Release the fds."""
        for fd in (self._fd, self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
