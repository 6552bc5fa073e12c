"""`txnlab chaos workload|list|annotate|run|heal`: workloads, faults and experiments against a real cluster."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from cluster.access.errors import TxnlabError
from txnlab.commands.common import err, local_bootstrap


def cmd_chaos_workload(args: argparse.Namespace) -> int:
    from chaos.runner.solo import run_solo
    from cluster.access.connection import ConnectionSettings
    conn = ConnectionSettings.from_env(bootstrap=args.bootstrap or local_bootstrap(args))
    result = run_solo(conn, args.workload, args.duration, args.runs_dir, seed=args.seed, instances=args.instances,
                      extra=args.workload_options, client=args.client,
                      progress=lambda m: err.print(f"[cyan]chaos[/]: {m}"))
    print(json.dumps({"run_dir": str(result.run_dir), "operations": result.summary.get("operations"),
                      "completed_at_shutdown": result.summary.get("completed_at_shutdown")}))
    return 0


def cmd_chaos_list(args: argparse.Namespace) -> int:
    from chaos.runner.spec import builtin_specs, load_spec
    from rich.table import Table
    table = Table(title="built-in experiments (txnlab chaos run NAME [--short])")
    for column in ("name", "duration", "short", "description"):
        table.add_column(column)
    for name, path in sorted(builtin_specs().items()):
        spec = load_spec(path)
        short = load_spec(path, short=True) if spec.short else None
        table.add_row(name, f"{spec.duration_s:.0f}s", f"{short.duration_s:.0f}s" if short else "-",
                      " ".join(spec.description.split()).split(": ")[0].split(". ")[0])
    Console().print(table)
    return 0


def cmd_chaos_run(args: argparse.Namespace) -> int:
    from chaos.runner.experiment import Experiment, dry_run
    from chaos.runner.spec import load_spec
    spec = load_spec(args.spec, short=args.short, client=args.client, compose=args.compose,
                     group_protocol=args.group_protocol)
    if args.dry_run:
        print("\n".join(dry_run(spec, args.seed)))
        return 0
    from report.stack import local_stack
    result = Experiment(spec, args.seed, args.runs_dir, progress=lambda m: err.print(f"[cyan]chaos[/]: {m}"),
                        local_stack=local_stack()).run()
    from rich.markup import escape
    from chaos.record.recovery import summary
    from report.build import fault_line
    recovery = summary(result.recovery)
    for line in [fault_line(f) for f in recovery.get("faults", [])] or [
            f"unknown ({recovery['error']})" if "error" in recovery else "no faults"]:
        err.print(f"[cyan]recovery[/]: {escape(line)}", highlight=False, soft_wrap=True)
    print(json.dumps({"run_dir": str(result.run_dir), "steady": result.steady, "error": result.error,
                      "quiescence": result.quiescence, "recovery": recovery}, indent=2))
    return 0 if result.steady else 1


def cmd_chaos_heal(args: argparse.Namespace) -> int:
    from chaos.nemesis.journal import FAULTS_DIR, heal_journal
    if (args.run_dir is None) == (args.cluster is None):
        raise TxnlabError("give a run directory or --cluster STATE_DIR (not both)")
    if args.run_dir is not None and not args.run_dir.is_dir():
        raise TxnlabError(f"no run directory {args.run_dir}")
    backend = None
    if args.cluster is not None:
        from chaos.nemesis.backends import LocalBackend
        from cluster.lab.local import LocalCluster
        backend = LocalBackend(LocalCluster.load(args.cluster))
    if args.run_dir is not None:
        directory = args.run_dir / FAULTS_DIR
    else:
        assert backend is not None           # the parser asks for a run directory or --cluster
        directory = backend.layout.state_dir / FAULTS_DIR
    report = heal_journal(directory, backend, timeout=args.timeout, force=args.force,
                          progress=lambda m: err.print(f"[cyan]heal[/]: {m}"))
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def cmd_chaos_annotate(args: argparse.Namespace) -> int:
    from chaos.record.annotations import fault_windows, post_to_grafana
    windows = fault_windows(args.run_dir)
    for w in windows:
        print(f"{w.start:.0f}-{w.end:.0f}  {w.process}  {w.label}")
    if args.grafana:
        posted = post_to_grafana(windows, args.grafana, args.run_dir.name)
        err.print(f"posted {posted} fault windows to {args.grafana} (tag txnlab-fault)")
    return 0


def add_commands(sub) -> None:
    from chaos.workloads import GROUP_PROTOCOLS, WORKLOADS
    from chaos.workloads.native import REFERENCE, clients
    chaos = sub.add_parser("chaos", help="workloads, faults and experiments against a real cluster")
    csub = chaos.add_subparsers(dest="action", required=True)
    wl = csub.add_parser("workload", help="run one workload alone, recording a run history under runs/; "
                         "options after the known ones go to the workload (e.g. --rate 50 --records 10)")
    wl.add_argument("workload", choices=sorted(WORKLOADS))
    wl.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
    wl.add_argument("--instances", type=int, default=1, help="processes of the workload (default 1)")
    wl.add_argument("--seed", type=int, default=0)
    wl.add_argument("--client", choices=clients(), default=REFERENCE, help="the Kafka client of txn-producer and "
                    f"processor (default {REFERENCE}: confluent-kafka; docs/clients.md)")
    wl.add_argument("--runs-dir", type=Path, default=Path("runs"))
    wl.add_argument("--bootstrap", help="Kafka bootstrap (default $TXNLAB_KAFKA_BOOTSTRAP, else the local cluster)")
    wl.add_argument("--state-dir", type=Path, default=None, help="the local cluster to use when no bootstrap is given")
    wl.set_defaults(func=cmd_chaos_workload)
    lst = csub.add_parser("list", help="the built-in experiments")
    lst.set_defaults(func=cmd_chaos_list)
    annotate = csub.add_parser("annotate", help="a run's fault windows (from its history); with --grafana, posted "
                               "as annotations tagged txnlab-fault (token: $TXNLAB_GRAFANA_TOKEN)")
    annotate.add_argument("run_dir", type=Path)
    annotate.add_argument("--grafana", help="Grafana base URL, e.g. http://127.0.0.1:19850")
    annotate.set_defaults(func=cmd_chaos_annotate)
    run = csub.add_parser("run", help="run an experiment: a spec file or a built-in name; always heals")
    run.add_argument("spec", help="a YAML spec file or a built-in name (txnlab chaos list)")
    run.add_argument("--seed", type=int, default=0, help="seed of the random schedule and targets")
    run.add_argument("--short", action="store_true", help="the spec's short mode (built-ins: <= 90 s)")
    run.add_argument("--dry-run", action="store_true", help="validate and print the schedule; start nothing")
    run.add_argument("--client", choices=clients(), help="run every txn-producer and processor of the spec on this "
                     "Kafka client (default: as the spec says; docs/clients.md)")
    run.add_argument("--group-protocol", choices=GROUP_PROTOCOLS, default=None,
                     help="the groups of the spec on this protocol: classic; consumer, a processor's (KIP-848; not "
                     "KafkaJS); streams, Kafka Streams' (KIP-1071) (default: as the spec says)")
    run.add_argument("--compose", metavar="PROJECT", help="run it on that compose project's stack (`txnlab docker "
                     "up`, docs/docker.md) instead of the spec's local cluster")
    run.add_argument("--runs-dir", type=Path, default=Path("runs"))
    run.set_defaults(func=cmd_chaos_run)
    heal = csub.add_parser("heal", help="heal the faults a chaos run journaled as active (after txnlab itself died), "
                           "then the whole cluster; exit 1 when something could not be healed")
    heal.add_argument("run_dir", type=Path, nargs="?", help="the run directory (its faults/ journal)")
    heal.add_argument("--cluster", type=Path, metavar="STATE_DIR", help="a local cluster's state directory instead")
    heal.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the brokers (default 120)")
    heal.add_argument("--force", action="store_true", help="heal even the faults of a run whose runner is still "
                      "alive (it may be hung; by default its faults are its own to heal)")
    heal.set_defaults(func=cmd_chaos_heal)
