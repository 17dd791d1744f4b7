"""Discovery documents: ``/version``, ``/api``, ``/apis``, resource lists and a minimal OpenAPI v3.

Built from the resource table in ``resources.py``. ``/version`` reports a fixed 1.32 so the gcloud
kubectl dispatcher picks the same binary on every run. The OpenAPI v3 documents are the smallest
ones that let ``kubectl create -f`` and ``kubectl apply -f`` pass their default client-side
validation: each kind has a ``patch`` operation with its group-version-kind and a
``fieldValidation`` parameter, and schemas that accept any fields. ``/openapi/v2`` (what kubectl's
client-side validation of a ``List`` reads, in protobuf) names every served kind with a schema
that accepts any value, so a List of served kinds validates and unknown kinds are left to the
server, as against a real one. No I/O.
"""

from __future__ import annotations

from typing import Any

from kubectl_gpushare.sandbox.resources import RESOURCES, Resource, verbs_of

VERSION: dict[str, str] = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _groups() -> dict[str, list[Resource]]:
    groups: dict[str, list[Resource]] = {}
    for resource in RESOURCES:
        if resource.group:
            groups.setdefault(resource.group, []).append(resource)
    return groups


def api_versions() -> dict[str, Any]:
    """``GET /api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def _group_doc(group: str, resources: list[Resource]) -> dict[str, Any]:
    version = resources[0].version
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def api_group_list() -> dict[str, Any]:
    """``GET /apis``: a plain APIGroupList (kubectl accepts it in place of aggregated discovery)."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_doc(group, resources) for group, resources in sorted(_groups().items())],
    }


def api_group(group: str) -> dict[str, Any] | None:
    """``GET /apis/<group>``, or None for an unknown group."""
    resources = _groups().get(group)
    if resources is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, resources)}


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    """``GET /api/v1`` or ``GET /apis/<group>/<version>``, or None if not served."""
    members = [r for r in RESOURCES if r.group == group and r.version == version]
    if not members:
        return None
    entries: list[dict[str, Any]] = []
    for resource in members:
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(verbs_of(resource)),
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.categories:
            entry["categories"] = list(resource.categories)
        entries.append(entry)
        for sub in resource.subresources:
            kind = {"binding": "Binding", "scale": "Scale", "token": "TokenRequest"}.get(sub, resource.kind)
            verbs = {"binding": ["create"], "log": ["get"], "token": ["create"]}.get(sub, ["get", "patch", "update"])
            sub_entry: dict[str, Any] = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": kind,
                "verbs": verbs,
            }
            if sub == "scale":
                sub_entry.update(group="autoscaling", version="v1")
            if sub == "token":
                sub_entry.update(group="authentication.k8s.io", version="v1")
            entries.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }


def _openapi_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_root() -> dict[str, Any]:
    """``GET /openapi/v3``: where each group-version's document lives."""
    keys = sorted({_openapi_key(r.group, r.version) for r in RESOURCES})
    return {"paths": {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash=sandbox"} for key in keys}}


def openapi_document(key: str) -> dict[str, Any] | None:
    """``GET /openapi/v3/<api/v1 | apis/group/version>``, or None if unknown."""
    members = [r for r in RESOURCES if _openapi_key(r.group, r.version) == key and r.plural != "bindings"]
    if not members:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for resource in members:
        schema_name = f"io.k8s.api.{resource.group or 'core'}.{resource.version}.{resource.kind}"
        gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
        schemas[schema_name] = {
            "type": "object",
            "x-kubernetes-group-version-kind": [gvk],
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        }
        base = (
            f"/{key}/namespaces/{{namespace}}/{resource.plural}/{{name}}"
            if resource.namespaced
            else (f"/{key}/{resource.plural}/{{name}}")
        )
        ref = {"$ref": f"#/components/schemas/{schema_name}"}
        paths[base] = {
            "patch": {
                "operationId": f"patch{resource.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubectl-gpushare sandbox)", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""The media type kube-apiserver answers ``/openapi/v2`` with when asked for protobuf (client-go asks
for ``...spec.v2@v1.0+protobuf``; Go's MIME parser refuses the ``@`` in a reply)."""


def _definitions() -> list[tuple[str, str, dict[str, str]]]:
    return [
        (
            f"io.k8s.api.{r.group or 'core'}.{r.version}.{r.kind}",
            f"{r.kind} ({r.api_version}), served by the kubectl-gpushare sandbox.",
            {"group": r.group, "version": r.version, "kind": r.kind},
        )
        for r in RESOURCES
        if r.plural != "bindings"
    ]


def openapi_v2_json() -> dict[str, Any]:
    """``GET /openapi/v2`` as JSON (for clients that ask for it)."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes (kubectl-gpushare sandbox)", "version": VERSION["gitVersion"]},
        "paths": {},
        "definitions": {
            name: {"description": text, "x-kubernetes-group-version-kind": [gvk]} for name, text, gvk in _definitions()
        },
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | str) -> bytes:
    """One length-delimited protobuf field (strings, bytes and nested messages)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def openapi_v2_protobuf() -> bytes:
    """``GET /openapi/v2`` in protobuf: the same document as `openapi_v2_json`, hand-encoded.

    Field numbers are gnostic's ``OpenAPIv2.proto``: Document{swagger 1, info 2, definitions 9},
    Info{title 1, version 2}, Definitions{additional_properties 1}, NamedSchema{name 1, value 2},
    Schema{description 4, vendor_extension 31}, NamedAny{name 1, value 2}, Any{yaml 2}.
    """
    named: list[bytes] = []
    for name, text, gvk in _definitions():
        yaml = f'- group: "{gvk["group"]}"\n  kind: {gvk["kind"]}\n  version: {gvk["version"]}\n'
        extension = _field(1, "x-kubernetes-group-version-kind") + _field(2, _field(2, yaml))
        schema = _field(4, text) + _field(31, extension)
        named.append(_field(1, _field(1, name) + _field(2, schema)))
    info = _field(1, "Kubernetes (kubectl-gpushare sandbox)") + _field(2, VERSION["gitVersion"])
    return _field(1, "2.0") + _field(2, info) + _field(9, b"".join(named))
