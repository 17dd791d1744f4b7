"""Find and read the cluster connection settings the way kubectl does, without importing `kubernetes`.

kubectl does not forward its global flags to plugins, so this module re-implements the handful that
matter: ``--kubeconfig``, ``KUBECONFIG`` path lists, ``~/.kube/config``, ``--context``, ``--cluster``,
``--user``, ``--as``/``--as-group`` and ``--request-timeout``, with the in-cluster service account as
the fallback. Token, token-file, client-certificate, basic-auth and CA settings are read with
``yaml`` and ``ssl`` alone; ``exec`` credential plugins are run directly (the ExecCredential
protocol is a subprocess and a JSON document), and only legacy ``auth-provider`` users import the
`kubernetes` package, lazily. The CLI's start-up budget cannot afford ``import kubernetes``.

This module owns configuration and credentials. It opens no network connections; `kube.client`
does. Every failure is a one-line `ConfigError`.
"""

from __future__ import annotations

import base64
import os
import re
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kubectl_gpushare import protocol
from kubectl_gpushare.kube._exec import EXEC_API_VERSIONS, ExecCredential, ExecProvider, parse_timestamp
from kubectl_gpushare.kube.deadlines import HOUR, MAX_DURATION, SECOND, parse_duration
from kubectl_gpushare.kube.errors import ConfigError

SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts a pod's service-account token, CA and namespace."""
ENV_KUBECONFIG: Final = "KUBECONFIG"
ENV_SERVICE_HOST: Final = "KUBERNETES_SERVICE_HOST"
ENV_SERVICE_PORT: Final = "KUBERNETES_SERVICE_PORT"
DEFAULT_TIMEOUT: Final = 30.0
"""Seconds a request may take when ``--request-timeout`` is not given (kubectl waits forever)."""
TOKEN_FILE_REFRESH: Final = 60.0
"""Seconds a token file's content is trusted before it is read again (bound tokens rotate)."""


MAX_REQUEST_TIMEOUT: Final = float(MAX_DURATION // HOUR * 3600)  # 2562047h
"""Whole hours of Go's longest ``time.Duration`` (int64 nanoseconds, the ``time`` package's
``maxDuration``); ``time.ParseDuration`` refuses longer ones, and Python's socket timeouts (also
int64 nanoseconds, ``_PyTime_t``) overflow past it."""


def parse_request_timeout(text: str | float | int | None) -> float | None:
    """Parse kubectl's ``--request-timeout``.

    Args:
        text: ``"0"`` (no timeout), whole seconds (``"5"``), or a Go duration (``"5s"``, ``"1m"``,
            ``"1m30s"``, ``"500ms"``, ``"2.5s"``), as kubectl's ``clientcmd.ParseTimeout`` reads them
            (``strconv.ParseInt`` then ``time.ParseDuration``: ``"2.5"`` and non-ASCII digits are
            refused there); None means "not given".

    Returns:
        Seconds, or None for "no timeout" (``"0"``) and for "not given".

    Raises:
        ConfigError: the text is neither seconds nor a duration.
    """
    if text is None:
        return None
    shown = repr(text[:64] if isinstance(text, str) else text)  # a 5,000-digit value is not echoed whole
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text)
        if re.fullmatch(r"\+?[0-9]+", raw):  # strconv.ParseInt's base 10 (a sign, ASCII digits)
            seconds = float(raw)  # not int(raw): past 4,300 digits that raises; this is inf, refused below
        else:
            try:
                seconds = parse_duration(raw) / SECOND  # kubectl's ParseTimeout: time.ParseDuration
            except ValueError:
                raise ConfigError(
                    f"invalid request timeout {shown}: use a number of seconds or a duration such as 5s, 1m or 1m30s"
                ) from None
    if seconds < 0:
        raise ConfigError(f"invalid request timeout {shown}: must not be negative")
    if not seconds <= MAX_REQUEST_TIMEOUT:  # also NaN
        raise ConfigError(f"invalid request timeout {shown}: longer than 2562047h, the longest duration Go has")
    return None if seconds == 0 else seconds


@dataclass
class ClientConfig:
    """Everything needed to reach and authenticate to one API server.

    Build it with `load_config`; `kube.client.Client` reads it. Credentials that can change while a
    daemon runs (token files, exec plugins) are fetched through `auth_headers`, which is thread-safe.
    """

    server: str
    """Base URL without a trailing slash; may carry a path prefix (API proxies)."""
    namespace: str = "default"
    context: str = ""
    source: str = ""
    """Where the settings came from (kubeconfig paths or ``in-cluster``), for error messages."""
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    ca_data: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    client_cert_data: str | None = None
    client_key_data: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    impersonate_user: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    timeout: float | None = DEFAULT_TIMEOUT
    exec_provider: ExecProvider | None = None
    _token_cache: tuple[float, str] | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def is_https(self) -> bool:
        """Whether the server URL is https (TLS settings are ignored for http)."""
        return self.server.lower().startswith("https://")

    def _file_token(self) -> str | None:
        if not self.token_file:
            return None
        with self._lock:
            now = time.monotonic()
            if self._token_cache is not None and now - self._token_cache[0] < TOKEN_FILE_REFRESH:
                return self._token_cache[1]
            try:
                token = Path(self.token_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                if self._token_cache is not None:
                    return self._token_cache[1]
                why = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else exc.strerror or exc
                raise ConfigError(f"cannot read token file {self.token_file}: {why}") from None
            self._token_cache = (now, token)
            return token

    def auth_headers(self, refresh: bool = False) -> dict[str, str]:
        """Authorization and impersonation headers for the next request.

        Args:
            refresh: re-read token files and re-run exec plugins (after a 401).
        """
        headers: dict[str, str] = {}
        if refresh:
            with self._lock:
                self._token_cache = None
        bearer = None
        if self.exec_provider is not None:
            bearer = self.exec_provider.credential(refresh).token
        bearer = bearer or self._file_token() or self.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        elif self.username is not None and self.password is not None:
            pair = f"{self.username}:{self.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        if self.impersonate_user:
            headers["Impersonate-User"] = self.impersonate_user
        return {name: _header_value(name, value) for name, value in headers.items()}

    def impersonation_group_headers(self) -> list[tuple[str, str]]:
        """``Impersonate-Group`` headers, one per group (the header repeats)."""
        return [("Impersonate-Group", _header_value("Impersonate-Group", group)) for group in self.impersonate_groups]

    def ssl_context(self) -> ssl.SSLContext | None:
        """A TLS context with this config's CA and client certificate; None for http servers.

        Raises:
            ConfigError: a CA or certificate file is missing or unreadable.
        """
        if not self.is_https:
            return None
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            if self.ca_data:
                context.load_verify_locations(cadata=self.ca_data)
            elif self.ca_file:
                context.load_verify_locations(cafile=self.ca_file)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"cannot load the cluster CA {self.ca_file or '(certificate-authority-data)'}: {exc}"
            ) from None
        cert_pem, key_pem = self.client_cert_data, self.client_key_data
        if self.exec_provider is not None:
            credential = self.exec_provider.credential()
            if credential.client_cert_pem:
                cert_pem, key_pem = credential.client_cert_pem, credential.client_key_pem
        try:
            if cert_pem and key_pem:
                _load_cert_chain_from_memory(context, cert_pem, key_pem)
            elif self.client_cert_file and self.client_key_file:
                context.load_cert_chain(self.client_cert_file, self.client_key_file)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"cannot load the client certificate: {exc}") from None
        return context


def _load_cert_chain_from_memory(context: ssl.SSLContext, cert_pem: str, key_pem: str) -> None:
    """Load an in-memory certificate and key; `ssl` only reads files, so use a private temp file briefly."""
    fd, path = tempfile.mkstemp(prefix="kubectl-gpushare-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(cert_pem.rstrip("\n") + "\n" + key_pem.rstrip("\n") + "\n")
        context.load_cert_chain(path)
    finally:
        os.unlink(path)


# --- kubeconfig discovery and merging ----------------------------------------------------------------


def kubeconfig_paths(kubeconfig: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The kubeconfig files kubectl would consult, in precedence order.

    ``--kubeconfig`` names one file; otherwise ``KUBECONFIG`` is a path list (``os.pathsep``
    separated, empty entries skipped); otherwise ``~/.kube/config``.
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        return [kubeconfig]
    listed = env.get(ENV_KUBECONFIG, "")
    if listed:
        seen: list[str] = []
        for entry in listed.split(os.pathsep):
            if entry and entry not in seen:
                seen.append(entry)
        if seen:
            return seen
    home = env.get("HOME") or os.path.expanduser("~")
    return [os.path.join(home, ".kube", "config")]


_HEADER_UNSAFE: Final = re.compile(r"[^\t\x20-\x7e\x80-\xff]")
"""What no header value may hold: control characters other than tab (Go's ``httpguts.ValidHeaderFieldValue``
refuses them, http.client refuses a line break) and characters beyond Latin-1 (http.client's encoding)."""


def _header_value(name: str, value: str) -> str:
    """``value`` if an HTTP header can carry it, else a one-line `ConfigError` that never repeats it (a secret).

    Raises:
        ConfigError: the value holds a line break, another control character, or a character beyond Latin-1.
    """
    if _HEADER_UNSAFE.search(value):
        raise ConfigError(f"the credentials' {name} header would hold a control character or one beyond Latin-1")
    return value


def _read_yaml(path: str) -> dict[str, Any]:
    import yaml  # deferred: only needed once a kubeconfig is actually read

    from kubectl_gpushare.kube import safe_yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = safe_yaml.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"kubeconfig {path} is not valid YAML{where}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"kubeconfig {path} is not valid YAML (not UTF-8)") from None
    except RecursionError:  # PyYAML composes recursively: thousands of nested brackets
        raise ConfigError(f"kubeconfig {path} is not valid YAML (nested too deeply)") from None
    except ValueError:  # a value YAML reads but Python cannot hold: a 5,000-digit integer, a 13th month, !!bool x
        raise ConfigError(f"kubeconfig {path} is not valid YAML (a value out of range)") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping")
    return data


@dataclass
class _Merged:
    """Named entries from all files; first file to define a name wins (kubectl's rule)."""

    clusters: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    users: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    contexts: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    current_context: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    """The merged document in kubeconfig shape, for the `kubernetes` fallback loader."""


def _merge(paths: Sequence[str]) -> _Merged:
    merged = _Merged()
    for path in paths:
        data = _read_yaml(path)
        base = os.path.dirname(os.path.abspath(path))
        for key, target, inner in (
            ("clusters", merged.clusters, "cluster"),
            ("users", merged.users, "user"),
            ("contexts", merged.contexts, "context"),
        ):
            entries = data.get(key) or []
            if not isinstance(entries, list):
                raise ConfigError(f"kubeconfig {path}: {key} must be a list")
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise ConfigError(f"kubeconfig {path}: every entry of {key} needs a name")
                body = entry.get(inner) or {}
                if not isinstance(body, dict):
                    raise ConfigError(f"kubeconfig {path}: {key} entry {entry['name']!r} is not a mapping")
                target.setdefault(entry["name"], (body, base))
        current = data.get("current-context")
        if current and not merged.current_context:
            merged.current_context = str(current)
    merged.raw = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": merged.current_context,
        "clusters": [{"name": n, "cluster": b} for n, (b, _) in merged.clusters.items()],
        "users": [{"name": n, "user": b} for n, (b, _) in merged.users.items()],
        "contexts": [{"name": n, "context": b} for n, (b, _) in merged.contexts.items()],
    }
    return merged


def context_names(kubeconfig: str | None = None) -> list[str]:
    """The context names the kubeconfig (or ``$KUBECONFIG``'s files, or ``~/.kube/config``) defines.

    Raises:
        ConfigError: a file is unreadable or malformed.
    """
    return sorted(_merge(kubeconfig_paths(kubeconfig)).contexts)


def _resolve(path: object, base: str) -> str | None:
    if not path:
        return None
    text = os.path.expanduser(str(path))
    return text if os.path.isabs(text) else os.path.join(base, text)


def _b64(value: object, what: str) -> str:
    try:
        return base64.b64decode(str(value), validate=False).decode()
    except (ValueError, UnicodeDecodeError):
        raise ConfigError(f"{what} is not valid base64 PEM data") from None


def load_config(
    kubeconfig: str | None = None,
    context: str | None = None,
    cluster: str | None = None,
    user: str | None = None,
    as_user: str | None = None,
    as_groups: Sequence[str] = (),
    request_timeout: str | float | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> ClientConfig:
    """Resolve the connection settings kubectl would use.

    Args:
        kubeconfig: ``--kubeconfig``; must exist when given.
        context: ``--context``; defaults to the merged ``current-context``.
        cluster: ``--cluster``; overrides the context's cluster.
        user: ``--user``; overrides the context's user.
        as_user: ``--as``; sent as ``Impersonate-User``.
        as_groups: ``--as-group`` values; sent as ``Impersonate-Group``.
        request_timeout: ``--request-timeout`` (see `parse_request_timeout`).
        environ: environment to read (defaults to ``os.environ``).
        service_account_dir: where the in-cluster token and CA live (tests point it elsewhere).

    Returns:
        The resolved `ClientConfig`.

    Raises:
        ConfigError: no configuration found (the paths tried are named), an unknown context,
            cluster or user, a malformed file, or an invalid timeout.
    """
    env = os.environ if environ is None else environ
    timeout = parse_request_timeout(request_timeout) if request_timeout is not None else DEFAULT_TIMEOUT
    if kubeconfig and not os.path.exists(kubeconfig):
        raise ConfigError(f"kubeconfig {kubeconfig} does not exist")
    paths = [path for path in kubeconfig_paths(kubeconfig, env) if os.path.isfile(path)]
    if not paths:
        if not context and not cluster and not user and env.get(ENV_SERVICE_HOST):
            config = in_cluster_config(env, service_account_dir)
            config.timeout = timeout
            _apply_impersonation(config, as_user, as_groups)
            return config
        tried = ", ".join(kubeconfig_paths(kubeconfig, env))
        raise ConfigError(
            f"no kubeconfig found (tried {tried}) and not running in a cluster; "
            f"set {ENV_KUBECONFIG} or pass --kubeconfig"
        )
    merged = _merge(paths)
    source = os.pathsep.join(paths)
    context_name = context or merged.current_context
    if context_name:
        if context_name not in merged.contexts:
            raise ConfigError(
                f'context "{context_name}" not found in {source}; `kubectl config get-contexts` lists the contexts'
            )
        ctx_body, _ = merged.contexts[context_name]
    elif cluster:
        ctx_body = {}
    else:
        raise ConfigError(f"no current context is set in {source}; pass --context")
    cluster_name = cluster or ctx_body.get("cluster") or ""
    user_name = user or ctx_body.get("user") or ""
    if cluster_name not in merged.clusters:
        where = f' (context "{context_name}")' if context_name else ""
        raise ConfigError(f'cluster "{cluster_name}" not found in {source}{where}')
    cluster_body, cluster_base = merged.clusters[cluster_name]
    server = str(cluster_body.get("server") or "").rstrip("/")
    if not server:
        raise ConfigError(f'cluster "{cluster_name}" in {source} has no server')
    if cluster_body.get("proxy-url"):
        raise ConfigError(
            f'cluster "{cluster_name}" uses proxy-url, which kubectl-gpushare does not support; '
            "run `kubectl proxy` and point a kubeconfig at it instead"
        )
    if not re.match(r"^https?://", server, re.IGNORECASE):
        server = "https://" + server
    config = ClientConfig(
        server=server,
        namespace=str(ctx_body.get("namespace") or "default"),
        context=context_name,
        source=source,
        ca_file=_resolve(cluster_body.get("certificate-authority"), cluster_base),
        ca_data=_b64(cluster_body["certificate-authority-data"], f'cluster "{cluster_name}" certificate-authority-data')
        if cluster_body.get("certificate-authority-data")
        else None,
        insecure_skip_tls_verify=bool(cluster_body.get("insecure-skip-tls-verify")),
        tls_server_name=cluster_body.get("tls-server-name") or None,
        timeout=timeout,
    )
    if user_name:
        if user_name not in merged.users:
            raise ConfigError(f'user "{user_name}" not found in {source}')
        user_body, user_base = merged.users[user_name]
        _apply_user(config, user_name, user_body, user_base, merged, context_name, cluster_body)
    _apply_impersonation(config, as_user, as_groups)
    return config


def _apply_user(
    config: ClientConfig,
    name: str,
    body: dict[str, Any],
    base: str,
    merged: _Merged,
    context_name: str,
    cluster_body: dict[str, Any],
) -> None:
    what = f'user "{name}"'
    config.token = str(body["token"]) if body.get("token") else None
    config.token_file = _resolve(body.get("tokenFile"), base)
    if body.get("username") is not None:
        config.username = str(body.get("username"))
        config.password = str(body.get("password") or "")
    config.client_cert_file = _resolve(body.get("client-certificate"), base)
    config.client_key_file = _resolve(body.get("client-key"), base)
    if body.get("client-certificate-data"):
        config.client_cert_data = _b64(body["client-certificate-data"], f"{what} client-certificate-data")
    if body.get("client-key-data"):
        config.client_key_data = _b64(body["client-key-data"], f"{what} client-key-data")
    if body.get("as"):
        config.impersonate_user = str(body["as"])
    if body.get("as-groups"):
        config.impersonate_groups = tuple(str(group) for group in body["as-groups"])
    exec_body = body.get("exec")
    if exec_body:
        config.exec_provider = _exec_provider(what, exec_body, base, config, cluster_body)
    provider = body.get("auth-provider")
    if provider and not (config.token or config.token_file or config.exec_provider):
        config.token = _auth_provider_token(what, provider, merged, context_name)


def _exec_provider(
    what: str, body: object, base: str, config: ClientConfig, cluster_body: dict[str, Any]
) -> ExecProvider:
    if not isinstance(body, dict) or not body.get("command"):
        raise ConfigError(f"{what}: exec needs a command")
    api_version = str(body.get("apiVersion") or "")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"{what}: exec apiVersion {api_version!r} is not supported (use client.authentication.k8s.io/v1)"
        )
    env_list = body.get("env") or []
    try:
        env = tuple((str(item["name"]), str(item.get("value", ""))) for item in env_list)
    except (TypeError, KeyError):
        raise ConfigError(f"{what}: exec env entries need a name and a value") from None
    cluster_info: dict[str, Any] = {
        "server": config.server,
        "insecure-skip-tls-verify": config.insecure_skip_tls_verify,
    }
    if cluster_body.get("certificate-authority-data"):
        cluster_info["certificate-authority-data"] = cluster_body["certificate-authority-data"]
    if cluster_body.get("tls-server-name"):
        cluster_info["tls-server-name"] = cluster_body["tls-server-name"]
    return ExecProvider(
        command=str(body["command"]),
        args=tuple(str(arg) for arg in body.get("args") or ()),
        env=env,
        api_version=api_version,
        install_hint=str(body.get("installHint") or ""),
        provide_cluster_info=bool(body.get("provideClusterInfo")),
        cluster_info=cluster_info,
        base_dir=base,
    )


def _auth_provider_token(what: str, provider: object, merged: _Merged, context_name: str) -> str:
    """A bearer token from a legacy ``auth-provider`` user.

    The ``oidc`` and ``gcp`` providers cache their token in the kubeconfig (``id-token`` /
    ``access-token``); that is used directly. Anything else is handed to the `kubernetes` package's
    loader, imported only here because it costs ~0.3 s.
    """
    if not isinstance(provider, dict):
        raise ConfigError(f"{what}: auth-provider must be a mapping")
    settings = provider.get("config") or {}
    name = provider.get("name", "?")
    expiry = parse_timestamp(settings.get("expiry")) if isinstance(settings, dict) else None
    fresh = expiry is None or expiry > time.time() + 10
    if isinstance(settings, dict) and fresh:
        for key in ("id-token", "access-token"):
            if settings.get(key):
                return str(settings[key])
    try:
        from kubernetes.client import Configuration  # noqa: PLC0415 - 0.3 s import, auth-provider users only
        from kubernetes.config.kube_config import KubeConfigLoader  # noqa: PLC0415
    except ImportError:
        raise ConfigError(f"{what}: auth-provider {name!r} needs the 'kubernetes' package") from None
    target = Configuration()
    try:
        loader = KubeConfigLoader(config_dict=merged.raw, active_context=context_name or None)  # type: ignore[no-untyped-call]
        loader.load_and_set(target)  # type: ignore[no-untyped-call]
    except Exception as exc:  # the loader raises many unrelated types
        raise ConfigError(f"{what}: auth-provider {name!r} failed: {protocol.error_reason(exc)}") from None
    header = (target.api_key or {}).get("authorization") or (target.api_key or {}).get("BearerToken") or ""
    token = str(header).removeprefix("Bearer ").strip()
    if not token:
        raise ConfigError(f"{what}: auth-provider {name!r} returned no token")
    return token


def _apply_impersonation(config: ClientConfig, as_user: str | None, as_groups: Sequence[str]) -> None:
    if as_user:
        config.impersonate_user = as_user
    if as_groups:
        if not (as_user or config.impersonate_user):
            raise ConfigError("--as-group needs --as: a group can only be impersonated together with a user")
        config.impersonate_groups = tuple(as_groups)


def in_cluster_config(
    environ: Mapping[str, str] | None = None, service_account_dir: str = SERVICE_ACCOUNT_DIR
) -> ClientConfig:
    """The settings of a pod's service account (what client-go's ``InClusterConfig`` reads).

    Raises:
        ConfigError: the service host/port variables or the token file are missing.
    """
    env = os.environ if environ is None else environ
    host, port = env.get(ENV_SERVICE_HOST, ""), env.get(ENV_SERVICE_PORT, "")
    if not host or not port:
        raise ConfigError(f"not running in a cluster: {ENV_SERVICE_HOST} and {ENV_SERVICE_PORT} must be set")
    token_file = os.path.join(service_account_dir, "token")
    if not os.path.isfile(token_file):
        raise ConfigError(f"not running in a cluster: no service-account token at {token_file}")
    ca_file = os.path.join(service_account_dir, "ca.crt")
    namespace = "default"
    try:
        namespace = Path(service_account_dir, "namespace").read_text().strip() or namespace
    except OSError:
        pass
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return ClientConfig(
        server=f"https://{host}:{port}",
        namespace=namespace,
        context="in-cluster",
        source="in-cluster",
        token_file=token_file,
        ca_file=ca_file if os.path.isfile(ca_file) else None,
    )


__all__ = [
    "DEFAULT_TIMEOUT",
    "SERVICE_ACCOUNT_DIR",
    "ClientConfig",
    "ExecCredential",
    "ExecProvider",
    "in_cluster_config",
    "kubeconfig_paths",
    "load_config",
    "parse_request_timeout",
]
