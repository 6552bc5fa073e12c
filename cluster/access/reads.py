"""Small direct probes of transactional behaviour: read a topic to its end at an isolation level,
list LSO and high watermark, and the commit/abort smoke workload.

Owns: reading helpers used by the readiness probe, the smoke workload and the integration tests.
Must not: hold a topic's records in memory beyond what the caller asked for (tests and smoke only).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from cluster.access.connection import ConnectionSettings
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import Deadline, WaitTimeout, wait_until

QUIET = {"log_level": 3}
# A leader that just took over (after a restart, an isolation, a preferred-leader election) answers these
# until its high watermark has caught up (KIP-207): ask again, within the caller's timeout.
TRANSIENT = {KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
             KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,     # leadership moving (a bounce)
             KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT}


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def partition_offsets(conn: ConnectionSettings, topic: str, partitions: list[int], committed: bool,
                      timeout: float = 10.0) -> dict[int, int]:
    """ListOffsets(latest) per partition: the LSO with committed=True, else the high watermark. Transient
    leader errors are asked again until `timeout`."""
    admin = AdminClient(conn.confluent(**QUIET))
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED

    def offsets() -> dict[int, int]:
        futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                     isolation_level=level, request_timeout=timeout)
        return {tp.partition: f.result(timeout).offset for tp, f in futures.items()}
    return wait_until(lambda: (offsets(),), timeout, f"{topic} offsets", 0.5, ignore=(KafkaException,),
                      ignore_if=lambda exc: exc.args[0].code() in TRANSIENT, reraise=True)[0]


def partition_ends(conn: ConnectionSettings, topic: str, partitions: list[int]) -> dict[str, dict[str, int]]:
    """{partition (str): {"hwm": high watermark, "lso": last stable offset}} now: what end_offsets.json records."""
    hwm = partition_offsets(conn, topic, partitions, committed=False)
    lso = partition_offsets(conn, topic, partitions, committed=True)
    return {str(p): {"hwm": hwm[p], "lso": lso[p]} for p in partitions}


def log_start_offsets(conn: ConnectionSettings, topic: str, partitions: list[int],
                      timeout: float = 10.0) -> dict[int, int]:
    """ListOffsets(earliest) per partition: where the log starts (> 0 once records were deleted)."""
    admin = AdminClient(conn.confluent(**QUIET))
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.earliest() for p in partitions},
                                 request_timeout=timeout)
    return {tp.partition: f.result(timeout).offset for tp, f in futures.items()}


def topic_partitions(conn: ConnectionSettings, topic: str, timeout: float = 10.0) -> list[int] | None:
    """The partitions of `topic`, or None when the cluster does not know it."""
    metadata = AdminClient(conn.confluent(**QUIET)).list_topics(topic, timeout=timeout)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return sorted(found.partitions)


def read_to_end(conn: ConnectionSettings, topic: str, committed: bool, timeout: float = 30.0) -> list[Record]:
    """Every record of topic visible at the isolation level, read until each partition's position
    reaches its end (LSO for read_committed, high watermark otherwise)."""
    consumer = Consumer(conn.confluent(**QUIET, **{"group.id": f"txnlab-probe-{uuid.uuid4().hex[:8]}",
                                                   "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                                   "isolation.level": "read_committed" if committed else "read_uncommitted"}))
    try:
        parts = sorted(consumer.list_topics(topic, timeout=timeout).topics[topic].partitions)
        ends = partition_offsets(conn, topic, parts, committed)
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        return _drain(consumer, topic, ends, timeout)
    finally:
        consumer.close()


def _drain(consumer: Consumer, topic: str, ends: dict[int, int], timeout: float) -> list[Record]:
    records: list[Record] = []
    deadline = Deadline(timeout)
    pending = {p for p, end in ends.items() if end > 0}
    while pending:
        if deadline.expired:
            raise WaitTimeout(f"{topic}: partitions {sorted(pending)} not read to their end in {timeout:.0f}s")
        for msg in consumer.consume(500, 0.5):
            partition, offset = msg.partition(), msg.offset()
            if msg.error() is None and partition is not None and offset is not None:
                records.append(Record(partition, offset, msg.key(), msg.value()))
        positions = consumer.position([TopicPartition(topic, p) for p in pending])
        pending -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
    return records


def committed_and_aborted(conn: ConnectionSettings, transactions: int = 20, per_txn: int = 5,
                          topic: str = "txnlab-smoke") -> dict[str, int]:
    """Alternately commit and abort transactions, then check both isolation levels see what they must."""
    ensure_topic(conn, topic)
    run = uuid.uuid4().hex[:8]
    producer = Producer(conn.confluent(**QUIET, **{"transactional.id": f"txnlab-smoke-{run}"}))
    producer.init_transactions(30)
    committed, aborted = set(), set()
    for t in range(transactions):
        ids = {f"{run}-{t}-{i}" for i in range(per_txn)}
        producer.begin_transaction()
        for rid in sorted(ids):
            producer.produce(topic, key=rid.encode(), value=rid.encode())
        if t % 2 == 0:
            producer.commit_transaction(30)
            committed |= ids
        else:
            producer.flush(30)
            producer.abort_transaction(30)
            aborted |= ids
    seen_committed = {r.value.decode() for r in read_to_end(conn, topic, True) if r.value and r.value.startswith(run.encode())}
    seen_all = {r.value.decode() for r in read_to_end(conn, topic, False) if r.value and r.value.startswith(run.encode())}
    return {"transactions_committed": (transactions + 1) // 2, "transactions_aborted": transactions // 2,
            "records_committed": len(committed), "records_aborted": len(aborted),
            "read_committed_saw": len(seen_committed), "read_uncommitted_saw": len(seen_all),
            "committed_missing": len(committed - seen_committed), "aborted_visible": len(aborted & seen_committed)}
