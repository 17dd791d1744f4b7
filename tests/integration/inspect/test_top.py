"""``kubectl gpushare top`` through the real kubectl, against the sandbox's pod proxy and stand-in plugins.

Each node's plugin is a real HTTP server (`usage_standin`) registered as the proxy target of its
device-plugin pod, so the requests go kubectl -> plugin process -> sandbox (HTTP) -> pods/proxy ->
stand-in, as they go through kube-apiserver in a cluster.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import usage_standin
from golden.top import cases
from usage_standin import GIB, plugins, report
from viewer_role import viewer_kubeconfig

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

WARNING_BRAVO_CHARLIE = (
    "warning: no usage from 2 nodes, shown as <unknown> (bravo: timed out; charlie: usage document is nested too "
    "deeply)\n"
)


def _deep() -> bytes:
    return b"[" * 100_000 + b"]" * 100_000


def test_table_json_and_yaml_with_one_pod_over_its_share_and_two_nodes_unknown(
    sandbox: Sandbox, kubectl: Callable[..., Any]
) -> None:
    sandbox.load(usage_standin.cluster())
    with plugins(sandbox) as standins:
        standins["bravo"].hang.set()
        standins["charlie"].body = _deep()
        for name, flags in (("top.txt", []), ("top.json", ["-o", "json"]), ("top.yaml", ["-o", "yaml"])):
            result = kubectl("gpushare", "top", "-A", "--request-timeout", "1s", *flags)
            cases.check(name, result.stdout)
            assert result.stderr == WARNING_BRAVO_CHARLIE
    document = json.loads((cases.GOLDEN / "top.json").read_text())
    assert [(p["name"], p["over"]) for p in document["pods"]] == [
        ("greedy", True), ("trainer", False), ("notebook", False), ("server", None)
    ]
    assert document["unknownNodes"] == ["bravo", "charlie"]


def test_namespace_sort_and_node_arguments(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load(usage_standin.cluster())
    with plugins(sandbox, ("alpha",)):
        result = kubectl("gpushare", "top", "alpha", "-n", "team-a", "--sort", "used", "--no-headers")
        assert result.stderr == ""
        lines = result.stdout.splitlines()
        assert lines[0].split()[:4] == ["alpha", "0", "6144Mi", "10240Mi"]  # GPU 0 uses the most
        pods = [line.split() for line in lines[lines.index("") + 1:]]
        assert [(p[0], p[-1]) for p in pods] == [("greedy", "OVER"), ("trainer", "ok")]  # no NAMESPACE column
        default = kubectl("gpushare", "top", "alpha").stdout  # the context's namespace: default, no GPU pods there
        assert "POD" not in default and default.startswith("NODE")


def _over_or_unknown(kubectl: Callable[..., Any], sandbox: Sandbox, body: bytes, **standin: Any) -> tuple[str, str]:
    with plugins(sandbox, ("alpha",)) as standins:
        alpha = standins["alpha"]
        alpha.body = body
        for key, value in standin.items():
            setattr(alpha, key, value)
        result = kubectl("gpushare", "top", "alpha", "-A", "-o", "json", "--request-timeout", "2s")
    return json.loads(result.stdout)["unknownNodes"], result.stderr


HOSTILE: dict[str, tuple[bytes, dict[str, Any], str]] = {
    "garbage": (b"\xff\xfe not json", {}, "usage document: "),
    # The pod proxy relays the plugin's Content-Length (httputil.ReverseProxy copies it): refused as declared.
    "huge": (b" " * (protocol.MAX_USAGE_BYTES + 1), {},
             f"declares {protocol.MAX_USAGE_BYTES + 1} bytes, more than {protocol.MAX_USAGE_BYTES}"),
    "huge-without-length": (b" " * (protocol.MAX_USAGE_BYTES + 1), {"length": False}, "longer than"),
    "deep": (_deep(), {}, "nested too deeply"),
    "another-node": (report("mallory", [], []), {}, "the document is for node 'mallory'"),
    "future-version": (usage_standin.alpha_report().replace(b"v1alpha1", b"v9"), {}, "unknown version"),
    "negative": (report("alpha", [protocol.UsageGpu(0, "u", -1, 0)], []), {}, "GPU entry out of range"),
    "too-big-a-number": (report("alpha", [protocol.UsageGpu(0, "u", 2**64, 0)], []), {}, "usage document"),
    "gzip-bomb-header": (b"\x1f\x8b", {"headers": {"Content-Encoding": "gzip"}}, "compressed"),
    "error-status": (b"oops", {"status": 500}, "HTTP 500"),
    "slow-drip": (usage_standin.alpha_report(), {"drip": 0.5}, "time"),  # timed out, or did not arrive in time
    "not-utf-8-in-a-string": (usage_standin.alpha_report().replace(b"GPU-alpha-0", b"GPU-\xff"), {}, "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_or_slow_plugin_fails_its_node_only(sandbox: Sandbox, kubectl: Callable[..., Any], case: str) -> None:
    sandbox.load(usage_standin.cluster())
    body, standin, words = HOSTILE[case]
    unknown, stderr = _over_or_unknown(kubectl, sandbox, body, **standin)
    assert unknown == ["alpha"]
    assert stderr.startswith("warning: no usage from 1 node, shown as <unknown> (alpha: "), stderr
    assert words in stderr
    assert stderr.count("\n") == 1


def test_a_document_of_the_right_shape_fills_the_node(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load(usage_standin.cluster())
    gpus = [protocol.UsageGpu(0, "u0", 16 * GIB, 6 * GIB, 7 * GIB, protocol.ENFORCE_SOFT, "\x1b[31mred\x1b[0m")]
    unknown, stderr = _over_or_unknown(kubectl, sandbox, report("alpha", gpus, []))
    assert (unknown, stderr) == ([], "")


def test_without_permission_to_proxy_every_node_is_unknown_and_the_view_stands(
    sandbox: Sandbox, kubectl: Callable[..., Any], tmp_path: Any
) -> None:
    sandbox.load(usage_standin.cluster())
    viewer = viewer_kubeconfig(sandbox, tmp_path / "viewer")  # view and gpushare-viewer: no pods/proxy
    with plugins(sandbox, ("alpha",)):
        result = kubectl("gpushare", "top", "-A", "--kubeconfig", str(viewer))
    assert "alpha    0    6144Mi     <unknown>" in result.stdout
    assert "alpha: HTTP 403" in result.stderr


def test_what_top_asks_for_is_what_docs_top_md_lists(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    from kubectl_gpushare.sandbox.rbac import rules_from_requests

    sandbox.load(usage_standin.cluster())
    with plugins(sandbox):
        kubectl("gpushare", "top", "-A", "--request-timeout", "2s")
    rules = rules_from_requests(sandbox.requests, component="top")
    assert [(r["resources"], r["verbs"]) for r in rules] == [
        (["nodes"], ["list"]), (["pods"], ["list"]), (["pods/proxy"], ["get"]), (["resourceslices"], ["list"]),
    ]
    proxied = {r.namespace for r in sandbox.requests if r.subresource == "proxy"}
    assert proxied == {"kube-system"}


def test_many_hung_plugins_cost_one_timeout_together(sandbox: Sandbox) -> None:
    import time

    from kubectl_gpushare.inspect import usage
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config
    from kubectl_gpushare.sandbox.builders import node_object

    count = usage.MAX_CONCURRENT * 3
    names = [f"hung-{number:02d}" for number in range(count)]
    sandbox.load([node_object(name, [8], ip=f"10.6.0.{number + 1}") for number, name in enumerate(names)]
                 + [usage_standin.plugin_pod(name, f"10.6.1.{number + 1}") for number, name in enumerate(names)])
    hung = usage_standin.StandIn()
    hung.hang.set()
    try:
        for name in names:
            sandbox.register_proxy_target("kube-system", f"gpushare-device-plugin-{name}", protocol.USAGE_PORT,
                                          "127.0.0.1", hung.port)  # fmt: skip
        kubeconfig = sandbox.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        with Client(load_config(kubeconfig=str(kubeconfig)), component="top") as client:
            start = time.monotonic()
            fetched = usage.fetch_reports(client, None, timeout=1.5)
            elapsed = time.monotonic() - start
    finally:
        hung.close()
    assert fetched.failures == dict.fromkeys(names, "timed out") and not fetched.reports
    assert elapsed < 4.0, f"{count} hung plugins took {elapsed:.1f}s; three rounds of 1.5s would be 4.5s"


def test_a_selector_picks_the_nodes_first_and_shows_the_same(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    sandbox.load(usage_standin.cluster())
    with plugins(sandbox, ("alpha",)):
        by_name = kubectl("gpushare", "top", "alpha", "-A")
        by_label = kubectl("gpushare", "top", "-l", "kubernetes.io/hostname=alpha", "-A")
        none = kubectl("gpushare", "top", "-l", "kubernetes.io/hostname=nowhere")
    assert by_label.stdout == by_name.stdout and "OVER" in by_name.stdout
    assert (none.stdout, none.stderr) == ("", "No resources found\n")


def test_plugin_pods_nested_too_deeply_or_not_in_utf_8_are_left_out_and_the_rest_found(sandbox: Sandbox) -> None:
    # kube-apiserver serves objects nested thousands of levels deep (free JSON in an annotation-less
    # field such as a claim's parameters); msgspec stops at Python's recursion limit. Such a pod, or one
    # with a string not in UTF-8, is one plugin pod less, never a traceback that hides the others.
    import dataclasses

    from api_relay import relay

    from kubectl_gpushare.inspect import usage
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config

    sandbox.load(usage_standin.cluster())
    alpha = json.dumps(sandbox.get("pods", "kube-system", "gpushare-device-plugin-alpha")).encode()
    deep = b'{"metadata":{"name":"deep"},"spec":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    not_utf_8 = b'{"metadata":{"name":"\xff"},"spec":{"nodeName":"bravo"}}'

    def hostile_list(method: str, path: str, body: bytes) -> bytes | None:
        if method == "GET" and path.startswith("/api/v1/namespaces/kube-system/pods?"):
            return b'{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[' + b",".join(
                (deep, not_utf_8, alpha)) + b"]}"
        return None

    kubeconfig = sandbox.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
    with relay(sandbox, hostile_list) as port:
        config = dataclasses.replace(load_config(kubeconfig=str(kubeconfig)), server=f"http://127.0.0.1:{port}")
        with Client(config, component="top", retry=None) as client:
            found = usage.plugins_by_node(client)
    assert list(found) == ["alpha"] and found["alpha"].name == "gpushare-device-plugin-alpha"
