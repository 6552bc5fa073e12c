"""report/campaign.py: the plan of cells, resuming (a cell done is not run again), grading what each part's
machinery said, and the page, picture and Markdown of a campaign's state."""
from __future__ import annotations

import json

import pytest

from report import campaign as c


def test_the_plan_selects_names_each_cell_and_says_what_does_not_apply(tmp_path):
    options = c.CampaignOptions(tmp_path, parts=("experiments", "releases", "bugs", "tests"),
                                clients=("confluent", "franz-go"), experiments=("coordinator-kill", "streams-zombie"),
                                versions=("3.9.1",), bugs=("KAFKA-14402",)).resolved()
    cells = {cell["id"]: cell for cell in c.plan(options)}
    assert list(cells)[:4] == ["experiment/coordinator-kill/confluent", "experiment/streams-zombie/confluent",
                               "experiment/coordinator-kill/franz-go", "experiment/streams-zombie/franz-go"]
    assert "not_applicable" in cells["experiment/streams-zombie/franz-go"]          # no franz-go role in Streams
    assert not any("not_applicable" in cells[i] for i in list(cells)[:3])
    assert "release/3.9.1" in cells
    tests = [cells[i] for i in cells if i.startswith("tests/")]          # a cell per module with campaign tests
    assert {t["module"] for t in tests} == set(c.campaign_test_modules()) >= {"test_flink", "test_bugs", "test_demo"}
    assert "test_00_lifecycle" not in c.campaign_test_modules()          # all of its tests are the gate's
    assert [i for i in cells if i.startswith("bug/KAFKA-14402")][0] == "bug/KAFKA-14402"


@pytest.mark.parametrize("field, value, named", [("clients", ("rdkafka-go",), "rdkafka-go"),
                                                 ("experiments", ("earthquake",), "earthquake"),
                                                 ("versions", ("2.8.0",), "2.8.0"), ("parts", ("fuzz",), "fuzz"),
                                                 ("bugs", ("KAFKA-1",), "KAFKA-1"),
                                                 ("tests", ("test_00_lifecycle",), "test_00_lifecycle")])
def test_an_unknown_name_is_refused_by_name_before_anything_runs(tmp_path, field, value, named):
    with pytest.raises(c.CampaignError, match=named):
        c.CampaignOptions(tmp_path, **{field: value}).resolved()


def fake_runners(calls: list, stop_after: int | None = None):
    """Runners that record what they were asked and grade each cell valid; the `stop_after`th cell raises
    KeyboardInterrupt, as a Ctrl-C in the middle of a part would."""
    def runner(campaign, cells):
        for cell in cells:
            if stop_after is not None and len(calls) == stop_after:
                raise KeyboardInterrupt
            calls.append(cell["id"])
            campaign.record(cell, {"grade": "valid", "detail": "ok"}, 0.0)
    return {part: runner for part in c.PARTS}


def test_an_interrupted_campaign_resumes_with_the_cells_not_done_and_again_runs_them_all(tmp_path):
    options = c.CampaignOptions(tmp_path, parts=("experiments", "releases"), clients=("confluent",),
                                experiments=("coordinator-kill", "zombie-producer"), versions=("3.9.1", "4.4.0"))
    first: list = []
    with pytest.raises(KeyboardInterrupt):
        c.Campaign(options, progress=lambda m: None, runners=fake_runners(first, stop_after=3)).run()
    saved = json.loads((tmp_path / c.STATE_FILE).read_text())
    assert sorted(saved["cells"]) == sorted(first) and len(first) == 3
    assert (tmp_path / c.PAGE_FILE).exists()                  # the page is written on the way out too
    second: list = []
    state = c.Campaign(options, progress=lambda m: None, runners=fake_runners(second)).run()
    assert second == ["release/4.4.0"] and state["summary"] == {"cells": 4, "by_grade": {"valid": 4}, "holds": True}
    assert [len(s["cells"]) for s in state["slices"]] == [3, 1] and all(s["ended"] for s in state["slices"])
    assert {c["slice"] for c in state["cells"].values()} == {0, 1} and state["cells"]["release/4.4.0"]["slice"] == 1
    again: list = []
    c.Campaign(c.CampaignOptions(**{**vars(options), "again": True}), progress=lambda m: None,
               runners=fake_runners(again)).run()
    assert len(again) == 4


def test_a_cell_that_could_not_run_is_run_again_on_resume(tmp_path):
    options = c.CampaignOptions(tmp_path, parts=("releases",), versions=("4.4.0",))

    def failing(campaign, cells):
        campaign.record(cells[0], {"grade": "error", "detail": "no cluster"}, 0.0, status="error")
    c.Campaign(options, progress=lambda m: None, runners={"releases": failing}).run()
    calls: list = []
    state = c.Campaign(options, progress=lambda m: None, runners=fake_runners(calls)).run()
    assert calls == ["release/4.4.0"] and state["cells"]["release/4.4.0"]["grade"] == "valid"


def run_entry(valid, recovered=True, catalogued=(), stalls=()):
    faults = [{"recovered": recovered, "restarted": ["eos-0"] if stalls else [], "stalls": list(stalls)}]
    return {"verify": {"valid": valid, "gaps": [] if valid != "unknown" else ["the log lacks an acknowledged offset"]},
            "recovery": {"recovered": recovered, "faults": faults}, "catalogued": [{"id": b} for b in catalogued],
            "anomalies": [{"check": "duplicate", "count": 2}] if valid is False else [], "run_dir": "r"}


def test_grades_read_the_verdict_the_recovery_and_the_catalogue():
    assert c.experiment_outcome(run_entry(True))["grade"] == "valid"
    assert c.experiment_outcome(run_entry(False))["grade"] == "invalid"          # an anomaly nothing names
    named = c.experiment_outcome(run_entry(False, catalogued=["kafkajs-retry-duplicates"]))
    assert named["grade"] == "named" and named["causes"] == ["kafkajs-retry-duplicates"]
    assert c.experiment_outcome(run_entry(True, recovered=False))["grade"] == "invalid"
    unknown = c.experiment_outcome(run_entry("unknown"))
    assert unknown["grade"] == "unknown" and "acknowledged offset" in unknown["detail"]
    # a restart after a stall no catalogued bug matches is not a recovery of its own: invalid, not named
    stall = {"process": "eos-0", "call": "a_call_no_bug_names", "client": "confluent", "at_s": 3.0}
    assert c.experiment_outcome(run_entry(True, recovered=True, stalls=[stall]))["grade"] == "invalid"
    # a fault not recovered from because a catalogued finding's process cannot go on (a liveness shape): named;
    # a finding shown whose shape says nothing of liveness does not name it
    stuck = {**run_entry(True, recovered=False), "shown": [{"id": "kafkajs-expired-id-stuck", "shapes": ["stuck-producer"]}]}
    assert (c.experiment_outcome(stuck)["grade"], c.experiment_outcome(stuck)["causes"]) == \
        ("named", ["kafkajs-expired-id-stuck"])
    waits = {**run_entry(True, recovered=False), "shown": [{"id": "franz-go-tv2-wait", "shapes": ["commit-waits"]}]}
    assert c.experiment_outcome(waits)["grade"] == "invalid"
    # a clean-looking run one of whose faults failed to start tested nothing of it: unknown, and says which
    unstarted = run_entry(True)
    unstarted["recovery"]["faults"].append({"kind": "climb-epoch", "started": False, "recovered": True})
    assert (c.experiment_outcome(unstarted)["grade"], c.experiment_outcome(unstarted)["detail"]) == \
        ("unknown", "verdict yes, recovered yes, 0 anomalies; did not start: climb-epoch")


def test_junit_outcomes_and_bug_outcomes():
    ok = {"passed": 22, "failed": 0, "errors": 0, "skipped": 0, "failing": [], "exit": 0}
    assert c.junit_outcome(ok)["grade"] == "valid"
    bad = {**ok, "failed": 1, "failing": ["test_x::test_y"], "exit": 1}
    assert c.junit_outcome(bad)["grade"] == "invalid" and "test_x::test_y" in c.junit_outcome(bad)["detail"]
    assert c.junit_outcome({"ran": False, "error": "no jars"})["grade"] == "error"
    assert c.junit_outcome({**ok, "passed": 0})["grade"] == "invalid"                # nothing ran is no pass
    outcome = {"bug": "KAFKA-14402", "tries": 3, "affected_reproduced": 3, "fixed_clean": 2, "report": {"directory": "d"}}
    assert c.bug_outcome(outcome, 1)["grade"] == "invalid"
    assert c.bug_outcome({**outcome, "fixed_clean": 3}, 0)["grade"] == "valid"


def test_the_page_the_picture_and_the_markdown_show_every_cell(tmp_path):
    state = {"created": 0, "slices": [{"started": 1.0e9, "ended": 1.0e9 + 600, "commit": "abc123", "command": "txnlab campaign",
                                       "cells": ["a", "b", "c"]}], "cells": {}}
    for cell, grade, extra in ((("coordinator-kill", "confluent"), "named", {"causes": ["librdkafka-5456"]}),
                               (("coordinator-kill", "kafkajs"), "valid", {}),
                               (("streams-zombie", "kafkajs"), "n/a", {})):
        key = f"experiment/{cell[0]}/{cell[1]}"
        state["cells"][key] = {"id": key, "part": "experiments", "experiment": cell[0],
                                                              "client": cell[1], "grade": grade, "detail": "d",
                                                              "wall_s": 60, "commit": "abc123", **extra}
    state["cells"]["release/4.4.0"] = {"id": "release/4.4.0", "part": "releases", "grade": "invalid",
                                       "detail": "1 failed: test_a::test_b", "wall_s": 240, "commit": "abc123"}
    page = c.write_page(tmp_path, state)
    html = page.read_text()
    assert "named: librdkafka-5456" in html and "test_a::test_b" in html and "abc123" in html
    assert (tmp_path / c.PICTURE_FILE).stat().st_size > 5000
    md = c.markdown(state)
    assert "| coordinator-kill | named: librdkafka-5456 | valid |" in md
    assert "NOT every cell holds" in md and "release/4.4.0" in md


def test_a_release_cell_never_takes_an_earlier_runs_result(tmp_path, monkeypatch):
    """The release matrix's result.json of an earlier run is removed before a release runs: a run that wrote none
    (it crashed) is an error cell, not the earlier release's verdict."""
    monkeypatch.setenv("TXNLAB_HOME", str(tmp_path / "home"))
    result = tmp_path / "home" / "matrix" / "result.json"
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"rows": [{"release": "4.4.0", "ran": True, "exit": 0, "passed": 22, "failed": 0,
                                            "errors": 0, "skipped": 0, "failing": []}]}))

    class Crashed:
        returncode = 1
    real = c.subprocess.run
    monkeypatch.setattr(c.subprocess, "run", lambda argv, *a, **k: Crashed() if "kafka_matrix.py" in str(argv)
                        else real(argv, *a, **k))
    options = c.CampaignOptions(tmp_path / "campaign", parts=("releases",), versions=("4.4.0",))
    state = c.Campaign(options, progress=lambda m: None).run()
    cell = state["cells"]["release/4.4.0"]
    assert cell["grade"] == "error" and cell["status"] == "error" and "no result" in cell["detail"]


def test_a_slice_records_its_command_as_a_user_types_it():
    from report.campaign import _command
    assert _command(["/work/main/txnlab/cli.py", "campaign", "--parts", "releases"]) == "txnlab campaign --parts releases"
    assert _command(["/usr/local/bin/txnlab", "campaign", "--again"]) == "txnlab campaign --again"
    assert _command(["scripts/other.py", "x y"]) == "scripts/other.py 'x y'"


def test_experiments_asking_for_different_broker_settings_run_in_suites_of_their_own(tmp_path, monkeypatch):
    """A suite's `own` cluster takes one set of broker settings (DemoOptions.check refuses two): the campaign splits a
    client's cells by the settings their experiments ask for."""
    import report.demo as demo
    monkeypatch.setenv("TXNLAB_HOME", str(tmp_path / "home"))
    seen = []

    class Recorded:
        def __init__(self, options, progress):
            options.check()
            seen.append(options.experiments)

        def run(self):
            return {"runs": [], "errors": ["recorded, not run"], "directory": str(tmp_path)}
    monkeypatch.setattr(demo, "Demo", Recorded)
    options = c.CampaignOptions(tmp_path / "campaign", parts=("experiments",), clients=(c.REFERENCE,),
                                experiments=("zombie-returns-after-expiry", "epoch-exhaustion-timeout",
                                             "coordinator-kill"))
    c.Campaign(options, progress=lambda m: None).run()
    assert sorted(seen) == [("coordinator-kill",), ("epoch-exhaustion-timeout",), ("zombie-returns-after-expiry",)]
    assert demo.own_broker_settings("coordinator-kill") == ()
    assert dict(demo.own_broker_settings("epoch-exhaustion-timeout")) == {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


def test_an_experiment_whose_cell_needs_its_full_mode_runs_it_and_the_others_run_short(tmp_path, monkeypatch):
    """FULL_MODE's built-ins (their graded recovery comes after the short run's end) reach the demo as its `full`
    experiments, and the demo loads them in their full mode: the others of the same suite stay short."""
    import report.demo as demo
    from chaos.runner.spec import load_spec
    monkeypatch.setenv("TXNLAB_HOME", str(tmp_path / "home"))
    seen = []

    class Recorded:
        def __init__(self, options, progress):
            seen.append(options)

        def run(self):
            return {"runs": [], "errors": ["recorded, not run"], "directory": str(tmp_path)}
    monkeypatch.setattr(demo, "Demo", Recorded)
    options = c.CampaignOptions(tmp_path / "campaign", parts=("experiments",), clients=(c.REFERENCE,),
                                experiments=("flink-abandoned-job", "flink-taskmanager-kill"))
    state = c.Campaign(options, progress=lambda m: None).run()
    assert [o.full for o in seen] == [("flink-abandoned-job",)]
    assert set(c.FULL_MODE) == {"flink-abandoned-job", "epoch-exhaustion-timeout", "epoch-rotation-coordinator-killed"}
    assert all(cell["grade"] == "error" for cell in state["cells"].values())     # nothing ran: error, run again
    full, short = load_spec("flink-abandoned-job", short=False), load_spec("flink-abandoned-job", short=True)
    assert full.duration_s > short.duration_s + 60          # the job's return (~80 s in) inside the run


def test_a_timing_bound_bug_s_partial_reproduction_is_named_by_its_measured_rate():
    outcome = {"bug": "KAFKA-16903", "tries": 3, "affected_reproduced": 2, "fixed_clean": 3, "report": {"directory": "d"}}
    rate = {"reproduced": 6, "tries": 10, "measured": "then", "misses": "no other task had records"}
    named = c.bug_outcome(outcome, 1, rate)
    assert named["grade"] == "named" and "6 of 10" in named["detail"] and "no other task" in named["detail"]
    assert c.bug_outcome(outcome, 1)["grade"] == "invalid"                              # no rate: not named
    # none in 3 at 6 of 10: a chance of 0.064, named; at 10 of 12 a chance of 0.005: not the catalog's rate
    assert c.bug_outcome({**outcome, "affected_reproduced": 0}, 1, rate)["grade"] == "named"
    often = {**rate, "reproduced": 10, "tries": 12}
    unlikely = c.bug_outcome({**outcome, "affected_reproduced": 0}, 1, often)
    assert unlikely["grade"] == "invalid" and "not the catalog's rate" in unlikely["detail"]
    assert abs(c.at_most(0, 3, 0.6) - 0.064) < 1e-9 and c.at_most(3, 3, 0.2) == pytest.approx(1.0)
    assert c.bug_outcome({**outcome, "fixed_clean": 2}, 1, rate)["grade"] == "invalid"  # the fixed side not clean
    assert c.bug_outcome(outcome, 2, rate)["grade"] == "error"


def test_regrading_judges_the_stored_bug_cells_again_and_keeps_their_runs(tmp_path, monkeypatch):
    """--regrade runs nothing: each bug cell done is judged again from its suite (rejudge) and graded by the
    catalog as it is now (KAFKA-16903's measured rate), its run's wall time kept; cells not done are left."""
    import report.bugs as bugs
    options = c.CampaignOptions(tmp_path, parts=("bugs",), bugs=("KAFKA-16903",))
    calls: list = []
    c.Campaign(options, progress=lambda m: None, runners=fake_runners(calls)).run()   # both cells done, valid
    judged = []

    def rejudge(suite, progress):
        judged.append(suite)
        return {"bug": "KAFKA-16903", "tries": 3, "affected_reproduced": 2, "fixed_clean": 3, "errors": [],
                "sides": {"affected": {"runs": [{}] * 3}, "fixed": {"runs": [{}] * 3}}, "report": {"directory": "s"}}
    monkeypatch.setattr(bugs, "rejudge", rejudge)
    state = c.load_state(tmp_path)
    for cell in state["cells"].values():
        cell.update(where=str(tmp_path / cell["id"].replace("/", "-")), wall_s=515.0)
    c.save_state(tmp_path, state, {"started": 0.0, "ended": 0.0, "commit": "x", "command": "y", "cells": []})
    regraded = c.Campaign(c.CampaignOptions(tmp_path, parts=("bugs",), bugs=("KAFKA-16903",), regrade=True),
                          progress=lambda m: None).run()["cells"]
    assert len(judged) == 2 and all(cell["regraded"] and cell["wall_s"] == 515.0 for cell in regraded.values())
    assert regraded["bug/KAFKA-16903"]["grade"] == "named"          # its natural sides' rate: 6 of 10
    assert regraded["bug/KAFKA-16903/client-or-broker"]["grade"] == "named"


def test_a_slice_with_minutes_starts_no_cell_after_them_and_leaves_the_rest_pending(tmp_path, monkeypatch):
    """--minutes: the cells started in time run to their end, the others stay pending for the next slice."""
    options = c.CampaignOptions(tmp_path, parts=("releases",), versions=("3.9.1", "4.0.2", "4.4.0"), minutes=1)
    clock = [1000.0]
    monkeypatch.setattr(c.time, "time", lambda: clock[0])
    ran = []

    def runner(campaign, cells):
        for cell in cells:
            if not campaign.in_time():
                return
            ran.append(cell["id"])
            clock[0] += 45                       # each cell 45 s: the second starts at 45 s, the third at 90
            campaign.record(cell, {"grade": "valid", "detail": "ok"}, 0.0)
    state = c.Campaign(options, progress=lambda m: None, runners={"releases": runner}).run()
    assert ran == ["release/3.9.1", "release/4.0.2"] and "release/4.4.0" not in state["cells"]
    assert [cell["id"] for cell in c.Campaign(options, progress=lambda m: None).pending()] == ["release/4.4.0"]


def test_experiments_at_transaction_version_1_are_cells_and_rows_of_their_own_run_by_suites_at_that_level(
        tmp_path, monkeypatch):
    options = c.CampaignOptions(tmp_path, parts=("experiments",), clients=("java",),
                                experiments=("epoch-exhaustion-timeout",), transaction_versions=(1, 2)).resolved()
    cells = {cell["id"]: cell for cell in c.plan(options)}
    assert list(cells) == ["experiment/epoch-exhaustion-timeout/java@tv1", "experiment/epoch-exhaustion-timeout/java"]
    asked = []

    class Demo:                          # report.demo's suite, as run_experiments calls it: what was it asked?
        def __init__(self, demo_options, progress):
            asked.append((demo_options.transaction_versions, demo_options.full))

        def run(self):
            return {"runs": [], "errors": ["not run here"], "directory": str(tmp_path)}
    monkeypatch.setattr("report.demo.Demo", Demo)
    state = c.Campaign(options, progress=lambda m: None).run()
    assert sorted(asked) == [((1,), ("epoch-exhaustion-timeout",)), ((2,), ("epoch-exhaustion-timeout",))]
    rows, _, grid = c.grid(state)
    assert rows == ["epoch-exhaustion-timeout", "epoch-exhaustion-timeout@tv1"]
    assert grid[("epoch-exhaustion-timeout@tv1", "java")]["id"] == "experiment/epoch-exhaustion-timeout/java@tv1"
    with pytest.raises(c.CampaignError, match="transaction.version levels are 1, 2, got 3"):
        c.CampaignOptions(tmp_path, transaction_versions=(3,)).resolved()


def test_experiments_on_the_consumer_group_protocol_are_cells_of_their_own_and_not_applicable_where_named(
        tmp_path, monkeypatch):
    options = c.CampaignOptions(tmp_path, parts=("experiments",), clients=("confluent", "kafkajs"),
                                experiments=("coordinator-kill", "streams-zombie"),
                                group_protocols=("classic", "consumer")).resolved()
    cells = {cell["id"]: cell for cell in c.plan(options)}
    assert "experiment/coordinator-kill/confluent@consumer" in cells
    assert "not_applicable" not in cells["experiment/coordinator-kill/confluent@consumer"]
    assert "KafkaJS 2.2.4" in cells["experiment/coordinator-kill/kafkajs@consumer"]["not_applicable"]
    assert "not_applicable" not in cells["experiment/coordinator-kill/kafkajs"]
    assert "runs no processor, whose group the consumer protocol is about" in \
        cells["experiment/streams-zombie/confluent@consumer"]["not_applicable"]
    asked = []

    class Demo:
        def __init__(self, demo_options, progress):
            asked.append((demo_options.clients, demo_options.group_protocol, demo_options.experiments))

        def run(self):
            return {"runs": [], "errors": ["not run here"], "directory": str(tmp_path)}
    monkeypatch.setattr("report.demo.Demo", Demo)
    c.Campaign(c.CampaignOptions(**{**vars(options), "clients": ("confluent",), "experiments": ("coordinator-kill",)}),
               progress=lambda m: None).run()
    assert sorted(asked) == [(("confluent",), "classic", ("coordinator-kill",)),
                             (("confluent",), "consumer", ("coordinator-kill",))]
    with pytest.raises(c.CampaignError, match="group protocols are classic, consumer, streams, got gossip"):
        c.CampaignOptions(tmp_path, group_protocols=("gossip",)).resolved()
    streams = c.plan(c.CampaignOptions(tmp_path, parts=("experiments",), clients=("confluent",),
                                       experiments=("coordinator-kill", "streams-zombie"),
                                       group_protocols=("streams",)).resolved())
    applicable = {cell["id"]: "not_applicable" not in cell for cell in streams}
    assert applicable == {"experiment/coordinator-kill/confluent@streams": False,
                          "experiment/streams-zombie/confluent@streams": True}


def test_experiment_tries_are_cells_of_their_own_seeds_and_the_grid_counts_them_by_grade(tmp_path, monkeypatch):
    options = c.CampaignOptions(tmp_path, parts=("experiments",), clients=("java",),
                                experiments=("coordinator-kill",), experiment_tries=3, seed=5).resolved()
    assert [cell["id"] for cell in c.plan(options)] == [
        "experiment/coordinator-kill/java", "experiment/coordinator-kill/java#2", "experiment/coordinator-kill/java#3"]
    asked = []
    verdicts = iter([True, False, True])

    class Demo:                          # each try a suite of its own, at its own seed
        def __init__(self, demo_options, progress):
            asked.append(demo_options.seed)

        def run(self):
            return {"runs": [{**run_entry(next(verdicts)), "experiment": "coordinator-kill"}], "errors": [],
                    "directory": str(tmp_path)}
    monkeypatch.setattr("report.demo.Demo", Demo)
    state = c.Campaign(options, progress=lambda m: None).run()
    assert asked == [5, 6, 7]
    _, _, grid = c.grid(state)
    cell = grid[("coordinator-kill", "java")]
    assert cell["grade"] == "invalid" and cell["tries"] == ["valid", "invalid", "valid"]   # the worst, each counted
    assert c.cell_text(cell) == "invalid 1/3, valid 2/3"
    assert "| coordinator-kill | invalid 1/3, valid 2/3 |" in c.markdown(state)
    with pytest.raises(c.CampaignError, match="tries must be >= 1, got 0"):
        c.CampaignOptions(tmp_path, experiment_tries=0).resolved()


def test_a_migration_cell_on_kafkajs_is_not_applicable_for_its_missing_kip_848_not_for_missing_roles(tmp_path):
    options = c.CampaignOptions(tmp_path, parts=("experiments",), clients=("kafkajs", "java"),
                                experiments=("group-protocol-migration",)).resolved()
    cells = {cell["id"]: cell for cell in c.plan(options)}
    assert cells["experiment/group-protocol-migration/kafkajs"]["not_applicable"] == (
        "its client, kafkajs, has no KIP-848 consumer protocol to move to (KafkaJS 2.2.4, its last release, speaks "
        "JoinGroup and SyncGroup only)")
    assert "not_applicable" not in cells["experiment/group-protocol-migration/java"]


def test_a_run_whose_history_shows_a_process_that_cannot_go_on_is_named_even_if_its_faults_read_as_recovered():
    """franz-go-recreated-topic-unread: the processors stop reading the re-created topic while their other input
    topic flows, so they commit after the heal (recovered) and exactly-once holds; the history's liveness shape names
    the cell, it is not valid."""
    from report.campaign import experiment_outcome
    run = {"verify": {"valid": True}, "recovery": {"recovered": True, "faults": [{"kind": "recreate-topic",
                                                                                  "started": True}]},
           "catalogued": [], "anomalies": [], "run_dir": "r",
           "shown": [{"id": "franz-go-recreated-topic-unread", "shapes": ["recreated-topic-unread"]}]}
    assert experiment_outcome(run)["grade"] == "named"
    assert experiment_outcome({**run, "shown": [{"id": "franz-go-tv2-wait", "shapes": ["commit-waits"]}]})["grade"] \
        == "valid"                                     # a behaviour that does not stop a process
