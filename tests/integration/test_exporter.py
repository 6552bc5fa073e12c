"""The exporter against the real shared cluster, asserted through /metrics."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from confluent_kafka import Producer

from cluster.lab import versions
from cluster.access.waiting import wait_until
from tests.integration.helpers import Samples, metric, open_transaction, running_exporter, scrape, value

pytestmark = pytest.mark.kafka_core      # the version matrix's core (scripts/kafka_matrix.py)

INTERVAL = 1.0


def test_open_transaction_holds_lso_lag_until_commit(conn, topic):
    with running_exporter(conn, INTERVAL) as url:
        producer = open_transaction(conn, topic, records=5, log_level=3)
        lag = wait_until(lambda: metric(url, "kafkatxn_partition_lso_lag", topic=topic, partition=0), 20,
                         "LSO lag of the open transaction")
        assert lag == 5
        first = metric(url, "kafkatxn_partition_lso_last_advance_timestamp_seconds", topic=topic, partition=0)
        time.sleep(2 * INTERVAL)         # several scrapes of a stuck LSO
        samples = scrape(url)
        assert value(samples, "kafkatxn_partition_lso_last_advance_timestamp_seconds", topic=topic, partition=0) == first
        assert value(samples, "kafkatxn_topic_lso_lag", topic=topic) == 5
        assert value(samples, "kafkatxn_partition_lso_lag", topic=topic, partition=1) == 0
        samples = wait_until(lambda: _epochs_collected(url, topic), 20, "the producer epochs of the open transaction")
        epoch = value(samples, "kafkatxn_partition_max_producer_epoch", topic=topic, partition=0)
        assert epoch is not None and epoch >= 0
        assert value(samples, "kafkatxn_topic_max_producer_epoch", topic=topic) == epoch    # 1 and 2: no producers
        assert value(samples, "kafkatxn_partition_max_producer_epoch", topic=topic, partition=1) is None
        assert value(samples, "kafkatxn_transaction_max_producer_epoch") >= 0               # its id is in progress

        producer.commit_transaction(30)
        wait_until(lambda: metric(url, "kafkatxn_partition_lso_lag", topic=topic, partition=0) == 0, 20,
                   "LSO lag back to 0 after commit")
        assert metric(url, "kafkatxn_partition_lso_last_advance_timestamp_seconds", topic=topic, partition=0) > first
        assert metric(url, "kafkatxn_partition_last_stable_offset", topic=topic, partition=0) == \
            metric(url, "kafkatxn_partition_high_watermark", topic=topic, partition=0) == 6   # 5 records + marker


def _epochs_collected(url: str, topic: str) -> Samples | None:
    """A scrape with the epoch of the topic's producers and of the transactional ids in progress, once collected."""
    samples = scrape(url)
    wanted = (value(samples, "kafkatxn_topic_max_producer_epoch", topic=topic),
              value(samples, "kafkatxn_transaction_max_producer_epoch"))
    return samples if None not in wanted else None


def _one_short_lived_producer(conn, topic: str, n: int) -> None:
    producer = Producer(conn.confluent(**{"enable.idempotence": True, "log_level": 3, "linger.ms": 0}))
    producer.produce(topic, value=f"short-{n}".encode(), partition=1)
    assert producer.flush(30) == 0


def test_short_lived_idempotent_producers_raise_active_producers(conn, topic):
    with running_exporter(conn, INTERVAL) as url:
        def active():
            return metric(url, "kafkatxn_partition_active_producers", topic=topic, partition=1)
        before = wait_until(lambda: active() is not None and [active()], 20, "a first producer scan")[0]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda n: _one_short_lived_producer(conn, topic, n), range(200)))
        wait_until(lambda: active() == before + 200, 30, "200 more active producers on the partition")
        assert metric(url, "kafkatxn_topic_active_producers", topic=topic) == before + 200
        assert metric(url, "kafkatxn_partition_max_producer_epoch", topic=topic, partition=1) == 0   # new ids: epoch 0
        assert metric(url, "kafkatxn_topic_max_producer_epoch", topic=topic) == 0


def _healthy_everywhere(url: str, topic: str) -> bool:
    samples = scrape(url)
    collectors = ("offsets", "producers", "transactions", "configs")
    return all(value(samples, "kafkatxn_collector_up", collector=c) == 1 for c in collectors) and \
        all(value(samples, "kafkatxn_partition_lso_lag", topic=topic, partition=p) is not None for p in range(3)) and \
        all(value(samples, "kafkatxn_partition_active_producers", topic=topic, partition=p) is not None
            for p in range(3))


def test_exporter_keeps_serving_while_a_broker_dies_and_recovers(heal_after, conn, admin, topic):
    cluster = heal_after
    victim = admin.leader_of(topic, 0)
    with running_exporter(conn, INTERVAL) as url:
        wait_until(lambda: _healthy_everywhere(url, topic), 30, "a healthy first collection")
        cluster.kill_node(victim)
        saw_failure, deadline = False, time.monotonic() + 20
        while time.monotonic() < deadline:                 # every scrape answers while the broker is gone
            samples = scrape(url, timeout=10)
            assert value(samples, "kafkatxn_up") is not None
            errors = sum(v for (name, _), v in samples.items() if name == "kafkatxn_collector_errors_total")
            down = [c for c in ("offsets", "producers", "transactions", "configs")
                    if value(samples, "kafkatxn_collector_up", collector=c) == 0]
            saw_failure = saw_failure or (errors > 0 and bool(down))
            if saw_failure:
                break
        assert saw_failure, "a dead broker must show in kafkatxn_collector_up and kafkatxn_collector_errors_total"

        cluster.start_node(victim)
        wait_until(lambda: victim in cluster.registered_brokers(), 90, f"node {victim} registered again")
        wait_until(lambda: _healthy_everywhere(url, topic), INTERVAL + 10, "values back within one interval")


def test_exporter_command_serves_health_ready_and_metrics_and_stops_on_sigterm(conn, topic, tmp_path):
    port = 21000 + 850
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--bootstrap", conn.bootstrap, "--port", str(port),
                             "--interval", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TXNLAB_KAFKA_SASL_PASSWORD": "never-shown"})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{url}/ready", timeout=2).status_code == 200, 30, "/ready",
                   ignore=(requests.ConnectionError,))
        assert requests.get(f"{url}/healthz", timeout=2).text == "ok\n"
        assert requests.get(f"{url}/nope", timeout=2).status_code == 404
        samples = scrape(url)
        assert value(samples, "kafkatxn_up") == 1
        assert value(samples, "kafkatxn_partition_lso_lag", topic=topic, partition=0) == 0
        assert value(samples, "kafkatxn_broker_transaction_max_timeout_seconds", broker=1) == 900
        assert_what_the_release_lacks_is_named(url)
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, output
    assert "serving http://127.0.0.1" in output and "never-shown" not in output


def assert_what_the_release_lacks_is_named(url: str) -> None:
    """Partition verification is a setting from Kafka 3.6 (KIP-890 part 1), transaction.version a feature from
    4.0: a release without one serves it as absent, one with it serves its value (the shared cluster runs the
    defaults: verification on)."""
    release = versions.release()

    def features_collected():
        samples = scrape(url)
        return samples if value(samples, "kafkatxn_cluster_finalized_feature_level", feature="metadata.version") \
            is not None else None
    samples = wait_until(features_collected, 30, "the features collected")
    verifying = value(samples, "kafkatxn_broker_transaction_partition_verification_enabled", broker=1)
    no_setting = value(samples, "kafkatxn_broker_setting_absent", broker=1,
                       setting="transaction.partition.verification.enable")
    assert (verifying, no_setting) == ((None, 1) if release < (3, 6) else (1, None)), (release, verifying, no_setting)
    tv = value(samples, "kafkatxn_cluster_finalized_feature_level", feature="transaction.version")
    no_feature = value(samples, "kafkatxn_cluster_feature_absent", feature="transaction.version")
    assert (tv is None, no_feature) == ((True, 1) if release < (4, 0) else (False, None)), (release, tv, no_feature)
