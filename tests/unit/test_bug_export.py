"""report/bug_export.py's pure parts: which of the client's log lines a bundle's README quotes. The bundles
themselves, from recorded suites: tests/corpus/test_corpus.py."""
from __future__ import annotations

import json

from report.bug_export import log_lines, lost_partition

PATTERNS = ["MsgPossiblyPersisted", "advancing epoch base msgid", "Produce MessageSet"]


def test_a_lost_write_s_log_lines_are_its_producer_s_on_its_partition_from_the_first_failure_on(tmp_path):
    """librdkafka-abort-sequence-reuse's evidence, as a run keeps it: the lost record's producer's lines about its
    partition, from the request that failed on (not the produces before it, not another partition's or producer's)."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "verify").mkdir()
    (run / "verify" / "report.json").write_text(json.dumps({"checks": {"lost_write": {"count": 1, "examples": [
        {"attempt": "r1.txp-0.168", "id": "r1.txp-0.168.0", "topic": "r1-a", "partition": 1}]}}}))
    (run / "logs" / "txp-0.log").write_text("\n".join([
        "|PRODUCE| r1-a [1]: Produce MessageSet with 1 message(s) (MsgId 9, BaseSeq 8, PID{Id:1,Epoch:0})",
        "|MSGSET| r1-a [2]: MessageSet (MsgId 3, BaseSeq 2) encountered error (actions Retry,MsgPossiblyPersisted)",
        "|MSGSET| r1-a [1]: MessageSet (MsgId 10, BaseSeq 9) encountered error (actions Retry,MsgPossiblyPersisted)",
        "|TXNABORT| Purging and flushing 1 outstanding message(s) prior to abort",
        "|ADVBASE| r1-a [1] advancing epoch base msgid to 2 due to 1 message(s) in aborted transaction",
        "|PRODUCE| r1-a [1]: Produce MessageSet with 1 message(s) (MsgId 12, BaseSeq 9, PID{Id:1,Epoch:0})", ""]))
    (run / "logs" / "txp-1.log").write_text("|MSGSET| r1-a [1]: MessageSet encountered error MsgPossiblyPersisted\n")
    assert lost_partition(run) == ("txp-0", ["r1-a [1]", "r1-a-1"])
    lines = log_lines(run, PATTERNS, within=lost_partition(run))
    assert [line.split("|")[1] for line in lines] == ["MSGSET", "ADVBASE", "PRODUCE"]
    assert "MsgId 10, BaseSeq 9" in lines[0] and "MsgId 12, BaseSeq 9" in lines[2]
    assert all(line.startswith("txp-0.log: ") for line in lines)
    # without a lost write: every log's matching lines, up to the limit
    assert len(log_lines(run, PATTERNS, limit=3)) == 3
