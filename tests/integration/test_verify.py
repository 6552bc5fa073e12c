"""`txnlab verify` on runs of the real cluster: a clean run is valid, and so is a clean but noisy one (foreign
JSON with an `id`, an empty id header, an outsider's committed and aborted transactions in a run topic,
uncertain sends and commits that landed, storm writes on the copier's input); planted anomalies (a record
re-sent outside any transaction, another into a lower partition, a committed attempt recorded as failed,
acknowledged writes that were never sent, an acknowledgement at an offset holding another record, a
processor output whose history names another input, a record of the run no history wrote, a read_committed
consumer moved past committed records) each show as exactly their own anomaly; topics that cannot be read
to the recorded end offsets, an acknowledged offset the log lacks, and incomplete evidence (an emptied or
cut history part, no group offsets, a written topic without end offsets, an invoke without its completion)
make the verdict unknown with the reason, never valid. The clean run and every planted copy are verified in
ONE `txnlab verify` call (one Spark session), as a user verifies many runs, through the session's Spark Connect
server (conftest.py); the clean run and the anomalies again by spark-submit on local[*], and through a Connect
server on a real Spark standalone cluster (`txnlab spark up --connect`: a master and 2 workers), with the same
reports; and every run archived (`txnlab archive`) and verified again offline, from its archive alone, with the
same verdicts and counts."""
from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.record.history import read_history
from chaos.record.ids import attempt_id, encode_value, headers, record_id
from chaos.runner.experiment import Experiment
from chaos.runner.spec import parse_spec
from chaos.nemesis.backends import LocalBackend
from cluster.access.reads import partition_offsets, read_to_end
from tests.integration.conftest import CAMPAIGN, TEST_BASE_PORT, cluster_state_dir
from tests.integration.test_experiments import drop_run_topics
from tests.cli import txnlab

pytestmark = pytest.mark.timeout(1200)        # the first test's setup: the clean run and one verify of 10 runs
CHECKS = {"duplicate", "aborted_read", "lost_write", "torn_transaction", "nonmonotonic_send", "inconsistent_offsets",
          "exactly_once_processing", "exactly_once_copy", "open_at_end", "unaccounted", "poll_skip", "nonmonotonic_poll",
          "unseen", "streams_processing", "streams_state"}


def clean_spec() -> dict:
    # no Kafka Streams application: its checks on a real application are test_streams.py's (valid, every count
    # exact), their anomalies tests/unit/test_streams_checks.py's; here they are reported as not applying
    return {"name": "verify-clean", "description": "no faults: producers, processors, Kafka's copier, observers",
            "cluster": {"local": {"state_dir": str(cluster_state_dir()), "base_port": TEST_BASE_PORT}},
            "workloads": [{"workload": "txn-producer", "instances": 2}, {"workload": "processor", "instances": 2},
                          # a copier stopped at the run's end mid-transaction (SIGTERM: Kafka's tool closes its
                          # producer without aborting) leaves it open until its timeout: 10 s, inside quiescence's 30
                          {"workload": "java-copier", "options": ["--messages", "300", "--transaction-timeout-ms", "10000"]}],
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
def run_tag(run) -> str:
    return json.loads((run / "spec.json").read_text())["run_tag"]


def send(conn, records, **config) -> list[int]:
    """(topic, partition, value, headers) each, by one producer: their acknowledged offsets."""
    producer, offsets = Producer(conn.confluent(**config)), [None] * len(records)
    for i, (topic, partition, value, hdrs) in enumerate(records):   # delivery reports come in any order
        producer.produce(topic, partition=partition, value=value, headers=hdrs,
                         on_delivery=lambda err, msg, i=i: offsets.__setitem__(i, None if err else msg.offset()))
    assert producer.flush(30) == 0 and None not in offsets, offsets
    return offsets


def plant_noise(run, conn) -> int:
    """Clean-but-noisy: what must stay valid. Foreign JSON with an `id` (and another run's id), an empty
    txnlab.id header; an outsider's transactions, one committed, one aborted, into a run topic; a
    VerifiableProducer send recorded uncertain (invoke + info) that landed and was copied; a committed
    attempt recorded uncertain (info); storm writes of this run on the copier's input, acknowledged. Returns
    the foreign records planted."""
    tag, ops = run_tag(run), read_history(run).ops
    topic = txn_attempts(run)[0]["value"]["writes"][0]["topic"]
    copier_input = next(op["value"]["args"][op["value"]["args"].index("--input-topic") + 1] for op in ops
                        if op["f"] == "jvm" and op["value"].get("tool") == "TransactionalMessageCopier")
    send(conn, [(topic, 0, json.dumps({"id": "order-17", "amount": 3}).encode(), None),
                (topic, 0, json.dumps({"id": "rother.txp-0.1.0", "attempt": "rother.txp-0.1"}).encode(), None),
                (topic, 0, b"plain", [("txnlab.id", b"")])], **{"enable.idempotence": True})
    outsider = Producer(conn.confluent(**{"transactional.id": f"outsider-{run.name}"}))
    outsider.init_transactions(30)
    for abort in (False, True):
        outsider.begin_transaction()
        outsider.produce(topic, partition=1, value=json.dumps({"id": "order-18", "abort": abort}).encode())
        outsider.abort_transaction(30) if abort else outsider.commit_transaction(30)
    storm = [(record_id(tag, "noise-t0", n, 0), attempt_id(tag, "noise-t0", n)) for n in range(3)]
    offsets = send(conn, [(copier_input, 0, encode_value(rid, attempt, "noise-t0"), headers(rid, attempt, "noise-t0"))
                          for rid, attempt in storm], **{"enable.idempotence": True})
    uncertain_commit = txn_attempts(run)[-1]["value"]["attempt"]

    def change(ops):
        relabelled = False
        for op in ops:
            if op["f"] == "produce" and op["type"] == "ok" and op["process"] == "java-vp" and not relabelled:
                relabelled, sent = True, {k: v for k, v in op["value"].items() if k not in ("offset", "partition")}
                yield {**op, "type": "invoke", "value": sent}
                op = {**op, "type": "info", "value": {**sent, "error": "planted: no acknowledgement"}}
            elif op["f"] == "txn" and op["type"] == "ok" and op["value"].get("attempt") == uncertain_commit:
                op = {**op, "type": "info", "value": {k: v for k, v in op["value"].items() if k != "offsets"}}
            yield op
        last, base = ops[-1]["time"], {"wall": ops[-1]["wall"], "process": "noise-t0", "f": "produce"}
        for i, ((rid, attempt), offset) in enumerate(zip(storm, offsets)):
            value = {"attempt": attempt, "producer": "noise-t0", "id": rid, "topic": copier_input, "partition": 0}
            yield {**base, "time": last + 2 * i + 1, "type": "invoke", "value": value}
            yield {**base, "time": last + 2 * i + 2, "type": "ok", "value": {**value, "offset": offset}}
    rewrite_history(run, change)
    record_end_offsets(conn, run)
    return 5


def plant_anomalies(run, conn) -> dict:
    """On a noisy copy: a committed record re-sent with the same bytes by a non-transactional producer, and
    another into a lower partition (with its headers); a committed attempt recorded as failed; an
    acknowledged attempt that was never sent, and an acknowledged storm send that is not in the log; an
    attempt acknowledged at an offset that holds another record; a processor output whose history names
    another input than the record; a record with an id of this run that no history wrote."""
    attempts, tag = txn_attempts(run), run_tag(run)
    resent, relabelled, misplaced = attempts[0], attempts[1], attempts[2]
    target = resent["value"]["writes"][0]
    original = next(r for r in read_to_end(conn, target["topic"], committed=True)
                    if r.value and f'"{target["id"]}"'.encode() in r.value)
    lower = next((a, w) for a in attempts[3:] for w in a["value"]["writes"] if w["partition"] > 0)
    lower_value = next(r.value for r in read_to_end(conn, lower[1]["topic"], committed=True)
                       if r.value and f'"{lower[1]["id"]}"'.encode() in r.value)
    stray = record_id(tag, resent["process"], 88888, 0)
    send(conn, [(target["topic"], target["partition"], original.value, None),
                (lower[1]["topic"], 0, lower_value, headers(lower[1]["id"], lower[0]["value"]["attempt"], lower[0]["process"])),
                (target["topic"], 0, encode_value(stray, stray.rsplit(".", 1)[0], resent["process"]),
                 headers(stray, stray.rsplit(".", 1)[0], resent["process"]))], **{"enable.idempotence": False})
    ghost_attempt = f"{relabelled['value']['attempt'].rsplit('.', 1)[0]}.99999"
    ghost = {**relabelled["value"], "attempt": ghost_attempt,                # acknowledged past the log's end
             "writes": [{**w, "id": f"{ghost_attempt}.{i}"} for i, w in enumerate(relabelled["value"]["writes"][:3])],
             "offsets": [10**9 + i for i in range(3)]}
    w0 = misplaced["value"]["writes"][0]
    other_offset = next(a["value"]["offsets"][i] for a in attempts[3:] for i, w in enumerate(a["value"]["writes"])
                        if (w["topic"], w["partition"]) == (w0["topic"], w0["partition"]) and a["value"]["offsets"][i] >= 0)
    lost_send = {"attempt": attempt_id(tag, "storm-t0", 0), "producer": "storm-t0", "id": record_id(tag, "storm-t0", 0, 0),
                 "topic": target["topic"], "partition": 0}
    mismatch = {}
    more, more_expected, close_open = plant_more_anomalies(run, conn, attempts)
    torn = more_expected.pop("torn_ghost")

    def change(ops):
        for op in ops:
            attempt = op["value"].get("attempt") if isinstance(op["value"], dict) else None
            if op["f"] == "txn" and attempt == more_expected["torn_transaction"][0]:
                value = {k: v for k, v in op["value"].items() if k != "offsets"}
                op = {**op, "type": "info" if op["type"] == "ok" else op["type"],
                      "value": {**value, "writes": [*value["writes"], {**value["writes"][0], "id": torn}]}}
            if op["f"] == "txn" and op["type"] == "ok" and attempt == relabelled["value"]["attempt"]:
                op = {**op, "type": "fail"}
            elif op["f"] == "txn" and op["type"] == "ok" and attempt == misplaced["value"]["attempt"]:
                op = {**op, "value": {**op["value"], "offsets": [other_offset, *op["value"]["offsets"][1:]]}}
            elif (not mismatch and op["f"] == "process" and op["type"] == "invoke"
                  and len({w["input"] for w in op["value"].get("writes", [])}) > 1):
                writes = op["value"]["writes"]
                mismatch.update(id=writes[0]["id"], input=writes[0]["input"])
                op = {**op, "value": {**op["value"], "writes": [{**writes[0], "input": writes[1]["input"]}, *writes[1:]]}}
            yield op
        last = ops[-1]["time"]
        yield {**relabelled, "time": last + 1, "type": "invoke", "value": ghost}
        yield {**relabelled, "time": last + 2, "type": "ok", "value": ghost}
        base = {"wall": ops[-1]["wall"], "process": "storm-t0", "f": "produce"}
        yield {**base, "time": last + 3, "type": "invoke", "value": lost_send}
        yield {**base, "time": last + 4, "type": "ok", "value": {**lost_send, "offset": 10**9}}
        for i, line in enumerate(more, 5):
            yield {"wall": ops[-1]["wall"], **line, "time": last + i}
    rewrite_history(run, change)
    record_end_offsets(conn, run)
    close_open()
    assert mismatch, "no processor attempt wrote outputs of two inputs"
    return {"duplicate": sorted([target["id"], lower[1]["id"]]),
            "aborted_read": sorted(w["id"] for w in relabelled["value"]["writes"]),
            "lost_write": sorted([*(w["id"] for w in ghost["writes"]), lost_send["id"]]),
            "inconsistent_offsets": [("acknowledged write", w0["topic"], w0["partition"], other_offset, w0["id"])],
            "exactly_once_processing": [("input-mismatch", mismatch["input"], [mismatch["id"]])],
            "unaccounted": [(stray, "txn")], **more_expected}


def plant_more_anomalies(run, conn, attempts) -> tuple[list[dict], dict, object]:
    """The rest of the anomaly classes, on real records: a torn transaction (an uncertain attempt of which the
    log holds 2 of 3 writes), a transactional producer's records out of order, an acknowledged write no
    read_committed consumer polled though one polled past it, a copier output copied twice, a transaction
    left open at the end. Returns (history lines to append, expected, a callback run after the end offsets
    are recorded: it aborts the open transaction)."""
    tag, process = run_tag(run), attempts[0]["process"]
    ops = read_history(run).ops
    torn = attempts[-1]
    ends = json.loads((run / "end_offsets.json").read_text())
    topic = torn["value"]["writes"][0]["topic"]
    partitions = sorted(int(p) for p in ends[topic])
    late, seen_p = partitions[-1], partitions[-2]            # partitions for the reorder and the unseen write

    def attempt(n, partition):
        a = attempt_id(tag, process, n)
        return a, record_id(tag, process, n, 0), {"topic": topic, "partition": partition}
    reordered = [attempt(77778, late), attempt(77777, late)]           # the later attempt's record first
    unseen = [attempt(66666, seen_p), attempt(66667, seen_p)]          # the first is never polled
    offsets = send(conn, [(w["topic"], w["partition"], encode_value(rid, a, process), headers(rid, a, process))
                          for a, rid, w in reordered + unseen], **{"enable.idempotence": True})
    lines = []
    for (a, rid, w), offset in zip(reordered + unseen, offsets):
        value = {"attempt": a, "producer": process, "writes": [{**w, "id": rid}]}
        lines += [{"process": process, "type": "invoke", "f": "txn", "value": value},
                  {"process": process, "type": "ok", "f": "txn", "value": {**value, "offsets": [offset]}}]
    lines += [{"process": "test-unseen", "type": "ok", "f": "seek", "value": {
                  "isolation": "read_committed", "reason": "assigned",
                  "positions": [{"topic": topic, "partition": seen_p, "offset": None}]}},
              {"process": "test-unseen", "type": "ok", "f": "poll", "value": {
                  "isolation": "read_committed",
                  "records": [{"topic": topic, "partition": seen_p, "offset": offsets[3], "id": unseen[1][1]}]}}]
    copier_output = next(op["value"]["args"][op["value"]["args"].index("--output-topic") + 1] for op in ops
                         if op["f"] == "jvm" and op["value"].get("tool") == "TransactionalMessageCopier")
    copied = next(r for r in read_to_end(conn, copier_output, committed=True) if r.value)
    send(conn, [(copier_output, copied.partition, copied.value, None)], **{"enable.idempotence": True})
    outsider = Producer(conn.confluent(**{"transactional.id": f"open-{run.name}"}))
    outsider.init_transactions(30)
    outsider.begin_transaction()
    outsider.produce(topic, partition=0, value=b"left open")
    assert outsider.flush(30) == 0
    ghost = record_id(tag, torn["process"], int(torn["value"]["attempt"].rsplit(".", 1)[1]), 999)
    expected = {"torn_transaction": [torn["value"]["attempt"]], "nonmonotonic_send": [reordered[1][1]],
                "unseen": [unseen[0][1]], "exactly_once_copy": [("duplicate-output", copied.value.decode())],
                "open_at_end": [(topic, 0)], "torn_ghost": ghost}
    return lines, expected, lambda: outsider.abort_transaction(30)


def plant_hole(run, conn) -> str:
    """An attempt acknowledged at an offset inside the recorded range that the log does not hold (a
    transaction marker's: as if the record had been compacted away)."""
    attempt = txn_attempts(run)[0]
    w = attempt["value"]["writes"][0]
    hwm = json.loads((run / "end_offsets.json").read_text())[w["topic"]][str(w["partition"])]["hwm"]
    held = {r.offset for r in read_to_end(conn, w["topic"], committed=False) if r.partition == w["partition"]}
    marker = min(o for o in range(hwm) if o not in held)

    def change(ops):
        for op in ops:
            if op["f"] == "txn" and op["type"] == "ok" and op["value"].get("attempt") == attempt["value"]["attempt"]:
                op = {**op, "value": {**op["value"], "offsets": [marker, *op["value"]["offsets"][1:]]}}
            yield op
    rewrite_history(run, change)
    return f"{w['topic']}-{w['partition']}: 1 acknowledged offset(s) inside the recorded range are not in the log " \
           f"(e.g. {marker})"


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
    from chaos.workloads.confluent.observer import record_id_of
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
        # another consumer polls the first three records, then the second again with no seek: nonmonotonic
        back = {**base, "process": "test-back", "f": "poll"}
        for i, records in enumerate([[p[0] for p in polls[:3]], [polls[1][0]]], len(polls) + 2):
            yield {**back, "time": last + i, "value": {"isolation": "read_committed", "records": records}}
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
            "no-groups": (no_groups, "no group_offsets.json, but the run has consumers (processors, copiers, Streams)"),
            "no-topic": (no_topic, f"topic {dropped_topic} was written to (history) but end_offsets.json does not"),
            "no-completion": (no_completion, "1 invoke(s) without their completion (e.g. process txp-")}


@pytest.fixture(scope="module")
def verified(clean_run, cluster, tmp_path_factory):
    """Every plant on its own copy, then one `txnlab verify` over the clean run and all copies:
    (reports by name, what each plant expects, the verify log)."""
    conn, base = cluster.connection(), tmp_path_factory.mktemp("planted")
    runs = {"clean": clean_run, **{name: copy_run(clean_run, base / name) for name in
                                   ("noisy", "unreachable-end", "poll-skip", "hole", *incomplete_evidence(clean_run))}}
    # the plants write to the run's topics: the noise first, the anomalies on a copy of the noisy run
    expected = {"noisy": plant_noise(runs["noisy"], conn)}
    runs["anomalies"] = copy_run(runs["noisy"], base / "anomalies")
    expected.update({"anomalies": plant_anomalies(runs["anomalies"], conn),
                     "unreachable-end": plant_unreachable_end(runs["unreachable-end"]),
                     "poll-skip": plant_poll_skip(runs["poll-skip"], conn),
                     "hole": plant_hole(runs["hole"], conn)})
    for name, (plant, reason) in incomplete_evidence(clean_run).items():
        plant(runs[name])
        expected[name] = reason
    for run in runs.values():
        shutil.rmtree(run / "verify", ignore_errors=True)
    proc = txnlab("verify", *map(str, runs.values()), "--examples", "50", timeout=1400)
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
    assert all(report["checks"][c]["applies"] is False and report["checks"][c]["why"]      # no Streams application
               for c in ("streams_processing", "streams_state"))
    assert all(c.get("applies", True) for name, c in report["checks"].items() if not name.startswith("streams_"))
    html = (clean_run / "verify" / "report.html").read_text()
    assert "exactly_once_processing" in html and "valid" in html


def test_a_clean_but_noisy_run_stays_valid(verified):
    reports, expected, log = verified
    report = reports["noisy"]
    assert report["valid"] is True, (failing_checks(report), report["evidence"], log)
    assert report["unrecognised"]["count"] >= expected["noisy"]       # foreign, counted, never an anomaly
    assert report["info_attempts"]["committed"] >= 1                  # the uncertain commit that landed


def test_planted_anomalies_are_each_reported_as_exactly_themselves(verified):
    reports, expected, log = verified
    report, want = reports["anomalies"], expected["anomalies"]
    assert report["valid"] is False, log
    checks = report["checks"]
    assert sorted(e["id"] for e in checks["duplicate"]["examples"]) == want["duplicate"]
    assert sorted(e["id"] for e in checks["aborted_read"]["examples"]) == want["aborted_read"]
    assert sorted(e["id"] for e in checks["lost_write"]["examples"]) == want["lost_write"]
    assert [(e["reader"], e["topic"], e["partition"], e["offset"], e["id"])
            for e in checks["inconsistent_offsets"]["examples"]] == want["inconsistent_offsets"]
    assert [(e["problem"], e["input"], e["outputs"])
            for e in checks["exactly_once_processing"]["examples"]] == want["exactly_once_processing"]
    assert checks["exactly_once_processing"]["problems"] == dict(Counter(p for p, *_ in want["exactly_once_processing"]))
    assert [(e["id"], e["kind"]) for e in checks["unaccounted"]["examples"]] == want["unaccounted"]
    assert [e["attempt"] for e in checks["torn_transaction"]["examples"]] == want["torn_transaction"]
    assert [e["id"] for e in checks["nonmonotonic_send"]["examples"]] == want["nonmonotonic_send"]
    assert [e["id"] for e in checks["unseen"]["examples"]] == want["unseen"]
    assert [(e["problem"], e["input"]) for e in checks["exactly_once_copy"]["examples"]] == want["exactly_once_copy"]
    assert [(e["topic"], e["partition"]) for e in checks["open_at_end"]["examples"]] == want["open_at_end"]
    assert set(failing_checks(report)) == {"duplicate", "aborted_read", "lost_write", "inconsistent_offsets",
                                           "exactly_once_processing", "unaccounted", "torn_transaction",
                                           "nonmonotonic_send", "unseen", "exactly_once_copy", "open_at_end"}, \
        failing_checks(report)
    assert all(c["count"] == len(c["examples"]) for c in checks.values()), failing_checks(report)   # each once


def test_an_acknowledged_offset_the_log_lacks_makes_the_verdict_unknown(verified):
    reports, expected, log = verified
    report = reports["hole"]
    assert report["valid"] == "unknown" and not report["evidence"]["complete"], log
    assert any(gap.startswith(expected["hole"]) for gap in report["evidence"]["gaps"]), report["evidence"]["gaps"]
    assert all(c["valid"] == "unknown" for c in report["checks"].values())


def test_a_read_committed_consumer_moved_past_committed_records_is_a_poll_skip(verified):
    """Issue 17's must-show: poll_skip with exactly the skipped offsets; and another consumer's poll going
    back without a seek, nonmonotonic_poll; nothing else."""
    reports, expected, log = verified
    report, (topic, visible) = reports["poll-skip"], expected["poll-skip"]
    assert report["valid"] is False, log
    got = [(e["consumer"], e["topic"], e["partition"], e["previous"], e["offset"], e["count"], e["skipped"])
           for e in report["checks"]["poll_skip"]["examples"]]
    assert got == [("test-rc", topic, 0, visible[2], visible[6], 3, visible[3:6])]
    back = [(e["consumer"], e["topic"], e["partition"], e["previous"], e["offset"])
            for e in report["checks"]["nonmonotonic_poll"]["examples"]]
    assert back == [("test-back", topic, 0, visible[2], visible[1])]
    assert set(failing_checks(report)) == {"poll_skip", "nonmonotonic_poll"}, failing_checks(report)


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


# ---- a real Spark standalone cluster -----------------------------------------------------------------
SPARK_BASE_PORT = 31400          # txnlab spark up's default is 31200: a user's own cluster keeps running


def comparable(report: dict):
    """A report without what may differ between two verifications of the same data (its path, timings,
    the order examples were collected in)."""
    def norm(value):
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items() if k not in ("run", "seconds")}
        if isinstance(value, list):
            return sorted((norm(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
        return value
    return norm(report)


@CAMPAIGN          # the gate's spark-submit: the corpus's offline verification (tests/corpus/conftest.py)
def test_without_a_connect_server_spark_submit_gives_the_same_reports(verified, tmp_path):
    """The session verifies through its shared Spark Connect server (conftest.py); the clean run and the
    planted anomalies verified again by spark-submit on local[*] (`--remote ''`): report.json identical but
    for the run's path and the seconds."""
    reports, _, log = verified
    assert os.environ.get("TXNLAB_SPARK_REMOTE", "").startswith("sc://127.0.0.1:"), "no shared Connect server"
    assert "Spark did not start" not in log
    runs = {name: copy_run(Path(reports[name]["run"]), tmp_path / name) for name in ("clean", "anomalies")}
    proc = txnlab("verify", *map(str, runs.values()), "--remote", "", "--examples", "50", timeout=900)
    assert proc.returncode == 1, proc.stderr[-4000:]
    for name, run in runs.items():
        submitted = json.loads((run / "verify" / "report.json").read_text())
        assert {k: v for k, v in submitted.items() if k not in ("run", "seconds")} == \
            {k: v for k, v in reports[name].items() if k not in ("run", "seconds")}, name


def test_offline_verification_of_the_runs_archives_gives_the_live_verdicts_and_counts(verified, tmp_path):
    """The runs of the session's verification whose verdict depends on what the views hold (the clean run, the
    noisy one, the planted anomalies, the hole, the poll-skip, a topic that no longer reaches its recorded end)
    and one piece of missing evidence (the others are judged from the run's files before any view is read,
    offline as live) archived on demand (`txnlab archive`), then verified `--offline` with a bootstrap nobody
    listens on (nothing is asked of the cluster): the same verdict, evidence and checks (validity, counts,
    examples) and record counts as the live reports; the unreachable end is unknown from the archive too, which
    says where its read stopped. An archive cut afterwards makes its run unknown, never valid."""
    reports, _, log = verified
    runs = {name: copy_run(Path(reports[name]["run"]), tmp_path / name)
            for name in ("clean", "noisy", "anomalies", "hole", "poll-skip", "unreachable-end", "emptied")}
    archived = txnlab("archive", *map(str, runs.values()), timeout=600)
    assert archived.returncode == 0, archived.stderr[-3000:]
    runs["cut-archive"] = copy_run(runs["clean"], tmp_path / "cut-archive")
    view = runs["cut-archive"] / "archive" / "committed.parquet"
    view.write_bytes(view.read_bytes()[:-100])
    env = {**os.environ, "TXNLAB_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    proc = txnlab("verify", *map(str, runs.values()), "--offline", "--examples", "50", timeout=1200, env=env)
    offline = {name: json.loads((run / "verify" / "report.json").read_text()) for name, run in runs.items()}
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert {r["views_from"] for r in offline.values()} == {"archive"}
    assert {reports[name]["views_from"] for name in runs if name in reports} == {"kafka"}
    for name in runs.keys() - {"cut-archive"}:
        said, kept = comparable(offline[name]), comparable(reports[name])
        said.pop("views_from"), kept.pop("views_from")
        if name == "unreachable-end":            # the live gap says the HWM, the archive's where its read stopped
            assert any("read only to offset" in gap for gap in said["evidence"].pop("gaps")), offline[name]
            kept["evidence"].pop("gaps")
        assert said == kept, name
    cut = offline["cut-archive"]
    assert cut["valid"] == "unknown" and any("committed.parquet is cut or changed" in gap
                                             for gap in cut["evidence"]["gaps"]), cut["evidence"]


def test_a_connect_server_on_a_standalone_spark_cluster_gives_the_local_reports_and_leaves_no_process(
        verified, tmp_path):
    """`txnlab spark up --connect` (a master, 2 workers and a Spark Connect server on them), the planted anomalies
    verified through it (executors on both workers): report.json equal to local[*]'s, every planted duplicate
    counted once; `down` leaves no process of the cluster (nor an executor)."""
    import psutil
    from cluster.lab.spark_layout import StandalonePlan
    from spark_analysis.standalone import StandaloneCluster, alive_workers, master_state
    reports, expected, log = verified
    runs = {name: copy_run(Path(reports[name]["run"]), tmp_path / name) for name in ("anomalies",)}
    spark = StandaloneCluster(tmp_path / "spark", StandalonePlan(base_port=SPARK_BASE_PORT, workers=2, connect=True))
    stopped = []
    try:
        spark.up()
        state = master_state(spark.plan)
        assert state["status"] == "ALIVE" and len(alive_workers(state)) == 2, state
        status = txnlab("spark", "status", "--json", "--state-dir", str(spark.state_dir), timeout=60)
        assert status.returncode == 0 and json.loads(status.stdout)["connect_status"] == "ALIVE", status.stdout
        proc = txnlab("verify", *map(str, runs.values()), "--remote", spark.plan.connect_url, "--examples", "50",
                      timeout=900)
        apps = master_state(spark.plan)["activeapps"]
    finally:
        stopped = spark.down()
    assert proc.returncode == 1, proc.stderr[-4000:]                     # the anomalies
    assert [a["name"] for a in apps] == ["txnlab-verify-connect"], apps   # the server is the one application
    for i in range(2):                                                   # an executor ran on each worker
        assert list((spark.state_dir / f"work-{i}").glob("app-*/*/stderr")), f"no executor on worker {i}"
    standalone = {name: json.loads((run / "verify" / "report.json").read_text()) for name, run in runs.items()}
    duplicates = standalone["anomalies"]["checks"]["duplicate"]
    assert sorted(e["id"] for e in duplicates["examples"]) == expected["anomalies"]["duplicate"]
    assert duplicates["count"] == len(expected["anomalies"]["duplicate"])
    for name in runs:
        assert comparable(standalone[name]) == comparable(reports[name]), name
    assert stopped and not [p for p in stopped if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"])
            if any(str(spark.state_dir) in part or f":{SPARK_BASE_PORT}" in part for part in p.info["cmdline"] or [])]
    assert not left, left
