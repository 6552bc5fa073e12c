"""The one administrative abort (cluster.access.abort, `txnlab txn abort`) on the drill cluster (verification off,
transaction.version=1): a live transaction is refused and commits whole (or, forced, is torn as the docs
say); a transaction that ended since it was seen is refused and nothing is written; a hanging one is aborted.
"""
from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import Producer
from kafka.structs import TopicPartition

from chaos.nemesis import _raw_produce as raw
from chaos.nemesis.inject_hanging import InjectedHanging, inject_hanging
from cluster.access.abort import AbortRefused, abort_transaction, open_transaction, partition_producers
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.lab.layout import DRILL_TXN_MAX_TIMEOUT_MS
from cluster.access.reads import partition_offsets, read_to_end
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import wait_until
from tests import cli

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_core]


def txnlab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real CLI; stderr with rich's line wrapping undone."""
    proc = cli.txnlab(*args, env=env)
    proc.stderr = " ".join(proc.stderr.split())
    return proc


def fresh_topic(conn: ConnectionSettings, prefix: str, partitions: int) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:10]}"
    ensure_topic(conn, topic, partitions=partitions, replication=1)
    return topic


def lso_and_hwm(conn: ConnectionSettings, topic: str) -> tuple[int, int]:
    return partition_offsets(conn, topic, [0], committed=True)[0], partition_offsets(conn, topic, [0], committed=False)[0]


def caught_up(conn: ConnectionSettings, topic: str, past: int) -> bool:
    lso, hwm = lso_and_hwm(conn, topic)
    return lso == hwm > past


@pytest.fixture
def live_producer(drill_conn):
    """(topic, producer, producer id): a transactional producer with an open transaction holding 3
    records on each of the 2 partitions of a fresh topic."""
    topic = fresh_topic(drill_conn, "live", 2)
    producer = Producer(drill_conn.confluent(**{"transactional.id": f"live-{uuid.uuid4().hex[:8]}", "log_level": 3,
                                                "transaction.timeout.ms": DRILL_TXN_MAX_TIMEOUT_MS}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in (0, 1):
        for i in range(3):
            producer.produce(topic, value=f"live-{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    with ClusterAdmin(drill_conn) as admin:
        (state,) = partition_producers(admin, TopicPartition(topic, 0))
    assert state.current_transaction_start_offset == 0
    yield topic, producer, state.producer_id
    if _still_open(drill_conn, topic, state.producer_id):      # a failed test must not leave it open
        producer.abort_transaction(30)


def _still_open(conn: ConnectionSettings, topic: str, producer_id: int) -> bool:
    with ClusterAdmin(conn) as admin:
        return any(open_transaction(admin, topic, p, producer_id) for p in (0, 1))


def abort_cli(conn: ConnectionSettings, topic: str, producer_id: int, *extra: str) -> subprocess.CompletedProcess:
    return txnlab("txn", "abort", "--topic", topic, "--partition", "0", "--producer-id", str(producer_id), "--yes",
                  *extra, env={"TXNLAB_KAFKA_BOOTSTRAP": conn.bootstrap})


def test_a_live_transaction_is_refused_and_then_commits_whole(drill_conn, live_producer):
    topic, producer, producer_id = live_producer
    hwm_before = partition_offsets(drill_conn, topic, [0], committed=False)[0]

    refused = abort_cli(drill_conn, topic, producer_id)
    assert refused.returncode == 2, refused.stderr
    assert "still tracks transactional id live-" in refused.stderr and "as Ongoing with " + topic + "-0" in refused.stderr
    assert "nothing written" in refused.stderr and "Traceback" not in refused.stderr
    assert partition_offsets(drill_conn, topic, [0], committed=False)[0] == hwm_before      # no marker

    producer.commit_transaction(30)
    committed = read_to_end(drill_conn, topic, committed=True)
    assert sorted(r.value.decode() for r in committed) == [f"live-{p}-{i}" for p in (0, 1) for i in range(3)]


def test_a_forced_abort_of_a_live_transaction_tears_it_as_documented(drill_conn, live_producer):
    topic, producer, producer_id = live_producer
    forced = abort_cli(drill_conn, topic, producer_id, "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"aborted {topic}-0 producer {producer_id}" in forced.stderr and "(forced: coordinator" in forced.stderr

    producer.commit_transaction(30)                     # the coordinator knows nothing of the abort: it succeeds
    committed = read_to_end(drill_conn, topic, committed=True)
    assert sorted(r.value.decode() for r in committed) == [f"live-1-{i}" for i in range(3)]  # partition 0 lost


def abort_if_open(conn: ConnectionSettings, injected: InjectedHanging) -> None:
    with ClusterAdmin(conn) as admin:
        current = open_transaction(admin, injected.topic, injected.partition, injected.producer_id)
        if current is not None:
            abort_transaction(admin, current)


def write_again(admin: ClusterAdmin, injected: InjectedHanging, base_sequence: int) -> int:
    """One more transactional batch of the injected producer id and epoch, without AddPartitionsToTxn:
    under transaction.version 1 the same producer's next transaction; its start offset."""
    tp = TopicPartition(injected.topic, injected.partition)
    batch = raw.build_batch(injected.producer_id, injected.producer_epoch, base_sequence, [b"next"], transactional=True)
    request = raw.produce_request({tp: batch}, transactional_id=injected.transactional_id)
    return raw.produce_offsets(raw.send(admin.client, request, admin.leader_of(tp.topic, tp.partition)))[tp]


def test_an_abort_of_a_transaction_that_ended_since_it_was_seen_is_refused_and_writes_nothing(drill_conn):
    topic = fresh_topic(drill_conn, "stale", 1)
    injected = inject_hanging(drill_conn, topic, 0, records=1)
    with ClusterAdmin(drill_conn) as admin:
        seen = open_transaction(admin, topic, 0, injected.producer_id)       # what the operator saw
        assert (seen.producer_epoch, seen.start_offset) == (injected.producer_epoch, injected.start_offset)
        abort_transaction(admin, seen)
        wait_until(lambda: caught_up(drill_conn, topic, injected.start_offset), 15, "the first abort to land")
        next_start = write_again(admin, injected, base_sequence=1)
        try:
            assert next_start > seen.start_offset
            before = lso_and_hwm(drill_conn, topic)
            assert before == (next_start, next_start + 1)
            with pytest.raises(AbortRefused, match=f"changed since the verdict: start offset {seen.start_offset} -> "
                                                   f"{next_start}.*nothing written"):
                abort_transaction(admin, seen)
            assert lso_and_hwm(drill_conn, topic) == before                 # LSO still at the new one, no marker
        finally:
            abort_if_open(drill_conn, injected)
    wait_until(lambda: caught_up(drill_conn, topic, next_start), 15, "the LSO to catch up after the clean-up")


def test_a_hanging_transaction_is_aborted_by_abort_hanging(drill_conn):
    topic = fresh_topic(drill_conn, "hang-abort", 1)
    injected = inject_hanging(drill_conn, topic, 0, records=2)
    try:
        done = txnlab("txn", "abort", "--hanging", "--yes", "--confirm-after", "1",
                      env={"TXNLAB_KAFKA_BOOTSTRAP": drill_conn.bootstrap,
                           "TXNLAB_EXPORTER__FILTERS__TOPIC_ALLOW": topic})   # only this test's topic
        assert done.returncode == 0, done.stderr
        assert (f"aborted {topic}-0 producer {injected.producer_id} epoch {injected.producer_epoch} "
                f"start offset {injected.start_offset}") in done.stderr
        wait_until(lambda: caught_up(drill_conn, topic, injected.start_offset + 1), 15, "the LSO to catch up")
    finally:
        abort_if_open(drill_conn, injected)         # a failed run must not leave it hanging on the shared cluster
