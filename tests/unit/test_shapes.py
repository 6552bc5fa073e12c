"""History shapes (chaos/record/shapes.py): a catalogued finding that is a behaviour, not an anomaly (franz-go-tv2-wait's
commits that waited with no fault active, chaos/bugs/), found in made-up histories of the shape its runs record and
refused where the history holds a fault over them, an abort, or too short a wait."""
from __future__ import annotations

import json

import pytest

from chaos.record.shapes import (COMMIT_WAIT_S, commit_waits, recreated_topic_commits_stuck, recreated_topic_unread,
                                 shapes_in, stuck_producers,
                                 zombie_revived)
from chaos.runner.spec import SpecError
from chaos.catalog.bugs import load_bug
from tests.unit.test_annotations import op, write_history


def txn(process: str, n: int, begin: float, end: float, outcome: str = "ok", **value) -> list[dict]:
    attempt = {"attempt": f"r.{process}.{n}", "producer": process, "abort": False, "writes": []}
    return [op(process, "invoke", "txn", begin, **attempt), op(process, outcome, "txn", end, **attempt, **value)]


def fault(start: float, end: float, kind: str = "kill-broker", **value) -> list[dict]:
    return [op("nemesis-0", "invoke", "fault", start, kind=kind), op("nemesis-0", "ok", "fault", start + 0.01, kind=kind,
                                                                     **value),
            op("nemesis-0", "invoke", "heal", end - 0.01, kind=kind), op("nemesis-0", "ok", "heal", end, kind=kind)]


def test_a_commit_that_waited_with_no_fault_active_is_a_commit_wait_and_one_during_a_fault_is_not():
    ops = [*txn("txp-0", 0, 1.0, 1.2), *txn("txp-0", 1, 1.3, 6.4), *txn("txp-1", 0, 2.0, 2.0 + COMMIT_WAIT_S - 0.1),
           *fault(10.0, 14.0), *txn("txp-1", 1, 8.0, 15.0), *txn("txp-0", 2, 20.0, 26.0, "fail")]
    found = commit_waits(sorted(ops, key=lambda o: o["time"]))
    assert found == ["txp-0: transaction r.txp-0.1 took 5.10 s (1.30 s-6.40 s), no fault active"]
    aborted = [{**o, "value": {**o["value"], "abort": True}} if o["process"] == "txp-0" else o for o in ops]
    assert commit_waits(aborted) == []              # a deliberate abort's time is not a commit's


def waited() -> list[dict]:
    """Two producers at transaction.version 2, no fault: txp-0's second transaction waited 5.1 s."""
    ops = [*txn("txp-0", 0, 1.0, 1.2), *txn("txp-1", 0, 1.1, 1.4), *txn("txp-0", 1, 1.3, 6.4), *txn("txp-1", 1, 1.5, 1.9)]
    return sorted(ops, key=lambda o: o["time"])


def test_a_history_that_cannot_be_read_whole_shows_no_shape(tmp_path):
    run = write_history(tmp_path, waited())
    assert len(shapes_in(run, ("commit-waits",))["commit-waits"]) == 1
    with (run / "history" / "part-00000.jsonl").open("a") as f:
        f.write('{"time": 3')                       # a torn last line: the history was cut
    assert "cut short" in shapes_in(run, ("commit-waits",))


def test_a_bug_shown_by_shapes_names_known_ones(tmp_path):
    assert load_bug("franz-go-tv2-wait").expect.shapes == ["commit-waits"]
    text = (load_bug.__globals__["BUGS_DIR"] / "franz-go-tv2-wait.yaml").read_text()
    (tmp_path / "x.yaml").write_text(text.replace("shapes: [commit-waits]", "shapes: [commit-stalls]"))
    with pytest.raises(SpecError, match="unknown history shapes"):
        load_bug(tmp_path / "x.yaml")


def stored_run_with(root, ops: list[dict]):
    """A stored valid run (tests/unit/test_report.py, its own commits all quick) with `ops` appended to its history
    after what it holds (their times 100 s on), as the runner and the workloads would record them."""
    from chaos.record.history import HistoryWriter
    from tests.unit.test_bugs import with_checks
    from tests.unit.test_report import stored_run
    run = with_checks(stored_run(root, "late-produce", 1), duplicate=0)
    with HistoryWriter(run) as history:
        for o in ops:
            history.append({**o, "time": o["time"] + 100 * 10**9, "wall": o["wall"] + 100})
    return run


def test_a_bug_shown_by_a_shape_is_reproduced_where_it_occurred_and_clean_only_where_the_whole_history_has_none(
        tmp_path):
    from report.bugs import judge, tries_table
    from tests.unit.test_bugs import with_checks
    from tests.unit.test_report import stored_run
    shown = stored_run_with(tmp_path / "a", waited())
    got = judge(shown, [], shaped=("commit-waits",))
    assert got["reproduced"] is True and got["clean"] is False and got["valid"] is True
    assert len(got["shapes"]["commit-waits"]) == 1
    quick = with_checks(stored_run(tmp_path / "b", "zombie", 1), duplicate=0)         # every commit within a second
    clean = judge(quick, [], shaped=("commit-waits",))
    assert clean["reproduced"] is False and clean["clean"] is True and clean["shapes"] == {"commit-waits": []}
    cut = with_checks(stored_run(tmp_path / "c", "zombie", 1), duplicate=0)
    part = sorted((cut / "history").glob("part-*.jsonl"))[-1]
    part.write_text(part.read_text() + '{"time": 3')
    unsure = judge(cut, [], shaped=("commit-waits",))
    assert unsure["reproduced"] is False and unsure["clean"] is False and "cut short" in unsure["gaps"][-1]
    table = tries_table({"sides": {"affected": {"runs": [got]}, "fixed": {"runs": [clean]}}})
    assert table.splitlines()[0].endswith("| history shapes |") and "| commit-waits 1 |" in table


def test_a_run_page_of_the_affected_client_names_the_behaviour_its_history_shows(tmp_path):
    from report import build, html
    run = stored_run_with(tmp_path, waited())
    assert build.shape_bugs(run) == []              # the reference client's run: not franz-go's finding
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps({**spec, "specs": [{"args": ["--client", "franz-go"]}]}))
    [named] = build.shape_bugs(run)
    assert named["id"] == "franz-go-tv2-wait" and "took 5.10 s" in named["occurrences"][0]
    page = html._run(build.run_report(run, "transactions-back-to-back", None, None), tmp_path)
    assert "Catalogued finding seen in the history:" in page and "franz-go-tv2-wait" in page


def zombie_run(after: list[dict]) -> list[dict]:
    """A zombie-producer fault on txp-0 (5-30 s), its successor committing, then `after` from txp-0 and quiescence
    at 40 s."""
    ops = [*txn("txp-0", 0, 1.0, 1.2), *fault(5.0, 30.0, "zombie-producer"), *txn("txp-0-zombie", 0, 6, 6.2), *after,
           op("nemesis", "invoke", "quiescence", 40.0)]
    next(o for o in ops if o["f"] == "fault" and o["type"] == "ok")["value"].update(process="txp-0")
    return sorted(ops, key=lambda o: o["time"])


def test_a_zombie_its_client_brought_back_is_revived_one_the_workload_remade_is_not_and_one_failing_on_is_stuck():
    """stuck-producer is any producer failing every transaction with no fault active: a zombie, or its control whose
    transactional id expired while it idled."""
    refused = txn("txp-0", 1, 30.5, 30.6, "fail", error="INVALID_PRODUCER_ID_MAPPING: no producer id")
    revived = zombie_run([*refused, *txn("txp-0", 2, 31.0, 31.4), *txn("txp-0", 3, 32.0, 32.4)])
    assert zombie_revived(revived) == ["txp-0: fenced at 5.0 s, resumed at 30.0 s, committed again at 31.4 s with "
                                       "no new producer (2 transaction(s))"]
    assert stuck_producers(revived) == []
    remade = zombie_run([*refused, op("txp-0", "invoke", "init", 30.7), op("txp-0", "ok", "init", 30.8),
                         *txn("txp-0", 2, 31.0, 31.4)])
    assert zombie_revived(remade) == []               # a new producer the workload made: the application's choice
    spinning = zombie_run([*refused, *(o for n in range(2, 7) for o in txn("txp-0", n, 30 + n, 30.1 + n, "fail",
                                                                             error=f"INVALID_PRODUCER_ID_MAPPING {n}"))])
    assert stuck_producers(spinning) == ["txp-0: 6 transaction(s) failed from 30.60 s to quiescence (40.00 s), none "
                                         "committed, no fault active; the last: INVALID_PRODUCER_ID_MAPPING 6"]
    assert zombie_revived(spinning) == []
    ended = zombie_run([*refused, op("txp-0", "fail", "txn", 31.0, fenced=True, error="fenced")])
    assert stuck_producers(ended) == zombie_revived(ended) == []    # refused and exited, as a zombie must
    brief = zombie_run([*refused, *txn("txp-0", 2, 31, 31.1, "fail", error="x"), *txn("txp-0", 3, 32, 32.1, "fail",
                                                                                        error="x")])
    assert stuck_producers(brief) == []             # three failures within 1.5 s: not yet a producer that cannot go on
    idle = zombie_run([*(o for n in range(1, 5) for o in txn("txp-1", n, 30 + 2 * n, 30.1 + 2 * n, "fail",
                                                               error="INVALID_PRODUCER_ID_MAPPING"))])
    assert stuck_producers(idle)[0].startswith("txp-1: 4 transaction(s) failed")   # not the zombie: its control


def test_a_reference_clients_run_is_a_candidate_for_a_bug_whose_variant_names_it(tmp_path):
    from chaos.catalog.bugs import shape_candidates
    from report import build
    assert {"KAFKA-18019"} <= {b.id for b in shape_candidates(frozenset({"confluent-kafka"}))}   # its natural side
    assert "KAFKA-18019" in {b.id for b in shape_candidates(frozenset({"franz-go"}))}            # a variant's
    assert "kafkajs-expired-id-stuck" not in {b.id for b in shape_candidates(frozenset({"confluent-kafka"}))}
    run = write_history(tmp_path, zombie_run([*txn("txp-0", 1, 30.5, 30.6, "fail", error="INVALID_PRODUCER_ID_MAPPING"),
                                              *txn("txp-0", 2, 31.0, 31.4)]))
    (run / "spec.json").write_text(json.dumps({"specs": [{"workload": "txn-producer", "process": "txp-0", "args": []}]}))
    [named] = build.shape_bugs(run)                 # the reference's run: confluent-kafka, KAFKA-18019's own side
    assert named["id"] == "KAFKA-18019" and "with no new producer" in named["occurrences"][0]
    (run / "spec.json").write_text(json.dumps({"specs": [{"workload": "txn-producer", "process": "txp-0",
                                                          "args": ["--client", "kafkajs"]}]}))
    assert build.shape_bugs(run) == []              # KafkaJS: not a client of KAFKA-18019's sides


def test_an_error_a_reference_process_recorded_names_the_reference_clients_bug_and_only_for_its_processes(tmp_path):
    from report import build
    fatal = "KafkaException: Failed to end transaction: Broker: ... invalid state (INVALID_TXN_STATE)"
    run = write_history(tmp_path, [*txn("txp-0", 0, 1.0, 1.2), *txn("txp-0", 1, 2.0, 2.1, "fail", error=fatal)])
    (run / "spec.json").write_text(json.dumps({"specs": [{"workload": "txn-producer", "process": "txp-0", "args": []}]}))
    [named] = build.shape_bugs(run)
    assert named["id"] == "librdkafka-endtxn-after-failover" and "INVALID_TXN_STATE" in named["occurrences"][0]
    (run / "spec.json").write_text(json.dumps({"specs": [{"workload": "txn-producer", "process": "txp-0",
                                                          "args": ["--client", "franz-go"]}]}))
    assert build.shape_bugs(run) == []              # franz-go's INVALID_TXN_STATE is not librdkafka's


def test_a_producer_whose_every_init_is_refused_is_stuck_and_one_aborting_on_purpose_is_not():
    """KAFKA-20090's producer: after the heal every InitProducerId is refused (its transaction stuck at the last
    epoch); a producer that aborts every transaction on purpose (abort-share 1) and whose aborts complete is at work."""
    refusals = [o for n in range(6) for o in (op("txp-0", "invoke", "init", 31.0 + n),
                                              op("txp-0", "fail", "init", 31.1 + n, error="UnknownServerException"))]
    stuck = zombie_run([op("txp-0", "ok", "init", 30.2), *refusals])
    assert stuck_producers(stuck) == ["txp-0: 6 initialisation(s) failed from 31.10 s to quiescence (40.00 s), none "
                                      "committed, no fault active; the last: UnknownServerException"]
    aborting = zombie_run([o for n in range(1, 7) for o in txn("txp-0", n, 30 + n, 30.1 + n, "fail",
                                                               error="deliberate abort")])
    assert stuck_producers(aborting) == []
    failed_abort = zombie_run([o for n in range(1, 7) for o in txn("txp-0", n, 30 + n, 30.1 + n, "fail",
                                                                   error="KafkaException: x", after="deliberate abort")])
    assert stuck_producers(failed_abort)[0].startswith("txp-0: 6 transaction(s) failed")   # the aborts themselves failed


def test_a_brokers_bug_shown_by_a_shape_is_a_candidate_on_its_affected_cluster_only():
    from chaos.catalog.bugs import shape_candidates
    affected = {"kafka_version": "4.2.2", "features": {"transaction.version": "2"},
                "broker_config": {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}}
    assert "KAFKA-20090" in {b.id for b in shape_candidates(frozenset({"java"}), affected)}
    assert "KAFKA-20090" not in {b.id for b in shape_candidates(frozenset({"java"}), {**affected, "kafka_version": "4.3.1"})}
    assert "KAFKA-20090" not in {b.id for b in shape_candidates(frozenset({"java"}))}


def process(name: str, n: int, begin: float, end: float | None, outcome: str = "ok", topic: str = "r-in-b",
            **value) -> list[dict]:
    attempt = {"attempt": f"r.{name}.{n}", "commit_offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
    done = [] if end is None else [op(name, outcome, "process", end, **attempt, **value)]
    return [op(name, "invoke", "process", begin, **attempt), *done]


def test_a_processor_that_stops_at_offsets_of_a_recreated_topic_is_stuck_and_one_that_goes_on_is_not():
    quiet = [op("nemesis", "ok", "quiescence", 40.0)]
    recreated = fault(8.0, 10.0, kind="recreate-topic", topic="r-in-b")
    stuck = [*process("eos-0", 1, 5.0, 5.1), *process("eos-0", 2, 11.0, 41.0, "fail",
                                                      after="TimeoutException: awaiting TxnOffsetCommitHandler")]
    found = recreated_topic_commits_stuck(sorted([*recreated, *stuck, *quiet], key=lambda o: o["time"]))
    assert len(found) == 1 and found[0].startswith("eos-0: transaction r.eos-0.2 with offsets of r-in-b")
    assert "ended fail at 41.00 s: TimeoutException: awaiting TxnOffsetCommitHandler" in found[0]
    never = [*process("eos-0", 2, 11.0, None)]
    assert "never ended" in recreated_topic_commits_stuck([*recreated, *never, *quiet])[0]
    going_on = [*stuck[:2], *process("eos-0", 2, 11.0, 21.5, "fail"), *process("eos-0", 3, 22.0, 22.1)]
    assert recreated_topic_commits_stuck(sorted([*recreated, *going_on, *quiet], key=lambda o: o["time"])) == []
    quick = [*process("eos-0", 2, 11.0, 12.0, "fail")]             # failed fast: an ordinary abort, not this
    assert recreated_topic_commits_stuck([*recreated, *quick, *quiet]) == []
    other_topic = [*process("eos-0", 2, 11.0, None, topic="r-in-a")]
    assert recreated_topic_commits_stuck([*recreated, *other_topic, *quiet]) == []
    before = [*process("eos-0", 2, 7.0, None)]                    # began before the topic was created again
    assert recreated_topic_commits_stuck([*recreated, *before, *quiet]) == []
    assert recreated_topic_commits_stuck([*stuck, *quiet]) == []  # no re-creation in the run


def seek(name: str, at: float, reason: str, parts, topic: str = "r-in-b") -> dict:
    return op(name, "ok", "seek", at, reason=reason, positions=[{"topic": topic, "partition": p} for p in parts])


def polled(name: str, at: float, topic: str = "r-in-b") -> dict:
    return op(name, "invoke", "process", at, attempt=f"r.{name}.{int(at)}", inputs=[{"topic": topic, "partition": 0}])


def test_a_processor_holding_a_recreated_topic_that_reads_none_of_it_is_unread_one_reading_it_is_not():
    quiet = [op("nemesis", "ok", "quiescence", 40.0)]
    recreated = fault(8.0, 10.0, kind="recreate-topic", topic="r-in-b")
    feeding = [op("feeder", "ok", "txn", 20.5, attempt="r.feeder.5", writes=[{"topic": "r-in-b", "partition": 0}])]
    history = [seek("eos-0", 1.0, "assigned", [0, 1]), seek("eos-1", 1.0, "assigned", [2]), polled("eos-0", 5.0),
               polled("eos-1", 12.0), *recreated, *feeding, *quiet]
    found = recreated_topic_unread(sorted(history, key=lambda o: o["time"]))
    assert found == ["eos-0: holds r-in-b partitions [0, 1] and read none of its records from its re-creation (8.01 s) "
                     "to quiescence (40.00 s), while 1 were committed to it"]
    revoked = [*history, seek("eos-0", 15.0, "revoked", [0, 1])]
    assert recreated_topic_unread(sorted(revoked, key=lambda o: o["time"])) == []     # given up: another's to read
    unfed = [o for o in history if o["process"] != "feeder"]
    assert recreated_topic_unread(sorted(unfed, key=lambda o: o["time"])) == []       # nothing to read
