"""A catalogued Kafka bug reproduced by faults alone (report/bugs.py, short mode, one try per side):
KAFKA-14402's `verification-off` variant, Kafka 4.3.1 with partition verification off, shows the anomaly (a
transaction no coordinator knows, confirmed hanging by the exporter, or the aborted attempt's records read),
with verification on the same schedule is clean (docs/bugs.md: 8 of 10 and 10 of 10). Its natural sides,
Kafka 3.5.2 against 3.6.2 with their defaults, are not run here: 3.6.2's Kafka Streams lost outputs under the same
faults in 5 of 10 tries, an anomaly of its own whose cause is not named yet (docs/findings.md), so its clean
side is not one a single try can be asked for."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cluster.versions import txnlab_home
from report.bugs import BugOptions, BugRun, exit_code

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]
BASE_PORT = int(os.environ.get("TXNLAB_TEST_BASE_PORT", "21000")) + 1000     # 22000: no other test cluster's


def run_pair(tmp_path, seed: int) -> dict:
    options = BugOptions(tries=1, short=True, seed=seed, runs_dir=tmp_path, base_port=BASE_PORT,
                         state_root=txnlab_home() / "test-bugs", variant="verification-off")
    return BugRun("KAFKA-14402", options, progress=print).run()


def test_kafka_14402_shows_on_the_affected_side_and_not_on_the_fixed_side(tmp_path):
    outcome = run_pair(tmp_path, seed=31)
    if not outcome["sides"]["affected"]["runs"][0]["reproduced"]:
        # It reproduces in 8 of 10 tries (docs/bugs.md: a try whose stream thread never has a batch in flight
        # to the slowed node does not show it): one more pair, both sides again, before calling it a failure.
        assert outcome["sides"]["fixed"]["runs"][0]["clean"], outcome["sides"]["fixed"]
        outcome = run_pair(tmp_path, seed=32)
    [affected], [fixed] = outcome["sides"]["affected"]["runs"], outcome["sides"]["fixed"]["runs"]
    assert affected["reproduced"], affected
    assert set(affected["anomalies"]) & {"open_at_end", "aborted_read", "torn_transaction"}, affected
    ran = [json.loads((Path(r["run_dir"]) / "cluster.json").read_text())["kafka_version"] for r in (affected, fixed)]
    assert ran == ["4.3.1", "4.3.1"], ran                    # the variant's release on both sides
    report = outcome["report"]
    affected_run = next(r for r in report["runs"] if r["level"] == report["levels"][0])
    if affected["anomalies"].get("open_at_end"):              # left open: the exporter saw it hang, the alert fired
        assert affected["max_hanging"] and affected["max_hanging"] >= 1, affected
        assert [d for d in affected_run["detections"] if d["alert"] == "HangingTransaction" and d["expected"]
                and d["detected"]], affected_run["detections"]
    assert fixed["clean"] and fixed["anomalies"] == {}, fixed
    assert exit_code(outcome) == 0 and not outcome["errors"]
    assert report["side_by_side"] and set(report["side_by_side"][0]["levels"]) == set(report["levels"])
    assert report["side_by_side"][0]["levels"][report["levels"][0]]["verdict"] is False
    assert report["side_by_side"][0]["levels"][report["levels"][1]]["verdict"] is True
    stored = json.loads((Path(report["directory"]) / "bug.json").read_text())
    assert stored["affected_reproduced"] == 1 and stored["fixed_clean"] == 1
    page = (Path(report["directory"]) / "report.html").read_text()
    assert "KAFKA-14402" in page and page.count('src="data:image/png;base64,') == 2
    assert not list((txnlab_home() / "test-bugs").glob("*/node-*")), "a side's cluster was left behind"
