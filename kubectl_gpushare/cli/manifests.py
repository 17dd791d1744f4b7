"""``kubectl gpushare manifests``: print the install manifests, ready for ``kubectl apply -f -``.

The YAML files in the repository's ``manifests/`` folder are the single source: the package ships
them through the ``_manifests`` link, so what is printed is exactly what is reviewed in git.
"""

from __future__ import annotations

from importlib import resources

import click

from kubectl_gpushare import __version__

DEFAULT_IMAGE = "ghcr.io/kubectl-gpushare/kubectl-gpushare:" + __version__
"""The image the manifests in git name; ``--image`` replaces it."""
COMPONENTS = {
    "extender": "extender.yaml",
    "device-plugin": "device-plugin.yaml",
    "scheduler-config": "kube-scheduler-config.yaml",
}
"""Component -> file. ``scheduler-config`` is a kube-scheduler file, not an API object, so ``all``
leaves it out."""


def read_manifest(component: str) -> str:
    """The text of one component's manifest file as shipped in the package."""
    return (resources.files("kubectl_gpushare.cli") / "_manifests" / COMPONENTS[component]).read_text()


def render(components: list[str], image: str) -> str:
    """Concatenate the chosen manifests as one YAML stream with the image replaced."""
    documents = [read_manifest(component).replace(DEFAULT_IMAGE, image).strip() + "\n" for component in components]
    return "---\n".join(documents)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--only",
    "only",
    type=click.Choice(["all", *COMPONENTS]),
    default="all",
    show_default=True,
    help="Print one component; 'scheduler-config' is the KubeSchedulerConfiguration for kube-scheduler's --config.",
)
@click.option("--image", default=DEFAULT_IMAGE, show_default=True, help="Container image to run.")
def manifests_command(*, only: str, image: str) -> None:
    """Print the manifests that install the extender and the device plugin.

    \b
    Example:
      kubectl gpushare manifests | kubectl apply -f -
      kubectl gpushare manifests --only scheduler-config > /etc/kubernetes/gpushare-scheduler.yaml
    """  # noqa: D301 - click's \b paragraph marker must stay a real backspace escape
    components = ["extender", "device-plugin"] if only == "all" else [only]
    click.echo(render(components, image), nl=False)
