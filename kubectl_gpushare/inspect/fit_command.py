"""``kubectl gpushare fit MEMORY``: flags and output for the fit question (see `inspect.fit`).

Loads nodes and pods exactly as ``kubectl inspect gpushare`` does (live or ``--from-file``, ``-l``,
the same errors and exit codes) and answers from the same ledger. Only click and the standard
library are imported at module level.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect.caps import limit_options
from kubectl_gpushare.inspect.command import from_file_option, run
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP, EXIT_FIT_SHORT, EXIT_OK
from kubectl_gpushare.kube.flags import kube_options

if TYPE_CHECKING:
    from kubectl_gpushare.inspect.source import Snapshot
    from kubectl_gpushare.ledger import Policy

POLICIES: Final = ("binpack", "spread")
MAX_REQUEST: Final = 2**31 - 1

EPILOG = (
    """\b
Examples:
  kubectl gpushare fit 8                   # where do 8 GiB pods fit, and how many?
  kubectl gpushare fit 8Gi                 # the same as a quantity (8192Mi too)
  kubectl gpushare fit 8 --count 5 -o json # where would 5 of them go, one after another
  kubectl gpushare fit 20000 -l pool=a100  # MiB units on nodes whose device plugin uses MiB

A pod fits a GPU whose free memory is at least MEMORY (a pod never spans GPUs); unhealthy GPUs
never count. On a node of the DRA driver (gpu-mem.kubectl-gpushare.io) a pod is a claim asking
MEMORY, rounded up by the driver's request policy as kube-scheduler's allocator rounds it. Pods
are placed as the extender places them: the node that scores highest for the policy, then the
policy's GPU on it. Nodes of other sharing stacks (HAMi, NVIDIA, nano-gpu,
elastic-gpu, KAI, Volcano, Koordinator) are not considered: their own schedulers place pods there by
rules this command does not implement, so it promises nothing there; a note line counts them.

"""
    + EXIT_CODES_HELP
)


def check_memory(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """MEMORY: a count in the nodes' unit (``8``) or a Kubernetes quantity of bytes (``8Gi``, ``8192Mi``).

    Checked here for syntax and bounds (in MiB, the finer unit), so garbage is a usage error before
    the cluster is read; converted once the nodes' unit is known (`request_in`).
    """
    try:
        protocol.parse_memory_request(value, protocol.UNIT_MIB, MAX_REQUEST * 1024)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return value


def request_in(text: str, unit: str) -> int:
    """MEMORY in the nodes' unit; a usage error when it is not a whole number of units."""
    try:
        return protocol.parse_memory_request(text, unit, MAX_REQUEST)
    except ValueError as exc:
        raise click.UsageError(f"Invalid value for 'MEMORY': {exc}") from None


def _render(snapshot: Snapshot, options: dict[str, Any]) -> str:
    from kubectl_gpushare.inspect import caps, fit, order
    from kubectl_gpushare.inspect.compat import memory_unit

    names = order.sort_nodes(snapshot.ledger, snapshot.names, "name")
    policy: Policy = "spread" if options["policy"] == "spread" else "binpack"
    others = Counter(node.stack for node in snapshot.stack_nodes)
    unit = memory_unit(snapshot.ledger, names) or protocol.UNIT_GIB
    request = request_in(options["memory"], unit)
    per_node: dict[str, int | None] = {}
    if snapshot.dra_nodes:
        from kubectl_gpushare.kube.stacks.dra import request_units

        asked = request * protocol.UNIT_BYTES[unit]  # one claim's capacity.requests.memory, in bytes
        per_node = {name: request_units(node, asked) for name, node in snapshot.dra_nodes.items()
                    if (record := snapshot.ledger.node(name)) is not None and record.driver}
    report = fit.plan(snapshot.ledger, names, request, options["count"], policy, others, per_node)
    if len(report.placements) < report.count:
        options["verdict"].append(EXIT_FIT_SHORT)
    if options["output"] == "json":
        return fit.to_json(report)
    return fit.to_text(report, headers=not options["no_headers"], limit=caps.limit_of(options))


@click.command(
    "fit",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("memory", callback=check_memory, metavar="MEMORY")
@click.option(
    "--count", type=click.IntRange(1, 100_000), default=1, show_default=True, help="Pods of MEMORY to place."
)
@click.option("-l", "--selector", default=None, metavar="SELECTOR", help="Only nodes matching this label selector.")
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default=lambda: os.environ.get(protocol.ENV_GPU_POLICY, "binpack"),
    show_default="the extender's: $GPUSHARE_POLICY, else binpack",
    help="GPU choice, as the extender's --gpu-policy.",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@click.option("--no-headers", is_flag=True, help="Leave out table header rows.")
@limit_options
@from_file_option
@kube_options
def fit_command(**options: Any) -> None:
    """How many pods of MEMORY (aliyun.com/gpu-mem) fit, on which nodes and GPUs, and where the next go.

    MEMORY is a number in the nodes' unit (GiB, or MiB where the device plugin counts MiB) or a
    quantity such as 8Gi or 8192Mi. Also says the largest request that still fits on some GPU.
    Exits 10 when fewer than --count pods fit.
    """
    verdict: list[int] = []
    run(dict(options, nodes=(), details=False, sort="name", keep_pods=False, verdict=verdict,
             command="fit"), render=_render)
    raise click.exceptions.Exit(verdict[0] if verdict else EXIT_OK)
