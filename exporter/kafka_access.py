"""The exporter's Kafka access layer: every request the exporter (and `txnlab txn`) sends to Kafka.

Owns: one kafka-python admin client, the requests (Metadata, ListOffsets, DescribeProducers,
ListTransactions, DescribeTransactions, DescribeConfigs, consumer-group offsets, ApiVersions for the
finalized features, Fetch READ_COMMITTED for the readable lag of consumer groups), batching them per
broker, sending to all brokers at once, and turning every per-broker, per-partition and per-id error
into an `ItemError` instead of an exception. Results are plain dataclasses; collectors map them to
metric families and never call Kafka themselves.
Must not: build metric families, hold exporter state between calls (beyond a metadata cache), or
write to Kafka (the one write, an administrative abort, is cluster.access.abort's).

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
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import IsolationLevel, ListOffsetsRequest, OffsetSpec
from kafka.protocol.metadata.metadata import MetadataRequest

from cluster.access.admin import IN_PROGRESS_STATES, TXN_STATE_TOPIC, acl_probe_id
from cluster.access.connection import ConnectionSettings
from cluster.access.diagnose import Diagnosis, diagnose
from exporter.readable_lag import GroupReadable, ReadableRange, pending_ranges, readable_by_group
from cluster.access.errors import TxnlabError
from cluster.access.waiting import wait_until

Partition = tuple[str, int]
BROKER_RESOURCE = 4                   # DescribeConfigs resource type of a broker
IN_FLIGHT = 5                         # requests in flight per broker connection (kafka-python's default cap)
SCRAPE, BACKGROUND = "scrape", "background"   # the two lanes (own clients, own connections)
DESCRIBED_STATES = IN_PROGRESS_STATES
THRESHOLD_CONFIGS = ("transaction.max.timeout.ms", "producer.id.expiration.ms",
                     "transactional.id.expiration.ms", "transaction.partition.verification.enable")
FETCH_MAX_BYTES = 50 * 1024 * 1024    # bytes asked of one Fetch at most (the Java consumer's fetch.max.bytes)
FETCH_BY_NAME_MAX_VERSION = 12        # Fetch v13+ names topics by id
READ_ROUNDS = 4                       # Fetches per readable-lag range (each reads on where a log segment ended)
DIAGNOSIS_MAX_AGE_S = 30.0            # why the cluster is unreachable is found out again at most this often
METADATA_RETRY_S = 0.25               # a first Metadata request that reached no broker is asked again after this
CONNECTION_ERRORS = (Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.RequestTimedOutError)


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
    errors: list[ItemError] = field(default_factory=list)


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


def _item_error(code: int) -> str | None:
    err = Errors.for_code(code)
    return None if err is Errors.NoError else error_name(err)


def _coordinator_map(response: Any) -> CoordinatorMap:
    for topic in response.topics:
        if topic.name != TXN_STATE_TOPIC:
            continue
        err = _item_error(topic.error_code)
        if err == error_name(Errors.UnknownTopicOrPartitionError):
            return CoordinatorMap(exists=False)
        if err:
            return CoordinatorMap(error=err)
        return CoordinatorMap({p.partition_index: (p.leader_id, p.leader_epoch) for p in topic.partitions})
    return CoordinatorMap(error="absent from the Metadata response")      # e.g. not authorized to see it


def metadata_candidates(manager: Any) -> list:
    """Who to ask for Metadata, in order: the client's least loaded broker, every other broker it knows,
    each bootstrap server (ids as the client names them), once each."""
    cluster = manager.cluster
    ids = [manager.least_loaded_node(), *(b.node_id for b in cluster.brokers()),
           *(b.node_id for b in cluster.bootstrap_brokers())]
    return list(dict.fromkeys(i for i in ids if i is not None))


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
                 topic_filter: Callable[[str], bool] = lambda topic: True, metadata_min_refresh_s: float = 5.0):
        self.conn = conn
        self.timeout_ms = int(request_timeout_s * 1000)
        self.producers_batch = producers_batch
        self.metadata_max_age_s = metadata_max_age_s
        self.topic_filter = topic_filter
        self._admins: dict[str, KafkaAdminClient] = {}   # lane -> client: SCRAPE and BACKGROUND never share slots
        self._lock = threading.Lock()
        self._leases: dict[int, int] = {}          # id(client) -> runs using it now
        self._retired: list[KafkaAdminClient] = []  # dropped clients still in use
        self._metadata: ClusterMetadata | None = None
        self._metadata_stale = False             # an error hinted that leadership moved: refresh, rate-limited
        self.metadata_min_refresh_s = metadata_min_refresh_s
        self._pending: dict[int, Any] = {}       # broker -> a scrape request of an earlier scrape still unanswered
        self._diagnosis: tuple[float, Diagnosis] | None = None   # (when, why the cluster was last unreachable)

    # ---- plumbing -----------------------------------------------------------------------------
    # One client per lane serves every thread of that lane: scrape-time requests and background
    # collections each have their own connections, so neither can take the other's in-flight slots
    # (kafka-python pauses a connection with 5 requests in flight and fails further sends on it).
    # A client that failed is retired, not closed under the feet of a request another thread is running
    # on it: it is closed when its last lease ends.
    def _client(self, lane: str) -> KafkaAdminClient:
        with self._lock:
            if lane not in self._admins:
                try:
                    self._admins[lane] = KafkaAdminClient(**self.conn.kafka_python(
                        request_timeout_ms=self.timeout_ms, bootstrap_timeout_ms=self.timeout_ms,
                        reconnect_backoff_max_ms=2000))
                except Errors.KafkaError as exc:
                    raise KafkaUnavailable(self._why_unavailable(
                        f"no broker of {self.conn.describe()} answered: {error_name(exc)}")) from exc
            return self._admins[lane]

    def _why_unavailable(self, what: str) -> str:
        """Why no broker answered, in one line (cluster.access.diagnose: unreachable, TLS trust or hostname,
        authentication), found out again at most every DIAGNOSIS_MAX_AGE_S; `what` failed when every check
        passes (the settings are fine: the brokers are slow or overloaded)."""
        if self._diagnosis is None or time.monotonic() - self._diagnosis[0] >= DIAGNOSIS_MAX_AGE_S:
            self._diagnosis = (time.monotonic(), diagnose(self.conn))
        found = self._diagnosis[1]
        return f"{what} ({found.message})" if found.ok else found.message

    def _lease(self, lane: str = BACKGROUND) -> KafkaAdminClient:
        admin = self._client(lane)
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

    def close(self, lane: str | None = None) -> None:
        """Drop a lane's client (every lane's when None); the next call bootstraps a new one. Each is
        closed now, or when its last user ends."""
        with self._lock:
            lanes = list(self._admins) if lane is None else [lane]
            dropped = [a for a in (self._admins.pop(name, None) for name in lanes) if a is not None]
            now = [a for a in dropped if not self._leases.get(id(a))]
            self._retired.extend(a for a in dropped if self._leases.get(id(a)))
        for admin in now:
            admin.close()

    def _run(self, coro_fn: Callable[..., Awaitable[Any]], *args: Any, lane: str = BACKGROUND) -> Any:
        """Run coro_fn(manager, *args) on the IO loop of the lane's leased client."""
        admin = self._lease(lane)
        try:
            return admin._manager.run(coro_fn, admin._manager, *args)
        finally:
            self._release(admin)

    def _send(self, manager: Any, request: Any, node_id: int | None = None, timeout_ms: int | None = None):
        """A future of the response; a request that cannot even be sent fails its future, never raises."""
        try:
            return manager.send(request, node_id=node_id, request_timeout_ms=timeout_ms or self.timeout_ms)
        except Errors.KafkaError as exc:     # e.g. UnknownBrokerIdError: the client's own metadata lags a restart
            manager.cluster.request_update()
            return Future().failure(exc)

    async def _gather(self, manager: Any, sends: list[tuple[Any, Any]],
                      deadline: float | None = None) -> list[tuple[Any, Any, BaseException | None]]:
        """Await futures that were all sent already, all of them together for at most until `deadline`
        (time.monotonic(); default: one request timeout from now), so N slow brokers cost one timeout, not
        N, and a request queued on a connection still being set up cannot hold a scrape;
        (key, response | None, error | None) each."""
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout_ms / 1000
        results = []
        for key, future in sends:
            try:
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                response = await (manager.wait_for(future, left_ms) if not future.is_done else future)
                results.append((key, response, None))
            except Exception as exc:  # noqa: BLE001 - per-broker failure becomes an ItemError
                results.append((key, None, exc))
        return results

    # ---- metadata -------------------------------------------------------------------------------
    def metadata(self, refresh: bool = False, lane: str = BACKGROUND, deadline: float | None = None) -> ClusterMetadata:
        """Brokers and partition leaders of allowed topics; cached for metadata_max_age_s. After an error
        hinted that leadership moved it is refreshed, but at most once per metadata_min_refresh_s (one
        offline partition must not cost a full Metadata request on every scrape). When a refresh fails
        the cached metadata is kept (KafkaUnavailable only when there is none)."""
        cached = self._metadata
        if cached and not refresh and not self._metadata_due(cached):
            return cached
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout_ms / 1000
        # a first request that reached no broker (every one down or backing off) is asked again until the deadline
        retried = CONNECTION_ERRORS if cached is None else ()
        try:
            response = wait_until(lambda: self._run(self._fetch_metadata, None, deadline, lane=lane),
                                  max(0.0, deadline - time.monotonic()), "a Metadata answer", METADATA_RETRY_S,
                                  ignore=retried, reraise=True)
        except Errors.KafkaError as exc:
            if cached is not None:
                return cached
            self.close(lane)                 # start over from the bootstrap servers next time
            raise KafkaUnavailable(self._why_unavailable(f"metadata request failed: {error_name(exc)}")) from exc
        self._metadata, self._metadata_stale = self._parse_metadata(response), False
        return self._metadata

    def _metadata_due(self, cached: ClusterMetadata) -> bool:
        age = time.monotonic() - cached.fetched_at
        return age >= self.metadata_max_age_s or (self._metadata_stale and age >= self.metadata_min_refresh_s)

    async def _fetch_metadata(self, m, topics: list[str] | None = None, deadline: float | None = None):
        """A Metadata response from the first broker that answers: the client's pick, then every other broker
        it knows, then each bootstrap server, while the deadline lasts. A broker that is down (refused,
        reset, backing off after a failure) is passed over, so one dead broker never makes a live cluster
        look unreachable; any other error (authorization, authentication) is raised at once."""
        request = MetadataRequest(topics=None if topics is None else [
                                      MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout_ms / 1000
        error: BaseException = Errors.NodeNotReadyError("no broker known")
        for node in metadata_candidates(m):
            [(_, response, exc)] = await self._gather(m, [(None, self._send(m, request, node))], deadline)
            if exc is None:
                return response
            error = exc
            if not isinstance(exc, CONNECTION_ERRORS) or time.monotonic() >= deadline:
                break
        raise error if isinstance(error, Errors.KafkaError) else Errors.KafkaError(error_name(error))

    def _parse_metadata(self, response: Any) -> ClusterMetadata:
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        leaders: dict[Partition, int] = {}
        for topic in response.topics:
            if topic.error_code or not self.topic_filter(topic.name):
                continue
            for p in topic.partitions:
                leaders[(topic.name, p.partition_index)] = p.leader_id
        return ClusterMetadata(brokers=brokers, leaders=leaders, controller=getattr(response, "controller_id", -1),
                               fetched_at=time.monotonic(), coordinators=_coordinator_map(response))

    def coordinator_map(self) -> CoordinatorMap:
        """The __transaction_state leaders now (a Metadata request for that topic alone)."""
        try:
            return _coordinator_map(self._run(self._fetch_metadata, [TXN_STATE_TOPIC]))
        except Errors.KafkaError as exc:
            return CoordinatorMap(error=error_name(exc))

    def _leaderless(self, grouped: dict[int, list[Partition]], errors: list[ItemError]) -> None:
        for tp in grouped.pop(-1, []):
            errors.append(ItemError("LeaderNotAvailable", topic=tp[0], partition=tp[1]))

    # ---- offsets (scrape time) ------------------------------------------------------------------
    def offsets(self, timeout_s: float | None = None) -> OffsetsResult:
        """LSO (READ_COMMITTED) and HWM (READ_UNCOMMITTED) of every allowed partition: both isolation levels
        to every leader at once, on the scrape lane, all within ONE deadline (timeout_s, default the request
        timeout) that also covers a metadata refresh. A leader that has not answered by then, or still has
        an earlier scrape's request unanswered (a frozen broker: nothing new is queued behind it), is left
        out with a whole-request error: partial data in time, never a late scrape."""
        budget = timeout_s if timeout_s is not None else self.timeout_ms / 1000
        deadline = time.monotonic() + budget
        meta = self.metadata(lane=SCRAPE, deadline=deadline - budget / 2)     # a refresh leaves half for offsets
        result = OffsetsResult(leaders=dict(meta.leaders))
        grouped = meta.partitions_by_leader(meta.leaders)
        self._leaderless(grouped, result.errors)
        self._run(self._list_offsets, grouped, deadline, result, lane=SCRAPE)
        self._forget_metadata_after(result.errors)
        return result

    def _forget_metadata_after(self, errors: list[ItemError]) -> None:
        if errors:
            self._metadata_stale = True      # leadership moved or a broker is gone: refresh (rate-limited)

    async def _list_offsets(self, m, grouped: dict[int, list[Partition]], deadline: float,
                            result: OffsetsResult) -> None:
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        sends, busy = [], []
        for leader, tps in grouped.items():
            if not getattr(self._pending.get(leader), "is_done", True):
                busy.append((leader, tps))
                continue
            for isolation, into in ((IsolationLevel.READ_COMMITTED, result.last_stable),
                                    (IsolationLevel.READ_UNCOMMITTED, result.high_watermark)):
                future = self._send(m, self._list_offsets_request(tps, isolation), leader, left_ms)
                self._pending[leader] = future
                sends.append(((leader, tps, into), future))
        for leader, tps in busy:
            result.errors.extend(ItemError("EarlierRequestPending", broker=leader, topic=t, partition=p,
                                           whole_request=True) for t, p in tps)
        for (leader, tps, into), response, exc in await self._gather(m, sends, deadline):
            if exc is not None:
                result.errors.extend(ItemError(error_name(exc), broker=leader, topic=t, partition=p,
                                               whole_request=True) for t, p in tps)
                continue
            self._parse_offsets(leader, response, into, result.errors)

    @staticmethod
    def _parse_offsets(leader: int, response: Any, into: dict[Partition, int], errors: list[ItemError]) -> None:
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
        """ListTransactions on every broker, between two reads of the __transaction_state leaders; an ACL
        probe; DescribeTransactions (sent to the same broker, which is the coordinator of what it listed)
        for the ids in describe_states (None: every listed id)."""
        meta = self.metadata()
        result = TransactionsResult(before=self.coordinator_map())
        self._run(self._list_transactions, list(meta.brokers), result)
        result.after = self.coordinator_map()
        result.may_describe_any_id = self._run(self._probe_describe_acl)
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
            result.answered.add(broker)
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

    async def _probe_describe_acl(self, m) -> bool | None:
        """May this principal DESCRIBE any transactional id? Brokers check that ACL before asking whether they
        coordinate the id, so DescribeTransactions of a random id answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        exactly when a principal without a wildcard grant would also miss ids in ListTransactions.
        (A DENY on some ids beside a wildcard ALLOW is not seen by this probe: docs/exporter.md.)"""
        [(_, response, exc)] = await self._gather(m, [(None, self._send(
            m, DescribeTransactionsRequest(transactional_ids=[acl_probe_id()])))])
        if exc is not None or not response.transaction_states:
            return None
        denied = error_name(Errors.TransactionalIdAuthorizationFailedError)
        return _item_error(response.transaction_states[0].error_code) != denied

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

    # ---- cluster features (background) ----------------------------------------------------------------
    def finalized_features(self) -> FeaturesResult:
        """The cluster's finalized feature levels (KIP-584; transaction.version 2 is KIP-890 part 2) as a
        broker reports them in ApiVersions v3+ (kafka-python's describe_features). A feature the broker
        supports but the cluster has not finalized is level 0, as kafka-features.sh describe prints it.
        Raises when the request fails."""
        admin = self._lease()
        try:
            described = admin.describe_features()
        finally:
            self._release(admin)
        return FeaturesResult({name: levels.get("finalized", (0, 0))[1] for name, levels in described.items()})

    # ---- readable lag of consumer groups (background) --------------------------------------------------
    def readable_lag(self, committed: dict[str, dict[Partition, int]], last_stable: dict[Partition, int],
                     max_bytes: int) -> ReadableLagResult:
        """Per group and partition, the records a read_committed consumer at the committed offset would
        still receive before the LSO (exporter/readable_lag.py counts them). Each distinct (partition,
        committed offset) with 0 < LSO - committed is read from its leader with Fetch READ_COMMITTED, at
        most max_bytes per range; a range that stopped at the end of a log segment is read on, up to
        READ_ROUNDS Fetches. A range whose Fetch failed has no value (its error is kept)."""
        ranges = pending_ranges(committed, last_stable, max_bytes)
        result = ReadableLagResult()
        todo = list(ranges.values())
        for _ in range(READ_ROUNDS):
            if not todo:
                break
            todo = [r for r in self._read_round(todo, result) if not r.complete and not r.cut]
        result.groups = readable_by_group(committed, last_stable, ranges)
        self._forget_metadata_after(result.errors)
        return result

    def _read_round(self, todo: list[ReadableRange], result: ReadableLagResult) -> list[ReadableRange]:
        """One Fetch for each range, from where it was left; the ranges that advanced."""
        leaders = self.metadata().leaders
        by_leader: dict[int, list[ReadableRange]] = defaultdict(list)
        for rng in todo:
            by_leader[leaders.get(rng.tp, -1)].append(rng)
        for rng in by_leader.pop(-1, []):
            self._range_failed(rng, ItemError("LeaderNotAvailable", topic=rng.tp[0], partition=rng.tp[1]), result)
        requests = {leader: self._fetch_batches(ranges) for leader, ranges in by_leader.items()}
        return self._run(self._fetch_ranges, requests, result)

    @staticmethod
    def _fetch_batches(ranges: list[ReadableRange]) -> list[list[ReadableRange]]:
        """One leader's ranges as Fetch requests that name each partition once (two committed offsets of a
        partition go in two requests) and ask for at most FETCH_MAX_BYTES together."""
        per_request = max(1, FETCH_MAX_BYTES // max(r.budget_left for r in ranges))
        layers: dict[int, list[ReadableRange]] = defaultdict(list)
        seen: dict[Partition, int] = defaultdict(int)
        for rng in ranges:
            layers[seen[rng.tp]].append(rng)
            seen[rng.tp] += 1
        return [request for layer in layers.values() for request in chunks(layer, per_request)]

    async def _fetch_ranges(self, m, requests: dict[int, list[list[ReadableRange]]],
                            result: ReadableLagResult) -> list[ReadableRange]:
        """Every broker at once, one Fetch in flight per broker (a response may be FETCH_MAX_BYTES)."""
        advanced: list[ReadableRange] = []
        for wave in range(max((len(reqs) for reqs in requests.values()), default=0)):
            sends = [((leader, reqs[wave]), self._send(m, self._fetch_request(reqs[wave]), leader))
                     for leader, reqs in requests.items() if wave < len(reqs)]
            result.fetch_requests += len(sends)
            for (leader, batch), response, exc in await self._gather(m, sends):
                advanced += self._read_fetch(leader, batch, response, exc, result)
        return advanced

    @staticmethod
    def _fetch_request(batch: list[ReadableRange]):
        topic_cls = FetchRequest.FetchTopic
        part_cls = topic_cls.FetchPartition
        parts: dict[str, list] = defaultdict(list)
        for rng in batch:
            parts[rng.tp[0]].append(part_cls(partition=rng.tp[1], fetch_offset=rng.next_offset,
                                             partition_max_bytes=rng.budget_left))
        isolation = int(IsolationLevel.READ_COMMITTED)
        return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=sum(r.budget_left for r in batch),
                            isolation_level=isolation, topics=[topic_cls(topic=t, partitions=ps) for t, ps in parts.items()],
                            min_version=FetchRequest.min_version_for_isolation_level(isolation),
                            max_version=FETCH_BY_NAME_MAX_VERSION)

    def _read_fetch(self, leader: int, batch: list[ReadableRange], response: Any, exc: BaseException | None,
                    result: ReadableLagResult) -> list[ReadableRange]:
        """Feed each partition's records to its range; the ranges that advanced."""
        failed = error_name(exc) if exc is not None else _item_error(getattr(response, "error_code", 0) or 0)
        if failed:
            for rng in batch:
                self._range_failed(rng, ItemError(failed, broker=leader, topic=rng.tp[0], partition=rng.tp[1],
                                                  whole_request=exc is not None), result)
            return []
        by_tp = {rng.tp: rng for rng in batch}
        advanced = []
        for topic in response.responses:
            for p in topic.partitions:
                rng = by_tp.get((topic.topic, p.partition_index))
                if rng is not None and self._feed(leader, rng, p, result):
                    advanced.append(rng)
        return advanced

    def _feed(self, leader: int, rng: ReadableRange, partition: Any, result: ReadableLagResult) -> bool:
        err = _item_error(partition.error_code)
        if not err:
            result.fetched_bytes += len(partition.records or b"")
            try:
                return rng.feed(partition.records, partition.aborted_transactions)
            except Errors.KafkaError as exc:         # a corrupt batch, a compression codec this Python lacks
                err = error_name(exc)
        self._range_failed(rng, ItemError(err, broker=leader, topic=rng.tp[0], partition=rng.tp[1]), result)
        return False

    @staticmethod
    def _range_failed(rng: ReadableRange, error: ItemError, result: ReadableLagResult) -> None:
        rng.error = error.error
        result.errors.append(error)
