"""A transactional produce + commit round-trip: the readiness probe of a cluster and the smoke workload.

Owns: creating a replicated probe topic and committing one transaction to it. Used by
`cluster up` (ready means transactions work) and by `make demo` until the full demo exists.
"""
from __future__ import annotations

import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.access.connection import ConnectionSettings
from cluster.access.waiting import NotYet, wait_until

READY_TOPIC = "txnlab-ready"


def ensure_topic(conn: ConnectionSettings, topic: str, partitions: int = 3, replication: int = -1,
                 config: dict[str, str] | None = None, timeout: float = 30.0, leader_shift: int | None = None) -> None:
    """Create topic if missing (idempotent) and wait until every broker knows it with a leader for every
    partition (brokers apply new metadata at their own pace: asking one is not enough, a describe sent to
    another just after creation can still answer UNKNOWN_TOPIC_OR_PARTITION).

    replication -1 takes the broker's default.replication.factor (KIP-464). leader_shift: place the replicas
    instead of Kafka's default assignment: partition p on `replication` brokers (3 when -1, at most all)
    taken in id order from index (p + leader_shift) mod n, that one first: its preferred leader (topics with
    different shifts never have a partition number led by the same broker)."""
    admin = AdminClient(conn.confluent())
    cluster = admin.list_topics(timeout=timeout)
    if topic not in cluster.topics:
        if leader_shift is None:
            new = NewTopic(topic, partitions, replication, config=config or {})
        else:
            brokers = sorted(cluster.brokers)
            factor = min(len(brokers), 3 if replication < 0 else replication)
            assignment = shifted_assignment(brokers, partitions, leader_shift, factor)
            new = NewTopic(topic, partitions, -1, replica_assignment=assignment, config=config or {})
        future = admin.create_topics([new])[topic]
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
    wait_until(lambda: _led_everywhere(conn, admin, topic, partitions, timeout), timeout,
               f"topic {topic} with a leader for every partition on every broker", 0.2)


def shifted_assignment(brokers: list[int], partitions: int, shift: int, factor: int) -> list[list[int]]:
    """Each partition's `factor` replicas, partition p's taken in order from index (p + shift) mod n."""
    n = len(brokers)
    return [[brokers[(p + shift + i) % n] for i in range(factor)] for p in range(partitions)]


def _led_everywhere(conn: ConnectionSettings, admin: AdminClient, topic: str, partitions: int,
                    timeout: float) -> bool | NotYet:
    cluster = admin.list_topics(topic, timeout=timeout)
    if not _led(cluster.topics.get(topic), partitions):
        return NotYet("no leader for every partition")
    brokers = [f"{b.host}:{b.port}" for b in cluster.brokers.values()]
    waiting = [b for b in brokers if not _led(_topic_seen_by(conn, b, topic, timeout), partitions)]
    return NotYet(f"brokers {waiting} do not know it yet") if waiting else True


def _led(meta, partitions: int) -> bool:
    return bool(meta) and meta.error is None and len(meta.partitions) == partitions and \
        all(p.leader >= 0 for p in meta.partitions.values())


def _topic_seen_by(conn: ConnectionSettings, broker: str, topic: str, timeout: float):
    """The topic's metadata as one broker answers it (a fresh client's first request goes to its bootstrap)."""
    try:
        return AdminClient(conn.confluent(**{"bootstrap.servers": broker})).list_topics(topic, timeout=timeout) \
            .topics.get(topic)
    except KafkaException:
        return None


def transactional_round_trip(conn: ConnectionSettings, timeout: float = 60.0, records: int = 3) -> str:
    """Commit one transaction of `records` records to READY_TOPIC; returns its transactional.id."""
    ensure_topic(conn, READY_TOPIC, timeout=timeout)
    txn_id = f"txnlab-ready-{uuid.uuid4().hex[:8]}"
    producer = Producer(conn.confluent(**{"transactional.id": txn_id, "enable.idempotence": True, "log_level": 3,
                                          "transaction.timeout.ms": 10000}))
    producer.init_transactions(timeout)
    producer.begin_transaction()
    for i in range(records):
        producer.produce(READY_TOPIC, key=str(i).encode(), value=f"{txn_id}:{i}".encode())
    producer.commit_transaction(timeout)
    return txn_id


def topic_id(conn: ConnectionSettings, topic: str, timeout: float = 10.0) -> str | None:
    """The topic's id (KIP-516) as the cluster describes it now, None when it does not know the topic."""
    from confluent_kafka import TopicCollection
    admin = AdminClient(conn.confluent(log_level=3))
    try:
        return str(admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result(timeout)
                   .topic_id)
    except KafkaException as exc:
        if exc.args[0].name() == "UNKNOWN_TOPIC_OR_PART":
            return None
        raise


def delete_topic(conn: ConnectionSettings, topic: str, timeout: float = 30.0) -> None:
    """Delete `topic` and wait until no broker's metadata holds it any more (a broker applies the deletion at its
    own pace: ensure_topic asked of one that has not would find the old topic and create nothing)."""
    admin = AdminClient(conn.confluent(log_level=3))
    try:
        admin.delete_topics([topic], operation_timeout=timeout)[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":
            raise

    def gone() -> bool | NotYet:
        cluster = admin.list_topics(timeout=timeout)
        if topic in cluster.topics:
            return NotYet("the controller's metadata still lists it")
        brokers = [f"{b.host}:{b.port}" for b in cluster.brokers.values()]
        knowing = [b for b in brokers if _known(_topic_seen_by(conn, b, topic, timeout))]
        return NotYet(f"brokers {knowing} still know it") if knowing else True
    wait_until(gone, timeout, f"topic {topic} gone from every broker", 0.2)


def _known(meta) -> bool:
    """A broker's answer about a topic names it (an unknown topic comes back with an error, or not at all)."""
    return meta is not None and meta.error is None
