"""The test helper that starts children the tests interrupt (`kubectl_steps.interruptible`)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from kubectl_steps import interruptible

pytestmark = pytest.mark.integration

SHOW_SIGINT = ("import signal; handler = signal.getsignal(signal.SIGINT); "
               "print({signal.SIG_IGN: 'ignored', signal.default_int_handler: 'default'}[handler])")


@pytest.fixture
def ignored_here() -> Iterator[None]:
    """This process ignores SIGINT, as a runner started with ``bash .ci/run &`` does."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(("ignored", "shown"), [(False, "default"), (True, "ignored")])
def test_the_child_gets_the_sigint_asked_for_and_this_process_keeps_its_own(
    ignored_here: None, ignored: bool, shown: str
) -> None:
    child = interruptible([sys.executable, "-c", SHOW_SIGINT], stdout=subprocess.PIPE, text=True,
                          sigint_ignored=ignored)  # fmt: skip
    out, _ = child.communicate(timeout=60)
    assert out == f"{shown}\n"
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_children_survive_a_grpc_server_running_in_this_process(tmp_path: Path) -> None:
    """With a ``preexec_fn`` about 2% of such children aborted before exec (gRPC's fork handlers, exit -6)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_insecure_port(f"unix://{tmp_path}/grpc.sock")
    server.start()
    channel = grpc.insecure_channel(f"unix://{tmp_path}/grpc.sock")
    try:
        grpc.channel_ready_future(channel).result(timeout=30)  # the poller threads are running
        codes = [interruptible(["true"]).wait(timeout=60) for _ in range(300)]
    finally:
        channel.close()
        server.stop(None)
    assert codes == [0] * 300
