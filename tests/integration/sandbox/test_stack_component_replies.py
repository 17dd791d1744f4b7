"""The stand-in stack's writes against a reply the sandbox never serves (`api_relay` rewrites it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from api_relay import relay

from kubectl_gpushare.cli import stack_components
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.kube.errors import KubeError
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytest.importorskip("cel_expr_python")  # the confinement policy the ServiceAccount comes with
pytestmark = pytest.mark.integration

NODE = "node-a"


@pytest.mark.parametrize("reply", [b"{not json", b"[" * 100_000 + b"]" * 100_000, b'{"status":{"token":"\xff"}}'],
                         ids=["not-json", "nested-too-deeply", "not-utf-8"])
def test_a_token_request_answered_with_a_body_that_is_not_json_is_one_line_not_a_traceback(
        sandbox: Sandbox, kubeconfig: Path, api: Client, reply: bytes) -> None:
    # The TokenRequest lands (2xx) but its reply does not decode: there is no token to use, so the
    # caller falls back to the stack's credentials (`KubeError`), as for a reply without a token.
    sandbox.load([node_object(NODE, [8], ip="10.0.0.1")])
    stack_components.install_confinement(api)
    stack_components.register_device_plugin(api, NODE)
    assert stack_components.device_plugin_token(api, NODE)  # the sandbox issues one: only the reply is at fault

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        return reply if method == "POST" and path.partition("?")[0].endswith("/token") else None

    with relay(sandbox, rewrite) as port, Client(dataclasses.replace(
            load_config(str(kubeconfig)), server=f"http://127.0.0.1:{port}"), retry=None) as client, \
            pytest.raises(KubeError, match=f"^the TokenRequest for node {NODE} was answered without a token$"):
        stack_components.device_plugin_token(client, NODE)  # before: json.JSONDecodeError, a traceback
