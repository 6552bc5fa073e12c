"""What the exporter's Kafka requests return: plain result dataclasses, one per request family, and the small
helpers every family shares (error names, per-item error codes, chunking).

Owns: `Partition`, `KafkaUnavailable`, `ItemError` (a failed broker, partition, transactional id or group kept
as data), `CoordinatorMap`, `ClusterMetadata` and the result of each collection (offsets, producers,
transactions, configs, group offsets, features, readable lag).
Must not: send requests or hold state; collectors map these results to metric families, never this module.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

import kafka.errors as Errors

from cluster.access.errors import TxnlabError
from exporter.readable_lag import GroupReadable

Partition = tuple[str, int]


class KafkaUnavailable(TxnlabError, RuntimeError):
    """No broker answered: nothing could be collected. The message says why (cluster.access.diagnose)."""


@dataclass(frozen=True)
class ItemError:
    """One failed item (a broker, a partition, a transactional id, a group), kept for metrics."""
    error: str
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    item: str | None = None
    whole_request: bool = False              # the request itself failed (broker down, timeout)


@dataclass(frozen=True)
class CoordinatorMap:
    """Leader and leader epoch of every __transaction_state partition, as one Metadata response said.
    `error` says why the topic could not be seen (then `leaders` is empty and proves nothing); a cluster
    that never had a transactional producer has no such topic: `exists` False, no error."""
    leaders: dict[int, tuple[int, int]] = field(default_factory=dict)    # partition -> (leader id, epoch)
    exists: bool = True
    error: str | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: dict[int, str]                  # node id -> host:port
    leaders: dict[Partition, int]            # partition -> leader id (-1: none)
    controller: int
    fetched_at: float
    coordinators: CoordinatorMap = field(default_factory=CoordinatorMap)

    def partitions_by_leader(self, partitions: Iterable[Partition]) -> dict[int, list[Partition]]:
        grouped: dict[int, list[Partition]] = defaultdict(list)
        for tp in partitions:
            grouped[self.leaders.get(tp, -1)].append(tp)
        return dict(grouped)


@dataclass
class OffsetsResult:
    last_stable: dict[Partition, int] = field(default_factory=dict)
    high_watermark: dict[Partition, int] = field(default_factory=dict)
    leaders: dict[Partition, int] = field(default_factory=dict)
    errors: list[ItemError] = field(default_factory=list)

    @property
    def brokers_failed(self) -> set[int]:
        """Leaders that did not answer this collection (whole request failed, timed out or not sent)."""
        return {e.broker for e in self.errors if e.whole_request and e.broker is not None}


@dataclass(frozen=True)
class ProducerEntry:
    """One active producer of a partition, as DescribeProducers reports it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    txn_start_offset: int                    # -1: no open transaction


@dataclass
class ProducersResult:
    producers: dict[Partition, list[ProducerEntry]] = field(default_factory=dict)
    leaders: dict[Partition, int] = field(default_factory=dict)
    requested: int = 0
    errors: list[ItemError] = field(default_factory=list)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int                       # -1 when no transaction is in progress
    partitions: frozenset[Partition]


@dataclass
class TransactionsResult:
    """What the coordinators said, and what is needed to know whether that was everything: the
    __transaction_state leaders just before and just after the listing (a coordinator that moved in between
    may have listed its ids nowhere), which brokers answered, and whether the principal may describe any
    transactional id (ListTransactions silently leaves out the ids it may not)."""
    listings: list[TransactionListing] = field(default_factory=list)
    descriptions: dict[str, TransactionDescription] = field(default_factory=dict)
    unknown_ids: set[str] = field(default_factory=set)       # TRANSACTIONAL_ID_NOT_FOUND at the coordinator
    coordinators_failed: set[int] = field(default_factory=set)
    errors: list[ItemError] = field(default_factory=list)
    answered: set[int] = field(default_factory=set)          # brokers whose ListTransactions answered
    before: CoordinatorMap = field(default_factory=lambda: CoordinatorMap(error="not read"))
    after: CoordinatorMap = field(default_factory=lambda: CoordinatorMap(error="not read"))
    may_describe_any_id: bool | None = None                  # None: the ACL probe got no answer


@dataclass
class ConfigsResult:
    configs: dict[int, dict[str, str]] = field(default_factory=dict)
    errors: list[ItemError] = field(default_factory=list)


@dataclass
class GroupOffsetsResult:
    committed: dict[str, dict[Partition, int]] = field(default_factory=dict)
    states: dict[str, str | None] = field(default_factory=dict)       # ListGroups' state (None: not told)
    types: dict[str, str | None] = field(default_factory=dict)        # classic, consumer, streams (None: not told)
    pending: dict[str, frozenset[Partition]] = field(default_factory=dict)   # UNSTABLE_OFFSET_COMMIT (absent: unread)
    members: dict[str, GroupMembers] = field(default_factory=dict)   # consumer-protocol groups (absent: undescribed)
    errors: list[ItemError] = field(default_factory=list)


@dataclass(frozen=True)
class GroupMembers:
    """A KIP-848 group as ConsumerGroupDescribe tells it: its epochs and its members' (reconciling: a member whose
    epoch is below the assignment epoch has not yet taken the assignment the coordinator computed for it)."""
    group_epoch: int
    assignment_epoch: int
    member_epochs: tuple[int, ...]

    @property
    def reconciling(self) -> int:
        return sum(1 for e in self.member_epochs if e < self.assignment_epoch)


@dataclass
class FeaturesResult:
    levels: dict[str, int] = field(default_factory=dict)     # feature -> finalized level (0: not finalized)


@dataclass
class ReadableLagResult:
    groups: GroupReadable = field(default_factory=GroupReadable)
    fetch_requests: int = 0                  # Fetch requests sent by this collection
    fetched_bytes: int = 0                   # record bytes they returned
    errors: list[ItemError] = field(default_factory=list)


def error_name(exc: BaseException | type) -> str:
    """A short, stable label for an error: the Kafka error name or the exception class."""
    cls = exc if isinstance(exc, type) else type(exc)
    return getattr(cls, "message", None) or cls.__name__


def item_error(code: int) -> str | None:
    err = Errors.for_code(code)
    return None if err is Errors.NoError else error_name(err)


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]
