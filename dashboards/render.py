"""Draw the Grafana dashboards (grafana/*.json) ourselves, panel by panel, from a live Prometheus.

Owns: reading a dashboard's panels (rows and collapsed rows flattened, laid out as if every row were
expanded) and their PromQL targets; substituting template variables ($var, ${var}, ${var:fmt},
[[var]]) and Grafana's built-ins ($__range, $__rate_interval, $__interval); running each target against
Prometheus's HTTP API; drawing each panel to a PNG (timeseries, stat/gauge, table, bargauge) with
optional shaded fault windows, one overview per dashboard laid out by gridPos, and an index.html; and
reporting what every target returned, so a test can assert that each panel has data.
`python -m dashboards.render DASHBOARD.json --prometheus URL --out DIR [--minutes 15] [--var cluster=.*]`.
Must not: import anything of txnlab's outside dashboards/ (the standard library, requests and
matplotlib only), or pretend to be Grafana: transformations, overrides, thresholds, repeats and
annotation queries are not rendered; values are put into queries verbatim (they are regexes, as
".*", the dashboards' allValue, is).
"""
from __future__ import annotations

import argparse
import html
import json
import math
import re
import sys
import textwrap
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib
import requests
from matplotlib import dates as mdates
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

matplotlib.use("Agg")

# Grafana's own variable syntax: $name, [[name]], [[name:format]], ${name}, ${name.field}, ${name:format}.
VARIABLE = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^}]+))?(?::([^}]+))?\}")
LEGEND = re.compile(r"\{\{\s*(.+?)\s*\}\}")
DEFAULT_BUILTINS = {"__range": "5m", "__range_s": "300", "__range_ms": "300000",
                    "__rate_interval": "1m", "__rate_interval_ms": "60000",
                    "__interval": "15s", "__interval_ms": "15000"}
GRAFANA_SCRAPE_INTERVAL_S = 15.0   # what Grafana assumes when the datasource sets none
MAX_ROWS = 15                      # table rows and bargauge bars drawn per panel
MAX_LEGEND = 12                    # legend entries drawn per timeseries panel
STAT_TYPES = {"stat", "gauge", "singlestat"}
BAR_TYPES = {"bargauge", "barchart", "piechart"}


# ---- what a dashboard asks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True)
class PanelQuery:
    panel_title: str
    panel_type: str
    unit: str
    ref_id: str
    expr: str
    legend_format: str
    instant: bool
    format: str = "time_series"

    @property
    def title(self) -> str:
        return self.panel_title


@dataclass(frozen=True)
class Panel:
    title: str
    type: str
    unit: str
    grid: Grid
    queries: tuple[PanelQuery, ...]
    decimals: int | None = None
    calc: str = "lastNotNull"


def grid_of(panel: dict) -> Grid:
    pos = panel.get("gridPos") or {}
    return Grid(int(pos.get("x", 0)), int(pos.get("y", 0)), int(pos.get("w", 12)), int(pos.get("h", 8)))


def _reading_order(panels: Iterable[dict]) -> list[dict]:
    return sorted(panels, key=lambda p: (grid_of(p).y, grid_of(p).x))


def laid_out(dashboard: dict) -> list[tuple[dict, Grid]]:
    """Every panel, rows included, in reading order, placed where it would be with every row expanded."""
    placed: list[tuple[dict, Grid]] = []
    shift = 0
    for panel in _reading_order(dashboard.get("panels") or []):
        grid = replace(grid_of(panel), y=grid_of(panel).y + shift)
        placed.append((panel, grid))
        children = _reading_order(panel.get("panels") or []) if panel.get("type") == "row" else []
        if children:
            top = min(grid_of(c).y for c in children)
            placed += [(c, replace(grid_of(c), y=grid.y + 1 + grid_of(c).y - top)) for c in children]
            shift += max(grid_of(c).y + grid_of(c).h for c in children) - top
    return placed


def template_defaults(dashboard: dict) -> dict[str, str]:
    """A value for each templating variable: its current value, its allValue when that is "All", else .*"""
    values = {}
    for var in (dashboard.get("templating") or {}).get("list") or []:
        name = var.get("name")
        if not name:
            continue
        current = (var.get("current") or {}).get("value")
        if isinstance(current, list):
            current = current[0] if len(current) == 1 else ("$__all" if current else None)
        if current in (None, "", "$__all"):
            current = var.get("query") if var.get("type") in ("datasource", "constant") else None
            current = current or var.get("allValue") or ".*"
        values[name] = str(current)
    return values


def substitute(text: str, values: dict[str, str]) -> str:
    """Grafana's interpolation: every known variable replaced by its value, unknown ones left as they are."""
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        return values.get(name, match.group(0))
    return VARIABLE.sub(value, text)


def _duration(seconds: float) -> str:
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{int(round(seconds * 1000))}ms"


def window_builtins(start: float, end: float, step: float,
                    scrape_interval: float = GRAFANA_SCRAPE_INTERVAL_S) -> dict[str, str]:
    """$__range, $__interval and $__rate_interval as Grafana sets them for this window and step."""
    span = max(1, int(round(end - start)))
    rate = max(step + scrape_interval, 4 * scrape_interval)
    return {"__range": f"{span}s", "__range_s": str(span), "__range_ms": str(span * 1000),
            "__interval": _duration(step), "__interval_ms": str(int(round(step * 1000))),
            "__rate_interval": _duration(rate), "__rate_interval_ms": str(int(round(rate * 1000))),
            "__from": str(int(start * 1000)), "__to": str(int(end * 1000))}


def _panel(raw: dict, grid: Grid, values: dict[str, str]) -> Panel:
    defaults = (raw.get("fieldConfig") or {}).get("defaults") or {}
    calcs = ((raw.get("options") or {}).get("reduceOptions") or {}).get("calcs") or ["lastNotNull"]
    title, kind = substitute(raw.get("title") or "", values), raw.get("type") or "timeseries"
    unit = defaults.get("unit") or ""
    queries = tuple(
        PanelQuery(title, kind, unit, t.get("refId") or chr(ord("A") + i), substitute(t["expr"], values),
                   t.get("legendFormat") or "", bool(t.get("instant")) and not t.get("range"),
                   t.get("format") or "time_series")
        for i, t in enumerate(raw.get("targets") or []) if (t.get("expr") or "").strip() and not t.get("hide"))
    return Panel(title, kind, unit, grid, queries, defaults.get("decimals"), calcs[0])


def dashboard_panels(dashboard: dict, variables: dict[str, str] | None = None) -> list[Panel]:
    """Every non-row panel (collapsed rows' panels too), its targets' PromQL with variables substituted.

    Values: Grafana's built-ins (DEFAULT_BUILTINS), then the dashboard's variables, then `variables`."""
    values = {**DEFAULT_BUILTINS, **template_defaults(dashboard), **(variables or {})}
    return [_panel(raw, grid, values) for raw, grid in laid_out(dashboard) if raw.get("type") != "row"]


def panel_queries(dashboard: dict, variables: dict[str, str] | None = None) -> list[PanelQuery]:
    return [q for panel in dashboard_panels(dashboard, variables) for q in panel.queries]


# ---- asking Prometheus ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    values: list[tuple[float, float]]


@dataclass(frozen=True)
class PanelData:
    query: PanelQuery
    series: list[Series]
    instant: bool
    warnings: list[str] = field(default_factory=list)


class PanelQueryError(Exception):
    """A panel's query failed; the message names the panel, the target and the expression."""

    def __init__(self, query: PanelQuery, reason: str):
        self.query, self.reason = query, reason
        super().__init__(f"panel {query.panel_title!r} ({query.panel_type}) target {query.ref_id}: {reason}\n"
                         f"  expr: {query.expr}")


def runs_instant(pq: PanelQuery) -> bool:
    return pq.instant or pq.format == "table" or pq.panel_type == "table"


def _request(pq: PanelQuery, start: float, end: float, step: float) -> tuple[str, dict[str, Any]]:
    if runs_instant(pq):
        return "/api/v1/query", {"query": pq.expr, "time": end}
    return "/api/v1/query_range", {"query": pq.expr, "start": start, "end": end, "step": step}


def _body(response: requests.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def parse_result(data: dict) -> list[Series]:
    """Prometheus's data (matrix, vector, scalar) as series of (unix seconds, value)."""
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        return [Series({}, [(float(result[0]), float(result[1]))])]
    if kind == "vector":
        return [Series(r.get("metric") or {}, [(float(r["value"][0]), float(r["value"][1]))]) for r in result or []]
    if kind == "matrix":
        return [Series(r.get("metric") or {}, [(float(t), float(v)) for t, v in r.get("values") or []])
                for r in result or []]
    return []


def query_panel(prometheus_url: str, pq: PanelQuery, start: float, end: float, step: float,
                timeout: float = 30.0, session: requests.Session | None = None) -> PanelData:
    """Run one target: query_range, or query at `end` for instant targets and tables."""
    path, params = _request(pq, start, end, step)
    try:
        response = (session or requests).post(prometheus_url.rstrip("/") + path, data=params, timeout=timeout)
    except requests.RequestException as exc:
        raise PanelQueryError(pq, f"request to {prometheus_url}{path} failed: {exc}") from exc
    body = _body(response)
    if response.status_code != 200 or body.get("status") != "success":
        detail = f"{body.get('errorType')}: {body.get('error')}" if body.get("error") else response.text[:300]
        raise PanelQueryError(pq, f"{path} answered HTTP {response.status_code}, status "
                                  f"{body.get('status')!r}: {detail}")
    return PanelData(pq, parse_result(body.get("data") or {}), runs_instant(pq), list(body.get("warnings") or []))


# ---- values and names ----------------------------------------------------------------------------------
def legend_name(pq: PanelQuery, labels: dict[str, str]) -> str:
    """Grafana's legend: legendFormat with {{label}} filled (an absent label leaves its name), else the series."""
    if pq.legend_format and pq.legend_format != "__auto":
        return LEGEND.sub(lambda m: labels.get(m.group(1)) or m.group(1), pq.legend_format)
    rest = {k: v for k, v in labels.items() if k != "__name__"}
    if not rest:
        return labels.get("__name__") or pq.expr
    return labels.get("__name__", "") + "{" + ", ".join(f'{k}="{v}"' for k, v in rest.items()) + "}"


def reduce_points(points: Sequence[tuple[float, float]], calc: str = "lastNotNull") -> float:
    values = [v for _, v in points]
    real = [v for v in values if not math.isnan(v)]
    if calc == "last":
        return values[-1] if values else math.nan
    if not real:
        return math.nan
    reducers = {"max": max, "min": min, "sum": sum, "mean": lambda xs: sum(xs) / len(xs),
                "first": lambda xs: xs[0], "firstNotNull": lambda xs: xs[0]}
    return reducers.get(calc, lambda xs: xs[-1])(real)


def _number(v: float, decimals: int | None) -> str:
    if decimals is not None:
        return f"{v:.{decimals}f}"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}".rstrip("0").rstrip(".")


def _scaled(v: float, steps: Sequence[tuple[float, str]], decimals: int | None) -> str:
    for size, suffix in reversed(steps):
        if abs(v) >= size:
            return f"{_number(v / size, decimals)}{suffix}"
    return _number(v, decimals) + steps[0][1]


SHORT = [(1, ""), (1e3, " K"), (1e6, " Mil"), (1e9, " Bil"), (1e12, " Tri")]
BYTES = [(1, " B"), (1024, " KiB"), (1024**2, " MiB"), (1024**3, " GiB"), (1024**4, " TiB")]
DECBYTES = [(1, " B"), (1e3, " kB"), (1e6, " MB"), (1e9, " GB"), (1e12, " TB")]
SECONDS = [(1e-9, " ns"), (1e-6, " µs"), (1e-3, " ms"), (1, " s"), (60, " min"), (3600, " hour"),
           (86400, " day"), (604800, " week"), (31536000, " year")]
TIME_UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400,
              "dtdurations": 1, "dtdurationms": 1e-3}
RATE_SUFFIX = {"ops": " ops/s", "reqps": " req/s", "rps": " rd/s", "wps": " wr/s", "iops": " io/s",
               "cps": " c/s", "mps": " msg/s"}


def format_value(v: float | None, unit: str = "", decimals: int | None = None) -> str:
    """A value the way Grafana's common units show it (dateTime* units take milliseconds, as in Grafana)."""
    if v is None or math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if unit == "percent":
        return _number(v, decimals if decimals is not None else 1 if v != int(v) else None) + "%"
    if unit == "percentunit":
        return _number(v * 100, decimals if decimals is not None else 1 if v * 100 != int(v * 100) else None) + "%"
    if unit in TIME_UNITS:
        return _scaled(v * TIME_UNITS[unit], SECONDS, decimals).strip() if v else "0 s"
    if unit.startswith("dateTime"):
        return datetime.fromtimestamp(v / 1000).isoformat(" ", "seconds")
    if unit in ("bytes", "decbytes"):
        return _scaled(v, BYTES if unit == "bytes" else DECBYTES, decimals)
    if unit in RATE_SUFFIX:
        return _scaled(v, SHORT, decimals) + RATE_SUFFIX[unit]
    if unit in ("", "short", "none", "locale"):
        return _scaled(v, SHORT, decimals)
    return f"{_scaled(v, SHORT, decimals)} {unit}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80].strip("-") or "panel"


# ---- drawing -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Drawn:
    """What one panel drew from: its data per target and the errors of the targets that failed."""
    panel: Panel
    data: list[PanelData]
    errors: list[str]


def _when(t: float) -> datetime:
    return datetime.fromtimestamp(t)


def _message(ax: Axes, text: str, color: str = "#777777", size: float = 11) -> None:
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(text, 70)[:6]), transform=ax.transAxes, ha="center",
            va="center", color=color, fontsize=size)


def _title(ax: Axes, panel: Panel, size: float) -> None:
    ax.set_title(textwrap.shorten(panel.title or "(untitled)", max(20, panel.grid.w * 7), placeholder="…"),
                 loc="left", fontsize=size, fontweight="bold")


def _shade(ax: Axes, shade: Sequence[tuple[float, float, str]], start: float, end: float, size: float) -> None:
    for begin, finish, label in shade:
        if finish < start or begin > end:
            continue
        ax.axvspan(_when(max(begin, start)), _when(min(finish, end)), color="#d62728", alpha=0.13, lw=0)
        ax.text(_when(max(begin, start)), 0.98, f" {label}", transform=ax.get_xaxis_transform(), va="top",
                fontsize=size, color="#a01010", clip_on=True)


def draw_timeseries(ax: Axes, drawn: Drawn, start: float, end: float,
                    shade: Sequence[tuple[float, float, str]], size: float) -> None:
    lines = 0
    for data in drawn.data:
        for s in data.series:
            if s.values:
                ax.plot([_when(t) for t, _ in s.values], [v for _, v in s.values], lw=1.3,
                        label=legend_name(data.query, s.labels))
                lines += 1
    ax.set_xlim(_when(start), _when(end))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S" if end - start <= 900 else "%H:%M"))
    ax.yaxis.set_major_formatter(lambda v, _: format_value(v, drawn.panel.unit))
    ax.tick_params(labelsize=size)
    ax.grid(True, color="#e5e5e5", lw=0.6)
    _shade(ax, shade, start, end, size)
    if lines:
        handles, labels = ax.get_legend_handles_labels()
        extra = f" (+{lines - MAX_LEGEND} more)" if lines > MAX_LEGEND else ""
        ax.legend(handles[:MAX_LEGEND], labels[:MAX_LEGEND], fontsize=size, loc="upper left",
                  title=extra or None, title_fontsize=size, framealpha=0.7)
    elif not drawn.errors:
        _message(ax, "no data")


def _reduced(drawn: Drawn) -> list[tuple[str, float]]:
    return [(legend_name(d.query, s.labels), reduce_points(s.values, drawn.panel.calc))
            for d in drawn.data for s in d.series]


def draw_stat(ax: Axes, drawn: Drawn, size: float) -> None:
    ax.axis("off")
    values = _reduced(drawn)[:6]
    if not values:
        if not drawn.errors:
            _message(ax, "no data")
        return
    for i, (name, value) in enumerate(values):
        x = (i + 0.5) / len(values)
        big = size * (4.5 if len(values) == 1 else 2.6)
        ax.text(x, 0.45, format_value(value, drawn.panel.unit, drawn.panel.decimals), transform=ax.transAxes,
                ha="center", va="center", fontsize=big, fontweight="bold", color="#1a7f37")
        if len(values) > 1:
            ax.text(x, 0.88, textwrap.shorten(name, 30, placeholder="…"), transform=ax.transAxes, ha="center",
                    va="center", fontsize=size, color="#555555")


def table_rows(drawn: Drawn) -> tuple[list[str], list[list[str]]]:
    """Columns (labels, then Value) and one row per series with its latest value, as a Prometheus table."""
    several = len(drawn.data) > 1
    columns: list[str] = []
    for d in drawn.data:
        for s in d.series:
            columns += [k for k in s.labels if k != "__name__" and k not in columns]
    header = (["refId"] if several else []) + columns + ["Value"]
    rows = [([d.query.ref_id] if several else []) + [s.labels.get(c, "") for c in columns]
            + [format_value(reduce_points(s.values, "last"), drawn.panel.unit, drawn.panel.decimals)]
            for d in drawn.data for s in d.series]
    return header, rows


def draw_table(ax: Axes, drawn: Drawn, size: float) -> None:
    ax.axis("off")
    header, rows = table_rows(drawn)
    if not rows:
        if not drawn.errors:
            _message(ax, "no data")
        return
    cells = [[textwrap.shorten(c, 40, placeholder="…") for c in row] for row in rows[:MAX_ROWS]]
    table = ax.table(cellText=cells, colLabels=header, loc="upper left", cellLoc="left", colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(size)
    table.auto_set_column_width(list(range(len(header))))
    for (row, _), cell in table.get_celld().items():
        cell.set_edgecolor("#dddddd")
        if row == 0:
            cell.set_facecolor("#f0f0f0")
    if len(rows) > MAX_ROWS:
        ax.text(0.0, 0.0, f"… and {len(rows) - MAX_ROWS} more rows", transform=ax.transAxes, fontsize=size,
                color="#777777")


def draw_bars(ax: Axes, drawn: Drawn, size: float) -> None:
    values = _reduced(drawn)
    if not values:
        ax.axis("off")
        if not drawn.errors:
            _message(ax, "no data")
        return
    shown = values[:MAX_ROWS][::-1]
    names = [textwrap.shorten(n, 40, placeholder="…") for n, _ in shown]
    numbers = [0.0 if math.isnan(v) else v for _, v in shown]
    ax.barh(range(len(shown)), numbers, color="#3274d9")
    ax.set_yticks(range(len(shown)), names, fontsize=size)
    ax.tick_params(labelsize=size)
    ax.xaxis.set_major_formatter(lambda v, _: format_value(v, drawn.panel.unit))
    for i, (_, v) in enumerate(shown):
        ax.text(numbers[i], i, " " + format_value(v, drawn.panel.unit, drawn.panel.decimals), va="center",
                fontsize=size)
    if len(values) > MAX_ROWS:
        ax.set_xlabel(f"(+{len(values) - MAX_ROWS} more)", fontsize=size)


def draw_panel(ax: Axes, drawn: Drawn, start: float, end: float,
               shade: Sequence[tuple[float, float, str]] = (), size: float = 9) -> None:
    kind = drawn.panel.type
    if kind in STAT_TYPES:
        draw_stat(ax, drawn, size)
    elif kind == "table":
        draw_table(ax, drawn, size)
    elif kind in BAR_TYPES:
        draw_bars(ax, drawn, size)
    else:
        draw_timeseries(ax, drawn, start, end, shade, size)
    _title(ax, drawn.panel, size + 1)
    if drawn.errors:
        _message(ax, "query error: " + "; ".join(e.splitlines()[0] for e in drawn.errors), "#c00000", size)


def panel_figure(drawn: Drawn, start: float, end: float, shade: Sequence[tuple[float, float, str]]) -> Figure:
    grid = drawn.panel.grid
    width, height = min(max(grid.w * 0.55, 4.5), 14), min(max(grid.h * 0.45, 2.6), 9)
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained", facecolor="white")
    draw_panel(fig.add_subplot(), drawn, start, end, shade)
    return fig


ROW_UNIT, COL_UNIT = 0.34, 0.7    # inches per Grafana grid row (30 px) and column (1/24 of the width)


def overview_figure(title: str, drawn: Sequence[Drawn], rows: Sequence[tuple[str, Grid]], start: float,
                    end: float, shade: Sequence[tuple[float, float, str]]) -> Figure:
    """The dashboard as Grafana lays it out (every row expanded), panels boxed on a 24-column grid."""
    bottom = max([d.panel.grid.y + d.panel.grid.h for d in drawn] + [g.y + g.h for _, g in rows] + [1])
    head = 0.6
    width, height = 24 * COL_UNIT, bottom * ROW_UNIT + head
    fig = Figure(figsize=(width, height), dpi=80, facecolor="white")
    fig.text(0.01, 1 - 0.3 / height, f"{title}   ({_when(start):%Y-%m-%d %H:%M} – {_when(end):%H:%M})",
             fontsize=14, fontweight="bold", va="center")

    def box(g: Grid) -> tuple[float, float, float, float]:
        return (g.x * COL_UNIT / width, 1 - (head + (g.y + g.h) * ROW_UNIT) / height,
                g.w * COL_UNIT / width, g.h * ROW_UNIT / height)

    for name, g in rows:
        x0, y0, w, h = box(g)
        fig.text(x0 + 0.005, y0 + h / 2, name, fontsize=11, fontweight="bold", va="center", color="#333333")
    for d in drawn:
        x0, y0, w, h = box(d.panel.grid)
        fig.add_artist(Rectangle((x0 + 0.002, y0 + 0.002), w - 0.004, h - 0.004, transform=fig.transFigure,
                                 fill=False, edgecolor="#cccccc", lw=0.8))
        plot = d.panel.type not in STAT_TYPES | {"table"}
        left = 0.75 / width if plot else 0.1 / width
        lower = 0.3 / height if plot else 0.08 / height
        upper = 0.38 / height
        ax = fig.add_axes((x0 + left, y0 + lower, max(w - left - 0.1 / width, 0.01),
                           max(h - lower - upper, 0.005)))
        draw_panel(ax, d, start, end, shade, size=7)
    return fig


# ---- rendering a dashboard -----------------------------------------------------------------------------
@dataclass
class PanelResult:
    title: str
    type: str
    file: Path
    counts: dict[str, int]          # refId -> series (rows, for tables) the target returned
    errors: list[str]

    @property
    def empty(self) -> bool:
        """No target returned a series (a panel Grafana would show as "No data")."""
        return sum(self.counts.values()) == 0

    @property
    def empty_targets(self) -> list[str]:
        """The targets that answered with no series (a panel can have data and still carry one)."""
        return [ref for ref, count in self.counts.items() if count == 0]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.empty


@dataclass
class RenderResult:
    title: str
    overview: Path
    index: Path
    panels: list[PanelResult]
    skipped: list[str]              # panels without a PromQL target (text panels, other datasources)

    def empty_panels(self) -> list[PanelResult]:
        return [p for p in self.panels if p.empty and not p.errors]

    def failed_panels(self) -> list[PanelResult]:
        return [p for p in self.panels if p.errors]

    def problems(self) -> list[str]:
        """One line per panel that failed or drew nothing (for an assertion message)."""
        return ([f"{self.title} / {p.title}: {'; '.join(p.errors)}" for p in self.failed_panels()]
                + [f"{self.title} / {p.title}: no data ({p.counts})" for p in self.empty_panels()])


def auto_step(start: float, end: float) -> float:
    """About 300 points a series, never finer than 5 s (our Prometheus scrapes every 5 s)."""
    return float(max(5, math.ceil((end - start) / 300)))


def fetch(panel: Panel, prometheus_url: str, start: float, end: float, step: float,
          session: requests.Session | None = None) -> Drawn:
    data, errors = [], []
    for pq in panel.queries:
        try:
            data.append(query_panel(prometheus_url, pq, start, end, step, session=session))
        except PanelQueryError as exc:
            errors.append(str(exc))
    return Drawn(panel, data, errors)


def _unique(names: Iterable[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format="png")
    return path


def render_dashboard(dashboard: dict, prometheus_url: str, out_dir: Path, start: float, end: float,
                     variables: dict[str, str] | None = None, shade: Sequence[tuple[float, float, str]] = (),
                     step: float | None = None, scrape_interval: float = GRAFANA_SCRAPE_INTERVAL_S) -> RenderResult:
    """Query every panel, draw each to <dashboard>--<panel>.png, the overview to <dashboard>.png, refresh index.html."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    step = step or auto_step(start, end)
    title = dashboard.get("title") or "dashboard"
    values = {**window_builtins(start, end, step, scrape_interval), **(variables or {})}
    panels = dashboard_panels(dashboard, values)
    queried = [p for p in panels if p.queries]
    with requests.Session() as session:
        drawn = [fetch(p, prometheus_url, start, end, step, session) for p in queried]
    base = slug(title)
    results = []
    for d, name in zip(drawn, _unique(slug(d.panel.title) for d in drawn)):
        path = _save(panel_figure(d, start, end, shade), out_dir / f"{base}--{name}.png")
        counts = {pd.query.ref_id: len(pd.series) for pd in d.data}
        results.append(PanelResult(d.panel.title, d.panel.type, path, counts, d.errors))
    rows = [(r.get("title") or "", g) for r, g in laid_out(dashboard) if r.get("type") == "row"]
    overview = _save(overview_figure(title, drawn, rows, start, end, shade), out_dir / f"{base}.png")
    result = RenderResult(title, overview, out_dir / "index.html", results, [p.title for p in panels if not p.queries])
    write_manifest(result, out_dir, start, end, values)
    write_index(out_dir)
    return result


# ---- index.html ----------------------------------------------------------------------------------------
MANIFEST = ".render.json"


def write_manifest(result: RenderResult, out_dir: Path, start: float, end: float, values: dict[str, str]) -> Path:
    """What was rendered, beside the PNGs, so index.html can list every dashboard rendered into out_dir."""
    doc = {"title": result.title, "overview": result.overview.name, "start": start, "end": end,
           "variables": values, "skipped": result.skipped,
           "panels": [{**asdict(p), "file": p.file.name, "empty": p.empty} for p in result.panels]}
    path = out_dir / f"{slug(result.title)}{MANIFEST}"
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path


def _section(doc: dict) -> str:
    e = html.escape
    rows = "".join(
        f"<tr class={'err' if p['errors'] else 'empty' if p['empty'] else 'ok'}><td>{e(p['title'])}</td>"
        f"<td>{e(p['type'])}</td><td>{e(', '.join(f'{k}={v}' for k, v in p['counts'].items()))}</td>"
        f"<td>{e('; '.join(p['errors']) or ('no data' if p['empty'] else 'ok'))}</td></tr>" for p in doc["panels"])
    images = "".join(f"<figure><img src='{e(p['file'])}' alt='{e(p['title'])}'><figcaption>{e(p['title'])}"
                     f"</figcaption></figure>" for p in doc["panels"])
    window = f"{_when(doc['start']):%Y-%m-%d %H:%M:%S} – {_when(doc['end']):%H:%M:%S}"
    return (f"<section><h2>{e(doc['title'])}</h2><p>{e(window)}</p>"
            f"<table><tr><th>panel</th><th>type</th><th>series per target</th><th>status</th></tr>{rows}</table>"
            f"<img class=overview src='{e(doc['overview'])}' alt='{e(doc['title'])}'><div class=panels>{images}</div>"
            f"</section>")


def write_index(out_dir: Path) -> Path:
    docs = sorted((json.loads(p.read_text()) for p in out_dir.glob(f"*{MANIFEST}")), key=lambda d: d["title"])
    style = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ddd;padding:2px 6px;font-size:13px;text-align:left}"
             "tr.err td{background:#fdd}tr.empty td{background:#ffd}img.overview{max-width:100%;border:1px solid #ccc}"
             ".panels{display:flex;flex-wrap:wrap;gap:8px}.panels img{max-width:640px}figure{margin:0}")
    page = (f"<!doctype html><html><head><meta charset=utf-8><title>txnlab dashboards</title><style>{style}</style>"
            f"</head><body><h1>txnlab dashboards</h1>{''.join(_section(d) for d in docs)}</body></html>\n")
    path = out_dir / "index.html"
    path.write_text(page)
    return path


# ---- the command line ----------------------------------------------------------------------------------
def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def _window(text: str) -> tuple[float, float, str]:
    begin, end, *label = text.split(",", 2)
    return float(begin), float(end), (label[0] if label else "fault")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dashboards.render", description=__doc__.splitlines()[0])
    p.add_argument("dashboards", nargs="+", type=Path, help="dashboard JSON files (dashboards/grafana/*.json)")
    p.add_argument("--prometheus", default="http://127.0.0.1:19790", help="Prometheus base URL")
    p.add_argument("--out", type=Path, required=True, help="directory for the PNGs and index.html")
    p.add_argument("--minutes", type=float, default=15.0, help="window: the last N minutes (default 15)")
    p.add_argument("--end", type=float, help="window end, unix seconds (default now)")
    p.add_argument("--step", type=float, help="query_range step in seconds (default: about 300 points)")
    p.add_argument("--var", type=_pair, action="append", default=[], metavar="NAME=VALUE",
                   help="a template variable's value (default: the dashboard's, else .*)")
    p.add_argument("--shade", type=_window, action="append", default=[], metavar="START,END[,LABEL]",
                   help="a window (unix seconds) to shade on timeseries panels")
    p.add_argument("--require-data", action="store_true", help="fail when a panel returned no data")
    args = p.parse_args(argv)
    end = args.end or time.time()
    start = end - args.minutes * 60
    bad = 0
    for path in args.dashboards:
        result = render_dashboard(json.loads(path.read_text()), args.prometheus, args.out, start, end,
                                  dict(args.var), args.shade, args.step)
        for panel in result.panels:
            state = "ERROR" if panel.errors else "EMPTY" if panel.empty else "ok"
            counts = " ".join(f"{k}={v}" for k, v in panel.counts.items()) or "query failed"
            print(f"{state:5} {result.title} / {panel.title}: {counts}")
            for error in panel.errors:
                print(textwrap.indent(error, "      "), file=sys.stderr)
        bad += len(result.failed_panels()) + (len(result.empty_panels()) if args.require_data else 0)
    print(f"wrote {args.out / 'index.html'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
