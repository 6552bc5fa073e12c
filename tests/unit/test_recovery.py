"""Recovery and liveness after each fault, from small synthetic histories (chaos/record/recovery.py)."""
from __future__ import annotations

import time

from chaos.record.recovery import recovery, summary
from report.build import fault_line
from cluster.access.admin import ClusterAdmin


def op(t: float, process: str, op_type: str, f: str, **value) -> dict:
    return {"time": int(t * 1e9), "wall": 1_800_000_000 + t, "process": process, "type": op_type, "f": f,
            "value": value}


def commit(t: float, process: str, f: str = "txn", **value) -> list[dict]:
    return [op(t - 0.1, process, "invoke", f, **value), op(t, process, "ok", f, **value)]


def fault(start: float, heal: float | None, n: int = 0, kind: str = "kill-broker", heal_type: str = "ok") -> list[dict]:
    ops = [op(start, f"nemesis-{n}", "invoke", "fault", kind=kind), op(start + 0.2, f"nemesis-{n}", "ok", "fault", kind=kind)]
    if heal is not None:
        ops += [op(heal - 0.5, f"nemesis-{n}", "invoke", "heal", kind=kind), op(heal, f"nemesis-{n}", heal_type, "heal",
                                                                                 kind=kind)]
    return ops


def quiescence(t: float) -> list[dict]:
    return [op(t, "nemesis", "invoke", "quiescence"), op(t + 5, "nemesis", "ok", "quiescence")]


def groups(t: float, offset: int, group: str = "r1.eos") -> dict:
    return op(t, "observer-groups", "ok", "group_offsets", **{group: {"r1-in-a": {"0": offset, "1": 3}}})


def sample_failed(t: float) -> dict:
    return op(t, "observer-groups", "ok", "group_offsets_error", error="KafkaTimeoutError: list_groups")


def run(*parts) -> list[dict]:
    ops = [o for part in parts for o in (part if isinstance(part, list) else [part])]
    return sorted(ops, key=lambda o: o["time"])


def test_every_process_commits_again_after_the_heal_and_the_times_are_measured_from_start_and_heal():
    found = recovery(run(commit(1, "txp-0"), commit(2, "eos-0", "process", group="r1.eos"),
                         fault(10, 20), commit(12, "txp-0"), commit(23.5, "txp-0"), commit(26, "eos-0", "process"),
                         quiescence(40)))
    [f] = found["faults"]
    assert (f["kind"], f["start_s"], f["heal_s"], f["heal_ok"], f["recovered"]) == ("kill-broker", 10.0, 20.0, True, True)
    assert f["processes"]["txp-0"] == {"seconds_to_commit_after_start": 2.0, "seconds_to_commit_after_heal": 3.5,
                                       "status": "recovered"}
    assert f["processes"]["eos-0"]["seconds_to_commit_after_heal"] == 6.0
    assert found["recovered"] is True and found["horizon_s"] == 40.0


def test_a_process_that_never_commits_again_before_quiescence_leaves_the_fault_not_recovered():
    found = recovery(run(commit(1, "eos-0", "process"), commit(1, "eos-1", "process"), fault(10, 20),
                         commit(22, "eos-1", "process"), quiescence(40), commit(41, "eos-0", "process")))
    [f] = found["faults"]
    assert f["processes"]["eos-0"] == {"seconds_to_commit_after_start": None, "seconds_to_commit_after_heal": None,
                                       "status": "not recovered"}     # its commit in quiescence does not count
    assert f["processes"]["eos-1"]["status"] == "recovered"
    assert (f["recovered"], found["recovered"]) == (False, False)
    assert found["last_commit_s"] == {"eos-0": 1.0, "eos-1": 22.0}


def test_a_fenced_zombie_that_exited_has_ended_and_its_successor_counts_from_its_start():
    found = recovery(run(commit(1, "txp-0"), fault(10, 25, kind="zombie-producer"), commit(13, "txp-0-zombie"),
                         commit(27, "txp-0-zombie"), op(25.5, "txp-0", "invoke", "txn"),
                         op(26, "txp-0", "info", "txn", fenced=True, error="fenced"), quiescence(40)))
    [f] = found["faults"]
    assert f["processes"]["txp-0"]["status"] == "ended"
    assert f["processes"]["txp-0-zombie"] == {"seconds_to_commit_after_start": 3.0,
                                              "seconds_to_commit_after_heal": 2.0, "status": "recovered"}
    assert f["recovered"] is True


def test_a_successor_the_heal_stopped_has_ended_so_the_returning_zombie_is_what_is_judged():
    heal = op(30, "nemesis-0", "ok", "heal", kind="zombie-producer", stopped=["eos-0-zombie"], txn_id_expired=True)
    base = (commit(1, "eos-0", "process"), op(10, "nemesis-0", "invoke", "fault", kind="zombie-producer"),
            {**op(10.2, "nemesis-0", "ok", "fault"), "value": {"kind": "zombie-producer", "process": "eos-0"}},
            commit(13, "eos-0-zombie", "process"),
            op(29.5, "nemesis-0", "invoke", "heal", kind="zombie-producer"), heal)
    fenced = recovery(run(*base, op(31, "eos-0", "info", "process", fenced=True, error="fenced"), quiescence(45)))
    assert {p: e["status"] for p, e in fenced["faults"][0]["processes"].items()} == {"eos-0": "ended",
                                                                                   "eos-0-zombie": "ended"}
    assert fenced["recovered"] is True and fenced["faults"][0]["zombie_returned"] is None
    back = recovery(run(*base, commit(33, "eos-0", "process"), commit(34, "eos-0", "process"), quiescence(45),
                        commit(46, "eos-0", "process")))                        # the zombie commits again
    [f] = back["faults"]
    assert f["processes"]["eos-0"]["status"] == "recovered"
    assert f["zombie_returned"] == {"process": "eos-0", "first_commit_s": 33.0, "commits": 2,      # not in quiescence
                                    "initialised_s": None}
    assert summary(back)["faults"][0]["zombie_returned"] == f["zombie_returned"]
    assert ("the fenced zombie eos-0 came back (its client re-initialised by itself): it committed again at 33.0 s "
            "(2 transaction(s)") in fault_line(f)
    made = recovery(run(*base, op(31, "eos-0", "fail", "process", error="fatal"), op(31.5, "eos-0", "invoke", "init"),
                        op(32, "eos-0", "ok", "init"), commit(33, "eos-0", "process"), quiescence(45)))
    assert made["faults"][0]["zombie_returned"]["initialised_s"] == 32.0
    assert "(a new producer made at 32.0 s after a fatal error)" in fault_line(made["faults"][0])
    silent = recovery(run(*base[:-1], {**heal, "value": {"kind": "zombie-producer"}}, quiescence(45)))
    assert silent["faults"][0]["processes"]["eos-0-zombie"]["status"] != "ended"     # not named: not ended


def test_a_process_gone_before_the_fault_or_started_after_its_heal_is_not_judged_for_it():
    found = recovery(run(commit(1, "txp-0"), op(2, "txp-0", "fail", "txn", fenced=True), commit(1, "txp-1"),
                         fault(10, 20), commit(21, "txp-1"), commit(30, "txp-2"), quiescence(40)))
    assert set(found["faults"][0]["processes"]) == {"txp-1"} and found["recovered"] is True


def test_a_java_copier_commits_by_copy_events_that_copied_records_and_ends_with_its_jvm():
    found = recovery(run(op(1, "java-copier-0", "ok", "copy", event="ProcessLoop", copied=5), fault(10, 20),
                         op(21, "java-copier-0", "ok", "copy", event="RebalanceComplete", copied=0),
                         op(24, "java-copier-0", "ok", "copy", event="ProcessLoop", copied=5), quiescence(40)))
    assert found["faults"][0]["processes"]["java-copier-0"]["seconds_to_commit_after_heal"] == 4.0
    ended = recovery(run(op(1, "java-copier-0", "ok", "copy", event="ProcessLoop", copied=5), fault(10, 20),
                         op(15, "java-copier-0/jvm", "ok", "jvm", exit_code=0), quiescence(40)))
    assert ended["faults"][0]["processes"]["java-copier-0"]["status"] == "ended" and ended["recovered"] is True


def test_no_faults_is_recovered_and_an_empty_history_too():
    found = recovery(run(commit(1, "txp-0"), quiescence(10)))
    assert found == {"horizon_s": 10.0, "faults": [], "stalls": [], "recovered": True, "last_commit_s": {"txp-0": 1.0}}
    assert recovery([])["recovered"] is True


def test_a_failed_heal_counts_from_its_attempt_and_a_fault_never_healed_is_not_recovered():
    failed = recovery(run(commit(1, "txp-0"), fault(10, 20, heal_type="fail"), commit(22, "txp-0"), quiescence(40)))
    [f] = failed["faults"]
    assert (f["heal_ok"], f["processes"]["txp-0"]["seconds_to_commit_after_heal"], f["recovered"]) == (False, 2.0, True)
    never = recovery(run(commit(1, "txp-0"), fault(10, None), commit(22, "txp-0"), quiescence(40)))
    [f] = never["faults"]
    assert f["heal_s"] is None and f["processes"]["txp-0"]["seconds_to_commit_after_heal"] is None
    assert f["processes"]["txp-0"]["seconds_to_commit_after_start"] == 12.0
    assert (f["recovered"], never["recovered"]) == (False, False)


def test_a_heal_at_the_end_of_the_run_leaves_its_recovery_unknown_not_failed():
    found = recovery(run(commit(1, "eos-0", "process"), commit(1, "eos-1", "process"), fault(10, 20),
                         fault(25, 39.6, n=1), commit(22, "eos-0", "process"), commit(39.8, "eos-0", "process"),
                         commit(30, "eos-1", "process"), quiescence(40)))
    first, late = found["faults"]
    assert first["recovered"] is True
    assert late["processes"]["eos-1"]["status"] == "unobserved" and late["processes"]["eos-0"]["status"] == "recovered"
    assert (late["recovered"], found["recovered"]) == ("unknown", "unknown")
    stuck = recovery(run(commit(1, "eos-0", "process"), fault(10, 20), fault(25, 39.6, n=1),
                         op(21, "eos-0", "invoke", "process"), op(31, "eos-0", "fail", "process"), quiescence(40)))
    assert [f["recovered"] for f in stuck["faults"]] == [False, "unknown"] and stuck["recovered"] is False


def test_group_offsets_that_advance_after_the_heal_recover_and_ones_that_stay_do_not():
    moving = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(8, 10), groups(10.5, 10), fault(10, 20),
                          groups(18, 10), groups(20.5, 10), groups(22.5, 12), commit(21, "eos-0", "process"),
                          quiescence(40)))
    [f] = moving["faults"]
    assert f["groups"]["r1.eos"] == {"seconds_to_advance_after_start": 12.5, "seconds_to_advance_after_heal": 2.5,
                                     "status": "recovered"}
    assert f["recovered"] is True
    stuck = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(8, 10), fault(10, 20),
                         commit(21, "eos-0", "process"), groups(22, 10), groups(38, 10), quiescence(40),
                         groups(41, 30)))
    [f] = stuck["faults"]
    assert f["groups"]["r1.eos"] == {"seconds_to_advance_after_start": None, "seconds_to_advance_after_heal": None,
                                     "status": "not recovered"}
    assert f["processes"]["eos-0"]["status"] == "recovered" and f["recovered"] is False


def test_a_group_whose_members_all_ended_is_not_held_against_the_fault():
    found = recovery(run(op(1, "java-copier-0", "ok", "copy", event="ProcessLoop", copied=5),
                         groups(8, 10, group="r1.java-copier"), fault(10, 20),
                         op(15, "java-copier-0", "ok", "copy", event="ShutdownComplete", copied=0),
                         groups(22, 10, group="r1.java-copier"), quiescence(40)))
    assert found["faults"][0]["groups"]["r1.java-copier"]["status"] == "ended" and found["recovered"] is True


def test_a_group_whose_samples_after_the_heal_all_failed_is_unknown_with_why_never_not_recovered():
    failing = [sample_failed(t) for t in range(22, 40, 2)]
    found = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(8, 10), fault(10, 20), *failing,
                         commit(21, "eos-0", "process"), quiescence(40)))
    [f] = found["faults"]
    assert f["groups"]["r1.eos"] == {"seconds_to_advance_after_start": None, "seconds_to_advance_after_heal": None,
                                     "status": "unknown", "why": "no sample of its offsets after the heal "
                                                                 "(9 sample(s) failed)"}
    assert f["processes"]["eos-0"]["status"] == "recovered"
    assert (f["recovered"], found["recovered"]) == ("unknown", "unknown")
    assert f["why"] == ["group r1.eos: no sample of its offsets after the heal (9 sample(s) failed)"]
    silent = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(8, 10), fault(10, 20),
                          commit(21, "eos-0", "process"), quiescence(40)))          # no sample at all after it
    assert silent["faults"][0]["groups"]["r1.eos"]["why"] == "no sample of its offsets after the heal"
    assert silent["faults"][0]["recovered"] == "unknown"


def test_group_samples_that_stop_long_before_quiescence_leave_the_rest_unseen_so_unknown():
    found = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(8, 10), fault(10, 20), groups(22, 10),
                         groups(24, 10), *[sample_failed(t) for t in range(26, 40, 2)], commit(21, "eos-0", "process"),
                         quiescence(40)))
    entry = found["faults"][0]["groups"]["r1.eos"]
    assert entry["status"] == "unknown" and entry["why"] == ("its offsets were last sampled 16.0 s before quiescence "
                                                             "(7 sample(s) failed)")
    assert found["faults"][0]["recovered"] == "unknown"


def test_a_group_whose_members_first_commit_after_the_heal_came_after_its_last_sample_is_unknown_not_stuck():
    """The docker gate's franz-go run (CI of 9900880): the processor committed again 4.6 s after a broker's
    heal, 0.3 s before quiescence, after the last sample (taken 1.2 s before it): no sample could show it."""
    late = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(38.9, 10), fault(19.4, 39.4),
                        groups(41, 10), groups(43.1, 10), commit(44.0, "eos-0", "process"), quiescence(44.3),
                        groups(45.2, 30)))
    [f] = late["faults"]
    assert f["processes"]["eos-0"]["status"] == "recovered"
    assert f["groups"]["r1.eos"]["status"] == "unknown"
    assert f["groups"]["r1.eos"]["why"] == ("its members first committed again 4.6 s after the heal, after its last "
                                            "sample before quiescence (1.2 s before it)")
    assert f["recovered"] == "unknown"
    seen = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), groups(38.9, 10), fault(19.4, 39.4),
                        commit(40.0, "eos-0", "process"), groups(41, 10), groups(43.1, 10), quiescence(44.3)))
    assert seen["faults"][0]["groups"]["r1.eos"]["status"] == "not recovered"   # sampled after it: it stayed


def test_a_process_that_recorded_nothing_after_the_heal_is_unknown_one_that_kept_failing_is_not_recovered():
    silent = recovery(run(commit(1, "eos-0", "process"), fault(10, 20), quiescence(40)))
    assert silent["faults"][0]["processes"]["eos-0"] == {
        "seconds_to_commit_after_start": None, "seconds_to_commit_after_heal": None, "status": "unknown",
        "why": "it recorded nothing after the heal"}
    assert silent["faults"][0]["why"] == ["eos-0: it recorded nothing after the heal"]
    assert silent["recovered"] == "unknown"
    failing = recovery(run(commit(1, "eos-0", "process"), fault(10, 20), op(25, "eos-0", "invoke", "process"),
                           op(30, "eos-0", "fail", "process", error="timeout"), quiescence(40)))
    assert failing["faults"][0]["processes"]["eos-0"]["status"] == "not recovered"
    assert failing["faults"][0]["why"] == ["eos-0: never committed after the heal"]
    assert failing["recovered"] is False
    hung = recovery(run(commit(1, "eos-0", "process"), op(15, "eos-0", "invoke", "process"), fault(10, 20),
                        quiescence(40), op(46, "eos-0", "info", "process", reason="shutdown")))
    assert hung["faults"][0]["processes"]["eos-0"]["status"] == "not recovered"     # stuck in one call: seen


def test_without_a_sample_before_the_reference_the_first_one_after_it_is_the_base_not_an_advance():
    found = recovery(run(commit(1, "eos-0", "process", group="r1.eos"), sample_failed(8), fault(10, 20),
                         groups(22, 10), groups(24, 12), commit(21, "eos-0", "process"), quiescence(40)))
    entry = found["faults"][0]["groups"]["r1.eos"]
    assert (entry["seconds_to_advance_after_heal"], entry["seconds_to_advance_after_start"]) == (4.0, 14.0)


def test_each_fault_has_the_slowest_commit_and_advance_and_chaos_run_gets_them_without_the_detail():
    found = recovery(run(commit(1, "txp-0"), commit(2, "eos-0", "process", group="r1.eos"), groups(8, 10),
                         fault(10, 20), commit(12, "txp-0"), commit(23.5, "txp-0"), commit(26, "eos-0", "process"),
                         groups(20.5, 10), groups(22.5, 12), groups(38, 14), quiescence(40)))
    [f] = found["faults"]
    assert (f["seconds_to_commit_after_heal"], f["seconds_to_commit_after_start"]) == (6.0, 16.0)   # eos-0, slowest
    assert (f["seconds_to_advance_after_heal"], f["seconds_to_advance_after_start"]) == (2.5, 12.5)
    assert (f["recovered"], f["why"]) == (True, [])
    brief = summary(found)
    assert brief["recovered"] is True and brief["horizon_s"] == 40.0
    assert brief["faults"] == [{"process": "nemesis-0", "kind": "kill-broker", "start_s": 10.0, "heal_s": 20.0,
                                "heal_ok": True, "recovered": True, "seconds_to_commit_after_start": 16.0,
                                "seconds_to_commit_after_heal": 6.0, "seconds_to_advance_after_start": 12.5,
                                "seconds_to_advance_after_heal": 2.5, "why": [], "stalls": [], "restarted": [],
                                "zombie_returned": None}]
    assert summary({"error": "HistoryError: no history"}) == {"recovered": "unknown",
                                                               "error": "HistoryError: no history"}


# ---- the group offsets sampler of a run (chaos/workloads/run.py) ------------------------------------------------------
def test_a_run_samples_its_groups_offsets_into_the_history_and_a_failed_sample_is_a_gap(tmp_path, monkeypatch):
    from collections import namedtuple
    from types import SimpleNamespace

    from chaos.workloads import run as run_module
    from chaos.record.history import read_history
    from cluster.access.connection import ConnectionSettings

    calls = {"n": 0, "clients": 0}

    class FakeClient:
        def list_groups(self):
            calls["n"] += 1
            if calls["n"] == 2:
                raise TimeoutError("coordinator down")
            return [{"group_id": "r1.eos"}, {"group_id": "other.eos"}]

        def list_group_offsets(self, groups):
            assert groups == ["r1.eos"]
            tp = namedtuple("TopicPartition", "topic partition")
            return {"r1.eos": {tp("r1-in-a", 0): SimpleNamespace(offset=10 + calls["n"]),
                               tp("elsewhere", 0): SimpleNamespace(offset=5)}}

    class FakeAdmin:
        group_offsets = ClusterAdmin.group_offsets           # the real reading, over the fake client

        def __init__(self, conn, **kwargs):
            calls["clients"] += 1
            self.client = FakeClient()

        def close(self):
            pass

    monkeypatch.setattr(run_module, "ClusterAdmin", FakeAdmin)
    run = run_module.Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path, "r1", 0, "t")
    run.use_topics(["r1-in-a"])
    run.sample_group_offsets(every_s=0.02)
    deadline = time.monotonic() + 5
    while calls["n"] < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    run.stop_all()
    count = calls["n"]
    time.sleep(0.1)
    assert calls["n"] == count                                # stopped with the workloads
    run.history.close()
    ops = [op for op in read_history(tmp_path).ops if op["process"] == "observer-groups"]
    samples = [op for op in ops if op["f"] == "group_offsets"]
    assert samples and all(op["type"] == "ok" for op in ops)          # observations: no invoke to pair
    assert samples[0]["value"] == {"r1.eos": {"r1-in-a": {"0": 11}}}
    assert len(samples) == count - 1 and calls["clients"] == 2    # the failed one: no sample, a fresh client
    [gap] = [op for op in ops if op["f"] == "group_offsets_error"]  # ... and recorded as a gap
    assert gap["value"] == {"error": "TimeoutError: coordinator down"} and ops[1] == gap


# ---- `txnlab chaos run` says it (txnlab/cli.py) ----------------------------------------------------------------
def test_chaos_run_prints_one_recovery_line_per_fault_and_the_summary_in_its_json(monkeypatch, capsys, tmp_path):
    import argparse
    import json
    from types import SimpleNamespace

    from chaos.runner import experiment
    from report import stack
    from txnlab.commands import chaos as cli

    found = recovery(run(commit(1, "txp-0"), fault(10, 20), commit(23.5, "txp-0"), fault(25, 30, n=1),
                         op(31, "txp-0", "invoke", "txn"), quiescence(40)))

    class FakeExperiment:
        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            return SimpleNamespace(run_dir=tmp_path, steady=True, error=None, quiescence={}, recovery=found)

    monkeypatch.setattr(experiment, "Experiment", FakeExperiment)
    monkeypatch.setattr(stack, "local_stack", lambda: {})
    args = argparse.Namespace(spec="zombie-producer", short=True, dry_run=False, seed=1, runs_dir=tmp_path, client=None,
                              compose=None, group_protocol=None)
    assert cli.cmd_chaos_run(args) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["recovery"] == summary(found)
    lines = [line for line in err.splitlines() if line.startswith("recovery:")]
    assert lines == ["recovery: kill-broker at 10.0 s, healed at 20.0 s: commits again 3.5 s after heal (13.5 s after "
                     "start)", "recovery: kill-broker at 25.0 s, healed at 30.0 s: not recovered (txp-0: never "
                     "committed after the heal)"]


def test_a_group_seen_once_is_asked_for_even_when_a_listing_leaves_it_out(tmp_path, monkeypatch):
    """A broker just back may not be asked by ListGroups yet: the group is not listed, but its offsets are still
    fetched (from its coordinator), never read as a group without offsets."""
    from collections import namedtuple
    from types import SimpleNamespace

    from chaos.workloads import run as run_module
    from cluster.access.connection import ConnectionSettings
    listings = [[{"group_id": "r1.eos"}], []]
    asked = []

    class FakeClient:
        def list_groups(self):
            return listings.pop(0)

        def list_group_offsets(self, groups):
            asked.append(list(groups))
            tp = namedtuple("TopicPartition", "topic partition")
            return {g: {tp("r1-in-a", 0): SimpleNamespace(offset=7)} for g in groups}

    run = run_module.Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path, "r1", 0, "t")
    run.use_topics(["r1-in-a"])
    class FakeAdmin:
        group_offsets = ClusterAdmin.group_offsets           # the real reading, over the fake client
        client = FakeClient()

    admin = FakeAdmin()
    assert run._group_offsets(admin) == {"r1.eos": {"r1-in-a": {"0": 7}}}
    assert run._group_offsets(admin) == {"r1.eos": {"r1-in-a": {"0": 7}}}      # not listed this time
    assert asked == [["r1.eos"], ["r1.eos"]]
    run.history.close()


def test_a_producer_that_aborts_every_transaction_on_purpose_recovers_by_its_completed_aborts():
    def aborted(t, process, **extra):
        return [op(t - 0.1, process, "invoke", "txn"), op(t, process, "fail", "txn", error="deliberate abort", **extra)]
    back = recovery(run(aborted(1, "txp-0"), fault(10, 20), aborted(24, "txp-0"), quiescence(40)))
    assert back["faults"][0]["recovered"] is True and back["faults"][0]["seconds_to_commit_after_heal"] == 4.0
    refused = recovery(run(aborted(1, "txp-0"), fault(10, 20), aborted(24, "txp-0", after="x"), quiescence(40)))
    assert refused["faults"][0]["recovered"] is False     # its abort failed: a deliberate abort that did not complete
