"""ListOptions kube-apiserver refuses are refused here too, before anything is read or streamed.

``ValidateListOptions`` / ``validateWatchOptions`` (k8s.io/apimachinery/pkg/apis/meta/internalversion/
validation) answer 422 on ``ListOptions.meta.k8s.io``; the etcd3 store refuses a continue token with a
resourceVersion (400). A client that sends these passes nowhere, so it must not pass against the sandbox.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from kubectl_gpushare.sandbox.routes import BLOCK_TIMEOUT
from kubectl_gpushare.sandbox.server import Sandbox
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def get(sb: Sandbox, query: str, path: str = CONFIGMAPS) -> tuple[int, Any]:
    """The status and body of a GET of ``path?query``: a refusal's Status decoded, a success's bytes."""
    try:
        with urllib.request.urlopen(sb.url + path + "?" + query, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())



def _refused_after_the_block(sb: Sandbox, target: str) -> tuple[int, Any, str | None]:
    """The error status, Status body and Retry-After of a request that waited at least `BLOCK_TIMEOUT` for it."""
    began = time.monotonic()
    try:
        urllib.request.urlopen(sb.url + target, timeout=30)
        raise AssertionError(f"{target} was answered")
    except urllib.error.HTTPError as exc:
        refused = exc.code, json.loads(exc.read()), exc.headers.get("Retry-After")
    assert time.monotonic() - began >= BLOCK_TIMEOUT - 0.1
    return refused


REFUSED_OPTIONS = [
    ("resourceVersionMatch=Exact", "resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ("resourceVersion=1&resourceVersionMatch=Newest", 'Unsupported value: "Newest"'),
    ("resourceVersion=0&resourceVersionMatch=Exact", 'resourceVersionMatch "exact" is forbidden'),
    ("sendInitialEvents=true", "sendInitialEvents is forbidden for list"),
    ("watch=1&sendInitialEvents=true", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
    ("watch=1&resourceVersionMatch=NotOlderThan", "forbidden for watch unless sendInitialEvents is provided"),
    (
        "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true",
        'Unsupported value: "Exact": supported values: "NotOlderThan"',
    ),
    # SetListOptionsDefaults (WatchList on) gives a watch from "" resourceVersionMatch=NotOlderThan first.
    ("watch=1&continue=abc", "resourceVersionMatch is forbidden when continue is provided"),
]
"""(query, a cause of its 422): one for each rule of ``ValidateListOptions`` and ``validateWatchOptions``."""


def assert_list_options_refused(status: int, answer: Any, cause: str) -> None:
    assert status == 422, answer
    assert answer["reason"] == "Invalid" and answer["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    assert cause in answer["message"]
    assert any(c["field"] in ("resourceVersionMatch", "sendInitialEvents") for c in answer["details"]["causes"])


@pytest.mark.parametrize(("query", "cause"), REFUSED_OPTIONS)
def test_list_options_a_real_server_refuses_are_a_422(sandbox: Sandbox, query: str, cause: str) -> None:
    status, answer = get(sandbox, query + "&timeoutSeconds=1")
    assert_list_options_refused(status, answer, cause)


def delete_collection(sb: Sandbox, query: str) -> tuple[int, Any]:
    request = urllib.request.Request(f"{sb.url}{CONFIGMAPS}?{query}", method="DELETE")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(("query", "cause"), REFUSED_OPTIONS)
def test_a_delete_collection_refuses_the_list_options_a_list_refuses_and_deletes_nothing(
        sandbox: Sandbox, query: str, cause: str) -> None:
    # DeleteCollection (apiserver handlers/delete.go) runs ValidateListOptions on its decoded
    # ListOptions, the watch rules when they say watch, and answers the same 422 before it deletes.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"d{i}", "namespace": "default"}} for i in range(2)])
    status, answer = delete_collection(sandbox, query)
    assert_list_options_refused(status, answer, cause)
    assert len(sandbox.objects("configmaps")) == 2
    status, answer = delete_collection(sandbox, query + "&dryRun=Bogus")  # before the DeleteOptions are read
    assert_list_options_refused(status, answer, cause)


def test_a_delete_collection_with_valid_list_options_still_deletes(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"d{i}", "namespace": "default"}} for i in range(2)])
    status, answer = delete_collection(
        sandbox, "resourceVersion=1&resourceVersionMatch=NotOlderThan&watch=1&sendInitialEvents=false"
        "&resourceVersionMatch=Exact")  # the first value counts; watch rules: NotOlderThan with sendInitialEvents
    assert status == 200 and len(answer["items"]) == 2, answer
    assert sandbox.objects("configmaps") == []


def test_a_continue_token_with_a_resource_version_is_a_400(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}} for i in range(3)])
    status, body = get(sandbox, "limit=1")
    assert status == 200
    token = json.loads(body)["metadata"]["continue"]
    status, answer = get(sandbox, f"limit=1&continue={token}&resourceVersion=2")
    assert status == 400 and answer["message"] == "specifying resource version is not allowed when using continue"
    status, body = get(sandbox, f"limit=1&continue={token}&resourceVersion=0")  # "0" is let through, as upstream
    assert status == 200 and json.loads(body)["items"][0]["metadata"]["name"] == "c1"


def test_a_continue_token_that_does_not_decode_is_named_before_the_resource_version_it_comes_with(
    sandbox: Sandbox,
) -> None:
    # storage.ValidateListOptions (k8s.io/apiserver/pkg/storage): DecodeContinue's 400 comes first.
    status, answer = get(sandbox, "continue=abc%25&resourceVersion=2")
    assert status == 400 and answer["message"].startswith("invalid continue token: continue key is not valid")


def test_valid_combinations_still_serve(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])  # resourceVersion 1
    for query in (
        "resourceVersion=1&resourceVersionMatch=NotOlderThan",
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    ):
        status, _ = get(sandbox, query)
        assert status == 200, query


def test_a_list_at_a_future_resource_version_waits_then_is_a_504_too_large(sandbox: Sandbox) -> None:
    # cacher's waitUntilFreshAndBlock: blockTimeout (3 s), then storage.NewTooLargeResourceVersionError.
    current = sandbox.store.resource_version
    status, answer, retry_after = _refused_after_the_block(sandbox, f"{CONFIGMAPS}?resourceVersion={current + 5}")
    assert status == 504 and retry_after == "1"
    assert answer == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"Timeout: Too large resource version: {current + 5}, current: {current}", "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1},
        "code": 504,
    }


def test_a_write_during_the_wait_answers_the_list(sandbox: Sandbox) -> None:
    wanted = sandbox.store.resource_version + 1
    answers: list[tuple[int, Any]] = []
    began = time.monotonic()
    lister = threading.Thread(target=lambda: answers.append(get(sandbox, f"resourceVersion={wanted}")))
    lister.start()
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "late", "namespace": "default"}}])
    lister.join(30)
    status, body = answers[0]
    assert status == 200 and time.monotonic() - began < BLOCK_TIMEOUT
    listed = json.loads(body)
    assert int(listed["metadata"]["resourceVersion"]) >= wanted
    assert [item["metadata"]["name"] for item in listed["items"]] == ["late"]


@pytest.mark.parametrize("name", ["c", "missing"])
def test_a_get_at_a_future_resource_version_waits_then_is_the_same_504(sandbox: Sandbox, name: str) -> None:
    # cacher.go Get: a resourceVersion is "NotOlderThan", served by watchCache.WaitUntilFreshAndGet,
    # which blocks in waitUntilFreshAndBlock as a list does (blockTimeout, then the 504) before it
    # looks the key up: neither an object that exists nor one that does not (no 404) ends the wait.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
    current = sandbox.store.resource_version
    target = f"{CONFIGMAPS}/{name}?resourceVersion={current + 5}"
    status, answer, retry_after = _refused_after_the_block(sandbox, target)
    assert (status, retry_after, answer["reason"]) == (504, "1", "Timeout")
    assert answer["message"] == f"Timeout: Too large resource version: {current + 5}, current: {current}"


def test_a_write_during_the_wait_answers_the_get_with_what_it_wrote(sandbox: Sandbox) -> None:
    # WaitUntilFreshAndGet reads the key once the cache has caught up, and a write during the wait
    # ends it at once: the object the awaited write created is found, well before blockTimeout.
    wanted = sandbox.store.resource_version + 1
    answers: list[tuple[int, Any]] = []

    def read() -> None:
        try:
            with urllib.request.urlopen(f"{sandbox.url}{CONFIGMAPS}/late?resourceVersion={wanted}", timeout=30) as r:
                answers.append((r.status, json.loads(r.read())))
        except urllib.error.HTTPError as exc:
            answers.append((exc.code, json.loads(exc.read())))

    began = time.monotonic()
    getter = threading.Thread(target=read)
    getter.start()
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "late", "namespace": "default"}}])
    getter.join(30)
    status, answer = answers[0]
    assert (status, answer["metadata"]["name"]) == (200, "late") and time.monotonic() - began < BLOCK_TIMEOUT


def _watch(sb: Sandbox, query: str, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with urllib.request.urlopen(f"{sb.url}{CONFIGMAPS}?watch=true&{query}", timeout=30) as resp:
        assert resp.status == 200
        while len(events) < count and (line := resp.readline()):
            events.append(json.loads(line))
    return events


def test_a_watch_list_at_a_future_resource_version_ends_in_a_504_error_event(sandbox: Sandbox) -> None:
    # Only a watch-list waits (cacher.go Watch); the 504 comes as the stream's ERROR event (newErrWatcher).
    current = sandbox.store.resource_version
    query = f"resourceVersion={current + 5}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    [event] = _watch(sandbox, query + "&allowWatchBookmarks=true&timeoutSeconds=20", 2)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 504 and event["object"]["reason"] == "Timeout"
    assert event["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_a_plain_watch_at_a_future_resource_version_stays_quiet_until_the_store_passes_it(sandbox: Sandbox) -> None:
    sandbox.api.bookmark_interval = 0.05
    current = sandbox.store.resource_version
    got: list[dict[str, Any]] = []
    watcher = threading.Thread(target=lambda: got.extend(
        _watch(sandbox, f"resourceVersion={current + 3}&allowWatchBookmarks=true&timeoutSeconds=20", 2)))
    watcher.start()
    wait_for(sandbox.open_watches, what="the watch to be served")
    for i in range(4):  # resourceVersions current+1 .. current+4: only the last is newer than the watch's
        sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}}])
    watcher.join(30)
    assert got[0]["type"] == "ADDED" and got[0]["object"]["metadata"]["name"] == "c3"
    assert all(int(e["object"]["metadata"]["resourceVersion"]) > current + 3 for e in got)


def _token(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.mark.parametrize(("token", "reason"), [
    ("x" * 5000 + "!", "illegal base64 data at input byte 5000"),
    ("eyJ2Ijo=", "illegal base64 data at input byte 7"),
    (_token({"v": "meta.k8s.io/v1"})[:10], "unexpected end of JSON input"),
    (_token(["x" * 5000]), "json: cannot unmarshal array into Go value of type storage.continueToken"),
    (_token({"v": "meta.k8s.io/v1", "rv": "7", "start": "x" * 5000}),
     "json: cannot unmarshal string into Go struct field continueToken.rv of type int64"),
    (_token({"v": "meta.k8s.io/v1", "rv": 0, "start": "x" * 5000}),
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    (_token({"v": "meta.k8s.io/v1", "rv": 3, "start": ""}), "encoded start key empty (version meta.k8s.io/v1)"),
    (base64.urlsafe_b64encode(b"[" * 20000).decode().rstrip("="), "invalid character '[' exceeded max depth"),
    (base64.urlsafe_b64encode(b'{"v": "meta.k8s.io/v1", "rv": NaN, "start": "x"}').decode().rstrip("="),
     "invalid character 'N' looking for beginning of value"),  # Python's json reads NaN; Go's does not
    (base64.urlsafe_b64encode(b'[-Infinity]').decode().rstrip("="), "invalid character 'I' in numeric literal"),
], ids=["alphabet", "padding", "truncated", "array", "rv-type", "rv-zero", "no-start", "deep", "nan", "minus-infinity"])
def test_a_bad_continue_token_is_a_400_that_names_the_fault_not_the_token(
    sandbox: Sandbox, token: str, reason: str
) -> None:
    # storage.DecodeContinue's errors, wrapped by the etcd3 store's list: the token itself is never echoed.
    status, answer = get(sandbox, f"limit=1&continue={token}")
    assert status == 400 and answer["reason"] == "BadRequest"
    assert answer["message"] == f"invalid continue token: continue key is not valid: {reason}"


@pytest.mark.parametrize("start", ["default/../kube-system/c0", "default//c0", "default/c0/", "./default/c0", "//c0"])
def test_a_continue_start_key_that_path_clean_changes_is_a_400_that_names_it(sandbox: Sandbox, start: str) -> None:
    # storage.DecodeContinue defends against path traversal: a key that path.Clean changes is refused.
    status, answer = get(sandbox, "limit=1&continue=" + _token({"v": "meta.k8s.io/v1", "rv": 3, "start": start}))
    assert (status, answer["message"]) == (400, f"invalid continue token: continue key is not valid: {start}")


def test_a_continue_start_key_is_read_without_its_leading_slash(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}} for i in range(3)])
    for start in ("default/c0", "/default/c0"):  # DecodeContinue: keyPrefix + the cleaned key without its "/"
        status, body = get(sandbox, "limit=1&continue=" + _token({"v": "meta.k8s.io/v1", "rv": 1, "start": start}))
        assert status == 200 and [item["metadata"]["name"] for item in json.loads(body)["items"]] == ["c1"], body


def test_continue_tokens_are_unpadded_url_safe_base64(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}} for i in range(3)])
    names = []
    token = ""
    while True:
        status, body = get(sandbox, "limit=1" + (f"&continue={token}" if token else ""))
        page = json.loads(body)
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
        assert "=" not in token and json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["v"] == (
            "meta.k8s.io/v1")
    assert names == ["c0", "c1", "c2"]


def test_a_continue_token_with_a_5000_digit_resource_version_names_the_number(sandbox: Sandbox) -> None:
    # Past int()'s 4,300-digit limit json.loads raised a bare ValueError, answered as a bad character.
    text = '{"v": "meta.k8s.io/v1", "rv": ' + "1" * 5000 + ', "start": "x"}'
    token = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    status, answer = get(sandbox, f"limit=1&continue={token}")
    assert status == 400 and answer["message"] == (
        "invalid continue token: continue key is not valid: json: cannot unmarshal number " + "1" * 64
        + " into Go struct field continueToken.rv of type int64")


def test_refused_values_are_quoted_as_go_quotes_them_and_cut(sandbox: Sandbox) -> None:
    # field.Error shows a string with %q (strconv.Quote): double quotes, a non-ASCII letter as it is.
    status, answer = get(sandbox, "resourceVersion=1&resourceVersionMatch=N%C3%A9%22" + "x" * 5000)
    assert status == 422
    assert 'Unsupported value: "Né\\"' + "x" * 197 + '": supported values:' in answer["message"]
    status, answer = get(sandbox, "limit=%C3%A9")
    assert status == 400 and answer["message"] == 'strconv.ParseInt: parsing "é": invalid syntax'


# --- limit and timeoutSeconds: int64s, converted before anything else is read ---------------
@pytest.mark.parametrize(
    ("query", "quoted", "why"),
    [("limit=x", "x", "invalid syntax"), ("limit=", "", "invalid syntax"), ("limit=%2B%2B1", "++1", "invalid syntax"),
     ("limit=" + "9" * 5000, "9" * 5000, "value out of range"), ("limit=%FF", "\\xff", "invalid syntax"),
     ("watch=1&limit=1.5", "1.5", "invalid syntax"), ("timeoutSeconds=x", "x", "invalid syntax"),
     ("watch=1&timeoutSeconds=", "", "invalid syntax"),
     ("watch=1&timeoutSeconds=9223372036854775808", "9223372036854775808", "value out of range"),
     # ListOptions' field order: timeoutSeconds before limit, both before the selectors and the 422s.
     ("limit=y&timeoutSeconds=x", "x", "invalid syntax"),
     ("labelSelector=a%20in%20(&sendInitialEvents=1&limit=z", "z", "invalid syntax")],
    ids=["limit", "limit-empty", "limit-signs", "limit-5000-digits", "limit-not-utf8", "watch-limit", "list-timeout",
         "watch-timeout-empty", "watch-timeout-past-int64", "timeout-first", "before-selectors-and-validation"],
)  # fmt: skip
def test_limit_and_timeout_seconds_are_refused_in_strconvs_words(sandbox: Sandbox, query: str, quoted: str,
                                                                 why: str) -> None:
    # autoConvert_url_Values_To_v1_ListOptions (apimachinery meta/v1 zz_generated.conversion.go):
    # runtime.Convert_Slice_string_To_Pointer_int64 / _To_int64 return strconv.ParseInt's error as it is,
    # and the list and watch handlers answer it as NewBadRequest(err.Error()).
    status, answer = get(sandbox, query)
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"] == f'strconv.ParseInt: parsing "{quoted}": {why}', answer["message"][:200]


@pytest.mark.parametrize("query", ["limit=x", "timeoutSeconds=" + "9" * 5000, "limit=%FF&labelSelector=a%20in%20("])
def test_a_delete_collection_reads_limit_and_timeout_seconds_as_a_list_does(sandbox: Sandbox, query: str) -> None:
    # DeleteCollection (apiserver handlers/delete.go) decodes the same ListOptions with the same
    # ParameterCodec, and answers a strconv.ParseInt error as a 400 before it deletes anything.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"d{i}", "namespace": "default"}} for i in range(2)])
    delete = urllib.request.Request(f"{sandbox.url}{CONFIGMAPS}?{query}", method="DELETE")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(delete, timeout=30)
    answer = json.loads(refused.value.read())
    assert (refused.value.code, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"].startswith("strconv.ParseInt: parsing "), answer["message"][:200]
    assert len(sandbox.objects("configmaps")) == 2

def test_a_negative_limit_lists_everything_and_the_real_kubectl_reads_strconvs_words(sandbox: Sandbox,
                                                                                      kubectl: Any) -> None:
    # Nothing validates limit; the store pages only for a limit above 0 (etcd3 GetList: paging := Limit > 0).
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}} for i in range(3)])
    status, body = get(sandbox, "limit=-1")
    listed = json.loads(body)
    assert status == 200 and len(listed["items"]) == 3 and "continue" not in listed["metadata"]
    result = kubectl("get", "--raw", CONFIGMAPS + "?limit=x", check=False)
    assert (result.returncode, result.stderr) == (
        1, 'Error from server (BadRequest): strconv.ParseInt: parsing "x": invalid syntax\n')


# --- a resourceVersion that is no number -----------------------------------------------------
def go_parse_uint_error(text: str, why: str = "invalid syntax") -> str:
    quoted = json.dumps(text, ensure_ascii=False)  # Go's %q, for these printable values
    return f"resourceVersion: Invalid value: {quoted}: strconv.ParseUint: parsing {quoted}: {why}"


@pytest.mark.parametrize(("query", "value", "why"), [
    ("resourceVersion=abc", "abc", "invalid syntax"),
    ("resourceVersion=-1&resourceVersionMatch=NotOlderThan&limit=5", "-1", "invalid syntax"),
    ("watch=1&resourceVersion=%C2%B2&timeoutSeconds=1", "²", "invalid syntax"),
    ("watch=1&resourceVersion=18446744073709551616x", "18446744073709551616x", "value out of range"),
    ("resourceVersion=%2B1", "+1", "invalid syntax"),
], ids=["list", "not-older-than-with-limit", "watch-superscript", "watch-past-uint64", "sign"])
def test_a_resource_version_that_is_no_uint64_is_the_etcd3_stores_400(
    sandbox: Sandbox, query: str, value: str, why: str
) -> None:
    # The etcd3 versioner's ParseUint error, as the etcd3 store's GetList answers it:
    # apierrors.NewBadRequest("invalid resource version: " + the error). (The watch cache passes it on
    # unconverted, a 500 (kubernetes/kubernetes#101350); the sandbox answers no bad input with a 500.)
    status, answer = get(sandbox, query)
    assert status == 400, answer
    assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "invalid resource version: " + go_parse_uint_error(value, why),
                      "reason": "BadRequest", "code": 400}  # fmt: skip


def test_a_get_at_an_unparsable_resource_version_is_a_400_and_a_number_reads(sandbox: Sandbox) -> None:
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}])
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(sandbox.url + CONFIGMAPS + "/c?resourceVersion=x", timeout=30)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["message"] == "invalid resource version: " + go_parse_uint_error("x")
    for good in ("", "0", "01"):  # ParseUint takes leading zeros
        with urllib.request.urlopen(f"{sandbox.url}{CONFIGMAPS}/c?resourceVersion={good}", timeout=30) as resp:
            assert resp.status == 200
        assert get(sandbox, f"resourceVersion={good}")[0] == 200


@pytest.mark.parametrize(("start", "after"), [
    (rb"default/\ud800", ["\ufffd\ufffd", "\U0001f600"]),
    (b"default/\xe2\x82", ["\U0001f600"]),
], ids=["lone-surrogate-escape", "two-invalid-bytes"])
def test_a_continue_token_start_key_is_read_as_gos_json_decoder_reads_it(
    sandbox: Sandbox, start: bytes, after: list[str]
) -> None:
    # DecodeContinue's json.Unmarshal reads a lone surrogate escape as one U+FFFD and each byte of
    # invalid UTF-8 as one: the page starts after "default/\ufffd" (or "\ufffd\ufffd"), so a name
    # between U+D800 and U+FFFD is not on it (it was, after a start key that kept the surrogate), nor
    # is "\ufffd\ufffd" after two bytes (Python's "replace" made them one U+FFFD).
    names = ["a", "\ue000", "\ufffd", "\ufffd\ufffd", "\U0001f600"]
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}} for name in names])
    raw = b'{"v": "meta.k8s.io/v1", "rv": 1, "start": "' + start + b'"}'
    token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    status, body = get(sandbox, f"limit=10&continue={token}")
    assert status == 200, body
    assert [item["metadata"]["name"] for item in json.loads(body)["items"]] == after


def test_a_zero_or_wrapped_timeout_seconds_is_the_default_and_a_negative_one_ends_at_once(sandbox: Sandbox) -> None:
    # ListResource (apiserver handlers/get.go): time.Duration(timeoutSeconds) * time.Second, an int64 that
    # wraps (2^55 s is 0 ns; 9223372037 s is negative); a zero duration takes --min-request-timeout, a
    # negative one's timer fires at once. The sandbox closed a timeoutSeconds=0 watch at once.
    for query in ("timeoutSeconds=-1", "timeoutSeconds=9223372037"):
        connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=20)
        connection.request("GET", f"{CONFIGMAPS}?watch=1&{query}")
        assert connection.getresponse().read() == b"", query  # the stream ends, empty
        connection.close()
    for index, query in enumerate(("timeoutSeconds=0", f"timeoutSeconds={1 << 55}")):
        connection = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=20)
        connection.request("GET", f"{CONFIGMAPS}?watch=1&{query}")
        response = connection.getresponse()
        wait_for(lambda n=index + 1: sandbox.open_watches() == n, what="the watch to be served")
        made = json.dumps({"metadata": {"name": f"w{index}"}}).encode()
        post = urllib.request.Request(sandbox.url + CONFIGMAPS, data=made, method="POST",
                                      headers={"Content-Type": "application/json"})  # fmt: skip
        urllib.request.urlopen(post, timeout=20).close()
        events = [json.loads(response.readline()) for _ in range(index + 1)]  # the earlier ones come first
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", f"w{i}") for i in range(index + 1)], query
        connection.close()  # the server notices at its next write; the count only grows here


# --- selectors are parsed before ValidateListOptions, field labels checked after --------------
BAD_LABELS = "labelSelector=a%3Db%20c"
"""A label selector ``labels.Parse`` refuses: ``a=b c``, a second term without its comma."""
RV_MATCH_WITHOUT_RV = "resourceVersionMatch=Exact"
"""A ListOptions ``ValidateListOptions`` refuses on a list (and a watch, another rule) with a 422."""


@pytest.mark.parametrize("verb", ["list", "watch", "deletecollection"])
@pytest.mark.parametrize(
    ("query", "message"),
    [
        (BAD_LABELS, "found 'c', expected: ',' or 'end of string'"),
        ("fieldSelector=metadata.name%3Dx,nope", "invalid selector: 'metadata.name=x,nope'; can't understand 'nope'"),
        ("fieldSelector=spec.bogus%3Dx,nope", "invalid selector: 'spec.bogus=x,nope'; can't understand 'nope'"),
    ],
    ids=["labels", "fields", "fields-before-the-label-check"],
)
def test_a_selector_that_does_not_parse_is_a_400_before_the_list_options_422(
        sandbox: Sandbox, verb: str, query: str, message: str) -> None:
    # ListResource and DeleteCollection (apiserver handlers/get.go, delete.go) parse both selectors in
    # DecodeParameters (the v1-to-internal ListOptions conversion: labels.Parse, fields.ParseSelector),
    # answer its error as a 400, and only then run ValidateListOptions.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"d{i}", "namespace": "default"}} for i in range(2)])
    refused = f"{query}&{RV_MATCH_WITHOUT_RV}" + ("&watch=1" if verb == "watch" else "")
    status, answer = delete_collection(sandbox, refused) if verb == "deletecollection" else get(sandbox, refused)
    assert (status, answer["reason"]) == (400, "BadRequest"), answer
    assert answer["message"].startswith(message), answer["message"]
    assert len(sandbox.objects("configmaps")) == 2


NOT_KNOWN = '{} is not a known field selector: only "metadata.name", "metadata.namespace"'
"""``DefaultMetaV1FieldSelectorConversion``'s words (k8s.io/apimachinery/pkg/runtime/conversion.go), %q first."""


@pytest.mark.parametrize("verb", ["list", "watch", "deletecollection"])
def test_an_unsupported_field_label_is_a_400_after_the_list_options_422(sandbox: Sandbox, verb: str) -> None:
    # The field labels go through ConvertFieldLabel (FieldSelector.Transform) after ValidateListOptions.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "d0", "namespace": "default"}}])
    watch = "&watch=1" if verb == "watch" else ""
    query = "fieldSelector=spec.bogus%3Dx" + watch
    send = delete_collection if verb == "deletecollection" else get
    status, answer = send(sandbox, f"{query}&{RV_MATCH_WITHOUT_RV}")
    assert_list_options_refused(status, answer, "resourceVersionMatch")
    status, answer = send(sandbox, query)
    assert status == 400 and answer["message"] == NOT_KNOWN.format('"spec.bogus"'), answer
    assert len(sandbox.objects("configmaps")) == 1


@pytest.mark.parametrize("verb", ["get", "delete"])
def test_the_real_kubectl_prints_the_selectors_400_before_the_list_options_422(
        sandbox: Sandbox, kubectl: Any, verb: str) -> None:
    # Plain `kubectl get -l` sends no resourceVersionMatch, so only a raw request meets both errors.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": "d0", "namespace": "default"}}])
    result = kubectl(verb, "--raw", f"{CONFIGMAPS}?{BAD_LABELS}&{RV_MATCH_WITHOUT_RV}", check=False)
    assert (result.returncode, result.stderr) == (
        1, "Error from server (BadRequest): found 'c', expected: ',' or 'end of string'\n")
    result = kubectl(verb, "--raw", f"{CONFIGMAPS}?fieldSelector=spec.bogus%3Dx&{RV_MATCH_WITHOUT_RV}", check=False)
    assert (result.returncode, result.stderr) == (
        1,
        'The ListOptions "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided\n",
    )
    assert len(sandbox.objects("configmaps")) == 1


@pytest.mark.parametrize(
    ("selector", "status", "answer"),
    [
        ("metadata.name%3Dd1,", 200, ["d1"]),  # an empty term is skipped
        ("metadata.name!%3Dd0,,", 200, ["d1"]),
        ("zz,aa", 400, "invalid selector: 'zz,aa'; can't understand 'aa'"),  # the first term in sorted order
        ("spec.zz%3Dx,spec.aa%3Dy", 400, NOT_KNOWN.format('"spec.aa"')),
        ("metadata.name%3Dd0%3Dx", 400, "invalid field selector: unescaped character in value: 61"),
        ("metadata.name%3Dd%5Cx", 400, "invalid field selector: invalid escape sequence: \\x"),
        ("%20metadata.name%3Dd0", 400, NOT_KNOWN.format('" metadata.name"')),  # the label is not trimmed
    ],
    ids=["trailing-comma", "empty-terms", "sorted-syntax", "sorted-labels", "bare-equals", "bad-escape", "no-trim"],
)
def test_a_field_selector_is_read_as_fields_parse_selector_reads_it(
        sandbox: Sandbox, selector: str, status: int, answer: Any) -> None:
    # fields.ParseSelector (apimachinery/pkg/fields/selector.go parseSelector): the terms sorted, empty
    # ones skipped, each split at the first operator and its value unescaped (UnescapeValue).
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": f"d{i}", "namespace": "default"}} for i in range(2)])
    got, body = get(sandbox, f"fieldSelector={selector}")
    assert got == status, body
    if status == 200:
        assert [item["metadata"]["name"] for item in json.loads(body)["items"]] == answer
    else:
        assert body["message"] == answer


@pytest.mark.parametrize(
    ("path", "selector", "message"),
    [
        # Kinds that register their own conversion func (AddFieldLabelConversionFunc), in its words.
        ("/api/v1/pods", "spec.bogus%3Dx", "field label not supported: spec.bogus"),  # core/v1/conversion.go
        ("/api/v1/nodes", "spec.bogus%3Dx", "field label not supported: spec.bogus"),
        ("/api/v1/namespaces", "spec.bogus%3Dx", "field label not supported: spec.bogus"),
        ("/api/v1/events", "spec.bogus%3Dx", "field label not supported: spec.bogus"),
        ("/api/v1/services", "spec.bogus%3Dx", "field label not supported: spec.bogus"),
        ("/apis/batch/v1/jobs", "spec.bogus%3Dx", 'field label "spec.bogus" not supported for Job'),
        ("/apis/resource.k8s.io/v1/resourceslices", "spec.bogus%3Dx",
         "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.bogus"),
        # A custom resource: apiextensions-apiserver's converter.go ConvertFieldLabel.
        ("/apis/scheduling.koordinator.sh/v1alpha1/devices", "spec.bogus%3Dx", "field label not supported: spec.bogus"),
        # The others: the scheme's DefaultMetaV1FieldSelectorConversion, the label %q-quoted.
        ("/api/v1/configmaps", "spec.bogus%3Dx", NOT_KNOWN.format('"spec.bogus"')),
        ("/apis/apps/v1/deployments", "status.replicas%3D1", NOT_KNOWN.format('"status.replicas"')),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "a%22b%09c%3Dx", NOT_KNOWN.format(r'"a\"b\tc"')),
        ("/apis/coordination.k8s.io/v1/leases", "spec.holderIdentity%3Dx", NOT_KNOWN.format('"spec.holderIdentity"')),
        ("/apis/resource.k8s.io/v1/deviceclasses", "spec.bogus%3Dx", NOT_KNOWN.format('"spec.bogus"')),
    ],
    ids=["pods", "nodes", "namespaces", "events", "services", "jobs", "resourceslices", "crd", "configmaps",
         "deployments", "clusterroles-quoted", "leases", "deviceclasses"],
)
def test_an_unsupported_field_label_is_refused_in_the_words_of_the_kinds_conversion(
        sandbox: Sandbox, path: str, selector: str, message: str) -> None:
    # The handlers answer the Transform error of Scheme.ConvertFieldLabel (apimachinery runtime/scheme.go)
    # as apierrors.NewBadRequest: the same 400 Status on every kind, worded by the kind's conversion.
    for watch in ("", "&watch=1"):
        status, answer = get(sandbox, f"fieldSelector={selector}{watch}", path)
        assert status == 400, answer
        assert answer == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": message, "reason": "BadRequest", "code": 400}


def test_the_real_kubectl_prints_the_kinds_words_for_an_unsupported_field_label(sandbox: Sandbox, kubectl: Any) -> None:
    # As kubernetes.io's field-selectors page shows it for ingresses: kubectl's "Unable to find" wrapper
    # around the server's message.
    result = kubectl("get", "configmaps", "--field-selector", "spec.bogus=x", check=False)
    assert (result.returncode, result.stderr) == (
        1, 'Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector "", '
           'field selector "spec.bogus=x": "spec.bogus" is not a known field selector: only "metadata.name", '
           '"metadata.namespace"\n')
    result = kubectl("get", "jobs", "--field-selector", "status.succeeded=1", check=False)
    assert result.returncode == 1
    assert result.stderr.endswith(': field label "status.succeeded" not supported for Job\n'), result.stderr


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/api/v1/nodes", "field label not supported: metadata.namespace"),
        ("/api/v1/namespaces", "field label not supported: metadata.namespace"),
        ("/apis/resource.k8s.io/v1/resourceslices",
         "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: metadata.namespace"),
        ("/apis/scheduling.koordinator.sh/v1alpha1/devices", "field label not supported: metadata.namespace"),
    ],
    ids=["nodes", "namespaces", "resourceslices", "crd"],
)
def test_a_cluster_scoped_kinds_own_conversion_refuses_metadata_namespace(
        sandbox: Sandbox, path: str, message: str) -> None:
    # Their own funcs (core/v1 and resource/v1 conversion.go, apiextensions' ConvertFieldLabel for a
    # cluster-scoped custom resource) list no metadata.namespace, even with an empty value.
    for selector in ("metadata.namespace%3D", "metadata.namespace%3Ddefault"):
        status, answer = get(sandbox, f"fieldSelector={selector}", path)
        assert status == 400, answer
        assert (answer["reason"], answer["message"]) == ("BadRequest", message), answer


@pytest.mark.parametrize(("selector", "names"), [
    ("metadata.namespace%3D", ["c"]),
    ("metadata.namespace%3Ddefault", []),
    ("metadata.namespace!%3Ddefault", ["c"]),
])
def test_a_cluster_scoped_kind_without_its_own_conversion_selects_an_empty_namespace(
        sandbox: Sandbox, selector: str, names: list[str]) -> None:
    # DefaultMetaV1FieldSelectorConversion takes metadata.namespace on any kind; DefaultClusterScopedAttr
    # has no such field, which reads as "".
    sandbox.load([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "c"}}])
    url = f"{sandbox.url}/apis/rbac.authorization.k8s.io/v1/clusterroles?fieldSelector={selector}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert [item["metadata"]["name"] for item in json.loads(resp.read())["items"]] == names


@pytest.mark.parametrize(("path", "selector", "names"), [
    # pkg/registry/batch/job/strategy.go JobToSelectableFields: strconv.Itoa(int(job.Status.Succeeded)).
    ("/apis/batch/v1/namespaces/default/jobs", "status.successful=1", ["j1"]),
    ("/apis/batch/v1/namespaces/default/jobs", "status.successful=0", ["j0"]),
    # pkg/registry/core/service/strategy.go SelectableFields: spec.clusterIP, and spec.type, which
    # SetDefaults_Service defaults to ClusterIP.
    ("/api/v1/namespaces/default/services", "spec.type=ClusterIP", ["s0"]),
    ("/api/v1/namespaces/default/services", "spec.type=NodePort", ["s1"]),
    ("/api/v1/namespaces/default/services", "spec.clusterIP=10.0.0.9", ["s1"]),
])
def test_the_field_labels_jobs_and_services_own_conversions_take_select(
        sandbox: Sandbox, path: str, selector: str, names: list[str]) -> None:
    sandbox.load([
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j0", "namespace": "default"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j1", "namespace": "default"},
         "status": {"succeeded": 1}},
        {"kind": "Service", "metadata": {"name": "s0", "namespace": "default"}, "spec": {}},
        {"kind": "Service", "metadata": {"name": "s1", "namespace": "default"},
         "spec": {"type": "NodePort", "clusterIP": "10.0.0.9"}},
    ])
    with urllib.request.urlopen(f"{sandbox.url}{path}?fieldSelector={selector}", timeout=30) as resp:
        assert [item["metadata"]["name"] for item in json.loads(resp.read())["items"]] == names


def _pods_on_two_nodes(sb: Sandbox) -> None:
    sb.load([
        {"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
         "spec": {"nodeName": f"n{i}", "containers": [{"name": "c", "image": "i"}]},
         "status": {"phase": "Running", "podIP": f"10.0.{i}.2", "podIPs": [{"ip": f"10.0.{i}.2"}]}}
        for i in (1, 2)
    ])


@pytest.mark.parametrize(("selector", "names"), [
    # pkg/apis/core/v1/conversion.go: Pod's func converts "spec.host" (old v1 clients) to spec.nodeName.
    ("spec.host%3Dn1", ["p1"]),
    ("spec.host!%3Dn1", ["p2"]),
    ("spec.host%3Dn1,spec.nodeName%3Dn2", []),
    # It takes status.podIPs, which pkg/registry/core/pod/strategy.go ToSelectableFields never sets: a field
    # the set lacks reads as "" (fields.Set.Get), so no IP selects a pod and the empty value selects all.
    ("status.podIPs%3D10.0.1.2", []),
    ("status.podIPs%3D", ["p1", "p2"]),
    ("status.podIPs!%3D10.0.1.2", ["p1", "p2"]),
    ("status.podIP%3D10.0.1.2", ["p1"]),
])
def test_the_pod_field_labels_kept_for_old_clients_select_as_upstreams_do(
        sandbox: Sandbox, selector: str, names: list[str]) -> None:
    _pods_on_two_nodes(sandbox)
    for path in ("/api/v1/namespaces/default/pods", "/api/v1/pods"):
        status, body = get(sandbox, f"fieldSelector={selector}", path)
        assert status == 200, body
        assert [item["metadata"]["name"] for item in json.loads(body)["items"]] == names


def test_a_watch_and_the_real_kubectl_select_pods_by_spec_host(sandbox: Sandbox, kubectl: Any) -> None:
    _pods_on_two_nodes(sandbox)
    assert kubectl("get", "pods", "--field-selector", "spec.host=n2", "-o", "name").stdout == "pod/p2\n"
    # A watch selects on the converted label too: only p1's ADDED comes from the initial state.
    query = "fieldSelector=spec.host%3Dn1&watch=1&resourceVersion=0&timeoutSeconds=1"
    status, body = get(sandbox, query, "/api/v1/namespaces/default/pods")
    assert status == 200, body
    events = [json.loads(line) for line in body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "p1")]


def test_the_real_kubectl_prints_a_nodes_refusal_of_metadata_namespace(sandbox: Sandbox, kubectl: Any) -> None:
    result = kubectl("get", "nodes", "--field-selector", "metadata.namespace=default", check=False)
    assert result.returncode == 1
    assert result.stderr.endswith(": field label not supported: metadata.namespace\n"), result.stderr


@pytest.mark.parametrize(("selector", "message"), [
    ("a,", "found '', expected: identifier after ','"),
    ("=x", "found '=', expected: !, identifier, or 'end of string'"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a in (x,", "unable to parse requirement: found '', expected: ',', or identifier"),
    ("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value "
            "must be an integer"),
    ("/a", 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'),
])
def test_a_label_selector_error_is_in_labels_parses_words(sandbox: Sandbox, selector: str, message: str) -> None:
    # The ListOptions conversion's labels.Parse (apimachinery pkg/labels/selector.go), answered as a 400.
    status, answer = get(sandbox, "labelSelector=" + urllib.parse.quote(selector, safe=""))
    assert (status, answer["reason"], answer["message"]) == (400, "BadRequest", message), answer


@pytest.mark.parametrize(("query", "start"), [
    # labels.Parse reads the query's bytes: %q quotes one that is no UTF-8 as \xff and it counts as one
    # byte (30 of them are not too long); a raw echo of it is what Go's JSON writes of it, U+FFFD.
    ("%FF", 'unable to parse requirement: <nil>: Invalid value: "\\xff": name part must consist of '),
    ("a=" + "%FF" * 30, 'unable to parse requirement: values[0][a]: Invalid value: "' + "\\xff" * 30 + '": a valid '),
    ("a=b+%FF", "found '\ufffd', expected: ',' or 'end of string'"),
])
def test_a_label_selectors_bytes_that_are_not_utf8_are_read_as_labels_parse_reads_them(
    sandbox: Sandbox, query: str, start: str
) -> None:
    status, answer = get(sandbox, "labelSelector=" + query)
    assert status == 400 and answer["message"].startswith(start), answer
    assert "no more than 63 bytes" not in answer["message"]


def test_a_label_selector_of_an_empty_set_selects_the_empty_value(sandbox: Sandbox, kubectl: Any) -> None:
    # parseValues: "()" is the set holding "" alone, not an error.
    sandbox.load([{"kind": "ConfigMap", "metadata": {"name": n, "namespace": "default", "labels": labels}}
                  for n, labels in (("d0", {"a": ""}), ("d1", {"a": "x"}), ("d2", {}))])
    assert kubectl("get", "configmaps", "-l", "a in ()", "-o", "name").stdout == "configmap/d0\n"
    result = kubectl("get", "configmaps", "-l", "a in b", check=False)
    assert (result.returncode, result.stderr) == (
        1, 'Error from server (BadRequest): Unable to find "/v1, Resource=configmaps" that match label selector '
           '"a in b", field selector "": unable to parse requirement: found \'b\' expected: \'(\'\n')
