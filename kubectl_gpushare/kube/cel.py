"""CEL as the API server evaluates it, for the sandbox's admission policies and DRA selectors.

The language is Google's own implementation (``cel-expr-python``: cel-cpp behind Python bindings,
type-checked like cel-go in the API server, so an undeclared variable fails at compile time as it
does there). This module adds only what Kubernetes adds on top: the quantity library
(``k8s.io/apiserver/pkg/cel/library/quantity.go``: ``quantity()``, ``isQuantity()``,
``compareTo()``, ``isGreaterThan()``, ``isLessThan()``, ``add()``, ``sub()``, ``sign()``,
``asInteger()``, ``isInteger()``, ``asApproximateFloat()``), the semver library DRA selectors use for
version attributes (``library/semverlib.go``: ``semver()``, ``isSemver()``, ``major()``, ``minor()``,
``patch()`` and the same comparisons), the extensions the API server's base environment and DRA's
add (``cel.bind()``, optional values ``.?``/``orValue()``, the strings library), Kubernetes' lists,
sets, URL, IP and CIDR libraries (`kube.cel_library`, which says what is left out: the regex
library's ``find``/``findAll``, as Python's ``re`` backtracks, and the ``format`` library), the
bound on an expression's length, and one error type whose message fits on one line.

A quantity travels through CEL as a map ``{"__quantity__": <thousandths>}``: the binding passes only
CEL's own types, and the API server compares quantities by value (``Quantity.Cmp``), which the integer
of thousandths does exactly for everything ``parse_milli_quantity`` accepts; two quantities are ``==``
when their values are, as ``Quantity.Equal`` makes them. Values finer than a thousandth round up, as
``MilliValue()`` does. A semantic version travels as ``{"__semver__": "<text>"}`` (`semver`); the
comparison functions, declared once for both, dispatch on which of the two they are given.

An expression is bounded by its length, the limit the API server checks first
(``CELSelectorExpressionMaxLength``); a DRA selector (`compile_selector`) also by its static
worst-case cost (`kube.cel_cost`), so one that could exhaust memory is refused before it runs.
Admission policies are priced by the same estimate, per request (`sandbox.admission`).
The package is an optional dependency (the ``daemons`` extra: 50 MB of native code the kubectl plugin
does not need); `available` says whether it is installed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from kubectl_gpushare import dra_objects, protocol

if TYPE_CHECKING:
    from cel_expr_python import cel as _cel

MAX_EXPRESSION_LENGTH: Final = 10 * 1024
"""Longest expression compiled: DRA's ``CELSelectorExpressionMaxLength`` (resource/v1 types.go)."""

INSTALL_HINT: Final = "CEL needs the daemons extra: pip install 'kubectl-gpushare[daemons]'"

_QUANTITY_KEY: Final = "__quantity__"
_SEMVER_KEY: Final = "__semver__"

Activation = Mapping[str, object]
"""The variables an expression sees: JSON-like values (dicts, lists, str, int, float, bool, None)."""


class CelError(ValueError):
    """An expression that does not compile or fails while evaluating; the message is one line.

    ``detail`` is the reason alone (one line), without the expression: the API server's admission
    messages put the expression in their own words (``expression '...' resulted in error: ...``).
    """

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail if detail is not None else message


class CelCostError(CelError):
    """A selector whose static worst-case cost exceeds the limit: refused as the API server does.

    ``detail`` is upstream's ``too complex, exceeds cost limit``; the message adds the estimate.
    """


class ValueTooLargeError(CelError):
    """A value past `Expression.evaluate`'s ``max_units``, refused before it was copied into Python."""


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text[:300] + "..." if len(text) > 300 else text


def available() -> bool:
    """Whether the CEL implementation is installed (it comes with the ``daemons`` extra)."""
    try:
        from cel_expr_python import cel  # noqa: F401
    except ImportError:
        return False
    return True


# --- The quantity library -------------------------------------------------------------------------
def quantity(text: str) -> dict[str, int]:
    """A quantity as CEL sees it: for activations (DRA capacities are quantities) and ``quantity()``."""
    return {_QUANTITY_KEY: protocol.parse_milli_quantity(text)}  # ValueError: a CEL error upstream


def _millis(value: Mapping[str, object]) -> int:
    millis = value.get(_QUANTITY_KEY)
    if not isinstance(millis, int) or isinstance(millis, bool):
        raise ValueError("not a quantity")
    return millis


def _compare(a: Mapping[str, object], b: Mapping[str, object]) -> int:
    if _SEMVER_KEY in a or _SEMVER_KEY in b:
        return dra_objects.compare_versions(_version(a), _version(b))
    left, right = _millis(a), _millis(b)
    return (left > right) - (left < right)


# --- The semver library -----------------------------------------------------------------------------
def semver(text: str) -> dict[str, str]:
    """A semantic version as CEL sees it: for activations (DRA version attributes) and ``semver()``."""
    if dra_objects.parse_version(text) is None:
        raise ValueError(f"invalid semver {text[:64]!r}")  # a CEL error upstream
    return {_SEMVER_KEY: text}


def _version(value: Mapping[str, object]) -> dra_objects.Version:
    text = value.get(_SEMVER_KEY)
    version = dra_objects.parse_version(text) if isinstance(text, str) else None
    if version is None:
        raise ValueError("not a semver")
    return version


def _is_semver(text: str) -> bool:
    return dra_objects.parse_version(text) is not None


def _checked(millis: int) -> dict[str, int]:
    if not -protocol.MAX_INT64 - 1 <= millis <= protocol.MAX_INT64:
        raise ValueError("quantity out of range")
    return {_QUANTITY_KEY: millis}


def _as_integer(q: Mapping[str, object]) -> int:
    millis = _millis(q)
    if millis % 1000:
        raise ValueError("quantity is not an integer")
    return millis // 1000


def _declarations() -> list[_cel.FunctionDecl]:
    from cel_expr_python import cel

    from kubectl_gpushare.kube.cel_library import parses

    t = cel.Type
    q = t.Map(t.STRING, t.DYN)

    def member(name: str, result: _cel.Type, impl: Callable[..., object], *args: _cel.Type) -> _cel.FunctionDecl:
        overload = cel.Overload(f"quantity_{name}", result, [q, *args], is_member=True, impl=impl)
        return cel.FunctionDecl(name, [overload])

    return [
        cel.FunctionDecl("quantity", [cel.Overload("string_to_quantity", q, [t.STRING], impl=quantity)]),
        cel.FunctionDecl("isQuantity", [cel.Overload("string_is_quantity", t.BOOL, [t.STRING],
                                                     impl=parses(quantity))]),
        member("compareTo", t.INT, _compare, q),
        member("isGreaterThan", t.BOOL, lambda a, b: _compare(a, b) > 0, q),
        member("isLessThan", t.BOOL, lambda a, b: _compare(a, b) < 0, q),
        member("add", q, lambda a, b: _checked(_millis(a) + _millis(b)), q),
        member("sub", q, lambda a, b: _checked(_millis(a) - _millis(b)), q),
        member("sign", t.INT, lambda a: (_millis(a) > 0) - (_millis(a) < 0)),
        member("isInteger", t.BOOL, lambda a: _millis(a) % 1000 == 0),
        member("asInteger", t.INT, _as_integer),
        member("asApproximateFloat", t.DOUBLE, lambda a: _millis(a) / 1000.0),
        cel.FunctionDecl("semver", [cel.Overload("string_to_semver", q, [t.STRING], impl=semver)]),
        cel.FunctionDecl("isSemver", [cel.Overload("string_is_semver", t.BOOL, [t.STRING], impl=_is_semver)]),
        member("major", t.INT, lambda a: _version(a).major),
        member("minor", t.INT, lambda a: _version(a).minor),
        member("patch", t.INT, lambda a: _version(a).patch),
    ]


@functools.lru_cache(maxsize=16)
def _environment(variables: tuple[str, ...]) -> _cel.Env:
    try:
        from cel_expr_python import cel
        from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
    except ImportError:
        raise CelError(INSTALL_HINT) from None
    from kubectl_gpushare.kube import cel_library

    # Last: in an extension the binding merges overloads into a name the strings extension declares (indexOf).
    kubernetes = cel.CelExtension("kubernetes", cel_library.declarations())
    extensions = [ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings(), kubernetes]
    return cel.NewEnv(variables={name: cel.Type.DYN for name in variables}, functions=_declarations(),
                      extensions=extensions)


# --- Compile and evaluate -------------------------------------------------------------------------
class Expression:
    """One compiled expression over a fixed set of variables."""

    __slots__ = ("source", "_compiled")

    def __init__(self, source: str, compiled: _cel.Expression) -> None:
        self.source = source
        self._compiled = compiled

    def serialized(self) -> bytes:
        """The checked expression, a ``google.protobuf.Any`` holding cel-spec's ``cel.expr.CheckedExpr``."""
        serialized: bytes = self._compiled.serialize()
        return serialized

    def evaluate(self, activation: Activation, max_units: int | None = None) -> object:
        """The expression's value over ``activation``; raises `CelError` on any evaluation error.

        With ``max_units``, a value larger than that (`value_units`) is refused before it is turned
        into Python (`ValueTooLargeError`): the binding copies what cel-cpp shares, so ``[v, v]`` over a
        large ``v`` doubles it in memory here, and a chain of such values grows exponentially.
        """
        from cel_expr_python import cel

        try:
            value = self._compiled.eval(data=activation)
            if value.type() == cel.Type.ERROR:
                detail = _one_line(str(value))
                raise CelError(f"evaluating {self.source[:200]!r}: {detail}", detail)
            if max_units is not None and value_units(value, max_units) > max_units:
                detail = f"the value is larger than {max_units} units"
                raise ValueTooLargeError(f"evaluating {self.source[:200]!r}: {detail}", detail)
            result: object = value.plain_value()
        except CelError:
            raise
        except Exception as error:  # the binding raises RuntimeError for values CEL cannot hold
            detail = _one_line(str(error))
            raise CelError(f"evaluating {self.source[:200]!r}: {detail}", detail) from None
        return result

    def evaluate_bool(self, activation: Activation) -> bool:
        """As `evaluate`, for selectors and validations: anything but a bool is an error, as upstream."""
        result = self.evaluate(activation)
        if not isinstance(result, bool):
            detail = f"must evaluate to bool, not {type(result).__name__}"
            raise CelError(f"{self.source[:200]!r} {detail}", detail)
        return result


def value_units(value: object, limit: int) -> int:
    """The size a CEL value takes once turned into Python, counted until past ``limit``.

    One unit per element, entry and scalar, plus the characters of its strings and bytes. Walks the
    binding's lazy accessors (``value()`` of a list gives its items unconverted), so nothing is copied
    and a value shared many times over is counted as the copies it would become.
    """
    units = 0
    stack = [value]
    while stack:
        item = stack.pop()
        read = item.value() if hasattr(item, "value") else item
        units += 1
        if isinstance(read, str | bytes | bytearray):
            units += len(read)
        elif isinstance(read, list):
            stack.extend(read)
        elif isinstance(read, dict):
            units += sum(len(key) for key in read if isinstance(key, str))
            stack.extend(read.values())
        if units > limit:
            return units
    return units


def _encodable(source: str) -> bool:
    """Whether the text is UTF-8 once encoded (the binding refuses lone surrogates with its signature)."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@functools.lru_cache(maxsize=1024)
def compile_expression(source: str, variables: tuple[str, ...]) -> Expression:
    """Compile once over the named variables (all typed ``dyn``); cached, raises `CelError`.

    Type-checked as the API server does: a name outside ``variables`` fails here, not at run time.
    """
    if not source.strip():
        raise CelError("empty CEL expression")
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise CelError(f"CEL expression longer than {MAX_EXPRESSION_LENGTH} characters")
    if not source.isascii() and not _encodable(source):
        raise CelError("CEL expression is not valid UTF-8 (it holds a lone surrogate)")
    environment = _environment(variables)
    try:
        compiled = environment.compile(source)
    except Exception as error:  # RuntimeError(INVALID_ARGUMENT: ...) for syntax and undeclared names
        detail = _one_line(str(error))
        raise CelError(f"compiling {source[:200]!r}: {detail}", detail) from None
    return Expression(source, compiled)


SELECTOR_VARIABLES: Final = ("device",)
"""The variables of a DRA device selector (dynamic-resource-allocation ``cel/compile.go``)."""

_STRING_LITERAL: Final = re.compile(r'"((?:[^"\\\n]|\\.){1,253})"|\'((?:[^\'\\\n]|\\.){1,253})\'')


@functools.lru_cache(maxsize=1024)
def selector_domains(source: str) -> frozenset[str]:
    """The domains a selector spells as string literals (anything quoted that is a DNS subdomain).

    Upstream's ``device.attributes`` and ``device.capacity`` answer an unknown domain with an empty map
    (``newStringInterfaceMapWithDefault``); CEL maps here are plain values, so the allocator adds these
    domains as empty maps, and the cost bound counts them among the maps' entries.
    """
    found = set()
    for match in _STRING_LITERAL.finditer(source):
        text = match.group(1) or match.group(2) or ""
        if dra_objects.valid_dns_subdomain(text):
            found.add(text)
    return frozenset(found)


@functools.lru_cache(maxsize=1024)
def compile_selector(source: str) -> Expression:
    """Compile a DRA device selector, refusing one whose worst-case cost exceeds the limit; cached.

    Raises:
        CelCostError: the static estimate (`kube.cel_cost`) is above ``CELSelectorExpressionMaxCost``.
        CelError: as `compile_expression`.
    """
    from kubectl_gpushare.kube import cel_cost

    expression = compile_expression(source, SELECTOR_VARIABLES)
    device = cel_cost.device(len(selector_domains(source)))
    cost = cel_cost.worst_case_cost(expression.serialized(), {"device": device})
    if cost > cel_cost.MAX_COST:
        shown = "unbounded" if cost >= cel_cost.UNBOUNDED else str(cost)
        raise CelCostError(f"{cel_cost.TOO_COMPLEX} (worst-case cost {shown} > {cel_cost.MAX_COST})",
                           cel_cost.TOO_COMPLEX)
    return expression
