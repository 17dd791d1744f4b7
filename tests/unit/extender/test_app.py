"""The extender app without a socket: every route, error path and golden reply body."""

from __future__ import annotations

import json

import golden_files
import pytest

from kubectl_gpushare.extender import wire
from kubectl_gpushare.extender.app import BindOutcome, ExtenderApp
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.ledger import NodeRecord, PodRecord


class RefusingBinder:
    """Bad input must never reach the binder: this one fails the test if it is called."""

    def bind(self, args: wire.BindingArgs) -> BindOutcome:
        raise AssertionError(f"binder called for {args}")


def gpu_pod(*limits: str, name: str = "job") -> dict:
    containers = [{"name": f"c{i}", "resources": {"limits": {"aliyun.com/gpu-mem": v}}} for i, v in enumerate(limits)]
    return {"metadata": {"name": name, "namespace": "default", "uid": "uid-1"}, "spec": {"containers": containers}}


def node_object(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"gpushare": "true"}},
            "status": {"capacity": {"aliyun.com/gpu-mem": "32", "aliyun.com/gpu-count": "2"}}}


@pytest.fixture
def app() -> ExtenderApp:
    state = ExtenderState()
    for name, gpus, mem in (("gpu-a", 2, 16), ("gpu-b", 4, 8)):
        state.set_node(NodeRecord(name=name, cap_mem=gpus * mem, cap_count=gpus))
    state.set_node(NodeRecord(name="cpu-1"))
    state.set_pod(PodRecord(uid="p1", namespace="default", name="train-0", node="gpu-a", phase="Running",
                            request=10, container_requests=(10,), gpu_index=0))
    state.set_pod(PodRecord(uid="p2", namespace="ml", name="infer-0", node="gpu-b", phase="Running",
                            request=6, container_requests=(6,), gpu_index=3))
    return ExtenderApp(state, RefusingBinder())


def filter_body(pod: dict, names: list[str] | None = None, nodes: list[dict] | None = None) -> bytes:
    return json.dumps({"Pod": pod, "Nodes": None if nodes is None else {"metadata": {}, "items": nodes},
                       "NodeNames": names}).encode()


def golden(name: str, body: bytes) -> None:
    golden_files.golden(f"extender/{name}", body)


def test_filter_with_node_names_matches_golden(app: ExtenderApp) -> None:
    reply = app.handle("POST", "/gpushare-scheduler/filter", filter_body(gpu_pod("3", "4"),
                                                                         ["gpu-a", "gpu-b", "cpu-1", "ghost"]))
    assert reply.status == 200 and reply.content_type == "application/json"
    golden("filter_node_names.json", reply.body)
    result = json.loads(reply.body)
    assert result["NodeNames"] == ["gpu-a", "gpu-b"] and result["Nodes"] is None


def test_filter_with_node_objects_echoes_the_schedulers_objects(app: ExtenderApp) -> None:
    nodes = [node_object("gpu-b"), node_object("gpu-a"), node_object("cpu-1")]
    reply = app.handle("POST", "/gpushare-scheduler/filter", filter_body(gpu_pod("2"), nodes=nodes))
    golden("filter_nodes.json", reply.body)
    result = json.loads(reply.body)
    assert result["Nodes"]["items"] == nodes[:2]
    assert result["NodeNames"] == ["gpu-b", "gpu-a"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "empty request body"),
        (b"{oops", "malformed JSON"),
        (filter_body(gpu_pod(), ["gpu-a"]), "requests no aliyun.com/gpu-mem"),
        (filter_body(gpu_pod("0"), ["gpu-a"]), "requests no aliyun.com/gpu-mem"),
        (filter_body(gpu_pod("lots"), ["gpu-a"]), "invalid quantity 'lots'"),
        (filter_body({"spec": {"containers": "x"}}, ["gpu-a"]), "not a valid v1.Pod"),
    ],
    ids=["empty", "malformed", "no-gpu-mem", "zero", "bad-quantity", "bad-pod"],
)
def test_filter_bad_input_is_a_200_with_error(app: ExtenderApp, body: bytes, error: str) -> None:
    reply = app.handle("POST", "/gpushare-scheduler/filter", body)
    assert reply.status == 200
    result = json.loads(reply.body)
    assert error in result["Error"]
    assert list(result) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]


def test_filter_pod_larger_than_any_gpu_fails_every_node(app: ExtenderApp) -> None:
    reply = app.handle("POST", "/gpushare-scheduler/filter", filter_body(gpu_pod("17"), ["gpu-a", "gpu-b"]))
    result = json.loads(reply.body)
    assert result["NodeNames"] == []
    assert set(result["FailedNodes"].values()) == {"Insufficient GPU Memory in one device"}


def test_prioritize_binpack_and_spread(app: ExtenderApp) -> None:
    body = filter_body(gpu_pod("2"), ["gpu-a", "gpu-b", "cpu-1"])
    reply = app.handle("POST", "/gpushare-scheduler/prioritize", body)
    golden("prioritize.json", reply.body)
    scores = {h["Host"]: h["Score"] for h in json.loads(reply.body)}
    assert scores["gpu-b"] > scores["gpu-a"] > 0 and scores["cpu-1"] == 0  # gpu-b's GPU 3 is filled up exactly
    app.policy = "spread"
    spread = {h["Host"]: h["Score"] for h in json.loads(app.handle("POST", "/gpushare-scheduler/prioritize",
                                                                   body).body)}
    assert spread["gpu-a"] > spread["gpu-b"]


def test_prioritize_bad_input_is_an_empty_list(app: ExtenderApp) -> None:
    reply = app.handle("POST", "/gpushare-scheduler/prioritize", b"nope")
    assert (reply.status, reply.body) == (200, b"[]")


@pytest.mark.parametrize("body", [b"", b"{}", b'{"PodName":"p"}', b"[]"])
def test_bind_bad_input_is_an_error_reply_without_calling_the_binder(app: ExtenderApp, body: bytes) -> None:
    reply = app.handle("POST", "/gpushare-scheduler/bind", body)
    assert reply.status == 200 and json.loads(reply.body)["Error"]


def test_inspect_all_and_one_and_unknown(app: ExtenderApp) -> None:
    reply = app.handle("GET", "/gpushare-scheduler/inspect")
    golden("inspect.json", reply.body)
    one = app.handle("GET", "/gpushare-scheduler/inspect/gpu-b")
    assert [n["name"] for n in json.loads(one.body)["nodes"]] == ["gpu-b"]
    assert app.handle("GET", "/gpushare-scheduler/inspect/").body == reply.body
    missing = app.handle("GET", "/gpushare-scheduler/inspect/ghost")
    assert missing.status == 404
    assert json.loads(missing.body) == {"nodes": [], "error": 'node "ghost" not found'}


def test_service_routes(app: ExtenderApp) -> None:
    assert app.handle("GET", "/version").body == b"0.1.0"
    assert app.handle("GET", "/healthz").status == 200
    assert app.handle("GET", "/readyz").status == 200
    app.ready = lambda: False
    assert app.handle("GET", "/readyz").status == 503
    metrics = app.handle("GET", "/metrics").body.decode()
    assert 'gpushare_gpu_memory_allocated{gpu="0",node="gpu-a"} 10.0' in metrics
    assert 'gpushare_node_gpu_memory_total{node="gpu-b"} 32.0' in metrics


def test_latency_histogram_counts_requests_by_verb(app: ExtenderApp) -> None:
    for _ in range(3):
        app.handle("POST", "/gpushare-scheduler/filter", filter_body(gpu_pod("1"), ["gpu-a"]))
    metrics = app.handle("GET", "/metrics").body.decode()
    assert 'gpushare_extender_request_duration_seconds_count{verb="filter"} 3.0' in metrics


def test_unknown_route_and_wrong_method(app: ExtenderApp) -> None:
    assert app.handle("GET", "/nope").status == 404
    wrong = app.handle("GET", "/gpushare-scheduler/filter")
    assert wrong.status == 405 and ("Allow", "POST") in wrong.headers
    assert app.handle("POST", "/gpushare-scheduler/inspect").status == 405


def test_custom_prefix() -> None:
    app = ExtenderApp(ExtenderState(), RefusingBinder(), prefix="/custom/")
    assert app.handle("GET", "/custom/inspect").body == b'{"nodes":[]}'
    assert app.handle("GET", "/gpushare-scheduler/inspect").status == 404


def test_too_large_reply_has_the_verbs_shape(app: ExtenderApp) -> None:
    reply = app.too_large("/gpushare-scheduler/filter", 10**9)
    assert reply.status == 413 and "exceeds the limit" in json.loads(reply.body)["Error"]
    assert "FailedNodes" in json.loads(reply.body)


def test_verbs_answer_with_an_error_until_the_cache_is_synced(app: ExtenderApp) -> None:
    app.unavailable = lambda: "extender cache is not synced yet"
    reply = app.handle("POST", "/gpushare-scheduler/filter", filter_body(gpu_pod("1"), ["gpu-a"]))
    assert json.loads(reply.body)["Error"] == "extender cache is not synced yet"
    bind = app.handle("POST", "/gpushare-scheduler/bind",
                      b'{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"gpu-a"}')
    assert json.loads(bind.body)["Error"] == "extender cache is not synced yet"
    assert app.handle("POST", "/gpushare-scheduler/prioritize", filter_body(gpu_pod("1"), ["gpu-a"])).body == b"[]"


def test_json_log_lines_are_one_object_each(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from kubectl_gpushare.service import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("json", "info")
    try:
        logging.getLogger("kubectl_gpushare.extender").info("bound %s to %s", "ns/p", "n1")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("kubectl_gpushare.extender").exception("failed")
        logging.getLogger("kubectl_gpushare.extender").debug("hidden at info level")
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["msg"] for line in lines] == ["bound ns/p to n1", "failed"]
    assert lines[0]["level"] == "info" and lines[0]["ts"].endswith("Z")
    assert "ValueError: boom" in lines[1]["error"]
