"""Logging for the long-running components: text or one JSON object per line on stderr.

The extender and the device plugin share this so that ``--log-format json`` means the same thing
for both. Messages never carry credentials: nothing in the package logs a token, a kubeconfig
user's secrets or a request's headers.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Final

LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
"""Level names accepted by ``--log-level`` (``warn`` is the original extender's spelling)."""


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
