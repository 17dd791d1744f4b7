"""A loopback TCP gate in front of a server that a test can shut (connections refused) and open again.

Bytes pass through untouched (HTTP or TLS alike). `TcpGate.shut` closes the listening socket and
every connection through it, so a client's next connect is refused (ECONNREFUSED: nothing of a
request can have been sent); `TcpGate.stop_listening` only refuses new connects; `TcpGate.open`
listens again on the same port.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class TcpGate:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:<upstream>``; a context manager that shuts it at exit."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.accepted = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self.open()

    def open(self) -> None:
        """Listen (on the port of the first opening, when open again)."""
        listener = socket.create_server(("127.0.0.1", self.port))  # SO_REUSEADDR: the same port again at once
        self.port = int(listener.getsockname()[1])
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop_listening(self) -> None:
        """Refuse new connects; the connections through the gate go on until they close."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)

    def shut(self) -> None:
        """Stop listening and close every connection through the gate: new connects are refused."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            _close(listener)
        for sock in sockets:
            _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # shut
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:  # shut meanwhile
                    _close(client)
                    _close(server)
                    return
                self.accepted += 1
                self._sockets |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def __enter__(self) -> TcpGate:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.shut()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    _close(source)
    _close(sink)


def _close(sock: socket.socket) -> None:
    """Shut down, then close: a listener must stop listening even while another thread waits in accept()."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
