"""Kubernetes' CEL libraries that cel-cpp lacks, in Python: lists, sets, URLs, IP addresses and CIDRs.

The API server's base environment (k8s.io/apiserver ``pkg/cel/environment/base.go``) compiles every
DRA selector and admission expression with these, so a selector that uses one compiles on a cluster
and must here too. Each behaviour follows the upstream file named beside it:

* ``library/lists.go``: ``<list>.isSorted()``, ``sum()``, ``min()``, ``max()``, ``indexOf(x)``,
  ``lastIndexOf(x)`` (the strings extension keeps ``indexOf`` of a string);
* cel-go ``ext/sets.go`` (base.go adds it in 1.29): ``sets.contains``, ``sets.equivalent``,
  ``sets.intersects``;
* ``library/urls.go``: ``url()``, ``isURL()``, ``getScheme()``, ``getHost()``, ``getHostname()``,
  ``getPort()``, ``getEscapedPath()``, ``getQuery()``;
* ``library/ip.go`` and ``library/cidr.go`` (1.30): ``ip()``, ``isIP()``, ``ip.isCanonical()``,
  ``family()``, ``isUnspecified()``, ``isLoopback()``, ``isLinkLocalMulticast()``,
  ``isLinkLocalUnicast()``, ``isGlobalUnicast()``, ``cidr()``, ``isCIDR()``, ``containsIP()``,
  ``containsCIDR()``, ``<cidr>.ip()``, ``masked()``, ``prefixLength()``, ``string()``.

Left out, and so refused at compile time as an undeclared function: the regex library's ``find`` and
``findAll`` (``library/regex.go``): upstream runs RE2, which never backtracks; Python's ``re`` does, so
a hostile pattern could hang the allocator, and RE2 is not a dependency here. Also the ``format``
library (1.31, ``library/format.go``), whose ``validate`` returns an optional list the binding cannot
build from Python, the image library (1.33), and two-variable comprehensions (1.32), whose macros
cel-expr-python's parser lacks.

A URL, IP or CIDR travels through CEL as a one-entry map, as quantities do (`kube.cel`): ``{"__url__":
text}``, ``{"__ip__": canonical}``, ``{"__cidr__": canonical}``. Two IPs or CIDRs are ``==`` when their
canonical forms are, as ``netip.Addr`` and ``netip.Prefix`` compare; two URLs when their texts are
(upstream compares ``URL.String()``, which re-escapes: ``url('/a b') == url('/a%20b')`` is true there).

Differences kept, where the binding or the stdlib decides: ``sum()``, ``min()`` and ``max()`` of
durations or timestamps are an error (the binding cannot return those from Python); a ``uint``
reaches Python as an ``int``, so ``[1u].sum()`` is the int ``1`` (equal to ``1u`` under CEL's
numeric equality) and a uint overflow reads ``integer overflow``; ``ip()``'s parse errors give Go's
message shape with a generic reason (``unable to parse IP``) where Go names the faulty field; a
query's invalid UTF-8 reads as U+FFFD; a bracketed host's IPv6 literal is not checked (newer Go does);
an error quotes (``%q``, `go_query.quote_cut`) at most the first 100 characters of the text it names.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.go_query import (
    GoUrl,
    escape_path,
    parse_query,
    parse_url,
    quote_cut,
    unescape,
    valid_port,
)

if TYPE_CHECKING:
    from cel_expr_python import cel as _cel

URL_KEY: Final = "__url__"
IP_KEY: Final = "__ip__"
CIDR_KEY: Final = "__cidr__"

def parses(parse: Callable[[str], object]) -> Callable[[str], bool]:
    """The ``isX(string)`` check of a library whose ``x(string)`` is ``parse``: whether it raises no ValueError."""

    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


class _NoSuchOverloadError(ValueError):
    def __init__(self) -> None:
        super().__init__("no such overload")


def _unwrapped(value: object, key: str) -> str:
    """The text a URL, IP or CIDR carries (``{key: text}``); any other value has no such overload."""
    text = value.get(key) if isinstance(value, Mapping) else None
    if not isinstance(text, str):
        raise _NoSuchOverloadError
    return text


# --- library/lists.go ---------------------------------------------------------------------------------
def _kind(value: object) -> str:
    """The CEL kind of a value as the binding hands it over (bool before int: Python's bool is an int)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    if isinstance(value, datetime.timedelta):
        return "duration"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    return type(value).__name__


_ORDERED: Final = frozenset({"bool", "number", "string", "bytes", "duration", "timestamp"})


def _compare(a: object, b: object) -> int:
    """cel-go's ``Compare``: numbers across int, uint and double, others within their kind; NaN refused."""
    kind = _kind(a)
    if kind not in _ORDERED or _kind(b) != kind:
        raise _NoSuchOverloadError
    if kind == "number" and (a != a or b != b):  # common/types/double.go Compare
        raise ValueError("NaN values cannot be ordered")
    order: int = (a > b) - (a < b)  # type: ignore[operator]  # same kind: ordered; str and UTF-8 bytes agree
    return order


def _equal(a: object, b: object) -> bool:
    """CEL's heterogeneous equality (cel-spec): false across kinds, numbers by value, NaN unequal."""
    pending = [(a, b)]
    while pending:
        left, right = pending.pop()
        kind = _kind(left)
        if kind != _kind(right):
            return False
        if isinstance(left, list) and isinstance(right, list):
            if len(left) != len(right):
                return False
            pending.extend(zip(left, right, strict=True))
        elif isinstance(left, Mapping) and isinstance(right, Mapping):
            # Python finds True under the key 1; CEL's keys of different kinds never match (bool is its own).
            keys = {(isinstance(key, bool), key) for key in right}
            if len(left) != len(right) or any((isinstance(key, bool), key) not in keys for key in left):
                return False
            pending.extend((left[key], right[key]) for key in left)
        elif not left == right:
            return False
    return True


_UNRETURNABLE: Final = "a duration or timestamp result is not supported by the sandbox's CEL"
"""cel-expr-python cannot return a ``timedelta`` or ``datetime`` from a function declared ``dyn``."""


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise _NoSuchOverloadError
    return value


def _is_sorted(values: object) -> bool:
    items = _list(values)
    for before, after in zip(items, items[1:], strict=False):
        if _compare(before, after) > 0:
            return False
    return True


def _extreme(name: str, prefer: int) -> Callable[[object], object]:
    def pick(values: object) -> object:
        items = _list(values)
        if not items:
            raise ValueError(f"{name} called on empty list")
        best = items[0]
        _compare(best, best)  # an unordered lone element is an error, as upstream's Comparer check
        for item in items[1:]:
            if _compare(best, item) == prefer:
                best = item
        if isinstance(best, datetime.timedelta | datetime.datetime):
            raise ValueError(_UNRETURNABLE)
        return best
    return pick


def _sum(values: object) -> object:
    """``sum()``: every element of one summable kind; the empty list sums to the int 0 (first overload)."""
    items = _list(values)
    if not items:
        return 0
    kinds = {_kind(item) for item in items}
    if kinds == {"duration"}:
        raise ValueError(_UNRETURNABLE)
    if kinds != {"number"} or len({type(item) for item in items}) > 1:  # int + double: no such overload
        raise _NoSuchOverloadError
    result = sum(items)  # type: ignore[arg-type]
    if isinstance(result, int) and not -protocol.MAX_INT64 - 1 <= result <= protocol.MAX_INT64:
        raise ValueError("integer overflow")
    return result


def _index_of(values: object, item: object) -> int:
    return next((i for i, element in enumerate(_list(values)) if _equal(element, item)), -1)


def _last_index_of(values: object, item: object) -> int:
    items = _list(values)
    return next((i for i in range(len(items) - 1, -1, -1) if _equal(items[i], item)), -1)


# --- cel-go ext/sets.go --------------------------------------------------------------------------------
def _sets_contains(values: object, subset: object) -> bool:
    items = _list(values)
    return all(any(_equal(item, wanted) for item in items) for wanted in _list(subset))


def _sets_equivalent(a: object, b: object) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: object, b: object) -> bool:
    others = _list(b)
    return any(any(_equal(item, other) for other in others) for item in _list(a))


# --- library/urls.go over Go's net/url ------------------------------------------------------------------
def _url_error(text: str, error: ValueError) -> ValueError:
    # library/urls.go: "URL parse error during conversion from string: %v" of net/url's *Error.
    return ValueError(f"URL parse error during conversion from string: parse {quote_cut(text)}: {error}")


def _to_url(text: str) -> dict[str, str]:
    try:
        parse_url(text)
        parse_url(text.partition("#")[0], request=False)  # as upstream: components come from url.Parse
    except ValueError as error:
        raise _url_error(text, error) from None
    return {URL_KEY: text}


_is_url = parses(parse_url)


def _url(value: object) -> GoUrl:
    return parse_url(_unwrapped(value, URL_KEY).partition("#")[0], request=False)


def _split_host_port(host: str) -> tuple[str, str]:
    """net/url ``splitHostPort``: the port after the last colon where it is one; brackets removed."""
    name, port = host, ""
    colon = host.rfind(":")
    if colon >= 0 and valid_port(host[colon:]):
        name, port = host[:colon], host[colon + 1:]
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name, port


_PATH_VALID: Final = re.compile(r"[A-Za-z0-9\-_.~!$&'()*+,;=:@\[\]%/]*")  # net/url validEncoded(encodePath)


def _escaped_path(value: object) -> str:
    """``URL.EscapedPath()``: the path as written where it is a valid encoding, else re-escaped."""
    raw = _url(value).path
    if _PATH_VALID.fullmatch(raw):  # "*" (Go's special case) is valid too
        return raw
    return escape_path(unescape(raw))


def _query(value: object) -> dict[str, list[str]]:
    """``URL.Query()``: ``&``-separated pairs; one with ``;`` or a bad escape is skipped, as ``ParseQuery``."""
    return parse_query(_url(value).query)


# --- library/ip.go and library/cidr.go over Go's net/netip ---------------------------------------------
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parse_address(text: str) -> Address:
    """``parseIPAddr`` (library/ip.go): ``netip.ParseAddr``, refusing zones and IPv4-mapped IPv6.

    Python's ``ip_address`` agrees with ``netip.ParseAddr`` on what it accepts (dotted IPv4 without
    leading zeros, RFC 4291 IPv6 with embedded IPv4) but for zones, refused here first.
    """
    if "%" in text:
        if _address_or_none(text.partition("%")[0]) is not None:
            raise ValueError(f"IP address {quote_cut(text)} with zone value is not allowed")
    address = _address_or_none(text)
    if address is None:
        raise ValueError(f"IP Address {quote_cut(text)} parse error during conversion from string: "
                         f"ParseAddr({quote_cut(text)}): unable to parse IP")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {quote_cut(text)} is not allowed")
    return address


def _address_or_none(text: str) -> Address | None:
    if not text.isascii() or "%" in text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _to_ip(text: str) -> dict[str, str]:
    return {IP_KEY: str(_parse_address(text))}


_is_ip = parses(_parse_address)


def _is_canonical(text: str) -> bool:
    """``ip.isCanonical``: ``Addr.String()``, RFC 5952's form (as ``ipaddress``'s ``str``), equals the text."""
    return str(_parse_address(text)) == text


def _address(value: object) -> Address:
    return ipaddress.ip_address(_unwrapped(value, IP_KEY))


def _first_hextet(address: Address) -> int:
    return int(address) >> 112 if isinstance(address, ipaddress.IPv6Address) else -1


def _is_link_local_multicast(value: object) -> bool:
    """Go ``Addr.IsLinkLocalMulticast``: 224.0.0.0/24, or IPv6 multicast of link-local scope (ffX2::)."""
    address = _address(value)
    if isinstance(address, ipaddress.IPv4Address):
        return int(address) >> 8 == 0xE00000
    return _first_hextet(address) & 0xFF0F == 0xFF02


def _is_link_local_unicast(value: object) -> bool:
    """Go ``Addr.IsLinkLocalUnicast``: 169.254.0.0/16 or fe80::/10."""
    address = _address(value)
    if isinstance(address, ipaddress.IPv4Address):
        return int(address) >> 16 == 0xA9FE
    return _first_hextet(address) & 0xFFC0 == 0xFE80


def _is_global_unicast(value: object) -> bool:
    """Go ``Addr.IsGlobalUnicast``: not broadcast, unspecified, loopback, multicast or link-local unicast."""
    address = _address(value)
    if isinstance(address, ipaddress.IPv4Address):
        return int(address) != 0xFFFFFFFF and not (address.is_unspecified or address.is_loopback
                                                   or address.is_multicast or int(address) >> 16 == 0xA9FE)
    return not (address.is_unspecified or address.is_loopback or address.is_multicast
                or _first_hextet(address) & 0xFFC0 == 0xFE80)


def _is_loopback(value: object) -> bool:
    """Go ``Addr.IsLoopback``: 127.0.0.0/8 or ::1 (``ipaddress`` agrees)."""
    return _address(value).is_loopback


_BITS: Final = re.compile(r"0|[1-9][0-9]{0,2}")


def _parse_cidr(text: str) -> tuple[Address, int]:
    """``parseCIDR`` (library/cidr.go): ``netip.ParsePrefix``, refusing IPv4-mapped IPv6.

    ParsePrefix splits at the last ``/``; the address is ``ParseAddr``'s without a zone, the bits
    decimal without a sign or leading zero, at most the address's width. The address keeps its host
    bits (``cidr('10.0.0.1/8').ip()`` is ``10.0.0.1``).
    """
    def refused(reason: str) -> ValueError:
        return ValueError("network address parse error during conversion from string: network address parse "
                          f"error during conversion from string: netip.ParsePrefix({quote_cut(text)}): {reason}")

    head, slash, bits = text.rpartition("/")
    if not slash:
        raise refused("no '/'")
    if "%" in head:
        raise refused("IPv6 zones cannot be present in a prefix")
    address = _address_or_none(head)
    if address is None:
        raise refused("ParseAddr(" + quote_cut(head) + "): unable to parse IP")
    if not _BITS.fullmatch(bits):
        raise refused(f"bad bits after slash: {quote_cut(bits)}")
    if int(bits) > address.max_prefixlen:
        raise refused("prefix length out of range")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"network address parse error during conversion from string: IPv4-mapped IPv6 "
                         f"address {quote_cut(text)} is not allowed")
    return address, int(bits)


def _to_cidr(text: str) -> dict[str, str]:
    address, bits = _parse_cidr(text)
    return {CIDR_KEY: f"{address}/{bits}"}  # netip.Prefix.String()


_is_cidr = parses(_parse_cidr)


def _cidr(value: object) -> tuple[Address, int]:
    head, _, bits = _unwrapped(value, CIDR_KEY).rpartition("/")
    return ipaddress.ip_address(head), int(bits)


def _network(value: object) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    address, bits = _cidr(value)
    return ipaddress.ip_network((address, bits), strict=False)


def _contains_ip(value: object, other: object) -> bool:
    """``Prefix.Contains``: an address of the other family is never inside."""
    address = _parse_address(other) if isinstance(other, str) else _address(other)
    network = _network(value)
    return address.version == network.version and address in network


def _contains_cidr(value: object, other: object) -> bool:
    """cidr.go ``cidrContainsCIDR``: the other's address is in this network and its prefix no shorter."""
    address, bits = _parse_cidr(other) if isinstance(other, str) else _cidr(other)
    network = _network(value)
    return address.version == network.version and address in network and network.prefixlen <= bits


def _masked(value: object) -> dict[str, str]:
    return {CIDR_KEY: str(_network(value))}


def _cidr_ip(value: object) -> dict[str, str]:
    return {IP_KEY: str(_cidr(value)[0])}


def _to_string(value: object) -> str:
    """``string()`` of an IP or CIDR: its canonical form (``ipToString``, ``cidrToString``)."""
    if isinstance(value, Mapping):
        for key in (IP_KEY, CIDR_KEY):
            if isinstance(text := value.get(key), str):
                return text
    raise _NoSuchOverloadError


# --- Declarations ------------------------------------------------------------------------------------------
def declarations() -> list[_cel.FunctionDecl]:
    """The libraries' functions, for a ``cel.CelExtension`` added after the strings extension.

    In an extension the binding merges overloads into a function another extension declared
    (``indexOf`` of a string); as plain declarations it refuses the name as declared twice.
    """
    from cel_expr_python import cel

    t = cel.Type
    values = t.List(t.DYN)
    wrapped = t.Map(t.STRING, t.DYN)  # a URL, IP or CIDR (or a quantity: the functions check the key)

    def one(name: str, overload: str, result: _cel.Type, parameters: Sequence[_cel.Type],
            impl: Callable[..., object], member: bool = False) -> _cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(overload, result, list(parameters), is_member=member, impl=impl)])

    def getter(name: str, overload: str, result: _cel.Type, impl: Callable[[object], object]) -> _cel.FunctionDecl:
        return one(name, overload, result, [wrapped], impl, member=True)

    return [
        one("isSorted", "list_is_sorted_bool", t.BOOL, [values], _is_sorted, member=True),
        one("sum", "list_sum", t.DYN, [values], _sum, member=True),
        one("min", "list_min", t.DYN, [values], _extreme("min", 1), member=True),
        one("max", "list_max", t.DYN, [values], _extreme("max", -1), member=True),
        one("indexOf", "list_a_index_of_int", t.INT, [values, t.DYN], _index_of, member=True),
        one("lastIndexOf", "list_a_last_index_of_int", t.INT, [values, t.DYN], _last_index_of, member=True),
        one("sets.contains", "list_sets_contains_list", t.BOOL, [values, values], _sets_contains),
        one("sets.equivalent", "list_sets_equivalent_list", t.BOOL, [values, values], _sets_equivalent),
        one("sets.intersects", "list_sets_intersects_list", t.BOOL, [values, values], _sets_intersects),
        one("url", "string_to_url", wrapped, [t.STRING], _to_url),
        one("isURL", "is_url_string", t.BOOL, [t.STRING], _is_url),
        getter("getScheme", "url_get_scheme", t.STRING, lambda u: _url(u).scheme),
        getter("getHost", "url_get_host", t.STRING, lambda u: _url(u).host),
        getter("getHostname", "url_get_hostname", t.STRING, lambda u: _split_host_port(_url(u).host)[0]),
        getter("getPort", "url_get_port", t.STRING, lambda u: _split_host_port(_url(u).host)[1]),
        getter("getEscapedPath", "url_get_escaped_path", t.STRING, _escaped_path),
        getter("getQuery", "url_get_query", t.Map(t.STRING, t.List(t.STRING)), _query),
        cel.FunctionDecl("ip", [
            cel.Overload("string_to_ip", wrapped, [t.STRING], impl=_to_ip),
            cel.Overload("cidr_ip", wrapped, [wrapped], is_member=True, impl=_cidr_ip)]),
        one("isIP", "is_ip", t.BOOL, [t.STRING], _is_ip),
        one("ip.isCanonical", "ip_is_canonical", t.BOOL, [t.STRING], _is_canonical),
        getter("family", "ip_family", t.INT, lambda a: _address(a).version),
        getter("isUnspecified", "ip_is_unspecified", t.BOOL, lambda a: _address(a).is_unspecified),
        getter("isLoopback", "ip_is_loopback", t.BOOL, _is_loopback),
        getter("isLinkLocalMulticast", "ip_is_link_local_multicast", t.BOOL, _is_link_local_multicast),
        getter("isLinkLocalUnicast", "ip_is_link_local_unicast", t.BOOL, _is_link_local_unicast),
        getter("isGlobalUnicast", "ip_is_global_unicast", t.BOOL, _is_global_unicast),
        one("string", "ip_or_cidr_to_string", t.STRING, [wrapped], _to_string),
        one("cidr", "string_to_cidr", wrapped, [t.STRING], _to_cidr),
        one("isCIDR", "is_cidr", t.BOOL, [t.STRING], _is_cidr),
        one("containsIP", "cidr_contains_ip", t.BOOL, [wrapped, t.DYN], _contains_ip, member=True),
        one("containsCIDR", "cidr_contains_cidr", t.BOOL, [wrapped, t.DYN], _contains_cidr, member=True),
        getter("masked", "cidr_masked", wrapped, _masked),
        getter("prefixLength", "cidr_prefix_length", t.INT, lambda c: _cidr(c)[1]),
    ]


FUNCTIONS: Final = frozenset({
    "isSorted", "sum", "min", "max", "indexOf", "lastIndexOf", "sets.contains", "sets.equivalent",
    "sets.intersects", "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath",
    "getQuery", "ip", "isIP", "ip.isCanonical", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "string", "cidr", "isCIDR", "containsIP", "containsCIDR", "masked",
    "prefixLength"})
"""The names `declarations` declares (each implemented in Python: `kube.cel_cost` prices the copies)."""
