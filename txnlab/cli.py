"""`txnlab` command line: parses arguments and dispatches to the packages below.

What lives here besides parsing: turning options into the arguments of one call (e.g. `--hanging-drill`
into broker overrides, `--broker-config k=v` pairs), the extras check (before dispatching it checks that
the command's optional extras, pyproject.toml, are installed and names the missing ones in one line; the
exporter and `txnlab txn` need none), printing results (tables, JSON, summaries) and the exit code, and the
error edge: a `TxnlabError` (cluster/errors.py) is printed on one line with exit 2, Ctrl-C exits 130 (SIGTERM
and SIGHUP during `chaos run`: 128 + the signal's number, after the heal), any other exception is a bug and
keeps its traceback.

Must not: talk to Kafka or manage processes itself; every subcommand calls one function of
cluster/, exporter/, chaos/, spark_analysis/ or report/.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

from rich.console import Console

from cluster.errors import TxnlabError

err = Console(stderr=True)


def _cluster(args: argparse.Namespace):
    from cluster.local import LocalCluster
    from cluster.layout import HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES
    from report.stack import local_stack
    overrides = dict(HANGING_DRILL_BROKER_CONFIG) if args.hanging_drill else {}
    features = dict(HANGING_DRILL_FEATURES) if args.hanging_drill else {}
    overrides.update(_key_values(args.broker_config or [], "--broker-config"))
    features.update(_key_values(args.feature or [], "--feature"))
    return LocalCluster.load(args.state_dir, nodes=args.nodes, base_port=args.base_port,
                             broker_overrides=overrides or None, features=features or None,
                             security=args.security, kafka_version=args.kafka_version, **local_stack())


def _key_values(items: list[str], flag: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} takes key=value, got {item!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def _active_faults(cluster) -> str | None:
    """The warning when a chaos run left faults journaled as active on this cluster (chaos/nemesis/journal.py)."""
    from chaos.nemesis.journal import active_faults_message
    return active_faults_message(cluster.layout.state_dir)


def cmd_cluster_up(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    notice = _active_faults(cluster)
    if notice and not args.despite_faults:     # before waiting: a paused broker would only time out
        raise TxnlabError(f"{notice} (or `txnlab cluster up --despite-faults` first, to start what the heal "
                          "needs, e.g. a Toxiproxy that died)")
    bootstrap = cluster.up(progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"), timeout=args.timeout)
    print(bootstrap)
    return 0


def cmd_cluster_env(args: argparse.Namespace) -> int:
    import shlex
    cluster = _cluster(args)
    env = {"TXNLAB_KAFKA_BOOTSTRAP": cluster.layout.bootstrap}
    if cluster.layout.secured:
        conn = cluster.connection(args.role)
        env.update({k: v for k, v in conn.to_env().items() if k != "TXNLAB_KAFKA_SASL_PASSWORD"})
        env["TXNLAB_KAFKA_SASL_PASSWORD_FILE"] = str(cluster.secrets.password_file(args.role))
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    _cluster(args).down(purge=args.purge, progress=lambda msg: err.print(f"[cyan]cluster[/]: {msg}"))
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from cluster.console import print_status
    cluster = _cluster(args)
    status = cluster.status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print_status(status, Console())
    healthy = all(n["health"] == "up" for n in status["nodes"])
    if notice := _active_faults(cluster):
        err.print(f"[yellow]warning[/]: {notice}")
        healthy = False
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


def cmd_exporter(args: argparse.Namespace) -> int:
    from exporter.app import run
    return run(args)


def _txn_access(args: argparse.Namespace):
    from exporter.config import load_config
    from exporter.kafka_access import KafkaAccess
    from cluster.diagnose import require_reachable
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


def cmd_chaos_workload(args: argparse.Namespace) -> int:
    from chaos.runner.solo import run_solo
    from cluster.connection import ConnectionSettings
    conn = ConnectionSettings.from_env(bootstrap=args.bootstrap or _local_bootstrap(args))
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
    spec = load_spec(args.spec, short=args.short, client=args.client, compose=args.compose)
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
        from cluster.local import LocalCluster
        backend = LocalBackend(LocalCluster.load(args.cluster))
    directory = (args.run_dir or backend.layout.state_dir) / FAULTS_DIR
    report = heal_journal(directory, backend, timeout=args.timeout, force=args.force,
                          progress=lambda m: err.print(f"[cyan]heal[/]: {m}"))
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from cluster.connection import ConnectionSettings
    from spark_analysis import submit
    conn = ConnectionSettings.from_env(bootstrap=args.bootstrap) if args.bootstrap else None
    if args.out and len(args.run_dirs) > 1:
        print("txnlab verify: --out takes one run; several runs write to their own RUN_DIR/verify", file=sys.stderr)
        return 2
    outs = [args.out or run_dir / "verify" for run_dir in args.run_dirs]
    for out in outs:
        (out / "report.json").unlink(missing_ok=True)  # a stale report must not stand in for this run's
    code = submit.run(args.run_dirs, conn, remote=args.remote, master=args.master, driver_memory=args.driver_memory,
                      out=args.out, examples=args.examples, conf=tuple(args.conf or ()), offline=args.offline)
    reports = [out / "report.json" for out in outs]
    found = [json.loads(r.read_text()) for r in reports if r.exists()]
    if args.json and found:
        print(json.dumps(found[0] if len(reports) == 1 else found, indent=2, sort_keys=True))
    for report in (r for r in reports if r.exists() and not args.json):
        print(f"{json.loads(report.read_text())['valid']}  {report}  {report.parent / 'report.html'}")
    return code if all(r.exists() for r in reports) and code in (0, 1, 2) else 2


def _add_verify_command(sub) -> None:
    verify = sub.add_parser("verify", help="prove a run's outputs with Spark: duplicates, aborted reads, lost "
                            "writes, torn transactions, exactly-once processing (exit 0 valid, 1 anomalies, 2 unknown)")
    verify.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                        help="run directories (runs/<...>) with history/ and end_offsets.json; several share one "
                        "Spark session")
    verify.add_argument("--master", default=os.environ.get("TXNLAB_SPARK_MASTER", "local[*]"),
                        help="Spark master: local[*] (default, or $TXNLAB_SPARK_MASTER) or spark://host:port (e.g. "
                        "of `txnlab spark up`)")
    verify.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                        help="run as a client of this Spark Connect server (default $TXNLAB_SPARK_REMOTE; e.g. of "
                        "`txnlab spark up --connect`; '' for none): no JVM starts here, --master and --driver-memory "
                        "are the server's; the server must read this machine's run directories by the same paths")
    verify.add_argument("--driver-memory", default="4g", help="the driver's heap (in local mode also the executors')")
    verify.add_argument("--out", type=Path, default=None, help="where report.json and report.html go "
                        "(default RUN_DIR/verify)")
    verify.add_argument("--examples", type=int, default=10, help="examples kept per check")
    verify.add_argument("--bootstrap", help="Kafka bootstrap (default $TXNLAB_KAFKA_BOOTSTRAP, else the run's "
                        "cluster.json); SASL/TLS settings from TXNLAB_KAFKA_* variables")
    verify.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark conf (repeatable)")
    verify.add_argument("--json", action="store_true", help="print report.json")
    verify.add_argument("--offline", action="store_true", help="judge from each run's archive (RUN/archive/, "
                        "`txnlab archive`) instead of its cluster: no cluster needed; a missing, cut or miscounted "
                        "archive gives unknown")
    verify.set_defaults(func=cmd_verify)


def cmd_archive(args: argparse.Namespace) -> int:
    """Store what verify reads from the cluster in each run's directory (RUN/archive/)."""
    from chaos.record.archive import write_archive
    from cluster.connection import ConnectionSettings, run_bootstrap
    for run_dir in args.run_dirs:
        if not (run_dir / "history").is_dir():
            raise TxnlabError(f"{run_dir} is not a run directory (no history/)")
        bootstrap = run_bootstrap(run_dir, args.bootstrap)
        if not bootstrap:
            raise TxnlabError(f"{run_dir}: no Kafka bootstrap (its cluster.json has none): pass --bootstrap")
        manifest = write_archive(run_dir, ConnectionSettings.from_env(bootstrap=bootstrap),
                                 progress=lambda m: print(m, file=sys.stderr, flush=True))
        print(manifest)
    return 0


def _add_archive_command(sub) -> None:
    archive = sub.add_parser("archive", help="store both views of a run's topics (to its recorded end offsets) in "
                             "the run directory, so that `txnlab verify --offline` judges it without its cluster")
    archive.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    archive.add_argument("--bootstrap", help="Kafka bootstrap (default $TXNLAB_KAFKA_BOOTSTRAP, else the run's "
                         "cluster.json); SASL/TLS settings from TXNLAB_KAFKA_* variables")
    archive.set_defaults(func=cmd_archive)


def _spark_cluster(args: argparse.Namespace):
    from cluster.spark_layout import StandalonePlan
    from spark_analysis.standalone import StandaloneCluster
    plan = StandalonePlan(base_port=args.base_port, workers=args.workers, worker_cores=args.worker_cores,
                          worker_memory=args.worker_memory, connect=args.connect or args.local, local=args.local,
                          connect_memory=args.connect_memory, connect_c2=args.c2) if args.action == "up" else None
    return StandaloneCluster(args.state_dir, plan)


def cmd_spark_up(args: argparse.Namespace) -> int:
    plan = _spark_cluster(args).up()
    print(plan.connect_url or plan.master_url)
    return 0


def cmd_spark_down(args: argparse.Namespace) -> int:
    stopped = _spark_cluster(args).down()
    print(f"[spark] stopped {len(stopped)} process(es)" if stopped else "[spark] nothing was running")
    return 0


def cmd_spark_status(args: argparse.Namespace) -> int:
    status = _spark_cluster(args).status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        if status["web_ui"]:
            print(f"{status['master']}  {status['status']}  web UI {status['web_ui']}  "
                  f"{status['applications']} running application(s)")
        if status["connect"]:
            print(f"{status['connect']}  {status['connect_status']}  Spark Connect server (master {status['master']})")
        for name, pid in status["processes"].items():
            print(f"  {name:10} {'pid ' + str(pid) if pid else 'not running'}")
        for worker in status["workers"]:
            print(f"  {worker['id']}  {worker['state']}  {worker['cores']} core(s)  {worker['memory_mb']} MB")
    running = any(status["processes"].values())
    return 0 if running and status["status"] == "ALIVE" else 1


def _docker_stack(args: argparse.Namespace):
    from cluster import compose
    from cluster.docker import Stack
    layout = compose.compose_layout(getattr(args, "security", "plaintext"), getattr(args, "base_port", 19000),
                                    getattr(args, "kafka_version", None) or "")
    return Stack.named(args.project, layout)


def cmd_docker_up(args: argparse.Namespace) -> int:
    from cluster.docker import bring_up
    done = bring_up(_docker_stack(args), progress=lambda line: err.print(f"[docker] {line}"), build=not args.no_build)
    print(done["bootstrap"])
    return 0


def cmd_docker_down(args: argparse.Namespace) -> int:
    from cluster.docker import Stack, bring_down
    done = bring_down(Stack.named(args.project), progress=lambda line: err.print(f"[docker] {line}"), keep_engine=args.keep_engine)
    return 1 if any(done["left"].values()) else 0


def cmd_docker_status(args: argparse.Namespace) -> int:
    from cluster.docker import Engine, Stack, engine_answers
    if not engine_answers():
        print("no Docker engine answers")
        return 1
    rows = Stack.named(args.project).status()
    engine = "started by txnlab" if Engine().started_here else "not txnlab's"
    print(f"engine: answering ({engine})")
    for row in rows:
        print(f"  {row['service'] or '-':16} {row['status']:10} {row['image']}  {row['name']}")
    return 0 if rows and all(r["status"] == "running" for r in rows) else 1


def _add_docker_commands(sub) -> None:
    docker = sub.add_parser("docker", help="the compose stack on a Docker engine: the engine started when none "
                            "answers, txnlab's images built from Debian, the stack up on loopback ports (docs/docker.md)")
    dsub = docker.add_subparsers(dest="action", required=True)
    up = dsub.add_parser("up", help="start the engine if needed, build the images, bring the stack up and wait "
                         "until it serves; prints the bootstrap address")
    up.add_argument("--security", choices=["plaintext", "sasl_ssl"], default="plaintext",
                    help="sasl_ssl: the secured profile (SCRAM users, ACLs, the exporter on HTTPS; secrets made once "
                    "into the stack's folder)")
    up.add_argument("--base-port", type=int, default=19000, help="the stack's ports, as the local cluster's "
                    "(client proxies +1..+3, Toxiproxy +700, Prometheus +790, the exporter +800)")
    up.add_argument("--kafka-version", default=None, help="the brokers' Kafka release, one of versions.env's "
                    "KAFKA_VERSIONS "
                    "(default the pin)")
    up.add_argument("--no-build", action="store_true", help="use the images as they are")
    up.set_defaults(func=cmd_docker_up)
    down = dsub.add_parser("down", help="remove the stack's containers and volumes; stop the engine if txnlab "
                           "started it and it runs nothing else (exit 1 when something of the project is left)")
    down.add_argument("--keep-engine", action="store_true")
    down.set_defaults(func=cmd_docker_down)
    status = dsub.add_parser("status", help="the stack's containers (exit 1 when not all running)")
    status.set_defaults(func=cmd_docker_status)
    for p in (up, down, status):
        p.add_argument("--project", default=None, help="the compose project, default txnlab (its files in "
                       "<TXNLAB_HOME>/docker/<project>/)")


def _add_spark_commands(sub) -> None:
    from cluster.spark_layout import DEFAULT_BASE_PORT
    spark = sub.add_parser("spark", help="a Spark standalone cluster on this machine (master and workers on "
                           "127.0.0.1) for `txnlab verify --master spark://...`, and a Spark Connect server for "
                           "`txnlab verify --remote sc://...`")
    ssub = spark.add_subparsers(dest="action", required=True)
    up = ssub.add_parser("up", help="start a master and N workers, and with --connect a Spark Connect server on "
                         "them; prints the master URL, or the server's sc:// URL (no-op when running)")
    up.add_argument("--connect", action="store_true", help="also a Spark Connect server (base port +30) whose "
                    "master is this cluster's")
    up.add_argument("--local", action="store_true", help="only a Spark Connect server, on local[*] (no master "
                    "nor workers)")
    up.add_argument("--connect-memory", default="4g", help="the Connect server's driver heap (on local[*] also "
                    "its executors')")
    up.add_argument("--c2", action="store_true", help="the Connect server's JIT compiles with C2 too (default C1 "
                    "only: warm in seconds for demo-size runs; C2 is faster on millions of records on local[*])")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--worker-cores", type=int, default=1)
    up.add_argument("--worker-memory", default="2g", help="memory a worker offers its executors (e.g. 2g)")
    up.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, help="the master's port; its web UI +1, worker i "
                    "+10+i and its UI +20+i, a Connect server +30; the plan must stay below the ephemeral port range")
    up.set_defaults(func=cmd_spark_up)
    down = ssub.add_parser("down", help="stop the workers (and any executor they left), then the master")
    down.set_defaults(func=cmd_spark_down)
    status = ssub.add_parser("status", help="pids, the master's status and each worker's state (exit 1 when "
                             "not running)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_spark_status)
    for p in (up, down, status):
        p.add_argument("--state-dir", type=Path, default=None, help="where its pids, logs and work dirs live "
                       "(default <TXNLAB_HOME>/spark)")


def cmd_chaos_annotate(args: argparse.Namespace) -> int:
    from chaos.record.annotations import fault_windows, post_to_grafana
    windows = fault_windows(args.run_dir)
    for w in windows:
        print(f"{w.start:.0f}-{w.end:.0f}  {w.process}  {w.label}")
    if args.grafana:
        posted = post_to_grafana(windows, args.grafana, args.run_dir.name)
        err.print(f"posted {posted} fault windows to {args.grafana} (tag txnlab-fault)")
    return 0


def _local_bootstrap(args: argparse.Namespace) -> str | None:
    import os
    if os.environ.get("TXNLAB_KAFKA_BOOTSTRAP"):
        return None
    from cluster.local import LocalCluster
    return LocalCluster.load(args.state_dir).layout.bootstrap


def _print_summary(report: dict) -> None:
    from rich.table import Table
    table = Table(title=f"txnlab report: {report['suite']}  overall {report['valid']}")
    rows = report["summary"]
    for column in (rows[0] if rows else {"experiment": ""}):
        table.add_column(column)
    colours = {"True": "green", "False": "red"}
    for row in rows:
        table.add_row(*[f"[{colours.get(str(v), 'yellow')}]{v}[/]" if k in ("verdict", "recovered") else str(v)
                        for k, v in row.items()])
    Console(width=None if sys.stdout.isatty() else 140).print(table)
    for error in report["errors"]:
        err.print(f"[red]error[/]: {error}")


FLINK_DEMO = "flink-taskmanager-kill"        # `txnlab demo --with-flink` (make demo FLINK=1)


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: the demo suite on local clusters, each run verified, then the report."""
    from report.demo import Demo, DemoOptions, exit_code
    experiments = tuple(args.experiments or DemoOptions.experiments)
    if getattr(args, "with_flink", False) and FLINK_DEMO not in experiments:
        experiments += (FLINK_DEMO,)
    options = DemoOptions(experiments=experiments, clients=tuple(args.clients),
                          transaction_versions=tuple(args.transaction_versions), runs_dir=args.runs_dir,
                          keep=args.keep, seed=args.seed, verify=not args.no_verify)
    try:
        options.check()
    except TxnlabError as exc:
        err.print(f"[red]txnlab demo[/]: {exc}")
        return 2
    report = Demo(options, progress=lambda msg: print(msg, file=sys.stderr, flush=True)).run()
    _print_summary(report)
    print(Path(report["directory"]) / "report.html")
    return exit_code(report)


def cmd_campaign(args: argparse.Namespace) -> int:
    """The whole matrix (report/campaign.py): 0 every cell holds (valid, named or not applicable), 1 not so, 2 a
    cell could not run or the options are wrong."""
    from report import campaign as c
    options = c.CampaignOptions(args.dir, tuple(args.parts), tuple(args.clients), tuple(args.experiments),
                                tuple(args.versions), tuple(args.bugs), tuple(args.tests), args.tries, args.seed,
                                args.again, args.regrade, args.minutes)
    try:
        resolved = options.resolved()
        state = c.load_state(resolved.directory) if (args.list or args.markdown) else None
    except TxnlabError as exc:
        err.print(f"[red]txnlab campaign[/]: {exc}")
        return 2
    if args.markdown:
        print(c.markdown(state), end="")
        return 0
    if args.list:
        for cell in c.plan(resolved):
            done = state["cells"].get(cell["id"], {})
            print(f"{cell['id']:60} {done.get('grade') or ('n/a' if cell.get('not_applicable') else 'pending'):8} "
                  f"{done.get('detail', cell.get('not_applicable', ''))}")
        return 0
    state = c.Campaign(resolved, progress=lambda msg: print(msg, file=sys.stderr, flush=True)).run()
    print(c.markdown(state), end="")
    print(resolved.directory.resolve() / c.PAGE_FILE)
    grades = state["summary"]["by_grade"]
    return 0 if state["summary"]["holds"] else 2 if grades.get("error") or grades.get("pending") else 1


def cmd_bugs_list(args: argparse.Namespace) -> int:
    from rich.table import Table
    from chaos.catalog.bugs import bug_files, load_bug
    table = Table(title="catalogued bugs of Kafka and its clients (txnlab bugs run ID [--tries N] [--full])")
    from report.bugs import expectation
    for column in ("id", "title", "affected", "fixed", "shows as"):
        table.add_column(column)
    for bug_id in bug_files():
        bug = load_bug(bug_id)
        table.add_row(bug.id, bug.title, bug.affected.label, bug.fixed.label, expectation(bug))
        for name in bug.variants:
            variant = load_bug(bug_id, name)
            table.add_row(f"  --variant {name}", bug.variants[name].description, variant.affected.label,
                          variant.fixed.label, "")
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    return 0


def cmd_bugs_run(args: argparse.Namespace) -> int:
    """A catalogued bug on its affected and its fixed side: 0 reproduced on every affected try and absent on
    every fixed one, 1 not so, 2 a try or a verification did not run."""
    from report.bugs import TRIES_FILE, BugOptions, BugRun, exit_code
    options = BugOptions(tries=args.tries, short=not args.full, seed=args.seed, runs_dir=args.runs_dir,
                         base_port=args.base_port, variant=args.variant)
    outcome = BugRun(args.bug, options, progress=lambda msg: print(msg, file=sys.stderr, flush=True)).run()
    _print_summary(outcome["report"])
    print(Path(outcome["report"]["directory"]) / TRIES_FILE)
    print(Path(outcome["report"]["directory"]) / "report.html")
    return exit_code(outcome)


def cmd_bugs_judge(args: argparse.Namespace) -> int:
    """A stored bug suite judged again by the catalog as it is now; the exit code as `bugs run`'s."""
    from report.bugs import TRIES_FILE, exit_code, rejudge
    outcome = rejudge(args.suite, progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    _print_summary(outcome["report"])
    print(Path(args.suite) / TRIES_FILE)
    print(Path(args.suite) / "report.html")
    return exit_code(outcome)


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild report.html and report.json from a stored suite or run (no cluster needed)."""
    from report import build
    report = build.write(args.run_dir)
    if args.json:
        print((Path(args.run_dir) / "report.json").read_text(), end="")
    else:
        _print_summary(report)
        print(Path(args.run_dir) / "report.html")
    return 0


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _versions(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"transaction versions are numbers like 1,2, not {text!r}") from None


def _add_demo_commands(sub) -> None:
    demo = sub.add_parser("demo", help="the main job: a chaos suite on local clusters (coordinator kill, zombie, "
                          "hanging-transaction drill, producer-state storm), verified with Spark, then a report")
    demo.add_argument("--transaction-versions", type=_versions, default=[2], metavar="N[,N]",
                      help="run the suite under these transaction.version levels (1,2 puts them side by side)")
    demo.add_argument("--experiments", type=lambda t: [e for e in t.split(",") if e], default=None,
                      metavar="NAME[,NAME]", help="built-in experiments to run (default: the demo suite)")
    demo.add_argument("--with-flink", action="store_true",
                      help=f"add {FLINK_DEMO} (Flink's exactly-once pipeline on a real Flink cluster; its "
                           "checkpoints and restarts on the timeline)")
    demo.add_argument("--clients", type=_names, default=["confluent"], metavar="NAME[,NAME]",
                      help="run each experiment once per Kafka client (confluent, franz-go, kafkajs, java: their "
                           "transactional producers and processors; docs/clients.md)")
    demo.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the suite directory goes")
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--keep", action="store_true", help="leave the (last level's) clusters running afterwards")
    demo.add_argument("--no-verify", action="store_true", help="skip the Spark verification (verdicts unknown)")
    demo.set_defaults(func=cmd_demo)
    bugs = sub.add_parser("bugs", help="real bugs of Kafka and its clients reproduced by faults: each on the release, "
                          "settings or client it affects beside those that fix it, verified, in one report")
    bsub = bugs.add_subparsers(dest="action", required=True)
    bsub.add_parser("list", help="the catalog (chaos/bugs/)").set_defaults(func=cmd_bugs_list)
    brun = bsub.add_parser("run", help="run a bug's experiment on its affected and its fixed side")
    brun.add_argument("bug", help="a catalogued bug id (e.g. KAFKA-14402, librdkafka-5456) or a bug file")
    brun.add_argument("--tries", type=int, default=1, help="runs per side (each verified)")
    brun.add_argument("--full", action="store_true", help="the experiment's full mode (default: short)")
    brun.add_argument("--variant", help="another pair of sides the bug's file names (`txnlab bugs list`; default: "
                                        "its natural sides, the releases before and after its fix)")
    brun.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the suite directory goes")
    brun.add_argument("--seed", type=int, default=1)
    brun.add_argument("--base-port", type=int, default=25000, help="the sides' clusters' first port (one at a time)")
    brun.set_defaults(func=cmd_bugs_run)
    bjudge = bsub.add_parser("judge", help="judge a stored bug suite again by the catalog as it is now (its runs' "
                                           "verify reports and histories; nothing runs against a cluster)")
    bjudge.add_argument("suite", type=Path, help="the suite directory (runs/<stamp>-<bug>)")
    bjudge.set_defaults(func=cmd_bugs_judge)
    camp = sub.add_parser("campaign", help="the whole matrix beside the gate: every built-in experiment on every "
                          "client, the core tests on every Kafka release, every catalogued bug's sides, the tests that "
                          "left the gate; resumable (a cell done is not run again), one page (docs/campaign.md)")
    camp.add_argument("--dir", type=Path, default=Path("runs/campaign"), help="the campaign's directory (default "
                      "runs/campaign: run again, it resumes)")
    camp.add_argument("--parts", type=_names, default=[], metavar="PART[,PART]",
                      help="experiments, releases, bugs, tests (default: all)")
    camp.add_argument("--clients", type=_names, default=[], metavar="NAME[,NAME]", help="default: every client")
    camp.add_argument("--experiments", type=_names, default=[], metavar="NAME[,NAME]",
                      help="built-in experiments (default: every one)")
    camp.add_argument("--versions", type=_names, default=[], metavar="V[,V]",
                      help="Kafka releases (default: every one of KAFKA_VERSIONS)")
    camp.add_argument("--bugs", type=_names, default=[], metavar="ID[,ID]", help="catalogued bugs (default: all)")
    camp.add_argument("--tests", type=_names, default=[], metavar="MODULE[,MODULE]",
                      help="test modules of the tests that left the gate (default: every one, e.g. test_flink)")
    camp.add_argument("--tries", type=int, default=3, help="tries per side of each bug (default 3)")
    camp.add_argument("--seed", type=int, default=1)
    camp.add_argument("--again", action="store_true", help="run the selected cells again, even those done")
    camp.add_argument("--minutes", type=float, default=None, help="start no cell after this many minutes (the "
                      "rest stay pending for the next slice: a nightly window)")
    camp.add_argument("--regrade", action="store_true", help="run nothing: grade the selected bug cells done again "
                      "from their stored suites by the catalog as it is now")
    camp.add_argument("--list", action="store_true", help="the selected cells and their state; run nothing")
    camp.add_argument("--markdown", action="store_true", help="print the campaign in Markdown (docs/campaign.md); "
                      "run nothing")
    camp.set_defaults(func=cmd_campaign)
    report = sub.add_parser("report", help="rebuild report.html and report.json from a stored suite or run")
    report.add_argument("run_dir", type=Path, help="a suite directory (runs/<id>-demo) or a run directory")
    report.add_argument("--json", action="store_true", help="print report.json")
    report.set_defaults(func=cmd_report)


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
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


def _add_txn_commands(sub) -> None:
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


def _add_chaos_commands(sub) -> None:
    from chaos.workloads import WORKLOADS
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txnlab", description="Observe, break and verify transactional Kafka")
    sub = parser.add_subparsers(dest="command", required=True)
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
        _add_cluster_options(p)
    smoke = sub.add_parser("smoke", help="a transactional smoke workload against the local cluster, with a summary")
    smoke.add_argument("--state-dir", type=Path, default=None)
    smoke.add_argument("--transactions", type=int, default=20)
    smoke.set_defaults(func=cmd_smoke)
    exporter = sub.add_parser("exporter", help="the Prometheus exporter: /metrics, /healthz, /ready")
    from exporter.arguments import add_arguments
    add_arguments(exporter)
    exporter.set_defaults(func=cmd_exporter)
    _add_txn_commands(sub)
    _add_chaos_commands(sub)
    _add_verify_command(sub)
    _add_archive_command(sub)
    _add_spark_commands(sub)
    _add_docker_commands(sub)
    _add_demo_commands(sub)
    return parser


EXTRAS = {  # optional extra of pyproject.toml -> modules that show it installed (with the extras it includes)
    "lab": ("confluent_kafka", "psutil", "requests"),
    "verify": ("pyspark", "confluent_kafka"),
    "report": ("matplotlib", "requests"),
    "docker": ("docker", "psutil", "requests"),
}
COMMAND_EXTRAS = {"cluster": ("lab",), "smoke": ("lab",), "chaos": ("lab",), "verify": ("verify",), "archive": ("verify",),
                  "spark": ("lab", "verify"),
                  "report": ("report",), "demo": ("lab", "verify", "report"), "docker": ("lab", "docker")}


def missing_extras(args: argparse.Namespace) -> list[str]:
    """The extras the command needs and this installation lacks (the exporter and `txn` need none)."""
    import importlib.util
    skipped = {"verify"} if getattr(args, "no_verify", False) else set()   # `txnlab demo --no-verify`
    needed = [e for e in COMMAND_EXTRAS.get(args.command, ()) if e not in skipped]
    return [e for e in needed if not all(importlib.util.find_spec(m) for m in EXTRAS[e])]


def main(argv: list[str] | None = None) -> int:
    from cluster.connection import install_log_redaction
    install_log_redaction(logging.lastResort)  # no handler is set up here: Python's last resort prints warnings
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if getattr(args, "func", None) is cmd_chaos_workload:
        args.workload_options = unknown
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if missing := ",".join(missing_extras(args)):
        print(f"error: txnlab {args.command} needs the optional {missing} dependencies: "
              f"pip install 'txnlab[{missing}]'", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:      # Ctrl-C, or SIGTERM/SIGHUP in chaos run (after it healed)
        err.print(f"[yellow]interrupted[/] {exc}".rstrip())
        return 128 + getattr(exc, "signum", 2)
    except TxnlabError as exc:  # the user's to fix: one clear message; anything else keeps its traceback
        err.print(f"[red]error[/]: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
