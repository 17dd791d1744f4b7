"""Build the krew archive for kubectl-gpushare and write krew-manifest.yaml with its sha256.

    .venv/bin/python plugin/build_krew.py [--out dist/krew] [--manifest krew-manifest.yaml]

Naming: krew installs a plugin named ``gpushare`` as ``kubectl-gpushare``, so under krew the
commands are ``kubectl gpushare inspect ...`` and ``kubectl gpushare label-nodes``. The original
spelling ``kubectl inspect gpushare`` comes from the ``kubectl-inspect-gpushare`` console script
that ``pip install kubectl-gpushare`` puts on PATH (krew cannot install it: a krew plugin named
``inspect`` would be too generic, and ``inspect-gpushare`` would be ``kubectl inspect-gpushare``).

The archive holds the launcher (`launcher.sh`, as ``kubectl-gpushare``) and the project's wheel;
the code is pure Python, so one archive serves every platform. It is reproducible: file order,
owners, modes and times are fixed (``SOURCE_DATE_EPOCH``, default 2026-01-01), so the sha256
in the manifest changes only when the content does.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
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
    The plugin is written in Python. Its first run needs Python 3.10 or newer
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


def build_wheel(workdir: Path, epoch: int) -> Path:
    """Build the project's wheel from a clean copy of the source (no dependencies, no network)."""
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch))
    with tempfile.TemporaryDirectory(prefix="krew-source-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
             "-w", str(workdir), str(source_copy(Path(tmp)))],
            check=True, env=env,
        )  # fmt: skip
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
    from kubectl_gpushare import __version__

    parser = argparse.ArgumentParser(description="Build the krew archive and manifest.")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "krew", help="directory for the archive")
    parser.add_argument("--manifest", type=Path, default=ROOT / "krew-manifest.yaml", help="manifest to write")
    parser.add_argument("--version", default=__version__, help="plugin version (without the v)")
    parser.add_argument("--uri", default=None, help="download URL of the archive (default: GitHub release)")
    args = parser.parse_args(argv)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_EPOCH))
    archive = build_archive(args.out, args.version, epoch)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    uri = args.uri or f"{HOMEPAGE}/releases/download/v{args.version}/{archive.name}"
    args.manifest.write_text(manifest(args.version, uri, digest))
    print(f"{archive}  sha256 {digest}")
    print(f"{args.manifest} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
