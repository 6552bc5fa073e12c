"""The hanging verdict only on complete evidence, and scrapes in time, with faults on a real cluster.

A cluster of this module's own ("evidence", 3 nodes, ports from TEST_BASE_PORT + 6000): __transaction_state
with replication factor 1, so killing a broker leaves its __transaction_state partitions without a leader;
partition verification off and transaction.version 1, so a hanging transaction can be injected; a 30 s
broker session timeout, so a frozen or killed broker stays registered (and a leader) long enough to be
seen as such. Every test asserts that no live transaction is ever called hanging, and what the exporter
reports instead. Coordinator failover (replicated __transaction_state) and sustained commit traffic run on
the session's main cluster.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from contextlib import contextmanager

import pytest
import requests
from confluent_kafka import Producer

from cluster.access.admin import ClusterAdmin, transaction_state_partition
from cluster.lab.layout import HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES
from cluster.access.reads import partition_offsets
from cluster.access.smoke import ensure_topic
from cluster.access.waiting import wait_until
from exporter.kafka_access import KafkaAccess
from tests.integration.conftest import CAMPAIGN, TEST_BASE_PORT, _session_cluster
from tests.integration.helpers import open_transaction, running_exporter, scrape
from tests.cli import txnlab

pytestmark = pytest.mark.cluster
STATE_PARTITIONS = 6
INTERVAL = 1.0
SUSTAINED_S = 30.0          # the sustained-traffic test: 30 collections of open transactions judged in the gate,
SUSTAINED_CAMPAIGN_S = 300.0  # 300 in the campaign
EVIDENCE_CONFIG = {**HANGING_DRILL_BROKER_CONFIG, "transaction.state.log.replication.factor": "1",
                   "transaction.state.log.min.isr": "1",
                   "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
                   "broker.session.timeout.ms": "30000"}

HELD = {"transaction.timeout.ms": 600000, "enable.idempotence": True}    # a transaction these tests leave open


@pytest.fixture(scope="module")
def evidence_cluster():
    yield from _session_cluster("test-evidence-cluster", base_port=TEST_BASE_PORT + 6000,
                                broker_overrides=EVIDENCE_CONFIG, features=dict(HANGING_DRILL_FEATURES))


@pytest.fixture
def evidence(evidence_cluster):
    """The evidence cluster, healed after the test (every node running and registered, no toxics)."""
    yield evidence_cluster
    evidence_cluster.heal()


# ---- helpers ------------------------------------------------------------------------------------------------
def total(samples: dict, name: str, **labels: object) -> float:
    """Sum of every series of `name` carrying these labels."""
    wanted = {(k, str(v)) for k, v in labels.items()}
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def series(samples: dict, name: str) -> list[dict]:
    return [dict(ls) | {"value": v} for (n, ls), v in samples.items() if n == name]


def partitions_not_led_by(conn, topic: str, broker: int) -> list[int]:
    with ClusterAdmin(conn) as admin:
        return sorted(p.partition for p in admin.partitions(topic) if p.leader != broker)


def coordinator_leaders(conn) -> dict[int, int]:
    """__transaction_state partition -> leader, as the exporter's access layer reads it."""
    access = KafkaAccess(conn)
    try:
        return {p: leader for p, (leader, _) in access.coordinator_map().leaders.items()}
    finally:
        access.close()


def transactional_id_led_by(conn, broker: int, avoid: int | None = None) -> str:
    """A fresh transactional id whose coordinator is `broker` (or any broker but `avoid`)."""
    leaders = wait_until(lambda: coordinator_leaders(conn) or None, 60, "__transaction_state to exist")
    for _ in range(10_000):
        tid = f"ev-{uuid.uuid4().hex[:10]}"
        leader = leaders[transaction_state_partition(tid, len(leaders))]
        if (avoid is None and leader == broker) or (avoid is not None and leader != avoid):
            return tid
    raise AssertionError(f"no transactional id maps to broker {broker}")


def last_stable_offset(conn, topic: str, partition: int) -> int:
    """The partition's end offset for read_committed consumers (the LSO), asked by confluent-kafka."""
    return partition_offsets(conn, topic, [partition], committed=True)[partition]


def started_ensure_topic(conn, topic: str, partitions: int) -> None:
    ensure_topic(conn, topic, partitions=partitions, replication=3, timeout=60)


@contextmanager
def watching(url: str, topics: list[str]):
    """Scrape /metrics every 0.5 s in the background; yields the list of (time, samples) seen so far."""
    seen: list[tuple[float, dict]] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                seen.append((time.monotonic(), scrape(url)))
            except requests.RequestException:
                pass
            stop.wait(0.5)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)


def never_hanging(seen: list[tuple[float, dict]], topic: str) -> None:
    hanging = [(t, total(s, "kafkatxn_hanging_transactions", topic=topic)) for t, s in seen]
    assert seen and all(n == 0 for _, n in hanging), f"a live transaction was called hanging: {hanging}"


# ---- a __transaction_state partition without a leader -----------------------------------------------------
def test_leaderless_coordinator_leaves_open_transactions_unresolved_and_abort_refuses(evidence):
    conn = evidence.connection()
    live_topic, hang_topic = f"ev-live-{uuid.uuid4().hex[:6]}", f"ev-hang-{uuid.uuid4().hex[:6]}"
    started_ensure_topic(conn, live_topic, 6)
    started_ensure_topic(conn, hang_topic, 3)
    victim = 3                                # its partitions stay scannable only where it does not lead
    live_parts = partitions_not_led_by(conn, live_topic, victim)[:2]
    hang_part = partitions_not_led_by(conn, hang_topic, victim)[0]
    live_tid = transactional_id_led_by(conn, victim)
    producer = open_transaction(conn, live_topic, live_parts, transactional_id=live_tid, **HELD)
    with running_exporter(conn, INTERVAL, **{"collection.hanging_confirm_seconds": 1.0}) as url:
        # Complete evidence: a real injected hanging transaction is confirmed within 2 intervals.
        injected = json.loads(txnlab("txn", "inject-hanging", "--topic", hang_topic, "--partition", str(hang_part),
                                     "--transactional-id", transactional_id_led_by(conn, 0, avoid=victim),
                                     conn=conn).stdout)
        begun = time.monotonic()
        wait_until(lambda: total(scrape(url), "kafkatxn_hanging_transactions", topic=hang_topic) == 1,
                   2 * INTERVAL + 5, "the injected hanging transaction", interval=0.2)
        assert time.monotonic() - begun <= 2 * INTERVAL + 5
        live_lso = last_stable_offset(conn, live_topic, live_parts[0])
        hang_lso = last_stable_offset(conn, hang_topic, hang_part)
        assert hang_lso == injected["start_offset"]

        evidence.kill_node(victim)            # its __transaction_state partitions have no leader now
        with watching(url, [live_topic]) as seen:
            wait_until(lambda: seen and total(seen[-1][1], "kafkatxn_hanging_unresolved_transactions",
                                              topic=live_topic) >= 2, 30, "the live transaction reported unresolved")
            time.sleep(8 * INTERVAL)          # several more collections
            refused = txnlab("txn", "abort", "--hanging", "--yes", "--confirm-after", "1", conn=conn)
        never_hanging(seen, live_topic)
        last = seen[-1][1]
        reasons = {s["reason"] for s in series(last, "kafkatxn_hanging_unresolved_transactions")
                   if s["topic"] == live_topic and s["value"]}
        assert reasons <= {"coordinator_unanswered", "coordinator_leaderless"} and reasons
        assert total(last, "kafkatxn_hanging_evidence_complete") == 0
        assert total(last, "kafkatxn_hanging_evidence_incomplete", reason=reasons.pop()) >= 1
        # The injected one's coordinator is alive: its evidence is complete and it stays hanging.
        assert total(last, "kafkatxn_hanging_transactions", topic=hang_topic) == 1

        # `--hanging --yes` with an unresolved verdict refuses and writes nothing.
        assert refused.returncode != 0 and "unresolved" in (refused.stderr + refused.stdout)
        assert last_stable_offset(conn, hang_topic, hang_part) == hang_lso
        assert last_stable_offset(conn, live_topic, live_parts[0]) == live_lso

        evidence.heal()                       # the coordinator is back: complete evidence again
        wait_until(lambda: total(scrape(url), "kafkatxn_hanging_evidence_complete") == 1, 60,
                   "complete evidence after the restart")
        done = txnlab("txn", "abort", "--hanging", "--yes", "--confirm-after", "1", conn=conn)
        assert done.returncode == 0, done.stderr
        wait_until(lambda: last_stable_offset(conn, hang_topic, hang_part) > hang_lso, 30, "the hanging one aborted")
    producer.commit_transaction(60)           # it was live all along: it commits (markers follow the commit)
    wait_until(lambda: last_stable_offset(conn, live_topic, live_parts[0]) == 4, 30, "the live transaction committed")


# ---- a broker isolated while transactions are open ------------------------------------------------------------
def test_isolated_coordinator_never_makes_live_transactions_hanging(evidence):
    conn = evidence.connection()
    topic = f"ev-iso-{uuid.uuid4().hex[:6]}"
    started_ensure_topic(conn, topic, 6)
    victim = 2
    first, second = partitions_not_led_by(conn, topic, victim)[:2]
    on_victim = open_transaction(conn, topic, [first, second], transactional_id=transactional_id_led_by(conn, victim),
                                 **HELD)
    elsewhere = open_transaction(conn, topic, [second], transactional_id=transactional_id_led_by(conn, 0, avoid=victim),
                                 **HELD)
    with running_exporter(conn, INTERVAL, **{"collection.hanging_confirm_seconds": 1.0}) as url:
        with watching(url, [topic]) as seen:
            wait_until(lambda: seen and total(seen[-1][1], "kafkatxn_hanging_scan_open_transactions",
                                              result="resolved") >= 2, 30, "the open transactions examined")
            evidence.isolate_node(victim, "client")
            wait_until(lambda: total(seen[-1][1], "kafkatxn_hanging_unresolved_transactions", topic=topic) >= 1,
                       30, "transactions of the isolated coordinator reported unresolved")
            time.sleep(8 * INTERVAL)
            evidence.heal_network()
            wait_until(lambda: total(seen[-1][1], "kafkatxn_hanging_evidence_complete") == 1, 60,
                       "complete evidence after the heal")
        never_hanging(seen, topic)
        assert any(total(s, "kafkatxn_hanging_evidence_incomplete", reason="coordinator_unanswered") for _, s in seen)
    for producer in (on_victim, elsewhere):
        producer.commit_transaction(60)       # both were live: both commit
    wait_until(lambda: last_stable_offset(conn, topic, second) == 8, 30,     # 2 x 3 records, 2 commit markers
               "both transactions committed")


# ---- a frozen broker: every scrape in time ----------------------------------------------------------------------
def live_leaders(conn, topic: str) -> dict[int, int | None]:
    """Partition -> leader, as the brokers' metadata has it now."""
    with ClusterAdmin(conn) as admin:
        return {p.partition: p.leader for p in admin.partitions(topic)}


def test_frozen_broker_scrapes_answer_within_the_deadline_with_the_others_data(evidence):
    conn = evidence.connection()
    topic = f"ev-frozen-{uuid.uuid4().hex[:6]}"
    started_ensure_topic(conn, topic, 6)
    deadline = 2.0
    # No consumer groups: the background cycle's readable lag asks offsets through the scrapes' single flight,
    # and a scrape that joins a collection begun (and answered) just before the freeze is served its answers:
    # CI once saw broker_offsets_up 1 for the frozen broker that way. Here every scrape's collection is its own.
    with running_exporter(conn, INTERVAL, **{"collection.scrape_timeout_seconds": deadline,
                                             "collection.offsets_cache_seconds": 0,
                                             "collection.consumer_groups": False}) as url:
        wait_until(lambda: total(scrape(url), "kafkatxn_partition_last_stable_offset", topic=topic) == 0 and
                   len([s for s in series(scrape(url), "kafkatxn_partition_last_stable_offset")
                        if s["topic"] == topic]) == 6, 30, "every partition served")
        leaders = live_leaders(conn, topic)   # read as late as possible before the freeze
        frozen = leaders[0]
        evidence.pause_node(frozen)
        served_each = []
        try:
            for i in range(10):
                began = time.monotonic()
                samples = scrape(url, timeout=deadline + 5)
                took = time.monotonic() - began
                served_each.append({int(s["partition"]) for s in series(samples,
                                    "kafkatxn_partition_last_stable_offset") if s["topic"] == topic})
                assert took <= deadline + 1.0, f"a scrape took {took:.2f}s with broker {frozen} frozen"
                assert total(samples, "kafkatxn_broker_offsets_up", broker=frozen) == 0, f"scrape {i} after the freeze"
                assert all(total(samples, "kafkatxn_broker_offsets_up", broker=b) == 1 for b in set(leaders.values())
                           if b != frozen)
                assert total(samples, "kafkatxn_up") == 1
                time.sleep(0.5)
            assert total(samples, "kafkatxn_broker_offsets_age_seconds", broker=frozen) >= 4
        finally:
            evidence.resume_node(frozen)
        # Judged against where leadership was: it cannot have come back to the frozen broker yet (no preferred
        # election within minutes), so leaders read now say whether it left during the freeze (CI once saw
        # every partition served; asking the brokers during the freeze could itself hang on the frozen one).
        others = {p for p, b in leaders.items() if b != frozen}
        after = live_leaders(conn, topic)
        if after == leaders:                  # it never left: the frozen broker's partitions were never served
            assert all(served == others for served in served_each), served_each
        else:                                 # it left: first without them, then with them from their new leaders
            assert frozen not in after.values(), (leaders, after)
            assert served_each[0] == others and all(served in (others, set(leaders)) for served in served_each)
            moved = [i for i, served in enumerate(served_each) if served == set(leaders)]
            assert not moved or moved == list(range(moved[0], len(served_each))), served_each

        def complete() -> bool:
            samples = scrape(url)
            served = [s for s in series(samples, "kafkatxn_partition_last_stable_offset") if s["topic"] == topic]
            leads = frozen in after.values()
            return len(served) == 6 and total(samples, "kafkatxn_broker_offsets_up", broker=frozen) == int(leads)
        wait_until(complete, INTERVAL + deadline + 5, "a complete scrape after SIGCONT")


# ---- coordinator failover and sustained commit traffic (replicated __transaction_state) -----------------------
def committing(conn, topic: str, tids: list[str], stop: threading.Event, counts: dict) -> list[threading.Thread]:
    """A thread per transactional id committing short transactions (2 partitions each) until stop."""
    def run(tid: str) -> None:
        producer = Producer(conn.confluent(**{"transactional.id": tid, "enable.idempotence": True,
                                              "transaction.timeout.ms": 60000}))
        producer.init_transactions(60)
        while not stop.is_set():
            try:
                producer.begin_transaction()
                for partition in (0, 1):
                    producer.produce(topic, value=tid.encode(), partition=partition)
                producer.commit_transaction(30)
                counts[tid] = counts.get(tid, 0) + 1
            except Exception:  # noqa: BLE001 - a coordinator dying mid-commit: abort and go on
                try:
                    producer.abort_transaction(30)
                except Exception:  # noqa: BLE001
                    time.sleep(0.5)
        producer.flush(10)
    threads = [threading.Thread(target=run, args=(tid,), daemon=True) for tid in tids]
    for thread in threads:
        thread.start()
    return threads


def test_coordinator_failover_during_collections_gives_no_hanging_verdict(heal_after, conn):
    topic = f"ev-failover-{uuid.uuid4().hex[:6]}"
    started_ensure_topic(conn, topic, 2)
    with ClusterAdmin(conn) as admin:
        victim = admin.leader_of(topic, 0) % 3 + 1          # not the data leader of partition 0
    tids = [transactional_id_led_by(conn, victim) for _ in range(3)]
    stop, counts = threading.Event(), {}
    with running_exporter(conn, INTERVAL, **{"collection.hanging_confirm_seconds": 1.0}) as url:
        with watching(url, [topic]) as seen:
            threads = committing(conn, topic, tids, stop, counts)
            wait_until(lambda: sum(counts.values()) >= 20, 60, "transactions committing")
            heal_after.kill_node(victim)
            wait_until(lambda: seen and total(seen[-1][1], "kafkatxn_hanging_evidence_complete") == 0, 30,
                       "the failover seen as incomplete evidence")
            time.sleep(10)
            heal_after.start_node(victim)
            before = sum(counts.values())
            wait_until(lambda: sum(counts.values()) >= before + 20, 90, "commits after the failover")
            stop.set()
            for thread in threads:
                thread.join(60)
            time.sleep(3 * INTERVAL)
        never_hanging(seen, topic)


@pytest.mark.parametrize("seconds", [SUSTAINED_S, pytest.param(SUSTAINED_CAMPAIGN_S, marks=CAMPAIGN)])
def test_sustained_commit_traffic_never_confirms_a_suspect(conn, seconds):
    topic = f"ev-traffic-{uuid.uuid4().hex[:6]}"
    started_ensure_topic(conn, topic, 2)
    stop, counts = threading.Event(), {}
    with running_exporter(conn, INTERVAL, **{"collection.hanging_confirm_seconds": 1.0}) as url:
        with watching(url, [topic]) as seen:
            threads = committing(conn, topic, [f"ev-traffic-{uuid.uuid4().hex[:8]}" for _ in range(4)], stop, counts)
            time.sleep(seconds)
            stop.set()
            for thread in threads:
                thread.join(60)
        never_hanging(seen, topic)
        examined = max(total(s, "kafkatxn_hanging_scan_open_transactions", result="resolved") for _, s in seen)
    assert sum(counts.values()) >= 100 * seconds / SUSTAINED_S, counts
    assert examined >= 1                      # open transactions were there to judge
