"""Evidence gaps that make the verdict `unknown`, each on a tiny history written by the real writer (or its
files edited after): seals and line counts, missing parts, dropped lines, pairing, group and end offsets."""
from __future__ import annotations

import json

import pytest

from chaos.record.history import HistoryWriter
from spark_analysis import evidence, load
from spark_analysis.evidence import UNSEALED, check_history, load_run_files

ENDS = {"out": {"0": {"hwm": 3, "lso": 3}}, "in": {"0": {"hwm": 3, "lso": 3}}}
NO_FINAL = "no history part is sealed final: the history's last part(s) are missing or cut"
DAMAGED = "the history has 1 damaged line(s) (torn or not JSON)"
WRITES = [{"topic": "out", "partition": 0, "id": "r.txp-0.0.0"}]


def a_run(run_dir, roll_lines=100, extra=(), groups=True, ends=ENDS, poll=True):
    """A finished run: two committed attempts and (poll) an observer's poll, sealed by HistoryWriter."""
    with HistoryWriter(run_dir, roll_lines=roll_lines) as writer:
        for n in range(2):
            value = {"attempt": f"r.txp-0.{n}", "writes": WRITES}
            writer.record("txp-0", "invoke", "txn", value)
            writer.record("txp-0", "ok", "txn", value)
        if poll:
            writer.record("obs-rc", "ok", "poll", {"isolation": "read_committed", "records": []})
        for op in extra:
            writer.record(*op)
    (run_dir / "end_offsets.json").write_text(json.dumps(ends))
    if groups:
        (run_dir / "group_offsets.json").write_text(json.dumps({"r.eos": {"in": {"0": 3}}}))
    return run_dir


def gaps_of(spark, run_dir):
    found = load_run_files(run_dir)
    check_history(spark, run_dir, load.read_history(spark, run_dir), found)
    return found.gaps


def part(run_dir, n=0):
    return run_dir / "history" / f"part-{n:05d}.jsonl"


def edit_lines(path, change):
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(change(lines)))


def test_a_sealed_complete_history_has_no_gap(spark, tmp_path):
    assert gaps_of(spark, a_run(tmp_path, roll_lines=2)) == []
    assert len(list((tmp_path / "history").glob("part-*.jsonl"))) == 3


def test_a_part_emptied_to_0_bytes(spark, tmp_path):
    run = a_run(tmp_path)
    part(run).write_bytes(b"")
    assert gaps_of(spark, run) == ["history/part-00000.jsonl is empty (0 bytes)", NO_FINAL]
    a_run(tmp_path / "rolled", roll_lines=2)
    part(tmp_path / "rolled", 1).write_bytes(b"")
    assert gaps_of(spark, tmp_path / "rolled") == ["history/part-00001.jsonl is empty (0 bytes)",
                                                   "the history holds 3 operation(s), its final seal counts 5"]


def test_a_part_without_its_last_line_is_cut(spark, tmp_path):
    run = a_run(tmp_path, roll_lines=2)
    edit_lines(part(run, 1), lambda lines: lines[:-1])
    gaps = gaps_of(spark, run)
    assert gaps == ["history/part-00001.jsonl is cut: its last line is not its seal"]


def test_a_torn_last_line_is_cut_and_damaged(spark, tmp_path):
    run = a_run(tmp_path)
    edit_lines(part(run), lambda lines: lines[:-1] + [lines[-1][:20]])
    gaps = gaps_of(spark, run)
    assert gaps == [DAMAGED, "history/part-00000.jsonl is cut: its last line is torn", NO_FINAL]  # its seal is gone
    edit_lines(part(run), lambda lines: lines[:-1])
    assert gaps_of(spark, run) == ["history/part-00000.jsonl is cut: its last line is not its seal", NO_FINAL]
    a_run(tmp_path / "rolled", roll_lines=2)
    edit_lines(part(tmp_path / "rolled", 2), lambda lines: [lines[-1][:20]])
    assert gaps_of(spark, tmp_path / "rolled") == [DAMAGED, "history/part-00002.jsonl is cut: its last line is torn",
                                                   NO_FINAL]


def test_a_line_removed_inside_a_part_disagrees_with_its_seal(spark, tmp_path):
    run = a_run(tmp_path)
    edit_lines(part(run), lambda lines: lines[:4] + lines[5:])       # the observer's poll, paired with nothing
    assert gaps_of(spark, run) == ["history/part-00000.jsonl has 4 operation line(s), its seal counts 5",
                                   "the history holds 4 operation(s), its final seal counts 5"]


def test_a_missing_middle_part(spark, tmp_path):
    run = a_run(tmp_path, roll_lines=2)
    part(run, 1).unlink()
    gaps = gaps_of(spark, run)
    assert gaps[0] == "history parts [0, 2] are not numbered 0..1: a part is missing"
    assert "the history holds 3 operation(s), its final seal counts 5" in gaps


def test_a_missing_last_part_leaves_no_final_seal(spark, tmp_path):
    run = a_run(tmp_path, roll_lines=2)
    part(run, 2).unlink()
    assert gaps_of(spark, run) == [NO_FINAL]


def reseal(run, n=0, **changes):
    def change(lines):
        seal = json.loads(lines[-1])
        seal["value"].update(changes)
        return lines[:-1] + [json.dumps(seal) + "\n"]
    edit_lines(part(run, n), change)


def test_dropped_lines_in_a_seal(spark, tmp_path):
    run = a_run(tmp_path)
    reseal(run, dropped=2)
    assert gaps_of(spark, run) == ["the history writer dropped 2 line(s) it could not write (logs/history.log)"]


def test_operations_other_than_the_final_seals(spark, tmp_path):
    run = a_run(tmp_path)
    reseal(run, operations=9)
    assert gaps_of(spark, run) == ["the history holds 5 operation(s), its final seal counts 9"]


def test_a_seal_of_another_part_and_a_final_seal_not_last(spark, tmp_path):
    run = a_run(tmp_path, roll_lines=2)
    reseal(run, 0, part=7, final=True)
    gaps = gaps_of(spark, run)
    assert gaps == ["history/part-00000.jsonl ends with the seal of part 7",
                    "history/part-00000.jsonl is sealed final but is not the last part part-00002.jsonl"]


def test_a_history_without_seals_is_never_a_silent_pass(spark, tmp_path):
    run = a_run(tmp_path, roll_lines=2)
    for n in range(3):
        edit_lines(part(run, n), lambda lines: lines[:-1])
    assert gaps_of(spark, run)[-1] == NO_FINAL              # the writer said it seals: every part was cut
    (run / "history-format.json").unlink()              # as txnlab wrote histories before seals
    assert gaps_of(spark, run) == [UNSEALED]


def test_an_invoke_without_its_completion(spark, tmp_path):
    run = a_run(tmp_path)
    edit_lines(part(run), lambda lines: lines[:1] + lines[2:])        # txp-0's first ok
    gaps = gaps_of(spark, run)
    assert any(g.startswith("1 invoke(s) without their completion (e.g. process txp-0 invoke txn") for g in gaps), gaps
    assert not any("completion(s) without their invoke" in g for g in gaps)


def test_a_completion_without_its_invoke(spark, tmp_path):
    run = a_run(tmp_path)
    edit_lines(part(run), lambda lines: lines[1:])                     # txp-0's first invoke
    gaps = gaps_of(spark, run)
    assert any(g.startswith("1 completion(s) without their invoke (e.g. process txp-0 ok txn") for g in gaps), gaps
    assert not any("invoke(s) without their completion" in g for g in gaps)


def test_observations_and_shutdown_completions_pair(spark, tmp_path):
    run = a_run(tmp_path, extra=[("txp-1", "invoke", "txn", {"attempt": "r.txp-1.0", "writes": WRITES}),
                                 ("vp", "ok", "produce", {"id": "7", "topic": "in", "partition": 0, "offset": 1}),
                                 ("vp", "invoke", "produce", {"id": "8", "topic": "in"}),
                                 ("vp", "info", "produce", {"id": "8", "topic": "in"})])
    assert gaps_of(spark, run) == []        # txp-1's invoke is completed as info by close()


def test_no_group_offsets_while_the_run_has_processors(spark, tmp_path):
    process = ("proc-0", "invoke", "process", {"attempt": "r.proc-0.0", "group": "r.eos", "writes": WRITES})
    run = a_run(tmp_path, groups=False, extra=[process, (*process[:1], "ok", *process[2:])])
    assert gaps_of(spark, run) == ["no group_offsets.json, but the run has consumers (processors, copiers, Streams): the processing "
                                   "checks would judge against no committed offsets"]
    (run / "group_offsets.json").write_text("{}")
    assert gaps_of(spark, run) == ["group r.eos committed (ok process attempts) but group_offsets.json does not "
                                   "record it"]


def test_no_group_offsets_without_processors_or_copiers_is_no_gap(spark, tmp_path):
    assert gaps_of(spark, a_run(tmp_path, groups=False)) == []


def test_a_copier_without_group_offsets(spark, tmp_path):
    jvm = ("jc/jvm", "invoke", "jvm", {"tool": "TransactionalMessageCopier",
                                       "args": ["--input-topic", "in", "--output-topic", "out"]})
    run = a_run(tmp_path, groups=False, extra=[jvm, ("jc/jvm", "ok", "jvm", {})])
    assert gaps_of(spark, run)[0].startswith("no group_offsets.json, but the run has consumers (processors, copiers, Streams)")


def test_a_written_topic_missing_from_end_offsets(spark, tmp_path):
    jvm = ("jc/jvm", "invoke", "jvm", {"tool": "TransactionalMessageCopier",
                                       "args": ["--input-topic", "in", "--output-topic", "copied"]})
    send = ("vp", "ok", "produce", {"id": "7", "topic": "sent", "partition": 0, "offset": 1})
    run = a_run(tmp_path, extra=[jvm, ("jc/jvm", "ok", "jvm", {}), send], ends={"in": ENDS["in"]})
    assert gaps_of(spark, run) == [
        f"topic {t} was written to (history) but end_offsets.json does not record it: it would not be read"
        for t in ("copied", "out", "sent")]


@pytest.mark.parametrize("text, gap", [
    ("{}", "end_offsets.json records no topic: nothing bounds what to read"),
    ("{\"out\": ", "end_offsets.json is not JSON"),
])
def test_empty_or_damaged_end_offsets(tmp_path, text, gap):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "part-00000.jsonl").write_text("{}\n")
    (tmp_path / "end_offsets.json").write_text(text)
    assert load_run_files(tmp_path).gaps[0].startswith(gap)


def test_seal_gaps_on_no_parts_and_on_empty_files_only():
    assert evidence.seal_gaps([], {}) == ["no history under history/"]
    empty = evidence.Part(0, "part-00000.jsonl", 0, None, "empty")
    assert evidence.seal_gaps([empty], {}, sealed=False) == ["history/part-00000.jsonl is empty (0 bytes)"]
    assert evidence.seal_gaps([empty], {}) == ["history/part-00000.jsonl is empty (0 bytes)", NO_FINAL]


def test_checks_apply_only_to_the_workloads_a_run_has():
    from spark_analysis.evidence import HistorySummary, workload_kinds
    from spark_analysis.verdict import CHECKS, NEEDS
    assert {c.needs for c in CHECKS} - {None} == set(NEEDS)
    assert workload_kinds(HistorySummary()) == set()
    summary = HistorySummary(has_processors=True, copiers=[("in", "out", "g")],
                             streams=[("app", ["a"], "o", "c", "app-counts-changelog")])
    assert workload_kinds(summary) == {"processors", "copiers", "streams"}
    assert workload_kinds(HistorySummary(copiers=[("in", "out", "g")])) == {"copiers"}
    assert workload_kinds(HistorySummary(has_polls=True)) == {"polls"}


@pytest.mark.parametrize("extra, polls", [
    ((), False),
    ((("obs-rc", "ok", "poll", {"isolation": "read_committed", "records": []}),), True),
    ((("obs-rc", "ok", "seek", {"isolation": "read_committed", "positions": []}),), True),
    ((("proc-0", "invoke", "process", {"attempt": "r.proc-0.0", "group": "r.eos", "inputs": []}),), True),
    ((("txp-1", "fail", "poll", {"error": "x"}), ("x", "invoke", "txn", {"attempt": "r.x.0"})), True)])
def test_the_summary_says_whether_polls_are_recorded(spark, tmp_path, extra, polls):
    run = a_run(tmp_path, extra=extra, poll=False)
    summary = check_history(spark, run, load.read_history(spark, run), load_run_files(run))
    assert summary.has_polls is polls


def test_a_streams_application_without_recorded_group_offsets_is_a_gap():
    from spark_analysis.evidence import Evidence, HistorySummary, group_gaps
    summary = HistorySummary(streams=[("r.streams", ["a"], "o", "c", "r.streams-counts-changelog")])
    assert group_gaps(summary, Evidence(group_offsets={"r.streams": {"a": {"0": 3}}})) == []
    assert group_gaps(summary, Evidence(group_offsets={}))[0].startswith("Kafka Streams application or Flink job r.streams")


def test_a_flink_job_whose_client_did_not_drain_it_leaves_what_it_processed_untold(spark, tmp_path):
    """A Flink job's group offsets are committed by its source when a checkpoint completes: final only once its
    client drained the job (its `stopped` event, drained: true); otherwise the run's evidence has a gap."""
    topology = ("flink-job", "ok", "flink", {"event": "topology", "application_id": "r.flink", "sources": ["in"],
                                             "sink": "out", "counts": "out", "changelog": None})
    stopped = ("flink-job", "ok", "flink", {"event": "stopped", "application_id": "r.flink", "drained": False})
    groups = {"r.flink": {"in": {"0": 3}}}
    run = a_run(tmp_path, extra=[topology, stopped])
    (run / "group_offsets.json").write_text(json.dumps(groups))
    [gap] = gaps_of(spark, run)
    assert gap.startswith("Flink job r.flink: its client recorded no drained stop")
    drained = (*stopped[:3], {**stopped[3], "drained": True})
    run = a_run(tmp_path / "drained", extra=[topology, drained])
    (run / "group_offsets.json").write_text(json.dumps(groups))
    assert gaps_of(spark, run) == []
