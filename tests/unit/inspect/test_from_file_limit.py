"""``--from-file`` reads at most `source.MAX_INPUT_BYTES`: a huge file or an endless stream is one usage error."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kubectl_gpushare.inspect import source
from kubectl_gpushare.inspect.command import inspect_command
from kubectl_gpushare.inspect.doctor_command import doctor_command
from kubectl_gpushare.inspect.explain_command import explain_command
from kubectl_gpushare.inspect.fit_command import fit_command
from kubectl_gpushare.kube.errors import EXIT_USAGE

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "inspect"


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    """A sparse file one byte past the limit: no disk is used, and reading it would take 4 GiB of memory."""
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(source.MAX_INPUT_BYTES + 1)
    return path


@pytest.mark.parametrize(
    ("command", "args"),
    [
        pytest.param(inspect_command, [], id="inspect"),
        pytest.param(fit_command, ["8"], id="fit"),
        pytest.param(explain_command, ["trainer-0"], id="explain"),
        pytest.param(doctor_command, [], id="doctor"),
    ],
)
def test_a_file_past_the_limit_is_refused_unread(
    cli_runner: CliRunner, huge: Path, command: click.Command, args: list[str]
) -> None:
    result = cli_runner.invoke(command, [*args, "--from-file", str(huge)])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr == f"error: --from-file: the input is larger than {source.MAX_INPUT_BYTES:,} bytes, " \
                            "the most that is read\n"
    assert result.stdout == ""


@pytest.fixture
def endless() -> Iterator[tuple[io.BufferedReader, list[int]]]:
    """The read end of a pipe whose writer never stops (as ``--from-file - < /dev/zero``), and its byte count."""
    read_fd, write_fd = os.pipe()
    written = [0]

    def write() -> None:
        block = b"{" * 65536
        try:
            while True:
                written[0] += os.write(write_fd, block)
        except OSError:  # the reader closed its end (EPIPE): stop
            os.close(write_fd)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with open(read_fd, "rb") as stream:
        yield stream, written
    writer.join(timeout=30)
    assert not writer.is_alive()


def test_an_endless_pipe_is_refused_after_the_limit(endless: tuple[io.BufferedReader, list[int]]) -> None:
    stream, written = endless
    limit = 3 * 2**20 + 5
    with pytest.raises(source.InputError, match=f"larger than {limit:,} bytes"):
        source.read_input(stream, limit)
    # Nothing past the limit was taken: what the writer got into the pipe is what was read, plus at
    # most the pipe's buffer and one write still in it.
    assert written[0] <= limit + 1 + 2 * 2**20


def test_input_under_the_limit_is_read_whole_from_a_file_and_a_pipe(tmp_path: Path) -> None:
    data = (GOLDEN / "s2" / "cluster.yaml").read_bytes() * 50
    path = tmp_path / "c.yaml"
    path.write_bytes(data)
    with path.open("rb") as file:
        assert source.read_input(file, len(data)) == data
    with path.open("rb") as file, pytest.raises(source.InputError):
        source.read_input(file, len(data) - 1)
    read_fd, write_fd = os.pipe()

    def write() -> None:
        with open(write_fd, "wb") as end:
            end.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    with open(read_fd, "rb") as pipe:
        assert source.read_input(pipe, len(data)) == data
    writer.join()
    assert source.read_input(io.BytesIO(data), len(data)) == data  # CliRunner's stdin: no file behind it
    assert source.read_input(io.BytesIO(b""), 10) == b""


def test_help_states_the_limit(cli_runner: CliRunner) -> None:
    """``--help`` imports no decoder, so it spells the limit out: the two must agree."""
    assert source.MAX_INPUT_BYTES == 4 * 2**30
    text = " ".join(cli_runner.invoke(inspect_command, ["--help"]).stdout.split())
    assert "('-' for stdin; at most 4 GiB)" in text


def test_a_stream_that_cannot_be_read_is_an_input_error(tmp_path: Path) -> None:
    """``--from-file - 0>file`` (stdin open for writing only): EBADF is one line, not an OSError traceback."""
    write_only = os.open(tmp_path / "w", os.O_WRONLY | os.O_CREAT)
    with open(write_only, "rb") as stream, pytest.raises(source.InputError) as raised:
        source.read_input(stream)
    assert str(raised.value) == "the input cannot be read: Bad file descriptor"


def test_stdin_closed_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, cli_runner: CliRunner) -> None:
    """``--from-file - <&-``: Python sets sys.stdin to None, and click's '-' raised RuntimeError."""
    import sys

    monkeypatch.setattr(sys, "stdin", None)
    param = next(p for p in inspect_command.params if p.name == "from_file")
    with pytest.raises(click.BadParameter, match="^'-': stdin is not open$"):
        param.type.convert("-", param, None)
