"""``kubectl gpushare demo``: the gpushare tutorial on ``sandbox --stack``, then the inspect views.

It starts the embedded API server with the whole stack (`cli.stack`: extender, a scheduler that
runs continuously, and a kubelet and a device plugin with fake GPUs on every node labelled
``gpushare=true``), then walks the tutorial: label the GPU nodes (their device plugins start and
publish ``aliyun.com/gpu-mem``), create pods asking for GPU memory one after another, watch each
get bound by the extender and admitted by the device plugin, then ``kubectl inspect gpushare`` and
``-d``, through the real kubectl when one is on PATH. Last, ``kubectl gpushare top``: a pod whose
container allocates 6 GiB of its 2 GiB share shows OVER; the device plugins then roll to
``--enforce-memory hard`` and the same pod, created again, is held to its share (its allocation
fails with the driver's out-of-memory, as a CUDA program's would). Everything listens on 127.0.0.1 or unix
sockets in a temporary directory and stops when the demo ends; with ``--keep`` the cluster keeps
scheduling what the user applies until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from kubectl_gpushare.cli.stack import Stack
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

DEMO_USES: dict[str, int] = {"train-bert": 10, "train-resnet": 18, "serve-llm": 52, "serve-embed": 3,
                             "notebook-alice": 1, "sweep-1": 9, "sweep-2": 9}
"""GiB each pod's fake container allocates within its share, so ``top`` has something to show."""


def _say(message: str) -> None:
    click.secho(message, fg="cyan")


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise click.ClickException(f"demo: timed out waiting for {what}")
        time.sleep(0.05)


def _kubectl_env(kubeconfig: Path, workdir: Path) -> tuple[dict[str, str], str | None, str | None]:
    """Environment for kubectl against the demo, kubectl's path and the inspect plugin's (None if absent)."""
    bin_dir = str(Path(sys.argv[0]).resolve().parent) if sys.argv and sys.argv[0] else ""
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(workdir / "cache"))
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, os.path.dirname(sys.executable), env.get("PATH", "")) if p)
    return env, shutil.which("kubectl", path=env["PATH"]), shutil.which("kubectl-inspect-gpushare", path=env["PATH"])


def _label(api: Client, node: str, kubeconfig: Path, workdir: Path) -> None:
    """``kubectl label node NODE gpushare=true``, through the real kubectl when there is one."""
    from kubectl_gpushare import protocol

    env, kubectl, _ = _kubectl_env(kubeconfig, workdir)
    if kubectl is not None:
        result = subprocess.run([kubectl, "label", "node", node, f"{protocol.LABEL_GPUSHARE}=true"], env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        if result.returncode == 0:
            return
    api.patch_node(node, {"metadata": {"labels": {protocol.LABEL_GPUSHARE: "true"}}})


def _run_demo(workdir: Path, keep: bool) -> None:
    from kubectl_gpushare import protocol
    from kubectl_gpushare.cli.stack import StackAttachment, running_stack
    from kubectl_gpushare.kube import types
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import load_config
    from kubectl_gpushare.sandbox import ipam
    from kubectl_gpushare.sandbox.builders import namespace_object, node_object, pod_object
    from kubectl_gpushare.sandbox.server import Sandbox
    from kubectl_gpushare.sandbox.spec import ANN_USES

    with ExitStack() as stack:
        sandbox: Sandbox = Sandbox(port=0).start()
        stack.callback(sandbox.stop)
        kubeconfig = sandbox.write_kubeconfig(workdir / "kubeconfig")
        _say(f"• API server (sandbox) on {sandbox.url}")
        namespaces = sorted({namespace for _, namespace, _ in DEMO_PODS})
        attachment = StackAttachment()
        seed = [namespace_object(name) for name in namespaces]
        for name, (gpus, product, ip) in GPU_NODES.items():
            memories = [int(size.removesuffix("GiB")) for part in gpus.split(",")
                        for count, size in [part.split("x")] for _ in range(int(count))]
            seed.append(node_object(name, memories, ip=ip, product=product, gpushare=False))
        seed.append(node_object("cpu-node-1", [], ip="192.168.1.21"))
        ipam.assign(seed)  # each node's pod range, as kube-controller-manager's node IPAM gives it
        sandbox.load(attachment.prepare(seed))
        api = Client(load_config(str(kubeconfig)), component="demo")
        stack.callback(api.close)
        running = stack.enter_context(running_stack(sandbox, kubeconfig, attachment.hardware))
        _say(f"• scheduler extender on {running.extender_url}; a scheduler for default-scheduler pods")

        def node_mem(node: str) -> str | None:
            obj = sandbox.get("nodes", None, node) or {}
            return ((obj.get("status") or {}).get("allocatable") or {}).get(protocol.RESOURCE_MEM)

        for node, (gpus, _, _) in GPU_NODES.items():
            _label(api, node, kubeconfig, workdir)
            _wait(partial(lambda n: node_mem(n) not in (None, "0"), node), 30, f"the device plugin on {node}")
            _say(f"• kubectl label node {node} gpushare=true: device plugin with GPUs {gpus} registered with kubelet")

        for name, namespace, sizes in DEMO_PODS:
            uses = {ANN_USES: str(DEMO_USES[name] << 30)} if name in DEMO_USES else None
            api.create(types.PODS, pod_object(name, namespace, sizes, annotations=uses), namespace)
            shown = f"{namespace}/{name} ({'+'.join(map(str, sizes))} GiB)"

            def settled(name: str = name, namespace: str = namespace) -> bool:
                pod = sandbox.get("pods", namespace, name) or {}
                status = pod.get("status") or {}
                return status.get("phase") in ("Running", "Failed") or any(
                    c.get("type") == "PodScheduled" and c.get("status") == "False"
                    for c in status.get("conditions") or [])

            _wait(settled, 30, f"{namespace}/{name} to be scheduled")
            pod = sandbox.get("pods", namespace, name) or {}
            status = pod.get("status") or {}
            if status.get("phase") != "Running":
                reason = next((c.get("message", "") for c in status.get("conditions") or []
                               if c.get("type") == "PodScheduled"), status.get("message", ""))
                _say(f"• {shown}: stays Pending: {reason}")
                continue
            envs = running.nodes.envs.get(pod["metadata"]["uid"], {})
            env: dict[str, str] = next(iter(envs.values()), {})
            _say(
                f"• {shown} -> {pod['spec']['nodeName']} GPU {env.get(protocol.ENV_IDX, '?')}"
                f" (NVIDIA_VISIBLE_DEVICES={env.get(protocol.ENV_VISIBLE_DEVICES, '?')})"
            )

        for args in ([], ["-d"]):
            _show_inspect(args, kubeconfig, workdir)
        _top_demo(sandbox, api, running, kubeconfig, workdir)
        if keep:
            click.echo(
                f"\nThe demo cluster keeps running and scheduling what you create. In another shell:\n"
                f"  export KUBECONFIG={kubeconfig}\n"
                f"  kubectl get pods -A -o wide\n"
                f"  kubectl inspect gpushare -o pretty\n"
                f"Press Ctrl-C to stop.",
            )
            while True:  # until Ctrl-C or SIGTERM (`_interrupt`): a sleep, not Event.wait, is a safe place for
                time.sleep(3600)  # KeyboardInterrupt to land (inside Condition.wait: python/cpython#118433)


GREEDY = ("greedy", "ml", 2, 6)
"""(name, namespace, GiB asked, GiB its container allocates): the pod that takes more than its share."""


def _top_demo(sandbox: Sandbox, api: Client, running: Stack, kubeconfig: Path, workdir: Path) -> None:
    """``kubectl gpushare top``: a pod over its share with enforcement off, then held to it with it on."""
    from kubectl_gpushare import protocol
    from kubectl_gpushare.inspect.usage import fetch_reports
    from kubectl_gpushare.kube import errors, types
    from kubectl_gpushare.sandbox.builders import pod_object
    from kubectl_gpushare.sandbox.spec import ANN_USES

    name, namespace, asked, uses = GREEDY

    def create() -> str:
        pod = pod_object(name, namespace, [asked], annotations={ANN_USES: str(uses << 30)})
        api.create(types.PODS, pod, namespace)
        _wait(lambda: ((sandbox.get("pods", namespace, name) or {}).get("status") or {}).get("phase")
              in ("Running", "Failed"), 30, f"{namespace}/{name} to start")
        return str(((sandbox.get("pods", namespace, name) or {}).get("spec") or {}).get("nodeName") or "")

    def sampled(node: str, limited: bool) -> bool:
        """The plugin's latest sample shows the pod over its share (off), or held under its limit (hard).

        Held means limited and using no more than the limit: a sample can already carry the limit
        while still counting what the container allocated before the limit took hold (seen once in
        a fresh-clone run: the final table said OVER), so the demo waits for a sample that shows it held.
        """
        report = fetch_reports(api, [node], timeout=5).reports.get(node)
        pod = next((p for p in report.pods if p.name == name), None) if report else None
        if pod is None or pod.used_bytes is None:
            return False
        if limited:
            return pod.limit_bytes is not None and pod.used_bytes <= pod.limit_bytes
        return pod.used_bytes > pod.allocated_bytes

    node = create()
    _say(f"• {namespace}/{name} asks for {asked} GiB and allocates {uses} GiB: nothing holds it to its share")
    _wait(partial(sampled, node, False), 30, f"the device plugin on {node} to sample {name}")
    _show(["gpushare", "top", "-n", namespace], kubeconfig, workdir)

    _say(f"\n• every device plugin restarts with --enforce-memory {protocol.ENFORCE_HARD}; {name} runs again")
    running.nodes.roll_plugins(protocol.ENFORCE_HARD)
    api.delete(types.PODS, name, namespace)
    _wait(lambda: sandbox.get("pods", namespace, name) is None, 30, f"{namespace}/{name} to go")
    _wait(lambda: all(agent.settled.is_set() for agent in running.nodes.agents.values())
          and len(running.nodes.agents) == len(GPU_NODES), 60, "the device plugins to restart")
    try:
        node = create()
    except errors.KubeError as exc:
        raise click.ClickException(f"demo: cannot create {namespace}/{name}: {exc}") from None
    _wait(partial(sampled, node, True), 30, f"the device plugin on {node} to limit {name}")
    status = (sandbox.get("pods", namespace, name) or {}).get("status") or {}
    ended = next((str((c.get("state") or {}).get("waiting", {}).get("message", ""))
                  for c in status.get("containerStatuses") or []), "")  # CrashLoopBackOff's last error
    _say(f"• {namespace}/{name}: {ended or 'held to its share'}")
    _show(["gpushare", "top", "-n", namespace], kubeconfig, workdir)
    api.delete(types.PODS, name, namespace)  # the cluster left for --keep is the tutorial's, as before
    _wait(lambda: sandbox.get("pods", namespace, name) is None, 30, f"{namespace}/{name} to go")


def _show(words: list[str], kubeconfig: Path, workdir: Path) -> None:
    """Print ``kubectl WORDS`` (a plugin command), through the real kubectl when there is one."""
    env, kubectl, plugin = _kubectl_env(kubeconfig, workdir)
    command = [kubectl, *words] if kubectl and plugin else None
    if command is None:
        command = [sys.executable, "-c", "from kubectl_gpushare.cli import main; main()", *words[1:]]
    click.secho(f"\n$ kubectl {' '.join(words)}", bold=True)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    click.echo(result.stdout, nl=False)
    if result.returncode != 0:
        raise click.ClickException(f"demo: kubectl {' '.join(words)} failed: {result.stderr.strip()}")


def _show_inspect(args: list[str], kubeconfig: Path, workdir: Path) -> None:
    """Print ``kubectl inspect gpushare ARGS``, through the real kubectl when there is one."""
    env, kubectl, plugin = _kubectl_env(kubeconfig, workdir)
    command = [kubectl, "inspect", "gpushare", *args] if kubectl and plugin else None
    if command is None:
        command = [sys.executable, "-c", "from kubectl_gpushare.cli import inspect_main; inspect_main()", *args]
    shown = "kubectl inspect gpushare " + " ".join(args)
    click.secho(f"\n$ {shown.strip()}", bold=True)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    click.echo(result.stdout, nl=False)
    if result.returncode != 0:
        raise click.ClickException(f"demo: {shown.strip()} failed: {result.stderr.strip()}")


def _interrupt(*_: object) -> None:
    """SIGTERM, and SIGINT even when inherited ignored, end the demo as Ctrl-C does: the stack unwinds."""
    raise KeyboardInterrupt


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the demo cluster running after the views, scheduling what you create, until Ctrl-C or SIGTERM.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show the components' logs.")
def demo_command(*, keep: bool, verbose: bool) -> None:
    """Walk the gpushare tutorial on a sandbox with the whole stack and fake GPUs, then show the inspect views.

    Starts `kubectl gpushare sandbox --stack` in this process with three GPU nodes (fake GPUs, one
    node with a 80 GiB and a 40 GiB GPU) and a CPU node, labels the GPU nodes gpushare=true (their
    device plugins start), creates ten pods asking for GPU memory, waits for each to be scheduled
    by the extender and admitted by its device plugin (one fits nowhere and stays Pending), then
    runs `kubectl inspect gpushare` and `kubectl inspect gpushare -d`. Nothing is installed in any
    real cluster; everything listens on 127.0.0.1 and stops when the demo ends (with --keep,
    Ctrl-C or SIGTERM ends it with exit 0; a failed step exits 1).
    """
    from kubectl_gpushare.service import configure_logging, require_daemon_modules

    require_daemon_modules("demo", ["prometheus_client", "grpc", "google.protobuf"])
    configure_logging("text", "info" if verbose else "error")
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # SIGINT too, as `sandbox` does: started in the background of a script (`demo --keep &`)
        # SIGINT arrives ignored, and Python then never turns it into KeyboardInterrupt
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, _interrupt)
    try:
        with tempfile.TemporaryDirectory(prefix="gpushare-demo-") as workdir:
            _run_demo(Path(workdir), keep)
    except KeyboardInterrupt:
        click.echo("Demo stopped.", err=True)
        if not keep:
            raise SystemExit(130) from None
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
