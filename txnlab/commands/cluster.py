"""`txnlab cluster up|down|status|logs|env` (the local Kafka cluster) and `txnlab smoke`."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from cluster.access.errors import TxnlabError
from txnlab.commands.common import active_faults, add_cluster_options, local_cluster, err


def cmd_cluster_up(args: argparse.Namespace) -> int:
    cluster = local_cluster(args)
    notice = active_faults(cluster)
    if notice and not args.despite_faults:     # before waiting: a paused broker would only time out
        raise TxnlabError(f"{notice} (or `txnlab cluster up --despite-faults` first, to start what the heal "
                          "needs, e.g. a Toxiproxy that died)")
    bootstrap = cluster.up(progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"), timeout=args.timeout)
    print(bootstrap)
    return 0


def cmd_cluster_env(args: argparse.Namespace) -> int:
    import shlex
    cluster = local_cluster(args)
    env = {"TXNLAB_KAFKA_BOOTSTRAP": cluster.layout.bootstrap}
    if cluster.layout.secured:
        conn = cluster.connection(args.role)
        env.update({k: v for k, v in conn.to_env().items() if k != "TXNLAB_KAFKA_SASL_PASSWORD"})
        env["TXNLAB_KAFKA_SASL_PASSWORD_FILE"] = str(cluster.secrets.password_file(args.role))
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    local_cluster(args).down(purge=args.purge, progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"))
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from cluster.lab.console import print_status
    cluster = local_cluster(args)
    status = cluster.status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print_status(status, Console())
    healthy = all(n["health"] == "up" for n in status["nodes"])
    if notice := active_faults(cluster):
        err.print(f"[yellow]warning[/]: {notice}")
        healthy = False
    return 0 if healthy else 3


def cmd_cluster_logs(args: argparse.Namespace) -> int:
    from cluster.lab.console import tail_logs
    sys.stdout.write(tail_logs(local_cluster(args).layout, args.node, args.lines))
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from cluster.lab.local import LocalCluster
    from cluster.lab.console import smoke_summary
    cluster = LocalCluster.load(args.state_dir)
    result = smoke_summary(cluster.connection(), Console(), transactions=args.transactions)
    return 1 if result["committed_missing"] or result["aborted_visible"] else 0


def add_commands(sub) -> None:
    cluster = sub.add_parser("cluster", help="the local Kafka cluster (KRaft nodes, Toxiproxy, Prometheus)")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start the local cluster (no-op when running); prints the bootstrap address")
    up.add_argument("--timeout", type=float, default=180.0)
    up.add_argument("--despite-faults", action="store_true", help="start even though a chaos run's fault journal "
                    "lists active faults (txnlab chaos heal --cluster heals them)")
    up.set_defaults(func=cmd_cluster_up)
    down = csub.add_parser("down", help="stop every process the cluster started")
    down.add_argument("--purge", action="store_true",
                      help="also delete the cluster's data (its processes are then killed, not shut down cleanly)")
    down.set_defaults(func=cmd_cluster_down)
    status = csub.add_parser("status", help="per node pid, ports, health, active controller")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_cluster_status)
    logs = csub.add_parser("logs", help="the tail of a node's server.log (or all nodes)")
    logs.add_argument("--node", type=int, default=None)
    logs.add_argument("--lines", type=int, default=40)
    logs.set_defaults(func=cmd_cluster_logs)
    env = csub.add_parser("env", help="shell exports that point txnlab commands (TXNLAB_KAFKA_*) at the local "
                          "cluster as one role; the password stays in its 0600 file")
    env.add_argument("--role", default="admin", help="a role of a sasl_ssl cluster: admin, exporter, workload, "
                     "operator, verify (docs/security.md)")
    env.set_defaults(func=cmd_cluster_env)
    for p in (up, down, status, logs, env):
        add_cluster_options(p)
    smoke = sub.add_parser("smoke", help="a transactional smoke workload against the local cluster, with a summary")
    smoke.add_argument("--state-dir", type=Path, default=None)
    smoke.add_argument("--transactions", type=int, default=20)
    smoke.set_defaults(func=cmd_smoke)
