"""kube-apiserver's registry rules for the ``resource.k8s.io/v1`` kinds, as the sandbox applies them.

What ``pkg/registry/resource/*/strategy.go`` and ``pkg/apis/resource/validation/validation.go`` do
that clients observe (422 with field causes, worded as ``field.Invalid``/``Required``/``Forbidden``):

- ResourceClaim: ``status`` is dropped on create (``PrepareForCreate``) and kept apart from the
  main resource; the spec is immutable (``field is immutable``); requests are checked (names,
  class, count > 0, allocation mode, selectors that compile as CEL, capacity requests not
  negative). A status update may set ``reservedFor`` only with an allocation, may not change an
  allocation once set, and keeps ``reservedFor`` to 256 entries with unique UIDs.
- ResourceClaimTemplate: the same checks on ``spec.spec``; the spec is immutable.
- ResourceSlice: driver, pool (generation >= 0, resourceSliceCount > 0), exactly one node choice,
  at most 128 uniquely named devices, each device's attributes, capacities and request policy.
- DeviceClass: selectors that compile.
- Every ``int64`` field (`INT64_FIELDS`: counts, pool generation and slice count, int attributes,
  toleration seconds, condition generations) is bounded as Go's JSON decoder bounds it: a 400
  before validation, from `objects.check_types`.

The checks reuse `dra_objects` (the one decoder) and `kube.cel` (the one CEL); a capacity request
too large for int64 thousandths is accepted here, as upstream accepts it, and refused by the
scheduler for that claim alone. No I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Final

from kubectl_gpushare import dra_objects as dra
from kubectl_gpushare.kube import cel
from kubectl_gpushare.sandbox import errors
from kubectl_gpushare.sandbox.resources import DRA, Resource

CLAIMS: Final = "resourceclaims"
TEMPLATES: Final = "resourceclaimtemplates"
SLICES: Final = "resourceslices"
CLASSES: Final = "deviceclasses"
IMMUTABLE: Final = "field is immutable"
QUANTITY_PATHS: Final = {
    CLAIMS: ("spec.devices.requests[].exactly.capacity.requests",
             "status.allocation.devices.results[].consumedCapacity"),
    TEMPLATES: ("spec.spec.devices.requests[].exactly.capacity.requests",),
}
"""Flat quantity maps of the DRA kinds (canonicalised like a ResourceList by `objects`)."""


def _claim_spec_int64(prefix: str) -> tuple[tuple[str, str], ...]:
    requests = f"{prefix}.devices.requests[]"
    return ((f"{requests}.exactly.count", "ExactDeviceRequest"),
            (f"{requests}.exactly.tolerations[].tolerationSeconds", "DeviceToleration"),
            (f"{requests}.firstAvailable[].count", "DeviceSubRequest"),
            (f"{requests}.firstAvailable[].tolerations[].tolerationSeconds", "DeviceToleration"))


INT64_FIELDS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    CLAIMS: (*_claim_spec_int64("spec"),
             ("status.allocation.devices.results[].tolerations[].tolerationSeconds", "DeviceToleration"),
             ("status.devices[].conditions[].observedGeneration", "Condition")),
    TEMPLATES: (("spec.metadata.generation", "ObjectMeta"), ("spec.metadata.deletionGracePeriodSeconds", "ObjectMeta"),
                *_claim_spec_int64("spec.spec")),
    SLICES: (("spec.pool.generation", "ResourcePool"), ("spec.pool.resourceSliceCount", "ResourcePool"),
             ("spec.devices[].attributes{}.int", "DeviceAttribute"),
             ("spec.devices[].attributes{}.ints[]", "DeviceAttribute")),
}
"""The ``int64`` and ``*int64`` fields of the kinds (k8s.io/api resource/v1 types.go, metav1.Condition), each
with the Go struct that holds it: Go's JSON decoder refuses a value outside int64 there with 400 (`objects`).
``[]`` marks every element of an array, ``{}`` every value of a map."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def is_dra(resource: Resource) -> bool:
    """One of the resource.k8s.io kinds."""
    return resource.group == DRA


def _compile_causes(expressions: list[tuple[str, str]]) -> list[str]:
    """``validateCELSelector``: each expression must compile and stay within the cost limit.

    Checked only where CEL is installed. Over the limit is ``field.Forbidden`` upstream, without the value.
    """
    if not cel.available():
        return []
    causes: list[str] = []
    for path, source in expressions:
        try:
            cel.compile_selector(source)
        except cel.CelCostError as exc:
            causes.append(f"{path}: Forbidden: {exc.detail}")
        except cel.CelError as exc:
            shown = source if len(source) <= 200 else source[:200] + "..."
            causes.append(f"{path}: Invalid value: {shown!r}: compilation failed: {exc}")
    return causes


def _exact_requests(requests: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, ``exactly``) of each device request that has one, skipping malformed entries."""
    for i, request in enumerate(requests if isinstance(requests, list) else []):
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if isinstance(exactly, dict):
            yield i, exactly


def _capacity_requests(exactly: dict[str, Any]) -> dict[str, Any]:
    """``exactly.capacity.requests`` (empty when absent or malformed)."""
    capacity = exactly.get("capacity")
    wanted = capacity.get("requests") if isinstance(capacity, dict) else None
    return wanted if isinstance(wanted, dict) else {}


def _selector_paths(requests: Any, prefix: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for i, exactly in _exact_requests(requests):
        selectors = exactly.get("selectors")
        for j, selector in enumerate(selectors if isinstance(selectors, list) else []):
            expression = (selector.get("cel") or {}).get("expression") if isinstance(selector, dict) else None
            if isinstance(expression, str) and expression.strip():
                found.append((f"{prefix}.devices.requests[{i}].exactly.selectors[{j}].cel.expression", expression))
    return found


def _negative_requests(requests: Any, prefix: str) -> list[str]:
    causes: list[str] = []
    for i, exactly in _exact_requests(requests):
        for name, value in _capacity_requests(exactly).items():
            if isinstance(value, str) and value.lstrip().startswith("-") and value.strip("-+0. ") != "":
                causes.append(f"{prefix}.devices.requests[{i}].exactly.capacity.requests[{name}]: "
                              f"Invalid value: {value!r}: must be greater than or equal to zero")
    return causes


def _in_range(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with every capacity request `dra.read_quantity` refuses read as zero, for decoding.

    Those are answered apart (negative: `_negative_requests`; too large: accepted, the scheduler's
    to refuse); the decoder stops at its first problem, so left in they would hide the next one.
    """
    copied = copy.deepcopy(spec)
    devices = copied.get("devices")
    requests = devices.get("requests") if isinstance(devices, dict) else None
    for _, exactly in _exact_requests(requests):
        wanted = _capacity_requests(exactly)
        for name, value in list(wanted.items()):
            try:
                dra.read_quantity(value)
            except ValueError:
                wanted[name] = "0"
    return copied


def _claim_spec_causes(spec: Any, prefix: str, kind: str) -> list[str]:
    """Causes for a claim spec at ``prefix`` (``spec`` or ``spec.spec``)."""
    if not isinstance(spec, dict):
        return [f"{prefix}: Required value"]
    devices = spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, dict) else None
    causes = _negative_requests(requests, prefix)
    try:
        claim = dra.decode_claim({"metadata": {"name": "x", "namespace": "x"}, "spec": _in_range(spec)})
    except dra.InvalidObjectError as exc:
        raise errors.bad_request(f"{kind} in version \"v1\" cannot be handled as a {kind}: "
                                 f"{str(exc).partition('(')[2].rstrip(')') or exc}") from None
    problem = claim.spec_invalid
    if problem and ".capacity.requests" not in problem:  # out-of-range requests: the scheduler's to refuse
        causes.append(problem.replace("spec.", f"{prefix}.", 1) if prefix != "spec" else problem)
    causes.extend(_compile_causes(_selector_paths(requests, prefix)))
    return causes


def _slice_causes(obj: dict[str, Any]) -> list[str]:
    try:
        got = dra.decode_slice(obj)
    except dra.InvalidObjectError as exc:
        return [f"spec: Invalid value: {str(exc).partition(': ')[2]}"]
    found = [f"spec.devices[{i}]: Invalid value: {device.name!r}: {device.invalid}"
             for i, device in enumerate(got.devices) if device.invalid]
    if got.node_selector is not None and got.node_selector.error:  # ValidateNodeSelector, validateResourceSliceSpec
        found.append(f"spec.nodeSelector: Invalid value: {got.node_selector.error}")
    return found


def _class_causes(obj: dict[str, Any]) -> list[str]:
    spec = _dict(obj.get("spec"))
    got = dra.decode_class({"metadata": {"name": "x"}, "spec": spec})
    if got.invalid:
        return [got.invalid]
    return _compile_causes([(f"spec.selectors[{i}].cel.expression", s) for i, s in enumerate(got.selectors)])


def causes(resource: Resource, obj: dict[str, Any]) -> list[str]:
    """The validation causes of a DRA object on create or update (empty: valid).

    Raises:
        ApiError: 400 when a claim spec does not even decode (wrong JSON types).
    """
    if resource.plural == CLAIMS:
        return _claim_spec_causes(obj.get("spec"), "spec", resource.kind)
    if resource.plural == TEMPLATES:
        spec = obj.get("spec")
        return _claim_spec_causes(spec.get("spec") if isinstance(spec, dict) else None, "spec.spec", resource.kind)
    if resource.plural == SLICES:
        return _slice_causes(obj)
    if resource.plural == CLASSES:
        return _class_causes(obj)
    return []


def prepare_create(resource: Resource, obj: dict[str, Any]) -> None:
    """``PrepareForCreate``: a new claim has no status; then the API's defaults (`set_defaults`)."""
    if resource.plural == CLAIMS:
        obj.pop("status", None)
    set_defaults(resource, obj)


def set_defaults(resource: Resource, obj: dict[str, Any]) -> None:
    """resource/v1 ``defaults.go``: ``allocationMode: ExactCount`` and then ``count: 1``; tolerations ``Equal``."""
    spec = _dict(obj.get("spec"))
    if resource.plural == TEMPLATES:
        spec = _dict(spec.get("spec"))
    if resource.plural not in (CLAIMS, TEMPLATES):
        return
    for request in _dict(spec.get("devices")).get("requests") or []:
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if not isinstance(exactly, dict):
            continue
        exactly.setdefault("allocationMode", dra.MODE_EXACT_COUNT)
        if exactly.get("allocationMode") == dra.MODE_EXACT_COUNT and not exactly.get("count"):
            exactly["count"] = 1
        for toleration in exactly.get("tolerations") or []:
            if isinstance(toleration, dict) and not toleration.get("operator"):
                toleration["operator"] = dra.OPERATOR_EQUAL


def _consumers(status: Any) -> list[Any]:
    reserved = status.get("reservedFor") if isinstance(status, dict) else None
    return reserved if isinstance(reserved, list) else []


def update_causes(resource: Resource, old: dict[str, Any], new: dict[str, Any], subresource: str) -> list[str]:
    """What an update may not change (immutable specs; the claim status invariants)."""
    found: list[str] = []
    if resource.plural in (CLAIMS, TEMPLATES) and subresource == "" and new.get("spec") != old.get("spec"):
        found.append(f"spec: Invalid value: \"object\": {IMMUTABLE}")
    if resource.plural == CLAIMS and subresource == "status":
        status = _dict(new.get("status"))
        old_status = _dict(old.get("status"))
        reserved = _consumers(status)
        if reserved and not status.get("allocation"):
            found.append("status.reservedFor: Forbidden: may not be specified when `allocated` is not set")
        if len(reserved) > dra.MAX_RESERVED_FOR:
            found.append(f"status.reservedFor: Too many: {len(reserved)}: must have at most "
                         f"{dra.MAX_RESERVED_FOR} items")
        uids: set[str] = set()
        for i, consumer in enumerate(reserved):
            entry = consumer if isinstance(consumer, dict) else {}
            for key in ("resource", "name", "uid"):
                if not isinstance(entry.get(key), str) or not entry.get(key):
                    found.append(f"status.reservedFor[{i}].{key}: Required value")
            uid = entry.get("uid")
            if isinstance(uid, str) and uid in uids:
                found.append(f'status.reservedFor[{i}].uid: Duplicate value: "{uid}"')
            if isinstance(uid, str):
                uids.add(uid)
        if old_status.get("allocation") and status.get("allocation") \
                and status.get("allocation") != old_status.get("allocation"):
            found.append(f"status.allocation: Invalid value: \"object\": {IMMUTABLE}")
        allocation = status.get("allocation")
        if allocation and not old_status.get("allocation"):
            try:
                dra.decode_claim({"metadata": {"name": "x", "namespace": "x"}, "status": {"allocation": allocation}})
            except dra.InvalidObjectError as exc:
                found.append(f"status.allocation: Invalid value: {str(exc).partition('(')[2].rstrip(')')}")
    return found


def claim_state(claim: dict[str, Any]) -> str:
    """The STATE column of ``kubectl get resourceclaims`` (``resourceClaimState`` in the printers)."""
    meta = _dict(claim.get("metadata"))
    status = _dict(claim.get("status"))
    states: list[str] = []
    deleted = bool(meta.get("deletionTimestamp"))
    if deleted:
        states.append("deleted")
    if not status.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if _consumers(status):
            states.append("reserved")
    return ",".join(states)


def slice_cells(obj: dict[str, Any]) -> list[str]:
    """NODE, DRIVER and POOL of ``kubectl get resourceslices`` (``printResourceSlice``)."""
    spec = _dict(obj.get("spec"))
    pool = _dict(spec.get("pool"))
    return [str(spec.get("nodeName") or ""), str(spec.get("driver") or ""), str(pool.get("name") or "")]

