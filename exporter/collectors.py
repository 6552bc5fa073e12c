"""Prometheus collectors: map the service's results to `kafkatxn_*` metric families for each scrape (each
part built from a cached result is rendered once per result: exposition.py).

Owns: the metric catalog (names, HELP, labels; docs/exporter.md lists them; the names are a contract
for dashboards and alerts: extend, never rename), cardinality controls (partition or topic
granularity, caps), the rule that a roll-up is not emitted when one of its parts is missing, and
which results each part of the families is built from (what its rendering is cached on).
Must not: call Kafka or the access layer; every value comes from ExporterService.
"""
from __future__ import annotations

import logging
import platform
from collections import defaultdict
from typing import Iterable, Iterator

from prometheus_client.core import Metric

from exporter.exposition import Family, Part, PartCache, SeriesCounts, series_counts
from exporter.group_commits import GroupCommits
from exporter.hanging_verdicts import EVIDENCE_REASONS, Evidence, OpenTransaction, Verdict
from exporter.kafka_access import (ConfigsResult, FeaturesResult, GroupOffsetsResult, Partition, ProducersResult,
                                   ReadableLagResult, TransactionsResult)
from exporter.service import COLLECTORS, Background, CollectorHealth, ExporterService, OffsetsView

P = "kafkatxn_"
CACHED = " (cached: refreshed by the background collection every collection.interval_seconds)"
TP = ["topic", "partition"]
NEAR_TIMEOUT = 0.5      # an Ongoing transaction older than this share of its own timeout: abandoned or too slow
PREPARE_STATES = ("PrepareCommit", "PrepareAbort")     # the end decided, its markers being written
PRODUCER_EPOCH_MAX = 32767   # Short.MAX_VALUE: the producer epoch is an int16; at this value the producer id rotates
EPOCH_HELP = ("the epoch fences a producer id's earlier incarnations (zombies); an int16, it is exhausted at "
              f"{PRODUCER_EPOCH_MAX} and the producer id must then rotate (transaction.version 2 bumps it at every "
              "transaction end)")


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> Family:
    return Family(P + name, doc, labels or [])


def _tp(tp: Partition) -> tuple[str, str]:
    return tp[0], str(tp[1])


def _by_topic(values: dict[Partition, float]) -> dict[str, list[float]]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for (topic, _), value in values.items():
        grouped[topic].append(value)
    return grouped


def _complete_topics(values: dict[Partition, float], expected: Iterable[Partition]) -> dict[str, list[float]]:
    """Per-topic values, only for topics where every expected partition has a value."""
    missing = {topic for topic, partition in expected if (topic, partition) not in values}
    return {t: v for t, v in _by_topic(values).items() if t not in missing}


log = logging.getLogger(__name__)


class TxnCollector:
    """All `kafkatxn_*` families of one scrape (one offsets collection, shared by concurrent scrapes):
    exposition() renders them for /metrics, each part again only when the results it is built from were
    replaced; collect() yields them as prometheus_client Metrics (registry API)."""

    def __init__(self, service: ExporterService, version: str):
        self.service = service
        self.version = version
        self._rendered = PartCache()

    def describe(self) -> list[Metric]:
        return []                            # unchecked collector: collect() must not run at register time

    def collect(self) -> Iterator[Metric]:
        counts: SeriesCounts = {}
        for part in self.parts():
            families = list(part.build())
            counts.update(series_counts(families))
            yield from (family.to_metric() for family in families)
        yield from (family.to_metric() for family in series_families(counts))

    def exposition(self) -> bytes:
        return self._rendered.render(self.parts(), series_families)

    def parts(self) -> list[Part]:
        """The families in order, grouped by what they are built from: the results of the offsets
        collection and of the background one (replaced, never changed, by the service) or, key None, the
        health and the clock, which change every scrape."""
        svc, metrics = self.service, self.service.config.metrics
        view = svc.offsets()
        bg = svc.background
        now = svc.clock()
        per_partition = metrics.granularity == "partition"
        of_bg = self._background_parts(bg)
        return [
            Part("health", None, lambda: health_families(svc.health, view.reachable, self.version)),
            Part("brokers", None, lambda: _broker_offsets(view, now)),
            Part("offsets", (view,), lambda: partition_and_topic_offsets(view, per_partition)),
            of_bg["producers"],
            Part("transactions", None, lambda: transaction_families(bg.transactions, now, metrics.top_transactions,
                                                                    bg.collected_at)),
            of_bg["hanging"],
            of_bg["configs"],
            Part("groups", (bg.groups, view), lambda: group_families(bg.groups, view, per_partition)),
            of_bg["group_commits"],
            of_bg["features"],
        ]

    def _background_parts(self, bg: Background) -> dict[str, Part]:
        """The parts built from the background results alone (keyed by them)."""
        metrics = self.service.config.metrics
        per_partition = metrics.granularity == "partition"
        return {
            "producers": Part("producers", (bg.producers,), lambda: producer_families(bg.producers, per_partition)),
            "hanging": Part("hanging", (bg,), lambda: hanging_families(bg, metrics.hanging_info_limit)),
            "configs": Part("configs", (bg.configs,), lambda: config_families(bg.configs)),
            "group_commits": Part("group_commits", (bg.group_commits,),
                                  lambda: group_commit_families(bg.group_commits)),
            "features": Part("features", (bg.features, bg.readable_lag),
                             lambda: feature_and_readable_lag_families(bg, per_partition)),
        }

    def prerender(self) -> None:
        """Render the parts built from the background results alone right after a background cycle replaced
        them (the service's after_cycle), so that the next scrape serves them from the cache instead of rendering
        them itself (0.45 s of a scrape at 50,000 partitions, docs/benchmarks.md). Asks Kafka nothing (the
        offsets view is not touched). A failure is logged and the scrape renders them as before."""
        try:
            self._rendered.warm(self._background_parts(self.service.background).values())
        except Exception:           # noqa: BLE001 - never the background loop's end
            log.exception("pre-rendering the background families failed; the next scrape renders them")


def series_families(counts: SeriesCounts) -> Iterator[Family]:
    """How many series each family of this scrape has: what grows with the cluster (and what must shrink again
    when topics, producers, transactions or groups are gone), visible without counting /metrics by hand."""
    series = _gauge("exporter_series", "Series of each family in this scrape (this family's own not counted)",
                    ["family"])
    for name, n in sorted(counts.items()):
        series.add_metric([name], float(n))
    yield series


# ---- health ----------------------------------------------------------------------------------------
def health_families(health: dict[str, CollectorHealth], reachable: bool, version: str) -> Iterator[Family]:
    up = _gauge("up", "1 if this scrape reached the Kafka cluster (metadata and offsets), else 0")
    up.add_metric([], 1.0 if reachable else 0.0)
    c_up = _gauge("collector_up", "1 if the collector's last run got an answer from every broker it asked",
                  ["collector"])
    dur = _gauge("collector_duration_seconds", "Wall time of the collector's last run", ["collector"])
    last = _gauge("collector_last_success_timestamp_seconds", "Unix time of the collector's last successful run",
                  ["collector"])
    for name in COLLECTORS:
        h = health[name]
        c_up.add_metric([name], 1.0 if h.up else 0.0)
        dur.add_metric([name], h.duration_seconds)
        if h.last_success is not None:
            last.add_metric([name], h.last_success)
    info = Family(P + "build", "txnlab exporter build information", ["version", "python"], type="info")
    info.add_metric([version, platform.python_version()], 1.0)
    yield from (up, c_up, dur, last, info)


# ---- LSO (scrape time) --------------------------------------------------------------------------------
def partition_and_topic_offsets(view: OffsetsView, per_partition: bool) -> Iterator[Family]:
    res = view.result
    both = {tp for tp in res.last_stable if tp in res.high_watermark}
    lag = {tp: max(0, res.high_watermark[tp] - res.last_stable[tp]) for tp in both}
    if per_partition:
        yield from _partition_offsets(res.high_watermark, res.last_stable, lag, view.lso_last_advance)
    yield from _topic_offsets(lag, {tp: view.lso_last_advance[tp] for tp in both if tp in view.lso_last_advance},
                              res.leaders)


def _broker_offsets(view: OffsetsView, now: float | None) -> Iterator[Family]:
    """Per leader: did it answer this scrape's ListOffsets within the deadline, and how old are the last
    offsets it served (its partitions are absent from this scrape when it did not answer)."""
    up = _gauge("broker_offsets_up", "1 if the broker answered this scrape's ListOffsets (LSO and HWM) within "
                "collection.scrape_timeout_seconds; 0: its partitions are left out of this scrape", ["broker"])
    age = _gauge("broker_offsets_age_seconds", "Seconds since the broker last answered ListOffsets for this "
                 "exporter (0: in this scrape); absent if it never did", ["broker"])
    failed = view.result.brokers_failed
    for broker, last_good in sorted(view.broker_last_good.items()):
        up.add_metric([str(broker)], 0.0 if broker in failed else 1.0)
        if last_good is not None and now is not None:
            age.add_metric([str(broker)], max(0.0, now - last_good))
    yield from (up, age)


def _partition_offsets(hwm: dict, lso: dict, lag: dict, advance: dict) -> Iterator[Family]:
    families = [
        (_gauge("partition_high_watermark", "High watermark (READ_UNCOMMITTED end offset)", TP), hwm),
        (_gauge("partition_last_stable_offset", "Last stable offset (READ_COMMITTED end offset): first offset "
                "of the oldest open transaction, or the HWM", TP), lso),
        (_gauge("partition_lso_lag", "HWM - LSO: offsets read_committed consumers cannot read yet (>= 0)", TP), lag),
        (_gauge("partition_lso_last_advance_timestamp_seconds", "Unix time the LSO last advanced or had no lag "
                "(as seen by this exporter since it started)", TP), advance),
    ]
    order = [(tp, _tp(tp)) for tp in sorted(hwm.keys() | lso.keys() | advance.keys())]   # sorted once
    for family, values in families:
        for tp, labels in order:
            if tp in values:
                family.add_metric(labels, values[tp])
        yield family


def _topic_offsets(lag: dict, advance: dict, leaders: dict) -> Iterator[Family]:
    lag_sum = _gauge("topic_lso_lag", "Sum of partition LSO lag over the topic (absent if a partition failed)",
                     ["topic"])
    lag_max = _gauge("topic_max_lso_lag", "Largest partition LSO lag of the topic", ["topic"])
    stuck = _gauge("topic_partitions_with_lso_lag", "Partitions of the topic with LSO lag > 0", ["topic"])
    oldest = _gauge("topic_oldest_lso_advance_timestamp_seconds",
                    "Earliest lso_last_advance timestamp over the topic's partitions", ["topic"])
    for topic, values in sorted(_complete_topics(lag, leaders).items()):
        lag_sum.add_metric([topic], sum(values))
        lag_max.add_metric([topic], max(values))
        stuck.add_metric([topic], sum(1 for v in values if v > 0))
    for topic, values in sorted(_complete_topics(advance, leaders).items()):
        oldest.add_metric([topic], min(values))
    yield from (lag_sum, lag_max, stuck, oldest)


# ---- producer state (cached) ----------------------------------------------------------------------------
def producer_families(res: ProducersResult | None, per_partition: bool) -> Iterator[Family]:
    if res is None:
        return
    active = {tp: len(entries) for tp, entries in res.producers.items()}
    opened = {tp: [e for e in entries if e.txn_start_offset >= 0] for tp, entries in res.producers.items()}
    epochs: dict[Partition, float] = {tp: max(e.producer_epoch for e in entries)
                                      for tp, entries in res.producers.items() if entries}
    if per_partition:
        yield from _partition_producers(res, active, opened, epochs)
    topic_active = _gauge("topic_active_producers", "Active producer ids over the topic's partitions" + CACHED,
                          ["topic"])
    topic_open = _gauge("topic_open_transactions", "Open transactions over the topic's partitions" + CACHED, ["topic"])
    open_counts = {tp: len(v) for tp, v in opened.items()}
    complete = _complete_topics(active, res.leaders)
    for topic, values in sorted(complete.items()):
        topic_active.add_metric([topic], sum(values))
    for topic, values in sorted(_complete_topics(open_counts, res.leaders).items()):
        topic_open.add_metric([topic], sum(values))
    yield from (topic_active, topic_open)
    yield _topic_max_epoch(epochs, set(complete))
    yield from _broker_producers(res, active)
    scan = _gauge("producer_scan_partitions", "Partitions asked with DescribeProducers in the last background "
                  "collection, by result" + CACHED, ["result"])
    scan.add_metric(["scanned"], len(res.producers))
    scan.add_metric(["failed"], res.requested - len(res.producers))
    yield scan


def _partition_producers(res: ProducersResult, active: dict, opened: dict, epochs: dict) -> Iterator[Family]:
    f_active = _gauge("partition_active_producers", "Producer ids with state on the partition leader "
                      "(DescribeProducers)" + CACHED, TP)
    f_open = _gauge("partition_open_transactions", "Producers with an open transaction on the partition" + CACHED, TP)
    f_start = _gauge("partition_oldest_open_transaction_start_offset",
                     "First offset of the oldest open transaction" + CACHED, TP)
    f_write = _gauge("partition_oldest_open_transaction_last_write_timestamp_seconds",
                     "Last write of the producer holding the oldest open transaction" + CACHED, TP)
    f_oldest = _gauge("partition_oldest_producer_timestamp_seconds", "Last write of the least recently active "
                      "producer: it expires producer.id.expiration.ms after this" + CACHED, TP)
    f_epoch = _gauge("partition_max_producer_epoch", "Highest producer epoch among the partition's active producers "
                     "(DescribeProducers; absent without producers): " + EPOCH_HELP + CACHED, TP)
    for tp, entries in sorted(res.producers.items()):
        labels = _tp(tp)
        f_active.add_metric(labels, active[tp])
        f_open.add_metric(labels, len(opened[tp]))
        if opened[tp]:
            oldest = min(opened[tp], key=lambda e: e.txn_start_offset)
            f_start.add_metric(labels, oldest.txn_start_offset)
            f_write.add_metric(labels, oldest.last_timestamp_ms / 1000)
        if entries:
            f_oldest.add_metric(labels, min(e.last_timestamp_ms for e in entries) / 1000)
            f_epoch.add_metric(labels, epochs[tp])
    yield from (f_active, f_open, f_start, f_write, f_oldest, f_epoch)


def _topic_max_epoch(epochs: dict[Partition, float], complete: set[str]) -> Family:
    """The highest partition epoch of each topic whose every partition was scanned (a partition scanned without
    producers has no epoch and does not make its topic partial; one that failed does)."""
    family = _gauge("topic_max_producer_epoch", "Highest partition_max_producer_epoch over the topic's partitions "
                    f"(absent if a partition failed); exhausted at {PRODUCER_EPOCH_MAX}" + CACHED, ["topic"])
    for topic, values in sorted(_by_topic(epochs).items()):
        if topic in complete:
            family.add_metric([topic], max(values))
    return family


def _broker_producers(res: ProducersResult, active: dict) -> Iterator[Family]:
    family = _gauge("broker_active_producers", "Active producer ids over the partitions the broker leads "
                    "(absent if one of them failed)" + CACHED, ["broker"])
    totals: dict[int, int] = defaultdict(int)
    failed: set[int] = set()
    for tp, broker in res.leaders.items():
        if tp in active:
            totals[broker] += active[tp]
        else:
            failed.add(broker)
    for broker, total in sorted(totals.items()):
        if broker not in failed and broker >= 0:
            family.add_metric([str(broker)], total)
    yield family


# ---- coordinators (cached) -------------------------------------------------------------------------------
def transaction_families(res: TransactionsResult | None, now: float, top_n: int,
                         collected_at: float | None = None) -> Iterator[Family]:
    """Ages are at scrape time; "over its timeout" is judged when the states were read (collected_at): a
    transaction Ongoing and young then may well have ended since, and must not count as overdue."""
    if res is None:
        return
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for listing in res.listings:
        counts[(str(listing.coordinator), listing.state)] += 1
    total = _gauge("transactions", "Transactional ids per coordinator and state (ListTransactions)" + CACHED,
                   ["coordinator", "state"])
    for labels, n in sorted(counts.items()):
        total.add_metric(list(labels), n)
    oldest = _gauge("transaction_oldest_start_timestamp_seconds", "Start of the oldest in-progress transaction "
                    "per coordinator and state (DescribeTransactions)" + CACHED, ["coordinator", "state"])
    starts: dict[tuple[str, str], int] = {}
    # a coordinator whose DescribeTransactions failed gets no count at all: its zero would be silence taken as evidence
    over: dict[str, int] = {str(b): 0 for b in {lst.coordinator for lst in res.listings} - res.coordinators_failed}
    near, preparing = dict(over), dict(over)
    now_ms = now * 1000
    read_ms = (collected_at if collected_at is not None else now) * 1000
    for d in res.descriptions.values():
        if d.start_time_ms < 0:
            continue
        key = (str(d.coordinator), d.state)
        starts[key] = min(starts.get(key, d.start_time_ms), d.start_time_ms)
        if d.state == "Ongoing" and read_ms - d.start_time_ms > d.timeout_ms:
            over[str(d.coordinator)] = over.get(str(d.coordinator), 0) + 1
        elif d.state == "Ongoing" and read_ms - d.start_time_ms > NEAR_TIMEOUT * d.timeout_ms:
            near[str(d.coordinator)] = near.get(str(d.coordinator), 0) + 1
        elif d.state in PREPARE_STATES and read_ms - d.start_time_ms > d.timeout_ms:
            preparing[str(d.coordinator)] = preparing.get(str(d.coordinator), 0) + 1
    for labels, start in sorted(starts.items()):
        oldest.add_metric(list(labels), start / 1000)
    over_f = _gauge("transactions_over_timeout", "Ongoing transactions older than their own "
                    "transaction.timeout.ms (the coordinator should have aborted them)" + CACHED, ["coordinator"])
    for coordinator, n in sorted(over.items()):
        over_f.add_metric([coordinator], n)
    near_f = _gauge("transactions_near_timeout", f"Ongoing transactions older than {NEAR_TIMEOUT:g} of their own "
                    "transaction.timeout.ms, not yet past it (their producer gone or unable to commit in time: the "
                    "coordinator aborts them at the timeout)" + CACHED, ["coordinator"])
    for coordinator, n in sorted(near.items()):
        near_f.add_metric([coordinator], n)
    prepare_f = _gauge("transactions_prepare_over_timeout", "Transactions in PrepareCommit or PrepareAbort older "
                       "than their own transaction.timeout.ms: their end was decided but the markers are not all "
                       "written (the coordinator does not time these out: it sends the markers until they land; one "
                       "stuck here holds the LSO of its partitions, KAFKA-19999)" + CACHED, ["coordinator"])
    for coordinator, n in sorted(preparing.items()):
        prepare_f.add_metric([coordinator], n)
    yield from (total, oldest, over_f, near_f, prepare_f)
    yield _transaction_max_epoch(res)
    if top_n:
        yield _top_transactions(res, now_ms, top_n)


def _transaction_max_epoch(res: TransactionsResult) -> Family:
    family = _gauge("transaction_max_producer_epoch", "Highest producer epoch among the transactional ids the "
                    "coordinators described in the last collection (DescribeTransactions: those in progress; "
                    "absent if none was, or if a coordinator did not answer: the highest may be its): " + EPOCH_HELP
                    + CACHED)
    if res.descriptions and not res.coordinators_failed:
        family.add_metric([], max(d.producer_epoch for d in res.descriptions.values()))
    return family


def _top_transactions(res: TransactionsResult, now_ms: float, top_n: int) -> Family:
    family = _gauge("transaction_age_seconds", f"Age of the {top_n} oldest in-progress transactions" + CACHED,
                    ["coordinator", "transactional_id", "state"])
    described = sorted((d for d in res.descriptions.values() if d.start_time_ms >= 0), key=lambda d: d.start_time_ms)
    for d in described[:top_n]:
        family.add_metric([str(d.coordinator), d.transactional_id, d.state], (now_ms - d.start_time_ms) / 1000)
    return family


# ---- hanging (cached) ------------------------------------------------------------------------------------
def hanging_families(bg: Background, info_limit: int) -> Iterator[Family]:
    if bg.producers is None or bg.transactions is None:
        return
    yield _count_by_topic("hanging_transactions", "Open transactions the coordinator does not track for the "
                          "partition, confirmed in two consecutive collections" + CACHED,
                          [(v.txn.topic, v.reason) for v in bg.hanging], ["topic", "reason"])
    yield _count_by_topic("hanging_suspect_transactions", "Open transactions suspect in the last collection "
                          "(hanging if seen again)" + CACHED,
                          [(v.txn.topic, v.reason) for v in bg.verdicts if v.suspect], ["topic", "reason"])
    yield _count_by_topic("late_transactions", "Open transactions whose producer last wrote longer ago than the "
                          "leader's transaction.max.timeout.ms" + CACHED, [(t.topic,) for t in bg.late], ["topic"])
    yield from _hanging_info(bg.hanging, info_limit)
    scan = _gauge("hanging_scan_open_transactions", "Open transactions examined by the hanging check, by "
                  "whether the evidence about them was complete" + CACHED, ["result"])
    scan.add_metric(["resolved"], sum(1 for v in bg.verdicts if v.resolved))
    scan.add_metric(["unresolved"], sum(1 for v in bg.verdicts if not v.resolved))
    yield scan
    yield _count_by_topic("hanging_unresolved_transactions", "Open transactions neither cleared nor suspected "
                          "because the evidence about them was incomplete (reason: what was missing); they turn "
                          "hanging only once it completes or past the leader's transaction.max.timeout.ms" + CACHED,
                          [(v.txn.topic, str(v.unresolved_reason)) for v in bg.verdicts if not v.resolved],
                          ["topic", "reason"])
    yield from evidence_families(bg.evidence)


def evidence_families(evidence: Evidence | None) -> Iterator[Family]:
    if evidence is None:
        return
    complete = _gauge("hanging_evidence_complete", "1 if the last coordinator collection saw every transactional "
                      "id (every __transaction_state partition led by a broker that answered, unmoved during "
                      "the listing, and a principal that may describe any id), else 0" + CACHED)
    complete.add_metric([], 1.0 if evidence.complete else 0.0)
    gaps = _gauge("hanging_evidence_incomplete", "Why the coordinator evidence was incomplete: "
                  "__transaction_state partitions affected per reason (1 for a reason that affects all)" + CACHED,
                  ["reason"])
    reasons = evidence.reasons()
    for reason in EVIDENCE_REASONS:
        gaps.add_metric([reason], reasons.get(reason, 0))
    yield from (complete, gaps)


def _count_by_topic(name: str, doc: str, keys: list[tuple], labels: list[str]) -> Family:
    family = _gauge(name, doc, labels)
    counts: dict[tuple, int] = defaultdict(int)
    for key in keys:
        counts[key] += 1
    for key, n in sorted(counts.items()):
        family.add_metric(list(key), n)
    return family


def _hanging_info(hanging: list[Verdict], limit: int) -> Iterator[Family]:
    info = _gauge("hanging_transaction_info", "One series per hanging transaction with what an abort needs "
                  "(value: its producer's last write, unix seconds)" + CACHED,
                  ["topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch", "start_offset",
                   "reason"])
    for v in sorted(hanging, key=lambda v: v.txn.last_timestamp_ms)[:limit]:
        t: OpenTransaction = v.txn
        info.add_metric([t.topic, str(t.partition), str(t.producer_id), str(t.producer_epoch),
                         str(t.coordinator_epoch), str(t.start_offset), str(v.reason)], t.last_timestamp_ms / 1000)
    dropped = _gauge("hanging_transaction_info_dropped", "Hanging transactions left out of "
                     "hanging_transaction_info by metrics.hanging_info_limit" + CACHED)
    dropped.add_metric([], max(0, len(hanging) - limit))
    yield from (info, dropped)


# ---- broker thresholds (cached) ----------------------------------------------------------------------------
CONFIG_GAUGES = (
    ("broker_transaction_max_timeout_seconds", "transaction.max.timeout.ms", 1000.0),
    ("broker_producer_id_expiration_seconds", "producer.id.expiration.ms", 1000.0),
    ("broker_transactional_id_expiration_seconds", "transactional.id.expiration.ms", 1000.0),
)


VERIFICATION_SETTING = "transaction.partition.verification.enable"
# Features txnlab reads whose absence says something: a cluster whose brokers know no transaction.version (neither
# supported nor finalized) runs a release before Kafka 4.0, whose transactions are those of its levels 0 and 1
EXPECTED_FEATURES = ("transaction.version",)


def config_families(res: ConfigsResult | None) -> Iterator[Family]:
    if res is None:
        return
    for name, key, divisor in CONFIG_GAUGES:
        family = _gauge(name, f"Broker setting {key}" + CACHED, ["broker"])
        for broker, configs in sorted(res.configs.items()):
            if key in configs:
                family.add_metric([str(broker)], float(configs[key]) / divisor)
        yield family
    verify = _gauge("broker_transaction_partition_verification_enabled", "Broker setting "
                    "transaction.partition.verification.enable (KIP-890), 1 or 0" + CACHED, ["broker"])
    for broker, configs in sorted(res.configs.items()):
        if VERIFICATION_SETTING in configs:
            verify.add_metric([str(broker)], 1.0 if configs[VERIFICATION_SETTING] == "true" else 0.0)
    yield verify
    absent = _gauge("broker_setting_absent", "1: the broker answered DescribeConfigs without this setting, so its "
                    "release has none and the setting's family has no series for it (transaction.partition."
                    "verification.enable arrived in Kafka 3.6, KIP-890 part 1: a 3.5 broker has no partition "
                    "verification)" + CACHED, ["broker", "setting"])
    for broker, configs in sorted(res.configs.items()):
        for key in [key for _, key, _ in CONFIG_GAUGES] + [VERIFICATION_SETTING]:
            if key not in configs:
                absent.add_metric([str(broker), key], 1.0)
    yield absent


# ---- consumer groups against the LSO ------------------------------------------------------------------------
def group_families(res: GroupOffsetsResult | None, view: OffsetsView, per_partition: bool) -> Iterator[Family]:
    if res is None:
        return
    lso, hwm = view.result.last_stable, view.result.high_watermark
    lso_lag: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    hwm_lag: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for group, committed in res.committed.items():
        for (topic, partition), offset in committed.items():
            if (topic, partition) in lso and (topic, partition) in hwm:
                lso_lag[(group, topic)][partition] = max(0, lso[(topic, partition)] - offset)
                hwm_lag[(group, topic)][partition] = max(0, hwm[(topic, partition)] - offset)
    if per_partition:
        yield _group_partition_family("consumergroup_lso_lag", "LSO - committed offset: offsets a read_committed "
                                      "group is behind, transaction markers included (stays 1 after an "
                                      "exactly-once group caught up: see consumergroup_readable_lag; committed "
                                      "offsets cached)", lso_lag)
        yield _group_partition_family("consumergroup_hwm_lag", "HWM - committed offset: the usual consumer lag, "
                                      "including offsets read_committed groups are blocked from", hwm_lag)
    topic = _gauge("consumergroup_topic_lso_lag", "Sum of consumergroup_lso_lag over the topic's partitions",
                   ["group", "topic"])
    for (group, name), parts in sorted(lso_lag.items()):
        topic.add_metric([group, name], sum(parts.values()))
    yield topic
    info = _gauge("consumergroup_info", "1 per listed group: its protocol as ListGroups tells it (type: classic, "
                  "consumer for KIP-848, streams for KIP-1071; unknown before Kafka 4.0) and its state" + CACHED,
                  ["group", "type", "state"])
    for group in sorted(set(res.types) | set(res.states)):
        info.add_metric([group, res.types.get(group) or "unknown", res.states.get(group) or "unknown"], 1.0)
    yield info
    yield from consumer_protocol_families(res)


def consumer_protocol_families(res: GroupOffsetsResult) -> Iterator[Family]:
    """What ConsumerGroupDescribe tells of each KIP-848 group; absent for a group it did not describe."""
    described = " (KIP-848 groups: ConsumerGroupDescribe)" + CACHED
    families = (
        (_gauge("consumergroup_epoch", "The group epoch, bumped at each change of members or subscriptions"
                + described, ["group"]), lambda m: m.group_epoch),
        (_gauge("consumergroup_assignment_epoch", "The group epoch the coordinator's target assignment was "
                "computed at" + described, ["group"]), lambda m: m.assignment_epoch),
        (_gauge("consumergroup_members", "Members of the group" + described, ["group"]),
         lambda m: len(m.member_epochs)),
        (_gauge("consumergroup_members_reconciling", "Members whose epoch is below the assignment epoch: not yet "
                "on the assignment computed for them (a member that stays here holds partitions back, and its "
                "transactional offset commits are checked against its older epoch)" + described, ["group"]),
         lambda m: m.reconciling),
    )
    for family, value in families:
        for group, members in sorted(res.members.items()):
            family.add_metric([group], float(value(members)))
        yield family


def group_commit_families(commits: dict[str, GroupCommits]) -> Iterator[Family]:
    """exporter/group_commits.py's verdicts and the evidence they rest on; absent where it is unknown."""
    since = _gauge("consumergroup_offsets_last_advance_timestamp_seconds", "Unix time the group's committed "
                   "offsets last moved, or were last seen with nothing readable past them (or the exporter first "
                   "saw the group)" + CACHED, ["group"])
    pending = _gauge("consumergroup_pending_offset_partitions", "Partitions whose offsets a transaction carries "
                     "and has not ended: OffsetFetch with require_stable answered UNSTABLE_OFFSET_COMMIT (only "
                     "partitions the group committed before)" + CACHED, ["group"])
    members = _gauge("consumergroup_active", "1: the group has members (ListGroups: neither Empty nor Dead)"
                     + CACHED, ["group"])
    verdict = _gauge("consumergroup_commits_failing", "1: the group has members and records to read, its "
                     "transactions carried its offsets in two collections or more, and its committed offsets have "
                     "not moved for collection.group_commit_stall_seconds: its exactly-once commits abort or never "
                     "end; 0: not so; absent: unknown (state, readable lag or a pending read missing)" + CACHED,
                     ["group"])
    for group, c in sorted(commits.items()):
        since.add_metric([group], c.since)
        for family, value in ((pending, c.pending_partitions), (members, c.active), (verdict, c.failing)):
            if value is not None:
                family.add_metric([group], float(value))
    yield from (since, pending, members, verdict)


def _group_partition_family(name: str, doc: str, values: dict[tuple[str, str], dict[int, int]]) -> Family:
    family = _gauge(name, doc, ["group", "topic", "partition"])
    for (group, topic), parts in sorted(values.items()):
        for partition, value in sorted(parts.items()):
            family.add_metric([group, topic, str(partition)], value)
    return family


# ---- cluster features and readable lag (cached) ---------------------------------------------------------------
READABLE_LAG_HELP = ("Records a read_committed consumer starting at the group's committed offset would still "
                     "receive before the LSO: data records minus transaction markers minus records of aborted "
                     "transactions (0 once an exactly-once group caught up, where LSO - committed stays 1); an "
                     "upper bound where consumergroup_readable_lag_estimated_partitions counts it" + CACHED)


def feature_and_readable_lag_families(bg: Background, per_partition: bool) -> Iterator[Family]:
    yield from feature_families(bg.features)
    yield from readable_lag_families(bg.readable_lag, per_partition)


def feature_families(res: FeaturesResult | None) -> Iterator[Family]:
    if res is None:
        return
    family = _gauge("cluster_finalized_feature_level", "Finalized level of each cluster feature (KIP-584, "
                    "ApiVersions); transaction.version 2: KIP-890 part 2, the producer epoch is bumped every "
                    "transaction; 0: supported but not finalized" + CACHED, ["feature"])
    for name, level in sorted(res.levels.items()):
        family.add_metric([name], level)
    yield family
    absent = _gauge("cluster_feature_absent", "1: the brokers know no such feature (ApiVersions lists it neither "
                    "supported nor finalized), so cluster_finalized_feature_level has no series for it: no "
                    "transaction.version before Kafka 4.0, whose transactions are those of levels 0 and 1 (no "
                    "epoch bump per transaction)" + CACHED, ["feature"])
    for name in EXPECTED_FEATURES:
        if name not in res.levels:
            absent.add_metric([name], 1.0)
    yield absent


def readable_lag_families(res: ReadableLagResult | None, per_partition: bool) -> Iterator[Family]:
    if res is None:
        return
    values: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for group, lags in res.groups.lag.items():
        for (topic, partition), value in lags.items():
            values[(group, topic)][partition] = value
    if per_partition:
        yield _group_partition_family("consumergroup_readable_lag", READABLE_LAG_HELP, values)
    incomplete = {(group, topic) for group, tps in res.groups.unknown.items() for topic, _ in tps}
    topic_sum = _gauge("consumergroup_topic_readable_lag", "Sum of consumergroup_readable_lag over the topic's "
                       "partitions (absent if one of them has no value)" + CACHED, ["group", "topic"])
    for key, parts in sorted(values.items()):
        if key not in incomplete:
            topic_sum.add_metric(list(key), sum(parts.values()))
    estimated = _gauge("consumergroup_readable_lag_estimated_partitions", "Partitions of the group whose "
                       "consumergroup_readable_lag is an upper bound: [committed, LSO) was longer than "
                       "collection.readable_lag_max_bytes" + CACHED, ["group"])
    for group, parts in sorted(res.groups.estimated.items()):
        estimated.add_metric([group], len(parts))
    yield from (topic_sum, estimated)
    yield from _readable_lag_cost(res)


def _readable_lag_cost(res: ReadableLagResult) -> Iterator[Family]:
    requests = _gauge("consumergroup_readable_lag_fetch_requests", "Fetch requests the last readable-lag "
                      "collection sent" + CACHED)
    requests.add_metric([], res.fetch_requests)
    fetched = _gauge("consumergroup_readable_lag_fetched_bytes", "Record bytes those Fetch requests returned"
                     + CACHED)
    fetched.add_metric([], res.fetched_bytes)
    yield from (requests, fetched)
