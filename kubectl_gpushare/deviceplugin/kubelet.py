"""Talking to kubelet's device manager: registration, self-dial, and noticing kubelet restarts.

Kubelet dials the plugin back inside ``Register`` (to call GetDevicePluginOptions), so the plugin's
server must be up before it registers. When kubelet restarts it deletes every socket in the
device-plugin directory and re-creates ``kubelet.sock``; the plugin notices by polling that file's
identity (inode, device, change time) a few times a second, cheaper and more portable than inotify.
This module knows nothing about GPUs or pods.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc
from kubectl_gpushare.node.sockets import CHANNEL_OPTIONS as _CHANNEL_OPTIONS
from kubectl_gpushare.node.sockets import (
    MAX_SOCKET_PATH,
    SocketIdentity,
    check_socket_dir,
    check_socket_path,
    dial,
    socket_identity,
    target,
)

__all__ = [
    "MAX_SOCKET_PATH",
    "Registration",
    "RegistrationError",
    "SocketIdentity",
    "check_plugin_dir",
    "check_socket_path",
    "dial",
    "socket_identity",
    "target",
]


class RegistrationError(RuntimeError):
    """Kubelet did not accept the registration (absent, refused, or an error reply)."""


def check_plugin_dir(path: str) -> None:
    """Make sure the device-plugin directory exists and takes new files (our socket goes there).

    Raises:
        ValueError: the directory cannot be created or written; the message says why.
    """
    check_socket_dir(path, "device-plugin directory", "--device-plugin-path")


@dataclass(frozen=True)
class Registration:
    """What the plugin tells kubelet about itself."""

    plugin_dir: str
    endpoint: str = protocol.PLUGIN_SOCKET
    resource: str = protocol.RESOURCE_MEM
    preferred_allocation: bool = True

    @property
    def kubelet_socket(self) -> str:
        """Kubelet's registration socket."""
        return os.path.join(self.plugin_dir, protocol.KUBELET_SOCKET)

    @property
    def plugin_socket(self) -> str:
        """Our own socket."""
        return os.path.join(self.plugin_dir, self.endpoint)

    def register(self, timeout: float = 5.0) -> None:
        """Register with kubelet once.

        Raises:
            RegistrationError: kubelet is not listening or rejected the request.
        """
        if socket_identity(self.kubelet_socket) is None:
            raise RegistrationError(f"kubelet is not listening: {self.kubelet_socket} does not exist")
        request = api.RegisterRequest(
            version=protocol.DEVICE_PLUGIN_API_VERSION,
            endpoint=self.endpoint,
            resource_name=self.resource,
            options=api.DevicePluginOptions(get_preferred_allocation_available=self.preferred_allocation),
        )
        with grpc.insecure_channel(target(self.kubelet_socket), options=_CHANNEL_OPTIONS) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=timeout)
                api_grpc.RegistrationStub(channel).Register(request, timeout=timeout)  # type: ignore[no-untyped-call]
            except grpc.FutureTimeoutError as exc:
                raise RegistrationError(f"kubelet did not answer on {self.kubelet_socket} within {timeout:g}s") from exc
            except grpc.RpcError as exc:
                raise RegistrationError(f"kubelet refused the registration: {exc.details()}") from exc
