"""``kubectl gpushare manifests``: print the install manifests, ready for ``kubectl apply -f -``.

The kustomize trees in the repository's ``manifests/`` folder are the single source: the package
ships them through the ``_manifests`` link, and this command builds them (`kustomize.build`) into
the same stream ``kubectl kustomize manifests/`` (or ``manifests/managed``, ``manifests/dra-only``) prints.
Every install carries the ClusterRole ``gpushare-viewer`` (``manifests/viewer``, listed by ``base`` and
by ``dra-only``); ``manifests/dra`` is the driver's kustomize Component, which ``dra-only`` and mixed
overlays list, and which kustomize also builds on its own (the driver without the viewer, as before).
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable

import click

from kubectl_gpushare import __version__

DEFAULT_IMAGE = "ghcr.io/kubectl-gpushare/kubectl-gpushare:" + __version__
"""The image the manifests in git name; ``--image`` replaces it."""
SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:v1.34.1"
"""The second scheduler's image in ``manifests/managed``; ``--scheduler-image`` replaces it."""
COMPONENTS = {
    "extender": "base/extender.yaml",
    "device-plugin": "base/device-plugin.yaml",
    "viewer": "viewer/viewer.yaml",
    "scheduler-config": "kube-scheduler-config.yaml",
    "certificates": "managed/certificates.yaml",
    "scheduler": "managed/scheduler.yaml",
    "webhook": "managed/webhook.yaml",
    "dra-driver": "dra/dra-driver.yaml",
    "device-class": "dra/deviceclass.yaml",
}
"""Component -> file. ``scheduler-config`` is a kube-scheduler file, not an API object, so it is in no tree."""
MANAGED_ONLY = ("certificates", "scheduler", "webhook")
DRA_ONLY = ("dra-driver", "device-class")


def manifests_root() -> Traversable:
    """The shipped copy of ``manifests/``."""
    return resources.files("kubectl_gpushare.cli") / "_manifests"


def read_manifest(component: str) -> str:
    """The text of one component's manifest file as shipped in the package."""
    node = manifests_root()
    for part in COMPONENTS[component].split("/"):
        node = node / part
    return node.read_text(encoding="utf-8")


_REFERENCE_CHARACTERS = re.compile(r"[A-Za-z0-9._:/@+\[\]-]+")
"""Every character an image reference may hold (distribution/reference, reference.go's grammar: names,
tags, digests, ports and bracketed IPv6 hosts)."""


def _image(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Refuse, on one line, an image that could not be a reference (a space, a newline, a ``{``): no node pulls it."""
    if not _REFERENCE_CHARACTERS.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not an image reference", param=param)
    return value


def _key(doc: dict[str, object]) -> tuple[str, str, str]:
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return str(doc.get("kind")), str(meta.get("namespace", "")), str(meta.get("name", ""))


def render(*, managed: bool = False, dra: bool = False, only: str = "all", image: str = DEFAULT_IMAGE,
           scheduler_image: str = SCHEDULER_IMAGE) -> str:
    """The chosen tree (or one component of it) as one YAML stream, with the images replaced.

    The stream is what ``kubectl kustomize`` prints for the tree, byte for byte (kustomize's object
    order, `kustomize.legacy_order`, and its YAML, `goyaml.dump_all`); ``--only`` keeps a part of it.

    Raises:
        kustomize.KustomizeError: the shipped tree does not build (a packaging bug).
    """
    import yaml

    from kubectl_gpushare.cli.goyaml import dump_all
    from kubectl_gpushare.cli.kustomize import KustomizeError, build

    if only == "scheduler-config":
        return read_manifest(only).strip() + "\n"
    documents = build(manifests_root(), "dra-only" if dra else "managed" if managed else ".")
    if only != "all":
        wanted = {_key(doc) for doc in yaml.safe_load_all(read_manifest(only)) if doc}
        documents = [doc for doc in documents if _key(doc) in wanted]
    swapped = [_swap(doc, ((DEFAULT_IMAGE, image), (SCHEDULER_IMAGE, scheduler_image))) for doc in documents]
    try:
        return dump_all(swapped)
    except RecursionError:  # read within kustomize's limit, but the dumper recurses more per level
        raise KustomizeError("an object is nested too deeply to write") from None


def _swap(node: object, images: tuple[tuple[str, str], ...]) -> object:
    """``node`` with each shipped image replaced in its strings, before dumping, so the dumper quotes what needs it."""
    if isinstance(node, dict):
        return {key: _swap(value, images) for key, value in node.items()}
    if isinstance(node, list):
        return [_swap(value, images) for value in node]
    if isinstance(node, str):
        for shipped, chosen in images:
            node = node.replace(shipped, chosen)
    return node


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--managed", is_flag=True,
              help="The install for managed control planes (EKS, GKE, AKS): adds a second kube-scheduler, the "
                   "webhook that sends GPU pods to it, and their cert-manager certificates.")
@click.option("--dra", is_flag=True,
              help="The DRA driver instead (Kubernetes 1.34+): its DaemonSet, RBAC and DeviceClass, and the "
                   "gpushare-viewer role; kube-scheduler allocates GPU memory itself, no extender.")
@click.option(
    "--only",
    "only",
    type=click.Choice(["all", *COMPONENTS]),
    default="all",
    show_default=True,
    help="Print one component; 'scheduler-config' is the KubeSchedulerConfiguration for kube-scheduler's --config.",
)
@click.option("--image", default=DEFAULT_IMAGE, show_default=True, callback=_image, help="Container image to run.")
@click.option("--scheduler-image", default=SCHEDULER_IMAGE, show_default=True, callback=_image,
              help="kube-scheduler image for --managed; use your control plane's version.")
def manifests_command(*, managed: bool, dra: bool, only: str, image: str, scheduler_image: str) -> None:
    """Print the manifests that install the extender and the device plugin, or the DRA driver (--dra).

    \b
    Example:
      kubectl gpushare manifests | kubectl apply -f -
      kubectl gpushare manifests --managed --scheduler-image registry.k8s.io/kube-scheduler:v1.31.4 | kubectl apply -f -
      kubectl gpushare manifests --only scheduler-config > /etc/kubernetes/gpushare-scheduler.yaml
      kubectl gpushare manifests --dra | kubectl apply -f -
    """  # noqa: D301 - click's \b paragraph marker must stay a real backspace escape
    if managed and dra:
        raise click.UsageError("--managed and --dra are two different installs; pick one")
    if only in MANAGED_ONLY and not managed:
        raise click.UsageError(f"--only {only} is part of the managed install; add --managed")
    if only in DRA_ONLY and not dra:
        raise click.UsageError(f"--only {only} is part of the DRA install; add --dra")
    if dra and only not in ("all", "viewer", *DRA_ONLY):  # every install carries the viewer
        raise click.UsageError(f"--only {only} is not part of the DRA install")
    from kubectl_gpushare.cli.kustomize import KustomizeError

    try:  # the whole stream is built before a byte is printed: a broken tree prints nothing half
        text = render(managed=managed, dra=dra, only=only, image=image, scheduler_image=scheduler_image)
    except (KustomizeError, OSError, UnicodeDecodeError) as exc:  # only a damaged installation gets here
        raise click.ClickException(f"the manifests shipped with kubectl-gpushare do not build ({exc}); "
                                   "reinstall the plugin") from None
    click.echo(text, nl=False)
