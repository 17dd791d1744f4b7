"""Hostile and mistaken claims: each gets one clear per-claim error, and nothing else changes."""

from __future__ import annotations

import os
import sys
from typing import Any

import grpc
import pytest
from dra_helpers import NODE, Claims, Dirs, saved_claims

from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.node.sockets import target
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
OTHER_UID = "6a3d3b9e-2f0c-4d1b-9d71-0c0e7e0f0a11"


def _prepare(dirs: Dirs, refs: list[tuple[str, str]], timeout: float = 10) -> Any:
    request = dra_v1_pb2.NodePrepareResourcesRequest(
        claims=[dra_v1_pb2.Claim(namespace="default", name=name, uid=uid) for name, uid in refs])
    with grpc.insecure_channel(target(os.path.join(dirs.plugin, "dra.sock"))) as channel:
        return v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=timeout)


def _result(device: str = "gpu-0", memory: str | None = "4Gi", **extra: Any) -> dict[str, Any]:
    result = {"request": "gpu", "driver": "gpu-mem.kubectl-gpushare.io", "pool": NODE, "device": device, **extra}
    if memory is not None:
        result["consumedCapacity"] = {"memory": memory}
    return result


CASES = {
    "another-driver": ([{"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}],
                       "has no device of driver gpu-mem.kubectl-gpushare.io"),
    "another-node": ([_result(pool="gpu-node-2")], "is allocated in pool 'gpu-node-2', not this node's"),
    "unknown-device": ([_result(device="gpu-7")], "device 'gpu-7' is not one this node publishes"),
    "not-a-device-name": ([_result(device="../../etc/passwd")], "is not one this node publishes"),
    "absurd-memory": ([_result(memory="1Pi")], "consumed memory 1Pi on gpu-0 is outside (0, 16Gi]"),
    "negative-memory": ([_result(memory="-4Gi")], "consumed memory -4Gi on gpu-0 is outside"),
    "zero-memory": ([_result(memory="0")], "is outside (0, 16Gi]"),
    "garbage-memory": ([_result(memory="lots")], "consumed memory 'lots' on gpu-0 is not a quantity"),
    "huge-quantity": ([_result(memory="9" * 60 + "Ei")], "is not a quantity"),
    "two-gpus": ([_result(), _result(device="gpu-1")], "holds gpu-0 and gpu-1; a gpushare claim holds one GPU"),
    "over-the-gpu-in-sum": ([_result(memory="12Gi"), _result(memory="12Gi", request="b")],
                            "consumes 25769803776 bytes of gpu-0, more than its 16Gi"),
    "admin-access": ([_result(adminAccess=True)], "admin access to gpu-0 is not supported"),
    "bad-share-id": ([_result(shareID="../x")], "share ID '../x' is not a UID"),
    "long-share-id": ([_result(shareID="a" * 65)], "shareID) longer than the API allows"),
}


UNDECODABLE = {"garbage-memory"}
"""Statuses kube-apiserver refuses to decode (400; the sandbox does the same): stored as a hand-edited etcd would."""


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_claim_fails_alone_and_changes_nothing(start_driver, claims: Claims, dirs: Dirs, sandbox: Sandbox,
                                                     case: str) -> None:
    running = start_driver("2x16GiB")
    good = claims.claim("good", device="gpu-1", memory="2Gi")
    results, message = CASES[case]
    bad = claims.claim("bad", results=None if case in UNDECODABLE else results)
    if case in UNDECODABLE:
        stored = sandbox.get("resourceclaims", "default", "bad")
        assert stored is not None
        stored["status"]["allocation"]["devices"]["results"] = results
        sandbox.load([stored])
    answer = _prepare(dirs, [("bad", bad.metadata.uid), ("good", good.metadata.uid)])
    assert message in answer.claims[bad.metadata.uid].error
    assert not answer.claims[bad.metadata.uid].devices
    assert not answer.claims[good.metadata.uid].error
    assert os.listdir(dirs.cdi) == [f"k8s.gpu-mem.kubectl-gpushare.io-claim_{good.metadata.uid}.json"]
    assert list(saved_claims(dirs.plugin)) == [good.metadata.uid]
    assert list(running.driver.preparer.prepared()) == [good.metadata.uid]


# The sandbox's claim controller reads the same claim: its thread must survive it (a dying thread warns).
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_claim_nested_deeper_than_the_decoder_goes_fails_alone(start_driver, claims: Claims, dirs: Dirs,
                                                                 sandbox: Sandbox) -> None:
    """Opaque parameters are free JSON (10 KiB allow ~1,700 levels): past the decoder's depth the claim fails, alone."""
    running = start_driver("2x16GiB")
    good = claims.claim("good", device="gpu-1", memory="2Gi")
    bad = claims.claim("bad")
    stored = sandbox.get("resourceclaims", "default", "bad")
    assert stored is not None
    parameters: dict[str, Any] = {}
    for _ in range(1500):
        parameters = {"a": parameters}
    stored["spec"]["devices"]["config"] = [{"opaque": {"driver": "gpu-mem.kubectl-gpushare.io",
                                                       "parameters": parameters}}]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(4 * limit)  # the sandbox encodes what it stores; kube-apiserver's Go JSON goes 10,000 deep
    try:
        sandbox.load([stored])
    finally:
        sys.setrecursionlimit(limit)
    answer = _prepare(dirs, [("bad", bad.metadata.uid), ("good", good.metadata.uid)])
    assert answer.claims[bad.metadata.uid].error == (
        "resourceclaim default/bad does not decode as a resource.k8s.io/v1.ResourceClaim (nested too deeply)")
    assert not answer.claims[good.metadata.uid].error
    assert list(running.driver.preparer.prepared()) == [good.metadata.uid]


def test_an_unallocated_claim_is_refused(start_driver, claims: Claims, dirs: Dirs) -> None:
    start_driver()
    pending = claims.claim("pending", allocate=False)
    answer = _prepare(dirs, [("pending", pending.metadata.uid)])
    assert answer.claims[pending.metadata.uid].error == "claim default/pending is not allocated"
    assert not os.path.exists(dirs.cdi) or not os.listdir(dirs.cdi)


def test_a_replaced_claim_is_refused_by_its_uid(start_driver, claims: Claims, dirs: Dirs) -> None:
    start_driver()
    claim = claims.claim("c1")
    answer = _prepare(dirs, [("c1", OTHER_UID)])
    assert answer.claims[OTHER_UID].error == (
        f"claim default/c1 has UID {claim.metadata.uid}, not {OTHER_UID}: it was replaced")


def test_a_missing_claim_is_refused(start_driver, dirs: Dirs) -> None:
    start_driver()
    answer = _prepare(dirs, [("ghost", OTHER_UID)])
    assert answer.claims[OTHER_UID].error == "claim default/ghost not found"


@pytest.mark.parametrize("uid", ["../../etc/passwd", "", "6A3D3B9E-2F0C-4D1B-9D71-0C0E7E0F0A11", "x" * 5000])
def test_a_uid_that_is_not_a_uuid_never_reaches_the_api_or_a_path(start_driver, dirs: Dirs, uid: str) -> None:
    running = start_driver()
    answer = _prepare(dirs, [("c1", uid)])
    assert "is not a UUID" in answer.claims[uid].error
    assert running.driver.preparer.reads == 0
    with grpc.insecure_channel(target(os.path.join(dirs.plugin, "dra.sock"))) as channel:
        gone = v1_grpc.DRAPluginStub(channel).NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace="default", name="c1", uid=uid)]), timeout=10)
    assert "is not a UUID" in gone.claims[uid].error


def test_unpreparing_a_claim_never_prepared_succeeds(start_driver, dirs: Dirs) -> None:
    start_driver()
    with grpc.insecure_channel(target(os.path.join(dirs.plugin, "dra.sock"))) as channel:
        gone = v1_grpc.DRAPluginStub(channel).NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(
            claims=[dra_v1_pb2.Claim(namespace="default", name="c1", uid=OTHER_UID)]), timeout=10)
    assert OTHER_UID in gone.claims and gone.claims[OTHER_UID].error == ""


def test_a_slow_api_fails_the_unread_claims_before_the_call_deadline(start_driver, claims: Claims, dirs: Dirs,
                                                                     sandbox: Sandbox) -> None:
    # kubelet gives NodePrepareResources a deadline (its PluginClientTimeout); the claims are read one by
    # one, each read bounded by what is left of it, so a read the API server sits on fails its claim and
    # the claims after it, and the call still answers, in time, for the claim already read.
    running = start_driver("2x16GiB")
    good, slow, later = (claims.claim(name, device="gpu-1", memory="2Gi") for name in ("good", "slow", "later"))
    # in transit: the API server, which would answer 504 at the deadline it was told, never sees it in time
    stalled = sandbox.inject("GET", r"/resourceclaims/slow(\?|$)", latency=8.0, times=1, in_transit=True)
    refs = [("good", good.metadata.uid), ("slow", slow.metadata.uid), ("later", later.metadata.uid)]
    answer = _prepare(dirs, refs, timeout=4)  # grpc raises DEADLINE_EXCEEDED if the answer comes late
    assert stalled.hits == 1
    assert not answer.claims[good.metadata.uid].error and answer.claims[good.metadata.uid].devices
    assert "cannot read claim default/slow: the API server at" in answer.claims[slow.metadata.uid].error
    assert "did not answer after" in answer.claims[slow.metadata.uid].error
    assert answer.claims[later.metadata.uid].error.startswith(
        "cannot read claim default/later: no time left before the call's deadline")
    assert not [r for r in sandbox.requests if r.verb == "get" and r.name == "later"]  # never asked
    assert list(saved_claims(dirs.plugin)) == [good.metadata.uid]
    assert list(running.driver.preparer.prepared()) == [good.metadata.uid]
    # kubelet's retry, the API server quick again: the two are prepared, the first answered from its record.
    again = _prepare(dirs, refs)
    assert not any(again.claims[uid].error for _, uid in refs)
    assert sorted(saved_claims(dirs.plugin)) == sorted(uid for _, uid in refs)


def test_a_cdi_spec_that_cannot_be_read_fails_its_claim_alone_at_a_call_and_at_start(
        start_driver, claims: Claims, dirs: Dirs) -> None:
    running = start_driver("2x16GiB")
    known = claims.claim("known", device="gpu-0", memory="2Gi")
    assert not _prepare(dirs, [("known", known.metadata.uid)]).claims[known.metadata.uid].error
    spec = dirs.cdi_spec(known.metadata.uid)
    spec.unlink()
    spec.mkdir()  # read() fails with EISDIR, as with EIO or EACCES
    fresh = claims.claim("fresh", device="gpu-1", memory="2Gi")
    answer = _prepare(dirs, [("known", known.metadata.uid), ("fresh", fresh.metadata.uid)])
    assert answer.claims[known.metadata.uid].error == "claim default/known: cannot read its CDI spec: Is a directory"
    assert not answer.claims[fresh.metadata.uid].error
    assert dirs.cdi_spec(fresh.metadata.uid).is_file()
    running.shutdown()
    start_driver("2x16GiB")  # the restored claim whose spec cannot be read does not stop the start
    again = _prepare(dirs, [("known", known.metadata.uid), ("fresh", fresh.metadata.uid)])
    assert again.claims[known.metadata.uid].error == "claim default/known: cannot read its CDI spec: Is a directory"
    assert not again.claims[fresh.metadata.uid].error
