"""The one node-selector rule (k8s.io/component-helpers scheduling/corev1/nodeaffinity/nodeaffinity.go)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.kube import types
from kubectl_gpushare.label_rule import valid_label_value
from kubectl_gpushare.node_affinity import (
    MAX_POD_REQUIREMENTS,
    MAX_POD_TERMS,
    MAX_POD_VALUES,
    MAX_REQUIREMENTS,
    MAX_VERDICTS,
    NodeSelector,
    RequiredAffinity,
    compile_selector,
    merged,
    prefilter_names,
    required_affinity,
)

NODE = ("n1", {"rack": "a", "gen": "4", "zone": "z1"})


def terms(*raw: dict[str, Any]) -> list[dra.WireNodeSelectorTerm]:
    """Terms as the API would send them, decoded by the DRA decoder (``matchExpressions``/``matchFields``)."""
    return dra.decode_wire({"nodeSelectorTerms": list(raw)}, dra.WireNodeSelector, "NodeSelector").node_selector_terms


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(("raw", "matches"), [
    ([{"matchExpressions": [expr("rack", "In", "a", "b")]}], True),
    ([{"matchExpressions": [expr("rack", "In", "a"), expr("zone", "NotIn", "z1")]}], False),  # ANDed
    ([{"matchExpressions": [expr("rack", "In", "b")]}, {"matchExpressions": [expr("gen", "Gt", "3")]}], True),  # ORed
    ([{"matchExpressions": [expr("gpu", "DoesNotExist")]}], True),
    ([{"matchExpressions": [expr("gpu", "Exists")]}], False),
    ([{"matchExpressions": [expr("gen", "Lt", "4")]}], False),
    ([{"matchExpressions": [expr("zone", "Gt", "1")]}], False),  # a label that is no integer fails Gt
    ([{"matchFields": [expr("metadata.name", "In", "n1")]}], True),
    ([{"matchFields": [expr("metadata.name", "NotIn", "n1")]}], False),
    ([{}], False),  # isEmptyNodeSelectorTerm: matches nothing
    ([], False),
], ids=["in", "anded", "ored", "does-not-exist", "exists", "lt", "gt-non-integer-label", "field-in",
        "field-not-in", "empty-term", "no-terms"])
def test_terms_are_ored_and_requirements_anded(raw: list[dict[str, Any]], matches: bool) -> None:
    selector = compile_selector(terms(*raw))
    assert not selector.error and selector.matches(NODE[1], NODE[0]) is matches


def test_a_bad_term_refuses_the_selector_unless_lazy() -> None:
    """NewNodeSelector refuses the selector; NewLazyErrorNodeSelector (a pod's affinity) only the term."""
    raw = terms({"matchExpressions": [expr("rack", "Near", "a")]}, {"matchExpressions": [expr("rack", "In", "a")]})
    strict = compile_selector(raw)
    assert "unknown operator 'Near'" in strict.error and not strict.matches(NODE[1], NODE[0])
    lazy = compile_selector(raw, lazy=True)
    assert not lazy.error and lazy.matches(NODE[1], NODE[0])


@pytest.mark.parametrize("requirement", [
    expr("gen", "Gt", "9223372036854775808"), expr("gen", "Gt", "4", "5"), expr("gen", "Lt"),
    expr("rack", "Exists", "a"), expr("rack", "NotIn"), expr("", "Exists"), expr("rack", "In", "x" * 300),
    expr("rack", "In", "a b"), expr("rack", "NotIn", "x" * 64), expr("a b", "Exists"), expr("/rack", "Exists"),
    expr("Example.com/rack", "Exists"), expr("gen", "Gt", "-5"),
], ids=["past-int64", "two-values", "no-value", "exists-with-values", "not-in-empty", "no-key", "long-value",
        "value-character", "value-past-63", "key-character", "empty-prefix", "upper-case-prefix",
        "negative-bound-is-no-label-value"])
def test_requirements_labels_new_requirement_refuses(requirement: dict[str, Any]) -> None:
    assert compile_selector(terms({"matchExpressions": [requirement]})).error


@pytest.mark.parametrize(("operator", "bound", "label", "matches"), [
    ("Lt", "0", "-9223372036854775808", True),  # int64's least value is an integer to ParseInt
    ("Gt", "5", "9223372036854775808", False),  # a label ParseInt refuses (past int64) fails Gt/Lt
    ("Lt", "5", "-9223372036854775809", False),
], ids=["least-label", "label-past-int64", "label-below-int64"])
def test_gt_lt_read_int64_as_parse_int(operator: str, bound: str, label: str, matches: bool) -> None:
    """labels.Requirement.Matches: both sides go through strconv.ParseInt(s, 10, 64)."""
    selector = compile_selector(terms({"matchExpressions": [expr("gen", operator, bound)]}))
    assert not selector.error and selector.matches({"gen": label}, "n1") is matches


def test_a_huge_slice_selector_is_refused_in_linear_time() -> None:
    many = terms(*({"matchExpressions": [expr(f"k{i}", "Exists")]} for i in range(MAX_REQUIREMENTS + 1)))
    assert compile_selector(many).error == f"more than {MAX_REQUIREMENTS} requirements"
    empty = terms(*({} for _ in range(MAX_REQUIREMENTS + 1)))  # no requirement, but each term costs
    assert compile_selector(empty).error == f"more than {MAX_REQUIREMENTS} terms"


def test_a_pod_affinity_past_a_thousand_terms_still_matches_by_its_valid_terms() -> None:
    """Pod validation sets no count: NewLazyErrorNodeSelector judges every term, a bad one matches nothing."""
    raw = [{"matchExpressions": [expr("rack", "In", f"r{i}")]} for i in range(3000)]
    raw[1500] = {"matchExpressions": [expr("rack", "Near", "a")]}  # refused: this term alone
    raw.append({"matchExpressions": [expr("rack", "In", "a")], "matchFields": [expr("metadata.name", "In", "n1")]})
    affinity = required_affinity(terms(*raw, *({} for _ in range(2000))))
    assert affinity is not None and not affinity.selector.error
    assert affinity.selector.matches(NODE[1], NODE[0]) and affinity.selector.matches({"rack": "r2999"}, "n2")
    assert not affinity.selector.matches({"rack": "x"}, "n2")
    assert len(affinity.selector.live) == 3000, "the refused and empty terms are never asked"


def test_identical_terms_are_matched_once() -> None:
    selector = compile_selector(terms(*[{"matchExpressions": [expr("rack", "In", "r0")]}] * 50_000), lazy=True)
    assert not selector.error and len(selector.live) == 1 and not selector.matches({"rack": "r1"}, "n1")


def test_a_pod_affinity_no_pod_could_hold_is_refused() -> None:
    """Each bound is what kube-apiserver's 3 MiB request body could hold at its smallest protobuf encoding."""
    assert MAX_POD_REQUIREMENTS == 3 * 1024 * 1024 // 11 and MAX_POD_TERMS == MAX_POD_VALUES == 3 * 1024 * 1024 // 2
    one = [expr("a", "In", "")]
    many = [{"matchExpressions": one * (MAX_POD_REQUIREMENTS // 2 + 1)}] * 2
    big = compile_selector(terms(*many), lazy=True)
    assert big.error == f"more than {MAX_POD_REQUIREMENTS} requirements" and not big.matches({"a": ""}, "n1")
    valued = compile_selector(terms({"matchExpressions": [expr("a", "In", *[""] * (MAX_POD_VALUES + 1))]}), lazy=True)
    assert valued.error == f"more than {MAX_POD_VALUES} values"


def test_merged_keeps_each_requirement_once_fields_first() -> None:
    a = compile_selector(terms({"matchExpressions": [expr("rack", "In", "a", "b")]}))
    b = compile_selector(terms({"matchExpressions": [expr("rack", "In", "b", "a")],
                                "matchFields": [expr("metadata.name", "NotIn", "n9")]}))
    both = merged([a, b])
    assert both is not None and both.wire() == {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "rack", "operator": "In", "values": ["a", "b"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}
    assert merged([]) is None


def test_merged_compares_fields_and_expressions_apart() -> None:
    """addNewNodeSelectorRequirements is called once for matchFields and once for matchExpressions."""
    a = compile_selector(terms({"matchFields": [expr("metadata.name", "NotIn", "n9")]}))
    b = compile_selector(terms({"matchExpressions": [expr("metadata.name", "NotIn", "n9")],
                                "matchFields": [expr("metadata.name", "NotIn", "n9")]}))
    both = merged([a, b])
    assert both is not None and both.wire() == {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}


@pytest.mark.parametrize(("raw", "names"), [
    ([{"matchFields": [expr("metadata.name", "In", "n1")]}, {"matchFields": [expr("metadata.name", "In", "n2")]}],
     {"n1", "n2"}),  # terms ORed: the union
    ([{"matchFields": [expr("metadata.name", "In", "n1", "n2"), expr("metadata.name", "In", "n2")]}],
     {"n2"}),  # requirements ANDed: the intersection (two values: Filter refuses the term, PreFilter does not)
    ([{"matchFields": [expr("metadata.name", "In", "n1")]}, {"matchExpressions": [expr("rack", "In", "a")]}],
     None),  # a term that pins no name admits every node
    ([{"matchFields": [expr("metadata.name", "NotIn", "n1")]}], None),
    ([{"matchFields": [expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n2")]}], set()),
], ids=["union", "intersection", "unpinned-term", "not-in", "conflict"])
def test_the_prefilter_narrows_to_the_names_metadata_name_in_pins(
    raw: list[dict[str, Any]], names: set[str] | None
) -> None:
    """nodeaffinity/node_affinity.go PreFilter: ``PreFilterResult.NodeNames``, empty: ``errReasonConflict``."""
    affinity = required_affinity(terms(*raw))
    assert affinity is not None and affinity.names == (None if names is None else frozenset(names))
    assert affinity.conflict is (names == set())
    assert affinity.left_out("n3") is (names is not None) and affinity.left_out("n2") is (names in (set(), {"n1"}))
    assert required_affinity([]) is None


def test_no_terms_narrow_nothing() -> None:
    """PreFilter returns before reading names when ``NodeSelectorTerms`` is empty: every node, no conflict."""
    assert prefilter_names([]) is None


@pytest.mark.parametrize(("operator", "value", "matches"), [
    ("In", "", True), ("NotIn", "", False), ("In", "n1", False), ("NotIn", "n1", True),
], ids=["in-empty", "not-in-empty", "in-name", "not-in-name"])
@pytest.mark.parametrize("key", ["spec.unschedulable", ""])
def test_match_fields_on_another_key_read_an_empty_field(key: str, operator: str, value: str, matches: bool) -> None:
    """nodeSelectorRequirementsAsFieldSelector takes any key; ``fields.Set.Get`` of one the node lacks is ""."""
    selector = compile_selector(terms({"matchFields": [expr(key, operator, value)]}))
    assert not selector.error and selector.matches(NODE[1], NODE[0]) is matches


_KEYS = st.sampled_from(["rack", "gen", "zone"])
_VALUES = st.sampled_from(["a", "b", "1", "4", "n1", "n2"])
_LABEL_REQUIREMENTS = st.one_of(
    st.builds(lambda k, op, vs: expr(k, op, *vs), _KEYS, st.sampled_from(["In", "NotIn"]),
              st.lists(_VALUES, min_size=1, max_size=3)),
    st.builds(lambda k, op: expr(k, op), _KEYS, st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(lambda k, op, v: expr(k, op, v), _KEYS, st.sampled_from(["Gt", "Lt"]), st.sampled_from(["0", "3"])),
)
_FIELD_REQUIREMENTS = st.builds(lambda op, v: expr("metadata.name", op, v), st.sampled_from(["In", "NotIn"]),
                                st.sampled_from(["n1", "n2"]))
_TERMS = st.lists(st.fixed_dictionaries({}, optional={
    "matchExpressions": st.lists(_LABEL_REQUIREMENTS, max_size=3),
    "matchFields": st.lists(_FIELD_REQUIREMENTS, max_size=2)}), min_size=9, max_size=30)
_NODES = st.tuples(st.dictionaries(_KEYS, _VALUES, max_size=3), st.sampled_from(["n1", "n2", ""]))


@settings(max_examples=300, deadline=None)
@given(_TERMS, st.lists(_NODES, min_size=1, max_size=5))
def test_the_term_index_answers_as_asking_every_term(raw: list[dict[str, Any]], nodes: list[Any]) -> None:
    """Past a few terms a selector asks a node only the terms it may match; the answer is every term's OR."""
    selector = compile_selector(terms(*raw), lazy=True)
    assert len(selector.terms) > 8
    for labels, name in nodes:
        assert selector.matches(labels, name) is any(t.matches(labels, name) for t in selector.terms)


def test_a_hundred_thousand_distinct_terms_cost_a_node_its_candidates_only() -> None:
    """100,000 ``rack In [rN]`` terms: a node with another rack is asked none of them, one on r7 one."""
    affinity = required_affinity(terms(*({"matchExpressions": [expr("rack", "In", f"r{i}")]} for i in range(100_000))))
    assert affinity is not None and len(affinity.selector.live) == 100_000
    assert list(affinity.selector.asked({"rack": "x", "zone": "z"}, "n1")) == []
    assert not affinity.selector.matches({"rack": "x", "zone": "z"}, "n1")
    on_r7 = {"rack": "r7"}
    assert len(list(affinity.selector.asked(on_r7, "n1"))) == 1 and affinity.selector.matches(on_r7, "n1")


@settings(max_examples=200, deadline=None)
@given(_TERMS, st.lists(_NODES, min_size=1, max_size=8))
def test_a_kept_verdict_is_the_one_asking_every_term_gives(raw: list[dict[str, Any]], nodes: list[Any]) -> None:
    """Verdicts are kept by what of a node the terms read: asked again, in any order, each node's is still right."""
    selector = compile_selector(terms(*raw), lazy=True)
    for labels, name in [*nodes, *reversed(nodes)]:
        assert selector.verdict(labels, name)[0] is any(t.matches(labels, name) for t in selector.terms)


def test_unnarrowed_terms_are_asked_once_per_set_of_the_labels_they_read() -> None:
    """142,000 ``NotIn`` terms reading ``rack``: the first node of a rack asks them all, the next of it none.

    Such terms are asked of every node (no index narrows ``NotIn``); a node's other labels and its
    name, which no term reads, do not make it another case. A term that reads the name does.
    """
    unnarrowed = [{"matchExpressions": [expr("rack", "NotIn", f"h{i}", "a")]} for i in range(142_000)]
    selector = compile_selector(terms(*unnarrowed), lazy=True)
    assert selector.verdict({"rack": "a", "kubernetes.io/hostname": "n1"}, "n1") == (False, 142_000)
    assert selector.verdict({"rack": "a", "kubernetes.io/hostname": "n2"}, "n2") == (False, 0)
    assert selector.verdict({"rack": "b"}, "n3") == (True, 1)
    named = compile_selector(terms(*unnarrowed[:9], {"matchFields": [expr("metadata.name", "NotIn", "n1")]}),
                             lazy=True)
    assert named.verdict({"rack": "a"}, "n1") == (False, 10)
    assert named.verdict({"rack": "a"}, "n2") == (True, 10)
    assert named.verdict({"rack": "a"}, "n1") == (False, 0)


def test_a_selectors_kept_verdicts_are_bounded_and_start_afresh_past_the_bound() -> None:
    """Nodes whose read labels change forever (a counter) never grow the verdicts past `MAX_VERDICTS`.

    The first node's verdict is kept while the bound holds; the verdict past it starts afresh, so the
    first node is asked its terms again (and its answer is still right).
    """
    selector = compile_selector(terms(*({"matchExpressions": [expr("rack", "NotIn", f"h{i}")]} for i in range(9))),
                                lazy=True)
    assert selector.verdict({"rack": "0"}, "n") == (True, 1)
    for count in range(1, MAX_VERDICTS):
        selector.verdict({"rack": str(count)}, "n")
    assert selector.verdict({"rack": "0"}, "n") == (True, 0)  # kept: MAX_VERDICTS held so far
    assert selector.verdict({"rack": str(MAX_VERDICTS)}, "n") == (True, 1)  # one more: the verdicts start afresh
    assert selector.verdict({"rack": "0"}, "n") == (True, 1)


def test_the_index_asks_each_term_once_however_its_anchor_repeats() -> None:
    """A term filed under a value listed twice, or beside other terms under the same value, is asked once."""
    raw = [{"matchExpressions": [expr("rack", "In", "r1", "r1", f"s{i}")]} for i in range(9)]
    raw.append({"matchExpressions": [expr("gen", "Exists")]})
    raw.append({"matchFields": [expr("metadata.name", "In", "n1")]})
    selector = compile_selector(terms(*raw), lazy=True)
    asked = list(selector.asked({"rack": "r1", "gen": "4"}, "n1"))
    assert len(asked) == len(set(map(id, asked))) == 11
    assert [len(list(selector.asked({"rack": f"s{i}"}, ""))) for i in (0, 8)] == [2, 2]  # its term, the named one


def test_a_selector_encodes_as_its_terms_and_error_only() -> None:
    """What `matches` derives (the live terms, their index) is cached, not a field: encoding and equality skip it."""
    import msgspec

    raw = terms(*({"matchExpressions": [expr("rack", "In", f"r{i}")]} for i in range(20)))
    selector = compile_selector(raw)
    assert selector.matches({"rack": "r3"}, "n1")
    assert set(msgspec.to_builtins(selector)) == {"terms", "error"}
    assert selector == compile_selector(raw)


@pytest.mark.parametrize(("raw", "names"), [
    ([{"matchFields": [expr("metadata.name", "In", "n1")]},
      {"matchFields": [expr("metadata.name", "In", "n2")], "matchExpressions": [expr("rack", "In", "a")]}],
     {"n1", "n2"}),
    ([{"matchFields": [expr("metadata.name", "In", "n1")]}, {"matchExpressions": [expr("rack", "In", "a")]}], None),
    ([{"matchFields": [expr("metadata.name", "In", "n1")]}, {}], {"n1"}),  # an empty term matches nothing
    ([{"matchFields": [expr("metadata.name", "NotIn", "n1")]}], None),
    ([{"matchExpressions": [expr("rack", "Bad", "a")]}, {"matchFields": [expr("metadata.name", "In", "n1")]}], set()),
], ids=["union", "unpinned-term", "empty-term", "not-in", "refused"])
def test_names_reached_are_the_names_every_live_term_pins(raw: list[dict[str, Any]], names: set[str] | None) -> None:
    """The superset of names a selector can match, so a caller asks only those nodes (a refused one: none)."""
    selector = compile_selector(terms(*raw))
    assert selector.names_reached == (None if names is None else frozenset(names))
    nodes = {"n1": {"rack": "a"}, "n2": {"rack": "a"}, "n3": {"rack": "a"}}
    assert names is None or all(n in names for n, labels in nodes.items() if selector.matches(labels, n))


def pod_terms(raw: list[dict[str, Any]]) -> tuple[types.NodeSelectorTerm, ...]:
    """Terms as a pod's affinity decodes them (`kube.types`: frozen, hashable, as the scheduler stand-in reads them)."""
    return msgspec.convert(raw, tuple[types.NodeSelectorTerm, ...])


_POD_TERMS = st.lists(st.sampled_from([
    {}, {"matchExpressions": [expr("rack", "In", "a")]}, {"matchExpressions": [expr("rack", "Bogus", "a")]},
    {"matchExpressions": [expr("gen", "Gt", "3"), expr("zone", "NotIn", "z1")]},
    {"matchFields": [expr("metadata.name", "In", "n1")]}, {"matchExpressions": [expr("rack", "In", "b", "c")]},
]) | st.fixed_dictionaries({}, optional={"matchExpressions": st.lists(_LABEL_REQUIREMENTS, max_size=3),
                                          "matchFields": st.lists(_FIELD_REQUIREMENTS, max_size=2)}),
                        min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(_POD_TERMS, st.lists(st.integers(0, 40), min_size=1, max_size=40), st.lists(_NODES, min_size=1, max_size=5))
def test_an_affinity_compiled_in_steps_is_the_one_compiled_at_once(
    raw: list[dict[str, Any]], steps: list[int], nodes: list[Any]
) -> None:
    """`RequiredAffinity.compile` (the scheduler's cycles) loses no term: terms, live ones, index and verdicts agree.

    Terms repeat (a repeat is found compiled) and some do not parse (they match nothing).
    """
    wire = pod_terms(raw)
    stepped = RequiredAffinity(wire)
    for work in steps:
        spent = stepped.compile(work)
        assert spent >= min(work, 1) or stepped.compiled
    at_once = NodeSelector(tuple(compile_selector(terms(term), lazy=True).terms[0] for term in raw))  # one by one
    assert stepped.selector.terms == at_once.terms and stepped.selector.live == at_once.live
    for labels, name in nodes:
        assert stepped.selector.verdict(labels, name)[0] is any(t.matches(labels, name) for t in at_once.terms)
        assert set(stepped.selector.asked(labels, name)) == set(at_once.asked(labels, name))


def test_one_requirement_of_a_million_values_compiles_and_matches_by_a_set() -> None:
    """1.5M values (what a pod can hold) are checked as label values in one pass and matched by a look-up."""
    values = [f"v{i}" for i in range(MAX_POD_VALUES - 1)]
    affinity = required_affinity(pod_terms([{"matchExpressions": [expr("rack", "In", *values)]}]))
    assert affinity is not None and affinity.selector.matches({"rack": "v1234567"}, "n")
    assert not affinity.selector.matches({"rack": "w"}, "n")
    for bad in ("-v", "v-", "v\nw", "v" * 64, "v w"):
        refused = required_affinity(pod_terms([{"matchExpressions": [expr("rack", "In", *values[:20], bad)]}]))
        assert refused is not None and refused.selector.terms[0].error == "rack: a value is not a valid label value"
        assert not refused.selector.matches({"rack": "v1"}, "n")


def test_one_term_of_many_requirements_keeps_its_verdicts_and_counts_its_requirements() -> None:
    """One term may hold 285,000 requirements (about 50 ms a node): its verdict is kept as many terms' are.

    The node's cost is the requirements its terms hold, which the scheduler's budget counts: a node
    of the same read labels is then known (0).
    """
    wide = [{"matchExpressions": [expr("rack", "NotIn", f"h{i}") for i in range(10_000)]}]
    selector = compile_selector(terms(*wide), lazy=True)
    assert selector.verdict({"rack": "a", "zone": "z1"}, "n1") == (True, 10_000)
    assert selector.verdict({"rack": "a", "zone": "z2"}, "n2") == (True, 0)  # zone is not read: the same case
    assert selector.verdict({"rack": "h3"}, "n3") == (False, 10_000)


def test_a_few_terms_asked_every_time_count_their_requirements_as_kept_verdicts_do() -> None:
    """Below the kept verdicts (8 requirements or fewer) a node still costs its terms' requirements, not their number.

    The scheduler's budget (`AFFINITY_BUDGET`) counts one unit whichever way the selector is asked.
    """
    few = terms({"matchExpressions": [expr("rack", "In", "a"), expr("zone", "In", "z1"), expr("gen", "Exists")]},
                {"matchExpressions": [expr("rack", "In", "b")]})
    selector = compile_selector(few, lazy=True)
    assert selector.verdict({"rack": "b"}, "n1") == (True, 4)
    assert selector.verdict({"rack": "b"}, "n1") == (True, 4)  # asked again: not kept, counted again
    assert selector.verdict({"rack": "c"}, "n2") == (False, 4)


_VALUE_TEXT = st.text("ab9Z-_.\n\u00e9 ", max_size=5) | st.just("v" * 63) | st.just("v" * 64)


@settings(max_examples=500, deadline=None)
@given(st.lists(_VALUE_TEXT, min_size=9, max_size=14))
def test_many_values_are_checked_by_the_one_label_value_rule(values: list[str]) -> None:
    """Past a few values a requirement's are checked joined, in one pass: refused as `valid_label_value` refuses one.

    Fails if the joined check lets through a value the rule refuses (a newline inside, an edge mark) or
    refuses a good one.
    """
    selector = compile_selector(terms({"matchExpressions": [expr("rack", "In", *values)]}), lazy=True)
    refused = selector.terms[0].error == "rack: a value is not a valid label value"
    assert refused is not all(valid_label_value(value) for value in values)
