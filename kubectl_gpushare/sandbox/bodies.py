"""Decoding request bodies (JSON and YAML) into plain JSON values, with bounds.

Owns what a hostile body may not do: be invalid UTF-8, nest deeper than `MAX_DEPTH` (the sandbox's
object code is recursive; kube-apiserver's Go decoder has no such limit below 10,000), or use YAML
aliases (a few hundred bytes of anchors expand to gigabytes: the "billion laughs"). YAML is turned
into exactly what the same document in JSON would decode to, so nothing downstream sees a date, a
set or an integer map key. A JSON string's invalid UTF-8 and its escape of a lone UTF-16 surrogate
read as U+FFFD, as Go's decoder reads them. Every failure is a `BodyError` with a one-line message; no I/O.
"""

from __future__ import annotations

import codecs
import functools
import math
import re
from typing import Any, Final

import msgspec

from kubectl_gpushare import protocol

MAX_DEPTH = 100
"""Deepest nesting of objects and arrays accepted in a body (400 beyond it)."""

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


_SURROGATE_ESCAPES = re.compile(
    rb"\\u[Dd][89ABab][0-9A-Fa-f]{2}\\u[Dd][C-Fc-f][0-9A-Fa-f]{2}"  # a pair: both halves stay
    rb"|(\\u[Dd][89A-Fa-f][0-9A-Fa-f]{2})"  # a lone half: U+FFFD
    rb"|\\.",  # any other escape, skipped whole so an escaped backslash never starts one
    re.DOTALL,
)
"""JSON escapes, scanned left to right: a surrogate pair, a lone surrogate (group 1), or another escape."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[Dd][89A-Fa-f][0-9A-Fa-f]{2}")


class BodyError(ValueError):
    """A body that does not decode, or breaks a bound; the message is one line."""


def _each_byte_as_fffd(error: UnicodeError) -> tuple[str, int]:
    # Go's unquoteBytes (src/encoding/json/decode.go; sigs.k8s.io/json keeps it) reads a byte that
    # utf8.DecodeRune cannot as RuneError of size 1 and writes U+FFFD for it, one byte at a time;
    # Python's "replace" writes one U+FFFD for a whole invalid sequence ("\xe2\x82" is two in Go).
    assert isinstance(error, UnicodeDecodeError)
    return "\ufffd" * (error.end - error.start), error.end


_GO_UTF8: Final = "kubectl-gpushare-go-utf8"
codecs.register_error(_GO_UTF8, _each_byte_as_fffd)


def as_go_reads(data: bytes) -> bytes:
    """``data`` as Go's JSON decoder reads its strings: invalid UTF-8 and lone surrogate escapes as U+FFFD.

    Go's decoder does so only inside strings; a byte coerced outside one is still a syntax error. The
    result is valid UTF-8 that no JSON decoder reads a lone surrogate from (bodies, continue tokens).
    """
    try:
        data.decode()
    except UnicodeDecodeError:
        data = data.decode(errors=_GO_UTF8).encode()
    return _replace_lone_surrogates(data) if _SURROGATE_ESCAPE.search(data) else data


def decode_json(data: bytes) -> Any:
    """Decode a JSON body.

    Raises:
        BodyError: malformed JSON (invalid UTF-8 outside a string included) or nesting deeper than `MAX_DEPTH`.
    """
    try:
        try:
            value = _decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError):
            readable = as_go_reads(data)
            if readable == data:
                raise
            value = _decode(readable)  # what is still wrong is wrong for Go too (a byte offset may differ)
    except msgspec.DecodeError as exc:
        raise BodyError(protocol.error_reason(exc)) from None
    except UnicodeDecodeError:
        raise BodyError("the body is not valid UTF-8") from None
    except RecursionError:
        raise BodyError(f"the body nests deeper than {MAX_DEPTH} levels") from None
    # A body with fewer brackets than the limit cannot nest deeper: skip the walk (the common case).
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH:
        check_depth(value)
    return value


def _replace_lone_surrogates(data: bytes) -> bytes:
    r"""``data`` with each ``\uXXXX`` surrogate escape that is not half of a pair as ``\ufffd``.

    Go's encoding/json (``unquoteBytes`` in src/encoding/json/decode.go, kept as is by
    sigs.k8s.io/json, which kube-apiserver's JSON serializer decodes with) turns a lone surrogate
    into U+FFFD instead of failing: a high surrogate takes the next ``\uXXXX`` only when the two
    make a pair, otherwise it and the escape after it are read on their own. msgspec refuses them.
    """
    out: list[bytes] = []
    copied = 0  # data[:copied] is in out
    for match in _SURROGATE_ESCAPES.finditer(data):  # lazily: a body of escapes holds one match at a time
        if match.group(1) is not None:
            out += (data[copied : match.start()], b"\\ufffd")
            copied = match.end()
    out.append(data[copied:])
    return b"".join(out)


def decode_yaml(data: bytes) -> Any:
    """Decode a YAML body into JSON values (aliases refused).

    Raises:
        BodyError: malformed YAML, invalid UTF-8, an alias, a value JSON cannot hold, or nesting
            deeper than `MAX_DEPTH`.
    """
    import yaml

    try:
        value = yaml.load(data, Loader=_no_alias_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise BodyError(" ".join(f"{exc.problem or exc.context or 'invalid YAML'}{where}".split())) from None
    except yaml.YAMLError as exc:
        raise BodyError(" ".join(str(exc).split())) from None
    except RecursionError:
        raise BodyError(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # a scalar the constructor cannot build: a 5,000-digit int, 2024-02-30
        raise BodyError(f"the YAML document has a value that cannot be decoded: {protocol.error_reason(exc)}") from None
    check_depth(value)
    if not _finite(value):  # JSON has no infinity or NaN (msgspec would write null)
        raise BodyError("the YAML document has a value JSON cannot represent (an infinite or NaN number)")
    try:  # the JSON view: map keys become strings, dates ISO strings; what JSON cannot hold is refused
        return _decode(_encode(value))
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        raise BodyError(f"the YAML document has a value JSON cannot represent ({exc})") from None


def _finite(value: Any) -> bool:
    """Whether no float in ``value`` is infinite or NaN (YAML's ``.inf``, ``.nan``, ``1.0e+400``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse values nested deeper than ``limit`` (iteratively, so it cannot overflow the stack).

    Raises:
        BodyError: the value nests too deep.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise BodyError(f"the body nests deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


@functools.cache
def _no_alias_loader() -> type[Any]:
    """A `yaml.SafeLoader` that refuses aliases (built lazily: yaml is imported on first YAML body)."""
    import yaml
    from yaml.composer import ComposerError

    from kubectl_gpushare.kube.safe_yaml import SafeLoader

    class NoAliasLoader(SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise ComposerError(None, None, "YAML aliases are not allowed in request bodies", event.start_mark)
            return super().compose_node(parent, index)

    return NoAliasLoader
