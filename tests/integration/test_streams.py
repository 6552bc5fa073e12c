"""The Kafka Streams workload on the real cluster: two instances of the exactly-once application (one
application.id) under a keyed transactional feeder; one instance is killed (SIGKILL, with its JVM) mid-run
and the other takes its tasks over, restoring their state from the changelog; `txnlab verify` finds the run
valid with every count exact. Two copies of the run with a planted anomaly on the counts topic, a double
count of one key and a lost update of another (each in its own partition, each copy's end offsets taking
in only its own plant), are each reported as exactly one anomaly of streams_state, nothing else."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer

from chaos.history import read_history
from chaos.plans import plan
from chaos.run import Run, new_run_dir, new_run_tag
from cluster.reads import partition_offsets, read_to_end
from tests.integration.test_verify import copy_run, failing_checks

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

BEFORE_KILL_S, AFTER_KILL_S = 15.0, 22.0


def tasks_events(ops: list[dict], process: str) -> list[dict]:
    return [op for op in ops if op["process"] == process and op["f"] == "streams" and op["type"] == "ok"
            and op["value"].get("event") == "tasks"]


@pytest.fixture(scope="module")
def streams_run(cluster, tmp_path_factory):
    """(run dir, the history's operations, the wall time of the kill)."""
    conn, tag = cluster.connection(), new_run_tag()
    the_plan = plan("streams", tag, 2, [])
    with Run(conn, new_run_dir(tmp_path_factory.mktemp("runs"), "streams", tag), tag, seed=11, name="streams",
             progress=print) as run:
        run.create_topics(the_plan.topics)
        run.use_topics(list(the_plan.tracked))
        for spec in the_plan.specs:
            run.start(spec)
        run.wait(BEFORE_KILL_S)
        assert run.alive() == ["feeder", "streams-0", "streams-1"], run.alive()
        killed_at = time.time()
        run.supervisor.kill("streams-1")
        run.wait(AFTER_KILL_S)
        run.finish()
    yield run.dir, read_history(run.dir).ops, killed_at


def plant_update(conn, run_dir, ops, key_index: int, step: int) -> str:
    """A committed update of one key on the counts topic after its last one: count + step (1: the same input
    counted twice; 2: an update lost before it), the sum following; only this copy's end offsets take it in
    (its partition's). Returns the key."""
    counts = next(op["value"]["counts"] for op in ops if op["f"] == "streams" and op["value"].get("event") == "topology")
    updates = {}
    for r in read_to_end(conn, counts, committed=True):
        updates.setdefault(r.key.decode(), []).append((r.partition, json.loads(r.value)))
    key = sorted(updates)[key_index]
    partition, last = updates[key][-1]
    amount = 1 + int(last["input"].rsplit(".", 1)[1])
    value = {"key": key, "count": last["count"] + step, "sum": last["sum"] + amount, "input": last["input"]}
    producer = Producer(conn.confluent())
    producer.produce(counts, partition=partition, key=key.encode(), value=json.dumps(value).encode())
    assert producer.flush(30) == 0
    ends = json.loads((run_dir / "end_offsets.json").read_text())
    end = partition_offsets(conn, counts, [partition], committed=True)[partition]
    ends[counts][str(partition)] = {"hwm": end, "lso": end}
    (run_dir / "end_offsets.json").write_text(json.dumps(ends))
    return key


@pytest.fixture(scope="module")
def verified(streams_run, cluster, tmp_path_factory):
    run_dir, ops, _ = streams_run
    conn, base = cluster.connection(), tmp_path_factory.mktemp("planted")
    runs = {"run": run_dir, "double": copy_run(run_dir, base / "double"), "lost": copy_run(run_dir, base / "lost")}
    keys = {"double": plant_update(conn, runs["double"], ops, 0, 1)}
    keys["lost"] = plant_update(conn, runs["lost"], ops, -1, 2)
    assert keys["double"] != keys["lost"]
    proc = subprocess.run([sys.executable, "-m", "txnlab.cli", "verify", *map(str, runs.values()), "--examples", "20"],
                          capture_output=True, text=True, timeout=600)
    reports = {name: json.loads((run / "verify" / "report.json").read_text()) for name, run in runs.items()}
    assert proc.returncode == 1, proc.stderr[-4000:]
    return reports, keys, proc.stderr[-4000:]


def test_an_instance_killed_mid_run_hands_its_tasks_over_and_the_run_verifies_valid(streams_run, verified):
    run_dir, ops, killed_at = streams_run
    reports, _, log = verified
    report = reports["run"]
    assert report["valid"] is True, (failing_checks(report), report["evidence"], log)
    assert report["checks"]["streams_processing"]["count"] == 0 and report["checks"]["streams_state"]["count"] == 0
    groups = json.loads((run_dir / "group_offsets.json").read_text())
    app = next(op["value"]["application_id"] for op in ops if op["f"] == "streams")
    assert sum(groups[app][t][p] for t in groups[app] for p in groups[app][t]) > 200, groups
    before = [e for e in tasks_events(ops, "streams-0") if e["wall"] < killed_at]
    after = [e for e in tasks_events(ops, "streams-0") if e["wall"] > killed_at]
    assert before and after, tasks_events(ops, "streams-0")
    assert len(after[-1]["value"]["active"]) == 6 > len(before[-1]["value"]["active"]), (before[-1], after[-1])
    progress = [op["value"]["processed"] for op in ops if op["process"] == "streams-0"
                and op["f"] == "streams" and op["value"].get("event") == "progress"]
    assert progress and progress[-1] > 0


@pytest.mark.parametrize("plant", ["double", "lost"])
def test_a_planted_state_anomaly_is_reported_once_and_nothing_else(verified, plant):
    reports, keys, log = verified
    report = reports[plant]
    assert report["valid"] is False, log
    assert set(failing_checks(report)) == {"streams_state"}, failing_checks(report)
    state = report["checks"]["streams_state"]
    assert state["count"] == 1 and state["examples"][0]["key"] == keys[plant], state
    problems = set(state["examples"][0]["problems"])
    assert ({"repeated-input", "final-count"} if plant == "double" else {"sequence", "final-count"}) <= problems
