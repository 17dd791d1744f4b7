"""Sandbox manners through the real kubectl: pod ranges and addresses, ``kubectl logs``, a kubeconfig in use."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.command import served_elsewhere
from kubectl_gpushare.sandbox.server import Sandbox
from kubectl_gpushare.sandbox.spec import generate_cluster

pytestmark = pytest.mark.integration
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def _node(name: str, cidr: str | None = None) -> dict[str, object]:
    spec = {"podCIDR": cidr, "podCIDRs": [cidr]} if cidr else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}


def test_created_nodes_get_distinct_pod_ranges_and_keep_their_own(kubectl: Kubectl) -> None:
    items = [_node("a"), _node("b", "10.64.1.0/24"), _node("c"), _node("d")]
    kubectl("create", "-f", "-", input="\n".join(json.dumps(i) for i in items))
    out = kubectl("get", "nodes", "-o", 'jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDR} '
                  '{.spec.podCIDRs[0]}{"\\n"}{end}').stdout
    ranges = {name: (cidr, first) for name, cidr, first in (line.split() for line in out.splitlines())}
    assert ranges == {"a": ("10.64.0.0/24",) * 2, "b": ("10.64.1.0/24",) * 2, "c": ("10.64.2.0/24",) * 2,
                      "d": ("10.64.3.0/24",) * 2}


def test_seeded_pods_show_distinct_addresses_inside_their_nodes_range(sandbox: Sandbox, kubectl: Kubectl) -> None:
    sandbox.load(generate_cluster(20, 4, 200, seed=1))
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    cidr = {n["metadata"]["name"]: ipaddress.ip_network(n["spec"]["podCIDR"]) for n in nodes}
    assert len(set(cidr.values())) == 20
    out = kubectl("get", "pods", "-A", "--field-selector=status.phase=Running", "-o", "wide",
                  "--no-headers").stdout.splitlines()
    rows = [line.split() for line in out]
    assert len(rows) > 100
    ips = [row[6] for row in rows]  # NAMESPACE NAME READY STATUS RESTARTS AGE IP NODE ...
    assert len(set(ips)) == len(ips)
    assert all(ipaddress.ip_address(row[6]) in cidr[row[7]] for row in rows)


@pytest.fixture
def log_pods(sandbox: Sandbox) -> Sandbox:
    sandbox.load([
        node_object("n1", [16], ip="10.0.0.1"),
        pod_object("two", "default", [2, 3], node="n1", gpu=0, uid="uid-two"),
        pod_object("one", "default", [1], node="n1", gpu=0, uid="uid-one"),
        pod_object("waiting", "default", [1]),
        pod_object("admitting", "default", [1], node="n1", phase="Pending"),
    ])
    for i in range(5):
        sandbox.logs.write("uid-one", "main", f"line {i}")
    return sandbox


def test_kubectl_logs_prints_the_fake_containers_lines(log_pods: Sandbox, kubectl: Kubectl) -> None:
    assert kubectl("logs", "one").stdout == "".join(f"line {i}\n" for i in range(5))
    assert kubectl("logs", "one", "--tail=2").stdout == "line 3\nline 4\n"
    assert kubectl("logs", "one", "--tail=0").stdout == ""
    assert kubectl("logs", "one", "--limit-bytes=8").stdout == "line 0\nl"
    stamped = kubectl("logs", "one", "--timestamps", "--tail=1").stdout
    assert stamped.endswith("Z line 4\n") and stamped[:4].isdigit()
    assert kubectl("logs", "-f", "one", timeout=30).stdout.endswith("line 4\n")  # what exists, then it closes
    # A seeded pod nothing wrote for: the one line its fake container prints; kubectl picks the first container.
    result = kubectl("logs", "two")
    assert result.stdout == "started container main (image nvcr.io/nvidia/cuda:12.4.1-base) on node n1\n"
    assert 'Defaulted container "main" out of: main, sidecar-1' in result.stderr
    assert "sidecar-1" in kubectl("logs", "two", "-c", "sidecar-1").stdout


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["nosuch"], 'error: error from server (NotFound): pods "nosuch" not found in namespace "default"'),
        (["one", "-c", "nosuch"], "error: container nosuch is not valid for pod one"),  # kubectl checks first
        (["one", "--previous"],
         'Error from server (BadRequest): previous terminated container "main" in pod "one" not found'),
        (["waiting"], "Error from server (BadRequest): pod waiting does not have a host assigned"),
        (["admitting"],
         'Error from server (BadRequest): container "main" in pod "admitting" is waiting to start: ContainerCreating'),
    ],
)
def test_kubectl_logs_errors_are_kube_apiservers(log_pods: Sandbox, kubectl: Kubectl, args: list[str],
                                                 error: str) -> None:
    result = kubectl("logs", *args, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == error


def test_the_log_endpoint_refuses_bad_parameters_and_names_every_container(log_pods: Sandbox) -> None:
    import urllib.error
    import urllib.request

    def get(query: str) -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"{log_pods.url}/api/v1/namespaces/default/pods/{query}", timeout=10) as r:
                return r.status, {}
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    # Convert_Slice_string_To_Pointer_int64 (k8s.io/apimachinery/pkg/runtime/conversion.go): strconv.ParseInt's
    # own error, whole text quoted; its range error for what overflows before a stray byte (atoi.go ParseUint).
    for bad, quoted, why in [("x", "x", "invalid syntax"), ("%C2%B2", "²", "invalid syntax"),
                             ("--5", "--5", "invalid syntax"), ("", "", "invalid syntax"),
                             ("9" * 5000, "9" * 5000, "value out of range"),
                             ("9223372036854775808", "9223372036854775808", "value out of range"),
                             ("99999999999999999999x", "99999999999999999999x", "value out of range"),
                             ("%FF", "\\xff", "invalid syntax")]:  # fmt: skip
        code, body = get(f"one/log?tailLines={bad}")
        assert (code, body["reason"]) == (400, "BadRequest"), body
        assert body["message"] == f'strconv.ParseInt: parsing "{quoted}": {why}', body["message"][:200]
    # The conversion stops at its first error, in field order (sinceSeconds before tailLines), before the pod is read.
    code, body = get("nosuch/log?tailLines=x&sinceSeconds=y")
    assert (code, body["message"]) == (400, 'strconv.ParseInt: parsing "y": invalid syntax'), body
    code, body = get("nosuch/log?tailLines=-1&limitBytes=0&sinceSeconds=0")  # ValidatePodLogOptions: one 422
    assert (code, body["reason"]) == (422, "Invalid"), body
    assert body["message"] == ('PodLogOptions "nosuch" is invalid: [tailLines: Invalid value: -1: must be greater '
                               "than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0, "
                               "sinceSeconds: Invalid value: 0: must be greater than 0]")  # fmt: skip
    code, body = get("two/log")
    assert code == 400
    assert body["message"] == "a container name must be specified for pod two, choose one of: [main sidecar-1]"
    # Convert_Slice_string_To_bool refuses nothing: "0" or "false" in any case is false, anything else true.
    for flag in ("maybe", "", "1", "T"):
        code, body = get(f"one/log?previous={flag}")
        assert (code, body["message"]) == (400, 'previous terminated container "main" in pod "one" not found'), flag
    for flag in ("0", "FaLsE"):
        assert get(f"one/log?previous={flag}&timestamps=0")[0] == 200, flag
    assert get("one/log?follow=maybe&timestamps=x&insecureSkipTLSVerifyBackend=y")[0] == 200
    code, body = get("one/log?container=nosuch")  # what kube-apiserver answers a client that does not check
    assert code == 400 and body["message"] == "container nosuch is not valid for pod one"
    assert get("nosuch/log")[1]["message"] == 'pods "nosuch" not found'


def _log(sandbox: Sandbox, query: str) -> tuple[int, Any]:
    """GET a pod log over HTTP: the status and the text, or the decoded Status of an error."""
    try:
        with urllib.request.urlopen(f"{sandbox.url}/api/v1/namespaces/default/pods/{query}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_since_time_is_read_and_checked_against_since_seconds(log_pods: Sandbox, kubectl: Kubectl) -> None:
    # metav1.Convert_Slice_string_To_Pointer_v1_Time -> Time.UnmarshalQueryParameter: time.Parse(time.RFC3339),
    # its error a 400 in its own words; "" and "null" are the zero time, still set.
    for bad, error in [
        ("x", 'parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"'),
        ("2024-01-01T00:00:00", 'parsing time "2024-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" '
                                'as "Z07:00"'),
        ("2024-02-30T00:00:00Z", 'parsing time "2024-02-30T00:00:00Z": day out of range'),
        ("2024-01-01T00:00:00Zjunk", 'parsing time "2024-01-01T00:00:00Zjunk": extra text: "junk"'),
        ("%C3%A9", 'parsing time "\\xc3\\xa9" as "2006-01-02T15:04:05Z07:00": cannot parse "\\xc3\\xa9" as "2006"'),
    ]:  # fmt: skip
        code, body = _log(log_pods, f"one/log?sinceTime={bad}")
        assert (code, body["reason"], body["message"]) == (400, "BadRequest", error), body
    # Conversion order: sinceSeconds, sinceTime, then tailLines; each stops at its first error, before the pod.
    first = _log(log_pods, "nosuch/log?sinceSeconds=y&sinceTime=x")[1]["message"]
    assert first.startswith('strconv.ParseInt: parsing "y"')
    assert _log(log_pods, "nosuch/log?sinceTime=x&tailLines=z")[1]["message"].startswith('parsing time "x"')
    # ValidatePodLogOptions (pkg/apis/core/validation): both set is Forbidden at field.NewPath(""), and
    # then sinceSeconds' own range is not checked.
    for query in ("sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z", "sinceSeconds=0&sinceTime=",
                  "sinceTime=null&sinceSeconds=1"):
        code, body = _log(log_pods, f"nosuch/log?{query}")
        assert (code, body["reason"]) == (422, "Invalid"), body
        assert body["message"] == ('PodLogOptions "nosuch" is invalid: : Forbidden: at most one of `sinceTime` or '
                                   "`sinceSeconds` may be specified")  # fmt: skip
        assert body["details"]["causes"] == [{"reason": "FieldValueForbidden", "message": "Forbidden: at most one "
                                              "of `sinceTime` or `sinceSeconds` may be specified"}]  # fmt: skip
    # The kubelet leaves out lines older than since (logWriter.write: timestamp.Before(since)), after the tail;
    # it gets sinceTime in whole seconds (LogLocation formats it with time.RFC3339), so a line in that second stays.
    stamps = [line.split(" ", 1)[0] for line in _log(log_pods, "one/log?timestamps=true")[1].splitlines()]

    def kept(since: int, lines: range = range(5)) -> str:  # the lines not older than stamps[since]'s whole second
        return "".join(f"line {i}\n" for i in lines if stamps[i][:19] >= stamps[since][:19])

    assert _log(log_pods, f"one/log?sinceTime={stamps[3]}")[1] == kept(3)
    assert _log(log_pods, f"one/log?sinceTime={stamps[3][:19]}.999999999Z")[1] == kept(3)
    assert _log(log_pods, f"one/log?sinceTime={stamps[1]}&tailLines=3")[1] == kept(1, range(2, 5))
    assert _log(log_pods, "one/log?sinceTime=")[1] == _log(log_pods, "one/log?sinceTime=null")[1] == "".join(
        f"line {i}\n" for i in range(5))
    # Through the real kubectl (--since-time goes as sinceTime, --since as sinceSeconds; kubectl refuses both).
    every = "".join(f"line {i}\n" for i in range(5))
    assert kubectl("logs", "one", "--since-time=2000-01-01T00:00:00Z").stdout == every
    assert kubectl("logs", "one", "--since-time=2999-01-01T00:00:00Z").stdout == ""
    assert kubectl("logs", "one", "--since=1h").stdout.endswith("line 4\n")
    assert kubectl("logs", "two", "--since-time=2999-01-01T00:00:00Z").stdout == ""  # its one line is older


def test_a_new_pod_under_an_old_name_starts_with_an_empty_log(sandbox: Sandbox) -> None:
    sandbox.logs.write("old", "main", "from before")
    assert sandbox.logs.lines("new", "main") is None
    sandbox.logs.forget("old")
    assert sandbox.logs.lines("old", "main") is None


def test_a_second_sandbox_refuses_the_kubeconfig_a_running_one_serves(kubeconfig: Path, sandbox: Sandbox,
                                                                      tmp_path: Path) -> None:
    before = kubeconfig.read_bytes()
    script = Path(sys.executable).parent / "kubectl-gpushare"
    result = subprocess.run([str(script), "sandbox", "--kubeconfig", str(kubeconfig)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--kubeconfig" in lines[0] and sandbox.url in lines[0], result.stderr
    assert kubeconfig.read_bytes() == before


def test_only_a_live_loopback_server_counts_as_in_use(kubeconfig: Path, sandbox: Sandbox, tmp_path: Path) -> None:
    assert served_elsewhere(kubeconfig) == sandbox.url
    stale = tmp_path / "stale"
    stale.write_text(kubeconfig.read_text().replace(f":{sandbox.port}", ":1"))
    assert served_elsewhere(stale) is None
    remote = tmp_path / "remote"
    remote.write_text(kubeconfig.read_text().replace("127.0.0.1", "192.0.2.1"))  # never probed
    assert served_elsewhere(remote) is None
    for junk in (b"\xff\xfe", b"clusters: 5", b"[[[[", b"clusters: [{cluster: {server: 'http://[::1'}}]",
                 b"clusters: !!int", b"clusters: !!bool x", b"clusters: !!timestamp 2024-13-01"):
        (tmp_path / "junk").write_bytes(junk)
        assert served_elsewhere(tmp_path / "junk") is None
    assert served_elsewhere(tmp_path / "absent") is None
