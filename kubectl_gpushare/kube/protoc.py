"""Compile the vendored protos into Python modules with grpcio-tools (a dev tool).

The device plugin (`deviceplugin._api`), the DRA driver (`dra._api`) and the CEL cost bound
(`kube._api`: cel-spec's checked expression, read by `kube.cel_cost`) each keep their ``.proto``
files and the generated ``*_pb2.py``, ``*_pb2.pyi`` (and, for services, ``*_pb2_grpc.py``) beside
them; each has a ``regen`` module naming its protos and calling `generate` here. Protos are compiled with the
directory above the ``kubectl_gpushare`` package as include root, so a descriptor is registered
under its package path (``kubectl_gpushare/dra/_api/dra_v1.proto``): kubelet's protos are all named
``api.proto`` upstream, and two descriptors of one name cannot load in one process. The generated
imports are absolute.

Generated files carry grpcio-tools' version check: the runtime grpcio and protobuf must be at least
the versions that generated them (see the dependency pins in setup.cfg). Only `generate` imports
grpc_tools (a test and dev dependency); its bundled well-known protos (``google/protobuf/*.proto``)
are on the include path for the CEL protos that import them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

INCLUDE_ROOT = Path(__file__).resolve().parents[2]
"""The directory that holds the ``kubectl_gpushare`` package."""
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
MESSAGE_SUFFIXES = SUFFIXES[:2]
"""What a proto without services needs: no ``_pb2_grpc.py``."""


def outputs(proto: Path, out_root: Path, *, grpc: bool = True) -> list[Path]:
    """The modules `generate` writes for ``proto`` under ``out_root``."""
    relative = proto.resolve().relative_to(INCLUDE_ROOT)
    return [out_root / relative.parent / (proto.stem + suffix) for suffix in (SUFFIXES if grpc else MESSAGE_SUFFIXES)]


def generate(protos: Sequence[Path], out_root: Path, *, grpc: bool = True) -> list[Path]:
    """Compile ``protos`` into ``out_root`` (package-relative layout); return the generated files.

    ``grpc=False`` writes the message modules only (protos without services).

    Raises:
        RuntimeError: protoc failed (its messages are on stderr).
    """
    import grpc_tools  # test/dev dependency, only needed here
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    out_root.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{INCLUDE_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        *([f"--grpc_python_out={out_root}"] if grpc else []),
        *(str(proto.resolve().relative_to(INCLUDE_ROOT)) for proto in protos),
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    return [path for proto in protos for path in outputs(proto, out_root, grpc=grpc)]


def regenerate(protos: Sequence[Path], *, grpc: bool = True) -> int:
    """Regenerate in place (a ``regen`` module's ``main``)."""
    for path in generate(protos, INCLUDE_ROOT, grpc=grpc):
        print(f"wrote {path}")
    return 0
