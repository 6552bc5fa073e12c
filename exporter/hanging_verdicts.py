"""Hanging and late transactions: txnlab's own partition-side classification (as in KIP-664).

Owns: turning what the access layer returned (DescribeProducers per partition, ListTransactions,
DescribeTransactions, the __transaction_state leaders around the listing) into verdicts about every open
transaction, whether that evidence was complete, and the two-collection confirmation. Pure functions and
one small tracker; no Kafka calls, no metrics.

An open transaction (a partition's producer with CurrentTxnStartOffset >= 0) is *suspect* when
  - its producer id maps to no transactional id on any coordinator (`no_transactional_id`),
  - its transactional id is unknown to its coordinator (`unknown_to_coordinator`),
  - the coordinator now holds another producer id for that transactional id (`producer_id_mismatch`),
  - the coordinator's transaction is not in progress (`coordinator_not_ongoing`), or
  - the coordinator's transaction does not contain this partition (`partition_not_in_transaction`).
Silence is never evidence. `no_transactional_id` needs the listing to be complete: every
__transaction_state partition led, by the same leader at the same epoch before and after the listing, by a
broker that answered, and a principal that may describe any transactional id (ListTransactions leaves out
the ids it may not). A verdict about a listed id needs its own __transaction_state partition covered that
way. Otherwise the transaction is *unresolved* (with the reason), never suspect, until the evidence
completes, or until its producer last wrote longer ago than the leader's transaction.max.timeout.ms: then
no coordinator can still complete it, and it is suspect as `past_max_timeout`.
A suspect seen again in the next collection, or in a re-check of its partition a few seconds later
(same partition, producer, epoch and start offset), is *hanging*: one look can race a commit in flight,
two cannot. A partition not scanned, or an unresolved verdict, changes nothing the tracker knew.
An open transaction whose producer last wrote longer ago than the leader's transaction.max.timeout.ms is
*late*, hanging or not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from cluster.access.admin import (COORDINATOR_LEADERLESS, COORDINATOR_MOVED, COORDINATOR_UNANSWERED, IN_PROGRESS_STATES,
                           coordinator_gaps, transaction_state_partition)
from exporter.kafka_access import Partition, ProducerEntry, TransactionListing, TransactionsResult

NO_TRANSACTIONAL_ID = "no_transactional_id"
UNKNOWN_TO_COORDINATOR = "unknown_to_coordinator"
PRODUCER_ID_MISMATCH = "producer_id_mismatch"
COORDINATOR_NOT_ONGOING = "coordinator_not_ongoing"
PARTITION_NOT_IN_TRANSACTION = "partition_not_in_transaction"
PAST_MAX_TIMEOUT = "past_max_timeout"
REASONS = (NO_TRANSACTIONAL_ID, UNKNOWN_TO_COORDINATOR, PRODUCER_ID_MISMATCH, COORDINATOR_NOT_ONGOING,
           PARTITION_NOT_IN_TRANSACTION, PAST_MAX_TIMEOUT)

# Why evidence is incomplete (kafkatxn_hanging_evidence_incomplete{reason}).
STATE_TOPIC_UNSEEN = "transaction_state_unseen"          # __transaction_state's leaders could not be read
ID_ACL = "transactional_id_acl"                          # the principal may not describe every id
ID_ACL_UNKNOWN = "transactional_id_acl_unknown"          # the ACL probe got no answer
DESCRIPTION_FAILED = "description_failed"                # a listed in-progress id could not be described
EVIDENCE_REASONS = (STATE_TOPIC_UNSEEN, COORDINATOR_LEADERLESS, COORDINATOR_UNANSWERED, COORDINATOR_MOVED,
                    ID_ACL, ID_ACL_UNKNOWN)      # DESCRIPTION_FAILED is per transaction, not per collection


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
    resolved: bool = True            # False: the evidence was incomplete (unresolved_reason says why)
    unresolved_reason: str | None = None

    @property
    def suspect(self) -> bool:
        return self.resolved and self.reason is not None


@dataclass(frozen=True)
class Evidence:
    """How complete the coordinator side of one collection was. `gaps`: __transaction_state partition ->
    why its ids may be missing or wrong; `global_gaps`: reasons that affect every unlisted producer id."""
    num_partitions: int = 0
    gaps: dict[int, str] = field(default_factory=dict)
    global_gaps: frozenset[str] = frozenset()

    @property
    def complete(self) -> bool:
        return not self.gaps and not self.global_gaps

    def reasons(self) -> dict[str, int]:
        """Reason -> how many __transaction_state partitions it affects (1 for a global reason)."""
        counts = {reason: 1 for reason in self.global_gaps}
        for reason in self.gaps.values():
            counts[reason] = counts.get(reason, 0) + 1
        return counts

    def gap_of(self, transactional_id: str) -> str | None:
        if STATE_TOPIC_UNSEEN in self.global_gaps:
            return STATE_TOPIC_UNSEEN
        if not self.num_partitions:
            return None
        return self.gaps.get(transaction_state_partition(transactional_id, self.num_partitions))

    def gap_of_unlisted(self) -> str | None:
        """Why a producer id no listing names may still belong to some transactional id (None: it cannot)."""
        return min(self.global_gaps) if self.global_gaps else min(self.gaps.values(), default=None)


def evidence_of(result: TransactionsResult) -> Evidence:
    before, after = result.before, result.after
    if before.error or after.error:
        return Evidence(global_gaps=frozenset({STATE_TOPIC_UNSEEN}))
    global_gaps = {ID_ACL} if result.may_describe_any_id is False else set()
    if result.may_describe_any_id is None:
        global_gaps.add(ID_ACL_UNKNOWN)
    gaps = coordinator_gaps(before.leaders, after.leaders, result.answered)
    return Evidence(max(len(before.leaders), len(after.leaders)), gaps, frozenset(global_gaps))


def open_transactions(producers: Mapping[Partition, list[ProducerEntry]]) -> list[OpenTransaction]:
    return [OpenTransaction(topic, partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
                            p.txn_start_offset, p.last_timestamp_ms)
            for (topic, partition), entries in sorted(producers.items())
            for p in entries if p.txn_start_offset >= 0]


def classify(txns: Iterable[OpenTransaction], transactions: TransactionsResult,
             max_timeout_ms: Mapping[Partition, int] | None = None, now_ms: int | None = None) -> list[Verdict]:
    """One verdict per open transaction. An unresolved one past its leader's transaction.max.timeout.ms
    (when max_timeout_ms and now_ms are given) becomes suspect as `past_max_timeout`."""
    evidence = evidence_of(transactions)
    by_pid = {listing.producer_id: listing for listing in transactions.listings}
    verdicts = [_verdict(txn, by_pid, transactions, evidence) for txn in txns]
    if max_timeout_ms is None or now_ms is None:
        return verdicts
    overdue = {t.key for t in late((v.txn for v in verdicts if not v.resolved), max_timeout_ms, now_ms)}
    return [Verdict(v.txn, v.transactional_id, PAST_MAX_TIMEOUT) if v.txn.key in overdue else v for v in verdicts]


def _unresolved(txn: OpenTransaction, tid: str | None, why: str, reason: str | None = None) -> Verdict:
    """`reason`: what the incomplete evidence suggests (never acted on), `why`: what is missing."""
    return Verdict(txn, tid, reason, resolved=False, unresolved_reason=why)


def _verdict(txn: OpenTransaction, by_pid: Mapping[int, TransactionListing], transactions: TransactionsResult,
             evidence: Evidence) -> Verdict:
    listing = by_pid.get(txn.producer_id)
    if listing is None:
        gap = evidence.gap_of_unlisted()
        return _unresolved(txn, None, gap, NO_TRANSACTIONAL_ID) if gap else Verdict(txn, None, NO_TRANSACTIONAL_ID)
    tid = listing.transactional_id
    if gap := evidence.gap_of(tid):
        return _unresolved(txn, tid, gap)
    if tid in transactions.unknown_ids:
        return Verdict(txn, tid, UNKNOWN_TO_COORDINATOR)
    desc = transactions.descriptions.get(tid)
    if desc is None:
        if listing.state in IN_PROGRESS_STATES:       # should have been described: the call failed
            return _unresolved(txn, tid, DESCRIPTION_FAILED)
        return Verdict(txn, tid, COORDINATOR_NOT_ONGOING)
    return Verdict(txn, tid, _description_reason(txn, desc))


def _description_reason(txn: OpenTransaction, desc) -> str | None:
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

    A full collection updates every partition it scanned; a re-check (`scope` given) only those partitions,
    so a suspect can be confirmed seconds after it was first seen instead of one interval later. A partition
    outside `scanned` (its DescribeProducers failed) and an unresolved verdict keep what was known: a
    confirmed hanging transaction is not dropped (and its alert cleared) because one collection was partial."""

    def __init__(self) -> None:
        self._suspects: dict[tuple, Verdict] = {}
        self._hanging: dict[tuple, Verdict] = {}

    def update(self, verdicts: Iterable[Verdict], scope: set[Partition] | None = None,
               scanned: set[Partition] | None = None) -> list[Verdict]:
        def in_scope(key: tuple) -> bool:
            tp = (key[0], key[1])
            return (scope is None or tp in scope) and (scanned is None or tp in scanned)
        suspects, hanging = self._suspects, self._hanging
        self._suspects = {k: v for k, v in suspects.items() if not in_scope(k)}
        self._hanging = {k: v for k, v in hanging.items() if not in_scope(k)}
        for verdict in verdicts:
            key = verdict.txn.key
            if not in_scope(key):
                continue
            if verdict.suspect:
                (self._hanging if key in suspects or key in hanging else self._suspects)[key] = verdict
            elif not verdict.resolved and key in hanging:
                self._hanging[key] = hanging[key]
            elif not verdict.resolved and key in suspects:
                self._suspects[key] = suspects[key]
        return self.hanging

    @property
    def hanging(self) -> list[Verdict]:
        return sorted(self._hanging.values(), key=lambda v: v.txn.key)

    @property
    def unconfirmed(self) -> list[Verdict]:
        return sorted(self._suspects.values(), key=lambda v: v.txn.key)
