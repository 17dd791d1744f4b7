"""`kube.taints`: ``Toleration.ToleratesTaint`` (k8s.io/api core/v1 toleration.go), case by case."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpushare.kube.taints import (
    UNSCHEDULABLE,
    TolerationIndex,
    decode_taints,
    decode_tolerations,
    kept_off_cordoned,
    tolerates,
    untolerated,
)
from kubectl_gpushare.kube.types import Taint, Toleration

TAINT = Taint(key="gpu", value="a100", effect="NoSchedule")


@pytest.mark.parametrize(("toleration", "expected"), [
    (Toleration(key="gpu", operator="Equal", value="a100", effect="NoSchedule"), True),
    (Toleration(key="gpu", operator="Equal", value="a100"), True),  # empty effect: every effect
    (Toleration(key="gpu", operator="Equal", value="a100", effect="NoExecute"), False),
    (Toleration(key="gpu", operator="Equal", value="h100"), False),
    (Toleration(key="gpu", operator="", value="a100"), True),  # empty operator means Equal
    (Toleration(key="gpu", operator="Exists"), True),
    (Toleration(key="other", operator="Exists"), False),
    (Toleration(operator="Exists"), True),  # empty key with Exists: every taint
    (Toleration(operator="Exists", effect="NoExecute"), False),
    (Toleration(key="", operator="Equal", value="a100"), True),  # empty key skips the key check upstream too
    (Toleration(key="gpu", operator="Bogus", value="a100"), False),  # an unknown operator tolerates nothing
    (Toleration(key="gpu", operator="Gt", value="1"), False),  # comparison operators: alpha gate off
], ids=["equal", "any-effect", "other-effect", "other-value", "empty-operator", "exists", "exists-other-key",
        "exists-no-key", "exists-no-key-other-effect", "equal-no-key", "unknown-operator", "gt-gate-off"])
def test_tolerates_follows_upstream(toleration: Toleration, expected: bool) -> None:
    assert tolerates(toleration, TAINT) is expected


def test_untolerated_skips_prefer_no_schedule_and_returns_the_first_blocking_taint() -> None:
    soft = Taint(key="soft", effect="PreferNoSchedule")
    hard = Taint(key="hard", value="1", effect="NoExecute")
    assert untolerated((soft, TAINT, hard), (Toleration(key="gpu", operator="Exists"),)) == hard
    assert untolerated((soft,), ()) is None


@pytest.mark.parametrize("raw", ["x", [1], [{"key": 1}], {"key": "a"}], ids=["string", "number", "key-int", "object"])
def test_decoders_refuse_what_is_not_a_list_of_entries(raw: object) -> None:
    assert decode_tolerations(raw) is None
    assert decode_taints(raw) is None


def test_decoders_read_the_api_shape() -> None:
    assert decode_tolerations([{"key": "gpu", "operator": "Exists", "tolerationSeconds": 5}]) == (
        Toleration(key="gpu", operator="Exists"),)
    assert decode_taints(None) == () and decode_taints([{"key": "gpu", "effect": "NoSchedule"}]) == (
        Taint(key="gpu", effect="NoSchedule"),)


def test_a_null_field_of_a_taint_reads_as_empty_as_go_decodes_it() -> None:
    """encoding/json leaves a string field "" for ``null`` (``literalStore``): the node is read, not refused."""
    assert decode_taints([{"key": "k", "value": None, "effect": "NoSchedule"}, {"key": None, "effect": None}]) == (
        Taint(key="k", effect="NoSchedule"), Taint())


def test_a_null_field_of_a_toleration_reads_as_empty_as_go_decodes_it() -> None:
    """``literalStore`` leaves a string "" for ``null``; an operator "" is Equal to ``ToleratesTaint``."""
    read = decode_tolerations([{"key": "gpu", "operator": None, "value": "a100", "effect": None},
                               {"key": None, "operator": "Exists", "value": None, "effect": "NoSchedule"},
                               {"key": "gpu", "operator": "Exists", "tolerationSeconds": None}])
    assert read == (Toleration(key="gpu", operator="", value="a100"),
                    Toleration(operator="Exists", effect="NoSchedule"), Toleration(key="gpu", operator="Exists"))
    assert all(tolerates(toleration, TAINT) for toleration in read or ())
    assert decode_tolerations([{"key": None, "value": 1}]) is None  # a number is still no string: refused


@pytest.mark.parametrize(("tolerations", "kept_off"), [
    ((), True),
    ((Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),), False),
    ((Toleration(operator="Exists"),), False),  # tolerates every taint, so the cordon too
    ((Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoExecute"),), True),
], ids=["none", "exact", "everything", "other-effect"])
def test_a_cordon_keeps_off_only_pods_that_do_not_tolerate_its_taint(
    tolerations: tuple[Toleration, ...], kept_off: bool
) -> None:
    # nodeunschedulable's Filter: TolerationsTolerateTaint(tolerations, node.kubernetes.io/unschedulable:NoSchedule)
    assert kept_off_cordoned(tolerations) is kept_off


# Few keys, values and effects, so that drawn tolerations and taints meet often; "" and the cordon's key included.
_KEYS = st.sampled_from(["", "gpu", "pool", UNSCHEDULABLE.key])
_VALUES = st.sampled_from(["", "a100", "h100"])
_EFFECTS = st.sampled_from(["", "NoSchedule", "NoExecute", "PreferNoSchedule", "Other"])
_TOLERATIONS = st.lists(st.builds(Toleration, key=_KEYS, value=_VALUES, effect=_EFFECTS,
                                  operator=st.sampled_from(["", "Equal", "Exists", "Lt", "Gt", "Bogus"])),
                        max_size=8)
_TAINTS = st.lists(st.builds(Taint, key=_KEYS, value=_VALUES, effect=_EFFECTS), max_size=6)


def _tolerates_plainly(toleration: Toleration, taint: Taint) -> bool:
    """The oracle: ``Toleration.ToleratesTaint`` (k8s.io/api core/v1 toleration.go) line by line, gate off.

    `taints.tolerates` is the index of one toleration, so checking the index against it alone would
    compare the index with itself.
    """
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


@settings(max_examples=600, deadline=None)
@given(tolerations=_TOLERATIONS, taints=_TAINTS)
def test_the_toleration_index_gives_the_plain_rules_verdicts(
    tolerations: list[Toleration], taints: list[Taint]
) -> None:
    """`TolerationIndex` (the scheduler stand-in's fast path) against ``ToleratesTaint`` toleration by toleration."""
    index = TolerationIndex(tolerations)
    for taint in taints:
        plainly = any(_tolerates_plainly(t, taint) for t in tolerations)
        assert index.tolerates(taint) is plainly
        assert any(tolerates(t, taint) for t in tolerations) is plainly
    blocking = [t for t in taints if t.effect in ("NoSchedule", "NoExecute")
                and not any(_tolerates_plainly(toleration, t) for toleration in tolerations)]
    assert index.untolerated(taints) == untolerated(taints, tolerations) == (blocking[0] if blocking else None)
    cordon_tolerated = any(_tolerates_plainly(t, UNSCHEDULABLE) for t in tolerations)
    assert index.kept_off_cordoned() is kept_off_cordoned(tolerations) is (not cordon_tolerated)
