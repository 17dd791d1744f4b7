"""``kubectl gpushare doctor``: flags, loading and the verdict's exit code (checks: `inspect.doctor`).

Reads every node and every pod (completed ones too: a completed pod still holding annotations is a
finding) from the API or ``--from-file``, through inspect's loader and error handling, so a doctor
that cannot reach the cluster fails exactly as inspect does. Only click and the standard library
are imported at module level.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare.inspect.command import from_file_option, run
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP
from kubectl_gpushare.kube.flags import kube_options, make_client
from kubectl_gpushare.kube.records import Warnings

if TYPE_CHECKING:
    from collections.abc import Callable

    from kubectl_gpushare.kube.types import ConfigMap, Node, Pod

POD_PAGE_SIZE: Final = 2000

EPILOG = (
    """\b
Checks:
  error    device-plugin-missing   node labelled gpushare=true without aliyun.com/gpu-mem
  error    two-device-plugins      node advertises nvidia.com/gpu and aliyun.com/gpu-mem
  error    gpu-overcommitted       pods on one GPU hold more than its memory
  error    invalid-value           malformed quantity or gpushare annotation (names the object)
  error    extender-missing        no running scheduler-extender pod (component=gpushare-schd-extender)
  warning  device-plugin-not-running  gpushare node without a running device-plugin pod
  error    scheduler-config-outdated  a kube-system ConfigMap holds a scheduler Policy or v1beta2/v1beta3
  warning  unhealthy-gpus-listed   an unhealthy-gpu-<node> ConfigMap in kube-system lists GPUs
  warning  gpu-node-unlabelled     node with NVIDIA GPUs but no gpushare=true label
  warning  unhealthy-gpus          capacity differs from allocatable
  warning  mixed-gpus-unannotated  GPU memory not divisible by the count, no per-GPU annotation
  warning  assigned-stuck          bound pod still ALIYUN_COM_GPU_MEM_ASSIGNED=false
  warning  completed-holding       Succeeded/Failed pod still holding gpushare annotations
  error    hami-bind-failed        pod with hami.io/bind-phase=failed (HAMi could not bind it)
  error    stack-gpu-overcommitted  a HAMi/NVIDIA/nano-gpu/elastic-gpu GPU claimed past its size (own unit)
  warning  hami-handshake-stuck    hami.io/node-handshake[-vendor] at Requesting_ for more than 5 minutes
  warning  hami-mutex-stuck        hami.io/mutex.lock older than 5 minutes, in the future, or unreadable

\b
The verdict is the exit code: 0 no findings, 1 warnings only, 2 errors. When doctor itself cannot
run, the codes below apply (an API error also exits 1, with nothing on stdout).

"""
    + EXIT_CODES_HELP
)


@dataclass
class _Inputs:
    nodes: list[Node]
    pods: list[Pod]
    configmaps: list[ConfigMap] = field(default_factory=list)
    warnings: Warnings = field(default_factory=Warnings)  # doctor reports malformed values as findings


def _load(options: dict[str, Any], progress: Callable[[int], None]) -> _Inputs:
    from kubectl_gpushare import protocol

    if options["from_file"] is not None:
        from kubectl_gpushare.inspect.source import parse_documents

        data = options["from_file"].read()
        nodes, file_pods = parse_documents(data)
        from kubectl_gpushare.inspect.source import configmaps_in

        return _Inputs(nodes, file_pods, configmaps_in(data))
    from kubectl_gpushare.kube import errors, types

    with make_client(options, "doctor") as client:
        nodes = client.list_nodes()
        pods: list[Pod] = []
        for page in client.list_pages(types.PODS, page_size=POD_PAGE_SIZE):
            pods.extend(page.items)
            progress(len(pods))
        try:
            configmaps = client.list(types.CONFIGMAPS, protocol.UNHEALTHY_CM_NAMESPACE)
        except errors.Forbidden:
            configmaps = []  # the other checks still stand
    return _Inputs(nodes, pods, configmaps)


@click.command(
    "doctor",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@click.option("--no-headers", is_flag=True, help="Leave out the header row.")
@click.option(
    "--stuck-after",
    type=click.FloatRange(0, 86_400 * 365),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Report bound pods still ASSIGNED=false after this long.",
)
@from_file_option
@kube_options
def doctor_command(**options: Any) -> None:
    """Audit a gpushare install: one line per finding with a severity; the exit code is the verdict."""
    verdict: list[int] = []

    def render(inputs: _Inputs, opts: dict[str, Any]) -> str:
        from kubectl_gpushare.inspect import doctor

        report = doctor.audit(
            inputs.nodes, inputs.pods, now_ns=time.time_ns(), stuck_after=opts["stuck_after"],
            configmaps=inputs.configmaps,
        )
        verdict.append(report.exit_code)
        if opts["output"] == "json":
            return doctor.to_json(report)
        return doctor.to_text(report, headers=not opts["no_headers"])

    run(dict(options, nodes=(), selector=None), render=render, load=_load)
    raise click.exceptions.Exit(verdict[0] if verdict else 0)
