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
from kubectl_gpushare.inspect.command import from_file_option, run
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP
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
  kubectl gpushare fit 8 --count 5 -o json # where would 5 of them go, one after another
  kubectl gpushare fit 20000 -l pool=a100  # MiB units on nodes whose device plugin uses MiB

A pod fits a GPU whose free memory is at least MEMORY (a pod never spans GPUs); unhealthy GPUs
never count. Pods are placed as the extender places them: the node that scores highest for the
policy, then the policy's GPU on it. Nodes of other sharing stacks (HAMi, NVIDIA, nano-gpu,
elastic-gpu, KAI, Volcano, Koordinator) are not considered: their own schedulers place pods there by
rules this command does not implement, so it promises nothing there; a note line counts them.

"""
    + EXIT_CODES_HELP
)


def _render(snapshot: Snapshot, options: dict[str, Any]) -> str:
    from kubectl_gpushare.inspect import fit, order

    names = order.sort_nodes(snapshot.ledger, snapshot.names, "name")
    policy: Policy = "spread" if options["policy"] == "spread" else "binpack"
    others = Counter(node.stack for node in snapshot.stack_nodes)
    report = fit.plan(snapshot.ledger, names, options["memory"], options["count"], policy, others)
    if options["output"] == "json":
        return fit.to_json(report)
    return fit.to_text(report, headers=not options["no_headers"])


@click.command(
    "fit",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("memory", type=click.IntRange(1, MAX_REQUEST), metavar="MEMORY")
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
@from_file_option
@kube_options
def fit_command(**options: Any) -> None:
    """How many pods of MEMORY (aliyun.com/gpu-mem) fit, on which nodes and GPUs, and where the next go.

    Also says the largest request that still fits on some GPU.
    """
    run(dict(options, nodes=(), details=False, sort="name", keep_pods=False), render=_render)  # fit needs sums
