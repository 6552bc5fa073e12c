"""The local cluster's port plan, proxies and broker properties (pure, no processes)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster.lab.layout import ClusterLayout, new_cluster_id, render_prometheus_config, render_properties


@pytest.fixture
def layout():
    return ClusterLayout(state_dir=Path("/tmp/x"), nodes=3, base_port=39000)


@pytest.mark.parametrize("nodes", [1, 3, 9])
def test_every_port_is_distinct_and_inside_the_plan(nodes):
    layout = ClusterLayout(state_dir=Path("/tmp/x"), nodes=nodes)
    ports = layout.all_ports()
    assert len(ports) == len(set(ports))
    assert min(ports) > layout.base_port and max(ports) < layout.base_port + 900
    proxied = {int(p.listen.rsplit(":", 1)[1]) for p in layout.proxies()}
    assert proxied <= set(ports)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="nodes"):
        ClusterLayout(state_dir=Path("/tmp/x"), nodes=10)
    with pytest.raises(ValueError, match="base_port"):
        ClusterLayout(state_dir=Path("/tmp/x"), base_port=80)


def test_clients_are_advertised_the_proxy_not_the_broker(layout):
    props = layout.server_properties(2)
    assert "CLIENT://127.0.0.1:39002" in props["advertised.listeners"]
    assert "CLIENT://127.0.0.1:39102" in props["listeners"]
    assert "39102" not in props["advertised.listeners"]


def test_each_node_fetches_through_its_own_proxies(layout):
    props = layout.server_properties(2)
    assert props["inter.broker.listener.name"] == "REPL_FROM_2"
    # node 1 fetching from node 2 uses node 2's REPL_FROM_1 endpoint: the proxy n2-repl-from-1
    assert f"REPL_FROM_1://127.0.0.1:{layout.repl_proxy_port(2, 1)}" in props["advertised.listeners"]
    proxies = {p.name: p for p in layout.proxies()}
    assert proxies["n2-repl-from-1"].listen.endswith(str(layout.repl_proxy_port(2, 1)))
    assert proxies["n2-repl-from-1"].upstream.endswith(str(layout.repl_port(2, 1)))


def test_controller_voters_are_reached_through_per_pair_proxies(layout):
    voters = layout.server_properties(3)["controller.quorum.voters"].split(",")
    assert voters == [f"1@127.0.0.1:{layout.controller_proxy_port(1, 3)}",
                      f"2@127.0.0.1:{layout.controller_proxy_port(2, 3)}",
                      f"3@127.0.0.1:{layout.controller_port(3)}"]


def test_links_of_a_node_cover_both_directions(layout):
    links = set(layout.links_of(1))
    assert {"n1-client", "n1-repl-from-2", "n2-repl-from-1", "n1-ctrl-from-3", "n3-ctrl-from-1"} <= links
    assert not any(name in links for name in ("n2-repl-from-3", "n3-ctrl-from-2", "n2-client"))
    assert set(layout.links_of(1, "client")) == {"n1-client"}
    assert "n1-client" not in layout.links_of(1, "inter")
    names = {p.name for p in layout.proxies()}
    assert links <= names and len(names) == 3 + 3 * 2 * 2


def test_overrides_win_and_safety_settings_hold(layout):
    custom = ClusterLayout(state_dir=Path("/tmp/x"), broker_overrides={"transaction.max.timeout.ms": "5000"})
    props = custom.server_properties(1)
    assert props["transaction.max.timeout.ms"] == "5000"
    assert props["min.insync.replicas"] == "2"
    assert props["transaction.state.log.replication.factor"] == "3"
    assert props["unclean.leader.election.enable"] == "false"
    assert render_properties({"b": "2", "a": "1"}) == "a=1\nb=2\n"


def test_cluster_ids_are_16_bytes_base64():
    import base64
    cid = new_cluster_id()
    assert len(base64.urlsafe_b64decode(cid + "==")) == 16 and cid != new_cluster_id()


def test_replication_follows_the_node_count():
    single = ClusterLayout(state_dir=Path("/tmp/x"), nodes=1).server_properties(1)
    assert single["default.replication.factor"] == single["offsets.topic.replication.factor"] == "1"
    assert single["min.insync.replicas"] == single["transaction.state.log.min.isr"] == "1"
    pair = ClusterLayout(state_dir=Path("/tmp/x"), nodes=2).server_properties(2)
    assert pair["transaction.state.log.replication.factor"] == "2" and pair["min.insync.replicas"] == "2"


def test_cluster_ids_never_start_with_a_dash(monkeypatch):
    import uuid as uuid_module
    from cluster.lab import layout as layout_module
    ids = iter([uuid_module.UUID(bytes=b"\xfb" + b"\x00" * 15), uuid_module.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(layout_module.uuid, "uuid4", lambda: next(ids))
    assert not new_cluster_id().startswith("-")


def test_prometheus_config_is_yaml_data_with_shared_labels_written_out():
    labels = {"cluster": "it's: #1"}
    jobs = {"kafka-jmx": {"targets": ["h:1", "h:2"], "labels": labels},
            "txnlab-exporter": {"targets": ["h:3"], "labels": labels}}
    text = render_prometheus_config("/tmp/a dir/rules: 1.yml", jobs)
    assert "&" not in text and "*" not in text                     # no YAML anchors or aliases
    doc = yaml.safe_load(text)
    assert doc["global"] == {"scrape_interval": "5s", "evaluation_interval": "5s"}
    assert doc["rule_files"] == ["/tmp/a dir/rules: 1.yml"]
    assert doc["scrape_configs"] == [
        {"job_name": "kafka-jmx", "static_configs": [{"targets": ["h:1", "h:2"], "labels": labels}]},
        {"job_name": "txnlab-exporter", "static_configs": [{"targets": ["h:3"], "labels": labels}]}]
