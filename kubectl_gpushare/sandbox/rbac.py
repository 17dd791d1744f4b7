"""RBAC rules derived from the request log, a check of a Role's rules against it, and RBAC's rule matching.

`rule_allows` is the one matcher of a PolicyRule: the sandbox authorizes its rule-bound tokens (the
viewer's) with it (`sandbox.authorization`), and the checks below use it. Beyond those tokens, a
test runs a component against it and then asks which
permissions the component actually used (`rules_from_requests`), or whether the rules shipped in
a ClusterRole manifest cover every request it made (`uncovered_requests`). Components identify
themselves with ``User-Agent: kubectl-gpushare/<version> (<component>)``. Pure functions over
`RequestRecord` lists; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpushare.sandbox.faults import RequestRecord

_COMPONENT = re.compile(r"\(([^()]*)\)\s*$")


def component_of(user_agent: str) -> str:
    """The component named in a User-Agent (``kubectl-gpushare/0.1 (extender)`` -> ``extender``)."""
    found = _COMPONENT.search(user_agent)
    return found.group(1).strip() if found else ""


def _resource_name(record: RequestRecord) -> str:
    return f"{record.resource}/{record.subresource}" if record.subresource else record.resource


def _selected(records: Iterable[RequestRecord], component: str | None, user: str | None) -> list[RequestRecord]:
    return [
        r
        for r in records
        if r.verb
        and r.resource
        and (component is None or component_of(r.user_agent) == component)
        and (user is None or r.user == user)
    ]


def rules_from_requests(
    records: Iterable[RequestRecord], *, component: str | None = None, user: str | None = None
) -> list[dict[str, list[str]]]:
    """The least ClusterRole rules that allow every logged request (failed ones included).

    Args:
        records: the sandbox's request log.
        component: only requests whose User-Agent names this component.
        user: only requests made with this user's token.

    Returns:
        Rules ``{"apiGroups": [...], "resources": [...], "verbs": [...]}``, one per group and
        resource, sorted, in the shape of a ClusterRole's ``rules``.
    """
    verbs: dict[tuple[str, str], set[str]] = {}
    for record in _selected(records, component, user):
        verbs.setdefault((record.group, _resource_name(record)), set()).add(record.verb)
    return [
        {"apiGroups": [group], "resources": [resource], "verbs": sorted(found)}
        for (group, resource), found in sorted(verbs.items())
    ]


def rule_allows(
    rule: Mapping[str, Any], verb: str, group: str = "", resource: str = "", subresource: str = "", name: str = "",
    *, path: str | None = None,
) -> bool:
    """Whether one PolicyRule allows a request, as RBAC's ``RuleAllows`` decides (``rbac/v1/evaluation_helpers.go``).

    A resource request matches on verb, API group, resource and name: ``*`` matches any verb, group or
    resource, ``resource/subresource`` the subresource alone, ``*/subresource`` that subresource of any
    resource (``ResourceMatches``), and an empty ``resourceNames`` any name. A non-resource request
    (``path`` given) matches ``nonResourceURLs`` exactly, ``*``, or, where it ends in ``*``, by
    the prefix left once every trailing ``*`` is trimmed (``NonResourceURLMatches``: ``TrimRight``).
    """
    verbs = rule.get("verbs") or []
    if "*" not in verbs and verb not in verbs:
        return False
    if path is not None:
        return any(url == "*" or url == path or (url.endswith("*") and path.startswith(url.rstrip("*")))
                   for url in rule.get("nonResourceURLs") or [])
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    combined = f"{resource}/{subresource}" if subresource else resource
    resources = rule.get("resources") or []
    if not any(r == "*" or r == combined or (subresource and r == f"*/{subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or name in names


def uncovered_requests(
    records: Iterable[RequestRecord],
    rules: Iterable[Mapping[str, Any]],
    *,
    component: str | None = None,
    user: str | None = None,
) -> list[str]:
    """Requests that the given rules would forbid, as ``verb group/resource`` strings (sorted, unique).

    An empty list means a Role with these rules lets the component do everything it did.
    ``resourceNames`` restrictions are honoured for named requests.
    """
    rule_list = list(rules)
    missing: set[str] = set()
    for record in _selected(records, component, user):
        if not any(rule_allows(rule, record.verb, record.group, record.resource, record.subresource, record.name)
                   for rule in rule_list):
            missing.add(f"{record.verb} {record.group + '/' if record.group else ''}{_resource_name(record)}")
    return sorted(missing)
