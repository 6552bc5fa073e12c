"""The launcher refuses bad port plans before starting anything."""
from __future__ import annotations

import pytest

from cluster.lab.local import ClusterError, LocalCluster


def test_a_port_plan_in_the_ephemeral_range_is_refused(tmp_path):
    cluster = LocalCluster.load(tmp_path / "state", base_port=40000)
    with pytest.raises(ClusterError, match="ephemeral"):
        cluster._check_port_plan()
    assert not (tmp_path / "state" / "pids").exists()      # nothing was started


def test_a_busy_port_is_named(tmp_path):
    import socket
    cluster = LocalCluster.load(tmp_path / "state", base_port=16000)      # a plan no txnlab cluster uses
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", cluster.layout.client_proxy_port(2)))
        sock.listen()
        with pytest.raises(ClusterError, match=str(cluster.layout.client_proxy_port(2))):
            cluster._check_port_plan()


def test_local_prometheus_scrapes_brokers_and_the_exporter(tmp_path):
    import yaml
    from cluster.lab.local import LocalCluster
    from report.stack import local_stack
    cluster = LocalCluster.load(tmp_path, base_port=25000, **local_stack())
    jobs = {job["job_name"]: job["static_configs"][0]["targets"]
            for job in yaml.safe_load(cluster.prometheus_config())["scrape_configs"]}
    assert jobs["txnlab-exporter"] == ["127.0.0.1:25800"]
    assert len(jobs["kafka-jmx"]) == 3
