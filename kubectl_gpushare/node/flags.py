"""Flags both node agents take (``serve-device-plugin``, ``serve-dra-driver``): one spelling each.

The click options of the GPU and cgroup flags, their environment twins, and the reader of
``--ignore-xids``, so the same flag and DaemonSet variable mean the same thing to either agent.
Each option is a decorator factory; where the agents word a flag's help for what they do (advertise
devices, publish a slice), the help is the caller's, the name, type, default and twin are not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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


F = TypeVar("F", bound=Callable[..., Any])


def _node_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--node-name`` read as a Node's name (a DNS-1123 subdomain), or refused.

    It goes into field selectors (``metadata.name=<node>``, ``spec.nodeName=<node>``) and object
    names, where a comma or an ``=`` would change what is asked. Absence is the command's to refuse
    (its message names the variable).
    """
    if value and not protocol.valid_dns_subdomain(value):
        shown = protocol.shown_value(value)
        raise click.BadParameter(f"{shown} is not a node name (lower-case letters, digits, '-' and '.', "
                                 f"at most {protocol.DNS1123_SUBDOMAIN_MAX})")
    return value


def node_name_option(help: str) -> Callable[[F], F]:
    """``--node-name`` (``NODE_NAME``): this node's name, checked as the API checks a Node's."""
    return click.option("--node-name", envvar=protocol.ENV_NODE_NAME, show_envvar=True, callback=_node_name,
                        help=help)


def memory_unit_option(help: str) -> Callable[[F], F]:
    """``--memory-unit GiB|MiB``."""
    return click.option("--memory-unit", envvar=protocol.ENV_MEMORY_UNIT,
                        type=click.Choice(["GiB", "MiB"], case_sensitive=False), default="GiB", show_default=True,
                        show_envvar=True, help=help)


def fake_gpus_option(help: str) -> Callable[[F], F]:
    """``--fake-gpus SPEC``: made-up GPUs instead of NVML's."""
    return click.option("--fake-gpus", envvar=protocol.ENV_FAKE_GPUS, show_envvar=True, metavar="SPEC", help=help)


def visible_devices_option(help: str) -> Callable[[F], F]:
    """``--visible-devices index|uuid``: how NVIDIA_VISIBLE_DEVICES names a GPU."""
    return click.option("--visible-devices", envvar=ENV_VISIBLE_DEVICES_MODE, type=click.Choice(["index", "uuid"]),
                        default="index", show_default=True, show_envvar=True, help=help)


def health_check_option(help: str) -> Callable[[F], F]:
    """``--health-check/--no-health-check``: watch NVML Xid events."""
    return click.option("--health-check/--no-health-check", envvar=ENV_HEALTH_CHECK, default=True,
                        show_default=True, show_envvar=True, help=help)


def ignore_xids_option() -> Callable[[F], F]:
    """``--ignore-xids LIST``, read by `parse_xids`."""
    return click.option("--ignore-xids", envvar=ENV_IGNORE_XIDS, default="", show_envvar=True, metavar="LIST",
                        help="More Xids to ignore, comma-separated (13, 31, 43, 45, 68 and 109 always are).")


def fail_on_init_error_option(help: str) -> Callable[[F], F]:
    """``--fail-on-init-error/--no-fail-on-init-error``: exit when NVML cannot start."""
    return click.option("--fail-on-init-error/--no-fail-on-init-error", envvar=ENV_FAIL_ON_INIT_ERROR, default=True,
                        show_default=True, show_envvar=True, help=help)


def enforce_memory_option(help: str) -> Callable[[F], F]:
    """``--enforce-memory``: one of `protocol.ENFORCE_MODES`."""
    return click.option("--enforce-memory", envvar=protocol.ENV_ENFORCE_MEMORY,
                        type=click.Choice(protocol.ENFORCE_MODES), default=protocol.ENFORCE_OFF, show_default=True,
                        show_envvar=True, help=help)


def cgroup_root_option(help: str) -> Callable[[F], F]:
    """``--cgroup-root``: the host's cgroup v2 tree."""
    return click.option("--cgroup-root", envvar=ENV_CGROUP_ROOT, default="/sys/fs/cgroup", show_default=True,
                        show_envvar=True, type=click.Path(file_okay=False), help=help)


def cgroup_driver_option() -> Callable[[F], F]:
    """``--cgroup-driver auto|systemd|cgroupfs``."""
    return click.option("--cgroup-driver", envvar=ENV_CGROUP_DRIVER,
                        type=click.Choice(["auto", "systemd", "cgroupfs"]), default="auto", show_default=True,
                        show_envvar=True, help="kubelet's cgroup driver; auto reads it from the tree.")
