"""`txnlab verify` on runs of the real cluster: a clean run is valid; planted anomalies (a record re-sent
outside any transaction, a committed attempt recorded as failed, an acknowledged attempt that was never
sent) each show as exactly their own anomaly; topics that cannot be read to the recorded end offsets make
the verdict unknown, never valid."""
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

CHECKS = {"duplicate", "aborted_read", "lost_write", "torn_transaction", "nonmonotonic_send", "inconsistent_offsets",
          "exactly_once_processing", "exactly_once_copy", "open_at_end"}


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


def verify(run_dir, *extra) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, "-m", "txnlab.cli", "verify", str(run_dir), "--json", "--examples", "50",
                           *extra], capture_output=True, text=True, timeout=600)
    report_path = run_dir / "verify" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return proc.returncode, report, proc.stderr[-3000:]


def test_a_clean_run_verifies_valid(clean_run):
    code, report, log = verify(clean_run)
    assert code == 0, log
    assert report["valid"] is True and set(report["checks"]) == CHECKS
    assert all(c["valid"] is True and c["count"] == 0 for c in report["checks"].values())
    assert report["counts"]["records"]["read_committed"] > 300
    assert report["counts"]["attempts"]["ok"] > 0 and report["counts"]["attempts"]["fail"] > 0
    assert report["unrecognised"]["count"] == 0
    groups = json.loads((clean_run / "group_offsets.json").read_text())
    assert any(g.endswith(".eos") for g in groups) and any(g.endswith(".java-copier") for g in groups), groups
    html = (clean_run / "verify" / "report.html").read_text()
    assert "exactly_once_processing" in html and "valid" in html


def copy_run(run_dir, tmp_path):
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("verify", "pids"))
    return copy


def txn_attempts(run_dir) -> list[dict]:
    """Completed `ok` attempts of the transactional producers (not the processors), in history order."""
    return [op for op in read_history(run_dir).ops
            if op["f"] == "txn" and op["type"] == "ok" and op["process"].startswith("txp-")]


def rewrite_history(run_dir, change) -> None:
    part = run_dir / "history" / "part-00000.jsonl"
    lines = [json.loads(line) for line in part.read_text().splitlines()]
    part.write_text("".join(json.dumps(op) + "\n" for op in change(lines)))


def record_end_offsets(conn, run_dir) -> None:
    ends = json.loads((run_dir / "end_offsets.json").read_text())
    for topic, parts in ends.items():
        ps = [int(p) for p in parts]
        hwm, lso = partition_offsets(conn, topic, ps, committed=False), partition_offsets(conn, topic, ps, committed=True)
        ends[topic] = {str(p): {"hwm": hwm[p], "lso": lso[p]} for p in ps}
    (run_dir / "end_offsets.json").write_text(json.dumps(ends))


def test_planted_anomalies_are_each_reported_as_exactly_themselves(clean_run, conn, tmp_path):
    run = copy_run(clean_run, tmp_path)
    attempts = txn_attempts(run)
    resent, relabelled = attempts[0], attempts[1]
    # 1. a committed record re-sent with the same id (the same bytes) by a non-transactional producer
    target = resent["value"]["writes"][0]
    original = next(r for r in read_to_end(conn, target["topic"], committed=True)
                    if r.value and f'"{target["id"]}"'.encode() in r.value)
    producer = Producer(conn.confluent(**{"enable.idempotence": False}))
    producer.produce(target["topic"], partition=target["partition"], key=original.key, value=original.value)
    assert producer.flush(30) == 0
    # 2. a committed attempt recorded as failed; 3. an acknowledged attempt that was never sent
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

    code, report, log = verify(run)
    assert code == 1 and report["valid"] is False, log
    checks = report["checks"]
    assert [e["id"] for e in checks["duplicate"]["examples"]] == [target["id"]]
    assert sorted(e["id"] for e in checks["aborted_read"]["examples"]) == sorted(w["id"] for w in relabelled["value"]["writes"])
    assert sorted(e["id"] for e in checks["lost_write"]["examples"]) == sorted(w["id"] for w in ghost["writes"])
    failing = {name for name, c in checks.items() if c["valid"] is not True}
    assert failing == {"duplicate", "aborted_read", "lost_write"}, {n: checks[n]["examples"][:3] for n in failing}


def test_topics_that_cannot_be_read_to_the_recorded_end_make_the_verdict_unknown(clean_run, tmp_path):
    run = copy_run(clean_run, tmp_path)
    ends = json.loads((run / "end_offsets.json").read_text())
    topic = sorted(ends)[0]
    ends[topic]["0"]["hwm"] += 1000          # the run says it ended further than the topic now reaches
    (run / "end_offsets.json").write_text(json.dumps(ends))
    code, report, log = verify(run)
    assert code == 2, log
    assert report["valid"] == "unknown" and not report["evidence"]["complete"]
    assert any(f"{topic}-0" in gap for gap in report["evidence"]["gaps"])
    assert all(c["valid"] == "unknown" for c in report["checks"].values())
