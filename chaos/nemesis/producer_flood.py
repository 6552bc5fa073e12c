"""Producer-state growth load: many short-lived idempotent producers, each writing once; and many
transactional ids, each initialised once (the coordinators' side of a large cluster).

Owns: creating `count` distinct idempotent producer ids (InitProducerId without a transactional id)
and writing one idempotent batch (sequence 0, not transactional) per id to the given partitions,
round-robin, pipelined. Each id then occupies one producer-state entry on its partition's replicas
until producer.id.expiration.ms (default 1 day) after its write: the leak the seed describes, sped up.
`init_transactional_ids`: InitProducerId once for each of `count` transactional ids, pipelined to their
coordinators; each id is then held by its coordinator (state Empty, listed by ListTransactions) until
transactional.id.expiration.ms (default 7 days) passes.
Must not: write transactionally, write to partitions it was not given, or clean up (producer state
cannot be removed by a client; it expires).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.protocol.producer import ProduceRequest
from kafka.structs import TopicPartition

from chaos.nemesis import _raw_produce as raw
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.errors import TxnlabError

FLOOD_WINDOW = 64           # requests in flight per connection
CHUNK = 2000                # ids initialised, then written, per step
NO_PROGRESS_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.05

Progress = Callable[[int, int], None]


class FloodError(TxnlabError, RuntimeError):
    """The flood could not create or write producer ids."""


@dataclass(frozen=True)
class FloodResult:
    topic: str
    partitions: tuple[int, ...]
    count: int
    elapsed_s: float
    ids_per_partition: dict[int, int]

    @property
    def ids_per_second(self) -> float:
        return self.count / self.elapsed_s if self.elapsed_s > 0 else float("inf")


def flood_producer_ids(conn: ConnectionSettings, topic: str, partitions: list[int], count: int,
                       progress: Progress | None = None) -> FloodResult:
    """Create `count` idempotent producer ids, each writing one batch to partitions[i % len(partitions)]."""
    if not partitions or len(set(partitions)) != len(partitions) or count < 0:
        raise ValueError("flood needs distinct partitions (at least one) and a count >= 0")
    leaders = partition_leaders(conn, topic, partitions)
    started = time.monotonic()
    with KafkaAdminClient(**conn.kafka_python(max_in_flight_requests_per_connection=FLOOD_WINDOW)) as client:
        for done in range(0, count, CHUNK):
            size = min(CHUNK, count - done)
            producers = init_producer_ids(client, size, sorted(set(leaders.values())))
            write_once(client, topic, assign_round_robin(partitions, producers, offset=done), leaders)
            if progress:
                progress(done + size, count)
    return FloodResult(topic, tuple(partitions), count, time.monotonic() - started,
                       ids_per_partition(partitions, count))


def init_transactional_ids(conn: ConnectionSettings, prefix: str, count: int, timeout_ms: int = 60_000,
                           progress: Progress | None = None) -> dict:
    """InitProducerId once for each of `prefix`-00000.. (`count` transactional ids), CHUNK at a time, each
    sent to its coordinator (FindCoordinator, one id after the other); a retriable refusal is asked again
    (a moved coordinator found again). What it did: the ids, how long, the retries."""
    if count < 0:
        raise ValueError("count >= 0")
    ids = [f"{prefix}-{i:05d}" for i in range(count)]
    started, retries = time.monotonic(), 0
    with ClusterAdmin(conn) as admin, \
            KafkaAdminClient(**conn.kafka_python(max_in_flight_requests_per_connection=FLOOD_WINDOW)) as client:
        for done in range(0, count, CHUNK):
            pending = {t: admin.coordinator_of(t) for t in ids[done:done + CHUNK]}
            last_progress = time.monotonic()
            while pending:
                order = list(pending)
                requests = [(raw.init_producer_id_request(t, timeout_ms), pending[t]) for t in order]
                refused: BaseException | None = None
                for t, response in zip(order, raw.send_pipelined(client, requests, FLOOD_WINDOW)):
                    try:
                        raw.producer_id_of(response)
                    except (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError) as exc:
                        refused, pending[t] = exc, admin.coordinator_of(t)
                    except Errors.RetriableError as exc:
                        refused = exc
                    else:
                        del pending[t]
                        last_progress = time.monotonic()
                if refused is not None:
                    retries += 1
                    if time.monotonic() - last_progress > NO_PROGRESS_TIMEOUT_S:
                        raise FloodError(f"InitProducerId of {len(pending)} transactional ids made no progress for "
                                         f"{NO_PROGRESS_TIMEOUT_S:.0f}s: {refused!r}")
                    time.sleep(RETRY_BACKOFF_S)
            if progress:
                progress(min(done + CHUNK, count), count)
    return {"transactional_ids": count, "prefix": prefix, "retries": retries,
            "seconds": round(time.monotonic() - started, 1)}


def partition_leaders(conn: ConnectionSettings, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    with ClusterAdmin(conn) as admin:
        leaders = {s.partition: s.leader for s in admin.partitions(topic) if s.leader is not None}
    missing = [p for p in partitions if p not in leaders]
    if missing:
        raise FloodError(f"{topic}: no leader for partitions {missing}")
    return {p: leaders[p] for p in partitions}


def ids_per_partition(partitions: Sequence[int], count: int) -> dict[int, int]:
    """How many of `count` round-robin ids land on each partition."""
    n = len(partitions)
    return {p: count // n + (1 if i < count % n else 0) for i, p in enumerate(partitions)}


def assign_round_robin(partitions: Sequence[int], producers: Sequence[raw.ProducerIdAndEpoch],
                       offset: int = 0) -> list[tuple[int, raw.ProducerIdAndEpoch]]:
    """Pair producer i with partitions[(offset + i) % len(partitions)]."""
    n = len(partitions)
    return [(partitions[(offset + i) % n], producer) for i, producer in enumerate(producers)]


def init_producer_ids(client: KafkaAdminClient, count: int, nodes: Sequence[int]) -> list[raw.ProducerIdAndEpoch]:
    """`count` new idempotent producer ids, spread over `nodes`; retriable refusals are asked again.

    A broker hands out ids from blocks the controller allocates (1000 at a time); asked faster than
    it prefetches the next block, it answers COORDINATOR_LOAD_IN_PROGRESS for a moment."""
    producers: list[raw.ProducerIdAndEpoch] = []
    last_progress = time.monotonic()
    while len(producers) < count:
        wanted = count - len(producers)
        requests = [(raw.init_producer_id_request(None, 0), nodes[i % len(nodes)]) for i in range(wanted)]
        got, refused = _producer_ids(raw.send_pipelined(client, requests, FLOOD_WINDOW))
        producers.extend(got)
        if got:
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > NO_PROGRESS_TIMEOUT_S:
            raise FloodError(f"InitProducerId made no progress for {NO_PROGRESS_TIMEOUT_S:.0f}s: {refused!r}")
        if refused:
            time.sleep(RETRY_BACKOFF_S)
    return producers


def _producer_ids(responses: Sequence[object]) -> tuple[list[raw.ProducerIdAndEpoch], BaseException | None]:
    got: list[raw.ProducerIdAndEpoch] = []
    refused: BaseException | None = None
    for response in responses:
        try:
            got.append(raw.producer_id_of(response))
        except Errors.RetriableError as exc:
            refused = exc
    return got, refused


def write_once(client: KafkaAdminClient, topic: str, assignments: Sequence[tuple[int, raw.ProducerIdAndEpoch]],
               leaders: dict[int, int]) -> None:
    """One idempotent single-record batch (sequence 0) per (partition, producer), pipelined."""
    requests = list(produce_requests(topic, assignments, leaders))
    for response in raw.send_pipelined(client, requests, FLOOD_WINDOW):
        raw.produce_offsets(response)


def produce_requests(topic: str, assignments: Sequence[tuple[int, raw.ProducerIdAndEpoch]],
                     leaders: dict[int, int]) -> Iterator[tuple[ProduceRequest, int]]:
    """(request, leader) pairs; a request carries at most one batch per partition (a Produce v3+ rule).

    acks=1: a broker serves one request per connection at a time, and with acks=all each waits for a
    follower fetch round trip (~9 ms on the local 3-node cluster: ~100 ids/s for one partition). The
    producer state this load grows comes from the append itself, on the leader at once and on the
    followers as they replicate, so waiting for them adds nothing but time."""
    rounds: list[dict[int, dict[TopicPartition, bytes]]] = []
    seen: dict[int, int] = {}
    for partition, producer in assignments:
        index = seen.get(partition, 0)
        seen[partition] = index + 1
        if index == len(rounds):
            rounds.append({})
        value = f"txnlab-flood:{producer.producer_id}".encode()
        batch = raw.build_batch(producer.producer_id, producer.epoch, 0, [value], transactional=False)
        rounds[index].setdefault(leaders[partition], {})[TopicPartition(topic, partition)] = batch
    for by_leader in rounds:
        for leader, batches in by_leader.items():
            yield raw.produce_request(batches, acks=raw.ACKS_LEADER), leader
