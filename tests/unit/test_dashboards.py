"""The dashboards as code: Grafana 11.6 schema, templated by cluster and topic, every panel query valid
PromQL for promtool, generated JSON current."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from dashboards import boards
from dashboards.queries import panel_queries

VARIABLES = {"cluster": ".*", "topic": ".*", "datasource": "prometheus"}


def all_queries():
    for name in boards.BOARDS:
        dashboard = json.loads(boards.render(name))
        for pq in panel_queries(dashboard, VARIABLES):
            yield name, pq


def test_four_dashboards_on_the_11_6_schema_templated_by_cluster_and_topic():
    assert set(boards.BOARDS) == {"transactions", "producer-state", "exporter-health", "chaos-run"}
    for name in boards.BOARDS:
        dashboard = json.loads(boards.render(name))
        assert dashboard["schemaVersion"] == 41, name           # Grafana 11.6
        variables = {v["name"] for v in dashboard["templating"]["list"]}
        assert {"datasource", "cluster"} <= variables, name
        for panel in dashboard["panels"]:
            assert panel["targets"] and panel["title"], (name, panel)
            for target in panel["targets"]:
                assert '$cluster' in target["expr"] or "ALERTS" in target["expr"], (name, target["expr"])


def test_every_panel_query_is_valid_promql(tmp_path):
    if not shutil.which("promtool"):
        pytest.fail("promtool not found: run `make setup` (Debian package prometheus)")
    queries = list(all_queries())
    assert len(queries) >= 25
    doc = {"groups": [{"name": "panels", "rules": [
        {"record": f"panel:{i}", "expr": pq.expr} for i, (_, pq) in enumerate(queries)]}]}
    (tmp_path / "panels.yml").write_text(yaml.safe_dump(doc))
    result = subprocess.run(["promtool", "check", "rules", str(tmp_path / "panels.yml")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "$" not in "".join(pq.expr for _, pq in queries)   # every variable substituted


def test_the_hanging_table_shows_abort_coordinates_and_the_chaos_board_marks_faults():
    transactions = json.loads(boards.render("transactions"))
    table = next(p for p in transactions["panels"] if p["type"] == "table")
    assert "kafkatxn_hanging_transaction_info" in table["targets"][0]["expr"] and table["targets"][0]["instant"]
    chaos = json.loads(boards.render("chaos-run"))
    assert any("txnlab-fault" in json.dumps(a) for a in chaos["annotations"]["list"])
