"""``kubectl inspect gpushare`` (and ``kubectl gpushare inspect``): flags, errors, exit codes.

This module parses options, picks the data source and the view, and turns every failure into
one line on stderr with a documented exit code. It imports only click and the standard library
at module level: ``--help`` must stay fast and must not need a kubeconfig. The kube client,
msgspec, yaml and rich are imported inside the command, and rich only for ``-o pretty``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare.kube.flags import kube_options, make_client

if TYPE_CHECKING:
    from kubectl_gpushare.inspect.source import Snapshot

EXIT_OK: Final = 0
EXIT_API: Final = 1
"""The API server answered with an error (node not found, 5xx, ...); stderr starts ``Failed due to``."""
EXIT_USAGE: Final = 2
"""Bad flags, no usable kubeconfig, or an unreadable ``--from-file``."""
EXIT_UNREACHABLE: Final = 3
"""The API server did not answer within ``--request-timeout``."""
EXIT_AUTH: Final = 4
"""The API server rejected the credentials (401) or the RBAC permissions (403)."""

EXIT_INTERRUPTED: Final = 130
"""Ctrl-C while listing (128 + SIGINT, as shells report it)."""

OUTPUTS: Final = ("json", "yaml", "csv", "wide", "pretty")
STACK_CHOICES: Final = ("auto", "gpushare", "hami", "nvidia", "nano-gpu", "elastic-gpu")
"""``--stack``: kube.stacks.CHOICES, spelled out here so ``--help`` imports no decoder."""
SORT_KEYS: Final = ("name", "used", "free", "total", "percent")
PROGRESS_DELAY: Final = 0.3
"""Seconds before the progress line appears, so small clusters never flash it."""

EPILOG = """\b
Views:
  (default)  the original tool's summary, byte for byte; -d: per pod per GPU
  -o wide    summary plus GPU count, free, pending, largest free GPU, pods
  -o json|yaml  versioned GPUShareReport (gpushare.kubectl-gpushare.io/v1)
  -o csv     one row per GPU;  -o pretty  colour bars (rich)
Nodes are shown by name (or --sort), GPUs by index, pending last.

\b
Exit codes:
  0  success
  1  API error, e.g. node not found (stderr: "Failed due to ...")
  2  usage error, no usable kubeconfig, unreadable --from-file
  3  API server unreachable within --request-timeout
  4  unauthorized (401) or forbidden (403)
"""


class _Progress:
    """``listing pods: N`` on stderr, redrawn in place; only on a terminal and after a short delay."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, count: int) -> None:
        if not self.enabled or time.monotonic() - self.start < PROGRESS_DELAY:
            return
        sys.stderr.write(f"\rlisting pods: {count:,}")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False


def _fail(message: str, code: int) -> click.exceptions.Exit:
    click.echo(" ".join(message.split()), err=True)
    return click.exceptions.Exit(code)


def _load(options: dict[str, Any], progress: _Progress) -> Snapshot:
    from kubectl_gpushare.inspect import source

    if options["from_file"] is not None:
        stream = options["from_file"]
        data: bytes = stream.read()
        return source.from_documents(data, options["nodes"], options["selector"], options["stack"])

    with make_client(options, "inspect") as client:
        return source.from_api(client, options["nodes"], options["selector"], progress, options["stack"])


def _with_stacks(snapshot: Snapshot, gpushare: str | None, options: dict[str, Any]) -> str | None:
    """Append the other stacks' view when such nodes are shown; gpushare-only output is unchanged."""
    if not snapshot.stack_nodes:
        return gpushare
    from kubectl_gpushare.inspect import stacks_view

    view = stacks_view.details if options["details"] else stacks_view.summary
    text = view(snapshot.stack_nodes, snapshot.stack_claims, headers=not options["no_headers"])
    return stacks_view.combine(gpushare if snapshot.names else None, text)


def _render(snapshot: Snapshot, options: dict[str, Any]) -> str | None:
    from kubectl_gpushare.inspect import compat, order

    names = order.sort_nodes(snapshot.ledger, snapshot.names, options["sort"])
    output = options["output"]
    headers = not options["no_headers"]
    if output is None:
        view = compat.details if options["details"] else compat.summary
        return _with_stacks(snapshot, view(snapshot.ledger, names, headers=headers), options)
    if output == "wide":
        from kubectl_gpushare.inspect import wide

        return _with_stacks(snapshot, wide.render(snapshot.ledger, names, headers=headers), options)
    if output == "pretty":
        from kubectl_gpushare.inspect import pretty

        if names or not snapshot.stack_nodes:
            pretty.render(snapshot.ledger, names, sys.stdout, details=options["details"])
        return _with_stacks(snapshot, "", options) or None
    from kubectl_gpushare.inspect import report

    document = report.build(snapshot.ledger, names, snapshot.stack_nodes, snapshot.stack_claims)
    if output == "json":
        return report.to_json(document)
    if output == "yaml":
        return report.to_yaml(document)
    return report.to_csv(document, headers=headers)


def run(options: dict[str, Any]) -> None:
    """Load, render and print; every expected failure becomes one stderr line and an exit code."""
    from kubectl_gpushare.inspect.selector import SelectorError
    from kubectl_gpushare.inspect.source import InputError
    from kubectl_gpushare.kube import errors

    progress = _Progress(sys.stderr.isatty() and options["from_file"] is None)
    try:
        snapshot = _load(options, progress)
    except KeyboardInterrupt:
        raise _fail("interrupted", EXIT_INTERRUPTED) from None
    except errors.ConfigError as exc:
        raise _fail(f"Failed due to {exc}", EXIT_USAGE) from None
    except errors.Unreachable as exc:
        raise _fail(f"Failed due to {exc}", EXIT_UNREACHABLE) from None
    except errors.Unauthorized as exc:
        hint = "HTTP 401: the API server rejected the kubeconfig user's token, certificate or exec credential"
        raise _fail(f"Failed due to {exc} ({hint})", EXIT_AUTH) from None
    except errors.Forbidden as exc:
        raise _fail(f"Failed due to {exc}", EXIT_AUTH) from None
    except errors.KubeError as exc:
        raise _fail(f"Failed due to {exc}", EXIT_API) from None
    except InputError as exc:
        raise _fail(f"error: --from-file: {exc}", EXIT_USAGE) from None
    except SelectorError as exc:
        raise _fail(f"error: --selector: {exc}", EXIT_USAGE) from None
    finally:
        progress.clear()
    for message in snapshot.warnings.summary():
        click.echo(f"warning: {message}", err=True)
    try:
        text = _render(snapshot, options)
        if text is not None:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as kubectl does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise click.exceptions.Exit(EXIT_OK) from None


@click.command(
    "inspect",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("-d", "--details", is_flag=True, help="Per node, which pod holds how much on which GPU.")
@click.option(
    "-o", "--output", type=click.Choice(OUTPUTS), default=None, help="Output format (default: the original's text)."
)
@click.option("-l", "--selector", default=None, metavar="SELECTOR", help="Only nodes matching this label selector.")
@click.option(
    "--sort",
    type=click.Choice(SORT_KEYS),
    default="name",
    show_default=True,
    help="Node order; numbers sort largest first.",
)
@click.option(
    "--stack",
    type=click.Choice(STACK_CHOICES),
    default="auto",
    show_default=True,
    help="Sharing stack to read nodes as; auto detects each node (gpushare, HAMi, NVIDIA, nano-gpu, elastic-gpu).",
)
@click.option("--no-headers", is_flag=True, help="Leave out table header rows (text, wide, csv).")
@click.option(
    "--from-file",
    type=click.File("rb"),
    default=None,
    metavar="FILE",
    help="Read `kubectl get nodes,pods -A -o json|yaml` output instead of a cluster ('-' for stdin).",
)
@kube_options
def inspect_command(**options: Any) -> None:
    """Show shared GPU memory per node and GPU: Allocated/Total, and which pod sits on which GPU.

    Counts what the gpushare scheduler extender and device plugin count: pods' aliyun.com/gpu-mem
    limits against nodes' allocatable aliyun.com/gpu-mem and aliyun.com/gpu-count. Give node names
    to show only those nodes; flags may come before or after them.
    """
    run(options)


__all__ = ["EXIT_API", "EXIT_AUTH", "EXIT_OK", "EXIT_UNREACHABLE", "EXIT_USAGE", "inspect_command", "run"]
