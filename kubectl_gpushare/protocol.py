"""The wire contract with the original gpushare components, written once.

Every string that crosses a process boundary (resource names, annotation keys, environment
variables, reason messages, routes) lives here, grouped by who is on the other side of the wire,
together with the pure parsers for the values those strings carry. The extender, the device plugin
and `kubectl inspect gpushare` all read these, so a mixed deployment (ours beside Alibaba's) agrees
byte for byte.

This module owns no state and does no I/O: no clock, no environment, no logging. It imports
nothing from the package.
"""

from __future__ import annotations

import functools
import json
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Final

# --- Extended resources that kubelet and kube-scheduler see (device plugin <-> kubelet) ---------
RESOURCE_MEM: Final = "aliyun.com/gpu-mem"
"""Device-plugin resource: one fake device per memory unit (GiB by default, or MiB)."""
RESOURCE_COUNT: Final = "aliyun.com/gpu-count"
"""Node status field the device plugin patches (capacity and allocatable); not a device resource."""

# --- Pod annotations the original extender writes on bind and the device plugin reads ----------
ANN_IDX: Final = "ALIYUN_COM_GPU_MEM_IDX"
ANN_POD: Final = "ALIYUN_COM_GPU_MEM_POD"
ANN_DEV: Final = "ALIYUN_COM_GPU_MEM_DEV"
ANN_ASSIGNED: Final = "ALIYUN_COM_GPU_MEM_ASSIGNED"
ANN_ASSUME_TIME: Final = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"
ANN_ASSIGN_TIME: Final = "ALIYUN_COM_GPU_MEM_ASSIGN_TIME"
"""Defined by the original but never written by it; our device plugin writes it on Allocate."""
ANN_ALLOCATION: Final = "scheduler.framework.gpushare.allocation"
"""gpushare 2.0: JSON ``{"<container index>": {"<gpu index>": <mem>}}``, read by inspect."""
ASSIGNED_FALSE: Final = "false"
ASSIGNED_TRUE: Final = "true"

# --- Environment the device plugin returns from Allocate (device plugin -> container) ----------
ENV_VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"
ENV_IDX: Final = "ALIYUN_COM_GPU_MEM_IDX"
ENV_POD: Final = "ALIYUN_COM_GPU_MEM_POD"
ENV_CONTAINER: Final = "ALIYUN_COM_GPU_MEM_CONTAINER"
ENV_DEV: Final = "ALIYUN_COM_GPU_MEM_DEV"
ENV_CGPU_DISABLE: Final = "CGPU_DISABLE"

# --- Node labels and annotations ----------------------------------------------------------------
LABEL_GPUSHARE: Final = "gpushare"
"""``gpushare=true`` selects the nodes the device-plugin DaemonSet runs on."""
LABEL_CGPU_DISABLE: Final = "cgpu.disable.isolation"
"""Node label; ``"true"`` makes the device plugin add ``CGPU_DISABLE=true`` to the container env."""
LABEL_GPU_PRODUCT: Final = "nvidia.com/gpu.product"
LABEL_GPU_MEMORY: Final = "nvidia.com/gpu.memory"
LABEL_GPU_COUNT: Final = "nvidia.com/gpu.count"
ANN_NODE_GPUS: Final = "gpushare.kubectl-gpushare.io/gpus"
"""Ours: the device plugin publishes each GPU as JSON, ``[{"index": 0, "memory": 80,
"model": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-..."}]`` with memory in the node's unit, so
inspect and the extender see heterogeneous GPUs (the original assumes equal GPUs)."""

# --- Unhealthy-GPU ConfigMap (written by an external health component, read by the extender) ----
UNHEALTHY_CM_NAMESPACE: Final = "kube-system"
UNHEALTHY_CM_PREFIX: Final = "unhealthy-gpu-"
UNHEALTHY_CM_KEY: Final = "gpus"

# --- Scheduler extender HTTP surface (kube-scheduler <-> extender) -----------------------------
EXTENDER_PREFIX: Final = "/gpushare-scheduler"
REASON_NOT_FOUND: Final = 'node "{node}" not found'
REASON_NO_NODE_OBJECT: Final = "failed get node with name {node}"
REASON_NOT_GPUSHARE: Final = "The node {node} is not for GPU share, need skip"
REASON_INSUFFICIENT: Final = "Insufficient GPU Memory in one device"
BIND_CANNOT_PLACE: Final = "The node {node} can't place the pod {name} in ns {namespace},and the pod spec is {spec}"
BIND_UID_MISMATCH: Final = (
    "The pod {name} in ns {namespace}'s uid is {uid}, and it's not equal with expected {expected}"
)
OPTIMISTIC_LOCK_MSG: Final = (
    "the object has been modified; please apply your changes to the latest version and try again"
)

# --- Admission webhook (kube-apiserver -> extender; manifests/managed) ------------------------------
WEBHOOK_PATH: Final = "/mutate"
SCHEDULER_NAME: Final = "gpushare-scheduler"
"""The second scheduler's profile name, which the webhook writes into GPU pods' spec.schedulerName."""
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
LABEL_WEBHOOK: Final = "gpushare.kubectl-gpushare.io/webhook"
"""Opt-out label: ``disabled`` on a pod or its namespace leaves the pod's scheduler alone."""
WEBHOOK_DISABLED: Final = "disabled"

# --- Device plugin <-> kubelet -------------------------------------------------------------------
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET: Final = "kubelet.sock"
PLUGIN_SOCKET: Final = "aliyungpushare.sock"
DEVICE_PLUGIN_API_VERSION: Final = "v1beta1"
FAKE_ID_SEPARATOR: Final = "-_-"
UNIT_GIB: Final = "GiB"
UNIT_MIB: Final = "MiB"
APPLICATION_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})
"""Xid errors caused by the application, not the GPU: never mark a device unhealthy for them."""

# --- Environment variables behind our own flags (flag, then env, then default) -----------------
ENV_NODE_NAME: Final = "NODE_NAME"
ENV_PORT: Final = "PORT"
ENV_GPU_POLICY: Final = "GPUSHARE_POLICY"
ENV_LOG_FORMAT: Final = "GPUSHARE_LOG_FORMAT"
ENV_MEMORY_UNIT: Final = "GPUSHARE_MEMORY_UNIT"
ENV_FAKE_GPUS: Final = "GPUSHARE_FAKE_GPUS"

# --- Bounds on hostile input ----------------------------------------------------------------------
MAX_GPUS_PER_NODE: Final = 64
"""GPUs one node may have; a GPU index is valid in ``[0, MAX_GPUS_PER_NODE)`` and a larger count is invalid."""

# --- Quantities -----------------------------------------------------------------------------------
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|n|u|m|k|M|G|T|P|E)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str) -> int:
    """Parse a Kubernetes quantity into an integer, rounding up as ``Quantity.Value()`` does.

    Cached: a cluster repeats a handful of quantities across thousands of pods and nodes.

    Args:
        text: a quantity such as ``"4"``, ``"10G"``, ``"2Gi"``, ``"1500m"`` or ``"1e3"``.

    Returns:
        The value as an int (``"1500m"`` gives 2, ``"10G"`` gives 10000000000).

    Raises:
        ValueError: the text is not a valid quantity.
    """
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"invalid quantity {text!r}")
    number, suffix = match.groups()
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"invalid quantity {text!r}") from exc
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value = value.scaleb(_DECIMAL[suffix])
    elif suffix:
        value = value.scaleb(int(suffix[1:]))
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def parse_int_strict(text: str | None) -> int | None:
    """Parse a decimal integer the way Go's ``strconv.Atoi`` does (sign, digits, nothing else)."""
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    return int(text)


def parse_gpu_index(text: str | None) -> int:
    """Read ``ALIYUN_COM_GPU_MEM_IDX``: the GPU index, or -1 ("pending") if missing or invalid."""
    value = parse_int_strict(text)
    return -1 if value is None else value


def parse_assume_time(text: str | None) -> int:
    """Read ``ALIYUN_COM_GPU_MEM_ASSUME_TIME`` (unix nanoseconds); 0 if missing or unparsable."""
    value = parse_int_strict(text)
    return value if value is not None and value >= 0 else 0


class AnnotationError(ValueError):
    """An annotation was present but could not be read; the message says why."""


def parse_allocation(text: str | None) -> dict[int, int] | None:
    """Read the gpushare 2.0 allocation annotation into per-GPU totals.

    The value is JSON of the Go type ``map[int]map[string]int``: container index to GPU index to
    memory. Returns the per-GPU sum over all containers, or None when the annotation is absent,
    is not such JSON, or holds no entries (the caller then falls back to ``ALIYUN_COM_GPU_MEM_IDX``).

    Raises:
        AnnotationError: a GPU key is not an integer (the original logs this and falls back).
    """
    if not text:
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    per_gpu: dict[int, int] = {}
    for container, gpus in raw.items():
        if parse_int_strict(str(container)) is None or not isinstance(gpus, dict):
            return None
        for gpu, mem in gpus.items():
            if isinstance(mem, bool) or not isinstance(mem, int):
                return None
            index = parse_int_strict(gpu)
            if index is None:
                raise AnnotationError(f"GPU index {gpu!r} in {ANN_ALLOCATION} is not an integer")
            per_gpu[index] = per_gpu.get(index, 0) + mem
    return per_gpu or None


def parse_unhealthy_gpus(text: str | None) -> frozenset[int]:
    """Read the ``gpus`` key of an unhealthy-GPU ConfigMap (``"0,2"``).

    Unlike the original, which turns an unparsable entry into GPU 0, entries that are not
    integers are ignored.
    """
    if not text:
        return frozenset()
    found = (parse_int_strict(part.strip()) for part in text.split(","))
    return frozenset(index for index in found if index is not None and index >= 0)


def format_node_gpus(gpus: list[dict[str, object]]) -> str:
    """Serialise the per-GPU node annotation (see `ANN_NODE_GPUS`) compactly and stably."""
    return json.dumps(gpus, separators=(",", ":"), sort_keys=True)


def parse_node_gpus(text: str | None) -> tuple[int, ...] | None:
    """Read per-GPU memory from `ANN_NODE_GPUS`, ordered by index; None if absent or malformed."""
    if not text:
        return None
    try:
        raw = json.loads(text)
        entries = sorted((int(entry["index"]), int(entry["memory"])) for entry in raw)
    except (ValueError, TypeError, KeyError):
        return None
    if [index for index, _ in entries] != list(range(len(entries))):
        return None
    if any(memory < 0 for _, memory in entries):
        return None
    return tuple(memory for _, memory in entries)


def fake_device_id(uuid: str, unit: int) -> str:
    """The id of one memory unit of a GPU as the original plugin names it: ``<uuid>-_-<j>``."""
    return f"{uuid}{FAKE_ID_SEPARATOR}{unit}"


def uuid_of_fake_device(device_id: str) -> str:
    """The GPU UUID a fake device id belongs to."""
    return device_id.rsplit(FAKE_ID_SEPARATOR, 1)[0]
