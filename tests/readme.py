"""README.md's example output, generated from the demo cluster so it stays true.

``.venv/bin/python -m tests.readme --update`` starts ``kubectl gpushare demo --keep`` (the README's
demo command, left running), runs each command shown in the README against it, and rewrites the
blocks between ``<!-- readme-output: NAME -->`` and ``<!-- /readme-output -->`` in README.md, plus
``docs/inspect-pretty.svg`` (``-o pretty`` drawn by rich's SVG export). Without ``--update`` it
only compares and exits 1 when anything differs; ``tests/integration/core/test_readme.py`` does
the same inside pytest. The demo places its pods one after another, so the output is the same on
every run; the one varying value, the sandbox's port, is shown as ``PORT``.
"""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SVG = ROOT / "docs" / "inspect-pretty.svg"
UPDATE_COMMAND = ".venv/bin/python -m tests.readme --update"

COMMANDS: dict[str, tuple[str, list[str]]] = {
    "inspect": ("kubectl inspect gpushare", ["kubectl-inspect-gpushare"]),
    "inspect-d": ("kubectl inspect gpushare -d gpu-node-3", ["kubectl-inspect-gpushare", "-d", "gpu-node-3"]),
    "fit": ("kubectl gpushare fit 16", ["kubectl-gpushare", "fit", "16"]),
    "doctor": ("kubectl gpushare doctor", ["kubectl-gpushare", "doctor"]),
    "top": ("kubectl gpushare top -A", ["kubectl-gpushare", "top", "-A"]),
}
"""Block name -> (the command as the README shows it, the installed script and arguments that run it)."""

BLOCK_NAMES = ("demo", *COMMANDS)

PRETTY = ["kubectl-inspect-gpushare", "-o", "pretty"]
PRETTY_WIDTH = 100
BLOCK = re.compile(r"(<!-- readme-output: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /readme-output -->)", re.S)


@contextmanager
def demo_cluster() -> Iterator[tuple[str, str]]:
    """Run ``demo --keep``; yield its kubeconfig path and the tutorial lines it printed before the views."""
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="gpr") as short_tmp:
        process = subprocess.Popen([str(bin_dir / "kubectl-gpushare"), "demo", "--keep"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=short_tmp))
        try:
            assert process.stdout is not None
            lines: list[str] = []
            kubeconfig = ""
            for line in process.stdout:
                if line.strip().startswith("export KUBECONFIG="):
                    kubeconfig = line.strip().split("=", 1)[1]
                if line.startswith("Press Ctrl-C"):
                    break
                lines.append(line)
            if not kubeconfig:
                raise RuntimeError("demo --keep did not start: " + (process.stderr.read() if process.stderr else ""))
            tutorial = "".join(lines).split("\n$ kubectl inspect gpushare", 1)[0]
            yield kubeconfig, re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", tutorial)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.communicate()


def _run(argv: list[str], env: dict[str, str]) -> str:
    bin_dir = Path(sys.executable).parent
    result = subprocess.run([str(bin_dir / argv[0]), *argv[1:]], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=60, check=False)
    return result.stdout


def generate() -> tuple[dict[str, str], str]:
    """Every README block (name -> fenced text) and the SVG, from a fresh demo cluster."""
    from rich.console import Console
    from rich.text import Text

    with demo_cluster() as (kubeconfig, tutorial), tempfile.TemporaryDirectory(prefix="gpr-cache") as cache:
        env = dict(os.environ, KUBECONFIG=kubeconfig, KUBECACHEDIR=cache)
        env.pop("FORCE_COLOR", None)
        env["NO_COLOR"] = "1"
        blocks = {"demo": f"```console\n$ .venv/bin/kubectl-gpushare demo\n{tutorial.rstrip()}\n...\n```\n"}
        for name, (shown, argv) in COMMANDS.items():
            blocks[name] = f"```console\n$ {shown}\n{_run(argv, env).rstrip()}\n```\n"
        color_env = dict(env, FORCE_COLOR="1", COLUMNS=str(PRETTY_WIDTH), TERM="xterm-256color")
        color_env.pop("NO_COLOR")
        pretty = _run(PRETTY, color_env)
    console = Console(record=True, width=PRETTY_WIDTH, file=open(os.devnull, "w"), force_terminal=True)  # noqa: SIM115
    console.print(Text.from_ansi(pretty.rstrip("\n")))
    svg = console.export_svg(title="kubectl inspect gpushare -o pretty")
    console.file.close()
    return blocks, svg


def render(readme: str, blocks: dict[str, str]) -> str:
    """README text with each marked block replaced; a marker naming no generated block is an error."""
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in blocks:
            raise KeyError(f"README.md marks an unknown output block {name!r}")
        return match.group(1) + blocks[name] + match.group(4)

    return BLOCK.sub(replace, readme)


def svg_text(svg: str) -> str:
    """The characters an SVG shows, without the markup and spacing rich's versions write differently."""
    shown = html.unescape("".join(re.findall(r">([^<>]*)</text>", svg)))
    return re.sub(r"\s+", "", shown)


def stale(blocks: dict[str, str], svg: str) -> list[str]:
    """The files whose committed text differs from what was generated."""
    out = []
    if render(README.read_text(), blocks) != README.read_text():
        out.append("README.md")
    if not SVG.exists() or svg_text(SVG.read_text()) != svg_text(svg):
        out.append(str(SVG.relative_to(ROOT)))
    return out


def main(argv: list[str]) -> int:
    blocks, svg = generate()
    if "--update" in argv:
        README.write_text(render(README.read_text(), blocks))
        SVG.parent.mkdir(exist_ok=True)
        SVG.write_text(svg)
        print(f"updated README.md and {SVG.relative_to(ROOT)}")
        return 0
    differing = stale(blocks, svg)
    if differing:
        print(f"out of date: {', '.join(differing)}; run `{UPDATE_COMMAND}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
