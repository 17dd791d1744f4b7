"""Fault injection and the request log: the test hooks other components' reliability tests use.

A `Fault` matches requests by method and a regular expression searched in the request target
(path plus query string, so ``watch=true`` can be targeted) and then adds latency, answers with an
error status (429 with Retry-After, 409, 500, ...) or drops the connection (for a watch: the stream
breaks off without its final chunk), before the request is handled or, with ``after``, once it has
taken effect (a lost reply). A write of unknown outcome thus has these shapes: an error status or
a dropped connection without ``after`` never lands, with ``after`` it has landed; a ``latency``
holds the request before it is handled, and one that passes the request's deadline (its
``timeout`` parameter, capped at the server's request timeout) is cut off there: a 504 at the
deadline (the timeout filter's), and the request never lands; with ``in_transit`` the hold comes
before the request reaches the server, so before anything the server does with it (framing,
routing, authentication: a 400, 404 or 401 comes after the hold) and the deadline only starts when it ends;
while a ``latency`` with ``after`` is a slow commit: past the deadline the client gets a 504
``Timeout`` at the deadline and the write lands when the latency ends (kube-apiserver's
``asyncFinisher``), unless that is more than the server's request timeout past the deadline:
then it never lands.
``times`` bounds how often it fires. The request log records who called which verb on which
resource, so RBAC rules can be derived from a test run. No network I/O; the server consults these.

The vocabulary is stable: `Fault`'s fields are `Sandbox.inject`'s keyword arguments and the keys
of the admin API's JSON (`fault_from_json`, `fault_to_json`), which are derived from the dataclass
fields, so a new field of a plain type (bool, int, float, str, optional or not) is served by the
admin API without further code; give it a range in `JSON_RANGES` if it needs one.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    """One injected fault."""

    method: str | None
    path: re.Pattern[str]
    status: int | None = None
    retry_after: int | None = None
    latency: float = 0.0
    times: int | None = None
    drop_watch: bool = False
    after: bool = False
    """Apply the request first, then fail the reply (a lost response after a committed write); with
    ``latency``, the write commits that late (answered 504 if that passes the request's deadline)."""
    in_transit: bool = False
    """With ``latency``: hold the request before it reaches the API server (a network or a proxy in
    between), so its deadline counts from when the hold ends (kube-apiserver's clock starts at
    arrival, ``WithRequestReceivedTimestamp``): a client whose own timeout is shorter always sees
    that timeout, never a 504."""
    hits: int = 0
    """How often the fault fired so far."""

    @property
    def holds_in_transit(self) -> bool:
        """Whether it holds a request before the server sees it (``in_transit`` with a ``latency``)."""
        return self.in_transit and self.latency > 0

    def matches(self, method: str, target: str) -> bool:
        """Whether the fault applies to a request (ignores ``times``)."""
        return (self.method is None or self.method.upper() == method) and self.path.search(target) is not None


JSON_RANGES: dict[str, tuple[float, float]] = {
    "status": (100, 599),
    "retry_after": (0, 86_400),
    "latency": (0, 600),
    "times": (0, 1_000_000_000),
}
"""Accepted ranges of numeric fields in the admin API's JSON (others: 0 to 1e9)."""
MAX_PATTERN = 1024
"""Longest ``path`` regular expression the admin API accepts."""
_METHOD = re.compile(r"[A-Za-z]{1,16}")
_NOT_FROM_JSON = frozenset({"hits"})


def _check_value(name: str, kind: str, value: object) -> object:
    """Type- and range-check one JSON value against a field's annotation (a string, see __future__)."""
    optional = kind.endswith(" | None")
    base = kind.removesuffix(" | None")
    if value is None:
        if optional:
            return None
        raise ValueError(f"{name}: must not be null")
    if base == "bool":
        ok = isinstance(value, bool)
    elif base == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif base in ("str", "re.Pattern[str]"):
        ok = isinstance(value, str)
    else:
        raise ValueError(f"{name}: cannot be set through the admin API")
    if not ok:
        raise ValueError(f"{name}: must be {'null or ' if optional else ''}a JSON {_JSON_NAMES[base]}")
    if base in ("int", "float"):
        low, high = JSON_RANGES.get(name, (0, 1_000_000_000))
        if not low <= value <= high:  # type: ignore[operator]
            raise ValueError(f"{name}: must be between {low:g} and {high:g}")
    return float(value) if base == "float" else value  # type: ignore[arg-type]


_JSON_NAMES = {"bool": "boolean", "int": "integer", "float": "number", "str": "string", "re.Pattern[str]": "string"}


def fault_from_json(body: object) -> Fault:
    """Build a fault from the admin API's JSON object (keys: `Sandbox.inject`'s keyword arguments).

    Raises:
        ValueError: not an object, an unknown key, a wrong type or range, a bad method or regex.
    """
    if not isinstance(body, dict):
        raise ValueError("a fault must be a JSON object")
    known = {f.name: str(f.type) for f in dataclasses.fields(Fault) if f.name not in _NOT_FROM_JSON}
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise ValueError(f"unknown fault field {unknown[0]!r}; known: {', '.join(sorted(known))}")
    values: dict[str, Any] = {name: _check_value(name, known[name], value) for name, value in body.items()}
    method = values.get("method")
    if method is not None and not _METHOD.fullmatch(method):
        raise ValueError(f"method: not an HTTP method: {method[:20]!r}")
    if method is not None:
        values["method"] = method.upper()
    pattern = values.get("path", ".")
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"path: longer than {MAX_PATTERN} characters")
    try:
        values["path"] = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"path: not a regular expression: {exc}") from None
    values.setdefault("method", None)
    return Fault(**values)


def fault_to_json(fault: Fault) -> dict[str, object]:
    """A fault as the admin API shows it (its fields, ``path`` as the pattern text, and ``hits``)."""
    shown: dict[str, object] = {}
    for f in dataclasses.fields(Fault):
        value = getattr(fault, f.name)
        shown[f.name] = value.pattern if isinstance(value, re.Pattern) else value
    return shown


class Faults:
    """The active faults, consulted once per request, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        """Activate a fault; the first matching fault (in order added) fires."""
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove all faults."""
        with self._lock:
            self._faults.clear()

    def snapshot(self) -> list[Fault]:
        """The active faults, in the order they are consulted."""
        with self._lock:
            return list(self._faults)

    def take(self, method: str, target: str, *, in_transit: bool = False) -> Fault | None:
        """The fault that fires for this request, counting it; None if none applies.

        With ``in_transit``: only if that fault holds requests in transit (`Fault.holds_in_transit`).
        The server asks so first, as a request arrives, and otherwise once it is authenticated and
        routed, so a fault that acts in the server is not spent on a request refused before it.
        """
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, target) and (fault.times is None or fault.hits < fault.times):
                    if in_transit and not fault.holds_in_transit:
                        return None
                    fault.hits += 1
                    return fault
        return None


@dataclass(frozen=True)
class RequestRecord:
    """One served request, as the request log keeps it."""

    method: str
    verb: str
    """get, list, watch, create, update, patch, delete, deletecollection, or "" for non-resource URLs."""
    resource: str
    subresource: str
    namespace: str
    name: str
    status: int
    user_agent: str
    user: str
    query: dict[str, str] = field(default_factory=dict)
    path: str = ""
    group: str = ""


class RequestLog:
    """A bounded, thread-safe log of served requests."""

    def __init__(self, limit: int = 200_000) -> None:
        self._lock = threading.Lock()
        self._records: deque[RequestRecord] = deque(maxlen=limit)

    def append(self, record: RequestRecord) -> None:
        """Record one request."""
        with self._lock:
            self._records.append(record)

    def snapshot(self) -> list[RequestRecord]:
        """A copy of the log, oldest first."""
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        """Forget every record."""
        with self._lock:
            self._records.clear()
