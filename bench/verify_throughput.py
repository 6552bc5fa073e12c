"""Benchmark: `txnlab verify` throughput and memory, side by side with Kafka's own consumer and a naive checker.

One invocation, one dedicated 3-node local cluster (ports --base-port .. +899, default 27000; state in
.txnlab/bench-verify/cluster, started fresh and purged at the end unless --keep). For each N (--records,
repeatable), in order:
  1. generate a run directory of N records that looks exactly like a txnlab run: topics <tag>-a and
     <tag>-b (6 partitions each); --producers processes txp-0.. running txn-producer's own worker
     (chaos/workloads/confluent/txn_producer.py: same plan, record values and headers, transactional.id
     "<tag>.<process>", the same invoke/ok/fail history operations) with a batching producer,
     transactions of --txn-records records (default 5,000: measured here, the brokers spend about half
     the CPU per record on 5,000-record transactions that they spend on 1,000-record ones; the last
     transaction may be shorter so exactly N are written), about --abort-share of them aborted
     deliberately (5%); the history written in bulk by this process (ops sent
     over pipes, not the run's Unix socket) into history/part-NNNNN.jsonl rolled every ROLL_LINES lines;
     spec.json, cluster.json, end_offsets.json (measured once every LSO has caught up with its high
     watermark) and group_offsets.json ({}) as chaos/workloads/run.py writes them;
  2. (a) Kafka's ConsumerPerformance, read_committed, both topics (--include), --num-records = the
         committed records, run as kafka-consumer-perf-test.sh runs it (G1, -Xmx512M, full JIT); then
         again read_uncommitted, every record: verify must read both views, so "both views" is N over
         the two fetch times together;
     (b) bench/peers/naive_checker.py RUN_DIR: wall time (and peak RSS);
     (c) `.venv/bin/txnlab verify RUN_DIR --json`: wall time, and the peak RSS of its process tree
         sampled every 0.2 s (the whole tree, and the JVM driver, java ... SparkSubmit, on its own).
         Exit 0, 1 or 2 with RUN_DIR/verify/report.json written counts as a verify run; anything else is
         reported as a failure with its exit code and the last lines of its output, and (a), (b) still are;
     (d) bench/spark_read_floor.py through spark-submit as verify runs its job (same jars, driver options,
         class archive): Spark's Kafka connector reading both views exactly as the job does, and nothing
         else (no parsing, no checks); its own seconds (the read job, without the session's start) are the
         floor under verify's job time in Spark on this machine;
     (c') `txnlab verify RUN_DIR --remote sc://...` through a Spark Connect server on local[*] the benchmark
         starts for this N (port 31530, C2 too from 200,000 records; stopped after): cold = the server's start
         + the first verification, warm = the median of 9 more (1 more from 200,000 records); the job's
         progress lines give when the history was read and checked (`phases`).
         (c) itself runs spark-submit (`--remote ''`) even with $TXNLAB_SPARK_REMOTE set;
     (e) with --standalone, (c) again on a Spark standalone cluster the benchmark starts (1 master, 2 workers
         of 1 core, 3g executors; stopped at the end): the JVM driver's RSS holds no executor there.
     (f) `txnlab archive RUN_DIR` (docs/verify.md: both views read to the recorded ends into Parquet, sealed):
         wall time and peak RSS, beside (a)'s two reads (its peer: Kafka's consumer reading the same views), and
         the archive's bytes (each view, the manifest) against the run's history's. With --only-archive, (a) and
         (f) alone.
The driver JVM maps its class archive (spark_analysis/submit.py) when an earlier verify wrote it; results say
whether it existed when the benchmark started (`machine.class_archive`); the Connect server its own
(`machine.connect_class_archive`).
Rates are records/s = N / seconds, N = records in the run's log (committed and aborted): all three read
the whole log. For (a) the seconds are Kafka's own fetch time (without JVM start and group join; its
wall time is in the JSON); for (b) and (c) the wall time of the command. Ratios: verify/Kafka and
verify/naive records/s (above 1: verify is faster). The Kafka client settings reach (b) and (c) as
$TXNLAB_KAFKA_* variables.
Progress goes to stderr; a Markdown table to stdout; the results JSON to --out (default
.txnlab/bench-verify/result.json), rewritten after every N. Run directories and topics are deleted after
each N unless --keep (then they, and the cluster, stay).
Owns: nothing beyond this benchmark. Must not: touch other clusters, or stop processes it did not start.
Usage:
    .venv/bin/python bench/verify_throughput.py --records 1000000 --records 10000000 [--base-port 27000] [--keep]
        [--standalone] [--only-archive]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict
from multiprocessing.connection import Connection, wait as wait_readable
from pathlib import Path

import psutil
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from chaos.record.columnar import write_twin
from chaos.record.history import ROLL_LINES, encode, make_op, seal_line, write_format_marker
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.run import RunInfo, new_run_dir, new_run_tag
from chaos.workloads.base import WorkloadContext
from chaos.workloads.topics import TopicError
from chaos.workloads.confluent import txn_producer
from chaos.workloads.confluent.txn_producer import TransactionalWorker
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.lab.java import TEMPLATES, java_binary, require_kafka_libs
from cluster.lab.local import LocalCluster
from report.stack import local_stack
from cluster.access.reads import partition_ends
from cluster.access.smoke import ensure_topic
from cluster.lab.spark_layout import StandalonePlan
from cluster.lab.versions import REPO_ROOT, pinned, txnlab_home
from spark_analysis.standalone import StandaloneCluster
from cluster.access.waiting import wait_until

HOME = txnlab_home() / "bench-verify"
STANDALONE_PLAN = StandalonePlan(base_port=31600, workers=2, worker_memory="4g")
STANDALONE_EXECUTOR_MEMORY = "3g"
CONNECT_PLAN = StandalonePlan(base_port=31500, connect=True, local=True)     # its server at 31530
NAIVE = Path(__file__).resolve().parent / "peers" / "naive_checker.py"
SPARK_READS = Path(__file__).resolve().parent / "spark_read_floor.py"
TXNLAB = Path(sys.executable).parent / "txnlab"
PARTITIONS = 6
SAMPLE_S = 0.2
DONE = b"\x00"                      # a generator's last message: DONE + its tally as JSON
# The generators' producer: txn-producer's settings (idempotent, transactional) with batching for bulk.
BULK_PRODUCER = {"linger.ms": 50, "batch.size": 1_000_000, "batch.num.messages": 10_000,
                 "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1_048_576}
# kafka-consumer-perf-test.sh's JVM (kafka-run-class.sh defaults), not cluster.lab.java's short-tool flags.
PERF_JVM = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
SPARK_DRIVER = "org.apache.spark.deploy.SparkSubmit"
SPARK_LAUNCHER = "org.apache.spark.launcher.Main"


def say(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- generating a run: one process per producer ------------------------------------------------------
class PipeHistory:
    """A generator's history handle: operations made exactly as HistoryClient makes them, sent to the parent
    over a pipe; keeps a tally of txn outcomes and of their records per topic."""

    def __init__(self, pipe: Connection, run_start_ns: int):
        self.pipe, self.run_start_ns = pipe, run_start_ns
        self.tally: Counter = Counter()

    def record(self, process: str, op_type: str, f: str, value) -> dict:
        op = make_op(self.run_start_ns, process, op_type, f, value)
        self.pipe.send_bytes(encode(op))
        if f == "txn" and op_type != "invoke":
            self.tally[f"attempts_{op_type}"] += 1
            for w in value["writes"]:
                self.tally[f"records_{op_type}|{w['topic']}"] += 1
        return op

    def close(self) -> None:
        self.pipe.send_bytes(DONE + json.dumps(self.tally).encode())
        self.pipe.close()


class BulkWorker(TransactionalWorker):
    """txn-producer's worker (plan, values, headers, outcomes and history operations unchanged) whose
    producer batches: the one difference from a real run is how fast the records go out."""

    producer_config = BULK_PRODUCER


def workload_args(job: dict) -> argparse.Namespace:
    """txn-producer's own arguments (its parser's defaults for everything the bench does not set)."""
    parser = argparse.ArgumentParser()
    txn_producer.add_arguments(parser)
    return parser.parse_args(["--topics", *job["topics"], "--records", str(job["txn_records"]), "--abort-share",
                              str(job["abort_share"]), "--rate", "0", "--size", str(job["size"]),
                              "--transaction-timeout-ms", "60000", "--request-timeout-s", "30"])


def generator(job: dict, pipe: Connection) -> None:
    """One producer process: job["transactions"] attempts of job["txn_records"] records (the last one
    job["last_records"]), every operation sent to the parent."""
    history = PipeHistory(pipe, job["run_start_ns"])
    ctx = WorkloadContext(conn=ConnectionSettings.from_env(environ=job["conn_env"]), history=history,
                          run_tag=job["tag"], process=job["process"],
                          rng=random.Random(f"{job['seed']}/{job['process']}"), deadline=None)
    args = workload_args(job)
    # a broker may not know the just-created topics yet (ensure_topic asked another one): ask again
    worker = wait_until(lambda: BulkWorker(ctx, args), 30, f"{job['process']} to see {job['topics']}", 0.5,
                        ignore=(TopicError,))
    for n in range(job["transactions"]):
        wait_until(worker.ensure_producer, 120, f"{job['process']} to initialise its producer", 1.0)
        if n == job["transactions"] - 1:
            args.records = job["last_records"]
        worker.one_attempt()
    if worker.producer is not None:
        worker.producer.flush(30)
    history.close()


class PartWriter:
    """history/part-NNNNN.jsonl rolled every ROLL_LINES lines and sealed, each with its columnar twin, as
    chaos.record.history.HistoryWriter writes them (its seal_line, format marker and chaos/record/columnar.py's twin)."""

    def __init__(self, run_dir: Path, run_start_ns: int = 0):
        self.dir = run_dir / "history"
        self.dir.mkdir(parents=True, exist_ok=True)
        write_format_marker(run_dir)
        self.run_start_ns = run_start_ns
        self.part, self.lines, self.bytes = 0, 0, 0
        self.file = self._open()

    def _open(self):
        return open(self.dir / f"part-{self.part:05d}.jsonl", "ab", buffering=1 << 22)

    def write(self, line: bytes) -> None:
        self.file.write(line)
        self.lines, self.bytes = self.lines + 1, self.bytes + len(line)
        if self.lines % ROLL_LINES == 0:
            self._close(final=False)
            self.part += 1
            self.file = self._open()

    def _close(self, final: bool) -> None:
        in_part = self.lines - self.part * ROLL_LINES
        self.file.write(seal_line(self.run_start_ns, self.part, in_part, final, self.lines))
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        write_twin(Path(self.file.name))          # its columnar twin, as the runner's writer leaves it

    def close(self) -> None:
        self._close(final=True)


def plan_jobs(n: int, args: argparse.Namespace, tag: str, topics: list[str], conn: ConnectionSettings,
              run_start_ns: int) -> list[dict]:
    """Split ceil(N / K) transactions over the producers; txp-0's last one is shorter when K does not divide N."""
    total = math.ceil(n / args.txn_records)
    share, extra = divmod(total, args.producers)
    jobs = []
    for i in range(args.producers):
        count = share + (1 if i < extra else 0)
        if count:
            jobs.append({"process": f"txp-{i}", "transactions": count, "txn_records": args.txn_records,
                         "last_records": args.txn_records, "tag": tag, "topics": topics, "seed": args.seed,
                         "size": args.size, "abort_share": args.abort_share, "run_start_ns": run_start_ns,
                         "conn_env": conn.to_env()})
    jobs[0]["last_records"] = n - (total - 1) * args.txn_records
    return jobs


def run_generators(jobs: list[dict], history: PartWriter, n: int) -> Counter:
    """Start one process per job, write their operations as they arrive; the summed tallies."""
    ctx = mp.get_context("spawn")
    readers: dict[Connection, mp.Process] = {}
    for job in jobs:
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=generator, args=(job, writer), name=f"bench-{job['process']}", daemon=True)
        proc.start()
        writer.close()
        readers[reader] = proc
    tally: Counter = Counter()
    completed, last_report = 0, time.monotonic()
    try:
        while readers:
            for reader in wait_readable(list(readers), timeout=5):
                try:
                    line = reader.recv_bytes()
                except EOFError:
                    proc = readers.pop(reader)
                    proc.join(10)
                    raise RuntimeError(f"generator {proc.name} ended without finishing (exit {proc.exitcode})") from None
                if line.startswith(DONE):
                    tally.update(json.loads(line[1:]))
                    readers.pop(reader).join(30)
                    continue
                history.write(line)
                completed += _is_txn_completion(line)
            if time.monotonic() - last_report >= 10:
                last_report = time.monotonic()
                say(f"  ~{min(n, completed * jobs[0]['txn_records']):,} of {n:,} records written")
    finally:
        for proc in readers.values():         # only after an error: our own children, by their handles
            proc.terminate()
            proc.join(10)
    return tally


def _is_txn_completion(line: bytes) -> bool:
    head = line[:200]
    return b'"f":"txn"' in head and b'"type":"invoke"' not in head


def generate_run(cluster: LocalCluster, n: int, args: argparse.Namespace) -> dict:
    """A run directory of n records (see the module docstring); returns what was written. A failed
    generation leaves no run directory behind (unless --keep)."""
    tag = new_run_tag()
    run_dir = new_run_dir(HOME / "runs", "bench-verify", tag)
    try:
        return write_run(cluster.connection(), run_dir, tag, n, args)
    except BaseException:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def write_run(conn: ConnectionSettings, run_dir: Path, tag: str, n: int, args: argparse.Namespace) -> dict:
    topics = [f"{tag}-a", f"{tag}-b"]
    for topic in topics:
        ensure_topic(conn, topic, partitions=PARTITIONS)
    info = RunInfo(tag, args.seed, "bench-verify", time.time(), topics=list(topics),
                   params={"bench": "bench/verify_throughput.py", "records": n, "txn_records": args.txn_records,
                           "producers": args.producers, "size": args.size, "abort_share": args.abort_share})
    run_start_ns = time.monotonic_ns()
    jobs = plan_jobs(n, args, tag, topics, conn, run_start_ns=run_start_ns)
    info.specs = [asdict(WorkloadSpec("txn-producer", job["process"], (
        "--topics", *topics, "--rate", "0", "--records", str(args.txn_records), "--size", str(args.size),
        "--abort-share", str(args.abort_share)))) for job in jobs]
    say(f"generating {run_dir.name}: {n:,} records, {len(jobs)} producers, {args.txn_records} per transaction")
    started = time.monotonic()
    history = PartWriter(run_dir, run_start_ns)
    try:
        tally = run_generators(jobs, history, n)
    finally:
        history.close()
    produced_s = time.monotonic() - started
    write_json(run_dir / "spec.json", asdict(info))
    write_json(run_dir / "cluster.json", cluster_info(conn))
    write_json(run_dir / "end_offsets.json", settled_end_offsets(conn, topics))
    write_json(run_dir / "group_offsets.json", {})
    records = {kind: sum(v for k, v in tally.items() if k.startswith(f"records_{kind}|")) for kind in ("ok", "fail", "info")}
    attempts = {kind: tally[f"attempts_{kind}"] for kind in ("ok", "fail", "info")}
    say(f"  generated in {produced_s:.1f} s ({n / produced_s:,.0f} records/s); history {history.bytes / 2**20:,.0f} MiB "
        f"in {history.part + 1} part(s); attempts ok/fail/info {attempts['ok']}/{attempts['fail']}/{attempts['info']}")
    if sum(records.values()) != n:
        raise RuntimeError(f"generated {sum(records.values())} records, expected {n}: {dict(tally)}")
    return {"run_dir": str(run_dir), "tag": tag, "topics": topics, "records": n, "records_by_outcome": records,
            "attempts": attempts, "history_lines": history.lines, "history_bytes": history.bytes,
            "history_parts": history.part + 1, "seconds": round(produced_s, 1), "records_per_s": round(n / produced_s)}


def settled_end_offsets(conn: ConnectionSettings, topics: list[str]) -> dict:
    """{topic: {partition: {hwm, lso}}} as chaos.workloads.run records them, once every LSO has reached its HWM
    (every transaction here has completed; the markers of the last ones may still be on their way)."""
    def read() -> dict | None:
        offsets = {}
        for topic in topics:
            offsets[topic] = partition_ends(conn, topic, list(range(PARTITIONS)))
        settled = all(o["hwm"] == o["lso"] for parts in offsets.values() for o in parts.values())
        return offsets if settled else None
    return wait_until(read, 120, "every LSO to reach its high watermark", 0.5)   # past transaction.timeout.ms


def cluster_info(conn: ConnectionSettings) -> dict:
    with ClusterAdmin(conn) as admin:
        brokers, controller = admin.registered_brokers(), admin.active_controller()
    return {"connection": conn.describe(), "brokers": brokers, "active_controller": controller, "versions": pinned()}


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# ---- measuring ------------------------------------------------------------------------------------------
class TreeSampler(threading.Thread):
    """Peak RSS of a process and all its descendants every SAMPLE_S: of the whole tree (sum per sample; pages
    shared between processes count once per process), of the root process, of the JVM driver (java ...
    SparkSubmit), of the largest other JVM and of everything else (summed)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.peak: Counter = Counter()
        self.samples = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_S)

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        now: Counter = Counter()
        for proc in procs:
            try:                                     # the role is read every time: spark-submit execs java
                rss, role = proc.memory_info().rss, _role(proc, root.pid)
            except psutil.Error:
                continue
            now["tree"] += rss
            now[role] = max(now[role], rss) if role.startswith("jvm") else now[role] + rss
        for key, value in now.items():
            self.peak[key] = max(self.peak[key], value)
        self.samples += 1

    def finish(self) -> dict:
        self.stop.set()
        self.join()
        return {f"peak_rss_{k}_mib": round(v / 2**20, 1) for k, v in sorted(self.peak.items())} | {"samples": self.samples}


def _role(proc: psutil.Process, root_pid: int) -> str:
    if proc.pid == root_pid:
        return "root"
    cmdline = proc.cmdline()
    if cmdline and Path(cmdline[0]).name == "java":
        driver = SPARK_DRIVER in cmdline and SPARK_LAUNCHER not in cmdline    # not spark-class's launcher JVM
        return "jvm_driver" if driver else "jvm_other"
    return "others"


def timed_command(name: str, argv: list[str], env: dict, log: Path, timeout: float) -> dict:
    """Run argv with its output in log (stderr beside it), timing it and sampling its process tree's RSS.
    exit_code is None when it could not start or ran past timeout (then it and its descendants are killed)."""
    say(f"{name}: {' '.join(argv)}")
    with open(log, "wb") as out, open(stderr_of(log), "wb") as err:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=REPO_ROOT)
        except OSError as exc:
            err.write(f"cannot start {argv[0]}: {exc}\n".encode())
            say(f"  {name}: cannot start: {exc}")
            return {"exit_code": None, "seconds": 0.0, "timed_out": False, "log": str(log)}
        sampler = TreeSampler(proc.pid)
        sampler.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            code = None
        except BaseException:                  # Ctrl-C, SIGTERM: leave nothing of ours running
            kill_tree(proc)
            raise
        seconds = time.monotonic() - started
    memory = sampler.finish()
    say(f"  {name}: exit {code} after {seconds:.1f} s; peak RSS of its tree {memory.get('peak_rss_tree_mib', 0):,.0f} MiB")
    return {"exit_code": code, "seconds": round(seconds, 2), "timed_out": code is None, "log": str(log), **memory}


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a command we started and its descendants, by pid."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass
    proc.kill()
    proc.wait()


def stderr_of(log: Path) -> Path:
    return log.with_name(log.name + ".stderr")


def tail(path: Path, lines: int = 25) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def output_tail(log: Path, lines: int = 25) -> list[str]:
    """The last lines of a command's stdout, then of its stderr."""
    return [f"stdout| {line}" for line in tail(log, lines)] + [f"stderr| {line}" for line in tail(stderr_of(log), lines)]


def kafka_consume(conn: ConnectionSettings, gen: dict, workdir: Path, isolation: str = "read_committed") -> dict:
    """(a) Kafka's ConsumerPerformance over both topics: read_committed, exactly the committed records, or
    read_uncommitted, every record (verify reads both views)."""
    committed = gen["records_by_outcome"]["ok"] if isolation == "read_committed" else gen["records"]
    config = workdir / f"consumer-perf-{isolation}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in {**conn.java_properties(), "isolation.level": isolation}.items()))
    argv = [java_binary(), *PERF_JVM, f"-Dlog4j2.configurationFile={TEMPLATES / 'log4j2-tools.properties'}",
            "-cp", f"{require_kafka_libs()}/*", "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server", conn.bootstrap, "--include", "^(" + "|".join(map(re.escape, gen["topics"])) + ")$",
            "--num-records", str(committed), "--command-config", str(config),
            "--group", f"bench-verify-perf-{gen['tag']}-{isolation}", "--timeout", "30000"]
    log = workdir / f"consumer-perf-{isolation}.log"
    result = timed_command(f"Kafka ConsumerPerformance ({isolation})", argv, {**os.environ}, log,
                           timeout=600 + gen["records"] / 2000)
    stats = parse_consumer_perf(log)
    result.update({"committed_records": committed, "kafka_stats": stats})
    consumed = int(stats.get("data.consumed.in.nMsg", -1))
    fetch_s = float(stats.get("fetch.time.ms", 0)) / 1000
    result["ok"] = result["exit_code"] == 0 and consumed >= committed and fetch_s > 0
    if result["ok"]:
        result["fetch_seconds"] = round(fetch_s, 2)
        result["records_per_s"] = round(gen["records"] / fetch_s)
        result["kafka_nmsg_per_s"] = float(stats["fetch.nMsg.sec"])
    else:
        result["error"] = f"consumed {consumed} of {committed} records ({isolation})"
        result["output_tail"] = output_tail(log)
    return result


def parse_consumer_perf(log: Path) -> dict:
    """ConsumerPerformance's summary: a header line of names and one line of values, comma separated."""
    lines = [line for line in tail(log, 200) if ", " in line]
    for header, values in zip(lines, lines[1:]):
        if header.startswith("start.time"):
            return dict(zip(header.split(", "), values.split(", ")))
    return {}


def naive_check(gen: dict, env: dict, workdir: Path) -> dict:
    """(b) bench/peers/naive_checker.py RUN_DIR."""
    log = workdir / "naive-checker.log"
    result = timed_command("naive checker", [sys.executable, str(NAIVE), gen["run_dir"]], env, log,
                           timeout=600 + gen["records"] / 1000)
    try:
        report = json.loads(log.read_text())
    except (OSError, ValueError):
        report = None
    result["ok"] = result["exit_code"] in (0, 1, 2) and report is not None
    if result["ok"]:
        result["records_per_s"] = round(gen["records"] / result["seconds"])
        result["report"] = {k: report[k] for k in ("valid", "duplicates", "aborted_reads", "lost_writes", "seconds")}
        result["report"]["committed_records"] = report["committed"]["records"]
    else:
        result["output_tail"] = output_tail(log)
    return result


def verify(gen: dict, env: dict, workdir: Path, master: str | None = None, remote: str = "", label: str = "") -> dict:
    """(c) txnlab verify RUN_DIR --json (spark-submit on local[*], or on the standalone cluster at `master` with
    3g executors, or a client of the Connect server at `remote`): ran if it exited 0/1/2 and wrote a fresh
    verify/report.json."""
    report_path = Path(gen["run_dir"]) / "verify" / "report.json"
    started_wall = time.time()
    name = "standalone" if master else label
    log = workdir / (f"verify-{name}.log" if name else "verify.log")
    where = ["--master", master, "--conf", f"spark.executor.memory={STANDALONE_EXECUTOR_MEMORY}"] if master else []
    result = timed_command("txnlab verify" + (f" ({name})" if name else ""),
                           [str(TXNLAB), "verify", gen["run_dir"], "--json", "--remote", remote, *where], env, log,
                           timeout=1200 + gen["records"] / 500)
    result["phases"] = job_phases(stderr_of(log))
    fresh = report_path.exists() and report_path.stat().st_mtime >= started_wall - 1
    result["ok"] = result["exit_code"] in (0, 1, 2) and fresh
    result["verdict"] = {0: "valid", 1: "anomalies", 2: "unknown"}.get(result["exit_code"]) if result["ok"] else None
    if result["ok"]:
        result["records_per_s"] = round(gen["records"] / result["seconds"])
        result["report"] = verify_summary(report_path)
    else:
        result["error"] = (f"txnlab verify failed: exit {result['exit_code']}"
                           f"{' (timed out)' if result['timed_out'] else ''}, "
                           f"{'no fresh' if not fresh else 'a'} {report_path.relative_to(gen['run_dir'])}")
        result["output_tail"] = output_tail(log)
    return result


PHASE = re.compile(r"^\[verify \+\s*([0-9.]+)s\] (history:|reading the topics|valid:)")


def job_phases(log: Path) -> dict:
    """From the job's progress lines: when the history was read and checked (`history_s`, from the job's start),
    and when the topics' reading and the checks began and ended."""
    found = {}
    try:
        for line in log.read_text(errors="replace").splitlines():
            match = PHASE.match(line)
            if match:
                found.setdefault({"history:": "history_s", "reading the topics": "reads_began_s",
                                  "valid:": "ended_s"}[match.group(2)], float(match.group(1)))
    except OSError:
        pass
    return found


WARM_RUNS_SMALL = 9          # warm verifications of a run below SMALL_RUNS_RECORDS (one of a larger run)


def verify_connect(gen: dict, env: dict, workdir: Path) -> dict:
    """(c') through a Spark Connect server on local[*] started for this N (CONNECT_PLAN, with C2 from
    SMALL_RUNS_RECORDS as `txnlab spark up --local --c2` for large runs; stopped after):
    `cold` is its start plus the first verification; then the same run verified again, WARM_RUNS_SMALL times
    for a small run (1 for a larger one): `warm` is the median of those, `warm_seconds` all of them in order."""
    from spark_analysis.submit import SMALL_RUNS_RECORDS
    plan = dataclasses.replace(CONNECT_PLAN, connect_c2=gen["records"] >= SMALL_RUNS_RECORDS)
    server = StandaloneCluster(HOME / "spark-connect", plan)
    started = time.monotonic()
    try:
        server.up(progress=lambda m: say(f"  {m}"))
        start_s = round(time.monotonic() - started, 2)
        cold = verify(gen, env, workdir, remote=CONNECT_PLAN.connect_url, label="connect-cold")
        warms = [verify(gen, env, workdir, remote=CONNECT_PLAN.connect_url, label=f"connect-warm-{i + 1}")
                 for i in range(WARM_RUNS_SMALL if gen["records"] < SMALL_RUNS_RECORDS else 1)]
    finally:
        server.down(progress=lambda m: say(f"  {m}"))
    cold["seconds_with_server_start"] = round(start_s + cold["seconds"], 2)
    if cold.get("ok"):
        cold["records_per_s"] = round(gen["records"] / cold["seconds_with_server_start"])
    ok = sorted((w for w in warms if w.get("ok")), key=lambda w: w["seconds"])
    warm = ok[(len(ok) - 1) // 2] if len(ok) == len(warms) else next(w for w in warms if not w.get("ok"))
    return {"server_start_s": start_s, "jit": "C1 and C2" if plan.connect_c2 else "C1", "cold": cold, "warm": warm,
            "warm_seconds": [w.get("seconds") for w in warms]}


def spark_reads(gen: dict, conn: ConnectionSettings, workdir: Path) -> dict:
    """(d) Spark's Kafka connector alone reading both views (bench/spark_read_floor.py): the job's own seconds."""
    from spark_analysis.submit import archive_options, class_archive, environment, spark_submit
    archive = class_archive()
    argv = spark_submit(SPARK_READS, [gen["run_dir"]], Path(gen["run_dir"]),
                        java_options=tuple(archive_options(archive, None)) if archive.exists() else ())
    log = workdir / "spark-reads.log"
    result = timed_command("Spark's Kafka connector, both views", argv, environment(conn), log,
                           timeout=600 + gen["records"] / 500)
    lines = [line for line in tail(log, 20) if line.startswith("{")]
    found = json.loads(lines[-1]) if lines else {}
    views = found.get("views", {})
    read = {v: (views.get(v) or {}).get("records") for v in ("read_committed", "read_uncommitted")}
    result["ok"] = result["exit_code"] == 0 and read == {"read_committed": gen["records_by_outcome"]["ok"],
                                                          "read_uncommitted": gen["records"]}
    if result["ok"]:
        result["read_seconds"] = found["seconds"]
        result["records_per_s"] = round(gen["records"] / found["seconds"])
    else:
        result["error"] = f"exit {result['exit_code']}, read {read} ({found.get('error', '')})"
        result["output_tail"] = output_tail(log)
    return result


def verify_summary(report_path: Path) -> dict:
    """What the benchmark keeps of verify/report.json: verdict, counts, the job's own time and per check."""
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError) as exc:
        return {"path": str(report_path), "unreadable": str(exc)}
    checks = report.get("checks") if isinstance(report.get("checks"), dict) else {}
    return {"path": str(report_path), "valid": report.get("valid"), "seconds": report.get("seconds"),
            "counts": report.get("counts"),
            "checks": {name: {k: c.get(k) for k in ("valid", "count", "seconds")} for name, c in checks.items()
                       if isinstance(c, dict)}}


def measure(cluster: LocalCluster, gen: dict, spark_master: str | None = None, only_archive: bool = False) -> dict:
    """(a) to (f) on one generated run (only (a) and (f) with only_archive); their outputs go to
    .txnlab/bench-verify/logs/<run>/."""
    n = gen["records"]
    conn = cluster.connection()
    workdir = HOME / "logs" / Path(gen["run_dir"]).name
    workdir.mkdir(parents=True)
    env = {**os.environ, **conn.to_env()}
    entry = {"records": n, "generated": gen, "load_average_before": load_average()}
    entry["kafka_consumer_perf"] = kafka_consume(conn, gen, workdir)
    entry["kafka_consumer_perf_uncommitted"] = kafka_consume(conn, gen, workdir, "read_uncommitted")
    entry["kafka_two_reads"] = two_reads(entry, n)
    entry["txnlab_archive"] = archive(gen, env, workdir, entry["kafka_two_reads"])
    if only_archive:
        entry["load_average_after"] = load_average()
        return entry
    entry["naive_checker"] = naive_check(gen, env, workdir)
    entry["txnlab_verify"] = verify(gen, env, workdir)
    entry["txnlab_verify_connect"] = verify_connect(gen, env, workdir)
    entry["spark_reads"] = spark_reads(gen, conn, workdir)
    if spark_master:
        entry["txnlab_verify_standalone"] = verify(gen, env, workdir, spark_master)
    entry["load_average_after"] = load_average()
    entry["ratios"] = ratios(entry)
    return entry


def archive(gen: dict, env: dict, workdir: Path, reads: dict) -> dict:
    """(f): `txnlab archive` of the run, timed, its files' bytes and the history's, and its time against the two
    reads of ConsumerPerformance (reads: two_reads)."""
    run_dir = Path(gen["run_dir"])
    done = timed_command("txnlab archive", [sys.executable, "-m", "txnlab.cli", "archive", str(run_dir)], env,
                         workdir / "archive.log", timeout=3600)
    files = {p.name: p.stat().st_size for p in sorted((run_dir / "archive").glob("*")) if p.is_file()}
    history = sum(p.stat().st_size for p in (run_dir / "history").rglob("*") if p.is_file())
    n = gen["records"]
    out = {**done, "ok": done["exit_code"] == 0 and "manifest.json" in files, "files_bytes": files,
           "archive_bytes": sum(files.values()), "history_bytes": history,
           "records_per_s": round(n / done["seconds"]) if done["seconds"] else None}
    if out["ok"] and reads.get("ok"):
        out["ratio_to_two_reads"] = round(reads["fetch_seconds"] / done["seconds"], 3)    # above 1: archive faster
    say(f"  archive: {out['archive_bytes'] / 2**20:,.1f} MiB ({files}); history {history / 2**20:,.0f} MiB")
    return out


def two_reads(entry: dict, n: int) -> dict:
    """The two raw reads verify must make (read_committed, then read_uncommitted), as one rate: N records
    over the sum of ConsumerPerformance's two fetch times."""
    reads = (entry["kafka_consumer_perf"], entry["kafka_consumer_perf_uncommitted"])
    if not all(r.get("ok") for r in reads):
        return {"ok": False, "error": "a ConsumerPerformance read failed", "exit_code": None}
    seconds = sum(r["fetch_seconds"] for r in reads)
    return {"ok": True, "fetch_seconds": round(seconds, 2), "records_per_s": round(n / seconds)}


def ratios(entry: dict) -> dict:
    names = ("kafka_consumer_perf", "kafka_two_reads", "naive_checker", "txnlab_verify", "spark_reads")
    rate = {k: entry.get(k, {}).get("records_per_s") for k in names}

    def ratio(mine: str, peer: str) -> float | None:
        return round(rate[mine] / rate[peer], 3) if rate[mine] and rate[peer] else None
    floor, job = entry.get("spark_reads", {}).get("read_seconds"), (entry["txnlab_verify"].get("report") or {}).get("seconds")
    warm = (entry.get("txnlab_verify_connect") or {}).get("warm") or {}
    naive = rate["naive_checker"]
    return {"connect_warm_vs_naive": round(warm["records_per_s"] / naive, 3) if warm.get("ok") and naive else None,
            "verify_vs_kafka_consume": ratio("txnlab_verify", "kafka_consumer_perf"),
            "verify_vs_two_reads": ratio("txnlab_verify", "kafka_two_reads"),
            "verify_vs_naive": ratio("txnlab_verify", "naive_checker"),
            "spark_reads_vs_two_reads": ratio("spark_reads", "kafka_two_reads"),
            "verify_job_over_spark_reads": round(job / floor, 2) if floor and isinstance(job, (int, float)) else None}


def cleanup(cluster: LocalCluster, gen: dict) -> None:
    """Delete one N's topics and run directory (the next N starts from an equally empty cluster)."""
    admin = AdminClient(cluster.connection().confluent(log_level=3))
    for topic, future in admin.delete_topics(gen["topics"], operation_timeout=60).items():
        try:
            future.result(90)
        except KafkaException as exc:
            say(f"  could not delete {topic}: {exc}")
    shutil.rmtree(gen["run_dir"], ignore_errors=True)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---- reporting --------------------------------------------------------------------------------------
def table(entries: list[dict]) -> str:
    head = ("| records (N) | Kafka ConsumerPerformance, read_committed (fetch time) | ConsumerPerformance, both views "
            "(read_committed + read_uncommitted fetch time) | naive Python checker (wall) "
            "| txnlab verify (wall; job's own time) | verify / Kafka | verify / both views | verify / naive "
            "| verify peak RSS: whole tree / JVM driver | naive checker peak RSS "
            "| Spark's Kafka connector alone, both views (its read job; nothing parsed) | Spark's reads / both views "
            "| verify's job time / Spark's reads | verify through a Connect server: cold (server start + first) "
            "| warm (median of the warm runs) | warm / naive | history read (warm; s from the job's start) |")
    standalone = any("txnlab_verify_standalone" in e for e in entries)
    if standalone:
        head += " txnlab verify on the standalone cluster (wall; job's own time) | its driver's peak RSS |"
    rows = [head, "|" + "---|" * (19 if standalone else 17)]
    for e in entries:
        kafka, naive, mine, r = e["kafka_consumer_perf"], e["naive_checker"], e["txnlab_verify"], e["ratios"]
        job_s = (mine.get("report") or {}).get("seconds")
        rows.append(f"| {e['records']:,} | {_rate(kafka, 'fetch_seconds')} | {_rate(e['kafka_two_reads'], 'fetch_seconds')} "
                    f"| {_rate(naive)} | {_rate(mine, job=job_s)} | {_ratio(r['verify_vs_kafka_consume'])} "
                    f"| {_ratio(r['verify_vs_two_reads'])} | {_ratio(r['verify_vs_naive'])} "
                    f"| {_mib(mine, 'tree')} / {_mib(mine, 'jvm_driver')} | {_mib(naive, 'tree')} "
                    f"| {_rate(e.get('spark_reads', {}), 'read_seconds')} | {_ratio(r.get('spark_reads_vs_two_reads'))} "
                    f"| {_ratio(r.get('verify_job_over_spark_reads'))} "
                    f"| {_connect(e, 'cold')} | {_connect(e, 'warm')} | {_ratio(r.get('connect_warm_vs_naive'))} "
                    f"| {_history_s(e)} |")
        if standalone:
            there = e.get("txnlab_verify_standalone", {})
            rows[-1] += f" {_rate(there, job=(there.get('report') or {}).get('seconds'))} | {_mib(there, 'jvm_driver')} |"
    return "\n".join(rows)


def _rate(result: dict, seconds: str = "seconds", job: float | None = None) -> str:
    if not result.get("ok"):
        return f"**failed** (exit {result.get('exit_code')})"
    job_text = f"; {job:,.1f} s" if isinstance(job, (int, float)) else ""
    return f"{result['records_per_s']:,} rec/s ({result[seconds]:,.1f} s{job_text})"


def _connect(entry: dict, which: str) -> str:
    result = (entry.get("txnlab_verify_connect") or {}).get(which) or {}
    if not result.get("ok"):
        return f"**failed** (exit {result.get('exit_code')})" if result else "-"
    seconds = result["seconds_with_server_start"] if which == "cold" else result["seconds"]
    return f"{result['records_per_s']:,} rec/s ({seconds:,.1f} s)"


def _history_s(entry: dict) -> str:
    phases = ((entry.get("txnlab_verify_connect") or {}).get("warm") or {}).get("phases") or {}
    return "-" if "history_s" not in phases else f"{phases['history_s']:.1f} s"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mib(result: dict, role: str) -> str:
    value = result.get(f"peak_rss_{role}_mib")
    if not result.get("ok"):
        return "-"
    return "not seen" if value is None else f"{value:,.0f} MiB"


def archive_table(entries: list[dict]) -> str:
    """(f) per N: `txnlab archive` beside ConsumerPerformance's two reads, and its size against the history's."""
    rows = ["| records (N) | ConsumerPerformance, both views (fetch time) | txnlab archive (wall) | both views / archive "
            "| archive peak RSS (tree) | archive: committed / uncommitted view / manifest | history (JSON parts) |",
            "|---|---|---|---|---|---|---|"]
    mib = lambda b: f"{b / 2**20:,.1f} MiB"                                      # noqa: E731
    for e in entries:
        a, reads, files = e["txnlab_archive"], e["kafka_two_reads"], e["txnlab_archive"].get("files_bytes", {})
        rows.append(f"| {e['records']:,} | {reads.get('records_per_s', 0):,} rec/s ({reads.get('fetch_seconds')} s) "
                    f"| {a.get('records_per_s') or 0:,} rec/s ({a['seconds']} s) | {a.get('ratio_to_two_reads')} "
                    f"| {a.get('peak_rss_tree_mib', 0):,.0f} MiB | {mib(files.get('committed.parquet', 0))} / "
                    f"{mib(files.get('uncommitted.parquet', 0))} / {files.get('manifest.json', 0):,} B "
                    f"| {mib(a['history_bytes'])} |")
    return "\n".join(rows)


def failures(entries: list[dict]) -> list[str]:
    out = []
    for e in entries:
        connect = e.get("txnlab_verify_connect") or {}
        for name, result in (*((n, e.get(n)) for n in ("kafka_consumer_perf", "kafka_consumer_perf_uncommitted",
                                                       "naive_checker", "txnlab_verify", "spark_reads",
                                                       "txnlab_verify_standalone", "txnlab_archive")),
                             ("txnlab_verify_connect cold", connect.get("cold")),
                             ("txnlab_verify_connect warm", connect.get("warm"))):
            if result is None:
                continue
            if not result.get("ok"):
                error = result.get("error") or f"exit {result.get('exit_code')}"
                out.append(f"N={e['records']:,}: {name} FAILED: {error}")
                out += [f"    {line}" for line in result.get("output_tail", [])]
        naive = e.get("naive_checker", {}).get("report")             # neither with --only-archive
        if naive and naive["valid"] is not True:
            out.append(f"N={e['records']:,}: the naive checker did not find the synthetic run valid: {naive}")
        verdict = e.get("txnlab_verify", {}).get("verdict")
        if verdict not in (None, "valid"):
            out.append(f"N={e['records']:,}: txnlab verify's verdict on a clean synthetic run: {verdict}")
    return out


def machine() -> dict:
    from spark_analysis.submit import class_archive
    return {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average": load_average(), "versions": pinned(), "class_archive": class_archive().exists(),
            "connect_class_archive": class_archive("connect").exists()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, action="append", required=True, help="N; repeat for several")
    parser.add_argument("--base-port", type=int, default=27000)
    parser.add_argument("--keep", action="store_true", help="keep the cluster, the topics and the run directories")
    parser.add_argument("--out", type=Path, default=HOME / "result.json")
    parser.add_argument("--producers", type=int, default=4, help="generator processes (txp-0..)")
    parser.add_argument("--txn-records", type=int, default=5000, help="records per transaction")
    parser.add_argument("--size", type=int, default=100, help="record value size in bytes")
    parser.add_argument("--abort-share", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--standalone", action="store_true", help="also verify each run on a Spark standalone "
                        f"cluster (1 master, 2 workers of 1 core, ports {STANDALONE_PLAN.base_port}+) started for the "
                        "benchmark: the driver's RSS without the executors'")
    parser.add_argument("--only-archive", action="store_true", help="(a) and (f) alone: ConsumerPerformance's two "
                        "reads and `txnlab archive` of each run")
    args = parser.parse_args()
    if min(args.records) < 1:
        parser.error("--records must be at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # so the finally below stops the cluster
    result = {"command": " ".join(sys.argv), "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster.load(HOME / "cluster", base_port=args.base_port, **local_stack())
    spark = StandaloneCluster(HOME / "spark", STANDALONE_PLAN) if args.standalone else None
    try:
        cluster.up(progress=lambda m: say(f"[cluster] {m}"), timeout=240)
        if spark is not None:
            spark.up(progress=lambda m: say(f"[spark] {m}"))
        for n in args.records:
            gen = generate_run(cluster, n, args)
            try:
                result["runs"].append(measure(cluster, gen, spark.plan.master_url if spark else None,
                                              args.only_archive))
                write_json(args.out, result)
            finally:
                if not args.keep:
                    cleanup(cluster, gen)
    finally:
        if spark is not None:
            spark.down(progress=lambda m: say(f"[spark] {m}"))
        if not args.keep:
            cluster.down(purge=True, progress=lambda m: say(f"[cluster] {m}"))
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    write_json(args.out, result)
    print(archive_table(result["runs"]) if args.only_archive else table(result["runs"]))
    problems = failures(result["runs"])
    print("\n".join(problems))
    say(f"results: {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
