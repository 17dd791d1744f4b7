"""State files: marked, validated on load, never written over a file that is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubectl_gpushare.sandbox.state import StateFileError, is_state_file, load_state, save_state
from kubectl_gpushare.sandbox.store import Store


def test_save_then_load_round_trip(tmp_path: Path) -> None:
    store = Store()
    store.load([{"kind": "Node", "metadata": {"name": "n1"}}])
    path = tmp_path / "s.json"
    save_state(store, path)
    assert is_state_file(path) and json.loads(path.read_text())["kind"] == "GpushareSandboxState"
    again = Store()
    assert load_state(again, path) == 1 and again.resource_version == store.resource_version
    save_state(again, path)  # overwriting a state file is fine


def test_unmarked_format_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text('{"resourceVersion": 7, "items": [{"kind": "Node", "metadata": {"name": "n"}}]}')
    store = Store()
    assert load_state(store, path) == 1 and store.resource_version >= 7
    assert is_state_file(path)


@pytest.mark.parametrize(
    "content",
    [
        "{}",
        '{"resourceVersion": 1}',
        '{"resourceVersion": 1, "items": [], "extra": 1}',
        '{"kind": "GpushareSandboxState", "version": 2, "resourceVersion": 1, "items": []}',
        '{"kind": "GpushareSandboxState", "version": 1, "resourceVersion": 1, "items": [{"kind": "Widget"}]}',
        '{"kind": "GpushareSandboxState", "version": 1, "resourceVersion": 1, "items": [{"kind": "Node"}]}',
        '{"kind": "GpushareSandboxState", "version": 1, "resourceVersion": 1, '
        '"items": [{"kind": "Node", "metadata": {"name": 5}}]}',
        '{"kind": "GpushareSandboxState", "version": 1, "resourceVersion": 1, '
        '"items": [{"kind": "Node", "metadata": "n"}]}',
    ],
)
def test_anything_else_is_refused_on_load(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    store = Store()
    with pytest.raises(StateFileError):
        load_state(store, path)
    assert store.count("nodes") == 0



_HEADER = b'{"kind": "GpushareSandboxState", "version": 1, "resourceVersion": 1, "items": '


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (_HEADER + b'[{"kind": "Node", "metadata": {"name": "caf\xe9"}}]}', "a string is not UTF-8"),
        (_HEADER + b'[{"kind": "Node", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}", "nested too deeply"),
        (_HEADER + b"[]}\n\n", "nothing"),
    ],
    ids=["not-utf-8", "deep", "fine"],
)
def test_a_state_file_msgspec_cannot_read_is_a_one_line_state_file_error(
    tmp_path: Path, content: bytes, why: str
) -> None:
    """msgspec raises UnicodeDecodeError and RecursionError for these, not DecodeError: no ValueError traceback."""
    path = tmp_path / "x.json"
    path.write_bytes(content)
    if why == "nothing":
        assert load_state(Store(), path) == 0
        return
    with pytest.raises(StateFileError) as caught:
        load_state(Store(), path)
    assert str(caught.value) == f"{path}: not a sandbox state file ({why})"

def test_save_never_overwrites_another_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"precious": true}')
    with pytest.raises(StateFileError, match="refusing to overwrite"):
        save_state(Store(), path)
    assert path.read_text() == '{"precious": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    with pytest.raises(StateFileError):
        save_state(Store(), tmp_path)  # a directory
