"""Benchmark (issue 13): the rendering of our exporter's /metrics only: no Kafka, no network, no HTTP.

Builds results shaped like bench/exporter_scrape.py's cluster at --partitions partitions (topics of
--per-topic partitions led by 3 brokers, 5 producer ids per partition with an open transaction on every
50th, 50 transactional ids, --groups consumer groups committed on the first 10 topics, readable lag for
them) and times, median of --rounds, in this process:
  before: prometheus_client's generate_latest over a registry holding the TxnCollector (Metric objects);
  after, offsets new: the exporter's render of one scrape where the offsets view is new (every scrape
         once offsets_cache_seconds passed) and the background results are the ones rendered before;
  after, background new: a new Background too (once per collection interval);
  after, cached: the same offsets view and Background (scrapes within offsets_cache_seconds).
The before and after bodies are checked to parse to the same families first.
Owns: nothing beyond this benchmark. Must not: touch a cluster.
Usage: .venv/bin/python bench/exporter_render.py [--partitions 20000] [--rounds 7]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from exporter.collectors import TxnCollector  # noqa: E402
from exporter.config import load_config  # noqa: E402
from exporter.kafka_access import (ConfigsResult, FeaturesResult, GroupOffsetsResult, OffsetsResult,  # noqa: E402
                                   ProducerEntry, ProducersResult, ReadableLagResult, TransactionDescription,
                                   TransactionListing, TransactionsResult)
from exporter.readable_lag import GroupReadable  # noqa: E402
from exporter.service import COLLECTORS, Background, CollectorHealth, OffsetsView  # noqa: E402

NOW = 1_800_000_000.0


class FixedService:
    """What TxnCollector reads of ExporterService, with results set by hand."""

    def __init__(self, view: OffsetsView, background: Background):
        self.config = load_config(env={}, flags={})
        self.health = {name: CollectorHealth(up=True, duration_seconds=0.25, last_success=NOW) for name in COLLECTORS}
        self.view, self.background = view, background

    def offsets(self) -> OffsetsView:
        return self.view

    def clock(self) -> float:
        return NOW


def offsets_view(partitions: list, seed: int = 0) -> OffsetsView:
    hwm = {tp: 1_000_000 + 37 * i + seed for i, tp in enumerate(partitions)}
    lso = {tp: v - (3 if i % 50 == 0 else 0) for i, (tp, v) in enumerate(hwm.items())}
    leaders = {tp: 1 + i % 3 for i, tp in enumerate(partitions)}
    return OffsetsView(OffsetsResult(lso, hwm, leaders), {tp: NOW - i % 600 for i, tp in enumerate(partitions)},
                       reachable=True, broker_last_good={1: NOW, 2: NOW, 3: NOW - 4})


def background(partitions: list, per_topic: int, groups: int) -> Background:
    producers = {tp: [ProducerEntry(i * 5 + k, 0, 10, int((NOW - k * 60 - i % 300) * 1000), 4,
                                    1_000_000 if k == 0 and i % 50 == 0 else -1) for k in range(5)]
                 for i, tp in enumerate(partitions)}
    leaders = {tp: 1 + i % 3 for i, tp in enumerate(partitions)}
    listings = [TransactionListing(f"bench-txn-{i}", 900_000 + i, "Ongoing" if i % 4 else "Empty", 1 + i % 3)
                for i in range(50)]
    descriptions = {t.transactional_id: TransactionDescription(t.transactional_id, t.coordinator, t.state,
                                                                 t.producer_id, 0, 60_000,
                                                                 int((NOW - 5) * 1000) if t.state == "Ongoing" else -1,
                                                                 frozenset()) for t in listings}
    watched = partitions[:10 * per_topic]
    committed = {f"bench-group-{g}": {tp: 1_000_000 for tp in watched} for g in range(groups)}
    readable = GroupReadable(lag={g: {tp: 2 for tp in tps} for g, tps in committed.items()},
                             estimated={g: set(list(tps)[:5]) for g, tps in committed.items()},
                             unknown={g: set() for g in committed})
    configs = {b: {"transaction.max.timeout.ms": "900000", "producer.id.expiration.ms": "86400000",
                   "transactional.id.expiration.ms": "604800000",
                   "transaction.partition.verification.enable": "false"} for b in (1, 2, 3)}
    return Background(producers=ProducersResult(producers, leaders, len(partitions)),
                      transactions=TransactionsResult(listings=listings, descriptions=descriptions),
                      configs=ConfigsResult(configs), groups=GroupOffsetsResult(committed),
                      features=FeaturesResult({"transaction.version": 1, "kraft.version": 1}),
                      readable_lag=ReadableLagResult(readable, fetch_requests=12, fetched_bytes=1 << 20),
                      collected_at=NOW - 3)


def median_seconds(call, rounds: int, before_each=lambda: None) -> float:
    times = []
    for _ in range(rounds):
        before_each()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def families(text: bytes) -> dict:
    return {f.name: sorted((tuple(sorted(s.labels.items())), s.value) for s in f.samples)
            for f in text_string_to_metric_families(text.decode())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=20_000)
    p.add_argument("--per-topic", type=int, default=100)
    p.add_argument("--groups", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    partitions = [(f"bench-scrape-{t:04d}", n) for t in range(args.partitions // args.per_topic)
                  for n in range(args.per_topic)]
    service = FixedService(offsets_view(partitions), background(partitions, args.per_topic, args.groups))
    collector = TxnCollector(service, "bench")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    old = generate_latest(registry)
    samples = old.count(b"\n") - 2 * old.count(b"# TYPE")
    print(f"{args.partitions} partitions: {samples} samples, {len(old) / 1e6:.1f} MB", file=sys.stderr)
    rows = [("before: generate_latest", median_seconds(lambda: generate_latest(registry), args.rounds))]
    if hasattr(collector, "exposition"):
        assert families(collector.exposition()) == families(old), "the two renderings differ"
        def new_view():
            service.view = offsets_view(partitions, seed=int(time.monotonic_ns() % 1000))

        def new_view_and_background():
            new_view()
            bg = service.background          # every result replaced, as after a cycle where all collections succeeded
            service.background = dataclasses.replace(bg, **{f.name: dataclasses.replace(getattr(bg, f.name))
                                                            for f in dataclasses.fields(bg)
                                                            if dataclasses.is_dataclass(getattr(bg, f.name))})

        rows += [("after: offsets new", median_seconds(collector.exposition, args.rounds, new_view)),
                 ("after: offsets and background new",
                  median_seconds(collector.exposition, args.rounds, new_view_and_background)),
                 ("after: cached", median_seconds(collector.exposition, args.rounds))]
    for name, seconds in rows:
        print(f"{name:36s} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
