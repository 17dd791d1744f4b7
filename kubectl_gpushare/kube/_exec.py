"""Exec credential plugins: the ``user.exec`` entry of a kubeconfig (EKS, GKE, AKS, OIDC helpers).

The protocol is a subprocess and a JSON document: the plugin gets ``KUBERNETES_EXEC_INFO`` (an
ExecCredential with ``spec.interactive``) and prints an ExecCredential whose ``status`` holds a
token and/or a client certificate and an optional expiry. Running it directly keeps the
`kubernetes` package (0.3 s to import) off the CLI path.

Private to `kube`; `kube.config` re-exports the public names. Unlike client-go this never prompts:
plugins run with ``interactive: false`` and stdin closed.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from kubectl_gpushare.kube.errors import ConfigError

ENV_EXEC_INFO: Final = "KUBERNETES_EXEC_INFO"
EXEC_API_VERSIONS: Final = frozenset(
    {
        "client.authentication.k8s.io/v1",
        "client.authentication.k8s.io/v1beta1",
        "client.authentication.k8s.io/v1alpha1",
    }
)


@dataclass
class ExecCredential:
    """What an exec plugin returned: a token and/or a client certificate, valid until ``expires``."""

    token: str | None = None
    client_cert_pem: str | None = None
    client_key_pem: str | None = None
    expires: float | None = None
    """Unix seconds, or None if the plugin gave no expiry (cached until a 401)."""


@dataclass
class ExecProvider:
    """Runs a kubeconfig ``user.exec`` credential plugin and caches its answer until it expires.

    Unlike client-go this never prompts: plugins run with ``interactive: false`` and stdin closed.
    """

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    install_hint: str = ""
    provide_cluster_info: bool = False
    cluster_info: dict[str, Any] = field(default_factory=dict)
    base_dir: str = ""
    _cached: ExecCredential | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def credential(self, refresh: bool = False) -> ExecCredential:
        """The current credential; runs the plugin when none is cached, it expired, or ``refresh``."""
        with self._lock:
            cached = self._cached
            if cached is not None and not refresh and (cached.expires is None or cached.expires - 10 > time.time()):
                return cached
            self._cached = self._run()
            return self._cached

    def _run(self) -> ExecCredential:
        spec: dict[str, Any] = {"interactive": False}
        if self.provide_cluster_info:
            spec["cluster"] = self.cluster_info
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = dict(os.environ)
        env.update(dict(self.env))
        env[ENV_EXEC_INFO] = json.dumps(info)
        command = self.command
        if os.sep in command and not os.path.isabs(command) and self.base_dir:
            command = os.path.join(self.base_dir, command)
        hint = f" ({self.install_hint.strip()})" if self.install_hint.strip() else ""
        try:
            done = subprocess.run(
                [command, *self.args], env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False
            )
        except FileNotFoundError:
            raise ConfigError(f"exec credential plugin {self.command!r} not found{hint}") from None
        except (OSError, subprocess.SubprocessError, ValueError) as exc:  # ValueError: a NUL in an argument or env
            raise ConfigError(f"exec credential plugin {self.command!r} failed: {exc}") from None
        if done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip().splitlines()
            last = f": {detail[-1]}" if detail else ""
            raise ConfigError(f"exec credential plugin {self.command!r} exited with {done.returncode}{last}")
        try:
            reply = json.loads(done.stdout)
            status = reply.get("status") or {}
            if reply.get("kind") != "ExecCredential" or not isinstance(status, dict):
                raise ValueError("not an ExecCredential")
        except (ValueError, AttributeError, RecursionError):
            raise ConfigError(f"exec credential plugin {self.command!r} did not print an ExecCredential") from None
        if reply.get("apiVersion") != self.api_version:
            raise ConfigError(
                f"exec credential plugin {self.command!r} answered {reply.get('apiVersion')!r}, "
                f"expected {self.api_version!r}"
            )
        credential = ExecCredential(
            token=status.get("token") or None,
            client_cert_pem=status.get("clientCertificateData") or None,
            client_key_pem=status.get("clientKeyData") or None,
            expires=parse_timestamp(status.get("expirationTimestamp")),
        )
        if credential.token is None and credential.client_cert_pem is None:
            raise ConfigError(f"exec credential plugin {self.command!r} returned neither a token nor a certificate")
        if (credential.client_cert_pem is None) != (credential.client_key_pem is None):
            raise ConfigError(f"exec credential plugin {self.command!r} returned a certificate without its key")
        return credential


def parse_timestamp(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
