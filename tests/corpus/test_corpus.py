"""Recorded real runs replayed without a cluster (the corpus: tests/corpus/corpus.yaml, docs/testing.md): every run,
verified offline from its archive, gets the verdict, the evidence and every check's validity, count and examples
its live verification gave when it was recorded; the index says that live verdict; a run recorded for a catalogued
finding is named by the catalog's rule as the report names it (its stalls, its anomalies), and no longer once that
rule is changed; a recorded bug suite is judged again (`txnlab bugs judge`) as it was live; a recorded suite's
page is built again from its stored runs with no cluster (its verdicts the live ones, every section filled,
rendered by Chromium); the corpus stays within its budget and every packed entry is indexed."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import chaos.catalog.bugs as catalog_module
from chaos.record.history import read_history
from report import build
from report.bugs import stalls_and_recovery
from tests.cli import txnlab
from tests.corpus.conftest import (EXAMPLES, INDEX, LIVE_REPORT, REPLAY_TIMEOUT, RUNS, entries, entry_names,
                                   repeats, run_entries, suite_names, unpacked_runs, verified_names, verify_offline)

BUDGET_BYTES = 30 * 1024 * 1024           # scripts/record_corpus.py BUDGET_BYTES
# any corpus test may be the first to ask for the session's offline verification, whose own bound is REPLAY_TIMEOUT
pytestmark = pytest.mark.timeout(REPLAY_TIMEOUT + 300)


def comparable(report: dict) -> dict:
    """A report without what differs between two verifications of the same evidence: where the run was, how
    long it took, where its views were read from, the order examples were collected in."""
    def norm(value):
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items() if k not in ("run", "seconds", "views_from")}
        if isinstance(value, list):
            return sorted((norm(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
        return value
    return norm(report)


def test_the_corpus_is_indexed_and_within_its_budget():
    packed = sorted(p.name.removesuffix(".tar.xz") for p in RUNS.glob("*.tar.xz"))
    assert packed == sorted(e["name"] for e in entries()), (packed, INDEX)
    assert packed, "the corpus is empty"
    assert sum(p.stat().st_size for p in RUNS.glob("*.tar.xz")) <= BUDGET_BYTES


def fewer_examples_kept(offline: dict, live: dict) -> tuple[dict, dict]:
    """The two reports to compare when the live verification kept fewer examples per check than the corpus's
    (EXAMPLES; a test's own verification may keep 20): each check's live examples must all be among the
    offline ones, as many as its limit allowed; the reports are then compared without them. Unchanged otherwise."""
    limits = {len(c["examples"]) for c in live["checks"].values() if c.get("count", 0) > len(c.get("examples") or [])}
    if not limits or max(limits) >= EXAMPLES:
        return offline, live
    limit, offline, live = max(limits), json.loads(json.dumps(offline)), json.loads(json.dumps(live))
    for name, check in live["checks"].items():
        kept, found = check.pop("examples", []), offline["checks"][name].pop("examples", [])
        assert len(kept) == min(check.get("count", 0), limit) and all(e in found for e in kept), name
    return offline, live


def held_to_live(offline: dict | None, live: dict, proc: subprocess.CompletedProcess, name: str) -> None:
    """A run's offline report, read from its archive, is its live verification's but for what differs between two
    verifications of the same evidence."""
    assert offline is not None, proc.stderr[-3000:]
    assert offline["views_from"] == "archive" and live["views_from"] == "kafka"
    offline, live = fewer_examples_kept(offline, live)
    assert comparable(offline) == comparable(live), name


@pytest.mark.parametrize("name", verified_names())
def test_offline_verification_gives_the_recorded_live_verdict(replayed, name):
    runs, proc = replayed
    held_to_live(runs[name].offline, runs[name].live, proc, name)


@pytest.mark.campaign
def test_every_repeated_try_verified_offline_gives_its_live_verdict(tmp_path):
    """The campaign's share of the corpus: the bug suites' repeated tries the gate leaves out (conftest.py
    repeats), verified offline in one `txnlab verify`, each held to its live report as the gate's runs are."""
    names = repeats()
    assert names, "no bug suite has a repeated try"
    runs = unpacked_runs(tmp_path, sorted({n.split("/")[0] for n in names}))
    proc = verify_offline([runs[n][1] for n in names])
    for name in names:
        report = runs[name][1] / "verify" / "report.json"
        held_to_live(json.loads(report.read_text()) if report.exists() else None,
                     json.loads((runs[name][1] / LIVE_REPORT).read_text()), proc, name)


@pytest.mark.parametrize("name", entry_names())
def test_the_index_says_the_live_verdict(replayed, name):
    run = replayed[0][name]
    live = run.entry["live"]
    assert live["valid"] == run.live["valid"]
    assert {c: a["count"] for c, a in live["anomalies"].items()} == \
        {c: v["count"] for c, v in run.live["checks"].items() if v.get("count")}
    assert live["records"] == run.live["counts"]["records"]
    assert run.entry["run_tag"] in run.live["topics"][0]


def named_findings(run_dir) -> set[str]:
    """The catalogued bugs the report names for a run: by its stalls and its history shapes (the history) and its
    anomalies (its verify report, here the offline one)."""
    stalls, _ = stalls_and_recovery(run_dir)
    by_stall = {b["id"] for stall in stalls or [] for b in build.stall_bugs(stall)}
    return by_stall | {b["id"] for b in build.anomaly_bugs(run_dir, build.verdict_of(run_dir))} \
        | {b["id"] for b in build.shape_bugs(run_dir)}


FINDINGS = [e["name"] for e in run_entries() if e.get("finding")]


@pytest.mark.parametrize("name", FINDINGS)
def test_a_recorded_finding_is_named_by_the_catalog(replayed, name):
    run = replayed[0][name]
    assert run.entry["finding"] in named_findings(run.run_dir), name


def test_a_changed_rule_no_longer_names_a_recorded_finding(replayed, monkeypatch):
    """The finding tests depend on the catalog's rule: the same evidence judged by a deliberately wrong one (the
    bug's expected stalled call, or its expected checks, swapped for others) names nothing."""
    run = replayed[0][FINDINGS[0]]
    bug = next(b for b in catalog_module.catalog() if b.id == run.entry["finding"])
    expect = bug.expect.model_copy(update={"stalls": ["commit_transaction"] if bug.expect.stalls else [],
                                           "checks": ["open_at_end"] if bug.expect.checks else []})
    wrong = bug.model_copy(update={"expect": expect})
    real = catalog_module.catalog()
    monkeypatch.setattr(catalog_module, "catalog", lambda: tuple(wrong if b.id == bug.id else b for b in real))
    assert run.entry["finding"] not in named_findings(run.run_dir)


@pytest.mark.parametrize("name", entry_names())
def test_the_campaign_grades_a_recorded_run_by_its_verdict_its_recovery_and_its_finding(replayed, name):
    """txnlab campaign's cell of each recorded run (report/campaign.py experiment_outcome on the report's entry of
    it): the grade its index entry states with why (`campaign`), else `named` by its catalogued finding or `valid`
    (also when its finding is a behaviour its history shows, exactly-once held: `expect.shapes`, or `expect.errors`
    without checks; `named` again when that behaviour is a producer that cannot go on, which explains the fault not
    recovered from: shapes.LIVENESS_SHAPES); the causes named are its finding's and those its index says the same try
    also showed (`also`: e.g. a librdkafka producer's INVALID_TXN_STATE after a failover in another bug's run)."""
    from chaos.record.shapes import LIVENESS_SHAPES
    from report.campaign import experiment_outcome
    run = replayed[0][name]
    outcome = experiment_outcome(build.run_report(run.run_dir, name, None, None))
    finding = run.entry.get("finding")
    bug = next((b for b in catalog_module.catalog() if b.id == finding), None)
    behaviour = bug is not None and bool(bug.expect.shapes or bug.expect.errors and not bug.expect.checks)
    stuck = bug is not None and bool(set(bug.expect.shapes) & set(LIVENESS_SHAPES))
    grade = (run.entry.get("campaign") or {}).get("grade") or ("named" if finding and (stuck or not behaviour)
                                                              else "valid")
    assert (outcome["grade"], sorted(outcome["causes"])) == \
        (grade, sorted(c for c in [finding, *run.entry.get("also", [])] if c)), outcome


@pytest.mark.parametrize("name", suite_names())
def test_a_recorded_suite_s_page_is_built_again_offline_with_the_live_verdicts(replayed, name):
    """`txnlab report` on a stored suite whose runs were just verified offline: every run's verdict and counts per
    check are its live verification's, every section of the JSON twin is filled from the stored evidence (timelines,
    faults and recovery as its schedule had any, the run's picture), its alerts are those its live page showed (a bug suite's: recorded with
    it) or, for a demo's, its experiments' expected alerts fired, and the page names every run and renders in
    headless Chromium."""
    from report import screenshot
    runs = {r.entry["path"]: r for r in replayed[0].values() if r.entry.get("suite") == name}
    suite_dir = next(iter(runs.values())).suite_dir
    for stale in ("report.json", "report.html"):
        (suite_dir / stale).unlink(missing_ok=True)
    proc = txnlab("report", str(suite_dir), "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    twin = json.loads(proc.stdout)
    built = {Path(r["run_dir"]).relative_to(suite_dir.resolve()).as_posix(): r for r in twin["runs"]}
    live_twin = None
    if name in bug_suites():                  # recorded with its live page's twin (scripts/record_corpus.py)
        stored = json.loads((suite_dir / "live-suite-report.json").read_text())
        live_twin = {Path(r["run_dir"]).relative_to(Path(stored["directory"])).as_posix(): r for r in stored["runs"]}
    assert set(built) == set(runs), (sorted(built), sorted(runs))
    for path, run in runs.items():
        got = built[path]
        assert got["verify"]["valid"] == run.live["valid"], path
        assert {c: v["count"] for c, v in got["verify"]["checks"].items()} == \
            {c: v["count"] for c, v in run.live["checks"].items()}, path
        scheduled = json.loads((run.run_dir / "experiment.json").read_text())["schedule"]   # [] with no fault
        assert bool(got["faults"]) == bool(got["recovery"]["faults"]) == bool(scheduled), path
        for key in ("lso_lag", "open_transactions", "throughput"):
            assert [p for series in got["timelines"][key]["series"] for p in series["points"]], (path, key)
        assert (suite_dir / got["timeline_image"]).stat().st_size > 20_000, path
        if live_twin is not None:             # the alerts as the live page saw them (a bug's try may not raise them)
            assert alerts_of(got) == alerts_of(live_twin[path]), path
        else:                                 # a demo's experiments are made to raise their expected alerts
            expected = [d for d in got["detections"] if d["expected"]]
            assert all(d["detected"] and d["first_firing_s"] is not None for d in expected), (path, expected)
        if got["experiment"] == "hanging-transaction-drill":
            assert [d for d in expected if d["alert"] == "HangingTransaction"], (path, got["detections"])
    page = (suite_dir / "report.html").read_text()
    assert "<th>recovered</th>" in page and all(r["experiment"] in page for r in twin["runs"])
    png = screenshot.render_png(suite_dir / "report.html", suite_dir / "report.png", height=3000)
    seen = screenshot.ink(png)
    assert seen["non_white"] > 0.05 and seen["colours"] > 200, seen


def alerts_of(run: dict) -> list[tuple]:
    """A run's alert detections on a suite's page: each alert, whether its fault made it expected, and whether
    and how soon it fired (to the tenth of a second)."""
    return sorted((d["alert"], d["expected"], d["detected"],
                   None if d["first_firing_s"] is None else round(d["first_firing_s"], 1)) for d in run["detections"])


def bug_suites() -> list[str]:
    """The recorded `txnlab bugs run` suites (their runs carry a side)."""
    return [e["name"] for e in entries() if any("side" in r for r in (e.get("suite") or {}).values())]


@pytest.mark.parametrize("name", bug_suites())
def test_a_recorded_bug_suite_is_judged_again_offline_as_it_was_live(replayed, name):
    """`txnlab bugs judge` on a stored bug suite with no cluster, its runs just verified offline: each try judged
    from the suite's own runs reproduced the bug or was clean as it did live (bug.json as recorded, and the index's
    finding the bug on exactly the tries that reproduced it), the tallies and the exit code the live suite's."""
    from chaos.catalog.bugs import BUG_SIDES
    from report.bugs import exit_code
    runs = {Path(r.entry["path"]).name: r for r in replayed[0].values() if r.entry.get("suite") == name}
    suite_dir = next(iter(runs.values())).suite_dir.resolve()
    live = json.loads((suite_dir / "bug.json").read_text())
    proc = txnlab("bugs", "judge", str(suite_dir), timeout=600)
    judged = json.loads((suite_dir / "bug.json").read_text())
    assert judged.get("rejudged") and proc.returncode == exit_code(live), proc.stderr[-3000:]
    for side in BUG_SIDES:
        def tries(outcome: dict, side: str = side) -> list[tuple]:
            return [(Path(r["run_dir"]).name, r["reproduced"], r["clean"]) for r in outcome["sides"][side]["runs"]]
        assert tries(judged) == tries(live), side
        assert all(Path(r["run_dir"]).parent == suite_dir / side for r in judged["sides"][side]["runs"]), side
        for run_name, reproduced, _ in tries(live):
            entry = runs[run_name].entry
            assert entry["side"] == side and (entry["finding"] == live["bug"]) == reproduced, run_name
    assert (judged["affected_reproduced"], judged["fixed_clean"]) == (live["affected_reproduced"], live["fixed_clean"])


def test_kafkajs_s_stale_member_signatures_hold_for_their_recorded_runs_and_not_for_variations_of_them(replayed):
    """The gate's KafkaJS run through coordinator-kill accepts kafkajs-kip-447 and kafkajs-stale-seek by their whole
    signatures (chaos/record/signatures.py, tests/integration/test_clients.py not_kafkajs_findings): the recorded
    coordinator-kill run's offline report and history hold a stale member's commit for every example, and a
    kafkajs-kip-447 try that met both explains each of its examples by one of them (the report names both); the
    same runs with the stale member told of its revocation before it committed, with the rewind recorded after
    the partition came back, or with both outputs of an input one attempt's, do not. A rewind to the log start
    (offset null: the group had committed nothing) reaches back to every input; made a rewind past them, it does
    not."""
    import copy
    from chaos.record.signatures import explained
    from tests.integration.test_clients import not_kafkajs_findings
    run = replayed[0]["kafkajs-coordinator-kill-kip-447"]
    ops = read_history(run.run_dir).ops
    assert not_kafkajs_findings(run.offline, ops) is None
    told = copy.deepcopy(ops)
    first_commit = min(op["time"] for op in told if op["f"] == "process" and op["type"] == "ok" and op["time"] > 29e9)
    for op in told:                     # every revocation recorded at once, before the rebalance's commits
        if op["f"] == "seek" and op["value"].get("reason") == "revoked" and op["time"] > 29e9:
            op["time"] = first_commit - 1
    told.sort(key=lambda op: op["time"])
    assert "neither processor committed it" in not_kafkajs_findings(run.offline, told)
    one = copy.deepcopy(run.offline)
    example = one["checks"]["exactly_once_processing"]["examples"][0]
    example["outputs"] = [example["outputs"][0]] * 2
    assert "not two committed outputs of two processors" in not_kafkajs_findings(one, ops)

    both = next(r for r in replayed[0].values() if r.entry.get("also") == ["kafkajs-stale-seek"])
    ops, processing = read_history(both.run_dir).ops, both.live["checks"]["exactly_once_processing"]
    found = explained(processing, ops, ("stale-member-commit", "stale-seek"))
    assert not found.unexplained and all(found.counts.values()), found
    assert sum(found.counts.values()) == len(processing["examples"]), found       # each by one of them
    assert not_kafkajs_findings(both.live, ops) is None
    late = copy.deepcopy(ops)           # every rewind recorded after the rebalance that gave its partition back
    for op in late:
        if op["f"] == "seek" and op["value"].get("reason") == "rewind":
            op["time"] = max(o["time"] for o in late) + 1
    late.sort(key=lambda op: op["time"])
    assert explained(processing, late, ("stale-seek",)).counts["stale-seek"] == 0
    assert "no rewind" in not_kafkajs_findings(both.live, late)

    start = replayed[0]["kafkajs-coordinator-kill-stale-seek-log-start"]   # a rewind to the log start (offset null)
    ops, processing = read_history(start.run_dir).ops, start.offline["checks"]["exactly_once_processing"]
    assert not_kafkajs_findings(start.offline, ops) is None
    assert explained(processing, ops, ("stale-seek",)).counts["stale-seek"] == len(processing["examples"])
    beyond = copy.deepcopy(ops)         # the same rewinds to an offset past every input: they reach back to none
    for op in beyond:
        if op["f"] == "seek" and op["value"].get("reason") == "rewind":
            for position in op["value"]["positions"]:
                position["offset"] = 10 ** 9
    assert "does not reach back" in not_kafkajs_findings(start.offline, beyond)


def test_a_recorded_migration_converted_its_group_both_ways_and_its_page_names_the_protocols(replayed):
    """KIP-848's online migration on Kafka's Java clients (issue 48): the fault's own results say the coordinator
    converted the group to a consumer group and back, the run noted classic, consumer, classic, and the run's report
    entry (the page's line) names them; its verdict, valid, is the generic tests'."""
    run = replayed[0]["java-group-protocol-migration"]
    ops = read_history(run.run_dir).ops
    done = {op["f"]: op["value"] for op in ops if op["process"].startswith("nemesis-") and op["type"] == "ok"
            and op["value"].get("kind") == "migrate-group-protocol"}
    assert (done["fault"]["to"], done["fault"]["group_type"], done["fault"]["converted"]) == ("consumer", "consumer", True)
    assert (done["heal"]["back"], done["heal"]["group_type"], done["heal"]["converted"]) == (True, "classic", True)
    assert [s["process"] for s in done["fault"]["steps"]] == ["eos-0", "eos-1"]
    group = done["fault"]["group"]
    entry = build.run_report(run.run_dir, "group-protocol-migration", None, None)
    assert entry["group_protocols"] == {group: ["classic", "consumer", "classic"]}
    assert entry["recovery"]["recovered"] is True


def test_franz_go_s_commit_waits_hold_for_their_recorded_tries_and_not_for_variations_of_them(replayed):
    """franz-go-tv2-wait is a behaviour (chaos/record/shapes.py commit-waits): every recorded affected try's history
    holds a commit that waited COMMIT_WAIT_S or more with no fault active, no fixed try's does; the same histories
    with a fault's window over each wait, or with every transaction a deliberate abort, hold none."""
    import copy
    from chaos.record.shapes import commit_waits
    tries = {name: r for name, r in replayed[0].items() if r.entry.get("suite", "").startswith("franz-go-tv2-wait")}
    affected = [r for r in tries.values() if r.entry["side"] == "affected"]
    assert affected and all(r.entry["finding"] == "franz-go-tv2-wait" for r in affected), sorted(tries)
    for run in tries.values():
        waits = commit_waits(read_history(run.run_dir).ops)
        assert bool(waits) == (run.entry["side"] == "affected"), (run.entry["name"], waits)
    ops = read_history(affected[0].run_dir).ops
    start, end = min(op["wall"] for op in ops), max(op["wall"] for op in ops)
    faulted = copy.deepcopy(ops) + [     # a fault over the whole run: each wait may be the fault's
        {"time": 0, "wall": start, "process": "nemesis-0", "type": "invoke", "f": "fault", "value": {"kind": "network"}},
        {"time": 0, "wall": end, "process": "nemesis-0", "type": "ok", "f": "heal", "value": {"kind": "network"}}]
    assert commit_waits(faulted) == []
    aborted = [{**op, "value": {**op["value"], "abort": True}} if op["f"] == "txn" else op for op in ops]
    assert commit_waits(aborted) == []


def test_a_bug_s_bundle_for_its_maintainers_holds_its_tries_and_says_only_their_numbers(tmp_path):
    """`txnlab bugs export` of franz-go-tv2-wait from its recorded suite, no cluster: the bundle holds the affected
    try that showed the waits and the fixed try that stayed clean (history, archived views, verification, page with
    its timeline), the suite's tallies and the standalone reproduction; the README's figures are those runs' (each
    wait one of the affected try's shape occurrences, the fixed try's longest transaction from its own history, the
    slowest transaction told from its history lines: when it began, its records, the offsets reported), and the tarball holds the folder. A suite of another bug and a bug
    with nothing for its maintainers yet are refused, writing nothing."""
    import tarfile
    from report.bug_export import SHAPE_LINE, ExportError, attempt_ops, export, transaction_seconds
    from tests.corpus.conftest import unpack
    suite = unpack("franz-go-tv2-wait-pair-x3", tmp_path / "suite")
    proc = txnlab("bugs", "export", "franz-go-tv2-wait", "--suite", str(suite), "--out", str(tmp_path / "out"),
                  timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bundle = tmp_path / "out" / "franz-go-tv2-wait"
    judged = json.loads((suite / "bug.json").read_text())
    affected = next(r for r in judged["sides"]["affected"]["runs"] if r["reproduced"])
    [a_dir] = list((bundle / "affected").iterdir())
    [f_dir] = list((bundle / "fixed").iterdir())
    assert a_dir.name == Path(affected["run_dir"]).name
    for run in (a_dir, f_dir):
        assert (run / "archive" / "committed.parquet").exists() and (run / "verify" / "report.json").exists()
        assert 'src="data:image/png;base64,' in (run / "report.html").read_text()
    assert (bundle / "repro" / "main.go").exists() and json.loads((bundle / "bug.json").read_text()) == judged
    text = (bundle / "README.md").read_text()
    waits = affected["shapes"]["commit-waits"]
    assert f"In the affected try, {len(waits)} transactions took" in text and all(w in text for w in waits)
    assert f"took {max(transaction_seconds(f_dir)):.2f} s." in text
    slowest = max(waits, key=lambda w: float(SHAPE_LINE.search(w)["took"]))
    attempt = SHAPE_LINE.search(slowest)["attempt"]
    began, ended = attempt_ops(read_history(a_dir).ops, attempt)     # the slowest transaction told from the history
    block = text.split(f"The slowest transaction, {attempt}, as the run recorded it", 1)[1].split("```\n", 1)[1]
    block = block.split("\n```", 1)[0].splitlines()
    assert block[0] == f"producer {began['process']}, transactional.id {began['value']['txn_id']}, transaction {attempt}:"
    assert block[1].strip().startswith(f"{began['time'] / 1e9:.3f} s  begins, {len(began['value']['writes'])} records")
    assert block[2].strip().startswith(f"{ended['time'] / 1e9:.3f} s  committed, the client reported: ")
    assert all(f"{w['id']} at {w['topic']}-{w['partition']} offset {o}" in block[2]
               for w, o in zip(ended["value"]["writes"], ended["value"]["offsets"])) and len(block) == 3
    assert "3 of 3 tries" in text and "pkg/kgo/sink.go" in text
    with tarfile.open(tmp_path / "out" / "franz-go-tv2-wait.tar.gz") as tar:
        names = tar.getnames()
    assert "franz-go-tv2-wait/README.md" in names and f"franz-go-tv2-wait/affected/{a_dir.name}/history" in names
    with pytest.raises(ExportError, match="is a suite of franz-go-tv2-wait, not of KAFKA-14402"):
        export("KAFKA-14402", suite, tmp_path / "refused")
    other = unpack("kafka-14402-pair-x3", tmp_path / "other")
    with pytest.raises(ExportError, match="no `upstream` section"):
        export("KAFKA-14402", other, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()


def test_a_stuck_producer_s_bundle_says_the_shape_s_own_lines(tmp_path):
    """kafkajs-expired-id-stuck's bundle from its recorded suite: a shape that is not a wait (a producer failing every
    transaction) is told by its occurrences as the affected try's judgement holds them (the corpus keeps no logs: the
    client's log lines are a live suite's)."""
    from report.bug_export import export
    from tests.corpus.conftest import unpack
    suite = unpack("kafkajs-expired-id-stuck-pair-x3", tmp_path / "suite")
    bundle = export("kafkajs-expired-id-stuck", suite, tmp_path / "out", progress=lambda m: None)
    text = (bundle / "README.md").read_text()
    judged = json.loads((suite / "bug.json").read_text())
    affected = next(r for r in judged["sides"]["affected"]["runs"] if r["reproduced"])
    stuck = affected["shapes"]["stuck-producer"]
    assert "In the affected try, the history shows stuck-producer:" in text and all(f"- {line}" in text for line in stuck)
    assert "3 of 3 tries" in text and "src/producer/eosManager/index.js" in text


@pytest.mark.parametrize("bug", ["kafkajs-sequence-rollback", "librdkafka-abort-sequence-reuse"])
def test_a_lost_write_s_bundle_shows_the_offsets_in_both_views_and_both_transactions_history(tmp_path, bug):
    """A lost write's bundle from its recorded suite (KafkaJS's sequence rollback; librdkafka's sequence reused after
    an abort's purge): the README says, from the bundled affected try's verification, which committed record is
    missing, which record the acknowledged offset holds instead, what each view of the archive holds at that offset
    (the aborted transaction's record, read_uncommitted only), and both transactions told from the history (the
    committed one with the offsets reported, the one that failed before it with the client's error)."""
    from report.bug_export import attempt_ops, export
    from tests.corpus.conftest import unpack
    bundle = export(bug, unpack(f"{bug}-pair-x3", tmp_path / "suite"), tmp_path / "out", progress=lambda _: None)
    [a_dir] = list((bundle / "affected").iterdir())
    checks = json.loads((a_dir / "verify" / "report.json").read_text())["checks"]
    [lost] = checks["lost_write"]["examples"]
    [moved] = checks["inconsistent_offsets"]["examples"]
    assert moved["id"] == lost["id"]
    text = (bundle / "README.md").read_text()
    assert f"record {lost['id']} of the committed transaction {lost['attempt']} is not readable" in text
    assert f"offset {moved['offset']}; that offset holds record {moved['other_id']}" in text
    at = f"{moved['topic']}-{moved['partition']} offset {moved['offset']}: "
    views = [line for line in text.splitlines() if at in line]
    assert [v.split(" ", 1)[0] for v in views] == ["read_uncommitted"] and moved["other_id"] in views[0]
    committed, failed = lost["attempt"], moved["other_id"].rsplit(".", 1)[0]
    ops = read_history(a_dir).ops
    for attempt, ending in ((committed, "committed, the client reported: "), (failed, "failed: ")):
        began, ended = attempt_ops(ops, attempt)
        block = text.split(f"Transaction {attempt} as the run recorded it:", 1)[1].split("```\n", 1)[1]
        block = block.split("\n```", 1)[0].splitlines()
        assert block[1].strip().startswith(f"{began['time'] / 1e9:.3f} s  begins, {len(began['value']['writes'])}")
        assert block[2].strip().startswith(f"{ended['time'] / 1e9:.3f} s  {ending}"), block
    assert f"{lost['id']} at {moved['topic']}-{moved['partition']} offset {moved['offset']}" in text   # as reported
    assert attempt_ops(ops, failed)[1]["value"]["error"] in text
