"""The java-copier workload against the real cluster: Kafka's VerifiableProducer seeds a topic, two
TransactionalMessageCopier JVMs copy it exactly once, and the history holds what they reported."""
from __future__ import annotations

import collections
import uuid

import pytest

from chaos.record.history import read_history
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from cluster.access.reads import read_to_end
from cluster.access.smoke import ensure_topic
from tests.unit.test_java_copier import assert_paired

pytestmark = [pytest.mark.cluster, pytest.mark.kafka_core]

MESSAGES = 1000
COPIERS = 2
DURATION_S = 30.0


def ops_of(ops: list[dict], process: str, f: str, op_type: str = "ok") -> list[dict]:
    return [op for op in ops if op["process"] == process and op["f"] == f and op["type"] == op_type]


def run_workload(conn, base, topic_in: str, topic_out: str) -> tuple[dict, list[dict]]:
    tag = new_run_tag()
    args = ("--input", topic_in, "--output", topic_out, "--messages", str(MESSAGES), "--copiers", str(COPIERS),
            "--transaction-size", "50", "--heap", "256m")
    with Run(conn, new_run_dir(base, "java-copier", tag), tag, seed=7, name="java-copier") as run:
        run.use_topics([topic_in, topic_out])
        run.start(WorkloadSpec("java-copier", "java-copier", args), duration=DURATION_S)
        run.wait(DURATION_S + 10)                  # returns early once the copiers have copied everything
        summary = run.finish()
    history = read_history(run.dir)
    assert not history.truncated
    return summary, history.ops


def test_java_clients_copy_exactly_once_and_land_in_the_history(conn, tmp_path):
    topic_in, topic_out = f"jc-in-{uuid.uuid4().hex[:10]}", f"jc-out-{uuid.uuid4().hex[:10]}"
    for topic in (topic_in, topic_out):
        ensure_topic(conn, topic, partitions=3, replication=3)
    summary, ops = run_workload(conn, tmp_path, topic_in, topic_out)
    assert_paired(ops)                              # every invoke completed (by the workload or at finish)

    jvm_ends = {op["process"]: op for op in ops if op["f"] == "jvm" and op["type"] != "invoke"}
    copiers = [f"java-copier-{i}" for i in range(COPIERS)]
    assert set(jvm_ends) == {"java-vp/jvm", *(f"{c}/jvm" for c in copiers)}, jvm_ends
    unfinished = {p: op["value"] for p, op in jvm_ends.items() if op["type"] != "ok" or op["value"].get("stopped")}
    assert not unfinished, f"tools did not finish by themselves within {DURATION_S}s: {unfinished}"
    assert summary["completed_at_shutdown"] == 0

    acked = [op["value"]["id"] for op in ops_of(ops, "java-vp", "produce")]
    written = [r.value.decode() for r in read_to_end(conn, topic_in, committed=False)]
    assert len(acked) == MESSAGES and sorted(acked) == sorted(written)
    assert not ops_of(ops, "java-vp", "produce", "info") and not [op for op in ops if op["f"] == "stdout"]

    finals = [ops_of(ops, c, "copy")[-1]["value"] for c in copiers]
    assert [v["event"] for v in finals] == ["ShutdownComplete"] * COPIERS
    assert sum(v["total_processed"] for v in finals) == MESSAGES
    assert sum(op["value"]["copied"] for c in copiers for op in ops_of(ops, c, "copy")) == MESSAGES
    assert any(op["value"]["event"] == "RebalanceComplete" for c in copiers for op in ops_of(ops, c, "copy"))

    copied = collections.Counter(r.value.decode() for r in read_to_end(conn, topic_out, committed=True))
    assert set(copied) == set(written) and set(copied.values()) == {1}
