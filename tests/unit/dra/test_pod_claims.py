"""Which claims a pod of this node uses (`pod_claims.claim_user`), and how they add to the prepared claims'
pods (`daemon.pod_shares`): hostile pods name nothing, a claim is only ever looked up in the pod's namespace."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubectl_gpushare.dra.checkpoint import ClaimPod, PreparedClaim
from kubectl_gpushare.dra.daemon import pod_shares
from kubectl_gpushare.dra.pod_claims import ClaimUser, claim_user
from kubectl_gpushare.kube.types import Pod

NODE = "n1"
UID = "0b6ef1a3-3c5f-4ad6-9d0b-5f1f0e8c9a10"
OTHER_UID = "5d1c8f0e-2a4b-4c6d-8e0f-1a2b3c4d5e6f"
GIB = 1 << 30


def pod(claims: Any = None, statuses: Any = None, *, uid: str = UID, node: str = NODE, phase: str = "Running",
        namespace: str = "ns") -> Pod:
    """A pod as decoded from the API (lists stay lists, as JSON arrays decode)."""
    claims = [{"name": "gpu", "resourceClaimName": "shared"}] if claims is None else claims
    statuses = [] if statuses is None else statuses
    return msgspec.convert({"metadata": {"name": "p", "namespace": namespace, "uid": uid},
                            "spec": {"nodeName": node, "resourceClaims": claims},
                            "status": {"phase": phase, "resourceClaimStatuses": statuses}}, Pod)


@pytest.mark.parametrize(("given", "claims"), [
    (pod(), {"shared"}),
    (pod([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]),
     {"p-gpu-x"}),
    (pod([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"name": "other", "resourceClaimName": "x"}]), None),
    (pod([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"name": "gpu", "resourceClaimName": None}]), None),
    (pod(statuses="not a list"), {"shared"}),
    (pod([{"name": "gpu", "resourceClaimTemplateName": "t"}], [{"name": 5}]), None),
    (pod("not a list"), None),
    (pod([{"name": "gpu"}], [{"name": "gpu", "resourceClaimName": "shared"}]), None),
    (pod([{"name": "gpu", "resourceClaimName": "x" * 254}]), None),
    (pod(node="n2"), None),
    (pod(phase="Succeeded"), None),
    (pod(phase="Failed"), None),
    (pod(uid="../../kubepods.slice"), None),
    (pod(uid=UID.upper()), None),
], ids=["by-name", "template-via-status", "status-of-another-entry", "template-made-none", "garbage-statuses",
        "status-entry-of-wrong-type", "claims-not-a-list", "entry-names-neither", "name-too-long", "another-node",
        "succeeded", "failed", "uid-a-path", "uid-upper-case"])
def test_claim_user_names_only_what_kubelet_would_resolve(given: Pod, claims: set[str] | None) -> None:
    found = claim_user(given, NODE)
    assert (found.claims if found else None) == claims
    if found is not None:
        assert (found.uid, found.namespace) == (UID, "ns")


def prepared(name: str, gpu: int, gib: int, *pods: ClaimPod, namespace: str = "ns") -> PreparedClaim:
    return PreparedClaim(namespace=namespace, name=name, pool=NODE, gpu=gpu, gpu_uuid=f"GPU-{gpu}",
                         memory_bytes=gib * GIB, cdi_ids=(), devices=(), env={}, pods=pods)


def test_joined_pods_hold_the_claims_they_name_in_their_namespace_once_each() -> None:
    a, b = ClaimPod(UID, "a"), ClaimPod(OTHER_UID, "b")
    claims = [prepared("shared", 1, 4, a), prepared("mine", 1, 2, b), prepared("shared", 0, 8, namespace="other")]
    users = {("ns", "shared"): [a, b]}  # a is in reservedFor and seen on the node: counted once
    shares = {(share.uid, share.gpu): share.bytes for share in pod_shares(claims, users)}
    assert shares == {(UID, 1): 4 * GIB, (OTHER_UID, 1): 6 * GIB}
    assert {(s.uid, s.gpu) for s in pod_shares(claims)} == {(UID, 1), (OTHER_UID, 1)}


def test_a_recorded_pod_that_ended_holds_nothing_more() -> None:
    a, b = ClaimPod(UID, "a"), ClaimPod(OTHER_UID, "b")
    claims = [prepared("shared", 1, 4, a, b), prepared("mine", 1, 2, b)]
    assert [(share.uid, share.bytes) for share in pod_shares(claims, {}, frozenset({OTHER_UID}))] == [(UID, 4 * GIB)]


def test_claim_user_is_hashable_state() -> None:
    assert claim_user(pod(), NODE) == ClaimUser(UID, "ns", "p", frozenset({"shared"}))
