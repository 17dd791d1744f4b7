"""The server-side request deadline as client-go sends it and kube-apiserver reads it.

client-go puts a request's timeout into its URL as ``timeout=<Go duration>``
(``k8s.io/client-go/rest/request.go``, ``Request.URL``: ``query.Set("timeout", r.timeout.String())``
whenever the request has one, i.e. ``--request-timeout`` or ``Request.Timeout``), and
kube-apiserver gives each request that is not long-running a context deadline of its arrival
plus that timeout, capped at its own ``--request-timeout``
(``k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go``, ``WithRequestDeadline``).

This module holds what both ends of that share: Go's duration text (formatted as
``Duration.String`` writes it, ``src/time/time.go``; parsed as ``time.ParseDuration`` reads it,
error messages included, ``src/time/format.go``) and which requests are long-running (no deadline,
``timeout`` ignored). Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Final

from kubectl_gpushare.kube.go_format import time_quote

NANOSECOND: Final = 1
MICROSECOND: Final = 1000 * NANOSECOND
MILLISECOND: Final = 1000 * MICROSECOND
SECOND: Final = 1000 * MILLISECOND
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE
MAX_DURATION: Final = (1 << 63) - 1
"""Go's longest ``time.Duration`` (int64 nanoseconds)."""

LONG_RUNNING_VERBS: Final = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES: Final = frozenset({"attach", "exec", "proxy", "log", "portforward"})
"""Requests no deadline applies to: kube-apiserver's ``LongRunningFunc``, the verbs and
subresources it gives ``filters.BasicLongRunningRequestCheck`` in ``BuildGenericConfig``
(``pkg/controlplane/apiserver/config.go``). ``WithRequestDeadline`` passes them through without
reading ``timeout``; a watch is bounded by ``timeoutSeconds`` instead
(``endpoints/handlers/get.go``, ``handleWatch``: "we explicitly ignore ?timeout= and use only
?timeoutSeconds=")."""

_UNITS: Final = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "µs": MICROSECOND,  # U+00B5 micro sign
    "μs": MICROSECOND,  # U+03BC Greek mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}


def _with_fraction(value: int, digits: int) -> str:
    """``value / 10**digits`` with its fraction's trailing zeros (and a bare point) left out (Go's ``fmtFrac``)."""
    whole, fraction = divmod(value, 10**digits)
    shown = f"{fraction:0{digits}d}".rstrip("0") if digits else ""
    return f"{whole}.{shown}" if shown else str(whole)


def format_duration(nanoseconds: int) -> str:
    """A duration as Go's ``Duration.String`` writes it: ``1.5s``, ``1m30s``, ``1h0m0s``, ``250ms``, ``0s``.

    Example:
        >>> format_duration(90 * SECOND), format_duration(1500 * MILLISECOND), format_duration(0)
        ('1m30s', '1.5s', '0s')
    """
    u = abs(nanoseconds)
    if u == 0:
        return "0s"
    if u < SECOND:  # smaller units, so that the leading digit is not zero
        if u < MICROSECOND:
            text = f"{u}ns"
        elif u < MILLISECOND:
            text = _with_fraction(u, 3) + "µs"
        else:
            text = _with_fraction(u, 6) + "ms"
    else:
        seconds, fraction = divmod(u, SECOND)
        text = _with_fraction((seconds % 60) * SECOND + fraction, 9) + "s"
        minutes = seconds // 60
        if minutes:
            text = f"{minutes % 60}m{text}"
            if minutes // 60:  # hours are the largest unit: days differ in length
                text = f"{minutes // 60}h{text}"
    return "-" + text if nanoseconds < 0 else text


def seconds_duration(count: int) -> int:
    """``time.Duration(count) * time.Second`` in nanoseconds: Go's int64 product, which wraps past `MAX_DURATION`.

    kube-apiserver and the kubelet turn a count of seconds from a query (a watch's ``timeoutSeconds``, a
    log's ``sinceSeconds``) into a duration so: 2^55 seconds is 0 ns, 9223372037 seconds is negative.
    """
    return (count * SECOND + (1 << 63)) % (1 << 64) - (1 << 63)


def _leading_int(text: str) -> tuple[int, str] | None:
    """The leading digits as a number and the rest; None on overflow (Go's ``leadingInt``)."""
    i, value = 0, 0
    while i < len(text) and "0" <= text[i] <= "9":
        if value > (1 << 63) // 10:
            return None
        value = value * 10 + ord(text[i]) - ord("0")
        if value > 1 << 63:
            return None
        i += 1
    return value, text[i:]


def _leading_fraction(text: str) -> tuple[int, float, str]:
    """The leading digits of a fraction, its scale and the rest; precision stops growing on overflow."""
    i, value, scale, overflow = 0, 0, 1.0, False
    while i < len(text) and "0" <= text[i] <= "9":
        if not overflow:
            if value > ((1 << 63) - 1) // 10:
                overflow = True
            else:
                grown = value * 10 + ord(text[i]) - ord("0")
                if grown > 1 << 63:
                    overflow = True
                else:
                    value, scale = grown, scale * 10
        i += 1
    return value, scale, text[i:]


def parse_duration(text: str) -> int:
    """Nanoseconds of a Go duration (``300ms``, ``-1.5h``, ``2h45m``), read as ``time.ParseDuration`` reads it.

    Raises:
        ValueError: not a duration, with Go's message (``time: invalid duration "x"``,
            ``time: missing unit in duration "1"``, ``time: unknown unit "d" in duration "1d"``).
    """
    invalid = ValueError("time: invalid duration " + time_quote(text))
    rest = text
    negative = False
    if rest and rest[0] in "+-":
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        if not (rest[0] == "." or "0" <= rest[0] <= "9"):
            raise invalid
        length = len(rest)
        leading = _leading_int(rest)
        if leading is None:
            raise invalid
        whole, rest = leading
        before = length != len(rest)
        fraction, scale, after = 0, 1.0, False
        if rest.startswith("."):
            length = len(rest) - 1
            fraction, scale, rest = _leading_fraction(rest[1:])
            after = length != len(rest)
        if not before and not after:  # no digits, e.g. ".s"
            raise invalid
        end = 0
        while end < len(rest) and not (rest[end] == "." or "0" <= rest[end] <= "9"):
            end += 1
        if end == 0:
            raise ValueError("time: missing unit in duration " + time_quote(text))
        unit_text, rest = rest[:end], rest[end:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise ValueError(f"time: unknown unit {time_quote(unit_text)} in duration {time_quote(text)}")
        if whole > (1 << 63) // unit:
            raise invalid
        value = whole * unit
        if fraction > 0:
            value += int(float(fraction) * (float(unit) / scale))  # float64, as Go computes it
            if value > 1 << 63:
                raise invalid
        total += value
        if total > 1 << 63:
            raise invalid
    if negative:
        return -total
    if total > MAX_DURATION:
        raise invalid
    return total


def long_running_request(verb: str, subresource: str) -> bool:
    """Whether a ``verb`` request on ``subresource`` is long-running: ``BasicLongRunningRequestCheck``."""
    return verb in LONG_RUNNING_VERBS or subresource in LONG_RUNNING_SUBRESOURCES


def long_running(path: str) -> bool:
    """Whether kube-apiserver treats a request for ``path`` as long-running (`LONG_RUNNING_SUBRESOURCES`).

    Reads the subresource where ``RequestInfoFactory`` finds it: ``/api/v1`` or ``/apis/<g>/<v>``,
    then ``namespaces/<ns>`` (unless that is the object itself), ``<resource>/<name>/<subresource>``.
    A watch is long-running too, but it is asked for with ``watch=true`` and bounded by ``timeoutSeconds``.
    """
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    else:
        return False
    if parts[:1] and long_running_request(parts[0], ""):
        return True
    if len(parts) > 2 and parts[0] == "namespaces":
        parts = parts[2:]
    return len(parts) > 2 and long_running_request("", parts[2])


__all__ = [
    "HOUR",
    "LONG_RUNNING_SUBRESOURCES",
    "LONG_RUNNING_VERBS",
    "MAX_DURATION",
    "MICROSECOND",
    "MILLISECOND",
    "MINUTE",
    "NANOSECOND",
    "SECOND",
    "format_duration",
    "long_running",
    "long_running_request",
    "parse_duration",
    "seconds_duration",
]
