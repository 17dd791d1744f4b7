"""Build the krew archive for kubectl-gpushare and write krew-manifest.yaml with its sha256.

    .venv/bin/python plugin/build_krew.py [--out dist/krew] [--manifest krew-manifest.yaml]

Naming: krew installs a plugin named ``gpushare`` as ``kubectl-gpushare``, so under krew the
commands are ``kubectl gpushare inspect ...`` and ``kubectl gpushare label-nodes``. The original
spelling ``kubectl inspect gpushare`` comes from the ``kubectl-inspect-gpushare`` console script
that ``pip install kubectl-gpushare`` puts on PATH (krew cannot install it: a krew plugin named
``inspect`` would be too generic, and ``inspect-gpushare`` would be ``kubectl inspect-gpushare``).

The archive holds the launcher (`launcher.sh`, as ``kubectl-gpushare``) and the project's wheel;
the code is pure Python, so one archive serves every platform. It is reproducible: file order,
owners, modes and times are fixed (``SOURCE_DATE_EPOCH``, default 2026-01-01), and the wheel is
built in pip's isolated build environment with the build backend pinned (`BUILD_PINS`: the wheel's
``WHEEL`` and ``METADATA`` files name and depend on it), whatever the calling venv holds. So the
sha256 in the manifest changes only when the content does, and any venv of the project with pip
and access to its package index builds the same archive. After a change to the package (or to
README.md, the wheel's long description), run this script and commit krew-manifest.yaml:
tests/integration/inspect/test_plugin.py checks that its digest is the archive's.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
PLUGIN_NAME: Final = "gpushare"
HOMEPAGE: Final = "https://github.com/kubectl-gpushare/kubectl-gpushare"
DEFAULT_EPOCH: Final = 1767225600  # 2026-01-01T00:00:00Z
PLATFORMS: Final = (("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"), ("darwin", "arm64"))
BUILD_PINS: Final = ("setuptools==84.2.1",)
"""The build backend the archive's wheel is made with (pip installs it into an isolated build env)."""

MANIFEST: Final = """\
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: {name}
spec:
  version: "v{version}"
  homepage: {homepage}
  shortDescription: Share NVIDIA GPUs by memory (gpushare)
  description: |
    kubectl-gpushare shows and manages GPU memory sharing in clusters that run
    Alibaba's gpushare scheduler extender and device plugin, or their
    kubectl-gpushare successors. `kubectl gpushare inspect` prints Allocated/Total
    shared GPU memory per node and GPU, byte-compatible with kubectl
    inspect gpushare, plus JSON, YAML, CSV and coloured views.
    `kubectl gpushare label-nodes` marks GPU nodes for the device plugin.
  caveats: |
    The plugin is written in Python. Its first run needs Python 3.11 or newer
    (python3, or set KUBECTL_GPUSHARE_PYTHON) and access to PyPI: it installs
    itself into a private virtual environment under ~/.local/share/kubectl-gpushare.
    Reading needs get/list on nodes and list on pods in all namespaces.
    For the original spelling `kubectl inspect gpushare`, use
    `pip install kubectl-gpushare` instead.
  platforms:
{platforms}"""

PLATFORM: Final = """\
  - selector:
      matchLabels:
        os: {os}
        arch: {arch}
    uri: {uri}
    sha256: {sha256}
    bin: kubectl-gpushare
"""


def source_copy(target: Path) -> Path:
    """Copy the files git tracks (and untracked ones it does not ignore) into ``target``.

    The wheel is built from this copy, never from the checkout: setuptools reuses an in-tree
    ``build/`` directory, and a module deleted since would otherwise ride along in the archive.
    """
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source, destination = ROOT / name, target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # kubectl_gpushare/cli/_manifests points at manifests/
            destination.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, destination)
    return target


class BuildError(Exception):
    """The archive cannot be built here; the message says what is needed, in one line."""


def build_wheel(workdir: Path, epoch: int) -> Path:
    """Build the project's wheel from a clean copy of the source with the pinned backend.

    pip installs `BUILD_PINS` into an isolated build environment (``PIP_CONSTRAINT`` reaches
    that install), so neither the calling venv's setuptools nor its ``wheel`` matter.

    Raises:
        BuildError: pip is missing, or could not get the pinned backend or build the wheel.
    """
    if importlib.util.find_spec("pip") is None:
        raise BuildError(f"needs pip in {sys.executable} (python -m ensurepip)")
    with tempfile.TemporaryDirectory(prefix="krew-source-") as tmp:
        pins = Path(tmp) / "build-pins.txt"
        pins.write_text("".join(f"{pin}\n" for pin in BUILD_PINS))
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch), PIP_CONSTRAINT=str(pins))
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(workdir),
             str(source_copy(Path(tmp) / "source"))],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        raise BuildError(f"pip could not build the wheel with {', '.join(BUILD_PINS)} from the package index "
                         "(pip's output is above)")
    (wheel,) = workdir.glob("kubectl_gpushare-*.whl")
    return wheel


def _add(archive: tarfile.TarFile, name: str, data: bytes, mode: int, epoch: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = epoch
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    archive.addfile(info, io.BytesIO(data))


def build_archive(out: Path, version: str, epoch: int) -> Path:
    """Write ``kubectl-gpushare_v<version>.tar.gz`` into ``out`` and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp), epoch)
        launcher = (ROOT / "plugin" / "launcher.sh").read_text().replace("@VERSION@", version).encode()
        files = [("kubectl-gpushare", launcher, 0o755), (wheel.name, wheel.read_bytes(), 0o644)]
        license_file = ROOT / "LICENSE"
        if license_file.exists():
            files.append(("LICENSE", license_file.read_bytes(), 0o644))
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for name, data, mode in sorted(files):
                _add(archive, name, data, mode, epoch)
    path = out / f"kubectl-gpushare_v{version}.tar.gz"
    with open(path, "wb") as target, gzip.GzipFile(filename="", mode="wb", fileobj=target, mtime=0) as packed:
        packed.write(raw.getvalue())
    return path


def manifest(version: str, uri: str, sha256: str) -> str:
    """The krew manifest text for an archive at ``uri``."""
    platforms = "".join(PLATFORM.format(os=os_name, arch=arch, uri=uri, sha256=sha256) for os_name, arch in PLATFORMS)
    return MANIFEST.format(name=PLUGIN_NAME, version=version, homepage=HOMEPAGE, platforms=platforms)


def main(argv: list[str] | None = None) -> int:
    """Build the archive, then write the manifest that points at it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the version, from this checkout even where it is not installed
    from kubectl_gpushare import __version__

    parser = argparse.ArgumentParser(description="Build the krew archive and manifest.")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "krew", help="directory for the archive")
    parser.add_argument("--manifest", type=Path, default=ROOT / "krew-manifest.yaml", help="manifest to write")
    parser.add_argument("--version", default=__version__, help="plugin version (without the v)")
    parser.add_argument("--uri", default=None, help="download URL of the archive (default: GitHub release)")
    args = parser.parse_args(argv)
    try:
        epoch = int(os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_EPOCH))
    except ValueError:
        print("build_krew.py: SOURCE_DATE_EPOCH must be a number of seconds", file=sys.stderr)
        return 2
    try:
        archive = build_archive(args.out, args.version, epoch)
    except BuildError as exc:
        print(f"build_krew.py: {exc}", file=sys.stderr)
        return 2
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    uri = args.uri or f"{HOMEPAGE}/releases/download/v{args.version}/{archive.name}"
    args.manifest.write_text(manifest(args.version, uri, digest))
    print(f"{archive}  sha256 {digest}")
    print(f"{args.manifest} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
