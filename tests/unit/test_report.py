"""The report built from stored runs: detection latencies (pure), the JSON twin's sections, the side-by-side
of two transaction.version levels, the page and the timeline picture, `txnlab report` on a stored suite."""
from __future__ import annotations

import json
from types import SimpleNamespace
import time
from pathlib import Path

import pytest

from chaos.record.history import HistoryWriter
from report import build, detection, html, series
from report.demo import CLIENTS_COMPARISON, DemoError, DemoOptions
from tests.cli import txnlab

T0 = 1_800_000_000.0


def alert(name: str, state: str, start: float, end: float, **labels) -> dict:
    return {"alert": name, "state": state, "labels": labels,
            "points": [[t, 1.0] for t in range(int(start), int(end) + 1)]}


def window(kind: str, start: float, end: float) -> dict:
    return {"kind": kind, "label": kind, "start": start, "end": end}


# ---- detection -------------------------------------------------------------------------------------------
def test_an_expected_alert_gets_its_pending_and_firing_latency_from_its_fault():
    found = detection.detections([window("hanging-transaction", T0 + 10, T0 + 40)],
                                 [alert("HangingTransaction", "firing", T0 + 22, T0 + 45, topic="r1-a"),
                                  alert("LSOStuck", "pending", T0 + 20, T0 + 27),
                                  alert("LSOStuck", "firing", T0 + 28, T0 + 41)])
    rows = {d.alert: d for d in found}
    assert rows["HangingTransaction"].first_firing_s == 12.0 and rows["HangingTransaction"].first_pending_s is None
    assert (rows["LSOStuck"].first_pending_s, rows["LSOStuck"].first_firing_s) == (10.0, 18.0)
    assert all(d.expected and d.detected for d in found)


def test_an_alert_clears_when_it_was_last_active_well_before_the_captured_end():
    """An abandoned job's TransactionNearTimeout fires, then clears at the coordinator's abort; one still firing
    at the end of the capture has not cleared."""
    near = [alert("TransactionNearTimeout", "firing", T0 + 30, T0 + 44, coordinator="2")]
    [row] = detection.detections([window("kill-workload", T0 + 10, T0 + 40)], near, ("TransactionNearTimeout",),
                                 end=T0 + 90)
    assert (row.first_firing_s, row.cleared_s, row.expected) == (20.0, 34.0, True)
    [row] = detection.detections([window("kill-workload", T0 + 10, T0 + 40)], near, ("TransactionNearTimeout",),
                                 end=T0 + 50)
    assert (row.first_firing_s, row.cleared_s) == (20.0, None)
    assert build.expected_alerts({"detections": [{**detection.as_rows(detection.detections(
        [window("kill-workload", T0 + 10, T0 + 40)], near, ("TransactionNearTimeout",), end=T0 + 90))[0]}]}) == \
        "TransactionNearTimeout firing +20s, cleared +34s"


def test_an_expected_alert_that_never_came_is_reported_undetected():
    found = detection.detections([window("storm", T0, T0 + 30)], [])
    assert [(d.alert, d.detected, d.expected) for d in found] == [("ProducerStateGrowth", False, True)]


def test_alerts_a_run_expects_besides_its_fault_kinds_are_expected_in_every_window():
    faults = [window("network", T0 + 10, T0 + 24), window("network", T0 + 32, T0 + 46)]
    hanging = [alert("HangingTransaction", "firing", T0 + 40, T0 + 60, topic="r1-sout")]
    found = detection.detections(faults, hanging, also=("HangingTransaction",))
    assert [(d.fault_start, d.alert, d.expected, d.first_firing_s) for d in found] == \
        [(T0 + 10, "HangingTransaction", True, 30.0), (T0 + 32, "HangingTransaction", True, 8.0)]
    plain = detection.detections(faults, hanging)                   # not expected: an other alert, once
    assert [(d.fault_start, d.alert, d.expected) for d in plain] == [(T0 + 32, "HangingTransaction", False)]


def test_an_unexpected_alert_belongs_to_the_fault_it_followed_and_is_counted_once():
    faults = [window("kill-broker", T0 + 10, T0 + 20), window("kill-broker", T0 + 30, T0 + 40)]
    found = detection.detections(faults, [alert("CoordinatorTransactionsOverTimeout", "pending", T0 + 33, T0 + 50)])
    assert [(d.fault_start, d.alert, d.first_pending_s, d.expected) for d in found] == \
        [(T0 + 30, "CoordinatorTransactionsOverTimeout", 3.0, False)]


def test_an_alert_before_the_fault_does_not_count_as_detecting_it():
    found = detection.detections([window("hanging-transaction", T0 + 50, T0 + 60)],
                                 [alert("HangingTransaction", "firing", T0 + 5, T0 + 20)])
    assert {d.alert: d.detected for d in found} == {"HangingTransaction": False, "LSOStuck": False}


def test_alert_series_with_no_active_points_are_ignored():
    assert detection.alert_spans([{"alert": "X", "state": "firing", "labels": {}, "points": []}]) == []
    spans = series.alert_series([{"labels": {"alertname": "X", "alertstate": "pending", "topic": "t"},
                                  "points": [[T0, 0.0], [T0 + 1, 1.0]]}])
    assert spans == [{"alert": "X", "state": "pending", "labels": {"topic": "t"}, "points": [[T0 + 1, 1.0]]}]


# ---- a stored run, as the demo leaves it ----------------------------------------------------------------
def stored_run(root: Path, name: str, tv: int, valid=True, with_prometheus=True) -> Path:
    run_dir = root / f"tv{tv}" / f"20260101-000000-{name}-r{tv}a"
    run_dir.mkdir(parents=True)
    history = HistoryWriter(run_dir)
    (run_dir / "spec.json").write_text(json.dumps({"name": name, "run_tag": f"r{tv}a", "started_wall": time.time()}))
    history.record("txp-0", "invoke", "txn", {"attempt": "a1"})
    history.record("txp-0", "ok", "txn", {"attempt": "a1"})
    history.record("txp-0", "invoke", "txn", {"attempt": "a2"})
    history.record("txp-0", "fail", "txn", {"attempt": "a2", "fenced": True})
    history.record("txp-1", "invoke", "txn", {"attempt": "b1"})
    history.record("nemesis-0", "invoke", "fault", {"kind": "hanging-transaction", "params": {"topic": "{tag}-a"}})
    history.record("nemesis-0", "invoke", "heal", {"kind": "hanging-transaction"})
    history.record("nemesis-0", "ok", "heal", {"kind": "hanging-transaction"})
    history.record("txp-1", "ok", "txn", {"attempt": "b1"})
    history.record("nemesis", "invoke", "quiescence", {})
    history.close()
    (run_dir / "experiment.json").write_text(json.dumps({
        "name": name, "error": None, "quiescence": {"lso_equals_hwm": True, "open_partitions": []},
        "probes_before": [{"name": "brokers-registered", "ok": True, "observed": [1]}], "probes_after": []}))
    check = {"valid": valid, "count": 0 if valid else 1, "description": "one id at two offsets",
             "examples": [] if valid else [{"topic": "t", "partition": 0, "offset": 7, "id": "x"}]}
    (run_dir / "verify").mkdir()
    (run_dir / "verify" / "report.json").write_text(json.dumps({
        "valid": valid, "checks": {"duplicate": check}, "evidence": {"complete": True, "gaps": []},
        "counts": {"records": {"read_committed": 9}}, "seconds": 3.0}))
    if with_prometheus:
        ops = [json.loads(line) for p in sorted((run_dir / "history").glob("part-*.jsonl")) for line in p.read_text().splitlines()]
        start = ops[0]["wall"]
        points = [[start + i, float(i % 3)] for i in range(10)]
        data = {"prometheus": "http://127.0.0.1:9", "start": start - 5, "end": start + 20, "step": 2, "tag": "r",
                "timelines": {t.key: {"query": t.query, "series": [{"labels": {}, "points": points}]}
                              for t in series.TIMELINES},
                "alerts": [alert("HangingTransaction", "firing", start + 2, start + 9)], "errors": {}}
        (run_dir / series.FILE).write_text(json.dumps(data))
    return run_dir


def stored_suite(root: Path, versions=(1, 2)) -> Path:
    runs = []
    for tv in versions:
        for name in ("zombie-producer", "hanging-transaction-drill"):
            run_dir = stored_run(root, name, tv, valid=not (tv == 1 and name == "zombie-producer"))
            runs.append({"experiment": name, "transaction_version": tv, "run_dir": str(run_dir.relative_to(root))})
    (root / build.SUITE_FILE).write_text(json.dumps({
        "id": root.name, "started": T0, "ended": T0 + 100, "kafka_version": "4.3.1",
        "experiments": ["zombie-producer", "hanging-transaction-drill"], "transaction_versions": list(versions),
        "runs": runs, "errors": []}))
    return root


def test_the_json_twin_holds_every_section_from_the_stored_runs(tmp_path):
    report = build.build(stored_suite(tmp_path))
    assert report["valid"] is False                       # one run found a duplicate
    tv1, tv2 = "transaction.version=1", "transaction.version=2"     # a suite stored before levels: its tv levels
    assert report["levels"] == [tv1, tv2]
    assert [(r["experiment"], r["level"], r["verdict"]) for r in report["summary"]] == [
        ("zombie-producer", tv1, False), ("hanging-transaction-drill", tv1, True),
        ("zombie-producer", tv2, True), ("hanging-transaction-drill", tv2, True)]
    bad = report["runs"][0]
    assert bad["anomalies"] == [{"check": "duplicate", "count": 1,
                                 "examples": [{"topic": "t", "partition": 0, "offset": 7, "id": "x"}]}]
    assert bad["verify"]["checks"]["duplicate"] == {"valid": False, "count": 1, "description": "one id at two offsets"}
    assert bad["workload"] == {"attempts": {"ok": 2, "fail": 1, "info": 0}, "fenced_processes": ["txp-0"]}
    assert [f["label"] for f in bad["faults"]] == ["hanging-transaction topic=r1a-a"]
    assert all(t["series"] and t["error"] is None for t in bad["timelines"].values())
    assert set(bad["timelines"]) == {t.key for t in series.TIMELINES if t.workload is None}   # no Streams ran
    assert {d["alert"]: d["detected"] for d in bad["detections"]} == {"HangingTransaction": True, "LSOStuck": False}
    assert [row["experiment"] for row in report["side_by_side"]] == ["zombie-producer", "hanging-transaction-drill"]
    assert report["side_by_side"][0]["levels"][tv1]["verdict"] is False
    assert report["side_by_side"][0]["levels"][tv2]["verdict"] is True
    assert report["side_by_side"][0]["levels"][tv2]["max_lso_lag"] == 2.0


def test_a_suite_of_named_levels_compares_them_under_its_own_heading(tmp_path):
    """A bug's two sides are levels too: their labels head the side-by-side, the suite's comparison text
    explains it, and each run's picture is its own file."""
    suite = stored_suite(tmp_path)
    data = json.loads((suite / build.SUITE_FILE).read_text())
    sides = {1: "affected: Kafka 4.3.1, verification off", 2: "fixed: Kafka 4.3.1, verification on"}
    data.pop("transaction_versions")
    data.update(levels=list(sides.values()), title="KAFKA-14402 reproduced",
                comparison={"title": "KAFKA-14402: affected and fixed", "note": "a late produce <opens> a txn"})
    data["runs"] = [{**{k: v for k, v in r.items() if k != "transaction_version"}, "level": sides[r["transaction_version"]]}
                    for r in data["runs"]]
    (suite / build.SUITE_FILE).write_text(json.dumps(data))
    report = build.write(suite)
    assert report["side_by_side"][0]["levels"][sides[1]]["verdict"] is False
    assert report["side_by_side"][0]["levels"][sides[2]]["verdict"] is True
    assert len({r["timeline_image"] for r in report["runs"]}) == 4
    page = (suite / "report.html").read_text()
    assert "<h1>KAFKA-14402 reproduced" in page and "<h2>KAFKA-14402: affected and fixed</h2>" in page
    assert f"<th>{sides[1]}</th>" in page and "a late produce &lt;opens&gt; a txn" in page
    assert "transaction.version side by side" not in page


def test_one_level_has_no_side_by_side_and_a_missing_capture_or_verification_is_said(tmp_path):
    run_dir = stored_run(tmp_path, "coordinator-kill", 2, with_prometheus=False)
    (run_dir / "verify" / "report.json").unlink()
    report = build.build(run_dir)
    assert report["side_by_side"] == [] and report["valid"] == "unknown"
    run = report["runs"][0]
    assert run["verify"]["valid"] == "unknown" and "not verified" in run["verify"]["gaps"][0]
    assert all(t["error"] == "no prometheus.json in the run" and not t["series"] for t in run["timelines"].values())


def test_a_directory_without_a_suite_or_history_is_a_clear_error(tmp_path):
    with pytest.raises(build.ReportError, match="neither a suite"):
        build.build(tmp_path)


def test_the_page_and_pictures_are_written_and_txnlab_report_rebuilds_them(tmp_path):
    suite = stored_suite(tmp_path)
    report = build.write(suite)
    page = (suite / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == len(report["runs"]) == 4
    assert "transaction.version side by side" in page and "first 1" in page
    for run in report["runs"]:
        assert (suite / run["timeline_image"]).stat().st_size > 10_000
    (suite / "report.html").unlink()
    proc = txnlab("report", str(suite), "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"] == report["summary"] and (suite / "report.html").exists()


def test_the_page_names_each_groups_protocols_in_order(tmp_path):
    suite = stored_suite(tmp_path, versions=(2,))
    run_dir = tmp_path / build.build(suite)["runs"][0]["run_dir"]
    (run_dir / "cluster.json").write_text(json.dumps({"group_protocols": {"r.eos": ["classic", "consumer", "classic"]}}))
    report = build.build(suite)
    assert report["runs"][0]["group_protocols"] == {"r.eos": ["classic", "consumer", "classic"]}
    assert "groups: r.eos classic -&gt; consumer -&gt; classic" in html.render(report, suite)


def test_the_page_escapes_what_the_runs_hold(tmp_path):
    suite = stored_suite(tmp_path, versions=(2,))
    report = build.build(suite)
    report["runs"][0]["anomalies"][0:0] = [{"check": "<script>x</script>", "count": 1, "examples": [{"id": "<b>"}]}]
    page = html.render(report, suite)
    assert "<script>x</script>" not in page and "&lt;script&gt;" in page


def test_the_recovery_after_each_fault_is_in_the_json_the_summary_and_the_page(tmp_path):
    suite = stored_suite(tmp_path, versions=(2,))
    report = build.build(suite)
    run = report["runs"][0]
    [fault] = run["recovery"]["faults"]
    assert fault["kind"] == "hanging-transaction" and fault["recovered"] is True
    assert fault["processes"]["txp-1"]["status"] == "recovered"              # committed after the heal
    assert "txp-0" not in fault["processes"]                                # fenced (exited) before it
    assert [r["recovered"] for r in report["summary"]] == [True, True]
    rows = build.recovery_rows(run)
    assert [(r["name"], r["status"]) for r in rows] == [("txp-1", "recovered")]
    assert rows[0]["after_heal_s"] is not None and rows[0]["after_heal_s"] >= 0
    page = html.render(report, suite)
    assert "<h3>Time to recover</h3>" in page and "<th>recovered</th>" in page and "process txp-1" in page


def test_a_fault_nothing_recovered_from_says_never_on_the_page_and_a_red_cross_is_drawn(tmp_path):
    from report import plots
    suite = stored_suite(tmp_path, versions=(2,))
    report = build.build(suite)
    run = report["runs"][0]
    run["recovery"]["faults"][0]["processes"]["txp-1"] = {
        "seconds_to_commit_after_start": None, "seconds_to_commit_after_heal": None, "status": "not recovered"}
    run["recovery"]["recovered"] = run["recovery"]["faults"][0]["recovered"] = False
    page = html.render(report, suite)
    assert "never" in page and "NOT recovered" in page
    fig = plots.timeline_figure(run)
    lanes = fig.axes[-1]
    assert [t.get_text() for t in lanes.get_yticklabels()] == ["txp-1"]
    assert any(line.get_marker() == "x" for line in lanes.get_lines())


def test_one_line_per_fault_says_how_long_until_everything_moved_or_why_not():
    fault = {"kind": "kill-broker", "start_s": 5.2, "heal_s": 21.0, "heal_ok": True, "recovered": True, "why": [],
             "seconds_to_commit_after_heal": 0.4, "seconds_to_commit_after_start": 16.2,
             "seconds_to_advance_after_heal": 1.9, "seconds_to_advance_after_start": 17.7}
    assert build.fault_line(fault) == ("kill-broker at 5.2 s, healed at 21.0 s: commits again 0.4 s after heal "
                                       "(16.2 s after start), group offsets advance 1.9 s after heal (17.7 s after "
                                       "start)")
    unknown = {**fault, "recovered": "unknown", "why": ["group r.eos: no sample of its offsets after the heal"]}
    assert build.fault_line(unknown).endswith(": unknown (group r.eos: no sample of its offsets after the heal)")
    never = {**fault, "heal_s": None, "heal_ok": None, "recovered": False, "why": ["never healed"]}
    assert build.fault_line(never) == "kill-broker at 5.2 s: not recovered (never healed)"
    producers = {**fault, "seconds_to_advance_after_heal": None, "heal_ok": False}   # no group: no advance part
    assert build.fault_line(producers) == ("kill-broker at 5.2 s (heal failed), healed at 21.0 s: commits again "
                                           "0.4 s after heal (16.2 s after start)")


def test_a_workload_s_own_timeline_is_drawn_for_its_runs_only(tmp_path):
    from report.build import run_report
    run_dir = stored_run(tmp_path, "streams-instance-restart", 2)
    spec = json.loads((run_dir / "spec.json").read_text())
    (run_dir / "spec.json").write_text(json.dumps({**spec, "specs": [{"workload": "streams", "process": "streams-0"}]}))
    got = run_report(run_dir, "streams-instance-restart", 2, None)["timelines"]
    assert set(got) == {t.key for t in series.TIMELINES if t.workload in (None, "streams")}
    assert got["streams_throughput"]["series"]


def test_a_flink_jobs_checkpoints_and_restarts_are_on_its_timeline_and_its_page(tmp_path):
    from report import plots
    ops = [{"process": "flink-job", "type": "ok", "f": "flink-submit", "wall": 110.0,
            "value": {"from_checkpoint": None, "job_id": "j"}},
           {"process": "flink-job", "type": "ok", "f": "flink", "wall": 130.0,
            "value": {"event": "checkpoint", "checkpoint": 1, "status": "COMPLETED", "trigger_ms": 121000}},
           {"process": "flink-job", "type": "ok", "f": "flink", "wall": 130.0,
            "value": {"event": "checkpoint", "checkpoint": 2, "status": "FAILED", "trigger_ms": 123000}},
           {"process": "flink-job", "type": "ok", "f": "flink", "wall": 131.0,
            "value": {"event": "state", "from": "RUNNING", "to": "RESTARTING"}},
           {"process": "flink-job", "type": "ok", "f": "flink", "wall": 135.5,
            "value": {"event": "restored", "checkpoint": 1}},
           {"process": "flink-tm-0", "type": "ok", "f": "flink", "wall": 136.0,
            "value": {"event": "log", "line": "2026-11-28 04:13:38,562 ERROR org.apache.flink.X [] - Unable to "
                                              "commit transaction (...) ... this most likely signals data loss"}},
           {"process": "txp-0", "type": "ok", "f": "txn", "wall": 136.0, "value": {"attempt": "r.txp-0.0"}}]
    events = build.job_events(ops, zero=100.0)
    assert [(e["kind"], e["at_s"], e["detail"]) for e in events] == [
        ("submitted", 10.0, "from the group's offsets"), ("checkpoint-completed", 21.0, "#1"),
        ("checkpoint-failed", 23.0, "#2"), ("restarting", 31.0, ""), ("restored", 35.5, "checkpoint #1"),
        ("error", 36.0, "flink-tm-0: Unable to commit transaction (...) ... this most likely signals data loss")]
    suite = stored_suite(tmp_path, versions=(2,))
    report = build.build(suite)
    run = report["runs"][0]
    assert run["job_events"] == []                       # no Flink job in this run: no lane, no table
    plain = len(plots.timeline_figure(run).axes)
    run["job_events"] = events
    fig = plots.timeline_figure(run)
    assert len(fig.axes) == plain + 1
    lane = fig.axes[-3]
    assert [t.get_text() for t in lane.get_yticklabels()] == ["checkpoints", "job"]
    assert {line.get_label() for line in lane.get_lines()} >= {"checkpoint completed", "checkpoint failed",
                                                                "restarting", "restored", "submitted"}
    page = html.render(report, suite)
    assert "<h3>Flink job</h3>" in page and "35.5 s (checkpoint #1)" in page
    assert "1: flink-tm-0: Unable to commit transaction" in page        # Flink's own words for the loss
    # ... which the page weighs against verify's count: here the stored run verified valid, so no loss
    assert run["verify"]["valid"] is True and "Flink refused 1 commit(s)" in page and "no loss" in page
    run["verify"] = {**run["verify"], "valid": False, "checks": {**run["verify"]["checks"], "streams_processing": {
        "valid": False, "count": 46, "problems": {"unprocessed": 46}, "description": "d"}}}
    assert "verify counted 46 anomalies of processing" in html.render(report, suite)


def test_a_client_matrix_has_a_column_per_client_and_says_why_a_cell_did_not_run(tmp_path):
    """`txnlab demo --clients` (report/demo.py with clients): each client is a level; an experiment with no workload
    of a client's is recorded without a run, and its cell says why instead of a verdict."""
    suite = stored_suite(tmp_path)
    data = json.loads((suite / build.SUITE_FILE).read_text())
    clients = {1: "confluent", 2: "franz-go"}
    data.pop("transaction_versions")
    data.update(levels=[*clients.values(), "kafkajs"], comparison=CLIENTS_COMPARISON)
    data["runs"] = [{**{k: v for k, v in r.items() if k != "transaction_version"}, "level": clients[r["transaction_version"]]}
                    for r in data["runs"]]
    data["runs"].append({"experiment": "zombie-producer", "level": "kafkajs", "run_dir": None,
                         "not_applicable": "nothing of kafkajs to test"})
    data["runs"].append({"experiment": "hanging-transaction-drill", "level": "kafkajs", "run_dir": None,
                         "error": "RuntimeError: the cluster did not start"})
    (suite / build.SUITE_FILE).write_text(json.dumps(data))
    report = build.write(suite)
    zombie = report["side_by_side"][0]["levels"]
    assert zombie["confluent"]["anomalies_by_check"] == {"duplicate": 1} and zombie["franz-go"]["anomalies_by_check"] == {}
    assert zombie["franz-go"]["stalls"] == [] and zombie["franz-go"]["recovered"] in (True, False, "unknown")
    assert zombie["kafkajs"] == {"absent": "nothing of kafkajs to test"}
    assert report["side_by_side"][1]["levels"]["kafkajs"] == {
        "absent": "did not run: RuntimeError: the cluster did not start"}
    assert len(report["runs"]) == 4 and len(report["summary"]) == 4
    page = (suite / "report.html").read_text()
    assert "<h2>clients side by side</h2>" in page and "<th>kafkajs</th>" in page and "nothing of kafkajs to test" in page
    anchor = zombie["franz-go"]["anchor"]
    assert f"href='#{anchor}'" in page and f'id="{anchor}"' in page     # each cell leads to its run's section
    assert "duplicate 1" in page


def test_demo_levels_are_transaction_versions_clients_or_both():
    assert [DemoOptions(transaction_versions=(1, 2)).level(tv, "confluent") for tv in (1, 2)] == \
        ["transaction.version=1", "transaction.version=2"]
    matrix = DemoOptions(clients=("confluent", "kafkajs"))
    assert matrix.levels() == [(2, "confluent"), (2, "kafkajs")]
    assert [matrix.level(*lv) for lv in matrix.levels()] == ["confluent", "kafkajs"]
    assert [matrix.subdir(*lv) for lv in matrix.levels()] == ["tv2-confluent", "tv2-kafkajs"]
    both = DemoOptions(clients=("confluent", "franz-go"), transaction_versions=(1, 2))
    assert both.level(1, "franz-go") == "transaction.version=1 franz-go" and DemoOptions().subdir(2, "confluent") == "tv2"
    for bad in (("sarama",), (), ("kafkajs", "kafkajs")):
        with pytest.raises(DemoError, match="clients must be distinct ones of confluent, java, franz-go, kafkajs"):
            DemoOptions(clients=bad).check()


def test_a_suite_asks_for_one_set_of_broker_settings_of_its_own_and_its_experiment_gets_that_cluster(tmp_path,
                                                                                                      monkeypatch):
    """transactional.id.expiration.ms is read at a broker's start: an experiment asking for it runs on the level's
    `own` cluster (its ports apart), and two asking for different settings cannot share one suite."""
    import yaml
    import report.demo as demo_module
    from chaos.runner.spec import builtin_specs
    demo_module.DemoOptions(experiments=("zombie-returns-after-expiry", "coordinator-kill")).check()
    other = yaml.safe_load(builtin_specs()["zombie-returns-after-expiry"].read_text())
    other["cluster"]["local"]["broker_config"]["transactional.id.expiration.ms"] = 20000
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    with pytest.raises(demo_module.DemoError, match="must ask for the same ones in one suite"):
        demo_module.DemoOptions(experiments=("zombie-returns-after-expiry", str(tmp_path / "other.yaml"))).check()
    made = []

    class Planned(Exception):
        pass

    class FakeCluster:
        @staticmethod
        def load(state, **plan):
            if not plan:                                 # the left-over of an earlier demo, torn down first
                return SimpleNamespace(down=lambda **kw: None)
            made.append((state.name, plan))
            raise Planned
    monkeypatch.setattr(demo_module, "LocalCluster", FakeCluster)
    options = demo_module.DemoOptions(experiments=("zombie-returns-after-expiry",), runs_dir=tmp_path / "runs",
                                      own_base_port=35000, state_root=tmp_path / "state")
    with pytest.raises(Planned):
        demo_module.Demo(options, progress=lambda m: None)._cluster("own", 2, {"transactional.id.expiration.ms": "1"})
    [(name, plan)] = made
    assert (name, plan["base_port"], plan["nodes"]) == ("tv2-own", 35000, 3)
    assert plan["broker_overrides"] == {"transactional.id.expiration.ms": "1"}


def test_a_demo_cluster_that_does_not_come_up_fails_each_experiment_and_is_never_run_on(tmp_path):
    """A cluster whose start fails (here its port plan, refused before anything starts: inside the ephemeral range)
    is torn down and forgotten: every experiment of the suite says why, none runs against a cluster that is not
    there (the campaign once hung on one)."""
    from report.demo import Demo, DemoOptions
    options = DemoOptions(experiments=("coordinator-kill", "zombie-producer"), verify=False, runs_dir=tmp_path / "runs",
                          base_port=34000, state_root=tmp_path / "state")
    runner = Demo(options, progress=lambda m: None)
    report = runner.run()
    assert runner.clusters == {}
    assert [r["experiment"] for r in json.loads((runner.dir / build.SUITE_FILE).read_text())["runs"]] == \
        ["coordinator-kill", "zombie-producer"]
    assert len(report["errors"]) == 2 and all("ephemeral range" in e for e in report["errors"]), report["errors"]
    assert not report["runs"]
