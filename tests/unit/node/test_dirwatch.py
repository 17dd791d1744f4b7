"""inotify through libc: a new directory wakes the wait; an interrupt ends it; a missing parent means polling."""

from __future__ import annotations

import threading
from pathlib import Path

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
