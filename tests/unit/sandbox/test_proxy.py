"""The pod proxy's reply headers (`sandbox.proxy.relayed_headers`), from what ``http.client`` hands it."""

from __future__ import annotations

import pytest

from kubectl_gpushare.sandbox.proxy import relayed_headers


@pytest.mark.parametrize(
    ("value", "relayed"),
    [("7", "7"), ("7\r\n ", "7"), ("\t7 ", "7"), ("x", None)],
    ids=["plain", "folded", "spaces", "not-a-length"],
)
def test_a_head_replys_content_length_goes_on_trimmed_as_go_reads_it(value: str, relayed: str | None) -> None:
    # Go's transport reads a HEAD reply's Content-Length (transfer.go fixLength, textproto.TrimString: ASCII
    # whitespace, line breaks included); http.client keeps "\r\n " of a folded value. One that is no length
    # goes on as no header.
    kept = relayed_headers([("Content-Length", value), ("X-Kept", "y")], head=True)
    assert kept == [("X-Kept", "y")] + ([("Content-Length", relayed)] if relayed else [])
    assert relayed_headers([("Content-Length", value)]) == []  # another method's body is framed by the sandbox
