"""``kubectl gpushare doctor`` through the real kubectl against a seeded sandbox, live and --from-file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from golden.doctor import cases

from kubectl_gpushare.kube.errors import EXIT_FINDINGS_ERRORS, EXIT_FINDINGS_WARNINGS
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "doctor"


def _api_and_dump(kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path) -> tuple[list[str], list[str]]:
    """The flags that read the seeded sandbox over its API, and those that read kubectl's dump of it."""
    dump = tmp_path / "cluster.json"
    dump.write_text(kubectl("get", "nodes,pods,resourceslices,resourceclaims,deviceclasses", "-A", "-o", "json").stdout)
    return ["--kubeconfig", str(kubeconfig)], ["--from-file", str(dump)]


def _findings_of(cli_runner: CliRunner, obj: str, source: list[str]) -> list[tuple[str, str, str]]:
    """doctor's findings on ``obj`` (severity, check, message), reading ``source`` (`_api_and_dump`'s flags)."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command

    report = json.loads(cli_runner.invoke(doctor_command, ["-o", "json", *source]).stdout)
    return [(f["severity"], f["check"], f["message"]) for f in report["findings"] if f["object"] == obj]


def test_every_finding_live_and_from_kubectls_dump(
    sandbox: Sandbox, kubectl: Callable[..., Any], tmp_path: Path
) -> None:
    sandbox.load(cases.seed())
    kinds = ("nodes,pods,configmaps,validatingadmissionpolicies,validatingadmissionpolicybindings,"
             "resourceslices,resourceclaims,deviceclasses")
    dump = kubectl("get", kinds, "-A", "-o", "json").stdout
    (tmp_path / "cluster.json").write_text(dump)
    for golden, flags in (("doctor.txt", []), ("doctor.json", ["-o", "json"])):
        expected = (GOLDEN / golden).read_text()
        for source in ([], ["--from-file", str(tmp_path / "cluster.json")]):
            result = kubectl("gpushare", "doctor", *flags, *source, check=False)
            assert result.returncode == EXIT_FINDINGS_ERRORS, result.stderr
            assert result.stdout == expected, f"{golden} {'offline' if source else 'live'}"


def test_a_healthy_cluster_is_clean(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    names = ("healthy", "fine", "extender", "plugin-healthy")
    sandbox.load([item for item in cases.seed() if item["metadata"]["name"] in names] + cases.confinement())
    result = kubectl("gpushare", "doctor")
    assert (result.returncode, result.stdout) == (0, "No problems found.\n")


def test_over_committed_gpus_are_named_from_a_second_read_past_the_per_node_limit(
    sandbox: Sandbox, kubectl: Callable[..., Any]
) -> None:
    # More over-committed nodes than doctor re-reads one by one: it reads every pod once more.
    from kubectl_gpushare.inspect.doctor_command import REREAD_PER_NODE
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    count = REREAD_PER_NODE + 2
    objects: list[dict[str, Any]] = []
    for number in range(count):
        node = f"over-{number:02d}"
        objects.append(node_object(node, [4], ip=f"10.8.0.{number + 1}"))
        objects += [pod_object(f"{node}-{pod}", "team", [3], node=node, gpu=0, phase="Running") for pod in "ab"]
    sandbox.load(objects)
    result = kubectl("gpushare", "doctor", "-o", "json", check=False)
    assert result.returncode == EXIT_FINDINGS_ERRORS, result.stderr
    found = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "gpu-overcommitted"]
    assert [f["object"] for f in found] == [f"node/over-{number:02d}" for number in range(count)]
    assert found[0]["message"] == "GPU 0 holds 6 of 4: team/over-00-a, team/over-00-b"


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param(r"^/api/v1/pods\?.*continue=", id="second-page-of-pods"),
        pytest.param(r"^/api/v1/pods\?.*spec.nodeName", id="re-read-of-an-over-committed-node"),
    ],
)
def test_an_api_failure_while_auditing_fails_as_inspect_does(
    sandbox: Sandbox, kubectl: Callable[..., Any], failing: str
) -> None:
    # The audit runs while pods stream in: a failure mid-stream is still one line and the API exit
    # code, with no partial report on stdout.
    from kubectl_gpushare.inspect.doctor_command import POD_PAGE_SIZE
    from kubectl_gpushare.kube.errors import EXIT_API
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    objects = [node_object("over", [4], ip="10.8.1.1")]
    objects += [pod_object(f"p-{number:05d}", "team", [3], node="over", gpu=0, phase="Running")
                for number in range(POD_PAGE_SIZE + 1)]
    sandbox.load(objects)
    sandbox.inject(method="GET", path=failing, status=500)
    result = kubectl("gpushare", "doctor", check=False, timeout=120)
    assert result.returncode == EXIT_API, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("Failed due to") and len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize(("seeded", "fault", "finding"), [
    ([], None, ("validatingadmissionpolicy/gpushare-device-plugin-confinement",
                "the device plugin runs (1 pod(s)) but no ValidatingAdmissionPolicy keeps it to its own node")),
    (cases.confinement(("Audit",)), None, (
        "validatingadmissionpolicybinding/gpushare-device-plugin-confinement",
        "ValidatingAdmissionPolicy gpushare-device-plugin-confinement has no binding with validationActions Deny")),
    ([], 404, ("validatingadmissionpolicy/gpushare-device-plugin-confinement",
               "the API server serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies (Kubernetes "
               "before 1.30)")),
], ids=["no-policy", "no-deny-binding", "not-served"])
def test_node_confinement_missing_is_a_warning(
    sandbox: Sandbox, kubectl: Callable[..., Any], seeded: list[dict[str, Any]], fault: int | None,
    finding: tuple[str, str],
) -> None:
    names = ("healthy", "fine", "extender", "plugin-healthy")
    sandbox.load([item for item in cases.seed() if item["metadata"]["name"] in names] + seeded)
    if fault is not None:
        sandbox.inject("GET", r"/apis/admissionregistration\.k8s\.io/v1/validatingadmissionpolic", status=fault)
    result = kubectl("gpushare", "doctor", "-o", "json", check=False)
    assert result.returncode == EXIT_FINDINGS_WARNINGS, result.stdout + result.stderr
    (found,) = json.loads(result.stdout)["findings"]
    assert (found["severity"], found["check"], found["object"]) == ("warning", "node-confinement-missing", finding[0])
    assert found["message"].startswith(finding[1])


def test_a_doctor_that_may_not_list_policies_says_it_could_not_tell(
    sandbox: Sandbox, kubectl: Callable[..., Any]
) -> None:
    names = ("healthy", "fine", "extender", "plugin-healthy")
    sandbox.load([item for item in cases.seed() if item["metadata"]["name"] in names])
    sandbox.inject("GET", r"/apis/admissionregistration\.k8s\.io/v1/validatingadmissionpolicies", status=403)
    result = kubectl("gpushare", "doctor", check=False)
    assert (result.returncode, result.stdout) == (0, "No problems found.\n")
    assert "cannot list validatingadmissionpolicies and validatingadmissionpolicybindings: whether the device " \
           "plugin is kept to its node is not checked" in result.stderr


def test_an_unusable_pool_is_said_once_live(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    """Read from the API, the pool's warning is the dra-pool-unusable finding alone, as from a file."""
    sandbox.load(cases.pool_unusable())
    for golden, flags in (("pool-unusable.txt", []), ("pool-unusable.json", ["-o", "json"])):
        result = kubectl("gpushare", "doctor", *flags, check=False)
        assert (result.returncode, result.stderr) == (EXIT_FINDINGS_WARNINGS, ""), result.stderr
        assert result.stdout == (GOLDEN / golden).read_text(), golden


def test_pods_the_prefilter_refuses_live_and_from_kubectls_dump(
    sandbox: Sandbox, kubectl: Callable[..., Any], tmp_path: Path
) -> None:
    """A pending pod whose claim is being deleted (its finalizer keeps it), one whose allocated claim is reserved
    for 256 other pods, one whose class is missing: an error each, at once, from the API as from kubectl's dump
    (the sandbox's resourceclaim controller keeps the reservations: their pods run)."""
    sandbox.load(cases.prefilter())
    dump = kubectl("get", "nodes,pods,resourceslices,resourceclaims,deviceclasses", "-A", "-o", "json").stdout
    (tmp_path / "cluster.json").write_text(dump)
    for golden, flags in (("prefilter.txt", []), ("prefilter.json", ["-o", "json"])):
        for source in ([], ["--from-file", str(tmp_path / "cluster.json")]):
            result = kubectl("gpushare", "doctor", *flags, *source, check=False)
            assert result.returncode == EXIT_FINDINGS_ERRORS, result.stderr
            assert result.stdout == (GOLDEN / golden).read_text(), f"{golden} {'offline' if source else 'live'}"


@pytest.mark.parametrize(("first", "second"), [("absent", "held"), ("held", "absent"), ("bad", "held")])
def test_explain_and_doctor_name_the_first_unusable_claim_in_the_pods_order(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
    first: str, second: str,
) -> None:
    """A pod whose claims are one that does not exist and one being deleted: kube-scheduler stops at the first in
    ``spec.resourceClaims`` order (dynamicresources.go ``foreachPodResourceClaim``), and so do explain and doctor,
    over the API and from kubectl's dump; a claim being deleted stops it before another claim's invalid request
    (PreEnqueue runs before PreFilter). Before, explain named the missing claim first and doctor the deleted one,
    and both named the invalid request before the claim being deleted."""
    from kubectl_gpushare.inspect.explain_command import explain_command

    sandbox.load(cases.claim_order(first, second))
    sources = _api_and_dump(kubectl, kubeconfig, tmp_path)
    if first == "absent":
        explained = ("Pod team-o/both waits for its claims: ResourceClaim absent does not exist (kube-controller-"
                     "manager's resourceclaim controller makes it; kubectl describe pod says why not).")
        finding = ("warning", "dra-claim-pending", "waits: ResourceClaim absent does not exist")
    else:
        explained = 'kube-scheduler cannot schedule it: resourceclaim "held" is being deleted.'
        finding = ("error", "dra-claim-unallocatable", 'cannot be scheduled: resourceclaim "held" is being deleted')
    for source in sources:
        result = cli_runner.invoke(explain_command, ["both", "-n", "team-o", "-o", "json", *source])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["summary"].endswith(explained)) == ("pending", True), answer["summary"]
        assert _findings_of(cli_runner, "pod/team-o/both", source) == [finding], source


def test_explain_and_doctor_refuse_a_template_claim_the_pod_does_not_own(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
) -> None:
    """The claim a pod's ``status.resourceClaimStatuses`` names for a template entry must be controlled by the pod
    (``resourceclaim.IsForPod``): kube-scheduler stops at one made for another pod, in IsForPod's words, and the
    resourceclaim controller makes the pod a new one; explain and doctor say so as for a missing claim, over the API
    and from kubectl's dump. Before, both took pod ``theirs``'s claim as ``mine``'s. A pod's own allocated claim,
    read by doctor for counting only (its owner not copied), is not taken as another's."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.inspect.explain_command import explain_command

    sandbox.load(cases.claim_owner())
    sources = _api_and_dump(kubectl, kubeconfig, tmp_path)
    words = "ResourceClaim team-w/theirs-gpu was not created for pod team-w/mine (pod is not owner)"
    for source in sources:
        result = cli_runner.invoke(explain_command, ["mine", "-n", "team-w", "-o", "json", *source])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["summary"]) == ("pending", (
            f"Pod team-w/mine waits for its claims: {words} (kube-controller-manager's resourceclaim controller "
            "makes it; kubectl describe pod says why not).")), source
        result = cli_runner.invoke(doctor_command, ["-o", "json", *source])
        found = {f["object"]: (f["severity"], f["check"], f["message"]) for f in json.loads(result.stdout)["findings"]
                 if f["object"] in ("pod/team-w/mine", "pod/team-w/own")}
        assert found == {"pod/team-w/mine": ("warning", "dra-claim-pending", f"waits: {words}")}, source


def test_explain_and_doctor_skip_template_entries_whose_status_names_no_claim(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
) -> None:
    """A ``status.resourceClaimStatuses`` entry without ``resourceClaimName`` (absent, null) says no claim was needed:
    ``resourceclaim.Name`` gives no name and kube-scheduler skips the entry (``foreachPodResourceClaim``), so explain
    and doctor go on to the claim that waits to be allocated, over the API and from kubectl's dump. Before, both said
    the pod waited for the skipped entry's claim to be made."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.inspect.explain_command import explain_command

    sandbox.load(cases.claims_not_needed())
    sources = _api_and_dump(kubectl, kubeconfig, tmp_path)
    for source in sources:
        result = cli_runner.invoke(explain_command, ["lean", "-n", "team-l", "-o", "json", *source])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["summary"]) == ("pending", (
            "Pod team-l/lean asks for 4 GiB of one GPU through claim(s) lean-gpu and the allocator finds devices on "
            "dra-l now; if it stays Pending, see the scheduler's events.")), source
        result = cli_runner.invoke(doctor_command, ["-o", "json", *source])
        found = [f["message"] for f in json.loads(result.stdout)["findings"] if f["object"] == "pod/team-l/lean"]
        assert [message.split(" (")[0] for message in found] == [
            "waits for more than 300s for kube-scheduler to allocate claim(s) lean-gpu"], source


PENDING_NIC = (
    "Pod team-n/wired asks for 4 GiB of one GPU through claim(s) wired-gpu and the allocator finds devices on dra-n "
    "now; if it stays Pending, see the scheduler's events.",
    ("warning", "dra-claim-pending", "waits for more than 300s for kube-scheduler to allocate claim(s) wired-gpu "
     "(kubectl gpushare explain wired -n team-n says why, per node)"))


@pytest.mark.parametrize(("nic_node", "nic_users", "explained", "finding"), [
    ("dra-n", 1, *PENDING_NIC),
    ("nic-only", 1, "Pod team-n/wired asks for 4 GiB of one GPU through claim(s) wired-gpu, but every node of the DRA "
     "driver is excluded before devices are even considered (taints, nodeSelector, affinity or cordon, below).",
     PENDING_NIC[1]),
    ("dra-n", 256, "Pod team-n/wired asks for 4 GiB of one GPU through claim(s) wired-gpu, but kube-scheduler cannot "
     "schedule it: resourceclaim in use.",
     ("error", "dra-claim-unallocatable", "cannot be scheduled: resourceclaim in use")),
])
def test_explain_and_doctor_find_a_pods_claims_of_other_drivers(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
    nic_node: str, nic_users: int, explained: str, finding: tuple[str, str, str],
) -> None:
    """kube-scheduler looks a pod's claims up among every claim, whatever its driver (dynamicresources.go
    ``foreachPodResourceClaim``): a pod with allocated claims of a NIC driver, one by name and one made from a
    template for it, waits for its claim of ours alone, and explain and doctor say so, over the API and from
    kubectl's dump. Before, the reading dropped other drivers' allocated claims and both said the pod waited for
    ``ResourceClaim nic does not exist``. PreFilter and Filter ask such a claim too: one reserved for 256 other pods
    is in use (both faces), one allocated on another node leaves no node of ours (explain; doctor asks no node)."""
    from kubectl_gpushare.inspect.explain_command import explain_command

    sandbox.load(cases.claim_others(nic_node, nic_users))
    sources = _api_and_dump(kubectl, kubeconfig, tmp_path)
    for source in sources:
        result = cli_runner.invoke(explain_command, ["wired", "-n", "team-n", "-o", "json", *source])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["summary"]) == ("pending", explained), source
        if nic_node != "dra-n":
            assert [(n["name"], n["reason"]) for n in answer["nodes"]] == [
                ("dra-n", "resourceclaim not available on the node")], source
        assert _findings_of(cli_runner, "pod/team-n/wired", source) == [finding], source


def test_explain_and_doctor_stop_at_another_drivers_unallocated_claim_being_deleted(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
) -> None:
    """An unbound pod whose claims of ours are all allocated is being bound only if kube-scheduler lets it through:
    a claim of another driver, not allocated and being deleted, stops it (``foreachPodResourceClaim``, whatever the
    driver). explain and doctor both say so, over the API and from kubectl's dump. Before, explain said the pod was
    being bound (it asked PreFilter only of allocated claims of other drivers) while doctor said it was refused."""
    from kubectl_gpushare.inspect.explain_command import explain_command

    sandbox.load(cases.claim_other_deleting())
    words = 'resourceclaim "lone-nic" is being deleted'
    for source in _api_and_dump(kubectl, kubeconfig, tmp_path):
        result = cli_runner.invoke(explain_command, ["lone", "-n", "team-q", "-o", "json", *source])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["summary"].endswith(f"kube-scheduler cannot schedule it: {words}.")) == (
            "pending", True), answer["summary"]
        assert _findings_of(cli_runner, "pod/team-q/lone", source) == [
            ("error", "dra-claim-unallocatable", f"cannot be scheduled: {words}")], source


@pytest.mark.parametrize("entries", [
    [{"name": "gpu", "resourceClaimTemplateName": "gpu-mem-4gi"}, {"name": 5, "resourceClaimName": "x"}],
    [{"name": "gpu", "resourceClaimTemplateName": "gpu-mem-4gi"}, "gpu"],
    {"name": "gpu", "resourceClaimTemplateName": "gpu-mem-4gi"},
], ids=["a-name-not-a-string", "an-entry-not-an-object", "not-a-list"])
def test_explain_and_doctor_say_a_pods_claim_entries_cannot_be_read(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
    entries: Any,
) -> None:
    """A pod whose ``spec.resourceClaims`` does not read as entries (kube-apiserver refuses it; the
    sandbox's storage holds it, as a tampered etcd or a hand-made file would): explain says so in its own state and
    doctor in one finding, over the API and from kubectl's dump. Before, the entries read as none: explain said the
    pod requests no aliyun.com/gpu-mem and doctor said nothing, while the scheduler stand-in kept the pod waiting."""
    from kubectl_gpushare.inspect.explain_command import explain_command
    from kubectl_gpushare.kube.stacks.dra import UNREADABLE_CLAIMS

    sandbox.load(cases.claim_entries(entries))
    sources = _api_and_dump(kubectl, kubeconfig, tmp_path)
    for source in sources:
        result = cli_runner.invoke(explain_command, ["broken", "-n", "team-u", "-o", "json", *source])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["summary"]) == (
            "invalid-claims", f"Pod team-u/broken {UNREADABLE_CLAIMS}."), source
        assert "kube-apiserver refuses such a pod" in answer["summary"]
        assert _findings_of(cli_runner, "pod/team-u/broken", source) == [
            ("error", "dra-claims-unreadable", UNREADABLE_CLAIMS)], source


def test_a_claim_two_entries_name_is_counted_once_and_its_pod_said_never_bound(
    sandbox: Sandbox, kubectl: Callable[..., Any], kubeconfig: Path, tmp_path: Path, cli_runner: CliRunner,
) -> None:
    """Two entries of a pod naming one claim (kube-apiserver admits it: only two entries of one ``name`` are
    refused): kube-scheduler takes the claim once per entry (dynamicresources.go ``podResourceClaims``, the
    allocator's ``claimsToAllocate``, PreBind's ``bindClaim``) and never binds the pod. explain and doctor say so,
    over the API and from kubectl's dump, and every view counts the claim's memory once: explain's ask, a placed
    pod's claims, inspect's unscheduled pods. Before, all of them counted it twice (``x, x``, 12 GiB) and explain
    said the allocator finds devices for it."""
    from kubectl_gpushare.inspect.command import inspect_command
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.inspect.explain_command import explain_command
    from kubectl_gpushare.kube.stacks.dra import NamedTwice

    sandbox.load(cases.claim_twice())
    sources = _api_and_dump(kubectl, kubeconfig, tmp_path)
    words = NamedTwice("x", ("one", "two")).words("one, two")
    assert words.startswith("claim x is named by entries one, two: kube-scheduler takes a claim once per entry")
    for source in sources:
        result = cli_runner.invoke(explain_command, ["twice", "-n", "team-2", "-o", "json", *source])
        answer = json.loads(result.stdout)
        assert (answer["state"], answer["request"], answer["summary"], "nodes" in answer) == (
            "pending", 6, f"Pod team-2/twice asks for 6 GiB of one GPU through claim(s) x, but {words}.", False)
        assert [claim["name"] for claim in answer["claims"]] == ["x"]
        placed = json.loads(cli_runner.invoke(explain_command, ["placed", "-n", "team-2", "-o", "json",
                                                                *source]).stdout)
        assert (placed["state"], placed["request"], [c["name"] for c in placed["claims"]]) == ("placed", 4, ["y"])
        assert placed["summary"] == ("Pod team-2/placed runs on dra-2: GPU 0 (claim y) holding 4 of 16 GiB; 12 GiB "
                                     "free there; shared with no other pod.")
        result = cli_runner.invoke(doctor_command, ["-o", "json", *source])
        found = [(f["severity"], f["check"], f["object"], f["message"]) for f in json.loads(result.stdout)["findings"]]
        assert found == [("error", "dra-claim-named-twice", "pod/team-2/twice", words)], source
        report = json.loads(cli_runner.invoke(inspect_command, ["-o", "json", *source]).stdout)
        assert [(p["name"], p["memory"], p["claim"]) for p in report["unscheduledPods"]] == [("twice", 6, "x")]
        assert report["nodes"][0]["used"] == 4
