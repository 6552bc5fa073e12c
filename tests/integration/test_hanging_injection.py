"""The hanging-transaction injector and the producer flood against real brokers.

The drill cluster (verification off) gets real hanging transactions, each aborted again (through
cluster.access.abort, the one abort path) by the fixture that made it; the verification-on cluster must refuse them and stay untouched.
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, ProducerState, TransactionState
from kafka.protocol.consumer.offsets import IsolationLevel, OffsetSpec
from kafka.structs import TopicPartition

from chaos.nemesis.inject_hanging import InjectedHanging, VerificationEnabledError, inject_hanging
from chaos.nemesis.producer_flood import flood_producer_ids
from cluster.access.abort import ExpectedTransaction, abort_transaction
from cluster.lab import versions
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_core]


@pytest.fixture
def drill_admin(drill_conn):
    with KafkaAdminClient(**drill_conn.kafka_python()) as client:
        yield client


@pytest.fixture
def injected(drill_conn, drill_admin):
    """A hanging transaction (2 records) on partition 0 of a fresh 1-partition drill topic, after 3
    plain records; aborted at teardown if a test left it open."""
    topic = f"hang-{uuid.uuid4().hex[:10]}"
    ensure_topic(drill_conn, topic, partitions=1, replication=1)
    write_plain(drill_conn, topic, 3)
    hanging = inject_hanging(drill_conn, topic, 0, records=2)
    yield hanging
    state = producer_state(drill_admin, tp_of(hanging), hanging.producer_id)
    if state is not None and state.current_transaction_start_offset >= 0:
        abort(drill_conn, hanging)


def tp_of(hanging: InjectedHanging) -> TopicPartition:
    return TopicPartition(hanging.topic, hanging.partition)


def write_plain(conn: ConnectionSettings, topic: str, count: int) -> None:
    """Non-idempotent, non-transactional records (they add no producer state)."""
    producer = Producer(conn.confluent(**{"enable.idempotence": False, "acks": "all"}))
    for i in range(count):
        producer.produce(topic, value=f"plain-{uuid.uuid4().hex}-{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def lso_and_hwm(admin: KafkaAdminClient, tp: TopicPartition) -> tuple[int, int]:
    lso = admin.list_partition_offsets({tp: OffsetSpec.LATEST}, isolation_level=IsolationLevel.READ_COMMITTED)
    hwm = admin.list_partition_offsets({tp: OffsetSpec.LATEST})
    return lso[tp].offset, hwm[tp].offset


def producer_states(admin: KafkaAdminClient, tp: TopicPartition) -> list[ProducerState]:
    return admin.describe_producers([tp])[tp].active_producers


def producer_state(admin: KafkaAdminClient, tp: TopicPartition, producer_id: int) -> ProducerState | None:
    return next((s for s in producer_states(admin, tp) if s.producer_id == producer_id), None)


def abort(conn: ConnectionSettings, hanging: InjectedHanging) -> None:
    with ClusterAdmin(conn) as admin:
        abort_transaction(admin, ExpectedTransaction(hanging.topic, hanging.partition, hanging.producer_id,
                                                     hanging.producer_epoch, hanging.start_offset))


def test_injection_leaves_an_open_transaction_and_a_stuck_lso(injected, drill_conn, drill_admin):
    tp = tp_of(injected)
    assert injected.start_offset == 3
    state = producer_state(drill_admin, tp, injected.producer_id)
    assert state is not None and state.producer_epoch == injected.producer_epoch
    assert state.current_transaction_start_offset == injected.start_offset

    write_plain(drill_conn, injected.topic, 4)
    expected_hwm = injected.start_offset + 2 + 4
    wait_until(lambda: lso_and_hwm(drill_admin, tp)[1] == expected_hwm, 10, "HWM past the hanging transaction")
    assert lso_and_hwm(drill_admin, tp) == (injected.start_offset, expected_hwm)


def test_the_coordinator_does_not_know_the_partition(injected, drill_admin):
    description = drill_admin.describe_transactions([injected.transactional_id])[injected.transactional_id]
    assert description.producer_id == injected.producer_id
    assert description.state == TransactionState.EMPTY
    assert tp_of(injected) not in description.topic_partitions


def test_an_admin_abort_clears_it_and_the_lso_catches_up(injected, drill_conn, drill_admin):
    tp = tp_of(injected)
    abort(drill_conn, injected)

    def caught_up() -> bool:
        lso, hwm = lso_and_hwm(drill_admin, tp)
        return lso == hwm > injected.start_offset + 2       # the abort marker is one more offset
    wait_until(caught_up, 15, "LSO to catch up with the HWM after the abort")
    assert producer_state(drill_admin, tp, injected.producer_id).current_transaction_start_offset == -1


def test_a_verifying_cluster_refuses_and_writes_nothing(conn, topic):
    """The shared cluster runs its release's defaults: from Kafka 3.6 on, partition verification (KIP-890 part 1),
    which the injector refuses; Kafka 3.5 has none, so there the default cluster takes the injection (the hole of
    KAFKA-14402, docs/kafka-versions.md), which is aborted again."""
    tp = TopicPartition(topic, 0)
    with KafkaAdminClient(**conn.kafka_python()) as admin:
        before = lso_and_hwm(admin, tp)
        if versions.release() < (3, 6):
            hanging = inject_hanging(conn, topic, 0)
            try:
                assert lso_and_hwm(admin, tp)[0] == before[0] and lso_and_hwm(admin, tp)[1] > before[1]
                assert producer_state(admin, tp, hanging.producer_id).current_transaction_start_offset == before[1]
            finally:
                abort(conn, hanging)
            return
        with pytest.raises(VerificationEnabledError, match="KIP-890.*--hanging-drill"):
            inject_hanging(conn, topic, 0)
        assert lso_and_hwm(admin, tp) == before
        assert producer_states(admin, tp) == []


def test_a_flood_adds_one_active_producer_per_id(conn, topic):
    tp = TopicPartition(topic, 1)
    with KafkaAdminClient(**conn.kafka_python()) as admin:
        before = len(producer_states(admin, tp))
        result = flood_producer_ids(conn, topic, [1], 300)
        assert (result.count, result.ids_per_partition) == (300, {1: 300})
        states = producer_states(admin, tp)
    assert len(states) == before + 300
    assert all(s.current_transaction_start_offset == -1 and s.last_sequence == 0 for s in states)
