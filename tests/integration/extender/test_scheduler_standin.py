"""The stack's scheduler stand-in asks the running extender about every pod kube-scheduler would.

kube-scheduler's ``HTTPExtender.IsInterested`` (pkg/scheduler/extender.go) calls an extender for a
pod when any container or init container *names* one of its managedResources in requests or
limits, whatever the amount; an extender with no managedResources is asked about every pod. A
stand-in that asked only when the amount was positive would bind a pod the real scheduler
leaves Pending with the extender's error.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_relay import relay
from scheduler_loop import scheduler_loop

from kubectl_gpushare import protocol
from kubectl_gpushare.cli import noderesources
from kubectl_gpushare.cli.scheduler import SchedulerLoop, extenders_from_config
from kubectl_gpushare.cli.stack import scheduler_config_text
from kubectl_gpushare.extender.schedsim import ExtenderCallError
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.config import load_config
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


@pytest.fixture
def loop(sandbox: Sandbox, kubeconfig: Path, extender_factory: Callable[..., Any]) -> Iterator[SchedulerLoop]:
    """A scheduler stand-in configured from the shipped configuration, pointed at a synced extender."""
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory()
    ext.wait_synced()
    with scheduler_loop(sandbox, kubeconfig, extenders_from_config(scheduler_config_text(), ext.url)) as standin:
        yield standin


def _schedule(sandbox: Sandbox, loop: SchedulerLoop, pod: dict[str, Any]) -> str:
    sandbox.load([pod])
    stored = sandbox.get("pods", "default", pod["metadata"]["name"])
    assert stored is not None
    return loop.schedule(stored, sandbox.objects("nodes"), noderesources.usage(sandbox.objects("pods")))


def _gpu_mem_in_init_container_only() -> dict[str, Any]:
    pod = pod_object("init-gpu", "default", [0])
    quantity = {protocol.RESOURCE_MEM: "4"}
    pod["spec"]["initContainers"] = [{"name": "warm-up", "image": "busybox",
                                      "resources": {"limits": dict(quantity), "requests": dict(quantity)}}]
    return pod


def _gpu_mem_of_zero() -> dict[str, Any]:
    pod = pod_object("zero-gpu", "default", [0])
    quantity = {protocol.RESOURCE_MEM: "0"}
    pod["spec"]["containers"][0]["resources"] = {"limits": dict(quantity), "requests": dict(quantity)}
    return pod


@pytest.mark.parametrize("make", [_gpu_mem_in_init_container_only, _gpu_mem_of_zero], ids=["init-container", "zero"])
def test_a_pod_naming_gpu_mem_goes_to_the_extender_whatever_the_amount(
    sandbox: Sandbox, loop: SchedulerLoop, make: Callable[[], dict[str, Any]]
) -> None:
    pod = make()
    with pytest.raises(ExtenderCallError, match=f"requests no {protocol.RESOURCE_MEM}"):
        _schedule(sandbox, loop, copy.deepcopy(pod))
    stored = sandbox.get("pods", "default", pod["metadata"]["name"])
    assert stored is not None and not stored["spec"].get("nodeName"), "bound without asking the extender"


def test_a_pod_without_gpu_mem_is_bound_by_the_scheduler_itself(sandbox: Sandbox, loop: SchedulerLoop) -> None:
    node = _schedule(sandbox, loop, pod_object("cpu-only", "default", [0]))
    stored = sandbox.get("pods", "default", "cpu-only")
    assert node == "gpu-1" and stored is not None and stored["spec"]["nodeName"] == "gpu-1"
    assert protocol.ANN_IDX not in (stored["metadata"].get("annotations") or {})


@pytest.mark.parametrize("bad_spec", [{"taints": "x"}, {"taints": [1]}], ids=["taints-string", "taint-number"])
def test_a_node_with_unreadable_taints_fails_alone_and_the_loop_binds_on_the_others(
    sandbox: Sandbox, kubeconfig: Path, bad_spec: dict[str, Any]
) -> None:
    # The API refuses such a node over HTTP (400, as kube-apiserver's typed decoding); seeded into
    # storage directly, it still drops out alone (one unreadable object never stops the loop).
    bad = node_object("gpu-0", [], ip="10.0.0.1")
    bad["spec"] = {**bad.get("spec", {}), **bad_spec}
    sandbox.load([bad, node_object("gpu-1", [], ip="10.0.0.2")])
    sandbox.load([pod_object("cpu-only", "default", [0])])
    with scheduler_loop(sandbox, kubeconfig) as standin:
        standin.run_once()
    stored = sandbox.get("pods", "default", "cpu-only")
    assert stored is not None and stored["spec"].get("nodeName") == "gpu-1"


@contextlib.contextmanager
def _garbling(sandbox: Sandbox, kubeconfig: Path, extender_factory: Callable[..., Any], verb: str,
              reply: bytes) -> Iterator[SchedulerLoop]:
    """The shipped configuration's stand-in, its extender behind a relay answering ``verb`` with ``reply`` once."""
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1")])
    ext = extender_factory()
    ext.wait_synced()
    garbled: list[str] = []

    def rewrite(method: str, path: str, body: bytes) -> bytes | None:
        if method != "POST" or not path.endswith(f"/{verb}") or garbled:
            return None
        garbled.append(path)
        return reply

    with relay(ext.running.port, rewrite) as port, scheduler_loop(sandbox, kubeconfig, extenders_from_config(
            scheduler_config_text(), f"http://127.0.0.1:{port}{ext.config.url_prefix}")) as standin:
        yield standin
    assert garbled, f"the extender's {verb} reply was never replaced"


@pytest.mark.parametrize("reply", [b'[{"Host": "gpu-1", "Score": 1e400}]', b'[{"Host": "gpu-1", "Score": 9.5}]',
                                   b'{"Host": "gpu-1", "Score": 9}', b'[{"Host": 1, "Score": 9}]', b"null"],
                         ids=["score-past-int64", "score-not-integer", "object-not-list", "host-not-string", "null"])
def test_a_prioritize_reply_that_does_not_decode_is_ignored_as_kube_scheduler_ignores_it(
        sandbox: Sandbox, kubeconfig: Path, extender_factory: Callable[..., Any], reply: bytes) -> None:
    # HTTPExtender.Prioritize returns json's decoding error; schedule_one.go's prioritizeNodes drops
    # any extender's prioritize error ("Prioritization errors from extender can be ignored").
    with _garbling(sandbox, kubeconfig, extender_factory, "prioritize", reply) as standin:
        assert _schedule(sandbox, standin, pod_object("p", "default", [4])) == "gpu-1"


@pytest.mark.parametrize(("verb", "reply"), [("filter", b"[]"), ("filter", b'{"NodeNames": "gpu-1"}'),
                                             ("filter", b'{"Error": 1}'), ("bind", b"[]"), ("bind", b'{"Error": 1}')],
                         ids=["filter-list", "filter-names-string", "filter-error-number", "bind-list",
                              "bind-error-number"])
def test_a_filter_or_bind_reply_that_does_not_decode_fails_the_cycle_with_the_decoding_error(
        sandbox: Sandbox, kubeconfig: Path, extender_factory: Callable[..., Any], verb: str, reply: bytes) -> None:
    # As HTTPExtender.send's json.NewDecoder(resp.Body).Decode(result) error, never a Python error of
    # the stand-in's own (before: "'list' object has no attribute 'get'").
    with _garbling(sandbox, kubeconfig, extender_factory, verb, reply) as standin, pytest.raises(
            ExtenderCallError, match=f"^{verb}: undecodable reply: "):
        _schedule(sandbox, standin, pod_object("p", "default", [4]))


@pytest.mark.parametrize("reply", [
    b'{"nodenames": ["gpu-1"], "error": null}', b'{"NodeNames": ["gpu-1"]}\n{"Error": 1}',
    b'{"NodeNames": ["gpu-1"], "FailedNodes": {"gpu-2": null}, "Error": "", "Error": null}',
    '{"NODENAMEſ": ["gpu-1"], "Kind": "ignored"}'.encode()],  # foldName: ToUpper(ToLower(ſ)) is S
                         ids=["keys-in-lower-case-and-null-error", "what-follows-the-first-value", "null-values",
                              "long-s-folds-to-s"])
def test_a_filter_reply_go_decodes_is_read_as_go_reads_it(sandbox: Sandbox, kubeconfig: Path,
                                                          extender_factory: Callable[..., Any], reply: bytes) -> None:
    # HTTPExtender.send's json.NewDecoder(resp.Body).Decode(result) (src/encoding/json): a key matches
    # its field case-insensitively (decode.go object, fold.go foldName), a null string is left "" (literalStore),
    # and Decode reads the first value only (stream.go readValue). Before: "undecodable reply", or no node passing.
    with _garbling(sandbox, kubeconfig, extender_factory, "filter", reply) as standin:
        assert _schedule(sandbox, standin, pod_object("p", "default", [4])) == "gpu-1"


@pytest.mark.parametrize(("reply", "error"), [(b'{"error": "no room on gpu-1"}', "no room on gpu-1"),
                                              (b'{"Error": "bad \xff byte"}', "bad \ufffd byte")],
                         ids=["error-in-lower-case", "error-not-utf-8"])
def test_a_bind_error_go_decodes_fails_the_cycle_with_its_text(sandbox: Sandbox, kubeconfig: Path,
                                                              extender_factory: Callable[..., Any], reply: bytes,
                                                              error: str) -> None:
    # kube-scheduler reads "error" as Error and a byte that is not UTF-8 as U+FFFD (decode.go unquoteBytes);
    # before, the stand-in took the first for a bind that succeeded, the second for a fault of its own.
    with _garbling(sandbox, kubeconfig, extender_factory, "bind", reply) as standin, pytest.raises(
            ExtenderCallError, match=f"^{error}$"):
        _schedule(sandbox, standin, pod_object("p", "default", [4]))


def test_a_null_bind_reply_is_a_bind_without_error(sandbox: Sandbox, kubeconfig: Path,
                                                    extender_factory: Callable[..., Any]) -> None:
    # Go's decoder leaves the result at its zero value for null: an empty Error, the bind succeeded.
    with _garbling(sandbox, kubeconfig, extender_factory, "bind", b"null") as standin:
        # before: SchedulingError "binding cycle failed: 'NoneType' object has no attribute 'get'"
        assert _schedule(sandbox, standin, pod_object("p", "default", [4])) == "gpu-1"
    stored = sandbox.get("pods", "default", "p")
    assert stored is not None and stored["spec"].get("nodeName") == "gpu-1"


def _scheduled_condition(sandbox: Sandbox, name: str) -> dict[str, Any]:
    stored = sandbox.get("pods", "default", name) or {}
    return next((c for c in (stored.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"),
                {})


def test_a_failed_binding_is_a_scheduler_error_and_no_fit_is_unschedulable(
        sandbox: Sandbox, kubeconfig: Path) -> None:
    # handleSchedulingFailure (pkg/scheduler/schedule_one.go): reason SchedulerError unless the status
    # IsRejected(); a FitError is a rejection, the DefaultBinder's error (AsStatus(err)) is not.
    sandbox.load([node_object("gpu-1", [16], ip="10.0.0.1"), pod_object("cpu-only", "default", [0])])
    hog = pod_object("hog", "default", [0])
    hog["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1000"}}
    sandbox.load([hog])
    refused = sandbox.inject("POST", r"/pods/cpu-only/binding", status=403)
    api = Client(load_config(str(kubeconfig)), component="test-scheduler", retry=None)
    try:
        SchedulerLoop(sandbox, api, []).run_once()
    finally:
        api.close()
    assert refused.hits == 1
    failed = _scheduled_condition(sandbox, "cpu-only")
    assert (failed.get("status"), failed.get("reason")) == ("False", "SchedulerError"), failed
    assert failed["message"].startswith("binding rejected: "), failed
    assert _scheduled_condition(sandbox, "hog").get("reason") == "Unschedulable"


def test_an_extender_bind_error_is_a_scheduler_error(
        sandbox: Sandbox, kubeconfig: Path, extender_factory: Callable[..., Any]) -> None:
    # The extender's Bind error becomes the bind plugin's status (AsStatus), not a rejection.
    with _garbling(sandbox, kubeconfig, extender_factory, "bind", b'{"Error": "no GPU for you"}') as standin:
        sandbox.load([pod_object("p", "default", [4])])
        standin.run_once()
    failed = _scheduled_condition(sandbox, "p")
    assert (failed.get("reason"), failed.get("message")) == ("SchedulerError", "no GPU for you"), failed
