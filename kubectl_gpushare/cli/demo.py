"""``kubectl gpushare demo``: the whole stack on one machine, then the inspect views.

It starts the embedded API server (the sandbox), one device plugin per GPU node with fake GPUs
registered with a kubelet stand-in, the scheduler extender, and a kube-scheduler stand-in that
places a handful of pods through the extender's filter, prioritize and bind. Kubelet's part is
played by the stand-in: it reports the plugin's devices as node capacity and calls Allocate for
each bound pod. Then ``kubectl inspect gpushare`` and ``-d`` run against it, through the real
kubectl when one is on PATH. Everything listens on 127.0.0.1 or unix sockets in a temporary
directory, and everything stops when the demo ends (or on Ctrl-C with ``--keep``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.sandbox.server import Sandbox

GPU_NODES: dict[str, tuple[str, str, str]] = {
    "gpu-node-1": ("2x16GiB", "Tesla-T4", "192.168.1.11"),
    "gpu-node-2": ("4x24GiB", "NVIDIA-L4", "192.168.1.12"),
    "gpu-node-3": ("1x80GiB,1x40GiB", "NVIDIA-A100", "192.168.1.13"),
}
"""Node name -> (fake GPUs, product label, InternalIP). Addresses are data only; nothing dials them."""

DEMO_PODS: list[tuple[str, str, list[int]]] = [
    ("train-bert", "ml", [12]),
    ("train-resnet", "ml", [20]),
    ("serve-llm", "inference", [60]),
    ("serve-embed", "inference", [4]),
    ("notebook-alice", "research", [8]),
    ("notebook-bob", "research", [6]),
    ("etl-gpu", "default", [2, 3]),
    ("sweep-1", "ml", [10]),
    ("sweep-2", "ml", [10]),
    ("too-big", "default", [100]),
]
"""(name, namespace, per-container GiB). The last one fits no single GPU and stays Pending."""


def _say(message: str) -> None:
    click.secho(message, fg="cyan")


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise click.ClickException(f"demo: timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def _thread(target: Callable[..., None], name: str, **kwargs: Any) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Run a ``serve(cfg, *, stop, ready)``-shaped daemon on a thread; stop and join it on exit."""
    stop, ready = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target(stop=stop, ready=ready, **kwargs)
        except BaseException as exc:  # reported below, so the demo fails with one line
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    if not ready.wait(30) or errors:
        stop.set()
        raise click.ClickException(f"demo: {name} did not start: {errors[0] if errors else 'timeout'}")
    try:
        yield stop, ready
    finally:
        stop.set()
        thread.join(15)


def _start_node(stack: ExitStack, node: str, gpus: str, kubeconfig: Path, api: Client) -> KubeletSim:
    """A kubelet stand-in and a device plugin with fake GPUs for one node; capacity reported as kubelet does."""
    from kubectl_gpushare import protocol
    from kubectl_gpushare.deviceplugin.daemon import Config, KubeOptions, serve
    from kubectl_gpushare.deviceplugin.kubeletsim import KubeletSim

    plugin_dir = tempfile.mkdtemp(prefix="gsdp")  # short: unix socket paths are limited to 107 bytes
    stack.callback(shutil.rmtree, plugin_dir, True)
    kubelet = KubeletSim(plugin_dir).start()
    stack.callback(kubelet.stop)
    cfg = Config(node_name=node, device_plugin_path=plugin_dir, fake_gpus=gpus, kube=KubeOptions(str(kubeconfig)))
    stack.enter_context(_thread(serve, f"device plugin on {node}", cfg=cfg))
    if not (kubelet.wait_registered(1, timeout=15) and kubelet.wait_devices(bool, timeout=15)):
        raise click.ClickException(f"demo: the device plugin on {node} did not register with kubelet")
    capacity, allocatable = kubelet.capacity()
    api.patch_node_status(
        node,
        {"status": {"capacity": {protocol.RESOURCE_MEM: str(capacity)},
                    "allocatable": {protocol.RESOURCE_MEM: str(allocatable)}}},
    )
    return kubelet


def _run_demo(workdir: Path, keep: bool) -> None:
    from kubectl_gpushare import protocol
    from kubectl_gpushare.extender.schedsim import ExtenderCallError, ExtenderConfig, HTTPExtender, schedule_one
    from kubectl_gpushare.extender.server import Running, ServeConfig
    from kubectl_gpushare.extender.server import serve as serve_extender
    from kubectl_gpushare.kube import types
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config
    from kubectl_gpushare.sandbox.server import Sandbox
    from kubectl_gpushare.sandbox.spec import namespace_object, node_object, pod_object

    with ExitStack() as stack:
        sandbox: Sandbox = Sandbox(port=0).start()
        stack.callback(sandbox.stop)
        kubeconfig = sandbox.write_kubeconfig(workdir / "kubeconfig")
        _say(f"• API server (sandbox) on {sandbox.url}")
        namespaces = sorted({namespace for _, namespace, _ in DEMO_PODS})
        sandbox.load([namespace_object(name) for name in namespaces])
        sandbox.load(
            node_object(name, [], ip=ip, labels={protocol.LABEL_GPUSHARE: "true", protocol.LABEL_GPU_PRODUCT: product})
            for name, (_, product, ip) in GPU_NODES.items()
        )
        sandbox.load([node_object("cpu-node-1", [], ip="192.168.1.21")])
        api = Client(load_config(str(kubeconfig)), component="demo")
        stack.callback(api.close)

        kubelets = {}
        for node, (gpus, _, _) in GPU_NODES.items():
            kubelets[node] = _start_node(stack, node, gpus, kubeconfig, api)
            _say(f"• {node}: device plugin with GPUs {gpus} registered with kubelet")

        running: list[Running] = []
        cfg = ServeConfig(kube=load_config(str(kubeconfig)), port=0)
        stack.enter_context(_thread(serve_extender, "scheduler extender", cfg=cfg, running=running))
        extender = running[0]
        _wait(extender.cache.synced.is_set, 20, "the extender's cache")
        _wait(
            lambda: all(
                extender.state.ledger.gpu_mem_and_count(name)[0] > 0
                for name in GPU_NODES
            ),
            20,
            "the extender to see every GPU node",
        )
        _say(f"• scheduler extender on http://127.0.0.1:{extender.port}{cfg.url_prefix}")

        scheduler = HTTPExtender(ExtenderConfig(url_prefix=f"http://127.0.0.1:{extender.port}{cfg.url_prefix}"))
        stack.callback(scheduler.close)
        nodes = [sandbox.get("nodes", None, name) for name in (*GPU_NODES, "cpu-node-1")]
        for name, namespace, sizes in DEMO_PODS:
            body = pod_object(name, namespace, sizes)
            body["metadata"]["uid"] = api.create(types.PODS, body, namespace).metadata.uid
            try:
                node = schedule_one(scheduler, body, [n for n in nodes if n is not None])
            except ExtenderCallError as exc:
                _say(f"• {namespace}/{name} ({'+'.join(map(str, sizes))} GiB): stays Pending: {exc}")
                continue
            bound = sandbox.get("pods", namespace, name)
            assert bound is not None
            env = _allocate(kubelets[node], bound)
            api.patch(types.PODS, name, {"status": {"phase": "Running"}}, namespace, "merge", subresource="status")
            _say(
                f"• {namespace}/{name} ({'+'.join(map(str, sizes))} GiB) -> {node} GPU {env[protocol.ENV_IDX]}"
                f" (NVIDIA_VISIBLE_DEVICES={env[protocol.ENV_VISIBLE_DEVICES]})"
            )

        for args in ([], ["-d"]):
            _show_inspect(args, kubeconfig, workdir)
        if keep:
            click.echo(
                f"\nThe demo cluster keeps running. In another shell:\n"
                f"  export KUBECONFIG={kubeconfig}\n"
                f"  kubectl get pods -A -o wide\n"
                f"  kubectl inspect gpushare -o pretty\n"
                f"Press Ctrl-C to stop."
            )
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass


def _allocate(kubelet: KubeletSim, pod: dict[str, Any]) -> dict[str, str]:
    """Admit a bound pod as kubelet would; the plugin may need a moment to see the bind in its watch."""
    from kubectl_gpushare.deviceplugin.kubeletsim import KubeletAllocateError

    deadline = time.monotonic() + 10
    while True:
        try:
            envs = kubelet.allocate_pod(pod)
            return next(iter(envs.values()))
        except KubeletAllocateError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _show_inspect(args: list[str], kubeconfig: Path, workdir: Path) -> None:
    """Print ``kubectl inspect gpushare ARGS``, through the real kubectl when there is one."""
    bin_dir = str(Path(sys.argv[0]).resolve().parent) if sys.argv and sys.argv[0] else ""
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(workdir / "cache"))
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, os.path.dirname(sys.executable), env.get("PATH", "")) if p)
    kubectl = shutil.which("kubectl", path=env["PATH"])
    plugin = shutil.which("kubectl-inspect-gpushare", path=env["PATH"])
    command = [kubectl, "inspect", "gpushare", *args] if kubectl and plugin else None
    if command is None:
        command = [sys.executable, "-c", "from kubectl_gpushare.cli import inspect_main; inspect_main()", *args]
    shown = "kubectl inspect gpushare " + " ".join(args)
    click.secho(f"\n$ {shown.strip()}", bold=True)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    click.echo(result.stdout, nl=False)
    if result.returncode != 0:
        raise click.ClickException(f"demo: {shown.strip()} failed: {result.stderr.strip()}")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--keep", is_flag=True, help="Keep the demo cluster running after the views, until Ctrl-C.")
@click.option("-v", "--verbose", is_flag=True, help="Show the components' logs.")
def demo_command(*, keep: bool, verbose: bool) -> None:
    """Run the whole stack on this machine with fake GPUs, then show the inspect views.

    Starts an embedded API server, device plugins for three GPU nodes (fake GPUs, one node with a
    80 GiB and a 40 GiB GPU), the scheduler extender and a kube-scheduler stand-in that places ten
    pods; then runs `kubectl inspect gpushare` and `kubectl inspect gpushare -d`. Nothing is
    installed in any real cluster; everything listens on 127.0.0.1 and stops when the demo ends.
    """
    from kubectl_gpushare.service import configure_logging, require_daemon_modules

    require_daemon_modules("demo", ["prometheus_client", "grpc", "google.protobuf"])
    configure_logging("text", "info" if verbose else "error")
    with tempfile.TemporaryDirectory(prefix="gpushare-demo-") as workdir:
        _run_demo(Path(workdir), keep)
