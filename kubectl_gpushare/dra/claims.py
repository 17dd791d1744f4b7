"""Whether a ResourceClaim may be prepared here, and what it holds: the rules of NodePrepareResources.

Pure: a claim as `dra_objects` reads it (names bounded, quantities parsed), the UID kubelet named and
the GPUs this node publishes in; the claim's GPU (one per claim: the container environment names one
GPU, as gpushare's always has) and memory out, or `ClaimRejectedError` with one line kubelet shows
on the pod. Every value in the claim is hostile: results for other drivers are skipped (kubelet
sends each driver the claims that name it, a claim may name several), ours must name this node's
pool and a device we publish, and their consumed memory must be a quantity in ``(0, GPU memory]``
(one `dra_objects` could not read is named as written). A result without ``consumedCapacity`` is a
whole GPU: that is what the scheduler allocates when the API server dropped
``allowMultipleAllocations`` (DRAConsumableCapacity off).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kubectl_gpushare import dra_objects, protocol
from kubectl_gpushare.dra.slices import PublishedGpu

MAX_SHARE_ID = 64
_SHARE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*")
"""A share ID is a UID (types.UID); anything else is refused before it reaches kubelet or a log."""


class ClaimRejectedError(Exception):
    """The claim cannot be prepared on this node; ``message`` is the per-claim error kubelet reports."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ClaimDevice:
    """One allocation result of ours: a request's share of a GPU."""

    request: str
    device: str
    share_id: str | None
    memory: int
    """Bytes consumed (the whole GPU when the result has no ``consumedCapacity``)."""


@dataclass(frozen=True)
class ClaimHolding:
    """What a claim holds on this node: its devices (all on one GPU) and their memory together."""

    gpu: PublishedGpu
    devices: tuple[ClaimDevice, ...]

    @property
    def memory(self) -> int:
        """Bytes the claim holds on the GPU, over all its requests (bounded by the GPU's memory)."""
        return sum(device.memory for device in self.devices)

    @property
    def units(self) -> int:
        """The memory in the node's unit, rounded up (what ``ALIYUN_COM_GPU_MEM_POD`` carries)."""
        return -(-self.memory // self.gpu.unit_bytes)


def _short(text: object) -> str:
    shown = str(text)
    return shown if len(shown) <= 64 else shown[:64] + "..."


def consumed_memory(result: dra_objects.AllocatedDevice, gpu: PublishedGpu) -> int:
    """Bytes one result consumes: its ``consumedCapacity.memory``, or the whole GPU when it has none.

    Raises:
        ClaimRejectedError: not a quantity, not positive, more than the GPU's memory, or another consumed
            capacity of the result cannot be read.
    """
    if result.unread_capacity is not None:  # dra_objects refused an entry: the memory is named as written
        text = result.unread_capacity.get(protocol.DRA_CAPACITY_MEMORY)
        if text is not None:
            try:
                value = protocol.parse_quantity(text)  # tells a negative quantity from none at all
            except ValueError:
                message = f"consumed memory {_short(text)!r} on {gpu.device} is not a quantity"
                raise ClaimRejectedError(message) from None
            _check_memory(text, value, gpu)
        reason = result.invalid.removeprefix("consumedCapacity: ")[:200]
        raise ClaimRejectedError(f"consumed capacity on {gpu.device} cannot be read: {reason}")
    quantity = (result.consumed_capacity or {}).get(protocol.DRA_CAPACITY_MEMORY)
    if quantity is None:
        return gpu.memory
    _check_memory(quantity.text, quantity.value, gpu)
    return quantity.value


def _check_memory(text: str, value: int, gpu: PublishedGpu) -> None:
    if not 0 < value <= gpu.memory:
        raise ClaimRejectedError(f"consumed memory {_short(text)} on {gpu.device} is outside (0, {gpu.capacity}]")


def holding(
    claim: dra_objects.ResourceClaim, *, uid: str, node: str, gpus: Mapping[str, PublishedGpu]
) -> ClaimHolding:
    """Check a claim kubelet asked us to prepare and say what it holds here.

    Args:
        claim: the claim as read from the API server.
        uid: the UID kubelet named (the claim must still be that object).
        node: this node's name (our pool's name).
        gpus: the devices this node publishes, by device name.

    Raises:
        ClaimRejectedError: replaced, not allocated, not ours, another node's, a device or capacity we
            never published, more than one GPU, or admin access (not supported).
    """
    where = f"{_short(claim.namespace)}/{_short(claim.name)}"
    if claim.uid != uid:
        raise ClaimRejectedError(f"claim {where} has UID {_short(claim.uid)}, not {_short(uid)}: it was replaced")
    if claim.allocation is None:
        raise ClaimRejectedError(f"claim {where} is not allocated")
    found: list[ClaimDevice] = []
    gpu: PublishedGpu | None = None
    for result in claim.allocation.results:
        if result.driver != protocol.DRA_DRIVER:
            continue
        if result.pool != node:
            pool = _short(result.pool)
            raise ClaimRejectedError(f"claim {where} is allocated in pool {pool!r}, not this node's {node!r}")
        target = gpus.get(result.device)
        if target is None:
            raise ClaimRejectedError(f"claim {where}: device {_short(result.device)!r} is not one this node publishes")
        if gpu is not None and target.index != gpu.index:
            both = f"{gpu.device} and {target.device}"
            raise ClaimRejectedError(f"claim {where} holds {both}; a gpushare claim holds one GPU")
        if result.invalid and result.unread_capacity is None:  # the capacity case is named below
            raise ClaimRejectedError(f"claim {where}: {result.invalid}")
        if result.admin_access:
            raise ClaimRejectedError(f"claim {where}: admin access to {target.device} is not supported")
        share = result.share_id or None
        if share is not None and (len(share) > MAX_SHARE_ID or not _SHARE_ID.fullmatch(share)):
            raise ClaimRejectedError(f"claim {where}: share ID {_short(share)!r} is not a UID")
        gpu = target
        found.append(ClaimDevice(result.request, result.device, share, consumed_memory(result, target)))
    if gpu is None:
        raise ClaimRejectedError(f"claim {where} has no device of driver {protocol.DRA_DRIVER}")
    total = sum(device.memory for device in found)
    if total > gpu.memory:
        raise ClaimRejectedError(f"claim {where} consumes {total} bytes of {gpu.device}, more than its {gpu.capacity}")
    return ClaimHolding(gpu, tuple(found))
