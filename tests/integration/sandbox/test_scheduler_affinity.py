"""The scheduler stand-in's NodeAffinity filter against the sandbox: required node affinity, by `node_affinity`.

kube-scheduler's NodeAffinity plugin (pkg/scheduler/framework/plugins/nodeaffinity) rejects a node
the pod's ``nodeSelector`` or required affinity does not match with ``ErrReasonPod``; its PreFilter
narrows the nodes to those a ``metadata.name In`` names in every term, and rejects the pod
outright when no name survives. A term that does not parse matches nothing
(``NewLazyErrorNodeSelector``). The stand-in must bind a pinned pod only where upstream would,
else tests on it pass over real bugs.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.cli.scheduler import AFFINITY_OVER_BUDGET, SchedulerLoop
from kubectl_gpushare.node_affinity import MAX_POD_VALUES
from kubectl_gpushare.sandbox.builders import node_object, pod_object
from kubectl_gpushare.sandbox.server import Sandbox
from tests.scheduler_loop import scheduler_loop
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
Kubectl = Callable[..., subprocess.CompletedProcess[str]]
REASON = "node(s) didn't match Pod's node affinity/selector"
NONE_FITS = f"0/3 nodes are available: 1 node(s) had untolerated taint {{dedicated: c}}, 2 {REASON}."
"""A pod without a toleration that no rack matches: n-c fails TaintToleration first, the others NodeAffinity."""


def required(terms: object) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


@pytest.fixture
def racks(sandbox: Sandbox, kubeconfig: Path) -> Iterator[SchedulerLoop]:
    """Three Ready nodes on racks a, b, c (n-c also tainted), and a scheduler stand-in driven by `run_once`."""
    taint = {"key": "dedicated", "value": "c", "effect": "NoSchedule"}
    sandbox.load([node_object(f"n-{rack}", [], ip=f"10.0.0.{i}", labels={"rack": rack},
                              taints=[taint] if rack == "c" else None)
                  for i, rack in enumerate("abc", start=1)])
    with scheduler_loop(sandbox, kubeconfig) as loop:
        yield loop


def affine(name: str, *terms: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A CPU-only pod whose required node affinity is ``terms``."""
    pod = pod_object(name, "default", [0])
    pod["spec"]["affinity"] = required(list(terms))
    pod["spec"].update(spec)
    return pod


def rack_in(*racks: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "rack", "operator": "In", "values": list(racks)}]}


def name_in(*names: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}


def bound(sandbox: Sandbox, name: str) -> str:
    return str(((sandbox.get("pods", "default", name) or {}).get("spec") or {}).get("nodeName") or "")


def failed_scheduling(sandbox: Sandbox, name: str) -> str:
    """The message of the pod's latest FailedScheduling Event."""
    events = [e["message"] for e in sandbox.objects("events")
              if e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] == name]
    assert events, f"no FailedScheduling Event for {name}"
    return str(events[-1])


def why(sandbox: Sandbox, name: str) -> str:
    """The PodScheduled=False message, after checking the FailedScheduling Event says the same."""
    found = sandbox.get("pods", "default", name) or {}
    condition = next((c for c in (found.get("status") or {}).get("conditions") or []
                      if c.get("type") == "PodScheduled"), {})
    assert condition.get("status") == "False", f"{name} has no PodScheduled=False condition"
    assert failed_scheduling(sandbox, name) == condition["message"]
    return str(condition["message"])


def test_a_pod_with_required_affinity_lands_only_on_a_matching_node(
    sandbox: Sandbox, racks: SchedulerLoop, kubectl: Kubectl
) -> None:
    pods = [affine(f"to-b-{i}", rack_in("b")) for i in range(3)]
    kubectl("create", "-f", "-", input="\n".join(json.dumps(p) for p in pods))
    racks.run_once()
    assert [bound(sandbox, f"to-b-{i}") for i in range(3)] == ["n-b"] * 3


def test_a_pod_whose_affinity_matches_no_node_stays_pending_with_kube_schedulers_message(
    sandbox: Sandbox, racks: SchedulerLoop, kubectl: Kubectl
) -> None:
    kubectl("create", "-f", "-", input=json.dumps(affine("to-z", rack_in("z"))))
    racks.run_once()
    assert bound(sandbox, "to-z") == ""
    # n-c's taint is TaintToleration's, which runs before NodeAffinity (default_plugins.go)
    assert why(sandbox, "to-z") == NONE_FITS


def test_a_term_that_does_not_parse_matches_nothing_and_the_others_still_count(
    sandbox: Sandbox, racks: SchedulerLoop
) -> None:
    bad_term = {"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["x"]}]}
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    sandbox.load([affine("lazy", bad_term, rack_in("c"), tolerations=tolerate),
                  affine("only-bad", bad_term, tolerations=tolerate)])
    racks.run_once()
    assert bound(sandbox, "lazy") == "n-c"
    assert why(sandbox, "only-bad") == f"0/3 nodes are available: 3 {REASON}."


def test_metadata_name_terms_narrow_the_nodes_as_the_prefilter_does(sandbox: Sandbox, racks: SchedulerLoop) -> None:
    conflict = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-a"]},
                                {"key": "metadata.name", "operator": "In", "values": ["n-b"]}]}
    sandbox.load([affine("pinned", name_in("n-b")), affine("absent", name_in("n-x")),
                  affine("conflict", conflict)])
    racks.run_once()
    assert bound(sandbox, "pinned") == "n-b"
    assert why(sandbox, "absent") == "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    assert why(sandbox, "conflict") == "0/3 nodes are available: pod affinity terms conflict."


@pytest.mark.parametrize(("field", "value"), [
    ("affinity", "garbage"),
    ("affinity", required({"a": 1})),
    ("affinity", required([{"matchExpressions": [{"key": "rack", "operator": "In", "values": [1]}]}])),
    ("affinity", required([{"matchExpressions": [{"key": "rack", "operator": "In",
                                                   "values": ["a"] * (MAX_POD_VALUES + 1)}]}])),
    ("affinity", required([{"matchExpressions": [{"key": "k" * 100_000, "operator": "Exists"}]}])),
    ("nodeSelector", "rack=a"),
    ("nodeSelector", {"rack": 1}),
    ("nodeSelector", ["rack"]),
], ids=["affinity-string", "affinity-terms-object", "affinity-value-number", "affinity-no-pod-could-hold",
        "affinity-huge-key", "selector-string", "selector-number", "selector-list"])
def test_a_hostile_affinity_or_node_selector_keeps_its_pod_pending_and_the_others_are_scheduled(
    sandbox: Sandbox, racks: SchedulerLoop, field: str, value: object
) -> None:
    # kube-apiserver refuses most of these; seeded into storage, the pod still fails alone.
    hostile = pod_object("hostile", "default", [0])
    hostile["spec"][field] = value
    sandbox.load([hostile, affine("fine", rack_in("a"))])
    racks.run_once()
    assert bound(sandbox, "fine") == "n-a"
    assert bound(sandbox, "hostile") == ""
    # A mistyped pod's status patch is refused by the API (it checks the whole object), so the Event says it.
    assert failed_scheduling(sandbox, "hostile") == NONE_FITS


def test_a_pod_with_a_hundred_thousand_terms_is_placed_by_them_as_upstream_would(
    sandbox: Sandbox, racks: SchedulerLoop
) -> None:
    """Pod validation sets no count on terms; kube-scheduler's NodeAffinity judges every one."""
    sandbox.load([affine("many", *([rack_in("b")] * 100_000))])
    racks.run_once()
    assert bound(sandbox, "many") == "n-b"


def _placed_over_cycles(sandbox: Sandbox, racks: SchedulerLoop, caplog: pytest.LogCaptureFixture,
                        slow: dict[str, Any], logged: str) -> tuple[list[str], list[str]]:
    """Load ``slow`` and a later pod: the first cycle stops ``slow`` over its budget and places the later one.

    Cycles then run until ``slow`` is bound, on n-c. Returns the reasons of its Events (sorted) and the
    warnings that hold ``logged``.
    """
    later = affine("later", rack_in("a"))
    later["metadata"]["creationTimestamp"] = "2999-01-01T00:00:00Z"  # tried after the slow pod in a pass
    sandbox.load([slow, later])
    with caplog.at_level("WARNING", logger="kubectl_gpushare.scheduler"):
        racks.run_once()
        assert bound(sandbox, "later") == "n-a" and bound(sandbox, "slow") == ""
        assert why(sandbox, "slow") == f"0/3 nodes are available: {AFFINITY_OVER_BUDGET}."

        def placed() -> str:
            racks.run_once()
            return bound(sandbox, "slow")

        wait_for(placed, what="the slow pod placed", timeout=30)
    assert bound(sandbox, "slow") == "n-c"
    reasons = sorted(e["reason"] for e in sandbox.objects("events") if e["involvedObject"]["name"] == "slow")
    return reasons, [r.getMessage() for r in caplog.records if logged in r.getMessage()]


def test_an_affinity_past_the_cycles_budget_fails_its_cycle_alone_and_resumes_until_placed(
    sandbox: Sandbox, racks: SchedulerLoop, caplog: pytest.LogCaptureFixture
) -> None:
    """Terms no index narrows are asked of every node; past the cycle's budget the cycle stops, not the loop.

    20 ``rack NotIn [a, b, ...]`` terms cost n-a and n-b 20 each and match n-c: with a budget of 25
    the first cycle stops before n-c, the pod after it is still placed, and the next cycle goes on
    from the kept verdicts (the condition's write, a new version of the pod, keeps them) and lands
    the pod on n-c, where upstream (asking every term) puts it.
    """
    racks.affinity_budget = 25
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    slow = affine("slow", *({"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["a", "b", f"h{i}"]}]}
                            for i in range(20)), tolerations=tolerate)
    reasons, over = _placed_over_cycles(sandbox, racks, caplog, slow, "asks more than 25 terms")
    assert reasons == ["FailedScheduling", "Scheduled"]  # one failed cycle: the next resumed
    assert len(over) == 1, over


def test_an_affinity_too_large_to_compile_in_one_cycle_is_compiled_over_cycles_and_placed_as_upstream_would(
    sandbox: Sandbox, racks: SchedulerLoop, caplog: pytest.LogCaptureFixture
) -> None:
    """The largest affinity a pod holds takes seconds to compile: a cycle compiles a share, then stops.

    With a budget of 200 units (a term of one requirement and one value costs 13) the 40 terms, one
    of them not parsing and the one matching n-c last, take three cycles; the pod after it is
    placed meanwhile, and the slow one lands on n-c, where upstream (compiling them at once) puts it.
    """
    racks.compile_budget = 200
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    terms = [{"matchExpressions": [{"key": "rack", "operator": "In", "values": [f"h{i}"]}]} for i in range(38)]
    terms.insert(20, {"matchExpressions": [{"key": "rack", "operator": "Bogus", "values": ["c"]}]})
    slow = affine("slow", *terms, rack_in("c"), tolerations=tolerate)
    reasons, over = _placed_over_cycles(sandbox, racks, caplog, slow, "too large to compile in one cycle")
    assert reasons.count("FailedScheduling") == 2  # 520 units at 200 a cycle: the third cycle places it
    assert len(over) == 1, over


def test_an_affinity_edited_while_it_is_compiled_over_cycles_is_compiled_afresh(
    sandbox: Sandbox, racks: SchedulerLoop
) -> None:
    """What a cycle compiled is kept with the placement of the fields it read (`SchedulerLoop._placement`).

    The pod's affinity edited between two cycles (its terms matched n-c; now n-b) is read and compiled
    anew: the pod lands on n-b, not where the terms compiled before would put it.
    """
    racks.compile_budget = 200
    terms = [{"matchExpressions": [{"key": "rack", "operator": "In", "values": [f"h{i}"]}]} for i in range(38)]
    sandbox.load([affine("slow", *terms, rack_in("c"), tolerations=[{"key": "dedicated", "operator": "Exists"}])])
    racks.run_once()
    assert why(sandbox, "slow") == f"0/3 nodes are available: {AFFINITY_OVER_BUDGET}."
    edited = sandbox.get("pods", "default", "slow")
    assert edited is not None
    edited["spec"]["affinity"] = required([rack_in("b")])
    sandbox.load([edited])

    def placed() -> str:
        racks.run_once()
        return bound(sandbox, "slow")

    assert wait_for(placed, what="the edited pod placed", timeout=30) == "n-b"


@pytest.mark.parametrize("how", ["http", "seeded"])
def test_a_taint_with_a_null_value_is_read_as_an_empty_one_by_the_stand_in_and_explain(
    sandbox: Sandbox, racks: SchedulerLoop, kubectl: Kubectl, how: str
) -> None:
    """Go's encoding/json reads ``"value": null`` as "": kube-apiserver stores the taint without one.

    Created over HTTP the sandbox stores it so; seeded as is (storage written before, a state file)
    the readers read it so too: a toleration of ``k=""`` tolerates it, and both say the same of a pod
    without one.
    """
    node = node_object("n-d", [16], ip="10.0.0.4", labels={"rack": "d"})
    node["spec"]["taints"] = [{"key": "k", "value": None, "effect": "NoSchedule"}]
    if how == "http":
        request = urllib.request.Request(f"{sandbox.url}/api/v1/nodes", json.dumps(node).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as reply:
            assert reply.status == 201
    else:
        sandbox.load([node])
    tolerate = [{"key": "k", "operator": "Equal", "value": "", "effect": "NoSchedule"}]
    plain = pod_object("plain", "default", [4])
    plain["spec"]["nodeSelector"] = {"rack": "d"}
    sandbox.load([affine("tolerant", rack_in("d"), tolerations=tolerate), plain])
    racks.run_once()
    assert bound(sandbox, "tolerant") == "n-d"
    assert why(sandbox, "plain") == ("0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: c}, "
                                     f"1 node(s) had untolerated taint {{k: }}, 2 {REASON}.")
    explained = kubectl("gpushare", "explain", "plain", "-n", "default")
    assert "  node/n-d: tainted k:NoSchedule, which the pod does not tolerate\n" in explained.stdout, explained.stdout
    assert not explained.stderr


def test_unreadable_tolerations_tolerate_nothing_and_the_pod_fails_alone(
    sandbox: Sandbox, racks: SchedulerLoop
) -> None:
    odd = affine("odd", rack_in("c"))
    odd["spec"]["tolerations"] = [{"key": 1, "operator": "Exists"}]
    sandbox.load([odd, affine("fine", rack_in("c"), tolerations=[{"operator": "Exists"}])])
    racks.run_once()
    assert bound(sandbox, "fine") == "n-c"
    # The API refuses the status patch of a pod it could not decode (the whole object is checked), so
    # only the Event carries the reason.
    assert bound(sandbox, "odd") == ""
    assert failed_scheduling(sandbox, "odd") == NONE_FITS


def test_tolerations_with_null_fields_are_read_as_go_reads_them_by_the_stand_in_and_explain(
    sandbox: Sandbox, racks: SchedulerLoop, kubectl: Kubectl
) -> None:
    """Go's encoding/json reads a ``null`` string as "" (``literalStore``): seeded storage may hold such a pod.

    An ``effect: null`` toleration tolerates every effect, an ``operator: null`` one compares values
    (``ToleratesTaint``: "" is Equal), so both pods go to n-c; before, both were refused as unreadable.
    """
    null_effect = affine("null-effect", rack_in("c"),
                         tolerations=[{"key": "dedicated", "operator": "Equal", "value": "c", "effect": None}])
    null_operator = affine("null-operator", rack_in("c"),
                           tolerations=[{"key": "dedicated", "operator": None, "value": "c", "effect": "NoSchedule"}])
    other_value = affine("other-value", rack_in("c"),
                         tolerations=[{"key": "dedicated", "operator": None, "value": "x", "effect": None}])
    sandbox.load([null_effect, null_operator, other_value])
    racks.run_once()
    assert bound(sandbox, "null-effect") == "n-c" and bound(sandbox, "null-operator") == "n-c"
    assert why(sandbox, "other-value") == NONE_FITS  # read, and Equal compares "x" with "c"
    explained = kubectl("gpushare", "explain", "other-value", "-n", "default")  # the views decode the pod too
    assert explained.stdout.startswith("Pod default/other-value requests no aliyun.com/gpu-mem"), explained.stdout
    assert not explained.stderr


def test_a_taint_removed_from_a_node_is_seen_by_the_next_pass(
    sandbox: Sandbox, racks: SchedulerLoop, kubectl: Kubectl
) -> None:
    kubectl("create", "-f", "-", input=json.dumps(affine("to-c", rack_in("c"))))
    racks.run_once()
    assert bound(sandbox, "to-c") == "" and "untolerated taint {dedicated: c}" in why(sandbox, "to-c")
    kubectl("taint", "nodes", "n-c", "dedicated-")
    racks.run_once()  # the node changed: the pod is retried at once, and the node's taints read anew
    assert bound(sandbox, "to-c") == "n-c"


def test_a_node_with_a_number_label_fails_alone_and_gt_affinity_still_places_pods(
    sandbox: Sandbox, racks: SchedulerLoop
) -> None:
    odd = node_object("n-odd", [], ip="10.0.0.9", labels={"rack": "d"})
    odd["metadata"]["labels"]["slot"] = 7  # the API refuses it; seeded into storage directly
    sandbox.load([odd, node_object("n-7", [], ip="10.0.0.10", labels={"slot": "7"})])
    sandbox.load([affine("high", {"matchExpressions": [{"key": "slot", "operator": "Gt", "values": ["5"]}]})])
    racks.run_once()
    assert bound(sandbox, "high") == "n-7"


def test_a_retry_that_fails_as_before_records_an_event_but_leaves_the_pod_alone(
    sandbox: Sandbox, racks: SchedulerLoop, kubectl: Kubectl
) -> None:
    # kube-scheduler's updatePod skips a PodScheduled condition UpdatePodCondition finds unchanged,
    # so the pod's resourceVersion (and the stand-in's decoded placement) survive the retry.
    kubectl("create", "-f", "-", input=json.dumps(affine("to-z", rack_in("z"))))
    racks.run_once()
    first = sandbox.get("pods", "default", "to-z") or {}

    def events() -> int:
        racks.run_once()  # a no-op until the pod's 1 s backoff is over
        return sum(1 for e in sandbox.objects("events")
                   if e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] == "to-z")

    wait_for(lambda: events() >= 2, what="a second FailedScheduling Event for to-z")
    again = sandbox.get("pods", "default", "to-z") or {}
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert why(sandbox, "to-z") == NONE_FITS


def test_cordoned_and_not_ready_nodes_take_only_pods_that_tolerate_their_taints(
    sandbox: Sandbox, racks: SchedulerLoop
) -> None:
    # NodeUnschedulable passes a pod tolerating node.kubernetes.io/unschedulable:NoSchedule; a node
    # that is not Ready carries node.kubernetes.io/not-ready:NoSchedule, judged by TaintToleration.
    cordoned = node_object("n-cordoned", [], ip="10.0.0.7", labels={"rack": "d"})
    cordoned["spec"]["unschedulable"] = True
    sandbox.load([cordoned, node_object("n-down", [], ip="10.0.0.8", labels={"rack": "e"}, ready=False)])
    cordon = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    down = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}
    sandbox.load([affine("to-d", rack_in("d"), tolerations=[cordon]), affine("to-d-no", rack_in("d")),
                  affine("to-e", rack_in("e"), tolerations=[down]), affine("to-e-no", rack_in("e"))])
    racks.run_once()
    assert bound(sandbox, "to-d") == "n-cordoned" and bound(sandbox, "to-e") == "n-down"
    assert "1 node(s) were unschedulable" in why(sandbox, "to-d-no")
    assert "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in why(sandbox, "to-e-no")


def test_explain_says_what_the_stand_in_says_of_a_pod_its_metadata_name_terms_narrow(
    sandbox: Sandbox, kubeconfig: Path, kubectl: Kubectl
) -> None:
    """One PreFilter (`node_affinity.required_affinity`), one set of words: the nodes explain says the
    stand-in leaves out are those the stand-in counts so, and a conflict is a conflict to both."""
    from kubectl_gpushare.inspect.explain import PREFILTER_LINE
    from kubectl_gpushare.node_affinity import AFFINITY_CONFLICT, NOT_IN_PREFILTER_REASON

    sandbox.load([node_object(f"g-{x}", [16], ip=f"10.0.1.{i}") for i, x in enumerate("abc", start=1)])
    conflict = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["g-a"]},
                                {"key": "metadata.name", "operator": "In", "values": ["g-b"]}]}
    too_big = pod_object("too-big-for-b", "default", [32])  # pinned to g-b, which has 16 GiB
    too_big["spec"]["affinity"] = required([name_in("g-b")])
    clash = pod_object("clash", "default", [2])
    clash["spec"]["affinity"] = required([conflict])
    sandbox.load([too_big, clash])
    with scheduler_loop(sandbox, kubeconfig) as loop:
        loop.run_once()

    def explained(pod: str) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(kubectl("gpushare", "explain", pod, "-o", "json").stdout)
        assert answer["events"] == [why(sandbox, pod)], "explain quotes the stand-in's message"
        return answer

    answer = explained("too-big-for-b")
    assert answer["prefilterNodes"] == ["g-b"], "the PreFilter's node set, once"
    text = kubectl("gpushare", "explain", "too-big-for-b").stdout.splitlines()
    assert text[1] == f"{PREFILTER_LINE}g-b" and not text[2]
    left_out = [v["name"] for v in answer["nodes"] if NOT_IN_PREFILTER_REASON in v["reason"]]
    assert left_out == ["g-a", "g-c"]
    assert f" {len(left_out)} {NOT_IN_PREFILTER_REASON}" in why(sandbox, "too-big-for-b")
    on_b = next(v["reason"] for v in answer["nodes"] if v["name"] == "g-b")
    assert "Insufficient" in why(sandbox, "too-big-for-b") and on_b.startswith("only 16 GiB free")
    answer = explained("clash")
    assert why(sandbox, "clash") == f"0/3 nodes are available: {AFFINITY_CONFLICT}."
    assert f"cannot schedule it: {AFFINITY_CONFLICT} (" in answer["summary"] and "nodes" not in answer
    assert "prefilterNodes" not in answer


def test_explain_and_the_stand_in_judge_an_affinity_past_a_thousand_terms_by_its_valid_terms(
    sandbox: Sandbox, kubeconfig: Path, kubectl: Kubectl
) -> None:
    """No count limits a pod's terms upstream: NewLazyErrorNodeSelector skips a bad one, the others count."""
    sandbox.load([node_object(f"g-{x}", [16], ip=f"10.0.1.{i}", labels={"rack": x})
                  for i, x in enumerate("ab", start=1)])
    bad_term = {"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["x"]}]}
    wide = pod_object("wide", "default", [32])  # 32 GiB: no node has it, so it stays pending
    wide["spec"]["affinity"] = required([*(rack_in(f"r{i}") for i in range(3000)), bad_term, rack_in("b")])
    sandbox.load([wide])
    with scheduler_loop(sandbox, kubeconfig) as loop:
        loop.run_once()
    said = why(sandbox, "wide")
    assert said.startswith("0/2 nodes are available: ") and f"1 {REASON}" in said and "Insufficient" in said
    answer: dict[str, Any] = json.loads(kubectl("gpushare", "explain", "wide", "-o", "json").stdout)
    reasons = {v["name"]: v["reason"] for v in answer["nodes"]}
    assert reasons["g-b"].startswith("only 16 GiB free"), "g-b matches the last term"
    assert reasons["g-a"].startswith("the pod's required node affinity (") and reasons["g-a"].endswith("does not match")
