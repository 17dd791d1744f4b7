"""One cut for long text in every face (docs/cli.md, "Long text"): a sentence from an object or a server is
written in about 4 KB by every text view, error line and log line, and whole by ``-o json``."""

from __future__ import annotations

import json

from kubectl_gpushare import protocol
from kubectl_gpushare.inspect import doctor, explain
from kubectl_gpushare.inspect.findings import ERROR, Finding
from kubectl_gpushare.kube import errors

SENTENCE = "0/3 nodes are available: \x1b[2J" + "z" * 100_000
"""A scheduler's message, a webhook's refusal or a finding that quotes a hand-made file: escape sequence, 100 KB."""


def test_every_text_face_cuts_a_long_sentence_alike_and_json_keeps_it_whole() -> None:
    shown = protocol.one_line(SENTENCE)  # an error: or warning: line of the CLI
    assert shown == "0/3 nodes are available:  [2J" + "z" * (len(shown) - 30) + "…"
    assert len(shown) == protocol.MAX_SHOWN_NAME * protocol.SENTENCE_NAMES  # 4,048 characters

    report = doctor.DoctorReport(doctor.Summary(1, 0), [Finding(ERROR, "invalid-value", "pod/ml/p", SENTENCE)])
    (row,) = [line for line in doctor.to_text(report).splitlines() if line.startswith(ERROR)]
    assert row.endswith("  " + shown)

    answer = explain.Explanation(pod="p", namespace="ml", phase="Pending", request=8, unit="GiB", state="pending",
                                 summary="Pod ml/p asks for 8 GiB.", nodes=[explain.NodeVerdict("n1", SENTENCE)],
                                 events=[SENTENCE])
    lines = explain.to_text(answer).splitlines()
    assert f"  node/n1: {shown}" in lines and f"  {shown}" in lines

    assert errors.api_error(500, "InternalError", SENTENCE).message == shown  # a daemon's log line quoting it

    assert json.loads(doctor.to_json(report))["findings"][0]["message"] == SENTENCE
    exact = json.loads(explain.to_json(answer))
    assert exact["events"] == [SENTENCE] and exact["nodes"][0]["reason"] == SENTENCE
