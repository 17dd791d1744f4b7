"""kubectl's connection flags, declared once for every command: one decorator, one loader.

kubectl keeps its global flags to itself, so plugins re-declare them; the daemons take the same
flags so they can run outside a cluster. This module declares them once (``--kubeconfig``,
``--context``, ``--cluster``, ``--user``, ``--as``, ``--as-group``, ``--request-timeout``) and turns
them into a `ClientConfig` or a `Client`. ``KUBECONFIG`` is read by `kube.config.load_config` (as a
path list, like kubectl), not by click. Only click is imported at module level; the kube modules
load when a client is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from kubectl_gpushare.kube.client import Client
    from kubectl_gpushare.kube.config import ClientConfig

F = TypeVar("F", bound=Callable[..., Any])


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf``.

    click's bounds are comparisons, which ``nan`` passes, so ``--usage-interval nan`` became a wait that
    returns at once (a busy loop), and a range with no upper bound takes ``inf``.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, within the range and finite; else click's usage error (exit 2)."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


Completer = Callable[[click.Context, click.Parameter, str], list[Any]]


def complete(kind: str) -> Completer:
    """A ``shell_complete`` callback for ``kind`` names (nodes, pods, namespaces, contexts).

    `kube.completion` (and the client) load only when a completion runs, never for a command.
    """

    def callback(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from kubectl_gpushare.kube import completion

        answer: list[Any] = getattr(completion, kind)(ctx, param, incomplete)
        return answer

    return callback


_OPTIONS = (
    click.option(
        "--kubeconfig",
        default=None,
        metavar="PATH",
        help="Kubeconfig file (default: $KUBECONFIG path list, ~/.kube/config, in-cluster).",
    ),
    click.option("--context", default=None, shell_complete=complete("contexts"), help="Kubeconfig context to use."),
    click.option("--cluster", default=None, help="Kubeconfig cluster to use."),
    click.option("--user", default=None, help="Kubeconfig user to use."),
    click.option("--as", "as_user", default=None, metavar="USER", help="Impersonate this user."),
    click.option(
        "--as-group", "as_groups", multiple=True, metavar="GROUP", help="Impersonate this group (repeatable)."
    ),
    click.option(
        "--request-timeout",
        default=None,
        metavar="DURATION",
        help="Per-request timeout: 5, 5s, 1m (0: none; default 30s).",
    ),
)


def kube_options(function: F) -> F:
    """Add kubectl's connection flags to a click command."""
    for option in reversed(_OPTIONS):
        function = option(function)
    return function


def config_from(options: dict[str, Any]) -> ClientConfig:
    """The client configuration the flags (or their kubectl defaults) select.

    Raises:
        ConfigError: no usable configuration.
    """
    from kubectl_gpushare.kube.config import load_config

    return load_config(
        kubeconfig=options["kubeconfig"],
        context=options["context"],
        cluster=options["cluster"],
        user=options["user"],
        as_user=options["as_user"],
        as_groups=options["as_groups"],
        request_timeout=options["request_timeout"],
    )


def make_client(options: dict[str, Any], component: str) -> Client:
    """A client for the cluster the flags (or their kubectl defaults) select.

    Raises:
        ConfigError: no usable configuration.
    """
    from kubectl_gpushare.kube.client import Client

    return Client(config_from(options), component=component)
