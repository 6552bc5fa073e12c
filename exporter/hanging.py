"""Hanging and late transactions: txnlab's own partition-side classification (as in KIP-664).

Owns: turning what the access layer returned (DescribeProducers per partition, ListTransactions,
DescribeTransactions) into verdicts about every open transaction, and the two-collection
confirmation. Pure functions and one small tracker; no Kafka calls, no metrics.

An open transaction (a partition's producer with CurrentTxnStartOffset >= 0) is *suspect* when
  - its producer id maps to no transactional id on any coordinator (`no_transactional_id`),
  - its transactional id is unknown to its coordinator (`unknown_to_coordinator`),
  - the coordinator now holds another producer id for that transactional id (`producer_id_mismatch`),
  - the coordinator's transaction is not in progress (`coordinator_not_ongoing`), or
  - the coordinator's transaction does not contain this partition (`partition_not_in_transaction`).
A suspect seen again in the next collection, or in a re-check of its partition a few seconds later
(same partition, producer, epoch and start offset), is *hanging*: one look can race a commit in flight,
two cannot. An open transaction whose
producer last wrote longer ago than the leader's transaction.max.timeout.ms is *late*, hanging or not.
When the coordinator could not be asked, the transaction is *unresolved*, never hanging.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from exporter.kafka_access import Partition, ProducerEntry, TransactionDescription, TransactionListing

NO_TRANSACTIONAL_ID = "no_transactional_id"
UNKNOWN_TO_COORDINATOR = "unknown_to_coordinator"
PRODUCER_ID_MISMATCH = "producer_id_mismatch"
COORDINATOR_NOT_ONGOING = "coordinator_not_ongoing"
PARTITION_NOT_IN_TRANSACTION = "partition_not_in_transaction"
REASONS = (NO_TRANSACTIONAL_ID, UNKNOWN_TO_COORDINATOR, PRODUCER_ID_MISMATCH, COORDINATOR_NOT_ONGOING,
           PARTITION_NOT_IN_TRANSACTION)
IN_PROGRESS_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction a partition holds open, with what an abort needs."""
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int

    @property
    def key(self) -> tuple:
        return (self.topic, self.partition, self.producer_id, self.producer_epoch, self.start_offset)


@dataclass(frozen=True)
class Verdict:
    txn: OpenTransaction
    transactional_id: str | None
    reason: str | None               # None: the coordinator agrees the transaction is in progress here
    resolved: bool = True            # False: the coordinator could not be asked

    @property
    def suspect(self) -> bool:
        return self.resolved and self.reason is not None


def open_transactions(producers: Mapping[Partition, list[ProducerEntry]]) -> list[OpenTransaction]:
    return [OpenTransaction(topic, partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
                            p.txn_start_offset, p.last_timestamp_ms)
            for (topic, partition), entries in sorted(producers.items())
            for p in entries if p.txn_start_offset >= 0]


def classify(txns: Iterable[OpenTransaction], listings: Iterable[TransactionListing],
             descriptions: Mapping[str, TransactionDescription], unknown_ids: set[str],
             coordinators_failed: set[int]) -> list[Verdict]:
    """One verdict per open transaction. `listings` must cover every coordinator that answered."""
    by_pid = {listing.producer_id: listing for listing in listings}
    return [_verdict(txn, by_pid, descriptions, unknown_ids, coordinators_failed) for txn in txns]


def _verdict(txn: OpenTransaction, by_pid: Mapping[int, TransactionListing],
             descriptions: Mapping[str, TransactionDescription], unknown_ids: set[str],
             coordinators_failed: set[int]) -> Verdict:
    listing = by_pid.get(txn.producer_id)
    if listing is None:
        # A failed coordinator might have been the one holding this producer id.
        return Verdict(txn, None, NO_TRANSACTIONAL_ID, resolved=not coordinators_failed)
    tid = listing.transactional_id
    if tid in unknown_ids:
        return Verdict(txn, tid, UNKNOWN_TO_COORDINATOR)
    desc = descriptions.get(tid)
    if desc is None:
        if listing.state in IN_PROGRESS_STATES:       # should have been described: the call failed
            return Verdict(txn, tid, None, resolved=False)
        return Verdict(txn, tid, COORDINATOR_NOT_ONGOING)
    return Verdict(txn, tid, _description_reason(txn, desc))


def _description_reason(txn: OpenTransaction, desc: TransactionDescription) -> str | None:
    if desc.producer_id != txn.producer_id:
        return PRODUCER_ID_MISMATCH
    if desc.state not in IN_PROGRESS_STATES:
        return COORDINATOR_NOT_ONGOING
    if (txn.topic, txn.partition) not in desc.partitions:
        return PARTITION_NOT_IN_TRANSACTION
    return None


def late(txns: Iterable[OpenTransaction], max_timeout_ms: Mapping[Partition, int], now_ms: int) -> list[OpenTransaction]:
    """Open transactions whose producer last wrote longer ago than the leader's transaction.max.timeout.ms."""
    return [t for t in txns
            if (limit := max_timeout_ms.get((t.topic, t.partition))) is not None
            and now_ms - t.last_timestamp_ms > limit]


class HangingTracker:
    """Confirms suspects: hanging = suspect now and in the collection (or re-check) before.

    A full collection updates every partition; a re-check (`partitions` given) only those partitions,
    so a suspect can be confirmed seconds after it was first seen instead of one interval later."""

    def __init__(self) -> None:
        self._suspects: dict[tuple, Verdict] = {}
        self._hanging: dict[tuple, Verdict] = {}

    def update(self, verdicts: Iterable[Verdict], partitions: set[tuple[str, int]] | None = None) -> list[Verdict]:
        def in_scope(key: tuple) -> bool:
            return partitions is None or (key[0], key[1]) in partitions
        seen = set(self._suspects) | set(self._hanging)
        self._suspects = {k: v for k, v in self._suspects.items() if not in_scope(k)}
        self._hanging = {k: v for k, v in self._hanging.items() if not in_scope(k)}
        for verdict in verdicts:
            key = verdict.txn.key
            if verdict.suspect and in_scope(key):
                (self._hanging if key in seen else self._suspects)[key] = verdict
        return self.hanging

    @property
    def hanging(self) -> list[Verdict]:
        return sorted(self._hanging.values(), key=lambda v: v.txn.key)

    @property
    def unconfirmed(self) -> list[Verdict]:
        return sorted(self._suspects.values(), key=lambda v: v.txn.key)
