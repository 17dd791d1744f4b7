"""Which GPU backend a node agent runs on: ``--fake-gpus``, else NVML, else none (when allowed).

One rule for the device plugin and the DRA driver, so ``--fake-gpus`` and ``--fail-on-init-error``
mean the same for both.
"""

from __future__ import annotations

import logging

from kubectl_gpushare import protocol
from kubectl_gpushare.node.fake_backend import FakeBackend
from kubectl_gpushare.node.gpus import BackendError, GpuBackend, NullBackend

log = logging.getLogger(__name__)


class FakeSpecError(BackendError):
    """The ``--fake-gpus`` value cannot be read (a usage error, not a backend failure)."""


def open_backend(
    fake_gpus: str | None,
    *,
    seed: str,
    ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS,
    fail_on_init_error: bool = True,
) -> GpuBackend:
    """The fake backend for a ``--fake-gpus`` spec, else NVML, else a `NullBackend` when NVML fails.

    Args:
        fake_gpus: the ``--fake-gpus`` spec, or None for real GPUs.
        seed: keeps fake UUIDs distinct per node (the node name).
        ignored_xids: Xids that never mark a GPU unhealthy.
        fail_on_init_error: raise when NVML cannot start; otherwise log it and serve no GPUs.

    Raises:
        FakeSpecError: the fake spec is invalid.
        BackendError: NVML cannot start and ``fail_on_init_error`` is set.
    """
    if fake_gpus:
        try:
            return FakeBackend.from_spec(fake_gpus, seed=seed, ignored_xids=ignored_xids)
        except BackendError as exc:
            raise FakeSpecError(str(exc)) from exc
    from kubectl_gpushare.node.nvml_backend import NvmlBackend

    try:
        return NvmlBackend.start(ignored_xids)
    except BackendError as exc:
        if fail_on_init_error:
            raise
        log.error("%s; serving no GPUs (--no-fail-on-init-error)", exc)
        return NullBackend(str(exc))
