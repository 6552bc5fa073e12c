"""The exporter's service: when the access layer is called, and what is remembered between calls.

Owns: the scrape-time offsets collection (single flight: concurrent scrapes share one in-flight
collection; a result younger than collection.offsets_cache_seconds is reused; one deadline,
collection.scrape_timeout_seconds, per collection; per broker, when its offsets were last good), the
background loop that refreshes the expensive cached collections (producer state, coordinators, broker
configs, consumer-group offsets) every interval and survives any exception, per-collector health, the
exporter's own error counters, and the three trackers (LSO advance, hanging confirmation, groups whose
exactly-once commits keep failing).
Must not: build metric families (collectors.py does) or send requests itself (kafka_access.py does).
A failed collection never raises out of here: it is recorded in health and errors, and the last
good cached result keeps being served.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter

from exporter.config import ExporterConfig
from exporter.group_commits import GroupCommits, GroupCommitTracker, GroupSeen
from exporter.hanging_verdicts import (ID_ACL, Evidence, HangingTracker, OpenTransaction, Verdict, classify, evidence_of, late,
                              open_transactions)
from exporter.kafka_access import (ConfigsResult, FeaturesResult, GroupOffsetsResult, ItemError, KafkaAccess,
                                   KafkaUnavailable, OffsetsResult, Partition, ProducersResult, ReadableLagResult,
                                   TransactionsResult, error_name)

log = logging.getLogger("txnlab.exporter")
COLLECTORS = ("offsets", "producers", "transactions", "configs", "groups", "readable_lag", "features", "background")


@dataclass
class CollectorHealth:
    up: bool = False
    duration_seconds: float = 0.0
    last_success: float | None = None


@dataclass
class OffsetsView:
    """One scrape's offsets plus when each partition's LSO last advanced, and per broker (every leader
    of the collection) when it last answered ListOffsets: a frozen broker is left out of the data and
    flagged here, with how old the last good offsets it served are."""
    result: OffsetsResult
    lso_last_advance: dict[Partition, float]
    reachable: bool
    broker_last_good: dict[int, float | None] = field(default_factory=dict)
    collected_at: float = 0.0                # time.monotonic() of the collection (for reuse)


@dataclass
class Background:
    """The cached results of the last background collections (each kept until replaced by a success)."""
    producers: ProducersResult | None = None
    transactions: TransactionsResult | None = None
    configs: ConfigsResult | None = None
    groups: GroupOffsetsResult | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    hanging: list[Verdict] = field(default_factory=list)
    late: list[OpenTransaction] = field(default_factory=list)
    evidence: Evidence | None = None
    features: FeaturesResult | None = None
    readable_lag: ReadableLagResult | None = None
    group_commits: dict[str, GroupCommits] = field(default_factory=dict)
    collected_at: float | None = None


class LsoAdvanceTracker:
    """When each partition's LSO last moved, or was seen with no lag (nothing to wait for)."""

    def __init__(self) -> None:
        self._seen: dict[Partition, tuple[int, float]] = {}

    def update(self, lso: dict[Partition, int], hwm: dict[Partition, int], now: float,
               known: set[Partition] | None = None) -> dict[Partition, float]:
        """`known`: every partition that still exists (the metadata's); the others are forgotten."""
        if known is not None:
            self._seen = {tp: seen for tp, seen in self._seen.items() if tp in known}
        for tp, offset in lso.items():
            previous = self._seen.get(tp)
            if previous is None or previous[0] != offset or hwm.get(tp, offset) <= offset:
                self._seen[tp] = (offset, now)
        return {tp: self._seen[tp][1] for tp in lso}


def broker_failed(errors: list[ItemError]) -> bool:
    return any(e.whole_request for e in errors)


def group_evidence(groups: GroupOffsetsResult, readable: ReadableLagResult | None) -> dict[str, GroupSeen]:
    """Per group, one collection's evidence for exporter/group_commits.py: the readable lag of this collection
    only (None when it failed or is off), exact values only (an upper bound proves no record)."""
    seen = {}
    for group, committed in groups.committed.items():
        exact, complete = None, False
        if readable is not None and group in readable.groups.lag:
            inexact = readable.groups.estimated.get(group, set()) | readable.groups.unknown.get(group, set())
            exact = {tp: v for tp, v in readable.groups.lag[group].items() if tp not in inexact}
            complete = not inexact and set(committed) <= set(exact)
        seen[group] = GroupSeen(committed, exact, complete, groups.pending.get(group), groups.states.get(group))
    return seen


class ExporterService:
    """Collections for one cluster; start() runs the background loop, stop() ends it."""

    def __init__(self, access: KafkaAccess, config: ExporterConfig, registry: CollectorRegistry,
                 clock: Callable[[], float] = time.time):
        self.access = access
        self.config = config
        self.clock = clock
        self.health = {name: CollectorHealth() for name in COLLECTORS}
        self.background = Background()
        self.errors = Counter("kafkatxn_collector_errors", "Failed items (brokers, partitions, ids, groups) "
                              "per collector and error, since the exporter started", ["collector", "error"],
                              registry=registry)
        self._lso = LsoAdvanceTracker()
        self._hanging = HangingTracker()
        self._group_commits = GroupCommitTracker()
        self._broker_last_good: dict[int, float] = {}
        self._last_view: OffsetsView | None = None
        self._acl_warned = False
        self._unavailable_said: str | None = None    # why Kafka was unreachable, as last logged (once per change)
        self._lock = threading.Lock()
        self._inflight: Future | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first_cycle = threading.Event()
        # run after every background cycle, in order (app.py: the collector's pre-rendering, a malloc trim)
        self.after_cycle: list[Callable[[], None]] = []

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="txnlab-exporter-background", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.access.close()

    def wait_first_cycle(self, timeout: float) -> bool:
        return self._first_cycle.wait(timeout)

    @property
    def ready(self) -> bool:
        """Ready once one background cycle ran and the cluster answered at least one collection."""
        return self._first_cycle.is_set() and any(h.last_success for h in self.health.values())

    def _loop(self) -> None:
        interval = self.config.collection.interval_seconds
        self.offsets()            # opens the scrape lane's connections: a first scrape's deadline is for offsets
        while not self._stop.is_set():
            started = time.monotonic()
            self._timed("background", self.collect_background)     # any exception: logged, counted, loop goes on
            self._first_cycle.set()
            for call in self.after_cycle:
                call()
            self._stop.wait(max(0.0, interval - (time.monotonic() - started)))

    # ---- bookkeeping ----------------------------------------------------------------------------
    def _timed(self, collector: str, call: Callable[[], Any]) -> Any:
        """Run one collection; record duration, up, errors. Returns None when it failed outright."""
        started = time.monotonic()
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - the exporter keeps serving through any failure
            log.warning("%s collection failed: %s", collector, error_name(exc))
            if isinstance(exc, KafkaUnavailable) and str(exc) != self._unavailable_said:
                self._unavailable_said = str(exc)     # the diagnosis, once per change (not every collection)
                log.error("cannot use Kafka: %s", exc)
            self.errors.labels(collector, error_name(exc)).inc()
            self._record(collector, started, ok=False)
            return None
        item_errors = getattr(result, "errors", [])
        for err in item_errors:
            self.errors.labels(collector, err.error).inc()
        self._record(collector, started, ok=not broker_failed(item_errors))
        return result

    def _record(self, collector: str, started: float, ok: bool) -> None:
        health = self.health[collector]
        health.duration_seconds = time.monotonic() - started
        health.up = ok
        if ok:
            health.last_success = self.clock()

    # ---- scrape time: offsets, single flight -------------------------------------------------------
    def offsets(self) -> OffsetsView:
        with self._lock:
            recent = self._last_view
            if recent and time.monotonic() - recent.collected_at < self.config.collection.offsets_cache_seconds:
                return recent
            leader = self._inflight is None
            if leader:
                self._inflight = Future()
            future = self._inflight
            assert future is not None
        if leader:
            try:
                future.set_result(self._collect_offsets())
            finally:
                with self._lock:
                    self._inflight = None
        return future.result()

    def _collect_offsets(self) -> OffsetsView:
        result = self._timed("offsets", lambda: self.access.offsets(self.config.collection.scrape_timeout_seconds))
        if result is None:
            view = OffsetsView(OffsetsResult(), {}, reachable=False, collected_at=time.monotonic())
        else:
            now = self.clock()
            advance = self._lso.update(result.last_stable, result.high_watermark, now, set(result.leaders))
            view = OffsetsView(result, advance, reachable=True, broker_last_good=self._brokers_seen(result, now),
                               collected_at=time.monotonic())
        self._last_view = view
        return view

    def _brokers_seen(self, result: OffsetsResult, now: float) -> dict[int, float | None]:
        """Per leader of this collection: now if it answered, else when it last did (None: never)."""
        leaders = {b for b in result.leaders.values() if b >= 0}
        failed = result.brokers_failed
        for broker in leaders - failed:
            self._broker_last_good[broker] = now
        return {b: self._broker_last_good.get(b) for b in sorted(leaders)}

    # ---- background ---------------------------------------------------------------------------------
    def collect_background(self) -> Background:
        """One cycle: configs, producer state, coordinators, groups and their readable lag, finalized
        features; then classify open transactions."""
        bg = self.background
        try:
            self.access.metadata(refresh=True)       # new topics and moved leaders, once per cycle
        except Exception:  # noqa: BLE001 - each collection below records the failure itself
            pass
        configs = self._timed("configs", self.access.broker_configs)
        producers = self._timed("producers", self.access.producers)
        transactions = self._timed("transactions", self.access.transactions)
        groups = self._timed("groups", self._group_offsets) if self.config.collection.consumer_groups else None
        new = dataclasses.replace(bg, producers=producers or bg.producers, transactions=transactions or bg.transactions,
                                  configs=configs or bg.configs, groups=groups or bg.groups, collected_at=self.clock())
        new.features = self._timed("features", self.access.finalized_features) or bg.features
        if groups is not None:
            readable = None
            if self.config.collection.readable_lag_max_bytes:     # against the LSO of now
                readable = self._timed("readable_lag", lambda: self.access.readable_lag(
                    groups.committed, self.offsets().result.last_stable,
                    self.config.collection.readable_lag_max_bytes))
            new.readable_lag = readable or bg.readable_lag
            new.group_commits = self._group_commits.update(group_evidence(groups, readable), self.clock(),
                                                           self.config.collection.group_commit_stall_seconds)
        if producers is not None and transactions is not None:
            self._classify(new, producers, transactions)
        self.background = new
        if self._hanging.unconfirmed and self.config.collection.hanging_confirm_seconds > 0:
            self._recheck_suspects()
        return self.background

    def _recheck_suspects(self) -> None:
        """A second look at just the suspect partitions, hanging_confirm_seconds later."""
        if self._stop.wait(self.config.collection.hanging_confirm_seconds):
            return
        partitions = {(v.txn.topic, v.txn.partition) for v in self._hanging.unconfirmed}
        producers = self._timed("producers", lambda: self.access.producers(partitions))
        transactions = self._timed("transactions", self.access.transactions)
        if producers is None or transactions is None:
            return
        bg = self.background
        verdicts = self._verdicts(producers, transactions, bg.configs)
        self.background = dataclasses.replace(
            bg, hanging=self._hanging.update(verdicts, partitions, scanned=set(producers.producers)))

    def _group_offsets(self) -> GroupOffsetsResult:
        return self.access.group_offsets(self.config.filters.group_allowed)

    def _verdicts(self, producers: ProducersResult, transactions: TransactionsResult,
                  configs: ConfigsResult | None) -> list[Verdict]:
        return classify(open_transactions(producers.producers), transactions,
                        self._max_timeouts(producers.leaders, configs), int(self.clock() * 1000))

    def _classify(self, bg: Background, producers: ProducersResult, transactions: TransactionsResult) -> None:
        bg.verdicts = self._verdicts(producers, transactions, bg.configs)
        bg.hanging = self._hanging.update(bg.verdicts, scanned=set(producers.producers))
        bg.late = late(open_transactions(producers.producers), self._max_timeouts(producers.leaders, bg.configs),
                       int(self.clock() * 1000))
        bg.evidence = evidence_of(transactions)
        self._say_missing_acl(bg.evidence)

    def _say_missing_acl(self, evidence: Evidence) -> None:
        """One log line when the principal may not describe every transactional id (again after it could)."""
        missing = ID_ACL in evidence.global_gaps
        if missing and not self._acl_warned:
            principal = self.config.kafka.sasl_username or "<the exporter's principal>"
            log.warning("the exporter may not DESCRIBE every TransactionalId, so ListTransactions leaves some out "
                        "and open transactions without a visible transactional id stay unresolved; grant it: "
                        "kafka-acls.sh --add --allow-principal User:%s --operation Describe "
                        "--transactional-id '*' (docs/exporter.md)", principal)
        self._acl_warned = missing

    @staticmethod
    def _max_timeouts(leaders: dict[Partition, int], configs: ConfigsResult | None) -> dict[Partition, int]:
        per_broker = {b: int(c["transaction.max.timeout.ms"]) for b, c in (configs.configs if configs else {}).items()
                      if "transaction.max.timeout.ms" in c}
        return {tp: per_broker[b] for tp, b in leaders.items() if b in per_broker}
