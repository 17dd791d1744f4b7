"""Helpers for the node agents' tests (the device plugin's and the DRA driver's): an agent's ``serve``
on a thread, a directory short enough for its sockets, and a cgroup v2 tree for --enforce-memory."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, Self, TypeVar

from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.fake_backend import FakeBackend

C = TypeVar("C")
"""The agent's Config."""
A = TypeVar("A")
"""What its ``serve`` hands to ``started``: the Plugin or the Driver."""


class ServeThread(Generic[C, A]):
    """``serve(cfg, stop=, ready=, backend=, started=)`` on a thread, with a FakeBackend the test can poke
    (or none: ``serve`` then opens the backend ``cfg`` names, NVML where it names no fake GPUs).

    Args:
        serve: the agent's ``serve``.
        what: names the agent in failures ("the plugin did not become ready").
        name: the thread's name.
    """

    def __init__(
        self, serve: Callable[..., None], cfg: C, backend: FakeBackend | None, *, what: str, name: str
    ) -> None:
        self.serve = serve
        self.cfg = cfg
        self.backend = backend
        self.what = what
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.agent: A | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self.serve(self.cfg, stop=self.stop, ready=self.ready, backend=self.backend, started=self._started)
        except BaseException as exc:  # surfaced by the test through .error
            self.error = exc
            self.ready.set()

    def _started(self, agent: A) -> None:
        self.agent = agent

    def start(self, timeout: float = 15) -> Self:
        self.thread.start()
        assert self.ready.wait(timeout), f"the {self.what} did not become ready"
        if self.error is not None:
            raise self.error
        return self

    def shutdown(self, timeout: float = 15) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the {self.what} did not stop"


@contextmanager
def socket_dir(prefix: str) -> Iterator[str]:
    """A fresh directory under /tmp, short enough for unix socket paths (pytest's tmp_path may not be)."""
    path = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def cgroup_tree(base: Path) -> Path:
    """A cgroup v2 tree as kubelet's cgroupfs driver leaves it (the QoS directories), under ``base``."""
    root = base / "cgroup"
    for rel in cgroups.qos_dirs("cgroupfs").values():
        (root / rel).mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpu memory\n")
    return root
