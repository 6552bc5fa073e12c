"""The exporter's Kafka access layer: every request the exporter (and `txnlab txn`) sends to Kafka.

Owns: one kafka-python admin client, the requests (Metadata, ListOffsets, DescribeProducers,
ListTransactions, DescribeTransactions, DescribeConfigs, consumer-group offsets, WriteTxnMarkers for
an explicit abort), batching them per broker, sending to all brokers at once, and turning every
per-broker, per-partition and per-id error into an `ItemError` instead of an exception. Results are
plain dataclasses; collectors map them to metric families and never call Kafka themselves.
Must not: build metric families, hold exporter state between calls (beyond a metadata cache), or
write to Kafka except in `abort_transaction`, which only the operator command calls.

kafka-python 3.0.12 raises on the first bad item of its describe_producers / describe_transactions /
list_transactions helpers, so this module sends the wire requests itself through the client's
connection manager and reads every item's error code.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.future import Future
from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.transactions import (DescribeProducersRequest, DescribeTransactionsRequest,
                                               ListTransactionsRequest)
from kafka.protocol.consumer.offsets import IsolationLevel, ListOffsetsRequest, OffsetSpec
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from cluster.connection import ConnectionSettings

Partition = tuple[str, int]
BROKER_RESOURCE = 4                   # DescribeConfigs resource type of a broker
IN_FLIGHT = 5                         # requests in flight per broker connection (kafka-python's default cap)
DESCRIBED_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
THRESHOLD_CONFIGS = ("transaction.max.timeout.ms", "producer.id.expiration.ms",
                     "transactional.id.expiration.ms", "transaction.partition.verification.enable")


class KafkaUnavailable(RuntimeError):
    """No broker answered: nothing could be collected."""


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
class ClusterMetadata:
    brokers: dict[int, str]                  # node id -> host:port
    leaders: dict[Partition, int]            # partition -> leader id (-1: none)
    controller: int
    fetched_at: float

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
    listings: list[TransactionListing] = field(default_factory=list)
    descriptions: dict[str, TransactionDescription] = field(default_factory=dict)
    unknown_ids: set[str] = field(default_factory=set)       # TRANSACTIONAL_ID_NOT_FOUND at the coordinator
    coordinators_failed: set[int] = field(default_factory=set)
    errors: list[ItemError] = field(default_factory=list)


@dataclass
class ConfigsResult:
    configs: dict[int, dict[str, str]] = field(default_factory=dict)
    errors: list[ItemError] = field(default_factory=list)


@dataclass
class GroupOffsetsResult:
    committed: dict[str, dict[Partition, int]] = field(default_factory=dict)
    errors: list[ItemError] = field(default_factory=list)


def error_name(exc: BaseException | type) -> str:
    """A short, stable label for an error: the Kafka error name or the exception class."""
    cls = exc if isinstance(exc, type) else type(exc)
    return getattr(cls, "message", None) or cls.__name__


def _item_error(code: int) -> str | None:
    err = Errors.for_code(code)
    return None if err is Errors.NoError else error_name(err)


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        grouped[topic].append(partition)
    return grouped


class KafkaAccess:
    """All of the exporter's Kafka requests for one cluster. Thread-safe (kafka-python's IO thread)."""

    def __init__(self, conn: ConnectionSettings, request_timeout_s: float = 5.0,
                 producers_batch: int = 500, metadata_max_age_s: float = 30.0,
                 topic_filter: Callable[[str], bool] = lambda topic: True):
        self.conn = conn
        self.timeout_ms = int(request_timeout_s * 1000)
        self.producers_batch = producers_batch
        self.metadata_max_age_s = metadata_max_age_s
        self.topic_filter = topic_filter
        self._admin: KafkaAdminClient | None = None
        self._lock = threading.Lock()
        self._leases: dict[int, int] = {}          # id(client) -> runs using it now
        self._retired: list[KafkaAdminClient] = []  # dropped clients still in use
        self._metadata: ClusterMetadata | None = None

    # ---- plumbing -----------------------------------------------------------------------------
    # One client at a time serves every thread; a client that failed is retired, not closed under the
    # feet of a request another thread is running on it: it is closed when its last lease ends.
    def _client(self) -> KafkaAdminClient:
        with self._lock:
            if self._admin is None:
                try:
                    self._admin = KafkaAdminClient(**self.conn.kafka_python(
                        request_timeout_ms=self.timeout_ms, bootstrap_timeout_ms=self.timeout_ms,
                        reconnect_backoff_max_ms=2000))
                except Errors.KafkaError as exc:
                    raise KafkaUnavailable(f"no broker of {self.conn.describe()} answered: {error_name(exc)}") from exc
            return self._admin

    def _lease(self) -> KafkaAdminClient:
        admin = self._client()
        with self._lock:
            self._leases[id(admin)] = self._leases.get(id(admin), 0) + 1
        return admin

    def _release(self, admin: KafkaAdminClient) -> None:
        with self._lock:
            left = self._leases.pop(id(admin), 1) - 1
            if left:
                self._leases[id(admin)] = left
            retired_now = not left and admin in self._retired
            if retired_now:
                self._retired.remove(admin)
        if retired_now:
            admin.close()

    def close(self) -> None:
        """Drop the client (the next call bootstraps a new one); closed now, or when its last user ends."""
        with self._lock:
            admin, self._admin = self._admin, None
            if admin is None:
                return
            if self._leases.get(id(admin)):
                self._retired.append(admin)
                return
        admin.close()

    def _run(self, coro_fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run coro_fn(manager, *args) on the IO loop of a leased client."""
        admin = self._lease()
        try:
            return admin._manager.run(coro_fn, admin._manager, *args)
        finally:
            self._release(admin)

    def _send(self, manager: Any, request: Any, node_id: int | None = None):
        """A future of the response; a request that cannot even be sent fails its future, never raises."""
        try:
            return manager.send(request, node_id=node_id, request_timeout_ms=self.timeout_ms)
        except Errors.KafkaError as exc:     # e.g. UnknownBrokerIdError: the client's own metadata lags a restart
            manager.cluster.request_update()
            return Future().failure(exc)

    async def _gather(self, manager: Any, sends: list[tuple[Any, Any]]) -> list[tuple[Any, Any, BaseException | None]]:
        """Await futures that were all sent already, each for at most the request timeout (a connection
        still being set up must not hold a scrape); (key, response | None, error | None) each."""
        results = []
        for key, future in sends:
            try:
                pending = not future.is_done
                response = await (manager.wait_for(future, self.timeout_ms) if pending else future)
                results.append((key, response, None))
            except Exception as exc:  # noqa: BLE001 - per-broker failure becomes an ItemError
                results.append((key, None, exc))
        return results

    # ---- metadata -------------------------------------------------------------------------------
    def metadata(self, refresh: bool = False) -> ClusterMetadata:
        """Brokers and partition leaders of allowed topics; cached for metadata_max_age_s."""
        cached = self._metadata
        if cached and not refresh and time.monotonic() - cached.fetched_at < self.metadata_max_age_s:
            return cached
        try:
            response = self._run(self._fetch_metadata)
        except Errors.KafkaError as exc:
            self.close()                     # start over from the bootstrap servers next time
            raise KafkaUnavailable(f"metadata request failed: {error_name(exc)}") from exc
        self._metadata = self._parse_metadata(response)
        return self._metadata

    async def _fetch_metadata(self, m):
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        return await m.wait_for(self._send(m, request), self.timeout_ms)

    def _parse_metadata(self, response: Any) -> ClusterMetadata:
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        leaders: dict[Partition, int] = {}
        for topic in response.topics:
            if topic.error_code or not self.topic_filter(topic.name):
                continue
            for p in topic.partitions:
                leaders[(topic.name, p.partition_index)] = p.leader_id
        return ClusterMetadata(brokers=brokers, leaders=leaders,
                               controller=getattr(response, "controller_id", -1), fetched_at=time.monotonic())

    def _leaderless(self, grouped: dict[int, list[Partition]], errors: list[ItemError]) -> None:
        for tp in grouped.pop(-1, []):
            errors.append(ItemError("LeaderNotAvailable", topic=tp[0], partition=tp[1]))

    # ---- offsets (scrape time) ------------------------------------------------------------------
    def offsets(self) -> OffsetsResult:
        """LSO (READ_COMMITTED) then HWM (READ_UNCOMMITTED) of every allowed partition, one request per leader."""
        meta = self.metadata()
        result = OffsetsResult(leaders=dict(meta.leaders))
        grouped = meta.partitions_by_leader(meta.leaders)
        self._leaderless(grouped, result.errors)
        self._run(self._list_offsets, grouped, IsolationLevel.READ_COMMITTED, result.last_stable, result.errors)
        self._run(self._list_offsets, grouped, IsolationLevel.READ_UNCOMMITTED, result.high_watermark, result.errors)
        self._forget_metadata_after(result.errors)
        return result

    def _forget_metadata_after(self, errors: list[ItemError]) -> None:
        if errors:
            self._metadata = None            # leadership moved or a broker is gone: refresh next time

    async def _list_offsets(self, m, grouped: dict[int, list[Partition]], isolation: IsolationLevel,
                            into: dict[Partition, int], errors: list[ItemError]) -> None:
        sends = [((leader, tps), self._send(m, self._list_offsets_request(tps, isolation), leader))
                 for leader, tps in grouped.items()]
        for (leader, tps), response, exc in await self._gather(m, sends):
            if exc is not None:
                errors.extend(ItemError(error_name(exc), broker=leader, topic=t, partition=p, whole_request=True)
                              for t, p in tps)
                continue
            for topic in response.topics:
                for p in topic.partitions:
                    err = _item_error(p.error_code)
                    if err:
                        errors.append(ItemError(err, broker=leader, topic=topic.name, partition=p.partition_index))
                    else:
                        into[(topic.name, p.partition_index)] = p.offset

    @staticmethod
    def _list_offsets_request(tps: list[Partition], isolation: IsolationLevel):
        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        part_cls = topic_cls.ListOffsetsPartition
        topics = [topic_cls(name=t, partitions=[part_cls(partition_index=p, timestamp=OffsetSpec.LATEST)
                                                for p in parts]) for t, parts in _by_topic(tps).items()]
        return ListOffsetsRequest(replica_id=-1, isolation_level=int(isolation), topics=topics,
                                  min_version=ListOffsetsRequest.min_version_for_isolation_level(int(isolation)))

    # ---- producer state (background) --------------------------------------------------------------
    def producers(self, partitions: Iterable[Partition] | None = None) -> ProducersResult:
        """DescribeProducers on every allowed partition's leader, <= producers_batch per request."""
        meta = self.metadata()
        wanted = list(meta.leaders if partitions is None else partitions)
        result = ProducersResult(leaders={tp: meta.leaders.get(tp, -1) for tp in wanted}, requested=len(wanted))
        grouped = meta.partitions_by_leader(wanted)
        self._leaderless(grouped, result.errors)
        self._run(self._describe_producers, grouped, result)
        self._forget_metadata_after(result.errors)
        return result

    async def _describe_producers(self, m, grouped: dict[int, list[Partition]], result: ProducersResult) -> None:
        """Batches to every broker at once, in waves of IN_FLIGHT per broker (the client refuses more)."""
        batches = {leader: chunks(sorted(tps), self.producers_batch) for leader, tps in grouped.items()}
        for wave in range(max((len(b) for b in batches.values()), default=0) // IN_FLIGHT + 1):
            sends = []
            for leader, leader_batches in batches.items():
                for batch in leader_batches[wave * IN_FLIGHT:(wave + 1) * IN_FLIGHT]:
                    request = DescribeProducersRequest(topics=[
                        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                        for t, ps in _by_topic(batch).items()])
                    sends.append(((leader, batch), self._send(m, request, leader)))
            await self._collect_producers(m, sends, result)

    async def _collect_producers(self, m, sends: list, result: ProducersResult) -> None:
        for (leader, batch), response, exc in await self._gather(m, sends):
            if exc is not None:
                result.errors.extend(ItemError(error_name(exc), broker=leader, topic=t, partition=p, whole_request=True)
                                     for t, p in batch)
                continue
            self._parse_producers(leader, response, result)

    @staticmethod
    def _parse_producers(leader: int, response: Any, result: ProducersResult) -> None:
        for topic in response.topics:
            for p in topic.partitions:
                err = _item_error(p.error_code)
                if err:
                    result.errors.append(ItemError(err, broker=leader, topic=topic.name, partition=p.partition_index))
                    continue
                result.producers[(topic.name, p.partition_index)] = [
                    ProducerEntry(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                                  a.coordinator_epoch, a.current_txn_start_offset) for a in p.active_producers]

    # ---- coordinators (background) --------------------------------------------------------------
    def transactions(self, describe_states: Iterable[str] | None = DESCRIBED_STATES) -> TransactionsResult:
        """ListTransactions on every broker; DescribeTransactions (sent to the same broker, which is the
        coordinator of what it listed) for the ids in describe_states (None: every listed id)."""
        meta = self.metadata()
        result = TransactionsResult()
        self._run(self._list_transactions, list(meta.brokers), result)
        wanted = None if describe_states is None else set(describe_states)
        ids_by_coordinator: dict[int, list[str]] = defaultdict(list)
        for listing in result.listings:
            if wanted is None or listing.state in wanted:
                ids_by_coordinator[listing.coordinator].append(listing.transactional_id)
        self._run(self._describe_transactions, dict(ids_by_coordinator), result)
        return result

    async def _list_transactions(self, m, brokers: list[int], result: TransactionsResult) -> None:
        sends = [(b, self._send(m, ListTransactionsRequest(state_filters=[], producer_id_filters=[]), b))
                 for b in brokers]
        for broker, response, exc in await self._gather(m, sends):
            err = error_name(exc) if exc is not None else _item_error(response.error_code)
            if err:
                result.coordinators_failed.add(broker)
                result.errors.append(ItemError(err, broker=broker, whole_request=exc is not None))
                continue
            result.listings.extend(TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, broker)
                                   for t in response.transaction_states)

    async def _describe_transactions(self, m, ids_by_coordinator: dict[int, list[str]],
                                     result: TransactionsResult) -> None:
        sends = [((b, ids), self._send(m, DescribeTransactionsRequest(transactional_ids=ids), b))
                 for b, ids in ids_by_coordinator.items() if ids]
        for (broker, ids), response, exc in await self._gather(m, sends):
            if exc is not None:
                result.coordinators_failed.add(broker)
                result.errors.extend(ItemError(error_name(exc), broker=broker, item=i, whole_request=True) for i in ids)
                continue
            for txn in response.transaction_states:
                self._parse_description(broker, txn, result)

    @staticmethod
    def _parse_description(broker: int, txn: Any, result: TransactionsResult) -> None:
        err = _item_error(txn.error_code)
        if err == error_name(Errors.TransactionalIdNotFoundError):
            result.unknown_ids.add(txn.transactional_id)
        if err:
            result.errors.append(ItemError(err, broker=broker, item=txn.transactional_id))
            return
        partitions = frozenset((t.topic, p) for t in txn.topics for p in t.partitions)
        result.descriptions[txn.transactional_id] = TransactionDescription(
            txn.transactional_id, broker, txn.transaction_state, txn.producer_id, txn.producer_epoch,
            txn.transaction_timeout_ms, txn.transaction_start_time_ms, partitions)

    # ---- broker configs (background) --------------------------------------------------------------
    def broker_configs(self, names: Iterable[str] = THRESHOLD_CONFIGS) -> ConfigsResult:
        meta = self.metadata()
        result = ConfigsResult()
        self._run(self._describe_configs, list(meta.brokers), list(names), result)
        return result

    async def _describe_configs(self, m, brokers: list[int], names: list[str], result: ConfigsResult) -> None:
        resource = DescribeConfigsRequest.DescribeConfigsResource
        sends = [(b, self._send(m, DescribeConfigsRequest(
            resources=[resource(resource_type=BROKER_RESOURCE, resource_name=str(b), configuration_keys=names)],
            include_synonyms=False, include_documentation=False), b)) for b in brokers]
        for broker, response, exc in await self._gather(m, sends):
            if exc is not None:
                result.errors.append(ItemError(error_name(exc), broker=broker, whole_request=True))
                continue
            for res in response.results:
                err = _item_error(res.error_code)
                if err:
                    result.errors.append(ItemError(err, broker=broker))
                else:
                    result.configs[broker] = {c.name: c.value for c in res.configs if c.value is not None}

    # ---- consumer groups (background) -------------------------------------------------------------
    def group_offsets(self, group_filter: Callable[[str], bool] = lambda g: True) -> GroupOffsetsResult:
        """Committed offsets of every consumer group (allowed topics only)."""
        result = GroupOffsetsResult()
        admin = self._lease()
        try:
            self._fetch_group_offsets(admin, group_filter, result)
        finally:
            self._release(admin)
        return result

    def _fetch_group_offsets(self, admin: KafkaAdminClient, group_filter: Callable[[str], bool],
                             result: GroupOffsetsResult) -> None:
        try:
            groups = sorted(g["group_id"] for g in admin.list_groups() if group_filter(g["group_id"]))
        except Errors.KafkaError as exc:
            result.errors.append(ItemError(error_name(exc), whole_request=True))
            return
        try:
            fetched = admin.list_group_offsets(groups) if groups else {}
        except Errors.KafkaError:
            fetched = self._group_offsets_one_by_one(admin, groups, result)
        for group, offsets in fetched.items():
            result.committed[group] = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()
                                       if meta.offset >= 0 and self.topic_filter(tp.topic)}

    @staticmethod
    def _group_offsets_one_by_one(admin: KafkaAdminClient, groups: list[str], result: GroupOffsetsResult) -> dict:
        """After a batched OffsetFetch failed: one group at a time, so one bad group costs only itself."""
        fetched = {}
        for group in groups:
            try:
                fetched.update(admin.list_group_offsets([group]))
            except Errors.KafkaError as exc:
                result.errors.append(ItemError(error_name(exc), item=group))
        return fetched

    # ---- the one write: an explicit abort -----------------------------------------------------------
    def abort_transaction(self, tp: Partition, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int) -> None:
        """WriteTxnMarkers(ABORT) to the partition leader (KIP-664 abort). Raises on failure."""
        leader = self.metadata(refresh=True).leaders.get(tp, -1)
        if leader < 0:
            raise KafkaUnavailable(f"{tp[0]}-{tp[1]} has no leader")
        marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[marker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[marker.WritableTxnMarkerTopic(name=tp[0], partition_indexes=[tp[1]])],
            coordinator_epoch=coordinator_epoch)])
        response = self._run(self._send_and_wait, request, leader)
        for res in response.markers:
            for topic in res.topics:
                for p in topic.partitions:
                    err = Errors.for_code(p.error_code)
                    if err is not Errors.NoError:
                        raise err(f"abort of {tp[0]}-{tp[1]} producer {producer_id} failed")

    async def _send_and_wait(self, m, request: Any, node_id: int):
        return await m.wait_for(self._send(m, request, node_id), self.timeout_ms)
