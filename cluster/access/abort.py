"""The one administrative abort of an open transaction (KIP-664 `abort`), re-validated as it writes.

Owns: deciding whether an ABORT marker may be written for the transaction a caller saw open (a
verdict, an injected fault, an operator's choice), from what is true at the moment of writing, and
writing it. `abort_transaction` first asks the coordinator side (ListTransactions filtered on the
producer id, on every registered broker; DescribeTransactions of what was listed, which must come from
the broker that listed it), then re-reads DescribeProducers of the partition, then decides with the
pure `decide`, and only then sends WriteTxnMarkers(ABORT) with the epochs just re-read. The coordinator
is asked first so that the partition's re-read, which must still show the same transaction, comes after
it: the transaction the coordinator was asked about is the one aborted.

`decide` refuses (`Refused`, nothing is written):
  - when the partition no longer holds an open transaction of that producer id, or holds one with
    another producer epoch or start offset ("changed since the verdict"; under transaction.version 1
    the epoch stays the same from one transaction to the next, so only the start offset tells a
    producer's next, healthy transaction from the one the verdict saw);
  - when a coordinator still tracks that producer id's transaction as in progress (Ongoing, Prepare*)
    with this partition: the transaction is live, not hanging. Aborting it here ends it on this
    partition only; if the producer then commits, this partition's records are lost while its other
    partitions commit (a torn transaction);
  - when the coordinator side could not be established (a broker did not answer, an error), or an empty
    listing would not prove that no coordinator tracks it: silence is evidence only when every
    __transaction_state partition kept one leader, which answered, through the listing, and the principal
    may describe every transactional id (ListTransactions leaves out the others).
`force=True` overrides the last two, and only those, and the result says what it overrode.
Must not: write anything when it refuses, or retry a write (a write that fails raises AbortFailed).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import kafka.errors as Errors
from kafka.admin import AbortTransactionSpec, KafkaAdminClient, ProducerState, TransactionDescription
from kafka.structs import TopicPartition

from cluster.access.admin import (COORDINATOR_LEADERLESS, COORDINATOR_MOVED, IN_PROGRESS_STATES, TXN_STATE_TOPIC,
                           ClusterAdmin, acl_probe_id, coordinator_gaps)
from cluster.access.diagnose import is_authorization_error, not_authorized
from cluster.access.errors import TxnlabError

TORN_CONSEQUENCE = ("if the producer then commits, this partition's records are lost while its other "
                    "partitions commit")


class AbortError(TxnlabError, RuntimeError):
    """An administrative abort did not happen as asked."""


class AbortRefused(AbortError):
    """The abort was refused; nothing was written."""


class AbortFailed(AbortError):
    """The abort was allowed but its WriteTxnMarkers failed."""


@dataclass(frozen=True)
class ExpectedTransaction:
    """The open transaction a caller means to abort, as it saw it (coordinator_epoch: for the record;
    the marker is written with the coordinator epoch re-read at write time)."""
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    coordinator_epoch: int = -1

    def describe(self) -> str:
        return (f"{self.topic}-{self.partition} producer {self.producer_id} epoch {self.producer_epoch} "
                f"start offset {self.start_offset}")


@dataclass(frozen=True)
class CoordinatorView:
    """What the coordinators say of one producer id: its transactions by transactional id, or why that
    could not be established (`unknown`)."""
    descriptions: Mapping[str, TransactionDescription] = field(default_factory=dict)
    unknown: str | None = None


@dataclass(frozen=True)
class Allowed:
    producer_epoch: int                  # the epochs the marker is written with (re-read)
    coordinator_epoch: int
    forced: str | None = None            # what force=True overrode; None: nothing needed overriding


@dataclass(frozen=True)
class Refused:
    reason: str


def decide(expected: ExpectedTransaction, producers: Sequence[ProducerState], view: CoordinatorView,
           force: bool = False) -> Allowed | Refused:
    """Whether to write the ABORT marker for `expected`, from the partition's producers and the
    coordinators' view now. Pure."""
    current = next((p for p in producers if p.producer_id == expected.producer_id), None)
    changed = _changed(expected, current)
    if changed or current is None:
        return Refused(f"changed since the verdict: {changed}; nothing written")
    objection = _coordinator_objection(expected, view)
    if objection and not force:
        return Refused(f"{objection}; nothing written (--force aborts anyway: {TORN_CONSEQUENCE})")
    return Allowed(current.producer_epoch, current.coordinator_epoch, forced=objection)


def _changed(expected: ExpectedTransaction, current: ProducerState | None) -> str | None:
    if current is None or current.current_transaction_start_offset < 0:
        return (f"producer {expected.producer_id} has no open transaction on {expected.topic}-{expected.partition} "
                "any more (committed, aborted or expired)")
    if current.producer_epoch != expected.producer_epoch:
        return f"producer epoch {expected.producer_epoch} -> {current.producer_epoch}"
    if current.current_transaction_start_offset != expected.start_offset:
        return (f"start offset {expected.start_offset} -> {current.current_transaction_start_offset} "
                "(the producer's transaction then ended; this is a later one)")
    return None


def _coordinator_objection(expected: ExpectedTransaction, view: CoordinatorView) -> str | None:
    if view.unknown is not None:
        return f"the coordinator side could not be established ({view.unknown})"
    tp = TopicPartition(expected.topic, expected.partition)
    for tid, desc in sorted(view.descriptions.items()):
        state = getattr(desc.state, "value", desc.state)          # kafka-python's TransactionState, or a str
        if desc.producer_id == expected.producer_id and state in IN_PROGRESS_STATES and tp in desc.topic_partitions:
            return (f"coordinator {desc.coordinator_id} still tracks transactional id {tid} as {state} "
                    f"with {expected.topic}-{expected.partition}: the transaction is live, not hanging")
    return None


# ---- I/O ----------------------------------------------------------------------------------------------
def abort_transaction(admin: ClusterAdmin, expected: ExpectedTransaction, force: bool = False,
                      dry_run: bool = False) -> Allowed:
    """Re-validate `expected` now and write its ABORT marker (not when dry_run). Raises AbortRefused
    (nothing written) or AbortFailed (the write failed)."""
    view = coordinator_view(admin, expected.producer_id)
    tp = TopicPartition(expected.topic, expected.partition)
    decision = decide(expected, partition_producers(admin, tp), view, force)
    if isinstance(decision, Refused):
        raise AbortRefused(f"abort of {expected.describe()} refused: {decision.reason}")
    if not dry_run:
        _write_abort(admin, tp, expected.producer_id, decision)
    return decision


def coordinator_view(admin: ClusterAdmin, producer_id: int) -> CoordinatorView:
    """ListTransactions filtered on producer_id on every registered broker, between two reads of the
    __transaction_state leaders; then DescribeTransactions of each listed id, which must be answered by
    the broker that listed it. Unknown when any of that failed or the listing may have missed an id."""
    client = admin.client
    try:
        before = state_topic_leaders(client)
        listed = client.list_transactions(broker_ids=admin.registered_brokers(), producer_id_filters=[producer_id])
        gap = listing_gap(before, state_topic_leaders(client), set(listed)) or _acl_gap(client)
        return CoordinatorView(unknown=gap) if gap else _describe_listed(client, listed)
    except Errors.KafkaError as exc:
        return CoordinatorView(unknown=f"{type(exc).__name__}: {exc}")


def listing_gap(before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]],
                answered: set[int]) -> str | None:
    """Why a ListTransactions sweep may have missed a transactional id (None: it cannot have): some
    __transaction_state partition (-> (leader, leader epoch)) was leaderless, changed leader or epoch during
    the sweep, or is led by a broker that did not answer. Pure."""
    for partition, gap in coordinator_gaps(before, after, answered).items():
        if gap == COORDINATOR_LEADERLESS:
            return f"__transaction_state partition {partition} has no leader"
        if gap == COORDINATOR_MOVED:
            return f"__transaction_state partition {partition} changed leader during the listing"
        return f"__transaction_state partition {partition} is led by broker {before[partition][0]}, which was not asked"
    return None


def state_topic_leaders(client: KafkaAdminClient) -> dict[int, tuple[int, int]]:
    """__transaction_state partition -> (leader, leader epoch); empty when the topic does not exist yet
    (no transactional producer ever initialized: no coordinator tracks anything)."""
    described = client.describe_topics([TXN_STATE_TOPIC])[0]
    code = described.get("error_code")
    if code == Errors.UnknownTopicOrPartitionError.errno:
        return {}
    if code:
        raise Errors.for_code(code)(f"describe {TXN_STATE_TOPIC}")
    return {p["partition_index"]: (p["leader_id"], p["leader_epoch"]) for p in described["partitions"]}


def _acl_gap(client: KafkaAdminClient) -> str | None:
    """ListTransactions silently leaves out the ids this principal may not describe; a random id tells
    whether it may describe any (as the exporter's probe does)."""
    probe = acl_probe_id()
    try:
        client.describe_transactions([probe])
    except Errors.TransactionalIdNotFoundError:
        return None
    except Errors.TransactionalIdAuthorizationFailedError:
        return "this principal may not describe every transactional id, so the listing may have left it out"
    return f"the transactional-id ACL probe {probe} was found"


def _describe_listed(client: KafkaAdminClient, listed: Mapping[int, list]) -> CoordinatorView:
    descriptions = {}
    for broker, listings in sorted(listed.items()):
        for tid in (listing.transactional_id for listing in listings):
            desc = client.describe_transactions([tid])[tid]
            if desc.coordinator_id != broker:
                return CoordinatorView(unknown=f"transactional id {tid} was listed by broker {broker} "
                                               f"but described by broker {desc.coordinator_id}")
            descriptions[tid] = desc
    return CoordinatorView(descriptions)


def partition_producers(admin: ClusterAdmin, tp: TopicPartition) -> list[ProducerState]:
    """DescribeProducers of tp at its leader; AbortRefused when it cannot be read."""
    try:
        return admin.client.describe_producers([tp])[tp].active_producers
    except Errors.KafkaError as exc:
        if is_authorization_error(exc):
            raise AbortRefused(not_authorized(admin.conn, "Read", f"topic {tp.topic}", "DescribeProducers")
                               + "; nothing written") from exc
        raise AbortRefused(f"cannot re-read the producers of {tp.topic}-{tp.partition} "
                           f"({type(exc).__name__}: {exc}); nothing written") from exc


def open_transaction(admin: ClusterAdmin, topic: str, partition: int, producer_id: int) -> ExpectedTransaction | None:
    """The open transaction producer_id holds on topic-partition now (DescribeProducers), or None."""
    for p in partition_producers(admin, TopicPartition(topic, partition)):
        if p.producer_id == producer_id and p.current_transaction_start_offset >= 0:
            return ExpectedTransaction(topic, partition, p.producer_id, p.producer_epoch,
                                       p.current_transaction_start_offset, p.coordinator_epoch)
    return None


def _write_abort(admin: ClusterAdmin, tp: TopicPartition, producer_id: int, allowed: Allowed) -> None:
    try:
        admin.client.abort_transaction(AbortTransactionSpec(tp, producer_id, allowed.producer_epoch,
                                                            allowed.coordinator_epoch))
    except Errors.KafkaError as exc:
        if is_authorization_error(exc):        # refused before anything was written
            raise AbortRefused(not_authorized(admin.conn, "Alter", "the cluster", "WriteTxnMarkers(ABORT), the "
                                              "abort itself") + "; nothing written") from exc
        raise AbortFailed(f"WriteTxnMarkers(ABORT) for {tp.topic}-{tp.partition} producer {producer_id} failed "
                          f"({type(exc).__name__}: {exc}); see whether it is still open with `txnlab txn "
                          "hanging`") from exc
