"""A topic deleted and created again during a run (the recreate-topic fault, chaos/nemesis/recreate_topic.py): the
procedure's pause at a transaction boundary and its catch-up rule, the archived incarnation the verification trusts
only whole, deleted and caught up (spark_analysis/evidence.py check_incarnations), and how its records and the
history's references to them become a topic of their own (load.read_incarnations, incarnation_of, relabel,
relabel_by_time), so that offsets starting again at 0 never collide with the old ones."""
from __future__ import annotations

import json

import pytest

from chaos.nemesis import recreate_topic
from chaos.nemesis.faults import make_fault
from chaos.record.archive import incarnation_dir, mark_incarnation, seal_archive
from spark_analysis import load
from spark_analysis.evidence import Evidence, check_incarnations
from tests.unit.test_archive import ENDS, TOPIC, reader

ALIAS = f"{TOPIC}~1"
OLD_ENDS = ENDS[TOPIC]


def incarnation(tmp_path, deleted=True, caught_up=True):
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    manifest = seal_archive(run, ENDS, lambda: {TOPIC: {0: 0, 1: 0}}, reader(), "test",
                            final=incarnation_dir(run, ALIAS),
                            extra={"topic": TOPIC, "alias": ALIAS, "ends": OLD_ENDS, "group": "r1.eos",
                                   "deleted": False})
    mark_incarnation(manifest, group_offsets={"0": 2}, caught_up=caught_up)
    if deleted:
        mark_incarnation(manifest, deleted=True, deleted_at=5_000)
    return run, manifest


def checked(run):
    found = Evidence()
    check_incarnations(run, found)
    return found


def test_a_whole_deleted_caught_up_incarnation_is_evidence(tmp_path):
    run, _ = incarnation(tmp_path)
    found = checked(run)
    assert found.gaps == []
    assert [m["alias"] for m in found.incarnations] == [ALIAS]
    assert found.incarnations[0]["group_offsets"] == {"0": 2}


def test_last_committed_reads_the_committed_view(tmp_path):
    _, manifest = incarnation(tmp_path)
    assert recreate_topic.last_committed(manifest) == {"0": 2}      # offsets 0..2 committed, 3 aborted


@pytest.mark.parametrize("change, gap", [
    ({"deleted": False}, "the deletion of r1-t was never confirmed"),
    ({"caught_up": False}, "group r1.eos had not committed to the end of r1-t"),
    ({"alias": "other"}, "its manifest does not name its topic, alias and ends"),
])
def test_an_incarnation_the_verification_cannot_trust_is_a_gap(tmp_path, change, gap):
    run, manifest = incarnation(tmp_path)
    mark_incarnation(manifest, **change)
    found = checked(run)
    assert any(gap in g for g in found.gaps), found.gaps
    assert found.incarnations == []


def test_a_cut_incarnation_file_is_a_gap(tmp_path):
    run, manifest = incarnation(tmp_path)
    view = manifest.parent / "committed.parquet"
    view.write_bytes(view.read_bytes()[:-10])
    found = checked(run)
    assert any("cut or changed" in g for g in found.gaps) and found.incarnations == []


def test_a_run_without_incarnations_has_none(tmp_path):
    found = checked(tmp_path)
    assert found.gaps == [] and found.incarnations == []


def test_its_records_read_under_the_alias_and_the_history_moved_by_id(spark, tmp_path):
    run, _ = incarnation(tmp_path)
    manifests = checked(run).incarnations
    old = load.read_incarnations(spark, run, manifests, "read_uncommitted")
    records = load.records_of(old, "uncommitted", run_tag="r1")
    assert {r["topic"] for r in records.collect()} == {ALIAS}
    assert sorted(r["offset"] for r in records.collect()) == [0, 1, 2, 3]
    moved = load.incarnation_of(records, manifests)
    # the same name and partition, offsets again from 0: r1.txp-0.0.0 was in the old incarnation, r1.txp-1.0.0 is new
    acks = spark.createDataFrame([(TOPIC, 0, 0, "r1.txp-0.0.0"), (TOPIC, 0, 0, "r1.txp-1.0.0"), ("r1-u", 0, 0, None)],
                                 "topic string, partition int, offset long, id string")
    got = sorted((r["topic"], r["id"] or "") for r in load.relabel(acks, moved).collect())
    assert got == [(TOPIC, "r1.txp-1.0.0"), (ALIAS, "r1.txp-0.0.0"), ("r1-u", "")]
    assert load.relabel(acks, None) is acks


def test_seeks_go_to_the_incarnation_by_time(spark):
    manifests = [{"topic": "t", "alias": "t~2", "deleted_at": 200}, {"topic": "t", "alias": "t~1", "deleted_at": 100}]
    seeks = spark.createDataFrame([("t", 50), ("t", 150), ("t", 250), ("u", 50)], "topic string, time long")
    got = [(r["topic"], r["time"]) for r in load.relabel_by_time(seeks, manifests).orderBy("time", "topic").collect()]
    assert got == [("t~1", 50), ("u", 50), ("t~2", 150), ("t", 250)]


class Writer:
    """A run's pause and resume of the writer, counted."""
    def __init__(self, running=True):
        self.calls, self.running = [], running

    def pause(self, name):
        self.calls.append(("pause", name))
        return self.running

    def resume(self, name):
        self.calls.append(("resume", name))
        return True


OPEN = {"0": {"lso": 3, "hwm": 5}}
SETTLED = {"0": {"lso": 5, "hwm": 5}}


def test_the_writer_is_paused_where_no_transaction_of_it_is_open(monkeypatch):
    monkeypatch.setattr(recreate_topic, "SETTLE_S", 0)
    reads = iter([OPEN, SETTLED, SETTLED])
    run = Writer()
    got = recreate_topic.pause_between_transactions(run, "feeder", lambda: next(reads))
    assert got == {"ends": SETTLED, "boundary_tries": 2}
    assert run.calls == [("pause", "feeder"), ("resume", "feeder"), ("pause", "feeder")]


def test_no_boundary_found_leaves_the_writer_running(monkeypatch):
    monkeypatch.setattr(recreate_topic, "SETTLE_S", 0)
    run = Writer()
    with pytest.raises(recreate_topic.RecreateError, match="no transaction boundary"):
        recreate_topic.pause_between_transactions(run, "feeder", lambda: OPEN, tries=3)
    assert run.calls[-1] == ("resume", "feeder") and len(run.calls) == 6


def test_a_writer_not_running_is_refused(monkeypatch):
    with pytest.raises(recreate_topic.RecreateError, match="not running"):
        recreate_topic.pause_between_transactions(Writer(running=False), "feeder", lambda: SETTLED)


def test_the_next_alias_counts_the_archived_incarnations(tmp_path):
    assert recreate_topic.next_alias(tmp_path, "r1-t") == "r1-t~1"
    (tmp_path / "incarnations" / "r1-t~1").mkdir(parents=True)
    (tmp_path / "incarnations" / "r1-tt~1").mkdir()
    assert recreate_topic.next_alias(tmp_path, "r1-t") == "r1-t~2"


def test_the_fault_journals_the_topic_and_the_writer_and_heals_nothing_unstarted():
    fault = make_fault("recreate-topic", {"topic": "{tag}-in-b"})
    assert fault.params.writer == "feeder" and fault.params.group == "{tag}.eos"
    fault.state = recreate_topic.Recreation("r1-in-b", 6)
    assert fault.undo_steps(type("Env", (), {"run": None})()) == [
        {"step": "create-topic", "topic": "r1-in-b", "partitions": 6}]
    assert fault.heal(None) == {"skipped": "not started"}
    with pytest.raises(Exception, match="topic"):
        make_fault("recreate-topic", {})
    assert json.dumps(fault.params.model_dump())


def test_held_processes_are_journaled_and_released_by_the_heal():
    fault = make_fault("recreate-topic", {"topic": "{tag}-in-b", "hold": ["eos-0", "eos-1"], "hold_s": 1})
    fault.state = recreate_topic.Recreation("r1-in-b", 6, held=["eos-1"], deleted=True, created=True)
    run = Writer()
    env = type("Env", (), {"run": run, "require_run": lambda self: run})()
    assert fault.heal(env) == {"topic": "r1-in-b", "released": {"eos-1": True}}
    assert run.calls == [("resume", "eos-1")] and fault.state.held == []
    assert fault.heal(env) == {"topic": "r1-in-b"}                     # released once


def test_a_topic_that_changed_since_it_was_archived_is_not_deleted():
    """The re-check at the moment of the deletion: another id or other ends than the archived ones refuse it."""
    ends = {"0": {"hwm": 5, "lso": 5}}
    recreate_topic.unchanged("r1-t", ("id-a", ends), ("id-a", {"0": {"hwm": 5, "lso": 5}}))
    with pytest.raises(recreate_topic.RecreateError, match="changed since it was archived"):
        recreate_topic.unchanged("r1-t", ("id-a", ends), ("id-a", {"0": {"hwm": 6, "lso": 6}}))
    with pytest.raises(recreate_topic.RecreateError, match="not deleted"):
        recreate_topic.unchanged("r1-t", ("id-a", ends), ("id-b", ends))
