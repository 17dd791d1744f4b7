"""The kube-scheduler stand-in builds URLs and reads replies the way HTTPExtender does."""

from __future__ import annotations

import pytest

from kubectl_gpushare.extender.schedsim import ExtenderConfig, HTTPExtender


@pytest.mark.parametrize(
    ("prefix", "url"),
    [
        ("http://127.0.0.1:32766/gpushare-scheduler", "http://127.0.0.1:32766/gpushare-scheduler/filter"),
        ("http://127.0.0.1:32766/gpushare-scheduler///", "http://127.0.0.1:32766/gpushare-scheduler/filter"),
        ("https://localhost:12345", "https://localhost:12345/filter"),
    ],
)
def test_url_is_trimmed_prefix_slash_verb(prefix: str, url: str) -> None:
    assert HTTPExtender(ExtenderConfig(url_prefix=prefix)).url("filter") == url


@pytest.mark.parametrize("prefix", ["127.0.0.1:32766/x", "ftp://host/x", "http:///nohost"])
def test_bad_url_prefix_is_rejected(prefix: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        HTTPExtender(ExtenderConfig(url_prefix=prefix))
