"""Against a real driver: set and read a memory limit on a temporary cgroup (skipped without one)."""

from __future__ import annotations

import os
import uuid

import pytest

from kubectl_gpushare.node.gpus import MEMORY_LIMIT_MAX, BackendError
from kubectl_gpushare.node.nvml_backend import NvmlBackend

MiB = 1 << 20


@pytest.mark.gpu
def test_real_driver_sets_and_reads_a_cgroup_limit() -> None:
    try:
        backend = NvmlBackend.start()
    except BackendError as exc:
        pytest.skip(f"no GPU here: {exc}")
    cgroup = f"/sys/fs/cgroup/gpushare-test-{uuid.uuid4().hex[:12]}"
    try:
        if not os.path.isfile("/sys/fs/cgroup/cgroup.controllers"):
            pytest.skip("/sys/fs/cgroup is not cgroup v2")
        try:
            os.mkdir(cgroup)
        except OSError as exc:
            pytest.skip(f"cannot create a cgroup (needs root): {exc}")
        gpu = backend.devices()[0]
        reason = backend.limits_unsupported(gpu.uuid, cgroup)
        if reason:
            pytest.skip(f"driver answered: {reason}")
        backend.set_memory_limits(gpu.uuid, cgroup, 256 * MiB, 512 * MiB)
        got = backend.get_memory_limits(gpu.uuid, cgroup)
        assert (got.soft, got.hard, got.used) == (256 * MiB, 512 * MiB, 0)
        backend.set_memory_limits(gpu.uuid, cgroup, 0, MEMORY_LIMIT_MAX)
        assert not backend.get_memory_limits(gpu.uuid, cgroup).limited
    finally:
        if os.path.isdir(cgroup):
            os.rmdir(cgroup)
        backend.close()
