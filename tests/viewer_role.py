"""The shipped ``gpushare-viewer`` ClusterRole, read from the manifest at test time, and tokens that hold it.

A test's read-only user holds Kubernetes' ``view`` (the sandbox's `READONLY_TOKEN` rules) and, through
`viewer_kubeconfig`, the rules ``manifests/viewer/viewer.yaml`` ships (the one file every install carries),
or the rules an install left on the sandbox: the manifest is what is tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubectl_gpushare.sandbox.server import Sandbox

VIEWER_MANIFEST = Path(__file__).parents[1] / "manifests" / "viewer" / "viewer.yaml"
TOKEN = "viewer-and-gpushare-viewer"
USER = "alice"


def viewer_rules() -> list[dict[str, Any]]:
    """The rules of the ClusterRole ``gpushare-viewer`` as the manifest writes them."""
    (role,) = [doc for doc in yaml.safe_load_all(VIEWER_MANIFEST.read_text()) if doc]
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "gpushare-viewer")
    return list(role["rules"])


def viewer_kubeconfig(sandbox: Sandbox, path: Path, rules: list[dict[str, Any]] | None = None) -> Path:
    """A kubeconfig whose user holds ``view`` and ``gpushare-viewer`` (both bound cluster-wide).

    ``rules``: the role's rules as an install applied them (default: the manifest's, `viewer_rules`).
    """
    sandbox.add_token(TOKEN, USER, readonly=True, rules=viewer_rules() if rules is None else rules)
    return sandbox.write_kubeconfig(path, token=TOKEN)
