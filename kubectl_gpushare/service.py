"""What the long-running components share: logs, signals, and the check for the ``daemons`` extra.

The extender and the device plugin use this so that ``--log-format json`` and SIGTERM mean the
same thing for both. Logs go to stderr as text or one JSON object per line; messages never carry
credentials (nothing in the package logs a token, a kubeconfig user's secrets or request headers).
Only click and the standard library are imported, so commands' ``--help`` stays fast.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

import click

from kubectl_gpushare.protocol import ENV_LOG_FORMAT

F = TypeVar("F", bound=Callable[..., Any])

DAEMONS_EXTRA: Final = "kubectl-gpushare[daemons]"
"""The extra that brings what the daemons import beyond the plugin's own dependencies."""
ENV_LAUNCHER: Final = "KUBECTL_GPUSHARE_LAUNCHER"
"""Set to ``krew`` by the krew archive's launcher (plugin/launcher.sh) for the commands it runs."""
IMAGE: Final = "ghcr.io/kubectl-gpushare/kubectl-gpushare"
"""The container image, which carries the daemons' extra (manifests/base)."""

LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
"""Level names accepted by ``--log-level`` (``warn`` is the original extender's spelling)."""
ENV_LOG_LEVEL: Final = "GPUSHARE_LOG_LEVEL"
"""The one spelling of the log-level variable, beside ``GPUSHARE_LOG_FORMAT``, for every daemon."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: UTC time, level, logger, message (and the traceback, if any)."""

    def __init__(self) -> None:
        super().__init__()
        self.converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        """Render one record."""
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(log_format: str, level: str) -> None:
    """Send the root logger to stderr as ``text`` or ``json`` at ``level`` (a `LEVELS` name)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        formatter: logging.Formatter = JsonFormatter()
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%SZ")
        formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LEVELS.get(level.lower(), logging.INFO))


def log_options(*legacy_envvars: str) -> Callable[[F], F]:
    """Add ``--log-format text|json`` and ``--log-level``.

    ``--log-level`` reads `ENV_LOG_LEVEL` (``GPUSHARE_LOG_LEVEL``) for every daemon; a daemon may
    also name the variable the original component read (the extender's ``LOG_LEVEL``), which is
    honoured after the canonical one so old manifests keep working.
    """
    envvars = list(dict.fromkeys((ENV_LOG_LEVEL, *legacy_envvars)))

    def decorate(function: F) -> F:
        function = click.option(
            "--log-level", envvar=envvars, type=click.Choice(sorted(LEVELS), case_sensitive=False),
            default="info", show_default=True, show_envvar=True, help="Least severe level logged.",
        )(function)
        return click.option(
            "--log-format", envvar=ENV_LOG_FORMAT, type=click.Choice(["text", "json"]), default="text",
            show_default=True, show_envvar=True, help="Log lines as text or as one JSON object each.",
        )(function)

    return decorate


class SignalRelay:
    """Signals that set an Event, from a relay thread rather than from the signal handler.

    A Python signal handler runs in the main thread between two bytecodes. Setting the Event there
    takes the Event's lock, which the main thread may be holding at that moment (inside
    ``stop.wait``, around its ``Condition.wait``): it would wait for itself for good. The handler
    only writes a byte to a pipe; a thread reads it and sets the Event.
    """

    def __init__(self, stop: threading.Event, signums: Iterable[signal.Signals]) -> None:
        """Install the handlers (main thread only: elsewhere nothing is installed and the caller sets ``stop``)."""
        self.previous: dict[signal.Signals, Any] = {}
        self._write = -1
        if threading.current_thread() is not threading.main_thread():
            return
        read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # a burst of signals must never block the handler
        threading.Thread(target=self._relay, args=(read, stop), name="signals", daemon=True).start()
        for signum in signums:
            self.previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        try:
            os.write(self._write, b"\0")
        except OSError:  # BlockingIOError, full: a byte is already there; closed: being restored
            pass

    @staticmethod
    def _relay(read: int, stop: threading.Event) -> None:
        try:
            if os.read(read, 1):  # b"" once `close` closed the other end
                stop.set()
        finally:
            os.close(read)

    def close(self) -> None:
        """Put the previous handlers back and end the relay thread."""
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
        if self._write >= 0:
            os.close(self._write)
            self._write = -1


def stop_on_signals() -> threading.Event:
    """An Event that SIGTERM and SIGINT set, so a daemon shuts down cleanly instead of dying.

    Handlers can only be installed on the main thread; elsewhere (tests, embedders) the Event is
    returned untouched and the caller sets it. See `SignalRelay` for why a thread sets it.
    """
    stop = threading.Event()
    SignalRelay(stop, (signal.SIGTERM, signal.SIGINT))
    return stop


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package ("google" for google.protobuf)
        return False


def require_daemon_modules(command: str, modules: Iterable[str]) -> None:
    """Refuse to start, naming `DAEMONS_EXTRA`, when any of ``modules`` is not installed.

    ``pip install kubectl-gpushare`` brings only the plugin's dependencies; the daemons' come with
    the extra. Checking before the first heavy import turns a traceback into an instruction.
    """
    missing = [module for module in modules if not _installed(module)]
    if missing:
        # A usage error: the CLI prints it as one line and exits with the shared table's code (2).
        if os.environ.get(ENV_LAUNCHER) == "krew":
            # krew's private environment belongs to the launcher: a pip install elsewhere never reaches it.
            how = (f"krew's install cannot take extras; use pipx install '{DAEMONS_EXTRA}' (then run "
                   f"kubectl-gpushare from pipx) or the container image {IMAGE}")
        else:
            how = f"install them with: pip install '{DAEMONS_EXTRA}'"
        raise click.UsageError(f"{command} needs {', '.join(missing)}, which the plain install leaves out; {how}")
