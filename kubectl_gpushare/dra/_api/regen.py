"""Regenerate the kubelet DRA and plugin-registration modules from the protos here (see `kube.protoc`).

Run ``python -m kubectl_gpushare.dra._api.regen`` after updating a proto from kubernetes/kubelet.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubectl_gpushare.kube import protoc

HERE = Path(__file__).parent
PROTOS = (HERE / "dra_v1.proto", HERE / "dra_v1beta1.proto", HERE / "pluginregistration_v1.proto")


def generate(out_root: Path) -> list[Path]:
    """Compile the protos into ``out_root`` (package-relative layout); return the generated files."""
    return protoc.generate(PROTOS, out_root)


if __name__ == "__main__":
    sys.exit(protoc.regenerate(PROTOS))
