"""inotify through libc: a new directory wakes the wait; an interrupt ends it; a missing parent means polling."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

import pytest

from kubectl_gpushare.node.dirwatch import DirWatch


def test_a_new_directory_wakes_the_wait(tmp_path: Path) -> None:
    watch = DirWatch.open([str(tmp_path)])
    assert watch is not None
    try:
        assert watch.wait(0.01) is False
        timer = threading.Timer(0.05, (tmp_path / "pod1").mkdir)
        timer.start()
        assert watch.wait(10) is True
        timer.join()
        threading.Timer(0.05, watch.interrupt).start()
        assert watch.wait(10) is False  # woken, but nothing was created
    finally:
        watch.close()


def test_a_missing_parent_falls_back_to_polling(tmp_path: Path) -> None:
    assert DirWatch.open([str(tmp_path), str(tmp_path / "absent")]) is None


def test_the_wait_works_with_descriptors_numbered_past_1024(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1100
    if soft < wanted + 64:
        if hard != resource.RLIM_INFINITY and hard < wanted + 64:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is too low to open {wanted} descriptors")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted + 64, hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(wanted)]  # a busy agent: sockets, connections
    try:
        watch = DirWatch.open([str(tmp_path)])
        assert watch is not None
        try:
            threading.Timer(0.05, (tmp_path / "pod1").mkdir).start()
            assert watch.wait(10) is True
        finally:
            watch.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
