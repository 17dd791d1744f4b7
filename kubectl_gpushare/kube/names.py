"""Kubernetes object-name rules, checked before a name a user typed reaches a URL path.

A namespace is a DNS-1123 label (``namespace`` in ``staging/src/k8s.io/apimachinery/pkg/api/validation``:
``ValidateNamespaceName`` is ``IsDNS1123Label``), most other objects (pods among them) a DNS-1123
subdomain (``IsDNS1123Subdomain``, ``k8s.io/apimachinery/pkg/util/validation``). A name that breaks
them cannot exist, so it is refused as a usage error instead of being sent (``../nodes`` would
otherwise walk the URL). Pure: no I/O.
"""

from __future__ import annotations

from kubectl_gpushare.protocol import DNS1123_LABEL_MAX, DNS1123_SUBDOMAIN_MAX, valid_dns_label, valid_dns_subdomain


def _shown(text: str) -> str:
    return repr(text if len(text) <= 70 else text[:70] + "...")


def check_namespace(text: str) -> str:
    """The namespace name, unchanged.

    Raises:
        ValueError: not a DNS-1123 label (lower-case letters, digits and '-', at most 63).
    """
    if not valid_dns_label(text):
        raise ValueError(f"{_shown(text)} is not a namespace name (lower-case letters, digits and '-', "
                         f"at most {DNS1123_LABEL_MAX})")
    return text


def check_object_name(text: str, kind: str) -> str:
    """The object name, unchanged.

    Raises:
        ValueError: not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253).
    """
    if not valid_dns_subdomain(text):
        raise ValueError(f"{_shown(text)} is not a {kind} name (lower-case letters, digits, '-' and '.', "
                         f"at most {DNS1123_SUBDOMAIN_MAX})")
    return text


__all__ = ["check_namespace", "check_object_name"]
