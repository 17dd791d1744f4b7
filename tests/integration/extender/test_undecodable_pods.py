"""A pod the typed decoder refuses, met by bind (read from the API) or by filter and prioritize (in the body).

Each gets its one documented reply (HTTP 200, ``Error`` set; the reply bytes are golden), writes
nothing, reserves nothing, and the next pod is served as if it had never come.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import golden_files
import pytest
from extender_http import exchange, used

from kubectl_gpushare.extender.schedsim import schedule_one
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

PREFIX = "/gpushare-scheduler"


def post(port: int, verb: str, body: dict[str, Any]) -> tuple[int, str | None, bytes]:
    return exchange(port, "POST", f"{PREFIX}/{verb}", json.dumps(body).encode())


def garbage_pod(name: str) -> dict[str, Any]:
    """An unbound pod asking for GPU memory, with an annotation whose value is an object: JSON, not a v1.Pod."""
    pod = pod_object(name, "default", [4], uid=f"uid-{name}")
    pod["metadata"]["annotations"] = {"hostile": {"not": "a string"}}
    return pod


@pytest.fixture
def ext(sandbox: Sandbox, extender_factory):  # type: ignore[no-untyped-def]
    sandbox.load([node_object("gpu-1", [16, 16], ip="10.0.0.1"), garbage_pod("bad"),
                  pod_object("ok", "default", [4], uid="uid-ok")])
    e = extender_factory()
    e.wait_synced()
    return e


def test_bind_of_a_pod_that_does_not_decode_is_one_error_reply_and_writes_nothing(
    sandbox: Sandbox, ext, caplog: pytest.LogCaptureFixture  # type: ignore[no-untyped-def]
) -> None:
    sandbox.clear_requests()
    args = {"PodName": "bad", "PodNamespace": "default", "PodUID": "uid-bad", "Node": "gpu-1"}
    with caplog.at_level(logging.INFO, logger="kubectl_gpushare"):
        status, content_type, body = post(ext.running.port, "bind", args)
    assert (status, content_type) == (200, "application/json")
    golden_files.golden("extender/bind_undecodable_pod.json", body)
    said = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("kubectl_gpushare")]
    assert len(said) == 1 and "default/bad" in said[0].getMessage(), [r.getMessage() for r in said]
    writes = [r for r in sandbox.requests if r.resource == "pods" and r.verb in ("patch", "create", "update")]
    assert writes == [], "no annotation patch, no Binding"
    assert used(ext.running.port) == 0, "no reservation left"
    metrics = ext.running.app.handle("GET", "/metrics").body.decode()
    assert 'gpushare_extender_bind_failures_total{reason="undecodable"} 1.0' in metrics

    ok = sandbox.get("pods", "default", "ok")
    assert ok is not None
    assert schedule_one(ext.scheduler(), ok, [sandbox.get("nodes", None, "gpu-1")]) == "gpu-1"
    bound = sandbox.get("pods", "default", "ok")
    assert bound is not None and bound["spec"]["nodeName"] == "gpu-1"
    assert used(ext.running.port) == 4


def test_filter_and_prioritize_of_a_pod_that_does_not_decode_answer_it_alone(sandbox: Sandbox, ext) -> None:  # type: ignore[no-untyped-def]
    port = ext.running.port
    bad = {"Pod": garbage_pod("bad"), "Nodes": None, "NodeNames": ["gpu-1"]}
    status, _, body = post(port, "filter", bad)
    assert status == 200
    golden_files.golden("extender/filter_undecodable_pod.json", body)
    status, _, body = post(port, "prioritize", bad)
    assert (status, body) == (200, b"[]")
    huge = garbage_pod("x" * 100_000)
    huge["metadata"]["annotations"] = {"k" * 100_000: ["not", "a", "string"]}
    status, _, body = post(port, "filter", {"Pod": huge, "Nodes": None, "NodeNames": ["gpu-1"]})
    error = json.loads(body)["Error"]
    assert status == 200 and error.startswith("pod default/xxx") and len(error) < 600, error[:600]
    ok = sandbox.get("pods", "default", "ok")
    status, _, body = post(port, "filter", {"Pod": ok, "Nodes": None, "NodeNames": ["gpu-1"]})
    assert status == 200 and json.loads(body)["NodeNames"] == ["gpu-1"] and json.loads(body)["Error"] == ""
