"""Regenerate the v1beta1 device-plugin modules from ``deviceplugin.proto`` with grpcio-tools.

Run ``python -m kubectl_gpushare.deviceplugin._api.regen`` after editing the proto. The proto is
compiled with the directory above the ``kubectl_gpushare`` package as include root, so the
descriptor is registered as ``kubectl_gpushare/deviceplugin/_api/deviceplugin.proto`` (a name no
other proto in the process can clash with) and the generated imports are absolute.

Generated files carry grpcio-tools' version check: the runtime grpcio and protobuf must be at least
the versions that generated them (see the dependency pins in setup.cfg).
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO = Path(__file__).with_name("deviceplugin.proto")
INCLUDE_ROOT = PROTO.parents[3]
RELATIVE_PROTO = PROTO.relative_to(INCLUDE_ROOT)
GENERATED = ("deviceplugin_pb2.py", "deviceplugin_pb2.pyi", "deviceplugin_pb2_grpc.py")


def generate(out_root: Path) -> list[Path]:
    """Compile the proto into ``out_root`` (package-relative layout); return the generated files."""
    from grpc_tools import protoc  # test/dev dependency, only needed here

    out_root.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{INCLUDE_ROOT}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        str(RELATIVE_PROTO),
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    return [out_root / RELATIVE_PROTO.parent / name for name in GENERATED]


def main() -> int:
    """Regenerate in place."""
    for path in generate(INCLUDE_ROOT):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
