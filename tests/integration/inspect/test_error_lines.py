"""An API error's message, which a server or a proxy in between writes, is one printable line on stderr."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from api_relay import relay

from kubectl_gpushare.kube.errors import EXIT_AUTH
from kubectl_gpushare.sandbox.builders import node_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

HOSTILE = 'nodes is forbidden: \x1b[2J\x1b[31mUser "jane"\ncannot list\tnodes'
STATUS = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": HOSTILE + "x" * 100_000,
                     "reason": "Forbidden", "code": 403}).encode()


@pytest.mark.parametrize("command", [
    ["kubectl-inspect-gpushare"],
    ["kubectl-gpushare", "label-nodes", "--dry-run"],
    ["kubectl-gpushare", "fit", "4"],
], ids=["inspect", "label-nodes", "fit"])
def test_a_hostile_api_message_is_one_printable_line(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    sandbox.load([node_object("n1", [16], ip="10.0.0.1")])
    sandbox.inject(method="GET", path=r"^/api/v1/nodes", status=403)

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        return STATUS if path.startswith("/api/v1/nodes") else None

    with relay(sandbox, rewrite) as port:
        kubeconfig = tmp_path / "relayed"
        kubeconfig.write_text(Path(kube_env["KUBECONFIG"]).read_text().replace(f":{sandbox.port}", f":{port}"))
        result = subprocess.run(command, env={**kube_env, "KUBECONFIG": str(kubeconfig)}, capture_output=True,
                                text=True, timeout=60)

    assert result.returncode == EXIT_AUTH, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.isprintable() and "\x1b" not in line and "\t" not in line, line
    assert 'User "jane" cannot list nodes' in line, "whitespace runs read as one space"
    assert len(line) < 4_500 and line.endswith("…"), "a sentence's room, the cut marked"
