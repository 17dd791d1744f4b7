"""A kubelet stand-in for DRA: the plugin manager, the registration handshake, and the DRA manager's calls.

What it does, after kubelet (kubernetes/kubernetes):

- ``pkg/kubelet/pluginmanager/pluginwatcher``: watches the registration directory; files whose name
  starts with ``.`` and files that are not unix sockets are ignored; what is left is the desired
  state of the world, one entry per socket path (a re-created socket is a new entry).
- ``pkg/kubelet/pluginmanager/reconciler`` (``reconcile``): a registered plugin whose socket is gone
  or was re-created is deregistered first; every socket not registered (with its current identity)
  gets a registration attempt, again and again until it succeeds or the socket goes away. A failed
  attempt is not fatal: ``operationexecutor`` runs each attempt on its own goroutine, at most one
  per socket path (``nestedpendingoperations``), and a failed one makes that path wait out an
  exponential backoff (``pkg/util/goroutinemap/exponentialbackoff``: 0.5 s, doubled after each
  failure up to 2 min 2 s, kept per path, cleared by a success) before the next attempt.
- ``operationexecutor/operation_generator.go`` (``GenerateRegisterPluginFunc``): dial the socket,
  waiting up to 10 s for it to answer (``dialTimeoutDuration``, a blocking dial), call ``GetInfo``,
  validate, then ``NotifyRegistrationStatus``; a refusal is notified and counts as a failed attempt
  (so it is retried with backoff too).
- ``pkg/kubelet/cm/dra/plugin`` (``RegistrationHandler``, ``DRAPlugin``): only ``type: DRAPlugin``
  is handled; the service is the first of ``v1.DRAPlugin``, ``v1beta1.DRAPlugin`` that both sides
  list (``servicesSupportedByKubelet``; an empty list is refused); calls go to the ``endpoint``
  from ``GetInfo``, or to the registration socket itself when that is empty (``operation_generator.go``
  sets the socket path before ``ValidatePlugin`` and ``RegisterPlugin`` see it).
- ``pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go`` (``DRAPluginManager``; the ``plugins_store.go``
  before it, kubelet 1.33's, has the same rules except that it calls the most recently registered
  instance whether connected or not) and the pluginwatcher README's "Seamless Upgrade": every
  registered instance of a driver is kept, in the order they registered (``store``: driver name ->
  instances); an instance whose endpoint is already registered for the driver is refused ("One
  plugin instance cannot hijack the endpoint of another instance"; ``add`` checks and appends under
  one mutex, before the plugin is notified, so of two sockets registering one endpoint at once one
  is refused); calls go to the most recently
  registered instance whose gRPC connection is up, else to the most recently registered (``get``:
  "Heuristic: pick the most recent one", "Prefer plugins which are connected"; ``monitoredPlugin``
  follows each connection and asks gRPC to reconnect when it ends), so a killed instance whose
  sockets stayed behind is passed over; deregistering one (its registration socket went away)
  removes that instance alone (``remove``, by endpoint), so calls fall back to the newest of those
  left, and the driver is unregistered only when none is left.
- the same file's ``sync``, ``usable`` and ``wipeResourceSlices`` (kubelet 1.34+, kubernetes#132058;
  before it ``RegistrationHandler.DeRegisterPlugin`` did it only when the last instance deregistered):
  each time an instance is added or removed or its connection comes or goes, a driver none of whose
  instances is connected (none left, or all of them killed with their sockets left behind) gets its
  ResourceSlices on this node wiped after ``wipingDelay`` (``defaultWipingDelay``, 30 s, in
  ``pkg/kubelet/cm/dra/manager.go``), unless an instance is connected again before then (the wipe
  already queued keeps its time; ``pendingWipes``, a ``TimedWorkerQueue`` from
  ``pkg/controller/tainteviction/timed_workers.go``, whose ``CancelWork`` stops a wipe not yet
  started, never one that is running). The wipe is one ``DeleteCollection`` with the field selector
  ``spec.nodeName=<node>,spec.driver=<driver>``; a NotFound is success, any other error is logged
  and retried (``wait.ExponentialBackoffWithContext`` with 1 s, doubled, 20 % jitter, up to 5 min:
  a doubling past the cap ends it, so it gives up after 9 attempts and about 8.5 min); `stop` ends
  it (kubelet's ``Stop`` cancels its context, the request under way included: here `stop` waits for
  that request) and drops the wipes not started.
- ``pkg/kubelet/cm/dra/manager.go`` (``PrepareResources``): for each of the pod's
  ``spec.resourceClaims``, the claim is ``resourceClaimName`` or, for a template, the name in
  ``status.resourceClaimStatuses`` (none there: nothing to prepare); the claim is read from the API,
  must be allocated and list the pod in ``status.reservedFor``; claims already prepared on this node
  only gain the pod (``claimInfo.addPodReference``, then ``isPrepared``: no driver call; one of the
  same name with another UID is refused); the rest are grouped by the drivers of their allocation
  results and sent in one ``NodePrepareResources`` per driver, which must answer every claim without
  error.
  ``UnprepareResources`` calls ``NodeUnprepareResources`` for a claim once no pod uses it.

Where it differs from kubelet: no checkpoint of its own, no CDI injection into containers (the CDI
ids are returned to the caller), no check that a container references the claim, no ownership check
of template claims, no retries of the DRA calls (each is made once, with `call_timeout`; kubelet's
pod sync retries those, the sandbox's stack does the same), ``GetInfo`` and
``NotifyRegistrationStatus`` get `call_timeout` instead of kubelet's 1 s and 5 s (a loaded test
machine is slower, and a timeout would only cost a retry), a ``NotifyRegistrationStatus`` that fails
after a successful registration is logged and leaves the plugin registered (kubelet too keeps it,
but also starts that path's backoff), the reconciler runs every 0.2 s (kubelet: every 1 s) and
inotify wakes it early, a connection counts as up in gRPC Python's READY state (kubelet: from
``ConnBegin`` to ``ConnEnd``), slices are wiped only when it is given `node_name` (kubelet always
knows its node; it also looks the Node up before each attempt and retries while it is missing, the
stand-in does not), and it does not wipe every driver's slices of the node when it starts
(``NewDRAPluginManager`` does, in the background).

API: `start`/`stop` (or ``with``), `wait_registered`, `prepare(pod)` -> CDI ids per claim UID,
`unprepare(pod)`. ``pod`` is the pod's JSON (a mapping) or a `types.Pod`.
"""

from __future__ import annotations

import logging
import os
import random
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.dra._api import dra_v1_pb2, dra_v1beta1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra._api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2 as reg
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra_objects import WireResourceClaim
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.errors import KubeError, NotFound
from kubectl_gpushare.kube.stacks.dra import claim_names
from kubectl_gpushare.node.dirwatch import DirWatch
from kubectl_gpushare.node.sockets import CHANNEL_OPTIONS, SocketIdentity, socket_identity, target

log = logging.getLogger(__name__)

KUBELET_SERVICES = (protocol.DRA_SERVICE_V1, protocol.DRA_SERVICE_V1BETA1)
"""What kubelet 1.34+ speaks, most recent first (``servicesSupportedByKubelet``)."""
POLL_SECONDS = 0.05
DIAL_TIMEOUT = 10.0
"""Seconds a registration attempt waits for the socket to answer (``dialTimeoutDuration``)."""
INITIAL_BACKOFF = 0.5
"""Seconds before a socket path is tried again after its first failure (``initialDurationBeforeRetry``)."""
MAX_BACKOFF = 122.0
"""The longest wait between attempts, 2 min 2 s (``maxDurationBeforeRetry``)."""
WIPING_DELAY = 30.0
"""Seconds a driver may go without a connected instance before its slices are wiped (``defaultWipingDelay``)."""
WIPE_RETRY = 1.0
"""Seconds before a failed wipe is tried again, doubled after each failure (``wipeResourceSlices``'s backoff)."""
WIPE_RETRY_CAP = 300.0
"""A doubled wait past this ends the retries (``Cap: 5 * time.Minute``, which sets ``Steps`` to 0)."""
WIPE_RETRY_JITTER = 0.2
"""Each wait is longer by up to this fraction of it, at random (``Jitter``)."""
WIPE_STEPS = 100
"""At most this many attempts (``Steps``); the cap ends them first."""


def _wait_seconds(seconds: float) -> float:
    """``seconds`` as a wait threading can take: at most ``threading.TIMEOUT_MAX`` (about 292 years), NaN too.

    A longer wait makes ``Event.wait`` raise OverflowError in the waiting thread. The cap is Go's own:
    a ``time.Duration`` is int64 nanoseconds, so no kubelet delay is longer (a negative one fires at once).
    """
    return seconds if seconds < threading.TIMEOUT_MAX else threading.TIMEOUT_MAX


class KubeletPrepareError(RuntimeError):
    """Preparing or unpreparing a pod's claims failed; the message is what kubelet would put on the pod."""


@dataclass
class Plugin:
    """One registered DRA plugin instance, and whether its gRPC connection is up now."""

    name: str
    endpoint: str
    service: str
    registration_socket: str
    channel: grpc.Channel
    stub: Any
    connected: bool = False
    """``monitoredPlugin.connected``: set when the connection is up, cleared when it ends (kubelet then
    asks gRPC to connect again: here the subscription keeps trying, `watch`)."""
    on_change: Callable[[], None] | None = None
    """Called after each change of `connected` (``HandleConn`` calls ``sync``)."""

    def watch(self) -> None:
        """Follow the connection (``grpc.WithStatsHandler``, ``HandleConn``), connecting now (``conn.Connect()``)."""
        self.channel.subscribe(self._changed, try_to_connect=True)

    def close(self) -> None:
        """Stop following the connection and close it."""
        self.channel.unsubscribe(self._changed)
        self.channel.close()

    def _changed(self, state: grpc.ChannelConnectivity) -> None:
        connected = state is grpc.ChannelConnectivity.READY
        if connected == self.connected:
            return
        self.connected = connected
        if self.on_change is not None:
            self.on_change()


@dataclass
class _Prepared:
    driver: str
    uid: str
    cdi_ids: list[str]
    pods: set[str] = field(default_factory=set)


@dataclass
class _Backoff:
    """kubelet's ``exponentialbackoff.ExponentialBackoff`` for one socket path."""

    duration: float = 0.0
    failed_at: float = 0.0

    def allows(self, now: float) -> bool:
        """``SafeToRetry``: the wait since the last failure is over."""
        return now - self.failed_at > self.duration

    def failed(self, now: float) -> None:
        """``Update``: 0.5 s after the first failure, doubled after each further one, capped."""
        self.duration = INITIAL_BACKOFF if not self.duration else min(2 * self.duration, MAX_BACKOFF)
        self.failed_at = now


class KubeletSim:
    """kubelet's plugin manager and DRA manager, over real unix sockets, for tests and the sandbox.

    Args:
        registration_dir: the directory to watch (kubelet's ``plugins_registry``).
        client: reads ResourceClaims (kubelet's own client).
        services: the DRA services this "kubelet" speaks, most recent first (an older kubelet: v1beta1 only).
        call_timeout: seconds for each gRPC call.
        dial_timeout: seconds a registration attempt waits for a socket to answer.
        node_name: this kubelet's node, whose slices of a driver left without a connected instance
            are wiped; None: no wiping (as kubelet without an API client).
        wiping_delay: seconds a driver may be without a connected instance before that (read when
            a wipe is queued).
        wipe_retry: seconds before a failed wipe is tried again (doubled each time).
    """

    def __init__(
        self,
        registration_dir: str,
        client: Client,
        *,
        services: tuple[str, ...] = KUBELET_SERVICES,
        call_timeout: float = 10.0,
        dial_timeout: float = DIAL_TIMEOUT,
        node_name: str | None = None,
        wiping_delay: float = WIPING_DELAY,
        wipe_retry: float = WIPE_RETRY,
    ) -> None:
        self.registration_dir = registration_dir
        self.client = client
        self.services = services
        self.call_timeout = call_timeout
        self.dial_timeout = dial_timeout
        self.node_name = node_name
        self.wiping_delay = wiping_delay
        self.wipe_retry = wipe_retry
        self._cond = threading.Condition()
        self._plugins: dict[str, list[Plugin]] = {}
        """Driver name -> its registered instances, oldest first (``DRAPluginManager.store``)."""
        self._registered: dict[str, SocketIdentity] = {}
        """Socket path -> the identity it had when its plugin registered (the actual state of the world)."""
        self._pending: dict[str, threading.Thread] = {}
        self._backoff: dict[str, _Backoff] = {}
        self._prepared: dict[tuple[str, str], _Prepared] = {}
        self.refused: dict[str, str] = {}
        """Registration socket -> why its last registration attempt failed (cleared when it registers)."""
        self.attempts: dict[str, int] = {}
        """Registration socket -> how many registration attempts were started on it."""
        self._wipes: dict[str, threading.Timer] = {}
        """Driver name -> its wipe, queued or running (``pendingWipes``)."""
        self._wiping: set[threading.Thread] = set()
        """The wipes under way (queued ones leave `_wipes` when a connection comes back; these too)."""
        self.wiped: dict[str, int] = {}
        """Driver name -> how many of its wipes succeeded."""
        self.prepare_calls = 0
        self.unprepare_calls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> KubeletSim:
        """Watch the registration directory on a thread."""
        os.makedirs(self.registration_dir, exist_ok=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="kubeletsim-dra", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching, wait for registration attempts and wipes in flight, and drop every plugin connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        with self._cond:
            pending = list(self._pending.values())
        for thread in pending:
            thread.join(5)
        with self._cond:
            plugins = [plugin for instances in self._plugins.values() for plugin in instances]
            self._plugins.clear()
            self._registered.clear()
            self._backoff.clear()
            wipes = list(self._wipes.values())
            self._wipes.clear()
            wiping = list(self._wiping)
        for wipe in wipes:  # one not started never starts
            wipe.cancel()
        for thread in wiping:  # one under way stops at its next step: no DELETE is sent after `stop`
            thread.join(5)
        for plugin in plugins:
            plugin.close()

    def __enter__(self) -> KubeletSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_registered(self, driver: str = protocol.DRA_DRIVER, timeout: float = 10.0,
                        endpoint: str | None = None) -> Plugin | None:
        """The instance of ``driver`` kubelet calls (the one at ``endpoint``), waiting up to ``timeout`` seconds."""
        def found() -> Plugin | None:
            instances = self._plugins.get(driver, [])
            if endpoint is None:
                return instances[-1] if instances else None
            return next((p for p in instances if p.endpoint == endpoint), None)

        with self._cond:
            self._cond.wait_for(lambda: found() is not None, timeout)
            registered = found()
        if registered is not None and endpoint is None:
            return self.plugin(driver)
        return registered

    def plugin(self, driver: str = protocol.DRA_DRIVER) -> Plugin | None:
        """The instance of ``driver`` kubelet calls now, if any (``DRAPluginManager.get``).

        The most recently registered one whose connection is up, else the most recently registered.
        """
        with self._cond:
            instances = self._plugins.get(driver, [])
            return next((p for p in reversed(instances) if p.connected), instances[-1] if instances else None)

    def plugins(self, driver: str = protocol.DRA_DRIVER) -> list[Plugin]:
        """Every registered instance of ``driver``, oldest first."""
        with self._cond:
            return list(self._plugins.get(driver, []))

    def pending_wipes(self) -> list[str]:
        """The drivers whose wipe is queued or under way (``pendingWipes``).

        A wipe that a connection cancelled once under way is not listed, though it may still run
        (``CancelWork`` cannot stop it).
        """
        with self._cond:
            return sorted(self._wipes)

    # --- the plugin manager -----------------------------------------------------------------------

    def _watch(self) -> None:
        watch = DirWatch.open([self.registration_dir])
        try:
            while not self._stop.is_set():
                self._reconcile(self._sockets())
                if watch is not None:
                    watch.wait(POLL_SECONDS * 4)  # inotify wakes us; the timeout catches removals and backoffs
                else:
                    self._stop.wait(POLL_SECONDS)
        finally:
            if watch is not None:
                watch.close()

    def _sockets(self) -> dict[str, SocketIdentity]:
        """The desired state of the world: socket path -> its identity (a re-created socket has a new one)."""
        try:
            names = os.listdir(self.registration_dir)
        except OSError:
            names = []
        present: dict[str, SocketIdentity] = {}
        for name in names:
            path = os.path.join(self.registration_dir, name)
            if name.startswith("."):
                continue  # plugin_watcher.go: "Ignoring file (starts with '.')"
            try:
                if not stat.S_ISSOCK(os.stat(path).st_mode):
                    continue
            except OSError:
                continue
            identity = socket_identity(path)
            if identity is not None:
                present[path] = identity
        return present

    def _reconcile(self, desired: dict[str, SocketIdentity]) -> None:
        """reconciler.go ``reconcile``: deregister what went away or changed, then try what is not registered."""
        with self._cond:
            stale = [path for path, identity in self._registered.items() if desired.get(path) != identity]
        for path in stale:
            self._deregister(path)
        now = time.monotonic()
        with self._cond:
            for path, identity in desired.items():
                if self._stop.is_set() or self._registered.get(path) == identity or path in self._pending:
                    continue  # registered, or an attempt is in flight (nestedpendingoperations: one per path)
                backoff = self._backoff.get(path)
                if backoff is not None and not backoff.allows(now):
                    continue
                self.attempts[path] = self.attempts.get(path, 0) + 1
                thread = threading.Thread(target=self._register, args=(path, identity),
                                          name="kubeletsim-dra-register", daemon=True)
                self._pending[path] = thread
                thread.start()

    def _register(self, path: str, identity: SocketIdentity) -> None:
        """One registration attempt (``GenerateRegisterPluginFunc``), recorded as success or failure."""
        try:
            outcome = self._handshake(path, identity)
        except Exception as exc:  # a bug in an attempt is a failed attempt, as kubelet recovers panics
            log.exception("registering the plugin at %s failed unexpectedly", path)
            outcome = f"{type(exc).__name__}: {exc}"
        with self._cond:
            self._pending.pop(path, None)
            if isinstance(outcome, Plugin):  # already in the store (`_add`)
                self._backoff.pop(path, None)
                self.refused.pop(path, None)
            else:
                self.refused[path] = outcome
                self._backoff.setdefault(path, _Backoff()).failed(time.monotonic())
                log.info("registering the plugin at %s failed (retried with backoff): %s", path, outcome)
            self._cond.notify_all()
        if isinstance(outcome, Plugin):
            log.info("registered DRA plugin %s (%s at %s, instance %d)", outcome.name, outcome.service,
                     outcome.endpoint, len(self.plugins(outcome.name)))

    def _dial(self, channel: grpc.Channel) -> bool:
        """Wait up to `dial_timeout` for the socket to answer (gRPC reconnects meanwhile), or until `stop`."""
        ready = grpc.channel_ready_future(channel)
        deadline = time.monotonic() + self.dial_timeout
        try:
            while not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                try:
                    ready.result(timeout=min(left, POLL_SECONDS * 4))
                    return True
                except grpc.FutureTimeoutError:
                    continue
            return False
        finally:
            ready.cancel()

    def _handshake(self, path: str, identity: SocketIdentity) -> Plugin | str:
        """Dial, GetInfo, validate, add (`_add`), NotifyRegistrationStatus: the plugin added, or why not.

        As ``GenerateRegisterPluginFunc``: the handler's ``RegisterPlugin`` (here `_add`) comes before
        the status is notified, so an instance is in the store before its plugin hears it registered.
        """
        channel = grpc.insecure_channel(target(path), options=CHANNEL_OPTIONS)
        try:
            if not self._dial(channel):
                return f"dial failed at socket {path}: no answer within {self.dial_timeout:g}s"
            stub = reg_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            try:
                info: reg.PluginInfo = stub.GetInfo(reg.InfoRequest(), timeout=self.call_timeout)
            except grpc.RpcError as exc:
                return f"GetInfo failed: {exc.details()}"
            added: Plugin | None = None
            chosen = next((s for s in self.services if s in info.supported_versions), "")
            if info.type != protocol.DRA_PLUGIN_TYPE:
                error = f"plugin type {info.type!r} is not handled here"
            elif not info.supported_versions:
                error = "empty list of supported gRPC services (aka supported versions)"
            elif not chosen:
                error = f"none of the services {list(info.supported_versions)} is supported"
            else:
                # GenerateRegisterPluginFunc: "if infoResp.Endpoint == "" { infoResp.Endpoint = socketPath }",
                # before the handler sees it: the registration socket serves the DRA service too.
                added, error = self._add(info.name, info.endpoint or path, chosen, path, identity)
            try:
                stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=not error, error=error),
                                              timeout=self.call_timeout)
            except grpc.RpcError as exc:
                log.info("NotifyRegistrationStatus: %s", exc.details())
            return added if added is not None else error
        finally:
            channel.close()

    def _add(self, name: str, endpoint: str, service: str, path: str,
             identity: SocketIdentity) -> tuple[Plugin | None, str]:
        """``DRAPluginManager.add``: refuse an endpoint the driver has registered, else store a new instance.

        The check and the append are one step under the lock, as upstream's under its mutex, so two
        sockets registering one endpoint at once leave one instance, the other refused. The instance's
        connection is made here too (``grpc.NewClient`` and ``Connect`` inside ``add``). Returns the
        instance, or None and why it was refused.
        """
        with self._cond:
            if self._stop.is_set():
                return None, "kubelet is stopping"
            if any(p.endpoint == endpoint for p in self._plugins.get(name, ())):
                # "One plugin instance cannot hijack the endpoint of another instance."
                return None, f"endpoint {endpoint} already registered for DRA driver plugin {name}"
            channel = grpc.insecure_channel(target(endpoint), options=CHANNEL_OPTIONS)
            grpc_module = v1_grpc if service == protocol.DRA_SERVICE_V1 else v1beta1_grpc
            plugin = Plugin(name, endpoint, service, path, channel, grpc_module.DRAPluginStub(channel),
                            on_change=lambda: self._sync(name))
            plugin.watch()
            self._plugins.setdefault(name, []).append(plugin)
            self._registered[path] = identity
            self._sync(name)
            self._cond.notify_all()
            return plugin, ""

    def _deregister(self, path: str) -> None:
        """``DeRegisterPlugin``: that instance goes; the driver's others stay (calls fall back to the newest left)."""
        with self._cond:
            self._registered.pop(path, None)
            plugins: list[Plugin] = []
            for name, instances in list(self._plugins.items()):
                gone = [plugin for plugin in instances if plugin.registration_socket == path]
                if not gone:
                    continue
                plugins += gone
                left = [plugin for plugin in instances if plugin.registration_socket != path]
                if left:
                    self._plugins[name] = left
                else:
                    del self._plugins[name]
                self._sync(name)
            self._cond.notify_all()
        for plugin in plugins:
            plugin.close()
            log.info("deregistered DRA plugin %s (%s)", plugin.name, plugin.endpoint)

    # --- wiping the slices of a driver gone -------------------------------------------------------

    def _sync(self, driver: str) -> None:
        """``DRAPluginManager.sync``: cancel the driver's queued wipe if it is usable, else queue one if none is."""
        if self.node_name is None:
            return  # "Cannot wipe." (no kubeClient)
        with self._cond:
            if self._stop.is_set():
                return  # "Shutting down, no longer interested in connection changes..."
            if any(plugin.connected for plugin in self._plugins.get(driver, ())):  # ``usable``
                wipe = self._wipes.pop(driver, None)
                if wipe is not None:
                    wipe.cancel()  # ``CancelWork``: too late for a wipe already running
                    log.info("DRA driver %s is usable again: its slices are not wiped", driver)
                return
            if driver in self._wipes:
                return  # queued or running: the original time still applies
            wipe = threading.Timer(_wait_seconds(self.wiping_delay), self._wipe, args=(driver,))
            wipe.name = f"kubeletsim-dra-wipe {driver}"
            wipe.daemon = True
            self._wipes[driver] = wipe
            wipe.start()
            log.info("DRA driver %s has no connected instance: its slices on %s are wiped in %gs unless one "
                     "connects", driver, self.node_name, self.wiping_delay)

    def _wipe(self, driver: str) -> None:
        """``wipeResourceSlices``: delete the driver's slices on this node, retried with backoff (or given up)."""
        selector = f"spec.nodeName={self.node_name},spec.driver={driver}"
        steps, duration = WIPE_STEPS, self.wipe_retry
        with self._cond:  # before `_stop` is read: a `stop` that does not see this thread has set it
            self._wiping.add(threading.current_thread())
        try:
            while steps > 0 and not self._stop.is_set():  # ``ExponentialBackoffWithContext``
                try:
                    self.client.delete_collection(types.DRA_SLICES, field_selector=selector)
                except NotFound:
                    pass  # "ResourceSlices not found, nothing to delete."
                except KubeError as exc:
                    log.info("deleting the ResourceSlices %s failed, retrying: %s", selector, exc)
                    if steps == 1:
                        break
                    # ``delay``: this wait with jitter; the next one doubled, or the cap and no step left
                    wait = duration * (1 + random.random() * WIPE_RETRY_JITTER)
                    steps, duration = steps - 1, duration * 2
                    if duration > WIPE_RETRY_CAP:
                        steps, duration = 0, WIPE_RETRY_CAP
                    self._stop.wait(_wait_seconds(wait))
                    continue
                log.info("deleted the ResourceSlices %s", selector)
                with self._cond:
                    self.wiped[driver] = self.wiped.get(driver, 0) + 1
                    self._cond.notify_all()
                return
            if not self._stop.is_set():
                log.warning("gave up deleting the ResourceSlices %s", selector)
        finally:
            with self._cond:
                self._wiping.discard(threading.current_thread())
                if self._wipes.get(driver) is threading.current_thread():
                    del self._wipes[driver]  # done: the next loss of the driver queues a new one

    # --- the DRA manager ------------------------------------------------------------------------

    @staticmethod
    def _pod(pod: Mapping[str, Any] | types.Pod) -> types.Pod:
        if isinstance(pod, types.Pod):
            return pod
        return msgspec.convert(dict(pod), types.Pod, from_attributes=False)

    def _claim_names(self, pod: types.Pod) -> list[str]:
        given = {status.name for status in pod.status.resource_claim_statuses}
        names = []
        for entry, name in claim_names(pod):
            if not entry.resource_claim_name and entry.resource_claim_template_name and entry.name not in given:
                raise KubeletPrepareError(
                    f"prepare resource claim: pod {pod.metadata.name}: no status for claim {entry.name!r} yet")
            if name:  # None: the template made no claim, nothing to prepare
                names.append(name)
        return names

    def prepare(self, pod: Mapping[str, Any] | types.Pod) -> dict[str, list[str]]:
        """Prepare a pod's claims, as kubelet does before its containers start.

        Returns:
            Claim UID -> the CDI device ids the pod's containers get from it.

        Raises:
            KubeletPrepareError: a claim cannot be read, is not allocated or reserved for the pod,
                its driver is not registered, or the driver failed or skipped a claim.
        """
        decoded = self._pod(pod)
        namespace, pod_uid = decoded.metadata.namespace, decoded.metadata.uid
        by_driver: dict[str, list[WireResourceClaim]] = {}
        out: dict[str, list[str]] = {}
        for name in self._claim_names(decoded):
            try:
                claim: WireResourceClaim = self.client.get(types.DRA_CLAIMS, name, namespace)
            except KubeError as exc:
                raise KubeletPrepareError(
                    f"failed to fetch ResourceClaim {name} referenced by pod {decoded.metadata.name}: {exc}") from exc
            if claim.status.allocation is None:
                raise KubeletPrepareError(f"claim {namespace}/{name}: not allocated")
            if not any(ref.uid == pod_uid for ref in claim.status.reserved_for):
                raise KubeletPrepareError(f"pod {decoded.metadata.name}({pod_uid}) is not allowed to use resource "
                                          f"claim {name}({claim.metadata.uid})")
            with self._cond:  # already prepared: the pod is only added, the driver is not called
                known = self._prepared.get((namespace, name))
                if known is not None:
                    if known.uid != claim.metadata.uid:
                        raise KubeletPrepareError(f"old ResourceClaim with same name {name} and different UID "
                                                  f"{known.uid} still exists (previous pod force-deleted?!)")
                    known.pods.add(pod_uid)
                    out[known.uid] = list(known.cdi_ids)
                    continue
            drivers = {result.driver for result in claim.status.allocation.devices.results}
            for driver in sorted(drivers):
                by_driver.setdefault(driver, []).append(claim)
        for driver, claims in by_driver.items():
            for uid, ids in self._call_prepare(driver, claims).items():
                out[uid] = out.get(uid, []) + ids
        with self._cond:
            for driver, claims in by_driver.items():
                for claim in claims:
                    key = (namespace, claim.metadata.name)
                    entry = self._prepared.setdefault(key, _Prepared(driver, claim.metadata.uid, []))
                    entry.cdi_ids = out.get(claim.metadata.uid, [])
                    entry.pods.add(pod_uid)
        return out

    def _stub(self, driver: str) -> Plugin:
        plugin = self.plugin(driver)
        if plugin is None:
            raise KubeletPrepareError(f"DRA driver {driver} is not registered")
        return plugin

    def _call_prepare(self, driver: str, claims: list[WireResourceClaim]) -> dict[str, list[str]]:
        plugin = self._stub(driver)
        api = dra_v1_pb2 if plugin.service == protocol.DRA_SERVICE_V1 else dra_v1beta1_pb2
        request = api.NodePrepareResourcesRequest(claims=[
            api.Claim(namespace=c.metadata.namespace, uid=c.metadata.uid, name=c.metadata.name) for c in claims
        ])
        self.prepare_calls += 1
        try:
            response = plugin.stub.NodePrepareResources(request, timeout=self.call_timeout)
        except grpc.RpcError as exc:
            raise KubeletPrepareError(f"NodePrepareResources failed: {exc.details()}") from exc
        out: dict[str, list[str]] = {}
        for claim in claims:
            uid = claim.metadata.uid
            if uid not in response.claims:
                missing = sum(c.metadata.uid not in response.claims for c in claims)
                raise KubeletPrepareError(f"NodePrepareResources left out {missing} claims")
            result = response.claims[uid]
            if result.error:
                raise KubeletPrepareError(f"NodePrepareResources failed for ResourceClaim {claim.metadata.name}: "
                                          f"{result.error}")
            out[uid] = [cdi for device in result.devices for cdi in device.cdi_device_ids]
        return out

    def unprepare(self, pod: Mapping[str, Any] | types.Pod) -> list[str]:
        """Unprepare the pod's claims that no other pod uses any more; their UIDs.

        Raises:
            KubeletPrepareError: the driver failed a claim or is not registered.
        """
        decoded = self._pod(pod)
        namespace, pod_uid = decoded.metadata.namespace, decoded.metadata.uid
        release: list[tuple[tuple[str, str], _Prepared]] = []
        with self._cond:
            for key, entry in self._prepared.items():
                if key[0] == namespace and pod_uid in entry.pods:
                    entry.pods.discard(pod_uid)
                    if not entry.pods:
                        release.append((key, entry))
        by_driver: dict[str, list[tuple[str, str, str]]] = {}
        for (ns, name), entry in release:
            by_driver.setdefault(entry.driver, []).append((ns, name, entry.uid))
        for driver, claims in by_driver.items():
            plugin = self._stub(driver)
            api = dra_v1_pb2 if plugin.service == protocol.DRA_SERVICE_V1 else dra_v1beta1_pb2
            request = api.NodeUnprepareResourcesRequest(claims=[api.Claim(namespace=ns, name=name, uid=uid)
                                                                for ns, name, uid in claims])
            self.unprepare_calls += 1
            try:
                response = plugin.stub.NodeUnprepareResources(request, timeout=self.call_timeout)
            except grpc.RpcError as exc:
                raise KubeletPrepareError(f"NodeUnprepareResources failed: {exc.details()}") from exc
            for ns, name, uid in claims:
                if uid not in response.claims or response.claims[uid].error:
                    error = response.claims[uid].error if uid in response.claims else "left out"
                    raise KubeletPrepareError(f"NodeUnprepareResources failed for ResourceClaim {name}: {error}")
                with self._cond:
                    self._prepared.pop((ns, name), None)
        return [entry.uid for _, entry in release]
