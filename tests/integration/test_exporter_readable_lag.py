"""Readable lag of exactly-once consumer groups, a group whose exactly-once commits keep failing, and the
cluster's finalized features, through /metrics of an in-process exporter on the shared cluster. The oracle for
readable lag is a real read_committed consumer; for the features, Kafka's own kafka-features tool; for the
failing commits, a real member and transactions that carry its offsets and abort."""
from __future__ import annotations

import threading

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from cluster.lab.features import finalized_level
from cluster.access.waiting import wait_until
from tests.integration.helpers import Samples, running_exporter, scrape, value

INTERVAL = 1.0
READABLE = "kafkatxn_consumergroup_readable_lag"
LSO_LAG = "kafkatxn_consumergroup_lso_lag"


def _write_transactions(conn, topic: str) -> None:
    """Partition 0: 0-2 committed, 3 COMMIT, 4-5 aborted, 6 ABORT, 7-10 committed, 11 COMMIT (LSO 12).
    Partition 1: 0-2 committed with the last transaction of partition 0, 3 COMMIT (LSO 4)."""
    producer = Producer(conn.confluent(**{"transactional.id": f"upstream-{topic}", "log_level": 3}))
    producer.init_transactions(30)
    for records, commit in (({0: 3}, True), ({0: 2}, False), ({0: 4, 1: 3}, True)):
        producer.begin_transaction()
        for partition, n in records.items():
            for i in range(n):
                producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def _read_committed(conn, topic: str) -> dict[int, list[int]]:
    """The offsets a read_committed consumer receives on partitions 0 and 1, from the start to the end."""
    consumer = Consumer(conn.confluent(**{"group.id": f"reader-{topic}", "isolation.level": "read_committed",
                                          "enable.auto.commit": False, "enable.partition.eof": True,
                                          "log_level": 3}))
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    received: dict[int, list[int]] = {0: [], 1: []}
    at_end: set[int] = set()
    try:
        wait_until(lambda: _poll_into(consumer, received, at_end) == {0, 1}, 30, "both partitions read to the end")
    finally:
        consumer.close()
    return received


def _poll_into(consumer: Consumer, received: dict[int, list[int]], at_end: set[int]) -> set[int]:
    message = consumer.poll(1)
    if message is not None and message.error() is None:
        received[message.partition()].append(message.offset())
    elif message is not None and message.error().code() == KafkaError._PARTITION_EOF:
        at_end.add(message.partition())
    return at_end


def _commit_in_transaction(conn, topic: str, group: str, offsets: dict[int, int]) -> None:
    """The exactly-once way: the offsets go into a transaction (sendOffsetsToTransaction) that commits."""
    consumer = Consumer(conn.confluent(**{"group.id": group, "log_level": 3}))
    producer = Producer(conn.confluent(**{"transactional.id": f"eos-{group}", "log_level": 3}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(topic, p, o) for p, o in offsets.items()],
                                         consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    consumer.close()


def _eos_groups(conn, topic: str) -> tuple[dict[int, list[int]], dict[str, dict[int, int]]]:
    """A caught-up group (committed = last record received + 1, the marker left after it) and one behind
    (partition 0 after the first transaction: the aborted one and 4 committed records ahead; partition 1
    at 0: 3 records ahead)."""
    _write_transactions(conn, topic)
    received = _read_committed(conn, topic)
    assert received == {0: [0, 1, 2, 7, 8, 9, 10], 1: [0, 1, 2]}     # the layout the docstrings describe
    groups = {f"caught-up-{topic}": {p: offsets[-1] + 1 for p, offsets in received.items()},
              f"behind-{topic}": {0: received[0][2] + 1, 1: 0}}
    for group, offsets in groups.items():
        _commit_in_transaction(conn, topic, group, offsets)
    return received, groups


def _exporter_flags(topic: str, **more: object) -> dict[str, object]:
    return {"filters.topic_allow": topic, "filters.group_allow": f".*-{topic}", **more}


def _readable_of_all(url: str, topic: str, groups: dict[str, dict[int, int]]) -> Samples | None:
    samples = scrape(url)
    have = all(value(samples, READABLE, group=g, topic=topic, partition=p) is not None
               and value(samples, LSO_LAG, group=g, topic=topic, partition=p) is not None
               for g, offsets in groups.items() for p in offsets)
    return samples if have else None


def test_readable_lag_is_zero_for_a_caught_up_eos_group_and_counts_what_is_pending(conn, admin, topic):
    received, groups = _eos_groups(conn, topic)
    caught_up, behind = list(groups)
    with running_exporter(conn, INTERVAL, **_exporter_flags(topic)) as url:
        samples = wait_until(lambda: _readable_of_all(url, topic, groups), 30, "readable lag of both groups")
        for p in (0, 1):
            assert value(samples, LSO_LAG, group=caught_up, topic=topic, partition=p) == 1    # the marker
            assert value(samples, READABLE, group=caught_up, topic=topic, partition=p) == 0
        for group, offsets in groups.items():
            for p, committed in offsets.items():
                delivered = sum(1 for offset in received[p] if offset >= committed)
                assert value(samples, READABLE, group=group, topic=topic, partition=p) == delivered, (group, p)
        assert value(samples, READABLE, group=behind, topic=topic, partition=0) == 4      # the aborted 2 left out
        assert value(samples, LSO_LAG, group=behind, topic=topic, partition=0) == 9
        assert value(samples, "kafkatxn_consumergroup_topic_readable_lag", group=behind, topic=topic) == 4 + 3
        assert value(samples, "kafkatxn_consumergroup_readable_lag_estimated_partitions", group=behind) == 0
        print(f"\ncost: {value(samples, 'kafkatxn_consumergroup_readable_lag_fetch_requests'):.0f} Fetch requests, "
              f"{value(samples, 'kafkatxn_consumergroup_readable_lag_fetched_bytes'):.0f} bytes, "
              f"{value(samples, 'kafkatxn_collector_duration_seconds', collector='readable_lag'):.3f} s")
        leaders = {admin.leader_of(topic, p) for p in (0, 1)}     # 2 offsets of a partition never share a Fetch
        assert value(samples, "kafkatxn_consumergroup_readable_lag_fetch_requests") == 2 * len(leaders)
        level = value(samples, "kafkatxn_cluster_finalized_feature_level", feature="transaction.version")
        assert level == finalized_level(conn, "transaction.version")
        assert all(value(samples, "kafkatxn_broker_transaction_partition_verification_enabled", broker=b) == 1
                   for b in (1, 2, 3))        # the shared cluster keeps Kafka's default (true)


def test_a_byte_budget_too_small_for_the_range_gives_a_flagged_upper_bound(conn, topic):
    _, groups = _eos_groups(conn, topic)
    caught_up, behind = list(groups)
    with running_exporter(conn, INTERVAL, **_exporter_flags(topic, **{"collection.readable_lag_max_bytes": 100})) as url:
        samples = wait_until(lambda: _readable_of_all(url, topic, groups), 30, "readable lag of both groups")
        # behind, partition 0, from offset 3: the COMMIT marker batch fits in 100 bytes, the aborted batch after it does not
        bound = value(samples, READABLE, group=behind, topic=topic, partition=0)
        assert 4 < bound <= value(samples, LSO_LAG, group=behind, topic=topic, partition=0)
        assert value(samples, "kafkatxn_consumergroup_readable_lag_estimated_partitions", group=behind) >= 1
        assert value(samples, READABLE, group=caught_up, topic=topic, partition=0) == 0     # one marker: exact
        assert value(samples, "kafkatxn_consumergroup_readable_lag_estimated_partitions", group=caught_up) == 0


FAILING = "kafkatxn_consumergroup_commits_failing"


def _abort_loop(producer: Producer, offsets: list[TopicPartition], metadata, stop: threading.Event) -> None:
    """The failing exactly-once loop: each transaction carries the group's offsets and aborts 2.5 s later."""
    while not stop.is_set():
        producer.begin_transaction()
        producer.send_offsets_to_transaction(offsets, metadata, 30)
        stop.wait(2.5)
        producer.abort_transaction(30)


def test_a_group_whose_transactions_keep_aborting_their_offsets_is_failing_until_a_commit_lands(conn, topic):
    """On the KIP-848 consumer protocol (the exporter says so: consumergroup_info's type)."""
    _write_transactions(conn, topic)
    group = f"aborting-{topic}"
    _commit_in_transaction(conn, topic, group, {0: 3, 1: 0})    # require_stable covers partitions committed before
    member = Consumer(conn.confluent(**{"group.id": group, "enable.auto.commit": False, "log_level": 3,
                                        "group.protocol": "consumer"}))      # KIP-848: its commits carry its epoch
    member.subscribe([topic])
    wait_until(lambda: member.poll(0.2) is None and member.assignment(), 30, "the member's assignment")
    metadata = member.consumer_group_metadata()
    producer = Producer(conn.confluent(**{"transactional.id": f"aborting-{topic}", "log_level": 3}))
    producer.init_transactions(30)
    stop = threading.Event()
    loop = threading.Thread(target=_abort_loop, daemon=True,
                            args=(producer, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 1)], metadata, stop))
    flags = _exporter_flags(topic, **{"collection.group_commit_stall_seconds": 5})
    with running_exporter(conn, INTERVAL, **flags) as url:
        loop.start()
        try:
            seen: list[Samples] = []
            wait_until(lambda: seen.append(scrape(url)) or value(seen[-1], FAILING, group=group) == 1, 60,
                       "the verdict: commits failing")
        finally:
            stop.set()
            loop.join(30)
        pending = [value(s, "kafkatxn_consumergroup_pending_offset_partitions", group=group) for s in seen]
        assert max(p for p in pending if p is not None) == 2              # both partitions carried, never landed
        last = seen[-1]
        assert value(last, "kafkatxn_consumergroup_active", group=group) == 1
        assert value(last, "kafkatxn_consumergroup_info", group=group, type="consumer", state="Stable") == 1
        epoch = value(last, "kafkatxn_consumergroup_epoch", group=group)          # ConsumerGroupDescribe's
        assert epoch >= 1 and value(last, "kafkatxn_consumergroup_assignment_epoch", group=group) == epoch
        assert value(last, "kafkatxn_consumergroup_members", group=group) == 1
        assert value(last, "kafkatxn_consumergroup_members_reconciling", group=group) == 0
        assert value(last, READABLE, group=group, topic=topic, partition=0) == 4
        stalled_since = value(last, "kafkatxn_consumergroup_offsets_last_advance_timestamp_seconds", group=group)
        assert {value(s, "kafkatxn_consumergroup_offsets_last_advance_timestamp_seconds", group=group)
                for s in seen} - {None} == {stalled_since}                 # never moved while the verdict grew
        producer.begin_transaction()                                        # now a commit lands: caught up
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 11), TopicPartition(topic, 1, 3)],
                                             metadata, 30)
        producer.commit_transaction(30)
        after = wait_until(lambda: (lambda s: s if value(s, FAILING, group=group) == 0 else None)(scrape(url)), 30,
                           "the verdict cleared by the commit")
        assert value(after, READABLE, group=group, topic=topic, partition=0) == 0
        assert value(after, "kafkatxn_consumergroup_offsets_last_advance_timestamp_seconds", group=group) > stalled_since
    member.close()
