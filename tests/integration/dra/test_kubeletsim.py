"""The kubelet stand-in against the smallest plugin that registers: an endpoint GetInfo leaves empty."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
import pytest
from dra_helpers import Dirs

from kubectl_gpushare.dra._api import dra_v1_pb2
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra.kubeletsim import KubeletSim
from kubectl_gpushare.dra.servicer import RegistrationServicer
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.node.sockets import target

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


@contextmanager
def _served(path: str, registration: RegistrationServicer | None, dra: _Answering | None) -> Iterator[grpc.Server]:
    """A gRPC server on the unix socket ``path`` with the given services, stopped after."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    if registration is not None:
        reg_grpc.add_RegistrationServicer_to_server(registration, server)  # type: ignore[no-untyped-call]
    if dra is not None:
        v1_grpc.add_DRAPluginServicer_to_server(dra, server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(target(path))
    server.start()
    try:
        yield server
    finally:
        server.stop(None)


def test_an_empty_endpoint_from_get_info_means_the_registration_socket(api: Client, dirs: Dirs) -> None:
    # operation_generator.go (GenerateRegisterPluginFunc): an empty endpoint becomes the socket path
    # before ValidatePlugin and RegisterPlugin see it, so the DRA calls go to the registration socket.
    path = os.path.join(dirs.registration, "one.sock")
    dra = _Answering()
    with _served(path, RegistrationServicer(""), dra), KubeletSim(dirs.registration, api) as kubelet:
        plugin = kubelet.wait_registered()
        assert plugin is not None and plugin.endpoint == path
        plugin.stub.NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(), timeout=5)
        assert dra.calls == 1
