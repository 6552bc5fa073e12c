"""`txnlab verify` on runs of the real cluster: a clean run is valid; planted anomalies (a record re-sent
outside any transaction, a committed attempt recorded as failed, an acknowledged attempt that was never
sent, a read_committed consumer moved past committed records) each show as exactly their own anomaly;
topics that cannot be read to the recorded end offsets, and incomplete evidence (an emptied or cut history
part, no group offsets, a written topic without end offsets, an invoke without its completion) make the
verdict unknown with the reason, never valid. The clean run and every planted copy are verified in ONE
`txnlab verify` call (one Spark session), as a user verifies many runs."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from chaos.history import read_history
from chaos.experiment import Experiment
from chaos.spec import parse_spec
from chaos.backends import LocalBackend
from cluster.reads import partition_offsets, read_to_end
from tests.integration.conftest import TEST_BASE_PORT, cluster_state_dir
from tests.integration.test_experiments import drop_run_topics

pytestmark = pytest.mark.timeout(1200)        # the first test's setup: the clean run and one verify of 10 runs
CHECKS = {"duplicate", "aborted_read", "lost_write", "torn_transaction", "nonmonotonic_send", "inconsistent_offsets",
          "exactly_once_processing", "exactly_once_copy", "open_at_end", "poll_skip", "nonmonotonic_poll", "unseen"}


def clean_spec() -> dict:
    return {"name": "verify-clean", "description": "no faults: producers, processors, Kafka's copier, observers",
            "cluster": {"local": {"state_dir": str(cluster_state_dir()), "base_port": TEST_BASE_PORT}},
            "workloads": [{"workload": "txn-producer", "instances": 2}, {"workload": "processor", "instances": 2},
                          {"workload": "java-copier", "options": ["--messages", "300"]}],
            "duration_s": 20, "schedule": {"faults": []}, "quiescence": {"timeout_s": 30}}


@pytest.fixture(scope="module")
def clean_run(cluster, tmp_path_factory):
    result = Experiment(parse_spec(clean_spec(), "test"), seed=3, runs_dir=tmp_path_factory.mktemp("runs"),
                        progress=print, backend=LocalBackend(cluster)).run()
    assert result.steady, result.error
    yield result.run_dir
    drop_run_topics(cluster, result)


def copy_run(run_dir, tmp_path):
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("verify", "pids"))
    return copy


def txn_attempts(run_dir) -> list[dict]:
    """Completed `ok` attempts of the transactional producers (not the processors), in history order."""
    return [op for op in read_history(run_dir).ops
            if op["f"] == "txn" and op["type"] == "ok" and op["process"].startswith("txp-")]


def rewrite_history(run_dir, change) -> None:
    """Change part 0's operations, then seal it again as the writer would (its line count, the run's total)."""
    part = run_dir / "history" / "part-00000.jsonl"
    lines = [json.loads(line) for line in part.read_text().splitlines()]
    seal, ops = lines[-1], lines[:-1]
    assert seal["f"] == "seal", seal
    changed = list(change(ops))
    value = {**seal["value"], "lines": len(changed), "operations": seal["value"]["operations"] + len(changed) - len(ops)}
    part.write_text("".join(json.dumps(op) + "\n" for op in [*changed, {**seal, "value": value}]))


def record_end_offsets(conn, run_dir) -> None:
    ends = json.loads((run_dir / "end_offsets.json").read_text())
    for topic, parts in ends.items():
        ps = [int(p) for p in parts]
        hwm, lso = partition_offsets(conn, topic, ps, committed=False), partition_offsets(conn, topic, ps, committed=True)
        ends[topic] = {str(p): {"hwm": hwm[p], "lso": lso[p]} for p in ps}
    (run_dir / "end_offsets.json").write_text(json.dumps(ends))


# ---- the plants: each makes a copy of the clean run and says what verify must report -----------------
def plant_anomalies(run, conn) -> dict:
    """A committed record re-sent with the same id (the same bytes) by a non-transactional producer, a
    committed attempt recorded as failed, an acknowledged attempt that was never sent."""
    attempts = txn_attempts(run)
    resent, relabelled = attempts[0], attempts[1]
    target = resent["value"]["writes"][0]
    original = next(r for r in read_to_end(conn, target["topic"], committed=True)
                    if r.value and f'"{target["id"]}"'.encode() in r.value)
    producer = Producer(conn.confluent(**{"enable.idempotence": False}))
    producer.produce(target["topic"], partition=target["partition"], key=original.key, value=original.value)
    assert producer.flush(30) == 0
    ghost_attempt = f"{relabelled['value']['attempt'].rsplit('.', 1)[0]}.99999"
    ghost = {**relabelled["value"], "attempt": ghost_attempt,
             "writes": [{**w, "id": f"{ghost_attempt}.{i}"} for i, w in enumerate(relabelled["value"]["writes"][:3])]}

    def change(ops):
        for op in ops:
            if op["f"] == "txn" and op["type"] == "ok" and op["value"].get("attempt") == relabelled["value"]["attempt"]:
                op = {**op, "type": "fail"}
            yield op
        last = ops[-1]["time"]
        yield {**relabelled, "time": last + 1, "type": "invoke", "value": ghost}
        yield {**relabelled, "time": last + 2, "type": "ok", "value": ghost}
    rewrite_history(run, change)
    record_end_offsets(conn, run)
    return {"duplicate": [target["id"]], "aborted_read": sorted(w["id"] for w in relabelled["value"]["writes"]),
            "lost_write": sorted(w["id"] for w in ghost["writes"])}


def plant_unreachable_end(run) -> str:
    """The run says a topic ended further than it now reaches."""
    ends = json.loads((run / "end_offsets.json").read_text())
    topic = sorted(ends)[0]
    ends[topic]["0"]["hwm"] += 1000
    (run / "end_offsets.json").write_text(json.dumps(ends))
    return topic


def plant_poll_skip(run, conn) -> tuple[str, list[int]]:
    """A real read_committed consumer of partition 0 of the run's `-a` topic, three single-record polls,
    then moved past the next three committed records; its polls appended as consumer `test-rc`."""
    from confluent_kafka import Consumer, TopicPartition
    from chaos.workloads.observer import record_id_of
    ends = json.loads((run / "end_offsets.json").read_text())
    topic = next(t for t in sorted(ends) if t.endswith("-a"))
    end = ends[topic]["0"]["lso"]
    visible = sorted(r.offset for r in read_to_end(conn, topic, committed=True) if r.partition == 0 and r.offset < end)
    assert len(visible) >= 10, visible
    consumer = Consumer(conn.confluent(**{"group.id": f"txnlab-skip-{run.name}", "isolation.level": "read_committed",
                                          "enable.auto.commit": False, "log_level": 3}))
    polls = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while not polls or polls[-1][-1]["offset"] < visible[-1]:
            batch = [m for m in consumer.consume(num_messages=1 if len(polls) < 3 else 500, timeout=5)
                     if m.error() is None and m.offset() < end]
            if batch:
                polls.append([{"topic": topic, "partition": 0, "offset": m.offset(), "id": record_id_of(m)} for m in batch])
            if len(polls) == 3:
                consumer.seek(TopicPartition(topic, 0, visible[5] + 1))    # past visible[3:6]
    finally:
        consumer.close()
    assert [p[0]["offset"] for p in polls[:4]] == [visible[0], visible[1], visible[2], visible[6]]

    def change(ops):
        yield from ops
        last, base = ops[-1]["time"], {"wall": ops[-1]["wall"], "process": "test-rc", "type": "ok"}
        yield {**base, "time": last + 1, "f": "seek", "value": {"isolation": "read_committed", "reason": "start",
                                                                "positions": [{"topic": topic, "partition": 0, "offset": 0}]}}
        for i, records in enumerate(polls, 2):
            yield {**base, "time": last + i, "f": "poll", "value": {"isolation": "read_committed", "records": records}}
    rewrite_history(run, change)
    return topic, visible


def incomplete_evidence(clean_run) -> dict:
    """name -> (plant(run), the reason verify must give): each copy misses one piece of evidence."""
    last = sorted((clean_run / "history").glob("part-*.jsonl"))[-1].name
    ends = json.loads((clean_run / "end_offsets.json").read_text())
    dropped_topic = sorted(ends)[0]

    def emptied(run):
        (run / "history" / last).write_bytes(b"")

    def cut(run):
        part = run / "history" / last
        part.write_text("".join(part.read_text().splitlines(keepends=True)[:-1]))

    def no_groups(run):
        (run / "group_offsets.json").unlink()

    def no_topic(run):
        (run / "end_offsets.json").write_text(json.dumps({t: p for t, p in ends.items() if t != dropped_topic}))

    def no_completion(run):
        def change(ops):
            gone = next(i for i, op in enumerate(ops) if op["f"] == "txn" and op["type"] == "invoke")
            completion = next(i for i, op in enumerate(ops) if i > gone and op["process"] == ops[gone]["process"])
            return ops[:completion] + ops[completion + 1:]
        rewrite_history(run, change)
    return {"emptied": (emptied, f"history/{last} is empty (0 bytes)"),
            "cut": (cut, f"history/{last} is cut: its last line is not its seal"),
            "no-groups": (no_groups, "no group_offsets.json, but the run has processors or copiers"),
            "no-topic": (no_topic, f"topic {dropped_topic} was written to (history) but end_offsets.json does not"),
            "no-completion": (no_completion, "1 invoke(s) without their completion (e.g. process txp-")}


@pytest.fixture(scope="module")
def verified(clean_run, cluster, tmp_path_factory):
    """Every plant on its own copy, then one `txnlab verify` over the clean run and all copies:
    (reports by name, what each plant expects, the verify log)."""
    conn, base = cluster.connection(), tmp_path_factory.mktemp("planted")
    runs = {"clean": clean_run, **{name: copy_run(clean_run, base / name)
                                   for name in ("anomalies", "unreachable-end", "poll-skip", *incomplete_evidence(clean_run))}}
    expected = {"anomalies": plant_anomalies(runs["anomalies"], conn),
                "unreachable-end": plant_unreachable_end(runs["unreachable-end"]),
                "poll-skip": plant_poll_skip(runs["poll-skip"], conn)}
    for name, (plant, reason) in incomplete_evidence(clean_run).items():
        plant(runs[name])
        expected[name] = reason
    for run in runs.values():
        shutil.rmtree(run / "verify", ignore_errors=True)
    proc = subprocess.run([sys.executable, "-m", "txnlab.cli", "verify", *map(str, runs.values()), "--examples", "50"],
                          capture_output=True, text=True, timeout=1400)
    reports = {name: json.loads((run / "verify" / "report.json").read_text())
               for name, run in runs.items() if (run / "verify" / "report.json").exists()}
    log = proc.stderr[-4000:]
    assert proc.returncode == 2 and set(reports) == set(runs), log           # the worst of the runs: unknown
    return reports, expected, log


def failing_checks(report: dict) -> dict:
    return {name: c["examples"][:3] for name, c in report["checks"].items() if c["valid"] is not True}


# ---- the verdicts -------------------------------------------------------------------------------------
def test_a_clean_run_verifies_valid(clean_run, verified):
    reports, _, log = verified
    report = reports["clean"]
    assert report["valid"] is True and set(report["checks"]) == CHECKS, log
    assert report["evidence"] == {"complete": True, "gaps": []}
    assert all(c["valid"] is True and c["count"] == 0 for c in report["checks"].values())
    assert report["counts"]["records"]["read_committed"] > 300
    assert report["counts"]["attempts"]["ok"] > 0 and report["counts"]["attempts"]["fail"] > 0
    assert report["unrecognised"]["count"] == 0
    groups = json.loads((clean_run / "group_offsets.json").read_text())
    assert any(g.endswith(".eos") for g in groups) and any(g.endswith(".java-copier") for g in groups), groups
    html = (clean_run / "verify" / "report.html").read_text()
    assert "exactly_once_processing" in html and "valid" in html


def test_planted_anomalies_are_each_reported_as_exactly_themselves(verified):
    reports, expected, log = verified
    report, want = reports["anomalies"], expected["anomalies"]
    assert report["valid"] is False, log
    checks = report["checks"]
    assert [e["id"] for e in checks["duplicate"]["examples"]] == want["duplicate"]
    assert sorted(e["id"] for e in checks["aborted_read"]["examples"]) == want["aborted_read"]
    assert sorted(e["id"] for e in checks["lost_write"]["examples"]) == want["lost_write"]
    assert set(failing_checks(report)) == {"duplicate", "aborted_read", "lost_write"}, failing_checks(report)


def test_a_read_committed_consumer_moved_past_committed_records_is_a_poll_skip(verified):
    """Issue 17's must-show: poll_skip with exactly the skipped offsets, and nothing else."""
    reports, expected, log = verified
    report, (topic, visible) = reports["poll-skip"], expected["poll-skip"]
    assert report["valid"] is False, log
    got = [(e["consumer"], e["topic"], e["partition"], e["previous"], e["offset"], e["count"], e["skipped"])
           for e in report["checks"]["poll_skip"]["examples"]]
    assert got == [("test-rc", topic, 0, visible[2], visible[6], 3, visible[3:6])]
    assert set(failing_checks(report)) == {"poll_skip"}, failing_checks(report)


def test_topics_that_cannot_be_read_to_the_recorded_end_make_the_verdict_unknown(verified):
    reports, expected, log = verified
    report, topic = reports["unreachable-end"], expected["unreachable-end"]
    assert report["valid"] == "unknown" and not report["evidence"]["complete"], log
    assert any(f"{topic}-0" in gap for gap in report["evidence"]["gaps"])
    assert all(c["valid"] == "unknown" for c in report["checks"].values())


@pytest.mark.parametrize("name", ["emptied", "cut", "no-groups", "no-topic", "no-completion"])
def test_incomplete_evidence_planted_into_a_copy_of_a_clean_run_is_unknown_with_its_reason(verified, name):
    reports, expected, log = verified
    report, reason = reports[name], expected[name]
    gaps = report["evidence"]["gaps"]
    assert report["valid"] == "unknown" and not report["evidence"]["complete"], (gaps, log)
    assert any(gap.startswith(reason) for gap in gaps), (reason, gaps)
    assert all(c["valid"] == "unknown" for c in report["checks"].values())
