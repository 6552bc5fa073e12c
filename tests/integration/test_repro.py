"""Standalone reproductions (chaos/bugs/repro/<bug>/): a program in the client's own language for each finding not
reported upstream, needing only a Kafka cluster and the client (no txnlab, no Spark), which brings the symptom
about itself and says whether it saw it (exit 1: seen, 0: not seen, 2: the run itself failed). The campaign's
(`-m campaign`): each run against the session's cluster (Kafka 4.4.0, transaction.version 2, its release's
default), its output kept in the test's report."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.catalog.bugs import BUGS_DIR
from cluster.lab.clients import go_build
from tests.integration.conftest import CAMPAIGN, TEST_BASE_PORT, _session_cluster

REPRO = BUGS_DIR / "repro"


def node_repro(bug: str, cluster, tries: int | None = None) -> subprocess.CompletedProcess:
    """A Node.js reproduction run as its maintainers would: `npm ci` (its one dependency, the client at its pinned
    release, from the npm registry), then `node repro.js` against the cluster; it must have seen the symptom."""
    source = REPRO / bug
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=source,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    proc = subprocess.run(["node", "repro.js", "--brokers", cluster.connection().bootstrap,
                           *(["--tries", str(tries)] if tries is not None else [])],
                          cwd=source, capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 1 and "SYMPTOM:" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc


def python_repro(bug: str, venv: Path, *argv: str) -> subprocess.CompletedProcess:
    """A Python reproduction run as its maintainers would: a virtualenv of its own with its requirements (the client
    at its pinned release, from PyPI), then `python repro.py` with `argv`; it must have seen the symptom."""
    source = REPRO / bug
    for step in ([sys.executable, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "pip"), "install", "-q", "-r", str(source / "requirements.txt")]):
        done = subprocess.run(step, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    proc = subprocess.run([str(venv / "bin" / "python"), "repro.py", *argv], cwd=source, capture_output=True,
                          text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 1 and "SYMPTOM:" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc


@CAMPAIGN
def test_librdkafka_s_abort_sequence_reuse_is_seen_by_its_standalone_reproduction(cluster, tmp_path):
    """librdkafka-abort-sequence-reuse's reproduction (a Python program on confluent-kafka alone, with Toxiproxy in
    front of the brokers as the session's cluster has it): a record whose answer is dropped until its request times
    out, then abort_transaction(); the next transaction's record to that partition is delivered at the aborted
    record's offset and missing once it commits, while its control record on another partition is read."""
    proc = python_repro("librdkafka-abort-sequence-reuse", tmp_path / "venv", "--brokers",
                        cluster.connection().bootstrap, "--toxiproxy",
                        f"http://127.0.0.1:{cluster.layout.toxiproxy_port}", "--tries", "3")
    missing = re.findall(r"record (t\d+-committed) of a committed transaction is missing: delivered at offset (\d+) "
                         r"of partition 0, which holds '(t\d+)-aborted'", proc.stdout)
    assert missing and all(committed.split("-")[0] == aborted for committed, _, aborted in missing), proc.stdout
    assert "and 3 of 3 control records" in proc.stdout, proc.stdout


@CAMPAIGN
def test_librdkafka_s_fatal_abort_after_a_lost_add_partitions_is_seen_by_its_standalone_reproduction(cluster, tmp_path):
    """librdkafka-endtxn-after-failover's reproduction (Python on confluent-kafka alone, Toxiproxy in front of the
    brokers): after a committed transaction, the next one's AddPartitionsToTxn is dropped on the way to the coordinator
    until its record times out; the abort that follows is answered INVALID_TXN_STATE and made fatal, every try."""
    proc = python_repro("librdkafka-endtxn-after-failover", tmp_path / "venv", "--brokers",
                        cluster.connection().bootstrap, "--toxiproxy",
                        f"http://127.0.0.1:{cluster.layout.toxiproxy_port}", "--tries", "2")
    assert len(re.findall(r"try \d: transactional id .*; the second transaction's record: .*_MSG_TIMED_OUT", proc.stdout)) == 2, proc.stdout
    assert len(re.findall(r"try \d: abort_transaction\(\) failed: INVALID_TXN_STATE: .* \(fatal: True\)",
                          proc.stdout)) == 2, proc.stdout


@CAMPAIGN
def test_franz_go_s_wait_is_seen_by_its_standalone_reproduction(cluster, tmp_path):
    """franz-go-tv2-wait's reproduction (a Go program on franz-go alone): two transactional producers back to back
    for 20 s at transaction.version 2 see transactions that took 4 s or more, each printed with its time."""
    binary = tmp_path / "franz-go-tv2-wait"
    go_build(REPRO / "franz-go-tv2-wait", binary, "franz-go-tv2-wait's reproduction")
    proc = subprocess.run([str(binary), "-brokers", cluster.connection().bootstrap, "-duration", "20s",
                           "-replicas", "3"], capture_output=True, text=True, timeout=180)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    slow = re.findall(r"transaction \d+ took (\d+(?:\.\d+)?)s", proc.stdout)
    assert slow and all(float(s) >= 4 for s in slow), proc.stdout[-3000:]
    assert "SYMPTOM: transactions waited with no fault" in proc.stdout


@CAMPAIGN
def test_kafkajs_s_retry_duplicates_are_seen_by_its_standalone_reproduction(cluster):
    """kafkajs-retry-duplicates' reproduction (a Node.js script on KafkaJS 2.2.4 alone): one send() to partitions led
    by two brokers while the client's own socketFactory holds one broker's answers and closes the other's connection
    after its produce request; a read_committed consumer then reads committed records twice, at consecutive offsets
    of one partition."""
    proc = node_repro("kafkajs-retry-duplicates", cluster, tries=5)
    twice = re.findall(r"record (t\d+-[ab]) read 2 times at (\d+)@(\d+), (\d+)@(\d+)", proc.stdout)
    assert twice and all(p1 == p2 and int(o2) == int(o1) + 1 for _, p1, o1, p2, o2 in twice), proc.stdout[-3000:]


@CAMPAIGN
def test_kafkajs_s_sequence_rollback_is_seen_by_its_standalone_reproduction(cluster):
    """kafkajs-sequence-rollback's reproduction (a Node.js script on KafkaJS 2.2.4 alone): a send whose produce
    requests are written and never answered (the client's socketFactory ends the connection after each) fails, the
    transaction is aborted, and the next transaction's record to that partition is missing once it commits, while
    the same transaction's record on another partition is read."""
    proc = node_repro("kafkajs-sequence-rollback", cluster, tries=3)
    assert re.findall(r"record (t\d+-committed) of a committed transaction is missing", proc.stdout)
    assert "and all 3 control records of partition 1" in proc.stdout


@CAMPAIGN
def test_kafkajs_s_stale_seek_is_seen_by_its_standalone_reproduction_and_not_without_the_seek(cluster):
    """kafkajs-stale-seek's reproduction (a Node.js script on KafkaJS 2.2.4 alone, plain consumers of one group): A
    seeks its partition to the log start and, before its batch returns, B joins and is given the partition; B reads
    every record and commits, then leaves; given the partition back, A reads from the stale seek every record the
    group had committed. Its control (--control: the same steps without the seek) reads nothing."""
    proc = node_repro("kafkajs-stale-seek", cluster)
    assert re.search(r"B read every record and committed offset (\d+)", proc.stdout), proc.stdout[-3000:]
    assert "A was given the partition back and read offsets 0-19 again, below the committed offset 20" in proc.stdout
    control = subprocess.run(["node", "repro.js", "--brokers", cluster.connection().bootstrap, "--control"],
                             cwd=REPRO / "kafkajs-stale-seek", capture_output=True, text=True, timeout=300)
    print(control.stdout)
    assert control.returncode == 0, control.stdout[-3000:] + control.stderr[-2000:]
    assert "read 0 records, none below the committed offset 20" in control.stdout


@CAMPAIGN
def test_kafkajs_s_missing_kip_447_fencing_is_seen_by_its_standalone_reproduction_and_not_without_the_stall(cluster):
    """kafkajs-kip-447's reproduction (a Node.js script on KafkaJS 2.2.4 alone, two exactly-once processors of one
    group): A sends its batch's offsets to its transaction and stalls past the session timeout; B is given the
    partition, processes the same inputs and commits; A's commit is accepted after it left the group, so every input
    of the batch has two committed outputs. Its control (--control: A's stall inside the session) has one each."""
    proc = node_repro("kafkajs-kip-447", cluster)
    assert "B: transaction committed (offsets 0-9)" in proc.stdout
    assert "read 20 outputs for 10 inputs" in proc.stdout and "SYMPTOM: 10 inputs processed twice" in proc.stdout
    control = subprocess.run(["node", "repro.js", "--brokers", cluster.connection().bootstrap, "--control"],
                             cwd=REPRO / "kafkajs-kip-447", capture_output=True, text=True, timeout=300)
    print(control.stdout)
    assert control.returncode == 0, control.stdout[-3000:] + control.stderr[-2000:]
    assert "read 10 outputs for 10 inputs" in control.stdout


@pytest.fixture(scope="module")
def expiring_cluster():
    """One node whose coordinator forgets an idle transactional id after 10 s (checked every 0.5 s), as Kafka's own
    TransactionsExpirationTest sets it: what kafkajs-expired-id-stuck's reproduction asks of the cluster."""
    yield from _session_cluster("test-repro-expiry", nodes=1, base_port=TEST_BASE_PORT + 2000, broker_overrides={
        "transactional.id.expiration.ms": "10000", "transaction.remove.expired.transaction.cleanup.interval.ms": "500"})


@CAMPAIGN
def test_kafkajs_s_expired_id_stuck_is_seen_by_its_standalone_reproduction(expiring_cluster):
    """kafkajs-expired-id-stuck's reproduction (a Node.js script on KafkaJS 2.2.4 alone): a transactional producer
    idle past its id's expiry fails every transaction after it INVALID_PRODUCER_ID_MAPPING, never re-initialised,
    while a new producer with the same transactional id commits at once."""
    proc = node_repro("kafkajs-expired-id-stuck", expiring_cluster, tries=5)
    assert len(re.findall(r"transaction \d after the expiry: failed INVALID_PRODUCER_ID_MAPPING", proc.stdout)) == 5
    assert "control: a new producer with the same transactional id: committed" in proc.stdout


def maven_repro(bug: str, cluster, version: str) -> subprocess.CompletedProcess:
    """A Maven reproduction run as its maintainers would: `mvn compile exec:java` (the client at `version`, from Maven
    Central) against the cluster (its build in the folder's target/, removed by the test)."""
    source = REPRO / bug
    return subprocess.run(["mvn", "-q", f"-Dkafka.version={version}", "compile", "exec:java",
                           f"-Dexec.args={cluster.connection().bootstrap} 3"], cwd=source, capture_output=True, text=True,
                          timeout=300)


@CAMPAIGN
def test_java_s_stale_topic_id_commit_is_seen_by_its_standalone_reproduction_and_not_on_the_release_before(cluster):
    """java-txn-offset-commit-stale-topic-id's reproduction (a Java program on kafka-clients alone): after its input
    topic is deleted and created again, 4.4.0's sendOffsetsToTransaction times out (TxnOffsetCommit with the deleted
    topic's id, retried for ever); 4.3.1's commits on the new topic."""
    try:
        affected = maven_repro("java-txn-offset-commit-stale-topic-id", cluster, "4.4.0")
        print(affected.stdout)
        assert affected.returncode == 1 and "SYMPTOM: sendOffsetsToTransaction did not complete" in affected.stdout, \
            affected.stdout[-3000:] + affected.stderr[-2000:]
        fixed = maven_repro("java-txn-offset-commit-stale-topic-id", cluster, "4.3.1")
        print(fixed.stdout)
        assert fixed.returncode == 0 and "no symptom" in fixed.stdout, fixed.stdout[-3000:] + fixed.stderr[-2000:]
    finally:
        shutil.rmtree(REPRO / "java-txn-offset-commit-stale-topic-id" / "target", ignore_errors=True)


@CAMPAIGN
def test_java_s_recreated_topic_skip_is_seen_by_its_standalone_reproduction(cluster):
    """java-recreated-topic-skip's reproduction (a Java program on kafka-clients alone): a consumer that read 10
    records a partition keeps that position when the topic is created again with 15 a partition, and reads 10 of the
    30 (librdkafka reads all 30 in the same steps: docs/bugs.md)."""
    try:
        proc = maven_repro("java-recreated-topic-skip", cluster, "4.4.0")
        print(proc.stdout)
        assert proc.returncode == 1 and "SYMPTOM: the consumer read 10 of the 30 records" in proc.stdout, \
            proc.stdout[-3000:] + proc.stderr[-2000:]
    finally:
        shutil.rmtree(REPRO / "java-recreated-topic-skip" / "target", ignore_errors=True)


@CAMPAIGN
def test_franz_go_s_recreated_topic_unread_is_seen_by_its_standalone_reproduction(cluster, tmp_path):
    """franz-go-recreated-topic-unread's reproduction (a Go program on franz-go alone): a group consumer that read a
    topic reads none of the 20 records written to it after it was deleted and created again, and franz-go says it
    did not adopt the new topic id."""
    binary = tmp_path / "franz-go-recreated-topic-unread"
    go_build(REPRO / "franz-go-recreated-topic-unread", binary, "franz-go-recreated-topic-unread's reproduction")
    proc = subprocess.run([str(binary), "-brokers", cluster.connection().bootstrap, "-replicas", "3"],
                          capture_output=True, text=True, timeout=180)
    print(proc.stdout)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "SYMPTOM: the consumer read 0 of the 20 records" in proc.stdout and "not adopted: true" in proc.stdout
