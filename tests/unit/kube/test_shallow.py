"""kube.shallow: a list's top level read without recursion agrees with msgspec wherever msgspec can read it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.shallow import members, split_list

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                            max_size=3), max_leaves=12)
objects = st.dictionaries(st.text(max_size=6), values, max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(objects, max_size=5), st.text(max_size=10), objects, st.booleans())
def test_split_list_agrees_with_msgspec(items: list[dict[str, Any]], kind: str, meta: dict[str, Any],
                                        indent: bool) -> None:
    body = {"apiVersion": "v1", "kind": kind, "metadata": meta, "items": items}
    data = json.dumps(body, indent=2 if indent else None).encode()
    found = split_list(data)
    assert found is not None
    assert [json.loads(bytes(raw)) for raw in found.items] == items
    assert found.kind == kind and json.loads(bytes(found.metadata)) == meta
    assert [bytes(r) for r in found.items] == [bytes(r) for r in types.RAW_LIST_DECODER.decode(data).items]


def test_an_item_deeper_than_msgspec_goes_is_split_off_alone() -> None:
    deep = '{"metadata":{"name":"deep"},"x":' + "[" * 5000 + "]" * 5000 + "}"
    data = ('{"kind":"ResourceClaimList","metadata":{"resourceVersion":"7","continue":"t"},"items":['
            '{"metadata":{"name":"a"}},' + deep + ',{"metadata":{"name":"b","x":"]}\\"["}}]}').encode()
    try:
        types.RAW_LIST_DECODER.decode(data)
        raise AssertionError("msgspec read it: the test needs a deeper item")
    except RecursionError:
        pass
    found = split_list(data)
    assert found is not None and found.kind == "ResourceClaimList" and len(found.items) == 3
    assert msgspec.json.decode(bytes(found.metadata)) == {"resourceVersion": "7", "continue": "t"}
    assert bytes(found.items[1]) == deep.encode()
    assert json.loads(bytes(found.items[2]))["metadata"]["x"] == ']}"['


def test_what_is_not_a_list_object_is_none() -> None:
    assert split_list(b"[1,2]") is None and split_list(b'{"items":[{}') is None and split_list(b"}{") is None


@settings(max_examples=200, deadline=None)
@given(objects, st.booleans())
def test_members_agree_with_json(obj: dict[str, Any], indent: bool) -> None:
    found = members(json.dumps(obj, indent=2 if indent else None).encode())
    assert found is not None and {key: json.loads(bytes(value)) for key, value in found.items()} == obj


def test_a_watch_event_with_a_deep_object_is_split_into_type_and_object() -> None:
    deep = '{"metadata":{"name":"d"},"spec":' + "[" * 3000 + "]" * 3000 + "}"
    found = members(('{"type": "MODIFIED", "object": ' + deep + "}").encode())
    assert found is not None and bytes(found["type"]) == b'"MODIFIED"' and bytes(found["object"]) == deep.encode()


def test_a_string_never_closed_is_none_in_one_pass() -> None:
    # Past an unclosed string, each escaped quote once began a search to the end: 400 KB of them took
    # hours; one pass ends at the first unclosed string (the test's timeout catches a relapse).
    deep = "[" * 3000 + "]" * 3000
    for tail in (b'\\"' * 200_000, b'\\"x' * 200_000, b"\\"):
        data = b'{"kind":"L","items":[' + deep.encode() + b'],"x":"' + tail
        assert split_list(data) is None and members(data) is None


def test_a_key_or_kind_that_is_not_utf8_is_unreadable_not_an_exception() -> None:
    assert split_list(b'{"kind":"\xff","items":[1]}') == split_list(b'{"kind":"","items":[1]}')
    assert members(b'{"\xff":1}') is None
