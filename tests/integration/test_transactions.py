"""Transactions on the real cluster: commit/abort visibility per isolation level, and the LSO."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from cluster.access.reads import partition_offsets, read_to_end
from cluster.access.waiting import wait_until

pytestmark = pytest.mark.kafka_core      # the version matrix's core (scripts/kafka_matrix.py)


def _producer(conn, txn_id=None):
    producer = Producer(conn.confluent(**{"transactional.id": txn_id or f"it-{uuid.uuid4().hex[:8]}",
                                          "log_level": 3}))
    producer.init_transactions(60)
    return producer


def _send_transaction(producer, topic, ids, commit):
    producer.begin_transaction()
    for i, rid in enumerate(ids):
        producer.produce(topic, value=rid.encode(), partition=i % 3)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


def _values(records):
    return [r.value.decode() for r in records]


def test_read_committed_sees_exactly_committed_and_read_uncommitted_sees_aborted(conn, topic):
    producer = _producer(conn)
    committed = [f"c-{i}" for i in range(30)]
    aborted = [f"a-{i}" for i in range(20)]
    _send_transaction(producer, topic, committed[:15], commit=True)
    _send_transaction(producer, topic, aborted, commit=False)
    _send_transaction(producer, topic, committed[15:], commit=True)

    seen_committed = _values(read_to_end(conn, topic, committed=True))
    seen_uncommitted = _values(read_to_end(conn, topic, committed=False))

    assert sorted(seen_committed) == sorted(committed)          # exactly, no duplicates
    assert sorted(seen_uncommitted) == sorted(committed + aborted)


def test_lso_stays_below_high_watermark_while_a_transaction_is_open(conn, topic):
    producer = _producer(conn)
    _send_transaction(producer, topic, ["before"], commit=True)   # partition 0: record + marker
    start = wait_until(lambda: _lso_equals_hwm(conn, topic), 30, "the first commit marker")[1]
    assert start == 2

    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"open-{i}".encode(), partition=0)
    producer.flush(30)
    hwm = partition_offsets(conn, topic, [0], committed=False)[0]
    lso = partition_offsets(conn, topic, [0], committed=True)[0]
    assert hwm == start + 5
    assert lso == start < hwm                    # LSO = first offset of the open transaction

    producer.commit_transaction(30)
    final = wait_until(lambda: _lso_equals_hwm(conn, topic), 30, "LSO to reach the high watermark")
    assert final[0] == final[1] == start + 6     # 5 records + the commit marker


def _lso_equals_hwm(conn, topic):
    lso = partition_offsets(conn, topic, [0], committed=True)[0]
    hwm = partition_offsets(conn, topic, [0], committed=False)[0]
    return (lso, hwm) if lso == hwm else None
