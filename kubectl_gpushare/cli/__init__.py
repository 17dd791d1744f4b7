"""Command-line entry points: ``kubectl-gpushare`` and ``kubectl-inspect-gpushare``.

Only click and the standard library are imported here. Each subcommand lives in the package that
implements it and is imported when it runs (a lazy group), so ``--help`` stays fast and
``kubernetes``, ``grpc`` and ``rich`` are never loaded on the inspect path unless needed.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from kubectl_gpushare import __version__
from kubectl_gpushare.kube.errors import EXIT_CODES_HELP, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

# name -> "module:attribute" of a click.Command; imported only when that command runs.
SUBCOMMANDS: dict[str, str] = {
    "inspect": "kubectl_gpushare.inspect.command:inspect_command",
    "label-nodes": "kubectl_gpushare.inspect.label_nodes:label_nodes_command",
    "serve-extender": "kubectl_gpushare.extender.command:serve_extender_command",
    "serve-device-plugin": "kubectl_gpushare.deviceplugin.command:serve_device_plugin_command",
    "serve-dra-driver": "kubectl_gpushare.dra.command:serve_dra_driver_command",
    "sandbox": "kubectl_gpushare.cli.stack:sandbox_command",
    "demo": "kubectl_gpushare.cli.demo:demo_command",
    "doctor": "kubectl_gpushare.inspect.doctor_command:doctor_command",
    "explain": "kubectl_gpushare.inspect.explain_command:explain_command",
    "fit": "kubectl_gpushare.inspect.fit_command:fit_command",
    "manifests": "kubectl_gpushare.cli.manifests:manifests_command",
    "top": "kubectl_gpushare.inspect.top_command:top_command",
}

SHORT_HELP: dict[str, str] = {
    "inspect": "Show shared GPU memory, Allocated/Total per GPU (same as kubectl inspect gpushare).",
    "label-nodes": "Label GPU nodes gpushare=true so the device plugin runs there.",
    "serve-extender": "Run the GPU-share scheduler extender (HTTP).",
    "serve-device-plugin": "Run the GPU-memory device plugin for kubelet (gRPC).",
    "serve-dra-driver": "Run the DRA driver for shared GPU memory (Kubernetes 1.34+, gRPC).",
    "sandbox": "Run an embedded Kubernetes API server with a GPU cluster, for trying things out.",
    "demo": "Start a demo cluster in the sandbox and show the inspect views.",
    "doctor": "Audit the install: one line per finding; exit 0 clean, 11 warnings, 12 errors.",
    "explain": "Why a pod is Pending (does not fit), or where it runs and who shares its GPU.",
    "fit": "How many pods of N GPU memory fit, on which nodes and GPUs (the extender's rule).",
    "manifests": "Print the Kubernetes manifests that install kubectl-gpushare.",
    "top": "What each shared GPU and pod really uses, beside its share; OVER where a pod exceeds it.",
}

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def load_command(name: str) -> click.Command:
    """Import the click command registered under ``name``, with the shared exit-code table in its help.

    The table is added here, once, so every command lists the same codes without each module
    repeating (and drifting from) the text.
    """
    module_name, attribute = SUBCOMMANDS[name].split(":")
    command = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(command, click.Command)
    if EXIT_CODES_HELP not in (command.epilog or ""):
        command.epilog = f"{command.epilog.rstrip()}\n\n{EXIT_CODES_HELP}" if command.epilog else EXIT_CODES_HELP
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


@click.group(
    cls=LazyGroup, context_settings=CONTEXT_SETTINGS, invoke_without_command=True, epilog=EXIT_CODES_HELP
)
@click.version_option(__version__, "--version", prog_name="kubectl-gpushare")
@click.pass_context
def gpushare(ctx: click.Context) -> None:
    """Share NVIDIA GPUs by memory on Kubernetes (wire-compatible with Alibaba's gpushare)."""
    if ctx.invoked_subcommand is None:
        # kubectl prints its help and succeeds when run bare; so do we (stdout, exit 0).
        click.echo(ctx.get_help())
        ctx.exit(EXIT_OK)


def _one_line(text: str) -> str:
    from kubectl_gpushare.protocol import one_line  # only once an error is written: --help stays light

    return one_line(text)


def run_command(command: click.Command, prog_name: str, args: list[str] | None = None) -> None:
    """Run a click command the kubectl way: errors are one ``error: ...`` line, codes from one table.

    click's own usage errors (unknown flag, bad value, missing argument) become one line on stderr
    and exit 2 instead of click's usage block; Ctrl-C exits 130 at once, without a traceback.
    """
    try:
        result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} -h')" if exc.ctx is not None else ""
        click.echo(f"error: {_one_line(exc.format_message())}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def main() -> None:
    """Console script ``kubectl-gpushare`` (``kubectl gpushare ...``)."""
    run_command(gpushare, "kubectl gpushare")


COBRA_NO_FILE_COMPLETION = ":4"
"""The directive line kubectl expects after a plugin's completions (ShellCompDirectiveNoFileComp)."""


def _complete(command: click.Command, prog_name: str) -> None:
    """Answer one kubectl plugin completion request for ``command``.

    kubectl runs the completer with the words typed after the plugin's name, the last one being
    completed, and reads one ``value<TAB>description`` per line then a directive line, as cobra
    prints them. The answers come from click's completion of the same command: subcommands, flags,
    choices, and node, pod, namespace and context names (`kube.completion`).
    """
    from click.shell_completion import ShellComplete

    words = sys.argv[1:] or [""]
    completer = ShellComplete(command, {}, prog_name, "_KUBECTL_GPUSHARE_COMPLETE")
    lines = []
    for item in completer.get_completions(words[:-1], words[-1]):
        help_text = " ".join((item.help or "").split())  # cobra's format: one line a completion
        lines.append(f"{item.value}\t{help_text}" if help_text else str(item.value))
    try:
        sys.stdout.write("".join(f"{line}\n" for line in [*lines, COBRA_NO_FILE_COMPLETION]))
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def complete_main() -> None:
    """Console script ``kubectl_complete-gpushare``: kubectl's plugin completion (kubectl 1.26+)."""
    _complete(gpushare, "kubectl gpushare")


def complete_inspect_main() -> None:
    """Console script ``kubectl_complete-inspect-gpushare`` for ``kubectl inspect gpushare``.

    kubectl names a plugin's completer from its command path: each word's dashes become
    underscores, the words are joined with dashes, and ``_complete`` goes before the first
    (``plugin_completion.go``, ``pluginCompletion`` and ``lookupCompletionExec``), so
    ``kubectl inspect gpushare`` looks for ``kubectl_complete-inspect-gpushare``.
    """
    _complete(load_command("inspect"), "kubectl inspect gpushare")


def inspect_main() -> None:
    """Console script ``kubectl-inspect-gpushare`` (``kubectl inspect gpushare ...``)."""
    run_command(load_command("inspect"), "kubectl inspect gpushare")


if __name__ == "__main__":  # pragma: no cover
    main()
