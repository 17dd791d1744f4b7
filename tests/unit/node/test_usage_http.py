"""/usage and /metrics over real HTTP, from limits (cgroup currentUsed) and from NVML's process list."""

from __future__ import annotations

import datetime
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import top
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.enforce import Enforcer, PodShare
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.node.http import UsageServer
from kubectl_gpushare.node.usage import Sampler

GiB = 1 << 30
GOLDEN = Path(__file__).parents[2] / "golden" / "node"
A, B = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeBackend, UsageServer, Path]]:
    root = tmp_path / "cg"
    (root / "kubepods" / "burstable").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory\n")
    backend = FakeBackend.from_spec("2x16GiB", seed="n1")
    backend.set_limits_unsupported(1, "MIG is enabled")
    shares = [PodShare(A, "ns", "a", 0, 4 * GiB), PodShare(B, "ns", "b", 1, 2 * GiB)]
    enforcer = Enforcer(backend, cgroups.Layout(str(root), str(root)), protocol.ENFORCE_HARD, backend.devices,
                        lambda: shares)
    cg_a = root / cgroups.pod_path(A, "burstable", "cgroupfs")
    cg_a.mkdir()
    enforcer.reconcile()
    backend.allocate(0, str(cg_a), 3 * GiB)
    # pod b on the unenforced GPU: a process found through /proc/<pid>/cgroup
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(f"0::/kubepods/besteffort/pod{B}/ctr\n")
    backend.add_process(1, 4242, 5 * GiB)
    backend.add_process(1, 999, GiB)  # not in this PID namespace: no /proc entry, unmapped
    sampler = Sampler("n1", backend, backend.devices, lambda: shares, enforcer, proc_root=str(proc),
                      clock=lambda: datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC))
    server = UsageServer(sampler, "127.0.0.1", 0)
    server.start()
    yield backend, server, root
    server.stop()


def get(server: UsageServer, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=10) as resp:
        return bytes(resp.read())


def test_usage_document(served: tuple[FakeBackend, UsageServer, Path]) -> None:
    _, server, _ = served
    report = protocol.decode_usage_report(get(server, protocol.USAGE_PATH))
    assert report.node == "n1" and report.source == "cgroup-limits"
    g0, g1 = report.gpus
    assert (g0.enforcement, g0.reason, g0.used_bytes, g0.allocated_bytes) == ("hard", "", 3 * GiB, 4 * GiB)
    assert (g1.enforcement, g1.reason, g1.used_bytes) == ("off", "MIG is enabled", 6 * GiB)
    a, b = report.pods
    assert (a.used_bytes, a.limit_bytes, a.soft_limit_bytes) == (3 * GiB, 4 * GiB, 4 * GiB)
    assert (b.used_bytes, b.limit_bytes) == (5 * GiB, None)


def test_metrics(served: tuple[FakeBackend, UsageServer, Path]) -> None:
    _, server, _ = served
    families = {f.name: f for f in text_string_to_metric_families(get(server, protocol.METRICS_PATH).decode())}
    pod_used = {s.labels["pod"]: s.value for s in families[protocol.METRIC_POD_USED].samples}
    assert pod_used == {"a": 3 * GiB, "b": 5 * GiB}
    limits = {s.labels["pod"]: s.value for s in families[protocol.METRIC_POD_LIMIT].samples}
    assert limits == {"a": 4 * GiB}
    enforced = {s.labels["gpu"]: (s.value, s.labels["reason"]) for s in families[protocol.METRIC_GPU_ENFORCED].samples}
    assert enforced == {"0": (1.0, ""), "1": (0.0, "MIG is enabled")}
    assert {s.labels["node"] for s in families[protocol.METRIC_GPU_USED].samples} == {"n1"}


def test_unknown_path_is_404(served: tuple[FakeBackend, UsageServer, Path]) -> None:
    _, server, _ = served
    with pytest.raises(urllib.error.HTTPError) as err:
        get(server, "/../etc/passwd")
    assert err.value.code == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
def test_other_methods_are_405_with_allow_get(served: tuple[FakeBackend, UsageServer, Path], method: str) -> None:
    _, server, _ = served
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{protocol.METRICS_PATH}", method=method,
                                     data=b"x" if method in ("POST", "PUT", "PATCH") else None)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 405 and err.value.headers["Allow"] == "GET"


@pytest.mark.parametrize(("path", "name"),
                         [(protocol.USAGE_PATH, "usage.json"), (protocol.METRICS_PATH, "metrics.txt")])
def test_bodies_match_golden(served: tuple[FakeBackend, UsageServer, Path], path: str, name: str) -> None:
    _, server, _ = served
    assert get(server, path) == (GOLDEN / name).read_bytes(), f"body differs from tests/golden/node/{name}"


def test_a_silent_client_is_disconnected_and_scrapes_go_on(tmp_path: Path) -> None:
    backend = FakeBackend.from_spec("1x16GiB", seed="n1")
    sampler = Sampler("n1", backend, backend.devices, lambda: [])
    server = UsageServer(sampler, "127.0.0.1", 0, idle_timeout=0.5)
    server.start()
    try:
        silent = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(5)]
        silent[0].sendall(b"GET /metr")  # half a request line, then nothing
        for conn in silent:
            with conn:
                assert conn.recv(1024) == b"", "the server kept a silent connection (and its thread) open"
        assert get(server, protocol.METRICS_PATH).startswith(b"# HELP")
    finally:
        server.stop()


def test_two_pods_of_one_name_on_one_gpu_are_one_series_with_what_top_shows(tmp_path: Path) -> None:
    # A StatefulSet pod replaced under its name while the old one still ends: two UIDs, two cgroups, one name.
    old, new = A, "00000000-0000-4000-8000-00000000000c"
    root = tmp_path / "cg"
    (root / "kubepods" / "burstable").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory\n")
    backend = FakeBackend.from_spec("1x16GiB", seed="n1")
    shares = [PodShare(old, "ns", "web-0", 0, 4 * GiB), PodShare(new, "ns", "web-0", 0, 4 * GiB)]
    enforcer = Enforcer(backend, cgroups.Layout(str(root), str(root)), protocol.ENFORCE_HARD, backend.devices,
                        lambda: shares)
    for uid, used in ((old, 3 * GiB), (new, GiB)):
        cg = root / cgroups.pod_path(uid, "burstable", "cgroupfs")
        cg.mkdir()
        enforcer.reconcile()
        backend.allocate(0, str(cg), used)
    server = UsageServer(Sampler("n1", backend, backend.devices, lambda: shares, enforcer), "127.0.0.1", 0)
    server.start()
    try:
        exposition = get(server, protocol.METRICS_PATH).decode()
        shown = top.from_report(protocol.decode_usage_report(get(server, protocol.USAGE_PATH)))
    finally:
        server.stop()
    samples = [(s.name, tuple(sorted(s.labels.items())), s.value)
               for family in text_string_to_metric_families(exposition) for s in family.samples]
    label_sets = [(name, labels) for name, labels, _ in samples]
    assert len(label_sets) == len(set(label_sets)), "a metric name and label set appears twice"
    web = {name: value for name, labels, value in samples if dict(labels).get("pod") == "web-0"}
    assert web == {protocol.METRIC_POD_USED: 4 * GiB, protocol.METRIC_POD_LIMIT: 8 * GiB}  # both pods' limits
    assert shown.pods[("ns", "web-0", 0)] == top.PodObserved(used=4 * GiB, limit=8 * GiB)
