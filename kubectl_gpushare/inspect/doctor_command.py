"""``kubectl gpushare doctor``: flags, loading and the verdict's exit code (checks: `inspect.doctor`).

Reads every node and every pod (completed ones too: a completed pod still holding annotations is a
finding) from the API or ``--from-file``, through inspect's loader and error handling, so a doctor
that cannot reach the cluster fails exactly as inspect does. Only click and the standard library
are imported at module level.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import click

from kubectl_gpushare.inspect.caps import limit_options
from kubectl_gpushare.inspect.command import from_file_option, run
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP
from kubectl_gpushare.kube.flags import FiniteFloatRange, kube_options, make_client
from kubectl_gpushare.kube.records import Warnings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from kubectl_gpushare.inspect.doctor import DoctorReport
    from kubectl_gpushare.inspect.source import Confinement
    from kubectl_gpushare.kube.stacks.dra import DraObjects
    from kubectl_gpushare.kube.types import ConfigMap, KoordDevice, Node, Pod

POD_PAGE_SIZE: Final = 2000
REREAD_PER_NODE: Final = 20
"""Nodes with an over-committed GPU re-read one request each up to this many (then one full list)."""
_SELECTABLE_NAME: Final = re.compile(r"[A-Za-z0-9._-]+")

EPILOG = (
    """\b
Checks:
  error    device-plugin-missing   node labelled gpushare=true without aliyun.com/gpu-mem
  error    two-device-plugins      node advertises nvidia.com/gpu and aliyun.com/gpu-mem
  error    gpu-overcommitted       pods on one GPU hold more than its memory
  error    invalid-value           malformed quantity or gpushare annotation (names the object)
  error    extender-missing        no running scheduler-extender pod (component=gpushare-schd-extender)
  error    extender-not-ready      scheduler-extender pods exist, none Ready
  warning  device-plugin-not-running  gpushare node without a running device-plugin pod
  warning  device-plugin-not-ready  the device-plugin pod on a gpushare node is not Ready
  error    bypassed-extender       a bound pod holds aliyun.com/gpu-mem without the extender's GPU index
                                   (bound by hand or by another scheduler)
  error    scheduler-config-outdated  a kube-system ConfigMap holds a scheduler Policy or v1beta2/v1beta3
  warning  unhealthy-gpus-listed   an unhealthy-gpu-<node> ConfigMap in kube-system lists GPUs
  warning  gpu-node-unlabelled     node with NVIDIA GPUs but no gpushare=true label
  warning  unhealthy-gpus          capacity differs from allocatable
  warning  mixed-gpus-unannotated  GPU memory not divisible by the count, no per-GPU annotation
  warning  assigned-stuck          bound pod still ALIYUN_COM_GPU_MEM_ASSIGNED=false
  warning  completed-holding       Succeeded/Failed pod still holding gpushare annotations
  error    hami-bind-failed        pod with hami.io/bind-phase=failed (HAMi could not bind it)
  error    stack-gpu-overcommitted  a HAMi/NVIDIA/nano-gpu/elastic-gpu GPU claimed past its size (own unit)
  error    gpu-claimed-by-two-stacks  a pod another sharing scheduler placed on a gpushare node
  warning  kai-group-without-reservation  a KAI pod whose GPU group has no reservation pod on its node
  warning  hami-handshake-stuck    hami.io/node-handshake[-vendor] at Requesting_ for more than 5 minutes
  warning  hami-mutex-stuck        hami.io/mutex.lock older than 5 minutes, in the future, or unreadable
  warning  memory-unenforced       GPUs where the device plugin cannot enforce memory limits (with why)
  error    gpu-over-share          (--usage) a pod uses more than its share beside unenforced neighbours
                                   (a warning where none is at risk)
  warning  node-confinement-missing  the device plugin runs but no ValidatingAdmissionPolicy (with a Deny
                                   binding) keeps it to its own node
  error    gpu-advertised-by-extender-and-dra  node advertises aliyun.com/gpu-mem and publishes GPUs
                                   through DRA (ResourceSlices of our driver or NVIDIA's)
  error    gpu-published-by-two-dra-drivers  our DRA driver and NVIDIA's publish the same GPU UUIDs
                                   (a warning where the UUIDs cannot be compared)
  error    dra-claim-on-unpublished-device  a claim holds a device of our driver no slice publishes
  error    dra-claim-unallocatable  kube-scheduler refuses a pending pod's claim before trying a node (its
                                   request, no class, being deleted, reserved for 256 others), at any age
  error    dra-claim-named-twice   two entries of a pending pod name one claim: kube-scheduler takes it
                                   once per entry (allocates it twice, reserves it twice): never bound
  error    dra-claims-unreadable   a pod's spec.resourceClaims does not read as entries (kube-apiserver
                                   refuses such a pod: only a file or a tampered store holds one)
  warning  dra-claim-pending       a pod waits longer than --stuck-after for its claim (made, allocated)
  warning  dra-pool-unusable       a DRA pool kube-scheduler allocates nothing new from: incomplete (its
                                   slices are not resourceSliceCount) or invalid (a device name twice)

\b
The verdict is the exit code: 0 no findings, 11 warnings only, 12 errors (apart from the codes
1-5 that say doctor itself could not run: an API error exits 1, with nothing on stdout).

"""
    + EXIT_CODES_HELP
)


@dataclass
class _Audited:
    report: DoctorReport
    warnings: Warnings = field(default_factory=Warnings)  # printed on stderr; a problem that is a finding is not


def _load(options: dict[str, Any], progress: Callable[[int], None], load_warnings: Warnings) -> _Audited:
    """Read the cluster (or the file) and audit it as the pods arrive, a page at a time.

    The audit runs here, inside the loader, so a failure while paging maps to inspect's exit codes
    and the decoded pods never have to be held all at once.
    """
    from kubectl_gpushare import protocol
    from kubectl_gpushare.inspect import doctor
    from kubectl_gpushare.kube.stacks import dra

    def audit(
        nodes: list[Node], pods: Iterable[Pod], configmaps: list[ConfigMap], reread: doctor.Reread | None = None,
        usage: dict[str, protocol.UsageReport | None] | None = None, devices: Sequence[KoordDevice] = (),
        confinement: Confinement | None = None, dra_objects: DraObjects | None = None,
    ) -> _Audited:
        """The report, and ``load_warnings`` (the seam's) less what the report already says as a finding."""
        report = doctor.audit(
            nodes, pods, now_ns=time.time_ns(), stuck_after=options["stuck_after"], configmaps=configmaps,
            reread=reread, usage=usage, devices=devices, confinement=confinement, dra_objects=dra_objects,
        )  # fmt: skip
        if dra_objects is not None:
            for message in dra.pool_warnings(dra_objects):  # each is a dra-pool-unusable finding: said once, there
                load_warnings.discard(message)
        return _Audited(report, load_warnings)

    if options["from_file"] is not None:
        from kubectl_gpushare.inspect.source import (
            CONFINEMENT_KINDS,
            DRA_KINDS,
            Others,
            configmaps_of,
            confinement_of,
            devices_found,
            dra_of,
            parse_documents,
            read_input,
        )

        # The other kinds are collected in the pass that reads nodes and pods: the file is walked once.
        others: Others = {kind: [] for kind in ("ConfigMap", "Device", *CONFINEMENT_KINDS, *DRA_KINDS)}
        # A bad value is a finding (invalid-value) and a skipped object a warning: both through load_warnings.
        nodes, file_pods = parse_documents(read_input(options["from_file"]), load_warnings, others)
        return audit(nodes, file_pods, configmaps_of(others, load_warnings),
                     devices=devices_found(others, nodes, load_warnings),
                     confinement=confinement_of(others, load_warnings),
                     dra_objects=dra_of(others, load_warnings, classes=True, tally=True, nodes=nodes, resolve=True))
    from kubectl_gpushare.inspect.source import (
        confinement_from_api,
        dra_from_api,
        koordinator_devices,
        needs_permission,
    )
    from kubectl_gpushare.kube import errors, stacks, types

    with make_client(options, "doctor") as client:
        with needs_permission("list nodes", "doctor"):
            nodes = client.list_nodes(on_skip=load_warnings.add)
        try:
            configmaps = client.list(types.CONFIGMAPS, protocol.UNHEALTHY_CM_NAMESPACE, on_skip=load_warnings.add)
        except errors.Forbidden:
            configmaps = []  # the other checks still stand

        def pods() -> Iterator[Pod]:
            seen = 0
            with needs_permission("list pods in all namespaces", "doctor"):  # read as `audit` goes
                for page in client.list_pages(types.PODS, page_size=POD_PAGE_SIZE, on_skip=load_warnings.add):
                    yield from page.items
                    seen += len(page.items)
                    progress(seen)

        def reread(names: Sequence[str]) -> Iterator[Pod]:
            """Pods on a few nodes, one request each; past `REREAD_PER_NODE` nodes, one more full list.

            A name with characters a field selector would need escaped (no real node has them) is
            read through the full list too.
            """
            with needs_permission("list pods in all namespaces", "doctor"):
                if len(names) <= REREAD_PER_NODE and all(_SELECTABLE_NAME.fullmatch(name) for name in names):
                    for name in names:
                        yield from client.list(types.PODS, field_selector=f"spec.nodeName={name}",
                                               on_skip=load_warnings.add)
                    return
                wanted = set(names)
                for page in client.list_pages(types.PODS, page_size=POD_PAGE_SIZE, on_skip=load_warnings.add):
                    yield from (pod for pod in page.items if pod.spec.node_name in wanted)

        usage = None
        if options.get("usage"):
            from kubectl_gpushare.inspect.usage import reports_from_plugins, usage_timeout

            sharing = [n.metadata.name for n in nodes if str(n.status.capacity.get(protocol.RESOURCE_MEM, "0")) != "0"]
            usage = reports_from_plugins(client, sharing, load_warnings, usage_timeout(options["request_timeout"]))
        devices = koordinator_devices(client, nodes, stacks.AUTO, load_warnings)
        confinement = confinement_from_api(client, load_warnings)
        objects = dra_from_api(client, load_warnings, claims=True, classes=True, tally=True, nodes=nodes,
                               resolve=True)
        return audit(nodes, pods(), configmaps, reread, usage, devices, confinement, objects)


@click.command(
    "doctor",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Output format.")
@click.option("--no-headers", is_flag=True, help="Leave out the header row.")
@click.option(
    "--stuck-after",
    type=FiniteFloatRange(0, 86_400 * 365),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Report bound pods still ASSIGNED=false after this long.",
)
@click.option(
    "--usage", is_flag=True,
    help="Also ask each device plugin what its pods use (pods/proxy, as top does): finds gpu-over-share.",
)  # fmt: skip
@limit_options
@from_file_option
@kube_options
def doctor_command(**options: Any) -> None:
    """Audit a gpushare install: the verdict, then one line per finding; the exit code is the verdict.

    The text shows the first --limit findings (and, when it leaves some out, a count per check).
    """
    if options["usage"] and options["from_file"] is not None:
        raise click.UsageError("--usage asks the device plugins of a cluster; it cannot read --from-file")
    verdict: list[int] = []

    def render(audited: _Audited, opts: dict[str, Any]) -> str:
        from kubectl_gpushare.inspect import caps, doctor

        verdict.append(audited.report.exit_code)
        if opts["output"] == "json":
            return doctor.to_json(audited.report)
        return doctor.to_text(audited.report, headers=not opts["no_headers"], limit=caps.limit_of(opts))

    run(dict(options, nodes=(), selector=None), render=render, load=_load)
    raise click.exceptions.Exit(verdict[0] if verdict else 0)
