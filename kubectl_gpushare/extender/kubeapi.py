"""The extender's API calls on `kube.client.Client`, each with bounded retries for transient faults.

Implements the binder's `PodApi` and leader election's `LeaseApi`. Reads, Lease calls and the
annotation patch (which carries UID and resourceVersion preconditions, so a repeated patch can at
worst fail with a conflict) are retried on 429 (honouring Retry-After), 5xx and timeouts. The
Binding POST is not retried here: a repeated Binding after a lost reply fails with "already
assigned", so the binder resolves an unknown outcome by reading the pod back instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

import msgspec

from kubectl_gpushare.kube import retry
from kubectl_gpushare.kube.client import Client
from kubectl_gpushare.kube.types import Lease, LeaseSpec, Pod

T = TypeVar("T")

BIND_POLICY = retry.RetryPolicy(attempts=6, base=0.05, cap=1.0, deadline=10.0, max_retry_after=5.0)
"""Up to six tries within 10 s: a bind must answer well within kube-scheduler's httpTimeout (30 s
in our scheduler configuration); a Retry-After over 5 s ends the retries."""


class KubeApi:
    """`PodApi` and `LeaseApi` over one thread-safe client."""

    def __init__(self, client: Client, policy: retry.RetryPolicy = BIND_POLICY) -> None:
        """Wrap a client.

        Args:
            client: the API client (keep-alive per thread).
            policy: attempts and backoff for transient faults.
        """
        self.client = client
        self.policy = policy

    def _retry(self, call: Callable[[], T], budget: float | None = None) -> T:
        """Retry within the policy, and within ``budget`` seconds when given (the first try always runs)."""
        policy = self.policy
        if budget is not None:
            policy = dataclasses.replace(policy, deadline=min(policy.deadline or budget, max(0.0, budget)))
        return retry.call_with_retry(call, policy)

    # --- PodApi ----------------------------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str, *, budget: float | None = None) -> Pod:
        """Read a pod (retried, for at most ``budget`` seconds).

        Raises:
            kube.errors.UndecodableReply: the pod the API serves does not decode (not retried); the binder
                answers that bind alone with an error, as for any `kube.errors.KubeError`, never a 500.
        """
        return self._retry(lambda: self.client.get_pod(namespace, name), budget)

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: dict[str, str | None], *, uid: str, resource_version: str,
        budget: float | None = None,
    ) -> Pod:
        """Strategic-merge-patch annotations with UID and resourceVersion preconditions (retried).

        Raises:
            kube.errors.UndecodableReply: the patch was applied, but the pod it returned does not decode.
        """
        body = {"metadata": {"uid": uid, "resourceVersion": resource_version, "annotations": annotations}}
        return self._retry(lambda: self.client.patch_pod(namespace, name, body), budget)

    def create_binding(self, namespace: str, name: str, uid: str, node: str) -> None:
        """POST the Binding once (see the module docstring for why it is not retried)."""
        self.client.bind_pod(namespace, name, uid, node)

    # --- LeaseApi --------------------------------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> Lease:
        """Read the Lease (retried)."""
        return self._retry(lambda: self.client.get_lease(namespace, name))

    def create_lease(self, namespace: str, name: str, spec: LeaseSpec) -> Lease:
        """Create the Lease (not retried: a retry after a lost reply would conflict with ourselves)."""
        return self.client.create_lease(namespace, name, spec)

    def replace_lease(self, namespace: str, name: str, spec: LeaseSpec, resource_version: str) -> Lease:
        """Replace the Lease's spec if its resourceVersion is unchanged (not retried, for the same reason)."""
        lease = Lease(metadata=msgspec.structs.replace(
            Lease().metadata, name=name, namespace=namespace, resource_version=resource_version))
        return self.client.update_lease(lease, spec)
