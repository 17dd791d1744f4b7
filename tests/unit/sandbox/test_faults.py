"""The fault vocabulary: `Sandbox.inject`'s keywords are the admin API's JSON keys, checked strictly."""

from __future__ import annotations

import inspect

import pytest

from kubectl_gpushare.sandbox.faults import Fault, fault_from_json, fault_to_json
from kubectl_gpushare.sandbox.server import Sandbox


def test_json_keys_are_the_inject_keywords() -> None:
    keywords = set(inspect.signature(Sandbox.inject).parameters) - {"self"}
    shown = set(fault_to_json(Sandbox().inject(status=500))) - {"hits"}
    assert shown == keywords


def test_round_trip_through_json() -> None:
    body = {
        "method": "patch",
        "path": "/pods/.*",
        "status": 409,
        "retry_after": 2,
        "latency": 0.5,
        "times": 3,
        "drop_watch": False,
        "after": True,
        "in_transit": False,
    }
    fault = fault_from_json(body)
    assert isinstance(fault, Fault) and fault.method == "PATCH" and fault.matches("PATCH", "/api/v1/pods/x")
    assert fault_to_json(fault) == {**body, "method": "PATCH", "hits": 0}


def test_defaults_match_everything() -> None:
    fault = fault_from_json({"latency": 1})
    assert fault.method is None and fault.matches("GET", "/anything") and fault.latency == 1.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "JSON object"),
        ({"nope": 1}, "unknown fault field"),
        ({"status": True}, "integer"),
        ({"status": 600}, "between"),
        ({"latency": "1"}, "number"),
        ({"latency": 601}, "between"),
        ({"after": None}, "null"),
        ({"path": "["}, "regular expression"),
        ({"method": "G ET"}, "HTTP method"),
    ],
)
def test_malformed_faults_are_refused(body: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fault_from_json(body)
