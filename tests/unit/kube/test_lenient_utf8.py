"""kube.lenient: an object holding bytes that are not UTF-8 is skipped alone; the rest of its page is read.

msgspec raises `UnicodeDecodeError` (not `msgspec.DecodeError`) for such a string, anywhere in an object.
"""

from __future__ import annotations

from kubectl_gpushare.kube import lenient, types


def test_a_pod_that_is_not_utf8_is_skipped_and_the_page_read() -> None:
    page = (b'{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"ok"}},'
            b'{"metadata":{"name":"p","namespace":"n","annotations":{"a":"\xff"}}},{"metadata":{"name":"\xfe"}}]}')
    skipped: list[str] = []
    found = lenient.decode_page(types.PODS, page, skipped.append)
    assert [pod.metadata.name for pod in found.items] == ["ok"] and found.metadata.resource_version == "5"
    assert len(skipped) == 2 and skipped[0].startswith("pod n/p: cannot be decoded (")
    assert skipped[1].startswith("a pod with unreadable metadata: cannot be decoded (")
    assert lenient.object_meta(b'{"metadata":{"name":"\xfe"}}') == ("", "", "")
