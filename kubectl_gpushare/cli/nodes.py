"""Kubelets and device plugins for ``sandbox --stack``: what the DaemonSet and kubelet do on each node.

A control loop (one thread) keeps, for every node labelled ``gpushare=true`` whose hardware is
known, a device plugin with fake GPUs (`deviceplugin.daemon.serve` on a thread) registered with a
kubelet stand-in (`deviceplugin.kubeletsim.KubeletSim`) over unix sockets in its own directory;
the kubelet reports the plugin's devices as the node's ``aliyun.com/gpu-mem``. When the label
goes, the plugin and its kubelet stop and the node's GPU resources are removed, as when the
DaemonSet's pod leaves the node. The same loop admits pods bound to any node: GPU pods get one
Allocate over gRPC, then the pod is reported Running with a Ready condition; an Allocate that fails
becomes a Warning Event and a Failed pod, as kubelet's admission does (``Admit`` in
``pkg/kubelet/lifecycle/predicate.go`` rejects the pod with ``UnexpectedAdmissionError``; there is no
retry). Pods already past Pending are never allocated again: their devices are restored, as kubelet
restores them from its device-manager checkpoint (`KubeletSim.restore`).

Hardware of a node: from the seed (`cli.stack.hardware_of`), else from its ``nvidia.com/gpu.count``
and ``nvidia.com/gpu.memory`` (MiB) labels.

GPU memory in use: each node has a fake cgroup tree (cgroupfs layout) beside its plugin socket; on
admission the kubelet stand-in creates the pod's cgroup (kubelet creates it after Allocate, before
the containers), and a pod whose spec says ``uses: 6GiB`` (`spec.ANN_USES`) has its stand-in
container allocate that much through the fake driver under its cgroup. Past a hard limit the
allocation fails as a CUDA out-of-memory does: the container exits 1 (a Warning Event; Failed with
``restartPolicy: Never``, else CrashLoopBackOff). Each plugin serves /usage and /metrics on an
ephemeral loopback port (`NodeAgent.usage_port`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kubectl_gpushare import protocol
from kubectl_gpushare.cli import stack_components
from kubectl_gpushare.cli.dra_nodes import FAILED_PREPARE, DraAgents
from kubectl_gpushare.cli.dynamicresources import has_claims
from kubectl_gpushare.cli.scheduler import SandboxView, pod_reference, requested
from kubectl_gpushare.deviceplugin.kubeletsim import KubeletAllocateError, KubeletSim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import KubeError, write_failure
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.fake_backend import FakeBackend, FakeOutOfMemoryError
from kubectl_gpushare.node.files import replace_file
from kubectl_gpushare.sandbox.ipam import PodAddresses
from kubectl_gpushare.sandbox.logs import ContainerLogs
from kubectl_gpushare.sandbox.spec import ANN_USES

log = logging.getLogger("kubectl_gpushare.nodes")

MAX_STARTING = 16
"""Device plugins starting at once: 500 labelled nodes start in waves, not one storm on the API server."""
REGISTER_PATIENCE = 60.0
"""Seconds a new device plugin has to register with its kubelet before it is reported as failed."""
ALLOCATE_PATIENCE = 10.0
"""Seconds a bound pod's Allocate is retried while the plugin has not yet seen the bind."""
PREPARE_BACKOFF = (1.0, 16.0)
"""A pod whose claims could not be prepared is tried again after 1 s, doubling to 16 s (kubelet's pod sync backoff)."""
CONTAINER_START = 2.0
"""Most seconds a stand-in container waits for the pod's limit before it allocates (kubelet's sandbox
and image steps take at least this long on a real node; enforcement sets limits within ~20 ms)."""


@runtime_checkable
class ProxyRegistry(Protocol):
    """A sandbox that relays ``pods/proxy`` (`sandbox.server.Sandbox`)."""

    def register_proxy_target(self, namespace: str, pod: str, port: int | str, host: str, target_port: int) -> None:
        """Relay the pod's port to a loopback address."""

    def unregister_proxy_target(self, namespace: str, pod: str, port: int | str) -> None:
        """Stop relaying it."""


@dataclass
class NodeAgent:
    """A device plugin and its kubelet on one node."""

    node: str
    directory: str
    kubelet: KubeletSim
    stop: threading.Event
    thread: threading.Thread
    errors: list[BaseException] = field(default_factory=list)
    settled: threading.Event = field(default_factory=threading.Event)
    """Set once the plugin registered (or gave up): it no longer counts against `MAX_STARTING`."""
    backend: FakeBackend | None = None
    cgroup_root: str = ""
    usage_port: int | None = None
    """The plugin's /usage and /metrics port on 127.0.0.1, once it started."""


def _hardware_from_labels(node: dict[str, Any]) -> str | None:
    labels = (node.get("metadata") or {}).get("labels") or {}
    count = protocol.parse_int_strict(labels.get(protocol.LABEL_GPU_COUNT))
    memory = protocol.parse_int_strict(labels.get(protocol.LABEL_GPU_MEMORY))
    if count is None or memory is None or not 0 < count <= 64 or not 1024 <= memory <= 2**20:
        return None
    return f"{count}x{memory // 1024}GiB"


def _has_gpu_resources(node: dict[str, Any]) -> bool:
    status = node.get("status") or {}
    return any(resource in (status.get(key) or {}) for key in ("capacity", "allocatable")
               for resource in (protocol.RESOURCE_MEM, protocol.RESOURCE_COUNT))


class LoggedSandbox(SandboxView, Protocol):
    """The sandbox as the kubelet stand-in sees it: reads, plus the node-side container logs it writes."""

    @property
    def logs(self) -> ContainerLogs:
        """Where each started container's lines go (``kubectl logs`` reads them through the API)."""


class NodeAgents:
    """The per-node control loop and the kubelet admission of bound pods."""

    def __init__(self, sandbox: LoggedSandbox, api: Client, kubeconfig: Path, workdir: str,
                 hardware: dict[str, str], *, enforce: str = protocol.ENFORCE_OFF) -> None:
        """Nothing runs until `start`; ``enforce`` is each plugin's ``--enforce-memory``."""
        self.enforce = enforce
        self._cgroups: dict[str, tuple[NodeAgent, str, int | None]] = {}
        """pod uid -> (its node's agent, its cgroup, the GPU its container allocated on)."""
        self._hosts: dict[str, tuple[FakeBackend, Path, str]] = {}
        """node -> (its fake GPUs, its cgroup root, the hardware string they were made from)."""
        self.sandbox = sandbox
        self.api = api
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.hardware = hardware
        self.agents: dict[str, NodeAgent] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="kubelet-admit")
        self._starters = ThreadPoolExecutor(8, thread_name_prefix="plugin-start")
        self._admitting: set[str] = set()
        self._busy: set[str] = set()
        """Nodes whose kubelet is admitting pods now (one at a time per node, as kubelet's sync loop does)."""
        self._done: set[str] = set()
        self._seen_rv = -1
        self._deferred = False
        self.plugin_pods: dict[str, tuple[str, str]] = {}
        """node -> (namespace, name) of the pod that stands for its device plugin (`cli.stack_components`)."""
        self._addresses = PodAddresses()
        self.envs: dict[str, dict[str, dict[str, str]]] = {}
        """pod uid -> container -> the environment Allocate returned (the demo prints it)."""
        self.dra = DraAgents(kubeconfig, workdir, self._host)
        """The DRA drivers of the nodes labelled for them (`cli.dra_nodes`)."""
        self._retry: dict[str, tuple[float, float]] = {}
        """pod uid -> (when its claims' preparation is tried again, the current backoff)."""

    def start(self) -> None:
        """Start the loop."""
        self._thread = threading.Thread(target=self._run, name="node-agents", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop, every plugin and kubelet; their socket directories are removed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for agent in list(self.agents.values()):
            agent.stop.set()  # every plugin winds down at once; registration waits end early
        self._starters.shutdown(wait=True, cancel_futures=True)
        with ThreadPoolExecutor(16, thread_name_prefix="plugin-stop") as stoppers:
            for name in list(self.agents):
                stoppers.submit(self._stop_agent, name, publish=False)
        self.dra.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # one bad pass must not end the loop
                log.exception("node pass failed")
            self._stop.wait(0.2)

    def run_once(self) -> None:
        """Reconcile plugins with labels, then admit newly bound pods; skipped while nothing changed."""
        rv = self.sandbox.store.resource_version
        if rv == self._seen_rv and not self._deferred:
            return
        self._seen_rv = rv
        self._deferred = False
        nodes = {n["metadata"]["name"]: n for n in self.sandbox.objects("nodes")}
        starting = sum(1 for agent in self.agents.values() if not agent.settled.is_set())
        for name, node in nodes.items():
            labelled = ((node["metadata"].get("labels") or {}).get(protocol.LABEL_GPUSHARE) == "true")
            gpus = self.hardware.get(name) or _hardware_from_labels(node)
            if labelled and gpus and name not in self.agents:
                if starting >= MAX_STARTING:
                    self._deferred = True  # the next pass starts more
                    continue
                starting += 1
                self._start_agent(name, gpus)
            elif not labelled and name in self.agents:
                self._stop_agent(name, publish=True)
            elif not labelled and gpus and _has_gpu_resources(node):
                # Left from an earlier run (--state) or written by hand: only a running plugin publishes them.
                gone = {protocol.RESOURCE_MEM: None, protocol.RESOURCE_COUNT: None}
                self._patch_node(name, gone, gone)
        for name in [n for n in self.agents if n not in nodes]:
            self._stop_agent(name, publish=False)
        self.dra.reconcile(nodes, lambda name: self.hardware.get(name) or _hardware_from_labels(nodes[name]))
        pods = self.sandbox.objects("pods")
        now = time.monotonic()
        live = set()
        waiting: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            uid = meta.get("uid", "")
            live.add(uid)
            if not spec.get("nodeName") or uid in self._done or uid in self._admitting:
                continue
            if (pod.get("status") or {}).get("phase", "Pending") != "Pending" or meta.get("deletionTimestamp"):
                self._done.add(uid)
                self._restore(pod)
                continue
            if self._retry.get(uid, (0.0, 0.0))[0] > now:
                self._deferred = True  # its claims are prepared again when the backoff ends
                continue
            waiting.setdefault(str(spec["nodeName"]), []).append(pod)
        for host, batch in waiting.items():
            with self._lock:
                if host in self._busy:
                    self._deferred = True  # admitted after the node's current batch
                    continue
                self._busy.add(host)
            # Kubelet's HandlePodAdditions sorts new pods by creation time and admits them one by one
            # (pkg/kubelet/kubelet.go); the device plugin sees their Allocate calls in that order.
            batch.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""))
            self._admitting.update(p["metadata"].get("uid", "") for p in batch)
            self._pool.submit(self._admit_batch, host, batch)
        for uid in [u for u in self._retry if u not in live]:
            del self._retry[uid]
        for uid in self._done - live:
            self._done.discard(uid)
            self.dra.forget(uid)
            self.envs.pop(uid, None)
            self._addresses.release(uid)
            self.sandbox.logs.forget(uid)
            for agent in list(self.agents.values()):
                agent.kubelet.release_pod(uid)
            self._remove_cgroup(uid)

    # --- device plugins -------------------------------------------------------------------------

    def roll_plugins(self, enforce: str) -> None:
        """Restart every device plugin with ``--enforce-memory enforce``, as a DaemonSet rollout does.

        The plugins stop here; the control loop starts them again with the new mode, and each
        reconciles its node's pods on start.
        """
        self.enforce = enforce
        for name in list(self.agents):
            self._stop_agent(name, publish=False)
        self._deferred = True

    def device_plugin_pod(self, node: str) -> tuple[str, str] | None:
        """(namespace, name) of the pod standing for the device plugin on ``node`` (its ``usage`` port serves)."""
        return self.plugin_pods.get(node)

    def _plugin_kubeconfig(self, node: str, directory: str) -> Path:
        """The stack's kubeconfig with the token of ``node``'s device-plugin pod (confined to its node).

        Falls back to the stack's own credentials (unconfined, logged) when no token can be had, e.g.
        for a plugin pod left by an older ``--state`` that runs as no ServiceAccount.
        """
        import yaml

        try:
            token = stack_components.device_plugin_token(self.api, node)
        except KubeError as exc:
            log.warning("device plugin on %s runs with the stack's own credentials, not confined to its node: "
                        "no token for its pod (%s)", node, exc)
            return self.kubeconfig
        config = yaml.safe_load(self.kubeconfig.read_text())
        for user in config.get("users") or []:
            user["user"] = {"token": token}
        path = Path(directory, "kubeconfig")
        replace_file(path, yaml.safe_dump(config, sort_keys=False).encode(), prefix=".kubeconfig.")  # 0600: a token
        return path

    def _start_agent(self, node: str, gpus: str) -> None:
        from kubectl_gpushare.deviceplugin.daemon import Config, KubeOptions, Plugin, serve

        # The DaemonSet's pod exists before its container starts: the plugin's token is bound to it.
        self.plugin_pods[node] = stack_components.register_device_plugin(self.api, node)
        directory = tempfile.mkdtemp(prefix="dp", dir=self.workdir)
        kubelet = KubeletSim(directory).start()
        stop = threading.Event()
        backend, root = self._host(node, gpus)
        # No health watch (nothing injects GPU faults here; it polls 10 times a second) and a slow
        # socket check (the kubelet stand-in never restarts): hundreds of nodes stay cheap when idle.
        # The usage port is ephemeral on loopback; the node's device-plugin pod relays to it through
        # the sandbox's pods/proxy, as kube-apiserver relays to the DaemonSet pod's port.
        cfg = Config(node_name=node, device_plugin_path=directory, fake_gpus=gpus,
                     kube=KubeOptions(str(self._plugin_kubeconfig(node, directory))), health_check=False,
                     poll_interval=2.0,
                     enforce_memory=self.enforce, cgroup_root=str(root), cgroup_driver="cgroupfs",
                     usage_port=0, usage_host="127.0.0.1", usage_interval=2.0)
        errors: list[BaseException] = []
        agent: NodeAgent | None = None

        def started(plugin: Plugin) -> None:
            port = plugin.node.port
            if agent is not None:
                agent.usage_port = port
            if port is not None and isinstance(self.sandbox, ProxyRegistry):
                self.sandbox.register_proxy_target(stack_components.NAMESPACE,
                                                   stack_components.device_plugin_pod_name(node),
                                                   protocol.USAGE_PORT_NAME, "127.0.0.1", port)  # fmt: skip

        def run() -> None:
            try:
                serve(cfg, stop=stop, backend=backend, started=started)
            except BaseException as exc:  # logged; the node simply has no plugin
                errors.append(exc)
                log.error("device plugin on %s stopped: %s", node, exc)

        thread = threading.Thread(target=run, name=f"device-plugin {node}", daemon=True)
        agent = NodeAgent(node, directory, kubelet, stop, thread, errors, backend=backend, cgroup_root=str(root))
        thread.start()
        with self._lock:
            self.agents[node] = agent
        self._starters.submit(self._publish_when_registered, agent, gpus)

    def _host(self, node: str, gpus: str) -> tuple[FakeBackend, Path]:
        """The node's GPUs and cgroup tree: the host's, so they outlive a device-plugin restart.

        A DaemonSet rollout replaces the plugin's container, not the node: the pods' cgroups (and the
        memory their processes hold) stay, and the new plugin reconciles its limits over them.
        """
        host = self._hosts.get(node)
        if host is None or host[2] != gpus:
            root = Path(tempfile.mkdtemp(prefix="host", dir=self.workdir), "cgroup")
            for rel in cgroups.qos_dirs("cgroupfs").values():
                (root / rel).mkdir(parents=True, exist_ok=True)
            (root / "cgroup.controllers").write_text("cpu memory\n")  # a cgroup v2 tree
            host = self._hosts[node] = (FakeBackend.from_spec(gpus, seed=node), root, gpus)
        return host[0], host[1]

    def _publish_when_registered(self, agent: NodeAgent, gpus: str) -> None:
        """What kubelet does once a plugin registers: report its devices as the node's gpu-mem."""
        try:
            self._wait_registered(agent, gpus)
        finally:
            agent.settled.set()

    def _wait_registered(self, agent: NodeAgent, gpus: str) -> None:
        kubelet = agent.kubelet
        deadline = time.monotonic() + REGISTER_PATIENCE
        while not agent.stop.is_set() and time.monotonic() < deadline:  # short waits: a stop ends it soon
            if kubelet.wait_registered(1, timeout=0.5) and kubelet.wait_devices(bool, timeout=0.5):
                if self.agents.get(agent.node) is not agent:
                    return  # unlabelled meanwhile
                for pod in self.sandbox.objects("pods"):  # kubelet reads its checkpoint before serving
                    if (pod.get("spec") or {}).get("nodeName") == agent.node:
                        self._restore(pod)
                capacity, allocatable = kubelet.capacity()
                self._patch_node(agent.node, {protocol.RESOURCE_MEM: str(capacity)},
                                 {protocol.RESOURCE_MEM: str(allocatable)})
                log.info("device plugin on %s registered with %s", agent.node, gpus)
                return
        if not agent.stop.is_set():
            log.error("device plugin on %s did not register with kubelet", agent.node)

    def _stop_agent(self, node: str, *, publish: bool) -> None:
        with self._lock:
            agent = self.agents.pop(node, None)
        if agent is None:
            return
        agent.stop.set()
        if isinstance(self.sandbox, ProxyRegistry):
            self.sandbox.unregister_proxy_target(
                stack_components.NAMESPACE, stack_components.device_plugin_pod_name(node), protocol.USAGE_PORT_NAME
            )
        agent.thread.join(15)
        agent.kubelet.stop()
        shutil.rmtree(agent.directory, ignore_errors=True)
        if publish:
            gone = {protocol.RESOURCE_MEM: None, protocol.RESOURCE_COUNT: None}
            self._patch_node(node, gone, gone)
            stack_components.unregister_device_plugin(self.api, node)
        self.plugin_pods.pop(node, None)
        log.info("device plugin on %s stopped", node)

    def _patch_node(self, node: str, capacity: Mapping[str, str | None], allocatable: Mapping[str, str | None]) -> None:
        try:
            self.api.patch_node_status(node, {"status": {"capacity": capacity, "allocatable": allocatable}}, "merge")
        except KubeError as exc:
            log.warning("%s", write_failure(f"update GPU resources of node {node}", exc))

    # --- kubelet admission ----------------------------------------------------------------------

    def _admit_batch(self, node: str, pods: list[dict[str, Any]]) -> None:
        try:
            for pod in pods:
                if not self._stop.is_set():
                    self._admit(pod)
        finally:
            with self._lock:
                self._busy.discard(node)

    def _admit(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"].get("uid", "")
        settled = True
        try:
            settled = self._admit_pod(pod)
        except Exception:
            log.exception("admitting a pod failed")
        finally:
            if settled:
                self._done.add(uid)
                self._retry.pop(uid, None)
            else:
                backoff = min(max(self._retry.get(uid, (0.0, 0.0))[1] * 2, PREPARE_BACKOFF[0]), PREPARE_BACKOFF[1])
                self._retry[uid] = (time.monotonic() + backoff, backoff)
                self._deferred = True
            self._admitting.discard(uid)

    def _admit_pod(self, pod: dict[str, Any]) -> bool:
        """Admit and start one pod; False: its claims could not be prepared yet (it stays Pending)."""
        node = pod["spec"]["nodeName"]
        if has_claims(pod):
            unprepared = self.dra.prepare(pod, node)
            if unprepared:
                self._event(pod, node, FAILED_PREPARE, unprepared)
                return False
        if requested(pod, protocol.RESOURCE_MEM):
            agent = self.agents.get(node)
            deadline = time.monotonic() + ALLOCATE_PATIENCE
            while True:
                try:
                    if agent is None:
                        raise KubeletAllocateError(None, f"no device plugin registered for {protocol.RESOURCE_MEM}")
                    self.envs[pod["metadata"].get("uid", "")] = agent.kubelet.allocate_pod(pod)
                    break
                except KubeletAllocateError as exc:
                    if agent is not None and time.monotonic() < deadline and not self._stop.is_set():
                        time.sleep(0.2)
                        continue
                    self._fail(pod, node, exc.details)
                    return True
            failure = self._start_containers(pod, agent)
            if failure:
                self._crashed(pod, node, failure)
                return True
        self._running(pod, node)
        return True

    def _event(self, pod: dict[str, Any], node: str, reason: str, message: str) -> None:
        """A Warning Event on the pod from the kubelet stand-in (logged when it cannot be recorded)."""
        try:
            self.api.create_event(pod_reference(pod), reason, message, "Warning", component="kubelet", host=node)
        except KubeError as exc:
            log.warning("%s", write_failure(f"record {reason}", exc))

    # --- GPU memory of the stand-in containers -----------------------------------------------------

    def _start_containers(self, pod: dict[str, Any], agent: NodeAgent | None, index: int | None = None) -> str | None:
        """Create the pod's cgroup and allocate what ``uses`` says; the CUDA error if that fails.

        ``index``: the pod's GPU when known without an Allocate (a restored pod); else Allocate's env says.
        """
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if agent is None or agent.backend is None:
            return None
        qos = str((pod.get("status") or {}).get("qosClass") or "BestEffort").lower()
        try:
            path = Path(agent.cgroup_root, cgroups.pod_path(uid, qos if qos in cgroups.QOS_CLASSES else "besteffort",
                                                            "cgroupfs"))
        except cgroups.InvalidUidError:
            return None
        path.mkdir(exist_ok=True)
        if index is None:
            envs = self.envs.get(uid) or {}
            index = next((protocol.parse_int_strict(env.get(protocol.ENV_IDX, "")) for env in envs.values()), None)
        self._cgroups[uid] = (agent, str(path), index)
        uses = protocol.parse_int_strict((meta.get("annotations") or {}).get(ANN_USES, "") or "")
        if not uses or uses < 0 or index is None or index < 0:
            return None
        deadline = time.monotonic() + CONTAINER_START
        while (self.enforce != protocol.ENFORCE_OFF and str(path) not in agent.backend.limits(index)
               and time.monotonic() < deadline and not self._stop.is_set()):
            time.sleep(0.01)
        try:
            agent.backend.allocate(index, str(path), uses)
        except FakeOutOfMemoryError as exc:
            return f"CUDA error: out of memory allocating {uses} bytes on GPU {index} ({exc})"
        except (KeyError, ValueError) as exc:
            return f"CUDA error: {exc}"
        return None

    def _remove_cgroup(self, uid: str) -> None:
        """The pod is gone: its processes exit (memory freed) and kubelet removes its cgroup."""
        held = self._cgroups.pop(uid, None)
        if held is None:
            return
        agent, path, index = held
        if agent.backend is not None and index is not None and index >= 0:
            try:
                agent.backend.release(index, path)
            except KeyError:
                pass
        shutil.rmtree(path, ignore_errors=True)

    def _crashed(self, pod: dict[str, Any], node: str, message: str) -> None:
        """The container exited 1 on a CUDA out-of-memory: Failed with restartPolicy Never, else CrashLoopBackOff."""
        self._event(pod, node, "BackOff", message)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        exited = {"terminated": {"exitCode": 1, "reason": "Error", "message": message, "finishedAt": now}}
        never = (pod.get("spec") or {}).get("restartPolicy") == "Never"
        containers = [{"name": c.get("name", ""), "image": c.get("image", ""), "ready": False, "started": False,
                       "restartCount": 0 if never else 1,
                       "state": exited if never else {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
                       **({} if never else {"lastState": exited})}
                      for c in (pod.get("spec") or {}).get("containers") or []]
        self._status(pod, {"phase": "Failed" if never else "Running", "containerStatuses": containers,
                           "hostIP": self._host_ip(node), "startTime": now})

    def _restore(self, pod: dict[str, Any]) -> None:
        """A pod that runs already: its node's kubelet knows its devices from the checkpoint."""
        phase = (pod.get("status") or {}).get("phase")
        agent = self.agents.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if agent is not None and not protocol.pod_phase_terminal(phase) and requested(pod, protocol.RESOURCE_MEM):
            agent.kubelet.restore(pod)
            uid = (pod.get("metadata") or {}).get("uid", "")
            if uid not in self._cgroups:  # a running pod has its cgroup (and its memory) already
                index = protocol.parse_gpu_index(((pod.get("metadata") or {}).get("annotations") or {})
                                                 .get(protocol.ANN_IDX))
                failure = self._start_containers(pod, agent, index)
                if failure:
                    log.info("restored pod %s/%s: %s", pod["metadata"].get("namespace"), pod["metadata"]["name"],
                             failure)

    def _status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            self.api.patch(types.PODS, meta["name"], {"metadata": {"uid": meta.get("uid")}, "status": status},
                           meta.get("namespace", "default"), "merge", subresource="status")
        except KubeError as exc:
            log.warning("%s", write_failure(f"report the status of {meta.get('namespace')}/{meta['name']}", exc))

    def _running(self, pod: dict[str, Any], node: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                      for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled")]
        containers = [{"name": c.get("name", ""), "image": c.get("image", ""), "ready": True, "started": True,
                       "restartCount": 0, "state": {"running": {"startedAt": now}}}
                      for c in (pod.get("spec") or {}).get("containers") or []]
        self._log_started(pod, node)
        self._status(pod, {"phase": "Running", "conditions": conditions, "startTime": now,
                           "containerStatuses": containers, "hostIP": self._host_ip(node), **self._pod_ip(pod, node)})

    def _log_started(self, pod: dict[str, Any], node: str) -> None:
        """Each fake container's output: that it started, and the environment the device plugin's Allocate gave it."""
        uid = pod["metadata"].get("uid", "")
        envs = self.envs.get(uid, {})
        for container in (pod.get("spec") or {}).get("containers") or []:
            name = str(container.get("name", ""))
            self.sandbox.logs.write(uid, name, f"started container {name} (image {container.get('image', '')}) "
                                               f"on node {node} by the kubelet stand-in")
            env = envs.get(name)
            if env is None:
                continue
            self.sandbox.logs.write(uid, name, "environment from the device plugin's Allocate:")
            for key, value in sorted(env.items()):
                self.sandbox.logs.write(uid, name, f"{key}={value}")

    def _fail(self, pod: dict[str, Any], node: str, details: str) -> None:
        message = f"Allocate failed due to {details}, which is unexpected"
        self._event(pod, node, "UnexpectedAdmissionError", message)
        self._status(pod, {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message})

    def _pod_ip(self, pod: dict[str, Any], node: str) -> dict[str, Any]:
        """``podIP``/``podIPs`` from the node's ``spec.podCIDR``, as its CNI's host-local IPAM gives them.

        None while the node has no range: a real pod network would not start the pod (`sandbox.ipam`).
        """
        cidr = ((self.sandbox.get("nodes", None, node) or {}).get("spec") or {}).get("podCIDR")
        if not cidr:
            return {}

        def existing() -> list[object]:
            return [(p.get("status") or {}).get("podIP") for p in self.sandbox.objects("pods")
                    if (p.get("spec") or {}).get("nodeName") == node]

        address = self._addresses.take(node, cidr, pod["metadata"].get("uid", ""), existing)
        return {"podIP": address, "podIPs": [{"ip": address}]} if address else {}

    def _host_ip(self, node: str) -> str:
        obj = self.sandbox.get("nodes", None, node) or {}
        for address in (obj.get("status") or {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address.get("address", ""))
        return ""

