"""Benchmark (issue 3): our exporter's scrape side by side with a kafka_exporter stand-in, the producer +
coordinator scan, exporter RSS with 100,000 producer ids, and hanging-transaction detection time.

One run against a dedicated 3-node drill cluster (KIP-890 verification off, transaction.version=1, so a
hanging transaction can be injected) on ports 23000-23899, torn down at the end unless --keep:
  1. topics totalling 2,000 partitions; 100,000 idempotent producer ids flooded over them; 200 live
     producers (every 4th transactional, the others idempotent) each writing two records every 10 s in a
     child process for the whole measurement, plus a few transactions left open so the LSO lags somewhere;
     the stack's own exporter and (unless --keep-prometheus) its Prometheus are stopped;
  2. our exporter (`python -m exporter`, interval 15 s) and the peer (bench/peers/sarama_offsets, built
     with `go build` into .txnlab/bin) as subprocesses; alternating GET /metrics rounds, each timed on
     the client (wall) and in the exporter process (CPU, psutil user+system incl. children); RSS of both
     sampled every 0.2 s for the whole run;
  3. the background scan (collector durations of producers + transactions) over several cycles;
  4. hanging-transaction injections at set phases of our exporter's background cycle (0 = right after a
     producer scan: the worst case), each timed until our /metrics names it, with Kafka's
     `kafka-transactions.sh find-hanging` run on the first one, each aborted again.
Owns: nothing beyond this benchmark. Must not: touch other clusters, or stop processes it did not start.
Usage: .venv/bin/python bench/exporter_scrape.py [--rounds 20] [--keep] [--out FILE]
Progress goes to stderr; the results JSON to stdout and runs/exporter-scrape-<time>.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import requests
from confluent_kafka import KafkaException, Producer
from prometheus_client.parser import text_string_to_metric_families

from chaos.hanging import InjectedHanging, inject_hanging
from chaos.producer_flood import flood_producer_ids
from cluster.admin import ClusterAdmin
from cluster.connection import ConnectionSettings
from cluster.java import java_command
from cluster.layout import HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES, new_cluster_id
from cluster.local import LocalCluster
from cluster.smoke import ensure_topic
from cluster.supervisor import Supervisor
from cluster.versions import REPO_ROOT, txnlab_home
from cluster.waiting import wait_until
from exporter.kafka_access import KafkaAccess
from exporter.operator import open_transaction_of

PEER_SOURCE = Path(__file__).resolve().parent / "peers" / "sarama_offsets"
TOPIC_PREFIX = "bench-scrape"
TOPIC_DENY = "^__transaction_state$"          # our exporter's default; the peer is given the same
OURS, PEER = "ours", "peer"
WATCHED = ("kafkatxn_collector_duration_seconds", "kafkatxn_collector_last_success_timestamp_seconds",
           "kafkatxn_hanging_transactions", "kafkatxn_hanging_transaction_info", "kafkatxn_broker_active_producers")
GOALS = {"scrape_wall_ratio": 1.0, "scan_seconds": 5.0, "rss_bytes": 200 * 10**6, "detect_intervals": 2.0}
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-port", type=int, default=23000)
    p.add_argument("--topics", type=int, default=20)
    p.add_argument("--partitions", type=int, default=100, help="per topic")
    p.add_argument("--replication", type=int, default=3)
    p.add_argument("--producer-ids", type=int, default=100_000, help="idempotent ids flooded onto the cluster")
    p.add_argument("--live-producers", type=int, default=200, help="producers writing during the measurement")
    p.add_argument("--live-period", type=float, default=10.0, help="seconds between two writes of one live producer")
    p.add_argument("--transactional-every", type=int, default=4, help="every Nth live producer is transactional "
                   "(the others idempotent)")
    p.add_argument("--open-transactions", type=int, default=5, help="transactions left open (LSO lag > 0)")
    p.add_argument("--rounds", type=int, default=20, help="alternating scrape rounds (after 2 warm-up rounds)")
    p.add_argument("--interval", type=float, default=15.0, help="our exporter's background interval")
    p.add_argument("--scan-cycles", type=int, default=6, help="background cycles to observe at least")
    p.add_argument("--hanging-phases", type=lambda v: [float(x) for x in v.split(",")], default=[0.0, 0.25, 0.5, 0.75],
                   help="one injection per value: that many intervals after a producer scan of ours ended")
    p.add_argument("--detect-poll", type=float, default=0.25, help="seconds between /metrics polls")
    p.add_argument("--keep-prometheus", action="store_true", help="leave the cluster's Prometheus running "
                   "(it scrapes the brokers' JMX every 5 s: noise for this benchmark)")
    p.add_argument("--keep", action="store_true", help="leave the cluster running at the end (its own exporter "
                   "and Prometheus stay stopped)")
    p.add_argument("--out", type=Path, help="also write the results JSON here")
    return p.parse_args(argv)


# ---- the peer ------------------------------------------------------------------------------------------
def build_peer() -> Path:
    """go build the peer into .txnlab/bin unless the binary is newer than its sources."""
    binary = txnlab_home() / "bin" / "sarama-offsets"
    sources = [PEER_SOURCE / name for name in ("main.go", "go.mod", "go.sum")]
    if binary.exists() and binary.stat().st_mtime > max(s.stat().st_mtime for s in sources):
        return binary
    say(f"building {binary} (go build)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=PEER_SOURCE, check=True)
    return binary


# ---- cluster and load -------------------------------------------------------------------------------------
def bench_cluster(args: argparse.Namespace) -> LocalCluster:
    return LocalCluster.load(txnlab_home() / "bench-exporter-cluster", base_port=args.base_port,
                             broker_overrides=dict(HANGING_DRILL_BROKER_CONFIG), features=dict(HANGING_DRILL_FEATURES))


def start_cluster(cluster: LocalCluster, args: argparse.Namespace) -> None:
    """Fresh data (exactly the producer ids this run adds); only the brokers and Toxiproxy left running:
    the stack's own exporter would be a third scraper of the same brokers, its Prometheus scrapes JMX."""
    cluster.down(purge=True, progress=say)
    seed_cluster_id(cluster.layout.state_dir)
    cluster.up(progress=say, timeout=300)
    cluster.supervisor.stop("exporter", timeout=10)
    if not args.keep_prometheus:
        cluster.supervisor.stop("prometheus", timeout=10)
    say("stopped the stack's exporter" + ("" if args.keep_prometheus else " and Prometheus"))


def seed_cluster_id(state_dir: Path) -> None:
    """A KRaft cluster id that does not start with '-': kafka-storage reads such an id as an option
    ("--cluster-id/-t: expected one argument"); new_cluster_id() returns one 1 time in 64, Kafka's own
    Uuid.randomUuid() never does. `up` keeps the id it finds in cluster.json."""
    cluster_id = new_cluster_id()
    while cluster_id.startswith("-"):
        cluster_id = new_cluster_id()
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "cluster.json").write_text(json.dumps({"cluster_id": cluster_id}))


def create_topics(conn: ConnectionSettings, args: argparse.Namespace) -> list[str]:
    topics = [f"{TOPIC_PREFIX}-{i:02d}" for i in range(args.topics)]
    for topic in topics:
        ensure_topic(conn, topic, partitions=args.partitions, replication=args.replication, timeout=180)
    say(f"{len(topics)} topics x {args.partitions} partitions, replication {args.replication}")
    return topics


def flood(conn: ConnectionSettings, topics: list[str], partitions: int, count: int, workers: int = 4) -> dict:
    """count idempotent producer ids spread evenly over every partition of every topic, `workers` topics
    at a time (the flood waits on the brokers more than it computes)."""
    started, done, lock = time.monotonic(), [0], threading.Lock()

    def one(i: int) -> None:
        share = count // len(topics) + (1 if i < count % len(topics) else 0)
        flood_producer_ids(conn, topics[i], list(range(partitions)), share)
        with lock:
            done[0] += share
            say(f"flood: {done[0]}/{count} producer ids ({done[0] / (time.monotonic() - started):.0f}/s)")
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(len(topics))))
    return {"producer_ids": count, "seconds": round(time.monotonic() - started, 1)}


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


def live_load(spec: LoadSpec, ready: mp.Event, stop: mp.Event, results: mp.Queue) -> None:
    """Child process: spec.producers producers (every transactional_every-th one transactional, the others
    idempotent) each writing two records every period_s, plus spec.open_transactions transactions begun
    and left open until stop."""
    conn = ConnectionSettings(bootstrap=spec.bootstrap, client_id="bench-live")
    rng = random.Random(spec.seed)
    live = [LiveProducer.create(conn, i, spec, rng) for i in range(spec.producers)]
    held = [open_transaction(conn, i, spec) for i in range(spec.open_transactions)]
    ready.set()
    threads = [threading.Thread(target=drive, args=(live[t::spec.threads], spec.period_s, stop), daemon=True)
               for t in range(spec.threads)]
    for thread in threads:
        thread.start()
    stop.wait()
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


# ---- exporters under measurement ---------------------------------------------------------------------------
@dataclass
class Target:
    name: str
    url: str
    series: str                       # one line per partition in /metrics
    duration: str                     # the exporter's own timing of its offsets collection
    process: psutil.Process
    peak_rss: int = 0


def start_exporters(sup: Supervisor, run_dir: Path, bootstrap: str, peer_bin: Path, base_port: int,
                    interval: float) -> dict[str, Target]:
    ours_port, peer_port = base_port + 810, base_port + 811
    ours = [sys.executable, "-m", "exporter", "--bootstrap", bootstrap, "--port", str(ours_port),
            "--interval", str(interval)]
    peer = [str(peer_bin), "-kafka.server", bootstrap, "-web.listen-address", f"127.0.0.1:{peer_port}",
            "-topic.exclude", TOPIC_DENY]
    sup.start(OURS, ours, run_dir / "ours.log", cwd=REPO_ROOT)
    sup.start(PEER, peer, run_dir / "peer.log")
    for name in (OURS, PEER):
        if sup.process(name) is None:
            raise RuntimeError(f"{name} exited at start: see {run_dir / name}.log")
    return {OURS: Target(OURS, f"http://127.0.0.1:{ours_port}", "kafkatxn_partition_high_watermark{",
                         'kafkatxn_collector_duration_seconds{collector="offsets"}', sup.process(OURS)),
            PEER: Target(PEER, f"http://127.0.0.1:{peer_port}", "kafka_topic_partition_current_offset{",
                         "sarama_offsets_scrape_duration_seconds", sup.process(PEER))}


def partitions_served(target: Target) -> int:
    text = requests.get(target.url + "/metrics", timeout=120).text
    return sum(1 for line in text.splitlines() if line.startswith(target.series))


def wait_serving(targets: dict[str, Target], expected: int, timeout: float) -> None:
    """Until our exporter is ready and both serve every expected partition."""
    wait_until(lambda: requests.get(targets[OURS].url + "/ready", timeout=10).status_code == 200, timeout,
               "our exporter's first background cycle", interval=1.0, ignore=(requests.RequestException,))
    for target in targets.values():
        wait_until(lambda t=target: partitions_served(t) >= expected, timeout, f"{target.name} serving "
                   f"{expected} partitions", interval=1.0, ignore=(requests.RequestException,))


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
    samples: dict = field(default_factory=dict, repr=False)


def cpu_seconds(process: psutil.Process) -> float:
    t = process.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def scrape(target: Target) -> Scrape:
    """One GET /metrics timed on the client (wall) and in the exporter process (CPU)."""
    started, cpu0, t0 = time.time(), cpu_seconds(target.process), time.perf_counter()
    response = requests.get(target.url + "/metrics", timeout=120)
    wall, cpu1 = time.perf_counter() - t0, cpu_seconds(target.process)
    response.raise_for_status()
    lines = response.text.splitlines()
    partitions = sum(1 for line in lines if line.startswith(target.series))
    collect = next((float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(target.duration)), None)
    samples = read_samples(lines) if target.name == OURS else {}
    return Scrape(target.name, started, wall, cpu1 - cpu0, len(response.content), partitions, collect, samples)


def read_samples(lines: list[str]) -> dict[tuple[str, frozenset], float]:
    """The WATCHED series of one /metrics text, keyed by (name, labels)."""
    text = "\n".join(line for line in lines if line.startswith(WATCHED)) + "\n"
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrape_rounds(targets: dict[str, Target], rounds: int, warmup: int = 2) -> list[Scrape]:
    """warmup rounds, then `rounds` rounds alternating the order (ours first, then the peer first)."""
    for _ in range(warmup):
        for target in targets.values():
            scrape(target)
    out = []
    for i in range(rounds):
        order = (OURS, PEER) if i % 2 == 0 else (PEER, OURS)
        out += [scrape(targets[name]) for name in order]
        say(f"round {i + 1}/{rounds}: " + ", ".join(f"{s.target} {s.wall_s:.3f}s wall {s.cpu_s:.2f}s cpu"
                                                    for s in out[-2:]))
    return out


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
        if _follows(end["configs"], end["producers"], dur["producers"]):
            start -= dur["configs"]
        finish = end["groups"] if _follows(end["transactions"], end["groups"], dur["groups"]) else end["transactions"]
        known = self.scans.get(end["transactions"], {})
        self.scans[end["transactions"]] = {"producers_s": dur["producers"], "transactions_s": dur["transactions"],
                                           "scan_s": dur["producers"] + dur["transactions"],
                                           "start": min(start, known.get("start", start)),
                                           "end": max(finish, known.get("end", finish))}

    def overlaps(self, s: Scrape) -> bool:
        return any(c["start"] < s.started + s.wall_s and s.started < c["end"] for c in self.scans.values())

    def summary(self) -> dict:
        scans = [c["scan_s"] for c in self.scans.values()]
        if not scans:
            return {"cycles": 0}
        return {"cycles": len(scans), "scan_seconds_median": round(statistics.median(scans), 3),
                "scan_seconds_max": round(max(scans), 3), "scan_seconds_all": [round(s, 3) for s in scans],
                "producers_seconds_median": round(statistics.median(c["producers_s"] for c in self.scans.values()), 3),
                "transactions_seconds_median": round(statistics.median(c["transactions_s"]
                                                                       for c in self.scans.values()), 3)}


def _follows(before_end: float | None, end: float | None, duration: float | None) -> bool:
    """True when a collection that ended at `end` after `duration` started as the one before ended."""
    return None not in (before_end, end, duration) and abs((end - duration) - before_end) <= 1.0


def observe_cycles(target: Target, cycles: Cycles, wanted: int, interval: float) -> None:
    """Scrape every 2 s until `wanted` distinct background cycles were seen."""
    def enough() -> bool:
        cycles.observe(scrape(target).samples)
        return len(cycles.scans) >= wanted
    wait_until(enough, interval * (wanted + 2) + 60, f"{wanted} background cycles", interval=2.0)


# ---- hanging detection ------------------------------------------------------------------------------------------
def hanging_ids(samples: dict) -> set[str]:
    return {dict(labels)["producer_id"] for (name, labels) in samples if name == "kafkatxn_hanging_transaction_info"}


def producers_scan_end(target: Target, after: float, timeout: float) -> float:
    """The unix time our exporter's next producer scan ended (the first one ending after `after`)."""
    def ended() -> float | None:
        end = sample(scrape(target).samples, "kafkatxn_collector_last_success_timestamp_seconds", collector="producers")
        return end if end is not None and end > after else None
    return wait_until(ended, timeout, "a producer scan of our exporter to end", interval=0.25)


def hanging_trial(conn: ConnectionSettings, target: Target, cycles: Cycles, tp: tuple[str, int],
                  interval: float, phase: float, poll: float, run_find_hanging: bool) -> dict:
    """Inject one hanging transaction on tp `phase` intervals after a producer scan of our exporter ended,
    time until our /metrics names it, abort it. Phase 0 is the worst case (the next scan only makes it
    suspect, the one after confirms it), phase near 1 the best (the scan right after makes it suspect)."""
    scan_end = producers_scan_end(target, time.time(), interval * 2 + 60)
    threading.Event().wait(max(0.0, scan_end + phase * interval - time.time()))   # a clock time, not a state
    injected = inject_hanging(conn, *tp)
    t0, wall0 = time.monotonic(), time.time()
    say(f"injected hanging transaction on {tp[0]}-{tp[1]} (producer {injected.producer_id}) "
        f"{wall0 - scan_end:.1f}s after a producer scan ended")

    def named() -> dict | None:
        got = scrape(target)
        cycles.observe(got.samples)
        return got.samples if str(injected.producer_id) in hanging_ids(got.samples) else None
    samples = wait_until(named, interval * 4 + 60, "our exporter to report the hanging transaction", interval=poll)
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
    abort_injected(conn, injected)
    wait_until(lambda: str(injected.producer_id) not in hanging_ids(scrape(target).samples), interval * 4 + 60,
               "the aborted transaction to leave /metrics", interval=1.0)
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
    """WriteTxnMarkers(ABORT) with the epochs DescribeProducers reports (what `txnlab txn abort` does)."""
    access = KafkaAccess(conn)
    try:
        tp = (injected.topic, injected.partition)
        txn = open_transaction_of(access, tp, injected.producer_id)
        access.abort_transaction(tp, txn.producer_id, txn.producer_epoch, txn.coordinator_epoch)
    finally:
        access.close()
    say(f"aborted the injected transaction on {injected.topic}-{injected.partition}")


# ---- results ------------------------------------------------------------------------------------------------
def stats(values: list[float]) -> dict:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"median": round(statistics.median(ordered), 4), "p90": round(p90, 4),
            "mean": round(statistics.fmean(ordered), 4), "n": len(ordered)}


def scrape_summary(scrapes: list[Scrape], cycles: Cycles) -> dict:
    by = {name: [s for s in scrapes if s.target == name] for name in (OURS, PEER)}
    out = {name: {"wall_s": stats([s.wall_s for s in got]), "cpu_s": stats([s.cpu_s for s in got]),
                  "offsets_collection_s": stats([s.collect_s for s in got if s.collect_s is not None]),
                  "bytes": got[-1].bytes, "partitions": got[-1].partitions} for name, got in by.items()}
    quiet = [s.wall_s for s in by[OURS] if not cycles.overlaps(s)]
    out[OURS]["wall_s_outside_background_cycles"] = stats(quiet) if quiet else None
    out["ratio"] = {f"{k}_{q}": round(out[OURS][k][q] / out[PEER][k][q], 2) if out[PEER][k][q] else None
                    for k in ("wall_s", "cpu_s", "offsets_collection_s") for q in ("median", "p90", "mean")}
    out["all"] = [{"target": s.target, "wall_s": round(s.wall_s, 4), "cpu_s": round(s.cpu_s, 3),
                   "offsets_collection_s": s.collect_s, "overlaps_background_cycle": cycles.overlaps(s)}
                  for s in scrapes]
    return out


def verdicts(result: dict, interval: float) -> dict:
    scan, trials = result["scan"], result["hanging"]["trials"]
    return {"scrape_wall_ratio_le_1": result["scrape"]["ratio"]["wall_s_median"] <= GOALS["scrape_wall_ratio"],
            "scan_le_5s_every_cycle": scan.get("scan_seconds_max", float("inf")) <= GOALS["scan_seconds"],
            "rss_le_200MB": result["rss"][OURS]["peak_bytes"] <= GOALS["rss_bytes"],
            "detect_le_2_intervals_every_trial": all(t["detected_seconds"] <= GOALS["detect_intervals"] * interval
                                                     for t in trials)}


def machine() -> dict:
    return {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def write_results(result: dict, path: Path, out: Path | None) -> None:
    text = json.dumps(result, indent=2)
    path.write_text(text)
    if out:
        out.write_text(text)
    print(text)


# ---- main ------------------------------------------------------------------------------------------------
def measure(args: argparse.Namespace, conn: ConnectionSettings, topics: list[str], peer_bin: Path,
            run_dir: Path) -> dict:
    """Exporters up, scrape rounds, hanging trials, scan cycles; stops both exporters before returning."""
    sup = Supervisor(run_dir / "pids")
    targets = start_exporters(sup, run_dir, conn.bootstrap, peer_bin, args.base_port, args.interval)
    sampler = RssSampler(targets)
    sampler.start()
    try:
        say(f"exporters started: ours pid {targets[OURS].process.pid}, peer pid {targets[PEER].process.pid}")
        wait_serving(targets, args.topics * args.partitions, timeout=600)
        cycles = Cycles()
        scrapes = scrape_rounds(targets, args.rounds)
        for s in scrapes:
            cycles.observe(s.samples)
        trials = [hanging_trial(conn, targets[OURS], cycles,
                                (topics[(3 * k) % len(topics)], (10 + k) % args.partitions),
                                args.interval, phase, args.detect_poll, run_find_hanging=k == 0)
                  for k, phase in enumerate(args.hanging_phases)]
        observe_cycles(targets[OURS], cycles, args.scan_cycles, args.interval)
        last = scrape(targets[OURS]).samples
    finally:
        sampler.stop.set()
        sampler.join()
        argv = {name: sup.record(name).argv for name in (OURS, PEER)}
        for name in (OURS, PEER):
            sup.stop(name, timeout=15)
    ids_seen = sum(v for (name, _), v in last.items() if name == "kafkatxn_broker_active_producers")
    return {"exporters": argv, "scrape": scrape_summary(scrapes, cycles), "scan": cycles.summary(),
            "rss": {t.name: {"peak_bytes": t.peak_rss, "peak_mib": round(t.peak_rss / 2**20, 1)}
                    for t in targets.values()},
            "rss_samples": sampler.samples, "producer_ids_seen_by_ours": int(ids_seen),
            "hanging": {"interval_seconds": args.interval, "poll_seconds": args.detect_poll, "trials": trials}}


def start_live_load(ctx: mp.context.SpawnContext, spec: LoadSpec) -> tuple[mp.Process, mp.Event, mp.Event, mp.Queue]:
    ready, stop, queue = ctx.Event(), ctx.Event(), ctx.Queue()
    load = ctx.Process(target=live_load, args=(spec, ready, stop, queue), name="bench-live-load")
    load.start()
    wait_until(lambda: ready.is_set() or not load.is_alive(), 300, "live producers to start", interval=0.5)
    if not ready.is_set():
        raise RuntimeError("the live-load process exited before its producers started")
    say(f"{spec.producers} live producers and {spec.open_transactions} open transactions (pid {load.pid})")
    return load, ready, stop, queue


def stop_live_load(load: mp.Process, stop: mp.Event, queue: mp.Queue) -> dict | None:
    stop.set()
    try:
        stats_ = queue.get(timeout=180)
    except Exception:  # noqa: BLE001 - queue.Empty or a dead child: report no load statistics
        stats_ = None
    load.join(30)
    if load.is_alive():
        load.terminate()              # our own child, by its pid
        load.join(10)
    return stats_


def run(args: argparse.Namespace, stamp: str) -> dict:
    run_dir = REPO_ROOT / "runs" / f"exporter-scrape-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    result = {"command": ".venv/bin/python bench/exporter_scrape.py " + " ".join(sys.argv[1:]),
              "machine_start": machine(), "setup": setup_facts(args, run_dir)}
    peer_bin = build_peer()
    cluster, load = bench_cluster(args), None
    try:
        start_cluster(cluster, args)
        conn = cluster.connection()
        topics = create_topics(conn, args)
        result["flood"] = flood(conn, topics, args.partitions, args.producer_ids)
        load, _, stop, queue = start_live_load(mp.get_context("spawn"), LoadSpec(
            conn.bootstrap, topics, args.partitions, args.live_producers, args.live_period, args.open_transactions,
            args.transactional_every))
        result.update(measure(args, conn, topics, peer_bin, run_dir))
    finally:
        if load is not None:
            result["live_load"] = stop_live_load(load, stop, queue)
        if not args.keep:
            cluster.down(purge=True, progress=say)
    result["machine_end"] = machine()
    result["goals_met"] = verdicts(result, args.interval)
    return result


def setup_facts(args: argparse.Namespace, run_dir: Path) -> dict:
    return {"topics": args.topics, "partitions_per_topic": args.partitions, "replication": args.replication,
            "producer_ids": args.producer_ids, "live_producers": args.live_producers,
            "live_period_s": args.live_period, "transactional_every": args.transactional_every,
            "open_transactions": args.open_transactions,
            "interval_s": args.interval, "hanging_phases": args.hanging_phases,
            "prometheus_stopped": not args.keep_prometheus,
            "logs": str(run_dir.relative_to(REPO_ROOT))}


def main() -> None:
    args = parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result = run(args, stamp)
    path = REPO_ROOT / "runs" / f"exporter-scrape-{stamp}.json"
    write_results(result, path, args.out)
    say(f"results in {path}")


if __name__ == "__main__":
    main()
