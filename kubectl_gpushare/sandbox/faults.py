"""Fault injection and the request log: the test hooks other components' reliability tests use.

A `Fault` matches requests by method and a regular expression searched in the request target
(path plus query string, so ``watch=true`` can be targeted) and then adds latency, answers with an
error status (429 with Retry-After, 409, 500, ...) or drops the connection (for a watch: the stream
breaks off without its final chunk), before the request is handled or, with ``after``, once it has
taken effect (a lost reply). ``times`` bounds how often it fires. The request log records
who called which verb on which resource, so RBAC rules can be derived from a test run. No network
I/O; the server consults these.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass, field


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
    """Apply the request first, then fail the reply (a lost response after a committed write)."""
    hits: int = 0
    """How often the fault fired so far."""

    def matches(self, method: str, target: str) -> bool:
        """Whether the fault applies to a request (ignores ``times``)."""
        return (self.method is None or self.method.upper() == method) and self.path.search(target) is not None


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

    def take(self, method: str, target: str) -> Fault | None:
        """The fault that fires for this request, counting it; None if none applies."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, target) and (fault.times is None or fault.hits < fault.times):
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
