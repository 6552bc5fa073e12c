"""Where every piece of the local cluster lives: ports, proxies, files, broker properties.

Owns: the pure description of a local cluster (no process is touched here), so it can be unit
tested: the port plan, the Toxiproxy proxy per broker listener and per directed broker pair, the
server.properties of each KRaft node, the drill clusters' broker settings, and the stack's prometheus.yml
(built as data, dumped with PyYAML: the local launcher's and the compose file's).

Network plan. Clients reach node i only through proxy `n{i}-client` (advertised address). Node i's
outbound traffic to node j (replica fetches and KRaft/heartbeat traffic) goes through its own proxies
`n{j}-repl-from-{i}` and `n{j}-ctrl-from-{i}`: every node uses its own inter-broker listener name
REPL_FROM_{i}, and its own `controller.quorum.voters` addresses. So a fault on the proxies of one
node cuts it off in both directions without touching links between the other nodes.
"""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cluster.lab import versions
from cluster.access.errors import TxnlabError
from cluster.lab.ports import ephemeral_clash
from cluster.lab.toxiproxy import Proxy

LOOPBACK = "127.0.0.1"
SECURITY_MODES = ("plaintext", "sasl_ssl")
MAX_NODES = 9

# Broker settings every local cluster runs with (replication factors follow the node count, see
# `_replication`); per-run overrides are layered on top.
BASE_BROKER_CONFIG: dict[str, str] = {
    "num.partitions": "3",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.num.partitions": "50",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    # KIP-848 consumer groups (group.protocol=consumer) take their session and heartbeat from the broker (45 s and
    # 5 s by default, neither below its min): the classic workloads' 10 s session and 3 s heartbeat here too, so a
    # member paused past its session leaves at the same time on either protocol (unknown keys to 3.5-3.6: ignored)
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "3000",
    # and KIP-1071 Streams groups (group.protocol=streams) the same (unknown keys before 4.1: ignored)
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "10000",
    "group.streams.min.heartbeat.interval.ms": "1000",
    "group.streams.heartbeat.interval.ms": "3000",
    "replica.lag.time.max.ms": "10000",
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "log.segment.bytes": str(64 * 1024 * 1024),
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.replica.fetchers": "1",
}


# Settings for hanging-transaction drills: brokers accept transactional writes to partitions the
# coordinator was never told about (KIP-890 verification off), so `txnlab txn inject-hanging` can
# create a real hanging transaction. Never for production clusters.
HANGING_DRILL_BROKER_CONFIG: dict[str, str] = {"transaction.partition.verification.enable": "false"}
HANGING_DRILL_FEATURES: dict[str, str] = {"transaction.version": "1"}
# transaction.version (KIP-890 part 2) is a feature from Kafka 4.0 on. An older release has no such feature and
# behaves as its levels 0 and 1 (no epoch bump per transaction; 3.6-3.9 verify partitions when
# transaction.partition.verification.enable, KIP-890 part 1, 3.5 does not): those levels are dropped from its
# storage format, a higher one is refused.
TRANSACTION_VERSION_SINCE = (4, 0)
# A drill cluster (the demo's and the tests'): hanging transactions can be injected, and a 15 s
# transaction.max.timeout.ms lets LSOStuck (stuck for longer than the max timeout) fire within a drill.
DRILL_TXN_MAX_TIMEOUT_MS = 15000
DRILL_BROKER_CONFIG: dict[str, str] = {**HANGING_DRILL_BROKER_CONFIG,
                                       "transaction.max.timeout.ms": str(DRILL_TXN_MAX_TIMEOUT_MS)}
PROMETHEUS_SCRAPE_INTERVAL = "5s"


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'
    (kafka-storage would read it as an option; Kafka's own Uuid.randomUuid avoids those too)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class LayoutError(TxnlabError, ValueError):
    """A cluster shape that cannot be laid out (node count, port plan)."""


@dataclass(frozen=True)
class ClusterLayout:
    """Ports and paths of one local cluster under state_dir."""

    state_dir: Path
    nodes: int = 3
    base_port: int = 19000
    heap: str = "768m"
    broker_overrides: dict[str, str] = field(default_factory=dict)
    features: dict[str, str] = field(default_factory=dict)
    security: str = "plaintext"          # or "sasl_ssl" (cluster/lab/security.py)
    kafka_version: str = ""              # the release its nodes run; "": versions.kafka_version() at creation

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kafka_version", versions.kafka_version(self.kafka_version or None))
        except versions.UnsupportedVersion as exc:
            raise LayoutError(str(exc)) from None
        if self.security not in SECURITY_MODES:
            raise LayoutError(f"security must be one of {', '.join(SECURITY_MODES)}, got {self.security!r}")
        if not 1 <= self.nodes <= MAX_NODES:
            raise LayoutError(f"nodes must be 1..{MAX_NODES}, got {self.nodes}")
        if not 1024 <= self.base_port <= 64000:
            raise LayoutError(f"base_port must be 1024..64000, got {self.base_port}")
        tv = str(self.features.get("transaction.version", ""))
        if tv and versions.release(self.kafka_version) < TRANSACTION_VERSION_SINCE and tv not in ("0", "1"):
            raise LayoutError(f"Kafka {self.kafka_version} has no transaction.version {tv} (KIP-890 part 2 arrived in "
                              f"{'.'.join(map(str, TRANSACTION_VERSION_SINCE))}): its transactions are those of levels "
                              "0 and 1; choose a 4.x release or drop the feature")

    @property
    def settings(self) -> dict[str, dict[str, str]]:
        """The broker settings and features a cluster of this layout is brought up with, as a run records them
        (cluster.json's broker_config and features: what a report names a broker's bug by)."""
        return {"broker_config": {k: str(v) for k, v in self.broker_overrides.items()},
                "features": {k: str(v) for k, v in self.features.items()}}

    @property
    def storage_features(self) -> dict[str, str]:
        """The features the nodes' storage is formatted with (kafka-storage format --feature): `features`, less a
        transaction.version on a release that has none (its level, 0 or 1, is that release's only behaviour)."""
        if versions.release(self.kafka_version) < TRANSACTION_VERSION_SINCE:
            return {k: v for k, v in self.features.items() if k != "transaction.version"}
        return dict(self.features)

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.nodes + 1))

    # ---- ports -------------------------------------------------------------------------------
    def client_proxy_port(self, node: int) -> int:
        return self.base_port + node

    def client_port(self, node: int) -> int:
        return self.base_port + 100 + node

    def repl_port(self, node: int, src: int) -> int:
        return self.base_port + 200 + 10 * node + src

    def repl_proxy_port(self, node: int, src: int) -> int:
        return self.base_port + 300 + 10 * node + src

    def controller_port(self, node: int) -> int:
        return self.base_port + 400 + node

    def controller_proxy_port(self, node: int, src: int) -> int:
        return self.base_port + 500 + 10 * node + src

    def jmx_port(self, node: int) -> int:
        return self.base_port + 600 + node

    def request_hold_port(self, node: int) -> int:
        """The Kafka-aware request hold's relay in front of the node's client listener (chaos/nemesis/request_hold.py),
        bound only while a hold-requests fault runs."""
        return self.base_port + 650 + node

    def marker_hold_port(self, node: int, src: int) -> int:
        """The request hold's relay on the link from node src to node's inter-broker listener (the transaction
        markers src's coordinator sends to node's partitions), bound only while a hold-requests fault on the
        markers runs: 701..788."""
        return self.base_port + 700 + 10 * (node - 1) + src

    @property
    def toxiproxy_port(self) -> int:
        return self.base_port + 700

    @property
    def prometheus_port(self) -> int:
        return self.base_port + 790

    @property
    def exporter_port(self) -> int:
        return self.base_port + 800

    def ephemeral_clash(self) -> str | None:
        """Why this port plan cannot serve on this machine (its span overlaps the kernel's ephemeral ports), or None."""
        return ephemeral_clash(self.base_port, self.exporter_port + 99)

    def all_ports(self) -> list[int]:
        """Every port the plan binds (brokers, proxies, agents, services)."""
        ports = [self.toxiproxy_port, self.prometheus_port, self.exporter_port]
        for n in self.node_ids:
            ports += [self.client_proxy_port(n), self.client_port(n), self.controller_port(n), self.jmx_port(n),
                      self.request_hold_port(n)]
            ports += [self.repl_port(n, s) for s in self.node_ids]
            ports += [self.repl_proxy_port(n, s) for s in self.peers(n)]
            ports += [self.marker_hold_port(n, s) for s in self.peers(n)]
            ports += [self.controller_proxy_port(n, s) for s in self.peers(n)]
        return ports

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{LOOPBACK}:{self.client_proxy_port(n)}" for n in self.node_ids)

    # ---- paths -------------------------------------------------------------------------------
    def node_dir(self, node: int) -> Path:
        return self.state_dir / f"node-{node}"

    def data_dir(self, node: int) -> Path:
        return self.node_dir(node) / "data"

    def properties_file(self, node: int) -> Path:
        return self.node_dir(node) / "server.properties"

    @property
    def secrets_dir(self) -> Path:
        return self.state_dir / "secrets"

    @property
    def secured(self) -> bool:
        return self.security == "sasl_ssl"

    @property
    def pid_dir(self) -> Path:
        return self.state_dir / "pids"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    # ---- proxies -----------------------------------------------------------------------------
    def proxies(self) -> list[Proxy]:
        out = [Proxy(f"n{n}-client", f"{LOOPBACK}:{self.client_proxy_port(n)}", f"{LOOPBACK}:{self.client_port(n)}")
               for n in self.node_ids]
        for node in self.node_ids:
            for src in self.peers(node):
                out.append(Proxy(f"n{node}-repl-from-{src}", f"{LOOPBACK}:{self.repl_proxy_port(node, src)}",
                                 f"{LOOPBACK}:{self.repl_port(node, src)}"))
                out.append(Proxy(f"n{node}-ctrl-from-{src}", f"{LOOPBACK}:{self.controller_proxy_port(node, src)}",
                                 f"{LOOPBACK}:{self.controller_port(node)}"))
        return out

    def peers(self, node: int) -> list[int]:
        return [n for n in self.node_ids if n != node]

    def links_of(self, node: int, scope: str = "all") -> list[str]:
        """Proxy names carrying node's traffic: scope client, inter (peers and controllers) or all."""
        if scope not in ("client", "inter", "all"):
            raise ValueError(f"scope must be client, inter or all, got {scope!r}")
        names = [f"n{node}-client"] if scope in ("client", "all") else []
        if scope in ("inter", "all"):
            for peer in self.peers(node):
                names += [f"n{node}-repl-from-{peer}", f"n{peer}-repl-from-{node}",
                          f"n{node}-ctrl-from-{peer}", f"n{peer}-ctrl-from-{node}"]
        return names

    # ---- broker configuration -----------------------------------------------------------------
    def server_properties(self, node: int) -> dict[str, str]:
        props = dict(BASE_BROKER_CONFIG)
        props.update(self._replication())
        props.update(self._node_identity(node))
        props.update(self._listeners(node))
        props.update(self.broker_overrides)
        return props

    def _replication(self) -> dict[str, str]:
        """Replication factors and min ISR scaled down for 1- and 2-node clusters."""
        factor, min_isr = str(min(3, self.nodes)), str(min(2, self.nodes))
        return {"default.replication.factor": factor, "offsets.topic.replication.factor": factor,
                "transaction.state.log.replication.factor": factor,
                "min.insync.replicas": min_isr, "transaction.state.log.min.isr": min_isr}

    def _node_identity(self, node: int) -> dict[str, str]:
        voters = ",".join(
            f"{v}@{LOOPBACK}:{self.controller_port(v) if v == node else self.controller_proxy_port(v, node)}"
            for v in self.node_ids)
        return {"process.roles": "broker,controller", "node.id": str(node),
                "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                "log.dirs": str(self.data_dir(node)), "metadata.log.dir": str(self.data_dir(node))}

    @property
    def listener_protocol(self) -> str:
        return "SASL_SSL" if self.secured else "PLAINTEXT"

    def sasl_listeners(self) -> list[str]:
        """The listeners that take SCRAM logins (client and inter-broker; the controller's takes PLAIN)."""
        return ["CLIENT"] + [f"REPL_FROM_{s}" for s in self.node_ids]

    def _listeners(self, node: int) -> dict[str, str]:
        names = ["CLIENT", "CONTROLLER", *self.sasl_listeners()[1:]]
        listeners = [f"CLIENT://{LOOPBACK}:{self.client_port(node)}",
                     f"CONTROLLER://{LOOPBACK}:{self.controller_port(node)}"]
        advertised = [f"CLIENT://{LOOPBACK}:{self.client_proxy_port(node)}"]
        for src in self.node_ids:
            listeners.append(f"REPL_FROM_{src}://{LOOPBACK}:{self.repl_port(node, src)}")
            port = self.repl_port(node, src) if src == node else self.repl_proxy_port(node, src)
            advertised.append(f"REPL_FROM_{src}://{LOOPBACK}:{port}")
        return {"listeners": ",".join(listeners), "advertised.listeners": ",".join(advertised),
                "listener.security.protocol.map": ",".join(f"{n}:{self.listener_protocol}" for n in names),
                "inter.broker.listener.name": f"REPL_FROM_{node}"}


def render_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in sorted(props.items()))


def render_prometheus_config(rule_file: str | None, jobs: dict[str, dict],
                             job_settings: dict[str, dict] | None = None) -> str:
    """prometheus.yml of a txnlab stack: every PROMETHEUS_SCRAPE_INTERVAL, each job's one static config
    ({"targets": [...], "labels": {...}}) and its scrape settings if any (scheme, tls_config, basic_auth),
    evaluated against txnlab's alerting rules in `rule_file` (none: no rules)."""
    every = PROMETHEUS_SCRAPE_INTERVAL
    settings = job_settings or {}
    doc = {"global": {"scrape_interval": every, "evaluation_interval": every}, "rule_files": [rule_file] if rule_file else [],
           "scrape_configs": [{"job_name": name, **settings.get(name, {}), "static_configs": [static]}
                              for name, static in jobs.items()]}
    return yaml.dump(doc, Dumper=_PlainDumper, sort_keys=False, width=200)


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by two jobs twice rather than as a YAML anchor and alias."""

    def ignore_aliases(self, data: object) -> bool:
        return True
