"""The exporter's Kafka access layer: every request the exporter (and `txnlab txn`) sends to Kafka.

Owns: `KafkaAccess`, the one facade the exporter, `txnlab txn` and the tests call, which composes the request
families of exporter/access/ (lanes.py: one kafka-python admin client per lane; metadata.py: Metadata and its
cache; partitions.py: ListOffsets, DescribeProducers; transactions.py: ListTransactions,
DescribeTransactions; settings.py: DescribeConfigs, ApiVersions for the finalized features; groups.py:
consumer-group offsets; fetches.py: Fetch READ_COMMITTED for the readable lag of consumer groups) and hands
each the lanes and the metadata cache it shares; and the public names of the layer, re-exported from there.
Between them: batching the requests per broker, sending to all brokers at once, and turning every per-broker,
per-partition and per-id error into an `ItemError` instead of an exception. Results are plain dataclasses;
collectors map them to metric families and never call Kafka themselves.
Must not: build metric families, hold exporter state between calls (beyond a metadata cache), or
write to Kafka (the one write, an administrative abort, is cluster.access.abort's); nor send a request itself
(its families do).

kafka-python 3.0.12 raises on the first bad item of its describe_producers / describe_transactions /
list_transactions helpers, so the families send the wire requests themselves through the client's
connection manager and read every item's error code.
"""
from __future__ import annotations

from typing import Callable, Iterable

from cluster.access.connection import ConnectionSettings
from exporter.access.fetches import FETCH_MAX_BYTES, ReadableLagFetches
from exporter.access.groups import GroupOffsetRequests
from exporter.access.lanes import BACKGROUND, SCRAPE, AdminLanes
from exporter.access.metadata import MetadataCache, metadata_candidates
from exporter.access.partitions import PartitionRequests
from exporter.access.results import (ClusterMetadata, ConfigsResult, CoordinatorMap, FeaturesResult,
                                     GroupOffsetsResult, ItemError, KafkaUnavailable, OffsetsResult, Partition,
                                     ProducerEntry, ProducersResult, ReadableLagResult, TransactionDescription,
                                     TransactionListing, TransactionsResult, chunks, error_name)
from exporter.access.settings import THRESHOLD_CONFIGS, ClusterSettings
from exporter.access.transactions import DESCRIBED_STATES, TransactionRequests

__all__ = [
    "BACKGROUND", "DESCRIBED_STATES", "FETCH_MAX_BYTES", "SCRAPE", "THRESHOLD_CONFIGS", "ClusterMetadata",
    "ConfigsResult", "CoordinatorMap", "FeaturesResult", "GroupOffsetsResult", "ItemError", "KafkaAccess",
    "KafkaUnavailable", "OffsetsResult", "Partition", "ProducerEntry", "ProducersResult", "ReadableLagResult",
    "TransactionDescription", "TransactionListing", "TransactionsResult", "chunks", "error_name",
    "metadata_candidates",
]


class KafkaAccess:
    """All of the exporter's Kafka requests for one cluster. Thread-safe (kafka-python's IO thread)."""

    def __init__(self, conn: ConnectionSettings, request_timeout_s: float = 5.0,
                 producers_batch: int = 500, metadata_max_age_s: float = 30.0,
                 topic_filter: Callable[[str], bool] = lambda topic: True, metadata_min_refresh_s: float = 5.0):
        self.conn = conn
        self.lanes = AdminLanes(conn, int(request_timeout_s * 1000))
        self.metadata_cache = MetadataCache(self.lanes, topic_filter, metadata_max_age_s, metadata_min_refresh_s)
        self.partition_requests = PartitionRequests(self.lanes, self.metadata_cache, producers_batch)
        self.transaction_requests = TransactionRequests(self.lanes, self.metadata_cache)
        self.settings = ClusterSettings(self.lanes, self.metadata_cache)
        self.group_requests = GroupOffsetRequests(self.lanes, topic_filter)
        self.lag_fetches = ReadableLagFetches(self.lanes, self.metadata_cache)

    def close(self, lane: str | None = None) -> None:
        """Drop a lane's client (every lane's when None); the next call bootstraps a new one. Each is
        closed now, or when its last user ends."""
        self.lanes.close(lane)

    # ---- metadata -------------------------------------------------------------------------------
    def metadata(self, refresh: bool = False, lane: str = BACKGROUND, deadline: float | None = None) -> ClusterMetadata:
        """Brokers and partition leaders of allowed topics, cached (exporter/access/metadata.py)."""
        return self.metadata_cache.metadata(refresh, lane, deadline)

    def coordinator_map(self) -> CoordinatorMap:
        """The __transaction_state leaders now (a Metadata request for that topic alone)."""
        return self.metadata_cache.coordinator_map()

    # ---- partition leaders ------------------------------------------------------------------------
    def offsets(self, timeout_s: float | None = None) -> OffsetsResult:
        """LSO and HWM of every allowed partition, on the scrape lane within one deadline (partitions.py)."""
        return self.partition_requests.offsets(timeout_s)

    def producers(self, partitions: Iterable[Partition] | None = None) -> ProducersResult:
        """DescribeProducers on every allowed partition's leader, <= producers_batch per request."""
        return self.partition_requests.producers(partitions)

    # ---- coordinators, settings, groups (background) ------------------------------------------------
    def transactions(self, describe_states: Iterable[str] | None = DESCRIBED_STATES) -> TransactionsResult:
        """ListTransactions on every broker, the ACL probe, DescribeTransactions of the ids in describe_states
        (None: every listed id) (transactions.py)."""
        return self.transaction_requests.transactions(describe_states)

    def broker_configs(self, names: Iterable[str] = THRESHOLD_CONFIGS) -> ConfigsResult:
        return self.settings.broker_configs(names)

    def group_offsets(self, group_filter: Callable[[str], bool] = lambda g: True) -> GroupOffsetsResult:
        """Committed offsets of every consumer group (allowed topics only)."""
        return self.group_requests.group_offsets(group_filter)

    def finalized_features(self) -> FeaturesResult:
        """The cluster's finalized feature levels (settings.py). Raises when the request fails."""
        return self.settings.finalized_features()

    def readable_lag(self, committed: dict[str, dict[Partition, int]], last_stable: dict[Partition, int],
                     max_bytes: int) -> ReadableLagResult:
        """Per group and partition, the records a read_committed consumer at the committed offset would
        still receive before the LSO (fetches.py reads them, exporter/readable_lag.py counts them)."""
        return self.lag_fetches.readable_lag(committed, last_stable, max_bytes)
