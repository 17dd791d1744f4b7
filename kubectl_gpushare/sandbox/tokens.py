"""Who is calling: the sandbox's bearer tokens and the users behind them.

Owns the token table (the fixed admin and viewer tokens, tokens added by tests, and service-account
tokens minted through the TokenRequest API) and the ``UserInfo`` each request carries into admission,
where a ValidatingAdmissionPolicy sees it as ``request.userInfo``. No sockets; reads the store only to
check that a token's bound objects still exist.

Service-account tokens follow kube-apiserver (``pkg/registry/core/serviceaccount/storage/token.go``,
``pkg/serviceaccount/claims.go``, ``k8s.io/apiserver/pkg/authentication/serviceaccount/util.go``):

* ``POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`` with a ``TokenRequest``; the
  ServiceAccount must exist (404). ``spec.expirationSeconds`` defaults to 3600 and must lie in
  [600, 2^32] (422). ``spec.boundObjectRef`` may name a Pod of that namespace running as that
  ServiceAccount (else 400), or a Node (``ServiceAccountTokenNodeBinding``); another kind is a 400,
  a UID that differs from the object's a 409.
* The user is ``system:serviceaccount:<ns>:<name>`` with the ServiceAccount's UID and the groups
  ``system:serviceaccounts``, ``system:serviceaccounts:<ns>`` and ``system:authenticated``. Its
  ``extra`` holds ``authentication.kubernetes.io/credential-id`` (``JTI=<uuid>``,
  ``ServiceAccountTokenJTI``), for a pod-bound token ``pod-name`` and ``pod-uid`` and, when the pod is
  bound to a node, ``node-name`` (and ``node-uid`` where the Node exists:
  ``ServiceAccountTokenPodNodeInfo``); for a node-bound token ``node-name`` and ``node-uid``.
* A token is refused (401) once it expires, or once its ServiceAccount, Pod or Node is gone or was
  re-created under another UID (the service-account authenticator's validator).

Where it differs: tokens are opaque random strings, not signed JWTs (nothing here reads their claims;
ask the sandbox, as a client would ask TokenReview), and they live in memory only, so a sandbox
restarted from ``--state`` has forgotten them. Secrets are not served, so no token binds to one.
A token without rules may do what the admin may (there is no RBAC engine, only the rules a token
carries: the viewer's); admission still applies.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from kubectl_gpushare import protocol
from kubectl_gpushare.sandbox import errors

EXTRA_POD_NAME: Final = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID: Final = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME: Final = protocol.NODE_NAME_EXTRA
EXTRA_NODE_UID: Final = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID: Final = "authentication.kubernetes.io/credential-id"
"""The user-info extra keys of ``k8s.io/apiserver/pkg/authentication/serviceaccount`` and ``user``."""

DEFAULT_EXPIRATION: Final = 3600
"""``TokenRequestSpec.expirationSeconds`` when the request leaves it out (the API's default)."""
MIN_EXPIRATION: Final = 600
MAX_EXPIRATION: Final = 1 << 32
"""The bounds ``ValidateTokenRequest`` puts on ``expirationSeconds``."""
API_AUDIENCES: Final = ("https://kubernetes.default.svc.cluster.local",)
"""What a token is for when the request names no audience (kube-apiserver's ``--api-audiences``)."""


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user, as ``authentication.k8s.io/v1`` ``UserInfo`` describes one."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The JSON form: empty fields are left out (``omitempty``), as admission's ``request.userInfo``."""
        found: dict[str, Any] = {}
        if self.username:
            found["username"] = self.username
        if self.uid:
            found["uid"] = self.uid
        if self.groups:
            found["groups"] = list(self.groups)
        if self.extra:
            found["extra"] = {key: list(values) for key, values in self.extra.items()}
        return found


ANONYMOUS: Final = UserInfo("system:anonymous", groups=("system:unauthenticated",))


def static_user(name: str) -> UserInfo:
    """A user of a static token (the admin, the viewer, a test's component): authenticated, no extras."""
    return UserInfo(name, groups=("system:authenticated",))


@dataclass(frozen=True)
class BoundObject:
    """An object a token is bound to: the token dies with it (plural, namespace, name, uid)."""

    plural: str
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Identity:
    """What a token stands for: its user, the rules it is bound to, and what it must outlive."""

    user: UserInfo
    rules: tuple[Mapping[str, Any], ...] | None = None
    """The PolicyRules its user holds, checked before routing (`sandbox.authorization`); None: any request."""
    bound: tuple[BoundObject, ...] = ()
    expires: float | None = None
    """Unix time after which the token is refused (None: never)."""


Lookup = Callable[[str, str, str], dict[str, Any] | None]
"""(plural, namespace, name) -> the stored object, or None."""


class Tokens:
    """The token table, safe to use from every request thread."""

    def __init__(self, lookup: Lookup, *, clock: Callable[[], float] = time.time) -> None:
        self._lookup = lookup
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens: dict[str, Identity] = {}

    def add(self, token: str, identity: Identity) -> None:
        """Accept ``token`` as ``identity``."""
        with self._lock:
            self._tokens[token] = identity

    def authenticate(self, token: str) -> Identity | None:
        """The identity of a valid token; None for an unknown, expired or orphaned one."""
        with self._lock:
            identity = self._tokens.get(token)
        if identity is None:
            return None
        if identity.expires is not None and self._clock() >= identity.expires:
            return None
        for bound in identity.bound:
            found = self._lookup(bound.plural, bound.namespace, bound.name)
            if found is None or (found.get("metadata") or {}).get("uid") != bound.uid:
                return None
        return identity

    def request_token(self, namespace: str, account: str, body: Any) -> dict[str, Any]:
        """Serve a TokenRequest for ServiceAccount ``namespace/account``; returns the answered TokenRequest.

        Raises:
            ApiError: 400 for a body that is no TokenRequest or a bound object that cannot carry the
                token, 404 for a missing ServiceAccount or bound object, 409 for a bound object's
                UID mismatch, 422 for an expiration out of bounds.
        """
        if not isinstance(body, dict):
            raise errors.bad_request("json: cannot unmarshal into Go value of type authentication.TokenRequest")
        spec = body.get("spec") if body.get("spec") is not None else {}
        if not isinstance(spec, dict):
            raise errors.bad_request("json: cannot unmarshal into Go struct field TokenRequest.spec")
        expiration = spec.get("expirationSeconds", DEFAULT_EXPIRATION)
        if isinstance(expiration, bool) or not isinstance(expiration, int):
            raise errors.bad_request("json: cannot unmarshal into Go struct field "
                                     "TokenRequestSpec.spec.expirationSeconds of type int64")
        if not MIN_EXPIRATION <= expiration <= MAX_EXPIRATION:
            why = "less than 10 minutes" if expiration < MIN_EXPIRATION else "larger than 2^32 seconds"
            raise errors.invalid("TokenRequest", "", [
                f"spec.expirationSeconds: Invalid value: {expiration}: may not specify a duration {why}"],
                "authentication.k8s.io")  # fmt: skip
        audiences = spec.get("audiences") or list(API_AUDIENCES)
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise errors.bad_request("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.audiences")
        service_account = self._lookup("serviceaccounts", namespace, account)
        if service_account is None:
            raise errors.not_found("serviceaccounts", account)
        sa_uid = str((service_account.get("metadata") or {}).get("uid", ""))
        extra: dict[str, tuple[str, ...]] = {}
        bound = [BoundObject("serviceaccounts", namespace, account, sa_uid)]
        ref = spec.get("boundObjectRef")
        if ref is not None:
            bound.append(self._bind(namespace, account, ref, extra))
        credential = str(uuid.uuid4())
        extra[EXTRA_CREDENTIAL_ID] = (f"JTI={credential}",)
        user = UserInfo(
            f"system:serviceaccount:{namespace}:{account}",
            sa_uid,
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
            extra,
        )
        token = "sandbox-sa-" + secrets.token_urlsafe(32)
        expires = self._clock() + expiration
        self.add(token, Identity(user, bound=tuple(bound), expires=expires))
        stamp = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": account, "namespace": namespace, "creationTimestamp": None},
            "spec": {**spec, "audiences": audiences, "expirationSeconds": expiration},
            "status": {"token": token, "expirationTimestamp": stamp},
        }

    def _bind(self, namespace: str, account: str, ref: Any, extra: dict[str, tuple[str, ...]]) -> BoundObject:
        """Check the bound object and note what it adds to the user's extra."""
        if not isinstance(ref, dict):
            raise errors.bad_request("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.boundObjectRef")
        for key in ("kind", "apiVersion", "name", "uid"):
            if not isinstance(ref.get(key, ""), str | None):
                raise errors.bad_request(f"json: cannot unmarshal into Go struct field BoundObjectReference"
                                         f".spec.boundObjectRef.{key} of type string")
        kind, api_version = str(ref.get("kind") or ""), str(ref.get("apiVersion") or "")
        name, uid = str(ref.get("name") or ""), str(ref.get("uid") or "")
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        if group or kind not in ("Pod", "Node"):
            version = api_version.rpartition("/")[2]
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        plural = "pods" if kind == "Pod" else "nodes"
        found = self._lookup(plural, namespace if kind == "Pod" else "", name)
        if found is None:
            raise errors.not_found(plural, name)
        meta, spec = found.get("metadata") or {}, found.get("spec") or {}
        actual = str(meta.get("uid", ""))
        if uid and uid != actual:
            raise errors.conflict(kind, name, f"the UID in the bound object reference ({uid}) does not match the UID "
                                              "in record. The object might have been deleted and then recreated")
        if kind == "Node":
            extra[EXTRA_NODE_NAME], extra[EXTRA_NODE_UID] = (name,), (actual,)
            return BoundObject("nodes", "", name, actual)
        # The ServiceAccount admission plugin fills in "default" for a pod that names none.
        if (spec.get("serviceAccountName") or "default") != account:
            raise errors.bad_request(
                f'cannot bind token for serviceaccount "{account}" to pod running with different serviceaccount name.'
            )
        extra[EXTRA_POD_NAME], extra[EXTRA_POD_UID] = (name,), (actual,)
        node = spec.get("nodeName")
        if isinstance(node, str) and node:
            extra[EXTRA_NODE_NAME] = (node,)
            node_object = self._lookup("nodes", "", node)
            node_uid = (node_object.get("metadata") or {}).get("uid") if node_object is not None else None
            if node_uid:  # a Node that does not exist still names the node, without a UID
                extra[EXTRA_NODE_UID] = (str(node_uid),)
        return BoundObject("pods", namespace, name, actual)
