"""Node selectors (core/v1 ``NodeSelector``) matched against a node: the one rule for every reader.

A pod's required node affinity (``explain``), a ResourceSlice's ``spec.nodeSelector`` and a
claim's ``status.allocation.nodeSelector`` (the DRA allocator stand-in and the views) all compile
their terms with `compile_selector` and ask `NodeSelector.matches`, so which nodes a selector
names is decided once. The rules are k8s.io/component-helpers ``scheduling/corev1/nodeaffinity``
(``nodeaffinity.go``): terms are ORed and a term's requirements ANDed; a term with no requirement
matches nothing (``isEmptyNodeSelectorTerm``); ``matchExpressions`` are label requirements
(``nodeSelectorRequirementsAsSelector``: In and NotIn need values, Exists and DoesNotExist none, Gt
and Lt exactly one base-10 int64; a label that is not an integer fails Gt/Lt); ``matchFields`` are
``In``/``NotIn`` with exactly one value over the node's fields, of which there is one,
``metadata.name`` (``extractNodeFields``; any other key reads "", as ``fields.Set.Get`` gives it,
though validation lets no pod or slice write one). A requirement that breaks these rules is a parse error:
`NewNodeSelector` (slices, allocations) refuses the whole selector, `NewLazyErrorNodeSelector`
(a pod's affinity) only the term it is in (``lazy``). A refused selector or term matches nothing.

Where this differs: upstream fails the whole allocation on a slice whose selector does not parse
(``GatherPools`` returns the error); here that slice alone matches no node (the caller warns once),
as one bad object must not break anything else. The keys and values of ``matchExpressions`` are
checked as ``labels.NewRequirement`` checks them, by `label_rule` (apimachinery's ``IsLabelKey``
and ``IsLabelValue``); those of ``matchFields`` are only bounded in length (the
key "" too, which ``fields.OneTermEqualSelector`` takes). A pod's affinity is refused only past
what a pod kube-apiserver accepts could hold (`MAX_POD_REQUIREMENTS` and its kin, from its 3 MiB
request body: upstream validation sets no count); a slice's or allocation's past
`MAX_REQUIREMENTS` / `MAX_VALUES`. A hostile selector costs compiling linear time, and matching a
node its distinct terms that can match, each once (`NodeSelector.live`). A pod's may be compiled a
share at a time (`RequiredAffinity.compile`: 285,000 requirements take seconds), each distinct term
once, every one checked before the selector is used.

A pod's required affinity is read once as kube-scheduler's NodeAffinity plugin reads it
(`required_affinity`): its PreFilter narrows the nodes to the names ``metadata.name In`` pins
(`prefilter_names`), and the words it reports that in (`NOT_IN_PREFILTER_REASON`,
`AFFINITY_CONFLICT`) are the sandbox's scheduler stand-in's and ``explain``'s alike.

`Requirement` is the label requirement every selector of the package matches with (the text
grammar in `kube.selectors` builds the same ones). Pure; imports only `protocol` and `label_rule`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from kubectl_gpushare import protocol
from kubectl_gpushare.label_rule import valid_label_key, valid_label_values

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)
_INTEGER: Final = re.compile(r"(-?)0*([0-9]{1,19})")
"""A sign, any leading zeros (``strconv.ParseUint``'s digit loop skips them), then at most 19 digits."""
MAX_KEY: Final = 253 + 1 + 63
"""Longest label key: a DNS-subdomain prefix, ``/``, a name."""
MAX_VALUE: Final = 253
"""Longest value kept (a node name; label values are at most 63)."""
MAX_REQUIREMENTS: Final = 1024
"""Requirements over all terms of a slice's or allocation's selector (or terms) past which it is refused."""
MAX_VALUES: Final = 4096
"""Values over all requirements of a slice's or allocation's selector past which it is refused."""
MAX_REQUEST_BYTES: Final = protocol.API_MAX_REQUEST_BYTES
"""kube-apiserver's limit on a request body: no pod is written larger.

Pod validation (``ValidateNodeSelector``) sets no limit on terms, requirements or values, so a
pod's affinity is bounded only by its size: each bound below is the most of one thing a 3 MiB
protobuf body could hold, at its smallest encoding. Past it the pod cannot exist; it is refused.
"""
MAX_POD_TERMS: Final = MAX_REQUEST_BYTES // 2
"""An empty term (valid in a pod, matching nothing) is 2 bytes: its field tag and a zero length."""
MAX_POD_REQUIREMENTS: Final = MAX_REQUEST_BYTES // 11
"""The smallest valid requirement, key ``a`` ``In`` ``[""]``, is 9 bytes, 11 with its tag and length."""
MAX_POD_VALUES: Final = MAX_REQUEST_BYTES // 2
"""A value ``""`` is 2 bytes: its field tag and a zero length."""

NODE_NAME_FIELD: Final = "metadata.name"
"""The one field a node has for ``matchFields`` (``extractNodeFields``; pod validation allows no other key)."""


NODE_OPERATORS: Final = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!", "Gt": "gt",
                         "Lt": "lt"}
"""``NodeSelectorRequirement`` (core/v1) operators, as `Requirement` writes them."""
_FIELD_OPERATORS: Final = ("In", "NotIn")
"""``nodeSelectorRequirementsAsFieldSelector``: the only operators of ``matchFields``."""
WIRE_OPERATORS: Final = {op: name for name, op in NODE_OPERATORS.items()}
"""`Requirement.op` -> the ``NodeSelectorRequirement`` operator that writes it."""


def int64_value(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``'s value (sign "-" only); None where it refuses ``text``.

    src/strconv/atoi.go: any number of leading zeros, then a value in range; `int` only ever reads
    the 19 digits after the zeros, so a hostile megabyte of them costs one linear scan.
    """
    match = _INTEGER.fullmatch(text)
    if match is None:
        return None
    value = int(text) if len(text) <= 20 else int(match.group(1) + match.group(2))  # a label is short
    return value if INT64_MIN <= value <= INT64_MAX else None


def int64_text(text: str) -> bool:
    """Whether ``text`` is a base-10 int64, as ``strconv.ParseInt(text, 10, 64)`` accepts it (sign "-" only)."""
    return int64_value(text) is not None


_SCANNED_VALUES: Final = 8
"""Values of a requirement past which `Requirement.members` is a set."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One label requirement: ``key op values``.

    Slotted, as `NodeTerm`: a pod's affinity may compile to a million of them (no ``__dict__`` each
    for the garbage collector to walk).
    """

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()
    members: Container[str] = dataclasses.field(init=False, repr=False, compare=False)
    """The values to test a label against: a set past a few (a pod's one requirement may list 1.5M values).
    Upstream (``labels.Requirement.hasValue``) scans them; the answer is the same, each node pays a look-up."""
    bound: int | None = dataclasses.field(init=False, repr=False, compare=False)
    """A ``gt``/``lt`` value as ``ParseInt`` reads it, once (None: another operator, or no integer)."""

    def __post_init__(self) -> None:
        """Work out `members` once, with the requirement (its compiling pays for it, not a cycle's first node)."""
        members = frozenset(self.values) if len(self.values) > _SCANNED_VALUES else self.values
        object.__setattr__(self, "members", members)
        is_bound = self.op in ("gt", "lt") and len(self.values) == 1
        object.__setattr__(self, "bound", int64_value(self.values[0]) if is_bound else None)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label map satisfies this requirement."""
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.members
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.members
        if not present:
            return False
        actual = int64_value(labels[self.key])
        if actual is None or self.bound is None:  # labels.Requirement.Matches: what ParseInt refuses fails
            return False
        return actual > self.bound if self.op == "gt" else actual < self.bound


class WireRequirement(Protocol):
    """A ``NodeSelectorRequirement`` as any decoder of the package holds it."""

    @property
    def key(self) -> str: ...  # noqa: D102
    @property
    def operator(self) -> str: ...  # noqa: D102
    @property
    def values(self) -> Sequence[str]: ...  # noqa: D102


class WireTerm(Protocol):
    """A ``NodeSelectorTerm`` as any decoder of the package holds it."""

    @property
    def match_expressions(self) -> Sequence[WireRequirement]: ...  # noqa: D102
    @property
    def match_fields(self) -> Sequence[WireRequirement]: ...  # noqa: D102


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """One compiled term: label requirements and ``metadata.name`` requirements, all of which must hold."""

    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()
    error: str = ""
    """Why the term does not parse ("" when it does); such a term matches nothing."""

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """``nodeSelectorTerm.match``: every label requirement, and the field ones when the node has a name."""
        if self.error or not (self.labels or self.fields):
            return False
        if not all(r.matches(labels) for r in self.labels):
            return False
        return not name or all(_field_matches(r, name) for r in self.fields)


_INDEXED_PAST: Final = 8
"""Live terms past which a selector indexes them (`_TermIndex`); fewer are asked one by one."""
MAX_VERDICTS: Final = 100_000
"""Node verdicts a selector keeps (`NodeSelector.verdict`) before it starts afresh: more than any cluster's nodes."""


_Filed = NodeTerm | list[NodeTerm]
"""The terms filed under one anchor: the one term itself until a second comes (a pod's 1.5M values would
otherwise cost a list each)."""


def _file(index: dict[str, _Filed], anchor: str, term: NodeTerm) -> None:
    """File ``term`` under ``anchor`` once (terms are filed one after another: a value listed twice is one)."""
    filed = index.get(anchor)
    if filed is None:
        index[anchor] = term
    elif isinstance(filed, NodeTerm):
        if filed is not term:
            index[anchor] = [filed, term]
    elif filed[-1] is not term:
        filed.append(term)


def _filed(filed: _Filed | None) -> Sequence[NodeTerm]:
    return () if filed is None else (filed,) if isinstance(filed, NodeTerm) else filed


def _name_anchor(term: NodeTerm) -> Requirement | None:
    """A term's first ``metadata.name In``: the term matches no node named otherwise (None: it pins no name)."""
    return next((r for r in term.fields if r.key == NODE_NAME_FIELD and r.op == "in"), None)


@dataclass(frozen=True)
class _TermIndex:
    """A selector's live terms by what a node must have for each to match, so a node asks only its candidates.

    Each term is filed once, under one requirement it cannot match without (its anchor): the first
    label ``In`` (under each of its values, by key), else the first label ``Exists``/``Gt``/``Lt``
    (under its key), else the first ``metadata.name In`` (under each name; a node without a name
    skips field requirements, so asks them all); a term with none of these is asked of every node.
    A node's candidates are then its labels' and name's terms and those: a term not among them
    cannot match it, so the answer is the terms' OR, in time linear in the labels and candidates.
    """

    by_value: dict[str, dict[str, _Filed]]
    by_key: dict[str, _Filed]
    by_name: dict[str, _Filed]
    named: list[NodeTerm]
    everywhere: list[NodeTerm]

    @classmethod
    def of(cls, terms: Iterable[NodeTerm]) -> _TermIndex:
        index = cls({}, {}, {}, [], [])
        for term in terms:
            index.add(term)
        return index

    def add(self, term: NodeTerm) -> None:
        """File one more live term (after those filed before it)."""
        present: Requirement | None = None
        for requirement in term.labels:
            if requirement.op == "in":
                values = self.by_value.setdefault(requirement.key, {})
                for value in requirement.values:
                    _file(values, value, term)
                return
            if present is None and requirement.op in ("exists", "gt", "lt"):
                present = requirement
        if present is not None:
            _file(self.by_key, present.key, term)
            return
        anchor = _name_anchor(term)
        if anchor is not None:
            self.named.append(term)
            for value in anchor.values:
                _file(self.by_name, value, term)
            return
        self.everywhere.append(term)

    def candidates(self, labels: Mapping[str, str], name: str) -> Iterator[NodeTerm]:
        """The terms that may match the node, each once."""
        yield from self.everywhere
        for key, value in labels.items():
            values = self.by_value.get(key)
            if values is not None:
                yield from _filed(values.get(value))
            yield from _filed(self.by_key.get(key))
        yield from _filed(self.by_name.get(name)) if name else self.named


@dataclass(frozen=True)
class NodeSelector:
    """A compiled node selector; ``error`` non-empty: refused, it matches no node."""

    terms: tuple[NodeTerm, ...] = ()
    error: str = ""

    @classmethod
    def _built(cls, terms: tuple[NodeTerm, ...], live: tuple[NodeTerm, ...], index: _TermIndex,
               read: tuple[frozenset[str], bool]) -> NodeSelector:
        """A lazy selector whose live terms, index and keys `_Compiling` worked out term by term."""
        selector = cls(terms)
        selector.__dict__.update(live=live, _index=index if len(live) > _INDEXED_PAST else None, _read=read)
        return selector

    @functools.cached_property
    def live(self) -> tuple[NodeTerm, ...]:
        """The terms that can match anything, each once: what `matches` asks (a pod may hold a million terms)."""
        usable = () if self.error else (t for t in self.terms if not t.error and (t.labels or t.fields))
        return tuple(dict.fromkeys(usable))

    @functools.cached_property
    def names_reached(self) -> frozenset[str] | None:
        """The only node names the selector can match (each live term pins names by ``metadata.name In``); None: any.

        A superset (a term's other requirements are not read): the caller still asks `matches`.
        """
        names: set[str] = set()
        for term in self.live:
            anchor = _name_anchor(term)
            if anchor is None:
                return None
            names.update(anchor.values)
        return frozenset(names)

    @functools.cached_property
    def _index(self) -> _TermIndex | None:
        return _TermIndex.of(self.live) if len(self.live) > _INDEXED_PAST else None

    @functools.cached_property
    def _read(self) -> tuple[frozenset[str], bool]:
        """The label keys the live terms read, and whether any reads the node's name (has ``matchFields``)."""
        keys = frozenset(r.key for term in self.live for r in term.labels)
        return keys, any(term.fields for term in self.live)

    @functools.cached_property
    def _verdicts(self) -> dict[tuple[tuple[tuple[str, str], ...], str], bool]:
        return {}

    def _seen_as(self, labels: Mapping[str, str], name: str) -> tuple[tuple[tuple[str, str], ...], str]:
        """What of a node the verdict depends on: its labels of the keys the terms read, and its name if one does."""
        keys, reads_name = self._read
        return tuple(sorted(item for item in labels.items() if item[0] in keys)), name if reads_name else ""

    def asked(self, labels: Mapping[str, str], name: str) -> Iterable[NodeTerm]:
        """The terms that may match the node (its labels and name): the live ones, past a few only its candidates."""
        return self.live if self._index is None else self._index.candidates(labels, name)

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """Whether the node (its labels and name) is selected: some term matches."""
        return self.verdict(labels, name)[0]

    @functools.cached_property
    def _requirements(self) -> int:
        """The requirements the live terms hold: what `verdict` counts of a node that asks them all."""
        return sum(len(t.labels) + len(t.fields) for t in self.live)

    @functools.cached_property
    def _kept(self) -> bool:
        """Whether verdicts are kept: past a few terms, or a few requirements (one term may hold 285,000)."""
        return self._index is not None or self._requirements > _INDEXED_PAST

    def verdict(self, labels: Mapping[str, str], name: str) -> tuple[bool, int]:
        """Whether the node is selected, and how many requirements the terms it asked hold (0: known already).

        Past a few terms (or requirements) a verdict is kept by what of the node it depends on
        (`_seen_as`): nodes that share it (those of a rack, when only ``rack`` is read) share the
        verdict, and a node asked again (the scheduler's next cycle) costs a look-up. A pod may hold
        280,000 terms no index narrows (``NotIn`` only), or one term of 285,000 requirements, about
        150 ms a node: upstream asks them all of every node.
        """
        if not self._kept:
            return any(term.matches(labels, name) for term in self.live), self._requirements
        seen_as = self._seen_as(labels, name)
        known = self._verdicts.get(seen_as)
        if known is not None:
            return known, 0
        asked, matched = 0, False
        for term in self.asked(labels, name):
            asked += len(term.labels) + len(term.fields)
            if term.matches(labels, name):
                matched = True
                break
        if len(self._verdicts) >= MAX_VERDICTS:  # labels that change forever (a counter) must not grow it forever
            self._verdicts.clear()
        self._verdicts[seen_as] = matched
        return matched, asked

    def wire(self) -> dict[str, object]:
        """The selector as the API writes it (``NodeSelector``, Go field names)."""
        def one(r: Requirement) -> dict[str, object]:
            entry: dict[str, object] = {"key": r.key, "operator": WIRE_OPERATORS[r.op]}
            if r.values:
                entry["values"] = list(r.values)
            return entry

        terms: list[dict[str, object]] = []
        for term in self.terms:
            body: dict[str, object] = {}
            if term.labels:
                body["matchExpressions"] = [one(r) for r in term.labels]
            if term.fields:
                body["matchFields"] = [one(r) for r in term.fields]
            terms.append(body)
        return {"nodeSelectorTerms": terms}


def _field_matches(requirement: Requirement, name: str) -> bool:
    """One ``matchFields`` requirement on a node named ``name``: ``fields.OneTermEqualSelector``/``NotEqual``.

    The node's fields are ``fields.Set{"metadata.name": name}``; ``Set.Get`` of any other key is "",
    so ``In [""]`` on another key matches every node, ``NotIn [""]`` none, and other values the reverse.
    """
    actual = name if requirement.key == NODE_NAME_FIELD else ""
    return (actual in requirement.members) == (requirement.op == "in")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 63 else text[:63] + "...")


def _requirement(raw: WireRequirement, field: bool) -> Requirement | str:
    """One requirement compiled, or why it does not parse."""
    key, operator, values = raw.key, raw.operator, tuple(raw.values)
    if len(key) > MAX_KEY:
        return f"key {_shown(key)} is too long"
    if values and max(map(len, values)) > MAX_VALUE:
        return f"{key}: a value is too long"
    if field:  # nodeSelectorRequirementsAsFieldSelector checks operator and count, not the key (any key reads "")
        if operator not in _FIELD_OPERATORS:
            return f"matchFields {key}: operator {_shown(operator)} is not In or NotIn"
        if len(values) != 1:
            return f"matchFields {key}: {operator} must have one value"
        return Requirement(key, NODE_OPERATORS[operator], values)
    if not valid_label_key(key):  # labels.NewRequirement: validateLabelKey, then each validateLabelValue
        return f"key {_shown(key)} is not a valid label key"
    if not valid_label_values(values):
        return f"{key}: a value is not a valid label value"
    op = NODE_OPERATORS.get(operator)
    if op is None:
        return f"{key}: unknown operator {_shown(operator)}"
    if op in ("in", "notin") and not values:
        return f"{key}: {operator} needs values"
    if op in ("exists", "!") and values:
        return f"{key}: {operator} takes no values"
    if op in ("gt", "lt") and (len(values) != 1 or not int64_text(values[0])):
        return f"{key}: {operator} needs one integer value"
    return Requirement(key, op, values)


_EMPTY_TERM: Final = NodeTerm()
"""Every term with no requirement, shared: a pod may hold 1.5M (`MAX_POD_TERMS`), 100 bytes each if apart."""


class _TermSteps:
    """One term compiled a requirement at a time, as `_Compiling` spends its work (a term may hold 285,000)."""

    def __init__(self, raw: WireTerm) -> None:
        """Nothing is compiled yet; a term with no requirement is `_EMPTY_TERM` at once."""
        self.raw = raw
        self.term: NodeTerm | None = None if raw.match_expressions or raw.match_fields else _EMPTY_TERM
        """The compiled term, once every requirement is (or one does not parse)."""
        self._field = False
        self._at = 0
        self._found: tuple[list[Requirement], list[Requirement]] = ([], [])

    def advance(self, work: int) -> int:
        """Compile requirements until ``work`` units are spent (4, and 1 a value, each); returns those spent."""
        spent = 0
        while self.term is None and spent < work:
            requirements = self.raw.match_fields if self._field else self.raw.match_expressions
            if self._at == len(requirements):
                if self._field:
                    self.term = NodeTerm(tuple(self._found[0]), tuple(self._found[1]))
                self._field, self._at = True, 0
                continue
            requirement = requirements[self._at]
            self._at += 1
            spent += 4 + len(requirement.values)
            got = _requirement(requirement, self._field)
            if isinstance(got, str):
                self.term = NodeTerm(error=got)
            else:
                self._found[self._field].append(got)
        return spent


def _term(raw: WireTerm) -> NodeTerm:
    steps = _TermSteps(raw)
    steps.advance(1 << 62)
    assert steps.term is not None
    return steps.term


def compile_selector(terms: Sequence[WireTerm], *, lazy: bool = False) -> NodeSelector:
    """Compile ``nodeSelectorTerms`` (the terms of a pod's required affinity, a slice's, an allocation's).

    Args:
        terms: the decoded terms, of any of the package's decoders.
        lazy: a term that does not parse matches nothing and the others still count
            (``NewLazyErrorNodeSelector``, a pod's affinity), and only a selector no pod could
            hold is refused (`MAX_POD_TERMS`, `MAX_POD_REQUIREMENTS`, `MAX_POD_VALUES`); False:
            the whole selector is refused (``NewNodeSelector``, slices and allocations), as it is
            past `MAX_REQUIREMENTS` or `MAX_VALUES`.

    Returns:
        The selector; its ``error`` says why it is refused (then it matches no node).
    """
    if lazy:
        return _Compiling(terms).finish()
    refused = _past_bounds(terms, MAX_REQUIREMENTS, MAX_REQUIREMENTS, MAX_VALUES)
    if refused:
        return NodeSelector(error=refused)
    compiled = tuple(_term(term) for term in terms)
    return NodeSelector(compiled, next((f"term {i}: {t.error}" for i, t in enumerate(compiled) if t.error), ""))


def _past_bounds(terms: Sequence[WireTerm], most_terms: int, most_requirements: int, most_values: int) -> str:
    """Why a selector is refused for its size before any term is compiled ("" when it is not)."""
    requirements = sum(len(t.match_expressions) + len(t.match_fields) for t in terms)
    if requirements > most_requirements:
        return f"more than {most_requirements} requirements"
    if len(terms) > most_terms:  # empty terms cost compiling too
        return f"more than {most_terms} terms"
    values = sum(len(r.values) for t in terms for r in (*t.match_expressions, *t.match_fields))
    if values > most_values:
        return f"more than {most_values} values"
    return ""


WORK_PER_TERM: Final = 8
"""`_Compiling`'s work units for a term, beside 4 per requirement and 1 per value (`_TermSteps`): about equal
times each; finding a term compiled already costs 1, 1 per requirement and 1 per 8 values (hashing it)."""


def _hashable(term: WireTerm) -> bool:
    try:
        hash(term)
    except TypeError:  # a decoder's term holding lists
        return False
    return True


class _Compiling:
    """A pod's required terms (``lazy``) compiled a share at a time, so no one scheduling cycle pays for them all.

    Each term is compiled (`_term`), kept once among the live ones (`NodeSelector.live`), filed in
    the index (`_TermIndex.add`) and its keys noted (`NodeSelector._read`) as it comes: when the
    last is done the selector is what `compile_selector` makes of the terms at once, every term
    checked. A pod past the bounds (`_past_bounds`: no pod so large can exist) is refused whole.
    """

    def __init__(self, terms: Sequence[WireTerm]) -> None:
        """Check the bounds (linear: about 50 ms for the largest pod, before any budget); nothing is compiled yet."""
        self._terms = terms
        self._next = 0
        self._refused = _past_bounds(terms, MAX_POD_TERMS, MAX_POD_REQUIREMENTS, MAX_POD_VALUES)
        if self._refused:
            self._next = len(terms)
        self._current: _TermSteps | None = None
        """The term being compiled, when the work ran out in its middle."""
        self._compiled: list[NodeTerm] = []
        self._seen: dict[WireTerm, NodeTerm] = {}
        """Each distinct term as written, compiled, when terms hash (`types.NodeSelectorTerm`, a pod's, does)."""
        self._keyed = _hashable(terms[0]) if terms else False
        self._live: dict[NodeTerm, None] = {}
        self._index = _TermIndex.of(())
        self._keys: set[str] = set()
        self._reads_name = False

    @property
    def done(self) -> bool:
        """Whether every term is compiled."""
        return self._current is None and self._next >= len(self._terms)

    def advance(self, work: int) -> int:
        """Compile on until ``work`` units are spent (`WORK_PER_TERM`); returns those spent.

        A call of more than `WORK_PER_TERM` units compiles at least one requirement (or finds a term compiled).
        """
        spent = 0
        terms, compiled, live, index, keys = self._terms, self._compiled, self._live, self._index, self._keys
        while spent < work and not self.done:
            if self._current is None:
                raw = terms[self._next]
                self._next += 1
                known = self._seen.get(raw) if self._keyed else None
                if known is not None:  # the same term again (a template's repeats): compiled and filed once
                    requirements = (*raw.match_expressions, *raw.match_fields)
                    spent += 1 + len(requirements) + sum(len(r.values) for r in requirements) // 8
                    compiled.append(known)
                    continue
                spent += WORK_PER_TERM
                self._current = _TermSteps(raw)
            spent += self._current.advance(work - spent)
            term = self._current.term
            if term is None:
                break  # the work is spent mid-term: the next call goes on with it
            if self._keyed:
                self._seen[self._current.raw] = term
            self._current = None
            compiled.append(term)
            if term.error or not (term.labels or term.fields) or term in live:
                continue
            live[term] = None
            if len(live) > _INDEXED_PAST:  # NodeSelector._index: only past a few live terms
                for earlier in (live if len(live) == _INDEXED_PAST + 1 else (term,)):
                    index.add(earlier)
            keys.update(r.key for r in term.labels)
            self._reads_name = self._reads_name or bool(term.fields)
        return spent

    def finish(self) -> NodeSelector:
        """The selector, the terms left compiled now."""
        while not self.done:
            self.advance(1 << 62)
        if self._refused:
            return NodeSelector(error=self._refused)
        return NodeSelector._built(tuple(self._compiled), tuple(self._live), self._index,
                                   (frozenset(self._keys), self._reads_name))


NOT_IN_PREFILTER_REASON: Final = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
"""``findNodesThatFitPod``'s status for the nodes NodeAffinity's PreFilterResult leaves out (schedule_one.go)."""
AFFINITY_CONFLICT: Final = "pod affinity terms conflict"
"""NodeAffinity's ``errReasonConflict``: the ``metadata.name In`` requirements of each term leave it no name."""


class RequiredAffinity:
    """A pod's required node affinity as kube-scheduler's NodeAffinity plugin reads it: PreFilter, then Filter.

    Filter's selector is compiled when first asked for (`selector`), or a share per call of
    `compile` (the scheduler stand-in's cycles: a 3 MiB affinity costs seconds to compile).
    """

    def __init__(self, selector: NodeSelector | Sequence[WireTerm], names: frozenset[str] | None = None) -> None:
        """``selector``: compiled, or the terms to compile (``NewLazyErrorNodeSelector``); ``names``: PreFilter's."""
        self._selector = selector if isinstance(selector, NodeSelector) else None
        self._compiling = None if isinstance(selector, NodeSelector) else _Compiling(selector)
        self.names = names
        """PreFilter's ``PreFilterResult.NodeNames``: only these nodes are filtered (None: every node)."""

    @property
    def selector(self) -> NodeSelector:
        """What Filter matches each node with (``NewLazyErrorNodeSelector``), compiled now if it is not yet."""
        if self._selector is None:
            assert self._compiling is not None
            self._selector = self._compiling.finish()
            self._compiling = None
        return self._selector

    @property
    def compiled(self) -> bool:
        """Whether `selector` is compiled (asking for it costs nothing more)."""
        return self._compiling is None or self._compiling.done

    def compile(self, work: int) -> int:
        """Compile the next terms for about ``work`` units (`WORK_PER_TERM`); returns those spent (0: all done)."""
        return 0 if self._compiling is None else self._compiling.advance(work)

    @property
    def conflict(self) -> bool:
        """PreFilter rejects the pod outright (`AFFINITY_CONFLICT`): no node is left to filter."""
        return self.names is not None and not self.names

    def left_out(self, node: str) -> bool:
        """Whether PreFilter leaves ``node`` out (`NOT_IN_PREFILTER_REASON`): Filter never looks at it."""
        return self.names is not None and node not in self.names


def prefilter_names(terms: Sequence[WireTerm]) -> frozenset[str] | None:
    """NodeAffinity's PreFilter: the union over terms of the names each pins with ``metadata.name In``.

    A term that pins no name admits every node (None); within a term the pinned sets intersect
    (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go ``PreFilter``). Read from the
    terms as written: a term Filter refuses still pins its names. Linear in the values. No terms
    narrow nothing (None), as upstream's ``len(NodeSelectorTerms) == 0`` early return.
    """
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        pinned: set[str] | None = None
        for requirement in term.match_fields:
            if requirement.key == NODE_NAME_FIELD and requirement.operator == "In":
                pinned = set(requirement.values) if pinned is None else pinned & set(requirement.values)
        if pinned is None:
            return None
        names |= pinned
    return frozenset(names)


def required_affinity(terms: Sequence[WireTerm]) -> RequiredAffinity | None:
    """A pod's required node affinity terms read once for every node it is judged on; None: it has none."""
    return RequiredAffinity(terms, prefilter_names(terms)) if terms else None


def merged(selectors: Sequence[NodeSelector]) -> NodeSelector | None:
    """One term holding every requirement of the selectors' single terms, each once (None: no requirement).

    The allocator's ``createNodeSelector`` for devices of slices with a node selector (which
    validation keeps to one term): ``addNewNodeSelectorRequirements`` adds fields then expressions,
    slice after slice, skipping a requirement already there (same key, operator and set of values).
    """
    labels: list[Requirement] = []
    fields: list[Requirement] = []
    seen: set[tuple[bool, str, str, frozenset[str]]] = set()  # (field, key, op, values): each compared once
    for selector in selectors:
        for term in selector.terms[:1]:
            for field, found, adding in ((True, fields, term.fields), (False, labels, term.labels)):
                for requirement in adding:
                    same = (field, requirement.key, requirement.op, frozenset(requirement.values))
                    if same not in seen:
                        seen.add(same)
                        found.append(requirement)
    if not labels and not fields:
        return None
    return NodeSelector((NodeTerm(tuple(labels), tuple(fields)),))


__all__ = [
    "AFFINITY_CONFLICT",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_POD_REQUIREMENTS",
    "MAX_POD_TERMS",
    "MAX_POD_VALUES",
    "MAX_REQUEST_BYTES",
    "MAX_REQUIREMENTS",
    "MAX_VALUES",
    "MAX_VERDICTS",
    "NODE_NAME_FIELD",
    "NODE_OPERATORS",
    "NOT_IN_PREFILTER_REASON",
    "NodeSelector",
    "NodeTerm",
    "Requirement",
    "RequiredAffinity",
    "WORK_PER_TERM",
    "WireRequirement",
    "WireTerm",
    "compile_selector",
    "int64_text",
    "int64_value",
    "merged",
    "prefilter_names",
    "required_affinity",
]
