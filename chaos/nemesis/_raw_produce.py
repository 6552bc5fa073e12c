"""Raw Produce and InitProducerId: the one way chaos faults write batches no well-behaved client writes.

Owns: building one record batch with a chosen producer id, epoch, base sequence and transactional
flag; the InitProducerId and Produce requests (with their pinned protocol versions) and reading their
responses; sending them through a kafka-python KafkaAdminClient's connection manager, one at a time
or pipelined through a sliding window.
Must not: decide what to inject (inject_hanging.py and producer_flood.py do), send AddPartitionsToTxn, or
retry a Produce (each request here is meant to be exactly one write).
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.structs import TopicPartition

# Produce v0-2 are gone since Kafka 4.0 (KIP-896) and v3 is the first with a TransactionalId.
# v12+ from a transactional producer means "transaction version 2" (KIP-890 part 2): the leader then
# always asks the coordinator to add the partition to the transaction, whatever
# transaction.partition.verification.enable says, so the coordinator would know the partition and
# nothing would hang. Up to v11 the leader skips that call when verification is off.
PRODUCE_MIN_VERSION = 3
PRODUCE_MAX_VERSION = 11
# InitProducerId v6 (KIP-939 two-phase commit) is marked unstable; v5 is the last stable version.
INIT_PRODUCER_ID_MAX_VERSION = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAGIC_V2 = 2
NO_COMPRESSION = 0
ACKS_ALL = -1
ACKS_LEADER = 1
# How long the leader may wait for the ISR before answering REQUEST_TIMED_OUT: below the admin
# clients' request timeout (10 s in ClusterAdmin), so the broker answers before the client gives up.
PRODUCE_ACK_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


def build_batch(producer_id: int, producer_epoch: int, base_sequence: int, values: Sequence[bytes],
                transactional: bool, timestamp_ms: int | None = None) -> bytes:
    """One uncompressed v2 record batch carrying `values` (keyless), stamped with the producer state."""
    builder = DefaultRecordBatchBuilder(MAGIC_V2, NO_COMPRESSION, transactional, producer_id, producer_epoch,
                                        base_sequence, batch_size=1 << 30)
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for offset_delta, value in enumerate(values):
        builder.append(offset_delta, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(batches: Mapping[TopicPartition, bytes], transactional_id: str | None = None,
                    acks: int = ACKS_ALL, timeout_ms: int = PRODUCE_ACK_TIMEOUT_MS) -> ProduceRequest:
    """A Produce request with one batch per partition (Produce v3+ allows no more)."""
    Topic = ProduceRequest.TopicProduceData
    Partition = Topic.PartitionProduceData
    by_topic: dict[str, list[Any]] = {}
    for tp, batch in batches.items():
        by_topic.setdefault(tp.topic, []).append(Partition(index=tp.partition, records=batch))
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[Topic(name=name, partition_data=parts) for name, parts in by_topic.items()],
                          min_version=PRODUCE_MIN_VERSION, max_version=PRODUCE_MAX_VERSION)


def produce_offsets(response: Any) -> dict[TopicPartition, int]:
    """The base offset written per partition; raises the broker's error for any failed partition."""
    offsets = {}
    for topic in response.responses:
        for part in topic.partition_responses:
            tp = TopicPartition(topic.name, part.index)
            error = Errors.for_code(part.error_code)
            if error is not Errors.NoError:
                detail = getattr(part, "error_message", None)
                raise error(f"produce to {tp.topic}-{tp.partition}" + (f": {detail}" if detail else ""))
            offsets[tp] = part.base_offset
    return offsets


def init_producer_id_request(transactional_id: str | None, transaction_timeout_ms: int) -> InitProducerIdRequest:
    """InitProducerId for a new producer: transactional when transactional_id is set, else idempotent."""
    return InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                 producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH,
                                 max_version=INIT_PRODUCER_ID_MAX_VERSION)


def producer_id_of(response: Any) -> ProducerIdAndEpoch:
    error = Errors.for_code(response.error_code)
    if error is not Errors.NoError:
        raise error("InitProducerId")
    return ProducerIdAndEpoch(response.producer_id, response.producer_epoch)


def send(client: KafkaAdminClient, request: Any, node_id: int) -> Any:
    """Send one request to broker node_id and wait for its response."""
    manager = client._manager
    return manager.run(manager.send, request, node_id)


def send_pipelined(client: KafkaAdminClient, requests: Iterable[tuple[Any, int]], window: int) -> list[Any]:
    """Send (request, node_id) pairs keeping at most `window` in flight; responses in request order.

    `window` must not exceed the client's max_in_flight_requests_per_connection, or the connection
    refuses the extra request (kafka-python fails it rather than queueing it)."""
    manager = client._manager

    async def pipeline() -> list[Any]:
        pending: deque[Any] = deque()
        responses: list[Any] = []
        for request, node_id in requests:
            if len(pending) >= window:
                responses.append(await pending.popleft())
            pending.append(manager.send(request, node_id=node_id))
        for future in pending:
            responses.append(await future)
        return responses

    return manager.run(pipeline)
