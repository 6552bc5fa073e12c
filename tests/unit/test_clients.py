"""Choosing a workload's Kafka client: `--client` read off a workload's arguments, planned onto a workload's own
processes only, a spec's `client:` and `txnlab chaos run --client` (with_client), refused where it cannot run, and
each client's pin in versions.env agreeing with its source's manifest."""
from __future__ import annotations

import pytest

from chaos.workloads.plans import PlanError, plan
from chaos.runner.spec import SpecError, load_spec, parse_spec, with_client
from chaos.workloads.native import REFERENCE, ClientError, clients, split_client
from cluster.lab.clients import CLIENTS
from tests.unit.test_spec import minimal_spec, problems_of


def test_the_clients_are_the_reference_and_each_native_one():
    assert clients() == (REFERENCE, "java", "franz-go", "kafkajs")


@pytest.mark.parametrize("argv, client, rest", [
    (["--topics", "a", "b"], REFERENCE, ["--topics", "a", "b"]),
    (["--client", "franz-go", "--topics", "a", "b"], "franz-go", ["--topics", "a", "b"]),
    (["--topics", "a", "b", "--client=kafkajs"], "kafkajs", ["--topics", "a", "b"]),
    (["--client", "kafkajs", "--client", "confluent"], REFERENCE, []),          # argparse's last one wins
])
def test_split_client_takes_the_client_off_the_workload_s_arguments(argv, client, rest):
    assert split_client("txn-producer", argv) == (client, rest)


def test_an_unknown_client_or_a_workload_it_cannot_run_is_refused():
    with pytest.raises(ClientError, match="one of confluent, java, franz-go, kafkajs"):
        split_client("processor", ["--client", "sarama"])
    with pytest.raises(ClientError, match="runs on confluent only"):
        split_client("observer", ["--client", "franz-go"])
    with pytest.raises(PlanError, match="runs on confluent only"):
        plan("streams", "t", 1, [], client="kafkajs")


def test_a_client_is_planned_onto_the_workload_s_own_processes_not_its_feeder_or_observers():
    processor = plan("processor", "t", 2, ["--batch", "5"], client="franz-go")
    args = {s.process: s.args for s in processor.specs}
    assert "--client" not in args["feeder"]
    assert args["eos-0"][-4:] == ("--batch", "5", "--client", "franz-go") and "--client" in args["eos-1"]
    producer = {s.process: s.args for s in plan("txn-producer", "t", 1, [], client="kafkajs").specs}
    assert "kafkajs" in producer["txp-0"] and not any("--client" in producer[o] for o in ("obs-rc", "obs-ru"))
    assert all("--client" not in s.args for s in plan("processor", "t", 1, []).specs)     # the reference: nothing


def test_a_spec_names_a_workload_s_client_and_a_bad_one_is_refused_by_field():
    spec = parse_spec(minimal_spec(workloads=[{"workload": "txn-producer", "client": "franz-go"}]))
    assert spec.workloads[0].client == "franz-go" and "--client" in spec.processes()[0].args
    assert "workloads[0].client" in problems_of(minimal_spec(workloads=[{"workload": "txn-producer", "client": "x"}]))
    assert "workloads[0].client" in problems_of(minimal_spec(workloads=[{"workload": "storm", "client": "kafkajs"}]))


def test_with_client_puts_every_transactional_workload_of_a_spec_on_the_client_short_mode_included():
    spec = load_spec("coordinator-kill", short=True, client="kafkajs")
    assert [w.client for w in spec.workloads] == ["kafkajs"]
    assert load_spec("zombie-producer", client="franz-go").workloads[0].client == "franz-go"
    data = minimal_spec(workloads=[{"workload": "storm"}])
    with pytest.raises(SpecError, match="no txn-producer or processor workload to run on franz-go"):
        with_client(data, "franz-go")
    assert "client" not in minimal_spec()["workloads"][0]                     # the document given is not changed


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_each_client_s_pin_agrees_with_its_source_s_manifest(name):
    client = CLIENTS[name]
    assert client.version and client.manifest_version() == client.version, (client.source, client.pin)


def kafkajs_rollback_run() -> tuple[dict, list[dict]]:
    """The verify checks and history operations of the KafkaJS coordinator-kill run in which the sequence rollback
    was found (r38c999, 2026-11-28 23:05), cut to what the signature reads: attempt 9's send to partition 1 of topic
    a resolved without acknowledging its two records, the transaction was aborted, and attempt 10's two records to
    that partition were acknowledged at their offsets (4, 5), which hold attempt 9's."""
    def check(count, examples):
        return {"count": count, "examples": examples, "valid": count == 0}
    writes9 = [{"topic": "r-a", "partition": 1, "id": "r.txp-0.9.0"}, {"topic": "r-b", "partition": 1, "id": "r.txp-0.9.1"},
               {"topic": "r-a", "partition": 1, "id": "r.txp-0.9.2"}]
    writes10 = [{"topic": "r-a", "partition": 1, "id": "r.txp-0.10.0"}, {"topic": "r-b", "partition": 4, "id": "r.txp-0.10.1"},
                {"topic": "r-a", "partition": 1, "id": "r.txp-0.10.4"}]
    ops = [{"process": "txp-0", "f": "txn", "type": "fail", "value": {
               "attempt": "r.txp-0.9", "writes": writes9,
               "error": "UnacknowledgedWrites: KafkaJS resolved send() without acknowledging 2 write(s): r.txp-0.9.0, "
                        "r.txp-0.9.2"}},
           {"process": "txp-0", "f": "txn", "type": "ok", "value": {"attempt": "r.txp-0.10", "writes": writes10,
                                                                    "offsets": [4, 7, 5]}}]
    checks = {"duplicate": check(0, []), "aborted_read": check(0, []),
              "lost_write": check(2, [{"attempt": "r.txp-0.10", "id": f"r.txp-0.10.{i}", "partition": 1, "topic": "r-a"}
                                      for i in (0, 4)]),
              "inconsistent_offsets": check(2, [
                  {"id": "r.txp-0.10.0", "offset": 4, "other_id": "r.txp-0.9.0", "partition": 1,
                   "reader": "acknowledged write", "topic": "r-a"},
                  {"id": "r.txp-0.10.4", "offset": 5, "other_id": "r.txp-0.9.2", "partition": 1,
                   "reader": "acknowledged write", "topic": "r-a"}]),
              "torn_transaction": check(1, [{"attempt": "r.txp-0.10", "expected": 6, "outcome": "ok", "process": "txp-0",
                                             "visible": 4}])}
    return {"valid": False, "checks": checks}, ops


def test_kafkajs_sequence_rollback_is_recognised_by_its_whole_signature_and_nothing_less():
    """tests/integration/test_clients.py accepts a KafkaJS run that is not valid only when its anomalies are its
    catalogued findings (chaos/bugs/kafkajs-*.yaml); anything else stays a failure."""
    from tests.integration.test_clients import not_kafkajs_findings
    report, ops = kafkajs_rollback_run()
    assert not_kafkajs_findings(report, ops) is None

    report, _ = kafkajs_rollback_run()
    report["checks"]["aborted_read"] = {"count": 1, "examples": [{}], "valid": False}
    assert "not KafkaJS's findings alone" in not_kafkajs_findings(report, ops)     # another anomaly beside them

    report, ops = kafkajs_rollback_run()
    ops[0]["type"] = "ok"
    assert "earlier failed attempt" in not_kafkajs_findings(report, ops)         # the record at the offset was committed

    report, ops = kafkajs_rollback_run()
    ops[0]["value"]["writes"][0]["partition"] = 2
    assert "wrote it elsewhere" in not_kafkajs_findings(report, ops)             # not the same partition

    report, ops = kafkajs_rollback_run()
    report["checks"]["inconsistent_offsets"]["count"] = 1
    report["checks"]["inconsistent_offsets"]["examples"].pop()
    assert "acknowledged at another record's offset" in not_kafkajs_findings(report, ops)     # a loss unexplained


def kafkajs_duplicates(copies: int = 2) -> tuple[dict, list[dict]]:
    """Run rf2ce17 (2026-11-28 23:35, kafkajs-sequence-rollback's experiment): attempt 25's batch of two records to
    partition 5 of topic b at offsets 32-33 and again at 34-35, the attempt committed."""
    writes = [{"topic": "r-a", "partition": 0, "id": "r.txp-0.25.0"}, {"topic": "r-b", "partition": 5, "id": "r.txp-0.25.1"},
              {"topic": "r-b", "partition": 5, "id": "r.txp-0.25.5"}]
    ops = [{"process": "txp-0", "f": "txn", "type": "ok", "value": {"attempt": "r.txp-0.25", "writes": writes}}]
    examples = [{"attempt": "r.txp-0.25", "copies": copies, "id": record,
                 "positions": [{"topic": "r-b", "partition": 5, "offset": 32 + k + 2 * j} for j in range(copies)]}
                for k, record in enumerate(("r.txp-0.25.1", "r.txp-0.25.5"))]
    checks = {"duplicate": {"count": 2, "examples": examples, "valid": False},
              "lost_write": {"count": 0, "examples": [], "valid": True}}
    return {"valid": False, "checks": checks}, ops


def test_kafkajs_retry_duplicates_are_recognised_by_their_whole_signature_and_nothing_less():
    from tests.integration.test_clients import not_kafkajs_findings
    for copies in (2, 3):                         # a batch written twice or three times in a row
        assert not_kafkajs_findings(*kafkajs_duplicates(copies)) is None

    report, ops = kafkajs_duplicates()
    report["checks"]["duplicate"]["examples"][1]["positions"][1]["offset"] = 40
    assert "not its whole batch written again in a row" in not_kafkajs_findings(report, ops)    # copies apart

    report, ops = kafkajs_duplicates()
    report["checks"]["duplicate"]["examples"].pop()
    report["checks"]["duplicate"]["count"] = 1
    assert "not its whole batch" in not_kafkajs_findings(report, ops)            # one record of the batch twice

    report, ops = kafkajs_duplicates()
    ops[0]["type"] = "info"
    assert "of a committed attempt" in not_kafkajs_findings(report, ops)        # an attempt of unknown outcome

    report, ops = kafkajs_duplicates()
    report["checks"]["duplicate"]["examples"][0]["positions"][1]["topic"] = "r-a"
    assert "one partition" in not_kafkajs_findings(report, ops)                  # copies in two partitions


def test_the_java_workloads_run_on_the_release_a_run_asked_for_else_the_pin(monkeypatch):
    """A run's java_clients (an experiment's, a bug side's) reaches the Java-client workloads as $TXNLAB_JAVA_CLIENTS:
    their classpath is that release's libs (java-txn-offset-commit-stale-topic-id's fixed side, 4.3.1); without it,
    the pin's."""
    from cluster.lab import clients as lab_clients
    from cluster.lab.versions import JAVA_CLIENTS_VARIABLE, pinned
    seen = []
    monkeypatch.setattr(lab_clients, "java_command", lambda main, args, version=None, classpath=None:
                        seen.append(version) or ["java"])
    java = lab_clients.CLIENTS["java"]
    monkeypatch.delenv(JAVA_CLIENTS_VARIABLE, raising=False)
    java.argv()
    monkeypatch.setenv(JAVA_CLIENTS_VARIABLE, "4.3.1")
    java.argv()
    assert seen == [pinned()["KAFKA_VERSION"], "4.3.1"]
