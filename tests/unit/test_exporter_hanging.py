"""The hanging classifier and its two-collection confirmation, on hand-built access-layer results."""
from __future__ import annotations

from cluster.access.admin import transaction_state_partition
from exporter.hanging_verdicts import (COORDINATOR_LEADERLESS, COORDINATOR_MOVED, COORDINATOR_NOT_ONGOING,
                              COORDINATOR_UNANSWERED, ID_ACL, NO_TRANSACTIONAL_ID, PARTITION_NOT_IN_TRANSACTION,
                              PAST_MAX_TIMEOUT, PRODUCER_ID_MISMATCH, STATE_TOPIC_UNSEEN, UNKNOWN_TO_COORDINATOR,
                              HangingTracker, classify, evidence_of, late, open_transactions)
from exporter.kafka_access import (CoordinatorMap, ProducerEntry, TransactionDescription, TransactionListing,
                                   TransactionsResult)

TP = ("orders", 2)
NOW_MS = 1_800_000_000_000


def producer(pid: int, start: int = 100, last_ms: int = NOW_MS - 1000, epoch: int = 3) -> ProducerEntry:
    return ProducerEntry(producer_id=pid, producer_epoch=epoch, last_sequence=4, last_timestamp_ms=last_ms,
                         coordinator_epoch=7, txn_start_offset=start)


def listing(tid: str, pid: int, state: str = "Ongoing", coordinator: int = 1) -> TransactionListing:
    return TransactionListing(tid, pid, state, coordinator)


def description(tid: str, pid: int, state: str = "Ongoing", partitions=(TP,)) -> TransactionDescription:
    return TransactionDescription(tid, 1, state, pid, 3, 60000, NOW_MS - 5000, frozenset(partitions))


# Two __transaction_state partitions: 0 led by broker 1, 1 led by broker 2 (leader epoch 5).
STATE_LEADERS = {0: (1, 5), 1: (2, 5)}


def coordinators(listings=(), descriptions=None, unknown=(), failed=(), before=None, after=None,
                 may_describe=True) -> TransactionsResult:
    """What the coordinators said; complete evidence unless an argument takes part of it away."""
    return TransactionsResult(listings=list(listings), descriptions=descriptions or {}, unknown_ids=set(unknown),
                              coordinators_failed=set(failed), answered={1, 2} - set(failed),
                              before=before or CoordinatorMap(dict(STATE_LEADERS)),
                              after=after or CoordinatorMap(dict(STATE_LEADERS)), may_describe_any_id=may_describe)


def verdict_of(producers, listings=(), descriptions=None, unknown=(), failed=(), **evidence):
    txns = open_transactions({TP: list(producers)})
    return classify(txns, coordinators(listings, descriptions, unknown, failed, **evidence))


def test_only_producers_with_an_open_transaction_are_examined():
    txns = open_transactions({TP: [producer(1, start=-1), producer(2, start=40)], ("other", 0): []})
    assert [(t.topic, t.partition, t.producer_id, t.start_offset) for t in txns] == [("orders", 2, 2, 40)]


def test_transaction_the_coordinator_tracks_on_this_partition_is_not_suspect():
    [v] = verdict_of([producer(5)], [listing("app-1", 5)], {"app-1": description("app-1", 5)})
    assert v.reason is None and v.resolved and not v.suspect and v.transactional_id == "app-1"


def test_prepare_commit_in_progress_is_not_suspect():
    [v] = verdict_of([producer(5)], [listing("app-1", 5, "PrepareCommit")],
                     {"app-1": description("app-1", 5, "PrepareCommit")})
    assert not v.suspect


def test_producer_id_no_coordinator_knows():
    [v] = verdict_of([producer(5)], [listing("someone-else", 6)])
    assert v.reason == NO_TRANSACTIONAL_ID and v.suspect


def test_no_transactional_id_is_unresolved_when_a_coordinator_did_not_answer():
    [v] = verdict_of([producer(5)], [listing("someone-else", 6)], failed={2})
    assert v.reason == NO_TRANSACTIONAL_ID and not v.resolved and not v.suspect


def test_transactional_id_unknown_to_its_coordinator():
    [v] = verdict_of([producer(5)], [listing("app-1", 5)], unknown={"app-1"})
    assert v.reason == UNKNOWN_TO_COORDINATOR and v.suspect


def test_coordinator_transaction_complete_while_partition_still_open():
    [v] = verdict_of([producer(5)], [listing("app-1", 5, "CompleteCommit")])
    assert v.reason == COORDINATOR_NOT_ONGOING


def test_coordinator_empty_state_described():
    [v] = verdict_of([producer(5)], [listing("app-1", 5, "Ongoing")], {"app-1": description("app-1", 5, "Empty")})
    assert v.reason == COORDINATOR_NOT_ONGOING


def test_ongoing_transaction_without_this_partition():
    [v] = verdict_of([producer(5)], [listing("app-1", 5)],
                     {"app-1": description("app-1", 5, partitions=[("orders", 0)])})
    assert v.reason == PARTITION_NOT_IN_TRANSACTION


def test_coordinator_holds_another_producer_id():
    [v] = verdict_of([producer(5)], [listing("app-1", 5)], {"app-1": description("app-1", 9)})
    assert v.reason == PRODUCER_ID_MISMATCH


def test_in_progress_listing_whose_description_failed_is_unresolved():
    [v] = verdict_of([producer(5)], [listing("app-1", 5, "Ongoing")], descriptions={})
    assert v.reason is None and not v.resolved and not v.suspect


def test_suspect_becomes_hanging_only_on_the_second_collection():
    tracker = HangingTracker()
    first = verdict_of([producer(5)], [listing("other", 6)])
    assert tracker.update(first) == []
    second = verdict_of([producer(5)], [listing("other", 6)])
    assert [v.txn.producer_id for v in tracker.update(second)] == [5]


def test_a_different_open_transaction_of_the_same_producer_is_not_confirmed():
    tracker = HangingTracker()
    tracker.update(verdict_of([producer(5, start=100)], [listing("x", 6)]))
    assert tracker.update(verdict_of([producer(5, start=180)], [listing("x", 6)])) == []


def test_suspect_that_resolves_is_forgotten():
    tracker = HangingTracker()
    tracker.update(verdict_of([producer(5)], [listing("x", 6)]))
    tracker.update(verdict_of([producer(5)], [listing("app", 5)], {"app": description("app", 5)}))
    assert tracker.update(verdict_of([producer(5)], [listing("x", 6)])) == []


def test_late_uses_the_leaders_max_timeout_and_the_last_write():
    txns = open_transactions({TP: [producer(1, last_ms=NOW_MS - 20_000), producer(2, last_ms=NOW_MS - 5_000)],
                              ("unknown-leader", 0): [producer(3, last_ms=0)]})
    assert [t.producer_id for t in late(txns, {TP: 15_000}, NOW_MS)] == [1]


def test_nothing_open_nothing_late():
    assert late([], {TP: 1}, NOW_MS) == [] and classify([], TransactionsResult()) == []


def test_a_recheck_of_some_partitions_confirms_only_there():
    tracker = HangingTracker()
    other = ("other", 0)
    first = verdict_of([producer(5)], [listing("x", 6)]) + \
        classify(open_transactions({other: [producer(8)]}), coordinators([listing("x", 6)]))
    assert tracker.update(first) == [] and len(tracker.unconfirmed) == 2
    again = verdict_of([producer(5)], [listing("x", 6)])
    assert [v.txn.producer_id for v in tracker.update(again, {TP})] == [5]
    assert [v.txn.producer_id for v in tracker.unconfirmed] == [8]          # untouched outside the re-check
    assert [v.txn.producer_id for v in tracker.update(verdict_of([], []), {TP})] == []   # gone there: forgotten


# ---- evidence: silence is never evidence ----------------------------------------------------------------
def test_unlisted_producer_is_unresolved_while_a_transaction_state_partition_has_no_leader():
    leaderless = CoordinatorMap({0: (1, 5), 1: (-1, 6)})
    [v] = verdict_of([producer(5)], [listing("other", 6)], before=leaderless, after=leaderless)
    assert not v.resolved and not v.suspect and v.unresolved_reason == COORDINATOR_LEADERLESS


def test_unlisted_producer_is_unresolved_when_a_coordinator_moved_during_the_listing():
    [v] = verdict_of([producer(5)], [listing("other", 6)], after=CoordinatorMap({0: (1, 5), 1: (3, 6)}))
    assert not v.resolved and v.unresolved_reason == COORDINATOR_MOVED


def test_unlisted_producer_is_unresolved_when_the_principal_may_not_describe_every_id():
    [v] = verdict_of([producer(5)], [listing("other", 6)], may_describe=False)
    assert not v.resolved and v.unresolved_reason == ID_ACL


def test_a_visible_id_is_still_judged_when_the_principal_may_not_describe_every_id():
    [v] = verdict_of([producer(5)], [listing("app-1", 5)], {"app-1": description("app-1", 5, "Empty")},
                     may_describe=False)
    assert v.suspect and v.reason == COORDINATOR_NOT_ONGOING


def test_transaction_state_leaders_unseen_leave_everything_unresolved():
    unseen = CoordinatorMap(error="TOPIC_AUTHORIZATION_FAILED")
    [v] = verdict_of([producer(5)], [listing("app-1", 5)], {"app-1": description("app-1", 5, "Empty")}, before=unseen)
    assert not v.resolved and v.unresolved_reason == STATE_TOPIC_UNSEEN


def test_a_listed_id_is_unresolved_only_when_its_own_coordinator_partition_has_a_gap():
    mine = next(f"app-{i}" for i in range(100) if transaction_state_partition(f"app-{i}", 2) == 1)
    theirs = next(f"app-{i}" for i in range(100) if transaction_state_partition(f"app-{i}", 2) == 0)
    empty = {tid: description(tid, pid, "Empty") for tid, pid in ((mine, 5), (theirs, 6))}
    txns = open_transactions({TP: [producer(5), producer(6, start=120)]})
    verdicts = classify(txns, coordinators([listing(mine, 5), listing(theirs, 6)], empty, failed={2}))
    by_pid = {v.txn.producer_id: v for v in verdicts}
    assert not by_pid[5].resolved and by_pid[5].unresolved_reason == COORDINATOR_UNANSWERED
    assert by_pid[6].suspect and by_pid[6].reason == COORDINATOR_NOT_ONGOING


def test_an_unresolved_transaction_past_the_max_timeout_is_suspect():
    txns = open_transactions({TP: [producer(5, last_ms=NOW_MS - 20_000), producer(6, start=120)]})
    result = coordinators([listing("other", 9)], may_describe=False)
    verdicts = {v.txn.producer_id: v for v in classify(txns, result, {TP: 15_000}, NOW_MS)}
    assert verdicts[5].suspect and verdicts[5].reason == PAST_MAX_TIMEOUT
    assert not verdicts[6].resolved                   # wrote 1 s ago: a live coordinator may still own it


def test_evidence_counts_reasons_per_transaction_state_partition():
    evidence = evidence_of(coordinators(failed={2}, may_describe=False))
    assert not evidence.complete and evidence.reasons() == {COORDINATOR_UNANSWERED: 1, ID_ACL: 1}
    assert evidence_of(coordinators()).complete
    assert evidence_of(TransactionsResult(before=CoordinatorMap(exists=False), after=CoordinatorMap(exists=False),
                                          may_describe_any_id=True)).complete    # no transactional producer ever


# ---- the tracker keeps what a partial collection cannot contradict -------------------------------------------
def test_hanging_survives_a_collection_that_did_not_scan_its_partition():
    tracker = HangingTracker()
    tracker.update(verdict_of([producer(5)], [listing("x", 6)]))
    assert len(tracker.update(verdict_of([producer(5)], [listing("x", 6)]))) == 1
    assert len(tracker.update([], scanned={("other", 0)})) == 1          # TP's DescribeProducers failed
    assert tracker.update(verdict_of([], []), scanned={TP}) == []        # scanned, and gone: forgotten


def test_hanging_survives_a_collection_whose_coordinator_evidence_was_incomplete():
    tracker = HangingTracker()
    tracker.update(verdict_of([producer(5)], [listing("x", 6)]))
    tracker.update(verdict_of([producer(5)], [listing("x", 6)]))
    unresolved = verdict_of([producer(5)], [listing("x", 6)], failed={1, 2})
    assert not unresolved[0].resolved and len(tracker.update(unresolved)) == 1


def test_an_unresolved_look_neither_confirms_nor_forgets_a_suspect():
    tracker = HangingTracker()
    tracker.update(verdict_of([producer(5)], [listing("x", 6)]))
    assert tracker.update(verdict_of([producer(5)], [listing("x", 6)], may_describe=False)) == []
    assert len(tracker.unconfirmed) == 1
    assert len(tracker.update(verdict_of([producer(5)], [listing("x", 6)]))) == 1
