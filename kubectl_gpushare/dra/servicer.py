"""The gRPC faces kubelet talks to: plugin registration, and the DRA node service in v1 and v1beta1.

Thin adapters over `preparer.Preparer`: requests become `ClaimRef`s, outcomes become per-claim
responses (every claim of the request gets an entry, as the proto requires; a failure is that
claim's ``error``). v1 and v1beta1 differ only in ``Device.share_id`` (v1 only), so one function
builds both from the module it is given. An unexpected exception reaches kubelet as INTERNAL with
one line, never UNKNOWN. Registration answers kubelet's plugin watcher (pluginregistration v1):
``GetInfo`` names the driver, its DRA socket and the services served; the kubeletplugin helper's
``registrationServer`` answers the same. No decisions are made here.
"""

from __future__ import annotations

import logging
import threading
import time
from types import ModuleType
from typing import Any

import grpc

from kubectl_gpushare import protocol
from kubectl_gpushare.dra._api import dra_v1_pb2 as v1
from kubectl_gpushare.dra._api import dra_v1_pb2_grpc as v1_grpc
from kubectl_gpushare.dra._api import dra_v1beta1_pb2 as v1beta1
from kubectl_gpushare.dra._api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2 as reg
from kubectl_gpushare.dra._api import pluginregistration_v1_pb2_grpc as reg_grpc
from kubectl_gpushare.dra.checkpoint import PreparedClaim
from kubectl_gpushare.dra.preparer import ClaimRef, Preparer

log = logging.getLogger(__name__)

SERVICES = (protocol.DRA_SERVICE_V1, protocol.DRA_SERVICE_V1BETA1)
"""What ``GetInfo`` lists as supported versions: kubelet picks the first it knows (v1, then v1beta1)."""


def _refs(request: Any) -> list[ClaimRef]:
    return [ClaimRef(claim.namespace, claim.name, claim.uid) for claim in request.claims]


def _devices(api: ModuleType, claim: PreparedClaim) -> list[Any]:
    devices = []
    for device in claim.devices:
        fields: dict[str, Any] = {
            "request_names": [device.request.split("/", 1)[0]],  # a subrequest reports its request
            "pool_name": claim.pool,
            "device_name": device.device,
            "cdi_device_ids": list(claim.cdi_ids),
        }
        if api is v1 and device.share_id is not None:
            fields["share_id"] = device.share_id
        devices.append(api.Device(**fields))
    return devices


def deadline_of(context: grpc.ServicerContext) -> float | None:
    """The call's deadline as a `time.monotonic` instant (None: the caller set none)."""
    left = context.time_remaining()
    return None if left is None else time.monotonic() + left


def prepare_response(api: ModuleType, preparer: Preparer, request: Any, deadline: float | None = None) -> Any:
    """A NodePrepareResourcesResponse of ``api`` (dra v1 or v1beta1) for ``request``, answered by ``deadline``."""
    response = api.NodePrepareResourcesResponse()
    for uid, outcome in preparer.prepare(_refs(request), deadline).items():
        if isinstance(outcome, str):
            response.claims[uid].CopyFrom(api.NodePrepareResourceResponse(error=outcome))
        else:
            response.claims[uid].CopyFrom(api.NodePrepareResourceResponse(devices=_devices(api, outcome)))
    return response


def unprepare_response(api: ModuleType, preparer: Preparer, request: Any, deadline: float | None = None) -> Any:
    """A NodeUnprepareResourcesResponse of ``api`` for ``request`` (``deadline``: the call's, for the shared lock)."""
    response = api.NodeUnprepareResourcesResponse()
    for uid, error in preparer.unprepare(_refs(request), deadline).items():
        response.claims[uid].CopyFrom(api.NodeUnprepareResourceResponse(error=error))
    return response


def _internal(context: grpc.ServicerContext, call: str, exc: Exception) -> None:
    log.exception("%s failed unexpectedly", call)
    context.abort(grpc.StatusCode.INTERNAL,
                  f"{protocol.DRA_DRIVER}: internal error in {call} ({type(exc).__name__}: {str(exc)[:200]})")


class _DraServicer:
    """The DRA node service of one version (``api``): the same two calls over `Preparer`."""

    api: ModuleType

    def __init__(self, preparer: Preparer) -> None:
        self.preparer = preparer

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """Prepare each claim (see `Preparer.prepare`), the API reads bounded by the call's deadline."""
        try:
            return prepare_response(self.api, self.preparer, request, deadline_of(context))
        except Exception as exc:
            _internal(context, "NodePrepareResources", exc)
            raise

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """Unprepare each claim (see `Preparer.unprepare`)."""
        try:
            return unprepare_response(self.api, self.preparer, request, deadline_of(context))
        except Exception as exc:
            _internal(context, "NodeUnprepareResources", exc)
            raise


class DraV1Servicer(_DraServicer, v1_grpc.DRAPluginServicer):
    """``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin``."""

    api = v1


class DraV1beta1Servicer(_DraServicer, v1beta1_grpc.DRAPluginServicer):
    """``k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin``, for kubelets older than v1's."""

    api = v1beta1


def add_dra_services(server: grpc.Server, preparer: Preparer) -> None:
    """Serve both DRA versions on ``server``."""
    v1_grpc.add_DRAPluginServicer_to_server(DraV1Servicer(preparer), server)  # type: ignore[no-untyped-call]
    v1beta1_grpc.add_DRAPluginServicer_to_server(  # type: ignore[no-untyped-call]
        DraV1beta1Servicer(preparer), server
    )


class RegistrationServicer(reg_grpc.RegistrationServicer):
    """``pluginregistration.Registration`` on the registration socket kubelet's plugin watcher finds."""

    def __init__(self, endpoint: str, services: tuple[str, ...] = SERVICES) -> None:
        self.endpoint = endpoint
        self.services = services
        self.registered = threading.Event()
        self.status: reg.RegistrationStatus | None = None
        self.notifications = 0

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:  # noqa: N802
        """The driver's name, DRA socket and services."""
        return reg.PluginInfo(
            type=protocol.DRA_PLUGIN_TYPE,
            name=protocol.DRA_DRIVER,
            endpoint=self.endpoint,
            supported_versions=list(self.services),
        )

    def NotifyRegistrationStatus(  # noqa: N802
        self, request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        """Log kubelet's verdict (kubelet ignores the answer; a refusal is logged as an error)."""
        self.status = request
        self.notifications += 1
        if request.plugin_registered:
            log.info("registered with kubelet as %s (endpoint %s)", protocol.DRA_DRIVER, self.endpoint)
            self.registered.set()
        else:
            self.registered.clear()
            log.error("kubelet refused the registration: %s", request.error[:500])
        return reg.RegistrationStatusResponse()
