"""YAML as kubectl kustomize writes it (go-yaml v2 through sigs.k8s.io/yaml): key order and string styles."""

from __future__ import annotations

import datetime

import pytest
import yaml

from kubectl_gpushare.cli.goyaml import dump_all, reads_as_other_type


def test_keys_sort_letters_after_other_characters_and_numbers_by_value() -> None:
    # go-yaml v2 sorter.go (keyList.Less), not Python's sorted(); the order kubectl 1.32 and 1.37 print.
    keys = ["a10", "a2", "b", "A", "_b", "1", "b-1", "b.1", "b1", "a02", "é"]
    text = dump_all([dict.fromkeys(keys, 0)])
    assert [line.split(":")[0].strip('"') for line in text.splitlines()] == [
        "_b", "1", "A", "a2", "a02", "a10", "b", "b-1", "b.1", "b1", "é"]


@pytest.mark.parametrize(("text", "other"), [
    ("", True), ("true", True), ("y", True), ("N", True), ("off", True), ("~", True), ("null", True),
    ("12", True), ("-12", True), ("017", True), ("0o17", True), ("0x1F", True), ("0b101", True), ("1_000", True),
    ("1e3", True), ("3.14", True), (".5", True), (".inf", True), ("1:20", True), ("2024-01-02", True),
    ("2001-12-14T21:59:43.10Z", True),
    ("yes please", False), ("v1.2", False), ("10.0.0.1", False), ("12Gi", False), (".x", False), ("<<", False),
    ("-", False), ("0x", False), ("kube-system", False),
])
def test_strings_that_read_back_as_another_type_are_the_ones_quoted(text: str, other: bool) -> None:
    # resolve.go's resolve and encode.go's base60float.
    assert reads_as_other_type(text) is other
    written = dump_all([{"k": text}])
    assert written.startswith('k: "') is other
    assert yaml.safe_load(written) == {"k": text}


def test_multi_line_strings_are_literal_blocks_and_keys_are_text() -> None:
    written = dump_all([{"a": "one\ntwo\n", "b": "one\ntwo", 1: True, None: datetime.date(2024, 1, 2)}])
    assert written == '"1": true\na: |\n  one\n  two\nb: |-\n  one\n  two\n"null": "2024-01-02"\n'


def test_objects_are_separated_as_kustomize_separates_them_and_shared_values_are_copied() -> None:
    shared = {"x": 1}
    assert dump_all([{"a": shared, "b": shared}, {"c": []}]) == "a:\n  x: 1\nb:\n  x: 1\n---\nc: []\n"
    assert dump_all([]) == ""
