"""Dashboards and alerts against real data: the drill cluster (one node, verification off, 15 s
transaction.max.timeout.ms) with its exporter and Prometheus (which loads dashboards/alerts/), a
transactional workload, a transaction left open and an injected hanging transaction. Every panel's
queries must return data, HangingTransaction and LSOStuck must reach pending or firing, and every
dashboard is rendered to PNG as artefacts a person can look at."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from confluent_kafka import Producer

from cluster.smoke import ensure_topic
from cluster.waiting import wait_until
from dashboards import boards, render

ALERTS_WANTED = {"HangingTransaction", "LSOStuck"}
ARTEFACTS = Path(os.environ.get("TXNLAB_ARTEFACTS", "/tmp/txnlab-artefacts")) / "dashboards"


def committing(conn, topic: str, stop: threading.Event) -> None:
    producer = Producer(conn.confluent(**{"transactional.id": f"dash-{uuid.uuid4().hex[:6]}", "linger.ms": 5,
                                          "transaction.timeout.ms": 10000}))
    producer.init_transactions(30)
    while not stop.is_set():
        producer.begin_transaction()
        for p in (1, 2):
            producer.produce(topic, partition=p, value=b"x" * 50)
        producer.commit_transaction(30)
        stop.wait(0.2)


def left_open(conn, topic: str) -> Producer:
    producer = Producer(conn.confluent(**{"transactional.id": f"dash-open-{uuid.uuid4().hex[:6]}",
                                          "transaction.timeout.ms": 15000}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, partition=2, value=b"open")
    producer.flush(30)
    return producer


def alert_states(prometheus: str) -> dict[str, str]:
    alerts = requests.get(f"{prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return {a["labels"]["alertname"]: a["state"] for a in alerts}


@pytest.fixture
def live_data(drill_cluster, drill_conn):
    topic = f"dash-{uuid.uuid4().hex[:8]}"
    ensure_topic(drill_conn, topic, partitions=3)
    stop = threading.Event()
    worker = threading.Thread(target=committing, args=(drill_conn, topic, stop), daemon=True)
    worker.start()
    open_producer = left_open(drill_conn, topic)
    inject = subprocess.run([sys.executable, "-m", "txnlab.cli", "txn", "inject-hanging", "--bootstrap",
                             drill_conn.bootstrap, "--topic", topic, "--partition", "0"],
                            capture_output=True, text=True, timeout=120)
    assert inject.returncode == 0, inject.stderr
    started = time.time()
    injected = json.loads(inject.stdout)
    yield drill_cluster, topic, injected, started
    stop.set()
    worker.join(30)
    open_producer.abort_transaction(30)
    aborted = subprocess.run([sys.executable, "-m", "txnlab.cli", "txn", "abort", "--topic", topic, "--partition", "0",
                              "--producer-id", str(injected["producer_id"]), "--yes", "--bootstrap", drill_conn.bootstrap],
                             capture_output=True, text=True, timeout=120)
    assert aborted.returncode == 0, aborted.stderr      # never leave it hanging on the shared drill cluster


def test_panels_return_data_alerts_fire_and_dashboards_render(live_data):
    cluster, topic, injected, started = live_data
    prometheus = f"http://127.0.0.1:{cluster.layout.prometheus_port}"
    wait_until(lambda: ALERTS_WANTED <= {a for a, s in alert_states(prometheus).items() if s in ("pending", "firing")},
               150, "HangingTransaction and LSOStuck pending or firing in Prometheus", interval=2)
    states = alert_states(prometheus)
    variables = {"cluster": cluster.cluster_label, "topic": ".*", "datasource": "prometheus"}
    empty = []
    for name in boards.BOARDS:
        dashboard = json.loads(boards.render(name))
        for pq in render.panel_queries(dashboard, variables):
            data = render.query_panel(prometheus, pq, time.time() - 300, time.time(), 5)
            if not data.series:
                empty.append((name, pq.title, pq.expr))
    assert not empty, f"panels without data: {empty}"
    out = ARTEFACTS / time.strftime("%Y%m%d-%H%M%S")
    for name in boards.BOARDS:
        result = render.render_dashboard(json.loads(boards.render(name)), prometheus, out, started - 60,
                                         time.time(), variables=variables)
        assert not result.failed_panels() and not result.empty_panels(), result.problems()
        assert result.overview.stat().st_size > 10_000 and all(p.file.stat().st_size > 2000 for p in result.panels)
    print(f"rendered dashboards in {out}; alert states {states}")
