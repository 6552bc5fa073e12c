"""`txnlab verify`, `txnlab archive` and `txnlab spark up|down|status` (the Spark job, a run's archive, a standalone
Spark cluster)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


from cluster.access.errors import TxnlabError


def cmd_verify(args: argparse.Namespace) -> int:
    from cluster.access.connection import ConnectionSettings
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


def add_verify_commands(sub) -> None:
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
    from cluster.access.connection import ConnectionSettings, run_bootstrap
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


def add_archive_commands(sub) -> None:
    archive = sub.add_parser("archive", help="store both views of a run's topics (to its recorded end offsets) in "
                             "the run directory, so that `txnlab verify --offline` judges it without its cluster")
    archive.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    archive.add_argument("--bootstrap", help="Kafka bootstrap (default $TXNLAB_KAFKA_BOOTSTRAP, else the run's "
                         "cluster.json); SASL/TLS settings from TXNLAB_KAFKA_* variables")
    archive.set_defaults(func=cmd_archive)


def _spark_cluster(args: argparse.Namespace):
    from cluster.lab.spark_layout import StandalonePlan
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


def add_spark_commands(sub) -> None:
    from cluster.lab.spark_layout import DEFAULT_BASE_PORT
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


def add_commands(sub) -> None:
    add_verify_commands(sub)
    add_archive_commands(sub)
    add_spark_commands(sub)
