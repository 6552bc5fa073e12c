"""Dashboards and alerts against real data: the drill cluster (one node, verification off, 15 s
transaction.max.timeout.ms) with its exporter and Prometheus (which loads dashboards/alerts/), a
transactional workload, a transaction left open and an injected hanging transaction. Every panel's
queries must return data (run as Grafana runs them: over the last five minutes, tables at its end), and
HangingTransaction and LSOStuck must reach pending or firing."""
from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cluster.lab.prometheus import Prometheus, PrometheusError
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import NotYet, wait_until
from dashboards import boards
from dashboards.queries import PanelQuery, panel_queries
from tests.integration.helpers import open_transaction
from tests.cli import txnlab

ALERTS_WANTED = {"HangingTransaction", "LSOStuck"}


def committing(conn, topic: str, stop: threading.Event) -> None:
    """Transactions that also carry a consumer group's offsets (the group's panels need a member and commits)."""
    producer = Producer(conn.confluent(**{"transactional.id": f"dash-{uuid.uuid4().hex[:6]}", "linger.ms": 5,
                                          "transaction.timeout.ms": 10000}))
    member = Consumer(conn.confluent(**{"group.id": f"dash-{topic}", "enable.auto.commit": False, "log_level": 3,
                                        "group.protocol": "consumer"}))     # KIP-848: the describe's panel
    member.subscribe([topic])
    producer.init_transactions(30)
    done = 0
    while not stop.is_set():
        member.poll(0)
        producer.begin_transaction()
        for p in (1, 2):
            producer.produce(topic, partition=p, value=b"x" * 50)
        if member.assignment():
            producer.send_offsets_to_transaction([TopicPartition(topic, 1, done)], member.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        done += 1
        stop.wait(0.2)
    member.close()


def returns_data(prometheus: str, pq: PanelQuery, start: float, end: float) -> bool:
    """The query as Grafana sends it (instant at `end`, else over the range, 5 s steps): any series?"""
    client = Prometheus(prometheus, timeout=30)
    try:
        return bool(client.query(pq.expr, at=end) if pq.instant else client.query_range(pq.expr, start, end, 5))
    except PrometheusError as exc:                   # the error names the query and what Prometheus said
        pytest.fail(f"panel {pq.title!r}: {exc}")


def alert_states(prometheus: str) -> dict[str, str]:
    return {a["labels"]["alertname"]: a["state"] for a in Prometheus(prometheus).alerts()}


@pytest.fixture
def live_data(drill_cluster, drill_conn):
    topic = f"dash-{uuid.uuid4().hex[:8]}"
    ensure_topic(drill_conn, topic, partitions=3)
    stop = threading.Event()
    worker = threading.Thread(target=committing, args=(drill_conn, topic, stop), daemon=True)
    worker.start()
    open_producer = open_transaction(drill_conn, topic, partitions=(2,), records=1, **{"transaction.timeout.ms": 15000})
    inject = txnlab("txn", "inject-hanging", "--bootstrap", drill_conn.bootstrap, "--topic", topic, "--partition",
                    "0", timeout=120)
    assert inject.returncode == 0, inject.stderr
    started = time.time()
    injected = json.loads(inject.stdout)
    yield drill_cluster, topic, injected, started
    stop.set()
    worker.join(30)
    open_producer.abort_transaction(30)
    aborted = txnlab("txn", "abort", "--topic", topic, "--partition", "0", "--producer-id",
                     str(injected["producer_id"]), "--yes", "--bootstrap", drill_conn.bootstrap, timeout=120)
    assert aborted.returncode == 0, aborted.stderr      # never leave it hanging on the shared drill cluster


def test_panels_return_data_and_alerts_fire(live_data):
    cluster, topic, injected, started = live_data
    prometheus = f"http://127.0.0.1:{cluster.layout.prometheus_port}"
    wait_until(lambda: ALERTS_WANTED <= {a for a, s in alert_states(prometheus).items() if s in ("pending", "firing")},
               150, "HangingTransaction and LSOStuck pending or firing in Prometheus", interval=2)
    states = alert_states(prometheus)
    variables = {"cluster": cluster.cluster_label, "topic": ".*", "datasource": "prometheus"}
    queries = [(name, pq) for name in boards.BOARDS for pq in panel_queries(json.loads(boards.render(name)), variables)]

    def empty_panels() -> list[tuple[str, str, str]]:
        now = time.time()
        return [(name, pq.title, pq.expr) for name, pq in queries if not returns_data(prometheus, pq, now - 300, now)]

    # The alerts and the slower series (late transactions need a background collection after the leader's
    # transaction.max.timeout.ms, then a Prometheus scrape) arrive in either order: every panel must have
    # data within a minute of the alerts; the timeout names the panels that still had none.
    def all_have_data():
        empty = empty_panels()
        return True if not empty else NotYet(f"panels without data: {empty}")

    wait_until(all_have_data, 60, "every panel has data", interval=3)
    print(f"every panel has data; alert states {states}")
