"""Write objects as YAML the way ``kubectl kustomize`` does, so the manifests command prints its bytes.

kustomize writes each object as JSON and hands that to sigs.k8s.io/yaml (api/resource/resource.go,
AsYAML), whose JSONToYAML reads the JSON back with go-yaml v2 and marshals it again (sigs.k8s.io/yaml
yaml.go); api/resmap/reswrangler.go (AsYaml) puts ``---`` between the objects. So, from go-yaml
v2.4 (go.yaml.in/yaml/v2): keys in sorter.go's order (`_key_less`), a string with a line break in literal
style, one that would read back as another type double-quoted (encode.go, stringv; resolve.go),
any other plain where the emitter allows it, else single-quoted; indent 2, lines folded past 80
columns, unicode kept (emitterc.go). PyYAML's emitter and go-yaml's are both ports of libyaml's,
so those choices give the same text.

Where it can differ from kustomize: a float is spelt as PyYAML spells it (kustomize writes an
integral one as an integer, and exponents Go's way), and a key or value that PyYAML reads as
another type than kustomize does (``yes``, an unquoted date) was already changed when the file was
read; and ``<<`` is quoted (PyYAML would read it plain as a merge key). No manifest under
``manifests/`` has any of these; the tests compare every tree byte for byte.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from functools import cmp_to_key
from typing import Any, Final

import yaml

_SCALARS_OF_OTHER_TYPES: Final = frozenset(
    "y Y yes Yes YES true True TRUE on On ON n N no No NO false False FALSE off Off OFF ~ null Null NULL "
    ".nan .NaN .NAN .inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF".split()) | {""}
"""resolve.go's resolveMap: the booleans, nulls and special floats of YAML 1.1 (``<<`` is never looked up)."""
_INT: Final = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
"""What strconv.ParseInt(s, 0, 64) reads, less its range (an integer out of range is a float anyway)."""
_FLOAT: Final = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
"""resolve.go's yamlStyleFloat."""
_BASE_60: Final = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
"""encode.go's base60float, quoted on the way out for YAML 1.1 readers."""
_TIMESTAMP: Final = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"(?:[Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2})?)?")
"""resolve.go's allowedTimestampFormats (the date ranges left unchecked)."""


def reads_as_other_type(text: str) -> bool:
    """Whether go-yaml v2 reads ``text``, written plain, as something else than that string.

    As resolve.go's resolve: the first character decides what is tried (a sign or digit: timestamp,
    integer, float; a dot: float; some letters: the words), and encode.go adds base-60 floats.
    """
    if text in _SCALARS_OF_OTHER_TYPES:
        return True
    if text[0] == ".":
        return bool(_FLOAT.fullmatch(text))
    if text[0] not in "+-0123456789":
        return False
    plain = text.replace("_", "")
    return bool(_TIMESTAMP.fullmatch(text) or _INT.fullmatch(plain) or _FLOAT.fullmatch(plain)
                or _BASE_60.fullmatch(text))


def _key_less(left: str, right: str) -> bool:
    """sorter.go's keyList.Less for two strings.

    Letters by code point, after every other character; runs of digits by their value (``a2``
    before ``a10``).
    """
    for i, (a, b) in enumerate(zip(left, right, strict=False)):
        if a == b:
            continue
        a_letter, b_letter = a.isalpha(), b.isalpha()
        if a_letter and b_letter:
            return a < b
        if a_letter or b_letter:
            return b_letter
        a_number = b_number = 0
        if "0" in (a, b):  # a zero inside a number is a digit, not leading: compare the rest as numbers
            for j in range(i - 1, -1, -1):
                if not left[j].isdecimal():
                    break
                if left[j] != "0":
                    a_number = b_number = 1
                    break
        a_end, b_end = i, i
        while a_end < len(left) and left[a_end].isdecimal():
            a_number = a_number * 10 + ord(left[a_end]) - ord("0")
            a_end += 1
        while b_end < len(right) and right[b_end].isdecimal():
            b_number = b_number * 10 + ord(right[b_end]) - ord("0")
            b_end += 1
        if a_number != b_number:
            return a_number < b_number
        if a_end != b_end:
            return a_end < b_end
        return a < b
    return len(left) < len(right)


def _key_compare(left: str, right: str) -> int:
    return -1 if _key_less(left, right) else 1 if _key_less(right, left) else 0


_KEY: Final = cmp_to_key(_key_compare)
"""Sort key for mapping keys in go-yaml v2's order."""


def _as_json(node: object) -> object:
    """``node`` as kustomize's JSON step leaves it.

    Keys are strings (JSON's spelling of a number, a boolean or null), dates are their ISO text, and
    no object is shared, so no YAML alias is written.
    """
    if isinstance(node, dict):
        return {_json_key(key): _as_json(value) for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return [_as_json(value) for value in node]
    if isinstance(node, (datetime.date, datetime.datetime)):
        return node.isoformat()
    return node


def _json_key(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


class _Dumper(yaml.SafeDumper):
    """SafeDumper with go-yaml v2's key order and string styles."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else '"' if reads_as_other_type(text) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


def _represent_dict(dumper: yaml.SafeDumper, mapping: dict[str, Any]) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", sorted(mapping.items(), key=lambda item: _KEY(item[0])))


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(dict, _represent_dict)


def dump_all(documents: Iterable[object]) -> str:
    """The objects as one stream, as ``kubectl kustomize`` prints them (no ``---`` before the first)."""
    return "---\n".join(
        yaml.dump(_as_json(document), Dumper=_Dumper, default_flow_style=False, allow_unicode=True, width=80,
                  indent=2, sort_keys=False)
        for document in documents)
