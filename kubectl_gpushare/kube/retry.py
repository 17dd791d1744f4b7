"""Bounded retries with exponential backoff and jitter for transient API failures.

Retried: 429 (waiting at least the server's ``Retry-After``), 5xx other than 501, timeouts and
connection errors (`Unreachable`), and, only for callers that re-read before writing again, 409.
Never retried: every other 4xx (401, 403, 404, 410, 422, ...), configuration errors, or anything
that is not a `KubeError`: repeating those cannot succeed.

This module owns the retry policy. It does no I/O itself; callers pass the operation as a callable
(re-reading inside it when they retry conflicts). Note that retrying a POST after a timeout may
repeat it; callers make such writes idempotent (bind, for example, answers 409 the second time).
A write never sent on its last try (`errors.not_sent`) may still have landed on an earlier one:
`call_with_retry` then marks it sent, so no caller takes "nothing changed" from the last try alone.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from kubectl_gpushare.kube.errors import (
    Conflict,
    KubeError,
    ServerError,
    TooManyRequests,
    Unreachable,
    did_not_happen,
)

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry.

    Attributes:
        attempts: total tries, the first included (1 = no retry).
        base: delay before the first retry, in seconds; doubles each time.
        cap: the longest delay between tries, before jitter.
        jitter: random extra delay as a fraction of the delay (0.5 = up to +50%), so many
            clients that failed together do not retry together.
        deadline: give up once this many seconds have passed since the first try (None: no limit).
        retry_conflict: also retry 409 Conflict (only when the operation re-reads the object).
        max_retry_after: the longest ``Retry-After`` honoured; longer asks end the retries.
        retry_unreachable: also retry timeouts and connection errors.
    """

    attempts: int = 5
    base: float = 0.2
    cap: float = 5.0
    jitter: float = 0.5
    deadline: float | None = 30.0
    retry_conflict: bool = False
    max_retry_after: float = 60.0
    retry_unreachable: bool = True


DEFAULT_POLICY: Final = RetryPolicy()
"""Five tries over at most 30 s: for API calls made on behalf of a waiting user or scheduler."""
READ_POLICY: Final = RetryPolicy(attempts=4, base=0.1, cap=2.0, deadline=10.0, retry_unreachable=False)
"""What `kube.client.Client` applies to GETs by default: rides out throttling and server hiccups, but
reports an unreachable server at once (a user is waiting, and kubectl does not retry that either)."""
CONFLICT_POLICY: Final = RetryPolicy(attempts=5, base=0.05, cap=1.0, retry_conflict=True)
"""For read-modify-write loops that re-read the object before each try."""


def is_retryable(error: BaseException, retry_conflict: bool = False, retry_unreachable: bool = True) -> bool:
    """Whether trying the same request again may succeed."""
    if isinstance(error, TooManyRequests):
        return True
    if isinstance(error, Unreachable):
        return retry_unreachable
    if isinstance(error, ServerError):
        return error.status != 501
    if isinstance(error, Conflict):
        return retry_conflict
    return False


def backoff_delay(attempt: int, policy: RetryPolicy, error: BaseException | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based).

    Exponential from ``policy.base`` up to ``policy.cap``, plus jitter; never less than the
    server's ``Retry-After`` when the error carries one.
    """
    delay: float = min(policy.cap, policy.base * 2.0 ** max(0, attempt - 1))
    delay += delay * policy.jitter * random.random()
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, (int, float)) and retry_after > 0:
        delay = max(delay, float(retry_after))
    return delay


def call_with_retry(
    operation: Callable[[], T],
    policy: RetryPolicy = DEFAULT_POLICY,
    *,
    stop: threading.Event | None = None,
    sleep: Callable[[float], object] | None = None,
    on_retry: Callable[[int, KubeError, float], object] | None = None,
) -> T:
    """Run ``operation`` until it succeeds, fails for good, or the policy runs out.

    Args:
        operation: the API call (re-read inside it if ``policy.retry_conflict``).
        policy: attempts, backoff and which errors to retry.
        stop: when set during a wait, give up at once and raise the last error.
        sleep: the wait function (tests pass a fake clock); defaults to waiting on ``stop``.
        on_retry: called with (attempt, error, delay) before each wait, e.g. to log.

    Returns:
        What ``operation`` returned.

    Raises:
        KubeError: the last error, when it is not retryable or the policy is exhausted; an `Unreachable`
            never sent (`errors.not_sent`) after a try that may have landed is marked sent.
    """
    started = time.monotonic()
    attempt = 0
    unknown = False  # whether a try so far may have landed (its outcome unknown)
    while True:
        attempt += 1
        try:
            return operation()
        except KubeError as error:
            if unknown and isinstance(error, Unreachable):
                error.sent = True  # not sent this time, but an earlier try may have landed
            unknown = unknown or not did_not_happen(error)
            retryable = is_retryable(error, policy.retry_conflict, policy.retry_unreachable)
            if not retryable or attempt >= policy.attempts:
                raise
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)) and retry_after > policy.max_retry_after:
                raise
            delay = backoff_delay(attempt, policy, error)
            if policy.deadline is not None and time.monotonic() - started + delay > policy.deadline:
                raise
            if on_retry is not None:
                on_retry(attempt, error, delay)
            else:
                log.debug("retrying after %s (attempt %d, waiting %.2fs)", error, attempt, delay)
            if sleep is not None:
                sleep(delay)
            elif stop is not None:
                if stop.wait(delay):
                    raise
            else:
                time.sleep(delay)
            if stop is not None and stop.is_set():
                raise


__all__ = [
    "CONFLICT_POLICY",
    "DEFAULT_POLICY",
    "READ_POLICY",
    "RetryPolicy",
    "backoff_delay",
    "call_with_retry",
    "is_retryable",
]
