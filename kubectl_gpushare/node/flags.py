"""Flags both node agents take (``serve-device-plugin``, ``serve-dra-driver``): one spelling each.

The environment twins of the GPU and cgroup flags, and the reader of ``--ignore-xids``, so the same
DaemonSet variable means the same thing to either agent.
"""

from __future__ import annotations

import click

from kubectl_gpushare import protocol

ENV_VISIBLE_DEVICES_MODE = "GPUSHARE_VISIBLE_DEVICES"
ENV_HEALTH_CHECK = "GPUSHARE_HEALTH_CHECK"
ENV_IGNORE_XIDS = "GPUSHARE_IGNORE_XIDS"
ENV_FAIL_ON_INIT_ERROR = "GPUSHARE_FAIL_ON_INIT_ERROR"
ENV_CGROUP_ROOT = "GPUSHARE_CGROUP_ROOT"
ENV_CGROUP_DRIVER = "GPUSHARE_CGROUP_DRIVER"


def parse_xids(text: str | None) -> frozenset[int]:
    """Read ``--ignore-xids``: a comma-separated list of Xid numbers (blank entries are skipped).

    Raises:
        click.BadParameter: an entry is not a non-negative integer.
    """
    found: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        value = protocol.parse_int_strict(part)
        if value is None or value < 0:
            raise click.BadParameter(f"{part!r} is not an Xid number", param_hint="--ignore-xids")
        found.add(value)
    return frozenset(found)
