"""report/bugs.py's judgement of a bug's runs (from stored verify reports and timelines) and its exit code.
The runs themselves are integration: tests/integration/test_bugs.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.catalog.bugs import load_bug
from report import build
from report.bugs import exit_code, judge
from tests.unit.test_report import stored_run

EXPECTED = ["open_at_end", "aborted_read"]


def with_checks(run_dir, problems=None, **counts):
    """problems: {check: {problem: count}} as verify reports them."""
    report = json.loads((run_dir / "verify" / "report.json").read_text())
    report["checks"] = {name: {"valid": not n, "count": n, "description": name, "examples": [{"n": n}] if n else [],
                               **({"problems": problems[name]} if name in (problems or {}) else {})}
                        for name, n in counts.items()}
    report["valid"] = not any(counts.values())
    (run_dir / "verify" / "report.json").write_text(json.dumps(report))
    return run_dir


def test_an_expected_problem_reproduces_only_by_its_own_anomalies(tmp_path):
    expected = ["open_at_end", "streams_processing:duplicate-output"]
    other = with_checks(stored_run(tmp_path, "late-produce", 1), streams_processing=3, open_at_end=0,
                        problems={"streams_processing": {"unprocessed": 3}})
    got = judge(other, expected)
    assert got["reproduced"] is False and got["clean"] is False
    assert got["problems"] == {"streams_processing": {"unprocessed": 3}}
    assert got["gaps"] == []
    old = with_checks(stored_run(tmp_path, "late-produce", 3), streams_processing=3, open_at_end=0)
    stale = judge(old, expected)                         # a report from before per-problem counts: said, not guessed
    assert stale["reproduced"] is False and "does not count streams_processing's anomalies per problem" in stale["gaps"][0]
    dup = with_checks(stored_run(tmp_path, "late-produce", 2), streams_processing=3, open_at_end=0,
                      problems={"streams_processing": {"unprocessed": 1, "duplicate-output": 2}})
    assert judge(dup, expected)["reproduced"] is True


def test_an_expected_check_is_a_check_or_a_check_and_one_of_its_problems():
    import pytest
    from chaos.catalog.bugs import BugExpect
    assert BugExpect(checks=["streams_processing:duplicate-output", "open_at_end"]).checks[0].endswith("output")
    with pytest.raises(ValueError, match="checks.0"):
        BugExpect(checks=["streams processing"])


def test_an_expected_check_with_anomalies_is_a_reproduction(tmp_path):
    run = with_checks(stored_run(tmp_path, "late-produce", 1), open_at_end=2, aborted_read=0, duplicate=0)
    got = judge(run, EXPECTED)
    assert got["reproduced"] is True and got["clean"] is False and got["anomalies"] == {"open_at_end": 2}
    assert got["max_hanging"] == 2.0                   # the stored timeline's largest sample


def test_anomalies_of_another_check_are_not_the_bug_and_a_valid_run_is_clean(tmp_path):
    other = judge(with_checks(stored_run(tmp_path / "a", "late-produce", 1), duplicate=1, open_at_end=0), EXPECTED)
    assert other["reproduced"] is False and other["clean"] is False
    clean = judge(with_checks(stored_run(tmp_path / "b", "late-produce", 1), duplicate=0, open_at_end=0), EXPECTED)
    assert clean["reproduced"] is False and clean["clean"] is True and clean["anomalies"] == {}


def test_an_unverified_run_is_neither_reproduced_nor_clean(tmp_path):
    run = stored_run(tmp_path, "late-produce", 1, with_prometheus=False)
    (run / "verify" / "report.json").unlink()
    got = judge(run, EXPECTED)
    assert got["valid"] == "unknown" and not got["reproduced"] and not got["clean"] and got["max_hanging"] is None
    assert "not verified" in got["gaps"][0]


def test_an_expected_error_a_workload_recorded_is_a_reproduction_even_in_a_valid_run(tmp_path):
    from chaos.record.history import HistoryWriter
    run = with_checks(stored_run(tmp_path, "zombie", 1), duplicate=0)
    with HistoryWriter(run) as history:                # appended to the run's history, as a workload would
        history.record("streams-0", "ok", "streams", {"event": "error", "error": "org.apache.kafka.streams.errors."
                       "StreamsException: Error encountered sending record", "causes": [
                           "org.apache.kafka.common.errors.InvalidTxnStateException: The producer attempted a "
                           "transactional operation in an invalid state."]})
        history.record("streams-0", "ok", "streams", {"event": "state", "from": "RUNNING", "to": "ERROR"})
    name = "org.apache.kafka.common.errors.InvalidTxnStateException"
    got = judge(run, [], [name])
    assert got["reproduced"] is True and got["clean"] is False and got["valid"] is True
    assert got["errors_seen"][name]["count"] == 1 and got["errors_seen"][name]["first_process"] == "streams-0"
    other = judge(run, [], ["org.apache.kafka.common.errors.InvalidProducerEpochException"])
    assert other["reproduced"] is False and other["clean"] is True and other["errors_seen"] == {}


def test_a_broker_bug_shown_by_an_error_is_named_on_a_run_of_its_affected_cluster_only(tmp_path):
    """KAFKA-20785 (chaos/bugs/kafka-20785.yaml: Kafka 4.4.0 at transaction.version 2 against 1): a run whose Java
    workload recorded InvalidTxnStateException is named on a transaction.version 2 cluster of that release, not at 1,
    nor when the process was librdkafka's (not a client of the bug's error_clients); the tries table says how many
    operations recorded it."""
    from chaos.record.history import HistoryWriter
    from report.bugs import tries_table

    def run_on(root, tv, client="java"):
        run = with_checks(stored_run(root, "commit-races-timeout-abort", 1), duplicate=0)
        (run / "cluster.json").write_text(json.dumps({"kafka_version": "4.4.0",
                                                      "features": {"transaction.version": str(tv)}}))
        spec = json.loads((run / "spec.json").read_text())
        spec["specs"] = [{"workload": "txn-producer", "process": "txp-0",
                          "args": ["--client", client] if client != "confluent" else []}]
        (run / "spec.json").write_text(json.dumps(spec))
        with HistoryWriter(run) as history:
            history.record("txp-0", "info", "txn", {"attempt": "a9", "error": "InvalidTxnStateException: The "
                           "producer attempted a transactional operation in an invalid state."})
        return run
    affected, fixed = run_on(tmp_path / "a", 2), run_on(tmp_path / "b", 1)
    named = build.shape_bugs(affected)
    assert [b["id"] for b in named] == ["KAFKA-20785"]
    assert named[0]["occurrences"] == ["1 operation recorded InvalidTxnStateException (the first: txp-0 at "
                                       f"{judge(affected, [], ['InvalidTxnStateException'])['errors_seen']['InvalidTxnStateException']['first_s']:g} s)"]
    assert build.shape_bugs(fixed) == []
    assert build.shape_bugs(run_on(tmp_path / "d", 2, "confluent")) == []     # librdkafka cannot meet it (no tv2)
    got, clean = judge(affected, [], ["InvalidTxnStateException"]), judge(run_on(tmp_path / "c", 2), [], ["X"])
    table = tries_table({"expected_errors": ["InvalidTxnStateException"],
                         "sides": {"affected": {"runs": [got]}, "fixed": {"runs": [clean]}}})
    assert "| errors recorded |" in table.splitlines()[0]
    assert "InvalidTxnStateException 1 (first txp-0 at" in table.splitlines()[2]
    assert table.splitlines()[3].endswith("| none |")


def test_without_a_readable_history_no_error_seen_is_not_clean(tmp_path):
    import shutil
    run = with_checks(stored_run(tmp_path, "zombie", 1), duplicate=0)
    shutil.rmtree(run / "history")
    got = judge(run, [], ["org.apache.kafka.common.errors.InvalidTxnStateException"])
    assert got["errors_seen"] is None and got["reproduced"] is False and got["clean"] is False
    assert "the history cannot say which errors the workloads recorded" in got["gaps"]
    assert judge(run, ["duplicate"])["clean"] is True          # no error expected: the history is not asked


def outcome(affected, fixed, errors=()):
    return {"tries": 2, "errors": list(errors), "affected_reproduced": sum(r["reproduced"] for r in affected),
            "fixed_clean": sum(r["clean"] for r in fixed), "sides": {"affected": {"runs": affected}, "fixed": {"runs": fixed}}}


def test_the_exit_code_is_0_only_when_every_affected_try_reproduced_and_every_fixed_one_was_clean():
    hit, miss, clean = {"reproduced": True, "clean": False}, {"reproduced": False, "clean": False}, \
        {"reproduced": False, "clean": True}
    assert exit_code(outcome([hit, hit], [clean, clean])) == 0
    assert exit_code(outcome([hit, miss], [clean, clean])) == 1
    assert exit_code(outcome([hit, hit], [clean, hit])) == 1
    assert exit_code(outcome([hit], [clean, clean])) == 2                         # a try did not run
    assert exit_code(outcome([hit, hit], [clean, clean], errors=["fixed try 2: boom"])) == 2


def test_a_stored_suite_is_judged_again_by_the_catalog_as_it_is_now(tmp_path):
    """A suite judged when the catalog named fewer checks (here without torn_transaction, which KAFKA-14402's names)
    counts such a run again, from its stored verify report; nothing else changes."""
    from report.bugs import rejudge
    from tests.unit.test_report import stored_suite
    suite = stored_suite(tmp_path, versions=(1, 2))
    data = json.loads((suite / build.SUITE_FILE).read_text())
    runs = [tmp_path / r["run_dir"] for r in data["runs"]]
    with_checks(runs[0], torn_transaction=1, open_at_end=0)           # affected: only a torn transaction
    with_checks(runs[1], open_at_end=2)                                # affected: hanging
    for run in runs[2:]:
        with_checks(run, torn_transaction=0, open_at_end=0)            # fixed: clean
    old = ["open_at_end", "aborted_read"]
    outcome = {"bug": "KAFKA-14402", "variant": None, "tries": 2, "errors": [],
               "sides": {"affected": {"runs": [judge(r, old) for r in runs[:2]]},
                         "fixed": {"runs": [judge(r, old) for r in runs[2:]]}}}
    assert [r["reproduced"] for r in outcome["sides"]["affected"]["runs"]] == [False, True]
    (suite / "bug.json").write_text(json.dumps(outcome))
    got = rejudge(suite, progress=lambda m: None)
    assert [r["reproduced"] for r in got["sides"]["affected"]["runs"]] == [True, True]
    assert got["affected_reproduced"] == 2 and got["fixed_clean"] == 2 and exit_code(got) == 0
    assert "torn_transaction" in got["expected_checks"] and got["rejudged"]
    stored = json.loads((suite / "bug.json").read_text())
    assert stored["affected_reproduced"] == 2 and (suite / "report.html").exists()
    tries = (suite / "tries.md").read_text().splitlines()
    assert len([row for row in tries if row.startswith("| affected |")]) == 2
    assert "| affected | 1 |" in tries[2] and "| yes | no | False | torn_transaction 1 |" in tries[2]
    assert tries[-1] == "reproduced on the affected side in 2 of 2, the fixed side clean in 2 of 2"
    assert "torn_transaction" in json.loads((suite / build.SUITE_FILE).read_text())["comparison"]["note"]


def test_judging_a_directory_that_is_no_bug_suite_is_a_clear_error(tmp_path):
    import pytest
    from report.bugs import BugRunError, rejudge
    with pytest.raises(BugRunError, match="is not a stored bug suite"):
        rejudge(tmp_path)


def test_anomalies_name_a_catalogued_client_bug_only_on_the_releases_it_affects():
    from chaos.catalog.bugs import matching_anomaly_bugs
    lost = ({"streams_processing": 2, "streams_state": 2}, {"streams_processing": {"unprocessed": 2}})
    assert [b.id for b in matching_anomaly_bugs("3.6.2", *lost)] == ["KAFKA-16903"]
    assert matching_anomaly_bugs("3.8.1", *lost) == [] and matching_anomaly_bugs(None, *lost) == []
    doubled = ({"streams_processing": 1}, {"streams_processing": {"duplicate-output": 1}})
    assert matching_anomaly_bugs("3.6.2", *doubled) == []          # another problem of the same check


def test_anomalies_name_a_catalogued_client_bug_only_on_runs_of_that_client():
    from chaos.catalog.bugs import matching_anomaly_bugs
    twice = ({"exactly_once_processing": 40}, {"exactly_once_processing": {"duplicate-output": 40}})
    # two bugs of that shape: their history signatures tell which a run met (test_signatures.py)
    assert [b.id for b in matching_anomaly_bugs("4.4.0", *twice, clients=frozenset({"kafkajs"}))] == \
        ["kafkajs-kip-447", "kafkajs-stale-seek"]
    assert matching_anomaly_bugs("4.4.0", *twice, clients=frozenset({"franz-go"})) == []
    assert matching_anomaly_bugs("4.4.0", *twice) == []                       # the reference client's run
    lost = ({"exactly_once_processing": 3}, {"exactly_once_processing": {"unprocessed": 3}})
    assert matching_anomaly_bugs("4.4.0", *lost, clients=frozenset({"kafkajs"})) == []


def test_a_run_page_names_the_client_bug_its_anomalies_match(tmp_path):
    run = with_checks(stored_run(tmp_path, "late-produce", 1), streams_processing=2, open_at_end=0,
                      problems={"streams_processing": {"unprocessed": 2}})
    for clients, named in (("3.7.2", ["KAFKA-16903"]), ("4.3.1", [])):
        (run / "cluster.json").write_text(json.dumps({"kafka_version": "4.4.0", "java_clients": clients}))
        assert [b["id"] for b in build.anomaly_bugs(run, build.verdict_of(run))] == named
    (run / "cluster.json").write_text(json.dumps({"kafka_version": "3.5.2"}))     # before java_clients: the cluster's
    assert [b["id"] for b in build.anomaly_bugs(run, build.verdict_of(run))] == ["KAFKA-16903"]


def test_a_lost_write_names_the_client_bug_of_the_producer_that_lost_it(tmp_path):
    """librdkafka-abort-sequence-reuse is the reference client's (confluent-kafka) and kafkajs-sequence-rollback
    KafkaJS's, both shown by lost_write: a run page names the one whose client ran the producer the lost write's
    example names, never the reference's bug for a KafkaJS producer's loss beside the reference's observers."""
    run = stored_run(tmp_path, "leader-answers-dropped", 1)
    spec = json.loads((run / "spec.json").read_text())

    def named(txp0_args: list[str]) -> list[str]:
        spec["specs"] = [{"process": "txp-0", "workload": "txn-producer", "args": txp0_args},
                         {"process": "obs-rc", "workload": "observer", "args": []}]
        (run / "spec.json").write_text(json.dumps(spec))
        report = json.loads((run / "verify" / "report.json").read_text())
        report["checks"] = {"lost_write": {"valid": False, "count": 1, "description": "lost", "examples": [
            {"attempt": "r1a.txp-0.186", "id": "r1a.txp-0.186.0", "topic": "r1a-a", "partition": 1}]}}
        report["valid"] = False
        (run / "verify" / "report.json").write_text(json.dumps(report))
        return [b["id"] for b in build.anomaly_bugs(run, build.verdict_of(run))]
    assert named([]) == ["librdkafka-abort-sequence-reuse"]
    assert named(["--client", "kafkajs"]) == ["kafkajs-sequence-rollback"]
    assert named(["--client", "java"]) == []


def test_a_moved_suite_is_judged_from_its_own_runs(tmp_path):
    """bug.json names its tries' run directories where they ran; a suite moved, copied or unpacked from the corpus
    is judged from SUITE/SIDE/RUN, and a try whose run is not in the suite from where it was recorded."""
    from report.bugs import in_suite
    suite = tmp_path / "moved"
    (suite / "affected" / "20261129-154904-x-r84aed8").mkdir(parents=True)
    recorded = "/elsewhere/runs/suite/affected/20261129-154904-x-r84aed8"
    assert in_suite(suite, "affected", recorded) == suite / "affected" / "20261129-154904-x-r84aed8"
    assert in_suite(suite, "fixed", "/elsewhere/runs/suite/fixed/r2") == Path("/elsewhere/runs/suite/fixed/r2")


def test_anomalies_name_a_setting_trap_only_on_runs_with_its_settings():
    """The Flink timeout trap has no affected client: a run is named by it when its processes ran with its affected
    side's settings (the sink's 8 s transaction timeout) and its anomalies are the trap's; not with the fixed
    side's 60 s, nor with no timeout given, nor on other anomalies."""
    from chaos.catalog.bugs import matching_anomaly_bugs
    lost = ({"streams_processing": 53, "streams_state": 8}, {"streams_processing": {"unprocessed": 53}})
    feeder = ("--topics", "t-fin-a", "--rate", "10")

    def job(timeout: str | None) -> tuple[tuple[str, ...], ...]:
        extra = ("--transaction-timeout-ms", timeout) if timeout else ()
        return feeder, ("--role", "jobmanager", *extra), ("--role", "taskmanager", *extra)
    assert [b.id for b in matching_anomaly_bugs("4.4.0", *lost, args=job("8000"))] == ["flink-transaction-timeout"]
    assert matching_anomaly_bugs("4.4.0", *lost, args=job("60000")) == []
    assert matching_anomaly_bugs("4.4.0", *lost, args=job(None)) == []
    assert matching_anomaly_bugs("4.4.0", *lost, args=(("--transaction-timeout-ms",), ("8000",))) == []
    doubled = ({"streams_processing": 1}, {"streams_processing": {"duplicate-output": 1}})
    assert matching_anomaly_bugs("4.4.0", *doubled, args=job("8000")) == []


def test_anomalies_name_a_broker_s_bug_on_runs_of_its_affected_cluster():
    """KAFKA-14402 is a broker's bug (its sides differ in the cluster alone): named on a run of Kafka 3.5.2 (its
    natural affected side) or of 4.3.1 brought up with partition verification off at transaction.version 1 (its
    variant's), with its anomalies; not on 3.6.2, nor on 4.3.1 with verification on, nor on a 4.3.1 run that
    did not record its settings; KAFKA-16903's sides differ in the Java clients: never named by the cluster."""
    from chaos.catalog.bugs import broker_side_of, load_bug, matching_anomaly_bugs
    torn = ({"torn_transaction": 1, "aborted_read": 1}, {})
    off = {"kafka_version": "4.3.1", "broker_config": {"transaction.partition.verification.enable": "false"},
           "features": {"transaction.version": "1"}}
    assert [b.id for b in matching_anomaly_bugs(None, *torn, cluster={"kafka_version": "3.5.2"})] == ["KAFKA-14402"]
    assert [b.id for b in matching_anomaly_bugs(None, *torn, cluster=off)] == ["KAFKA-14402"]
    assert matching_anomaly_bugs(None, *torn, cluster={"kafka_version": "3.6.2"}) == []
    assert matching_anomaly_bugs(None, *torn, cluster={**off, "broker_config": {}}) == []
    assert matching_anomaly_bugs(None, *torn, cluster={"kafka_version": "4.3.1"}) == []
    assert matching_anomaly_bugs(None, {"streams_state": 1}, {}, cluster={"kafka_version": "3.5.2"}) == []
    assert not broker_side_of(load_bug("KAFKA-16903"), {"kafka_version": "4.4.0"})


def test_a_local_run_records_the_settings_its_cluster_was_brought_up_with():
    from cluster.lab.layout import ClusterLayout
    layout = ClusterLayout(state_dir=Path("/tmp/x"), broker_overrides={"transaction.partition.verification.enable": "false"},
                           features={"transaction.version": "1"})
    assert layout.settings == {"broker_config": {"transaction.partition.verification.enable": "false"},
                                       "features": {"transaction.version": "1"}}


def test_a_bug_told_by_its_history_signature_is_reproduced_only_where_the_history_shows_it(tmp_path):
    """Duplicate outputs of two processors are kafkajs-stale-seek's only where its signature explains an example
    (chaos/record/signatures.py): a stored run whose history holds no such processors is not a reproduction, and
    says why."""
    expected = ["exactly_once_processing:duplicate-output"]
    run = with_checks(stored_run(tmp_path, "late-produce", 1), exactly_once_processing=2,
                      problems={"exactly_once_processing": {"duplicate-output": 2}})
    report = json.loads((run / "verify" / "report.json").read_text())
    report["checks"]["exactly_once_processing"]["examples"] = [
        {"input": "in.1", "outputs": ["r.eos-0.1.0", "r.eos-1.1.0"], "problem": "duplicate-output"}]
    (run / "verify" / "report.json").write_text(json.dumps(report))
    assert judge(run, expected)["reproduced"] is True                    # by its shape alone
    told = judge(run, expected, history="stale-seek")
    assert told["reproduced"] is False and told["history"]["counts"] == {"stale-seek": 0}
    assert "not two committed outputs of two processors" in told["history"]["unexplained"][0]


@pytest.mark.parametrize("per_try, ups", [(None, 2), ("a try leaves the coordinator broken", 6)])
def test_a_bug_whose_tries_leave_the_cluster_changed_gives_each_try_a_cluster_of_its_own(tmp_path, monkeypatch, per_try,
                                                                                     ups):
    """KAFKA-20090's reproduced try leaves a transaction stuck at epoch 32767 whose coordinator's timeout sweep then
    throws on every pass: a later try on that broker could not meet the bug. Its tries each get a purged cluster."""
    import report.bugs as bugs
    events: list[str] = []

    class Cluster:
        def __init__(self, state, **kwargs):
            self.configured = bool(kwargs)

        @classmethod
        def load(cls, state, **kwargs):
            return cls(state, **kwargs)

        def up(self, **_):
            events.append("up")

        def down(self, purge=False, **_):
            events.append("down" if self.configured else "purge-leftover")

    def run_in_suite(spec, seed, directory, side, entry, backend, errors, what, step):
        events.append(f"try {what}")
        run = tmp_path / f"{side}-{seed}"
        run.mkdir()
        return run

    monkeypatch.setattr(bugs, "LocalCluster", Cluster)
    monkeypatch.setattr(bugs, "run_in_suite", run_in_suite)
    monkeypatch.setattr(bugs, "verify_runs", lambda suite, key, what, runs, *a, **k: events.append(f"verify {len(runs)}"))
    # verify reads the topics: each cluster's runs are verified before it goes
    monkeypatch.setattr(bugs, "judge_by", lambda bug, run: {"run_dir": str(run), "reproduced": False, "clean": True,
                                                           "valid": True})
    monkeypatch.setattr(bugs, "local_stack", lambda: {})
    monkeypatch.setattr(bugs, "save", lambda *args: None)
    bug = load_bug("KAFKA-20090").model_copy(update={"cluster_per_try": per_try})
    run = bugs.BugRun(bug, bugs.BugOptions(tries=3, runs_dir=tmp_path / "runs", state_root=tmp_path / "state"),
                      progress=lambda m: None)
    for side in bugs.BUG_SIDES:
        run._side(side)
    assert events.count("up") == ups and events.count("down") == ups
    if per_try:       # up, the try, its verification, down: each try alone on its cluster
        assert events[:12] == ["purge-leftover", "up", "try affected try 1", "verify 1", "down", "purge-leftover", "up",
                               "try affected try 2", "verify 1", "down", "purge-leftover", "up"]
    else:             # one cluster for the side's tries, verified while it is up
        assert events[:7] == ["purge-leftover", "up", "try affected try 1", "try affected try 2", "try affected try 3",
                              "verify 3", "down"]
    assert len(run.outcome["sides"]["affected"]["runs"]) == 3


def test_one_side_alone_runs_its_tries_and_is_judged_on_them_only(tmp_path, monkeypatch):
    import report.bugs as bugs
    ran = []
    monkeypatch.setattr(bugs.BugRun, "_side", lambda self, side: ran.append(side))
    monkeypatch.setattr(bugs, "shared_spark", lambda *a: None)
    monkeypatch.setattr(bugs.build, "write", lambda d: {"directory": str(d)})
    outcome = bugs.BugRun("KAFKA-20090", bugs.BugOptions(tries=2, runs_dir=tmp_path, state_root=tmp_path / "s",
                                                          sides=("affected",)), progress=lambda m: None).run()
    assert ran == ["affected"] and outcome["sides_run"] == ["affected"]
    outcome["sides"]["affected"]["runs"] = [{"reproduced": True, "clean": False}] * 2
    bugs.tally(outcome)
    assert exit_code(outcome) == 0                # the fixed side was not asked: not "did not run"
    outcome["sides"]["affected"]["runs"][1] = {"reproduced": False, "clean": False}
    bugs.tally(outcome)
    assert exit_code(outcome) == 1
    with pytest.raises(bugs.BugRunError, match="sides are affected, fixed, got both"):
        bugs.BugRun("KAFKA-20090", bugs.BugOptions(runs_dir=tmp_path, sides=("both",)))
