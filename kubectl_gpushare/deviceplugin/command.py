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

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.flags import FiniteFloatRange, kube_options
from kubectl_gpushare.node import flags
from kubectl_gpushare.node.flags import parse_xids
from kubectl_gpushare.service import configure_logging, log_options, require_daemon_modules

__all__ = ["parse_xids", "serve_device_plugin_command"]

ENV_DEVICE_PLUGIN_PATH = "GPUSHARE_DEVICE_PLUGIN_PATH"
ENV_ENDPOINT = "GPUSHARE_DEVICE_PLUGIN_ENDPOINT"
ENV_UNIT_SIZE = "GPUSHARE_UNIT_SIZE"
ENV_LOG_LEVEL = "GPUSHARE_LOG_LEVEL"


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@flags.node_name_option("This node's name (the DaemonSet passes it from the downward API).")
@click.option("--device-plugin-path", envvar=ENV_DEVICE_PLUGIN_PATH, default=protocol.DEVICE_PLUGIN_PATH,
              show_default=True, show_envvar=True, type=click.Path(file_okay=False),
              help="Kubelet's device-plugin directory (holds kubelet.sock and our socket).")
@click.option("--endpoint", envvar=ENV_ENDPOINT, default=protocol.PLUGIN_SOCKET, show_default=True,
              show_envvar=True, help="Our socket's file name inside --device-plugin-path.")
@flags.memory_unit_option("What one aliyun.com/gpu-mem stands for; must match the extender and the pods' requests.")
@click.option("--unit-size", envvar=ENV_UNIT_SIZE, type=click.IntRange(min=1), default=1, show_default=True,
              show_envvar=True,
              help="Memory units per device, e.g. --memory-unit MiB --unit-size 64 advertises one device per "
                   "64 MiB, keeping large GPUs under kubelet's 4 MiB message limit.")
@flags.fake_gpus_option("Advertise made-up GPUs instead of NVML's, e.g. 4x80GiB or 2x16GiB,1x24GiB:NVIDIA L4.")
@flags.visible_devices_option("NVIDIA_VISIBLE_DEVICES as the GPU index (the original's) or its UUID.")
@flags.health_check_option("Watch NVML Xid events and report failing GPUs as Unhealthy.")
@flags.ignore_xids_option()
@flags.fail_on_init_error_option("Exit when NVML cannot start; with --no-... advertise no GPUs and keep running.")
@flags.enforce_memory_option("Hold each pod to its share with the driver's per-cgroup limits (NVIDIA r615+, "
                             "cgroup v2): hard fails allocations past the share; soft lets a pod borrow idle memory.")
@click.option("--usage-interval", envvar=protocol.ENV_USAGE_INTERVAL, type=FiniteFloatRange(min=0.1, max=3600),
              default=10.0, show_default=True, show_envvar=True, help="Seconds between usage samples.")
@click.option("--usage-port", envvar=protocol.ENV_USAGE_PORT, type=click.IntRange(min=-1, max=65535),
              default=protocol.USAGE_PORT, show_default=True, show_envvar=True,
              help=f"Port serving {protocol.METRICS_PATH} and {protocol.USAGE_PATH}; 0 picks a free one, "
                   "-1 serves none.")
@flags.cgroup_root_option("The host's cgroup v2 tree (holding kubepods or kubepods.slice), mounted at the same path "
                          "as on the host: NVML is given these paths.")
@flags.cgroup_driver_option()
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
    enforce_memory: str,
    usage_interval: float,
    usage_port: int,
    cgroup_root: str,
    cgroup_driver: str,
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
      kubectl gpushare serve-device-plugin --enforce-memory hard  # the shipped DaemonSet's choice
    """  # noqa: D301 - click's \b paragraph marker
    # NVML's Python binding is needed only for real GPUs.
    require_daemon_modules(
        "serve-device-plugin", ["grpc", "google.protobuf", "prometheus_client", *(() if fake_gpus else ("pynvml",))]
    )
    from kubectl_gpushare.deviceplugin.daemon import Config, KubeOptions, serve
    from kubectl_gpushare.node.daemon import serve_until_signalled

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
        enforce_memory=enforce_memory,
        usage_interval=usage_interval,
        usage_port=None if usage_port < 0 else usage_port,
        cgroup_root=cgroup_root,
        cgroup_driver=None if cgroup_driver == "auto" else cgroup_driver,
        kube=KubeOptions(kubeconfig, context, cluster, user, as_user, as_groups, request_timeout),
    )
    serve_until_signalled(lambda stop: serve(cfg, stop=stop))
