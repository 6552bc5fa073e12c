"""The operator's commands: `txnlab exporter` (the Prometheus exporter) and `txnlab txn list|hanging|abort|inject-hanging`;
neither needs an optional extra."""
from __future__ import annotations

import argparse
import dataclasses
import json

from rich.console import Console

from txnlab.commands.common import err


def cmd_exporter(args: argparse.Namespace) -> int:
    from exporter.app import run
    return run(args)


def _txn_access(args: argparse.Namespace):
    from exporter.config import load_config
    from exporter.kafka_access import KafkaAccess
    from cluster.access.diagnose import require_reachable
    config = load_config(args.config, flags={"kafka.bootstrap": args.bootstrap})
    require_reachable(config.kafka)     # bad credentials or trust: said in a second, not after a bootstrap timeout
    return KafkaAccess(config.kafka, request_timeout_s=config.kafka.request_timeout_seconds,
                       topic_filter=config.filters.topic_allowed)


def _txn_query(args: argparse.Namespace, query, to_json, render):
    """Run one read-only query with an access layer, print it as a table or --json; return the result."""
    access = _txn_access(args)
    try:
        result = query(access)
    finally:
        access.close()
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        render(result, Console())
    return result


def cmd_txn_list(args: argparse.Namespace) -> int:
    from exporter import txn_commands
    _txn_query(args, lambda access: txn_commands.in_progress(access, every_state=args.all),
               txn_commands.descriptions_json, txn_commands.render_list)
    return 0


def cmd_txn_hanging(args: argparse.Namespace) -> int:
    from exporter import txn_commands
    report = _txn_query(args, lambda access: txn_commands.find_hanging(
        access, args.confirm_after, progress=lambda m: err.print(f"[cyan]txn[/]: {m}")),
        txn_commands.report_json, txn_commands.render_hanging)
    return 1 if report.hanging else 0


def _say_txn(message: str) -> None:
    err.print(f"[cyan]txn[/]: {message}")


def cmd_txn_abort(args: argparse.Namespace) -> int:
    from exporter import txn_commands
    if args.hanging == bool(args.topic is not None or args.producer_id is not None):
        raise SystemExit("txn abort: give either --hanging, or --topic, --partition and --producer-id")
    if not args.hanging and (args.topic is None or args.partition is None or args.producer_id is None):
        raise SystemExit("txn abort: --topic, --partition and --producer-id go together")
    access = _txn_access(args)
    try:
        if args.hanging:
            txn_commands.abort_hanging(access, args.confirm_after, args.yes, args.force, _say_txn)
        else:
            txn_commands.abort_explicit(access.conn, (args.topic, args.partition), args.producer_id, args.yes,
                                    args.force, _say_txn)
    finally:
        access.close()
    return 0


def cmd_txn_inject_hanging(args: argparse.Namespace) -> int:
    from chaos.nemesis.inject_hanging import inject_hanging
    from exporter.config import load_config
    conn = load_config(args.config, flags={"kafka.bootstrap": args.bootstrap}).kafka
    injected = inject_hanging(conn, args.topic, args.partition, transactional_id=args.transactional_id)
    print(json.dumps(dataclasses.asdict(injected)))
    return 0


def add_txn_commands(sub) -> None:
    txn = sub.add_parser("txn", help="operator commands: list, find and abort transactions")
    tsub = txn.add_subparsers(dest="action", required=True)
    lst = tsub.add_parser("list", help="in-progress transactions per coordinator (oldest first)")
    lst.add_argument("--all", action="store_true", help="every transactional id, whatever its state")
    lst.set_defaults(func=cmd_txn_list)
    hanging = tsub.add_parser("hanging", help="open transactions their coordinator does not track (two "
                              "collections); exit 1 if any")
    hanging.set_defaults(func=cmd_txn_hanging)
    abort = tsub.add_parser("abort", help="abort one open transaction, or every hanging one (dry run "
                            "unless --yes); re-checked as it writes: refused, writing nothing, when the "
                            "transaction changed or its coordinator still tracks it; exit 2 on a refusal")
    abort.add_argument("--topic")
    abort.add_argument("--partition", type=int)
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--hanging", action="store_true", help="abort every currently hanging transaction")
    abort.add_argument("--yes", action="store_true", help="really write the abort markers")
    abort.add_argument("--force", action="store_true", help="abort even when a coordinator still tracks the "
                       "transaction on this partition, or could not be asked: if the producer then commits, this "
                       "partition's records are lost while its other partitions commit (never overrides a "
                       "transaction that changed since it was seen)")
    abort.set_defaults(func=cmd_txn_abort)
    inject = tsub.add_parser("inject-hanging", help="drills: create a real hanging transaction on a partition "
                             "(needs brokers with transaction.partition.verification.enable=false, "
                             "e.g. `txnlab cluster up --hanging-drill`)")
    inject.add_argument("--topic", required=True)
    inject.add_argument("--partition", type=int, required=True)
    inject.add_argument("--transactional-id", default=None)
    inject.set_defaults(func=cmd_txn_inject_hanging)
    for p in (lst, hanging, abort, inject):
        p.add_argument("--bootstrap", help="Kafka bootstrap (default: exporter config / $TXNLAB_KAFKA_BOOTSTRAP "
                       "/ the local cluster)")
        p.add_argument("--config", help="exporter YAML config to take the kafka section from")
        p.add_argument("--json", action="store_true")
    for p in (hanging, abort):
        p.add_argument("--confirm-after", type=float, default=5.0,
                       help="seconds between the two collections that confirm a hanging transaction")


def add_commands(sub) -> None:
    exporter = sub.add_parser("exporter", help="the Prometheus exporter: /metrics, /healthz, /ready")
    from exporter.arguments import add_arguments
    add_arguments(exporter)
    exporter.set_defaults(func=cmd_exporter)
    add_txn_commands(sub)
