"""A small, thread-safe Kubernetes REST client that decodes straight into `kube.types`.

Built on `http.client` and `ssl` (no `kubernetes`, no `urllib3`; see `kube._transport`): JSON in,
typed Structs out, errors as `kube.errors` classes. Lists are paginated (``limit`` + ``continue``)
with the next page fetched while the current one is decoded, so a 100,000-pod cluster never sits
in memory as one JSON document; watches stream typed events (`kube.watch`).

This module owns the REST surface: verbs, paths, bodies, pagination and the helpers the faces
call. It retries only idempotent GETs (policy in `kube.retry`), caches nothing (see
`kube.informer`) and does not interpret GPU fields (see `kube.records`).
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Final, Literal, TypedDict, TypeVar, Unpack, overload

import msgspec

from kubectl_gpushare import __version__, protocol
from kubectl_gpushare.kube import types
from kubectl_gpushare.kube._transport import Transport
from kubectl_gpushare.kube.config import ClientConfig
from kubectl_gpushare.kube.errors import Conflict, Expired, KubeError, UndecodableReply
from kubectl_gpushare.kube.lenient import Undecodable, decode_page, key_of, list_meta, object_meta, raw_list
from kubectl_gpushare.kube.retry import READ_POLICY, RetryPolicy, call_with_retry
from kubectl_gpushare.kube.types import (
    ConfigMap,
    Event,
    ItemT,
    Kind,
    KubeObject,
    Lease,
    LeaseSpec,
    Node,
    ObjectList,
    ObjectReference,
    Pod,
)
from kubectl_gpushare.kube.watch import Watch

log = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_PAGE_SIZE: Final = 500
"""kubectl's chunk size: small enough to bound memory, large enough that round trips do not dominate."""
PatchType = Literal["strategic", "merge", "json"]
PATCH_CONTENT_TYPES: Final[dict[str, str]] = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
Body = Mapping[str, object] | msgspec.Struct
"""An object to create or replace: a mapping (a plain dict or a `TypedDict`) or a Struct, encoded as JSON."""
PatchBody = Mapping[str, object] | Sequence[Mapping[str, object]]
"""A merge or strategic patch document, or a JSON patch's list of operations (RFC 6902)."""


class ListOptions(TypedDict, total=False):
    """The keyword options of `Client.list_pages`, passed on by `Client.list_all`, `list` and `iter_items`."""

    label_selector: str | None
    field_selector: str | None
    page_size: int
    resource_version: str | None
    allow_inconsistent: bool
    on_skip: Callable[[str], None] | None
    on_undecodable: Callable[[Undecodable], object] | None


def _log_skip(message: str) -> None:
    log.warning("%s", message)


def default_user_agent(component: str = "client") -> str:
    """``kubectl-gpushare/<version> (<component>)``: lets audit logs and the sandbox tell faces apart."""
    return f"kubectl-gpushare/{__version__} ({component})"


@overload
def _kind(kind: Kind[ItemT]) -> Kind[ItemT]: ...
@overload
def _kind(kind: str) -> Kind[KubeObject]: ...
def _kind(kind: Kind[ItemT] | str) -> Kind[ItemT] | Kind[KubeObject]:
    """The `Kind` itself, or the one a plural name (``"pods"``) names; its objects are then typed `KubeObject`."""
    if isinstance(kind, str):
        try:
            return types.KINDS[kind]
        except KeyError:
            raise KubeError(f"unknown resource {kind!r}; known: {', '.join(sorted(types.KINDS))}") from None
    return kind


def _started_over_on_expiry(read: Callable[[], _T]) -> _T:
    """``read()`` (a whole paged list), started over up to 3 times while its snapshot expires mid-list.

    Raises:
        Expired: the third try expired too.
    """
    for attempt in range(3):
        try:
            return read()
        except Expired:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _object_path(
    kind: Kind[KubeObject], namespace: str | None, name: str | None = None, subresource: str | None = None
) -> str:
    """The path of one object (or, without a name, where to create one); namespaced kinds need a namespace."""
    if kind.namespaced and not namespace:
        raise KubeError(f"{kind.plural} are namespaced: a namespace is required")
    return str(kind.path(namespace, name, subresource))  # ConfigError: not one path segment (`types.path_segment`)


class Client:
    """The project's one way to talk to the Kubernetes API.

    Thread-safe: requests take a kept-alive connection from a small pool (a new one when all are
    busy) and put it back once the reply is read; watches get a dedicated connection.
    Transport details (pool, TLS, auth headers, error mapping) live in `kube._transport`.

    Args:
        config: the resolved connection settings (`kube.config.load_config`).
        user_agent: the ``User-Agent`` header; defaults to ``kubectl-gpushare/<version> (<component>)``.
        component: the component named in the default user agent (``inspect``, ``extender``, ...).
        gzip: ask for gzip-compressed replies (worth it over slow links, not on localhost).
        retry: the policy for GETs (reads are safe to repeat); None disables it. Writes are never
            retried here: wrap them in `kube.retry.call_with_retry` where repeating is safe.
        prefetch: request the next list page while the current one is decoded.

    Example:
        >>> client = Client(load_config(), component="inspect")  # doctest: +SKIP
        >>> nodes = client.list_nodes()  # doctest: +SKIP
    """

    def __init__(
        self,
        config: ClientConfig,
        user_agent: str | None = None,
        *,
        component: str = "client",
        gzip: bool = False,
        retry: RetryPolicy | None = READ_POLICY,
        prefetch: bool = True,
    ) -> None:
        self.config = config
        self.retry = retry
        self.prefetch = prefetch
        self.user_agent = user_agent or default_user_agent(component)
        self._transport = Transport(config, self.user_agent, gzip=gzip)

    def close(self) -> None:
        """Close idle pooled connections; the client stays usable (watches close via `Watch.close`)."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, path: str, query: Mapping[str, object] | None = None) -> str:
        """The full URL of an API path (for messages and logs)."""
        return self._transport.url(path, query)

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, object] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        *,
        deadline: float | None = None,
    ) -> bytes:
        """Send one request and return the body of a 2xx reply; GETs follow the ``retry`` policy.

        A kept-alive connection the server closed is not used, and a read it breaks under is sent
        once more on a fresh one (never a write: `kube._transport`); credentials are re-read
        once after a 401 (a rotated token file, an expired exec credential). ``deadline`` (a
        `time.monotonic` instant) bounds the whole call, retries and their waits included.

        Raises:
            ApiError: the server answered with an error status (subclass by status).
            Unreachable: no answer within the timeout or before ``deadline``, refused, or TLS failed.
            ReplyTooLarge: the reply's body was not in by ``deadline``.
            ConfigError: credentials could not be obtained.
        """

        def send() -> bytes:
            return self._transport.request(method, path, query, body, content_type, deadline=deadline)

        if method == "GET" and self.retry is not None:
            policy = self.retry
            if deadline is not None:  # no retry, nor wait for one, past the caller's deadline
                left = max(0.0, deadline - time.monotonic())
                policy = replace(policy, deadline=left if policy.deadline is None else min(policy.deadline, left))
            return call_with_retry(send, policy)
        return send()

    def proxy_get(
        self, namespace: str, pod: str, port: int, path: str, *, max_bytes: int, deadline: float
    ) -> bytes:
        """``GET`` a pod's port through the API server's ``pods/proxy``, bounded in size and time.

        The reply comes from whatever listens in the pod, so it is bounded as untrusted input;
        it is not retried (the caller decides what a missing answer means).

        Raises:
            ApiError: the API server (or the pod, relayed) answered with an error status.
            Unreachable: no answer within the client's timeout.
            ReplyTooLarge: longer than ``max_bytes`` or not in by ``deadline`` (`time.monotonic`).
        """
        segment = f"{pod}:{port}"
        proxy_path = f"/api/v1/namespaces/{namespace}/pods/{segment}/proxy/{path.lstrip('/')}"
        return self._transport.request("GET", proxy_path, max_bytes=max_bytes, deadline=deadline)

    # --- generic verbs -------------------------------------------------------------------------------

    @overload
    def get(
        self, kind: Kind[ItemT], name: str, namespace: str | None = None, subresource: str | None = None, *,
        deadline: float | None = None,
    ) -> ItemT: ...
    @overload
    def get(self, kind: str, name: str, namespace: str | None = None, subresource: str | None = None, *,
            deadline: float | None = None) -> KubeObject: ...
    def get(
        self, kind: Kind[ItemT] | str, name: str, namespace: str | None = None, subresource: str | None = None, *,
        deadline: float | None = None,
    ) -> ItemT | KubeObject:
        """One object, decoded as its kind's Struct; ``deadline`` as for `request`.

        Raises:
            NotFound: no such object.
            UndecodableReply: the reply does not decode as the kind (`decoded_item`).
        """
        k = _kind(kind)
        path = _object_path(k, namespace, name, subresource)
        return decoded_item(k, self.request("GET", path, deadline=deadline), namespace, name)

    @overload
    def list_pages(
        self, kind: Kind[ItemT], namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> Iterator[ObjectList[ItemT]]: ...
    @overload
    def list_pages(
        self, kind: str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> Iterator[ObjectList[KubeObject]]: ...
    def list_pages(
        self,
        kind: Kind[ItemT] | str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        resource_version: str | None = None,
        allow_inconsistent: bool = False,
        on_skip: Callable[[str], None] | None = None,
        on_undecodable: Callable[[Undecodable], object] | None = None,
    ) -> Iterator[ObjectList[ItemT]] | Iterator[ObjectList[KubeObject]]:
        """Yield a kind's list one decoded page at a time (``limit`` + ``continue``).

        All pages are one consistent snapshot with the first page's ``metadata.resourceVersion``.
        An item that does not decode is left out of its page and reported, never the whole list
        (`kube.lenient.decode_page`).

        Args:
            kind: a `kube.types.Kind` or a plural name (``"pods"``).
            namespace: None (or "") for all namespaces.
            label_selector: e.g. ``gpushare=true``.
            field_selector: e.g. ``spec.nodeName=n1``.
            page_size: items per page; 0 asks for everything at once.
            resource_version: passed through (``"0"`` lets the server answer from its cache).
            allow_inconsistent: when the continue token expires (410) mid-list, carry on with the
                inconsistent-continue token the server offers instead of raising.
            on_skip: called with one line per item left out; None logs a warning.
            on_undecodable: also called with each item left out, by key and resourceVersion (the
                informer keeps its last good copy of such an object).

        Raises:
            Expired: the snapshot expired mid-list (start over), unless ``allow_inconsistent``.
            KubeError: a page is not a list that can be read (`_unreadable_page`).
        """
        k = _kind(kind)
        for data in self._page_data(k, namespace, label_selector, field_selector, page_size, resource_version,
                                    allow_inconsistent):
            try:
                page = decode_page(k, data, on_skip or _log_skip, on_undecodable)
            except types.DECODE_ERRORS as exc:
                raise _unreadable_page(k, exc) from None
            yield page

    def _page_data(
        self, k: Kind[ItemT], namespace: str | None, label_selector: str | None, field_selector: str | None,
        page_size: int, resource_version: str | None, allow_inconsistent: bool,
    ) -> Iterator[bytes]:
        """The JSON of each page of a list (`list_pages` for the arguments)."""
        path = k.path(namespace or None)
        query: dict[str, object] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": page_size if page_size > 0 else None,
            "resourceVersion": resource_version,
        }

        def fetch(token: str) -> bytes:
            # A continue token carries the snapshot's resourceVersion; sending one beside it is a 400
            # from kube-apiserver ("specifying resource version is not allowed when using continue"),
            # so later pages drop it, as client-go's pager does (k8s.io/client-go/tools/pager/pager.go).
            later = {"continue": token, "resourceVersion": None}
            return self.request("GET", path, dict(query, **later) if token else query)

        # While one page is decoded, the next is already on its way: the continue token is read
        # first with a decoder that skips the items, then the request for the next page starts.
        token = ""
        pending: Future[bytes] | None = _in_background(fetch, token) if self.prefetch else None
        while True:
            try:
                data = pending.result() if pending is not None else fetch(token)
            except Expired as exc:
                resume = exc.continue_token
                if token and allow_inconsistent and resume:
                    token = resume
                    pending = _in_background(fetch, token) if self.prefetch else None
                    continue
                if token:
                    raise Expired(
                        exc.status,
                        exc.reason,
                        f"the list of {k.plural} changed too much while paging (continue token expired); "
                        "list again",
                    ) from None
                raise
            try:
                token = list_meta(data).continue_
            except types.DECODE_ERRORS as exc:
                raise _unreadable_page(k, exc) from None
            pending = _in_background(fetch, token) if token and self.prefetch else None
            yield data
            if not token:
                return

    def list_raw(
        self, kind: Kind[ItemT], namespace: str | None = None, *, label_selector: str | None = None,
        field_selector: str | None = None, page_size: int = DEFAULT_PAGE_SIZE,
    ) -> builtins.list[msgspec.Raw]:
        """Every item of a kind as its JSON, undecoded, for a reader that decodes each only as far as it needs.

        One consistent snapshot, started over (up to 3 times) if paging expires, as `list_all`.

        Raises:
            KubeError: a page is not a list that can be read (`_unreadable_page`).
        """

        def read() -> builtins.list[msgspec.Raw]:
            items: builtins.list[msgspec.Raw] = []
            for data in self._page_data(kind, namespace, label_selector, field_selector, page_size, None, False):
                try:
                    items.extend(raw_list(data).items)
                except types.DECODE_ERRORS as exc:
                    raise _unreadable_page(kind, exc) from None
            return items

        return _started_over_on_expiry(read)

    @overload
    def list_all(
        self, kind: Kind[ItemT], namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> tuple[builtins.list[ItemT], str]: ...
    @overload
    def list_all(
        self, kind: str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> tuple[builtins.list[KubeObject], str]: ...
    def list_all(
        self, kind: Kind[ItemT] | str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> tuple[builtins.list[ItemT], str] | tuple[builtins.list[KubeObject], str]:
        """Every item of a kind and the list's resourceVersion; starts over (up to 3 times) if paging expires."""
        return self._list_all(_kind(kind), namespace, options)

    def _list_all(
        self, kind: Kind[ItemT], namespace: str | None, options: ListOptions
    ) -> tuple[builtins.list[ItemT], str]:

        def read() -> tuple[builtins.list[ItemT], str]:
            items: builtins.list[ItemT] = []
            version = ""
            for page in self.list_pages(kind, namespace, **options):
                version = version or page.metadata.resource_version
                items.extend(page.items)
            return items, version

        return _started_over_on_expiry(read)

    @overload
    def list(
        self, kind: Kind[ItemT], namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> builtins.list[ItemT]: ...
    @overload
    def list(
        self, kind: str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> builtins.list[KubeObject]: ...
    def list(
        self, kind: Kind[ItemT] | str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> builtins.list[ItemT] | builtins.list[KubeObject]:
        """Every item of a kind (see `list_pages` for the options)."""
        return self._list_all(_kind(kind), namespace, options)[0]

    @overload
    def iter_items(
        self, kind: Kind[ItemT], namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> Iterator[ItemT]: ...
    @overload
    def iter_items(
        self, kind: str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> Iterator[KubeObject]: ...
    def iter_items(
        self, kind: Kind[ItemT] | str, namespace: str | None = None, **options: Unpack[ListOptions]
    ) -> Iterator[ItemT | KubeObject]:
        """Items of a kind, fetched page by page (see `list_pages` for the options)."""
        for page in self.list_pages(kind, namespace, **options):
            yield from page.items

    @overload
    def create(self, kind: Kind[ItemT], body: Body, namespace: str | None = None) -> ItemT: ...
    @overload
    def create(self, kind: str, body: Body, namespace: str | None = None) -> KubeObject: ...
    def create(self, kind: Kind[ItemT] | str, body: Body, namespace: str | None = None) -> ItemT | KubeObject:
        """POST a new object and return it as the server stored it.

        Raises:
            Conflict: an object of that name exists (``AlreadyExists``).
            UndecodableReply: the reply does not decode as the kind (`decoded_item`); the object was created.
        """
        k = _kind(kind)
        reply = self.request("POST", _object_path(k, namespace), body=_encode_object(k, body))
        return decoded_item(k, reply, namespace, "")

    @overload
    def replace(self, kind: Kind[ItemT], name: str, body: Body, namespace: str | None = None) -> ItemT: ...
    @overload
    def replace(self, kind: str, name: str, body: Body, namespace: str | None = None) -> KubeObject: ...
    def replace(
        self, kind: Kind[ItemT] | str, name: str, body: Body, namespace: str | None = None
    ) -> ItemT | KubeObject:
        """PUT an object; a ``metadata.resourceVersion`` in the body makes it conditional.

        Raises:
            Conflict: the object changed since that resourceVersion.
            UndecodableReply: the reply does not decode as the kind (`decoded_item`); the write landed.
        """
        k = _kind(kind)
        reply = self.request("PUT", _object_path(k, namespace, name), body=_encode_object(k, body))
        return decoded_item(k, reply, namespace, name)

    @overload
    def patch(
        self,
        kind: Kind[ItemT],
        name: str,
        body: PatchBody,
        namespace: str | None = None,
        patch_type: PatchType = "strategic",
        subresource: str | None = None,
    ) -> ItemT: ...
    @overload
    def patch(
        self,
        kind: str,
        name: str,
        body: PatchBody,
        namespace: str | None = None,
        patch_type: PatchType = "strategic",
        subresource: str | None = None,
    ) -> KubeObject: ...
    def patch(
        self,
        kind: Kind[ItemT] | str,
        name: str,
        body: PatchBody,
        namespace: str | None = None,
        patch_type: PatchType = "strategic",
        subresource: str | None = None,
    ) -> ItemT | KubeObject:
        """PATCH an object and return the result.

        Args:
            kind: a `kube.types.Kind` or a plural name.
            name: the object's name.
            body: a patch document (a list of operations for ``json`` patches). Put
                ``metadata.resourceVersion`` in a merge patch to make it conditional.
            namespace: the object's namespace (ignored for cluster-scoped kinds).
            patch_type: ``strategic`` (kubectl patch's default), ``merge`` (RFC 7386) or ``json`` (RFC 6902).
            subresource: e.g. ``status``.

        Raises:
            UndecodableReply: the reply does not decode as the kind (`decoded_item`); the patch landed.
        """
        k = _kind(kind)
        if patch_type not in PATCH_CONTENT_TYPES:
            raise KubeError(f"unknown patch type {patch_type!r}; use strategic, merge or json")
        data = types.ENCODER.encode(body)
        path = _object_path(k, namespace, name, subresource)
        reply = self.request("PATCH", path, body=data, content_type=PATCH_CONTENT_TYPES[patch_type])
        return decoded_item(k, reply, namespace, name)

    def delete(
        self, kind: Kind[KubeObject] | str, name: str, namespace: str | None = None, uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        """DELETE an object, optionally only if it still has ``uid`` and ``resource_version``.

        Raises:
            NotFound: it was already gone.
            Conflict: its uid differs (it was re-created), or its resourceVersion (it changed).
        """
        k = _kind(kind)
        preconditions = {key: value for key, value in (("uid", uid), ("resourceVersion", resource_version)) if value}
        body = types.ENCODER.encode({"preconditions": preconditions}) if preconditions else None
        self.request("DELETE", _object_path(k, namespace, name), body=body)

    def delete_collection(
        self, kind: Kind[KubeObject] | str, namespace: str | None = None, *,
        label_selector: str | None = None, field_selector: str | None = None,
    ) -> None:
        """DELETE every object of ``kind`` the selectors match (``DeleteCollection``), namespaced ones in one namespace.

        kube-apiserver serves it at a namespaced kind's namespaced path alone, never across namespaces
        (k8s.io/apiserver/pkg/endpoints/installer.go, ``registerResourceHandlers``).

        Raises:
            KubeError: a namespaced kind without ``namespace`` (nothing sent).
            ApiError: the server refused (a selector it cannot serve is a `BadRequest`).
        """
        path = _object_path(_kind(kind), namespace)
        self.request("DELETE", path, {"labelSelector": label_selector, "fieldSelector": field_selector})

    @overload
    def watch(
        self,
        kind: Kind[ItemT],
        resource_version: str | None = None,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> Watch[ItemT]: ...
    @overload
    def watch(
        self,
        kind: str,
        resource_version: str | None = None,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> Watch[KubeObject]: ...
    def watch(
        self,
        kind: Kind[ItemT] | str,
        resource_version: str | None = None,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> Watch[ItemT] | Watch[KubeObject]:
        """Open a watch stream on a dedicated connection.

        Args:
            kind: a `kube.types.Kind` or a plural name.
            resource_version: stream changes after this version (from a list); None or ``"0"``
                first replays every current object as ADDED.
            namespace: None (or "") for all namespaces.
            field_selector: e.g. ``spec.nodeName=n1``.
            label_selector: e.g. ``gpushare=true``.
            timeout_seconds: ask the server to end the stream after this long.
            allow_bookmarks: ask for BOOKMARK events, which advance the resourceVersion cheaply.

        Returns:
            A `Watch` to iterate (and `Watch.close`).

        Raises:
            Expired: the resourceVersion is too old (re-list), when the server says so up front.
        """
        k = _kind(kind)
        path = k.path(namespace or None)
        query: dict[str, object] = {
            "watch": "true",
            "resourceVersion": resource_version,
            "fieldSelector": field_selector,
            "labelSelector": label_selector,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
        }
        read_timeout: float | None = None
        if timeout_seconds is not None:
            read_timeout = timeout_seconds + max(10.0, self.config.timeout or 0.0)
        connection, response = self._transport.stream(path, query, read_timeout)
        return Watch(k, connection, response)

    # --- helpers the faces use ------------------------------------------------------------------------

    def list_nodes(
        self,
        label_selector: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        on_skip: Callable[[str], None] | None = None,
    ) -> builtins.list[Node]:
        """All nodes (optionally only those matching a label selector); see `list_pages` for ``on_skip``."""
        return self.list(types.NODES, label_selector=label_selector, page_size=page_size, on_skip=on_skip)

    def get_node(self, name: str) -> Node:
        """One node. Raises `NotFound` if absent, `UndecodableReply` if it does not decode as a v1.Node."""
        return self.get(types.NODES, name)

    def iter_pods(
        self,
        field_selector: str | None = None,
        label_selector: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        namespace: str | None = None,
    ) -> Iterator[Pod]:
        """Pods of all namespaces (or one), fetched and decoded a page at a time."""
        return self.iter_items(
            types.PODS, namespace, field_selector=field_selector, label_selector=label_selector, page_size=page_size
        )

    def get_pod(self, namespace: str, name: str) -> Pod:
        """One pod. Raises `NotFound` if absent, `UndecodableReply` if it does not decode as a v1.Pod."""
        return self.get(types.PODS, name, namespace)

    def patch_pod(
        self,
        namespace: str,
        name: str,
        body: PatchBody,
        patch_type: PatchType = "strategic",
    ) -> Pod:
        """Patch a pod (annotations, typically) and return it."""
        return self.patch(types.PODS, name, body, namespace, patch_type)

    def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Bind a pod to a node (what a scheduler's bind does), only if the pod still has ``uid``.

        Raises:
            Conflict: the pod is already bound, or was re-created with another uid.
            NotFound: the pod is gone.
        """
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.request("POST", _object_path(types.PODS, namespace, name, "binding"), body=types.ENCODER.encode(binding))

    def patch_node(self, name: str, body: Mapping[str, object], patch_type: PatchType = "strategic") -> Node:
        """Patch a node's metadata or spec (labels, annotations) and return it."""
        return self.patch(types.NODES, name, body, None, patch_type)

    def patch_node_status(self, name: str, body: Mapping[str, object], patch_type: PatchType = "strategic") -> Node:
        """Patch a node's status subresource (capacity/allocatable) and return the node."""
        return self.patch(types.NODES, name, body, None, patch_type, subresource="status")

    def get_configmap(self, namespace: str, name: str) -> ConfigMap:
        """One ConfigMap. Raises `NotFound` if absent."""
        return self.get(types.CONFIGMAPS, name, namespace)

    def get_lease(self, namespace: str, name: str) -> Lease:
        """One Lease. Raises `NotFound` if absent."""
        return self.get(types.LEASES, name, namespace)

    def create_lease(self, namespace: str, name: str, spec: LeaseSpec) -> Lease:
        """Create a Lease. Raises `Conflict` if another holder created it first."""
        body = {"metadata": {"name": name, "namespace": namespace}, "spec": msgspec.to_builtins(spec)}
        return self.create(types.LEASES, body, namespace)

    def update_lease(self, lease: Lease, spec: LeaseSpec) -> Lease:
        """Replace a Lease's spec, only if it is unchanged since ``lease`` was read.

        Raises:
            Conflict: someone else updated it first (leader election lost the race).
        """
        meta = lease.metadata
        if not meta.resource_version:
            raise Conflict(409, "Conflict", f"lease {meta.namespace}/{meta.name} has no resourceVersion to update from")
        body = {
            "metadata": {"name": meta.name, "namespace": meta.namespace, "resourceVersion": meta.resource_version},
            "spec": msgspec.to_builtins(spec),
        }
        return self.replace(types.LEASES, meta.name, body, meta.namespace)

    def create_event(
        self,
        involved: Pod | Node | ObjectReference,
        reason: str,
        message: str,
        type: str = "Normal",
        component: str = "kubectl-gpushare",
        host: str = "",
    ) -> Event:
        """Record a core/v1 Event about a pod or node (shown by ``kubectl describe``)."""
        if isinstance(involved, ObjectReference):
            ref = involved
        else:
            meta = involved.metadata
            ref = ObjectReference(
                kind="Pod" if isinstance(involved, Pod) else "Node",
                namespace=meta.namespace,
                name=meta.name,
                uid=meta.uid,
                api_version="v1",
            )
        namespace = ref.namespace or "default"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {
            "metadata": {"generateName": f"{ref.name}.", "namespace": namespace},
            "involvedObject": msgspec.to_builtins(ref),
            "reason": reason,
            "message": message,
            "type": type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": component, **({"host": host} if host else {})},
            "reportingComponent": component,
            "reportingInstance": host or component,
        }
        return self.create(types.EVENTS, body, namespace)


def _api_version(kind: Kind[KubeObject]) -> str:
    return kind.api_path.removeprefix("/apis/").removeprefix("/api/")


def _encode_object(kind: Kind[KubeObject], body: Body) -> bytes:
    """``body`` as JSON, with ``apiVersion`` and ``kind`` filled in from ``kind`` where it has none."""
    payload: dict[str, object] = dict(msgspec.to_builtins(body)) if isinstance(body, msgspec.Struct) else dict(body)
    payload.setdefault("apiVersion", _api_version(kind))
    payload.setdefault("kind", kind.kind)
    return types.ENCODER.encode(payload)



def decoded_item(k: Kind[ItemT], data: bytes, namespace: str | None, name: str) -> ItemT:
    """One object of a reply (get, create, replace, patch, a status write) as its kind's Struct.

    Raises:
        UndecodableReply: it does not decode as the kind (not JSON, a field of the wrong type), a
            string in it is not UTF-8, or it is nested deeper than the decoder goes (free JSON such
            as a claim's opaque parameters: kube-apiserver accepts 10,000 levels, msgspec stops at
            Python's recursion limit); one line (`_undecodable_reply`).
    """
    try:
        return k.item_decoder.decode(data)
    except types.DECODE_ERRORS as exc:
        raise _undecodable_reply(k, data, namespace, name, exc) from None


def _undecodable_reply(
    k: Kind[ItemT], data: bytes, namespace: str | None, name: str, exc: Exception
) -> UndecodableReply:
    """``pod default/a does not decode as a v1.Pod (<why, cut to 200>)``: the one message for an object reply.

    The object is named as it was asked for; a create's (no name asked for) by the reply's metadata
    where that can be read (printable, as any name from an object: one line). msgspec raises
    `UnicodeDecodeError` for a string that is not UTF-8, whose own text names a byte offset, not the problem.
    """
    if not name:
        replied_namespace, name, _ = object_meta(data)
        namespace = namespace or replied_namespace
    key = protocol.printable(key_of(namespace if k.namespaced else None, name), protocol.MAX_SHOWN_NAME)
    noun = k.kind.lower()
    what = f"{noun} {key}" if key else f"a {noun}"
    why = "a string is not UTF-8" if isinstance(exc, UnicodeDecodeError) else protocol.error_reason(exc)
    return UndecodableReply(f"{what} does not decode as a {_api_version(k)}.{k.kind} ({why})")


def _unreadable_page(kind: Kind[ItemT], exc: Exception) -> KubeError:
    """The one-line error of a list page that cannot be read at all (one bad item is skipped, not this).

    Not JSON, no ``items`` array, or an item nested deeper than the decoder follows (about 1,000
    levels; the API server accepts thousands, e.g. in a claim's opaque driver parameters): a clear
    error that callers report as any other API failure, never a traceback.
    """
    why = protocol.error_reason(exc)  # as an object reply's (`_undecodable_reply`)
    return KubeError(f"the API server's list of {kind.plural} cannot be read: {why}")


def _in_background(fetch: Callable[[str], bytes], token: str) -> Future[bytes]:
    """Run ``fetch(token)`` on a daemon thread of its own.

    Daemon, not an executor's worker: a request blocked on a server that never answers must not
    keep the process alive after Ctrl-C (the interpreter joins executor threads at exit, so inspect
    used to wait out the request timeout, or forever with ``--request-timeout 0``). The thread ends
    with its request; a result nobody waits for is dropped.
    """
    future: Future[bytes] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fetch(token))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(exc)

    threading.Thread(target=run, name="kube-list-prefetch", daemon=True).start()
    return future

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "PATCH_CONTENT_TYPES",
    "Client",
    "PatchType",
    "Watch",
    "decoded_item",
    "default_user_agent",
]
