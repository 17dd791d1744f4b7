"""A static worst-case cost bound for DRA device selectors, so one that could exhaust memory never runs.

The API server estimates each selector's worst-case cost when it validates a ResourceClaim, claim
template or DeviceClass and refuses one above ``CELSelectorExpressionMaxCost`` (1,000,000; k8s.io/api
resource/v1 types.go) with ``Forbidden: too complex, exceeds cost limit`` (pkg/apis/resource/validation
``validateCELSelector``). The estimate is cel-go's (``checker/cost.go``) over the declared ``device``
type (k8s.io/dynamic-resource-allocation ``cel/compile.go``: a driver name of at most 63 characters,
attribute and capacity maps of at most 32 domains of at most 32 entries, attribute values of at most 64
characters) plus the Kubernetes library costs (``k8s.io/apiserver/pkg/cel/library/cost.go``). Without it a
430-character selector that nests ``cel.bind`` over string concatenation (or chains ``.replace()``)
grows eightfold per level and allocates gigabytes when the scheduler evaluates it.

The sandbox's ValidatingAdmissionPolicies use the same estimate over the sizes of a request's actual
values (`value_size`), in place of cel-go's runtime cost tracker, which the sandbox's CEL lacks.

This module walks the checked expression (cel-spec's ``cel.expr.CheckedExpr``, which ``cel-expr-python``
serializes; the protos are vendored in `kube._api`) and follows those rules where sizes grow:

* sizes: string and bytes literals by their length, the ``device`` fields as declared above, a variable
  bound by ``cel.bind`` or a comprehension by the size of what it is bound to;
* concatenation (``+``) adds sizes and costs a tenth of the result; comparisons a tenth of the smaller
  side; ``contains`` the product of tenths; selection and variables 1, list literals 10, map 30;
* comprehensions (``all``, ``exists``, ``map``, ``filter``, ``cel.bind``) multiply the cost of their
  step by the size of their range, and an accumulator that grows per step grows by that size;
* the strings extension: ``replace``, ``join``, ``split``, ``format``, ``quote`` and the case and trim
  functions produce strings bounded from their inputs, and cost a tenth of what they traverse;
* the lists library (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``): the
  list's size times a comparison of an element; the sets extension: the product of the two sizes
  (twice for ``sets.equivalent``) times a comparison; ``url``, ``ip``, ``cidr`` and their ``is``
  forms a tenth of the text; IP and CIDR accessors 1, ``containsIP``/``containsCIDR`` a few units
  plus a tenth of a string argument (beyond upstream, as these run in Python: each set comparison
  and each URL, IP or CIDR parse has a floor, measured, `_PYTHON_COMPARISON`, `_PYTHON_PARSE`).

Conservative (refuses a little more than upstream), where exact parity would need cel-go's estimator
with the declared types: variables here are ``dyn``, so list concatenation is priced like string
concatenation (upstream: 1); ``replace`` assumes the worst replacement (an empty pattern); ``format``
(unpriced upstream) bounds each verb by the longest number or twice the longest element it prints; a
function this module does not know returns at most the sum of its inputs' sizes; a size that cannot be
known (a field ``device`` does not declare) is unbounded, as cel-go's unknown size is.

Beyond upstream, where cel-cpp (which runs the selectors here) does work upstream prices at 1, each
found by evaluating a selector estimated under the limit for seconds: ``matches`` weighs its pattern by
the program RE2 compiles on every call (a Unicode class alone takes 3 ms), not its length, and a pattern
built at run time as the largest program; ``size()`` and ``charAt()`` of a string scan it (cel-cpp
counts code points); a comparison or ``in`` pays for every string the lists or maps hold, not their
length, and each element or entry weighs ten characters (cel-cpp dispatches on its type); any other
function pays a traversal of its string inputs (``int()``, ``timestamp()``, ... parse them); a
well-known message (``google.protobuf.ListValue{values: l}``) is as large as the value it wraps;
``device.attributes`` and ``device.capacity`` also hold the domains a selector quotes (the allocator
adds them, `cel.selector_domains`).

Ordinary selectors (driver and attribute comparisons, capacity ``compareTo``, semver, ``cel.bind`` of
small values, comprehensions over the attribute maps) cost hundreds to thousands, far below the limit;
the most in the tests, a pattern matched against every attribute name, about 83,000.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.kube import cel_library
from kubectl_gpushare.kube._api import checked_pb2, syntax_pb2

MAX_COST: Final = 1_000_000
"""``CELSelectorExpressionMaxCost`` (k8s.io/api resource/v1 types.go)."""

UNBOUNDED: Final = 1 << 62
"""A size or cost that cannot be known; every sum and product saturates here, as cel-go's uint64s do."""

TOO_COMPLEX: Final = "too complex, exceeds cost limit"
"""The API server's detail (``validateCELSelector``: ``field.Forbidden``)."""

PYTHON_FUNCTIONS: Final = frozenset({
    "quantity", "isQuantity", "compareTo", "isGreaterThan", "isLessThan", "add", "sub", "sign", "isInteger",
    "asInteger", "asApproximateFloat", "semver", "isSemver", "major", "minor", "patch"}) | cel_library.FUNCTIONS
"""The functions `kube.cel` implements in Python (the quantity and semver libraries, and the lists, sets,
URL, IP and CIDR libraries of `kube.cel_library`; ``indexOf``, ``lastIndexOf`` and ``string`` share a
name with cel-cpp's, and pay as they do, more than upstream): cel-expr-python
copies every argument into Python on each call (a 200,000-entry map given to ``sign()`` 100 times took
8 s at an estimate of 851), so each call also pays every element, entry and character of its inputs."""

_TRAVERSAL: Final = 0.1  # common.StringTraversalCostFactor
_REGEX: Final = 0.25  # common.RegexStringLengthCostFactor
_LIST_CREATE: Final = 10  # checker/cost.go: createListBaseCost
_MAP_CREATE: Final = 30  # createMapBaseCost
_STRUCT_CREATE: Final = 40  # createMessageBaseCost
_SCALAR_TEXT: Final = 32  # the longest text a number, bool or null prints as (a double's shortest form)


@dataclass(frozen=True)
class Size:
    """The largest length of a value (characters, bytes, elements or entries; 1 for a scalar).

    ``entry`` bounds a list's elements or a map's values, ``key`` a map's keys (``None`` for a list),
    ``fields`` an object's fields (the ``device`` variable). ``total``, where a known value gave the
    size (`value_size`), is what a comparison of such a value traverses (`_volume`): its characters,
    and its elements and entries weighing `_ELEMENT` each. The shape alone (every entry as large as the
    largest, each of its own as large as theirs ...) can be far more for a value whose entries differ
    (a Node's ``status``).
    """

    length: int
    entry: Size | None = None
    key: Size | None = None
    fields: Mapping[str, Size] = field(default_factory=dict)
    total: int | None = None

    def element(self) -> Size:
        """The bound of an element or value; unknown where none is declared."""
        return self.entry if self.entry is not None else UNKNOWN


UNKNOWN: Final = Size(UNBOUNDED)
SCALAR: Final = Size(1)
_EMPTY: Final = Size(0, total=0)
"""The entries of an empty list or map: none, so bounding them with others keeps their `Size.total`."""


def _union(a: Size | None, b: Size | None) -> Size | None:
    if a is None or b is None:
        return a or b
    if a is b or a == b:  # most of a large value's elements share one shape: nothing to build
        return a
    if a.fields and b.fields:  # two objects: a field is either side's (`_field`: its entry where undeclared)
        fields = {name: _union(_field(a, name), _field(b, name)) or UNKNOWN
                  for name in a.fields.keys() | b.fields.keys()}
        entry = _union(a.entry, b.entry)
    else:
        # An object and a map, list or string (``c ? variables : object``): ``.name`` may select any value of
        # either, so none of the object's fields bounds it alone; its fields join its entry bound.
        fields, entry = {}, _union(_entry_bound(a), _entry_bound(b))
    key = _union(a.key, b.key)
    if key is not None and any(side.key is None and side.entry is not None for side in (a, b)):
        # A list and a map bounded together (the values of one JSON object): a comprehension binds either
        # a list's element or a map's key, so the element bounds both and the union iterates as a list.
        entry, key = _union(entry, key), None
    total = max(a.total, b.total) if a.total is not None and b.total is not None else None
    return Size(max(a.length, b.length), entry, key, fields, total)


def _entry_bound(size: Size) -> Size | None:
    """What any entry or field of a value is bounded by: its entry, and each field it keeps."""
    bound = size.entry
    for value in size.fields.values():
        bound = _union(bound, value)
    return bound


def _add(*values: int) -> int:
    return min(UNBOUNDED, sum(values))


def _mul(a: int, b: int) -> int:
    return min(UNBOUNDED, a * b)


def _tenth(size: int, factor: float = _TRAVERSAL) -> int:
    return min(UNBOUNDED, math.ceil(size * factor))


def _map(entries: int, key: Size, value: Size) -> Size:
    return Size(entries, entry=value, key=key)


def device(literal_domains: int = 0) -> Size:
    """The declared ``device`` variable (dynamic-resource-allocation ``cel/compile.go``: ``deviceType``).

    ``literal_domains`` more domains (of up to 253 characters) in the attribute and capacity maps: the
    allocator adds each domain a selector spells as a string literal as an empty map (`cel.selector_domains`),
    and a comprehension over the maps iterates those too.
    """
    domains = dra.MAX_ATTRIBUTES_AND_CAPACITIES + literal_domains
    domain = Size(253 if literal_domains else dra.MAX_QUALIFIED_DOMAIN)
    # A value is a string of up to 64 characters or a list of up to 48 of them (`dra_objects` checks both).
    text = dra.MAX_ATTRIBUTE_VALUE_LENGTH
    value = Size(max(text, dra.MAX_ATTRIBUTE_VALUES), entry=Size(text))
    return Size(4, fields={
        "driver": Size(dra.MAX_DRIVER_LENGTH),
        "attributes": _map(domains, domain, _map(dra.MAX_ATTRIBUTES_AND_CAPACITIES, Size(dra.MAX_QUALIFIED_ID),
                                                 value)),
        "capacity": _map(domains, domain, _map(dra.MAX_ATTRIBUTES_AND_CAPACITIES, Size(dra.MAX_QUALIFIED_ID),
                                               SCALAR)),
        "allowMultipleAllocations": SCALAR,
    })


DEVICE: Final = device()
"""The declared ``device`` variable with no literal domains added."""

_Estimate = tuple[int, Size]
_Scope = Mapping[str, Size]


def worst_case_cost(serialized: bytes, roots: Mapping[str, Size]) -> int:
    """The worst-case cost of a serialized checked expression (``Expression.serialize()``).

    ``roots`` bounds the declared variables (a name missing there is `UNKNOWN`). An expression nested
    too deep to decode (protobuf's depth limit of 100, which 26 nested ``all()`` pass) or to walk, or
    too long to walk (`_MAX_WALKS`), is `UNBOUNDED`.
    """
    from google.protobuf import any_pb2, message

    wrapped = any_pb2.Any()
    checked = checked_pb2.CheckedExpr()
    try:
        wrapped.ParseFromString(serialized)
        if not wrapped.Unpack(checked):
            return UNBOUNDED
    except message.DecodeError:
        return UNBOUNDED
    try:
        cost, _ = _Walker(roots).walk(checked.expr, {})
    except (RecursionError, _WalkTooLongError):
        return UNBOUNDED
    return cost


_MAX_WALKS: Final = 100_000
"""Nodes one estimate may walk (under half a second): a comprehension whose accumulator grows walks its
step twice, so nested ``map()`` or ``exists_one()`` double the walk a level (16 levels in 200 characters
took 6 s, each level more twice that) while costing little. Past it the estimate is `UNBOUNDED`; the
largest walk in the tests (selectors, admission policies, the confinement policy) is 633 nodes."""


class _WalkTooLongError(Exception):
    """The walk passed `_MAX_WALKS`."""


class _Walker:
    """One pass over an expression: (cost, size) of every node, bottom up."""

    def __init__(self, roots: Mapping[str, Size]) -> None:
        self.roots = roots
        self.walks = 0

    def walk(self, expr: syntax_pb2.Expr, scope: _Scope) -> _Estimate:
        self.walks += 1
        if self.walks > _MAX_WALKS:
            raise _WalkTooLongError
        kind = expr.WhichOneof("expr_kind")
        if kind == "const_expr":
            return 0, _constant(expr.const_expr)
        if kind == "ident_expr":
            name = expr.ident_expr.name
            return 1, scope[name] if name in scope else self.roots.get(name, UNKNOWN)
        if kind == "select_expr":
            select = expr.select_expr
            cost, size = self.walk(select.operand, scope)
            return _add(cost, 1), SCALAR if select.test_only else _field(size, select.field)
        if kind == "list_expr":
            elements = [self.walk(e, scope) for e in expr.list_expr.elements]
            entry = None
            for _, size in elements:
                entry = _union(entry, size)
            total = _known_total(len(elements), [size for _, size in elements])
            return _add(_LIST_CREATE, *(c for c, _ in elements)), Size(len(elements), entry or _EMPTY, total=total)
        if kind == "struct_expr":
            return self._struct(expr.struct_expr, scope)
        if kind == "comprehension_expr":
            return self._comprehension(expr.comprehension_expr, scope)
        if kind == "call_expr":
            return self._call(expr.call_expr, scope)
        return 1, UNKNOWN  # an unset node: never from the checker

    def _struct(self, struct: syntax_pb2.Expr.CreateStruct, scope: _Scope) -> _Estimate:
        cost = _STRUCT_CREATE if struct.message_name else _MAP_CREATE
        key: Size | None = None
        value: Size | None = None
        held: list[Size] = []
        for entry in struct.entries:
            value_cost, value_size = self.walk(entry.value, scope)
            cost = _add(cost, value_cost)
            value = _union(value, value_size)
            held.append(value_size)
            if entry.HasField("map_key"):
                key_cost, key_size = self.walk(entry.map_key, scope)
                cost = _add(cost, key_cost)
                key = _union(key, key_size)
                held.append(key_size)
        if struct.message_name:
            # A well-known type becomes the value it wraps (cel-spec's protobuf conversions):
            # google.protobuf.ListValue{values: l} is the list l, Struct{fields: m} the map m, Value and the
            # wrappers their one field; so a message is as large as its largest field.
            return cost, value or Size(0)
        total = _known_total(len(struct.entries), held)
        return cost, Size(len(struct.entries), value or _EMPTY, key or _EMPTY, total=total)

    def _comprehension(self, comp: syntax_pb2.Expr.Comprehension, scope: _Scope) -> _Estimate:
        """cel-go ``coster.cost`` for a comprehension: range + init + size of range × (condition + step) + result."""
        range_cost, range_size = self.walk(comp.iter_range, scope)
        init_cost, accu = self.walk(comp.accu_init, scope)
        count = range_size.length
        inner = dict(scope)
        if range_size.key is not None:  # a map: the first variable is the key
            inner[comp.iter_var] = range_size.key
            if comp.iter_var2:
                inner[comp.iter_var2] = range_size.element()
        elif comp.iter_var2:  # a list, two variables: index and element
            inner[comp.iter_var], inner[comp.iter_var2] = SCALAR, range_size.element()
        else:
            inner[comp.iter_var] = range_size.element()
        inner[comp.accu_var] = accu
        step_cost, stepped = self.walk(comp.loop_step, inner)
        growth = max(0, stepped.length - accu.length)
        if growth:  # an accumulator that grows each step (map, filter) ends up to range-size steps larger
            accu = Size(_add(accu.length, _mul(count, growth)), _union(accu.entry, stepped.entry), accu.key)
            inner[comp.accu_var] = accu
            # Walked again over the grown accumulator; only here, so nested all()/exists() walk once each.
            step_cost, _ = self.walk(comp.loop_step, inner)
        condition_cost, _ = self.walk(comp.loop_condition, inner)
        result_cost, result = self.walk(comp.result, {**scope, comp.accu_var: accu})
        return _add(range_cost, init_cost, _mul(count, _add(condition_cost, step_cost)), result_cost), result

    def _call(self, call: syntax_pb2.Expr.Call, scope: _Scope) -> _Estimate:
        name = call.function
        args = [self.walk(a, scope) for a in call.args]
        target = self.walk(call.target, scope) if call.HasField("target") else None
        operands = ([target] if target else []) + args
        arg_cost = _add(*(c for c, _ in operands))
        sizes = [s for _, s in operands]
        if name in ("_&&_", "_||_"):
            return arg_cost, SCALAR
        if name == "_?_:_" and len(args) == 3:
            return _add(args[0][0], max(args[1][0], args[2][0])), _union(sizes[1], sizes[2]) or UNKNOWN
        cost, size = _function(name, sizes, [a for a in call.args], target is not None)
        if name in PYTHON_FUNCTIONS:  # beyond upstream: the binding copies each input into Python per call
            cost = _add(cost, *(_volume(s) for s in sizes))
        return _add(arg_cost, cost), size


def _known_total(length: int, held: list[Size]) -> int | None:
    """A literal's `Size.total`, where each part's is known.

    ``{}`` holds nothing, so ``c ? object.spec : {}`` is still bounded by what the spec holds.
    """
    totals = [size.total for size in held]
    return None if None in totals else _add(_mul(length, _ELEMENT), *(t for t in totals if t is not None))


def _constant(constant: syntax_pb2.Constant) -> Size:
    kind = constant.WhichOneof("constant_kind")
    if kind in ("string_value", "bytes_value"):
        length = len(constant.string_value if kind == "string_value" else constant.bytes_value)
        return Size(length, total=length)
    return _KNOWN_SCALAR


def _field(size: Size, name: str) -> Size:
    """A field of an object, or a value of a map selected by a field name (``attrs.model``)."""
    if size.fields:  # a map kept with its entries as fields (`with_entry`) bounds the others by its entry
        return size.fields.get(name) or size.element()
    return size.element()


def _constant_string(expr: syntax_pb2.Expr) -> str | None:
    if expr.WhichOneof("expr_kind") == "const_expr" and expr.const_expr.WhichOneof("constant_kind") == "string_value":
        return expr.const_expr.string_value
    return None


_ELEMENT: Final = 10
"""What an element or entry weighs in a comparison, in characters: cel-cpp compares values by type
dispatch, 100 to 600 ns each (a map entry's lookup, a nested list), where a character is a byte compared."""


def _volume(size: Size) -> int:
    """How much a comparison may traverse: every character, element and entry a value holds.

    An element or entry counts for itself too: comparing 300,000 empty lists (or empty strings) is not
    free (20 such comparisons took 0.4 s in cel-cpp, priced at 171 while an empty element weighed 0).
    """
    if size.fields:
        shape = _add(*(_add(len(name), _volume(value), _ELEMENT) for name, value in size.fields.items()))
    elif size.entry is None:
        shape = size.length
    else:
        each = _add(_ELEMENT, _volume(size.entry), _volume(size.key) if size.key is not None else 0)
        shape = _mul(size.length, each)
    return shape if size.total is None else min(shape, size.total)


def _text(size: Size) -> int:
    """The longest text a value prints as (``format``'s ``%s``): its elements' texts, with separators."""
    if size.fields:  # an object prints each field as name: value
        return _add(2, *(_add(len(name), _text(value), 4) for name, value in size.fields.items()))
    if size.entry is None:
        return max(size.length, _SCALAR_TEXT)
    each = _add(_text(size.entry), _text(size.key) if size.key is not None else 0, 4)
    return _add(2, _mul(size.length, each))


# RE2 compile times in cel-cpp (1,000 compilations each), so that a unit (0.25 of a weight) is at most
# about half a microsecond: a literal byte about 1.1 us per 4, ., \S or [^a] about 4 us, \pL 3.2 ms.
_BYTE: Final = 4
_CLASS: Final = 64
_UNICODE_CLASS: Final = 12_000
_CASE_FOLD: Final = 32  # (?i)k: 50 us against 2.6 us for k
_MAX_REPEAT: Final = 1000  # RE2 refuses a larger counted repetition
_DYNAMIC_PATTERN: Final = 2_000_000  # a pattern built at run time may be the largest program RE2 compiles (~1 s)
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_PERL_CLASSES: Final = frozenset("dDwWsS")


def _escape(pattern: str, i: int) -> tuple[int, int]:
    r"""The weight of the escape at ``pattern[i]`` (a backslash) and the index after it."""
    escaped = pattern[i + 1:i + 2]
    if escaped in ("p", "P"):  # \pL or \p{Greek}
        end = pattern.find("}", i) + 1 if pattern[i + 2:i + 3] == "{" else i + 3
        return _UNICODE_CLASS, end if end > i else len(pattern)
    if escaped == "x" and pattern[i + 2:i + 3] == "{":  # \x{10FFFF}: one character of up to 4 bytes
        end = pattern.find("}", i) + 1
        return 4 * _BYTE, end if end > i else len(pattern)
    if escaped == "Q":  # \Q...\E: literal text
        end = pattern.find("\\E", i + 2)
        end = len(pattern) if end < 0 else end
        return _mul(_BYTE, len(pattern[i + 2:end].encode())), end + 2
    return (_CLASS if escaped in _PERL_CLASSES else _BYTE), i + 2


def _bracket(pattern: str, i: int) -> tuple[int, int]:
    """The weight of the bracket class at ``pattern[i]`` and the index after it."""
    end = i + 1 + (pattern[i + 1:i + 2] == "^")
    end += pattern[end:end + 1] == "]"
    unicode_classes = 0
    while end < len(pattern) and pattern[end] != "]":
        if pattern[end] == "\\":
            unicode_classes += pattern[end + 1:end + 2] in ("p", "P")
            end += 2
        elif pattern.startswith("[:", end):  # [[:alpha:]]
            close = pattern.find(":]", end + 2)
            end = close + 2 if close >= 0 else end + 1
        else:
            end += 1
    return _add(_CLASS, _mul(_UNICODE_CLASS, unicode_classes)), end + 1


def _pattern_weight(pattern: str) -> int:
    r"""A regular expression's compile cost in literal characters: RE2 compiles to UTF-8 byte programs.

    Each atom weighs `_BYTE` a byte (a literal, ``|``, a quantifier), `_CLASS` (``.``, ``\w``, a bracket
    class) or `_UNICODE_CLASS` (each ``\p``/``\P`` class); a group the sum of its atoms; a counted
    repetition multiplies what it repeats; case folding multiplies everything. An upper bound measured in
    cel-cpp, not a parser: a malformed pattern only weighs more, and RE2 refuses it anyway.
    """
    fold = _CASE_FOLD if re.search(r"\(\?[a-zA-Z-]*i", pattern) else 1
    groups = [[0, 0]]  # per open group: [total weight, weight of the last atom]

    def atom(weight: int) -> None:
        groups[-1][0] = _add(groups[-1][0], _mul(weight, fold))
        groups[-1][1] = _mul(weight, fold)

    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            weight, i = _escape(pattern, i)
            atom(weight)
        elif c == "[":
            weight, i = _bracket(pattern, i)
            atom(weight)
        elif c == "(":
            groups.append([0, 0])
            i += 1
        elif c == ")":
            total = groups.pop()[0] if len(groups) > 1 else 0
            atom(max(1, total // fold))
            i += 1
        elif c == "{" and (repeat := _REPEAT.match(pattern, i)):
            low, comma, high = repeat.groups()
            times = min(_MAX_REPEAT, max(int(low), int(high) if high else int(low) + (1 if comma else 0)))
            last = groups[-1][1]
            groups[-1][0] = _add(groups[-1][0], _mul(last, max(0, times - 1)))
            groups[-1][1] = _mul(last, times)
            i = repeat.end()
        else:
            atom(_CLASS if c == "." else _BYTE if c.isascii() else _mul(2 * _BYTE, len(c.encode())))  # é: 0.7 us
            i += 1
    return max(len(pattern), _add(*(total for total, _ in groups)))  # never below upstream's length


_LIST_FUNCTIONS: Final = frozenset({"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf"})
_URL_GETTERS: Final = frozenset({"getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery"})
_NET_ACCESSORS: Final = frozenset({"family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
                                   "isLinkLocalUnicast", "isGlobalUnicast", "masked", "prefixLength", "ip"})
_PYTHON_COMPARISON: Final = 50
"""A comparison of two values in Python (`cel_library`'s CEL equality): 0.7 to 1.4 us, where a unit of
cel-cpp's comparisons is 10 to 60 ns (`_ELEMENT`). Priced at 1, sets.intersects of two lists of 1,000
strings took 1.5 s at an estimate of 1,027,791."""
_PYTHON_PARSE: Final = 50
"""A parse of a URL, IP or CIDR text in Python (``ipaddress``, `cel_library.parse_url`), once per call:
5 to 30 us with the binding's call, as a quantity's call costs about 200 ns a unit. Priced at 1
(upstream's accessors), 1,000 ``ip(...).isGlobalUnicast()`` took 36 ms at an estimate of 60."""
_NET_TEXT: Final = 43
"""The longest canonical IP or CIDR text (eight hextets and ``/128``): what `kube.cel_library` carries."""


def _list_function(name: str, sizes: list[Size]) -> _Estimate:
    """library/cost.go "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf" over a list.

    Upstream: the list's size times (1 + 0.1 of an element's size where elements are strings). Beyond
    it, an element compares as == does (`_volume`: nested lists and maps are walked). ``indexOf`` of a
    string (the strings extension) shares the name: a target that may be a string is also priced so.
    """
    target = sizes[0]
    element = target.element() if target.entry is not None else SCALAR
    compared = _volume(element)
    if len(sizes) > 1:
        compared = min(compared, _volume(sizes[1]))
    cost = _mul(target.length, _add(1, _tenth(compared)))
    if target.entry is None and not target.fields and len(sizes) > 1:  # maybe a string: strings.indexOf
        cost = max(cost, _mul(_tenth(target.length), max(1, _tenth(sizes[1].length))))
    result = element if name in ("min", "max") else SCALAR
    return max(1, cost), result


_VERB = re.compile(r"%(?:\.(\d+))?([a-zA-Z%])")
_NUMBER_TEXT: Final = 320  # cel-cpp's %d or %f of the largest double: 309 digits, a sign, a point, 6 decimals
_MAX_PRECISION: Final = 1000  # cel-cpp refuses a larger precision ("precision specifier exceeds maximum")


def _formatted(pattern: str | None, length: int, element: Size) -> int:
    """The most text ``format``'s verbs print.

    A number up to `_NUMBER_TEXT` plus its precision, ``%x`` of a string twice its length, ``%s`` its
    `_text`. A pattern not known until run time (``None``) may be all verbs of the largest precision.
    """
    each = max(_mul(_text(element), 2), _NUMBER_TEXT)
    if pattern is None:
        return _mul(length // 2 + 1, _add(each, _MAX_PRECISION))
    return _add(*(_add(each, int(precision or 0)) for precision, verb in _VERB.findall(pattern) if verb != "%"))


def _function(name: str, sizes: list[Size], args: list[syntax_pb2.Expr], member: bool) -> _Estimate:
    """Cost of the call itself (arguments excluded) and its result's size.

    ``sizes`` lists the target first for a member call (``member``); ``args`` the argument nodes.
    """
    first = sizes[0].length if sizes else 0
    second = sizes[1].length if len(sizes) > 1 else 0
    if name == "_+_" and len(sizes) == 2:  # AddString/AddBytes/AddList (lists priced like strings)
        result = Size(_add(first, second), _union(sizes[0].entry, sizes[1].entry), _union(sizes[0].key, sizes[1].key))
        return max(1, _tenth(result.length)), result
    if name in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_") and len(sizes) == 2:
        # Beyond cel-go (a tenth of the smaller length): lists and maps compare element by element, so the
        # smaller side's every string counts (100-element lists of 330,000-character strings compared 5,000
        # times took 2.4 s at an estimate of 272,000).
        return max(1, _tenth(min(_volume(sizes[0]), _volume(sizes[1])))), SCALAR
    if name in ("_[_]", "_[?_]", "_?._") and len(sizes) == 2:  # m["key"], m[?"key"], m.?key: as m.key
        key = _constant_string(args[1])
        return 1, _field(sizes[0], key) if key is not None else sizes[0].element()
    if name == "@in" and len(sizes) == 2:  # checker/cost.go InList: 1 an element; each compares as == does
        compare = max(1, _tenth(min(_volume(sizes[0]), _volume(sizes[1].key or sizes[1].element()))))
        return max(1, _mul(second, compare)), SCALAR
    if name == "matches" and len(sizes) == 2:
        # checker/cost.go MatchesString: (size of the string + 1) x 0.1 times the pattern's length x 0.25, so
        # an empty string still pays for compiling the pattern (cel-cpp compiles it on every call). Beyond
        # cel-go, the length is the pattern's weight (`_pattern_weight`): RE2 compiles \pL in 3 ms.
        pattern = _constant_string(args[-1]) if args else None
        weight = _pattern_weight(pattern) if pattern is not None else max(second, _DYNAMIC_PATTERN)
        return max(1, _mul(_tenth(_add(first, 1)), _tenth(weight, _REGEX))), SCALAR
    if name in _LIST_FUNCTIONS and member and sizes:
        return _list_function(name, sizes)
    if name == "contains" and len(sizes) >= 2 and member:  # indexOf of a string: `_list_function`
        return max(1, _mul(_tenth(first), max(1, _tenth(second)))), SCALAR
    if name in ("sets.contains", "sets.intersects", "sets.equivalent") and len(sizes) == 2:
        # cel-go ext/sets.go estimateSetsCost: size x size (twice for equivalent) + 1. Beyond it, each pair
        # is a comparison in Python (`_PYTHON_COMPARISON`) walking what == would traverse (`_volume`), each
        # element or character a unit (a nested element is a Python step, 0.3 us, not a tenth of cel-cpp's).
        pairs = _mul(first, second)
        compare = _add(_PYTHON_COMPARISON, min(_volume(sizes[0].element()), _volume(sizes[1].element())))
        return _add(1, _mul(_mul(pairs, compare), 2 if name == "sets.equivalent" else 1)), SCALAR
    if name in ("url", "isURL", "ip", "isIP", "cidr", "isCIDR", "ip.isCanonical") and sizes and not member:
        # library/cost.go "url", "ip", "cidr", "isIP", "isCIDR": 0.1 of the text; ip.isCanonical twice
        # that (parsed, then compared). isURL is unpriced there (1): it parses as url() does.
        factor = 2 * _TRAVERSAL if name == "ip.isCanonical" else _TRAVERSAL
        result = SCALAR if name.startswith("is") else Size(first if name == "url" else _NET_TEXT)
        return max(_PYTHON_PARSE, _tenth(first, factor)), result
    if name in _URL_GETTERS and member and sizes:
        # Unpriced upstream (1); beyond it, each call parses the URL's text again in Python. A component is
        # at most the text, kept at three times it; the escaped path up to 12 times: a character of 4 UTF-8
        # bytes escapes to "%F0%9F%98%80". The query is a map of lists of such strings.
        text = Size(_mul(first, 3))
        if name == "getQuery":
            return max(_PYTHON_PARSE, _tenth(first)), Size(first, Size(first, text), text)
        return max(_PYTHON_PARSE, _tenth(first)), Size(_mul(first, 12)) if name == "getEscapedPath" else text
    if name in _NET_ACCESSORS and member and sizes:
        # library/cost.go: IP and CIDR accessors are nominal (1); ip() of a CIDR is a field. Beyond it,
        # each parses the canonical text again in Python (`_PYTHON_PARSE`).
        return _PYTHON_PARSE, Size(_NET_TEXT) if name in ("masked", "ip") else SCALAR
    if name in ("containsIP", "containsCIDR") and member and len(sizes) == 2:
        # library/cost.go: (16 + 16) x 0.1 to compare the addresses, + 16 x 0.1 + 1 to mask for a CIDR,
        # + 0.1 of the argument's text for the string overloads (priced whatever the argument is here).
        masking = _add(_tenth(16), 1) if name == "containsCIDR" else 0
        return _add(_tenth(32), masking, _tenth(second), _mul(2, _PYTHON_PARSE)), SCALAR
    if name in ("quantity", "isQuantity", "semver", "isSemver") and sizes:
        # library/cost.go prices quantity parsing as a traversal of the text; semver parses the same way here.
        return max(1, _tenth(first)), Size(first)
    if name in ("size", "charAt") and sizes:
        # Beyond cel-go (1): cel-cpp counts and indexes a string by code point, a scan of it (5,000 size()
        # calls on a 2.6-million-character string took 2.4 s at an estimate of 489,000). A list's or map's
        # size is stored.
        scanned = sizes[0].entry is None and not sizes[0].fields
        return max(1, _tenth(first) if scanned else 1), SCALAR
    if name in ("startsWith", "endsWith") or name.startswith("is"):
        return max(1, _tenth(second if name in ("startsWith", "endsWith") else 0)), SCALAR
    if name in ("lowerAscii", "upperAscii", "trim", "reverse", "substring") and member:
        return max(1, _tenth(first)), Size(first)
    if name == "replace" and member and len(sizes) >= 3:
        # Worst case: an empty pattern puts the replacement before every character and at the end.
        replacement = sizes[2].length
        length = _add(first, _mul(_add(first, 1), replacement))
        return max(1, _tenth(_add(first, length))), Size(length)
    if name == "split" and member:  # library/cost.go: the traversal plus the construction of the result
        return max(1, _tenth(first, 2 * _TRAVERSAL)), Size(_add(first, 1), Size(first))
    if name == "join" and member:
        element = sizes[0].element().length
        separator = second if len(sizes) > 1 else 0
        length = _add(_mul(first, element), _mul(first, separator))
        return max(1, _tenth(length)), Size(length)
    if name == "format" and member and len(sizes) == 2:
        length = _add(first, _formatted(_constant_string(args[0]) if args else None, first, sizes[1].element()))
        return max(1, _tenth(_add(first, length))), Size(length)
    if name == "strings.quote" and sizes:
        return max(1, _tenth(first)), Size(_add(_mul(first, 6), 2))  # \uXXXX at worst, and the quotes
    if name == "bytes" and len(sizes) == 1:  # checker/cost.go StringToBytes: up to 4 bytes a character
        return max(1, _tenth(first)), Size(max(_mul(first, 4), _SCALAR_TEXT))
    if name == "string" and len(sizes) == 1:
        return max(1, _tenth(first)), Size(max(first, _SCALAR_TEXT))
    if name in ("dyn", "optional.of", "optional.ofNonZeroValue", "value", "orValue", "or") and sizes:
        result = sizes[0]
        for other in sizes[1:]:
            result = _union(result, other) or result
        return 1, result
    # Any other function (quantity arithmetic, semver getters, conversions, timestamp accessors):
    # cel-go's fixed call cost, plus (beyond cel-go) a traversal of every input that may be a string,
    # as int(), double(), timestamp() and duration() parse theirs (5,000 int() calls on a
    # 1.3-million-digit string took 11.7 s at an estimate of 293,000). The result is bounded by the
    # sum of its inputs, which holds for every function the environment declares; its elements, entries
    # and keys by theirs (a list it passes on holds what theirs did).
    parsed = _add(*(s.length for s in sizes if s.entry is None and not s.fields))
    if not sizes:
        return 1, SCALAR
    entries: Size | None = None
    keys: Size | None = None
    for size in sizes:
        entries, keys = _union(entries, _entry_bound(size)), _union(keys, size.key)
    return max(1, _tenth(parsed)), Size(_add(*(s.length for s in sizes)), entries, keys)


_MAX_VALUE_DEPTH: Final = 64
"""Deeper than this a value's size is `UNKNOWN` (never reached by a Kubernetes object; bounds the walk)."""


def value_size(value: object, depth: int = 0) -> Size:
    """The size of a known value (a JSON-like activation value), for `worst_case_cost`'s ``roots``.

    What cel-go's runtime cost tracker measures (``interpreter/runtimecost.go``: ``actualSize``): a
    string's characters, a list's elements, a map's entries. A map's values (and a list's elements) are
    bounded together, by the largest of each shape, so ``object.spec.x`` is priced as the largest value
    of ``spec``: a field the value lacks is an evaluation error there, not a cost. An estimate over these
    sizes bounds what evaluating over this value can cost.

    A list or map met again at the same depth is sized once: CEL results share structure (a chain of
    variables ``v1 = [v0, v0]``, ``v2 = [v1, v1]`` ... is 2**n elements as a tree, n lists in memory), so
    the walk is bounded by the distinct containers times `_MAX_VALUE_DEPTH`, not by the tree.
    """
    return _value_size(value, depth, _Sizes())


_KNOWN_SCALAR: Final = Size(1, total=1)


class _Sizes:
    """One `value_size` walk's memory: each container sized once per depth, and equal sizes built once.

    Most of a large value repeats a few shapes (a list of like objects): interned, their sizes are one
    object, so bounding them together (`_union`) is an identity check, not a comparison and a copy.
    """

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int], Size] = {}
        self.interned: dict[tuple[int, int, int, int | None], Size] = {}
        self.unions: dict[tuple[int, int], tuple[Size, Size, Size | None]] = {}

    def size(self, length: int, entry: Size | None = None, key: Size | None = None, total: int | None = None) -> Size:
        handle = (length, id(entry), id(key), total)
        known = self.interned.get(handle)
        if known is None:
            known = self.interned[handle] = Size(length, entry, key, total=total)  # alive: so are entry and key
        return known

    def union(self, a: Size | None, b: Size | None) -> Size | None:
        if a is None or b is None or a is b:
            return a or b
        handle = (id(a), id(b))
        known = self.unions.get(handle)
        if known is None:
            united = _union(a, b)
            if united is not None and not united.fields:
                united = self.size(united.length, united.entry, united.key, united.total)
            known = self.unions[handle] = (a, b, united)  # a and b kept alive: their ids stay theirs
        return known[2]


def _value_size(value: object, depth: int, sizes: _Sizes) -> Size:
    if isinstance(value, str | bytes):
        return sizes.size(len(value), total=len(value))
    if depth >= _MAX_VALUE_DEPTH:
        return UNKNOWN
    if not isinstance(value, Mapping | list | tuple):
        return _KNOWN_SCALAR
    known = sizes.seen.get((id(value), depth))  # the value is alive for the whole walk, so its id is its own
    if known is not None:
        return known
    entry: Size | None = None
    total: int | None = len(value) * _ELEMENT
    longest = -1  # strings and scalars, most of a large value, are bounded together once, not one by one
    scalars = text = 0
    for item in value.values() if isinstance(value, Mapping) else value:
        if isinstance(item, str | bytes):
            longest, text = max(longest, len(item)), text + len(item)
            continue
        if depth + 1 < _MAX_VALUE_DEPTH and not isinstance(item, Mapping | list | tuple):
            scalars += 1
            continue
        child = _value_size(item, depth + 1, sizes)
        entry = sizes.union(entry, child)
        total = None if total is None or child.total is None else total + child.total
    if longest >= 0:
        entry = sizes.union(entry, sizes.size(longest, total=longest))
    if scalars:
        entry = sizes.union(entry, _KNOWN_SCALAR)
    total = None if total is None else total + text + scalars
    if isinstance(value, Mapping):
        names = [len(str(name)) for name in value]
        total = None if total is None else total + sum(names)
        size = sizes.size(len(value), entry or _EMPTY, sizes.size(max(names, default=0)), total)
    else:
        size = sizes.size(len(value), entry or _EMPTY, None, total)
    sizes.seen[(id(value), depth)] = size
    return size


def with_entry(size: Size, name: str, value: object) -> Size:
    """``size`` (of a map, as `value_size` gives it) once ``value`` is added under the new key ``name``.

    Lets a map that grows one entry at a time (an admission policy's ``variables``) be sized without
    walking it again after each entry. Each entry is also kept as a field, so ``variables.name`` is
    priced as that value, not as the largest of all.
    """
    added = value_size(value, 1)
    entry = _union(size.entry if size.length else None, added)
    key = _union(size.key if size.length else None, Size(len(name)))
    total = None if size.total is None or added.total is None else size.total + added.total + len(name) + _ELEMENT
    return Size(size.length + 1, entry, key, {**size.fields, name: added}, total)
