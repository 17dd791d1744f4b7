"""Names no API server would take, for the text views' tests: each must write them on one line, no ESC, no tab.

A ``--from-file`` file (and an annotation, and a device plugin's document) is not validated as kube-apiserver
validates names, so any string may reach a view. Shared by the doctor, explain, fit, top and inspect tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.stack_spec import stack_node_object, stack_pod_object

HOSTILE: Final = "\x1b[31m\nERROR\tforged\x1b[0m"
"""Written into names a file may hold and the API server would refuse: an escape sequence, a newline, a tab."""
SHOWN: Final = " [31m ERROR forged [0m"
"""`HOSTILE` as the text views write it (`protocol.shown_text`): every control character a space."""
NODE: Final = f"gpu{HOSTILE}"
NAMESPACE: Final = f"ml{HOSTILE}"


def views_cluster() -> list[dict[str, Any]]:
    """A node named with `HOSTILE` (and its address), two GPUs of 16 GiB: GPU 0 holds a pod of a hostile
    namespace and name (4 GiB) beside ``ml/sharer`` (4 GiB); a plain node ``plain`` (one GPU of 8 GiB, 6 used by
    a hostile pod); ``ml/wants`` (8 GiB) and a hostile pod of 2 GiB wait for a node."""
    return [
        node_object(NODE, [16, 16], ip=f"10.9.5.1{HOSTILE}"),
        node_object("plain", [8], ip="10.9.5.2"),
        pod_object(f"trainer{HOSTILE}", NAMESPACE, [4], node=NODE, gpu=0, gpu_memory=16),
        pod_object("sharer", "ml", [4], node=NODE, gpu=0, gpu_memory=16),
        pod_object(f"infer{HOSTILE}", "ml", [6], node="plain", gpu=0, gpu_memory=8),
        pod_object("wants", "ml", [8]),
        pod_object(f"waiting{HOSTILE}", NAMESPACE, [2]),
    ]


def stacks_cluster() -> list[dict[str, Any]]:
    """Only a HAMi node named with `HOSTILE` (model too) and a hostile pod on its GPU: inspect then prints the
    other-stacks view alone."""
    node = f"hami{HOSTILE}"
    return [
        stack_node_object(node, "hami", [24576], ip="10.9.6.1", product=f"A10{HOSTILE}", labels={}, annotations={}),
        stack_pod_object(f"vgpu{HOSTILE}", NAMESPACE, "hami", [3000], node=node, gpu=0),
    ]


def file_of(tmp_path: Path, objects: list[dict[str, Any]]) -> str:
    """The objects as a ``kind: List`` JSON file under ``tmp_path``; its path as text."""
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"kind": "List", "items": objects}))
    return str(path)


def assert_one_line_each(text: str) -> None:
    """No ESC, tab, carriage return or hostile newline: what a terminal would act on."""
    assert "\x1b" not in text and "\t" not in text and "\r" not in text, text
    assert "ERROR\n" not in text and "\nERROR" not in text, "no row forged from a name's newline"
