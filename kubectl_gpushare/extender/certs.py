"""HTTPS key pairs that follow their files: renewed certificates are served without a restart.

cert-manager renews a certificate into the same Secret every 60-90 days and the kubelet updates the
mounted files in place (an atomic swap of the volume's ``..data`` symlink). A server that read its
key pair once keeps presenting the old certificate until it expires, and with a webhook whose
failure policy is Fail that stops every GPU pod from being created. This module does what
controller-runtime's ``certwatcher`` (used by cert-manager's own webhook) and kubelet's serving
certificate manager do: notice the files changed and load the new pair for new handshakes.

How: the listening socket is wrapped once with a *dispatch* context whose SNI callback runs during
every handshake (OpenSSL's servername callback runs whether or not the client sends SNI; Python's
``SSLContext.sni_callback`` docs) and hands the connection the newest good context. Connections
already established keep the pair they shook hands with, so nothing in flight is dropped. The
files are looked at (one ``stat`` each) at most once per ``check_interval``, from the handshake
path itself: no thread, no inotify dependency.

A new pair that cannot be used (truncated, a directory in its place, key and certificate not
matching, caught halfway through a swap) is refused with one log line and the old pair kept; it is
tried again when the files change again.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable

log = logging.getLogger("kubectl_gpushare.extender.certs")

_Signature = tuple[tuple[int, int, int, int], ...]


def _signature(*paths: str) -> _Signature | None:
    """What identifies the files' current contents without reading them: device, inode, size, mtime."""
    try:
        stats = [os.stat(path) for path in paths]  # follows the ..data symlinks of a Secret volume
    except OSError:
        return None
    return tuple((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) for st in stats)


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A TLS 1.2+ server context holding one key pair.

    Raises:
        OSError: a file cannot be read (missing, a directory).
        ssl.SSLError: not PEM, or the key does not match the certificate.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class ReloadingKeyPair:
    """The newest usable key pair from ``cert_file`` and ``key_file``, for new TLS handshakes.

    Wrap the listening socket with `dispatch`; read `current` for the context now in use.
    """

    def __init__(self, cert_file: str, key_file: str, check_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Load the pair once; a server must not start without a usable one.

        Raises:
            OSError: a file cannot be read.
            ssl.SSLError: the pair is not usable.
        """
        self._files = (cert_file, key_file)
        self._interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._seen = _signature(cert_file, key_file)
        self._current = server_context(cert_file, key_file)
        self._checked = clock()
        self.reloads = 0
        """New pairs taken since start (for tests and logs)."""
        self.refusals = 0
        """Changed files that could not be used, each refused once."""
        self.dispatch = server_context(cert_file, key_file)
        """The context to wrap the listening socket with; each handshake is handed `current`."""
        self.dispatch.sni_callback = self._on_handshake

    @property
    def current(self) -> ssl.SSLContext:
        """The context new handshakes get, after looking at the files if it is time to."""
        self.check()
        return self._current

    def check(self, force: bool = False) -> None:
        """Load the files again if they changed since last seen (at most once per interval)."""
        now = self._clock()
        if not force and now - self._checked < self._interval:
            return
        with self._lock:
            if not force and now - self._checked < self._interval:
                return
            self._checked = now
            signature = _signature(*self._files)
            if signature is None or signature == self._seen:
                return  # unchanged, or gone for the moment (a swap in progress): keep serving
            self._seen = signature
            try:
                context = server_context(*self._files)
            except (OSError, ssl.SSLError) as exc:
                self.refusals += 1
                log.error("TLS key pair %s changed but cannot be used (%s); still serving the previous one",
                          self._files[0], " ".join(str(exc).split()) or type(exc).__name__)
                return
            self._current = context
            self.reloads += 1
            log.info("TLS key pair %s reloaded; new connections get the new certificate", self._files[0])

    def _on_handshake(self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                      context: ssl.SSLContext) -> None:
        connection.context = self.current
