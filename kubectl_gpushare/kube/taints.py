"""Which node taints a pod's tolerations leave standing: the one rule `explain` and the scheduler stand-in ask.

kube-scheduler's TaintToleration filter (pkg/scheduler/framework/plugins/tainttoleration) calls
``v1helper.FindMatchingUntoleratedTaint`` over the node's NoSchedule and NoExecute taints; a taint
is tolerated when some toleration's ``Toleration.ToleratesTaint`` (k8s.io/api core/v1
``toleration.go``) holds: an effect, when set, must equal the taint's; a key, when set, must equal
the taint's (an empty key with ``Exists`` tolerates every taint); ``Equal`` (or an empty operator)
compares values, ``Exists`` does not; any other operator tolerates nothing. ``Lt``/``Gt`` compare
integers only behind the alpha TaintTolerationComparisonOperators gate, off by default, so here
they tolerate nothing, as with the gate off.

`TolerationIndex` is the one implementation of that rule: it answers in a few set lookups per
taint, for readers that judge many nodes by one pod (the scheduler stand-in, once per pod
version; ``explain``, once per pod), where a pod may hold as many tolerations as a 3 MiB request
body fits (about 85,000 of the shortest valid ones). `tolerates`, `untolerated` and
`kept_off_cordoned` build one per call: for a single question (and the tests' reference).

Pure; reads the typed `kube.types` structs, which callers holding plain JSON get with `decode_tolerations`
and `decode_taints` (None: the list does not have the API's shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, TypeVar

import msgspec

from kubectl_gpushare.kube.types import Taint, Toleration

_ListT = TypeVar("_ListT", tuple[Taint, ...], tuple[Toleration, ...])

BLOCKING_EFFECTS: Final = ("NoSchedule", "NoExecute")
"""The effects TaintToleration's filter considers (``PreferNoSchedule`` only scores)."""
UNSCHEDULABLE: Final = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
"""What a cordoned node's ``spec.unschedulable`` stands for: NodeUnschedulable
(pkg/scheduler/framework/plugins/nodeunschedulable) passes a pod that tolerates this taint."""
NOT_READY: Final = Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")
"""The taint a node that is not Ready carries (``TaintNodeNotReady``, put there by the node
lifecycle controller, which no stand-in runs): TaintToleration judges it as any other. Its
NoExecute twin is left out: DefaultTolerationSeconds admission, which the sandbox does not run,
gives every pod a toleration of it."""


_ANY_VALUE: Final = None
"""The value an ``Exists`` toleration is indexed under: it tolerates whatever value the taint has."""


class TolerationIndex:
    """A pod's tolerations keyed by (key, effect, value): ``ToleratesTaint`` (gate off) at O(1) per taint.

    A toleration tolerates a
    taint when its key is "" or the taint's, its effect "" or the taint's, and it is ``Exists`` or
    compares its value equal (``Equal`` or ""); so a taint is tolerated when one of the eight
    (key or "", effect or "", value or any) entries is present. Operators that tolerate nothing
    (``Lt``/``Gt`` with the gate off, unknown ones) are left out. Built once per pod version.

    Nodes judged per distinct taint set were considered: hashing a node's taint set costs as
    much as these lookups, and a cache of sets per pod would grow with the nodes.
    """

    __slots__ = ("_entries",)

    def __init__(self, tolerations: Iterable[Toleration]) -> None:
        """Index ``tolerations`` (each field "" when unset, as `types.Toleration` reads them)."""
        entries: set[tuple[str, str, str | None]] = set()
        for toleration in tolerations:
            if toleration.operator in ("", "Equal"):
                entries.add((toleration.key, toleration.effect, toleration.value))
            elif toleration.operator == "Exists":
                entries.add((toleration.key, toleration.effect, _ANY_VALUE))
        self._entries = frozenset(entries)

    def tolerates(self, taint: Taint) -> bool:
        """Whether any of the tolerations tolerates ``taint``."""
        entries = self._entries
        for key in (taint.key, ""):
            for effect in (taint.effect, ""):
                if (key, effect, taint.value) in entries or (key, effect, _ANY_VALUE) in entries:
                    return True
        return False

    def untolerated(self, taints: Sequence[Taint]) -> Taint | None:
        """``FindMatchingUntoleratedTaint``: the first NoSchedule/NoExecute taint none tolerates, or None."""
        for taint in taints:
            if taint.effect in BLOCKING_EFFECTS and not self.tolerates(taint):
                return taint
        return None

    def kept_off_cordoned(self) -> bool:
        """NodeUnschedulable on a node with ``spec.unschedulable``: whether none tolerates `UNSCHEDULABLE`."""
        return not self.tolerates(UNSCHEDULABLE)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint`` with the comparison operators' gate off (the index of one toleration)."""
    return TolerationIndex((toleration,)).tolerates(taint)


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates (``FindMatchingUntoleratedTaint``), or None."""
    return TolerationIndex(tolerations).untolerated(taints)


def kept_off_cordoned(tolerations: Sequence[Toleration]) -> bool:
    """NodeUnschedulable on a node with ``spec.unschedulable``: whether no toleration tolerates `UNSCHEDULABLE`."""
    return TolerationIndex(tolerations).kept_off_cordoned()


def _decode(raw: object, kind: type[_ListT]) -> _ListT | None:
    """A JSON list typed as ``kind``; None when ``raw`` is not one (null or empty: no entries)."""
    if not raw:
        return kind()
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError:
        return None


def decode_tolerations(raw: object) -> tuple[Toleration, ...] | None:
    """A pod's ``spec.tolerations`` held as plain JSON, typed; None when it is not a list of tolerations."""
    return _decode(raw, tuple[Toleration, ...])


def decode_taints(raw: object) -> tuple[Taint, ...] | None:
    """A node's ``spec.taints`` held as plain JSON, typed; None when it is not a list of taints."""
    return _decode(raw, tuple[Taint, ...])


__all__ = [
    "BLOCKING_EFFECTS",
    "NOT_READY",
    "UNSCHEDULABLE",
    "TolerationIndex",
    "decode_taints",
    "decode_tolerations",
    "kept_off_cordoned",
    "tolerates",
    "untolerated",
]
