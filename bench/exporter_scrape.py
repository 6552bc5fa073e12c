"""Benchmark (issues 3 and 13): our exporter side by side with the real kafka_exporter, at several cluster
sizes in one run: scrape time, RSS, our producer + coordinator scan, and hanging-transaction detection.

One run against a dedicated 3-node drill cluster (KIP-890 verification off, transaction.version=1, so a
hanging transaction can be injected) on ports 23000-23899 (--base-port), its own state dir
(.txnlab/bench-exporter-cluster), started from fresh data and purged at the end unless --keep. For each
size of --sizes (default 2000,20000 partitions), smallest first, growing the same cluster:
  1. topics of --partitions partitions (replication --replication, default 1) are added until the bench
     topics hold that many partitions; --producer-ids idempotent producer ids are flooded over the
     partitions this size added (and, before the first size, --transactional-ids transactional ids are
     initialised once, so the coordinators hold that many); --live-producers live producers (every 4th transactional, the others
     idempotent) write two records every 10 s in a child process, over all bench topics, with a few
     transactions left open so the LSO lags somewhere. The stack's own exporter is not run and (unless
     --keep-prometheus) its Prometheus is stopped: the two exporters under test are the only scrapers;
  2. our exporter (`python -m exporter`, from the working tree, or from --ours-commit's exporter/ and
     cluster/ unpacked aside, for a before/after comparison) and kafka_exporter 1.9.0
     (danielqsj/kafka_exporter, built with `go build` from shared/peers/kafka_exporter beside the repository
     into .txnlab/bin when the binary is missing or older than its sources) start fresh, with the same
     topic filter; warm-up, then alternating GET /metrics rounds, each timed on the client (wall) and in
     the exporter process (CPU, psutil); RSS of both sampled every 0.2 s while they run;
  3. our background scan (collector durations of producers + transactions) over several cycles;
  4. at --hanging-sizes (default: the smallest size) hanging-transaction injections at set phases of our
     background cycle, each timed until our /metrics names it (Kafka's `kafka-transactions.sh
     find-hanging` on the first one), each aborted again;
  5. with --py-spy, a py-spy profile of our exporter over a few more scrapes (after the measurement).
Both exporters and the live load stop at the end of each size; everything this run started (cluster,
exporters, load) is stopped on every exit path: an error, Ctrl-C, SIGTERM or SIGHUP.
Owns: nothing beyond this benchmark. Must not: touch other clusters, or stop processes it did not start.
Usage: .venv/bin/python bench/exporter_scrape.py [--sizes 2000,20000] [--rounds 10] [--ours-commit REV]
       [--py-spy [BIN]] [--keep] [--out FILE]
Progress goes to stderr; the results JSON to stdout and runs/exporter-scrape-<time>.json (also written,
with "error", when the run fails part-way).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psutil
import requests
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka.structs import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from chaos.nemesis.faults import abort_hanging
from chaos.nemesis.inject_hanging import InjectedHanging, inject_hanging
from chaos.nemesis.producer_flood import flood_producer_ids, init_transactional_ids
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.lab.java import java_command
from cluster.lab.layout import HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES, new_cluster_id
from cluster.lab.local import LocalCluster
from cluster.lab.supervisor import Supervisor
from cluster.lab.versions import REPO_ROOT, txnlab_home, txnlab_source
from cluster.access.waiting import wait_until

TOPIC_PREFIX = "bench-scrape"
TOPIC_FILTER = f"^{TOPIC_PREFIX}-.*"     # both exporters (ours full-matches it, kafka_exporter searches it)
TOPICS_PER_REQUEST = 20                  # CreateTopics batches (the controller caps one request's records)
PEER_KAFKA_VERSION = "4.0.0"             # the newest version IBM/sarama 1.45.2 knows; the brokers run 4.3.1
OURS, PEER = "ours", "kafka_exporter"
PER_PARTITION_SERIES = {OURS: "kafkatxn_partition_high_watermark{", PEER: "kafka_topic_partition_current_offset{"}
WATCHED = ("kafkatxn_collector_duration_seconds", "kafkatxn_collector_last_success_timestamp_seconds",
           "kafkatxn_hanging_transactions", "kafkatxn_hanging_transaction_info", "kafkatxn_broker_active_producers",
           "kafkatxn_transactions{")
GOALS = {"scrape_wall_ratio": 0.3, "rss_bytes": 300 * 10**6, "scan_seconds": 10.0, "detect_intervals": 2.0}
LARGE = 50_000          # from this size on, issue 50's goals: a tenth of kafka_exporter, 2 s median, 3 s at worst
LARGE_GOALS = {"scrape_wall_ratio": 0.1, "rss_bytes": 500 * 10**6, "wall_median_s": 2.0, "wall_max_s": 3.0}
EXPORTER_PIDS = txnlab_home() / "bench-exporter-scrape" / "pids"     # fixed: a killed run's exporters are found
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


def int_list(value: str) -> list[int]:
    return [int(x.replace("_", "")) for x in value.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-port", type=int, default=23000)
    p.add_argument("--sizes", type=int_list, default=[2000, 20000], help="partitions per measured size, "
                   "comma-separated, each a multiple of --partitions (the cluster grows from one to the next)")
    p.add_argument("--partitions", type=int, default=100, help="per topic")
    p.add_argument("--replication", type=int, default=1)
    p.add_argument("--broker-heap", default="1g", help="-Xms/-Xmx of each Kafka node")
    p.add_argument("--producer-ids", type=int, default=100_000, help="idempotent ids flooded at each size, over "
                   "the partitions that size added")
    p.add_argument("--transactional-ids", type=int, default=10_000, help="transactional ids initialised once "
                   "(InitProducerId: each then held by its coordinator, state Empty) before the first size")
    p.add_argument("--live-producers", type=int, default=200, help="producers writing during the measurement")
    p.add_argument("--live-period", type=float, default=10.0, help="seconds between two writes of one live producer")
    p.add_argument("--transactional-every", type=int, default=4, help="every Nth live producer is transactional "
                   "(the others idempotent)")
    p.add_argument("--open-transactions", type=int, default=5, help="transactions left open (LSO lag > 0)")
    p.add_argument("--rounds", type=int, default=10, help="alternating scrape rounds per size (after 2 warm-up rounds)")
    p.add_argument("--scrape-timeout", type=float, default=300.0, help="seconds one GET /metrics may take")
    p.add_argument("--interval", type=float, default=15.0, help="our exporter's background interval")
    p.add_argument("--scan-cycles", type=int, default=4, help="background cycles to observe at least, per size")
    p.add_argument("--hanging-sizes", type=int_list, default=None, help="sizes with hanging-transaction "
                   "injections (default: the smallest size; empty string: none)")
    p.add_argument("--hanging-phases", type=lambda v: [float(x) for x in v.split(",")], default=[0.0, 0.25, 0.5, 0.75],
                   help="one injection per value: that many intervals after a producer scan of ours ended")
    p.add_argument("--detect-poll", type=float, default=0.25, help="seconds between /metrics polls")
    p.add_argument("--peer-source", type=Path, help="kafka_exporter's Go sources (default: $TXNLAB_PEERS_DIR/"
                   "kafka_exporter, else shared/peers/kafka_exporter beside the repository or one of its parents)")
    p.add_argument("--ours-commit", help="run our exporter from this commit (its exporter/ and cluster/, "
                   "unpacked with git archive into the run directory) instead of the working tree: a before/after "
                   "comparison on the same peer and load")
    p.add_argument("--py-spy", nargs="?", const="py-spy", metavar="BIN", help="profile our exporter with py-spy "
                   "over --profile-scrapes more scrapes at each size (after the measurement)")
    p.add_argument("--profile-scrapes", type=int, default=3)
    p.add_argument("--keep-prometheus", action="store_true", help="leave the cluster's Prometheus running "
                   "(it scrapes the brokers' JMX every 5 s: noise for this benchmark)")
    p.add_argument("--keep", action="store_true", help="leave the cluster running at the end (its own exporter "
                   "and Prometheus stay stopped)")
    p.add_argument("--out", type=Path, help="also write the results JSON here")
    args = p.parse_args(argv)
    if args.hanging_sizes is None:
        args.hanging_sizes = args.sizes[:1]
    check_sizes(p, args)
    return args


def check_sizes(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.sizes or args.sizes != sorted(set(args.sizes)) or any(s % args.partitions for s in args.sizes):
        p.error(f"--sizes must be ascending multiples of --partitions ({args.partitions}), got {args.sizes}")
    if args.sizes[0] // args.partitions < args.open_transactions:
        p.error("the smallest size needs at least one topic per open transaction")
    if not set(args.hanging_sizes) <= set(args.sizes):
        p.error(f"--hanging-sizes {args.hanging_sizes} must be among --sizes {args.sizes}")


# ---- the peer: kafka_exporter, built from its sources ---------------------------------------------------
def peer_source(explicit: Path | None) -> Path:
    """kafka_exporter's Go sources: --peer-source, $TXNLAB_PEERS_DIR/kafka_exporter, else the first
    shared/peers/kafka_exporter found beside the repository root or beside one of its parents."""
    candidates = [explicit] if explicit else []
    if os.environ.get("TXNLAB_PEERS_DIR"):
        candidates.append(Path(os.environ["TXNLAB_PEERS_DIR"]) / "kafka_exporter")
    candidates += [parent / "shared" / "peers" / "kafka_exporter" for parent in REPO_ROOT.parents]
    for path in candidates:
        if (path / "kafka_exporter.go").is_file() and (path / "go.mod").is_file():
            return path.resolve()
    raise SystemExit("kafka_exporter's sources not found (looked in: " + ", ".join(map(str, candidates)) +
                     "); pass --peer-source DIR")


def build_peer(source: Path) -> Path:
    """go build kafka_exporter into .txnlab/bin unless the binary is newer than every source file."""
    binary = txnlab_home() / "bin" / "kafka_exporter"
    newest = max(f.stat().st_mtime for f in source.iterdir() if f.suffix == ".go" or f.name in ("go.mod", "go.sum"))
    if binary.exists() and binary.stat().st_mtime > newest:
        return binary
    if shutil.which("go") is None:
        raise SystemExit(f"{binary} is missing or older than {source}, and `go` is not on PATH to build it")
    say(f"building {binary} from {source} (go build; dependencies from the Go module proxy)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=source, check=True,
                   env={**os.environ, "GOFLAGS": "-buildvcs=false"})
    return binary


def read_version(source: Path) -> str | None:
    try:
        return (source / "VERSION").read_text().strip()
    except OSError:
        return None


def peer_version(binary: Path) -> str:
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    return (proc.stdout + proc.stderr).strip().splitlines()[0] if (proc.stdout + proc.stderr).strip() else "?"


# ---- cluster and load -------------------------------------------------------------------------------------
def bench_cluster(args: argparse.Namespace) -> LocalCluster:
    return LocalCluster.load(txnlab_home() / "bench-exporter-cluster", base_port=args.base_port, heap=args.broker_heap,
                             broker_overrides=dict(HANGING_DRILL_BROKER_CONFIG), features=dict(HANGING_DRILL_FEATURES))


def start_cluster(cluster: LocalCluster, args: argparse.Namespace) -> None:
    """Fresh data (exactly the producer ids this run adds); only the brokers and Toxiproxy left running:
    the stack's own exporter would be a third scraper of the same brokers, its Prometheus scrapes JMX."""
    cluster.down(purge=True, progress=say)
    seed_cluster_id(cluster.layout.state_dir)
    cluster.up(progress=say, timeout=300)
    cluster.supervisor.stop("exporter", timeout=10)        # none when LocalCluster is given no exporter_command
    if not args.keep_prometheus:
        cluster.supervisor.stop("prometheus", timeout=10)
        say("stopped the stack's Prometheus")


def seed_cluster_id(state_dir: Path) -> None:
    """A KRaft cluster id that does not start with '-': kafka-storage reads such an id as an option
    ("--cluster-id/-t: expected one argument"); new_cluster_id() returns one 1 time in 64, Kafka's own
    Uuid.randomUuid() never does. `up` keeps the id it finds in cluster.json."""
    cluster_id = new_cluster_id()
    while cluster_id.startswith("-"):
        cluster_id = new_cluster_id()
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "cluster.json").write_text(json.dumps({"cluster_id": cluster_id}))


def topic_names(start: int, stop: int) -> list[str]:
    return [f"{TOPIC_PREFIX}-{i:03d}" for i in range(start, stop)]


def grow_topics(conn: ConnectionSettings, have: list[str], size: int, args: argparse.Namespace) -> list[str]:
    """Create topics (CreateTopics in batches) until the bench topics hold `size` partitions, then wait
    until every broker knows every bench topic with a leader for each partition. Returns the new ones."""
    new = topic_names(len(have), size // args.partitions)
    config = {"min.insync.replicas": str(min(2, args.replication))}     # acks=all writes on replication 1
    admin = AdminClient(conn.confluent())
    for i in range(0, len(new), TOPICS_PER_REQUEST):
        chunk = [NewTopic(t, args.partitions, args.replication, config=config) for t in new[i:i + TOPICS_PER_REQUEST]]
        for future in admin.create_topics(chunk, request_timeout=180).values():
            future.result(240)
        say(f"created {min(i + TOPICS_PER_REQUEST, len(new))}/{len(new)} topics")
    wait_until(lambda: every_broker_knows(conn, have + new, args.partitions), 900,
               f"every broker to know {len(have + new)} topics with leaders", interval=2.0)
    pending = {CkTopicPartition(t, p) for t in new for p in range(args.partitions)}
    wait_until(lambda: leaders_answer(conn, pending), 600, "every new partition's leader to answer ListOffsets",
               interval=2.0)
    say(f"{len(have + new)} topics x {args.partitions} partitions, replication {args.replication}")
    return new


def every_broker_knows(conn: ConnectionSettings, topics: list[str], partitions: int) -> bool:
    """Each broker, asked by a fresh client bootstrapped on it alone, knows every topic with all leaders."""
    for broker in conn.bootstrap.split(","):
        try:
            known = AdminClient(conn.confluent(**{"bootstrap.servers": broker})).list_topics(timeout=60).topics
        except KafkaException:
            return False
        for topic in topics:
            meta = known.get(topic)
            if meta is None or meta.error is not None or len(meta.partitions) != partitions or \
                    any(p.leader < 0 for p in meta.partitions.values()):
                return False
    return True


def leaders_answer(conn: ConnectionSettings, pending: set) -> bool:
    """ListOffsets(latest) of every pending partition answers without error: each leader acts as one (a
    broker can know the new metadata a moment before it takes leadership, and then refuses writes).
    Partitions that answered leave `pending`; the others are asked again at the next call. A fresh admin
    client each time, asked 2,000 partitions at a time: one created before the topics kept answering
    UNKNOWN_TOPIC_OR_PART, then _NOENT, for 140 of 180 new topics (librdkafka's cached metadata)."""
    admin, errors = AdminClient(conn.confluent()), Counter()
    ordered = sorted(pending, key=lambda tp: (tp.topic, tp.partition))
    for i in range(0, len(ordered), 2000):
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in ordered[i:i + 2000]}, request_timeout=60)
        for tp, future in futures.items():
            try:
                future.result(90)
                pending.discard(tp)
            except KafkaException as exc:
                errors[exc.args[0].name() if exc.args and hasattr(exc.args[0], "name") else repr(exc)[:80]] += 1
    if pending:
        say(f"{len(pending)} new partitions not answering ListOffsets yet: {dict(errors.most_common(3))}")
    return not pending


def flood(conn: ConnectionSettings, topics: list[str], partitions: int, count: int, workers: int = 4) -> dict:
    """count idempotent producer ids spread evenly over every partition of the given topics, `workers`
    topics at a time (the flood waits on the brokers more than it computes)."""
    started, done, lock, last_said = time.monotonic(), [0], threading.Lock(), [0.0]

    def one(i: int) -> None:
        share = count // len(topics) + (1 if i < count % len(topics) else 0)
        if share:
            flood_producer_ids(conn, topics[i], list(range(partitions)), share)
        with lock:
            done[0] += share
            if time.monotonic() - last_said[0] > 10 or done[0] == count:
                last_said[0] = time.monotonic()
                say(f"flood: {done[0]}/{count} producer ids ({done[0] / (time.monotonic() - started):.0f}/s)")
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(len(topics))))
    return {"producer_ids": count, "topics": len(topics), "seconds": round(time.monotonic() - started, 1)}


@dataclass
class LoadSpec:
    bootstrap: str
    topics: list[str]
    partitions: int
    producers: int
    period_s: float
    open_transactions: int
    transactional_every: int = 4
    threads: int = 4
    seed: int = 3
    parent_pid: int = 0


def live_load(spec: LoadSpec, ready: mp.Event, stop: mp.Event, results: mp.Queue) -> None:
    """Child process: spec.producers producers (every transactional_every-th one transactional, the others
    idempotent) each writing two records every period_s, plus spec.open_transactions transactions begun
    and left open until stop (or until the parent is gone: an orphan stops by itself)."""
    conn = ConnectionSettings(bootstrap=spec.bootstrap, client_id="bench-live")
    rng = random.Random(spec.seed)
    live = [LiveProducer.create(conn, i, spec, rng) for i in range(spec.producers)]
    held = [open_transaction(conn, i, spec) for i in range(spec.open_transactions)]
    ready.set()
    threads = [threading.Thread(target=drive, args=(live[t::spec.threads], spec.period_s, stop), daemon=True)
               for t in range(spec.threads)]
    for thread in threads:
        thread.start()
    while not stop.wait(2.0):
        if os.getppid() != spec.parent_pid:
            stop.set()
    for thread in threads:
        thread.join(60)
    for producer in held:
        try:
            producer.abort_transaction(30)
        except KafkaException:
            pass                          # timed out by its coordinator already: nothing left open
    for p in live:
        p.producer.flush(30)
    results.put({"producers": len(live), "transactional": sum(p.transactional for p in live),
                 "writes": sum(p.writes for p in live), "errors": sum(p.errors for p in live),
                 "open_transactions": len(held)})


@dataclass
class LiveProducer:
    producer: Producer
    transactional: bool
    targets: list[tuple[str, int]]
    writes: int = 0
    errors: int = 0

    @classmethod
    def create(cls, conn: ConnectionSettings, i: int, spec: LoadSpec, rng: random.Random) -> "LiveProducer":
        transactional = i % spec.transactional_every == 0
        conf = {"enable.idempotence": True, "linger.ms": 5, "log_level": 3}
        if transactional:
            conf.update({"transactional.id": f"bench-live-{i}", "transaction.timeout.ms": 60000})
        producer = Producer(conn.confluent(**conf))
        if transactional:
            producer.init_transactions(60)
        targets = [(rng.choice(spec.topics), rng.randrange(spec.partitions)) for _ in range(2)]
        return cls(producer, transactional, targets)

    def write(self) -> None:
        try:
            if self.transactional:
                self.producer.begin_transaction()
            for topic, partition in self.targets:
                self.producer.produce(topic, value=f"live-{self.writes}".encode(), partition=partition)
            if self.transactional:
                self.producer.commit_transaction(30)
            self.producer.poll(0)
            self.writes += 1
        except (KafkaException, BufferError):
            self.errors += 1
            if self.transactional:
                try:
                    self.producer.abort_transaction(30)
                except KafkaException:
                    self.errors += 1


def drive(producers: list[LiveProducer], period_s: float, stop: mp.Event) -> None:
    """Each producer writes every period_s, their first writes spread over one period."""
    start = time.monotonic()
    due = {i: start + period_s * i / len(producers) for i in range(len(producers))}
    while producers:
        i = min(due, key=due.get)
        if stop.wait(max(0.0, due[i] - time.monotonic())):
            return
        producers[i].write()
        due[i] += period_s


def open_transaction(conn: ConnectionSettings, i: int, spec: LoadSpec) -> Producer:
    """A transaction begun with one record on partition 1 of topic i and left open (timeout 15 min)."""
    producer = Producer(conn.confluent(**{"transactional.id": f"bench-open-{i}", "transaction.timeout.ms": 900000,
                                          "log_level": 3}))
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(spec.topics[i % len(spec.topics)], value=b"open", partition=1)
    producer.flush(30)
    return producer


class LiveLoad:
    """The live-load child process; stop() is safe to call more than once and returns its statistics."""

    def __init__(self, spec: LoadSpec):
        ctx = mp.get_context("spawn")
        self.ready, self.stop_event, self.queue = ctx.Event(), ctx.Event(), ctx.Queue()
        self.process = ctx.Process(target=live_load, args=(spec, self.ready, self.stop_event, self.queue),
                                   name="bench-live-load")
        self.spec, self.stats, self.stopped = spec, None, False

    def start(self) -> "LiveLoad":
        self.process.start()
        try:
            wait_until(lambda: self.ready.is_set() or not self.process.is_alive(), 300, "live producers to start",
                       interval=0.5)
            if not self.ready.is_set():
                raise RuntimeError("the live-load process exited before its producers started")
        except BaseException:
            self.stop()
            raise
        say(f"{self.spec.producers} live producers over {len(self.spec.topics)} topics and "
            f"{self.spec.open_transactions} open transactions (pid {self.process.pid})")
        return self

    def stop(self) -> dict | None:
        if self.stopped:
            return self.stats
        self.stopped = True
        if self.process.pid is None:
            return None
        self.stop_event.set()
        deadline = time.monotonic() + 180
        while self.stats is None and time.monotonic() < deadline:
            try:
                self.stats = self.queue.get(timeout=1.0)
            except queue.Empty:
                if not self.process.is_alive():
                    break                     # died without statistics: report none
        self.process.join(30)
        if self.process.is_alive():
            self.process.terminate()          # our own child, by its pid
            self.process.join(10)
        return self.stats


# ---- exporters under measurement ---------------------------------------------------------------------------
@dataclass
class Target:
    name: str
    url: str
    series: str                       # one line per partition in /metrics
    duration: str | None              # the exporter's own timing of its offsets collection, if it has one
    process: psutil.Process
    log: Path
    peak_rss: int = 0


def exporter_supervisor() -> Supervisor:
    """The exporters' pid records, at a fixed place: exporters left by a killed run are stopped here."""
    sup = Supervisor(EXPORTER_PIDS)
    for name in sup.names():
        if sup.is_running(name):
            say(f"stopping {name} left running by an earlier run (pid {sup.record(name).pid})")
        sup.stop(name, timeout=15)
        sup.forget(name)
    return sup


def exporter_commands(bootstrap: str, peer_bin: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    ours_port, peer_port = args.base_port + 810, args.base_port + 811
    return {OURS: [sys.executable, "-m", "exporter", "--bootstrap", bootstrap, "--port", str(ours_port),
                   "--interval", str(args.interval), "--topic-allow", TOPIC_FILTER],
            PEER: [str(peer_bin), *[f"--kafka.server={b}" for b in bootstrap.split(",")],
                   f"--web.listen-address=127.0.0.1:{peer_port}", f"--topic.filter={TOPIC_FILTER}",
                   f"--kafka.version={PEER_KAFKA_VERSION}"]}


def start_exporters(sup: Supervisor, run_dir: Path, size: int, commands: dict[str, list[str]],
                    base_port: int, ours_tree: Path) -> dict[str, Target]:
    ports = {OURS: base_port + 810, PEER: base_port + 811}
    targets = {}
    for name, argv in commands.items():
        log = run_dir / f"{name}-{size}.log"
        env = {**os.environ, "PYTHONPATH": str(ours_tree)} if name == OURS else None
        sup.start(name, argv, log, cwd=ours_tree if name == OURS else REPO_ROOT, env=env)
        process = sup.process(name)
        if process is None:
            raise RuntimeError(f"{name} exited at start: see {log}")
        targets[name] = Target(name, f"http://127.0.0.1:{ports[name]}", PER_PARTITION_SERIES[name],
                               'kafkatxn_collector_duration_seconds{collector="offsets"}' if name == OURS else None,
                               process, log)
    return targets


def alive(target: Target) -> bool:
    try:
        running = target.process.is_running() and target.process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        running = False
    if not running:
        raise RuntimeError(f"{target.name} exited: see {target.log}")
    return True


def partitions_served(target: Target, timeout: float) -> int:
    alive(target)
    text = requests.get(target.url + "/metrics", timeout=timeout).text
    return sum(1 for line in text.splitlines() if line.startswith(target.series))


def wait_serving(targets: dict[str, Target], expected: int, timeout: float) -> dict[str, float]:
    """Until our exporter is ready and both serve every expected partition; seconds each took."""
    started, took = time.monotonic(), {}

    def ready() -> bool:
        return alive(targets[OURS]) and requests.get(targets[OURS].url + "/ready", timeout=10).status_code == 200
    wait_until(ready, timeout, "our exporter's first background cycle", interval=1.0,
               ignore=(requests.RequestException,))
    for target in targets.values():
        wait_until(lambda t=target: partitions_served(t, timeout) >= expected, timeout, f"{target.name} serving "
                   f"{expected} partitions", interval=1.0, ignore=(requests.RequestException,))
        took[target.name] = round(time.monotonic() - started, 1)
        say(f"{target.name} serves all {expected} partitions ({took[target.name]}s after start)")
    return took


class RssSampler(threading.Thread):
    """Peak RSS of each target, sampled every 0.2 s until stopped."""

    def __init__(self, targets: dict[str, Target]):
        super().__init__(daemon=True)
        self.targets, self.stop, self.samples = targets, threading.Event(), 0

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for target in self.targets.values():
                try:
                    target.peak_rss = max(target.peak_rss, target.process.memory_info().rss)
                except psutil.Error:
                    pass
            self.samples += 1


@dataclass
class Scrape:
    target: str
    started: float                    # unix time
    wall_s: float
    cpu_s: float
    bytes: int
    partitions: int
    collect_s: float | None           # the exporter's own timing of the offsets collection in this scrape
    error: str | None = None
    series: int = 0                   # sample lines in the body
    samples: dict = field(default_factory=dict, repr=False)
    text: str = field(default="", repr=False)


def cpu_seconds(process: psutil.Process) -> float:
    t = process.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def scrape(target: Target, timeout: float, keep_text: bool = False) -> Scrape:
    """One GET /metrics timed on the client (wall) and in the exporter process (CPU). A failed or timed
    out request is returned with its error (and counted as such), not raised."""
    started, cpu0, t0 = time.time(), cpu_seconds(target.process), time.perf_counter()
    try:
        response = requests.get(target.url + "/metrics", timeout=timeout)
        response.raise_for_status()
    except requests.RequestException as exc:
        alive(target)
        return Scrape(target.name, started, time.perf_counter() - t0, cpu_seconds(target.process) - cpu0, 0, 0,
                      None, error=f"{type(exc).__name__}: {exc}"[:300])
    wall, cpu1 = time.perf_counter() - t0, cpu_seconds(target.process)
    lines = response.text.splitlines()
    partitions = sum(1 for line in lines if line.startswith(target.series))
    collect = next((float(line.rsplit(" ", 1)[1]) for line in lines if target.duration and
                    line.startswith(target.duration)), None)
    samples = read_samples(lines) if target.name == OURS else {}
    series = sum(1 for line in lines if line and not line.startswith("#"))
    return Scrape(target.name, started, wall, cpu1 - cpu0, len(response.content), partitions, collect,
                  series=series, samples=samples, text=response.text if keep_text else "")


def read_samples(lines: list[str]) -> dict[tuple[str, frozenset], float]:
    """The WATCHED series of one /metrics text, keyed by (name, labels)."""
    text = "\n".join(line for line in lines if line.startswith(WATCHED)) + "\n"
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


# Rounds alternate the order, so one round's last scrape and the next round's first hit the same exporter
# back to back: ours would then serve offsets it fetched < offsets_cache_seconds (default 1 s) before.
COLD_GAP_S = 1.5


def scrape_rounds(targets: dict[str, Target], rounds: int, timeout: float, warmup: int = 2) -> list[Scrape]:
    """warmup rounds, then `rounds` rounds alternating the order (ours first, then the peer first)."""
    for i in range(warmup):
        for target in targets.values():
            got = scrape(target, timeout)
            say(f"warm-up {i + 1}/{warmup}: {target.name} {got.wall_s:.3f}s" + (f" ({got.error})" if got.error else ""))
    out = []
    for i in range(rounds):
        order = (OURS, PEER) if i % 2 == 0 else (PEER, OURS)
        for name in order:
            time.sleep(COLD_GAP_S)     # each measured scrape cold: never within our offsets cache of the last
            out.append(scrape(targets[name], timeout))
        say(f"round {i + 1}/{rounds}: " + ", ".join(
            f"{s.target} {s.wall_s:.3f}s wall {s.cpu_s:.2f}s cpu {s.partitions} partitions" +
            (f" ERROR {s.error}" if s.error else "") for s in out[-2:]))
    return out


def served_per_partition(text: str) -> dict[str, int]:
    """Series per metric name, among the series carrying a partition label, in one /metrics text."""
    return dict(sorted(Counter(line.split("{", 1)[0] for line in text.splitlines()
                               if not line.startswith("#") and 'partition="' in line).items()))


def groups_served(text: str) -> int:
    """Consumer groups named in one /metrics text (label `group` for ours, `consumergroup` for the peer)."""
    found = set()
    for line in text.splitlines():
        for key in ('consumergroup="', ',group="', '{group="'):
            if key in line:
                found.add(line.split(key, 1)[1].split('"', 1)[0])
    return len(found)


# ---- background cycles (scan time) ----------------------------------------------------------------------------
class Cycles:
    """Background cycles of our exporter, read from its collector duration and last-success series."""

    def __init__(self) -> None:
        self.scans: dict[float, dict] = {}

    def observe(self, samples: dict) -> None:
        """Record the cycle whose transactions collection ended last, if producers ran right before it."""
        end = {c: sample(samples, "kafkatxn_collector_last_success_timestamp_seconds", collector=c)
               for c in ("configs", "producers", "transactions", "groups")}
        dur = {c: sample(samples, "kafkatxn_collector_duration_seconds", collector=c) for c in end}
        if not _follows(end["producers"], end["transactions"], dur["transactions"]) or dur["producers"] is None:
            return                    # no cycle yet, or this scrape fell between the two collections
        start = end["producers"] - dur["producers"]
        after_configs = _follows(end["configs"], end["producers"], dur["producers"])
        before_groups = _follows(end["transactions"], end["groups"], dur["groups"])
        full = after_configs or before_groups      # else a re-check of suspects (producers + transactions only)
        if after_configs:
            start -= dur["configs"]
        finish = end["groups"] if before_groups else end["transactions"]
        known = self.scans.get(end["transactions"], {})
        self.scans[end["transactions"]] = {"producers_s": dur["producers"], "transactions_s": dur["transactions"],
                                           "scan_s": dur["producers"] + dur["transactions"], "full": full,
                                           "start": min(start, known.get("start", start)),
                                           "end": max(finish, known.get("end", finish))}

    def overlaps(self, s: Scrape) -> bool:
        return any(c["start"] < s.started + s.wall_s and s.started < c["end"] for c in self.scans.values())

    def summary(self) -> dict:
        """Full cycles (every partition's producers, then coordinators) apart from the re-checks of
        suspect partitions only (hanging_confirm_seconds after a cycle that found suspects)."""
        full = [c for c in self.scans.values() if c["full"]]
        rechecks = [round(c["scan_s"], 3) for c in self.scans.values() if not c["full"]]
        if not full:
            return {"cycles": 0, "rechecks_seconds_all": rechecks}
        scans = [c["scan_s"] for c in full]
        return {"cycles": len(scans), "scan_seconds_median": round(statistics.median(scans), 3),
                "scan_seconds_max": round(max(scans), 3), "scan_seconds_all": [round(s, 3) for s in scans],
                "producers_seconds_median": round(statistics.median(c["producers_s"] for c in full), 3),
                "transactions_seconds_median": round(statistics.median(c["transactions_s"] for c in full), 3),
                "rechecks_seconds_all": rechecks}


def _follows(before_end: float | None, end: float | None, duration: float | None) -> bool:
    """True when a collection that ended at `end` after `duration` started as the one before ended."""
    return None not in (before_end, end, duration) and abs((end - duration) - before_end) <= 1.0


def observe_cycles(target: Target, cycles: Cycles, wanted: int, interval: float, timeout: float) -> None:
    """Scrape every 2 s until `wanted` more distinct background cycles were seen."""
    def full_cycles() -> int:
        return sum(1 for c in cycles.scans.values() if c["full"])
    goal = full_cycles() + wanted

    def enough() -> bool:
        got = scrape(target, timeout)
        cycles.observe(got.samples)
        return full_cycles() >= goal
    wait_until(enough, (interval + 60) * (wanted + 2), f"{wanted} background cycles", interval=2.0)
    say(f"background cycles seen: {full_cycles()} full, {len(cycles.scans) - full_cycles()} re-checks; scans (s): "
        + ", ".join(f"{c['scan_s']:.2f}" + ("" if c["full"] else " (re-check)") for c in cycles.scans.values()))


# ---- hanging detection ------------------------------------------------------------------------------------------
def hanging_ids(samples: dict) -> set[str]:
    return {dict(labels)["producer_id"] for (name, labels) in samples if name == "kafkatxn_hanging_transaction_info"}


def producers_scan_end(target: Target, after: float, timeout: float, scrape_timeout: float) -> float:
    """The unix time our exporter's next producer scan ended (the first one ending after `after`)."""
    def ended() -> float | None:
        end = sample(scrape(target, scrape_timeout).samples, "kafkatxn_collector_last_success_timestamp_seconds",
                     collector="producers")
        return end if end is not None and end > after else None
    return wait_until(ended, timeout, "a producer scan of our exporter to end", interval=0.25)


def hanging_trial(conn: ConnectionSettings, target: Target, cycles: Cycles, tp: tuple[str, int],
                  args: argparse.Namespace, phase: float, run_find_hanging: bool) -> dict:
    """Inject one hanging transaction on tp `phase` intervals after a producer scan of our exporter ended,
    time until our /metrics names it, abort it. Phase 0 is the worst case (the next scan only makes it
    suspect, the one after confirms it), phase near 1 the best (the scan right after makes it suspect)."""
    interval, timeout = args.interval, args.scrape_timeout
    scan_end = producers_scan_end(target, time.time(), interval * 2 + 60, timeout)
    threading.Event().wait(max(0.0, scan_end + phase * interval - time.time()))   # a clock time, not a state
    injected = inject_hanging(conn, *tp)
    t0, wall0 = time.monotonic(), time.time()
    say(f"injected hanging transaction on {tp[0]}-{tp[1]} (producer {injected.producer_id}) "
        f"{wall0 - scan_end:.1f}s after a producer scan ended")
    try:
        def named() -> dict | None:
            got = scrape(target, timeout)
            cycles.observe(got.samples)
            return got.samples if str(injected.producer_id) in hanging_ids(got.samples) else None
        limit = interval * 4 + 60
        try:
            samples = wait_until(named, limit, "our exporter to report the hanging transaction",
                                 interval=args.detect_poll)
        except TimeoutError:
            say(f"our exporter did not report it within {limit:.0f}s")
            return {"topic": tp[0], "partition": tp[1], "producer_id": injected.producer_id,
                    "phase": round((wall0 - scan_end) / interval, 2), "detected_seconds": None,
                    "detected_intervals": None, "not_reported_within_seconds": limit}
        detected = time.monotonic() - t0
        confirmed_at = sample(samples, "kafkatxn_collector_last_success_timestamp_seconds", collector="transactions")
        say(f"our exporter reports it after {detected:.1f}s ({detected / interval:.2f} intervals)")
        result = {"topic": tp[0], "partition": tp[1], "producer_id": injected.producer_id,
                  "phase": round((wall0 - scan_end) / interval, 2), "detected_seconds": round(detected, 2),
                  "detected_intervals": round(detected / interval, 2),
                  "confirmed_by_cycle_ending_seconds_after_injection":
                      round(confirmed_at - wall0, 2) if confirmed_at else None}
        if run_find_hanging:
            result["find_hanging"] = find_hanging(conn, injected)
    finally:
        abort_injected(conn, injected)          # never leave a hanging transaction behind, even on a timeout
        wait_until(lambda: str(injected.producer_id) not in hanging_ids(scrape(target, timeout).samples),
                   interval * 4 + 60, "the aborted transaction to leave /metrics", interval=1.0)
    return result


def find_hanging(conn: ConnectionSettings, injected: InjectedHanging) -> dict:
    """Kafka's own tool (KIP-664) on the injected transaction's leader, right after our exporter named it."""
    with ClusterAdmin(conn) as admin:
        leader = admin.leader_of(injected.topic, injected.partition)
    args = ["--bootstrap-server", conn.bootstrap, "find-hanging", "--broker-id", str(leader)]
    started = time.monotonic()
    proc = subprocess.run(java_command("org.apache.kafka.tools.TransactionsCommand", args), capture_output=True,
                          text=True, timeout=180)
    reported = str(injected.producer_id) in proc.stdout
    say(f"find-hanging --broker-id {leader}: exit {proc.returncode}, reports the transaction: {reported}")
    return {"command": "kafka-transactions.sh " + " ".join(args), "exit_code": proc.returncode,
            "reports_injected": reported, "seconds": round(time.monotonic() - started, 1),
            "stdout": proc.stdout.strip().splitlines()[:10], "stderr": proc.stderr.strip().splitlines()[-5:]}


def abort_injected(conn: ConnectionSettings, injected: InjectedHanging) -> None:
    """The hanging-transaction fault's own heal: WriteTxnMarkers(ABORT) with the epochs DescribeProducers
    reports, re-validated as it writes."""
    tp = TopicPartition(injected.topic, injected.partition)
    outcome = abort_hanging(conn, tp, injected.transactional_id, injected.producer_id)
    say(f"abort of the injected transaction on {injected.topic}-{injected.partition}: {outcome}")


# ---- profile (optional) -----------------------------------------------------------------------------------------
def profile_ours(py_spy: str, target: Target, scrapes: int, timeout: float, out: Path) -> dict:
    """py-spy record of our exporter (all threads, raw collapsed stacks) over `scrapes` scrapes; the frames
    most often on the stack of the thread serving /metrics (stacks through do_GET)."""
    binary = shutil.which(py_spy)
    if binary is None:
        say(f"py-spy not found ({py_spy}): no profile")
        return {"error": f"{py_spy} not found"}
    proc = subprocess.Popen([binary, "record", "--pid", str(target.process.pid), "--rate", "100", "--format", "raw",
                             "--output", str(out), "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)                                 # py-spy attaching: not a state we can poll
        walls = [round(scrape(target, timeout).wall_s, 3) for _ in range(scrapes)]
    finally:
        proc.send_signal(signal.SIGINT)                 # py-spy writes its output on SIGINT
        proc.wait(60)
    return {"scrapes_wall_s": walls, "raw": str(out.relative_to(REPO_ROOT)), **top_frames(out)}


def top_frames(raw: Path, limit: int = 25) -> dict:
    """Inclusive and self sample counts per function over the stacks that pass through do_GET."""
    inclusive, own, total = Counter(), Counter(), 0
    if not raw.exists():
        return {"error": "py-spy wrote no output"}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f.rsplit(":", 1)[0] + ")" if ":" in f else f for f in stack.split(";")]
        serving = [i for i, f in enumerate(frames) if f.split(" (", 1)[0].endswith("do_GET")]
        if not count.isdigit() or not serving:
            continue
        frames = frames[serving[0]:]                    # from the handler down
        total += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
        own[frames[-1]] += int(count)
    share = (lambda c: {f: round(n / total, 3) for f, n in c.most_common(limit)}) if total else (lambda c: {})
    return {"serving_samples": total, "inclusive_share": share(inclusive), "self_share": share(own)}


# ---- results ------------------------------------------------------------------------------------------------
def stats(values: list[float]) -> dict | None:
    if not values:
        return None
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"median": round(statistics.median(ordered), 4), "p90": round(p90, 4),
            "mean": round(statistics.fmean(ordered), 4), "max": round(ordered[-1], 4), "n": len(ordered)}


def scrape_summary(scrapes: list[Scrape], cycles: Cycles, expected: int) -> dict:
    by = {name: [s for s in scrapes if s.target == name] for name in (OURS, PEER)}
    out = {}
    for name, got in by.items():
        ok = [s for s in got if s.error is None]
        out[name] = {"wall_s": stats([s.wall_s for s in ok]), "cpu_s": stats([s.cpu_s for s in ok]),
                     "offsets_collection_s": stats([s.collect_s for s in ok if s.collect_s is not None]),
                     "bytes": stats([s.bytes for s in ok]), "series": stats([s.series for s in ok]),
                     "partitions": ok[-1].partitions if ok else None,
                     "failed": len(got) - len(ok), "incomplete": sum(1 for s in ok if s.partitions < expected),
                     "errors": sorted({s.error for s in got if s.error})[:5]}
    quiet = [s.wall_s for s in by[OURS] if s.error is None and not cycles.overlaps(s)]
    out[OURS]["wall_s_outside_background_cycles"] = stats(quiet)
    out["ratio"] = {f"{k}_{q}": ratio(out[OURS][k], out[PEER][k], q)
                    for k in ("wall_s", "cpu_s") for q in ("median", "p90", "mean")}
    out["all"] = [{"target": s.target, "wall_s": round(s.wall_s, 4), "cpu_s": round(s.cpu_s, 3),
                   "partitions": s.partitions, "series": s.series, "bytes": s.bytes,
                   "offsets_collection_s": s.collect_s, "error": s.error,
                   "overlaps_background_cycle": cycles.overlaps(s)} for s in scrapes]
    return out


def ratio(ours: dict | None, peer: dict | None, q: str) -> float | None:
    return round(ours[q] / peer[q], 3) if ours and peer and peer[q] else None


def broker_facts(cluster: LocalCluster) -> dict:
    """RSS, open files and memory maps of each Kafka node now."""
    out = {}
    for node in cluster.layout.node_ids:
        proc = cluster.supervisor.process(cluster.node_name(node))
        if proc is None:
            out[str(node)] = None
            continue
        try:
            maps = sum(1 for _ in open(f"/proc/{proc.pid}/maps"))
            out[str(node)] = {"rss_mib": round(proc.memory_info().rss / 2**20, 1), "open_files": proc.num_fds(),
                              "memory_maps": maps}
        except (psutil.Error, OSError):
            out[str(node)] = None
    return out


def limits() -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        max_maps = int(Path("/proc/sys/vm/max_map_count").read_text())
    except OSError:
        max_maps = None
    return {"nofile_soft": soft, "nofile_hard": hard, "vm_max_map_count": max_maps}


def verdicts(sizes: dict, interval: float) -> list[dict]:
    """Each goal at each size it applies to: measured value and met or not."""
    largest = max(sizes, key=int)
    out = []
    for size, r in sizes.items():
        goals = {**GOALS, **(LARGE_GOALS if int(size) >= LARGE else {})}
        wall = r["scrape"]["ratio"]["wall_s_median"]
        out.append(goal(f"scrape wall median ours/kafka_exporter <= {goals['scrape_wall_ratio']:g}", size, wall,
                        wall is not None and wall <= goals["scrape_wall_ratio"]))
        ours = r["scrape"][OURS]["wall_s"] or {}
        for key, what in (("wall_median_s", "median"), ("wall_max_s", "max")):
            if key in goals:
                measured = ours.get(what)
                out.append(goal(f"our scrape wall {what} <= {goals[key]:g} s", size, measured,
                                measured is not None and measured <= goals[key]))
        if size == largest:
            rss = r["rss"][OURS]["peak_bytes"]
            out.append(goal(f"our peak RSS <= {goals['rss_bytes'] // 10**6} MB", size, rss, rss <= goals["rss_bytes"]))
            seen = r["scan"].get("scan_seconds_all", []) + r["scan"].get("rechecks_seconds_all", [])
            scan = max(seen) if r["scan"].get("cycles") else None      # re-checks too: only ever stricter
            out.append(goal("producer + coordinator scan <= 10 s, every observed cycle", size, scan,
                            scan is not None and scan <= GOALS["scan_seconds"]))
        trials = r.get("hanging", {}).get("trials")
        if trials:
            missed = any(t["detected_intervals"] is None for t in trials)
            worst = None if missed else max(t["detected_intervals"] for t in trials)
            out.append(goal("hanging transaction named within 2 intervals, every injection", size, worst,
                            not missed and worst <= GOALS["detect_intervals"]))
    return out


def goal(what: str, size: str, measured: float | None, met: bool) -> dict:
    return {"goal": what, "size": int(size), "measured": measured, "met": bool(met)}


def git(*argv: str) -> str:
    proc = subprocess.run(["git", *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout.rstrip()


def source_state(ours_commit: str | None) -> dict:
    """What our exporter runs from: a commit unpacked aside (--ours-commit), or the working tree (HEAD and
    the files of exporter/ and cluster/ changed on top of it, when the run started)."""
    if ours_commit:
        return {"ours_commit": git("rev-parse", "--verify", f"{ours_commit}^{{commit}}"), "tree": "unpacked aside"}
    return {**txnlab_source("exporter", "cluster"), "tree": "working tree"}


def unpack_ours(commit: str, run_dir: Path) -> Path:
    """`git archive COMMIT exporter cluster` unpacked into the run directory (the repository is only read)."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    tree = run_dir / f"ours-{full[:12]}"
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "--format=tar", full, "exporter", "cluster"], cwd=REPO_ROOT,
                             capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)
    say(f"our exporter runs from {full[:12]} (unpacked into {tree})")
    return tree


def machine() -> dict:
    return {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def write_results(result: dict, path: Path, out: Path | None) -> None:
    text = json.dumps(result, indent=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if out:
        out.write_text(text)
    print(text)


# ---- one size ------------------------------------------------------------------------------------------------
@dataclass
class Bench:
    args: argparse.Namespace
    cluster: LocalCluster
    conn: ConnectionSettings
    peer_bin: Path
    run_dir: Path
    sup: Supervisor
    ours_tree: Path
    topics: list[str] = field(default_factory=list)

    def prepare(self, size: int) -> tuple[dict, LiveLoad]:
        """Grow the topics to `size` partitions, flood the new ones, start the live load over all."""
        args, t0 = self.args, time.monotonic()
        new = grow_topics(self.conn, self.topics, size, args)
        self.topics += new
        setup = {"topics": len(self.topics), "topics_seconds": round(time.monotonic() - t0, 1),
                 "flood": flood(self.conn, new, args.partitions, args.producer_ids)}
        if size == args.sizes[0] and args.transactional_ids:
            setup["transactional_ids"] = init_transactional_ids(
                self.conn, f"{TOPIC_PREFIX}-txn", args.transactional_ids,
                progress=lambda done, count: say(f"transactional ids: {done}/{count} initialised"))
        t1 = time.monotonic()
        load = LiveLoad(LoadSpec(self.conn.bootstrap, list(self.topics), args.partitions, args.live_producers,
                                 args.live_period, args.open_transactions, args.transactional_every,
                                 parent_pid=os.getpid())).start()
        setup["live_load_start_seconds"] = round(time.monotonic() - t1, 1)
        return setup, load

    def measure(self, size: int) -> dict:
        """Both exporters up, scrape rounds, hanging trials, scan cycles, optional profile; both exporters
        stopped before returning, whatever happens."""
        args = self.args
        commands = exporter_commands(self.conn.bootstrap, self.peer_bin, args)
        targets = start_exporters(self.sup, self.run_dir, size, commands, args.base_port, self.ours_tree)
        sampler = RssSampler(targets)
        sampler.start()
        result: dict = {"exporters": commands}
        try:
            say(f"exporters started: ours pid {targets[OURS].process.pid}, {PEER} pid {targets[PEER].process.pid}")
            result["ready_seconds"] = wait_serving(targets, size, timeout=max(600.0, args.scrape_timeout * 2))
            cycles = Cycles()
            scrapes = scrape_rounds(targets, args.rounds, args.scrape_timeout)
            for s in scrapes:
                cycles.observe(s.samples)
            result["scrape"] = scrape_summary(scrapes, cycles, size)
            if size in args.hanging_sizes:
                result["hanging"] = self.hanging(targets[OURS], cycles)
            observe_cycles(targets[OURS], cycles, args.scan_cycles, args.interval, args.scrape_timeout)
            result["scan"] = cycles.summary()
            result.update(self.final_views(targets))
            result["brokers"] = broker_facts(self.cluster)
            if args.py_spy:
                result["profile"] = profile_ours(args.py_spy, targets[OURS], args.profile_scrapes,
                                                 args.scrape_timeout, self.run_dir / f"ours-{size}.pyspy.txt")
        finally:
            sampler.stop.set()
            sampler.join()
            for name in (OURS, PEER):
                self.sup.stop(name, timeout=15)
                self.sup.forget(name)
        result["rss"] = {t.name: {"peak_bytes": t.peak_rss, "peak_mib": round(t.peak_rss / 2**20, 1)}
                         for t in targets.values()}
        result["rss_samples"] = sampler.samples
        return result

    def hanging(self, target: Target, cycles: Cycles) -> dict:
        args, first = self.args, self.topics[:self.args.sizes[0] // self.args.partitions]
        trials = [hanging_trial(self.conn, target, cycles, (first[(3 * k) % len(first)], (10 + k) % args.partitions),
                                args, phase, run_find_hanging=k == 0)
                  for k, phase in enumerate(args.hanging_phases)]
        return {"interval_seconds": args.interval, "poll_seconds": args.detect_poll, "trials": trials}

    def final_views(self, targets: dict[str, Target]) -> dict:
        """What each exporter serves per partition, the consumer groups it names, our producer-id count."""
        last = {name: scrape(t, self.args.scrape_timeout, keep_text=True) for name, t in targets.items()}
        ours = last[OURS].samples
        ids = sum(v for (name, _), v in ours.items() if name == "kafkatxn_broker_active_producers")
        txn_ids = sum(v for (name, _), v in ours.items() if name == "kafkatxn_transactions")
        return {"served_per_partition": {name: served_per_partition(s.text) for name, s in last.items()},
                "groups_served": {name: groups_served(s.text) for name, s in last.items()},
                "producer_ids_seen_by_ours": int(ids),
                "transactional_ids_seen_by_ours": int(txn_ids),
                "hanging_named_by_ours_at_the_end": sorted(hanging_ids(ours)),
                "bytes": {name: len(s.text.encode()) for name, s in last.items()}}


# ---- main ------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace, run_dir: Path, result: dict) -> None:
    """Fills `result` as it goes, so a run that fails part-way still reports what it measured."""
    ours_tree = unpack_ours(args.ours_commit, run_dir) if args.ours_commit else REPO_ROOT
    source = peer_source(args.peer_source)
    peer_bin = build_peer(source)
    result["peer"] = {"source": str(source), "binary": str(peer_bin), "version_file": read_version(source),
                      "version_flag": peer_version(peer_bin)}
    sup = exporter_supervisor()
    cluster, load = bench_cluster(args), None
    result["sizes"] = {}
    try:
        start_cluster(cluster, args)
        bench = Bench(args, cluster, cluster.connection(), peer_bin, run_dir, sup, ours_tree)
        for size in args.sizes:
            say(f"==== {size} partitions ====")
            setup, load = bench.prepare(size)
            try:
                result["sizes"][str(size)] = {"setup": setup, **bench.measure(size)}
            finally:
                result["sizes"].setdefault(str(size), {"setup": setup})["live_load"] = load.stop()
            say(f"==== {size} partitions done ====")
    finally:
        for name in (OURS, PEER):
            sup.stop(name, timeout=15)
        if load is not None:
            load.stop()
        if not args.keep:
            cluster.down(purge=True, progress=say)
    result["goals_met"] = verdicts(result["sizes"], args.interval)


def setup_facts(args: argparse.Namespace, run_dir: Path) -> dict:
    return {"sizes": args.sizes, "partitions_per_topic": args.partitions, "replication": args.replication,
            "broker_heap": args.broker_heap, "producer_ids_per_size": args.producer_ids,
            "transactional_ids": args.transactional_ids,
            "live_producers": args.live_producers, "live_period_s": args.live_period,
            "transactional_every": args.transactional_every, "open_transactions": args.open_transactions,
            "rounds": args.rounds, "interval_s": args.interval, "hanging_sizes": args.hanging_sizes,
            "hanging_phases": args.hanging_phases, "topic_filter": TOPIC_FILTER,
            "peer_kafka_version": PEER_KAFKA_VERSION, "prometheus_stopped": not args.keep_prometheus,
            "logs": str(run_dir.relative_to(REPO_ROOT)), "limits": limits()}


def exit_on_signals() -> None:
    """SIGTERM and SIGHUP end the run like Ctrl-C does: through every finally (teardown included).
    Further signals are ignored meanwhile, so the teardown is not cut short."""
    def handler(signum: int, _frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


@contextmanager
def noting_end(result: dict) -> Iterator[None]:
    """A benchmark's run: its error (if any) into `result`, raised again; the machine's state at the end either way."""
    try:
        yield
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        result["machine_end"] = machine()


def main() -> None:
    args = parse_args()
    exit_on_signals()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = REPO_ROOT / "runs" / f"exporter-scrape-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    result = {"command": ".venv/bin/python bench/exporter_scrape.py " + " ".join(sys.argv[1:]),
              "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "source": source_state(args.ours_commit),
              "machine_start": machine(),
              "setup": setup_facts(args, run_dir)}
    path = REPO_ROOT / "runs" / f"exporter-scrape-{stamp}.json"
    try:
        with noting_end(result):
            run(args, run_dir, result)
    finally:
        result["elapsed_seconds"] = round(time.monotonic() - STARTED, 1)
        write_results(result, path, args.out)
        say(f"results in {path}")


if __name__ == "__main__":
    main()
