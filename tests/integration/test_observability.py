"""The brokers' JMX agents serve the transaction metrics, Prometheus scrapes them, and the node
control API pauses and resumes a broker as status reports it."""
from __future__ import annotations

import requests

from cluster.access.waiting import wait_until
from tests.integration.conftest import CAMPAIGN


def _metrics(port: int) -> str:
    return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def test_every_broker_exports_producer_state_and_late_transaction_gauges(cluster):
    for node in cluster.layout.node_ids:
        text = _metrics(cluster.layout.jmx_port(node))
        assert "\nkafka_server_replicamanager_produceridcount " in text
        assert "\nkafka_server_replicamanager_partitionswithlatetransactionscount " in text


def _prometheus_value(cluster, query):
    values = cluster.prometheus(timeout=5).values(query)
    return values[0] if values else None


def test_prometheus_scrapes_all_brokers(cluster):
    wait_until(lambda: _prometheus_value(cluster, 'sum(up{job="kafka-jmx"})') == len(cluster.layout.node_ids), 60,
               "prometheus to scrape every broker")


def test_prometheus_scrapes_the_txnlab_exporter_of_the_stack(cluster):
    wait_until(lambda: _prometheus_value(cluster, 'kafkatxn_up{job="txnlab-exporter"}') == 1, 60,
               "prometheus to scrape the exporter and the exporter to reach the cluster")
    # every broker's thresholds (DescribeConfigs, refreshed every exporter interval of 15 s)
    wait_until(lambda: _prometheus_value(cluster, 'count(kafkatxn_broker_transaction_max_timeout_seconds)') ==
               len(cluster.layout.node_ids), 60, "the exporter's broker thresholds for every broker")


def _health(cluster, node):
    return next(n["health"] for n in cluster.status()["nodes"] if n["node"] == node)


@CAMPAIGN          # the gate's: test_fault_kinds.py's pause-broker on a partition leader, healed (resumed, registered)
def test_pause_and_resume_a_broker(heal_after, admin):
    cluster = heal_after
    node = max(n for n in cluster.layout.node_ids if n != admin.active_controller())
    cluster.pause_node(node)
    assert _health(cluster, node) == "paused"
    cluster.resume_node(node)
    wait_until(lambda: _health(cluster, node) == "up", 60, f"node {node} up again")
