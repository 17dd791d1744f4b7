"""``kubectl gpushare explain`` offline: golden text and JSON per pod, and the no-gpushare case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from golden import hostile
from golden.explain import cases

from kubectl_gpushare.inspect.explain_command import explain_command
from kubectl_gpushare.protocol import shown_value


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"kind": "List", "items": cases.seed()}))
    return path


@pytest.mark.parametrize(("suffix", "flags"), [("txt", []), ("json", ["-o", "json"])])
@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_from_file_matches_golden(
    name: str, suffix: str, flags: list[str], seeded: Path, cli_runner: CliRunner
) -> None:
    namespace, pod = cases.CASES[name]
    argv = [pod, "-n", namespace, "--from-file", str(seeded), *flags]
    result = cli_runner.invoke(explain_command, argv, env={"GPUSHARE_POLICY": None})
    assert result.exit_code == 0, result.stderr
    cases.check(f"{name}.{suffix}", result.stdout)


def test_the_classic_trap_names_the_node_its_free_memory_and_largest_gpu(
    seeded: Path, cli_runner: CliRunner
) -> None:
    text = cli_runner.invoke(explain_command, ["wants-8", "-n", "ml", "--from-file", str(seeded)]).stdout
    assert "node/a: 10 GiB free in total, but the largest free GPU (GPU 1) has only 6 GiB" in text
    assert "node/tainted: tainted dedicated=infra:NoSchedule" in text
    assert "node/cpu" not in text


def test_no_gpushare_nodes_at_all(tmp_path: Path, cli_runner: CliRunner) -> None:
    items = [item for item in cases.seed() if item["metadata"]["name"] in ("cpu", "wants-8")]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    result = cli_runner.invoke(explain_command, ["wants-8", "-n", "ml", "--from-file", str(path)])
    assert result.exit_code == 0 and "no node advertises aliyun.com/gpu-mem" in result.stdout


def test_missing_pod_is_an_api_style_not_found(seeded: Path, cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(explain_command, ["ghost", "--from-file", str(seeded)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip() == 'Failed due to pods "ghost" not found in namespace "default"'


def test_an_unhealthy_gpu_with_room_is_named(tmp_path: Path, cli_runner: CliRunner) -> None:
    from kubectl_gpushare.sandbox.builders import node_object, pod_object, unhealthy_configmap

    items = [
        node_object("n", [16, 16], ip="10.0.0.1"),
        pod_object("busy", "ml", [12], node="n", gpu=0, gpu_memory=16),
        pod_object("wants", "ml", [8]),
        unhealthy_configmap("n", [1]),
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    text = cli_runner.invoke(explain_command, ["wants", "-n", "ml", "--from-file", str(path)]).stdout
    assert "node/n: GPU 1 has 16 GiB free but is unhealthy (ConfigMap unhealthy-gpu-n)" in text


@pytest.mark.parametrize(
    ("operator", "values", "holds"),
    [("In", ["b"], True), ("NotIn", ["b"], False), ("Exists", [], True), ("DoesNotExist", [], False),
     ("Gt", ["3"], True), ("Lt", ["3"], False), ("Gt", ["x"], False), ("Gt", [], False), ("Bogus", ["b"], False)],
)
def test_node_affinity_requirements_use_the_shared_selector_rules(
    operator: str, values: list[str], holds: bool
) -> None:
    from kubectl_gpushare.kube.types import NodeSelectorRequirement, NodeSelectorTerm
    from kubectl_gpushare.node_affinity import compile_selector

    key = "rank" if operator in ("Gt", "Lt") else "pool"
    requirement = NodeSelectorRequirement(key=key, operator=operator, values=tuple(values))
    term = NodeSelectorTerm(match_expressions=(requirement,))
    assert compile_selector([term], lazy=True).matches({"pool": "b", "rank": "7"}, "n") is holds


def _explain_items(
    tmp_path: Path, items: list[dict[str, object]], pod: str, cli_runner: CliRunner
) -> dict[str, object]:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    result = cli_runner.invoke(explain_command, [pod, "-n", "ml", "-o", "json", "--from-file", str(path)])
    assert result.exit_code == 0, result.output
    answer: dict[str, object] = json.loads(result.stdout)
    return answer


def test_a_hami_pod_still_binding_or_failed_is_located_without_a_gpu(tmp_path: Path, cli_runner: CliRunner) -> None:
    from kubectl_gpushare.sandbox.stack_spec import stack_pod_object

    binding = stack_pod_object("binding", "ml", "hami", [2000], node=None, gpu=None, phase="Pending")
    binding["metadata"]["annotations"] = {"hami.io/vgpu-node": "hami-1", "hami.io/bind-phase": "failed",
                                          "hami.io/vgpu-devices-allocated": "GPU-hami-1-0,NVIDIA,2000,0:;"}
    answer = _explain_items(tmp_path, [*cases.stack_seed(), binding], "binding", cli_runner)
    assert (answer["state"], answer["node"], answer["stack"]) == ("placed", "hami-1", "hami")
    assert "stackGpus" not in answer and "holds no GPU there" in str(answer["summary"])


def test_a_hami_pod_over_two_gpus_lists_both_in_mib(tmp_path: Path, cli_runner: CliRunner) -> None:
    from kubectl_gpushare.sandbox.stack_spec import stack_pod_object

    pod = stack_pod_object("wide", "ml", "hami", [1000], node="hami-1", gpu=0)
    pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = (
        "GPU-hami-1-0,NVIDIA,1000,0:GPU-hami-1-1,NVIDIA,4000,0:;"
    )
    answer = _explain_items(tmp_path, [*cases.stack_seed(), pod], "wide", cli_runner)
    gpus = answer["stackGpus"]
    assert isinstance(gpus, list)
    assert [(g["gpu"], g["amount"], g["unit"]) for g in gpus] == [(0, 1000, "MiB"), (1, 4000, "MiB")]
    assert (answer["request"], answer["unit"]) == (5000, "MiB")


def test_many_nodes_are_summarised_and_capped_in_text_whole_in_json(tmp_path: Path, cli_runner: CliRunner) -> None:
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    full = [node_object(f"full-{n:02d}", [4], ip=f"10.9.1.{n + 1}") for n in range(25)]
    roomy = [node_object(f"roomy-{n:02d}", [16], ip=f"10.9.0.{n + 1}") for n in range(5)]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [*full, *roomy, pod_object("big", "ml", [8])]}))

    def explain(*flags: str) -> list[str]:
        return cli_runner.invoke(explain_command, ["big", "-n", "ml", "--from-file", str(path), *flags]).stdout.split(
            "\n")

    capped = explain()
    assert capped[0].startswith("Pod ml/big asks for 8 GiB on one GPU and fits on roomy-00, roomy-01, roomy-02 "
                                "and 2 more now;")
    assert capped[3:8] == [f"  node/roomy-{n:02d}: fits on GPU 0 (binpack)" for n in range(5)], "fitting first"
    assert capped[3 + 20] == "  ... 10 more nodes (--all or --limit N shows them)"
    whole = explain("--all")
    assert len([line for line in whole if line.startswith("  node/")]) == 30
    assert whole[3].startswith("  node/full-00"), "uncapped: by name, as before"
    data = json.loads(cli_runner.invoke(explain_command, ["big", "-n", "ml", "--from-file", str(path), "-o",
                                                          "json"]).stdout)
    assert len(data["nodes"]) == 30


@pytest.mark.parametrize(("pod", "golden"), [("wants", "hostile-pending.txt"), ("sharer", "hostile-placed.txt")])
def test_hostile_names_from_a_file_are_one_line_in_text_and_exact_in_json(
    pod: str, golden: str, tmp_path: Path, cli_runner: CliRunner
) -> None:
    """Nodes, namespaces and pods named with ESC, a newline and a tab (a file is not validated as the API server
    validates names): the summary and every node's verdict stay one line each; JSON keeps the names exact."""
    path = hostile.file_of(tmp_path, hostile.views_cluster())
    text = cli_runner.invoke(explain_command, [pod, "-n", "ml", "--from-file", path], env={"GPUSHARE_POLICY": None})
    assert text.exit_code == 0, text.stderr
    hostile.assert_one_line_each(text.stdout)
    shown_node = hostile.NODE.replace(hostile.HOSTILE, hostile.SHOWN)
    lines = text.stdout.splitlines()
    if pod == "wants":
        assert lines[3:] == [f"  node/{shown_node}: fits on GPU 0 (binpack)", "  node/plain: only 2 GiB free "
                             "(largest free GPU: 2 GiB)"], "one line per node, none forged"
    else:
        assert len(lines) == 1 and f"shared with ml{hostile.SHOWN}/trainer{hostile.SHOWN} (4)." in lines[0]
    cases.check(golden, text.stdout)
    data = json.loads(cli_runner.invoke(explain_command, [pod, "-n", "ml", "--from-file", path, "-o", "json"],
                                        env={"GPUSHARE_POLICY": None}).stdout)
    if pod == "wants":
        assert [node["name"] for node in data["nodes"]] == [hostile.NODE, "plain"]
    else:
        assert data["node"] == hostile.NODE
        assert data["sharing"] == [{"namespace": hostile.NAMESPACE, "name": f"trainer{hostile.HOSTILE}", "memory": 4}]
        assert f"{hostile.NAMESPACE}/trainer{hostile.HOSTILE}" in data["summary"], "the summary is exact in JSON"


def test_text_cuts_each_name_to_the_apis_longest_and_events_to_a_sentence() -> None:
    """A megabyte node name and scheduler message: the text writes each bounded, on one line; the report keeps them."""
    from kubectl_gpushare import protocol
    from kubectl_gpushare.inspect import explain

    huge = "n" * 1_000_000
    answer = explain.Explanation(pod="p", namespace="ml", phase="Pending", request=8, unit="GiB", state="pending",
                                 summary="Pod ml/p asks for 8 GiB.", nodes=[explain.NodeVerdict(huge, "cordoned")],
                                 events=[f"0/1 nodes are available:\x1b[2J {huge}"])
    lines = explain.to_text(answer).splitlines()
    assert lines[3] == f"  node/{'n' * (protocol.MAX_SHOWN_NAME - 1)}…: cordoned"
    room = protocol.MAX_SHOWN_NAME * protocol.SENTENCE_NAMES
    assert lines[6] == "  " + f"0/1 nodes are available: [2J {huge}"[: room - 1] + "…", "ESC a space, cut, marked"
    assert len(lines) == 7 and answer.nodes[0].name == huge


def test_an_affinity_compiled_once_judges_each_node_as_compiled_per_node() -> None:
    """`required_affinity` is the lazy selector `excluded` would compile for each node (explain compiles it once)."""
    import msgspec

    from kubectl_gpushare.inspect.explain import excluded, required_affinity
    from kubectl_gpushare.kube.types import Node, Pod, PodPlacement

    terms = [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
             {"matchExpressions": [{"key": "pool", "operator": "Bogus", "values": ["b"]}]},
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    placement = msgspec.convert({"spec": {"affinity": {"nodeAffinity": required}}}, PodPlacement)
    affinity = required_affinity(placement)
    assert affinity is not None and required_affinity(None) is None and required_affinity(PodPlacement()) is None
    verdicts = []
    for name, pool in (("n1", "a"), ("n2", "b"), ("n3", "c")):
        node = msgspec.convert({"metadata": {"name": name, "labels": {"pool": pool}}}, Node)
        verdicts.append(excluded(Pod(), node, placement, affinity))
        assert verdicts[-1] == excluded(Pod(), node, placement)
    assert [v is None for v in verdicts] == [True, False, True]


def test_a_huge_affinity_is_quoted_only_as_far_as_a_verdict_shows() -> None:
    """A pod may hold 100,000 terms (pod validation sets no count): each node's verdict quotes the first few."""
    import msgspec

    from kubectl_gpushare.inspect.explain import AFFINITY_SHOWN, excluded
    from kubectl_gpushare.kube.types import Node, Pod, PodPlacement

    long_values = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["v" * 300] * 10_000}]}
    terms = [{"matchExpressions": [{"key": "pool", "operator": "In", "values": [f"p{i}"]}]} for i in range(100_000)]
    node = msgspec.convert({"metadata": {"name": "n1", "labels": {"pool": "x"}}}, Node)
    for raw in (terms, [long_values] * 1000):
        required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": raw}}
        placement = msgspec.convert({"spec": {"affinity": {"nodeAffinity": required}}}, PodPlacement)
        verdict = excluded(Pod(), node, placement) or ""
        assert verdict.startswith("the pod's required node affinity (pool In (")
        assert verdict.endswith("…) does not match")
        assert len(verdict) < AFFINITY_SHOWN + 100


def test_a_cordoned_node_is_excluded_only_for_a_pod_that_does_not_tolerate_the_cordon() -> None:
    """NodeUnschedulable passes a pod tolerating ``node.kubernetes.io/unschedulable:NoSchedule``."""
    import msgspec

    from kubectl_gpushare.inspect.explain import excluded
    from kubectl_gpushare.kube.types import Node, Pod

    node = msgspec.convert({"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}, Node)
    tolerant = msgspec.convert({"spec": {"tolerations": [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}, Pod)
    assert excluded(Pod(), node) == "cordoned (unschedulable)"
    assert excluded(tolerant, node) is None


def test_a_dra_pod_whose_metadata_name_terms_conflict_is_told_so_before_its_claims(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """NodeAffinity's PreFilter runs before DynamicResources': no node of the driver is tried."""
    from golden.inspect import build_dra_clusters as dra

    from kubectl_gpushare.node_affinity import AFFINITY_CONFLICT

    pod = cases.required(dra.dra_pod("dra-clash", "", "dra-clash-gpu", phase="Pending", namespace="ml"),
                         cases.names_in("dra-1", "dra-2"))
    items = [*cases.dra_seed(), pod, dra.pending_claim("dra-clash-gpu", "dra-clash", "8Gi", namespace="ml")]
    answer = _explain_items(tmp_path, items, "dra-clash", cli_runner)
    assert f"kube-scheduler cannot schedule it: {AFFINITY_CONFLICT} (" in str(answer["summary"])
    assert "nodes" not in answer and answer["claims"] == [{"name": "dra-clash-gpu", "state": "pending", "memory": 8}]


@pytest.mark.parametrize(
    "affinity", [5, {"nodeAffinity": [[]]}, {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}}]
)
def test_a_mistyped_affinity_in_a_file_is_one_warning_and_the_pod_is_explained_without_it(
    tmp_path: Path, cli_runner: CliRunner, affinity: object
) -> None:
    """The pod itself decodes (its struct reads no affinity); only the placement, decoded apart, fails."""
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    wants = pod_object("wants", "ml", [4])
    wants["spec"]["affinity"] = affinity
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object("n", [16], ip="10.0.0.1"), wants]}))
    result = cli_runner.invoke(explain_command, ["wants", "-n", "ml", "--from-file", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("warning: pod ml/wants: its affinity cannot be decoded (Expected `")
    assert result.stderr.endswith("); explained without it\n") and result.stderr.count("\n") == 1
    assert result.stdout.startswith("Pod ml/wants asks for 4 GiB on one GPU and fits on n now")


def test_a_pod_twice_in_a_file_is_explained_from_one_object_its_request_and_its_affinity(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """Two dumps concatenated into one list: explain reads the first copy, and the affinity is that copy's too."""
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    def twin(gib: int, zone: str) -> dict[str, object]:
        pod = pod_object("twin", "ml", [gib])
        term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
        pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]}}}
        return pod

    path = tmp_path / "c.json"
    items = [node_object("n", [16], ip="10.0.0.1"), twin(2, "first"), twin(3, "second")]
    path.write_text(json.dumps({"kind": "List", "items": items}))
    result = cli_runner.invoke(explain_command, ["twin", "-n", "ml", "--from-file", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Pod ml/twin asks for 2 GiB on one GPU")
    assert "(zone In (first)) does not match" in result.stdout and "second" not in result.stdout


def test_a_taint_with_a_null_value_in_a_file_is_read_as_go_reads_it(tmp_path: Path, cli_runner: CliRunner) -> None:
    """``value:`` left empty in YAML is ``null``: kubectl and kube-apiserver read "", so the node is judged by it."""
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    node = node_object("n", [16], ip="10.0.0.1")
    node["spec"]["taints"] = [{"key": "k", "value": None, "effect": "NoSchedule"}]
    tolerant = pod_object("tolerant", "ml", [4])
    tolerant["spec"]["tolerations"] = [{"key": "k", "operator": "Equal", "value": "", "effect": "NoSchedule"}]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node, pod_object("wants", "ml", [4]), tolerant]}))
    result = cli_runner.invoke(explain_command, ["wants", "-n", "ml", "--from-file", str(path)])
    assert result.exit_code == 0 and not result.stderr, result.output
    assert "  node/n: tainted k:NoSchedule, which the pod does not tolerate\n" in result.stdout
    fits = cli_runner.invoke(explain_command, ["tolerant", "-n", "ml", "--from-file", str(path)]).stdout
    assert fits.startswith("Pod ml/tolerant asks for 4 GiB on one GPU and fits on n now"), fits
    from kubectl_gpushare.inspect.doctor_command import doctor_command

    doctor = cli_runner.invoke(doctor_command, ["--from-file", str(path)])
    assert "node/n " in doctor.stdout and not doctor.stderr, doctor.output  # the node is checked, not skipped


@pytest.mark.parametrize("limit", ["-3", "99999999999999999999", "twelve"])
def test_an_invalid_gpu_memory_limit_is_said_invalid_in_doctors_words_never_a_fit(
    tmp_path: Path, cli_runner: CliRunner, limit: str
) -> None:
    """Beside a valid container, too: the extender refuses the whole pod, so explain never says it fits."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    wants = pod_object("wants", "ml", [4, 2])
    wants["spec"]["containers"][1]["resources"]["limits"]["aliyun.com/gpu-mem"] = limit
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object("n", [16], ip="10.0.0.1"), wants]}))
    argv = ["wants", "-n", "ml", "--from-file", str(path)]

    answer = json.loads(cli_runner.invoke(explain_command, [*argv, "-o", "json"]).stdout)
    text = cli_runner.invoke(explain_command, argv).stdout
    doctor = json.loads(cli_runner.invoke(doctor_command, ["-o", "json", "--from-file", str(path)]).stdout)

    (invalid,) = [f["message"] for f in doctor["findings"] if f["check"] == "invalid-value"]
    why = invalid.removeprefix("pod ml/wants ").removesuffix(", counted as 0")
    assert why.startswith("container 'sidecar-1' limit aliyun.com/gpu-mem: ") and shown_value(limit) in why
    assert (answer["state"], answer["request"], "nodes" in answer) == ("invalid-request", 0, False)
    assert answer["summary"] == text.strip()
    assert text.startswith(f"Pod ml/wants has an invalid aliyun.com/gpu-mem request ({why}): ")
    assert "fits" not in text


def test_a_placed_pod_with_an_invalid_limit_beside_a_valid_one_is_said_as_inspect_counts_it(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """Bound without the extender, its valid limit is held on the GPU (inspect shows it): explain says so."""
    from kubectl_gpushare.inspect.command import inspect_command
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    placed = pod_object("placed", "ml", [4, 2], node="n", gpu=0, gpu_memory=16)
    placed["spec"]["containers"][1]["resources"]["limits"]["aliyun.com/gpu-mem"] = "-3"
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object("n", [16], ip="10.0.0.1"), placed]}))

    text = cli_runner.invoke(explain_command, ["placed", "-n", "ml", "--from-file", str(path)]).stdout
    report = json.loads(cli_runner.invoke(inspect_command, ["-o", "json", "--from-file", str(path)]).stdout)

    assert report["nodes"][0]["used"] == 4
    assert text.startswith("Pod ml/placed has an invalid aliyun.com/gpu-mem request (container 'sidecar-1' ")
    assert "inspect counts its valid limits, 4 GiB, on n (kubectl gpushare doctor: invalid-value)." in text
    assert "no GPU counts it" not in text


@pytest.mark.parametrize(("pod", "said"), [("going", 'resourceclaim "held" is being deleted'),
                                           ("crowded", "resourceclaim in use")])
def test_an_unbound_pod_whose_allocated_claim_kube_scheduler_refuses_is_pending_as_doctor_says(
    tmp_path: Path, cli_runner: CliRunner, pod: str, said: str
) -> None:
    """A pod not bound, whose claims are all allocated, is placed only if DynamicResources lets it use them: a claim
    being deleted, or reserved for 256 other pods, stops it (dynamicresources.go), in the words doctor reports
    (tests/golden/doctor/prefilter.txt). Before, explain said such a pod "is placed on" the claim's node."""
    from golden.doctor import cases as doctor_cases

    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": doctor_cases.prefilter()}))
    result = cli_runner.invoke(explain_command, [pod, "-n", "team-p", "-o", "json", "--from-file", str(path)])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["state"] == "pending", answer
    assert str(answer["summary"]).endswith(f"kube-scheduler cannot schedule it: {said}."), answer["summary"]
    text = cli_runner.invoke(explain_command, [pod, "-n", "team-p", "--from-file", str(path)]).stdout
    assert "placed" not in text
    assert f"cannot be scheduled: {said}" in (doctor_cases.GOLDEN / "prefilter.txt").read_text()


@pytest.mark.parametrize("entries", [[{"name": "gpu", "resourceClaimName": 7}], ["gpu"], "gpu", {"name": "gpu"},
                                     {}, "", 0, False],
                         ids=["a-field-not-a-string", "an-entry-not-an-object", "a-string", "an-object",
                              "an-empty-object", "an-empty-string", "zero", "false"])
def test_claim_entries_that_cannot_be_read_are_said_once_without_any_dra_object(
    tmp_path: Path, cli_runner: CliRunner, entries: object
) -> None:
    """A file of a node and a pod whose ``spec.resourceClaims`` does not read as entries, and no DRA object at all:
    explain says so in one line (state ``invalid-claims``) and doctor in one finding, whatever else the pod asks.
    Before, explain said the pod requests no aliyun.com/gpu-mem and doctor found nothing. An empty list is no
    claims, said as before."""
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.sandbox.builders import node_object, pod_object

    broken, empty = pod_object("broken", "ml", [0]), pod_object("empty", "ml", [0])
    broken["spec"]["resourceClaims"], empty["spec"]["resourceClaims"] = entries, []
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [node_object("n", [16], ip="10.0.0.1"), broken, empty]}))

    answer = json.loads(cli_runner.invoke(explain_command, ["broken", "-n", "ml", "--from-file", str(path),
                                                            "-o", "json"]).stdout)
    text = cli_runner.invoke(explain_command, ["broken", "-n", "ml", "--from-file", str(path)]).stdout
    doctor = json.loads(cli_runner.invoke(doctor_command, ["-o", "json", "--from-file", str(path)]).stdout)
    assert (answer["state"], answer["request"]) == ("invalid-claims", 0)
    assert text.strip() == answer["summary"]
    assert answer["summary"].startswith("Pod ml/broken has a spec.resourceClaims that cannot be read (")
    assert "only a file or a tampered store holds one" in answer["summary"]
    assert [(f["check"], f["object"]) for f in doctor["findings"] if f["object"].startswith("pod/")] == [
        ("dra-claims-unreadable", "pod/ml/broken")]
    empty_answer = json.loads(cli_runner.invoke(explain_command, ["empty", "-n", "ml", "--from-file", str(path),
                                                                  "-o", "json"]).stdout)
    assert empty_answer["state"] == "no-request"


def test_a_bound_pod_whose_claim_entries_cannot_be_read_is_said_where_inspect_counts_its_claims(
    tmp_path: Path, cli_runner: CliRunner
) -> None:
    """A pod bound to a node of our driver whose ``spec.resourceClaims`` does not read, with a claim allocated there and
    reserved for it: inspect counts the claim's 4 GiB for the pod (the views count a claim from its allocation and
    ``reservedFor``, not from the pod's entries), and explain says that node and that number. Before, explain and doctor
    said its claims were "counted and placed nowhere" while inspect showed them on GPU 0, and explain named no node."""
    from golden.inspect import build_dra_clusters as dra

    from kubectl_gpushare.inspect.command import inspect_command
    from kubectl_gpushare.inspect.doctor_command import doctor_command
    from kubectl_gpushare.kube.stacks.dra import UNREADABLE_CLAIMS
    from kubectl_gpushare.sandbox.builders import node_object

    broken = dra.dra_pod("broken", "dra-u", "broken-gpu", namespace="team-u")
    broken["spec"]["resourceClaims"] = {"name": "gpu", "resourceClaimName": "broken-gpu"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"kind": "List", "items": [
        dra.device_class(), node_object("dra-u", [], ip="10.9.9.1", gpushare=False, dra=True),
        dra.resource_slice("dra-u", dra.OUR_DRIVER, [dra.our_device(0, "16Gi", "1Gi", "T4", "dra-u")], "uuuuu"),
        dra.claim("broken-gpu", "dra-u", "gpu-0", "4Gi", ["broken"], namespace="team-u"), broken]}))
    report = json.loads(cli_runner.invoke(inspect_command, ["-o", "json", "--from-file", str(path)]).stdout)
    assert [(p["name"], p["memory"]) for p in report["nodes"][0]["gpus"][0]["pods"]] == [("broken", 4)]
    answer = json.loads(cli_runner.invoke(explain_command, ["broken", "-n", "team-u", "-o", "json", "--from-file",
                                                            str(path)]).stdout)
    assert (answer["state"], answer["node"], answer["summary"]) == (
        "invalid-claims", "dra-u",
        f"Pod team-u/broken {UNREADABLE_CLAIMS}; it is bound to dra-u, where inspect counts 4 GiB for it.")
    assert "a claim allocated and reserved for it still counts on its GPU" in UNREADABLE_CLAIMS
    doctor = json.loads(cli_runner.invoke(doctor_command, ["-o", "json", "--from-file", str(path)]).stdout)
    assert [(f["check"], f["message"]) for f in doctor["findings"]] == [("dra-claims-unreadable", UNREADABLE_CLAIMS)]
