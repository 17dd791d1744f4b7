"""Shell completion of object names: nodes, pods, namespaces and kubeconfig contexts.

click calls these ``shell_complete`` callbacks with the words typed so far parsed into
``ctx.params`` (``--kubeconfig``, ``--context``, ``-n`` ...), so a name is completed from the
cluster the command would talk to. A completion must feel instant and must never print an error
into the user's prompt: one GET, no retries, a short timeout unless ``--request-timeout`` says
otherwise, names decoded and nothing else, and any failure completes nothing.
"""

from __future__ import annotations

from typing import Any, Final

import click
import msgspec
from click.shell_completion import CompletionItem

TIMEOUT: Final = "3s"
"""The most one completion waits for the API server when ``--request-timeout`` is not given."""
MAX_ITEMS: Final = 50_000
"""Names read at most (one page); a shell offers no more than this usefully."""


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _Item(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _List(msgspec.Struct):
    items: list[_Item] = msgspec.field(default_factory=list)


_DECODER: Final = msgspec.json.Decoder(_List)


def _options(ctx: click.Context) -> dict[str, Any]:
    """The connection flags typed so far, from this command or the group above it."""
    options: dict[str, Any] = {}
    for level in reversed([c for c in (ctx.parent, ctx) if c is not None]):
        options.update({k: v for k, v in level.params.items() if v is not None and k not in options})
    defaults = {"kubeconfig": None, "context": None, "cluster": None, "user": None, "as_user": None,
                "as_groups": (), "request_timeout": TIMEOUT}
    return {key: options.get(key) or default for key, default in defaults.items()}


def _names(ctx: click.Context, path: str) -> list[str]:
    """Object names at ``path`` (a collection), or none when anything goes wrong."""
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.errors import KubeError
    from kubectl_gpushare.kube.flags import config_from

    try:
        with Client(config_from(_options(ctx)), component="completion", retry=None) as client:
            body = client.request("GET", path, {"limit": MAX_ITEMS})
        return sorted(item.metadata.name for item in _DECODER.decode(body).items if item.metadata.name)
    except (KubeError, msgspec.DecodeError, OSError, ValueError):
        return []


def _matching(names: list[str], incomplete: str, help_text: str | None = None) -> list[CompletionItem]:
    return [CompletionItem(name, help=help_text) for name in names if name.startswith(incomplete)]


def _namespace(ctx: click.Context) -> str:
    """The namespace typed with -n, else the kubeconfig context's, else ``default``."""
    typed = ctx.params.get("namespace")
    if isinstance(typed, str) and typed:
        return typed
    from kubectl_gpushare.kube.flags import config_from

    try:
        return config_from(_options(ctx)).namespace or "default"
    except Exception:  # noqa: BLE001 - a completion never fails loudly
        return "default"


def nodes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Node names."""
    return _matching(_names(ctx, "/api/v1/nodes"), incomplete)


def namespaces(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Namespace names."""
    return _matching(_names(ctx, "/api/v1/namespaces"), incomplete)


def pods(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Pod names in the namespace -n names (or the context's); with -A, every pod name."""
    if ctx.params.get("all_namespaces"):
        return _matching(sorted(set(_names(ctx, "/api/v1/pods"))), incomplete)
    from kubectl_gpushare.kube.names import check_namespace

    try:
        namespace = check_namespace(_namespace(ctx))
    except ValueError:
        return []
    return _matching(_names(ctx, f"/api/v1/namespaces/{namespace}/pods"), incomplete)


def contexts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Context names from the kubeconfig files kubectl would read."""
    from kubectl_gpushare.kube.config import context_names
    from kubectl_gpushare.kube.errors import KubeError

    try:
        return _matching(context_names(_options(ctx)["kubeconfig"]), incomplete)
    except (KubeError, OSError):
        return []


__all__ = ["contexts", "namespaces", "nodes", "pods"]
