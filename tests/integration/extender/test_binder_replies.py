"""The binder against replies the sandbox does not serve: a loopback relay in front of it alters one.

The relay passes every request on to the sandbox (so each write really lands there) and hands
the sandbox's reply back, except the one this test rewrites. The binder runs with the real
`KubeApi` and client; only its ledger is filled by hand (no informer, no watch to relay).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from api_relay import Reply, relay
from tcp_gate import TcpGate
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.extender import wire
from kubectl_gpushare.extender.binder import Binder
from kubectl_gpushare.extender.kubeapi import KubeApi
from kubectl_gpushare.extender.state import ExtenderState
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.ledger import NodeRecord
from kubectl_gpushare.sandbox.builders import pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


def test_a_roll_back_patch_that_landed_with_an_undecodable_reply_releases_the_gpu(
    sandbox: Sandbox, kubeconfig: Path
) -> None:
    # The Binding is refused (422: it did not happen), so the binder removes its annotations; that
    # patch lands, but its reply does not decode as a Pod (errors.UndecodableReply). The annotations
    # are gone: the GPU is free at once, not kept as if the removal had failed.
    sandbox.load([pod_object("a", "default", [10])])
    refused = sandbox.inject("POST", r"/pods/a/binding", status=422, times=1)
    removals: list[str] = []

    def garble_the_removal(method: str, path: str, body: bytes) -> bytes | None:
        if method == "PATCH" and path.startswith("/api/v1/namespaces/default/pods/a?") and b"null" in body:
            removals.append(path)
            return b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":["not","a","name"]}}'
        return None

    state = ExtenderState()
    state.set_node(NodeRecord(name="gpu-1", cap_mem=16, cap_count=1))
    uid = sandbox.get("pods", "default", "a")["metadata"]["uid"]  # type: ignore[index]
    with relay(sandbox, garble_the_removal) as port:
        config = dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}")
        client = Client(config, component="test-binder", retry=None)
        binder = Binder(KubeApi(client), state, request_timeout=2.0)
        outcome = binder.bind(wire.BindingArgs(pod_name="a", pod_namespace="default", pod_uid=uid, node="gpu-1"))
        binder.close()
        client.close()
    assert refused.hits == 1 and len(removals) == 1
    assert outcome.reason == "binding_failed" and "injected fault" in outcome.error, outcome
    annotations = (sandbox.get("pods", "default", "a") or {})["metadata"].get("annotations") or {}
    assert protocol.ANN_ASSUMED_NODE not in annotations and protocol.ANN_IDX not in annotations  # the removal landed
    assert not state.reserved(uid) and not state.unsettled(uid)  # released, not kept as "not removed yet"
    assert "nodeName" not in (sandbox.get("pods", "default", "a") or {})["spec"]


def test_a_binding_never_sent_is_settled_as_refused_not_kept_for_the_grace(sandbox: Sandbox, kubeconfig: Path) -> None:
    # The binder's connections go through a gate, then the relay. Once the GPU annotations have landed,
    # the relay answers that patch with "Connection: close" and the gate refuses new connects: the
    # Binding is never sent (refused at connect), so it cannot land. It is settled as a refusal: the
    # annotations are removed as soon as the API answers again, not after the 60 s an unknown outcome
    # waits (`unknown_grace`).
    sandbox.load([pod_object("a", "default", [10])])
    uid = sandbox.get("pods", "default", "a")["metadata"]["uid"]  # type: ignore[index]
    state = ExtenderState()
    state.set_node(NodeRecord(name="gpu-1", cap_mem=16, cap_count=1))
    patched: list[str] = []

    with relay(sandbox, lambda method, path, body: close_after(method, path, body)) as relay_port, \
            TcpGate(relay_port) as gate:

        def close_after(method: str, path: str, body: bytes) -> Reply | None:
            if method == "PATCH" and path.startswith("/api/v1/namespaces/default/pods/a?") and b"null" not in body:
                patched.append(path)
                gate.stop_listening()  # the annotation patch has landed; its reply is on its way
                return Reply(None, {"Connection": "close"})
            return None

        config = dataclasses.replace(load_config(str(kubeconfig)), server=f"http://127.0.0.1:{gate.port}")
        client = Client(config, component="test-binder", retry=None)
        binder = Binder(KubeApi(client), state, request_timeout=2.0, sweep_interval=0.1)
        try:
            outcome = binder.bind(wire.BindingArgs(pod_name="a", pod_namespace="default", pod_uid=uid, node="gpu-1"))
            assert len(patched) == 1
            assert outcome.reason == "binding_failed", outcome  # not "unknown_outcome"
            assert "Connection refused" in outcome.error and "outcome is unknown" not in outcome.error
            assert not [r for r in sandbox.requests if r.subresource == "binding"]
            assert state.reserved(uid)  # the annotations still claim the GPU until they are removed
            gate.open()
            wait_for(lambda: not state.reserved(uid), timeout=15)  # well within the 60 s grace
        finally:
            binder.close()
            client.close()
    annotations = (sandbox.get("pods", "default", "a") or {})["metadata"].get("annotations") or {}
    assert protocol.ANN_ASSUMED_NODE not in annotations and protocol.ANN_IDX not in annotations
    assert "nodeName" not in (sandbox.get("pods", "default", "a") or {})["spec"]
