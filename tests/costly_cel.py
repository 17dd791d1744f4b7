"""DRA selectors whose worst-case cost the API server refuses, for the tests that must see them refused.

Never evaluate these: the nested one allocates gigabytes (the probe that found the gap took a process down).
"""

from __future__ import annotations


def nested_bind(levels: int) -> str:
    """``cel.bind`` nested ``levels`` deep, each level eight copies of the one before: x8 per level."""
    body = f"v{levels - 1}.size() > 0"
    for i in reversed(range(levels)):
        init = '"0123456789"' if i == 0 else "+".join([f"v{i - 1}"] * 8)
        body = f"cel.bind(v{i}, {init}, {body})"
    return body


NESTED_BIND = nested_bind(9)
"""About 350 characters; a 10-character string grown 8**8-fold (1.3 GB of text)."""

REPLACE_CHAIN = "device.driver" + '.replace("a", device.driver)' * 5 + ".size() > 0"
"""Each ``replace`` may put the 63-character driver name for every character: 63**6 characters at worst."""
