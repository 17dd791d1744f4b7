"""``kubectl gpushare serve-extender``: flags and environment to a `ServeConfig`, then `serve`.

Every flag has an environment twin (shown in --help); the original's ``PORT`` and ``LOG_LEVEL``
keep working. Heavy imports happen inside the command body, so ``--help`` stays fast.

Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 when the server cannot start (address in use,
unreadable TLS files), 2 for usage and configuration errors (bad flags, no kubeconfig and not in a
cluster, or the ``kubectl-gpushare[daemons]`` extra is not installed).
"""

from __future__ import annotations

import sys

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.errors import API_REQUEST_TIMEOUT, EXIT_START
from kubectl_gpushare.kube.flags import FiniteFloatRange, kube_options
from kubectl_gpushare.service import configure_logging, log_options, require_daemon_modules, stop_on_signals

ENV_BIND_ADDRESS = "GPUSHARE_BIND_ADDRESS"
ENV_URL_PREFIX = "GPUSHARE_URL_PREFIX"
ENV_LEADER_ELECT = "GPUSHARE_LEADER_ELECT"
ENV_LEASE_NAMESPACE = "GPUSHARE_LEASE_NAMESPACE"
ENV_LEASE_NAME = "GPUSHARE_LEASE_NAME"
ENV_TLS_CERT = "GPUSHARE_TLS_CERT_FILE"
ENV_TLS_KEY = "GPUSHARE_TLS_PRIVATE_KEY_FILE"
ENV_MAX_REQUEST_BYTES = "GPUSHARE_MAX_REQUEST_BYTES"
ENV_MAX_CONNECTIONS = "GPUSHARE_MAX_CONNECTIONS"
ENV_MAX_INFLIGHT_BYTES = "GPUSHARE_MAX_INFLIGHT_BYTES"
ENV_LOG_LEVEL = "LOG_LEVEL"
"""The original extender's variable: debug, info, warn (its default) or error."""


def _port(value: str | int) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise click.BadParameter(f"{value!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise click.BadParameter(f"{port} is outside 0-65535")
    return port


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@kube_options
@click.option("--port", envvar=protocol.ENV_PORT, default="39999", show_default=True, show_envvar=True,
              help="Port to listen on (the original's PORT; its manifests use 12345).")
@click.option("--bind-address", envvar=ENV_BIND_ADDRESS, default="127.0.0.1", show_default=True, show_envvar=True,
              help="Address to listen on; 0.0.0.0 in a pod.")
@click.option("--url-prefix", envvar=ENV_URL_PREFIX, default=protocol.EXTENDER_PREFIX, show_default=True,
              show_envvar=True, help="Path prefix of the verbs (the path of kube-scheduler's urlPrefix).")
@click.option("--gpu-policy", envvar=protocol.ENV_GPU_POLICY, type=click.Choice(["binpack", "spread"]),
              default="binpack", show_default=True, show_envvar=True,
              help="binpack: best fit, the original's choice; spread: the emptiest GPU. Also drives prioritize.")
@click.option("--leader-elect/--no-leader-elect", envvar=ENV_LEADER_ELECT, default=False, show_default=True,
              show_envvar=True, help="Elect a leader through a Lease; only the leader binds and reports ready.")
@click.option("--lease-namespace", envvar=ENV_LEASE_NAMESPACE, default="kube-system", show_default=True,
              show_envvar=True)
@click.option("--lease-name", envvar=ENV_LEASE_NAME, default="gpushare-schd-extender", show_default=True,
              show_envvar=True)
@click.option("--lease-duration", type=FiniteFloatRange(min=1), default=12.0, show_default=True,
              help="Seconds a Lease lasts without renewal (a crashed leader is replaced after this).")
@click.option("--renew-deadline", type=FiniteFloatRange(min=0.5), default=8.0, show_default=True,
              help="Seconds the leader keeps trying to renew before it steps down.")
@click.option("--retry-period", type=FiniteFloatRange(min=0.1), default=1.0, show_default=True,
              help="Seconds between election attempts and renewals.")
@click.option("--tls-cert-file", envvar=ENV_TLS_CERT, type=click.Path(dir_okay=False), show_envvar=True,
              help="PEM certificate for HTTPS (kube-scheduler's enableHTTPS).")
@click.option("--tls-private-key-file", envvar=ENV_TLS_KEY, type=click.Path(dir_okay=False), show_envvar=True,
              help="PEM private key for HTTPS.")
@click.option("--max-request-bytes", envvar=ENV_MAX_REQUEST_BYTES, type=click.IntRange(min=1024),
              default=16 * 1024 * 1024, show_default=True, show_envvar=True,
              help="Larger request bodies are refused with 413.")
@click.option("--max-connections", envvar=ENV_MAX_CONNECTIONS, type=click.IntRange(min=1), default=128,
              show_default=True, show_envvar=True,
              help="Open connections (a thread each); more are answered 503 and closed.")
@click.option("--max-inflight-bytes", envvar=ENV_MAX_INFLIGHT_BYTES, type=click.IntRange(min=1024),
              default=64 * 1024 * 1024, show_default=True, show_envvar=True,
              help="Request body bytes read or handled at once; a body that finds no room within 5 s "
                   "gets 503. At least --max-request-bytes.")
@click.option("--idle-timeout", type=FiniteFloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds a keep-alive connection may wait for its next request.")
@click.option("--read-timeout", type=FiniteFloatRange(min=0.1), default=30.0, show_default=True,
              help="Seconds a request may take to arrive in full once it has started.")
@click.option("--cache-stale-after", type=FiniteFloatRange(min=1), default=30.0, show_default=True,
              help="Seconds a failing list or watch may last before /readyz reports not ready.")
@click.option("--bind-deadline", type=FiniteFloatRange(min=2, max=29), default=20.0, show_default=True,
              help="Seconds a bind may take (plus one request of at most a quarter of this); keep it below "
                   "kube-scheduler's extender httpTimeout (30 s).")
@click.option("--unknown-outcome-grace", type=FiniteFloatRange(min=1), default=API_REQUEST_TIMEOUT, show_default=True,
              help="Seconds a Binding whose reply was lost or timed out may still land; until then its GPU "
                   "stays reserved unless the API server shows the pod bound or gone.")
@log_options(ENV_LOG_LEVEL)
def serve_extender_command(
    *,
    kubeconfig: str | None,
    context: str | None,
    cluster: str | None,
    user: str | None,
    as_user: str | None,
    as_groups: tuple[str, ...],
    request_timeout: str | None,
    port: str,
    bind_address: str,
    url_prefix: str,
    gpu_policy: str,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    tls_cert_file: str | None,
    tls_private_key_file: str | None,
    max_request_bytes: int,
    max_connections: int,
    max_inflight_bytes: int,
    idle_timeout: float,
    read_timeout: float,
    cache_stale_after: float,
    bind_deadline: float,
    unknown_outcome_grace: float,
    log_format: str,
    log_level: str,
) -> None:
    """Run the GPU-share scheduler extender (filter, prioritize, bind over HTTP).

    A drop-in for Alibaba's gpushare-scheduler-extender: same routes, JSON, reason strings and pod
    annotations, so the original device plugin works with it unchanged. Example:
    kubectl gpushare serve-extender --port 12345 --bind-address 0.0.0.0 --leader-elect
    """
    require_daemon_modules("serve-extender", ["prometheus_client"])
    import ssl

    from kubectl_gpushare.extender.httpd import Limits
    from kubectl_gpushare.extender.server import ServeConfig, serve
    from kubectl_gpushare.kube.config import load_config
    from kubectl_gpushare.kube.errors import KubeError

    if bool(tls_cert_file) != bool(tls_private_key_file):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    if renew_deadline >= lease_duration:
        raise click.UsageError("--renew-deadline must be shorter than --lease-duration")
    if max_inflight_bytes < max_request_bytes:
        raise click.UsageError("--max-inflight-bytes must be at least --max-request-bytes")
    configure_logging(log_format, log_level)
    try:
        kube = load_config(kubeconfig, context, cluster, user, as_user, as_groups, request_timeout)
    except KubeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    cfg = ServeConfig(
        kube=kube, bind_address=bind_address, port=_port(port), url_prefix=url_prefix,
        policy="spread" if gpu_policy == "spread" else "binpack", leader_elect=leader_elect,
        lease_namespace=lease_namespace, lease_name=lease_name, lease_duration=lease_duration,
        renew_deadline=renew_deadline, retry_period=retry_period, tls_cert_file=tls_cert_file,
        tls_private_key_file=tls_private_key_file, max_request_bytes=max_request_bytes,
        cache_stale_after=cache_stale_after,
        limits=Limits(max_connections=max_connections, max_inflight_bytes=max_inflight_bytes,
                      idle_timeout=idle_timeout, request_timeout=read_timeout),
        bind_deadline=bind_deadline, unknown_grace=unknown_outcome_grace,
        log_format="json" if log_format == "json" else "text",
    )
    stop = stop_on_signals()
    try:
        serve(cfg, stop=stop)
    except (OSError, ssl.SSLError) as exc:
        click.echo(f"error: cannot serve on {bind_address}:{cfg.port}: {exc}", err=True)
        sys.exit(EXIT_START)
    except KubeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
