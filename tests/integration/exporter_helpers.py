"""Running an exporter against a test cluster and reading /metrics back, for the integration tests."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import requests
from prometheus_client.parser import text_string_to_metric_families

from cluster.access.connection import ConnectionSettings
from exporter.app import Exporter
from exporter.config import load_config

Samples = dict[tuple[str, frozenset], float]


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
