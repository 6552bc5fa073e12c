"""The Prometheus side of a run: the timelines a report draws, captured while the cluster is still up.

Owns: the timeline catalog (what each line means and its PromQL, scoped to the run's topics by its tag),
`capture` (query_range over the run's window, written to <RUN_DIR>/prometheus.json so `txnlab report`
rebuilds a report after the cluster and its Prometheus are gone), and `alert_series` (Prometheus' own
ALERTS series: one per alert and state, 1 while it holds).
Must not: draw (plots.py) or judge (detection.py); a query that fails is recorded with its error, the
capture goes on.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from cluster.lab.prometheus import Prometheus, PrometheusError

FILE = "prometheus.json"


@dataclass(frozen=True)
class Timeline:
    key: str
    title: str
    unit: str
    query: str            # {tag} is the run's tag: its topics are "<tag>-...", Kafka Streams' own "<tag>.<app>-..."
    workload: str | None = None     # drawn only for runs of this workload (report/build.py)


TOPICS = 'topic=~"{tag}[-.].*"'
TIMELINES = (
    Timeline("lso_lag", "LSO lag (offsets read_committed cannot read yet)", "offsets",
             f"sum(kafkatxn_partition_lso_lag{{{TOPICS}}})"),
    Timeline("open_transactions", "Open transactions on the run's partitions", "transactions",
             f"sum(kafkatxn_topic_open_transactions{{{TOPICS}}})"),
    Timeline("hanging_transactions", "Hanging transactions on the run's partitions (confirmed)", "transactions",
             f"sum(kafkatxn_hanging_transactions{{{TOPICS}}}) or (sum(kafkatxn_up) * 0)"),
    Timeline("active_producers", "Active producer ids (all brokers)", "producer ids",
             "sum(kafkatxn_broker_active_producers)"),
    Timeline("throughput", "Workload throughput (records written to the run's topics)", "records/s",
             f"sum(rate(kafkatxn_partition_high_watermark{{{TOPICS}}}[20s]))"),
    # chaos/workloads/plans.py: the Streams workload's stateless output topic gets one record per input processed
    Timeline("streams_throughput", "Kafka Streams throughput (records its stateless step wrote, aborted ones "
             "included)", "records/s", 'sum(rate(kafkatxn_partition_high_watermark{topic="{tag}-sout"}[20s]))',
             workload="streams"),
    # chaos/workloads/plans.py: the Flink job's stateless output topic, one record per input (written when checkpoints commit)
    Timeline("flink_throughput", "Flink job throughput (records its sink wrote, aborted transactions included)",
             "records/s", 'sum(rate(kafkatxn_partition_high_watermark{topic="{tag}-fout"}[20s]))', workload="flink"),
)
ALERTS_QUERY = "ALERTS"


def query_range(prometheus: Prometheus, query: str, start: float, end: float, step: float) -> list[dict]:
    """[{"labels": {...}, "points": [[unix seconds, value], ...]}]; raises PrometheusError."""
    return [{"labels": {k: v for k, v in s.labels.items() if k != "__name__"}, "points": [list(p) for p in s.points]}
            for s in prometheus.query_range(query, start, end, step)]


def capture(prometheus_url: str, run_dir: Path, tag: str, start: float, end: float,
            step: float = 2.0, settle_s: float = 0.0) -> dict:
    """Every timeline and the alerts over [start, end] into <run_dir>/prometheus.json; returns what was written.
    settle_s waits for the last scrape and rule evaluation of the window to land first."""
    if settle_s:
        time.sleep(settle_s)
    data: dict = {"prometheus": prometheus_url, "start": start, "end": end, "step": step, "tag": tag,
                  "timelines": {}, "alerts": [], "errors": {}}
    prometheus = Prometheus(prometheus_url, timeout=15.0)
    for timeline in TIMELINES:
        query = timeline.query.replace("{tag}", tag)
        try:
            data["timelines"][timeline.key] = {"query": query, "series": query_range(prometheus, query, start,
                                                                                     end, step)}
        except PrometheusError as exc:   # recorded; the report says the line is missing and why
            data["errors"][timeline.key] = f"{type(exc).__name__}: {exc}"
    try:
        data["alerts"] = alert_series(query_range(prometheus, ALERTS_QUERY, start, end, min(step, 1.0)))
    except PrometheusError as exc:
        data["errors"]["alerts"] = f"{type(exc).__name__}: {exc}"
    Path(run_dir, FILE).write_text(json.dumps(data, indent=1) + "\n")
    return data


def alert_series(series: list[dict]) -> list[dict]:
    """ALERTS series -> [{"alert", "state", "labels", "points"}] (points: times the state held)."""
    out = []
    for s in series:
        labels = dict(s["labels"])
        name, state = labels.pop("alertname", "?"), labels.pop("alertstate", "?")
        out.append({"alert": name, "state": state, "labels": labels,
                    "points": [p for p in s["points"] if p[1] > 0]})
    return out


def load(run_dir: Path) -> dict | None:
    path = Path(run_dir, FILE)
    return json.loads(path.read_text()) if path.exists() else None
