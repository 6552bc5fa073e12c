"""What the command groups share: the error console, the local cluster a command names (--state-dir, --base-port),
`k=v` options, the cluster options of every `cluster` subcommand."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console



err = Console(stderr=True)


def local_cluster(args: argparse.Namespace):
    from cluster.lab.local import LocalCluster
    from cluster.lab.layout import HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES
    from report.stack import local_stack
    overrides = dict(HANGING_DRILL_BROKER_CONFIG) if args.hanging_drill else {}
    features = dict(HANGING_DRILL_FEATURES) if args.hanging_drill else {}
    overrides.update(key_values(args.broker_config or [], "--broker-config"))
    features.update(key_values(args.feature or [], "--feature"))
    return LocalCluster.load(args.state_dir, nodes=args.nodes, base_port=args.base_port,
                             broker_overrides=overrides or None, features=features or None,
                             security=args.security, kafka_version=args.kafka_version, **local_stack())


def key_values(items: list[str], flag: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} takes key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def active_faults(cluster) -> str | None:
    """The warning when a chaos run left faults journaled as active on this cluster (chaos/nemesis/journal.py)."""
    from chaos.nemesis.journal import active_faults_message
    return active_faults_message(cluster.layout.state_dir)


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", type=Path, default=None, help="local cluster state (default $TXNLAB_HOME/cluster)")
    p.add_argument("--nodes", type=int, default=None, help="number of KRaft nodes (default 3)")
    p.add_argument("--base-port", type=int, default=None, help="first port of the port plan (default 19000; keep the plan, base..base+900, below the ephemeral port range)")
    p.add_argument("--broker-config", action="append", metavar="KEY=VALUE", help="broker config override (repeatable)")
    p.add_argument("--feature", action="append", metavar="NAME=LEVEL", help="feature level at format time, "
                   "e.g. transaction.version=1 (repeatable)")
    p.add_argument("--security", choices=["plaintext", "sasl_ssl"], default=None,
                   help="plaintext (default), or sasl_ssl: TLS from a local CA, SASL/SCRAM-SHA-512 users per role, "
                        "ACLs (docs/security.md; `txnlab cluster env --role ROLE` says how to connect)")
    p.add_argument("--kafka-version", default=None, metavar="V", help="the Kafka release a new cluster runs (default "
                   "$TXNLAB_KAFKA_VERSION, else the pinned one; one of versions.env KAFKA_VERSIONS; its jars are "
                   "assembled from Maven Central on first use); refused for an existing cluster of another release")
    p.add_argument("--hanging-drill", action="store_true", help="run brokers with transaction partition "
                   "verification off and transaction.version=1, so `txnlab txn inject-hanging` can create a "
                   "real hanging transaction (drills and tests only)")


def local_bootstrap(args: argparse.Namespace) -> str | None:
    import os
    if os.environ.get("TXNLAB_KAFKA_BOOTSTRAP"):
        return None
    from cluster.lab.local import LocalCluster
    return LocalCluster.load(args.state_dir).layout.bootstrap
