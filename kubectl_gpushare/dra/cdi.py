"""One CDI spec file per prepared claim: the environment that pins a container to its GPU share.

The container runtime (containerd, CRI-O) reads ``*.json`` and ``*.yaml`` specs from the CDI
directories (``/etc/cdi``, ``/var/run/cdi``) and applies the edits of each CDI device kubelet names
for a container. A claim's spec has kind `protocol.DRA_CDI_KIND` and one device,
``<claim UID>-gpu-<index>``, whose ``containerEdits.env`` is what the device plugin's Allocate
returns (``NVIDIA_VISIBLE_DEVICES`` and the ``ALIYUN_COM_GPU_MEM_*`` variables): NVIDIA's container
runtime reads ``NVIDIA_VISIBLE_DEVICES`` from the environment either way. Formats: the CDI spec
(cncf-tags/container-device-interface SPEC.md); the file name is its ``GenerateTransientSpecName``
(``<vendor>-<class>_<claim UID>.json``), as NVIDIA's DRA driver names its per-claim specs.

Writes are atomic (a temporary file in the same directory, fsync, rename), so the runtime never
reads half a spec; the claim UID is checked to be a UUID before it becomes part of a file name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Literal

from kubectl_gpushare import protocol
from kubectl_gpushare.dra.claims import ClaimHolding
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.files import replace_file

VisibleMode = Literal["index", "uuid"]
SPEC_MODE = 0o644
"""World-readable, as the runtime (root, but maybe another user namespace) must read it; nothing secret."""


class InvalidClaimUidError(ValueError):
    """A claim UID that is not a UUID; it never becomes a file name."""


def spec_name(claim_uid: str) -> str:
    """The spec's file name (without directory).

    Raises:
        InvalidClaimUidError: the UID is not a lower-case UUID (what kube-apiserver assigns).
    """
    if not cgroups.valid_uid(claim_uid):
        raise InvalidClaimUidError(f"claim UID {claim_uid[:64]!r} is not a UUID")
    return f"{protocol.DRA_CDI_VENDOR}-{protocol.DRA_CDI_CLASS}_{claim_uid}.json"


def container_env(holding: ClaimHolding, visible: VisibleMode, cgpu_disable: bool = False) -> dict[str, str]:
    """The device plugin's Allocate environment for a claim's share of its GPU.

    ``ALIYUN_COM_GPU_MEM_POD`` and ``_CONTAINER`` are the claim's memory in the node's unit (every
    container that names the claim shares it), ``_DEV`` the GPU's.
    """
    gpu = holding.gpu
    env = {
        protocol.ENV_VISIBLE_DEVICES: gpu.uuid if visible == "uuid" else str(gpu.index),
        protocol.ENV_IDX: str(gpu.index),
        protocol.ENV_POD: str(holding.units),
        protocol.ENV_CONTAINER: str(holding.units),
        protocol.ENV_DEV: str(gpu.units),
    }
    if cgpu_disable:
        env[protocol.ENV_CGPU_DISABLE] = "true"
    return env


def spec(claim_uid: str, index: int, env: Mapping[str, str]) -> dict[str, object]:
    """The CDI spec document for one claim's GPU."""
    return {
        "cdiVersion": protocol.DRA_CDI_VERSION,
        "kind": protocol.DRA_CDI_KIND,
        "devices": [
            {
                "name": protocol.dra_cdi_device_name(claim_uid, index),
                "containerEdits": {"env": [f"{key}={value}" for key, value in sorted(env.items())]},
            }
        ],
    }


class CdiDir:
    """The CDI directory this driver writes its claims' specs into."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, claim_uid: str) -> str:
        """Where a claim's spec lives.

        Raises:
            InvalidClaimUidError: as `spec_name`.
        """
        return os.path.join(self.root, spec_name(claim_uid))

    def write(self, claim_uid: str, document: Mapping[str, object]) -> str:
        """Write a claim's spec atomically; return its path.

        Raises:
            InvalidClaimUidError: as `spec_name`; OSError: the directory cannot be written.
        """
        target = self.path(claim_uid)
        os.makedirs(self.root, mode=0o755, exist_ok=True)
        data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        replace_file(target, data, prefix=".gpushare-", mode=SPEC_MODE)
        return target

    def read(self, claim_uid: str) -> bytes | None:
        """A claim's spec as written, or None if there is none."""
        try:
            with open(self.path(claim_uid), "rb") as handle:
                return handle.read(1 << 16)
        except FileNotFoundError:
            return None

    def remove(self, claim_uid: str) -> bool:
        """Delete a claim's spec; False if there was none.

        Raises:
            InvalidClaimUidError: as `spec_name`; OSError: it exists but cannot be removed.
        """
        try:
            os.unlink(self.path(claim_uid))
        except FileNotFoundError:
            return False
        return True

    def claims(self) -> list[str]:
        """UIDs of the claims whose specs are in the directory now (ours only)."""
        prefix = f"{protocol.DRA_CDI_VENDOR}-{protocol.DRA_CDI_CLASS}_"
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            if name.startswith(prefix) and name.endswith(".json"):
                uid = name[len(prefix):-len(".json")]
                if cgroups.valid_uid(uid):
                    found.append(uid)
        return sorted(found)
