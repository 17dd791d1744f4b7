"""Against a real driver: set and read a memory limit on a temporary cgroup (skipped without one)."""

from __future__ import annotations

import pytest
from real_nvml import real_backend, scratch_cgroup

from kubectl_gpushare.node.gpus import MEMORY_LIMIT_MAX

MiB = 1 << 20


@pytest.mark.gpu
def test_real_driver_sets_and_reads_a_cgroup_limit() -> None:
    with real_backend() as backend, scratch_cgroup() as cgroup:
        gpu = backend.devices()[0]
        reason = backend.limits_unsupported(gpu.uuid, cgroup)
        if reason:
            pytest.skip(f"driver answered: {reason}")
        backend.set_memory_limits(gpu.uuid, cgroup, 256 * MiB, 512 * MiB)
        got = backend.get_memory_limits(gpu.uuid, cgroup)
        assert (got.soft, got.hard, got.used) == (256 * MiB, 512 * MiB, 0)
        backend.set_memory_limits(gpu.uuid, cgroup, 0, MEMORY_LIMIT_MAX)
        assert not backend.get_memory_limits(gpu.uuid, cgroup).limited
