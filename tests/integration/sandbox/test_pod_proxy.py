"""The sandbox's ``pods/proxy`` subresource, over HTTP and through the real kubectl.

What is checked is kube-apiserver's behaviour (``pkg/registry/core/pod/strategy.go``
``ResourceLocation``; ``apimachinery/pkg/util/proxy/transport.go``): ``[scheme:]name[:port]``,
404 for a missing pod, 400 for a bad segment or a pod without an address, 503 ``error trying to
reach service`` when nothing answers, the upstream's status, type and body relayed as they are.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from usage_standin import StandIn, plugin_pod

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox.builders import pod_object
from kubectl_gpushare.sandbox.server import Sandbox

pytestmark = pytest.mark.integration

PLUGIN = "gpushare-device-plugin-alpha"
BASE = f"/api/v1/namespaces/kube-system/pods/{PLUGIN}"


def _call(sandbox: Sandbox, method: str, path: str, body: bytes | None = None,
          token: str | None = None) -> tuple[int, str, bytes]:  # fmt: skip
    connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


@pytest.fixture
def standin(sandbox: Sandbox) -> Any:
    sandbox.load([plugin_pod("alpha", "10.7.1.1"), pod_object("no-ip", "kube-system", [0], node="alpha",
                                                                phase="Pending")])  # fmt: skip
    server = StandIn()
    server.body = b'{"hello": "usage"}'
    sandbox.register_proxy_target("kube-system", PLUGIN, protocol.USAGE_PORT_NAME, "127.0.0.1", server.port)
    yield server
    server.close()


def test_a_get_is_relayed_by_port_number_and_scheme_forms(sandbox: Sandbox, standin: StandIn) -> None:
    for segment in (f"{PLUGIN}:{protocol.USAGE_PORT}", f"http:{PLUGIN}:{protocol.USAGE_PORT}"):
        status, content_type, body = _call(sandbox, "GET", f"/api/v1/namespaces/kube-system/pods/{segment}/proxy/usage")
        assert (status, content_type, body) == (200, "application/json", b'{"hello": "usage"}')
    status, _, _ = _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/elsewhere")
    assert status == 404  # the plugin's own 404, relayed
    record = sandbox.requests[-1]
    assert (record.verb, record.resource, record.subresource) == ("get", "pods", "proxy")


def test_failures_answer_as_kube_apiserver_does(sandbox: Sandbox, standin: StandIn) -> None:
    def status_of(method: str, path: str, token: str | None = None) -> tuple[int, str, str]:
        code, _, body = _call(sandbox, method, path, token=token)
        document = json.loads(body)
        assert document["kind"] == "Status" and document["code"] == code
        return code, document["reason"], document["message"]

    ns = "/api/v1/namespaces/kube-system/pods"
    assert status_of("GET", f"{ns}/nope:9445/proxy/usage") == (404, "NotFound", 'pods "nope" not found')
    assert status_of("GET", f"{ns}/a:b:c:d/proxy/") == (400, "BadRequest", 'invalid pod request "a:b:c:d"')
    assert status_of("GET", f'{ns}/a:b":c\\:d/proxy/') == (400, "BadRequest", 'invalid pod request "a:b\\":c\\\\:d"')
    assert status_of("GET", f"{ns}/ftp:{PLUGIN}:1/proxy/")[0] == 400
    assert status_of("GET", f"{ns}/no-ip/proxy/") == (400, "BadRequest", "address not allowed")
    # No port: the first container port (1234), where nothing listens.
    assert status_of("GET", f"{BASE}/proxy/usage") == (
        503, "ServiceUnavailable", "error trying to reach service: dial tcp 10.7.1.1:1234: connect: connection refused"
    )
    forbidden = status_of("GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage", token=Sandbox.READONLY_TOKEN)
    assert forbidden[:2] == (403, "Forbidden") and 'cannot get resource "pods/proxy"' in forbidden[2]
    standin.close()  # registered, but down
    code, reason, message = status_of("GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage")
    assert (code, reason) == (503, "ServiceUnavailable") and message.startswith("error trying to reach service: ")


def test_writes_are_relayed_with_their_body(sandbox: Sandbox, standin: StandIn) -> None:
    status, _, _ = _call(sandbox, "POST", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage", body=b"{}")
    assert status == 501  # the stand-in serves GET only: http.server answers 501 Unsupported method
    assert sandbox.requests[-1].verb == "create"


def test_only_loopback_targets_are_taken(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="loopback"):
        sandbox.register_proxy_target("kube-system", PLUGIN, 9445, "10.0.0.1", 80)


def test_kubectl_get_raw_reaches_the_plugin(standin: StandIn, kubectl: Callable[..., Any]) -> None:
    result = kubectl("get", "--raw", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage")
    assert json.loads(result.stdout) == {"hello": "usage"}


def _one_reply_target(reply: bytes) -> tuple[socket.socket, list[bytes]]:
    """A loopback target that answers each connection's first request with ``reply``, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(65536))
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return listener, received


@contextlib.contextmanager
def _pod_replying(sandbox: Sandbox, reply: bytes) -> Iterator[list[bytes]]:
    """Pod alpha with its usage port served by `_one_reply_target` (what it received); the target closes on exit."""
    listener, received = _one_reply_target(reply)
    sandbox.load([plugin_pod("alpha", "10.7.1.1")])
    sandbox.register_proxy_target("kube-system", PLUGIN, protocol.USAGE_PORT, "127.0.0.1", listener.getsockname()[1])
    try:
        yield received
    finally:
        listener.close()


def _decoded_chunks(reader: Any) -> bytes:
    """A chunked body read off ``reader`` (a socket file), to its last chunk and empty trailer."""
    body = b""
    while size := int(reader.readline().split(b";")[0], 16):
        body += reader.read(size)
        assert reader.read(2) == b"\r\n"
    assert reader.readline() == b"\r\n"
    return body


@contextlib.contextmanager
def _reading_target(sandbox: Sandbox, reply: bytes) -> Iterator[list[tuple[list[bytes], bytes]]]:
    """Pod alpha's usage port served once, ``reply`` after the request; yields what it received.

    Each entry is the request's head (lines, lower case) and its body, read as it was framed (chunked
    or by its Content-Length). The target closes on exit.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[tuple[list[bytes], bytes]] = []

    def serve() -> None:
        with contextlib.suppress(OSError), listener.accept()[0] as conn:
            reader = conn.makefile("rb")
            head = [line.rstrip(b"\r\n").lower() for line in iter(reader.readline, b"\r\n")]
            if b"transfer-encoding: chunked" in head:
                received.append((head, _decoded_chunks(reader)))
            else:
                length = next((int(h.split(b":")[1]) for h in head if h.startswith(b"content-length:")), 0)
                received.append((head, reader.read(length)))
            conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    sandbox.load([plugin_pod("alpha", "10.7.1.1")])
    sandbox.register_proxy_target("kube-system", PLUGIN, protocol.USAGE_PORT, "127.0.0.1", listener.getsockname()[1])
    with contextlib.closing(listener):
        yield received


def _relayed_to_close(sandbox: Sandbox) -> bytes:
    """Everything the sandbox writes for one GET of the pod's usage path that asks it to close."""
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as connection:
        connection.sendall(f"GET {BASE}:{protocol.USAGE_PORT}/proxy/usage HTTP/1.1\r\nHost: s\r\nConnection: close"
                           "\r\n\r\n".encode())
        return b"".join(iter(lambda: connection.recv(65536), b""))


def test_a_kept_connection_the_target_closed_is_replaced_once(sandbox: Sandbox) -> None:
    """HTTP/1.1 targets keep connections; one that closes an idle one must not fail the next request."""
    # The target answers each connection once, then closes it at once, as a server whose idle timeout passed does.
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
    with _pod_replying(sandbox, reply) as served:
        for _ in range(3):
            assert _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage")[::2] == (200, b"ok")
    assert len(served) == 3


def test_the_query_goes_to_the_pod_as_it_came(sandbox: Sandbox, standin: StandIn) -> None:
    # UpgradeAwareHandler.ServeHTTP (apimachinery/pkg/util/proxy/upgradeaware.go): loc.RawQuery = req.URL.RawQuery.
    # Order, repeated names, pairs Go's ParseQuery skips and escapes all reach the pod untouched.
    query = "b=2&a=1&a=0&c=x;y&d=%zz&e=%41+b&&f&g=#h"
    status, _, body = _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage?{query}")
    assert (status, body) == (200, b'{"hello": "usage"}')
    assert standin.paths[-1] == f"{protocol.USAGE_PATH}?{query}"
    _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage?")
    assert standin.paths[-1] == protocol.USAGE_PATH  # an empty query adds no "?" (URL.String)


def test_a_raw_byte_past_ascii_in_the_query_reaches_the_pod_unescaped(sandbox: Sandbox, standin: StandIn) -> None:
    # Go keeps the request target's raw query in URL.RawQuery (a byte >= 0x80 is no control byte, so
    # url.ParseRequestURI takes it) and the proxy's transport writes it as it is: the pod gets the
    # bytes, never their %XX escapes. http.client cannot send such a request line, so a raw socket does.
    query = b"name=\xc2\xb5&raw=\xff&kept=%C2%B5"
    target = f"{BASE}:{protocol.USAGE_PORT}/proxy/usage?".encode() + query
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as connection:
        connection.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert b'{"hello": "usage"}' in reply  # relayed (chunked: the sandbox re-frames the body)
    # http.server (the stand-in) reads the request line as Latin-1: one character per byte.
    assert standin.paths[-1].encode("latin-1") == protocol.USAGE_PATH.encode() + b"?" + query


def test_the_path_goes_to_the_pod_decoded_cleaned_and_escaped_anew(sandbox: Sandbox, standin: StandIn) -> None:
    # The subpath is built from RequestInfo.Parts, the decoded path's segments (getRequestOptions in
    # k8s.io/apiserver/pkg/endpoints/handlers/rest.go); ProxyREST.Connect path.Joins it (cleaning "."
    # and ".."), keeping its trailing "/"; the location has no RawPath, so Go's transport sends
    # URL.EscapedPath(): every escape decoded, then escape(path, encodePath) afresh.
    sent = "/us%61ge/a%2Fb/%7Ex/%21(x)*/sp%20ce+%3F%25/./d/../%c3%a9%FF/"
    status, _, _ = _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy{sent}?q=%zz&p=%2F")
    assert status == 404  # the stand-in serves /usage only: its 404 relayed
    assert standin.paths[-1] == "/usage/a/b/~x/%21%28x%29%2A/sp%20ce+%3F%25/%C3%A9%FF/?q=%zz&p=%2F"
    _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/%2E%2E/%2E%2E/usage")  # ".." stops at the root
    assert standin.paths[-1] == "/usage"
    status, _, body = _call(sandbox, "GET", f"{BASE}%3A{protocol.USAGE_PORT}/proxy/us%61ge")  # name:port decoded too
    assert (status, body, standin.paths[-1]) == (200, b'{"hello": "usage"}', "/usage")


@pytest.mark.parametrize("empties", ["/", "//", "/%2F/"])
def test_empty_segments_after_proxy_are_cleaned_away(sandbox: Sandbox, standin: StandIn, empties: str) -> None:
    # RequestInfo.Parts keeps an empty segment inside the path; getRequestOptions joins the parts
    # after "proxy" with "/" and path.Join cleans the result: Go's path.Clean leaves no leading "//"
    # (POSIX's normpath keeps exactly two).
    status, _, body = _call(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy{empties}usage")
    assert (status, body, standin.paths[-1]) == (200, b'{"hello": "usage"}', "/usage")


def _head(sandbox: Sandbox, method: str, target: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """Send one raw request; the status line, the headers (lower-case names) and the body."""
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as connection:
        connection.sendall(method.encode() + b" " + target + b" HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return status.encode(), headers, body


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_bare_proxy_path_is_redirected_to_its_slash_without_reaching_the_pod(
    sandbox: Sandbox, standin: StandIn, method: str
) -> None:
    # upgradeaware.go proxyRedirectsforRootPath: an empty location path on a GET or HEAD is a 301 to
    # req.URL.Path (decoded) + "/" + "?" + the raw query, with no body and so no content type; the pod
    # is never dialled.
    reached = len(standin.paths)
    target = f"{BASE}:{protocol.USAGE_PORT}/prox%79?b=2&a=%zz".encode() + b"&c=\xc2\xb5"
    status, headers, body = _head(sandbox, method, target)
    assert status == b"HTTP/1.1 301 Moved Permanently" and body == b""
    assert headers["location"].encode("latin-1") == f"{BASE}:{protocol.USAGE_PORT}/proxy/?b=2&a=%zz&c=".encode() + (
        b"\xc2\xb5")
    # Go's server frames the empty GET reply with "Content-Length: 0" and adds none to a HEAD reply
    # (src/net/http/server.go chunkWriter.writeHeader: "!isHEAD || len(p) > 0").
    assert headers.get("content-length") == ("0" if method == "GET" else None) and "content-type" not in headers
    assert len(standin.paths) == reached
    assert sandbox.requests[-1].status == 301 and sandbox.requests[-1].subresource == "proxy"
    # The address is checked first (ResourceLocation, in ProxyREST.Connect); with the slash it is relayed.
    code, _, answer = _call(sandbox, method, "/api/v1/namespaces/kube-system/pods/no-ip/proxy")
    assert code == 400 and (method == "HEAD" or json.loads(answer)["message"] == "address not allowed")
    status, _, _ = _head(sandbox, method, f"{BASE}:{protocol.USAGE_PORT}/proxy/".encode())
    if method == "GET":
        assert status.startswith(b"HTTP/1.1 404 ") and standin.paths[-1] == "/"  # the stand-in's own 404
    else:
        assert status.startswith(b"HTTP/1.1 501 ")  # the stand-in serves no HEAD: http.server's 501, relayed


@pytest.mark.parametrize(
    ("pod_headers", "relayed"),
    [(b"Content-Length: 12345\r\n", "12345"), (b"Content-Length: 7\r\nContent-Length:  7\r\n", "7"),
     (b"Transfer-Encoding: chunked\r\n", None), (b"", None)],
    ids=["length", "repeated", "chunked", "none"],
)  # fmt: skip
def test_a_head_reply_keeps_the_pods_content_length(sandbox: Sandbox, pod_headers: bytes, relayed: str | None) -> None:
    # httputil.ReverseProxy copies the pod's Content-Length (copyHeader: no hop-by-hop header; Go's transport
    # read it for a HEAD reply, repeated values made one), and Go's server keeps a handler's Content-Length on
    # a HEAD reply and adds none to an empty one (server.go chunkWriter.writeHeader). The sandbox said 0.
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + pod_headers + b"\r\n"
    with _pod_replying(sandbox, reply) as received:
        target = f"{BASE}:{protocol.USAGE_PORT}/proxy/usage"
        with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as connection:
            connection.sendall(f"HEAD {target} HTTP/1.1\r\nHost: s\r\n\r\nGET /version HTTP/1.1\r\nHost: s\r\n"
                               "Connection: close\r\n\r\n".encode())  # fmt: skip
            answer = b"".join(iter(lambda: connection.recv(65536), b""))
    head, _, rest = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = [(name.lower(), value.strip()) for name, _, value in (line.partition(":") for line in lines)]
    assert status == "HTTP/1.1 200 OK" and received[0].startswith(b"HEAD /usage HTTP/1.1\r\n")
    assert [value for name, value in headers if name == "content-length"] == ([relayed] if relayed else [])
    assert "transfer-encoding" not in dict(headers)
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n")  # no body after the HEAD reply; the connection goes on


def test_other_methods_on_the_bare_proxy_path_are_relayed_to_the_root(sandbox: Sandbox, standin: StandIn) -> None:
    status, _, _ = _call(sandbox, "POST", f"{BASE}:{protocol.USAGE_PORT}/proxy", body=b"{}")
    assert status == 501  # relayed: the stand-in answers POST with 501


def test_the_pods_reply_headers_are_relayed_as_go_reverse_proxy_copies_them(sandbox: Sandbox) -> None:
    # UpgradeAwareHandler relays through httputil.NewSingleHostReverseProxy, which drops the
    # hop-by-hop headers (hopHeaders, Proxy-Connection included) and every header Connection names,
    # and copies the rest, the pod's Date and Server included; the pod proxy's corsRemovingTransport
    # drops the four Access-Control-Allow-* headers. Go's server adds its own Date only where none
    # was set. The sandbox dropped the pod's Date and Server (and wrote its own Date).
    body = b"ok"
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Mon, 01 Jan 2001 00:00:00 GMT\r\n"
             b"Server: pod-server/1.0\r\nConnection: close, X-Private\r\nX-Private: secret\r\n"
             b"Proxy-Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
             b"Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Methods: GET\r\n"
             b"Access-Control-Expose-Headers: X-Kept\r\nX-Kept: yes\r\nContent-Length: 2\r\n\r\n" + body)
    with _pod_replying(sandbox, reply):
        status, headers, answer = _head(sandbox, "GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage".encode())
    assert status == b"HTTP/1.1 200 OK" and answer == body
    assert headers["date"] == "Mon, 01 Jan 2001 00:00:00 GMT" and headers["server"] == "pod-server/1.0"
    assert headers["x-kept"] == "yes" and headers["access-control-expose-headers"] == "X-Kept"
    for dropped in ("x-private", "proxy-connection", "keep-alive", "access-control-allow-origin",
                    "access-control-allow-methods"):
        assert dropped not in headers, dropped
    assert headers["content-type"] == "text/plain" and headers["content-length"] == "2"


def test_a_repeated_reply_header_keeps_every_line(sandbox: Sandbox) -> None:
    # ReverseProxy's copyHeader adds each value of each header; the sandbox kept the last one only.
    with _pod_replying(sandbox, b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Other: o\r\nSet-Cookie: b=2\r\n"
                                b"Content-Length: 0\r\nConnection: close\r\n\r\n"):
        reply = _relayed_to_close(sandbox)
    assert reply.startswith(b"HTTP/1.1 200 "), reply
    assert [line for line in reply.split(b"\r\n") if line.lower().startswith(b"set-cookie:")] == [
        b"Set-Cookie: a=1", b"Set-Cookie: b=2"], reply


def test_a_reply_the_pod_sent_without_a_date_gets_the_servers_one(sandbox: Sandbox) -> None:
    with _pod_replying(sandbox, b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"):
        reply = _relayed_to_close(sandbox)
    assert reply.startswith(b"HTTP/1.1 204 ") and reply.lower().count(b"\r\ndate: ") == 1, reply
    assert b"server:" not in reply.lower(), reply


def test_a_long_reply_keeps_the_pods_content_length_and_a_long_body_its_own(sandbox: Sandbox) -> None:
    # httputil.ReverseProxy copies the pod's Content-Length (no hop-by-hop header) and Go's server frames
    # the body with it; the outbound request is req.Clone, so a body keeps its Content-Length whatever its
    # size. The sandbox re-framed a reply over 1 MiB (proxy.WHOLE_BODY) as chunked.
    size = (1 << 20) + 1
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % size + b"y" * size
    body = b"x" * size
    with _reading_target(sandbox, reply) as received:
        with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as connection:
            connection.sendall(f"POST {BASE}:{protocol.USAGE_PORT}/proxy/usage HTTP/1.1\r\nHost: s\r\n"
                               f"Content-Length: {size}\r\n\r\n".encode() + body)
            reader = connection.makefile("rb")
            assert reader.readline() == b"HTTP/1.1 200 OK\r\n"
            headers = {}
            while (line := reader.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                headers[name.lower()] = value.strip()
            assert headers["content-length"] == str(size) and "transfer-encoding" not in headers, headers
            assert reader.read(size) == b"y" * size
            connection.sendall(b"GET /version HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n")
            assert reader.readline() == b"HTTP/1.1 200 OK\r\n"  # the connection goes on after the sized body
    head, sent = received[0]
    assert f"content-length: {size}".encode() in head and sent == body, head
    assert not any(line.startswith(b"transfer-encoding") for line in head), head


def test_a_long_reply_the_pod_breaks_off_closes_the_connection(sandbox: Sandbox) -> None:
    # Go's server cannot end a body short of its Content-Length and keep the connection: it closes it.
    size = 3 << 20
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % size + b"y" * (2 << 20)
    with _pod_replying(sandbox, reply):
        relayed = _relayed_to_close(sandbox)
    head, _, answer = relayed.partition(b"\r\n\r\n")
    assert f"Content-Length: {size}".encode() in head.split(b"\r\n") and len(answer) == 2 << 20, head


def test_the_pod_gets_the_callers_content_headers_and_never_its_token(sandbox: Sandbox) -> None:
    """kube-apiserver's authentication filter deletes ``Authorization`` before the proxy copies the request
    (k8s.io/apiserver/pkg/endpoints/filters/authentication.go): the caller's token never reaches the pod."""
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
    with _pod_replying(sandbox, reply) as received:
        connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=10)
        try:
            connection.request("GET", f"{BASE}:{protocol.USAGE_PORT}/proxy/usage", headers={
                "Authorization": f"Bearer {Sandbox.ADMIN_TOKEN}", "User-Agent": "probe/1", "Accept": "text/plain"})
            assert connection.getresponse().read() == b"ok"
        finally:
            connection.close()
    head = received[0].split(b"\r\n\r\n")[0].lower()
    assert b"\r\nuser-agent: probe/1\r\n" in head + b"\r\n" and b"\r\naccept: text/plain" in head
    assert b"authorization" not in head and Sandbox.ADMIN_TOKEN.encode().lower() not in head


@pytest.mark.parametrize(
    ("method", "body", "framing"),
    [("POST", b"x" * 70_000, "chunked"), ("PUT", b"{}", "chunked"), ("POST", b"", "content-length: 0"),
     ("DELETE", b"", None)],
    ids=["long-post", "short-put", "empty-post", "empty-delete"],
)  # fmt: skip
def test_a_chunked_body_reaches_the_pod_chunked(sandbox: Sandbox, method: str, body: bytes,
                                                framing: str | None) -> None:
    # httputil.ReverseProxy sends outreq = req.Clone: ContentLength -1 and TransferEncoding ["chunked"] stay,
    # and Go's transport writes such a body chunked, no Content-Length (transfer.go newTransferWriter), once
    # probeRequestBody saw a first byte; an empty one goes as no body ("Content-Length: 0" on POST, PUT and
    # PATCH: shouldSendContentLength). The sandbox read the chunks and sent the body with a Content-Length.
    framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:5], body[5:]) if part) + b"0\r\n\r\n"
    with _reading_target(sandbox, b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n") as received:
        with socket.create_connection(("127.0.0.1", sandbox.port), timeout=10) as connection:
            connection.sendall(f"{method} {BASE}:{protocol.USAGE_PORT}/proxy/usage HTTP/1.1\r\nHost: s\r\n"
                               "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode() + framed)
            answer = b"".join(iter(lambda: connection.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.1 204 "), answer[:200]
    [(head, got)] = received
    assert got == body and head[0] == f"{method.lower()} /usage http/1.1".encode()
    lengths = [h for h in head if h.startswith((b"content-length:", b"transfer-encoding:"))]
    assert lengths == ([] if framing is None else [b"transfer-encoding: chunked" if framing == "chunked"
                                                   else framing.encode()])  # fmt: skip
