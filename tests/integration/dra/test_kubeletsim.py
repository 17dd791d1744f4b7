"""The kubelet stand-in against the smallest plugin that registers: an endpoint GetInfo leaves empty, and
the wiping of a driver's slices on the node once none of its instances is connected."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress

import grpc
import pytest
from dra_helpers import NODE, Dirs, served_grpc
from waiting import wait_for

from kubectl_gpushare import protocol
from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra.kubeletsim import WIPE_RETRY, KubeletSim
from kubectl_gpushare.dra.servicer import RegistrationServicer
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration


class _Answering(v1_grpc.DRAPluginServicer):
    """A DRA service that answers every unprepare with nothing to do, and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def NodeUnprepareResources(  # noqa: N802
        self, request: dra_v1_pb2.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_v1_pb2.NodeUnprepareResourcesResponse:
        self.calls += 1
        return dra_v1_pb2.NodeUnprepareResourcesResponse()


def test_an_empty_endpoint_from_get_info_means_the_registration_socket(api: Client, dirs: Dirs) -> None:
    # operation_generator.go (GenerateRegisterPluginFunc): an empty endpoint becomes the socket path
    # before ValidatePlugin and RegisterPlugin see it, so the DRA calls go to the registration socket.
    path = os.path.join(dirs.registration, "one.sock")
    dra = _Answering()
    with served_grpc(path, RegistrationServicer(""), dra), KubeletSim(dirs.registration, api) as kubelet:
        plugin = kubelet.wait_registered()
        assert plugin is not None and plugin.endpoint == path
        plugin.stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(), timeout=5)
        assert dra.calls == 1


def _slice(name: str, node: str, driver: str = protocol.DRA_DRIVER) -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node, "devices": [{"name": "gpu-0"}],
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


def _left(api: Client) -> set[str]:
    return {s.metadata.name for s in api.list(types.DRA_SLICES)}


class _Instance:
    """One instance of our driver: a registration socket and its own DRA socket, each stoppable."""

    def __init__(self, dirs: Dirs, name: str) -> None:
        self.registration_path = os.path.join(dirs.registration, f"{name}-reg.sock")
        self.endpoint = os.path.join(dirs.plugin, f"{name}.sock")
        self._stack = ExitStack()
        self.dra = self._stack.enter_context(served_grpc(self.endpoint, None, _Answering()))
        self.registration = self._stack.enter_context(
            served_grpc(self.registration_path, RegistrationServicer(self.endpoint), None))

    def unregister(self) -> None:
        """Remove the registration socket, as a driver stopping cleanly does."""
        self.registration.stop(None)
        with suppress(FileNotFoundError):
            os.unlink(self.registration_path)

    def close(self) -> None:
        self._stack.close()


@pytest.fixture
def instances(dirs: Dirs) -> Iterator[Callable[[str], _Instance]]:
    made: list[_Instance] = []

    def make(name: str) -> _Instance:
        made.append(_Instance(dirs, name))
        return made[-1]

    yield make
    for instance in made:
        instance.close()


def _connected(kubelet: KubeletSim) -> bool:
    plugin = kubelet.plugin()
    return plugin is not None and plugin.connected


def _settled(kubelet: KubeletSim, wiping_delay: float) -> None:
    """Wait until the instance is connected and the wipe queued when it was added (not yet connected) is
    cancelled, then make the next wipe come after ``wiping_delay`` seconds."""
    wait_for(lambda: _connected(kubelet) and kubelet.pending_wipes() == [], what="the instance connected")
    assert not kubelet.wiped
    kubelet.wiping_delay = wiping_delay


@contextmanager
def _unregistered(api: Client, dirs: Dirs, instance: _Instance, wiping_delay: float,
                  wipe_retry: float = WIPE_RETRY) -> Iterator[KubeletSim]:
    """A kubelet of this node that saw ``instance`` connect, then unregister with ``wiping_delay`` set."""
    with KubeletSim(dirs.registration, api, node_name=NODE, wipe_retry=wipe_retry) as kubelet:
        _settled(kubelet, wiping_delay)
        instance.unregister()
        yield kubelet


OURS_HERE, OURS_ELSEWHERE, THEIRS_HERE = "ours-here", "ours-elsewhere", "theirs-here"


@pytest.fixture
def loaded(sandbox: Sandbox) -> None:
    sandbox.load([_slice(OURS_HERE, NODE), _slice(OURS_ELSEWHERE, "gpu-node-2"),
                  _slice(THEIRS_HERE, NODE, driver="gpu.nvidia.com")])


def test_a_driver_whose_last_instance_goes_has_its_slices_on_this_node_wiped(
    api: Client, dirs: Dirs, instances, loaded: None
) -> None:
    # DRAPluginManager.sync / wipeResourceSlices (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go): after
    # wipingDelay, one DeleteCollection with spec.nodeName=<node>,spec.driver=<driver>.
    with _unregistered(api, dirs, instances("a"), 0.2) as kubelet:
        wait_for(lambda: kubelet.wiped.get(protocol.DRA_DRIVER) == 1, what="the wipe")
        assert _left(api) == {OURS_ELSEWHERE, THEIRS_HERE}
        assert kubelet.pending_wipes() == []


def test_an_instance_connected_again_within_the_delay_cancels_the_wipe(
    api: Client, dirs: Dirs, instances, loaded: None
) -> None:
    with _unregistered(api, dirs, instances("a"), 30.0) as kubelet:  # upstream's delay
        wait_for(lambda: kubelet.pending_wipes() == [protocol.DRA_DRIVER], what="a wipe queued")
        assert OURS_HERE in _left(api), "not before the delay"
        instances("b")
        wait_for(lambda: kubelet.pending_wipes() == [], what="the wipe cancelled by the new instance")
        assert _connected(kubelet) and OURS_HERE in _left(api) and not kubelet.wiped


def test_an_instance_whose_connection_ends_counts_as_gone_though_still_registered(
    api: Client, dirs: Dirs, instances, loaded: None
) -> None:
    # kubelet 1.34's "connection monitoring" (usable: no instance connected): a driver killed with its
    # registration socket left behind is wiped too.
    killed = instances("a")
    with KubeletSim(dirs.registration, api, node_name=NODE) as kubelet:
        _settled(kubelet, 0.2)
        killed.dra.stop(None)
        wait_for(lambda: kubelet.wiped.get(protocol.DRA_DRIVER) == 1, what="the wipe")
        assert len(kubelet.plugins()) == 1 and _left(api) == {OURS_ELSEWHERE, THEIRS_HERE}


def test_a_wipe_the_api_refuses_is_retried(
    api: Client, dirs: Dirs, instances, loaded: None, sandbox: Sandbox
) -> None:
    refused = sandbox.inject("DELETE", r"/resourceslices\?", status=500, times=2)
    with _unregistered(api, dirs, instances("a"), 0.05, wipe_retry=0.05) as kubelet:
        wait_for(lambda: kubelet.wiped.get(protocol.DRA_DRIVER) == 1, what="the wipe, third time")
        assert refused.hits == 2 and _left(api) == {OURS_ELSEWHERE, THEIRS_HERE}


def test_without_a_node_name_nothing_is_wiped(api: Client, dirs: Dirs, instances, loaded: None) -> None:
    only = instances("a")
    with KubeletSim(dirs.registration, api, wiping_delay=0.0) as kubelet:
        wait_for(lambda: _connected(kubelet), what="the instance registered and connected")
        only.unregister()
        wait_for(lambda: kubelet.plugin() is None, what="the instance deregistered")
        assert kubelet.pending_wipes() == [] and OURS_HERE in _left(api)


def test_stopping_drops_the_wipes_not_started(api: Client, dirs: Dirs, instances, loaded: None) -> None:
    with _unregistered(api, dirs, instances("a"), 30.0) as kubelet:
        wait_for(lambda: kubelet.pending_wipes() == [protocol.DRA_DRIVER], what="a wipe queued")
    assert kubelet.pending_wipes() == [] and OURS_HERE in _left(api)


def _wipe_threads() -> list[threading.Timer]:
    """The stand-ins' wipes waiting or running: a timer cancelled or done has ``finished`` set, and may linger."""
    return [thread for thread in threading.enumerate() if isinstance(thread, threading.Timer)
            and thread.name.startswith("kubeletsim-dra-wipe ") and not thread.finished.is_set()]


def test_a_wiping_delay_past_what_a_timer_takes_postpones_the_wipe(
    api: Client, dirs: Dirs, instances, loaded: None
) -> None:
    # Past threading.TIMEOUT_MAX the timer's thread died of an OverflowError, its wipe listed as pending.
    with _unregistered(api, dirs, instances("a"), 1e300) as kubelet:
        wait_for(lambda: kubelet.pending_wipes() == [protocol.DRA_DRIVER], what="a wipe queued")
        (wipe,) = _wipe_threads()
        wipe.join(0.3)  # an OverflowError ends it within milliseconds
        assert wipe.is_alive() and OURS_HERE in _left(api)


def test_stopping_waits_for_a_wipe_under_way(
    api: Client, dirs: Dirs, instances, loaded: None, sandbox: Sandbox
) -> None:
    # kubelet's Stop cancels the context its DeleteCollection runs under; here stop waits for the one
    # request under way, so nothing of the stand-in deletes anything after stop returned.
    slow = sandbox.inject("DELETE", r"/resourceslices\?", latency=0.4, times=1)
    with _unregistered(api, dirs, instances("a"), 0.0) as kubelet:
        wait_for(lambda: slow.hits == 1, what="the wipe's DELETE under way")
    assert _wipe_threads() == [] and kubelet.wiped == {protocol.DRA_DRIVER: 1}
