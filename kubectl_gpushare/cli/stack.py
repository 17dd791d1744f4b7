"""``sandbox --stack``: the sandbox as a whole GPU-share cluster, in one process.

Besides the API server it runs, as threads of this process: the scheduler extender; a
kube-scheduler stand-in (`cli.scheduler`) that loops over unscheduled pods and calls the extender
over HTTP as configured by the KubeSchedulerConfiguration we ship; and, for every node labelled
``gpushare=true``, a device plugin with fake GPUs and a kubelet stand-in (`cli.nodes`) that talk
gRPC over unix sockets in a temporary directory. Threads rather than child processes: one process
tree, one Ctrl-C, and the sandbox's memory is shared instead of copied per node. The shipped
node-confinement policy is installed and each device plugin uses a token bound to its node's
plugin pod, so every plugin write goes through that policy (`cli.stack_components`).

In stack mode a spec node's ``gpus``/``gpuMemory`` describe its hardware: the seed's
``aliyun.com/gpu-mem`` and ``aliyun.com/gpu-count`` are removed and the node's device plugin
(once the node is labelled) publishes them, as on a real cluster. A seed pod bound to a node and
asking for ``aliyun.com/gpu-mem`` but still Pending without the extender's annotations (the
generated seed's "unindexed" pods) is a state the extender never leaves (it annotates before it
binds), and the kubelet would Allocate for it with nothing to match: in stack mode it starts
unbound, and the scheduler places it through the extender.

DRA (``--dra``, or spec nodes with ``dra: true``): nodes labelled ``gpushare.kubectl-gpushare.io/dra``
run the DRA driver and a kubelet stand-in that prepares claims (`cli.dra_nodes`) instead of a device
plugin, the DeviceClass of ``manifests/dra`` is installed, the resourceclaim controller (in the
sandbox) makes claims from templates, and the scheduler allocates them (`cli.dynamicresources`).
``--dra`` turns every ``gpushare=true`` node of the seed into such a node.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox import command as base

if TYPE_CHECKING:
    from kubectl_gpushare.cli.nodes import NodeAgents
    from kubectl_gpushare.cli.scheduler import SchedulerLoop
    from kubectl_gpushare.sandbox.server import Sandbox

log = logging.getLogger("kubectl_gpushare.stack")

def hardware_of(node: dict[str, Any]) -> str | None:
    """The fake-GPU string (``"2x16GiB"`` or ``"1x80GiB,1x40GiB"``) a seed node's GPU fields describe."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    memories = protocol.parse_node_gpus((meta.get("annotations") or {}).get(protocol.ANN_NODE_GPUS))
    if memories:
        return ",".join(f"1x{m}GiB" for m in memories)
    try:
        count = protocol.parse_quantity(str(capacity.get(protocol.RESOURCE_COUNT, "0")))
        total = protocol.parse_quantity(str(capacity.get(protocol.RESOURCE_MEM, "0")))
    except ValueError:
        return None
    if count <= 0 or total <= 0 or count > 64 or total % count:
        return None
    return f"{count}x{total // count}GiB"


def unbind_unplaced(pod: dict[str, Any]) -> None:
    """Unbind a Pending gpu-mem pod the extender never placed (no GPU index): the scheduler places it."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    asks = any(protocol.RESOURCE_MEM in ((c.get("resources") or {}).get("limits") or {})
               for c in spec.get("containers") or [] if isinstance(c, dict))
    pending = status.get("phase", "Pending") == "Pending"
    if spec.get("nodeName") and asks and pending and protocol.ANN_IDX not in annotations:
        spec.pop("nodeName")
        status.pop("conditions", None)


class StackAttachment:
    """What `sandbox.command.run` needs to run the stack around a sandbox."""

    def __init__(self, dra: bool = False) -> None:
        """No hardware known until `prepare` sees the seed; ``dra``: GPU nodes are the DRA driver's."""
        self.hardware: dict[str, str] = {}
        self.dra = dra

    def prepare(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Record each seed node's fake GPUs and strip the GPU resources the device plugin publishes."""
        for obj in objects:
            if obj.get("kind") == "Pod":
                unbind_unplaced(obj)
            if obj.get("kind") != "Node":
                continue
            labels = (obj.get("metadata") or {}).get("labels")
            if self.dra and isinstance(labels, dict) and labels.get(protocol.LABEL_GPUSHARE) == "true":
                del labels[protocol.LABEL_GPUSHARE]  # the DRA driver's DaemonSet, not the device plugin's
                labels[protocol.LABEL_DRA] = "true"
            gpus = hardware_of(obj)
            name = str((obj.get("metadata") or {}).get("name", ""))
            if gpus and name:
                self.hardware[name] = gpus
            for key in ("capacity", "allocatable"):
                resources = (obj.get("status") or {}).get(key) or {}
                resources.pop(protocol.RESOURCE_MEM, None)
                resources.pop(protocol.RESOURCE_COUNT, None)
            (obj.get("metadata") or {}).get("annotations", {}).pop(protocol.ANN_NODE_GPUS, None)
        return objects

    @contextmanager
    def run(self, sandbox: Sandbox, kubeconfig: Path) -> Iterator[str]:
        """Start the stack; yields a line for the banner; stops everything on exit."""
        with running_stack(sandbox, kubeconfig, self.hardware, dra=self.dra) as stack:
            drivers = "DRA drivers" if self.dra else "device plugins"
            yield f"Stack: extender on {stack.extender_url}, scheduler, kubelets and {drivers} on labelled nodes"


class Stack:
    """Handles of a running stack, for tests and the demo."""

    def __init__(self, extender_url: str, nodes: NodeAgents, scheduler: SchedulerLoop) -> None:
        """Keep the handles."""
        self.extender_url = extender_url
        self.nodes = nodes
        self.scheduler = scheduler

    def device_plugin_pod(self, node: str) -> tuple[str, str] | None:
        """(namespace, name) of the kube-system pod standing for ``node``'s device plugin, if it runs one."""
        return self.nodes.device_plugin_pod(node)


@contextmanager
def daemon_thread(target: Callable[..., None], name: str, **kwargs: Any) -> Iterator[None]:
    """Run a ``serve(cfg, *, stop, ready)``-shaped daemon on a thread; stop and join it on exit."""
    stop, ready = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target(stop=stop, ready=ready, **kwargs)
        except BaseException as exc:  # reported below as one line
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    if not ready.wait(30) or errors:
        stop.set()
        raise click.ClickException(f"{name} did not start: {errors[0] if errors else 'timeout'}")
    try:
        yield
    finally:
        stop.set()
        thread.join(15)


@contextmanager
def running_stack(sandbox: Sandbox, kubeconfig: Path, hardware: dict[str, str], *,
                  enforce: str = "off", dra: bool = False) -> Iterator[Stack]:
    """Extender, scheduler loop, node agents (kubelet + device plugin per labelled node), stopped on exit.

    ``enforce`` is every device plugin's ``--enforce-memory`` (off, soft, hard). The DRA DeviceClass
    is installed when ``dra`` is set or a node is labelled for the DRA driver.
    """
    from kubectl_gpushare.cli import stack_components
    from kubectl_gpushare.cli.dra_nodes import is_dra_node
    from kubectl_gpushare.cli.nodes import NodeAgents
    from kubectl_gpushare.cli.scheduler import SchedulerLoop, extenders_from_config
    from kubectl_gpushare.extender.server import Running, ServeConfig
    from kubectl_gpushare.extender.server import serve as serve_extender
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config

    with ExitStack() as stack:
        workdir = tempfile.mkdtemp(prefix="gsstack")  # short: unix socket paths are limited to 107 bytes
        stack.callback(shutil.rmtree, workdir, True)
        api = Client(load_config(str(kubeconfig)), component="stack")
        stack.callback(api.close)
        running: list[Running] = []
        stack_components.ensure_namespace(api)  # the extender's Lease, Service and pod live in kube-system
        stack_components.install_confinement(api)  # each node's device plugin is kept to its node
        cfg = ServeConfig(kube=load_config(str(kubeconfig)), port=0, leader_elect=True,
                          lease_namespace=stack_components.NAMESPACE, lease_name=stack_components.EXTENDER_NAME,
                          identity=stack_components.EXTENDER_POD,
                          # One renewal every 10 s, not every second: each write wakes the stack's loops for a pass.
                          lease_duration=60.0, renew_deadline=45.0, retry_period=10.0)
        stack.enter_context(daemon_thread(serve_extender, "scheduler extender", cfg=cfg, running=running))
        extender_url = f"http://127.0.0.1:{running[0].port}{cfg.url_prefix}"
        elector = running[0].elector
        deadline = time.monotonic() + 30
        while elector is not None and not elector.is_leader() and time.monotonic() < deadline:
            time.sleep(0.05)  # binds before it leads would be refused and retried
        first = sorted(str(n["metadata"]["name"]) for n in sandbox.objects("nodes"))
        stack_components.register_extender(api, first[0] if first else None)
        if dra or any(is_dra_node(n) for n in sandbox.objects("nodes")):
            stack_components.install_device_class(api)
        nodes = NodeAgents(sandbox, api, kubeconfig, workdir, hardware, enforce=enforce)
        stack.callback(nodes.stop)
        nodes.start()
        scheduler = SchedulerLoop(sandbox, api, extenders_from_config(scheduler_config_text(), extender_url), nodes,
                                  request_timeout=sandbox.request_timeout)
        stack.callback(scheduler.stop)
        scheduler.start()
        yield Stack(extender_url, nodes, scheduler)


def scheduler_config_text() -> str:
    """The KubeSchedulerConfiguration we ship (``kubectl gpushare manifests --only scheduler-config``)."""
    from importlib import resources

    return (resources.files("kubectl_gpushare.cli") / "_manifests" / "kube-scheduler-config.yaml").read_text()


_STACK_OPTIONS: Final = (
    click.Option(
        ["--stack"],
        is_flag=True,
        help="Also run the extender, a scheduler, and a kubelet and device plugin (fake GPUs) per node labelled "
        "gpushare=true: pods you create are scheduled and run. Spec GPUs then describe hardware.",
    ),
    click.Option(
        ["--dra"],
        is_flag=True,
        help="With --stack: GPU nodes run kubectl-gpushare's DRA driver instead of the device plugin; pods get "
        "GPU memory through ResourceClaims (the DeviceClass gpu-mem.kubectl-gpushare.io is installed).",
    ),
)
"""The options ``sandbox --stack`` adds to the plain sandbox command."""


def _callback(**options: Any) -> None:
    stack = options.pop("stack")
    dra = options.pop("dra")
    if dra and not stack:
        raise click.UsageError("--dra needs --stack")
    if stack:
        from kubectl_gpushare.service import configure_logging, require_daemon_modules

        require_daemon_modules("sandbox --stack", ["prometheus_client", "grpc", "google.protobuf", "cel_expr_python"])
        configure_logging("text", "warning")
    base.run(**options, attachment=StackAttachment(dra) if stack else None)


sandbox_command = click.Command(
    "sandbox",
    params=[*base.sandbox_command.params, *_STACK_OPTIONS],
    callback=_callback,
    help=base.sandbox_command.help,
    epilog=base.sandbox_command.epilog,
    context_settings=base.sandbox_command.context_settings,
)
"""``kubectl gpushare sandbox``: the sandbox command with ``--stack``."""
