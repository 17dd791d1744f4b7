"""A listed item whose ``kind`` is not a string, absent, or that is not an object at all, is one warning in
every ``--from-file`` reader, JSON or YAML alike."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpushare.sandbox.builders import node_object, pod_object

pytestmark = pytest.mark.integration

LONG = "x" * 300
"""A name longer than any the API allows: the warning shows the first 253 characters of the key."""


def _good() -> list[dict[str, Any]]:
    node = {**node_object("n1", [16, 16], ip="10.0.0.1"), "kind": "Node"}
    pod = {**pod_object("good", "ml", [4], node="n1", gpu=0, gpu_memory=16), "kind": "Pod"}
    return [node, pod]


def _unkinded() -> list[Any]:
    return [
        {"kind": 5, "metadata": {"name": "weird", "namespace": "ml"}},
        {"kind": None, "metadata": {"name": "nul"}},
        {"kind": {"name": "Pod"}, "metadata": {"name": "obj"}},
        # kubectl writes no such item; text naming a DRA kind makes the DRA readers look at the file
        {"kind": ["ResourceSlice"], "metadata": {"name": LONG, "namespace": "ml"}},
    ]


def _kindless() -> list[Any]:
    return [
        {"metadata": {"name": "nokind", "namespace": "ml"}},  # a hand-made List: what is it?
        7, "text", [1],  # not objects: the YAML reader refused the whole file for them
    ]


WARNINGS = [
    "warning: list item ml/weird: cannot be decoded (Expected `str`, got `int` - at `$.kind`); skipped",
    "warning: list item nul: cannot be decoded (Expected `str`, got `null` - at `$.kind`); skipped",
    "warning: list item obj: cannot be decoded (Expected `str`, got `object` - at `$.kind`); skipped",
    f"warning: list item ml/{LONG[:250]}: cannot be decoded (Expected `str`, got `array` - at `$.kind`); skipped",
]
KINDLESS_WARNINGS = [
    "warning: list item ml/nokind: cannot be decoded (Object missing required field `kind`); skipped",
    "warning: a list item with unreadable metadata: cannot be decoded (Expected `object`, got `int`); skipped",
    "warning: a list item with unreadable metadata: cannot be decoded (Expected `object`, got `str`); skipped",
    "warning: a list item with unreadable metadata: cannot be decoded (Expected `object`, got `array`); skipped",
]


def _write(path: Path, items: list[Any]) -> Path:
    document = {"apiVersion": "v1", "kind": "List", "items": items}
    path.write_text(json.dumps(document) if path.suffix == ".json" else yaml.safe_dump(document))
    return path


def _inspect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl-inspect-gpushare", *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize(("bad_items", "warnings"), [(_unkinded, WARNINGS), (_kindless, KINDLESS_WARNINGS)],
                         ids=["kind-not-a-string", "no-kind-or-not-an-object"])
def test_an_item_whose_kind_is_not_a_string_is_one_warning_and_changes_no_row(
    suffix: str, bad_items: Callable[[], list[Any]], warnings: list[str], kube_env: dict[str, str],
    kubectl: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    good = _good()
    clean = _write(tmp_path / f"clean{suffix}", good)
    bad = _write(tmp_path / f"bad{suffix}", [good[0], *bad_items(), good[1]])
    runs: dict[str, Callable[[Path], subprocess.CompletedProcess[str]]] = {
        "inspect": lambda path: _inspect(kube_env, "--from-file", str(path)),
        "inspect -o json": lambda path: _inspect(kube_env, "-o", "json", "--from-file", str(path)),
        "inspect -d": lambda path: _inspect(kube_env, "-d", "--from-file", str(path)),
        "fit": lambda path: kubectl("gpushare", "fit", "4", "--from-file", str(path), check=False),
        "explain": lambda path: kubectl("gpushare", "explain", "good", "-n", "ml", "--from-file", str(path),
                                        check=False),
        "doctor": lambda path: kubectl("gpushare", "doctor", "--from-file", str(path), check=False),
    }
    for name, run in runs.items():
        expected, result = run(clean), run(bad)
        assert expected.stderr == "", f"{name}: {expected.stderr}"
        assert (result.returncode, result.stdout) == (expected.returncode, expected.stdout), f"{name}: {result.stderr}"
        assert result.stderr.splitlines() == warnings, name


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize(("before", "warnings"), [
    ([], []),
    ([None, 5], [f"warning: a node with unreadable metadata: cannot be decoded (Expected `object`, got `{got}`); "
                 "skipped" for got in ("null", "int")]),
], ids=["kind-not-a-string", "items-not-objects"])
def test_in_a_node_list_an_item_is_a_node_whatever_its_kind(
    suffix: str, before: list[Any], warnings: list[str], kube_env: dict[str, str], tmp_path: Path
) -> None:
    """The list says what its items are: one whose kind is unreadable is a Node; one that is no object is skipped."""
    node = node_object("n1", [16], ip="10.0.0.1")
    path = tmp_path / f"nodes{suffix}"
    document = {"apiVersion": "v1", "kind": "NodeList", "items": [*before, {**node, "kind": {"not": "a string"}}]}
    path.write_text(json.dumps(document) if suffix == ".json" else yaml.safe_dump(document))
    result = _inspect(kube_env, "-o", "json", "--from-file", str(path))
    assert (result.returncode, result.stderr.splitlines()) == (0, warnings)
    assert [node["name"] for node in json.loads(result.stdout)["nodes"]] == ["n1"]
