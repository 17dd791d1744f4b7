"""Hostile NodePrepareResources/NodeUnprepareResources requests: names that are huge or path-like, one
claim repeated 10,000 times, bytes that are not UTF-8. Each gets a per-claim error or one gRPC status,
reaches neither the API server nor a path, and the driver keeps serving."""

from __future__ import annotations

import os
import time
from typing import Any

import grpc
import pytest
from dra_helpers import Claims, Dirs, saved_claims

from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.node.sockets import target

pytestmark = pytest.mark.integration
UID = "6a3d3b9e-2f0c-4d1b-9d71-0c0e7e0f0a11"


def _call(dirs: Dirs, method: str, claims: list[tuple[str, str, str]]) -> Any:
    request_type = getattr(dra_v1_pb2, f"{method}Request")
    request = request_type(claims=[dra_v1_pb2.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims])
    with grpc.insecure_channel(target(os.path.join(dirs.plugin, "dra.sock"))) as channel:
        return getattr(v1_grpc.DRAPluginStub(channel), method)(request, timeout=30)


@pytest.mark.parametrize(("namespace", "name"), [
    ("../../etc", "passwd"), ("default", "../x"), ("default", "n" * 100_000), ("d" * 100_000, "c1"),
    ("default", "c1\x00"), ("default", "Ünïcode"),
])
def test_a_bad_namespace_or_name_never_reaches_the_api(start_driver, dirs: Dirs, namespace: str, name: str) -> None:
    running = start_driver()
    answer = _call(dirs, "NodePrepareResources", [(namespace, name, UID)])
    error = answer.claims[UID].error
    assert "is not a valid namespace and name" in error and len(error) < 300
    assert running.driver.preparer.reads == 0
    assert not os.path.exists(dirs.cdi) or not os.listdir(dirs.cdi)


def test_one_claim_repeated_10000_times_is_read_once_and_recorded_once(
    start_driver, claims: Claims, dirs: Dirs
) -> None:
    running = start_driver()
    uid = claims.claim("c1").metadata.uid
    answer = _call(dirs, "NodePrepareResources", [("default", "c1", uid)] * 10_000)
    assert list(answer.claims) == [uid] and not answer.claims[uid].error
    assert running.driver.preparer.reads == 1
    again = _call(dirs, "NodePrepareResources", [("default", "c1", uid)] * 10_000)
    assert not again.claims[uid].error and running.driver.preparer.reads == 1
    gone = _call(dirs, "NodeUnprepareResources", [("default", "c1", uid)] * 10_000)
    assert list(gone.claims) == [uid] and gone.claims[uid].error == ""
    assert saved_claims(dirs.plugin) == {}
    journal = os.path.join(dirs.plugin, "checkpoint.journal")
    assert os.path.getsize(journal) < 4096, "the journal holds one line per change, not one UID per repeat"


def test_a_request_that_is_not_utf8_gets_a_status_and_the_driver_keeps_serving(start_driver, dirs: Dirs) -> None:
    start_driver()
    claim = b"\x0a\x02\xff\xfe\x12\x02c1\x1a\x24" + UID.encode()  # Claim{namespace: b"\xff\xfe", name, uid}
    raw = b"\x0a" + bytes([len(claim)]) + claim
    with grpc.insecure_channel(target(os.path.join(dirs.plugin, "dra.sock"))) as channel:
        call = channel.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
                                   request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as refused:
            call(raw, timeout=10)
    assert refused.value.code() != grpc.StatusCode.DEADLINE_EXCEEDED
    started = time.monotonic()
    answer = _call(dirs, "NodePrepareResources", [("default", "ghost", UID)])
    assert answer.claims[UID].error == "claim default/ghost not found"
    assert time.monotonic() - started < 20
