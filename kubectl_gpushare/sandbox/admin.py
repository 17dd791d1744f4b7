"""The sandbox's admin API under `ADMIN_PREFIX`: fault injection over HTTP, for any client.

Another process (another project's tests, a shell with curl) drives a running
``kubectl gpushare sandbox`` with the same fault vocabulary as `Sandbox.inject`:

* ``GET /_sandbox/faults``: the active faults (``{"kind": "SandboxFaultList", "items": [...]}``).
* ``POST /_sandbox/faults``: add one; the body is a JSON object whose keys are `Sandbox.inject`'s
  keyword arguments (``{"method": "POST", "path": "/binding", "status": 500, "times": 1}``);
  201 with the fault, 400 for a malformed one.
* ``DELETE /_sandbox/faults``: remove every fault.
* ``POST /_sandbox/drop-watches``: break off every open watch stream.

The prefix starts with an underscore, which no Kubernetes API path does, so it never shadows one.
Faults never apply to these routes (a catch-all fault cannot lock a client out of clearing it),
and they are not written to the request log. With tokens on, only the admin token may call them.
Socket-free: the server authenticates and reads the body, this module answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kubectl_gpushare.sandbox import bodies, errors
from kubectl_gpushare.sandbox.faults import Faults, fault_from_json, fault_to_json
from kubectl_gpushare.sandbox.routes import Response, error_response, json_response

ADMIN_PREFIX: Final = "/_sandbox/"
"""Reserved path prefix of the admin API."""


def is_admin_path(path: str) -> bool:
    """Whether a request path belongs to the admin API (``/_sandbox`` itself included)."""
    return path == ADMIN_PREFIX.rstrip("/") or path.startswith(ADMIN_PREFIX)


def handle(method: str, path: str, body: bytes, faults: Faults, drop_watches: Callable[[], None]) -> Response:
    """Answer one admin request; errors are ``Status`` responses."""
    route = path.removeprefix(ADMIN_PREFIX).rstrip("/")
    try:
        if route == "faults":
            if method == "GET":
                items = [fault_to_json(fault) for fault in faults.snapshot()]
                return json_response(200, {"kind": "SandboxFaultList", "apiVersion": "v1", "items": items})
            if method == "POST":
                try:
                    fault = fault_from_json(bodies.decode_json(body) if body.strip() else None)
                except ValueError as exc:  # BodyError is a ValueError too
                    raise errors.bad_request(f"invalid fault: {exc}") from None
                return json_response(201, fault_to_json(faults.add(fault)))
            if method == "DELETE":
                faults.clear()
                return json_response(200, errors.success())
            raise errors.method_not_allowed()
        if route == "drop-watches":
            if method != "POST":
                raise errors.method_not_allowed()
            drop_watches()
            return json_response(200, errors.success())
        raise errors.path_not_found()
    except errors.ApiError as error:
        return error_response(error)
