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
import math
import re
from collections.abc import Callable, Iterable
from typing import Final, TypeGuard

import msgspec

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
ANN_ASSUMED_NODE: Final = "gpushare.kubectl-gpushare.io/assumed-node"
"""Ours, written by the extender with the five annotations above, before the Binding: the node the
GPU index was chosen on. An unbound pod carrying it is counted on that node and GPU by every
replica until the Binding lands or the leader cleans it up (see `extender.binder`). The original
components ignore the key; an unbound pod without it counts nowhere, as in the original."""
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

# --- What the device plugin writes (the node-confinement policy in manifests/base) ------------
DEVICE_PLUGIN_POD_ANNOTATIONS: Final = (ANN_ASSIGNED, ANN_ASSIGN_TIME, ANN_IDX, ANN_POD, ANN_DEV, ANN_ASSUME_TIME)
"""Pod annotation keys the device plugin writes on Allocate (the last four only when it adopts a pod
the extender did not annotate). Its ValidatingAdmissionPolicy lets it change no other key."""
DEVICE_PLUGIN_NODE_ANNOTATIONS: Final = (ANN_NODE_GPUS,)
"""Node annotation keys the device plugin writes (``nodes`` patch); no labels."""
DEVICE_PLUGIN_NODE_STATUS_RESOURCES: Final = (RESOURCE_COUNT,)
"""Node ``status.capacity`` / ``status.allocatable`` keys the device plugin writes (``nodes/status``
patch); kubelet writes ``aliyun.com/gpu-mem`` from the devices the plugin advertises."""
DEVICE_PLUGIN_SERVICE_ACCOUNT: Final = ("kube-system", "gpushare-device-plugin")
"""The shipped DaemonSet's ServiceAccount (namespace, name): the user the policy confines."""
NODE_NAME_EXTRA: Final = "authentication.kubernetes.io/node-name"
"""The user-info extra in which kube-apiserver names the node of a pod-bound service-account
token's pod (``k8s.io/apiserver/pkg/authentication/serviceaccount``: ``NodeNameKey``)."""

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

# --- Pod lifecycle ---------------------------------------------------------------------------------
_TERMINAL_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})


def pod_phase_terminal(phase: object) -> bool:
    """Whether a pod's ``status.phase`` says it has finished: its containers stopped for good, so it holds nothing.

    Kubernetes' own rule (``IsPodPhaseTerminal`` in k8s.io/kubernetes pkg/api/v1/pod/util.go). Takes any
    decoded JSON value: a phase that is not a string is not terminal.
    """
    return isinstance(phase, str) and phase in _TERMINAL_POD_PHASES


# --- Bounds on hostile input ----------------------------------------------------------------------
MAX_GPUS_PER_NODE: Final = 64
"""GPUs one node may have; a GPU index is valid in ``[0, MAX_GPUS_PER_NODE)`` and a larger count is invalid."""
MAX_GPU_MEMORY: Final = 2**40
"""The most GPU memory (in the node's unit, GiB or MiB) one pod, GPU or node may claim: absurd above it,
and low enough that sums over millions of pods stay inside int64."""
MAX_INT64: Final = 2**63 - 1
MAX_QUANTITY_LENGTH: Final = 64
"""Longer quantity strings are rejected before any number is built (``"1e999999"`` would take seconds)."""
MAX_ALLOCATION_BYTES: Final = 16 * 1024
"""Longest allocation annotation read; a real one is a few dozen bytes per container."""
MAX_NODE_GPUS_BYTES: Final = 64 * 1024
"""Longest per-GPU node annotation read (64 GPUs with long model names fit easily)."""


def printable(text: str, limit: int | None = None) -> str:
    """A string from an object or a peer, fit for a terminal: the one rule for untrusted text that is shown.

    Cut to ``limit`` characters (None: whole), every character Python does not print (control
    characters, ESC, newlines, tabs, bidi overrides) as a space, the ends stripped: a name can then
    neither move the cursor, colour the screen nor forge a column or row of a table.
    """
    if limit is not None:
        text = text[: max(limit, 0)]
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text.strip()


API_MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
"""kube-apiserver's limit on a request body (``DefaultMaxRequestBodyBytes``, 3 MiB): no object it stores
was written larger. The sandbox refuses a larger body (413); the stand-in scheduler and the CEL
admission bound what one object can hold by it."""

MAX_SHOWN_NAME: Final = 253
"""Characters of one name a text view writes (pod, namespace, node, address, annotation value): the API's
longest name (a DNS subdomain), so a real name is never cut and a 1 MB one from a hand-made file is."""
SENTENCE_NAMES: Final = 16
"""Names' room (`shown_text`) for a sentence built from objects (a doctor message, explain's summary, a
scheduler event): about 4 KB, a few pods listed in full; a longer one is cut in the text only."""


def shown_text(text: str, names: int = 1) -> str:
    """`printable`, cut to `MAX_SHOWN_NAME` characters for each of the ``names`` the text holds.

    What every text view (doctor, explain, fit, top, inspect's own tables) writes for a string that came from
    an object, at its one rendering point; JSON and YAML keep the string exact. A string that joins a few
    (``pod/NAMESPACE/NAME``: 2, a sentence naming several pods) gets that many names' room. A cut string
    ends in "…", so a reader knows the text holds less than the object.
    """
    room = MAX_SHOWN_NAME * max(names, 1)
    return printable(text) if len(text) <= room else printable(text[: room - 1]) + "…"


def one_line(message: str) -> str:
    """An error or warning as one terminal line, as every command writes its ``error:``/``warning:`` lines.

    Whitespace runs (newlines included) as one space, then `shown_text` with a sentence's room: an API
    message or a file's name can neither break the line, colour the screen nor fill it with a megabyte.
    """
    return shown_text(" ".join(message.split()), SENTENCE_NAMES)


REASON_LENGTH: Final = 200
"""Characters of an exception's message a warning or error quotes (`error_reason`)."""


def first_line(text: str, limit: int) -> str:
    """The first line of ``text`` that is not blank, its ends stripped, cut to ``limit`` characters ("" if none).

    Cut before it is split, so a megabyte of one-line text costs no megabyte list of lines.
    """
    head = text.lstrip()[: max(limit, 0)]
    return head.splitlines()[0].rstrip() if head else ""


def error_reason(error: BaseException, limit: int = REASON_LENGTH) -> str:
    """Why ``error`` was raised, as one line of at most ``limit`` characters: the one rule for quoting an exception.

    Its message's first line that is not blank (`first_line`): a decoder's or parser's message goes on
    with lines of context, and one may be empty, blank or start with a newline (a bare ``str(exc)
    .splitlines()[0]`` raises IndexError on ""). An empty message gives the exception's type name, and a
    RecursionError ``nested too deeply``: a decoder (msgspec, PyYAML, a JSON walk) past Python's recursion
    limit, whose own words (``maximum recursion depth exceeded``) do not say the input is at fault.
    """
    if isinstance(error, RecursionError):
        return "nested too deeply"[: max(limit, 0)]
    return first_line(str(error), limit) or type(error).__name__[: max(limit, 0)]


# --- Quantities -----------------------------------------------------------------------------------
# ASCII digits only, and the end of the text (not before a final newline): what Go's parser and the
# API's pattern accept; Python's ``\d`` would read "١٢" (Arabic-Indic digits) as 12.
_QUANTITY = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|n|u|m|k|M|G|T|P|E)?\Z")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_INT64_DIGITS: Final = 19


@functools.lru_cache(maxsize=4096)
def parse_quantity(text: str) -> int:
    """Parse a Kubernetes quantity into an integer, rounding up as ``Quantity.Value()`` does.

    Bounded: text longer than `MAX_QUANTITY_LENGTH` and values outside int64 are rejected from the
    digit counts alone, before any large number is built. Cached: a cluster repeats a handful of
    quantities across thousands of pods and nodes.

    Args:
        text: a quantity such as ``"4"``, ``"10G"``, ``"2Gi"``, ``"1500m"`` or ``"1e3"``.

    Returns:
        The value as an int (``"1500m"`` gives 2, ``"10G"`` gives 10000000000).

    Raises:
        ValueError: the text is not a valid quantity, or its value is out of the int64 range.
    """
    return _parse_scaled(text, 0)


SHOWN_CHARS: Final = 40
"""Longest piece of a hostile value quoted in a warning."""


def shown_value(text: str) -> str:
    """A value quoted for a warning, cut to `SHOWN_CHARS` so a 5,000-digit annotation stays one short line."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def checked_quantity(value: str | int | float, maximum: int) -> tuple[int, str]:
    """``(amount, "")`` for a quantity in ``[0, maximum]``, else ``(0, why)``: the caller names the value.

    The one rule for a quantity an object holds (a pod's ``aliyun.com/gpu-mem`` limit, a node's
    capacity): what inspect counts as 0 with a warning, doctor reports as ``invalid-value``, explain
    calls an invalid request and the extender refuses. A JSON number (which kube-apiserver would have
    normalised to a string) is read as its decimal text. Cached: a cluster repeats a handful of
    quantities across 100,000 pods. Text too long to be a quantity is checked uncached, so hostile
    values are never held.
    """
    if isinstance(value, str) and len(value) > MAX_QUANTITY_LENGTH:
        return _check_quantity(value, maximum)
    return _cached_check_quantity(value, maximum)


def _check_quantity(value: str | int | float, maximum: int) -> tuple[int, str]:
    text = value if isinstance(value, str) else repr(value)
    try:
        parsed = parse_quantity(text)
    except (ValueError, TypeError) as exc:
        return 0, str(exc)  # the message quotes at most 64 characters
    if not 0 <= parsed <= maximum:
        return 0, f"quantity {shown_value(text)} is outside [0, {maximum}]"
    return parsed, ""


_cached_check_quantity = functools.lru_cache(maxsize=4096, typed=True)(_check_quantity)


@functools.lru_cache(maxsize=1024)
def parse_milli_quantity(text: str) -> int:
    """A quantity in thousandths, rounded up as ``Quantity.MilliValue()`` does (``"1500m"`` gives 1500).

    CPU is counted this way by kube-scheduler (``MilliCPU``). Bounds and errors as `parse_quantity`.
    """
    return _parse_scaled(text, 3)


def _parse_scaled(text: str, shift: int) -> int:
    """The quantity times ``10**shift``, rounded up; see `parse_quantity`."""
    if not isinstance(text, str) or len(text) > MAX_QUANTITY_LENGTH:
        shown = text[:MAX_QUANTITY_LENGTH] + "..." if isinstance(text, str) else text
        raise ValueError(f"invalid quantity {shown!r}: longer than {MAX_QUANTITY_LENGTH} characters")
    match = _QUANTITY.match(text.strip())
    if match is None or not (match.group(2) or match.group(3)):
        raise ValueError(f"invalid quantity {text!r}")
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    mantissa = int(whole + fraction or "0")  # at most 64 digits
    exponent = shift - len(fraction)
    binary = 0
    if suffix in _BINARY:
        binary = _BINARY[suffix]
    elif suffix in _DECIMAL:
        exponent += _DECIMAL[suffix]
    elif suffix:
        exponent += int(suffix[1:])  # at most 62 digits: cheap, and bounded below before use
    if mantissa == 0:
        return 0
    # Order of magnitude from digit counts: 1024**k < 10**(3k + 1).
    magnitude = len(str(mantissa)) - 1 + exponent + (3 * binary + 1 if binary else 0)
    if magnitude > _INT64_DIGITS:
        raise ValueError(f"quantity {text!r} is out of range")
    if magnitude < -_INT64_DIGITS:
        return 1 if sign != "-" else 0  # a positive sliver rounds up to 1, a negative one to 0
    numerator: int = (-mantissa if sign == "-" else mantissa) * pow(1024, binary)
    scale: int = pow(10, abs(exponent))
    value = numerator * scale if exponent >= 0 else -(-numerator // scale)  # ceiling division
    if not -MAX_INT64 - 1 <= value <= MAX_INT64:
        raise ValueError(f"quantity {text!r} is out of range")
    return value


_SI_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()} | {0: ""}
_BINARY_SUFFIX = {power: suffix for suffix, power in _BINARY.items()} | {0: ""}
_MAX_EXPONENT: Final = 2**31 - 1
QUANTITY_PATTERN: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
"""The pattern kube-apiserver quotes when it refuses a quantity."""


def _decimal_canonical(negative: bool, mantissa: int, exponent: int, exponent_form: bool) -> str:
    """``mantissa * 10**exponent`` as Go's ``CanonicalizeBytes`` writes it.

    Rounded up to 1n, no trailing zeros, an exponent that is a multiple of 3, spelled with an SI
    suffix (or ``e<n>``).
    """
    if exponent < -9:  # finer than a nano: round away from zero to 1n, as ParseQuantity does
        drop = -9 - exponent
        if drop > len(str(mantissa)):
            mantissa = 1
        else:
            mantissa = -(-mantissa // pow(10, drop))
        exponent = -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    extra = exponent % 3
    mantissa *= pow(10, extra)
    exponent -= extra
    sign = "-" if negative else ""
    if exponent_form:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    suffix = _SI_SUFFIX.get(exponent)
    return f"{sign}{mantissa}{suffix if suffix is not None else f'e{exponent}'}"


@functools.lru_cache(maxsize=4096)
def canonical_quantity(text: str) -> str:
    """The string kube-apiserver stores for a quantity (``"1000m"`` gives ``"1"``, ``"2048Mi"`` gives ``"2Gi"``).

    Bounded like `parse_quantity`: no number longer than the text times a constant is built.

    Raises:
        ValueError: the text is not a valid quantity.
    """
    if not isinstance(text, str) or len(text) > MAX_QUANTITY_LENGTH:
        raise ValueError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    match = _QUANTITY.match(text)
    if match is None or not (match.group(2) or match.group(3)):
        raise ValueError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    mantissa = int(whole + fraction or "0")
    if mantissa == 0:
        return "0"
    exponent = -len(fraction)
    negative = sign == "-"
    if suffix in _BINARY:
        power = _BINARY[suffix]
        scaled = mantissa * pow(1024, power)
        unit = pow(10, len(fraction))
        if scaled % unit or scaled // unit < 1024:  # fractional or small: Go shows it in decimal SI
            return _decimal_canonical(negative, scaled, exponent, False)
        value, power = scaled // unit, 0
        while value % 1024 == 0 and power < 6:
            value //= 1024
            power += 1
        return f"{'-' if negative else ''}{value}{_BINARY_SUFFIX[power]}"
    exponent_form = bool(suffix) and len(suffix) > 1 and suffix[0] in "eE"  # a lone "E" is exa, not e<n>
    if exponent_form:
        shift = int(suffix[1:])
        if abs(shift) > _MAX_EXPONENT:
            raise ValueError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
        exponent += shift
    elif suffix:
        exponent += _DECIMAL[suffix]
    return _decimal_canonical(negative, mantissa, exponent, exponent_form)


UNIT_BYTES: Final = {"GiB": 1024**3, "MiB": 1024**2}
"""Bytes in each unit a gpushare node may count ``aliyun.com/gpu-mem`` in."""
_BYTE_SUFFIXES: Final = frozenset(_BINARY) | frozenset({"k", "M", "G", "T", "P", "E"})


def parse_memory_request(text: str, unit: str, maximum: int) -> int:
    """A GPU memory request, as a user types it, in the nodes' ``unit`` (``GiB`` or ``MiB``).

    A bare number (``8``, ``8e0``) is already in the unit, as ``aliyun.com/gpu-mem`` is; a quantity
    with a byte suffix (``8Gi``, ``8192Mi``, ``8G``) is bytes and must come to a whole number of units,
    since a pod can only ask whole units. Bounded as `parse_quantity` is.

    Raises:
        ValueError: not a quantity, not positive, a fraction of the unit, or above ``maximum`` units.
    """
    if unit not in UNIT_BYTES:
        raise ValueError(f"unknown memory unit {unit!r}")
    parse_quantity(text)  # syntax and int64 bounds, before any exact arithmetic
    match = _QUANTITY.match(text.strip())
    assert match is not None  # parse_quantity accepted it
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    mantissa = int(whole + fraction or "0")
    if sign == "-" or mantissa == 0:
        raise ValueError(f"{text!r} is not a positive amount of memory")
    exponent = -len(fraction)
    binary = _BINARY.get(suffix or "", 0)
    if suffix in _DECIMAL:
        exponent += _DECIMAL[suffix]
    elif suffix and suffix[0] in "eE":
        exponent += int(suffix[1:])
    per_unit = UNIT_BYTES[unit] if suffix in _BYTE_SUFFIXES else 1
    magnitude = len(str(mantissa)) - 1 + exponent + (3 * binary + 1 if binary else 0)
    if magnitude < -_INT64_DIGITS:  # before any power of ten: "1e-999999999" builds no number
        raise ValueError(f"{text!r} is below 1 {unit}, the unit gpushare counts in here")
    numerator: int = mantissa * pow(1024, binary) * (pow(10, exponent) if exponent > 0 else 1)
    denominator: int = per_unit * (pow(10, -exponent) if exponent < 0 else 1)
    if numerator < denominator:
        raise ValueError(f"{text!r} is below 1 {unit}, the unit gpushare counts in here")
    if numerator % denominator:
        raise ValueError(f"{text!r} is not a whole number of {unit}, the unit gpushare counts in here")
    value = numerator // denominator
    if value > maximum:
        raise ValueError(f"{text!r} is more than {maximum} {unit}")
    return value


_INT = re.compile(r"[+-]?[0-9]{1,20}")
_INT64_TEXT: Final = str(MAX_INT64)


def parse_int_strict(text: str | None) -> int | None:
    """Parse a decimal integer the way Go's ``strconv.Atoi`` does: sign, digits, int64 range, nothing else.

    The digit count is checked before conversion, so a 5,000-digit string is refused at once.
    """
    if not isinstance(text, str):
        return None
    if text.isascii() and text.isdigit() and (len(text) < 19 or (len(text) == 19 and text <= _INT64_TEXT)):
        return int(text)  # the common case (unix nanoseconds have 19 digits), inside int64 by its digits
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -MAX_INT64 - 1 <= value <= MAX_INT64 else None


def valid_gpu_index(index: int) -> bool:
    """Whether a GPU index can name a GPU of some node: ``0 <= index < MAX_GPUS_PER_NODE``."""
    return 0 <= index < MAX_GPUS_PER_NODE


def parse_gpu_index(text: str | None) -> int:
    """Read ``ALIYUN_COM_GPU_MEM_IDX``: the GPU index, or -1 ("pending").

    Not cached: a cache keyed by annotation text would hold whatever hostile values pods carry.

    -1 also stands for a missing or invalid index and one outside ``[0, MAX_GPUS_PER_NODE)``.
    """
    value = parse_int_strict(text)
    return value if value is not None and valid_gpu_index(value) else -1


def parse_assume_time(text: str | None) -> int:
    """Read ``ALIYUN_COM_GPU_MEM_ASSUME_TIME`` (unix nanoseconds); 0 if missing or unparsable."""
    value = parse_int_strict(text)
    return value if value is not None and value >= 0 else 0


class AnnotationError(ValueError):
    """An annotation was present but could not be read; the message says why, in one line."""


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in JSON text, found without parsing it (strings skipped).

    Lets a reader refuse input nested deeper than its format allows before ``json.loads`` recurses.
    Malformed text gives some number; the parser then rejects it anyway.
    """
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _load_json(text: str, what: str, max_bytes: int, max_depth: int) -> object:
    """``json.loads`` behind size and depth bounds; AnnotationError with a one-line reason otherwise."""
    if len(text) > max_bytes:
        raise AnnotationError(f"{what} is longer than {max_bytes} bytes")
    if json_depth(text) > max_depth:
        raise AnnotationError(f"{what} nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not JSON"
        raise AnnotationError(f"{what} is not JSON ({reason})") from None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def valid_memory(value: object) -> TypeGuard[int]:
    """Whether a decoded JSON value is a valid memory claim: an int in ``[1, MAX_GPU_MEMORY]``."""
    return _is_int(value) and 0 < value <= MAX_GPU_MEMORY


def parse_allocation(text: str | None) -> dict[int, int] | None:
    """Read the gpushare 2.0 allocation annotation into per-GPU totals.

    The value is JSON of the Go type ``map[int]map[string]int``: container index to GPU index to
    memory. Every entry must be valid: container keys integers >= 0, GPU keys integers in
    ``[0, MAX_GPUS_PER_NODE)``, memory integers in ``[1, MAX_GPU_MEMORY]``; the text at most
    `MAX_ALLOCATION_BYTES` long and two levels deep. One bad entry makes the whole claim invalid,
    so a pod can never credit free memory to a GPU (``{"0":{"0":-400}}``).

    Returns:
        The per-GPU sum over all containers, or None when the annotation is absent or holds no
        entries (``{}``, ``null``, ``{"0":{}}``): the caller then uses ``ALIYUN_COM_GPU_MEM_IDX``.

    Raises:
        AnnotationError: the annotation is present but invalid; the message says why.
    """
    if not text or not text.strip():
        return None
    raw = _load_json(text, f"annotation {ANN_ALLOCATION}", MAX_ALLOCATION_BYTES, 2)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise AnnotationError(f"annotation {ANN_ALLOCATION} is not a map of container to GPU to memory")
    per_gpu: dict[int, int] = {}
    for container, gpus in raw.items():
        container_index = parse_int_strict(container)
        if container_index is None or container_index < 0 or not isinstance(gpus, dict):
            raise AnnotationError(f"annotation {ANN_ALLOCATION} is not a map of container to GPU to memory")
        for gpu, mem in gpus.items():
            index = parse_int_strict(gpu)
            if index is None or not valid_gpu_index(index):
                raise AnnotationError(
                    f"GPU index {gpu[:24]!r} in {ANN_ALLOCATION} is not an integer in [0, {MAX_GPUS_PER_NODE})"
                )
            if not valid_memory(mem):
                shown = repr(mem)[:24]
                raise AnnotationError(
                    f"memory {shown} for GPU {index} in {ANN_ALLOCATION} is not an integer in [1, {MAX_GPU_MEMORY}]"
                )
            per_gpu[index] = per_gpu.get(index, 0) + mem
    if any(total > MAX_GPU_MEMORY for total in per_gpu.values()):
        raise AnnotationError(f"annotation {ANN_ALLOCATION} claims more than {MAX_GPU_MEMORY} on one GPU")
    return per_gpu or None


def parse_unhealthy_gpus(text: str | None) -> frozenset[int]:
    """Read the ``gpus`` key of an unhealthy-GPU ConfigMap (``"0,2"``).

    Unlike the original, which turns an unparsable entry into GPU 0, entries that are not
    GPU indices (integers in ``[0, MAX_GPUS_PER_NODE)``) are ignored.
    """
    if not text:
        return frozenset()
    found = (parse_int_strict(part.strip()) for part in text.split(","))
    return frozenset(index for index in found if index is not None and valid_gpu_index(index))


DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
"""``IsDNS1123Label``'s pattern, to `fullmatch` (``match`` with ``$`` would let a last newline through)."""
DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""``IsDNS1123Subdomain``'s pattern, to `fullmatch`."""


def valid_dns_label(name: str) -> bool:
    """An RFC 1123 label of at most 63 characters (``IsDNS1123Label``): namespaces, device and request names."""
    return len(name) <= DNS1123_LABEL_MAX and DNS_LABEL.fullmatch(name) is not None


def valid_dns_subdomain(name: str) -> bool:
    """An RFC 1123 subdomain of at most 253 characters (``IsDNS1123Subdomain``): node, driver, class names.

    Also a label key's prefix (`label_rule.valid_label_key`).
    """
    return len(name) <= DNS1123_SUBDOMAIN_MAX and DNS_SUBDOMAIN.fullmatch(name) is not None


def parse_assumed_node(text: str | None) -> str | None:
    """Read `ANN_ASSUMED_NODE`: a node name (a DNS subdomain of at most 253 characters), else None."""
    if not isinstance(text, str) or not valid_dns_subdomain(text):
        return None
    return text


NODE_GPUS_VERSION: Final = 1
"""The version of `ANN_NODE_GPUS` this code writes (in each entry, ``"version"``; absent means 1)."""


def format_node_gpus(gpus: list[dict[str, object]]) -> str:
    """Serialise the per-GPU node annotation (see `ANN_NODE_GPUS`) compactly and stably, versioned.

    The version goes in each entry, so readers from before versions (which ignore unknown keys of
    an entry) keep reading it.
    """
    return json.dumps([{**gpu, "version": NODE_GPUS_VERSION} for gpu in gpus], separators=(",", ":"), sort_keys=True)


def parse_node_gpus(text: str | None, on_newer: Callable[[int], object] | None = None) -> tuple[int, ...] | None:
    """Read per-GPU memory from `ANN_NODE_GPUS`, ordered by index; None if absent or malformed.

    Malformed includes: longer than `MAX_NODE_GPUS_BYTES`, nested deeper than a list of objects,
    more than `MAX_GPUS_PER_NODE` GPUs, indices not exactly 0..n-1, memory not an integer in
    ``[0, MAX_GPU_MEMORY]``, a version that is not a positive integer.

    An entry of a version newer than `NODE_GPUS_VERSION` is read conservatively: its GPU counts
    with no memory (nothing is placed on it until this reader is upgraded). ``on_newer``, if given,
    is then called once with the newest such version, so the caller can say why (a well-formed
    annotation only: a malformed one is None, whatever its versions).
    """
    if not text:
        return None
    try:
        raw = _load_json(text, f"annotation {ANN_NODE_GPUS}", MAX_NODE_GPUS_BYTES, 2)
    except AnnotationError:
        return None
    if not isinstance(raw, list) or len(raw) > MAX_GPUS_PER_NODE:
        return None
    entries: list[tuple[int, int]] = []
    newest = NODE_GPUS_VERSION
    for entry in raw:
        if not isinstance(entry, dict):
            return None
        index, memory, version = entry.get("index"), entry.get("memory"), entry.get("version", 1)
        if not _is_int(index) or not _is_int(version) or version < 1:
            return None
        if version > NODE_GPUS_VERSION:
            memory = 0  # a newer writer may mean something else by "memory": never count it as free
            newest = max(newest, version)
        elif not _is_int(memory) or not 0 <= memory <= MAX_GPU_MEMORY:
            return None
        entries.append((index, memory))
    entries.sort()
    if [index for index, _ in entries] != list(range(len(entries))):
        return None
    if newest > NODE_GPUS_VERSION and on_newer is not None:
        on_newer(newest)
    return tuple(memory for _, memory in entries)


def fake_device_id(uuid: str, unit: int) -> str:
    """The id of one memory unit of a GPU as the original plugin names it: ``<uuid>-_-<j>``."""
    return f"{uuid}{FAKE_ID_SEPARATOR}{unit}"


def uuid_of_fake_device(device_id: str) -> str:
    """The GPU UUID a fake device id belongs to."""
    return device_id.rsplit(FAKE_ID_SEPARATOR, 1)[0]

# --- Other GPU-sharing stacks, read-only (see kube/stacks) ------------------------------------------
STACK_GPUSHARE: Final = "gpushare"
STACK_HAMI: Final = "hami"
STACK_NVIDIA: Final = "nvidia"
STACK_NANO_GPU: Final = "nano-gpu"
STACK_ELASTIC_GPU: Final = "elastic-gpu"
STACK_KAI: Final = "kai"
STACK_VOLCANO: Final = "volcano"
STACK_KOORDINATOR: Final = "koordinator"
STACKS: Final = (
    STACK_GPUSHARE, STACK_HAMI, STACK_NVIDIA, STACK_NANO_GPU, STACK_ELASTIC_GPU, STACK_KAI, STACK_VOLCANO,
    STACK_KOORDINATOR,
)
"""Stack names for ``inspect --stack`` (plus ``auto``); `kube.stacks.detect` gives the detection order."""

UNIT_PERCENT: Final = "%"
UNIT_SLOTS: Final = "slots"
UNIT_GPUS: Final = "GPUs"

HAMI_ANN_REGISTER: Final = "hami.io/node-nvidia-register"
HAMI_ANN_HANDSHAKE: Final = "hami.io/node-handshake"
HAMI_ANN_CORDON: Final = "hami.io/device-cordon"
HAMI_ANN_ALLOCATED: Final = "hami.io/vgpu-devices-allocated"
HAMI_ANN_NODE: Final = "hami.io/vgpu-node"
HAMI_ANN_BIND_PHASE: Final = "hami.io/bind-phase"
HAMI_ANN_MUTEX_LOCK: Final = "hami.io/mutex.lock"
"""Node lock HAMi's scheduler holds while binding a pod: ``<RFC 3339 time>[,namespace,name]``."""
HAMI_HANDSHAKE_STALE_SECONDS: Final = 300
"""A handshake left at ``Requesting_<time>`` for longer than this means HAMi treats the node's GPUs as gone."""
HAMI_MUTEX_STALE_SECONDS: Final = 300
"""HAMi's default node-lock expiry (``HAMI_NODELOCK_EXPIRE``): a lock held longer is stuck."""
MAX_HAMI_ANNOTATION_BYTES: Final = 64 * 1024
"""Longest HAMi register or allocation annotation read (64 GPUs with long type names fit easily)."""

NVIDIA_RESOURCE_GPU: Final = "nvidia.com/gpu"
NVIDIA_MIG_PREFIX: Final = "nvidia.com/mig-"
NVIDIA_LABEL_REPLICAS: Final = "nvidia.com/gpu.replicas"
NVIDIA_LABEL_STRATEGY: Final = "nvidia.com/gpu.sharing-strategy"
NVIDIA_LABEL_COUNT: Final = "nvidia.com/gpu.count"
NVIDIA_LABEL_MEMORY: Final = "nvidia.com/gpu.memory"
NVIDIA_LABEL_PRODUCT: Final = "nvidia.com/gpu.product"
NVIDIA_SHARED_SUFFIX: Final = "-SHARED"
# NVIDIA's DRA driver, read-only (NVIDIA/k8s-dra-driver-gpu ``cmd/gpu-kubelet-plugin``): the driver name
# (main.go ``DriverName``); whole GPUs ``gpu-<minor>`` and MIG devices ``gpu-<minor>-mig-...`` with the
# attributes ``type`` (gpu, mig, vfio), ``uuid`` and ``productName`` (deviceinfo.go; releases before
# September 2025 also had ``index`` and ``minor``) and the capacity ``memory`` in bytes (partitions.go).
STACK_NVIDIA_DRA: Final = "nvidia-dra"
"""How NVIDIA DRA nodes are shown (found from their ResourceSlices, not a ``--stack`` choice)."""
NVIDIA_DRA_DRIVER: Final = "gpu.nvidia.com"
NVIDIA_DRA_ATTR_TYPE: Final = "type"
NVIDIA_DRA_ATTR_UUID: Final = "uuid"
NVIDIA_DRA_ATTR_PRODUCT: Final = "productName"
NVIDIA_DRA_CAPACITY_MEMORY: Final = "memory"

NANO_GPU_RESOURCE: Final = "nano-gpu/gpu-percent"
NANO_GPU_ANN_CONTAINER: Final = "nano-gpu/container-"
ELASTIC_GPU_RESOURCE_CORE: Final = "elasticgpu.io/gpu-core"
ELASTIC_GPU_RESOURCE_MEMORY: Final = "elasticgpu.io/gpu-memory"
ELASTIC_GPU_ANN_CONTAINER: Final = "elasticgpu.io/container-"
PERCENT_PER_GPU: Final = 100
"""nano-gpu and elastic-gpu advertise 100 units per card."""

# NVIDIA KAI Scheduler (NVIDIA/KAI-Scheduler). Keys: ``pkg/common/constants/constants.go`` (GpuFraction,
# GpuMemory, GpuFractionsNumDevices, GPUGroup, MultiGpuGroupLabelPrefix, DefaultResourceReservationName);
# the reservation pod's labels and annotation: ``pkg/binder/binding/resourcereservation/resource_reservation.go``
# (``app: <appLabelValue>``, ``runai-gpu-group: <group>``, ``run.ai/reserve_for_gpu_index``, "-1" unknown)
# and ``pkg/resourcereservation/patcher/pod_patcher.go`` (writes the GPU's UUID there).
KAI_ANN_FRACTION: Final = "gpu-fraction"
KAI_ANN_MEMORY: Final = "gpu-memory"
"""MiB (``docs/gpu-sharing/README.md``; ``strconv.ParseUint``, > 0, in ``gpu_request_validator.go``)."""
KAI_ANN_NUM_DEVICES: Final = "gpu-fraction-num-devices"
KAI_LABEL_GROUP: Final = "runai-gpu-group"
KAI_LABEL_GROUP_PREFIX: Final = KAI_LABEL_GROUP + "/"
"""Multi-GPU fractional pods carry one ``runai-gpu-group/<group>: <group>`` label per GPU (``gpu_sharing.go``)."""
KAI_ANN_RESERVED_GPU: Final = "run.ai/reserve_for_gpu_index"
KAI_RESERVED_UNKNOWN: Final = "-1"
KAI_RESERVATION_NAMESPACES: Final = ("kai-resource-reservation", "runai-reservation")
"""The default reservation namespace and the older Run:ai one (it is configurable: the app label also counts)."""
KAI_RESERVATION_APP: Final = "kai-resource-reservation"
"""``app`` label value of reservation pods (``pkg/scheduler/conf/global_config.go`` default)."""
MAX_KAI_GPU_MEMORY_MIB: Final = 2**20
"""Most MiB one KAI request may name (1 TiB per GPU): above it the value is absurd."""
MAX_KAI_DEVICES: Final = MAX_GPUS_PER_NODE

# Volcano gpu-share (volcano-sh/volcano ``pkg/scheduler/api/devices/nvidia/gpushare/type.go``,
# ``device_info.go`` NewGPUDevices: capacity memory / number per card, indices 0..n-1; ``share.go``
# GetGPUIndex: comma-separated ``strconv.Atoi``; getUnhealthyGPUs: comma-separated indices).
VOLCANO_RESOURCE_MEMORY: Final = "volcano.sh/gpu-memory"
"""MB per the user guide (``docs/user-guide/how_to_use_gpu_sharing.md``: "requesting 1024MB"); shown as MiB."""
VOLCANO_RESOURCE_NUMBER: Final = "volcano.sh/gpu-number"
VOLCANO_ANN_GPU_INDEX: Final = "volcano.sh/gpu-index"
VOLCANO_ANN_UNHEALTHY: Final = "volcano.sh/gpu-unhealthy-ids"
# Volcano vGPU (``pkg/scheduler/api/devices/config/vgpu.go``, ``nvidia/vgpu/type.go``, ``utils.go``):
# register ``UUID,count,devmemMiB,type,health,mode:`` per GPU (decodeNodeDevices: >= 6 fields, id by
# position); pod ``volcano.sh/vgpu-ids-new`` in HAMi's ``UUID,type,memMiB,cores:`` / ``;`` format.
VOLCANO_ANN_VGPU_REGISTER: Final = "volcano.sh/node-vgpu-register"
VOLCANO_ANN_VGPU_IDS: Final = "volcano.sh/vgpu-ids-new"
VOLCANO_ANN_VGPU_NODE: Final = "volcano.sh/vgpu-node"
"""Set with ``volcano.sh/bind-phase: allocating`` when the scheduler picks a node (``device_info.go`` Allocate)."""
VOLCANO_ANN_BIND_PHASE: Final = "volcano.sh/bind-phase"

# Koordinator DeviceShare (koordinator-sh/koordinator ``apis/extension/device_share.go``: resources,
# ``scheduling.koordinator.sh/device-allocated`` = ``DeviceAllocations`` {type: [{minor, resources, id}]};
# ``apis/scheduling/v1alpha1/device_types.go``: the cluster-scoped ``Device`` named after its node).
KOORD_RESOURCE_GPU_MEMORY: Final = "koordinator.sh/gpu-memory"
KOORD_RESOURCE_GPU_MEMORY_RATIO: Final = "koordinator.sh/gpu-memory-ratio"
KOORD_RESOURCE_GPU_CORE: Final = "koordinator.sh/gpu-core"
KOORD_ANN_DEVICE_ALLOCATED: Final = "scheduling.koordinator.sh/device-allocated"
KOORD_DEVICE_GROUP: Final = "scheduling.koordinator.sh"
KOORD_DEVICE_VERSION: Final = "v1alpha1"
KOORD_DEVICE_PLURAL: Final = "devices"
MAX_KOORD_ANNOTATION_BYTES: Final = 64 * 1024
MIB: Final = 2**20


def parse_kai_fraction(text: str) -> float:
    """A KAI ``gpu-fraction``: a finite number in (0, 1].

    KAI's admission (``gpu_request_validator.go``) takes ``strconv.ParseFloat`` values in (0, 1);
    1 is accepted here as a whole GPU's memory, never more.

    Raises:
        AnnotationError: not a number, NaN or infinite, or outside (0, 1].
    """
    stripped = text.strip()
    if not stripped or len(stripped) > 32:
        raise AnnotationError("is not a number")
    try:
        value = float(stripped)
    except ValueError:
        raise AnnotationError("is not a number") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise AnnotationError("is not a fraction in (0, 1]")
    return value


def parse_kai_mib(text: str) -> int:
    """A KAI ``gpu-memory`` in MiB: an integer in [1, `MAX_KAI_GPU_MEMORY_MIB`].

    Raises:
        AnnotationError: not a decimal integer, or out of those bounds.
    """
    value = parse_int_strict(text.strip())
    if value is None or not 0 < value <= MAX_KAI_GPU_MEMORY_MIB:
        raise AnnotationError(f"is not a whole number of MiB in [1, {MAX_KAI_GPU_MEMORY_MIB}]")
    return value


def parse_kai_devices(text: str | None) -> int:
    """``gpu-fraction-num-devices``: 1 when absent.

    Raises:
        AnnotationError: not an integer in [1, `MAX_KAI_DEVICES`].
    """
    if text is None:
        return 1
    value = parse_int_strict(text.strip())
    if value is None or not 0 < value <= MAX_KAI_DEVICES:
        raise AnnotationError(f"is not a device count in [1, {MAX_KAI_DEVICES}]")
    return value


def parse_index_list(text: str) -> list[int]:
    """Comma-separated GPU indices (Volcano's ``gpu-index``), each valid and named once.

    Raises:
        AnnotationError: too long, a part that is not an index, or an index named twice.
    """
    if len(text) > 4 * MAX_GPUS_PER_NODE:
        raise AnnotationError("is too long to be a list of GPU indices")
    indices = [parse_int_strict(part.strip()) for part in text.split(",")]
    if any(index is None or not valid_gpu_index(index) for index in indices):
        raise AnnotationError(f"is not a list of GPU indices in [0, {MAX_GPUS_PER_NODE})")
    found = [index for index in indices if index is not None]
    if len(set(found)) != len(found):
        raise AnnotationError("names a GPU twice")
    return found


def parse_unhealthy_indices(text: str) -> frozenset[int]:
    """Volcano's ``gpu-unhealthy-ids``: the valid indices; Volcano itself skips parts Atoi rejects."""
    parts = (parse_int_strict(part.strip()) for part in text[: 4 * MAX_GPUS_PER_NODE].split(","))
    return frozenset(index for index in parts if index is not None and valid_gpu_index(index))


class VolcanoVgpu(msgspec.Struct, frozen=True, gc=False):
    """One GPU of Volcano's vGPU register."""

    uuid: str
    index: int
    memory: int
    model: str
    healthy: bool


def parse_volcano_register(text: str) -> list[VolcanoVgpu]:
    """``volcano.sh/node-vgpu-register``: ``UUID,count,devmemMiB,type,health,mode`` per GPU, ``:``-separated.

    Raises:
        AnnotationError: too long, a device with fewer than 6 fields, a bad number, a duplicate id,
            or more than `MAX_GPUS_PER_NODE` GPUs.
    """
    if len(text) > MAX_HAMI_ANNOTATION_BYTES:
        raise AnnotationError(f"is longer than {MAX_HAMI_ANNOTATION_BYTES} bytes")
    devices: list[VolcanoVgpu] = []
    for position, entry in enumerate(text.split(":")):
        if "," not in entry:
            continue  # decodeNodeDevices skips parts without a comma (the trailing empty one)
        fields = [field.strip() for field in entry.split(",")]
        if len(fields) < 6:
            raise AnnotationError(f"device {position} has {len(fields)} fields, expected at least 6")
        memory = parse_int_strict(fields[2])
        if memory is None or not 0 <= memory <= MAX_KAI_GPU_MEMORY_MIB or not fields[0] or len(fields[0]) > 256:
            raise AnnotationError(f"device {position} has no id or a memory outside [0, {MAX_KAI_GPU_MEMORY_MIB}]")
        devices.append(VolcanoVgpu(fields[0], len(devices), memory, fields[3][:128], fields[4].lower() == "true"))
        if len(devices) > MAX_GPUS_PER_NODE:
            raise AnnotationError(f"lists more than {MAX_GPUS_PER_NODE} GPUs")
    if len({device.uuid for device in devices}) != len(devices):
        raise AnnotationError("names a GPU id twice")
    return devices


class _KoordAllocation(msgspec.Struct, gc=False):
    minor: int
    resources: dict[str, str | int] = {}
    id: str = ""


_KOORD_DECODER: Final = msgspec.json.Decoder(dict[str, list[_KoordAllocation]])


def parse_koord_allocated(text: str) -> list[tuple[int, int, int, int]]:
    """``scheduling.koordinator.sh/device-allocated``: per GPU ``(minor, memory bytes, memory ratio, core)``.

    Only the ``gpu`` list is read (RDMA and FPGA entries are skipped). Memory comes from
    ``koordinator.sh/gpu-memory`` (a quantity, bytes); core from ``koordinator.sh/gpu-core``.

    Raises:
        AnnotationError: too long, not the documented JSON shape, nested too deep, a minor outside
            [0, `MAX_GPUS_PER_NODE`) or named twice, or a quantity that is not one.
    """
    if len(text) > MAX_KOORD_ANNOTATION_BYTES:
        raise AnnotationError(f"is longer than {MAX_KOORD_ANNOTATION_BYTES} bytes")
    try:
        allocations = _KOORD_DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        raise AnnotationError('is not {"gpu":[{"minor":N,"resources":{...}}]} JSON') from None
    result: list[tuple[int, int, int, int]] = []
    for entry in allocations.get("gpu", []):
        if not valid_gpu_index(entry.minor):
            raise AnnotationError(f"minor {entry.minor} is outside [0, {MAX_GPUS_PER_NODE})")
        memory = _koord_quantity(entry.resources.get(KOORD_RESOURCE_GPU_MEMORY, 0), MAX_GPU_MEMORY * MIB)
        ratio = _koord_quantity(entry.resources.get(KOORD_RESOURCE_GPU_MEMORY_RATIO, 0), 100)
        core = _koord_quantity(entry.resources.get(KOORD_RESOURCE_GPU_CORE, 0), 100 * 1024)
        result.append((entry.minor, memory, ratio, core))
    if len({entry[0] for entry in result}) != len(result):
        raise AnnotationError("names a minor twice")
    return result


def _koord_quantity(value: str | int, maximum: int) -> int:
    text = str(value)
    try:
        amount = parse_quantity(text)
    except ValueError:
        raise AnnotationError(f"resource quantity {text[:32]!r} is not a quantity") from None
    if not 0 <= amount <= maximum:
        raise AnnotationError(f"resource quantity {text[:32]!r} is out of bounds")
    return amount

# --- Node usage and enforcement (device plugin HTTP -> `kubectl gpushare top`, Prometheus) -------
# The device plugin serves these on a port of its own; `top` reaches it through the API server's
# pod proxy (``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/usage``). Nothing here is written
# to the Kubernetes API: a write per node per interval would not scale to 5,000 nodes.
USAGE_PORT: Final = 9445
"""Default port of the device plugin's HTTP server (``--usage-port``; 0 picks a free port, -1 serves none)."""
USAGE_PORT_NAME: Final = "usage"
"""Name of that port in the DaemonSet's container spec."""
USAGE_PATH: Final = "/usage"
"""The usage document (`UsageReport`, JSON)."""
METRICS_PATH: Final = "/metrics"
"""Prometheus exposition of the same numbers."""
USAGE_API_VERSION: Final = "gpushare.kubectl-gpushare.io/v1alpha1"
USAGE_KIND: Final = "NodeGPUUsage"
MAX_USAGE_BYTES: Final = 4 * 2**20
"""Longest usage document a client reads (110 pods x 64 GPUs is well under 1 MiB)."""
MAX_USAGE_PODS: Final = 4096
"""Most pod entries a client accepts from one node's document."""
ENV_ENFORCE_MEMORY: Final = "GPUSHARE_ENFORCE_MEMORY"
ENV_USAGE_INTERVAL: Final = "GPUSHARE_USAGE_INTERVAL"
ENV_USAGE_PORT: Final = "GPUSHARE_USAGE_PORT"
ENFORCE_OFF: Final = "off"
ENFORCE_SOFT: Final = "soft"
ENFORCE_HARD: Final = "hard"
ENFORCE_MODES: Final = (ENFORCE_OFF, ENFORCE_SOFT, ENFORCE_HARD)
"""``--enforce-memory``: off (the binary's default), soft, hard (the shipped manifests')."""

METRIC_GPU_USED: Final = "gpushare_gpu_memory_used_bytes"
METRIC_POD_USED: Final = "gpushare_pod_gpu_memory_used_bytes"
METRIC_POD_LIMIT: Final = "gpushare_pod_gpu_memory_limit_bytes"
METRIC_GPU_ENFORCED: Final = "gpushare_gpu_memory_enforced"
"""1 where the driver enforces pod limits on the GPU, else 0 (label ``reason`` says why)."""
METRIC_LABELS_GPU: Final = ("node", "gpu", "uuid")
METRIC_LABELS_POD: Final = ("node", "gpu", "uuid", "namespace", "pod")


class UsageGpu(msgspec.Struct, frozen=True, gc=False, rename="camel", forbid_unknown_fields=False):
    """One GPU of a node in the usage document. Byte counts; None where not known."""

    index: int
    uuid: str
    total_bytes: int
    allocated_bytes: int
    """Sum of the gpushare shares of the pods on this GPU (what the ledger counts)."""
    used_bytes: int | None = None
    """Memory in use on the GPU (NVML), all processes; None if it could not be read."""
    enforcement: str = ENFORCE_OFF
    """`ENFORCE_OFF`, `ENFORCE_SOFT` or `ENFORCE_HARD`: what the driver holds pods to on this GPU."""
    reason: str = ""
    """Why enforcement is off where it was asked for (driver too old, MIG, cgroup v1, ...)."""


class UsagePod(msgspec.Struct, frozen=True, gc=False, rename="camel", forbid_unknown_fields=False):
    """One pod's share of one GPU. A pod spread over two GPUs has two entries."""

    namespace: str
    name: str
    uid: str
    gpu: int
    """The GPU's index on the node."""
    allocated_bytes: int
    """The pod's share: ``ALIYUN_COM_GPU_MEM_POD`` times the node's unit."""
    used_bytes: int | None = None
    """What the pod's processes hold on this GPU; None if unknown."""
    limit_bytes: int | None = None
    """The hard limit the driver enforces for the pod's cgroup on this GPU; None if none."""
    soft_limit_bytes: int | None = None


class UsageReport(msgspec.Struct, frozen=True, gc=False, rename="camel", forbid_unknown_fields=False):
    """``GET /usage`` on a device plugin: one node's GPUs and pods, as last sampled."""

    node: str
    sampled_at: str
    """RFC 3339 time of the sample."""
    interval_seconds: float
    source: str
    """Where pod usage came from: ``cgroup-limits`` (the driver's per-cgroup ``currentUsed``),
    ``processes`` (NVML's process list mapped through ``/proc/<pid>/cgroup``) or ``none``."""
    gpus: list[UsageGpu]
    pods: list[UsagePod]
    api_version: str = USAGE_API_VERSION
    kind: str = USAGE_KIND


_usage_decoder = msgspec.json.Decoder(UsageReport)


def _valid_bytes(value: int | None) -> bool:
    return value is None or 0 <= value <= MAX_INT64


def decode_usage_report(data: bytes) -> UsageReport:
    """Decode and bound a usage document from a node.

    Raises:
        AnnotationError: too long, not the schema, a version this reader does not know (read
            conservatively: nothing from it is shown as used or free), or values out of range.
    """
    if len(data) > MAX_USAGE_BYTES:
        raise AnnotationError(f"usage document is longer than {MAX_USAGE_BYTES} bytes")
    if json_depth(data.decode("utf-8", "replace")) > 6:
        raise AnnotationError("usage document is nested too deeply")
    try:
        report = _usage_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AnnotationError(f"usage document: {exc}") from None
    except UnicodeDecodeError:  # msgspec's error for a string that is not UTF-8, not a DecodeError
        raise AnnotationError("usage document: a string is not UTF-8") from None
    if report.api_version != USAGE_API_VERSION or report.kind != USAGE_KIND:
        raise AnnotationError(f"usage document has unknown version {report.api_version[:64]!r}/{report.kind[:64]!r}")
    if len(report.gpus) > MAX_GPUS_PER_NODE or len(report.pods) > MAX_USAGE_PODS:
        raise AnnotationError("usage document lists too many GPUs or pods")
    if not 0 <= report.interval_seconds <= 86_400 or len(report.node) > 253:  # NaN fails both
        raise AnnotationError("usage document: node name or interval out of range")
    if len({gpu.index for gpu in report.gpus}) != len(report.gpus):
        raise AnnotationError("usage document lists a GPU twice")
    for gpu in report.gpus:
        if not valid_gpu_index(gpu.index) or len(gpu.reason) > 4096 or not all(
            _valid_bytes(v) for v in (gpu.total_bytes, gpu.allocated_bytes, gpu.used_bytes)
        ) or gpu.enforcement not in ENFORCE_MODES:
            raise AnnotationError(f"usage document: GPU entry out of range (index {gpu.index})")
    for pod in report.pods:
        # A name longer than the API allows (a namespace is a DNS label, a pod name a subdomain) names no pod.
        if not valid_gpu_index(pod.gpu) or len(pod.namespace) > 63 or len(pod.name) > 253 or not all(
            _valid_bytes(v) for v in (pod.allocated_bytes, pod.used_bytes, pod.limit_bytes, pod.soft_limit_bytes)
        ):
            raise AnnotationError(f"usage document: pod entry out of range ({pod.namespace[:64]}/{pod.name[:64]})")
    return report


def encode_usage_report(report: UsageReport) -> bytes:
    """Serialise a usage document (the device plugin's ``GET /usage`` body)."""
    return msgspec.json.encode(report)


class PodUsage(msgspec.Struct, frozen=True, gc=False):
    """What one pod name holds on one GPU, its entries merged (`pod_usage_by_name`)."""

    used_bytes: int | None
    limit_bytes: int | None


def pod_usage_by_name(pods: Iterable[UsagePod]) -> dict[tuple[str, str, int], PodUsage]:
    """(namespace, pod name, GPU index) -> the usage of every entry under that name, merged once.

    `top` and ``/metrics`` show a pod by name, so both read a document through this one rule. Two
    entries share a name on one GPU when a pod replaced under its name (a StatefulSet's) starts while
    the old one still ends, each with its own UID and cgroup. Used bytes and limits are both summed
    (capped at `MAX_INT64`): the name holds both pods' memory under both pods' limits, so its use is
    measured against what bounds it, and the result does not depend on the order entries come in.
    Either is unknown if any entry's is (a part of a sum is not the sum).
    """
    merged: dict[tuple[str, str, int], PodUsage] = {}
    for pod in pods:
        key = (pod.namespace, pod.name, pod.gpu)
        seen = merged.get(key)
        if seen is None:
            merged[key] = PodUsage(pod.used_bytes, pod.limit_bytes)
            continue
        merged[key] = PodUsage(_sum_known(seen.used_bytes, pod.used_bytes),
                               _sum_known(seen.limit_bytes, pod.limit_bytes))
    return merged


def _sum_known(a: int | None, b: int | None) -> int | None:
    """``a + b`` capped at `MAX_INT64`; None if either is unknown."""
    return None if a is None or b is None else min(a + b, MAX_INT64)


MAX_ENFORCEMENT_REASON: Final = 200
"""Longest ``enforcementReason`` shown from a node's GPU annotation (longer ones are cut)."""


class GpuEnforcement(msgspec.Struct, frozen=True, gc=False):
    """What a node's device plugin says about memory limits on one GPU (`ANN_NODE_GPUS`)."""

    mode: str
    """`ENFORCE_OFF`, `ENFORCE_SOFT` or `ENFORCE_HARD`."""
    reason: str = ""


def parse_node_gpu_enforcement(text: str | None) -> dict[int, GpuEnforcement]:
    """Read each GPU's ``enforcement`` and ``enforcementReason`` keys from `ANN_NODE_GPUS`.

    GPUs whose entry has no ``enforcement`` key (an older plugin, or Alibaba's) are left out:
    nothing is known of them. An entry with another mode, a non-string reason or a bad index is
    left out too; a malformed annotation (see `parse_node_gpus`) gives nothing. Reasons are cut
    to `MAX_ENFORCEMENT_REASON` characters and stripped of control characters.
    """
    if not text:
        return {}
    try:
        raw = _load_json(text, f"annotation {ANN_NODE_GPUS}", MAX_NODE_GPUS_BYTES, 2)
    except AnnotationError:
        return {}
    if not isinstance(raw, list) or len(raw) > MAX_GPUS_PER_NODE:
        return {}
    found: dict[int, GpuEnforcement] = {}
    for entry in raw:
        if not isinstance(entry, dict):
            return {}
        index, mode, reason = entry.get("index"), entry.get("enforcement"), entry.get("enforcementReason", "")
        if not _is_int(index) or not valid_gpu_index(index) or mode not in ENFORCE_MODES or not isinstance(reason, str):
            continue
        found[index] = GpuEnforcement(mode, printable(reason, MAX_ENFORCEMENT_REASON))
    return found

# --- DRA driver (kubelet plugin <-> kubelet, ResourceSlices and claims in resource.k8s.io/v1) ----
# One contract for the node side (``serve-dra-driver``), the sandbox's allocator and the views.
# Field names and rules: k8s.io/api resource/v1 types.go; KEP-5075 (consumable capacity); the
# kubelet's pluginregistration v1 and dra v1/v1beta1 protos; k8s.io/dynamic-resource-allocation's
# kubeletplugin (socket names) and resourceslice controller (slice names); the CDI spec (SPEC.md).
DRA_API_GROUP: Final = "resource.k8s.io"
DRA_API_VERSION: Final = "v1"
DRA_DRIVER: Final = "gpu-mem.kubectl-gpushare.io"
"""Our driver name: ``spec.driver`` of our ResourceSlices, ``driver`` of allocation results."""
DRA_DEVICE_CLASS: Final = DRA_DRIVER
"""The DeviceClass the manifests install; claims name it in ``exactly.deviceClassName``."""
DRA_DEVICE_CLASS_SELECTOR: Final = f'device.driver == "{DRA_DRIVER}"'
"""The DeviceClass's one CEL selector."""
DRA_DEVICE_PREFIX: Final = "gpu-"
"""Device names are ``gpu-<index>`` (NVIDIA's DRA driver names whole GPUs ``gpu-<minor>`` too)."""
DRA_CAPACITY_MEMORY: Final = "memory"
"""The capacity claims consume: ``capacity.requests.memory`` and ``consumedCapacity.memory``."""
DRA_ATTR_INDEX: Final = "index"
DRA_ATTR_UUID: Final = "uuid"
DRA_ATTR_MODEL: Final = "model"
DRA_ATTR_DRIVER_VERSION: Final = "driverVersion"
DRA_UNIT_SUFFIX: Final = {UNIT_GIB: "Gi", UNIT_MIB: "Mi"}
DRA_UNIT_QUANTITY: Final = {unit: f"1{suffix}" for unit, suffix in DRA_UNIT_SUFFIX.items()}
"""``--memory-unit`` -> the request policy's default, min and step (claims are rounded up to it)."""
DRA_TAINT_UNHEALTHY: Final = f"{DRA_DRIVER}/unhealthy"
"""Device taint key on an unhealthy GPU (``--unhealthy taint``; the DRADeviceTaints gate must be on)."""
LABEL_DRA: Final = "gpushare.kubectl-gpushare.io/dra"
"""``=true`` selects the nodes the DRA driver's DaemonSet runs on (``manifests/dra``; not ``gpushare=true`` ones)."""
DRA_SLICE_INDEX: Final = "00000"
"""The slice's index prefix (the resourceslice controller encodes the index in at least 5 hex digits)."""
DRA_SLICE_MAX_DEVICES: Final = 64
"""``ResourceSliceMaxDevicesWithAdvancedFeatures`` (taints, shared counters): one slice holds every GPU."""
DRA_PLUGIN_TYPE: Final = "DRAPlugin"
"""``PluginInfo.type`` (pluginregistration v1 ``constants.go``)."""
DRA_SERVICE_V1: Final = "v1.DRAPlugin"
DRA_SERVICE_V1BETA1: Final = "v1beta1.DRAPlugin"
"""``DRAPluginService`` of dra v1 and v1beta1: what ``supported_versions`` lists (kubelet prefers v1)."""
DRA_REGISTRATION_DIR: Final = "/var/lib/kubelet/plugins_registry"
DRA_PLUGIN_DIR: Final = f"/var/lib/kubelet/plugins/{DRA_DRIVER}"
DRA_REGISTRATION_SOCKET: Final = f"{DRA_DRIVER}-reg.sock"
DRA_PLUGIN_SOCKET: Final = "dra.sock"
DRA_SERIALIZE_LOCK: Final = "serialize.lock"
"""The file in the plugin directory whose lock serializes prepare and unprepare across the instances
of a rolling update (k8s.io/dynamic-resource-allocation kubeletplugin: ``grpcLockFilePath``)."""
DRA_CDI_ROOT: Final = "/var/run/cdi"
DRA_CDI_VENDOR: Final = f"k8s.{DRA_DRIVER}"
DRA_CDI_CLASS: Final = "claim"
DRA_CDI_KIND: Final = f"{DRA_CDI_VENDOR}/{DRA_CDI_CLASS}"
DRA_CDI_VERSION: Final = "0.5.0"
"""The oldest CDI spec version whose device names may start with a digit (claim UIDs may)."""
ENV_DRA_REGISTRATION_DIR: Final = "GPUSHARE_PLUGIN_REGISTRATION_DIR"
ENV_DRA_PLUGIN_DIR: Final = "GPUSHARE_DRA_PLUGIN_DIR"
ENV_DRA_CDI_ROOT: Final = "GPUSHARE_CDI_ROOT"
ENV_POD_UID: Final = "POD_UID"
"""The DRA driver pod's own UID (the DaemonSet passes ``metadata.uid`` from the downward API)."""
_DRA_DEVICE: Final = re.compile(r"gpu-(0|[1-9][0-9]?)")


def dra_registration_socket(pod_uid: str = "") -> str:
    """The registration socket's file name: ``<driver>-<pod UID>-reg.sock`` in a rolling update, else fixed.

    kubeletplugin ``Start``: ``driverName + "-" + rollingUpdateUID + "-reg.sock"``. The caller has
    checked ``pod_uid`` (a UUID) before it reaches a path.
    """
    return f"{DRA_DRIVER}-{pod_uid}-reg.sock" if pod_uid else DRA_REGISTRATION_SOCKET


def dra_plugin_socket(pod_uid: str = "") -> str:
    """The DRA socket's file name: ``dra-<pod UID>.sock`` in a rolling update, else ``dra.sock`` (kubeletplugin)."""
    return f"dra-{pod_uid}.sock" if pod_uid else DRA_PLUGIN_SOCKET


def dra_device_name(index: int) -> str:
    """``gpu-<index>``: the device a GPU is published as."""
    return f"{DRA_DEVICE_PREFIX}{index}"


def parse_dra_device_name(name: object) -> int | None:
    """The GPU index a device name of ours stands for; None for any other name (no leading zeros)."""
    if not isinstance(name, str) or len(name) > 8:
        return None
    match = _DRA_DEVICE.fullmatch(name)
    if match is None:
        return None
    index = int(match.group(1))
    return index if valid_gpu_index(index) else None


def dra_memory_quantity(units: int, unit: str) -> str:
    """``units`` of ``unit`` as a quantity (``16``, ``GiB`` -> ``"16Gi"``), the form kube-apiserver keeps."""
    return canonical_quantity(f"{units}{DRA_UNIT_SUFFIX[unit]}")


def dra_slice_generate_name(node: str) -> str:
    """``metadata.generateName`` of a node's slice: ``<index>-<driver>-<node>-``.

    The resourceslice controller's scheme; kube-apiserver cuts the prefix to 58 characters before
    adding 5 random ones.
    """
    return f"{DRA_SLICE_INDEX}-{DRA_DRIVER}-{node}-"


def dra_cdi_device_name(claim_uid: str, index: int) -> str:
    """The CDI device of one GPU of one claim: ``<claim UID>-gpu-<index>``."""
    return f"{claim_uid}-{dra_device_name(index)}"


def dra_cdi_id(claim_uid: str, index: int) -> str:
    """The fully qualified CDI device id NodePrepareResources returns (``<kind>=<device>``)."""
    return f"{DRA_CDI_KIND}={dra_cdi_device_name(claim_uid, index)}"
