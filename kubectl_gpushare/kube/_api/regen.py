"""Regenerate cel-spec's syntax and checked-expression modules from the protos here (see `kube.protoc`).

Run ``python -m kubectl_gpushare.kube._api.regen`` after updating a proto from google/cel-spec.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubectl_gpushare.kube import protoc

HERE = Path(__file__).parent
PROTOS = (HERE / "syntax.proto", HERE / "checked.proto")


def generate(out_root: Path) -> list[Path]:
    """Compile the protos into ``out_root`` (package-relative layout); return the generated files."""
    return protoc.generate(PROTOS, out_root, grpc=False)


if __name__ == "__main__":
    sys.exit(protoc.regenerate(PROTOS, grpc=False))
