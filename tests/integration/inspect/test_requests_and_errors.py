"""What inspect asks the API server for, and how it fails: one line on stderr, documented exit codes."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from kubectl_gpushare.inspect import command
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration


def inspect(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl-inspect-gpushare", *args], env=env, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert result.returncode == code, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_summary_makes_one_node_list_and_one_paginated_active_pod_list(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    sandbox.load(generate_cluster(nodes=30, gpus_per_node=4, pods=4500, seed=3))
    sandbox.clear_requests()
    result = inspect(kube_env)
    assert result.returncode == 0, result.stderr
    requests = sandbox.requests
    node_requests = [r for r in requests if r.resource == "nodes"]
    pod_requests = [r for r in requests if r.resource == "pods"]
    assert [r.verb for r in node_requests] == ["list"]
    others = [(r.verb, r.resource) for r in requests if r.resource not in ("nodes", "pods")]
    assert others == [("list", "resourceslices")], "nothing but nodes, pods and DRA slices (none here) is asked for"
    assert len(pod_requests) == 3, "4,500 pods in pages of 2,000"
    assert all(r.verb == "list" and r.namespace in (None, "") for r in pod_requests)
    assert all(r.query.get("fieldSelector") == "status.phase!=Succeeded,status.phase!=Failed" for r in pod_requests)
    assert [bool(r.query.get("continue")) for r in pod_requests] == [False, True, True]
    assert all(r.user_agent.startswith("kubectl-gpushare/") for r in requests)


def test_named_nodes_are_fetched_by_name_and_one_node_narrows_the_pod_list(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    sandbox.load(generate_cluster(nodes=5, gpus_per_node=2, pods=40, seed=1))
    sandbox.clear_requests()
    assert inspect(kube_env, "gpu-node-001", "-d").returncode == 0
    gets = [(r.verb, r.resource, r.name) for r in sandbox.requests if r.resource == "nodes"]
    assert gets == [("get", "nodes", "gpu-node-001")]
    (pods,) = [r for r in sandbox.requests if r.resource == "pods"]
    assert pods.query["fieldSelector"] == "spec.nodeName=gpu-node-001,status.phase!=Succeeded,status.phase!=Failed"

    sandbox.clear_requests()
    result = inspect(kube_env, "gpu-node-003", "gpu-node-001")
    assert result.returncode == 0
    assert [r.name for r in sandbox.requests if r.resource == "nodes"] == ["gpu-node-003", "gpu-node-001"]
    assert len([r for r in sandbox.requests if r.resource == "pods"]) == 1
    rows = [line.split()[0] for line in result.stdout.splitlines()[1:3]]
    assert rows == ["gpu-node-001", "gpu-node-003"], "named nodes are shown by name"


def test_flag_after_node_name_still_selects_details(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load(generate_cluster(nodes=2, gpus_per_node=2, pods=6, seed=2))
    after = inspect(kube_env, "gpu-node-000", "-d")
    before = inspect(kube_env, "-d", "gpu-node-000")
    assert after.stdout == before.stdout
    assert "NAME:       gpu-node-000" in after.stdout


def test_selector_is_sent_to_the_server(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load(generate_cluster(nodes=3, gpus_per_node=1, pods=0))
    sandbox.clear_requests()
    result = inspect(kube_env, "-l", "kubernetes.io/hostname=gpu-node-002")
    assert result.returncode == 0
    (nodes,) = [r for r in sandbox.requests if r.resource == "nodes"]
    assert nodes.query["labelSelector"] == "kubernetes.io/hostname=gpu-node-002"
    assert "gpu-node-002" in result.stdout and "gpu-node-001" not in result.stdout


def test_node_not_found_keeps_the_original_text(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    result = inspect(kube_env, "no-such-node")
    assert_one_line_error(result, command.EXIT_API, 'Failed due to nodes "no-such-node" not found')


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["gpu-node-000/status"], "'gpu-node-000/status': may not contain '/'"),  # was a GET of the status
        (["../x", "-d"], "'../x': may not contain '/'"),
        (["..", "-o", "json"], "'..': may not be '..'"),
    ],
)
def test_a_node_name_that_is_no_path_segment_is_refused_before_any_request(
    sandbox: Sandbox, kube_env: dict[str, str], args: list[str], needle: str
) -> None:
    """As client-go refuses it (``IsValidPathSegmentName``): a name never walks the URL to a subresource."""
    sandbox.load(generate_cluster(nodes=1, pods=0, gpus_per_node=2))
    sandbox.clear_requests()
    result = inspect(kube_env, *args)
    assert_one_line_error(result, command.EXIT_USAGE, "invalid resource name", needle)
    assert sandbox.requests == []
    labeled = subprocess.run(["kubectl-gpushare", "label-nodes", *args[:1]], env=kube_env, capture_output=True,
                             text=True, timeout=60)
    assert_one_line_error(labeled, command.EXIT_USAGE, "invalid resource name", needle)
    assert sandbox.requests == []


def test_no_kubeconfig_is_a_config_error(tmp_path: Path, kube_env: dict[str, str]) -> None:
    env = dict(kube_env, KUBECONFIG=str(tmp_path / "missing"))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    result = inspect(env)
    assert_one_line_error(result, command.EXIT_USAGE, "Failed due to", "kubeconfig")


def test_help_needs_no_kubeconfig(tmp_path: Path, kube_env: dict[str, str]) -> None:
    env = dict(kube_env, KUBECONFIG=str(tmp_path / "missing"))
    for spelling in (["kubectl-inspect-gpushare", "-h"], ["kubectl-gpushare", "inspect", "--help"]):
        result = subprocess.run(spelling, env=env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0
        assert "Exit codes:" in result.stdout and "--kubeconfig" in result.stdout


def test_kubeconfig_path_list_and_context_flags(sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path) -> None:
    sandbox.load(generate_cluster(nodes=1, gpus_per_node=1, pods=0))
    good = Path(kube_env["KUBECONFIG"])
    broken = yaml.safe_load(good.read_text())
    broken["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"
    broken["clusters"][0]["name"] = "dead"
    broken["contexts"][0]["name"] = "dead"
    broken["contexts"][0]["context"]["cluster"] = "dead"
    broken["current-context"] = "dead"
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(yaml.safe_dump(broken))
    # A path list: the first file's current-context wins, the second supplies the good context.
    env = dict(kube_env, KUBECONFIG=f"{tmp_path / 'absent'}:{dead}:{good}")
    context = yaml.safe_load(good.read_text())["current-context"]
    ok = inspect(env, "--context", context)
    assert ok.returncode == 0, ok.stderr
    assert "gpu-node-000" in ok.stdout
    also_ok = inspect(dict(kube_env, KUBECONFIG=str(dead)), "--kubeconfig", str(good))
    assert also_ok.returncode == 0, also_ok.stderr
    bad_context = inspect(env, "--context", "nope")
    assert_one_line_error(bad_context, command.EXIT_USAGE, 'context "nope" not found')


def test_unreachable_server_fails_within_request_timeout(kube_env: dict[str, str], tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections but never answers
    port = listener.getsockname()[1]
    try:
        config = yaml.safe_load(Path(kube_env["KUBECONFIG"]).read_text())
        config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{port}"
        path = tmp_path / "silent"
        path.write_text(yaml.safe_dump(config))
        start = time.monotonic()
        result = inspect(dict(kube_env, KUBECONFIG=str(path)), "--request-timeout", "1s")
        elapsed = time.monotonic() - start
    finally:
        listener.close()
    assert_one_line_error(result, command.EXIT_UNREACHABLE, "Failed due to")
    assert elapsed < 8


def test_unauthorized_and_forbidden_name_the_problem(tmp_path: Path, kube_env: dict[str, str]) -> None:
    with Sandbox(port=0, auth=True) as secured:
        secured.load(generate_cluster(nodes=1, gpus_per_node=1, pods=1))
        anonymous = secured.write_kubeconfig(tmp_path / "anon", token="not-a-token")
        result = inspect(dict(kube_env, KUBECONFIG=str(anonymous)))
        assert_one_line_error(result, command.EXIT_AUTH, "Failed due to", "401")
        admin = secured.write_kubeconfig(tmp_path / "admin")
        secured.inject(method="GET", path=r"^/api/v1/pods", status=403)
        forbidden = inspect(dict(kube_env, KUBECONFIG=str(admin)))
        assert_one_line_error(forbidden, command.EXIT_AUTH, "Failed due to", "list pods in all namespaces")


def test_server_errors_are_retried_then_reported(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load(generate_cluster(nodes=1, gpus_per_node=1, pods=1))
    flaky = sandbox.inject(method="GET", path=r"^/api/v1/pods", status=503, times=1)
    assert inspect(kube_env).returncode == 0
    assert flaky.hits == 1
    sandbox.inject(method="GET", path=r"^/api/v1/nodes", status=500)
    result = inspect(kube_env, "--request-timeout", "5s")
    assert_one_line_error(result, command.EXIT_API, "Failed due to")


def test_exec_credential_plugin_and_token_file_authenticate(tmp_path: Path, kube_env: dict[str, str]) -> None:
    with Sandbox(port=0, auth=True) as secured:
        secured.load(generate_cluster(nodes=1, gpus_per_node=1, pods=1))
        config = yaml.safe_load(secured.write_kubeconfig(tmp_path / "admin").read_text())
        plugin = tmp_path / "get-token"
        plugin.write_text(
            "#!/bin/sh\n"
            'echo \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",'
            f' "status": {{"token": "{secured.ADMIN_TOKEN}"}}}}\'\n'
        )
        plugin.chmod(0o755)
        config["users"][0]["user"] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": str(plugin),
                "interactiveMode": "Never",
            }
        }
        exec_config = tmp_path / "exec-kubeconfig"
        exec_config.write_text(yaml.safe_dump(config))
        result = inspect(dict(kube_env, KUBECONFIG=str(exec_config)))
        assert result.returncode == 0, result.stderr
        assert "gpu-node-000" in result.stdout
        token_file = tmp_path / "token"
        token_file.write_text(secured.ADMIN_TOKEN)
        config["users"][0]["user"] = {"tokenFile": str(token_file)}
        file_config = tmp_path / "file-kubeconfig"
        file_config.write_text(yaml.safe_dump(config))
        assert inspect(dict(kube_env, KUBECONFIG=str(file_config))).returncode == 0


@pytest.mark.parametrize(
    ("selector", "gpu_nodes"),
    [
        ("kubernetes.io/hostname in (gpu-node-000,gpu-node-002)", ["gpu-node-000", "gpu-node-002"]),
        ("kubernetes.io/hostname notin (gpu-node-000),!no-such-label", ["gpu-node-001", "gpu-node-002"]),
    ],
)
def test_selector_means_the_same_live_and_from_file(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path, selector: str, gpu_nodes: list[str]
) -> None:
    sandbox.load(generate_cluster(nodes=3, gpus_per_node=1, pods=6, seed=5))
    dump = subprocess.run(
        ["kubectl", "get", "nodes,pods", "-A", "-o", "json"], env=kube_env, capture_output=True, text=True, timeout=60
    )
    assert dump.returncode == 0, dump.stderr
    (tmp_path / "c.json").write_text(dump.stdout)
    live = inspect(kube_env, "-o", "json", "-l", selector)
    offline = inspect(kube_env, "-o", "json", "-l", selector, "--from-file", str(tmp_path / "c.json"))
    assert live.returncode == offline.returncode == 0, live.stderr + offline.stderr
    assert live.stdout == offline.stdout
    assert [n["name"] for n in yaml.safe_load(live.stdout)["nodes"]] == gpu_nodes


def test_malformed_selector_is_one_usage_error_live_and_offline_before_any_request(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    sandbox.load(generate_cluster(nodes=1, gpus_per_node=1, pods=0))
    (tmp_path / "c.json").write_text('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}}]}')
    sandbox.clear_requests()
    live = inspect(kube_env, "-l", "-bad=x")
    offline = inspect(kube_env, "-l", "-bad=x", "--from-file", str(tmp_path / "c.json"))
    assert_one_line_error(
        live, command.EXIT_USAGE, "error: --selector", '<nil>: Invalid value: "-bad": name part must consist')
    assert live.stderr == offline.stderr
    assert sandbox.requests == []


def test_group_by_namespace_live_equals_from_file(sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path) -> None:
    sandbox.load(generate_cluster(nodes=4, gpus_per_node=2, pods=40, seed=9))
    dump = subprocess.run(
        ["kubectl", "get", "nodes,pods", "-A", "-o", "json"], env=kube_env, capture_output=True, text=True, timeout=60
    )
    (tmp_path / "c.json").write_text(dump.stdout)
    for args in (["--group-by", "namespace"], ["--group-by", "namespace", "-o", "json"], ["-n", "default", "-d"]):
        live = inspect(kube_env, *args)
        offline = inspect(kube_env, *args, "--from-file", str(tmp_path / "c.json"))
        assert live.returncode == 0 and live.stdout == offline.stdout and live.stdout, live.stderr


def test_unhealthy_gpus_are_read_only_by_the_views_that_mark_them(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    from kubectl_gpushare.sandbox.builders import node_object, unhealthy_configmap

    sandbox.load([node_object("n", [16, 16], ip="10.0.0.1"), unhealthy_configmap("n", [0])])
    sandbox.clear_requests()
    report = yaml.safe_load(inspect(kube_env, "-o", "json").stdout)
    assert [gpu.get("healthy", True) for gpu in report["nodes"][0]["gpus"]] == [False, True]
    assert [r.namespace for r in sandbox.requests if r.resource == "configmaps"] == ["kube-system"]
    sandbox.clear_requests()
    assert inspect(kube_env).returncode == 0
    assert not [r for r in sandbox.requests if r.resource == "configmaps"]


def test_quota_column_live_equals_from_kubectls_dump(
    sandbox: Sandbox, kube_env: dict[str, str], tmp_path: Path
) -> None:
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    quota = {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "ml"},
        "status": {"hard": {"requests.aliyun.com/gpu-mem": "20"}, "used": {"requests.aliyun.com/gpu-mem": "4"}},
    }
    sandbox.load([node_object("n", [16], ip="10.0.0.1"), pod_object("p", "ml", [4], node="n", gpu=0), quota])
    dump = subprocess.run(["kubectl", "get", "nodes,pods,quota", "-A", "-o", "json"], env=kube_env,
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    (tmp_path / "c.json").write_text(dump.stdout)
    live = inspect(kube_env, "--group-by", "namespace")
    offline = inspect(kube_env, "--group-by", "namespace", "--from-file", str(tmp_path / "c.json"))
    assert live.returncode == 0, live.stderr
    assert live.stdout == offline.stdout and "4/20" in live.stdout.splitlines()[1]
