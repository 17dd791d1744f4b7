"""``kubectl gpushare explain`` through the real kubectl against the sandbox, live and from kubectl's dump."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from costly_cel import NESTED_BIND, REPLACE_CHAIN
from golden.explain import cases

from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "explain"


def _scheduler_said(kubectl: Callable[..., Any], event: str, message: str) -> None:
    """kube-scheduler's FailedScheduling Event ``event`` about ml/wants-8, applied through kubectl."""
    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": event, "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "wants-8"},
        "reason": "FailedScheduling", "message": message, "type": "Warning",
    }))


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_kubectl_gpushare_explain_matches_golden_live_and_offline(
    name: str, sandbox: Sandbox, kubectl: Callable[..., Any], kube_env: dict[str, str], tmp_path: Path
) -> None:
    kube_env.pop("GPUSHARE_POLICY", None)
    sandbox.load(cases.seed())
    kinds = "nodes,pods,resourceslices,resourceclaims,deviceclasses"
    (tmp_path / "c.json").write_text(kubectl("get", kinds, "-A", "-o", "json").stdout)
    namespace, pod = cases.CASES[name]
    for suffix, flags in (("txt", []), ("json", ["-o", "json"])):
        for source in ([], ["--from-file", str(tmp_path / "c.json")]):
            result = kubectl("gpushare", "explain", pod, "-n", namespace, *flags, *source)
            assert result.stdout == (GOLDEN / f"{name}.{suffix}").read_text(), f"{name}.{suffix} {source}"


def test_live_explain_quotes_the_schedulers_event(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    from kubectl_gpushare.sandbox.builders import namespace_object

    # The sandbox admits pods into namespaces that do not exist; a real cluster has "ml" here.
    sandbox.load([namespace_object("ml"), *cases.seed()])
    said = "0/4 nodes are available: 1 Insufficient GPU Memory in one device."
    _scheduler_said(kubectl, "wants-8.1", said)
    text = kubectl("gpushare", "explain", "wants-8", "-n", "ml").stdout
    assert text.endswith(f"\nThe scheduler said:\n  {said}\n")
    missing = kubectl("gpushare", "explain", "ghost", "-n", "ml", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Failed due to pods "ghost" not found in namespace "ml"'


def test_a_pod_in_another_namespace_is_hinted_and_found_with_all_namespaces(
    sandbox: Sandbox, kubectl: Callable[..., Any], tmp_path: Path
) -> None:
    from kubectl_gpushare.sandbox.builders import namespace_object

    sandbox.load([namespace_object("ml"), namespace_object("team-b"), *cases.seed()])
    (tmp_path / "c.json").write_text(kubectl("get", "nodes,pods", "-A", "-o", "json").stdout)
    for source in ([], ["--from-file", str(tmp_path / "c.json")]):
        hinted = kubectl("gpushare", "explain", "wants-8", *source, check=False)
        assert hinted.returncode == 1 and hinted.stdout == ""
        assert hinted.stderr == ('Failed due to pods "wants-8" not found in namespace "default"; a pod of that name '
                                 "is in namespace ml (-n ml, or -A)\n"), source
        named = kubectl("gpushare", "explain", "wants-8", "-n", "team-b", *source, check=False)
        assert named.stderr == 'Failed due to pods "wants-8" not found in namespace "team-b"\n', "-n given: no hint"
        found = kubectl("gpushare", "explain", "wants-8", "-A", *source)
        assert found.stdout == (GOLDEN / "trap.txt").read_text()
        nowhere = kubectl("gpushare", "explain", "ghost", "-A", *source, check=False)
        assert (nowhere.returncode, nowhere.stderr) == (1, 'Failed due to pods "ghost" not found in any namespace\n')
        both = kubectl("gpushare", "explain", "wants-8", "-A", "-n", "ml", *source, check=False)
        assert both.returncode == 2 and both.stderr.count("\n") == 1


def test_a_pod_in_several_namespaces_needs_n(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    from kubectl_gpushare.sandbox.builders import pod_object

    sandbox.load([*cases.seed(), pod_object("wants-8", "team-b", [8])])
    result = kubectl("gpushare", "explain", "wants-8", "-A", check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("error: pod wants-8 is in several namespaces (ml, team-b): pick one with -n")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("selector", [NESTED_BIND, REPLACE_CHAIN], ids=["nested-bind", "replace-chain"])
def test_a_claim_whose_selector_is_over_the_cost_limit_gets_its_reason_and_is_never_run(
    selector: str, sandbox: Sandbox, kubectl: Callable[..., Any], tmp_path: Path
) -> None:
    from golden.inspect import build_dra_clusters as dra

    from kubectl_gpushare.kube import cel

    if not cel.available():
        pytest.skip(cel.INSTALL_HINT)
    claim = dra.pending_claim("dra-costly-gpu", "dra-costly", "4Gi", namespace="ml")
    claim["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": selector}}]
    # Loaded past admission (which refuses it), as a dump from a cluster without the bound could hold it.
    sandbox.load([*cases.dra_seed(), dra.dra_pod("dra-costly", "", "dra-costly-gpu", phase="Pending",
                                                 namespace="ml"), claim])
    kinds = "nodes,pods,resourceslices,resourceclaims,deviceclasses"
    (tmp_path / "c.json").write_text(kubectl("get", kinds, "-A", "-o", "json").stdout)
    for source in ([], ["--from-file", str(tmp_path / "c.json")]):
        result = kubectl("gpushare", "explain", "dra-costly", "-n", "ml", *source)
        reason = [line for line in result.stdout.splitlines() if line.startswith("  node/dra-1:")]
        expected = (r'  node/dra-1: running "DynamicResources" filter plugin: claim ml/dra-costly-gpu: selector #0: '
                    r"CEL compile error: too complex, exceeds cost limit \(worst-case cost \d+ > 1000000\)")
        assert len(reason) == 1 and re.fullmatch(expected, reason[0]), result.stdout
    # The other pods are explained as before, beside it.
    assert kubectl("gpushare", "explain", "dra-waiting", "-n", "ml").stdout == (GOLDEN / "dra-pending.txt").read_text()


def test_a_schedulers_message_holding_escapes_and_newlines_is_one_printable_line(
    sandbox: Sandbox, kubectl: Callable[..., Any]
) -> None:
    """An Event's message is free text to the API server: explain's text writes it as one printable line, and its
    JSON keeps it exact."""
    from golden import hostile

    from kubectl_gpushare.sandbox.builders import namespace_object

    sandbox.load([namespace_object("ml"), *cases.seed()])
    said = f"0/4 nodes are available{hostile.HOSTILE}"
    _scheduler_said(kubectl, "wants-8.2", said)
    text = kubectl("gpushare", "explain", "wants-8", "-n", "ml").stdout
    hostile.assert_one_line_each(text)
    assert text.endswith(f"\nThe scheduler said:\n  0/4 nodes are available{hostile.SHOWN}\n")
    data = json.loads(kubectl("gpushare", "explain", "wants-8", "-n", "ml", "-o", "json").stdout)
    assert data["events"] == [said]
