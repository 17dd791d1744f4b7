"""A real Prometheus (Debian's binary) scrapes the plugins; ``top --prometheus`` prints what ``top`` prints.

The plugins are stand-ins serving their usage document at /usage and, written by the device
plugin's own collector (node.http), the same numbers at /metrics. Prometheus listens on loopback only, keeps its data in
tmp_path and is stopped at the end. Skipped where the binary is missing (.ci/run installs it under
CI=true).
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import usage_standin
from kubectl_steps import reaped
from usage_standin import StandIn, exposition, plugins
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus")
READY_WITHIN = 90.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _query(port: int, query: str) -> list[dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", f"/api/v1/query?query={query}")
        answer = json.loads(connection.getresponse().read())
    finally:
        connection.close()
    return list(answer["data"]["result"]) if answer.get("status") == "success" else []


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[list[StandIn]], int]]:
    """Start Prometheus scraping the given stand-ins every second; yields its port once it runs."""
    if PROMETHEUS is None:
        pytest.skip("no prometheus binary (apt-get install prometheus; .ci/run does under CI=true)")
    started: list[subprocess.Popen[str]] = []

    def start(targets: list[StandIn]) -> int:
        config = tmp_path / "prometheus.yml"
        listed = ", ".join(f"'127.0.0.1:{target.port}'" for target in targets)
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: gpushare\n    static_configs:\n      - targets: [{listed}]\n"
        )
        port = _free_port()
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"), text=True,
        )  # fmt: skip
        started.append(process)
        return port

    try:
        yield start
    finally:
        for process in started:
            with reaped(process):
                process.terminate()
                process.wait(timeout=30)


def test_top_from_prometheus_prints_what_top_prints(
    sandbox: Sandbox, kubectl: Callable[..., Any], prometheus: Callable[[list[StandIn]], int]
) -> None:
    sandbox.load(usage_standin.cluster())
    with plugins(sandbox, ("alpha", "bravo")) as standins:
        standins["bravo"].body = usage_standin.report(
            "bravo", [protocol.UsageGpu(0, "GPU-bravo-0", 8 << 30, 3 << 30, 5 << 30, protocol.ENFORCE_SOFT)],
            [protocol.UsagePod("team-b", "server", "uid-server", 0, 3 << 30, 4 << 30, 8 << 30, 3 << 30)],
        )  # fmt: skip
        for standin in standins.values():
            standin.metrics = exposition(standin.body)
        port = prometheus(list(standins.values()))

        def scraped() -> bool:
            try:
                pods, gpus = _query(port, protocol.METRIC_POD_USED), _query(port, protocol.METRIC_GPU_ENFORCED)
            except (OSError, http.client.HTTPException, ValueError):
                return False  # not listening yet
            return len(pods) == 4 and len(gpus) == 3

        # Every look is two queries to Prometheus: a slower poll than the default.
        wait_for(scraped, READY_WITHIN, "Prometheus to scrape both plugins", interval=0.25)
        url = f"http://127.0.0.1:{port}"
        for flags in (["-A"], ["-A", "-o", "json"], ["-A", "-o", "yaml"], ["-n", "team-a", "--sort", "over"]):
            direct = kubectl("gpushare", "top", *flags)
            through = kubectl("gpushare", "top", *flags, "--prometheus", url)
            assert through.stdout == direct.stdout
            assert "charlie: no running device-plugin pod" not in direct.stderr  # it has one; it does not answer
            assert "charlie: " in direct.stderr and "charlie: no series in Prometheus" in through.stderr
        assert "OVER" in kubectl("gpushare", "top", "-A", "--prometheus", url).stdout
    bad = kubectl("gpushare", "top", "--prometheus", f"http://127.0.0.1:{_free_port()}", check=False)
    assert bad.returncode == 3 and "cannot reach Prometheus" in bad.stderr
