"""`txnlab` command line: parses arguments and dispatches to the packages below. No logic lives here.

Must not: talk to Kafka or manage processes itself; every subcommand calls one function of
cluster/, exporter/, chaos/, spark_analysis/ or report/.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

err = Console(stderr=True)


def _cluster(args: argparse.Namespace):
    from cluster.local import LocalCluster
    overrides = dict(_key_values(args.broker_config or [], "--broker-config"))
    features = dict(_key_values(args.feature or [], "--feature"))
    return LocalCluster.load(args.state_dir, nodes=args.nodes, base_port=args.base_port,
                             broker_overrides=overrides or None, features=features or None)


def _key_values(items: list[str], flag: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} takes key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def cmd_cluster_up(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    bootstrap = cluster.up(progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"), timeout=args.timeout)
    print(bootstrap)
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    _cluster(args).down(purge=args.purge, progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"))
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from cluster.console import print_status
    status = _cluster(args).status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print_status(status, Console())
    healthy = all(n["health"] == "up" for n in status["nodes"])
    return 0 if healthy else 3


def cmd_cluster_logs(args: argparse.Namespace) -> int:
    from cluster.console import tail_logs
    sys.stdout.write(tail_logs(_cluster(args).layout, args.node, args.lines))
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from cluster.local import LocalCluster
    from cluster.console import smoke_summary
    cluster = LocalCluster.load(args.state_dir)
    result = smoke_summary(cluster.connection(), Console(), transactions=args.transactions)
    return 1 if result["committed_missing"] or result["aborted_visible"] else 0


def cmd_demo(args: argparse.Namespace) -> int:
    """For now: bring the local cluster up and run the transactional smoke workload."""
    from cluster.local import LocalCluster
    cluster = LocalCluster.load(args.state_dir)
    cluster.up(progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"))
    try:
        return cmd_smoke(args)
    finally:
        if not args.keep:
            cluster.down(progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"))


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", type=Path, default=None, help="local cluster state (default $TXNLAB_HOME/cluster)")
    p.add_argument("--nodes", type=int, default=None, help="number of KRaft nodes (default 3)")
    p.add_argument("--base-port", type=int, default=None, help="first port of the port plan (default 19000; keep the plan, base..base+900, below the ephemeral port range)")
    p.add_argument("--broker-config", action="append", metavar="KEY=VALUE", help="broker config override (repeatable)")
    p.add_argument("--feature", action="append", metavar="NAME=LEVEL", help="feature level at format time, "
                   "e.g. transaction.version=1 (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txnlab", description="Observe, break and verify transactional Kafka")
    sub = parser.add_subparsers(dest="command", required=True)
    cluster = sub.add_parser("cluster", help="the local Kafka cluster (KRaft nodes, Toxiproxy, Prometheus)")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start the local cluster (no-op when running); prints the bootstrap address")
    up.add_argument("--timeout", type=float, default=180.0)
    up.set_defaults(func=cmd_cluster_up)
    down = csub.add_parser("down", help="stop every process the cluster started")
    down.add_argument("--purge", action="store_true", help="also delete the cluster's data")
    down.set_defaults(func=cmd_cluster_down)
    status = csub.add_parser("status", help="per node pid, ports, health, active controller")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_cluster_status)
    logs = csub.add_parser("logs", help="the tail of a node's server.log (or all nodes)")
    logs.add_argument("--node", type=int, default=None)
    logs.add_argument("--lines", type=int, default=40)
    logs.set_defaults(func=cmd_cluster_logs)
    for p in (up, down, status, logs):
        _add_cluster_options(p)
    smoke = sub.add_parser("smoke", help="a transactional smoke workload against the local cluster, with a summary")
    smoke.add_argument("--state-dir", type=Path, default=None)
    smoke.add_argument("--transactions", type=int, default=20)
    smoke.set_defaults(func=cmd_smoke)
    demo = sub.add_parser("demo", help="the main job: cluster up, transactional workload, summary")
    demo.add_argument("--state-dir", type=Path, default=None)
    demo.add_argument("--transactions", type=int, default=20)
    demo.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return 130
    except Exception as exc:  # noqa: BLE001 - the edge: one clear message, non-zero exit
        from cluster.errors import is_user_error
        if not is_user_error(exc):
            raise
        err.print(f"[red]error[/]: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
