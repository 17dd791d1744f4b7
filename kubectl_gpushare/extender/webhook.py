"""The mutating admission webhook: route GPU pods to the second scheduler (``manifests/managed``).

Where kube-scheduler's configuration cannot be edited (EKS, GKE, AKS), a second kube-scheduler
runs the profile ``gpushare-scheduler`` with our extender, and this webhook sets
``spec.schedulerName`` on the pods that need it. Pure: an AdmissionReview (``admission.k8s.io/v1``)
in, a status and an AdmissionReview out; no state, no I/O, so every replica answers it whether or
not it leads.

Rules:
- a pod that requests ``aliyun.com/gpu-mem`` in any container or init container (one rule,
  `records.requests_gpu_memory`) gets a JSONPatch setting ``spec.schedulerName``;
- unless it already names a scheduler: any name other than empty or ``default-scheduler`` is the
  user's choice and is kept;
- unless the pod carries the label ``gpushare.kubectl-gpushare.io/webhook=disabled`` (the
  namespace opt-out, the same label on a namespace, is the webhook configuration's
  ``namespaceSelector``: the API server never sends those pods);
- every other pod, and any operation other than a pod CREATE, is allowed without a patch;
- a review that is not a readable AdmissionReview v1 with a ``uid`` and a pod gets 400.
"""

from __future__ import annotations

import base64
import json

import msgspec

from kubectl_gpushare import protocol
from kubectl_gpushare.kube import records
from kubectl_gpushare.kube.types import Pod

API_VERSION = "admission.k8s.io/v1"
MAX_UID = 256
"""The API server sends a UUID; anything much longer is not one of its reviews."""


class _Resource(msgspec.Struct, frozen=True):
    group: str = ""
    version: str = ""
    resource: str = ""


class _Request(msgspec.Struct, frozen=True, rename="camel"):
    uid: str
    operation: str = ""
    resource: _Resource = _Resource()
    sub_resource: str = ""
    object: Pod | None = None
    """Decoded straight into the typed pod view; a pod field of the wrong type makes the review malformed."""


class _Review(msgspec.Struct, frozen=True, rename="camel"):
    api_version: str = ""
    kind: str = ""
    request: _Request | None = None


_decoder = msgspec.json.Decoder(_Review)


class ReviewError(ValueError):
    """The body is not an AdmissionReview this webhook can answer (a 400)."""


def decode_review(body: bytes) -> _Request:
    """The request of an AdmissionReview v1.

    Raises:
        ReviewError: malformed JSON, another kind or version, no request, or no usable uid.
    """
    try:
        review = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise ReviewError(f"not an AdmissionReview: {exc}") from None
    if review.api_version != API_VERSION or review.kind != "AdmissionReview":
        raise ReviewError(f"expected apiVersion {API_VERSION} kind AdmissionReview, "
                          f"got {review.api_version[:64]!r} {review.kind[:64]!r}")
    request = review.request
    if request is None:
        raise ReviewError("the AdmissionReview has no request")
    if not request.uid or len(request.uid) > MAX_UID:
        raise ReviewError(f"request.uid must be 1-{MAX_UID} characters")
    return request


def scheduler_patch(pod: Pod) -> list[dict[str, str]]:
    """The JSONPatch that sends ``pod`` to the gpushare scheduler; empty when it must be left alone."""
    if pod.metadata.labels.get(protocol.LABEL_WEBHOOK) == protocol.WEBHOOK_DISABLED:
        return []
    if pod.spec.scheduler_name not in ("", protocol.DEFAULT_SCHEDULER_NAME):
        return []
    if not records.requests_gpu_memory(pod):
        return []
    # "add" on an existing member replaces it (RFC 6902 4.1), so one op covers absent and default.
    return [{"op": "add", "path": "/spec/schedulerName", "value": protocol.SCHEDULER_NAME}]


def _reply(uid: str, patch: list[dict[str, str]]) -> bytes:
    response: dict[str, str | bool] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return json.dumps({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}).encode()


def mutate(body: bytes) -> tuple[int, bytes]:
    """Answer one AdmissionReview.

    Returns:
        200 and an AdmissionReview whose response echoes the request's uid (always allowed, with
        a patch for GPU pods), or 400 and a JSON ``Error`` for a malformed review.
    """
    try:
        request = decode_review(body)
        pod: Pod | None = None
        if request.operation == "CREATE" and request.resource.resource == "pods" and not request.sub_resource:
            if request.object is None:
                raise ReviewError("a pod CREATE review carries no pod in request.object")
            pod = request.object
    except ReviewError as exc:
        return 400, json.dumps({"Error": str(exc)}).encode()
    return 200, _reply(request.uid, scheduler_patch(pod) if pod is not None else [])
