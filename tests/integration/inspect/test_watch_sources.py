"""``inspect -w`` reads what a one-shot inspect reads: every frame is its output for the same state, byte for byte.

The other sharing stacks (HAMi, KAI, NVIDIA, ...), our DRA driver's slices and claims, NVIDIA's DRA
driver, the unhealthy-GPU ConfigMaps (``-o wide``): a change to any of them redraws, and a cluster
without ``resource.k8s.io/v1`` (404) or a user who may not list it (403) is watched as one-shot
reads it. The watch runs piped (a new table per change), against the sandbox, with the real kubectl.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from golden.inspect import cases
from kubectl_steps import interruptible

from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration
DRA_PATHS = r"^/apis/resource\.k8s\.io/"
VIEWS = {"summary.txt": [], "details.txt": ["-d"], "wide.txt": ["-o", "wide"]}
"""The views -w draws (the machine formats are refused)."""


class Watching:
    """A running ``kubectl-inspect-gpushare -w``, its stdout read as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.seen = ""

    def read_until(self, done: Callable[[str], bool], what: str, timeout: float = 45) -> str:
        """Read stdout until ``done(all output so far)`` holds (a condition, not a sleep)."""
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        while not done(self.seen):
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out waiting for {what}; got {self.seen!r}"
            if select.select([stdout], [], [], remaining)[0]:
                chunk = os.read(stdout.fileno(), 65536).decode()
                assert chunk, f"stdout closed before {what}; got {self.seen!r}; {self.ended()}"
                self.seen += chunk
        return self.seen

    def ended(self) -> str:
        """How the process ended (its exit code and stderr), for a failure's message."""
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "the process is still running"
        return f"exit code {code}, stderr {self.process.stderr.read() if self.process.stderr else ''!r}"

    def first_frame(self, expected: str) -> None:
        """The first table is ``expected``, whole."""
        self.read_until(lambda seen: len(seen) >= len(expected), "the first frame")
        assert self.seen[:len(expected)] == expected

    def last_frame(self, expected: str) -> None:
        """Wait until the latest table is ``expected`` (a redraw after the first frame)."""
        self.read_until(lambda seen: seen.endswith("\n" + expected), f"a frame equal to {expected!r}")

    def says_nothing_for(self, seconds: float) -> None:
        """No more output for ``seconds`` (select's timeout bounds the wait; output ends it early)."""
        stdout = self.process.stdout
        assert stdout is not None
        ready = select.select([stdout], [], [], seconds)[0]
        assert not ready, f"unexpected output: {os.read(stdout.fileno(), 65536).decode()!r}"

    def stop(self) -> str:
        """Ctrl-C; returns what stderr said before the interrupt."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=10)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        assert code == 130 and stderr.endswith("interrupted\n"), (code, stderr)
        return stderr.removesuffix("interrupted\n")


@contextmanager
def watching(env: dict[str, str], *flags: str) -> Iterator[Watching]:
    process = interruptible(
        ["kubectl-inspect-gpushare", "-w", *flags], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Watching(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def one_shot(env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kubectl-inspect-gpushare", *flags], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.parametrize("case", ["mixed-dra", "mixed-stacks", "kai", "koordinator", "volcano", "hami-v28"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_the_first_frame_is_the_one_shot_view(
    case: str, view: str, sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    """DRA GPUs and claims (ours and NVIDIA's), HAMi, KAI and the other stacks, unhealthy GPUs in -o wide."""
    sandbox.load(cases.cluster_objects(case))
    expected = cases.expected(case, view).read_text()
    shown = one_shot(kube_env, *VIEWS[view])
    assert shown.stdout == expected
    with watching(kube_env, *VIEWS[view]) as watch:
        watch.first_frame(expected)
        if view == "summary.txt":
            watch.says_nothing_for(2.0)  # the first lists (of every kind) draw once, not once more per kind
        assert watch.stop() == shown.stderr, "the same warnings, once"


@pytest.mark.parametrize(("case", "namespace", "pod"), [
    ("mixed-stacks", "default", "hami-a-train"),  # a HAMi pod: its vGPU claim goes
    ("kai", "default", "two-halves"),  # a KAI pod: its reservation's GPU is shared by one pod less
])
def test_a_pod_of_another_stack_going_redraws_the_one_shot_view(
    case: str, namespace: str, pod: str, sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    sandbox.load(cases.cluster_objects(case))
    before = cases.expected(case, "details.txt").read_text()
    with watching(kube_env, "-d") as watch:
        watch.first_frame(before)
        kubectl("delete", "pod", pod, "-n", namespace)
        after = one_shot(kube_env, "-d").stdout
        assert after != before
        watch.last_frame(after)
        assert watch.stop() == ""


def claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu-mem.kubectl-gpushare.io", "capacity": {"requests": {"memory": "4Gi"}}}}]}}}


def allocation(device: str) -> dict[str, Any]:
    """The status the scheduler writes: 4 GiB of ``device`` on dra-a, reserved for no pod yet."""
    return {"status": {"allocation": {"devices": {"results": [{
        "request": "gpu", "driver": "gpu-mem.kubectl-gpushare.io", "pool": "dra-a", "device": device,
        "shareID": "00000000-0000-4000-8000-000000000042", "consumedCapacity": {"memory": "4Gi"}}]}}}}


@pytest.mark.parametrize("view", ["summary.txt", "details.txt"])
def test_a_claim_allocated_then_deleted_redraws_the_one_shot_view(
    view: str, sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    sandbox.load(cases.cluster_objects("mixed-dra"))
    flags = VIEWS[view]
    before = cases.expected("mixed-dra", view).read_text()
    with watching(kube_env, *flags) as watch:
        watch.first_frame(before)
        sandbox.clear_requests()
        kubectl("apply", "-f", "-", input=json.dumps(claim("extra")))
        kubectl("patch", "resourceclaim", "extra", "--subresource=status", "--type=merge",
                "-p", json.dumps(allocation("gpu-2")))
        allocated = one_shot(kube_env, *flags).stdout
        assert allocated != before
        if view == "summary.txt":
            assert "dra-a       10.0.6.1   10/16                  3/16                   4/16" in allocated
            assert "1557/24654 (6%)" in allocated
        else:
            assert "extra          default    0                0                4" in allocated
        watch.last_frame(allocated)
        lists = [r.resource for r in sandbox.requests if r.verb == "list"]
        assert lists.count("resourceclaims") == 1, "the one-shot inspect's: the watch follows claims over a watch"
        kubectl("delete", "resourceclaim", "extra")
        watch.last_frame(before)
        assert watch.stop() == ""


def test_a_cluster_without_dra_is_watched_without_it(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    """404 on the first slice list: no claims asked for, nothing said, and nothing more asked of the group."""
    sandbox.load(cases.cluster_objects("mixed-stacks"))
    sandbox.inject(method="GET", path=DRA_PATHS, status=404)
    expected = cases.expected("mixed-stacks", "summary.txt").read_text()
    sandbox.clear_requests()
    with watching(kube_env) as watch:
        watch.first_frame(expected)
        pod = pod_object("job", "default", [3], node="share-node", gpu=0, gpu_memory=15)
        kubectl("apply", "-f", "-", input=json.dumps(pod))
        watch.last_frame(one_shot(kube_env).stdout)
        assert "7/30" in watch.seen
        assert watch.stop() == ""
    dra = [(r.verb, r.resource, r.status) for r in sandbox.requests if r.group == "resource.k8s.io"]
    assert dra == [("list", "resourceslices", 404)] * 2, "one for the watch, one for the one-shot inspect"


def test_forbidden_slices_are_one_warning_line_for_the_whole_watch(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    sandbox.load(cases.cluster_objects("mixed-dra"))
    warning = "warning: cannot list resourceslices.resource.k8s.io: GPUs shared through DRA are not shown\n"
    sandbox.inject(method="GET", path=r"^/apis/resource\.k8s\.io/v1/resourceslices", status=403, times=1)
    shown = one_shot(kube_env)
    assert shown.stderr == warning and "dra-a" not in shown.stdout
    sandbox.inject(method="GET", path=r"^/apis/resource\.k8s\.io/v1/resourceslices", status=403, times=1)
    with watching(kube_env) as watch:
        watch.first_frame(shown.stdout)
        kubectl("label", "node", "share-node", "team=a")  # a change: a second frame, and no second warning
        watch.read_until(lambda seen: seen.count("Allocated/Total GPU Memory In Cluster") >= 2, "a second frame")
        assert watch.stop() == warning


def test_an_undecodable_pod_is_one_warning_line_as_one_shot_says_it(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    node = node_object("n1", [16], ip="10.0.0.1")
    garbage = pod_object("garbage", "default", [2], node="n1", gpu=0, gpu_memory=16)
    garbage["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] = {"not": "a string"}
    sandbox.load([node, garbage, pod_object("fine", "default", [3], node="n1", gpu=0, gpu_memory=16)])
    shown = one_shot(kube_env, "-d")
    assert "default/garbage" in shown.stderr and "garbage" not in shown.stdout
    with watching(kube_env, "-d") as watch:
        watch.first_frame(shown.stdout)
        kubectl("apply", "-f", "-", input=json.dumps(pod_object("more", "default", [1], node="n1", gpu=0,
                                                                   gpu_memory=16)))
        watch.last_frame(one_shot(kube_env, "-d").stdout)
        assert watch.stop() == shown.stderr, "said once, not once per frame"


def test_group_by_namespace_follows_quotas_as_one_shot_reads_them(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    quota = {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "ml"},
        "status": {"hard": {"requests.aliyun.com/gpu-mem": "20"}, "used": {"requests.aliyun.com/gpu-mem": "4"}},
    }
    sandbox.load([node_object("n", [16], ip="10.0.0.1"), pod_object("p", "ml", [4], node="n", gpu=0), quota])
    shown = one_shot(kube_env, "--group-by", "namespace")
    assert "4/20" in shown.stdout
    with watching(kube_env, "--group-by", "namespace") as watch:
        watch.first_frame(shown.stdout)
        kubectl("apply", "-f", "-", input=json.dumps(pod_object("q", "ml", [2], node="n", gpu=0)))
        watch.last_frame(one_shot(kube_env, "--group-by", "namespace").stdout)
        assert watch.stop() == shown.stderr


def test_a_namespace_that_does_not_exist_fails_as_one_shot_does(sandbox: Sandbox, kube_env: dict[str, str]) -> None:
    sandbox.load([node_object("n", [16], ip="10.0.0.1")])
    once = subprocess.run(["kubectl-inspect-gpushare", "-n", "nowhere"], env=kube_env, capture_output=True,
                          text=True, timeout=60)
    watched = subprocess.run(["kubectl-inspect-gpushare", "-w", "-n", "nowhere"], env=kube_env, capture_output=True,
                             text=True, timeout=60)
    assert once.returncode == watched.returncode != 0
    assert once.stderr == watched.stderr and 'namespaces "nowhere" not found' in watched.stderr


def test_wide_follows_the_unhealthy_gpu_configmaps(
    sandbox: Sandbox, kube_env: dict[str, str], kubectl: Callable[..., Any]
) -> None:
    sandbox.load([node_object("n", [16, 16], ip="10.0.0.1"), node_object("m", [16, 16], ip="10.0.0.2"),
                  unhealthy_configmap("n", [0])])
    shown = one_shot(kube_env, "-o", "wide")
    assert "0/16!" in shown.stdout.splitlines()[2], "n's GPU 0 is marked"
    sandbox.clear_requests()
    with watching(kube_env, "-o", "wide") as watch:
        watch.first_frame(shown.stdout)
        kubectl("apply", "-f", "-", input=json.dumps(unhealthy_configmap("m", [1])))
        marked = one_shot(kube_env, "-o", "wide").stdout
        assert "0/16!" in marked.splitlines()[1], "m's GPU 1 is marked too"
        watch.last_frame(marked)
        assert watch.stop() == ""
    lists = [(r.resource, r.namespace) for r in sandbox.requests if r.verb in ("list", "watch")]
    assert lists.count(("configmaps", "kube-system")) >= 2 and ("configmaps", "") not in lists


def test_a_claim_with_a_mistyped_field_is_read_by_the_watch_as_one_shot_reads_it(
    sandbox: Sandbox, kube_env: dict[str, str]
) -> None:
    """One-shot counts allocated claims from their JSON (`dra_objects.tally_claim`), -w from its informer's
    decoded claims: a claim either refuses (a finalizer that is not a string) is skipped by both, with one warning
    said with the first frame (its informer is first listed while that frame is built). The words differ in case
    only: one-shot reads claims as a file does (``ResourceClaim ns/x``), -w as an API list (``resourceclaim ns/x``)."""
    objects = cases.cluster_objects("mixed-dra")
    odd = next(obj for obj in objects if obj["kind"] == "ResourceClaim" and obj.get("status", {}).get("allocation"))
    odd["metadata"]["finalizers"] = [1]
    sandbox.load(objects)
    shown = one_shot(kube_env, "-d")
    assert f"{odd['metadata']['namespace']}/{odd['metadata']['name']}" in shown.stderr
    assert shown.stdout != cases.expected("mixed-dra", "details.txt").read_text(), "its memory is not counted"
    with watching(kube_env, "-d") as watch:
        watch.first_frame(shown.stdout)
        assert watch.stop().lower() == shown.stderr.lower()
