"""The verification job (run by spark-submit; `txnlab verify` is the thin wrapper, submit.py).

    spark-submit --jars <connector jars> spark_analysis/job.py RUN_DIR [RUN_DIR ...] [--out DIR] [--examples N]
        [--offline]

Owns: the thin main: per run, evidence first (evidence.py: the run's files, the topics, the history's seals
and pairing), then the run's frames (load.py), the checks and
the verdict (verdict.py), report.json and report.html in <RUN_DIR>/verify/ (or --out, for one run), a
one-line summary per check on stderr, the exit code (0 valid, 1 anomalies, 2 unknown or error: a crash is
never exit 1; for several runs the worst). Several runs share one Spark session (one JVM start). The Kafka connection comes from
TXNLAB_KAFKA_* variables (secrets never on the command line), the bootstrap by default from the run's
cluster.json; with --offline no cluster is asked: both views come from each run's archive (RUN/archive/,
chaos/record/archive.py), whose completeness evidence.check_archive decides, and the same checks run on them.
Must not: hold record-sized data on the driver.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from cluster.access.connection import ConnectionSettings, run_bootstrap
from spark_analysis import load, page, verdict
from spark_analysis.evidence import (Evidence, HistorySummary, check_archive, check_history, check_incarnations,
                                    check_topics, load_run_files, workload_kinds)
from spark_analysis.submit import hwm_records, small_run

class JobError(Exception):
    """A run this job cannot verify at all (exit 2, one line)."""


GROUP_OFFSETS_SCHEMA = "group string, topic string, partition int, committed long"
END_OFFSETS_SCHEMA = "topic string, partition int, lso long, hwm long"
CONSUMED_SCHEMA = "group string, topic string, partition int"


STARTED = time.monotonic()


def progress(message: str) -> None:
    print(f"[verify +{time.monotonic() - STARTED:5.1f}s] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="spark_analysis.job")
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    p.add_argument("--out", type=Path, default=None, help="where report.json/html go (default RUN_DIR/verify; "
                   "one run only)")
    p.add_argument("--examples", type=int, default=10, help="examples per check")
    p.add_argument("--bootstrap", default=None)
    p.add_argument("--offline", action="store_true", help="read both views from each run's archive (RUN/archive/), "
                   "not from Kafka: no cluster needed")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT", help="run as a Spark Connect client of this "
                   "server (default: the Spark session spark-submit made)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark SQL conf for this "
                   "session (with --remote; spark-submit takes its own --conf)")
    args = p.parse_args(argv)
    if args.out is not None and len(args.run_dirs) > 1:
        p.error("--out takes one run; several runs write to their own RUN_DIR/verify")
    return args


def connection(run_dir: Path, bootstrap: str | None) -> ConnectionSettings:
    bootstrap = run_bootstrap(run_dir, bootstrap)
    if not bootstrap:
        raise JobError(f"no Kafka bootstrap: {run_dir / 'cluster.json'} has none; pass --bootstrap or set "
                         "TXNLAB_KAFKA_BOOTSTRAP")
    return ConnectionSettings.from_env(bootstrap=bootstrap)


def gather_evidence(run_dir: Path, conn: ConnectionSettings | None) -> Evidence:
    """The run's files and the completeness of what bounds its views: the cluster's topics (conn), or without
    a connection (offline) the run's archive of them."""
    evidence = load_run_files(run_dir)
    check_incarnations(run_dir, evidence)
    if evidence.end_offsets and conn is None:
        check_archive(run_dir, evidence)
    elif evidence.end_offsets:
        try:
            check_topics(conn, evidence)
        except Exception as exc:  # noqa: BLE001 - an unreachable cluster is missing evidence, not a crash
            evidence.gaps.append(f"cannot read the topics from {conn.describe()}: {type(exc).__name__}: {exc}")
    return evidence


def raw_view(spark: SparkSession, run_dir: Path, evidence: Evidence, conn: ConnectionSettings | None,
             isolation: str) -> DataFrame:
    """One view's Kafka rows up to its recorded ends: from Kafka, or (no connection: offline) the run's archive; with
    the archived incarnations of topics the run deleted, each under its alias."""
    if conn is None:
        rows = load.read_archived_view(spark, run_dir, isolation)
    else:
        ends = load.view_ends(evidence.end_offsets, dict(load.VIEWS)[isolation])
        rows = load.read_view(spark, load.kafka_options(conn.java_properties()), ends, isolation)
    old = load.read_incarnations(spark, run_dir, evidence.incarnations, isolation)
    return rows if old is None else rows.select(*load.KAFKA_COLUMNS).unionByName(old)


def build_frames(spark: SparkSession, run_dir: Path, ops: DataFrame, evidence: Evidence, summary: HistorySummary,
                 conn: ConnectionSettings | None, partitions: int) -> verdict.Frames:
    """The checks' frames. Both views are read in at most `partitions` tasks (the shuffle partitions sized to
    the run): the connector makes one task per topic partition, and every later scan of a persisted view
    would pay as many tasks (a 3,300-record run of 42 topic partitions ran ~5,000 tasks in all)."""
    inputs = sorted({i for i, _, _ in summary.copiers if i})
    outputs = sorted({o for _, o, _ in summary.copiers if o})
    derived = sorted({t for s in summary.streams for t in s[2:] if t})
    committed = load.records_of(raw_view(spark, run_dir, evidence, conn, "read_committed").coalesce(partitions),
                                "committed", inputs, outputs, evidence.run_tag, derived)
    uncommitted = load.records_of(raw_view(spark, run_dir, evidence, conn, "read_uncommitted").coalesce(partitions),
                                  "uncommitted", inputs, outputs, evidence.run_tag, derived)
    groups = [(g, t, int(p), o) for g, topics in evidence.group_offsets.items() for t, parts in topics.items()
              for p, o in parts.items()]
    ends = [(t, int(p), o["lso"], o["hwm"]) for t, parts in evidence.end_offsets.items() for p, o in parts.items()]
    # a deleted incarnation is a topic of its own (its alias): its ends and its group's offsets when it was deleted
    # (the group had consumed all of it: evidence.check_incarnations); the history's references moved by record id
    old = evidence.incarnations
    groups += [(m["group"], m["alias"], int(p), o) for m in old for p, o in m["group_offsets"].items()]
    ends += [(m["alias"], int(p), o["lso"], o["hwm"]) for m in old for p, o in m["ends"].items()]
    consumed = [(m["group"], m["alias"], int(p)) for m in old for p in m["ends"]]
    moved = load.incarnation_of(uncommitted, old)
    return verdict.Frames(
        committed=committed, uncommitted=uncommitted, writes=load.relabel(load.writes_of(ops), moved),
        observed=load.relabel(load.observed_reads(ops), moved),
        consumed=load.consumed_inputs(ops).unionByName(spark.createDataFrame(consumed, CONSUMED_SCHEMA)),
        group_offsets=spark.createDataFrame(groups, GROUP_OFFSETS_SCHEMA),
        acked=load.relabel(load.acknowledged(ops), moved),
        copiers=spark.createDataFrame(summary.copiers, load.COPIER_SCHEMA),
        streams=spark.createDataFrame(summary.streams, load.STREAMS_SCHEMA),
        end_offsets=spark.createDataFrame(ends, END_OFFSETS_SCHEMA),
        polls=load.relabel(load.consumer_polls(ops), moved), seeks=load.relabel_by_time(load.consumer_seeks(ops), old))


RECORDS_PER_SHUFFLE_PARTITION = 200_000
SHUFFLE_PARTITIONS_MAX = 200
ONE_PARTITION_BELOW = 50_000        # records: a smaller run is checked in one shuffle partition
SHUFFLE = "spark.sql.shuffle.partitions"
# Whole-stage code generation and generated expressions, off for small runs (< submit.SMALL_RUNS_RECORDS): a few
# thousand records spent seconds compiling generated Java in a cold JVM, and little running it (a 5,000-record
# run through a new Connect server: first verification 14.5 -> 10.0-10.7 s, the next 7.3 -> 5.0-5.3 s)
CODEGEN = {False: {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"},
           True: {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}}


# Rows of the history's Parquet twin a task's vectorized reader holds at once: an operation can carry thousands of
# record ids (a 5,000-record transaction's), and Spark's 4,096 rows of them are a column vector of ~600 MB per
# task: a Connect server verifying a 10^6-record run died of it ("Cannot reserve additional contiguous bytes in
# the vectorized reader", OutOfMemoryError, 4g heap)
HISTORY_BATCH_ROWS = {"spark.sql.parquet.columnarReaderBatchSize": "256"}


def sized_settings(records: int, parallelism: Callable[[], int]) -> dict[str, str]:
    """The Spark SQL settings of a run of `records` records: its shuffle partitions (sized_partitions; one below
    ONE_PARTITION_BELOW, where a task per core costs more than it shares), code generation (off for small
    runs) and the history reader's batch (HISTORY_BATCH_ROWS). `parallelism` is asked only when needed (on
    Spark Connect it is a query)."""
    partitions = 1 if records < ONE_PARTITION_BELOW else sized_partitions(records, parallelism())
    return {SHUFFLE: str(partitions), **CODEGEN[not small_run(records)], **HISTORY_BATCH_ROWS}


def size_session(spark: SparkSession, evidence: Evidence, given: dict[str, str]) -> dict[str, str]:
    """Set the session's sized_settings for this run (its records, from the recorded HWMs: every run of a shared
    session gets its own); a value given (`--conf KEY=VALUE` to spark-submit, or to the job with --remote) is
    kept. Returns the settings in force."""
    settings = sized_settings(run_records(evidence), lambda: default_parallelism(spark))
    submitted = {} if load.is_connect(spark) else dict(spark.sparkContext.getConf().getAll())
    for key, value in settings.items():
        if key in given or key in submitted:
            settings[key] = spark.conf.get(key)
        else:
            spark.conf.set(key, value)
    return settings


def run_records(evidence: Evidence) -> int:
    """The run's records as its recorded high watermarks count them (0 when none were recorded)."""
    return hwm_records(evidence.end_offsets)


def default_parallelism(spark: SparkSession) -> int:
    """The cores Spark schedules on: the SparkContext's, or for a Connect session the partitions Spark gives a
    range without a count (its default parallelism), asked of the server."""
    if not load.is_connect(spark):
        return spark.sparkContext.defaultParallelism
    from pyspark.sql import functions as F
    return int(spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]) + 1


def sized_partitions(records: int, parallelism: int) -> int:
    """One shuffle partition per RECORDS_PER_SHUFFLE_PARTITION records, at least one per core, at most
    SHUFFLE_PARTITIONS_MAX."""
    return max(parallelism, min(SHUFFLE_PARTITIONS_MAX, -(-records // RECORDS_PER_SHUFFLE_PARTITION)))


def history_counts(summary: HistorySummary) -> dict:
    return {"operations": summary.operations, "damaged_lines": summary.damaged, "attempts": summary.attempts}


def verify(spark: SparkSession, run_dir: Path, args: argparse.Namespace,
           conn: ConnectionSettings | None = None) -> dict:
    started = time.monotonic()
    run_dir = run_dir.resolve()
    conn = None if args.offline else conn or connection(run_dir, args.bootstrap)
    progress(f"run {run_dir.name}: checking the evidence against "
             f"{'its archive (offline)' if args.offline else conn.describe()}")
    evidence = gather_evidence(run_dir, conn)
    settings = size_session(spark, evidence, given_conf(args))
    ops, kept = history_frame(spark, run_dir, run_records(evidence))
    try:
        return _verify(spark, run_dir, args, conn, ops, evidence, settings, started)
    finally:
        if kept:
            load.let_go(ops)                     # a shared server (Spark Connect) serves the next run


def history_frame(spark: SparkSession, run_dir: Path, records: int) -> tuple[DataFrame, bool]:
    """The history's operations for the checks, and whether they are kept (let_go them after). A large run's
    history that is all columnar twins is not kept: each query reads only the twin's columns it needs (the
    history's checks no record id, the writes' frame once), where a kept copy wrote and read back every id
    (~100 MB for 10^6 records). Otherwise read once and kept; big, so not in heap: on Spark Connect a checkpoint
    at every size (rows written straight to disk; a persisted frame's cache builds columns in the heap first,
    which a 10^6-record run's history overflowed)."""
    history = load.read_history(spark, run_dir)
    if not small_run(records) and load.history_is_columnar(run_dir):
        return history, False
    return load.keep(history, StorageLevel.DISK_ONLY), True


def _verify(spark: SparkSession, run_dir: Path, args: argparse.Namespace, conn: ConnectionSettings | None, ops: DataFrame,
            evidence: Evidence, settings: dict[str, str], started: float) -> dict:
    summary = check_history(spark, run_dir, ops, evidence)
    counts = history_counts(summary)
    progress(f"history: {counts['operations']} operations, attempts {counts['attempts']}; seals, pairing and "
             f"offsets checked")
    if evidence.complete:
        partitions = int(settings[SHUFFLE])
        progress(f"reading the topics (read_committed and read_uncommitted{', archived' if conn is None else ''}) "
                 f"and running the checks "
                 f"({partitions} shuffle partition{'s' * (partitions != 1)}, code generation "
                 f"{'on' if settings['spark.sql.codegen.wholeStage'] == 'true' else 'off'})")
        frames = build_frames(spark, run_dir, ops, evidence, summary, conn, partitions)
        results = verdict.run_checks(frames, args.examples, progress, workload_kinds(summary),
                                     checkpoint=small_run(run_records(evidence)))
        evidence.gaps += results.get("gaps", [])
        counts["records"] = results.pop("records", None)
    else:
        progress("evidence incomplete: " + "; ".join(evidence.gaps))
        results = verdict.unknown_checks(evidence.gaps)
    valid = verdict.overall(results["checks"])
    return {"run": str(run_dir), "valid": valid, "evidence": {"complete": evidence.complete, "gaps": evidence.gaps},
            "counts": counts, **{k: v for k, v in results.items() if k != "gaps"},
            "topics": sorted(evidence.end_offsets), "views_from": "archive" if conn is None else "kafka",
            "seconds": round(time.monotonic() - started, 1)}


def verify_or_error(spark: SparkSession, run_dir: Path, args: argparse.Namespace,
                    conn: ConnectionSettings | None = None) -> tuple[dict | None, int]:
    """One run's report and exit code; a run that cannot be verified is exit 2 and does not stop the others."""
    try:
        report = verify(spark, run_dir, args, conn)
    except JobError as exc:
        progress(f"error: {exc}")
        return None, 2
    except Exception:  # noqa: BLE001 - exit 1 means anomalies: a crash must not look like one
        traceback.print_exc()
        progress(f"error: the verification of {run_dir} failed (above); the verdict is unknown")
        return None, 2
    out = args.out or run_dir / "verify"
    write_report(report, out)
    for name, check in report["checks"].items():
        progress(f"{name:<24} {check['valid']!s:<8} {'' if check['count'] is None else check['count']}")
    progress(f"valid: {report['valid']}  ({out / 'report.json'})")
    return report, verdict.exit_code(report["valid"])


def write_report(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    (out / "report.html").write_text(page.render(report))


def given_conf(args: argparse.Namespace) -> dict[str, str]:
    pairs = [item.partition("=") for item in args.conf]
    bad = [k for k, eq, _ in pairs if not eq or not k]
    if bad:
        raise ValueError(f"--conf takes KEY=VALUE, not {bad[0]!r}")
    return {k.strip(): v for k, _, v in pairs}


def session(remote: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """spark-submit's session, or a new session of the Spark Connect server at `remote` with `conf` set."""
    if remote is None:
        spark = SparkSession.builder.appName("txnlab-verify").getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        return spark
    spark = SparkSession.builder.remote(remote).appName("txnlab-verify").create()
    for key, value in (conf or {}).items():
        spark.conf.set(key, value)
    return spark


def main(argv: list[str] | None = None, conn: ConnectionSettings | None = None) -> int:
    """The job; `conn`: the Kafka connection of every run (default TXNLAB_KAFKA_* and each run's cluster.json)."""
    args = parse_args(argv)
    try:
        spark = session(args.remote, given_conf(args))
    except Exception:  # noqa: BLE001 - no Spark, no verdict: unknown, not anomalies
        traceback.print_exc()
        progress(f"error: {'the Spark Connect server ' + args.remote + ' did not answer' if args.remote else 'Spark did not start'}"
                 f" (above); the verdict is unknown")
        return 2
    codes = []
    try:
        for index, run_dir in enumerate(args.run_dirs, 1):
            if len(args.run_dirs) > 1:
                progress(f"run {index}/{len(args.run_dirs)}: {run_dir}")
            codes.append(verify_or_error(spark, run_dir, args, conn)[1])
    finally:
        spark.stop()
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
