"""Talking to kubelet's device manager: registration, self-dial, and noticing kubelet restarts.

Kubelet dials the plugin back inside ``Register`` (to call GetDevicePluginOptions), so the plugin's
server must be up before it registers. When kubelet restarts it deletes every socket in the
device-plugin directory and re-creates ``kubelet.sock``; the plugin notices by polling that file's
identity (inode, device, change time) a few times a second, cheaper and more portable than inotify.
This module knows nothing about GPUs or pods.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2 as api
from kubectl_gpushare.deviceplugin._api import deviceplugin_pb2_grpc as api_grpc

MAX_SOCKET_PATH = 107
"""sun_path holds 108 bytes including the terminating NUL."""
_CHANNEL_OPTIONS = [("grpc.enable_http_proxy", 0)]


class RegistrationError(RuntimeError):
    """Kubelet did not accept the registration (absent, refused, or an error reply)."""


SocketIdentity = tuple[int, int, int]


def socket_identity(path: str) -> SocketIdentity | None:
    """What changes when a socket file is re-created: (device, inode, ctime ns); None if absent."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_ctime_ns


def check_socket_path(path: str) -> None:
    """Refuse a socket path the kernel cannot bind.

    Raises:
        ValueError: the path is longer than 107 bytes.
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        size = len(os.fsencode(path))
        raise ValueError(f"socket path {path!r} is {size} bytes; unix sockets allow {MAX_SOCKET_PATH}")


def check_plugin_dir(path: str) -> None:
    """Make sure the device-plugin directory exists and takes new files (our socket goes there).

    Tried by creating and removing a file, so it holds for root too (``os.access`` says yes to root).

    Raises:
        ValueError: the directory cannot be created or written; the message says why.
    """
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".gpushare-probe-")
        probe.close()
    except OSError as exc:
        raise ValueError(
            f"cannot use the device-plugin directory {path}: {exc.strerror or exc} "
            "(kubelet's socket directory must exist and be writable; see --device-plugin-path)"
        ) from None


def target(path: str) -> str:
    """A gRPC target for a unix socket path."""
    return f"unix://{os.path.abspath(path)}"


def dial(path: str, timeout: float) -> bool:
    """Whether a gRPC server answers on ``path`` within ``timeout`` seconds."""
    with grpc.insecure_channel(target(path), options=_CHANNEL_OPTIONS) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return False
    return True


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
