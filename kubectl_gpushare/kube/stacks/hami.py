"""HAMi (NVIDIA vGPU) nodes and pods, read-only: GPUs in MiB plus core percent.

Formats followed (Project-HAMi/HAMi):
- node ``hami.io/node-nvidia-register``: ``docs/develop/protocol.md`` and
  ``pkg/device/nvidia/device.go`` (``UnMarshalNodeDevices``). Up to v2.7 it is colon-separated
  devices of comma fields ``UUID,count,devmemMiB,devcore,type,numa,healthy[,index,mode]``; from
  v2.8 a JSON array of ``{"id","index","count","devmem","devcore","type","numa","mode","health"}``.
  Both are accepted.
- node ``hami.io/node-handshake`` (``Reported <time>`` / ``Requesting_<time>``) and
  ``hami.io/device-cordon`` (comma-separated UUIDs): ``pkg/device/nvidia/device.go``.
- pod ``hami.io/vgpu-devices-allocated``: ``UUID,TYPE,memMiB,cores:`` per device, ``;`` per
  container (``pkg/device/devices.go`` ``EncodePodDevices``); empty container slots (``;;``,
  ``,,0,0:``) occur in the wild (HAMi issues #991, #1932) and are skipped.
- pod ``hami.io/bind-phase`` (``allocating|success|failed``) and ``hami.io/vgpu-node``:
  ``pkg/util/types.go``.
- node ``hami.io/mutex.lock`` (``<RFC 3339>[,namespace,name]``, expired after 5 minutes by
  default): ``pkg/util/nodelock/nodelock.go``.

Pure: no I/O and no clock (the caller passes ``now``). A malformed annotation gives one warning and
nothing is counted from it.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Final

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.records import Warnings, node_ip
from kubectl_gpushare.kube.types import Node, Pod
from kubectl_gpushare.ledger import PENDING, StackClaim, StackGPU, StackNode
from kubectl_gpushare.protocol import shown_value

MAX_SPLIT: Final = 1024
"""Most tasks HAMi may put on one GPU (``deviceSplitCount``); larger is malformed."""
MAX_CORES: Final = 100 * 1024
"""Most core percent one GPU may advertise (``deviceCoreScaling`` can raise it above 100)."""
BIND_FAILED: Final = "failed"
_UNPRINTABLE: Final = re.compile(r"[^\x21-\x7e]")
"""Anything but printable non-space ASCII: only then are fields stripped (the common case skips it)."""
_HANDSHAKE_FORMATS: Final = ("%Y-%m-%d %H:%M:%S", "%Y.%m.%d %H:%M:%S", "%Y-%m-%dT%H:%M:%SZ")
_LOCK_FORMATS: Final = ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%z")
"""RFC 3339 as Go's ``time.RFC3339`` writes it (``Z`` or a numeric offset, no fraction)."""


class HamiDevice:
    """One GPU from the register annotation (a plain holder; validated on construction)."""

    __slots__ = ("uuid", "index", "count", "memory", "cores", "model", "healthy")

    def __init__(self, uuid: str, index: int, count: int, memory: int, cores: int, model: str, healthy: bool) -> None:
        if not uuid or len(uuid) > 256:
            raise protocol.AnnotationError("a device has no usable id")
        if not protocol.valid_gpu_index(index):
            raise protocol.AnnotationError(f"device index {index} is outside [0, {protocol.MAX_GPUS_PER_NODE})")
        if not (0 <= count <= MAX_SPLIT and 0 <= memory <= protocol.MAX_GPU_MEMORY and 0 <= cores <= MAX_CORES):
            raise protocol.AnnotationError(
                f"device count/devmem/devcore {count}/{memory}/{cores} outside "
                f"[0, {MAX_SPLIT}]/[0, {protocol.MAX_GPU_MEMORY}]/[0, {MAX_CORES}]"
            )
        self.uuid, self.index, self.count, self.memory = uuid, index, count, memory
        self.cores, self.model, self.healthy = cores, model[:128], healthy


def _int(value: object, what: str) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)  # the common case, cheaply; everything else through the strict parser
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    parsed = protocol.parse_int_strict(value) if isinstance(value, str) else None
    if parsed is None:
        raise protocol.AnnotationError(f"{what} is not an integer")
    return parsed


class _RegisterEntry(msgspec.Struct):
    """One device of the v2.8 JSON register; other keys (numa, mode, migProfiles) are skipped."""

    id: str
    index: int | None = None
    count: int = 0
    devmem: int = 0
    devcore: int = 0
    type: str = ""
    health: bool = True


_REGISTER_DECODER: Final = msgspec.json.Decoder(list[_RegisterEntry])
"""Typed, so a wrong shape fails at once; msgspec raises RecursionError on absurd nesting in skipped keys."""


def _register_json(text: str) -> list[HamiDevice]:
    try:
        entries = _REGISTER_DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise protocol.AnnotationError(f"is not a JSON array of devices ({shown_value(str(exc))})") from None
    return [
        HamiDevice(e.id, position if e.index is None else e.index, e.count, e.devmem, e.devcore, e.type, e.health)
        for position, e in enumerate(entries)
    ]


def _register_colon(text: str) -> list[HamiDevice]:
    devices = []
    for position, entry in enumerate(part for part in text.split(":") if part.strip()):
        fields = entry.split(",")
        if len(fields) < 7:
            raise protocol.AnnotationError(f"device {position} has {len(fields)} fields, expected at least 7")
        healthy = fields[6].strip().lower()
        if healthy not in ("true", "false"):
            raise protocol.AnnotationError(f"device {position} health {shown_value(fields[6])} is not true/false")
        index = _int(fields[7].strip(), "index") if len(fields) > 7 and fields[7].strip() else position
        devices.append(
            HamiDevice(
                fields[0].strip(), index, _int(fields[1].strip(), "count"), _int(fields[2].strip(), "devmem"),
                _int(fields[3].strip(), "devcore"), fields[4].strip(), healthy == "true",
            )
        )
    return devices


def parse_register(text: str) -> list[HamiDevice]:
    """Read ``hami.io/node-nvidia-register`` in either format (JSON array from v2.8, colon/comma before).

    Raises:
        AnnotationError: the text is too long, in neither format, names a GPU twice or holds more
            than `MAX_GPUS_PER_NODE` GPUs, or a field is out of bounds.
    """
    if len(text) > protocol.MAX_HAMI_ANNOTATION_BYTES:
        raise protocol.AnnotationError(f"is longer than {protocol.MAX_HAMI_ANNOTATION_BYTES} bytes")
    stripped = text.strip()
    devices = _register_json(stripped) if stripped.startswith("[") else _register_colon(stripped)
    if len(devices) > protocol.MAX_GPUS_PER_NODE:
        raise protocol.AnnotationError(f"lists more than {protocol.MAX_GPUS_PER_NODE} GPUs")
    if len({d.uuid for d in devices}) != len(devices) or len({d.index for d in devices}) != len(devices):
        raise protocol.AnnotationError("names a GPU id or index twice")
    return devices


class HamiShare:
    """One device entry of an allocation: which GPU, how much memory (MiB) and core percent."""

    __slots__ = ("uuid", "memory", "cores")

    def __init__(self, uuid: str, memory: int, cores: int) -> None:
        self.uuid, self.memory, self.cores = uuid, memory, cores


def parse_allocated(text: str) -> list[list[HamiShare]]:
    """Read ``hami.io/vgpu-devices-allocated``: per container, its device shares.

    Empty container slots (``;;``) and empty devices (``,,0,0:``) are skipped, not errors.

    Raises:
        AnnotationError: too long, a device without 4 fields, a bad number, or one out of bounds.
    """
    if len(text) > protocol.MAX_HAMI_ANNOTATION_BYTES:
        raise protocol.AnnotationError(f"is longer than {protocol.MAX_HAMI_ANNOTATION_BYTES} bytes")
    containers: list[list[HamiShare]] = []
    for slot in text.split(";"):
        shares: list[HamiShare] = []
        for entry in slot.split(":"):
            if not entry.strip():
                continue
            fields = entry.split(",")
            if _UNPRINTABLE.search(entry):
                fields = [field.strip() for field in fields]
            if len(fields) != 4:
                raise protocol.AnnotationError(
                    f"device entry {shown_value(entry)} has {len(fields)} fields, expected 4"
                )
            memory, cores = _int(fields[2] or "0", "memory"), _int(fields[3] or "0", "cores")
            if not 0 <= memory <= protocol.MAX_GPU_MEMORY or not 0 <= cores <= MAX_CORES:
                raise protocol.AnnotationError(f"device entry {shown_value(entry)} is out of bounds")
            if not fields[0]:
                if memory or cores:
                    raise protocol.AnnotationError(f"device entry {shown_value(entry)} claims memory without a GPU id")
                continue
            shares.append(HamiShare(fields[0], memory, cores))
        containers.append(shares)
    return containers


def _parse_time(stamp: str, layouts: tuple[str, ...]) -> float | None:
    """Unix seconds of ``stamp`` in one of ``layouts`` (UTC), or None; the text is cut to 64 bytes first."""
    stamp = stamp[:128].strip()[:64]
    for layout in layouts:
        try:
            when = datetime.datetime.strptime(stamp, layout)
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            return when.timestamp()
        except (ValueError, OverflowError):
            continue
    return None


def handshake_requested_at(text: str | None) -> float | None:
    """Unix seconds of a ``Requesting_<time>`` handshake; None for another value or an unreadable time."""
    if not text or not text.startswith("Requesting_"):
        return None
    return _parse_time(text[len("Requesting_") :], _HANDSHAKE_FORMATS)


def handshake_stale(text: str | None, now: float) -> bool | None:
    """Whether a ``Requesting_<time>`` handshake is older than `HAMI_HANDSHAKE_STALE_SECONDS`.

    Returns None when the time cannot be read; False for ``Reported`` or a missing handshake.
    """
    if not text or not text.startswith("Requesting_"):
        return False
    when = handshake_requested_at(text)
    if when is None:
        return None
    return now - when > protocol.HAMI_HANDSHAKE_STALE_SECONDS


def parse_mutex_lock(text: str) -> tuple[float, str] | None:
    """Read ``hami.io/mutex.lock``: (unix seconds it was taken, ``namespace/name`` of the holder or "").

    HAMi writes ``<RFC 3339 time>`` or ``<time>,<namespace>,<name>`` (``pkg/util/nodelock/nodelock.go``,
    ``ParseNodeLock``). None when HAMi could not read it either (then it never expires the lock).
    """
    if len(text) > 1024:
        return None
    parts = text.split(",")
    if len(parts) not in (1, 3):
        return None
    when = _parse_time(parts[0], _LOCK_FORMATS)
    if when is None:
        return None
    holder = f"{parts[1].strip()}/{parts[2].strip()}" if len(parts) == 3 else ""
    return when, holder


def is_hami_node(node: Node) -> bool:
    """A node HAMi's device plugin registered GPUs on."""
    return protocol.HAMI_ANN_REGISTER in node.metadata.annotations


def node(node: Node, warnings: Warnings | None, now: float) -> StackNode:
    """The node's GPUs (MiB, core percent), cordoned ones marked; none if the register is malformed."""
    name = node.metadata.name
    annotations: Mapping[str, str] = node.metadata.annotations
    text = annotations.get(protocol.HAMI_ANN_REGISTER, "")
    try:
        devices = parse_register(text)
    except protocol.AnnotationError as exc:
        if warnings is not None:
            warnings.add(f"node {name}: annotation {protocol.HAMI_ANN_REGISTER} {exc}; no HAMi GPUs counted")
        devices = []
    cordoned = {uuid.strip() for uuid in annotations.get(protocol.HAMI_ANN_CORDON, "")[:65536].split(",")}
    gpus = tuple(
        StackGPU(
            index=d.index, total=d.memory, unit=protocol.UNIT_MIB, id=d.uuid, model=d.model, cores=d.cores,
            cordoned=d.uuid in cordoned, healthy=d.healthy,
        )
        for d in sorted(devices, key=lambda d: d.index)
    )
    handshake = annotations.get(protocol.HAMI_ANN_HANDSHAKE)
    stale = handshake_stale(handshake, now)
    note = ""
    if stale:
        note = "handshake stale (Requesting_ > 5m): HAMi treats these GPUs as unavailable"
    elif stale is None and warnings is not None:
        value = shown_value(handshake or "")
        warnings.add(f"node {name}: annotation {protocol.HAMI_ANN_HANDSHAKE}={value} has no readable time")
    return StackNode(name=name, stack=protocol.STACK_HAMI, ip=node_ip(node), gpus=gpus, note=note)


def claims(pod: Pod, stack_node: StackNode, warnings: Warnings | None) -> list[StackClaim]:
    """The pod's per-GPU shares in MiB (with core percent); none if its bind failed or the annotation is bad."""
    meta = pod.metadata
    text = meta.annotations.get(protocol.HAMI_ANN_ALLOCATED)
    if text is None or meta.annotations.get(protocol.HAMI_ANN_BIND_PHASE) == BIND_FAILED:
        return []
    try:
        containers = parse_allocated(text)
    except protocol.AnnotationError as exc:
        if warnings is not None:
            where = f"pod {meta.namespace}/{meta.name}"
            warnings.add(f"{where}: annotation {protocol.HAMI_ANN_ALLOCATED} {exc}; not counted")
        return []
    gpus = stack_node.gpus
    node_name = pod.spec.node_name or meta.annotations.get(protocol.HAMI_ANN_NODE, "")
    return [
        StackClaim(
            namespace=meta.namespace, name=meta.name, uid=meta.uid, node=node_name,
            gpu=next((gpu.index for gpu in gpus if gpu.id == share.uuid), PENDING),
            amount=share.memory, unit=protocol.UNIT_MIB, phase=pod.status.phase, cores=share.cores,
        )
        for shares in containers
        for share in shares
    ]


__all__ = [
    "HamiDevice", "claims", "handshake_requested_at", "handshake_stale", "is_hami_node", "node", "parse_allocated",
    "parse_mutex_lock", "parse_register",
]
