"""Hanging and late transactions through /metrics, on the drill cluster (verification off, small
transaction.max.timeout.ms, coordinator timeout sweep slowed down: see conftest.TEST_DRILL_BROKER_CONFIG)."""
from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Producer

from cluster.lab.layout import DRILL_TXN_MAX_TIMEOUT_MS
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import wait_until
from tests.integration.helpers import metric, running_exporter, scrape, value
from tests.cli import txnlab

INTERVAL = 2.0


def _hanging(url: str, topic: str) -> float:
    samples = scrape(url)
    return sum(v for (name, labels), v in samples.items()
               if name == "kafkatxn_hanging_transactions" and ("topic", topic) in labels)


def test_injected_hanging_transaction_is_flagged_within_two_intervals_and_cleared_by_abort(drill_conn):
    topic = f"hang-{uuid.uuid4().hex[:8]}"
    ensure_topic(drill_conn, topic, partitions=2)
    with running_exporter(drill_conn, INTERVAL) as url:
        wait_until(lambda: metric(url, "kafkatxn_partition_active_producers", topic=topic, partition=1) is not None,
                   20, "a first producer scan of the topic")
        out = txnlab("txn", "inject-hanging", "--bootstrap", drill_conn.bootstrap, "--topic", topic, "--partition", "1",
                     check=True)
        injected = json.loads(out.stdout)
        started = time.monotonic()
        wait_until(lambda: _hanging(url, topic) >= 1, 2 * INTERVAL + 3, "the hanging transaction in /metrics",
                   interval=0.2)
        detected_after = time.monotonic() - started
        samples = scrape(url)
        info = [dict(labels) for (name, labels), _ in samples.items() if name == "kafkatxn_hanging_transaction_info"]
        assert [(i["topic"], i["partition"], i["producer_id"], i["start_offset"]) for i in info] == \
            [(topic, "1", str(injected["producer_id"]), str(injected["start_offset"]))]
        assert value(samples, "kafkatxn_partition_lso_lag", topic=topic, partition=1) >= 1
        assert detected_after <= 2 * INTERVAL + 3

        listed = json.loads(txnlab("txn", "hanging", "--bootstrap", drill_conn.bootstrap, "--json",
                                   "--confirm-after", "1", check=False).stdout)
        assert [h["producer_id"] for h in listed["hanging"]] == [injected["producer_id"]]
        dry = txnlab("txn", "abort", "--hanging", "--bootstrap", drill_conn.bootstrap, "--confirm-after", "1",
                     check=True)
        assert "would abort" in dry.stderr and _hanging(url, topic) >= 1          # dry run changed nothing
        done = txnlab("txn", "abort", "--hanging", "--yes", "--bootstrap", drill_conn.bootstrap, "--confirm-after", "1",
                      check=True)
        assert "aborted" in done.stderr

        wait_until(lambda: _hanging(url, topic) == 0, 3 * INTERVAL + 3, "the hanging transaction to clear")
        wait_until(lambda: metric(url, "kafkatxn_partition_lso_lag", topic=topic, partition=1) == 0, 10,
                   "the LSO to catch up after the abort")


def test_transaction_held_past_the_max_timeout_is_over_timeout_and_late(drill_conn):
    topic = f"late-{uuid.uuid4().hex[:8]}"
    ensure_topic(drill_conn, topic, partitions=1)
    producer = Producer(drill_conn.confluent(**{"transactional.id": f"late-{uuid.uuid4().hex[:8]}", "log_level": 3,
                                                "transaction.timeout.ms": DRILL_TXN_MAX_TIMEOUT_MS}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"held", partition=0)
    producer.flush(30)
    with running_exporter(drill_conn, INTERVAL) as url:
        def over_timeout():
            samples = scrape(url)
            return sum(v for (name, _), v in samples.items() if name == "kafkatxn_transactions_over_timeout")

        def over_timeout_and_late():
            return over_timeout() > before and metric(url, "kafkatxn_late_transactions", topic=topic) == 1
        before = wait_until(lambda: [over_timeout()], 20, "a first coordinator scan")[0]
        assert metric(url, "kafkatxn_late_transactions", topic=topic) is None
        wait_until(over_timeout_and_late, DRILL_TXN_MAX_TIMEOUT_MS / 1000 + 3 * INTERVAL + 5,
                   "the held transaction to show as over its timeout and late")
        assert _hanging(url, topic) == 0                  # late, but its coordinator still tracks it
        producer.abort_transaction(30)
        wait_until(lambda: value(scrape(url), "kafkatxn_late_transactions", topic=topic) is None, 3 * INTERVAL + 5,
                   "the late transaction to clear after its abort")
