"""History signatures (chaos/record/signatures.py): which of two catalogued bugs of one shape (an input with committed
outputs of two processors) a run's history shows, on made-up histories of two processors and one partition."""
from __future__ import annotations

import json

import pytest

from chaos.record.signatures import explained, shown_in, stale_member_commit, stale_seek, ProcessingHistory

P = ("in", 4)
BOTH = ("stale-member-commit", "stale-seek")


def seek(t: int, process: str, reason: str, offset: int | None = None) -> dict:
    return {"time": t, "process": process, "type": "ok", "f": "seek",
            "value": {"reason": reason, "positions": [{"topic": P[0], "partition": P[1], "offset": offset}]}}


def process(t: int, who: str, n: int, offsets: range, outcome: str = "ok") -> dict:
    attempt = f"r.{who}.{n}"
    return {"time": t, "process": who, "type": outcome, "f": "process",
            "value": {"attempt": attempt, "inputs": [{"topic": P[0], "partition": P[1], "offset": o, "id": f"in.{o}"}
                                                      for o in offsets],
                      "commit_offsets": [{"topic": P[0], "partition": P[1], "offset": offsets[-1] + 1}]}}


def twice(offset: int, first: str, second: str) -> dict:
    return {"input": f"in.{offset}", "outputs": [f"{first}.0", f"{second}.0"], "problem": "duplicate-output"}


def stale_seek_history() -> list[dict]:
    """r9f3a85's story: eos-0 loses its transaction with the coordinator, eos-1 is given the partition and
    commits on, eos-0's rewind reads offset 59 and seeks while out of the group, the partition comes back to it
    and it reads from 59 again."""
    return [seek(1, "eos-0", "assigned"), process(12, "eos-0", 2, range(50, 59), "fail"),
            seek(15, "eos-1", "assigned"), seek(27, "eos-0", "rewind", 59), process(28, "eos-1", 36, range(59, 81)),
            seek(33, "eos-1", "revoked"), seek(34, "eos-0", "revoked"), seek(34, "eos-0", "assigned"),
            process(35, "eos-0", 11, range(59, 126))]


def test_a_seek_made_before_the_partition_came_back_explains_the_inputs_read_again():
    history = ProcessingHistory(stale_seek_history())
    example = twice(60, "r.eos-0.11", "r.eos-1.36")
    assert stale_seek(history, example) is None
    assert "neither processor committed it" in stale_member_commit(history, example)
    assert explained({"problems": {"duplicate-output": 1}, "examples": [example]}, history_ops := stale_seek_history(),
                     BOTH) == ({"stale-member-commit": 0, "stale-seek": 1}, [])
    late = [op if op["value"].get("reason") != "rewind" else {**op, "time": 40} for op in history_ops]
    assert "no rewind" in stale_seek(ProcessingHistory(sorted(late, key=lambda o: o["time"])), example)
    beyond = [op if op["value"].get("reason") != "rewind" else seek(27, "eos-0", "rewind", 61) for op in history_ops]
    assert "does not reach back" in stale_seek(ProcessingHistory(beyond), example)
    # the CI run r2a31b8's story: the rewind found no committed offset (null: the log start), which reaches back
    start = [op if op["value"].get("reason") != "rewind" else seek(27, "eos-0", "rewind", None) for op in history_ops]
    assert stale_seek(ProcessingHistory(start), example) is None


def test_a_stale_member_s_commit_explains_an_input_committed_after_the_other_was_given_its_partition():
    ops = [seek(1, "eos-0", "assigned"), seek(15, "eos-1", "assigned"), process(17, "eos-1", 3, range(0, 10)),
           process(20, "eos-0", 2, range(0, 10))]       # eos-0 never told of its revocation commits at 20
    history, example = ProcessingHistory(ops), twice(5, "r.eos-0.2", "r.eos-1.3")
    assert stale_member_commit(history, example) is None
    assert "was not given" in stale_seek(history, example)


def test_an_example_no_signature_explains_is_said_and_other_problems_are_none_of_theirs():
    ops = stale_seek_history()
    one = {"input": "in.60", "outputs": ["r.eos-0.11.0", "r.eos-0.11.1"], "problem": "duplicate-output"}
    found = explained({"problems": {"duplicate-output": 1}, "examples": [one]}, ops, BOTH)
    assert found.counts == {"stale-member-commit": 0, "stale-seek": 0}
    assert "not two committed outputs of two processors" in found.unexplained[0]
    assert "not duplicate outputs alone" in explained({"problems": {"unprocessed": 1}, "examples": []}, ops, BOTH)


def test_a_run_without_a_readable_verify_report_or_history_cannot_say(tmp_path):
    assert "not verified" in shown_in(tmp_path, BOTH)
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "report.json").write_text(json.dumps(
        {"checks": {"exactly_once_processing": {"count": 1, "problems": {"duplicate-output": 1},
                                                "examples": [twice(60, "r.eos-0.11", "r.eos-1.36")]}}}))
    assert "the history cannot say" in shown_in(tmp_path, BOTH)


def test_a_bug_s_history_signature_must_be_known_and_tell_duplicate_outputs_apart():
    from pydantic import ValidationError
    from chaos.catalog.bugs import BugExpect
    assert BugExpect(checks=["exactly_once_processing:duplicate-output"], history="stale-seek").history == "stale-seek"
    with pytest.raises(ValidationError, match="unknown history signature 'guess'"):
        BugExpect(checks=["exactly_once_processing:duplicate-output"], history="guess")
    with pytest.raises(ValidationError, match="tells duplicate outputs apart"):
        BugExpect(checks=["duplicate"], history="stale-seek")


def test_a_stale_member_that_reads_the_input_again_itself_is_the_stale_member_s_commit_too():
    """The CI run r208b36 (KafkaJS through coordinator-kill): eos-1, never told of its revocation, committed in-a 1
    past offset 95 at 24.2 s while eos-0 had been given the partition at 23.9 s; eos-0 committed it at 92 at 25.1 s
    (from the offset it was given, before the stale commit), moving the group's offset back below 95; given the
    partition again at 32.2 s, eos-1 read 95 from there: both outputs eos-1's, the first a stale member's commit."""
    ops = [seek(3, "eos-1", "assigned"), seek(24, "eos-0", "assigned"), process(24, "eos-1", 26, range(66, 96)),
           process(25, "eos-0", 7, range(66, 92)), seek(26, "eos-1", "revoked"), seek(32, "eos-0", "revoked"),
           seek(32, "eos-1", "assigned"), process(33, "eos-1", 32, range(92, 135))]
    history, example = ProcessingHistory(ops), twice(95, "r.eos-1.26", "r.eos-1.32")
    assert stale_member_commit(history, example) is None
    assert "two processors" in stale_seek(history, example)         # the other signature still wants two
    fresh = [op for op in ops if op["value"].get("reason") != "assigned" or op["process"] != "eos-0"]
    assert "neither processor committed it" in stale_member_commit(ProcessingHistory(fresh), example)  # not stale
