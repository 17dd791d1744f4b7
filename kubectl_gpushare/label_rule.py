"""The label key and label value rule: one rule, in kube-apiserver's words and as a fast yes or no.

Label selectors (`kube.selectors`: ``-l`` and the sandbox's ``labelSelector``) report a bad key or
value in the words of `label_key_errors` and `label_value_errors`; node selectors (`node_affinity`,
whose hostile affinity may hold 1.5M values) ask `valid_label_key` and `valid_label_values`, which
answer the same, faster. Pure; imports only `protocol` of the package.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from kubectl_gpushare import protocol
from kubectl_gpushare.protocol import valid_dns_subdomain

_ONE_BY_ONE: Final = 8
"""Values `valid_label_values` checks one at a time; past them, joined (one scan in C)."""

# Label keys and values: k8s.io/apimachinery/pkg/api/validate/content/kube.go (``IsLabelKey``, of which
# ``IsQualifiedName`` is an alias, and ``IsLabelValue``), with dns.go's ``IsDNS1123Subdomain`` for a
# key's prefix and errors.go's words. The error lists are the rule, in kube-apiserver's words
# (`kube.selectors` reports them); the yes/no forms are defined as "no errors", only faster, and a
# property test holds them to it (tests/unit/core/test_label_rule.py).

_LABEL_KEY_FORMAT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
"""``labelKeyFmt``: a key's name part, and a non-empty value. Linear: no nested quantifier."""
_LABEL_KEY_MESSAGE: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FORMAT: Final = f"({_LABEL_KEY_FORMAT})?"
_LABEL_VALUE_MESSAGE: Final = "a valid label must be an empty string or consist of alphanumeric characters, " \
    "'-', '_' or '.', and must start and end with an alphanumeric character"
_SUBDOMAIN_MESSAGE: Final = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, " \
    "'-' or '.', and must start and end with an alphanumeric character"
_NAME: Final = re.compile(_LABEL_KEY_FORMAT)
_LABEL_VALUE: Final = re.compile(_LABEL_VALUE_FORMAT)
MAX_NAME: Final = 63
"""Longest label name or value, in bytes (``labelKeyMaxLength``, ``LabelValueMaxLength``)."""


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """``RegexError`` (content/errors.go), its examples included."""
    shown = "".join((" or " if i else "") + f"'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _longer_than(text: str, limit: int) -> bool:
    """Whether Go's ``len`` of the text, its UTF-8 bytes, passes ``limit``.

    A surrogate escape (argv's byte that is no UTF-8) is one byte; any other lone surrogate, which
    only a caller's own string can hold, its three. Every character is at least a byte, so only a
    short text that is not ASCII needs encoding (most values are short and ASCII).
    """
    if len(text) > limit or text.isascii():
        return len(text) > limit
    try:
        return len(text.encode("utf-8", "surrogateescape")) > limit
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass")) > limit


def label_key_errors(key: str) -> list[str]:
    """``content.IsLabelKey``'s errors for ``key``, in its words and order; [] for a label key."""
    errors: list[str] = []
    parts = key.split("/")
    if len(parts) > 2:
        return ["a valid label key " + _regex_error(_LABEL_KEY_MESSAGE, _LABEL_KEY_FORMAT, "MyName", "my.name",
                                                    "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:  # IsDNS1123Subdomain
            if _longer_than(prefix, protocol.DNS1123_SUBDOMAIN_MAX):
                errors.append(f"prefix part must be no more than {protocol.DNS1123_SUBDOMAIN_MAX} bytes")
            if not protocol.DNS_SUBDOMAIN.fullmatch(prefix):
                errors.append("prefix part " + _regex_error(_SUBDOMAIN_MESSAGE, protocol.DNS_SUBDOMAIN.pattern,
                                                            "example.com"))
    if not name:
        errors.append("name part must be non-empty")
    elif _longer_than(name, MAX_NAME):
        errors.append(f"name part must be no more than {MAX_NAME} bytes")
    if not _NAME.fullmatch(name):
        errors.append("name part " + _regex_error(_LABEL_KEY_MESSAGE, _LABEL_KEY_FORMAT, "MyName", "my.name",
                                                  "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    """``content.IsLabelValue``'s errors for ``value``, in its words and order; [] for a label value ("" is one)."""
    errors = [f"must be no more than {MAX_NAME} bytes"] if _longer_than(value, MAX_NAME) else []
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(_regex_error(_LABEL_VALUE_MESSAGE, _LABEL_VALUE_FORMAT, "MyValue", "my_value", "12345"))
    return errors


def valid_label_key(key: str) -> bool:
    """``not label_key_errors(key)``, without building the words.

    The patterns take ASCII only, so a text they match is as many bytes as characters, and the
    prefix, split at the last ``/``, holds any further ``/`` and so fails the subdomain pattern.
    """
    prefix, slash, name = key.rpartition("/")
    if slash and not valid_dns_subdomain(prefix):
        return False
    return len(name) <= MAX_NAME and bool(_NAME.fullmatch(name))


def valid_label_value(value: str) -> bool:
    """``not label_value_errors(value)``, without building the words."""
    return not value or (len(value) <= MAX_NAME and bool(_NAME.fullmatch(value)))


_LABEL_TEXT: Final = re.compile(r"[-A-Za-z0-9_.\n]*")
_LABEL_EDGES: Final = tuple(f"{a}{b}" for mark in "-_." for a, b in (("\n", mark), (mark, "\n")))
"""A value that starts or ends with what only its middle may hold, in the joined text."""


def valid_label_values(values: Sequence[str]) -> bool:
    """Whether every one of ``values`` is a label value (`valid_label_value`), at C speed (1.5M values: 0.1 s).

    The same rule on the values joined by newlines, which no label value holds (as many as there
    are values less one, or one of them held one): at most 63 characters each, of the allowed ones
    only, none starting or ending with ``-``, ``_`` or ``.``.
    """
    if len(values) <= _ONE_BY_ONE:
        return all(valid_label_value(value) for value in values)
    if max(map(len, values)) > MAX_NAME:
        return False
    text = "\n".join(values)
    return (text.count("\n") == len(values) - 1 and _LABEL_TEXT.fullmatch(text) is not None
            and text[:1] not in "-_." and text[-1:] not in "-_." and not any(edge in text for edge in _LABEL_EDGES))


__all__ = ["MAX_NAME", "label_key_errors", "label_value_errors", "valid_label_key", "valid_label_value",
           "valid_label_values"]
