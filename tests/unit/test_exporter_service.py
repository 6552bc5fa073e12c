"""The exporter service: single-flight scrapes, failures recorded not raised, LSO advance tracking."""
from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry

from cluster.access.waiting import wait_until
from exporter.config import load_config
from exporter.kafka_access import (ConfigsResult, CoordinatorMap, FeaturesResult, GroupOffsetsResult, ItemError,
                                   KafkaUnavailable, OffsetsResult, ProducerEntry, ProducersResult, ReadableLagResult,
                                   TransactionListing, TransactionsResult)
from exporter.service import ExporterService, LsoAdvanceTracker

TP = ("t", 0)


class FakeAccess:
    def __init__(self):
        self.offsets_calls = 0
        self.release = threading.Event()
        self.fail = False
        self.producer_calls = []
        self.metadata_refreshes = 0

    def offsets(self, timeout_s=None) -> OffsetsResult:
        self.offsets_calls += 1
        self.release.wait(5)
        if self.fail:
            raise KafkaUnavailable("down")
        return OffsetsResult({TP: 5}, {TP: 9}, {TP: 1})

    def metadata(self, refresh=False):
        self.metadata_refreshes += refresh

    def broker_configs(self):
        return ConfigsResult(configs={1: {"transaction.max.timeout.ms": "1000"}})

    def producers(self, partitions=None):
        self.producer_calls.append(partitions)
        if self.fail:
            raise KafkaUnavailable("down")
        return ProducersResult({TP: [ProducerEntry(7, 0, 0, 0, 1, 5)]}, {TP: 1}, 1,
                               [ItemError("NOT_LEADER_FOR_PARTITION", topic="t", partition=1)])

    def transactions(self):
        leaders = CoordinatorMap({0: (1, 1)})
        return TransactionsResult(listings=[TransactionListing("other", 8, "Ongoing", 1)], answered={1},
                                  before=leaders, after=leaders, may_describe_any_id=True)

    def group_offsets(self, _filter):
        raise KafkaUnavailable("down")

    def finalized_features(self) -> FeaturesResult:
        return FeaturesResult({"transaction.version": 2})

    def close(self):
        pass


def service(access: FakeAccess, registry: CollectorRegistry | None = None, confirm: float = 0.0,
            offsets_cache: float = 0.0) -> ExporterService:
    config = load_config(env={}, flags={"collection.hanging_confirm_seconds": confirm,
                                        "collection.offsets_cache_seconds": offsets_cache})
    return ExporterService(access, config, registry or CollectorRegistry(), clock=lambda: 1000.0)


def test_concurrent_scrapes_share_one_offsets_collection():
    access = FakeAccess()
    svc = service(access)
    views, entered = [], threading.Semaphore(0)

    def scrape():
        entered.release()
        views.append(svc.offsets())

    threads = [threading.Thread(target=scrape) for _ in range(5)]
    for t in threads:
        t.start()
    for _ in threads:
        entered.acquire(timeout=5)                 # every scrape has started before the collection ends
    wait_until(lambda: access.offsets_calls == 1, 5, "the first collection to start")
    access.release.set()
    for t in threads:
        t.join(5)
    assert len(views) == 5 and access.offsets_calls == 1
    assert all(v is views[0] for v in views)
    svc.offsets()
    assert access.offsets_calls == 2            # a later scrape collects afresh


def test_failed_collection_is_recorded_and_old_results_kept():
    access = FakeAccess()
    access.release.set()
    registry = CollectorRegistry()
    svc = service(access, registry)
    first = svc.collect_background()
    assert first.producers is not None and svc.health["producers"].up
    access.fail = True
    second = svc.collect_background()
    assert second.producers is first.producers          # served from the last good collection
    assert not svc.health["producers"].up and svc.health["producers"].last_success == 1000.0
    assert not svc.health["groups"].up
    assert registry.get_sample_value("kafkatxn_collector_errors_total",
                                     {"collector": "producers", "error": "KafkaUnavailable"}) == 1
    assert registry.get_sample_value("kafkatxn_collector_errors_total",
                                     {"collector": "producers", "error": "NOT_LEADER_FOR_PARTITION"}) == 1
    view = svc.offsets()
    assert not view.reachable and not svc.health["offsets"].up


def test_a_suspect_is_rechecked_within_the_same_cycle():
    access = FakeAccess()
    svc = service(access, confirm=0.01)
    bg = svc.collect_background()
    assert [v.txn.producer_id for v in bg.hanging] == [7]
    assert access.producer_calls == [None, {TP}]            # a full scan, then only the suspect partition


def test_background_confirms_hanging_on_second_cycle_and_flags_late():
    access = FakeAccess()
    svc = service(access)
    assert svc.collect_background().hanging == []
    bg = svc.collect_background()
    assert [v.txn.producer_id for v in bg.hanging] == [7]
    assert [t.producer_id for t in bg.late] == [7]        # last write at 0 ms, max timeout 1 s


def test_lso_advance_tracker():
    tracker = LsoAdvanceTracker()
    assert tracker.update({TP: 5}, {TP: 9}, 100.0) == {TP: 100.0}
    assert tracker.update({TP: 5}, {TP: 12}, 110.0) == {TP: 100.0}      # stuck: keeps the old time
    assert tracker.update({TP: 6}, {TP: 12}, 120.0) == {TP: 120.0}      # advanced
    assert tracker.update({TP: 12}, {TP: 12}, 130.0) == {TP: 130.0}     # caught up
    assert tracker.update({TP: 12}, {TP: 12}, 140.0) == {TP: 140.0}     # no lag: nothing to wait for


def test_rapid_scrapes_reuse_offsets_younger_than_the_cache_age():
    access = FakeAccess()
    access.release.set()
    svc = service(access, offsets_cache=60.0)
    first = svc.offsets()
    assert svc.offsets() is first and access.offsets_calls == 1


def test_lso_advance_tracker_forgets_partitions_that_are_gone():
    tracker = LsoAdvanceTracker()
    tracker.update({TP: 5, ("t", 1): 3}, {TP: 9, ("t", 1): 9}, 100.0)
    assert tracker.update({TP: 5}, {TP: 9}, 110.0, known={TP}) == {TP: 100.0}
    assert set(tracker._seen) == {TP}


def test_each_leader_is_flagged_with_when_it_last_answered():
    access = FakeAccess()
    access.release.set()
    now = [1000.0]
    svc = ExporterService(access, load_config(env={}, flags={"collection.offsets_cache_seconds": 0}),
                          CollectorRegistry(), clock=lambda: now[0])
    access.offsets = lambda timeout_s=None: OffsetsResult({TP: 5}, {TP: 9}, {TP: 1, ("t", 1): 2})
    assert svc.offsets().broker_last_good == {1: 1000.0, 2: 1000.0}
    now[0] = 1030.0
    access.offsets = lambda timeout_s=None: OffsetsResult({TP: 5}, {TP: 9}, {TP: 1, ("t", 1): 2}, [
        ItemError("KafkaTimeoutError", broker=2, topic="t", partition=1, whole_request=True)])
    assert svc.offsets().broker_last_good == {1: 1030.0, 2: 1000.0}


def test_the_background_loop_survives_an_exception_and_shows_it_in_health():
    access = FakeAccess()
    access.release.set()
    registry = CollectorRegistry()
    svc = service(access, registry)
    calls = []

    def broken_then_fine():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in a collection")
        return svc.background

    svc.collect_background = broken_then_fine
    svc.config = load_config(env={}, flags={"collection.interval_seconds": 0.5})
    svc.start()
    try:
        wait_until(lambda: len(calls) >= 2, 10, "a second background cycle after the exception")
    finally:
        svc.stop()
    assert registry.get_sample_value("kafkatxn_collector_errors_total",
                                     {"collector": "background", "error": "RuntimeError"}) == 1
    assert svc.health["background"].last_success is not None


class GroupsAccess(FakeAccess):
    """Group offsets answer; readable_lag records what it was asked."""

    def __init__(self):
        super().__init__()
        self.release.set()
        self.readable_calls = []

    def group_offsets(self, _filter):
        return GroupOffsetsResult(committed={"g": {TP: 4}})

    def readable_lag(self, committed, last_stable, max_bytes):
        self.readable_calls.append((committed, last_stable, max_bytes))
        return ReadableLagResult()


def test_readable_lag_follows_group_offsets_against_the_lso_of_now_and_features_are_cached():
    access = GroupsAccess()
    svc = service(access)
    bg = svc.collect_background()
    assert access.readable_calls == [({"g": {TP: 4}}, {TP: 5}, 1024 * 1024)]
    assert bg.readable_lag is not None and bg.features.levels == {"transaction.version": 2}

    def down():
        raise KafkaUnavailable("down")

    access.finalized_features = down
    assert svc.collect_background().features.levels == {"transaction.version": 2}    # last good kept
    assert svc.health["features"].up is False


def test_readable_lag_max_bytes_zero_sends_no_fetch():
    access = GroupsAccess()
    config = load_config(env={}, flags={"collection.readable_lag_max_bytes": 0})
    ExporterService(access, config, CollectorRegistry(), clock=lambda: 1000.0).collect_background()
    assert access.readable_calls == []


def test_a_missing_transactional_id_acl_is_named_in_one_log_line(caplog):
    access = FakeAccess()
    access.release.set()
    denied = access.transactions()
    denied.may_describe_any_id = False
    access.transactions = lambda: denied
    svc = service(access)
    with caplog.at_level("WARNING", logger="txnlab.exporter"):
        svc.collect_background()
        svc.collect_background()
    named = [r.getMessage() for r in caplog.records if "--transactional-id '*'" in r.getMessage()]
    assert len(named) == 1 and "--operation Describe" in named[0]
    # unlisted, so unresolved for want of the ACL, but its last write (0 ms) is past the 1 s max timeout
    assert [(v.reason, v.resolved) for v in svc.background.verdicts] == [("past_max_timeout", True)]


def test_why_kafka_is_unavailable_is_logged_once_per_change(caplog):
    access = FakeAccess()
    access.release.set()
    access.fail = True
    svc = service(access)
    with caplog.at_level("ERROR", logger="txnlab.exporter"):
        svc.collect_background()
        svc.offsets()
        svc.collect_background()
        access.group_offsets = lambda _filter: (_ for _ in ()).throw(KafkaUnavailable("authentication failed: x"))
        svc.collect_background()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cannot use Kafka")]
    assert said == ["cannot use Kafka: down", "cannot use Kafka: authentication failed: x"]


def test_group_commits_rest_on_this_collections_readable_lag_only():
    """A group with records to read whose transactions carry offsets that never land is failing after the stall;
    a readable lag that failed in a collection is not taken from the last good one."""
    from exporter.readable_lag import GroupReadable

    class Failing(GroupsAccess):
        lag_ok = True

        def group_offsets(self, _filter):
            return GroupOffsetsResult(committed={"g": {TP: 4}}, states={"g": "Stable"},
                                      pending={"g": frozenset({TP})})

        def readable_lag(self, committed, last_stable, max_bytes):
            if not self.lag_ok:
                raise KafkaUnavailable("down")
            return ReadableLagResult(groups=GroupReadable(lag={"g": {TP: 1}}, estimated={"g": set()},
                                                          unknown={"g": set()}))

    access, now = Failing(), [1000.0]
    config = load_config(env={}, flags={"collection.group_commit_stall_seconds": 60})
    svc = ExporterService(access, config, CollectorRegistry(), clock=lambda: now[0])
    svc.collect_background()
    now[0] = 1061.0
    commits = svc.collect_background().group_commits["g"]
    assert (commits.failing, commits.since, commits.pending_partitions, commits.active) == (True, 1000.0, 1, True)
    access.lag_ok = False
    now[0] = 1070.0
    bg = svc.collect_background()
    assert bg.readable_lag is not None                    # the last good one still served
    assert bg.group_commits["g"].failing is None          # but no verdict rests on it
    access.lag_ok = True
    for now[0], verdict in ((1080.0, None), (1131.0, True)):      # a stall of complete evidence after it
        assert svc.collect_background().group_commits["g"].failing is verdict


class ChurningAccess(GroupsAccess):
    """A topic `gone` with a producer, an open transaction and a group reading it, until `gone` is set: then the
    cluster answers as after the topic's deletion, the producer's expiry, the transaction's end and the group's."""
    GONE = ("gone", 0)

    def __init__(self):
        super().__init__()
        self.gone = False

    def offsets(self, timeout_s=None) -> OffsetsResult:
        result = super().offsets(timeout_s)
        if not self.gone:
            result.last_stable[self.GONE], result.high_watermark[self.GONE], result.leaders[self.GONE] = 3, 8, 1
        return result

    def producers(self, partitions=None):
        result = super().producers(partitions)
        if not self.gone:
            result.producers[self.GONE] = [ProducerEntry(99, 0, 0, 0, 1, 3)]
            result.leaders[self.GONE] = 1
        return result

    def transactions(self):
        result = super().transactions()
        if not self.gone:
            result.listings.append(TransactionListing("gone-writer", 99, "Ongoing", 1))
        return result

    def group_offsets(self, _filter):
        result = super().group_offsets(_filter)
        if not self.gone:
            result.committed["old-readers"] = {self.GONE: 2}
            result.states["old-readers"], result.types["old-readers"] = "Stable", "consumer"
        return result


def test_the_series_of_a_deleted_topic_an_expired_producer_and_a_gone_group_leave_the_next_collection():
    """Nothing the exporter keeps between collections (the LSO advance, the hanging and group-commit trackers, the
    cached parts) holds a series of what the cluster no longer has; kafkatxn_exporter_series says how many went."""
    from exporter.collectors import TxnCollector
    access = ChurningAccess()
    svc = service(access)

    def metrics() -> str:
        svc.collect_background()
        return TxnCollector(svc, "test").exposition().decode()
    before = metrics()
    producer = 'kafkatxn_partition_active_producers{partition="0",topic="gone"} 1.0'
    assert producer in before and 'kafkatxn_consumergroup_active{group="old-readers"} 1.0' in before
    assert 'kafkatxn_exporter_series{family="kafkatxn_partition_lso_lag"} 2.0' in before
    assert 'kafkatxn_transactions{coordinator="1",state="Ongoing"} 2.0' in before
    access.gone = True
    after = metrics()
    assert '"gone"' not in after and "old-readers" not in after
    for family, n in (("partition_lso_lag", 1), ("partition_active_producers", 1), ("consumergroup_active", 0)):
        assert f'kafkatxn_exporter_series{{family="kafkatxn_{family}"}} {n}.0' in after
    assert 'kafkatxn_transactions{coordinator="1",state="Ongoing"} 1.0' in after       # the ended one not counted
