from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pynvml as real
import pytest
from real_nvml import load_fake_pynvml, real_backend

from kubectl_gpushare.node.gpus import BackendError, HealthEvent, LimitsUnsupportedError
from kubectl_gpushare.node.nvml_backend import NvmlBackend

fake_pynvml = load_fake_pynvml()

GIB = 1 << 30


def machine(*gpus: tuple[str, int]) -> fake_pynvml.Machine:
    return fake_pynvml.Machine(
        [
            fake_pynvml.FakeGpu(uuid=f"GPU-{i:08d}-0000-0000-0000-000000000000", name=name, memory=mem, minor=i + 10)
            for i, (name, mem) in enumerate(gpus)
        ]
    )


@pytest.fixture
def hetero(monkeypatch: pytest.MonkeyPatch) -> fake_pynvml.Machine:
    m = machine(("Tesla T4", 15109 << 20), ("NVIDIA A100-SXM4-80GB", 80 * GIB))
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.make_module(m))
    return m


class Watcher:
    def __init__(self, backend: NvmlBackend) -> None:
        self.events: list[HealthEvent] = []
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=backend.watch_health, args=(self.stop, self.sink))

    def sink(self, event: HealthEvent) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def wait(self, count: int, timeout: float = 5) -> list[HealthEvent]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.events) >= count, timeout)
            return list(self.events)

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        assert not self.thread.is_alive()


@pytest.fixture
def watcher(hetero: fake_pynvml.Machine) -> Iterator[Watcher]:
    with Watcher(NvmlBackend.start(wait_ms=20)) as w:
        yield w


def test_devices_read_index_uuid_minor_name_and_each_gpus_memory(hetero: fake_pynvml.Machine) -> None:
    gpus = NvmlBackend.start().devices()
    assert [(g.index, g.minor, g.name, g.memory) for g in gpus] == [
        (0, 10, "Tesla T4", 15109 << 20),
        (1, 11, "NVIDIA A100-SXM4-80GB", 80 * GIB),
    ]
    assert gpus[1].uuid == hetero.gpus[1].uuid


def test_missing_driver_is_a_clear_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    m = machine(("x", GIB))
    m.init_error = real.NVML_ERROR_LIBRARY_NOT_FOUND
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.make_module(m))
    with pytest.raises(BackendError, match="cannot initialise NVML.*--fake-gpus"):
        NvmlBackend.start()


def test_critical_xid_marks_only_that_gpu_and_application_xids_are_ignored(
    hetero: fake_pynvml.Machine, watcher: Watcher
) -> None:
    for xid in (13, 31, 43, 45, 68, 109):
        hetero.xid(0, xid)
    hetero.other_event(0)
    hetero.xid(1, 79)
    events = watcher.wait(1)
    assert events == [HealthEvent(hetero.gpus[1].uuid, healthy=False, reason="Xid 79")]
    assert {mask for _, mask in hetero.registered} == {
        real.nvmlEventTypeXidCriticalError | real.nvmlEventTypeDoubleBitEccError
    }


def test_xid_without_a_device_marks_every_gpu(hetero: fake_pynvml.Machine, watcher: Watcher) -> None:
    hetero.xid(None, 48)
    assert watcher.wait(1) == [HealthEvent(None, healthy=False, reason="Xid 48")]


def test_gpu_without_event_support_is_reported_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    m = machine(("old", GIB), ("new", GIB))
    m.gpus[0].events_supported = False
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.make_module(m))
    with Watcher(NvmlBackend.start(wait_ms=20)) as w:
        events = w.wait(1)
    assert events[0].uuid == m.gpus[0].uuid and not events[0].healthy


def test_failing_wait_marks_every_gpu_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    m = machine(("a", GIB))
    m.wait_error = real.NVML_ERROR_UNKNOWN
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.make_module(m))
    with Watcher(NvmlBackend.start(wait_ms=20)) as w:
        events = w.wait(1)
    assert events[0].uuid is None and not events[0].healthy


def test_lost_gpu_is_reported_removed(hetero: fake_pynvml.Machine, watcher: Watcher) -> None:
    hetero.gpus[1].lost = True
    hetero.wait_error = real.NVML_ERROR_GPU_IS_LOST
    events = watcher.wait(1)
    assert events[0] == HealthEvent(hetero.gpus[1].uuid, healthy=False, reason="GPU is lost", removed=True)


def test_close_shuts_nvml_down_once(hetero: fake_pynvml.Machine) -> None:
    backend = NvmlBackend.start()
    backend.close()
    backend.close()
    assert hetero.shutdowns == 1


@pytest.mark.gpu
def test_real_gpus_enumerate() -> None:
    with real_backend() as backend:
        gpus = backend.devices()
        assert gpus and all(g.uuid.startswith(("GPU-", "MIG-")) and g.memory > 0 for g in gpus)


def test_memory_limits_round_trip_through_the_real_structs(hetero: fake_pynvml.Machine) -> None:
    backend = NvmlBackend.start()
    uuid = hetero.gpus[0].uuid
    assert backend.limits_unsupported(uuid, "/sys/fs/cgroup/kubepods") == ""
    backend.set_memory_limits(uuid, "/sys/fs/cgroup/kubepods/podx", 1 << 30, 2 << 30)
    assert hetero.gpus[0].limits == {"/sys/fs/cgroup/kubepods/podx": (1 << 30, 2 << 30)}
    got = backend.get_memory_limits(uuid, "/sys/fs/cgroup/kubepods/podx")
    assert (got.soft, got.hard, got.limited) == (1 << 30, 2 << 30, True)
    assert not backend.get_memory_limits(uuid, "/sys/fs/cgroup/other").limited


@pytest.mark.parametrize(
    ("mig", "error", "expected"),
    [
        (True, None, "MIG is enabled"),
        (False, fake_pynvml.real.NVML_ERROR_FUNCTION_NOT_FOUND, "needs NVIDIA driver r615"),
        (False, fake_pynvml.real.NVML_ERROR_NOT_SUPPORTED, "does not support memory limits"),
        (False, fake_pynvml.real.NVML_ERROR_NO_PERMISSION, "no permission"),
    ],
)
def test_unsupported_gpus_say_why(hetero: fake_pynvml.Machine, mig: bool, error: int | None, expected: str) -> None:
    hetero.gpus[1].mig, hetero.gpus[1].limits_error = mig, error
    backend = NvmlBackend.start()
    assert expected in backend.limits_unsupported(hetero.gpus[1].uuid, "/sys/fs/cgroup/kubepods")
    assert backend.limits_unsupported(hetero.gpus[0].uuid, "/sys/fs/cgroup/kubepods") == ""


def test_a_transient_nvml_error_is_not_unsupported(hetero: fake_pynvml.Machine) -> None:
    hetero.gpus[0].limits_error = fake_pynvml.real.NVML_ERROR_UNKNOWN
    backend = NvmlBackend.start()
    with pytest.raises(BackendError) as err:
        backend.limits_unsupported(hetero.gpus[0].uuid, "/sys/fs/cgroup/kubepods")
    assert not isinstance(err.value, LimitsUnsupportedError)


@pytest.mark.parametrize(("memory_v2", "expected"), [(True, 3 << 30), (False, (3 << 30) + (615 << 20))])
def test_memory_in_use_leaves_out_what_the_driver_reserves_where_nvml_can_tell(
        hetero: fake_pynvml.Machine, memory_v2: bool, expected: int) -> None:
    """As nvidia-smi: on an idle H200 (driver 580) NVML's v1 call counted 615 MiB reserved as used."""
    hetero.memory_v2 = memory_v2
    hetero.gpus[0].used, hetero.gpus[0].reserved = 3 << 30, 615 << 20
    backend = NvmlBackend.start()
    assert backend.memory_used(hetero.gpus[0].uuid) == expected
    assert backend.memory_used(hetero.gpus[0].uuid) == expected  # the v2 answer is remembered, not re-asked
