"""Command-line entry points: ``kubectl-gpushare`` and ``kubectl-inspect-gpushare``.

Only click and the standard library are imported here. Each subcommand lives in the package that
implements it and is imported when it runs (a lazy group), so ``--help`` stays fast and
``kubernetes``, ``grpc`` and ``rich`` are never loaded on the inspect path unless needed.
"""

from __future__ import annotations

import importlib

import click

from kubectl_gpushare import __version__

# name -> "module:attribute" of a click.Command; imported only when that command runs.
SUBCOMMANDS: dict[str, str] = {
    "inspect": "kubectl_gpushare.inspect.command:inspect_command",
    "label-nodes": "kubectl_gpushare.inspect.label_nodes:label_nodes_command",
    "serve-extender": "kubectl_gpushare.extender.command:serve_extender_command",
    "serve-device-plugin": "kubectl_gpushare.deviceplugin.command:serve_device_plugin_command",
    "sandbox": "kubectl_gpushare.cli.stack:sandbox_command",
    "demo": "kubectl_gpushare.cli.demo:demo_command",
    "manifests": "kubectl_gpushare.cli.manifests:manifests_command",
}

SHORT_HELP: dict[str, str] = {
    "inspect": "Show shared GPU memory, Allocated/Total per GPU (same as kubectl inspect gpushare).",
    "label-nodes": "Label GPU nodes gpushare=true so the device plugin runs there.",
    "serve-extender": "Run the GPU-share scheduler extender (HTTP).",
    "serve-device-plugin": "Run the GPU-memory device plugin for kubelet (gRPC).",
    "sandbox": "Run an embedded Kubernetes API server with a GPU cluster, for trying things out.",
    "demo": "Start a demo cluster in the sandbox and show the inspect views.",
    "manifests": "Print the Kubernetes manifests that install kubectl-gpushare.",
}

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def load_command(name: str) -> click.Command:
    """Import the click command registered under ``name``."""
    module_name, attribute = SUBCOMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(command, click.Command)
    return command


class LazyGroup(click.Group):
    """A group whose subcommands are imported on use; the listing in --help needs no import."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand name, sorted."""
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a subcommand only when it is about to run."""
        if cmd_name not in SUBCOMMANDS:
            return None
        return load_command(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List subcommands from static help text, so --help imports none of them."""
        rows = [(name, SHORT_HELP[name]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="kubectl-gpushare")
def gpushare() -> None:
    """Share NVIDIA GPUs by memory on Kubernetes (wire-compatible with Alibaba's gpushare)."""


def main() -> None:
    """Console script ``kubectl-gpushare`` (``kubectl gpushare ...``)."""
    gpushare(prog_name="kubectl gpushare")


def inspect_main() -> None:
    """Console script ``kubectl-inspect-gpushare`` (``kubectl inspect gpushare ...``)."""
    load_command("inspect")(prog_name="kubectl inspect gpushare")


if __name__ == "__main__":  # pragma: no cover
    main()
