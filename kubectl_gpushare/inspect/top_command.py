"""``kubectl gpushare top``: flags, loading (ledger + usage) and output (the report: `inspect.top`).

Loads nodes and pods as inspect does (same selectors, errors and exit codes), then each shown
node's observed usage from its device plugin through ``pods/proxy`` or, with ``--prometheus``,
from Prometheus (`inspect.usage`). Only click and the standard library are imported at module
level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare.inspect.command import run
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP
from kubectl_gpushare.kube.flags import kube_options, make_client

if TYPE_CHECKING:
    from collections.abc import Callable

    from kubectl_gpushare.inspect.source import Snapshot
    from kubectl_gpushare.inspect.top import NodeObserved
    from kubectl_gpushare.kube.records import Warnings

SORT_KEYS: Final = ("name", "used", "allocated", "over")
"""`inspect.top.SORT_KEYS`, spelled out so ``--help`` imports nothing."""

EPILOG = (
    """\b
Columns:
  GPUs  ALLOCATED (the pods' shares), USED (all processes, from the driver), TOTAL,
        ENFORCED (yes: the driver holds each pod to its share)
  Pods  ALLOCATED (its share), USED, LIMIT (the driver's hard limit), STATUS (OVER: uses more
        than its share)
Usage comes from each node's device plugin through the API server's pod proxy (needs get on
pods/proxy in kube-system), or with --prometheus from Prometheus. A node that does not answer
within --request-timeout is shown as <unknown> and named in one warning.
-o json|yaml: versioned GPUShareTop (gpushare.kubectl-gpushare.io/v1), bytes.

"""
    + EXIT_CODES_HELP
)


@dataclass
class _Loaded:
    snapshot: Snapshot
    observed: dict[str, NodeObserved | None]
    namespace: str | None
    warnings: Warnings


def _load(options: dict[str, Any], progress: Callable[[int], None], warnings: Warnings) -> _Loaded:
    """Nodes and pods as inspect reads them; meanwhile (unless -l must pick the nodes first) the plugins' usage."""
    from concurrent.futures import ThreadPoolExecutor

    from kubectl_gpushare.inspect import source, usage

    with make_client(options, "top") as client, ThreadPoolExecutor(1, thread_name_prefix="usage") as background:
        early, timeout = None, usage.usage_timeout(options["request_timeout"])
        if not options["prometheus"] and not options["selector"]:
            early = background.submit(usage.fetch_reports, client, options["nodes"] or None, timeout)
        snapshot = source.from_api(client, options["nodes"], options["selector"], progress, keep_pods=True,
                                   warnings=warnings, command="top")
        namespace = None if options["all_namespaces"] else options["namespace"] or client.config.namespace
        names = sorted(snapshot.names)
        if options["prometheus"]:
            observed = usage.from_prometheus(options["prometheus"], names, snapshot.warnings, timeout)
        else:
            fetched = early.result() if early is not None else usage.fetch_reports(client, names, timeout)
            observed = usage.observations(usage.settle(fetched, names, snapshot.warnings))
    return _Loaded(snapshot, observed, namespace, snapshot.warnings)


def _render(loaded: _Loaded, options: dict[str, Any]) -> str | None:
    from kubectl_gpushare.inspect import top

    snapshot = loaded.snapshot
    if not snapshot.names:
        click.echo("No resources found", err=True)  # kubectl's words when nothing matches
        return None
    report = top.build(
        snapshot.ledger, sorted(snapshot.names), loaded.observed, unit=options["memory_unit"],
        namespace=loaded.namespace, sort=options["sort"],
    )  # fmt: skip
    if options["output"] == "json":
        return top.to_json(report)
    if options["output"] == "yaml":
        return top.to_yaml(report)
    return top.to_text(report, headers=not options["no_headers"], namespaces=loaded.namespace is None)


@click.command(
    "top",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("-o", "--output", type=click.Choice(["json", "yaml"]), default=None, help="Output format.")
@click.option("-l", "--selector", default=None, metavar="SELECTOR", help="Only nodes matching this label selector.")
@click.option("-n", "--namespace", default=None, help="Pods of this namespace (default: the context's namespace).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Pods of every namespace.")
@click.option(
    "--sort", type=click.Choice(SORT_KEYS), default="name", show_default=True,
    help="Row order; used, allocated and over (used minus share) sort largest first.",
)  # fmt: skip
@click.option("--no-headers", is_flag=True, help="Leave out the header rows.")
@click.option(
    "--memory-unit", type=click.Choice(["GiB", "MiB"]), default="GiB", show_default=True,
    help="The device plugins' --memory-unit: what one aliyun.com/gpu-mem is.",
)  # fmt: skip
@click.option(
    "--prometheus", default=None, metavar="URL",
    help="Read usage from this Prometheus server's HTTP API instead of the device plugins.",
)  # fmt: skip
@kube_options
def top_command(**options: Any) -> None:
    """Show what each shared GPU and each pod really uses, beside its share (as kubectl top pod does for CPU)."""
    if options["nodes"] and options["selector"]:
        raise click.UsageError("name cannot be provided when a selector is specified")  # kubectl's refusal
    if options["namespace"] and options["all_namespaces"]:
        raise click.UsageError("-n/--namespace and -A/--all-namespaces go one at a time")
    run(dict(options, from_file=None), render=_render, load=_load)
