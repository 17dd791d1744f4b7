"""``kubectl gpushare serve-dra-driver``: flags and environment to a `daemon.Config`, then `serve`.

Every flag has an environment twin, shown in --help (flag first, then environment, then default);
the GPU and cgroup flags share the device plugin's twins (`node.flags`). The effective
configuration is logged once as JSON at start. SIGTERM and SIGINT stop the driver cleanly (its
sockets are removed; prepared claims stay prepared, in the checkpoint). Heavy imports (grpc, the
daemon) happen inside the command body, so ``--help`` stays fast.

``--pod-uid`` (``POD_UID``, the DaemonSet passes its pod's ``metadata.uid``) turns on rolling
updates as the kubeletplugin helper's ``RollingUpdate(uid)`` does: sockets named after the pod, so a
new pod serves beside the old one, and prepare and unprepare serialized across both by a file lock.
It needs kubelet 1.33 or later (kubelets before track one instance per driver); without it the
socket names are the fixed ones older kubelets know.

Exit codes: 0 after a clean stop; 2 for usage and configuration errors (bad flags, unusable
directories, no kubeconfig and not in a cluster, the ``kubectl-gpushare[daemons]`` extra not
installed) and when the node advertises ``aliyun.com/gpu-mem`` (the device plugin serves its GPUs:
the two must not sell the same memory); 1 when the Node cannot be read or does not exist; 3 and 4
when the API server cannot be reached or refuses our credentials; 5 when NVML or a socket cannot
start and ``--fail-on-init-error`` is on.
"""

from __future__ import annotations

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.flags import FiniteFloatRange, kube_options
from kubectl_gpushare.node import cgroups, flags
from kubectl_gpushare.service import configure_logging, log_options, require_daemon_modules

ENV_UNHEALTHY = "GPUSHARE_DRA_UNHEALTHY"
ENV_RESYNC = "GPUSHARE_DRA_RESYNC"


def _pod_uid(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """``--pod-uid`` read as a UID the API server assigns (a lower-case UUID), or refused: it names two sockets."""
    if value and not cgroups.valid_uid(value):
        raise click.BadParameter(f"{protocol.shown_value(value)} is not a pod UID (a lower-case UUID, as the API "
                                 "server assigns; the DaemonSet passes metadata.uid)")
    return value or ""


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@flags.node_name_option("This node's name: its pool and the ResourceSlice's spec.nodeName (the DaemonSet passes it "
                        "from the downward API).")
@click.option("--plugin-registration-dir", envvar=protocol.ENV_DRA_REGISTRATION_DIR,
              default=protocol.DRA_REGISTRATION_DIR, show_default=True, show_envvar=True,
              type=click.Path(file_okay=False),
              help=f"kubelet's plugin watcher directory; {protocol.DRA_REGISTRATION_SOCKET} is created there.")
@click.option("--plugin-dir", envvar=protocol.ENV_DRA_PLUGIN_DIR, default=protocol.DRA_PLUGIN_DIR,
              show_default=True, show_envvar=True, type=click.Path(file_okay=False),
              help=f"This driver's directory: the DRA socket ({protocol.DRA_PLUGIN_SOCKET}) kubelet calls, and the "
                   "checkpoint of prepared claims.")
@click.option("--cdi-root", envvar=protocol.ENV_DRA_CDI_ROOT, default=protocol.DRA_CDI_ROOT, show_default=True,
              show_envvar=True, type=click.Path(file_okay=False),
              help="Where the container runtime reads CDI specs; one is written per prepared claim.")
@flags.memory_unit_option("The step claims' memory is rounded up to (the request policy's default, min and step).")
@flags.fake_gpus_option("Publish made-up GPUs instead of NVML's, e.g. 4x80GiB or 2x16GiB,1x24GiB:NVIDIA L4.")
@flags.visible_devices_option("NVIDIA_VISIBLE_DEVICES in the claims' CDI specs: the GPU index or its UUID.")
@click.option("--unhealthy", envvar=ENV_UNHEALTHY, type=click.Choice(["remove", "taint"]), default="remove",
              show_default=True, show_envvar=True,
              help=f"An unhealthy GPU leaves the slice, or stays with a NoSchedule device taint "
                   f"{protocol.DRA_TAINT_UNHEALTHY} (needs the DRADeviceTaints feature gate).")
@flags.health_check_option("Watch NVML Xid events and take failing GPUs out of the slice.")
@flags.ignore_xids_option()
@flags.fail_on_init_error_option("Exit when NVML cannot start; with --no-... publish no GPUs and keep running.")
@flags.enforce_memory_option("Hold each pod a claim is reserved for to the claim's memory with the driver's per-cgroup "
                             "limits (NVIDIA r615+, cgroup v2).")
@flags.cgroup_root_option("The host's cgroup v2 tree, mounted at the same path as on the host (--enforce-memory).")
@flags.cgroup_driver_option()
@click.option("--resync", envvar=ENV_RESYNC, type=FiniteFloatRange(min=1, max=3600), default=60.0,
              show_default=True, show_envvar=True,
              help="Seconds between checks that the ResourceSlice is still as published.")
@click.option("--pod-uid", envvar=protocol.ENV_POD_UID, show_envvar=True, callback=_pod_uid,
              help="This pod's UID (downward API metadata.uid): serve sockets of its own beside an older instance's "
                   "and serialize claims with it, for a DaemonSet rolling with maxSurge (kubelet 1.33+). Unset: "
                   "the fixed socket names.")
@kube_options
@log_options()
def serve_dra_driver_command(
    *,
    node_name: str | None,
    plugin_registration_dir: str,
    plugin_dir: str,
    cdi_root: str,
    memory_unit: str,
    fake_gpus: str | None,
    visible_devices: str,
    unhealthy: str,
    health_check: bool,
    ignore_xids: str,
    fail_on_init_error: bool,
    enforce_memory: str,
    cgroup_root: str,
    cgroup_driver: str,
    resync: float,
    pod_uid: str,
    log_format: str,
    log_level: str,
    **kube: object,
) -> None:
    """Run the DRA driver for shared GPU memory (gpu-mem.kubectl-gpushare.io) for kubelet.

    Publishes one device per GPU with a memory capacity that claims share (Kubernetes 1.34+ with
    consumable capacity), and prepares claims by writing CDI specs with the environment the device
    plugin gives containers. Not on a node where the gpushare device plugin runs.

    \b
    Examples:
      kubectl gpushare serve-dra-driver                              # in the DaemonSet
      kubectl gpushare serve-dra-driver --memory-unit MiB            # claims in 1 MiB steps
      kubectl gpushare serve-dra-driver --fake-gpus 2x16GiB --node-name n1 --plugin-dir /tmp/p
    """  # noqa: D301 - click's \b paragraph marker
    require_daemon_modules(
        "serve-dra-driver", ["grpc", "google.protobuf", *(() if fake_gpus else ("pynvml",))]
    )
    from kubectl_gpushare.dra.daemon import Config, serve
    from kubectl_gpushare.node.daemon import serve_until_signalled

    if not node_name:
        raise click.UsageError(f"--node-name (or {protocol.ENV_NODE_NAME}) is required")
    ignored = protocol.APPLICATION_XIDS | flags.parse_xids(ignore_xids)
    configure_logging(log_format, log_level)
    cfg = Config(
        node_name=node_name,
        registration_dir=plugin_registration_dir,
        plugin_dir=plugin_dir,
        cdi_root=cdi_root,
        memory_unit=protocol.UNIT_MIB if memory_unit.lower() == "mib" else protocol.UNIT_GIB,
        unhealthy="taint" if unhealthy == "taint" else "remove",
        visible_devices="uuid" if visible_devices == "uuid" else "index",
        fake_gpus=fake_gpus or None,
        health_check=health_check,
        ignored_xids=ignored,
        fail_on_init_error=fail_on_init_error,
        enforce_memory=enforce_memory,
        cgroup_root=cgroup_root,
        cgroup_driver=None if cgroup_driver == "auto" else cgroup_driver,
        resync=resync,
        pod_uid=pod_uid,
        kube=dict(kube),
    )
    serve_until_signalled(lambda stop: serve(cfg, stop=stop))
