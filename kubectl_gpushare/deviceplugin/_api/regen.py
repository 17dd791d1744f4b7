"""Regenerate the v1beta1 device-plugin modules from ``deviceplugin.proto`` (see `kube.protoc`).

Run ``python -m kubectl_gpushare.deviceplugin._api.regen`` after editing the proto.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubectl_gpushare.kube import protoc

PROTOS = (Path(__file__).with_name("deviceplugin.proto"),)


def generate(out_root: Path) -> list[Path]:
    """Compile the proto into ``out_root`` (package-relative layout); return the generated files."""
    return protoc.generate(PROTOS, out_root)


if __name__ == "__main__":
    sys.exit(protoc.regenerate(PROTOS))
