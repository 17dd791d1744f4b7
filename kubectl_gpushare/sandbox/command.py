"""``kubectl gpushare sandbox``: run the sandbox API server in the foreground.

Owns the command-line face only: options, seeding from a spec or the generator, the kubeconfig,
the usage banner, and stopping cleanly on Ctrl-C and SIGTERM. Imports the server lazily so the
CLI's help stays fast.
"""

from __future__ import annotations

import errno
import signal
import threading
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

if TYPE_CHECKING:
    from kubectl_gpushare.sandbox.server import Sandbox

from kubectl_gpushare.kube.errors import EXIT_START, EXIT_USAGE
from kubectl_gpushare.kube.flags import FiniteFloatRange
from kubectl_gpushare.service import SignalRelay

EXIT_BAD_INPUT = EXIT_USAGE
EXIT_CANNOT_START = EXIT_START
SPEC_EXAMPLE = "kubectl_gpushare/sandbox/examples/cluster.yaml"
"""The annotated example spec in the repository (shipped in the package too)."""


class Attachment(Protocol):
    """Something run around the sandbox (the ``--stack`` of `cli.stack`); this face never imports it."""

    def prepare(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Adjust the seed objects before they are loaded."""

    def run(self, sandbox: Sandbox, kubeconfig: Path) -> AbstractContextManager[str]:
        """Start around a serving sandbox; the context's value is a line for the banner."""


@click.command(
    "sandbox",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Faults can be injected over HTTP under /_sandbox/ (see docs/sandbox.md). The --spec format is documented "
    f"in docs/sandbox.md (the spec file) with an annotated example in {SPEC_EXAMPLE}.",
)
@click.option(
    "--spec",
    "spec_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"YAML cluster spec to load (format: docs/sandbox.md, example: {SPEC_EXAMPLE}).",
)
@click.option(
    "--nodes", type=click.IntRange(min=0), default=4, show_default=True, help="Generated GPU nodes (0: empty)."
)
@click.option(
    "--gpus-per-node", type=click.IntRange(min=0), default=8, show_default=True, help="GPUs per generated node."
)
@click.option("--gpu-memory", type=click.IntRange(min=1), default=80, show_default=True, help="Memory per GPU (GiB).")
@click.option("--pods", type=click.IntRange(min=0), default=12, show_default=True, help="Generated GPU pods.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of the generator.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port on 127.0.0.1 (0: any).")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("sandbox.kubeconfig"),
    show_default=True,
    help="Where to write a kubeconfig for the sandbox. One whose server on this machine still answers "
    "(another running sandbox) is refused, never overwritten.",
)
@click.option(
    "--state",
    "state_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Load objects from this file on start, save them on stop and every 30 s (the seed is skipped if it exists). "
    "A file that is not a sandbox state is refused and never overwritten.",
)
@click.option(
    "--idle-timeout",
    type=FiniteFloatRange(min=0.1, max=86_400),
    default=90.0,
    show_default=True,
    help="Seconds a client connection may sit idle between requests before it is closed.",
)
@click.option("--auth/--no-auth", default=False, show_default=True, help="Require the sandbox's bearer tokens.")
@click.option(
    "--https/--no-https",
    default=None,
    help="Serve HTTPS with a CA made at start, written into the kubeconfig (default: on with --auth, since "
    "kubectl sends tokens only over HTTPS). Needs the 'https' extra (the cryptography package).",
)
def sandbox_command(**options: Any) -> None:
    """Run an embedded Kubernetes API server with a GPU cluster, in the foreground.

    It serves on 127.0.0.1 only, writes a kubeconfig, and stops on Ctrl-C or SIGTERM. Point
    kubectl, `kubectl inspect gpushare`, the extender or the device plugin at it with
    KUBECONFIG=<kubeconfig>.
    """
    run(**options)  # `run` carries the typed signature


def run(
    spec_file: Path | None,
    nodes: int,
    gpus_per_node: int,
    gpu_memory: int,
    pods: int,
    seed: int,
    port: int,
    kubeconfig: Path,
    state_file: Path | None,
    auth: bool,
    idle_timeout: float,
    https: bool | None = None,
    attachment: Attachment | None = None,
) -> None:
    """The command's body; ``attachment`` runs around the serving sandbox (``--stack``)."""
    from contextlib import ExitStack

    from kubectl_gpushare.sandbox.builders import namespace_object
    from kubectl_gpushare.sandbox.server import Sandbox
    from kubectl_gpushare.sandbox.spec import SpecError, generate_cluster, load_spec
    from kubectl_gpushare.sandbox.state import StateFileError

    seed_objects: list[dict[str, Any]] = []
    if state_file is None or not state_file.exists():
        try:
            if spec_file is not None:
                seed_objects = load_spec(spec_file)
            else:
                seed_objects = (
                    generate_cluster(nodes, gpus_per_node, pods, seed, gpu_memory=gpu_memory, epoch=_recent(pods))
                    if nodes
                    else [namespace_object("default")]
                )
        except SpecError as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(EXIT_BAD_INPUT) from None
    from kubectl_gpushare.sandbox.tls import TlsUnavailableError

    live = served_elsewhere(kubeconfig)
    if live is not None:
        click.echo(f"error: {kubeconfig} belongs to the API server still answering at {live} (another sandbox?); "
                   "stop it, or pass --kubeconfig with another path", err=True)
        raise SystemExit(EXIT_BAD_INPUT)
    if attachment is not None:
        seed_objects = attachment.prepare(seed_objects)
    sandbox = Sandbox(
        port=port, auth=auth, state_file=state_file, idle_timeout=idle_timeout, https=auth if https is None else https
    )
    try:
        sandbox.start()
    except TlsUnavailableError as exc:
        click.echo(f"error: {exc} (or pass --no-https)", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except StateFileError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except OSError as exc:
        click.echo(f"error: cannot start the sandbox: {_start_failure(exc, port)}", err=True)
        raise SystemExit(EXIT_CANNOT_START) from None
    except ValueError as exc:
        click.echo(f"error: cannot start the sandbox: {exc}", err=True)
        raise SystemExit(EXIT_CANNOT_START) from None
    stop = threading.Event()
    relay = SignalRelay(stop, (signal.SIGINT, signal.SIGTERM))  # before the banner: a client may signal on reading it
    try:
        try:
            if seed_objects:
                sandbox.load(seed_objects)
            kubeconfig_path = sandbox.write_kubeconfig(kubeconfig)
        except (OSError, ValueError) as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(EXIT_BAD_INPUT) from None
        with ExitStack() as around:
            line = around.enter_context(attachment.run(sandbox, kubeconfig_path)) if attachment is not None else None
            _banner(sandbox, kubeconfig_path, auth, state_file, line)
            while not stop.wait(0.5):
                pass
    finally:
        relay.close()
        try:
            sandbox.stop()
        except (OSError, ValueError) as exc:
            click.echo(f"error: the state was not saved: {exc}", err=True)
            raise SystemExit(EXIT_CANNOT_START) from None
    click.echo("Sandbox stopped." + (f" State saved to {state_file}." if state_file else ""), err=True)


KUBECONFIG_READ_LIMIT = 1 << 20
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def served_elsewhere(path: Path, timeout: float = 0.5) -> str | None:
    """The server of an existing kubeconfig at ``path`` when it is on this machine and still answers.

    A second sandbox must not take over the kubeconfig another running one serves (its users would
    silently switch clusters). Only loopback servers are probed (a TCP connect, nothing sent): a
    sandbox only ever writes those, and nothing here reaches out to another machine. A file that
    is not a readable kubeconfig is not in use.
    """
    import socket
    from urllib.parse import urlsplit

    import yaml

    from kubectl_gpushare.kube import safe_yaml

    try:
        with path.open("rb") as handle:
            config = safe_yaml.load(handle.read(KUBECONFIG_READ_LIMIT))
    except (OSError, yaml.YAMLError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    clusters = config.get("clusters") if isinstance(config, dict) else None
    for entry in clusters if isinstance(clusters, list) else []:
        cluster = entry.get("cluster") if isinstance(entry, dict) else None
        server = cluster.get("server") if isinstance(cluster, dict) else None
        if not isinstance(server, str):
            continue
        try:
            url = urlsplit(server)
            host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            continue
        if host not in LOOPBACK:
            continue
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return server
        except OSError:
            continue
    return None


def _start_failure(exc: OSError, port: int) -> str:
    """Why the server could not bind, with what to do about it (a busy port is the usual case)."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on 127.0.0.1 is already in use; pass another --port, or --port 0 for any free one"
    return str(exc)


def _recent(pods: int) -> datetime:
    """An epoch that makes the newest generated pod a few seconds old, so ages look natural."""
    return datetime.now(UTC) - timedelta(seconds=3600 + pods + 5)


def _banner(sandbox: Sandbox, kubeconfig_path: Path, auth: bool, state_file: Path | None, extra: str | None) -> None:
    counts = {r: sandbox.store.count(r) for r in ("nodes", "pods")}
    click.echo(f"Sandbox API server listening on {sandbox.url} ({counts['nodes']} nodes, {counts['pods']} pods)")
    if extra:
        click.echo(extra)
    click.echo(f"Kubeconfig written to {kubeconfig_path}")
    click.echo("Try:")
    click.echo(f"  export KUBECONFIG={kubeconfig_path.resolve()}")
    click.echo("  kubectl get nodes")
    click.echo("  kubectl inspect gpushare")
    if auth:
        click.echo(f"Tokens: admin {sandbox.ADMIN_TOKEN}, read-only {sandbox.READONLY_TOKEN}")
    if state_file is not None:
        click.echo(f"State is saved to {state_file}")
    click.echo(f'Faults: curl -X POST {sandbox.url}/_sandbox/faults -d \'{{"path": "/binding", "status": 500}}\'')
    click.echo("Press Ctrl-C to stop.", err=True)
