"""Workloads on the real cluster, 10 s each, no faults: complete histories that match the topics."""
from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Consumer, TopicPartition

from chaos.record.history import read_history
from chaos.record.ids import decode_value
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from chaos.workloads.plans import plan
from cluster.access.reads import read_to_end

pytestmark = pytest.mark.kafka_core      # the version matrix's core (scripts/kafka_matrix.py)

DURATION = 10.0


def run_plan(conn, tmp_path, workload: str, instances: int = 1, extra: tuple = (), seconds: float = DURATION) -> tuple:
    tag = new_run_tag()
    the_plan = plan(workload, tag, instances, list(extra))
    run_dir = new_run_dir(tmp_path, workload, tag)
    with Run(conn, run_dir, tag, seed=7, name=workload) as run:
        run.create_topics(the_plan.topics)
        for spec in the_plan.specs:
            run.start(spec)
        run.wait(seconds)
        assert sorted(run.alive()) == sorted(s.process for s in the_plan.specs), "a workload died early"
        summary = run.finish()
    return tag, the_plan, run_dir, summary


def assert_complete(ops: list[dict]) -> None:
    """Every invoke is followed by a completion of the same process, and nothing completes twice."""
    outstanding: dict[str, dict] = {}
    for op in ops:
        if op["type"] == "invoke":
            assert op["process"] not in outstanding, f"two outstanding invokes for {op['process']}"
            outstanding[op["process"]] = op
        elif op["process"] in outstanding:
            assert outstanding.pop(op["process"])["f"] == op["f"]
    assert not outstanding, f"invokes without completion: {list(outstanding)}"


def ids_in(conn, topic: str, committed: bool) -> Counter:
    return Counter(decode_value(r.value)["id"] for r in read_to_end(conn, topic, committed=committed))


def test_transactional_producer_history_matches_what_read_committed_sees(conn, tmp_path):
    tag, the_plan, run_dir, summary = run_plan(conn, tmp_path, "txn-producer", instances=2,
                                               extra=("--rate", "30", "--abort-share", "0.25"))
    history = read_history(run_dir)
    assert not history.truncated
    assert_complete(history.ops)
    txns = [op for op in history.ops if op["f"] == "txn" and op["type"] != "invoke"]
    ok = {w["id"]: (w["topic"], w["partition"], off) for op in txns if op["type"] == "ok"
          for w, off in zip(op["value"]["writes"], op["value"]["offsets"])}
    failed = {w["id"] for op in txns if op["type"] == "fail" for w in op["value"]["writes"]}
    assert len(ok) > 200 and failed, (len(ok), len(failed))
    assert not [op for op in txns if op["type"] == "info" and op["value"].get("reason") != "shutdown"]

    committed, everything = Counter(), Counter()
    for topic in the_plan.topics:
        committed += ids_in(conn, topic, committed=True)
        everything += ids_in(conn, topic, committed=False)
    shutdown = {w["id"] for op in txns if op["type"] == "info" for w in op["value"]["writes"]}
    assert set(ok) <= set(committed) and max(committed.values()) == 1          # no loss, no duplicate
    assert not failed & set(committed)                                           # no aborted read
    assert set(committed) - set(ok) <= shutdown                                  # nothing unexplained
    assert failed <= set(everything)                                             # the aborts were real
    rc_polls = [r["id"] for op in history.ops if op["f"] == "poll" and op["value"]["isolation"] == "read_committed"
                for r in op["value"]["records"]]
    ru_polls = {r["id"] for op in history.ops if op["f"] == "poll" and op["value"]["isolation"] == "read_uncommitted"
                for r in op["value"]["records"]}
    assert rc_polls and not failed & set(rc_polls) and failed & ru_polls
    assert (run_dir / "end_offsets.json").is_file() and summary["end_offsets"][f"{tag}-a"]


def _committed_offsets(conn, group: str, partitions: dict[str, int]) -> dict[tuple[str, int], int]:
    consumer = Consumer(conn.confluent(**{"group.id": group, "log_level": 3}))
    try:
        tps = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)]
        return {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(tps, timeout=30)}
    finally:
        consumer.close()


def test_processor_writes_exactly_one_output_per_consumed_input(conn, tmp_path):
    tag, the_plan, run_dir, _ = run_plan(conn, tmp_path, "processor", instances=2)
    history = read_history(run_dir)
    assert_complete(history.ops)
    inputs_topics = {t: n for t, n in the_plan.topics.items() if "-in-" in t}
    output = next(t for t in the_plan.topics if t.endswith("-out"))
    out = [decode_value(r.value) for r in read_to_end(conn, output, committed=True)]
    per_input = Counter(v["input"] for v in out)
    assert out and max(per_input.values()) == 1, "an input produced two committed outputs"

    committed = _committed_offsets(conn, f"{tag}.eos", inputs_topics)
    consumed = set()
    for topic in inputs_topics:
        consumer_view = read_to_end(conn, topic, committed=True)
        consumed |= {decode_value(r.value)["id"] for r in consumer_view
                     if r.offset < committed.get((topic, r.partition), -1)}
    assert consumed and set(per_input) == consumed, "outputs must be exactly the inputs below committed offsets"
    processed = [op for op in history.ops if op["f"] == "process" and op["type"] == "ok"]
    assert {i["id"] for op in processed for i in op["value"]["inputs"]} == consumed
    assert {p for p in {op["process"] for op in processed}} == {"eos-0", "eos-1"}


def test_producer_state_storm_history_and_new_producer_ids(conn, tmp_path, admin):
    _, the_plan, run_dir, _ = run_plan(conn, tmp_path, "storm", extra=("--rate", "20"))
    history = read_history(run_dir)
    assert_complete(history.ops)
    produced = [op for op in history.ops if op["f"] == "produce" and op["type"] == "ok"]
    assert len(produced) >= 100
    topic = next(iter(the_plan.topics))
    from kafka.structs import TopicPartition as KTP
    states = admin.client.describe_producers([KTP(topic, p) for p in range(the_plan.topics[topic])])
    active = sum(len(s.active_producers) for s in states.values())
    assert active == len(produced), "every short-lived producer leaves one producer id behind"
    assert Counter(op["value"]["id"] for op in produced) == ids_in(conn, topic, committed=True)


@pytest.mark.parametrize("workload", ["observer"])
def test_observer_alone_needs_topics(workload):
    with pytest.raises(ValueError, match="needs the topics"):
        plan(workload, "rtag", 1, [])
