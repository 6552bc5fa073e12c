"""dashboards/render.py: variables, panels in rows, legends, queries against a canned Prometheus, PNGs."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from matplotlib import image

from dashboards import render

NOW = 1_700_000_000.0
START = NOW - 900


# ---- tiny dashboards --------------------------------------------------------------------------------------
def target(expr: str, ref: str = "A", legend: str = "", instant: bool = False, **extra) -> dict:
    t = {"expr": expr, "refId": ref, "legendFormat": legend, "instant": instant, "range": not instant, **extra}
    return {k: v for k, v in t.items() if v != ""}


def panel(title: str, kind: str, targets: list[dict], x: int = 0, y: int = 0, w: int = 12, h: int = 8,
          unit: str = "short") -> dict:
    return {"title": title, "type": kind, "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets,
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}}


def row(title: str, y: int, collapsed: bool = False, panels: list[dict] | None = None) -> dict:
    return {"title": title, "type": "row", "collapsed": collapsed, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": panels or []}


def board(title: str, panels: list[dict], templating: list[dict] | None = None) -> dict:
    return {"title": title, "panels": panels, "templating": {"list": templating or []}, "annotations": {"list": []}}


# ---- a canned Prometheus -----------------------------------------------------------------------------------
def matrix(*series: tuple[dict, list[float]]) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": labels, "values": [[START + 60 * i, str(v)] for i, v in enumerate(values)]}
        for labels, values in series]}}


def vector(*series: tuple[dict, float]) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [NOW, str(v)]} for labels, v in series]}}


EMPTY_MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}
PARSE_ERROR = {"status": "error", "errorType": "bad_data", "error": 'invalid parameter "query": 1:5: parse error'}


class FakePrometheus:
    """Answers /api/v1/query and /api/v1/query_range from `answers` (expr -> (HTTP status, body))."""

    def __init__(self, answers: dict[str, tuple[int, dict | str]]):
        self.answers = answers
        self.calls: list[tuple[str, dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.answer({k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()})

            def do_GET(self):
                self.answer({k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()})

            def answer(self, params: dict[str, str]) -> None:
                path = urlparse(self.path).path
                fake.calls.append((path, params))
                if path not in ("/api/v1/query", "/api/v1/query_range"):
                    status, body = 404, "not found"
                else:
                    status, body = fake.answers.get(params.get("query", ""), (200, EMPTY_MATRIX))
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakePrometheus":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prometheus():
    with FakePrometheus({}) as fake:
        yield fake


def pq(expr: str = "up", kind: str = "timeseries", instant: bool = False, fmt: str = "time_series",
       legend: str = "") -> render.PanelQuery:
    return render.PanelQuery("Some panel", kind, "short", "A", expr, legend, instant, fmt)


def colours(path: Path) -> np.ndarray:
    pixels = image.imread(path)
    return np.unique(pixels[..., :3].reshape(-1, 3), axis=0)


def has_colour(path: Path, rgb: tuple[float, float, float], tolerance: float = 0.06) -> bool:
    pixels = image.imread(path)[..., :3]
    return bool((np.abs(pixels - np.array(rgb)).max(axis=-1) < tolerance).any())


# ---- variables -----------------------------------------------------------------------------------------------
def test_every_variable_form_is_substituted():
    expr = ('sum(rate(x{cluster=~"$cluster", topic=~"${topic}", a=~"${topic:regex}", b=~"[[cluster]]", '
            'c=~"[[topic:pipe]]", d=~"${cluster.text}"}[$__rate_interval])) / $__range / ${__interval}')
    dash = board("B", [panel("P", "timeseries", [target(expr)])])
    [q] = render.panel_queries(dash, {"cluster": "c1|c2", "topic": ".*"})
    assert q.expr == ('sum(rate(x{cluster=~"c1|c2", topic=~".*", a=~".*", b=~"c1|c2", c=~".*", d=~"c1|c2"}[1m])) '
                      '/ 5m / 15s')


def test_unknown_variables_and_regex_references_are_left_alone():
    expr = 'label_replace(x{a="$clusters"}, "dst", "$1", "src", "(.*)") + $nope + ${nope:csv} + [[nope]]'
    dash = board("B", [panel("P", "timeseries", [target(expr)])])
    [q] = render.panel_queries(dash, {"cluster": "c1"})
    assert q.expr == expr


def test_builtins_can_be_overridden_and_follow_the_window():
    dash = board("B", [panel("P", "timeseries", [target("rate(x[$__rate_interval]) * $__range_s")])])
    assert render.panel_queries(dash, {"__rate_interval": "2m", "__range_s": "60"})[0].expr == "rate(x[2m]) * 60"
    builtins = render.window_builtins(START, NOW, step=5, scrape_interval=5)
    assert builtins["__range"] == "900s" and builtins["__interval"] == "5s" and builtins["__rate_interval"] == "20s"
    assert render.window_builtins(START, NOW, step=5)["__rate_interval"] == "60s"   # Grafana's 15 s default
    assert render.window_builtins(START, NOW, step=0.5)["__interval"] == "500ms"


def test_dashboard_variables_default_to_their_current_or_all_value():
    templating = [{"name": "cluster", "type": "query", "includeAll": True, "allValue": ".*"},
                  {"name": "topic", "type": "custom", "current": {"text": "t1", "value": ["t1"]}},
                  {"name": "group", "type": "query", "current": {"value": "$__all"}},
                  {"name": "datasource", "type": "datasource", "query": "prometheus"}]
    dash = board("B", [panel("P", "timeseries", [target('x{c=~"$cluster", t=~"$topic", g=~"$group"}')])], templating)
    assert render.panel_queries(dash, None)[0].expr == 'x{c=~".*", t=~"t1", g=~".*"}'
    assert render.panel_queries(dash, {"topic": "t2"})[0].expr == 'x{c=~".*", t=~"t2", g=~".*"}'
    assert render.template_defaults(dash)["datasource"] == "prometheus"


# ---- panels --------------------------------------------------------------------------------------------------
def nested_board() -> dict:
    return board("Nested", [
        panel("Top stat", "stat", [target("a")], w=6, h=4),
        row("Open row", 4),
        panel("Under the open row", "timeseries", [target("b")], y=5),
        row("Closed row", 13, collapsed=True, panels=[
            panel("Inside closed left", "timeseries", [target("c")], x=0, y=14),
            panel("Inside closed right", "table", [target("d", instant=True, format="table")], x=12, y=14)]),
        row("Last row", 14),
        panel("After the rows", "bargauge", [target("e")], y=15),
        {"title": "Notes", "type": "text", "gridPos": {"x": 12, "y": 15, "w": 12, "h": 3}},
    ])


def test_panels_in_rows_and_collapsed_rows_are_all_found_in_order():
    queries = render.panel_queries(nested_board(), {})
    assert [(q.panel_title, q.panel_type, q.expr) for q in queries] == [
        ("Top stat", "stat", "a"), ("Under the open row", "timeseries", "b"),
        ("Inside closed left", "timeseries", "c"), ("Inside closed right", "table", "d"),
        ("After the rows", "bargauge", "e")]
    assert [q.instant for q in queries] == [False, False, False, True, False]


def test_collapsed_rows_are_laid_out_expanded_without_overlap():
    placed = {p.get("title"): g for p, g in render.laid_out(nested_board())}
    assert placed["Inside closed left"].y == placed["Closed row"].y + 1
    assert placed["Last row"].y >= placed["Inside closed left"].y + placed["Inside closed left"].h
    assert placed["After the rows"].y == placed["Last row"].y + 1


def test_hidden_and_exprless_targets_are_skipped_and_units_kept():
    dash = board("B", [panel("P", "timeseries", [target("a"), target("b", "B", hide=True), {"refId": "C"}],
                             unit="s")])
    [q] = render.panel_queries(dash, {})
    assert (q.expr, q.unit, q.ref_id, q.title) == ("a", "s", "A", "P")


# ---- legends and values --------------------------------------------------------------------------------------
def test_legend_format_fills_labels_like_grafana():
    labels = {"__name__": "lag", "topic": "t", "partition": "3"}
    assert render.legend_name(pq(legend="{{topic}}-{{ partition }}"), labels) == "t-3"
    assert render.legend_name(pq(legend="broker {{broker}}"), labels) == "broker broker"   # absent: its name
    assert render.legend_name(pq(legend="open"), labels) == "open"
    assert render.legend_name(pq(), labels) == 'lag{topic="t", partition="3"}'
    assert render.legend_name(pq(legend="__auto"), {"__name__": "up"}) == "up"
    assert render.legend_name(pq("sum(x)"), {}) == "sum(x)"


def test_values_are_formatted_by_unit():
    assert render.format_value(1234.5) == "1.23 K"
    assert render.format_value(0.25, "percentunit") == "25%"
    assert render.format_value(90, "s") == "1.5 min"
    assert render.format_value(0.0123, "s") == "12.3 ms"
    assert render.format_value(float("nan")) == "NaN"
    assert render.format_value(3, "wps") == "3 wr/s"


def test_reduce_takes_the_last_real_value_by_default():
    points = [(1, 1.0), (2, 5.0), (3, float("nan"))]
    assert render.reduce_points(points) == 5.0
    assert render.reduce_points(points, "max") == 5.0
    assert np.isnan(render.reduce_points(points, "last"))
    assert np.isnan(render.reduce_points([]))


# ---- querying ------------------------------------------------------------------------------------------------
def test_range_query_returns_series(prometheus):
    prometheus.answers["up"] = (200, matrix(({"job": "a"}, [1, 2, 3]), ({"job": "b"}, [4])))
    data = render.query_panel(prometheus.url, pq(), START, NOW, 15)
    assert [s.labels for s in data.series] == [{"job": "a"}, {"job": "b"}]
    assert data.series[0].values == [(START, 1.0), (START + 60, 2.0), (START + 120, 3.0)]
    path, params = prometheus.calls[-1]
    assert path == "/api/v1/query_range"
    assert (float(params["start"]), float(params["end"]), float(params["step"])) == (START, NOW, 15)


@pytest.mark.parametrize("query", [pq(instant=True), pq(kind="table"), pq(fmt="table")])
def test_instant_targets_and_tables_use_an_instant_query(prometheus, query):
    prometheus.answers["up"] = (200, vector(({"job": "a"}, 7)))
    data = render.query_panel(prometheus.url, query, START, NOW, 15)
    assert data.instant and data.series == [render.Series({"job": "a"}, [(NOW, 7.0)])]
    path, params = prometheus.calls[-1]
    assert path == "/api/v1/query" and float(params["time"]) == NOW


def test_scalar_results_are_one_series(prometheus):
    prometheus.answers["time()"] = (200, {"status": "success", "data": {"resultType": "scalar", "result": [NOW, "5"]}})
    assert render.query_panel(prometheus.url, pq("time()", instant=True), START, NOW, 15).series == [
        render.Series({}, [(NOW, 5.0)])]


def test_a_prometheus_error_names_the_panel_and_the_expr(prometheus):
    prometheus.answers["sum(("] = (400, PARSE_ERROR)
    with pytest.raises(render.PanelQueryError) as caught:
        render.query_panel(prometheus.url, pq("sum(("), START, NOW, 15)
    message = str(caught.value)
    assert "Some panel" in message and "sum((" in message and "HTTP 400" in message and "parse error" in message


@pytest.mark.parametrize("answer", [(200, {"status": "error", "error": "boom"}), (500, "<html>oops</html>")])
def test_a_failed_status_or_a_non_json_answer_raises(prometheus, answer):
    prometheus.answers["up"] = answer
    with pytest.raises(render.PanelQueryError, match="Some panel"):
        render.query_panel(prometheus.url, pq(), START, NOW, 15)


def test_an_unreachable_prometheus_raises_the_same_error():
    with FakePrometheus({}) as fake:
        url = fake.url
    with pytest.raises(render.PanelQueryError, match="request to .* failed"):
        render.query_panel(url, pq(), START, NOW, 15, timeout=2)


# ---- rendering -----------------------------------------------------------------------------------------------
C0 = (0x1F / 255, 0x77 / 255, 0xB4 / 255)    # matplotlib's first series colour


def full_board() -> dict:
    return board("txnlab / Test board", [
        panel("Hanging", "stat", [target("sum(hanging)")], w=6, h=4),
        panel("Coverage", "gauge", [target("coverage")], x=6, w=6, h=4, unit="percentunit"),
        panel("Lag", "timeseries", [target("lag", legend="{{topic}}-{{partition}}")], y=4),
        panel("Nothing here", "timeseries", [target("absent")], x=12, y=4),
        panel("Broken", "timeseries", [target("sum((")], y=12),
        panel("Mixed", "timeseries", [target("lag", legend="{{partition}}"), target("absent", "B")], x=12, y=12),
        row("More", 20, collapsed=True, panels=[
            panel("Top partitions", "table", [target("topk(3, producers)", instant=True, format="table")], y=21),
            panel("Per broker", "bargauge", [target("per_broker", legend="broker {{broker}}")], x=12, y=21)]),
        {"title": "Notes", "type": "text", "gridPos": {"x": 0, "y": 29, "w": 24, "h": 2}},
    ])


def canned(fake: FakePrometheus) -> None:
    fake.answers.update({
        "sum(hanging)": (200, matrix(({}, [0, 1, 2]))),
        "coverage": (200, matrix(({}, [0.5, 0.9]))),
        "lag": (200, matrix(({"topic": "t", "partition": "0"}, [1, 5, 2, 8, 3, 9, 1]),
                            ({"topic": "t", "partition": "1"}, [0, 0, 4, 4, 0, 0, 7]))),
        "absent": (200, EMPTY_MATRIX),
        "sum((": (400, PARSE_ERROR),
        "topk(3, producers)": (200, vector(*[({"topic": "t", "partition": str(i)}, 10 - i) for i in range(3)])),
        "per_broker": (200, matrix(({"broker": "1"}, [3, 4]), ({"broker": "2"}, [6, 2]))),
    })


@pytest.fixture
def rendered(prometheus, tmp_path):
    canned(prometheus)
    result = render.render_dashboard(full_board(), prometheus.url, tmp_path, START, NOW,
                                     shade=[(START + 120, START + 300, "kill broker 1")])
    return result, tmp_path


def test_every_panel_is_drawn_to_a_png_that_is_not_blank(rendered):
    result, out = rendered
    assert [p.title for p in result.panels] == ["Hanging", "Coverage", "Lag", "Nothing here", "Broken",
                                               "Mixed", "Top partitions", "Per broker"]
    assert result.skipped == ["Notes"]
    for p in result.panels:
        assert p.file.parent == out and p.file.suffix == ".png" and p.file.exists()
        assert len(colours(p.file)) > 1, p.title
    assert {p.file.name for p in result.panels} >= {"txnlab-test-board--lag.png", "txnlab-test-board--hanging.png"}
    assert has_colour(out / "txnlab-test-board--lag.png", C0)


def test_counts_report_empty_and_failed_panels(rendered):
    result, _ = rendered
    counts = {p.title: p.counts for p in result.panels}
    assert counts["Lag"] == {"A": 2} and counts["Top partitions"] == {"A": 3} and counts["Per broker"] == {"A": 2}
    assert [p.title for p in result.empty_panels()] == ["Nothing here"]
    assert [p.title for p in result.failed_panels()] == ["Broken"]
    [broken] = result.failed_panels()
    assert "sum((" in broken.errors[0] and "parse error" in broken.errors[0]
    assert len(result.problems()) == 2
    [mixed] = [p for p in result.panels if p.title == "Mixed"]
    assert mixed.counts == {"A": 2, "B": 0} and mixed.ok and mixed.empty_targets == ["B"]
    assert all(p.ok for p in result.panels if p.title not in ("Nothing here", "Broken"))


def test_tables_query_instantly_and_timeseries_over_the_range(rendered, prometheus):
    paths = {params["query"]: path for path, params in prometheus.calls}
    assert paths["topk(3, producers)"] == "/api/v1/query"
    assert paths["lag"] == "/api/v1/query_range"


def test_overview_and_index_show_the_pngs(rendered):
    result, out = rendered
    assert result.overview == out / "txnlab-test-board.png" and len(colours(result.overview)) > 1
    page = result.index.read_text()
    assert result.index == out / "index.html"
    assert all(p.file.name in page for p in result.panels) and result.overview.name in page
    assert "txnlab / Test board" in page and "no data" in page


def test_the_fault_window_is_shaded(prometheus, tmp_path):
    canned(prometheus)
    dash = board("Shade", [panel("Lag", "timeseries", [target("lag")])])
    plain = render.render_dashboard(dash, prometheus.url, tmp_path / "plain", START, NOW)
    shaded = render.render_dashboard(dash, prometheus.url, tmp_path / "shaded", START, NOW,
                                     shade=[(START + 100, START + 400, "fault")])
    pink = (1 - 0.13 * (1 - 0xD6 / 255), 1 - 0.13 * (1 - 0x27 / 255), 1 - 0.13 * (1 - 0x28 / 255))
    assert has_colour(shaded.panels[0].file, pink, 0.02) and not has_colour(plain.panels[0].file, pink, 0.02)


def test_duplicate_titles_get_distinct_files_and_two_boards_share_the_index(prometheus, tmp_path):
    canned(prometheus)
    one = render.render_dashboard(board("One", [panel("Lag", "timeseries", [target("lag")]),
                                                panel("Lag", "timeseries", [target("lag")], y=8)]),
                                  prometheus.url, tmp_path, START, NOW)
    two = render.render_dashboard(board("Two", [panel("Lag", "stat", [target("lag")])]), prometheus.url, tmp_path,
                                  START, NOW)
    assert [p.file.name for p in one.panels] == ["one--lag.png", "one--lag-2.png"]
    page = (tmp_path / "index.html").read_text()
    assert all(name in page for name in ["one--lag.png", "one--lag-2.png", "two--lag.png", "one.png", "two.png"])
    assert two.index == one.index


def test_the_command_line_renders_and_fails_on_errors_or_missing_data(prometheus, tmp_path, capsys):
    canned(prometheus)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(board("Good", [panel("Lag", "timeseries", [target('lag{c=~"$cluster"}')])])))
    prometheus.answers['lag{c=~"a.*"}'] = prometheus.answers["lag"]
    assert render.main([str(good), "--prometheus", prometheus.url, "--out", str(tmp_path / "out"),
                        "--minutes", "5", "--var", "cluster=a.*", "--require-data"]) == 0
    assert (tmp_path / "out" / "good--lag.png").exists() and (tmp_path / "out" / "index.html").exists()
    assert "ok    Good / Lag: A=2" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(full_board()))
    assert render.main([str(bad), "--prometheus", prometheus.url, "--out", str(tmp_path / "out")]) == 1
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(board("Empty", [panel("Nothing", "timeseries", [target("absent")])])))
    args = [str(empty), "--prometheus", prometheus.url, "--out", str(tmp_path / "out")]
    assert render.main(args) == 0 and render.main(args + ["--require-data"]) == 1
