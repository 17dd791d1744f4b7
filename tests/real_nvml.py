"""The node agents against NVML rather than ``--fake-gpus``: the real driver, or the fake ``pynvml`` in its place.

A test parametrized with `NVML_VARIANTS` runs one body twice: ``real-nvml`` (marked ``gpu``) on the
machine's driver, skipped where NVML cannot start (no GPU, no driver library, no nvidia-ml-py), and
``fake-nvml`` with ``tests/unit/node/fake_pynvml.py`` as ``sys.modules["pynvml"]``, so CI runs the
same agent code (``NvmlBackend`` through ``open_backend``) the GPU run does. The fake machine models
the driver the GPU run is meant for: r580, which has no per-cgroup memory-limit calls.

The expected values come from pynvml itself (`read_nvml`), never from the agents under test.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpushare.node.gpus import BackendError
from kubectl_gpushare.node.nvml_backend import NvmlBackend

GIB = 1 << 30
MIB = 1 << 20
REAL = "real-nvml"
FAKE = "fake-nvml"
NVML_VARIANTS = [pytest.param(REAL, id=REAL, marks=pytest.mark.gpu), pytest.param(FAKE, id=FAKE)]
FAKE_DRIVER = "580.159.04"
"""The driver the GPU run has (no ``nvmlDeviceGetMemoryLimits_v1``: added in r615)."""


def load_fake_pynvml() -> Any:
    """``tests/unit/node/fake_pynvml.py`` as one module object, however many tests load it."""
    loaded = sys.modules.get("fake_pynvml")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        "fake_pynvml", Path(__file__).parent / "unit" / "node" / "fake_pynvml.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    module = sys.modules.setdefault("fake_pynvml", module)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["fake_pynvml"]  # not half a module for the next caller
        raise
    return module


@dataclass(frozen=True)
class NvmlGpu:
    """One GPU as NVML lists it."""

    index: int
    uuid: str
    name: str
    memory: int
    """Total bytes (``nvmlDeviceGetMemoryInfo(...).total``)."""

    @property
    def gib(self) -> int:
        """Whole GiB: the devices the plugin advertises for it, and its DRA capacity, at the default unit."""
        return self.memory // GIB


@dataclass(frozen=True)
class Nvml:
    """What NVML says about this machine, read directly through pynvml."""

    variant: str
    driver: str
    gpus: tuple[NvmlGpu, ...]
    binding_has_limits: bool
    """The nvidia-ml-py installed has ``nvmlDeviceGetMemoryLimits_v1`` (13.615 or newer)."""

    @property
    def pre_r615(self) -> bool:
        """The driver predates per-cgroup memory limits (r615)."""
        try:
            return int(self.driver.split(".")[0]) < 615
        except ValueError:
            return False

    def unenforced_reason_says(self) -> str:
        """What the agents' reason for not enforcing must name here (the release that brings the calls)."""
        return "r615" if self.binding_has_limits else "13.615"

    def summary(self) -> str:
        """One line for the lead's report."""
        gpus = "; ".join(f"{g.index}: {g.name} {g.uuid} {g.memory} bytes ({g.memory // MIB} MiB)" for g in self.gpus)
        return f"{self.variant}: driver {self.driver}, nvidia-ml-py limits calls: {self.binding_has_limits}; {gpus}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_nvml(variant: str) -> Nvml:
    """The GPUs, as the ``pynvml`` now in ``sys.modules`` lists them (NVML's init is reference counted)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(NvmlGpu(index, _text(pynvml.nvmlDeviceGetUUID(handle)), _text(pynvml.nvmlDeviceGetName(handle)),
                                int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)))
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    finally:
        pynvml.nvmlShutdown()
    return Nvml(variant, driver, tuple(gpus), hasattr(pynvml, "nvmlDeviceGetMemoryLimits_v1"))


def fake_machine() -> Any:
    """Two GPUs of the GPU run's kinds on an r580 driver: limit calls are not in its library."""
    fake = load_fake_pynvml()
    import pynvml as real

    missing = real.NVML_ERROR_FUNCTION_NOT_FOUND  # what pynvml raises for a symbol the library lacks
    return fake.Machine(
        [
            fake.FakeGpu(uuid="GPU-5e1f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b", name="NVIDIA H200", memory=143771 * MIB,
                         minor=0, limits_error=missing),
            fake.FakeGpu(uuid="GPU-6f2a1b3c-4d5e-4f60-9bac-1d2e3f4a5b6c", name="NVIDIA H100 80GB HBM3",
                         memory=81559 * MIB, minor=1, limits_error=missing),
        ],
        driver=FAKE_DRIVER,
    )


def open_nvml(variant: str, monkeypatch: pytest.MonkeyPatch) -> Nvml:
    """Put the variant's ``pynvml`` in place (skip ``real-nvml`` where NVML cannot start) and read it."""
    if variant == FAKE:
        pytest.importorskip("pynvml", reason="fake_pynvml reuses nvidia-ml-py's error classes and structs")
        monkeypatch.setitem(sys.modules, "pynvml", load_fake_pynvml().make_module(fake_machine()))
    else:
        try:
            NvmlBackend.start().close()
        except BackendError as exc:
            pytest.skip(f"no GPU here: {exc}")
    nvml = read_nvml(variant)
    if not nvml.gpus:
        pytest.skip(f"NVML lists no GPU (driver {nvml.driver})")
    return nvml


def under(path: str | Path, root: str | Path) -> bool:
    """``path`` is ``root`` or inside it (the agents' host paths must all be the test's own)."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())


@contextmanager
def real_backend() -> Iterator[NvmlBackend]:
    """NVML on this machine's driver, closed afterwards; the test is skipped where it cannot start."""
    try:
        backend = NvmlBackend.start()
    except BackendError as exc:
        pytest.skip(f"no GPU here: {exc}")
    try:
        yield backend
    finally:
        backend.close()


@contextmanager
def scratch_cgroup(*below: str) -> Iterator[str]:
    """A new cgroup v2 directory (and the ``below`` ones inside it, innermost yielded), removed afterwards.

    Made directly under ``/sys/fs/cgroup``, never under a real ``kubepods``; skipped where
    ``/sys/fs/cgroup`` is not cgroup v2 or cannot be written (not root).
    """
    if not os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
        pytest.skip("/sys/fs/cgroup is not cgroup v2")
    paths = [f"/sys/fs/cgroup/gpushare-test-{uuid.uuid4().hex[:12]}"]
    for name in below:
        paths.append(f"{paths[-1]}/{name}")
    try:
        os.makedirs(paths[-1])
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup (needs root): {exc}")
    try:
        yield paths[-1]
    finally:
        for path in reversed(paths):
            if os.path.isdir(path):
                os.rmdir(path)
