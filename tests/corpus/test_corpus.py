"""Recorded real runs replayed without a cluster (the corpus: tests/corpus/corpus.yaml, docs/testing.md): every run,
verified offline from its archive, gets the verdict, the evidence and every check's validity, count and examples
its live verification gave when it was recorded; the index says that live verdict; a run recorded for a catalogued
finding is named by the catalog's rule as the report names it (its stalls, its anomalies), and no longer once that
rule is changed; the corpus stays within its budget and every packed run is indexed."""
from __future__ import annotations

import json

import pytest

import chaos.runner.spec as catalog_module
from report import build
from report.bugs import stalls_and_recovery
from tests.corpus.conftest import INDEX, RUNS, entries, entry_names

BUDGET_BYTES = 30 * 1024 * 1024           # scripts/record_corpus.py BUDGET_BYTES


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
    assert packed == sorted(entry_names()), (packed, INDEX)
    assert packed, "the corpus is empty"
    assert sum(p.stat().st_size for p in RUNS.glob("*.tar.xz")) <= BUDGET_BYTES


@pytest.mark.parametrize("name", entry_names())
def test_offline_verification_gives_the_recorded_live_verdict(replayed, name):
    runs, proc = replayed
    run = runs[name]
    assert run.offline is not None, proc.stderr[-3000:]
    assert run.offline["views_from"] == "archive" and run.live["views_from"] == "kafka"
    assert comparable(run.offline) == comparable(run.live), name


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
    """The catalogued bugs the report names for a run: by its stalls (the history) and its anomalies (its verify
    report, here the offline one)."""
    stalls, _ = stalls_and_recovery(run_dir)
    by_stall = {b["id"] for stall in stalls or [] for b in build.stall_bugs(stall)}
    return by_stall | {b["id"] for b in build.anomaly_bugs(run_dir, build.verdict_of(run_dir))}


FINDINGS = [e["name"] for e in entries() if e.get("finding")]


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
    it): the grade its index entry states with why (`campaign`), else `named` by its catalogued finding or `valid`;
    the causes named are its finding's."""
    from report.campaign import experiment_outcome
    run = replayed[0][name]
    outcome = experiment_outcome(build.run_report(run.run_dir, name, None, None))
    finding = run.entry.get("finding")
    grade = (run.entry.get("campaign") or {}).get("grade") or ("named" if finding else "valid")
    assert (outcome["grade"], outcome["causes"]) == (grade, [finding] if finding else []), outcome
