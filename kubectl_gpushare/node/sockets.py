"""Unix sockets for kubelet's plugin APIs: path limits, gRPC targets, self-dial, and re-creation.

Shared by the device plugin and the DRA driver (both serve gRPC to kubelet on unix sockets and
notice when a socket file is deleted or re-created). Knows nothing about GPUs or pods.
"""

from __future__ import annotations

import os
import tempfile

import grpc

MAX_SOCKET_PATH = 107
"""sun_path holds 108 bytes including the terminating NUL."""
CHANNEL_OPTIONS = [("grpc.enable_http_proxy", 0)]
"""Never route a unix socket through an HTTP proxy from the environment."""

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


def target(path: str) -> str:
    """A gRPC target for a unix socket path."""
    return f"unix://{os.path.abspath(path)}"


def dial(path: str, timeout: float) -> bool:
    """Whether a gRPC server answers on ``path`` within ``timeout`` seconds."""
    with grpc.insecure_channel(target(path), options=CHANNEL_OPTIONS) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return False
    return True


def check_socket_dir(path: str, what: str, flag: str) -> None:
    """Make sure a socket directory exists and takes new files (our socket goes there).

    Tried by creating and removing a file, so it holds for root too (``os.access`` says yes to root).

    Raises:
        ValueError: the directory cannot be created or written; the message names ``what`` and ``flag``.
    """
    try:
        os.makedirs(path, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".gpushare-probe-")
        probe.close()
    except OSError as exc:
        raise ValueError(
            f"cannot use the {what} {path}: {exc.strerror or exc} "
            f"(kubelet's socket directory must exist and be writable; see {flag})"
        ) from None
