"""What the two node agents' ``serve`` and command share: their error, backend, API client and exit.

One `DaemonError` and one mapping of failures to exit codes, so the device plugin and the DRA driver
refuse the same ``--fake-gpus``, NVML failure or kubeconfig with the same message and exit code.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.errors import EXIT_START, EXIT_USAGE, KubeError
from kubectl_gpushare.node.backends import FakeSpecError, open_backend
from kubectl_gpushare.node.gpus import BackendError, GpuBackend
from kubectl_gpushare.service import stop_on_signals

if TYPE_CHECKING:
    from kubectl_gpushare.kube.client import Client

EXIT_CONFIG = EXIT_USAGE
"""Bad flags or a configuration the agent refuses (unusable directories, no usable kubeconfig)."""
EXIT_BACKEND = EXIT_START
"""The GPU backend or a socket cannot start (with ``--fail-on-init-error`` for NVML)."""


class DaemonError(Exception):
    """The agent cannot run as configured; ``exit_code`` says which kind of problem it is."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def open_agent_backend(
    fake_gpus: str | None,
    *,
    seed: str,
    ignored_xids: frozenset[int] = protocol.APPLICATION_XIDS,
    fail_on_init_error: bool = True,
) -> GpuBackend:
    """`open_backend`, its failures as `DaemonError`: a bad fake spec is `EXIT_CONFIG`, NVML `EXIT_BACKEND`.

    Raises:
        DaemonError: the fake spec is invalid, or NVML cannot start and failing is configured.
    """
    try:
        return open_backend(fake_gpus, seed=seed, ignored_xids=ignored_xids, fail_on_init_error=fail_on_init_error)
    except FakeSpecError as exc:
        raise DaemonError(str(exc), EXIT_CONFIG) from exc
    except BackendError as exc:
        raise DaemonError(str(exc), EXIT_BACKEND) from exc


KUBE_FLAGS = ("kubeconfig", "context", "cluster", "user", "as_user", "as_groups", "request_timeout")
"""kubectl's connection flags (`kube.flags.kube_options`); an agent's options may leave any out."""


def api_client(options: Mapping[str, object], component: str) -> Client:
    """`kube.flags.make_client` over the kubectl flags in ``options`` (absent ones: kubectl's defaults).

    Raises:
        DaemonError: no usable kubeconfig or in-cluster configuration (`EXIT_CONFIG`).
    """
    from kubectl_gpushare.kube.flags import make_client

    flags = {key: options.get(key) for key in KUBE_FLAGS}
    groups = options.get("as_groups")
    flags["as_groups"] = tuple(groups) if isinstance(groups, (list, tuple)) else ()
    try:
        return make_client(flags, component)
    except KubeError as exc:
        raise DaemonError(str(exc), EXIT_CONFIG) from exc


def serve_until_signalled(serve: Callable[[threading.Event], None]) -> None:
    """Run ``serve(stop)`` until SIGTERM/SIGINT set ``stop``; a `DaemonError` becomes one line and its exit code."""
    stop = stop_on_signals()
    try:
        serve(stop)
    except DaemonError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
