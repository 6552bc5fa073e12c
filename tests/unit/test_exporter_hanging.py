"""The hanging classifier and its two-collection confirmation, on hand-built access-layer results."""
from __future__ import annotations

from exporter.hanging import (COORDINATOR_NOT_ONGOING, NO_TRANSACTIONAL_ID, PARTITION_NOT_IN_TRANSACTION,
                              PRODUCER_ID_MISMATCH, UNKNOWN_TO_COORDINATOR, HangingTracker, classify, late,
                              open_transactions)
from exporter.kafka_access import ProducerEntry, TransactionDescription, TransactionListing

TP = ("orders", 2)
NOW_MS = 1_800_000_000_000


def producer(pid: int, start: int = 100, last_ms: int = NOW_MS - 1000, epoch: int = 3) -> ProducerEntry:
    return ProducerEntry(producer_id=pid, producer_epoch=epoch, last_sequence=4, last_timestamp_ms=last_ms,
                         coordinator_epoch=7, txn_start_offset=start)


def listing(tid: str, pid: int, state: str = "Ongoing", coordinator: int = 1) -> TransactionListing:
    return TransactionListing(tid, pid, state, coordinator)


def description(tid: str, pid: int, state: str = "Ongoing", partitions=(TP,)) -> TransactionDescription:
    return TransactionDescription(tid, 1, state, pid, 3, 60000, NOW_MS - 5000, frozenset(partitions))


def verdict_of(producers, listings=(), descriptions=None, unknown=(), failed=()):
    txns = open_transactions({TP: list(producers)})
    return classify(txns, list(listings), descriptions or {}, set(unknown), set(failed))


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
    assert late([], {TP: 1}, NOW_MS) == [] and classify([], [], {}, set(), set()) == []


def test_a_recheck_of_some_partitions_confirms_only_there():
    tracker = HangingTracker()
    other = ("other", 0)
    first = verdict_of([producer(5)], [listing("x", 6)]) + \
        classify(open_transactions({other: [producer(8)]}), [listing("x", 6)], {}, set(), set())
    assert tracker.update(first) == [] and len(tracker.unconfirmed) == 2
    again = verdict_of([producer(5)], [listing("x", 6)])
    assert [v.txn.producer_id for v in tracker.update(again, {TP})] == [5]
    assert [v.txn.producer_id for v in tracker.unconfirmed] == [8]          # untouched outside the re-check
    assert [v.txn.producer_id for v in tracker.update(verdict_of([], []), {TP})] == []   # gone there: forgotten
