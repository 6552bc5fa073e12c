"""Groups whose exactly-once commits keep failing (exporter/group_commits.py): the verdict from complete evidence
only, across collections."""
from __future__ import annotations

from exporter.group_commits import GroupCommitTracker, GroupSeen, has_work

TP, TP2 = ("in", 0), ("in", 1)
STALL = 60.0


def seen(committed=None, readable=None, complete=True, pending=frozenset(), state="Stable") -> GroupSeen:
    committed = {TP: 10} if committed is None else committed
    readable = {tp: 5 for tp in committed} if readable is None else readable
    return GroupSeen(committed, readable, complete, pending, state)


def run(tracker: GroupCommitTracker, steps: list[tuple[float, GroupSeen]], group: str = "g"):
    return [tracker.update({group: s}, now, STALL)[group] for now, s in steps]


def test_offsets_standing_still_while_transactions_keep_carrying_them_is_failing():
    steps = [(0, seen()), (20, seen(pending=frozenset({TP}))), (40, seen()), (59, seen(pending=frozenset({TP}))),
             (61, seen())]
    out = run(GroupCommitTracker(), steps)
    assert [c.failing for c in out] == [False, False, False, False, True]
    assert out[-1].since == 0 and out[1].pending_partitions == 1 and out[-1].pending_partitions == 0
    assert out[-1].active is True


def test_a_commit_that_lands_ends_the_stall_and_its_evidence():
    tracker = GroupCommitTracker()
    steps = [(0, seen()), (10, seen(pending=frozenset({TP}))), (20, seen(pending=frozenset({TP}))),
             (70, seen()), (80, seen(committed={TP: 11})), (150, seen(committed={TP: 11}))]
    out = run(tracker, steps)
    assert [c.failing for c in out] == [False, False, False, True, False, False]
    assert out[-1].since == 80                # the pending seen before the move counts no more


def test_standing_still_without_a_pending_commit_is_not_failing_commits_but_a_stopped_consumer():
    out = run(GroupCommitTracker(), [(0, seen()), (30, seen()), (61, seen(pending=frozenset({TP})))])
    assert out[-1].failing is False           # one look at a pending commit is every healthy transaction's


def test_nothing_readable_past_the_offsets_is_not_a_stall():
    out = run(GroupCommitTracker(), [(0, seen(pending=frozenset({TP}))), (30, seen(pending=frozenset({TP}))),
                                     (61, seen(readable={TP: 0}, pending=frozenset({TP})))])
    assert out[-1].failing is False and out[-1].since == 61


def test_a_group_without_members_is_not_failing_commits():
    steps = [(0, seen(pending=frozenset({TP}))), (30, seen(pending=frozenset({TP}))), (61, seen(state="Empty"))]
    out = run(GroupCommitTracker(), steps)
    assert out[-1].failing is False and out[-1].active is False


def test_missing_evidence_leaves_the_verdict_unknown_never_0():
    pending = frozenset({TP})
    # a pending read missing in the stall: too few seen could be a blind spot
    out = run(GroupCommitTracker(), [(0, seen()), (30, seen(pending=None)), (61, seen(pending=pending))])
    assert out[1].pending_partitions is None and out[-1].failing is None
    # the state not told
    out = run(GroupCommitTracker(), [(0, seen(pending=pending)), (30, seen(pending=pending)), (61, seen(state=None))])
    assert out[-1].failing is None and out[-1].active is None
    # the readable lag not known at one collection of the stall: nothing readable might have ended it, so the
    # window of evidence starts again there, and the verdict comes a stall of complete evidence later
    out = run(GroupCommitTracker(), [(0, seen(pending=pending)), (30, seen(readable={}, complete=False)),
                                     (61, seen(pending=pending)), (89, seen(pending=pending)),
                                     (91, seen(pending=pending))])
    assert [c.failing for c in out] == [False, False, None, None, True] and out[-1].since == 0
    # but a stall still short says 0 whatever is missing
    assert run(GroupCommitTracker(), [(0, seen(pending=None, state=None))])[0].failing is False


def test_has_work_needs_a_record_or_every_partition_known():
    assert has_work(seen(readable={TP: 0, TP2: 3}, complete=False)) is True
    assert has_work(seen(readable={TP: 0}, complete=False)) is None
    assert has_work(seen(readable={TP: 0})) is False
    assert has_work(GroupSeen({TP: 1}, None, False, frozenset(), "Stable")) is None
    assert has_work(seen(committed={}, readable={})) is None       # never committed: nothing to read past


def test_groups_no_longer_listed_are_forgotten():
    tracker = GroupCommitTracker()
    pending = frozenset({TP})
    tracker.update({"g": seen(pending=pending), "h": seen()}, 0, STALL)
    tracker.update({"g": seen(pending=pending)}, 30, STALL)
    assert set(tracker.update({"g": seen(), "h": seen()}, 61, STALL)) == {"g", "h"}
    assert tracker.update({"h": seen()}, 70, STALL)["h"].since == 61       # h seen again from 61, not 0
