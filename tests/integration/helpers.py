"""The integration tests' shared helpers: a transaction left open by a real producer, an exporter run in-process
against a test cluster and its /metrics read back (the real `txnlab` command: tests/cli.py)."""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Iterator

import requests
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from cluster.access.connection import ConnectionSettings
from exporter.app import Exporter
from exporter.config import load_config

Samples = dict[tuple[str, frozenset], float]


def open_transaction(conn: ConnectionSettings, topic: str, partitions: tuple[int, ...] | list[int] = (0,),
                     records: int = 3, transactional_id: str | None = None, **config: object) -> Producer:
    """A real transactional producer that began a transaction and wrote `records` records to each of `partitions`
    of `topic`, flushed (written, not ended): the caller commits, aborts or leaves it open. `config` on top of the
    connection's (e.g. "transaction.timeout.ms")."""
    tid = transactional_id or f"open-{uuid.uuid4().hex[:8]}"
    producer = Producer(conn.confluent(**{"transactional.id": tid, **config}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in partitions:
        for i in range(records):
            producer.produce(topic, value=f"{tid}-{partition}-{i}".encode(), partition=partition)
    producer.flush(30)
    return producer


@contextmanager
def running_exporter(conn: ConnectionSettings, interval: float = 1.0, **flags: object) -> Iterator[str]:
    """An in-process exporter on a free port; yields its base URL."""
    config = load_config(env={}, flags={"kafka.bootstrap": conn.bootstrap, "web.port": 0,
                                        "collection.interval_seconds": interval,
                                        "kafka.request_timeout_seconds": 3.0, **flags})
    exporter = Exporter.build(config).start()
    try:
        yield f"http://127.0.0.1:{exporter.server.port}"
    finally:
        exporter.close()


def scrape(url: str, timeout: float = 20.0) -> Samples:
    response = requests.get(f"{url}/metrics", timeout=timeout)
    response.raise_for_status()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: object) -> float | None:
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def metric(url: str, name: str, **labels: object) -> float | None:
    return value(scrape(url), name, **labels)
