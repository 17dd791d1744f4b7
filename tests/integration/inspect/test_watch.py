"""``kubectl inspect gpushare -w`` piped: a new table per change, from list + watch, and Ctrl-C exits 130."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubectl_steps import interruptible

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def read_until(process: subprocess.Popen[str], needle: str, timeout: float = 30) -> str:
    """Read stdout until ``needle`` appears (a condition, not a sleep)."""
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out waiting for {needle!r}; got {seen!r}"
        ready, _, _ = select.select([process.stdout], [], [], remaining)
        if ready:
            chunk = os.read(process.stdout.fileno(), 65536).decode()
            assert chunk, f"stdout closed before {needle!r}; got {seen!r}"
            seen += chunk
    return seen


def test_watch_prints_a_new_table_per_change_and_ctrl_c_exits_130(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    sandbox.load([node_object("gpu-a", [16, 16], ip="10.7.0.1")])
    process = interruptible(
        ["kubectl-inspect-gpushare", "-w"], env=kube_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first = read_until(process, "0/32 (0%)")
        assert first.startswith("NAME ")
        sandbox.clear_requests()
        pod = pod_object("job", "default", [4], node="gpu-a", gpu=1, gpu_memory=16)
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        second = read_until(process, "4/32 (12%)")
        assert "\n\nNAME " in second or second.startswith("\nNAME "), "each change prints a whole new table"
        lists = [r.resource for r in sandbox.requests if r.verb == "list"]
        assert lists == [], "no polling: after the first list, changes arrive over the watch"
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 130
        assert time.monotonic() - started < 5
        assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_watch_refuses_from_file_and_machine_formats(kube_env: dict[str, str], tmp_path: Any) -> None:
    (tmp_path / "c.json").write_text('{"kind": "List", "items": []}')
    for args in (["--from-file", str(tmp_path / "c.json")], ["-o", "json"]):
        result = subprocess.run(
            ["kubectl-inspect-gpushare", "-w", *args], env=kube_env, capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 2 and result.stderr.startswith("error: --watch"), result.stderr


def test_watch_on_a_terminal_redraws_in_place_with_rich(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    import pty

    sandbox.load([node_object("gpu-a", [16, 16], ip="10.7.0.1")])
    master, slave = pty.openpty()
    env = dict(kube_env, TERM="xterm", COLUMNS="160", LINES="40")
    process = interruptible(["kubectl-inspect-gpushare", "-w"], env=env, stdout=slave, stderr=slave)
    os.close(slave)
    try:
        seen = ""
        deadline = time.monotonic() + 30
        for needle in ("0/32 (0%)", "4/32 (12%)"):
            while needle not in seen:
                assert time.monotonic() < deadline, seen
                if select.select([master], [], [], 1)[0]:
                    seen += os.read(master, 65536).decode(errors="replace")
            if needle.startswith("0/32"):
                pod = pod_object("job", "default", [4], node="gpu-a", gpu=1, gpu_memory=16)
                kubectl("apply", "-f", "-", input=json.dumps(pod))
        assert "\x1b[" in seen, "rich moves the cursor to redraw in place"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)


def _marked(output: str) -> bool:
    """Whether the last table in ``output`` stands below a STALE mark."""
    before = output[:output.rindex("NAME ")]
    return before.rstrip("\n").rpartition("\n")[2].startswith("STALE")


def test_watch_marks_the_view_stale_while_the_api_server_does_not_answer_and_resumes(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    sandbox.load([node_object("gpu-a", [16, 16], ip="10.7.0.1")])
    process = subprocess.Popen(
        ["kubectl-inspect-gpushare", "-w", "--request-timeout", "2s"], env=kube_env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        first = read_until(process, "0/32 (0%)")
        assert "STALE" not in first
        sandbox.inject(status=503)  # every request fails, as an API server going away answers
        sandbox.drop_watches()
        stale = read_until(process, "retrying.\n", timeout=45)
        marked = stale[stale.index("STALE since "):]
        assert marked.splitlines()[1].startswith("NAME "), "the last state seen stays below the mark"
        assert "0/32 (0%)" in marked
        sandbox.clear_faults()
        pod = pod_object("job", "default", [4], node="gpu-a", gpu=1, gpu_memory=16)
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        # On a loaded machine a request can still time out after the faults end and mark the view
        # again; what must come is a fresh, unmarked table showing the new pod.
        resumed, deadline = read_until(process, "4/32 (12%)", timeout=60), time.monotonic() + 60
        while _marked(resumed) or "4/32 (12%)" not in resumed[resumed.rindex("NAME "):]:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no fresh unmarked table after the faults ended; got {resumed!r}"
            if select.select([process.stdout], [], [], remaining)[0]:
                resumed += os.read(process.stdout.fileno(), 65536).decode()  # type: ignore[union-attr]
        last = resumed[resumed.rindex("NAME "):]
        assert not _marked(resumed), "a fresh table, unmarked"
        assert "4/32 (12%)" in last
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
