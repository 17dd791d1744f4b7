"""The driver's memory across restarts: which claims it prepared, with what, for which pods.

Two files in the plugin directory. ``checkpoint.json`` is a versioned JSON document
(``apiVersion``/``kind`` like our other documents) holding every prepared claim, replaced
atomically (temporary file, fsync, rename, fsync of the directory). ``checkpoint.journal`` holds
what changed since, one JSON line per change (the claims one NodePrepareResources call prepared, or
the UIDs one NodeUnprepareResources call removed), appended and made durable with one fdatasync
before the call is answered: a change costs one sync of a few hundred bytes instead of rewriting
every claim with two syncs. At start, and whenever the journal passes `COMPACT_BYTES`, the document
is rewritten with everything and then the journal emptied; replaying a journal over a document that
already holds its changes gives the same claims, so a crash between the two steps loses nothing. A
crash in the middle of an append leaves a torn last line, which was never acknowledged and is
dropped. A failed append is cut off again (or, if that fails too, the next change rewrites both
files), so the journal never holds half a line followed by more.

kubelet keeps its own checkpoint and does not prepare a claim twice; ours lets a restarted driver
answer a repeated NodePrepareResources from what it did (idempotent: same CDI ids, no second write),
repair a CDI spec that went missing, and hold pods to their claims' memory.

A document that cannot be read (another version, corrupt, too large) is moved aside, never
overwritten, and the driver starts empty: preparing a claim again rewrites the same spec, and
unpreparing works from the claim UID alone. A journal line that cannot be read is the end of the
journal: what came before it is kept, the journal is moved aside.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.node import cgroups
from kubectl_gpushare.node.files import replace_file

log = logging.getLogger(__name__)

API_VERSION = "gpushare.kubectl-gpushare.io/v1alpha1"
KIND = "DRAClaimCheckpoint"
FILE_NAME = "checkpoint.json"
JOURNAL_NAME = "checkpoint.journal"
MAX_BYTES = 16 * 2**20
"""Far above any real node (110 pods, a few claims each, is tens of KiB); for the journal too."""
MAX_CLAIMS = 4096
COMPACT_BYTES = 2**20
"""A journal this long is folded into the document (every ~1500 preparations)."""
MAX_DEPTH = 8


class PreparedDevice(msgspec.Struct, frozen=True, rename="camel", gc=False):
    """One allocation result prepared: what NodePrepareResources returned for it."""

    request: str
    device: str
    memory_bytes: int
    share_id: str | None = msgspec.field(default=None, name="shareID")


class ClaimPod(msgspec.Struct, frozen=True, gc=False):
    """A pod the claim was reserved for (``status.reservedFor``) when last read.

    Pods that join the claim later are not recorded: `pod_claims` learns them from the API again
    after a restart, and the API, not a record, says whether they still exist.
    """

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


class JournalEntry(msgspec.Struct, omit_defaults=True, gc=False):
    """One change: the claims prepared by one call (UID -> record), or the UIDs one call unprepared."""

    prepared: dict[str, PreparedClaim] = {}
    unprepared: list[str] = []


Identity = tuple[int, int, int, int]
"""A file's (inode, size, mtime, ctime): any write or replacement changes it."""


class _Known(msgspec.Struct, frozen=True, gc=False):
    """The files as this process last read or wrote them: `CheckpointFile.reload` reads only what follows.

    ``checkpoint.claims`` may be the very dict the preparer then holds: callers never change a recorded
    mapping in place (each write builds a new one), so what is known stays what was saved.
    """

    checkpoint: Checkpoint
    document: Identity
    journal_inode: int
    journal_offset: int


def _identity(path: str) -> Identity | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


_decoder = msgspec.json.Decoder(Checkpoint)
_entry_decoder = msgspec.json.Decoder(JournalEntry)
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
    if protocol.json_depth(data.decode("utf-8", "replace")) > MAX_DEPTH:
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
    """The checkpoint on disk: `load` once at start, then `record` every change (`save` rewrites it all)."""

    def __init__(self, directory: str, node: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, FILE_NAME)
        self.journal_path = os.path.join(directory, JOURNAL_NAME)
        self.node = node
        self.saves = 0
        """Times the whole document was written."""
        self.records = 0
        """Changes appended to the journal."""
        self._journal: int | None = None
        self._journal_size = 0
        self._known: _Known | None = None
        self._signature: tuple[Identity | None, Identity | None] | None = None
        """`signature` as this process last read or wrote the files (`changed`)."""

    # --- reading -------------------------------------------------------------------------------

    def load(self) -> Checkpoint:
        """The saved claims (document plus journal), or none; folds a non-empty journal into the document.

        Raises:
            OSError: the directory cannot be written while folding the journal in.
        """
        checkpoint = self._load_document()
        try:
            with open(self.journal_path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except FileNotFoundError:
            self._signature = self.signature()
            return checkpoint
        if data:
            self._replay(data, checkpoint)
            self.save(checkpoint)
        else:
            self._open_journal(truncate=False)
            self._signature = self.signature()
        return checkpoint

    def reload(self) -> Checkpoint:
        """The claims the files hold now (document plus journal), without folding the journal in.

        For a driver sharing the files with another instance (a rolling update): called under the
        serialize lock (`serialize.SerializeLock`) at the start of each call, as the kubeletplugin
        helper's callers "load shared state from a file at the start of a call". The other instance
        may have appended to the journal we hold open (its size is read again, for `COMPACT_BYTES`)
        or compacted it (truncated in place: same file, and appends go to its end). An unreadable
        document or journal line is moved aside as in `load`. A torn last line (the other instance
        was killed mid-append, before it answered) is folded away at once, as `load` does: our
        next append must not land behind half a line.

        Only the journal lines appended since this process last read or wrote the files are read
        while the document is the one it knew: a compaction replaces the document before it empties
        the journal, so the same document means the journal only grew.

        Raises:
            OSError: the files cannot be read, or rewritten after a torn or unreadable journal.
        """
        known, document = self._known, _identity(self.path)
        if known is not None and document is not None and document == known.document:
            checkpoint, offset = Checkpoint(self.node, dict(known.checkpoint.claims)), known.journal_offset
        else:
            known, checkpoint, offset = None, self._load_document(), 0
            document = _identity(self.path)
        try:
            with open(self.journal_path, "rb") as handle:
                info = os.fstat(handle.fileno())
                inode = info.st_ino
                if known is not None and (inode != known.journal_inode or info.st_size < offset):
                    return self._reload_all()  # not the journal we knew: read everything again
                handle.seek(offset)
                data = handle.read(MAX_BYTES + 1)
        except FileNotFoundError:
            if known is not None:
                return self._reload_all()
            inode, data = 0, b""
        if data and not self._replay(data, checkpoint, offset):
            self.save(checkpoint)
            return checkpoint
        if self._journal is not None:
            self._journal_size = os.fstat(self._journal).st_size
        self._known = None if document is None else _Known(checkpoint, document, inode, offset + len(data))
        self._signature = self.signature()
        return Checkpoint(self.node, dict(checkpoint.claims))

    def _reload_all(self) -> Checkpoint:
        self._known = None
        return self.reload()

    def signature(self) -> tuple[Identity | None, Identity | None]:
        """The document's and the journal's `Identity`: changes whenever either is written."""
        return _identity(self.path), _identity(self.journal_path)

    def changed(self) -> bool:
        """Whether the files were written since this process last read (`load`, `reload`) or wrote them.

        Exact while whoever else writes them waits for us (a rolling update's serialize lock).
        """
        return self.signature() != self._signature

    def _load_document(self) -> Checkpoint:
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return Checkpoint(self.node)
        try:
            return decode(data, self.node)
        except ValueError as exc:
            aside = self._move_aside(self.path)
            log.error("checkpoint %s cannot be read (%s); moved to %s, starting with no prepared claims",
                      self.path, exc, aside)
            return Checkpoint(self.node)

    def _replay(self, data: bytes, checkpoint: Checkpoint, start: int = 0) -> bool:
        """Apply the journal's complete lines to ``checkpoint`` in order; stop at the first unreadable one.

        ``data`` is the journal from byte ``start`` on (`reload` reads only what is new): an unreadable
        line is named by its number after that byte, so that it can be found in the file moved aside.

        Returns:
            Whether every line was read (False: a torn last line dropped, or the journal moved aside).
        """
        lines = data.split(b"\n")
        torn = lines.pop()  # after the last newline: b"" unless an append was cut short
        if torn:
            log.warning("checkpoint journal %s ends in a torn line (an append cut short, never answered); dropped",
                        self.journal_path)
        problem = f"longer than {MAX_BYTES} bytes" if len(data) > MAX_BYTES else ""
        for number, line in enumerate(lines if not problem else [], start=1):
            try:
                if protocol.json_depth(line.decode("utf-8", "replace")) > MAX_DEPTH:
                    raise ValueError("nested too deeply")
                entry = _entry_decoder.decode(line)
            except (ValueError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                after = f" after byte {start}" if start else ""
                problem = f"line {number}{after}: {protocol.error_reason(exc)}"
                break
            for uid in entry.unprepared:
                checkpoint.claims.pop(uid, None)
            for uid, claim in entry.prepared.items():
                if not _valid(uid, claim):
                    log.warning("checkpoint journal: dropping claim %r, whose entry is out of bounds", uid[:64])
                elif uid in checkpoint.claims or len(checkpoint.claims) < MAX_CLAIMS:
                    checkpoint.claims[uid] = claim
        if problem:
            aside = self._move_aside(self.journal_path)
            log.error("checkpoint journal %s cannot be read past %s; moved to %s, keeping what came before",
                      self.journal_path, problem, aside)
        return not torn and not problem

    @staticmethod
    def _move_aside(path: str) -> str:
        """Rename ``path`` to ``<path>.unreadable-<time>`` (``-2``, ``-3``... after it if taken), replacing nothing.

        Two can come within one second: in a rolling update each instance re-reads the journal at
        every call (`reload`). Called under the serialize lock there, so no other instance renames
        meanwhile.
        """
        stamp = aside = f"{path}.unreadable-{int(time.time())}"
        taken = 1
        while os.path.lexists(aside):
            taken += 1
            aside = f"{stamp}-{taken}"
        os.replace(path, aside)
        return aside

    # --- writing -------------------------------------------------------------------------------

    def record(
        self,
        checkpoint: Checkpoint,
        *,
        prepared: Mapping[str, PreparedClaim] | None = None,
        unprepared: Iterable[str] = (),
    ) -> None:
        """Make one change durable: ``checkpoint`` is every claim after it, the keywords say what changed.

        Appends one journal line and syncs it; rewrites everything instead when there is no journal
        yet, it is long, or either file was deleted or replaced behind our back.

        Raises:
            OSError: it could not be made durable (the journal is as it was before the call).
        """
        fd = self._journal
        if fd is None or self._journal_size >= COMPACT_BYTES or not self._intact(fd):
            self.save(checkpoint)
            return
        line = _encoder.encode(JournalEntry(dict(prepared or {}), list(unprepared))) + b"\n"
        before = self._journal_size
        try:
            done = 0
            while done < len(line):
                done += os.write(fd, line[done:])
            os.fdatasync(fd)
        except OSError:
            self._cut(fd, before)
            raise
        self._journal_size = before + len(line)
        self.records += 1
        known = self._known
        if known is not None and known.journal_offset == before:  # we knew everything up to our line
            self._known = _Known(checkpoint, known.document, known.journal_inode, before + len(line))
        else:
            self._known = None
        self._signature = self.signature()

    def save(self, checkpoint: Checkpoint) -> None:
        """Write every claim to the document, atomically and durably, then start an empty journal.

        Raises:
            OSError: the directory cannot be written.
        """
        data = encode(checkpoint)
        os.makedirs(self.directory, mode=0o750, exist_ok=True)
        replace_file(self.path, data, prefix=".checkpoint-")
        self._fsync_directory()  # the document is durable before the journal it replaces is emptied
        self._open_journal(truncate=True)
        self._fsync_directory()
        self.saves += 1
        document = _identity(self.path)
        if document is not None and self._journal is not None:
            self._known = _Known(checkpoint, document, os.fstat(self._journal).st_ino, 0)
        self._signature = self.signature()

    def close(self) -> None:
        """Close the journal (the next change rewrites the document and opens it again)."""
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None

    def _open_journal(self, *, truncate: bool) -> None:
        self.close()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
        fd = os.open(self.journal_path, flags, 0o600)
        try:
            if truncate:
                os.fsync(fd)
            self._journal_size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self._journal = fd

    def _intact(self, fd: int) -> bool:
        """The journal we hold open is the one on disk, and the document is there."""
        try:
            on_disk, held = os.stat(self.journal_path), os.fstat(fd)
            return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino) and os.path.exists(self.path)
        except OSError:
            return False

    def _cut(self, fd: int, size: int) -> None:
        """Undo a failed append; if even that fails, drop the journal so the next change rewrites both files."""
        try:
            os.ftruncate(fd, size)
        except OSError as exc:
            log.error("cannot cut the checkpoint journal back after a failed write (%s); rewriting it next time", exc)
            self.close()

    def _fsync_directory(self) -> None:
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
