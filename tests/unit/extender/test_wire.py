"""The extender's wire format: case-insensitive requests, Go-named replies."""

from __future__ import annotations

import json

import pytest

from kubectl_gpushare.extender import wire


def test_filter_args_keys_are_read_case_insensitively() -> None:
    body = json.dumps({"pod": {"metadata": {"name": "p"}}, "nodenames": ["a", "b"], "NODES": None}).encode()
    args = wire.decode_extender_args(body)
    assert args.node_names == ["a", "b"]
    assert args.nodes is None
    assert args.candidate_names() == ["a", "b"]


def test_filter_args_without_node_names_take_names_from_node_objects() -> None:
    body = json.dumps({
        "Pod": {}, "NodeNames": None,
        "Nodes": {"metadata": {}, "items": [{"metadata": {"name": "x"}}, {"metadata": {"name": "y"}}]},
    }).encode()
    assert wire.decode_extender_args(body).candidate_names() == ["x", "y"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty request body"),
        (b"   ", "empty request body"),
        (b"{not json", "malformed JSON"),
        (b"[1,2]", "not a JSON object"),
        (b'{"NodeNames":["a"]}', "arg or pod is nil"),
        (b'{"Pod":{},"NodeNames":null,"Nodes":null}', "cannot get node names"),
        (b'{"Pod":{},"NodeNames":[1]}', "NodeNames is not a list of strings"),
        (b'{"Pod":{},"Nodes":{"items":[{"metadata":{}}]}}', "no metadata.name"),
        (b'{"Pod":{},"Nodes":[]}', "not a v1.NodeList"),
    ],
    ids=["empty", "blank", "malformed", "array", "no-pod", "no-nodes", "bad-names", "nameless-node", "bad-list"],
)
def test_bad_filter_bodies_raise_one_line_errors(body: bytes, message: str) -> None:
    with pytest.raises(wire.WireError, match=message) as info:
        wire.decode_extender_args(body)
    assert "\n" not in str(info.value)


def test_binding_args_accept_old_lowercase_keys() -> None:
    args = wire.decode_binding_args(b'{"podName":"p","podNamespace":"ns","podUID":"u","node":"n"}')
    assert args == wire.BindingArgs(pod_name="p", pod_namespace="ns", pod_uid="u", node="n")


@pytest.mark.parametrize("body", [b'{"PodName":"p","PodNamespace":"ns","Node":"n"}', b'{"PodName":3}', b"null"])
def test_incomplete_binding_args_are_rejected(body: bytes) -> None:
    with pytest.raises(wire.WireError):
        wire.decode_binding_args(body)


def test_filter_result_uses_go_field_names_order_and_sorted_maps() -> None:
    body = wire.encode_filter_result(node_names=["b"], failed={"z": "r1", "a": "r2"})
    assert body == (
        b'{"Nodes":null,"NodeNames":["b"],"FailedNodes":{"a":"r2","z":"r1"},'
        b'"FailedAndUnresolvableNodes":null,"Error":""}'
    )


def test_filter_result_wraps_nodes_in_a_node_list() -> None:
    body = wire.encode_filter_result(nodes=[{"metadata": {"name": "a"}}], node_names=["a"], failed={})
    assert json.loads(body)["Nodes"] == {"metadata": {}, "items": [{"metadata": {"name": "a"}}]}


def test_priorities_and_binding_result() -> None:
    assert wire.encode_host_priorities([("a", 3)]) == b'[{"Host":"a","Score":3}]'
    assert wire.encode_host_priorities([]) == b"[]"
    assert wire.encode_binding_result() == b'{"Error":""}'
