"""Soak (issue 50): our exporter for hours against a cluster that churns, its memory, scrape time and series
sampled throughout; a documented command, never part of the gate.

One dedicated 3-node cluster (its own state dir, .txnlab/bench-exporter-soak, ports from --base-port, default
37000: clear of the gate's, whose demo takes 28000 and 29000), started from fresh data with short expirations
(transactional.id.expiration.ms and producer.id.expiration.ms --expiry-seconds, default 60, checked every 10 s) so
that what the churn leaves behind expires within minutes; purged at the end unless --keep. Then:
  1. a steady transactional writer on `soak-base` (12 partitions, a commit every 2 s, with its group's offsets:
     __consumer_offsets is there from the baseline on) and our exporter
     (`python -m exporter`, the working tree) against the cluster, every topic allowed;
  2. --baseline-minutes (default 5) with nothing else: the baseline of every figure;
  3. --hours (default 2) of churn, a round every --round-seconds (default 60): topics created (`soak-churn-N`, 6
     partitions) and written by fresh transactional ids (committed, one left open for the coordinator to abort at
     its 10 s timeout), a consumer group committing offsets on them, and those of three rounds ago deleted with
     their groups; every fifth round a producer storm (--storm idempotent producer ids, default 2000, on
     `soak-base`); every 30 minutes a rolling restart of the brokers (clean, one at a time); every 20 minutes
     (from minute 10) the coordinator of the steady writer's transactional id killed (SIGKILL) and started again
     15 s later. Each event is recorded with its time;
  4. the churn stops, every churn topic and group is deleted, and --settle-minutes (default 15, at least twice
     the expiry) with nothing else: what is gone must have left /metrics by then.
Throughout, every --sample-seconds (default 15): one GET /metrics timed on the client (against the exporter's
scrape deadline, collection.scrape_timeout_seconds: 5 s), the exporter's RSS and CPU (psutil), the series of
each of its families (`kafkatxn_exporter_series`) and every sample line.
Figures (the JSON's "figures"; goals from issue 50): the RSS slope after the first 15 minutes of churn, MB per
hour, least squares (goal <= 5); scrapes past the deadline or failed (goal 0); our families' series after the
settle against the baseline (goal: back to it, each family's at most its baseline). A picture (RSS, scrape time,
series over time, churn events marked) beside the JSON.
Everything this run started (cluster, exporter, writers) is stopped on every exit path: an error, Ctrl-C, SIGTERM
or SIGHUP. Owns: nothing beyond this benchmark. Must not: touch other clusters, or stop processes it did not start.
Usage: .venv/bin/python bench/exporter_soak.py [--hours 2] [--settle-minutes 15] [--sample-seconds 15] [--keep]
Progress goes to stderr; results to runs/exporter-soak-<time>.json and .png (also written, with "error", when the
run fails part-way).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from chaos.nemesis.producer_flood import flood_producer_ids
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import wait_until
from cluster.lab.local import LocalCluster
from cluster.lab.supervisor import Supervisor
from cluster.lab.versions import REPO_ROOT, txnlab_home
from exporter_scrape import exit_on_signals, machine, noting_end, say, seed_cluster_id, source_state, stats

STATE_DIR = txnlab_home() / "bench-exporter-soak"
BASE_TOPIC, CHURN_PREFIX = "soak-base", "soak-churn"
STEADY_ID, STEADY_GROUP = "soak-steady", "soak-steady-group"
SCRAPE_DEADLINE_S = 5.0                  # the exporter's collection.scrape_timeout_seconds (its default)
GOALS = {"rss_slope_mb_per_hour": 5.0, "late_scrapes": 0}
KEEP_ROUNDS = 3                          # a churn round's topics and group live this many rounds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hours", type=float, default=2.0, help="hours of churn (default 2)")
    p.add_argument("--baseline-minutes", type=float, default=5.0)
    p.add_argument("--settle-minutes", type=float, default=15.0)
    p.add_argument("--sample-seconds", type=float, default=15.0)
    p.add_argument("--round-seconds", type=float, default=60.0)
    p.add_argument("--storm", type=int, default=2000, help="idempotent producer ids per storm")
    p.add_argument("--expiry-seconds", type=int, default=60, help="transactional and producer id expiration")
    p.add_argument("--base-port", type=int, default=37000)
    p.add_argument("--keep", action="store_true", help="leave the cluster running (not purged) at the end")
    args = p.parse_args(argv)
    if args.settle_minutes * 60 < 2 * args.expiry_seconds + 60:
        p.error("--settle-minutes must leave twice the expiry and a minute for what the churn left to go")
    return args


# ---- what happened ----------------------------------------------------------------------------------------
@dataclass
class Journal:
    """The samples and the events of the soak, shared by its threads."""
    started: float = field(default_factory=time.time)
    samples: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def event(self, kind: str, **detail: object) -> None:
        with self.lock:
            self.events.append({"t_s": round(time.time() - self.started, 1), "kind": kind, **detail})
        say(f"event {kind} {detail if detail else ''}")

    def phase_at(self, t_s: float) -> str:
        marks = {e["kind"]: e["t_s"] for e in self.events if e["kind"] in ("churn-start", "churn-stop")}
        if t_s < marks.get("churn-start", float("inf")):
            return "baseline"
        return "churn" if t_s < marks.get("churn-stop", float("inf")) else "settle"


def series_of(text: str) -> tuple[dict[str, int], int]:
    """Our families' series (kafkatxn_exporter_series) and every sample line of one /metrics body."""
    families, lines = {}, 0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        lines += 1
        if line.startswith('kafkatxn_exporter_series{family="'):
            name, value = line[len('kafkatxn_exporter_series{family="'):].split('"} ')
            families[name] = int(float(value))
    return families, lines


class Sampler(threading.Thread):
    """Every interval: one timed scrape, the exporter's RSS and CPU, its families' series."""

    def __init__(self, url: str, process: psutil.Process, journal: Journal, interval: float):
        super().__init__(daemon=True, name="sampler")
        self.url, self.process, self.journal, self.interval = url, process, journal, interval
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.journal.samples.append(self.one())

    def one(self) -> dict:
        t = time.time()
        row: dict = {"t_s": round(t - self.journal.started, 1)}
        try:
            cpu0 = sum(self.process.cpu_times()[:2])
            t0 = time.perf_counter()
            response = requests.get(self.url, timeout=SCRAPE_DEADLINE_S * 4)
            row["scrape_s"] = round(time.perf_counter() - t0, 4)
            row["scrape_cpu_s"] = round(sum(self.process.cpu_times()[:2]) - cpu0, 4)
            response.raise_for_status()
            families, lines = series_of(response.text)
            row.update(series=sum(families.values()), lines=lines, families=families)
        except requests.RequestException as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:200]
        try:
            row["rss_mb"] = round(self.process.memory_info().rss / 2**20, 1)
        except psutil.Error as exc:
            row["error"] = f"the exporter is gone: {exc}"
        return row


# ---- load and churn ---------------------------------------------------------------------------------------
class SteadyWriter(threading.Thread):
    """One transactional id committing a small transaction on soak-base every 2 s, with its group's offsets
    (STEADY_GROUP: a processor's TxnOffsetCommit, so __consumer_offsets exists and holds producer state from the
    baseline on, as on any cluster with exactly-once processors); it starts again after an error (its coordinator
    killed: the churn's)."""

    def __init__(self, conn: ConnectionSettings):
        super().__init__(daemon=True, name="steady")
        self.conn, self.stop, self.commits, self.errors = conn, threading.Event(), 0, 0

    def run(self) -> None:
        producer = None
        group = Consumer(self.conn.confluent(**{"group.id": STEADY_GROUP, "log_level": 2}))
        while not self.stop.wait(2.0):
            try:
                if producer is None:
                    producer = Producer(self.conn.confluent(**{"transactional.id": STEADY_ID, "log_level": 2}))
                    producer.init_transactions(30)
                producer.begin_transaction()
                for p in range(12):
                    producer.produce(BASE_TOPIC, b"x" * 50, partition=p)
                producer.send_offsets_to_transaction([TopicPartition(BASE_TOPIC, p, self.commits + 1)
                                                      for p in range(12)], group.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                self.commits += 1
            except Exception:  # noqa: BLE001 - a coordinator killed by the churn: a new producer next time
                self.errors += 1
                producer = None


class Churn(threading.Thread):
    """Rounds of churn until stopped (module docstring); then everything it made is deleted."""

    def __init__(self, cluster: LocalCluster, conn: ConnectionSettings, journal: Journal, args: argparse.Namespace):
        super().__init__(daemon=True, name="churn")
        self.cluster, self.conn, self.journal, self.args = cluster, conn, journal, args
        self.stop = threading.Event()
        self.admin = AdminClient(conn.confluent(**{"log_level": 2}))
        self.live: list[tuple[int, list[str], str]] = []          # (round, topics, group) not deleted yet
        self.failures: list[str] = []

    def run(self) -> None:
        began, n = time.monotonic(), 0
        last_roll, last_kill = began, began - 600                 # the first kill at minute 10
        while not self.stop.is_set():
            try:
                self.round(n)
                if n % 5 == 4:
                    self.storm()
                if time.monotonic() - last_kill >= 1200:
                    self.kill_coordinator()
                    last_kill = time.monotonic()
                if time.monotonic() - last_roll >= 1800:
                    self.roll()
                    last_roll = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a churn step's failure is recorded, the soak goes on
                self.failures.append(f"round {n}: {type(exc).__name__}: {exc}"[:300])
                self.journal.event("churn-failure", error=self.failures[-1])
            n += 1
            self.stop.wait(max(0.0, began + n * self.args.round_seconds - time.monotonic()))

    def round(self, n: int) -> None:
        topics = [f"{CHURN_PREFIX}-{n:05d}-{i}" for i in range(5)]
        for topic in topics:
            ensure_topic(self.conn, topic, partitions=6)
        group = f"soak-group-{n:05d}"
        self.write(n, topics, group)
        self.live.append((n, topics, group))
        gone = [entry for entry in self.live if entry[0] <= n - KEEP_ROUNDS]
        self.live = [entry for entry in self.live if entry[0] > n - KEEP_ROUNDS]
        self.delete([t for _, ts, _ in gone for t in ts], [g for _, _, g in gone])
        self.journal.event("round", round=n, created=len(topics), deleted=sum(len(ts) for _, ts, _ in gone))

    def write(self, n: int, topics: list[str], group: str) -> None:
        """Three fresh transactional ids: two commit (one carrying the group's offsets), one leaves its transaction
        open to be aborted at its timeout."""
        for i in range(3):
            producer = Producer(self.conn.confluent(**{"transactional.id": f"soak-{n:05d}-{i}", "log_level": 2,
                                                       "transaction.timeout.ms": 10000}))
            producer.init_transactions(30)
            producer.begin_transaction()
            for topic in topics:
                for p in range(6):
                    producer.produce(topic, b"y" * 20, partition=p)
            if i == 1:
                consumer = Consumer(self.conn.confluent(**{"group.id": group, "log_level": 2}))
                producer.send_offsets_to_transaction([TopicPartition(topics[0], p, 1) for p in range(6)],
                                                     consumer.consumer_group_metadata(), 30)
                consumer.close()
            if i < 2:
                producer.commit_transaction(30)
            else:
                producer.flush(30)            # left open: its coordinator aborts it at the timeout
            del producer

    def delete(self, topics: list[str], groups: list[str]) -> None:
        for futures in (self.admin.delete_topics(topics) if topics else {},
                        self.admin.delete_consumer_groups(groups) if groups else {}):
            for what, future in futures.items():
                try:
                    future.result(30)
                except Exception as exc:  # noqa: BLE001 - e.g. a group never created: recorded
                    self.failures.append(f"delete {what}: {exc}"[:200])

    def storm(self) -> None:
        result = flood_producer_ids(self.conn, BASE_TOPIC, list(range(12)), self.args.storm)
        self.journal.event("storm", producer_ids=result.count, seconds=round(result.elapsed_s, 1))

    def kill_coordinator(self) -> None:
        with ClusterAdmin(self.conn) as admin:
            node = admin.coordinator_of(STEADY_ID)
        self.cluster.kill_node(node)
        self.journal.event("coordinator-killed", node=node)
        self.stop.wait(15)
        self.cluster.start_node(node)
        self.cluster.wait_serving(node, 120)
        self.journal.event("coordinator-back", node=node)

    def roll(self) -> None:
        self.journal.event("rolling-restart")
        for node in sorted(self.cluster.registered_brokers()):
            self.cluster.restart_node(node, clean=True)
            self.cluster.wait_serving(node, 120)
        self.journal.event("rolling-restart-done")

    def clear(self) -> None:
        """Every churn topic and group still there, deleted."""
        self.delete([t for _, ts, _ in self.live for t in ts], [g for _, _, g in self.live])
        self.live = []


# ---- figures ----------------------------------------------------------------------------------------------
def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return None if var == 0 else round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var * 3600, 2)


def figures(journal: Journal) -> dict:
    rows = journal.samples
    for row in rows:
        row["phase"] = journal.phase_at(row["t_s"])
    churn_start = next((e["t_s"] for e in journal.events if e["kind"] == "churn-start"), None)
    rss_points = [(r["t_s"], r["rss_mb"]) for r in rows if "rss_mb" in r and churn_start is not None
                  and r["t_s"] >= churn_start + 900]
    late = [r for r in rows if r.get("error") or r.get("scrape_s", 0) > SCRAPE_DEADLINE_S]
    baseline = [r for r in rows if r["phase"] == "baseline" and "families" in r]
    settled = [r for r in rows if r["phase"] == "settle" and "families" in r][-4:]     # the last minute
    base_families = baseline[-1]["families"] if baseline else {}
    end_families = settled[-1]["families"] if settled else {}
    above = {f: {"baseline": base_families.get(f, 0), "end": n} for f, n in end_families.items()
             if n > base_families.get(f, 0)}
    slope = slope_per_hour(rss_points)
    return {
        "rss_mb": {phase: stats([r["rss_mb"] for r in rows if r["phase"] == phase and "rss_mb" in r])
                   for phase in ("baseline", "churn", "settle")},
        "rss_slope_mb_per_hour_after_15_min": slope,
        "scrape_s": {phase: stats([r["scrape_s"] for r in rows if r["phase"] == phase and "scrape_s" in r])
                     for phase in ("baseline", "churn", "settle")},
        "late_or_failed_scrapes": len(late), "late_examples": late[:5],
        "series": {"baseline": sum(base_families.values()) if baseline else None,
                   "churn_max": max((r["series"] for r in rows if r["phase"] == "churn" and "series" in r),
                                    default=None),
                   "end": sum(end_families.values()) if settled else None, "families_above_baseline": above},
        "goals": {"rss_slope": {"goal": GOALS["rss_slope_mb_per_hour"], "met": slope is not None
                                and slope <= GOALS["rss_slope_mb_per_hour"]},
                  "no_late_scrape": {"goal": 0, "met": not late},
                  "series_back_to_baseline": {"met": bool(settled and baseline) and not above}},
    }


def picture(journal: Journal, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = journal.samples
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    panels = (("rss_mb", "exporter RSS (MiB)"), ("scrape_s", "scrape wall (s)"), ("series", "our series"))
    colours = {"round": None, "storm": "#d29922", "coordinator-killed": "#cf222e", "rolling-restart": "#8250df",
               "churn-start": "#1a7f37", "churn-stop": "#1a7f37", "churn-failure": "#cf222e"}
    for ax, (key, title) in zip(axes, panels):
        ax.plot([r["t_s"] / 60 for r in rows if key in r], [r[key] for r in rows if key in r], lw=1)
        ax.set_ylabel(title, fontsize=8)
        for e in journal.events:
            if colours.get(e["kind"]):
                ax.axvline(e["t_s"] / 60, color=colours[e["kind"]], lw=0.8, alpha=0.6)
    axes[1].axhline(SCRAPE_DEADLINE_S, color="#cf222e", ls="--", lw=0.8)
    axes[-1].set_xlabel("minutes (green: churn start and stop; yellow: storms; red: coordinator killed; purple: "
                        "rolling restarts)", fontsize=8)
    fig.suptitle("txnlab exporter soak", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ---- the run ----------------------------------------------------------------------------------------------
def soak_cluster(args: argparse.Namespace) -> LocalCluster:
    expiry_ms = str(args.expiry_seconds * 1000)
    return LocalCluster.load(STATE_DIR, base_port=args.base_port, broker_overrides={
        "transactional.id.expiration.ms": expiry_ms, "producer.id.expiration.ms": expiry_ms,
        "producer.id.expiration.check.interval.ms": "10000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "10000"})


def run(args: argparse.Namespace, result: dict, journal: Journal) -> None:
    cluster = soak_cluster(args)
    cluster.down(purge=True, progress=say)
    seed_cluster_id(cluster.layout.state_dir)
    sup = Supervisor(STATE_DIR / "exporter-pids")
    steady = churn = sampler = None
    try:
        cluster.up(progress=say, timeout=300)
        conn = cluster.connection()
        ensure_topic(conn, BASE_TOPIC, partitions=12)
        steady = SteadyWriter(conn)
        steady.start()
        port = args.base_port + 820
        log = REPO_ROOT / "runs" / f"exporter-soak-{time.strftime('%Y%m%d-%H%M%S')}.exporter.log"
        sup.start("exporter", [sys.executable, "-m", "exporter", "--bootstrap", conn.bootstrap, "--port", str(port)],
                  log, cwd=REPO_ROOT)
        process = sup.process("exporter")
        if process is None:
            raise RuntimeError(f"the exporter exited at start: see {log}")
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: requests.get(url + "/ready", timeout=10).status_code == 200, 180,
                   "the exporter's first background cycle", interval=2.0, ignore=(requests.RequestException,))
        sampler = Sampler(url + "/metrics", process, journal, args.sample_seconds)
        sampler.start()
        time.sleep(args.baseline_minutes * 60)
        journal.event("churn-start")
        churn = Churn(cluster, conn, journal, args)
        churn.start()
        progress_until(time.monotonic() + args.hours * 3600, journal)
        churn.stop.set()
        churn.join(600)
        churn.clear()
        journal.event("churn-stop", failures=len(churn.failures))
        progress_until(time.monotonic() + args.settle_minutes * 60, journal)
        result["churn_failures"] = churn.failures
        result["steady"] = {"commits": steady.commits, "errors": steady.errors}
    finally:
        for thread in (sampler, churn, steady):
            if thread is not None:
                thread.stop.set()
        sup.stop("exporter", timeout=15)
        if args.keep:
            say(f"cluster kept running: {STATE_DIR}")
        else:
            cluster.down(purge=True, progress=say)


def progress_until(deadline: float, journal: Journal) -> None:
    """Wait until the deadline, saying every minute how the exporter is doing."""
    while time.monotonic() < deadline:
        time.sleep(min(60.0, max(0.0, deadline - time.monotonic())))
        last = journal.samples[-1] if journal.samples else {}
        say(f"{last.get('t_s', 0) / 60:.0f} min: RSS {last.get('rss_mb')} MiB, scrape {last.get('scrape_s')} s, "
            f"series {last.get('series')}, {len(journal.events)} events" + (f", {last['error']}" if 'error' in last
                                                                              else ""))


def main() -> None:
    args = parse_args()
    exit_on_signals()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = REPO_ROOT / "runs" / f"exporter-soak-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result: dict = {"command": ".venv/bin/python bench/exporter_soak.py " + " ".join(sys.argv[1:]),
                    "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "source": source_state(None),
                    "machine_start": machine(), "args": vars(args)}
    journal = Journal()
    try:
        with noting_end(result):
            run(args, result, journal)
    finally:
        result["figures"] = figures(journal)
        result["events"], result["samples"] = journal.events, journal.samples
        if journal.samples:
            result["picture"] = str(picture(journal, path.with_suffix(".png")))
        path.write_text(json.dumps(result, indent=2))
        say(f"results in {path}: {json.dumps(result['figures']['goals'])}")


if __name__ == "__main__":
    main()
