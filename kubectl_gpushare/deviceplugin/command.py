"""``kubectl gpushare serve-device-plugin``: flags and environment to a `daemon.Config`, then `serve`.

Every flag has an environment twin, shown in --help (flag first, then environment, then default).
The effective configuration is logged once as JSON at start. SIGTERM and SIGINT stop the plugin
cleanly (its socket is removed). Heavy imports (grpc, the daemon) happen inside the command body,
so ``--help`` stays fast.

Exit codes: 0 after a clean stop; 2 for usage and configuration errors (bad flags, a device list
that cannot fit kubelet's message limit, no kubeconfig and not in a cluster, the
``kubectl-gpushare[daemons]`` extra not installed); 3 when NVML cannot
start and ``--fail-on-init-error`` is on.
"""

from __future__ import annotations

import sys

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.flags import kube_options
from kubectl_gpushare.service import configure_logging, log_options, require_daemon_modules, stop_on_signals

ENV_DEVICE_PLUGIN_PATH = "GPUSHARE_DEVICE_PLUGIN_PATH"
ENV_ENDPOINT = "GPUSHARE_DEVICE_PLUGIN_ENDPOINT"
ENV_UNIT_SIZE = "GPUSHARE_UNIT_SIZE"
ENV_VISIBLE_DEVICES_MODE = "GPUSHARE_VISIBLE_DEVICES"
ENV_HEALTH_CHECK = "GPUSHARE_HEALTH_CHECK"
ENV_IGNORE_XIDS = "GPUSHARE_IGNORE_XIDS"
ENV_FAIL_ON_INIT_ERROR = "GPUSHARE_FAIL_ON_INIT_ERROR"
ENV_LOG_LEVEL = "GPUSHARE_LOG_LEVEL"



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


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--node-name", envvar=protocol.ENV_NODE_NAME, show_envvar=True,
              help="This node's name (the DaemonSet passes it from the downward API).")
@click.option("--device-plugin-path", envvar=ENV_DEVICE_PLUGIN_PATH, default=protocol.DEVICE_PLUGIN_PATH,
              show_default=True, show_envvar=True, type=click.Path(file_okay=False),
              help="Kubelet's device-plugin directory (holds kubelet.sock and our socket).")
@click.option("--endpoint", envvar=ENV_ENDPOINT, default=protocol.PLUGIN_SOCKET, show_default=True,
              show_envvar=True, help="Our socket's file name inside --device-plugin-path.")
@click.option("--memory-unit", envvar=protocol.ENV_MEMORY_UNIT, type=click.Choice(["GiB", "MiB"], case_sensitive=False),
              default="GiB", show_default=True, show_envvar=True,
              help="What one aliyun.com/gpu-mem stands for; must match the extender and the pods' requests.")
@click.option("--unit-size", envvar=ENV_UNIT_SIZE, type=click.IntRange(min=1), default=1, show_default=True,
              show_envvar=True,
              help="Memory units per device, e.g. --memory-unit MiB --unit-size 64 advertises one device per "
                   "64 MiB, keeping large GPUs under kubelet's 4 MiB message limit.")
@click.option("--fake-gpus", envvar=protocol.ENV_FAKE_GPUS, show_envvar=True, metavar="SPEC",
              help="Advertise made-up GPUs instead of NVML's, e.g. 4x80GiB or 2x16GiB,1x24GiB:NVIDIA L4.")
@click.option("--visible-devices", envvar=ENV_VISIBLE_DEVICES_MODE, type=click.Choice(["index", "uuid"]),
              default="index", show_default=True, show_envvar=True,
              help="NVIDIA_VISIBLE_DEVICES as the GPU index (the original's) or its UUID.")
@click.option("--health-check/--no-health-check", envvar=ENV_HEALTH_CHECK, default=True, show_default=True,
              show_envvar=True, help="Watch NVML Xid events and report failing GPUs as Unhealthy.")
@click.option("--ignore-xids", envvar=ENV_IGNORE_XIDS, default="", show_envvar=True, metavar="LIST",
              help="More Xids to ignore, comma-separated (13, 31, 43, 45, 68 and 109 always are).")
@click.option("--fail-on-init-error/--no-fail-on-init-error", envvar=ENV_FAIL_ON_INIT_ERROR, default=True,
              show_default=True, show_envvar=True,
              help="Exit when NVML cannot start; with --no-... advertise no GPUs and keep running.")
@kube_options
@log_options(ENV_LOG_LEVEL)
def serve_device_plugin_command(
    *,
    node_name: str | None,
    device_plugin_path: str,
    endpoint: str,
    memory_unit: str,
    unit_size: int,
    fake_gpus: str | None,
    visible_devices: str,
    health_check: bool,
    ignore_xids: str,
    fail_on_init_error: bool,
    kubeconfig: str | None,
    context: str | None,
    cluster: str | None,
    user: str | None,
    as_user: str | None,
    as_groups: tuple[str, ...],
    request_timeout: str | None,
    log_format: str,
    log_level: str,
) -> None:
    """Run the GPU-memory device plugin for kubelet (aliyun.com/gpu-mem over gRPC).

    A drop-in for Alibaba's gpushare-device-plugin: same resource, fake device ids, pod annotations
    and container environment, so it works with the original scheduler extender and with ours.

    \b
    Examples:
      kubectl gpushare serve-device-plugin                       # in the DaemonSet
      kubectl gpushare serve-device-plugin --memory-unit MiB --unit-size 64
      kubectl gpushare serve-device-plugin --fake-gpus 2x16GiB,1x24GiB --node-name n1
    """  # noqa: D301 - click's \b paragraph marker
    # NVML's Python binding is needed only for real GPUs.
    require_daemon_modules("serve-device-plugin", ["grpc", "google.protobuf", *(() if fake_gpus else ("pynvml",))])
    from kubectl_gpushare.deviceplugin.daemon import Config, DaemonError, KubeOptions, serve

    if not node_name:
        raise click.UsageError(f"--node-name (or {protocol.ENV_NODE_NAME}) is required")
    ignored = protocol.APPLICATION_XIDS | parse_xids(ignore_xids)
    configure_logging(log_format, log_level)
    cfg = Config(
        node_name=node_name,
        device_plugin_path=device_plugin_path,
        endpoint=endpoint,
        memory_unit="MiB" if memory_unit.lower() == "mib" else "GiB",
        unit_size=unit_size,
        fake_gpus=fake_gpus or None,
        visible_devices="uuid" if visible_devices == "uuid" else "index",
        health_check=health_check,
        ignored_xids=ignored,
        fail_on_init_error=fail_on_init_error,
        kube=KubeOptions(kubeconfig, context, cluster, user, as_user, as_groups, request_timeout),
    )
    stop = stop_on_signals()
    try:
        serve(cfg, stop=stop)
    except DaemonError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
