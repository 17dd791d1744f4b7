"""``kubectl inspect gpushare`` (and ``kubectl gpushare inspect``): flags, errors, exit codes.

This module parses options, picks the data source and the view, and turns every failure into
one line on stderr with a documented exit code. It imports only click and the standard library
at module level: ``--help`` must stay fast and must not need a kubeconfig. The kube client,
msgspec, yaml and rich are imported inside the command, and rich only for ``-o pretty``.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare import __version__
from kubectl_gpushare.kube.errors import (
    EXIT_API,
    EXIT_AUTH,
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from kubectl_gpushare.kube.flags import complete, kube_options, make_client

if TYPE_CHECKING:
    from kubectl_gpushare.inspect.source import Snapshot
    from kubectl_gpushare.kube.records import Warnings

OUTPUTS: Final = ("json", "yaml", "csv", "wide", "pretty")
STACK_CHOICES: Final = (
    "auto", "gpushare", "hami", "nvidia", "nano-gpu", "elastic-gpu", "kai", "volcano", "koordinator",
)
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
An API error prints "Failed due to ..." on stderr, as the original did.

""" + EXIT_CODES_HELP


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
    from kubectl_gpushare.protocol import one_line  # not at import: --help stays light

    click.echo(one_line(message), err=True)
    return click.exceptions.Exit(code)


def _load(options: dict[str, Any], progress: Callable[[int], None], warnings: Warnings) -> Snapshot:
    from kubectl_gpushare.inspect import source

    tenants = options.get("group_by") == "namespace"
    if options["from_file"] is not None:
        data = source.read_input(options["from_file"])
        return source.from_documents(data, options["nodes"], options["selector"], options.get("stack", "auto"),
                                     quotas=tenants, warnings=warnings)

    marks = _marks_unhealthy(options)
    with make_client(options, "inspect") as client:
        if options.get("namespace"):
            source.require_namespace(client, options["namespace"])
        snapshot = source.from_api(
            client, options["nodes"], options["selector"], progress, unhealthy=marks,
            stack=options.get("stack", "auto"), keep_pods=options.get("keep_pods", True), warnings=warnings,
            command=options.get("command", "inspect"),
        )  # fmt: skip
        if tenants:
            snapshot.quotas = source.quotas_of(lambda: source.list_quotas(client, snapshot.warnings), snapshot.warnings)
        return snapshot


def _marks_unhealthy(options: dict[str, Any]) -> bool:
    """Whether the view marks unhealthy GPUs, so their ConfigMaps are read (one-shot and ``-w`` alike).

    Only the compatible text (and the per-namespace totals, which show no GPUs) leave them unmarked.
    """
    return options.get("output") is not None and options.get("group_by") != "namespace"


def _watch(options: dict[str, Any], progress: Callable[[int], None], warnings: Warnings) -> None:
    """``-w``: draw and redraw until Ctrl-C; run() maps its errors and the interrupt (130).

    The watch says its own warnings with each redraw (`inspect.watch`); ``warnings`` stays empty.
    """
    from kubectl_gpushare.inspect.watch import watch

    with make_client(options, "inspect") as client:
        if options.get("namespace"):
            from kubectl_gpushare.inspect import source

            source.require_namespace(client, options["namespace"])
        watch(client, options, _render, unhealthy=_marks_unhealthy(options))


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

    if options.get("namespace"):
        from kubectl_gpushare.inspect import tenants

        snapshot = tenants.only_namespace(snapshot, options["namespace"])
    names = order.sort_nodes(snapshot.ledger, snapshot.names, options["sort"])
    if options.get("group_by") == "namespace":
        from kubectl_gpushare.inspect import tenants

        if options["output"] in ("json", "yaml"):
            from kubectl_gpushare.inspect import report

            totals = tenants.tenants(snapshot, names)
            return report.to_json(totals) if options["output"] == "json" else report.to_yaml(totals)
        return tenants.by_namespace(snapshot, names, headers=not options["no_headers"])
    if not names and options["selector"]:
        click.echo("No resources found", err=True)  # kubectl's words when -l matches nothing
        return None
    if not names and not snapshot.stack_nodes and not options["nodes"] and not options.get("watch"):
        # stdout stays the original's (`GPU Memory()` and 0/0 on an empty cluster); stderr says why.
        from kubectl_gpushare.protocol import RESOURCE_MEM

        click.echo(f"No GPU-share nodes found: no node advertises {RESOURCE_MEM} (kubectl gpushare doctor; "
                   "kubectl gpushare label-nodes)", err=True)
    output = options["output"]
    headers = not options["no_headers"]
    if output is None:
        view = compat.details if options["details"] else compat.summary
        return _with_stacks(snapshot, view(snapshot.ledger, names, headers=headers), options)
    if output == "wide":
        from kubectl_gpushare.inspect import wide

        return _with_stacks(
            snapshot, wide.render(snapshot.ledger, names, headers=headers, unscheduled=snapshot.unscheduled), options
        )
    if output == "pretty":
        from kubectl_gpushare.inspect import pretty

        if names or not snapshot.stack_nodes:
            pretty.render(
                snapshot.ledger, names, sys.stdout, details=options["details"], unscheduled=snapshot.unscheduled
            )
        return _with_stacks(snapshot, "", options) or None
    from kubectl_gpushare.inspect import report

    document = report.build(
        snapshot.ledger, names, snapshot.unscheduled, stacks=snapshot.stack_nodes, claims=snapshot.stack_claims
    )
    if output == "json":
        return report.to_json(document)
    if output == "yaml":
        return report.to_yaml(document)
    return report.to_csv(document, headers=headers)


Renderer = Callable[[Any, dict[str, Any]], "str | None"]
Loader = Callable[[dict[str, Any], Callable[[int], None], "Warnings"], Any]
"""``load(options, progress, warnings)``: reads the cluster, recording every problem in ``warnings`` as it
goes (`run` prints them even when the load then fails), and returns an object with ``warnings``."""


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a one-shot command.

    A command builds acyclic data (kube structs, records, the ledger, the report) and exits, so
    collections find nothing; at 100,000 pods their passes over the growing heap cost about 0.3 s
    of ``-o json`` and ``-o yaml``. Anything cyclic is collected once the collector runs again.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run(options: dict[str, Any], render: Renderer = _render, load: Loader = _load, *, one_shot: bool = True) -> None:
    """Load, render and print; every expected failure becomes one stderr line and an exit code.

    Other questions (``kubectl gpushare fit``, ``doctor``) pass their own ``render`` (and ``load``,
    returning an object with ``warnings``), so they load, filter and fail exactly as inspect does.
    ``one_shot=False`` (``--watch``) keeps the garbage collector running.
    """
    with _collector_paused() if one_shot else nullcontext():
        _run(options, render, load)


def _run(options: dict[str, Any], render: Renderer, load: Loader) -> None:
    from kubectl_gpushare.kube.records import Warnings

    progress = _Progress(sys.stderr.isatty() and options["from_file"] is None)
    warnings = Warnings()
    try:
        snapshot = load(options, progress, warnings)
    except BaseException as exc:
        progress.clear()
        # What was skipped on the way may be why the load failed ("pod not found"): said first.
        _say(warnings)
        failure = _failure(exc)
        if failure is exc:
            raise
        raise failure from None
    progress.clear()
    _say(snapshot.warnings)
    try:
        text = render(snapshot, options)
        if text is not None:
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as kubectl does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise click.exceptions.Exit(EXIT_OK) from None
    except KeyboardInterrupt as exc:  # a long -o yaml: the load's 130 (`_failure`), not click's "Aborted!" (1)
        raise _failure(exc) from None


def _say(warnings: Warnings) -> None:
    """The load's warnings on stderr, each once; they name objects: one short line each, whatever the names hold."""
    from kubectl_gpushare import protocol

    for message in warnings.summary():
        click.echo(f"warning: {protocol.one_line(message)}", err=True)


def _failure(exc: BaseException) -> BaseException:
    """The one-line error and exit code for a load's expected failure; anything else is returned as it is."""
    from kubectl_gpushare.inspect.source import InputError
    from kubectl_gpushare.kube import errors
    from kubectl_gpushare.kube.selectors import SelectorError

    if isinstance(exc, KeyboardInterrupt):
        return _fail("interrupted", EXIT_INTERRUPTED)
    if isinstance(exc, errors.ConfigError):
        return _fail(f"Failed due to {exc}", EXIT_USAGE)
    if isinstance(exc, errors.Unreachable):
        return _fail(f"Failed due to {exc}", EXIT_UNREACHABLE)
    if isinstance(exc, errors.Unauthorized):
        hint = "HTTP 401: the API server rejected the kubeconfig user's token, certificate or exec credential"
        return _fail(f"Failed due to {exc} ({hint})", EXIT_AUTH)
    if isinstance(exc, errors.Forbidden):
        return _fail(f"Failed due to {exc}", EXIT_AUTH)
    if isinstance(exc, errors.KubeError):
        return _fail(f"Failed due to {exc}", EXIT_API)
    if isinstance(exc, InputError):
        return _fail(f"error: --from-file: {exc}", EXIT_USAGE)
    if isinstance(exc, SelectorError):
        return _fail(f"error: --selector: {exc}", EXIT_USAGE)
    return exc


def check_namespace(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``-n``: a namespace name or a usage error, before it reaches a URL."""
    if value is None:
        return None
    from kubectl_gpushare.kube.names import check_namespace as valid

    try:
        return valid(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


class _InputFile(click.File):
    """``click.File("rb")``, whose '-' with stdin closed (``<&-``) is a usage error, not click's RuntimeError."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except RuntimeError:  # click.get_binary_stdin: Python set sys.stdin to None
            self.fail(f"'{value}': stdin is not open", param, ctx)


from_file_option = click.option(
    "--from-file",
    type=_InputFile("rb"),
    default=None,
    metavar="FILE",
    help="Read `kubectl get nodes,pods -A -o json|yaml` output instead of a cluster ('-' for stdin; at most 4 GiB).",
)
"""``--from-file``, the same for every command that reads a cluster (inspect, fit, explain, doctor)."""


@click.command(
    "inspect",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("nodes", nargs=-1, metavar="[NODE]...", shell_complete=complete("nodes"))
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
    "-n", "--namespace", default=None, callback=check_namespace, shell_complete=complete("namespaces"),
    help="Count only this namespace's pods (one tenant's view).",
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Count every namespace's pods (the default).")
@click.option(
    "--group-by",
    type=click.Choice(["node", "namespace"]),
    default="node",
    show_default=True,
    help="Rows per node (the views above) or per namespace with totals (text, -o json|yaml).",
)
@click.option(
    "-w", "--watch", is_flag=True, help="Redraw on every change (list + watch, no polling) until Ctrl-C."
)
@from_file_option
@kube_options
@click.version_option(__version__, "--version", prog_name="kubectl-inspect-gpushare")
def inspect_command(**options: Any) -> None:
    """Show shared GPU memory per node and GPU: Allocated/Total, and which pod sits on which GPU.

    Counts what the gpushare scheduler extender and device plugin count: pods' aliyun.com/gpu-mem
    limits against nodes' allocatable aliyun.com/gpu-mem and aliyun.com/gpu-count. Give node names
    to show only those nodes; flags may come before or after them.
    """
    if options["nodes"] and options["selector"]:
        raise click.UsageError("name cannot be provided when a selector is specified")  # kubectl's refusal
    if options["namespace"] and options["all_namespaces"]:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces go one at a time")
    if options["group_by"] == "namespace" and (options["output"] not in (None, "json", "yaml") or options["details"]):
        raise click.UsageError("--group-by namespace prints its own table or -o json|yaml; it takes no other -o or -d")
    if options["watch"]:
        if options["from_file"] is not None:
            raise click.UsageError("--watch needs a cluster; it cannot follow --from-file")
        if options["output"] in ("json", "yaml", "csv", "pretty"):
            raise click.UsageError(f"--watch redraws the text views; -o {options['output']} is not one")
        run(options, load=_watch, one_shot=False)
        return
    if options["details"] and options["output"] not in (None, "pretty"):
        output = options["output"]
        raise click.UsageError(f"-d/--details shows the default and pretty views; -o {output} has no details")
    # The summary shows sums only: the ledger then counts pods page by page and holds no records.
    shows_pods = options["details"] or options["output"] is not None or options["namespace"] is not None
    run(dict(options, keep_pods=shows_pods or options["group_by"] == "namespace"))


__all__ = [
    "EXIT_API",
    "EXIT_AUTH",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "inspect_command",
    "run",
]
