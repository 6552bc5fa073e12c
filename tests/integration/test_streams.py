"""Kafka Streams under chaos on the real cluster: the four built-in Streams experiments in short mode (a
partition leader killed, the coordinator of the application's transactional ids killed, an instance paused
past its timeouts into a zombie, an instance SIGKILLed with its JVM and started again), each with what every
short run must show (tests/integration/test_experiments.py run_short), all verified in ONE `txnlab verify`
call: valid, every count exact. A copy of the restart run with two planted anomalies on the counts topic, a
double count of one key and a lost update of another (each in its own partition), has each reported as
exactly one anomaly of streams_state (one per key), nothing else. The gate runs the restart (the framework once
through a fault); the other three and their tests are the campaign's (`-m campaign`, docs/testing.md)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Producer

from cluster.access.reads import partition_offsets, read_to_end
from tests.integration.conftest import CAMPAIGN, needed_runs
from tests.integration.test_experiments import STREAMS, nemesis, short_runs_of
from tests.integration.test_verify import copy_run, failing_checks
from tests.cli import txnlab

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1500)]


def streams_events(ops: list[dict], process: str, event: str) -> list[dict]:
    return [op for op in ops if op["process"] == process and op["f"] == "streams" and op["type"] == "ok"
            and op["value"].get("event") == event]


GATE = "streams-instance-restart"     # the framework once through a fault in the gate; the others the campaign's


@pytest.fixture(scope="module")
def experiments(cluster, tmp_path_factory, request):
    """{experiment: (run dir, its history's operations)} of the Streams built-ins in short mode that this module's
    selected tests read (needed_runs), the restart run always (the planted copy's base)."""
    return short_runs_of(needed_runs(request) | {GATE}, cluster, tmp_path_factory.mktemp("runs"),
                         request.addfinalizer)


def plant_update(conn, run_dir, ops, key_index: int, step: int) -> str:
    """A committed update of one key on the counts topic after its last one: count + step (1: the same input
    counted twice; 2: an update lost before it), the sum following; the copy's end offsets take it in (its
    partition's). Each key_index names a key of its own partition. Returns the key."""
    counts = next(op["value"]["counts"] for op in ops if op["f"] == "streams" and op["value"].get("event") == "topology")
    updates: dict[str, list] = {}
    for r in read_to_end(conn, counts, committed=True):
        updates.setdefault(r.key.decode(), []).append((r.partition, json.loads(r.value)))
    by_partition = {}
    for key in sorted(updates):                               # one key per partition: the plants do not meet
        by_partition.setdefault(updates[key][-1][0], key)
    key = sorted(by_partition.values())[key_index]
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
def verified(experiments, cluster, tmp_path_factory):
    """(reports by name: the experiments' and the planted copy's, the planted keys, the verify log)."""
    conn, base = cluster.connection(), tmp_path_factory.mktemp("planted")
    restart_dir, restart_ops = experiments["streams-instance-restart"]
    runs = {name: run_dir for name, (run_dir, _) in experiments.items()}
    runs["planted"] = copy_run(restart_dir, base / "planted")          # both plants, each in its own key
    keys = {"double": plant_update(conn, runs["planted"], restart_ops, 0, 1),
            "lost": plant_update(conn, runs["planted"], restart_ops, -1, 2)}
    assert keys["double"] != keys["lost"]
    proc = txnlab("verify", *map(str, runs.values()), "--examples", "20", timeout=900)
    reports = {name: json.loads((run / "verify" / "report.json").read_text()) for name, run in runs.items()}
    assert proc.returncode == 1, proc.stderr[-4000:]
    return reports, keys, proc.stderr[-4000:]


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n == GATE else CAMPAIGN) for n in sorted(STREAMS)])
def test_a_streams_experiment_in_short_mode_is_valid_with_every_count_exact(name, experiments, verified):
    run_dir, ops = experiments[name]
    reports, _, log = verified
    report = reports[name]
    assert report["valid"] is True, (failing_checks(report), report["evidence"], log)
    assert report["checks"]["streams_processing"]["count"] == 0 and report["checks"]["streams_state"]["count"] == 0
    groups = json.loads((run_dir / "group_offsets.json").read_text())
    app = next(op["value"]["application_id"] for op in ops if op["f"] == "streams")
    assert sum(o for parts in groups[app].values() for o in parts.values()) > 100, groups   # it processed
    for process in ("streams-0", "streams-1"):
        assert streams_events(ops, process, "progress"), f"{process} reported no progress"


def test_a_killed_instance_hands_its_tasks_over_and_restarts(experiments):
    run_dir, ops = experiments["streams-instance-restart"]
    tag = run_dir.name.rsplit("-", 1)[1]            # the killed JVM's state and RocksDB library went with the run
    assert not list(Path(tempfile.gettempdir()).glob(f"txnlab-run-{tag}-*"))
    killed, restarted = nemesis(ops, "fault")[0]["time"], nemesis(ops, "heal")[0]["time"]
    held = [e["value"]["active"] for e in streams_events(ops, "streams-1", "tasks") if e["time"] < killed]
    assert held and held[-1], "streams-1 held no task when it was killed"
    taken = {t for e in streams_events(ops, "streams-0", "tasks") if e["time"] > killed for t in e["value"]["active"]}
    assert set(held[-1]) & taken, (held[-1], taken)                     # the survivor ran the dead one's tasks
    assert len(streams_events(ops, "streams-1", "topology")) == 2          # started, killed, started again
    assert [e for e in streams_events(ops, "streams-1", "tasks") if e["time"] > restarted and e["value"]["active"]]


@CAMPAIGN
@pytest.mark.reads_runs("streams-zombie")
def test_a_paused_instance_comes_back_as_a_fenced_zombie_and_rejoins(experiments):
    _, ops = experiments["streams-zombie"]
    paused, resumed = nemesis(ops, "fault")[0]["time"], nemesis(ops, "heal")[0]["time"]
    taken = [e for e in streams_events(ops, "streams-1", "tasks") if paused < e["time"] < resumed]
    assert taken and len(taken[-1]["value"]["active"]) == 6, streams_events(ops, "streams-1", "tasks")
    back = [e["value"]["to"] for e in streams_events(ops, "streams-0", "state") if e["time"] > resumed]
    assert "REBALANCING" in back and "RUNNING" in back, back               # it rejoined, not died


def test_a_planted_double_count_and_lost_update_are_each_reported_once_and_nothing_else(verified):
    reports, keys, log = verified
    report = reports["planted"]
    assert report["valid"] is False, log
    assert set(failing_checks(report)) == {"streams_state"}, failing_checks(report)
    state = report["checks"]["streams_state"]
    assert state["count"] == 2, state
    problems = {e["key"]: set(e["problems"]) for e in state["examples"]}
    assert set(problems) == set(keys.values()), (problems, keys)
    assert {"repeated-input", "final-count"} <= problems[keys["double"]]
    assert {"sequence", "final-count"} <= problems[keys["lost"]]
