"""Steps tests take through the real kubectl against a running cluster (sandbox, stack or demo)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from waiting import poll


def create_gpu_pod(kubectl: str, env: Mapping[str, str], name: str, gib: int, *, timeout: float = 30) -> str:
    """Create a pod limited to ``gib`` of aliyun.com/gpu-mem; its phase once Running, or at the deadline."""
    container = {"name": "c", "image": "x", "resources": {"limits": {"aliyun.com/gpu-mem": str(gib)}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}
    subprocess.run([kubectl, "create", "-f", "-"], input=json.dumps(pod), env=dict(env), check=True,
                   capture_output=True, text=True, timeout=60)  # fmt: skip
    phase = ""

    def running() -> bool:
        nonlocal phase
        phase = subprocess.run([kubectl, "get", "pod", name, "-o", "jsonpath={.status.phase}"],
                               env=dict(env), capture_output=True, text=True, timeout=60).stdout  # fmt: skip
        return phase == "Running"

    poll(running, timeout, interval=0.2)  # each look runs kubectl: a slower poll than the default
    return phase


def interruptible(args: list[str], *, sigint_ignored: bool = False, **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` for a child the test will interrupt: Ctrl-C reaches it as a terminal delivers it.

    A shell that starts the test runner in the background (``bash .ci/run &``) leaves SIGINT ignored,
    children inherit that, and a Python child then never installs its KeyboardInterrupt handler. The
    child's SIGINT is set here, in this process, around the start (``sigint_ignored``: ignored, as a
    shell without job control leaves it; else the default): exec keeps an ignored signal ignored and
    resets a caught one to its default (POSIX ``execve``). Not with a ``preexec_fn``: Python code run in
    the child between fork and exec runs gRPC's fork handlers, which abort the child (``Epoll1Poller ...
    Bad file descriptor``, exit -6) when an earlier test of this worker left a gRPC poller running.
    """
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN if sigint_ignored else signal.default_int_handler)
    try:
        return subprocess.Popen(args, **options)
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def reaped(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """Kill and reap ``process`` if the block leaves it running (an assertion failed before it stopped)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
