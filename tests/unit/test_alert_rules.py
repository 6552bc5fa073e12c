"""The alerting rules: valid for promtool, every alert tested firing and not firing, committed file current."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from dashboards import build, rules
from cluster.lab.versions import REPO_ROOT
from exporter import collectors

ALERTS = REPO_ROOT / "dashboards" / "alerts"


def promtool(*args: str) -> subprocess.CompletedProcess:
    if not shutil.which("promtool"):
        pytest.fail("promtool not found: run `make setup` (Debian package prometheus)")
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def test_promtool_accepts_the_rules():
    result = promtool("check", "rules", str(ALERTS / "txnlab.rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rejects_a_broken_rule(tmp_path):
    doc = rules.rule_groups()
    doc["groups"][0]["rules"][0]["expr"] = "kafkatxn_hanging_transaction_info >"
    (tmp_path / "bad.yml").write_text(yaml.safe_dump(doc))
    assert promtool("check", "rules", str(tmp_path / "bad.yml")).returncode != 0


def test_promtool_unit_tests_pass():
    result = promtool("test", "rules", str(ALERTS / "txnlab.rules.test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_silent_case():
    alerts = {r["alert"] for g in rules.rule_groups()["groups"] for r in g["rules"]}
    cases = yaml.safe_load((ALERTS / "txnlab.rules.test.yml").read_text())["tests"]
    fired = {c["alertname"] for t in cases for c in t["alert_rule_test"] if c["exp_alerts"]}
    silent = {c["alertname"] for t in cases for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert alerts == {"HangingTransaction", "LSOStuck", "OpenTransactionTooOld", "ProducerStateGrowth",
                      "CoordinatorTransactionsOverTimeout", "TransactionNearTimeout", "TransactionMarkerQueue", "ExporterDown", "ExporterStale",
                      "ProducerEpochNearExhaustion", "TransactionStuckInPrepare", "GroupCommitsFailing"}
    assert fired == alerts and silent == alerts


def test_every_alert_says_what_it_means_and_what_to_run():
    for group in rules.rule_groups()["groups"]:
        for rule in group["rules"]:
            notes = rule["annotations"]
            assert notes["summary"] and notes["description"] and notes["runbook"], rule["alert"]
            assert rule["labels"]["severity"] in ("warning", "critical")


def test_committed_files_are_what_the_code_renders():
    assert build.main(["--check"]) == 0


def test_the_budget_is_a_knob():
    text = rules.render(rules.Knobs(producer_budget=1234))
    assert "> 1234" in text and "> 200000" not in text


def test_the_epoch_rule_and_the_exporter_name_the_same_maximum():
    """dashboards/ imports nothing of txnlab's, so the int16 maximum is written in rules.py and in collectors.py:
    this keeps the two equal, and the warning below it."""
    assert rules.PRODUCER_EPOCH_MAX == collectors.PRODUCER_EPOCH_MAX == 2**15 - 1
    assert 0 < rules.EPOCH_WARNING < rules.PRODUCER_EPOCH_MAX
    assert f"of at most {rules.PRODUCER_EPOCH_MAX}" in rules.render()
