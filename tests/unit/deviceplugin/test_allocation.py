"""The allocation book's claims, shared re-reads and write outcomes (no sockets: see the integration tests)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import pytest

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin.allocation import (
    CLAIM_GRACE,
    AllocateError,
    AllocationBook,
    OutcomeUnknownError,
    PodGoneError,
    SharedRefresh,
)
from kubectl_gpushare.deviceplugin.devices import Inventory, MemoryUnit
from kubectl_gpushare.ledger import PodRecord
from kubectl_gpushare.node.fake_backend import FakeBackend


def pod(name: str, units: int, *, gpu: int = 0, assigned: str | None = "false") -> PodRecord:
    return PodRecord(
        uid=f"uid-{name}", namespace="default", name=name, node="n1", phase="Pending", request=units,
        container_requests=(units,), gpu_index=gpu, assigned=assigned, assume_time=1,
    )


class SplitSource:
    """A cache and an API that disagree: the cache may lose a pod the API still lists unassigned."""

    def __init__(self, cache: list[PodRecord], listed: list[PodRecord]) -> None:
        self.cache = cache
        self.listed = listed
        self.refreshes = 0

    def pods(self) -> list[PodRecord]:
        return list(self.cache)

    def refresh(self) -> list[PodRecord]:
        self.refreshes += 1
        return list(self.listed)

    def arrivals(self) -> Mapping[str, int]:
        return {}

    def synced(self) -> bool:
        return True


class Recorder:
    def __init__(self, errors: dict[str, Exception] | None = None) -> None:
        self.errors = dict(errors or {})
        self.writes: list[str] = []

    def record(self, pod: PodRecord, annotations: dict[str, str]) -> None:
        error = self.errors.pop(pod.name, None)
        if error is not None:
            raise error
        self.writes.append(pod.name)


class Clock:
    """A monotonic clock that ticks a millisecond per reading and jumps when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


def book_for(source: SplitSource, spec: str = "2x16GiB", recorder: Recorder | None = None, clock: Clock | None = None):
    backend = FakeBackend.from_spec(spec, seed="n1")
    book = AllocationBook(
        node="n1",
        inventory=Inventory.of(backend.devices(), MemoryUnit("GiB")),
        inventory_lock=threading.Lock(),
        source=source,
        recorder=recorder or Recorder(),
        clock=clock or Clock(),
    )
    return book


def ids(book: AllocationBook, gpu: int, count: int) -> list[str]:
    uuid = book.inventory.gpus()[gpu].uuid
    return [protocol.fake_device_id(uuid, j) for j in range(count)]


def test_a_pod_served_through_the_re_read_stays_claimed_when_the_cache_loses_it() -> None:
    served = pod("early", 4, gpu=1)
    source = SplitSource(cache=[], listed=[served])  # the watch has not seen it; a stale list still shows it
    clock = Clock()
    recorder = Recorder()
    book = book_for(source, recorder=recorder, clock=clock)
    assert book.allocate(ids(book, 1, 4)).pod.name == "early"
    with pytest.raises(AllocateError, match="no pending pod"):
        book.allocate(ids(book, 1, 4))
    assert recorder.writes == ["early"]
    # Only once the pod has been out of every view for CLAIM_GRACE is the claim dropped.
    source.listed = []
    with pytest.raises(AllocateError):
        book.allocate(ids(book, 1, 4))
    clock.now += CLAIM_GRACE + 1
    with pytest.raises(AllocateError):
        book.allocate(ids(book, 1, 4))
    source.listed = [served]
    assert book.allocate(ids(book, 1, 4)).pod.name == "early"


def test_an_unanswered_write_keeps_the_claim_and_its_memory() -> None:
    strays = [pod("first", 10, gpu=-1, assigned=None), pod("second", 10, gpu=-1, assigned=None)]
    recorder = Recorder({"first": OutcomeUnknownError("no answer within 3s")})
    book = book_for(SplitSource(strays, strays), spec="1x16GiB", recorder=recorder)
    with pytest.raises(AllocateError, match="may have been recorded") as info:
        book.allocate(ids(book, 0, 10))
    assert info.value.kind == "unavailable"
    with pytest.raises(AllocateError, match="has 6 GiB free by the ledger") as info:
        book.allocate(ids(book, 0, 10))
    assert info.value.kind == "exhausted"
    assert recorder.writes == []


def test_a_failed_write_releases_the_pod_and_a_gone_pod_is_passed_over() -> None:
    a, b = pod("a", 4, gpu=0), pod("b", 4, gpu=1)
    recorder = Recorder({"a": PodGoneError("uid precondition failed")})
    book = book_for(SplitSource([a, b], [a, b]), recorder=recorder)
    assert book.allocate(ids(book, 1, 4)).pod.name == "b"
    with pytest.raises(AllocateError, match="no pending pod"):
        book.allocate(ids(book, 0, 4))  # "a" was re-created: its old record is never picked again
    recorder.errors["c"] = RuntimeError("HTTP 500")
    c = pod("c", 2, gpu=0)
    book.source.cache.append(c)  # type: ignore[attr-defined]
    with pytest.raises(AllocateError, match="could not record GPU 0 on pod default/c"):
        book.allocate(ids(book, 0, 2))
    assert book.allocate(ids(book, 0, 2)).pod.name == "c"


def test_callers_that_miss_together_share_one_re_read() -> None:
    entered, release = threading.Event(), threading.Event()
    calls = []

    def slow_refresh() -> list[PodRecord]:
        calls.append(1)
        entered.set()
        release.wait(10)
        return [pod("p", 1)]

    shared = SharedRefresh(slow_refresh, clock=lambda: float(len(calls)))
    results: list[list[PodRecord]] = []
    first = threading.Thread(target=lambda: results.append(shared.get(0.0)))
    first.start()
    assert entered.wait(10)
    waiters = [threading.Thread(target=lambda: results.append(shared.get(0.0))) for _ in range(3)]
    later = [threading.Thread(target=lambda: results.append(shared.get(1.0))) for _ in range(3)]
    for thread in waiters + later:
        thread.start()
    release.set()
    for thread in [first, *waiters, *later]:
        thread.join(10)
    assert len(results) == 7 and all(r == [pod("p", 1)] for r in results)
    assert len(calls) == 2  # one for the need that predates it, one for every need that came later
