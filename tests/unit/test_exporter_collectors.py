"""Collectors map service results to kafkatxn_* families; read back through a private registry."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors import TxnCollector
from exporter.config import load_config
from exporter.hanging_verdicts import (COORDINATOR_LEADERLESS, ID_ACL, PARTITION_NOT_IN_TRANSACTION, Evidence, OpenTransaction,
                              Verdict)
from exporter.kafka_access import (ConfigsResult, FeaturesResult, GroupOffsetsResult, ItemError, OffsetsResult,
                                   ProducerEntry,
                                   ProducersResult, ReadableLagResult, TransactionDescription, TransactionListing,
                                   TransactionsResult)
from exporter.readable_lag import GroupReadable
from exporter.service import COLLECTORS, Background, CollectorHealth, OffsetsView

NOW = 1_800_000_000.0


class FakeService:
    def __init__(self, view: OffsetsView, background: Background, granularity: str = "partition"):
        self.config = load_config(env={}, flags={"metrics.granularity": granularity, "metrics.top_transactions": 5})
        self.health = {name: CollectorHealth(up=True, duration_seconds=0.1, last_success=NOW) for name in COLLECTORS}
        self.background = background
        self.view = view
        self.scrapes = 0

    def offsets(self) -> OffsetsView:
        self.scrapes += 1
        return self.view

    def clock(self) -> float:
        return NOW


def entry(pid: int, start: int = -1, last_s: float = NOW - 10, epoch: int = 0) -> ProducerEntry:
    return ProducerEntry(pid, epoch, 0, int(last_s * 1000), 4, start)


def scrape(service: FakeService):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TxnCollector(service, "test"))
    return lambda name, **labels: registry.get_sample_value(name, labels), registry


def offsets_view(failed_partition: bool = False) -> OffsetsView:
    leaders = {("orders", 0): 1, ("orders", 1): 2, ("audit", 0): 1}
    lso = {("orders", 0): 90, ("orders", 1): 50, ("audit", 0): 7}
    hwm = {("orders", 0): 100, ("orders", 1): 50, ("audit", 0): 7}
    if failed_partition:
        del lso[("audit", 0)], hwm[("audit", 0)]
    return OffsetsView(OffsetsResult(lso, hwm, leaders), {tp: NOW - 30 for tp in lso}, reachable=True)


def test_lso_lag_per_partition_and_topic_rollups():
    get, _ = scrape(FakeService(offsets_view(), Background()))
    assert get("kafkatxn_partition_lso_lag", topic="orders", partition="0") == 10
    assert get("kafkatxn_partition_last_stable_offset", topic="orders", partition="0") == 90
    assert get("kafkatxn_partition_high_watermark", topic="orders", partition="0") == 100
    assert get("kafkatxn_partition_lso_last_advance_timestamp_seconds", topic="orders", partition="1") == NOW - 30
    assert get("kafkatxn_topic_lso_lag", topic="orders") == 10
    assert get("kafkatxn_topic_partitions_with_lso_lag", topic="orders") == 1
    assert get("kafkatxn_up") == 1 and get("kafkatxn_collector_up", collector="producers") == 1


def test_no_topic_total_when_a_partition_failed():
    get, _ = scrape(FakeService(offsets_view(failed_partition=True), Background()))
    assert get("kafkatxn_topic_lso_lag", topic="audit") is None
    assert get("kafkatxn_topic_lso_lag", topic="orders") == 10


def test_lag_is_clamped_at_zero():
    view = OffsetsView(OffsetsResult({("t", 0): 12}, {("t", 0): 10}, {("t", 0): 1}), {}, reachable=True)
    get, _ = scrape(FakeService(view, Background()))
    assert get("kafkatxn_partition_lso_lag", topic="t", partition="0") == 0


def test_topic_granularity_drops_partition_series():
    get, registry = scrape(FakeService(offsets_view(), Background(), granularity="topic"))
    assert get("kafkatxn_topic_lso_lag", topic="orders") == 10
    assert b"kafkatxn_partition_" not in generate_latest(registry)


def test_producer_state_and_broker_totals():
    producers = ProducersResult(
        producers={("orders", 0): [entry(1), entry(2, start=95, last_s=NOW - 50), entry(3, start=97)],
                   ("orders", 1): [entry(4, last_s=NOW - 500)]},
        leaders={("orders", 0): 1, ("orders", 1): 2, ("audit", 0): 2}, requested=3)
    get, _ = scrape(FakeService(offsets_view(), Background(producers=producers)))
    assert get("kafkatxn_partition_active_producers", topic="orders", partition="0") == 3
    assert get("kafkatxn_partition_open_transactions", topic="orders", partition="0") == 2
    assert get("kafkatxn_partition_oldest_open_transaction_start_offset", topic="orders", partition="0") == 95
    assert get("kafkatxn_partition_oldest_open_transaction_last_write_timestamp_seconds",
               topic="orders", partition="0") == NOW - 50
    assert get("kafkatxn_partition_oldest_producer_timestamp_seconds", topic="orders", partition="1") == NOW - 500
    assert get("kafkatxn_topic_active_producers", topic="orders") == 4
    assert get("kafkatxn_broker_active_producers", broker="1") == 3
    assert get("kafkatxn_broker_active_producers", broker="2") is None       # audit-0 on broker 2 failed
    assert get("kafkatxn_producer_scan_partitions", result="failed") == 1


def epoch_producers() -> ProducersResult:
    """orders: three partitions scanned, orders-2 without producers; audit: audit-1 failed."""
    return ProducersResult(
        producers={("orders", 0): [entry(1, epoch=3), entry(2, start=95, epoch=30500), entry(3, epoch=7)],
                   ("orders", 1): [entry(4, epoch=12)], ("orders", 2): [], ("audit", 0): [entry(5, epoch=5)]},
        leaders={("orders", 0): 1, ("orders", 1): 2, ("orders", 2): 1, ("audit", 0): 2, ("audit", 1): 1}, requested=5)


def test_highest_producer_epoch_per_partition_and_per_topic_only_where_every_partition_was_scanned():
    """How close producers are to the int16 epoch maximum, where their producer id rotates: a partition scanned
    without producers has no epoch and does not make its topic partial; a partition that failed does."""
    get, _ = scrape(FakeService(offsets_view(), Background(producers=epoch_producers())))
    assert get("kafkatxn_partition_max_producer_epoch", topic="orders", partition="0") == 30500
    assert get("kafkatxn_partition_max_producer_epoch", topic="orders", partition="1") == 12
    assert get("kafkatxn_partition_max_producer_epoch", topic="orders", partition="2") is None
    assert get("kafkatxn_partition_max_producer_epoch", topic="audit", partition="0") == 5
    assert get("kafkatxn_topic_max_producer_epoch", topic="orders") == 30500
    assert get("kafkatxn_topic_max_producer_epoch", topic="audit") is None          # audit-1 failed
    assert get("kafkatxn_topic_active_producers", topic="audit") is None             # the same rule


def test_topic_granularity_keeps_the_topic_epoch_and_drops_the_partition_one():
    get, registry = scrape(FakeService(offsets_view(), Background(producers=epoch_producers()), granularity="topic"))
    assert get("kafkatxn_topic_max_producer_epoch", topic="orders") == 30500
    assert b"kafkatxn_partition_max_producer_epoch{" not in generate_latest(registry)


def test_highest_producer_epoch_of_the_described_transactional_ids_and_none_without_descriptions():
    descriptions = {
        "a": TransactionDescription("a", 1, "Ongoing", 1, 4, 60_000, int((NOW - 5) * 1000), frozenset()),
        "b": TransactionDescription("b", 2, "PrepareCommit", 2, 31000, 60_000, int((NOW - 1) * 1000), frozenset())}
    listings = [TransactionListing(t, d.producer_id, d.state, d.coordinator) for t, d in descriptions.items()]
    bg = Background(producers=epoch_producers(),
                    transactions=TransactionsResult(listings=listings, descriptions=descriptions))
    get, registry = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_transaction_max_producer_epoch") == 31000
    helps = {m.name: m.documentation for m in registry.collect()}
    assert all("32767" in helps[f"kafkatxn_{n}_max_producer_epoch"] for n in ("transaction", "partition", "topic"))
    idle = [TransactionListing("c", 3, "CompleteCommit", 1)]                         # listed, none described
    get, registry = scrape(FakeService(offsets_view(), Background(transactions=TransactionsResult(listings=idle))))
    assert get("kafkatxn_transaction_max_producer_epoch") is None
    assert get("kafkatxn_transactions", coordinator="1", state="CompleteCommit") == 1
    assert b"\nkafkatxn_transaction_max_producer_epoch " not in generate_latest(registry)      # HELP, TYPE, no sample
    partial = TransactionsResult(listings=listings, descriptions=descriptions, coordinators_failed={2})
    get, _ = scrape(FakeService(offsets_view(), Background(transactions=partial)))   # a coordinator did not answer
    assert get("kafkatxn_transaction_max_producer_epoch") is None


def test_coordinator_states_and_over_timeout():
    listings = [TransactionListing("a", 1, "Ongoing", 1), TransactionListing("b", 2, "Ongoing", 1),
                TransactionListing("c", 3, "CompleteCommit", 2)]
    descriptions = {
        "a": TransactionDescription("a", 1, "Ongoing", 1, 0, 10_000, int((NOW - 60) * 1000), frozenset()),
        "b": TransactionDescription("b", 1, "Ongoing", 2, 0, 60_000, int((NOW - 5) * 1000), frozenset())}
    bg = Background(transactions=TransactionsResult(listings=listings, descriptions=descriptions))
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_transactions", coordinator="1", state="Ongoing") == 2
    assert get("kafkatxn_transactions", coordinator="2", state="CompleteCommit") == 1
    assert get("kafkatxn_transactions_over_timeout", coordinator="1") == 1
    assert get("kafkatxn_transactions_over_timeout", coordinator="2") == 0
    assert get("kafkatxn_transaction_oldest_start_timestamp_seconds", coordinator="1", state="Ongoing") == NOW - 60
    assert get("kafkatxn_transaction_age_seconds", coordinator="1", transactional_id="a", state="Ongoing") == 60


def scrape_aged(aged: list[tuple], collected_at: float):
    """A scrape of transactions (id, coordinator, state, timeout s, age s at NOW) read at collected_at: its `get`."""
    descriptions = {t: TransactionDescription(t, coordinator, state, n, 0, timeout_s * 1000, int((NOW - age_s) * 1000),
                                              frozenset())
                    for n, (t, coordinator, state, timeout_s, age_s) in enumerate(aged, 1)}
    listings = [TransactionListing(t, d.producer_id, d.state, d.coordinator) for t, d in descriptions.items()]
    bg = Background(transactions=TransactionsResult(listings=listings, descriptions=descriptions),
                    collected_at=collected_at)
    return scrape(FakeService(offsets_view(), bg))[0]


def test_near_timeout_counts_ongoing_transactions_past_half_their_own_timeout_and_not_yet_over_it():
    """A job killed and not restarted leaves its open transactions to age into their timeout (TransactionNearTimeout
    fires before the coordinator aborts them): each counted once, over or near, by its own timeout."""
    aged = [("young", 1, "Ongoing", 40, 19), ("near", 1, "Ongoing", 40, 21), ("over", 1, "Ongoing", 40, 41),
            ("ending", 1, "PrepareCommit", 40, 30), ("short", 2, "Ongoing", 10, 6)]
    get = scrape_aged(aged, NOW)
    assert get("kafkatxn_transactions_near_timeout", coordinator="1") == 1
    assert get("kafkatxn_transactions_over_timeout", coordinator="1") == 1
    assert get("kafkatxn_transactions_near_timeout", coordinator="2") == 1
    assert get("kafkatxn_transactions_prepare_over_timeout", coordinator="1") == 0     # "ending": 30 s of 40
    get = scrape_aged(aged, NOW - 4)                                     # judged when read, as over_timeout is
    assert get("kafkatxn_transactions_near_timeout", coordinator="2") == 0


def test_a_transaction_in_prepare_past_its_own_timeout_is_stuck_there_one_within_it_is_ending():
    """KAFKA-19999 leaves a transaction in PrepareCommit for ever (its markers refused): the coordinator does not time
    it out, so past its own timeout it is stuck (TransactionStuckInPrepare), not ending."""
    get = scrape_aged([("stuck", 1, "PrepareCommit", 10, 11), ("aborting", 1, "PrepareAbort", 10, 20),
                       ("ending", 2, "PrepareCommit", 10, 9), ("late", 2, "Ongoing", 10, 12)], NOW)
    assert get("kafkatxn_transactions_prepare_over_timeout", coordinator="1") == 2
    assert get("kafkatxn_transactions_prepare_over_timeout", coordinator="2") == 0   # Ongoing late: over_timeout's
    assert get("kafkatxn_transactions_over_timeout", coordinator="2") == 1
    descriptions = {"stuck": TransactionDescription("stuck", 1, "PrepareCommit", 1, 0, 10_000, int((NOW - 11) * 1000),
                                                    frozenset())}
    listings = [TransactionListing("stuck", 1, "PrepareCommit", 1), TransactionListing("x", 2, "PrepareCommit", 2)]
    failed = TransactionsResult(listings=listings, descriptions=descriptions, coordinators_failed={2})
    get, _ = scrape(FakeService(offsets_view(), Background(transactions=failed, collected_at=NOW)))
    assert get("kafkatxn_transactions_prepare_over_timeout", coordinator="1") == 1
    for family in ("prepare_over_timeout", "over_timeout", "near_timeout"):   # not described: no count, never a 0
        assert get(f"kafkatxn_transactions_{family}", coordinator="2") is None


def test_over_timeout_is_judged_when_the_states_were_read_not_at_scrape_time():
    """A transaction 8 s into a 10 s timeout when the background loop read it, scraped 12 s later: it has
    most likely ended since; counting it overdue made CoordinatorTransactionsOverTimeout go pending at
    every busy moment."""
    listings = [TransactionListing("a", 1, "Ongoing", 1)]
    descriptions = {"a": TransactionDescription("a", 1, "Ongoing", 1, 0, 10_000, int((NOW - 20) * 1000), frozenset())}
    bg = Background(transactions=TransactionsResult(listings=listings, descriptions=descriptions),
                    collected_at=NOW - 12)
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_transactions_over_timeout", coordinator="1") == 0
    assert get("kafkatxn_transaction_age_seconds", coordinator="1", transactional_id="a", state="Ongoing") == 20
    bg = Background(transactions=TransactionsResult(listings=listings, descriptions=descriptions), collected_at=NOW - 5)
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_transactions_over_timeout", coordinator="1") == 1


def test_hanging_families_carry_what_an_abort_needs():
    txn = OpenTransaction("orders", 0, 77, 3, 9, 95, int((NOW - 40) * 1000))
    verdict = Verdict(txn, None, PARTITION_NOT_IN_TRANSACTION)
    bg = Background(producers=ProducersResult(), transactions=TransactionsResult(), verdicts=[verdict],
                    hanging=[verdict], late=[txn])
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_hanging_transactions", topic="orders", reason=PARTITION_NOT_IN_TRANSACTION) == 1
    assert get("kafkatxn_hanging_transaction_info", topic="orders", partition="0", producer_id="77",
               producer_epoch="3", coordinator_epoch="9", start_offset="95",
               reason=PARTITION_NOT_IN_TRANSACTION) == NOW - 40
    assert get("kafkatxn_late_transactions", topic="orders") == 1
    assert get("kafkatxn_hanging_scan_open_transactions", result="resolved") == 1


def test_hanging_info_is_capped():
    verdicts = [Verdict(OpenTransaction("t", i, i, 0, 0, 1, i), None, PARTITION_NOT_IN_TRANSACTION) for i in range(150)]
    bg = Background(producers=ProducersResult(), transactions=TransactionsResult(), verdicts=verdicts, hanging=verdicts)
    get, registry = scrape(FakeService(offsets_view(), bg))
    assert generate_latest(registry).count(b"kafkatxn_hanging_transaction_info{") == 100
    assert get("kafkatxn_hanging_transaction_info_dropped") == 50
    assert get("kafkatxn_hanging_transactions", topic="t", reason=PARTITION_NOT_IN_TRANSACTION) == 150


def test_broker_thresholds_in_seconds():
    configs = ConfigsResult(configs={1: {"transaction.max.timeout.ms": "900000", "producer.id.expiration.ms": "86400000",
                                         "transaction.partition.verification.enable": "false"}})
    get, _ = scrape(FakeService(offsets_view(), Background(configs=configs)))
    assert get("kafkatxn_broker_transaction_max_timeout_seconds", broker="1") == 900
    assert get("kafkatxn_broker_producer_id_expiration_seconds", broker="1") == 86400
    assert get("kafkatxn_broker_transactional_id_expiration_seconds", broker="1") is None
    assert get("kafkatxn_broker_transaction_partition_verification_enabled", broker="1") == 0
    assert get("kafkatxn_broker_setting_absent", broker="1", setting="transactional.id.expiration.ms") == 1
    assert get("kafkatxn_broker_setting_absent", broker="1", setting="transaction.max.timeout.ms") is None


def test_a_setting_or_feature_the_release_lacks_is_served_as_absent_not_left_out():
    """Kafka 3.5 knows no partition verification, 3.x no transaction.version: each is named absent."""
    configs = ConfigsResult(configs={1: {"transaction.max.timeout.ms": "900000", "producer.id.expiration.ms": "1",
                                         "transactional.id.expiration.ms": "1"}})
    bg = Background(configs=configs, features=FeaturesResult({"metadata.version": 11}))
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_broker_transaction_partition_verification_enabled", broker="1") is None
    assert get("kafkatxn_broker_setting_absent", broker="1", setting="transaction.partition.verification.enable") == 1
    assert get("kafkatxn_cluster_feature_absent", feature="transaction.version") == 1
    assert get("kafkatxn_cluster_finalized_feature_level", feature="metadata.version") == 11
    get, _ = scrape(FakeService(offsets_view(), Background(features=FeaturesResult({"transaction.version": 0}))))
    assert get("kafkatxn_cluster_feature_absent", feature="transaction.version") is None      # supported, level 0


def test_consumer_group_lag_against_lso_and_hwm():
    groups = GroupOffsetsResult(committed={"billing": {("orders", 0): 80, ("orders", 1): 50}},
                                states={"billing": "Stable", "old": "Empty"}, types={"billing": "consumer"})
    get, _ = scrape(FakeService(offsets_view(), Background(groups=groups)))
    assert get("kafkatxn_consumergroup_info", group="billing", type="consumer", state="Stable") == 1
    assert get("kafkatxn_consumergroup_info", group="old", type="unknown", state="Empty") == 1
    assert get("kafkatxn_consumergroup_lso_lag", group="billing", topic="orders", partition="0") == 10
    assert get("kafkatxn_consumergroup_hwm_lag", group="billing", topic="orders", partition="0") == 20
    assert get("kafkatxn_consumergroup_topic_lso_lag", group="billing", topic="orders") == 10


def test_a_consumer_protocol_groups_epochs_and_reconciling_members_absent_where_undescribed():
    from exporter.access.results import GroupMembers
    groups = GroupOffsetsResult(types={"billing": "consumer", "fresh": "consumer", "old": "classic"},
                                members={"billing": GroupMembers(12, 12, (12, 11, 12))})
    get, _ = scrape(FakeService(offsets_view(), Background(groups=groups)))
    assert get("kafkatxn_consumergroup_epoch", group="billing") == 12
    assert get("kafkatxn_consumergroup_assignment_epoch", group="billing") == 12
    assert get("kafkatxn_consumergroup_members", group="billing") == 3
    assert get("kafkatxn_consumergroup_members_reconciling", group="billing") == 1
    for name in ("epoch", "assignment_epoch", "members", "members_reconciling"):
        assert get(f"kafkatxn_consumergroup_{name}", group="fresh") is None      # not described: unknown
        assert get(f"kafkatxn_consumergroup_{name}", group="old") is None        # classic: nothing to describe


def test_group_commit_verdicts_and_their_evidence_absent_where_unknown():
    from exporter.group_commits import GroupCommits
    commits = {"billing": GroupCommits(900.0, 2, True, True), "reports": GroupCommits(950.0, None, None, None)}
    get, _ = scrape(FakeService(offsets_view(), Background(group_commits=commits)))
    assert get("kafkatxn_consumergroup_commits_failing", group="billing") == 1
    assert get("kafkatxn_consumergroup_pending_offset_partitions", group="billing") == 2
    assert get("kafkatxn_consumergroup_active", group="billing") == 1
    assert get("kafkatxn_consumergroup_offsets_last_advance_timestamp_seconds", group="reports") == 950
    for name in ("commits_failing", "pending_offset_partitions", "active"):
        assert get(f"kafkatxn_consumergroup_{name}", group="reports") is None


def test_unreachable_cluster_still_renders_health():
    view = OffsetsView(OffsetsResult(), {}, reachable=False)
    service = FakeService(view, Background())
    service.health["offsets"] = CollectorHealth(up=False, duration_seconds=5.0, last_success=None)
    get, _ = scrape(service)
    assert get("kafkatxn_up") == 0 and get("kafkatxn_collector_up", collector="offsets") == 0
    assert get("kafkatxn_collector_last_success_timestamp_seconds", collector="offsets") is None


def test_every_emitted_family_is_in_the_documented_catalog():
    from exporter.group_commits import GroupCommits
    from cluster.lab.versions import REPO_ROOT
    catalog = (REPO_ROOT / "docs" / "exporter.md").read_text()
    producers = ProducersResult(producers={("t", 0): [entry(1, start=3)]}, leaders={("t", 0): 1}, requested=1)
    txn = OpenTransaction("t", 0, 1, 0, 0, 3, 0)
    listings = [TransactionListing("a", 1, "Ongoing", 1)]
    descriptions = {"a": TransactionDescription("a", 1, "Ongoing", 1, 0, 10, 5, frozenset())}
    bg = Background(producers=producers, transactions=TransactionsResult(listings=listings, descriptions=descriptions),
                    configs=ConfigsResult(configs={1: {"transaction.max.timeout.ms": "1"}}),
                    groups=GroupOffsetsResult(committed={"g": {("orders", 0): 1}}),
                    verdicts=[Verdict(txn, None, PARTITION_NOT_IN_TRANSACTION)],
                    hanging=[Verdict(txn, None, PARTITION_NOT_IN_TRANSACTION)], late=[txn],
                    features=FeaturesResult({"transaction.version": 2}), readable_lag=readable_lag_result(),
                    group_commits={"g": GroupCommits(1.0, 1, True, False)})
    _, registry = scrape(FakeService(offsets_view(), bg))
    names = {m.name + ("_info" if m.type == "info" else "") for m in registry.collect()}
    assert len(names) >= 45
    missing = [n for n in names if f"`{n.removeprefix('kafkatxn_')}`" not in catalog]
    assert not missing, f"not in docs/exporter.md: {missing}"


def readable_lag_result() -> ReadableLagResult:
    """billing: caught up on orders-0 (0 though LSO - committed = 1), 4 records pending on orders-1 and an upper
    bound on audit-0; reports: orders-1 could not be read."""
    groups = GroupReadable(lag={"billing": {("orders", 0): 0, ("orders", 1): 4, ("audit", 0): 7},
                                "reports": {("orders", 0): 3}},
                           estimated={"billing": {("audit", 0)}, "reports": set()},
                           unknown={"billing": set(), "reports": {("orders", 1)}})
    return ReadableLagResult(groups=groups, fetch_requests=3, fetched_bytes=2048)


def test_readable_lag_per_partition_topic_totals_and_estimated_partitions():
    get, _ = scrape(FakeService(offsets_view(), Background(readable_lag=readable_lag_result())))
    assert get("kafkatxn_consumergroup_readable_lag", group="billing", topic="orders", partition="0") == 0
    assert get("kafkatxn_consumergroup_readable_lag", group="billing", topic="orders", partition="1") == 4
    assert get("kafkatxn_consumergroup_topic_readable_lag", group="billing", topic="orders") == 4
    assert get("kafkatxn_consumergroup_topic_readable_lag", group="reports", topic="orders") is None   # orders-1 unknown
    assert get("kafkatxn_consumergroup_readable_lag_estimated_partitions", group="billing") == 1
    assert get("kafkatxn_consumergroup_readable_lag_estimated_partitions", group="reports") == 0
    assert get("kafkatxn_consumergroup_readable_lag_fetch_requests") == 3
    assert get("kafkatxn_consumergroup_readable_lag_fetched_bytes") == 2048


def test_readable_lag_at_topic_granularity_keeps_only_the_roll_ups():
    get, registry = scrape(FakeService(offsets_view(), Background(readable_lag=readable_lag_result()), "topic"))
    assert get("kafkatxn_consumergroup_topic_readable_lag", group="billing", topic="audit") == 7
    assert b"kafkatxn_consumergroup_readable_lag{" not in generate_latest(registry)


def test_finalized_features_one_series_each_and_nothing_before_the_first_collection():
    bg = Background(features=FeaturesResult({"transaction.version": 2, "kraft.version": 0}))
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_cluster_finalized_feature_level", feature="transaction.version") == 2
    assert get("kafkatxn_cluster_finalized_feature_level", feature="kraft.version") == 0
    get, registry = scrape(FakeService(offsets_view(), Background()))
    assert b"kafkatxn_cluster_finalized_feature_level" not in generate_latest(registry)


def test_a_leader_that_did_not_answer_is_flagged_with_the_age_of_its_last_offsets():
    view = offsets_view()
    view.result.errors.append(ItemError("KafkaTimeoutError", broker=2, topic="orders", partition=1,
                                        whole_request=True))
    view.broker_last_good = {1: NOW, 2: NOW - 12}
    get, _ = scrape(FakeService(view, Background()))
    assert get("kafkatxn_broker_offsets_up", broker="1") == 1 and get("kafkatxn_broker_offsets_up", broker="2") == 0
    assert get("kafkatxn_broker_offsets_age_seconds", broker="1") == 0
    assert get("kafkatxn_broker_offsets_age_seconds", broker="2") == 12


def test_unresolved_transactions_and_why_the_evidence_was_incomplete():
    txn = OpenTransaction("orders", 0, 7, 1, 3, 40, int(NOW * 1000))
    unresolved = Verdict(txn, None, None, resolved=False, unresolved_reason=COORDINATOR_LEADERLESS)
    bg = Background(producers=ProducersResult({("orders", 0): [entry(7, 40)]}, {("orders", 0): 1}, 1),
                    transactions=TransactionsResult(), verdicts=[unresolved],
                    evidence=Evidence(6, {2: COORDINATOR_LEADERLESS, 4: COORDINATOR_LEADERLESS}, frozenset({ID_ACL})))
    get, _ = scrape(FakeService(offsets_view(), bg))
    assert get("kafkatxn_hanging_unresolved_transactions", topic="orders", reason=COORDINATOR_LEADERLESS) == 1
    assert get("kafkatxn_hanging_scan_open_transactions", result="unresolved") == 1
    assert get("kafkatxn_hanging_evidence_complete") == 0
    assert get("kafkatxn_hanging_evidence_incomplete", reason=COORDINATOR_LEADERLESS) == 2
    assert get("kafkatxn_hanging_evidence_incomplete", reason=ID_ACL) == 1
    assert get("kafkatxn_hanging_evidence_incomplete", reason="coordinator_moved") == 0
    assert get("kafkatxn_hanging_transactions", topic="orders", reason="no_transactional_id") is None
