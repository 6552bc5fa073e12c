"""A shortened demo on real local clusters: two experiments (zombie producer, hanging-transaction drill)
under transaction.version 1 and 2, each run verified with Spark. Every section of report.json must hold
real data, the zombie producer must recover from every fault with measured times (in the JSON, the summary
and the page; the coordinator kill's recovery is asserted by test_experiments.py's run of it), the
report's verdicts must agree with `txnlab verify` on the same runs, and the page must render in headless
Chromium (not blank). The demo gets its own clusters (ports 28000/29000) and keeps the last level's up only
until `txnlab verify` has read them. The gate's demo is the zombie alone at transaction.version 2 (the main job's
default level, once; its hanging section proven by the drill's own tests); both experiments under both levels
side by side are the campaign's (`-m campaign`)."""
from __future__ import annotations

import json
import os
from html import escape
import shutil
from pathlib import Path

import pytest

from cluster.lab.local import LocalCluster
from cluster.lab.versions import kafka_version, txnlab_home
from report import screenshot
from report.build import fault_line, tv_level
from report.demo import Demo, DemoOptions, exit_code
from tests.integration.conftest import CAMPAIGN, verify_reports
from tests.integration.test_experiments import assert_zombie_fenced
from tests.cli import txnlab

DRILL = "hanging-transaction-drill"
# (its experiments, its transaction.version levels): the gate's is the main job's default level (2) with the zombie
SUITES = {"gate": (("zombie-producer",), (2,)), "full": (("zombie-producer", DRILL), (1, 2))}
RECOVERING = ("zombie-producer",)                         # every fault recovered, with measured times
ARTEFACTS = Path(os.environ.get("TXNLAB_ARTEFACTS", "/tmp/txnlab-artefacts")) / "demo"
pytestmark = pytest.mark.timeout(1500)        # the module's demo (about 7 minutes) runs in the first test's setup


@pytest.fixture(scope="module", params=["gate", pytest.param("full", marks=CAMPAIGN)])
def demo(tmp_path_factory, request):
    """(the Demo, its report, its experiments): the gate's suite or the campaign's."""
    experiments, versions = SUITES[request.param]
    state_root = txnlab_home() / "test-demo"
    options = DemoOptions(experiments=experiments, transaction_versions=versions, keep=True, seed=3,
                          runs_dir=tmp_path_factory.mktemp("demo-runs"), base_port=28000, drill_base_port=29000,
                          state_root=state_root)
    try:
        runner = Demo(options)
        report = runner.run()
        yield runner, report, experiments, versions
    finally:
        for state in sorted(state_root.glob("tv*-*")) if state_root.exists() else []:
            LocalCluster.load(state).down(purge=True, progress=lambda m: None)
        shutil.rmtree(state_root, ignore_errors=True)


def runs_of(report: dict, **match) -> list[dict]:
    return [r for r in report["runs"] if all(r[k] == v for k, v in match.items())]


def test_every_section_of_the_json_twin_is_filled_from_real_data(demo):
    runner, report, experiments, versions = demo
    twin = json.loads((runner.dir / "report.json").read_text())
    assert twin["summary"] == report["summary"] and not twin["errors"], twin["errors"]
    assert twin["levels"] == [tv_level(v) for v in versions] and twin["kafka_version"] == kafka_version()
    assert [(r["experiment"], r["level"]) for r in twin["runs"]] == \
        [(e, tv_level(v)) for v in versions for e in experiments]
    for run in twin["runs"]:
        where = f"{run['experiment']} {run['level']}"
        assert run["verify"]["valid"] in (True, False) and run["verify"]["checks"], where      # verified, not unknown
        assert set(run["verify"]["checks"]) >= {"duplicate", "aborted_read", "lost_write", "torn_transaction"}, where
        assert isinstance(run["anomalies"], list), where
        assert run["workload"]["attempts"]["ok"] > 0, where
        assert run["faults"] and all(f["end"] > f["start"] for f in run["faults"]), where
        for key in ("lso_lag", "open_transactions", "active_producers", "throughput"):
            points = [p for s in run["timelines"][key]["series"] for p in s["points"]]
            assert len(points) >= 10, (where, key, run["timelines"][key])
        throughput = [p[1] for s in run["timelines"]["throughput"]["series"] for p in s["points"]]
        assert max(throughput) > 0, where
        assert (runner.dir / run["timeline_image"]).stat().st_size > 20_000, where
        assert run["probes"] and run["quiescence"], where
        faults = run["recovery"]["faults"]                      # time to recover, per fault and process
        assert len(faults) == len(run["faults"]) and all(f["heal_s"] is not None for f in faults), (where, faults)
        assert any(any(p["seconds_to_commit_after_heal"] is not None for p in f["processes"].values())
                   for f in faults), (where, faults)               # a last heal may land at quiescence: unknown
    for tv in versions:
        zombie = runs_of(twin, experiment="zombie-producer", level=tv_level(tv))[0]
        assert zombie["workload"]["fenced_processes"], f"tv{tv}: the zombie was never told it was fenced"
        if DRILL not in experiments:
            continue
        drill = runs_of(twin, experiment="hanging-transaction-drill", level=tv_level(tv))[0]
        hanging = [p[1] for s in drill["timelines"]["hanging_transactions"]["series"] for p in s["points"]]
        assert max(hanging) >= 1, f"tv{tv}: the exporter never saw the injected hanging transaction"
        caught = {d["alert"]: d for d in drill["detections"] if d["expected"]}
        assert caught["HangingTransaction"]["first_firing_s"] is not None, drill["detections"]
        assert 0 <= caught["HangingTransaction"]["first_firing_s"] <= 60, caught
        assert any(a["alert"] == "HangingTransaction" and a["first_firing"] for a in drill["alerts"])
    assert [row["experiment"] for row in twin["side_by_side"]] == (list(experiments) if len(versions) > 1 else [])
    for row in twin["side_by_side"]:
        assert set(row["levels"]) == {tv_level(v) for v in versions}
        assert all(v["attempts"]["ok"] > 0 for v in row["levels"].values())
    assert exit_code(twin) == (0 if twin["valid"] is True else 1)


def test_the_zombie_recovers_from_every_fault_in_measured_seconds_shown_on_the_page(demo):
    runner, _, _, _ = demo
    twin = json.loads((runner.dir / "report.json").read_text())
    page = (runner.dir / "report.html").read_text()
    assert "<th>recovered</th>" in page
    for run, row in zip(twin["runs"], twin["summary"]):
        if run["experiment"] not in RECOVERING:
            continue
        where = f"{run['experiment']} {run['level']}"
        faults = run["recovery"]["faults"]
        assert len(faults) == len(run["faults"]) >= 1, (where, faults)
        for f in faults:
            assert f["recovered"] is True, (where, fault_line(f), f)
            assert f["seconds_to_commit_after_heal"] >= 0 and f["seconds_to_commit_after_start"] > 0, (where, f)
            assert escape(fault_line(f)) in page, (where, fault_line(f))
        assert (row["experiment"], row["recovered"]) == (run["experiment"], True), (where, row)


def test_the_zombie_is_fenced_and_nothing_it_wrote_afterwards_is_visible(demo):
    """The gate's producer-fencing family (test_experiments.py's own zombie run is the campaign's): the last
    level's zombie, on its kept cluster, was told it is fenced, committed nothing it began after its successor's
    init, and nothing it wrote afterwards is read_committed."""
    runner, report, _, versions = demo
    zombie = runs_of(report, experiment="zombie-producer", level=tv_level(versions[-1]))[0]
    run_dir = Path(zombie["run_dir"])
    [cluster] = [c for key, c in runner.clusters.items() if key.startswith(f"tv{versions[-1]}-") and "drill" not in key]
    assert_zombie_fenced(run_dir, cluster.connection())


def test_the_reports_verdicts_agree_with_txnlab_verify_on_the_same_runs(demo):
    runner, report, _, versions = demo
    last = runs_of(report, level=tv_level(versions[-1]))       # the kept clusters still hold their topics
    dirs = [r["run_dir"] for r in last]
    out = txnlab("verify", *dirs, "--json", timeout=600)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    verified = {Path(r["run"]).name: r for r in verify_reports(out.stdout)}
    for run in last:
        again = verified[Path(run["run_dir"]).name]
        assert again["valid"] == run["verify"]["valid"], run["experiment"]
        assert {k: c["count"] for k, c in again["checks"].items()} == \
            {k: c["count"] for k, c in run["verify"]["checks"].items()}, run["experiment"]


def test_txnlab_report_rebuilds_the_same_report_from_the_stored_suite(demo):
    runner, report, _, _ = demo
    (runner.dir / "report.html").unlink()
    proc = txnlab("report", str(runner.dir), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rebuilt = json.loads(proc.stdout)
    assert rebuilt["summary"] == report["summary"] and rebuilt["side_by_side"] == report["side_by_side"]
    assert (runner.dir / "report.html").exists()


def test_the_page_renders_in_headless_chromium_and_is_not_blank(demo):
    runner, _, _, _ = demo
    png = screenshot.render_png(runner.dir / "report.html", ARTEFACTS / "report.png", height=4000)
    seen = screenshot.ink(png)
    assert seen["non_white"] > 0.05 and seen["colours"] > 200, seen
