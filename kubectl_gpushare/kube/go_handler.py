"""``http.server``'s request handler, reading a request head as Go's net/http server reads it.

One base for both servers that must answer as Go's does: the sandbox API server (`sandbox.server`)
and the extender (`extender.httpd`). ``http.server`` bounds a head by lines (a request line or a
header line over 64 KiB, a 101st header line), cuts the request line at any whitespace and parses
the headers with ``email``; Go's server bounds the whole head by bytes (`go_http.MAX_REQUEST_HEAD`)
and reads it by `go_http`'s rules. Each subclass judges the fields it reads, then serves.
"""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler
from typing import Final

from kubectl_gpushare.kube import go_http

LINGER_SECONDS: Final = 0.5
"""How long a closing connection waits for the client to stop sending (`GoHeadHandler.linger`): Go's
``rstAvoidanceDelay`` (src/net/http/server.go ``closeWriteAndWait``)."""
LINGER_BYTES: Final = 4 * 1024 * 1024
"""What a closing connection reads and drops at most while it waits."""


class GoHeadHandler(BaseHTTPRequestHandler):
    """A handler whose `parse_request` starts with `read_head` and ends with `take_head`."""

    raw_requestline: bytes  # set by handle_one_request (typeshed leaves it out)
    request_line: go_http.RequestLine
    """The request line as Go read it (set by `read_head`)."""

    def start_request(self) -> None:
        """Arm the next request's read deadline; a subclass with a deadline reader does."""

    def handle_one_request(self) -> None:
        """Serve one request; `start_request` first.

        ``http.server``'s own version reads at most 64 KiB of request line and answers a longer one with
        its HTML 414; Go's server reads up to `go_http.MAX_REQUEST_HEAD` and answers past that with its
        plain 431 (`go_http.HEADER_TOO_LARGE_REPLY`), then closes. The rest is what ``http.server`` does:
        EOF closes, `parse_request` may refuse, a timeout drops the connection.
        """
        self.start_request()
        try:
            self.raw_requestline = self.rfile.readline(go_http.MAX_REQUEST_HEAD + 1)
            if len(self.raw_requestline) > go_http.MAX_REQUEST_HEAD:
                self.refuse(go_http.HEADER_TOO_LARGE_REPLY)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            getattr(self, "do_" + self.command)()  # every method has one (the subclass's `__getattr__`)
            self.wfile.flush()
        except TimeoutError:
            self.close_connection = True

    def finish(self) -> None:
        """Flush the reply; a connection that closes lingers first (`linger`)."""
        try:
            super().finish()
        except OSError:
            pass
        if self.close_connection:
            self.linger()

    def linger(self) -> None:
        """Half-close, then discard what the client is still sending (bounded in bytes and time).

        Closing a socket with unread input makes the kernel send a reset, which can destroy a reply
        (a 400 to a head refused at its first header line, a 413 to a body left unread) before the client
        reads it, or break the client's send. Go's server half-closes and waits `LINGER_SECONDS` after
        a 431 and after a body it did not read (``closeWriteAndWait``); both servers do so after every
        reply that closes the connection, so no refusal is lost to a reset.
        """
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(LINGER_SECONDS)
            for _ in range(LINGER_BYTES // 65536):
                if not self.connection.recv(65536):
                    break
        except OSError:
            pass

    def refuse(self, reply: bytes) -> bool:
        """Write a reply Go's server writes before any handler, and close (False, for `parse_request`)."""
        self.close_connection = True
        self.wfile.write(reply)
        return False

    def expectation_failed(self) -> None:
        """Go's ``sendExpectationFailed`` (src/net/http/server.go): 417 before any handler, then closed.

        Its handler header ``Connection: close`` first, then what ``chunkWriter.writeHeader`` adds, ``Date``
        and ``Content-Length: 0``, the latter not on a reply to ``HEAD`` (``!isHEAD || len(p) > 0``); no body.
        """
        self.close_connection = True
        self.send_response_only(417)
        self.send_header("Connection", "close")
        self.send_header("Date", self.date_time_string())
        if self.command != "HEAD":
            self.send_header("Content-Length", "0")
        self.end_headers()

    def head_refused(self, size: int) -> bytes | None:
        """A reply to refuse a head with before parsing its ``size`` bytes (read so far); None parses it.

        Go's server parses every head within its limit; a server that bounds what its connections parse at
        once (the extender, `extender.httpd`) refuses here, before the bytes become a line's and a field's
        objects each. Asked once the request line is read and again with the header lines.
        """
        return None

    def read_head(self) -> list[bytes] | None:
        """The header fields after the request line, as Go reads both; None where Go refuses them (its reply written).

        The line as `go_http.read_request_line` reads it (`request_line`), the header lines within what
        the line left of `go_http.MAX_REQUEST_HEAD` (`go_http.read_header_block`, else Go's 431), folded as
        textproto folds them (`go_http.header_fields`), each once `head_refused` let it be parsed. A first
        header line that starts with a space or a tab, which ``http.server``'s ``email`` parser takes, is
        Go's plain 400: ``readMIMEHeader`` (src/net/textproto/reader.go) peeks at the byte after the request
        line and refuses it as a "malformed MIME header initial line" (a ``ProtocolError``, or
        ``errMessageTooLarge`` past 80 bytes) that ``conn.serve`` answers with `go_http.BAD_REQUEST_REPLY`,
        without reading the rest of the head: neither its end nor its size matter. Fields textproto cannot
        read, and a second ``Host``, are Go's plain 400 too (`go_http.fields_refused`), so every field returned
        has a name and a colon (`take_head`).
        """
        refused = self.head_refused(len(self.raw_requestline))
        if refused is not None:
            self.refuse(refused)
            return None
        read = go_http.read_request_line(self.raw_requestline)
        if isinstance(read, bytes):
            self.refuse(read)
            return None
        self.request_line = read
        lead = self.rfile.read(1)  # readMIMEHeader's Peek(1), before it reads any header line
        if lead in (b" ", b"\t"):  # "malformed MIME header initial line", read up to its errorLimit (80)
            self.rfile.readline(80)
            self.refuse(go_http.BAD_REQUEST_REPLY)
            return None
        block = go_http.read_header_block(self.rfile, go_http.MAX_REQUEST_HEAD - len(self.raw_requestline), lead)
        if block is None:
            self.refuse(go_http.HEADER_TOO_LARGE_REPLY)
            return None
        refused = self.head_refused(len(self.raw_requestline) + len(block))
        if refused is not None:
            self.refuse(refused)
            return None
        fields = go_http.header_fields(block)
        refused = go_http.fields_refused(fields)
        if refused is not None:
            self.refuse(refused)
            return None
        return fields

    def take_head(self, fields: list[bytes]) -> None:
        """Set what ``http.server``'s ``parse_request`` would, from the head as Go read it (`read_head`).

        ``http.server``'s parser splits the line on any whitespace (``str.split`` takes bytes 0x85 and 0xA0
        for it), where Go's ``parseRequestLine`` (src/net/http/request.go) cuts it at spaces only, and
        bounds the header lines by count. So it is not called: ``command`` is Go's method, ``path`` the
        target as Go cut it (`go_http.RequestLine.path`), ``request_version`` its version
        (`go_http.RequestLine.handler_version`), and ``headers`` holds ``fields`` as textproto keeps them
        (`go_http.header_pairs`), not as the ``email`` parser would (which keeps a continuation's line
        break in the value, and cost 9x this on every request). ``close_connection`` is ``http.server``'s
        default, HTTP/1.1 and later kept; a subclass decides it from ``Connection`` as Go does. ``protocol_version``,
        the version of every status line ``http.server`` writes from here on, is Go's: src/net/http/server.go
        ``writeStatusLine`` writes ``HTTP/1.1`` where the request is ``ProtoAtLeast(1, 1)`` and ``HTTP/1.0``
        otherwise (the replies Go writes before any handler, `refuse`'s, stay its literal ``HTTP/1.1``).
        """
        read = self.request_line
        self.requestline = self.raw_requestline.decode("latin-1").rstrip("\r\n")
        self.command = read.method.decode("latin-1")
        self.path = read.path
        self.request_version = read.handler_version
        self.close_connection = not go_http.at_least_1_1(read.version)
        self.protocol_version = "HTTP/1.0" if self.close_connection else "HTTP/1.1"
        self.headers = self.MessageClass()
        for name, value in go_http.header_pairs(fields):
            self.headers[name] = value
