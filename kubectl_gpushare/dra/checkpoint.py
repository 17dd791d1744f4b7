"""The driver's memory across restarts: which claims it prepared, with what, for which pods.

A versioned JSON document (``apiVersion``/``kind`` like our other documents) in the plugin
directory, rewritten atomically (temporary file, fsync, rename, fsync of the directory) after every
change, so a crash leaves the old or the new file, never half of one. kubelet keeps its own
checkpoint and does not prepare a claim twice; ours lets a restarted driver answer a repeated
NodePrepareResources from what it did (idempotent: same CDI ids, no second write), repair a CDI spec
that went missing, and hold pods to their claims' memory.

A file that cannot be read (another version, corrupt, too large) is moved aside, never overwritten,
and the driver starts empty: preparing a claim again rewrites the same spec, and unpreparing works
from the claim UID alone.
"""

from __future__ import annotations

import logging
import os
import time

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.files import replace_file

log = logging.getLogger(__name__)

API_VERSION = "gpushare.kubectl-gpushare.io/v1alpha1"
KIND = "DRAClaimCheckpoint"
FILE_NAME = "checkpoint.json"
MAX_BYTES = 16 * 2**20
"""Far above any real node (110 pods, a few claims each, is tens of KiB)."""
MAX_CLAIMS = 4096


class PreparedDevice(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """One allocation result prepared: what NodePrepareResources returned for it."""

    request: str
    device: str
    memory_bytes: int
    share_id: str | None = msgspec.field(default=None, name="shareID")


class ClaimPod(msgspec.Struct, frozen=True, gc=False):
    """A pod the claim was reserved for (``status.reservedFor``) when last read."""

    uid: str
    name: str = ""


class PreparedClaim(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """One claim prepared on this node."""

    namespace: str
    name: str
    pool: str
    gpu: int
    gpu_uuid: str
    memory_bytes: int
    cdi_ids: tuple[str, ...]
    devices: tuple[PreparedDevice, ...]
    env: dict[str, str]
    pods: tuple[ClaimPod, ...] = ()
    prepared_at: str = ""


class Checkpoint(msgspec.Struct, rename="camel", gc=False):
    """The whole document: claim UID -> what was prepared."""

    node: str
    claims: dict[str, PreparedClaim] = {}
    api_version: str = API_VERSION
    kind: str = KIND


_decoder = msgspec.json.Decoder(Checkpoint)
_encoder = msgspec.json.Encoder()


def _valid(uid: str, claim: PreparedClaim) -> bool:
    return (
        cgroups.valid_uid(uid)
        and protocol.valid_gpu_index(claim.gpu)
        and 0 < claim.memory_bytes <= protocol.MAX_INT64
        and len(claim.devices) <= 64
        and all(0 < device.memory_bytes <= claim.memory_bytes for device in claim.devices)
    )


def decode(data: bytes, node: str) -> Checkpoint:
    """Read a checkpoint; entries that fail the bounds are dropped with a warning.

    Raises:
        ValueError: too large, not the schema, or another version or node.
    """
    if len(data) > MAX_BYTES:
        raise ValueError(f"longer than {MAX_BYTES} bytes")
    if protocol.json_depth(data.decode("utf-8", "replace")) > 8:
        raise ValueError("nested too deeply")
    try:
        checkpoint = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(str(exc)) from None
    if checkpoint.api_version != API_VERSION or checkpoint.kind != KIND:
        raise ValueError(f"unknown version {checkpoint.api_version[:64]!r}/{checkpoint.kind[:64]!r}")
    if checkpoint.node != node:
        raise ValueError(f"written for node {checkpoint.node[:253]!r}, not {node!r}")
    if len(checkpoint.claims) > MAX_CLAIMS:
        raise ValueError(f"lists more than {MAX_CLAIMS} claims")
    for uid, claim in list(checkpoint.claims.items()):
        if not _valid(uid, claim):
            log.warning("checkpoint: dropping claim %r, whose entry is out of bounds", uid[:64])
            del checkpoint.claims[uid]
    return checkpoint


def encode(checkpoint: Checkpoint) -> bytes:
    """Serialise a checkpoint."""
    return _encoder.encode(checkpoint)


class CheckpointFile:
    """The checkpoint on disk (`load` once at start, `save` after every change)."""

    def __init__(self, directory: str, node: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, FILE_NAME)
        self.node = node
        self.saves = 0

    def load(self) -> Checkpoint:
        """The saved checkpoint, or an empty one (a missing file, or one moved aside as unreadable)."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return Checkpoint(self.node)
        try:
            return decode(data, self.node)
        except ValueError as exc:
            aside = f"{self.path}.unreadable-{int(time.time())}"
            log.error("checkpoint %s cannot be read (%s); moved to %s, starting with no prepared claims",
                      self.path, exc, aside)
            os.replace(self.path, aside)
            return Checkpoint(self.node)

    def save(self, checkpoint: Checkpoint) -> None:
        """Replace the file atomically and durably.

        Raises:
            OSError: the directory cannot be written.
        """
        data = encode(checkpoint)
        os.makedirs(self.directory, mode=0o750, exist_ok=True)
        replace_file(self.path, data, prefix=".checkpoint-")
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self.saves += 1
