"""report.html: the verdict of one verification as a page a person reads (report.json is its twin).

Owns: rendering a report dict (verdict.py's structure) to one self-contained HTML page: the overall
verdict, why the evidence is incomplete if it is, counts, a table of checks, and each check's examples.
Must not: compute anything the JSON does not hold.
"""
from __future__ import annotations

import json
from html import escape
from typing import Any

COLOURS = {True: "#1a7f37", False: "#cf222e", "unknown": "#9a6700"}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#1f2328;max-width:80rem}
h1{font-size:1.5rem}.badge{color:#fff;padding:.2rem .6rem;border-radius:.4rem;font-weight:600}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #d0d7de;padding:.3rem .6rem;
text-align:left;vertical-align:top;font-size:.9rem}th{background:#f6f8fa}code{font-size:.85rem}
.gaps{background:#fff8c5;padding:.6rem 1rem;border-radius:.4rem}
"""


# where the two views were read (job.py): said beside the topics
VIEWS_FROM = {"kafka": " (read from the cluster)", "archive": " (read from the run's archive, offline)"}


def badge(valid: Any) -> str:
    label = {True: "valid", False: "anomalies", "unknown": "unknown"}.get(valid, str(valid))
    return f'<span class="badge" style="background:{COLOURS.get(valid, "#57606a")}">{escape(label)}</span>'


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return ""
    columns = columns or list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f"<code>{escape(json.dumps(value, default=str))}</code>"
    return escape("" if value is None else str(value))


def render(report: dict) -> str:
    checks = report["checks"]
    summary = [{"check": name, "verdict": badge(c["valid"]), "anomalies": c["count"],
                "what it checks": c["description"] + (f" (does not apply: {c['why']})" if c.get("applies") is False else "")}
               for name, c in checks.items()]
    parts = [f"<h1>txnlab verify {badge(report['valid'])}</h1>",
             f"<p>Run <code>{escape(report['run'])}</code>, topics {escape(', '.join(report['topics']))}"
             f"{VIEWS_FROM.get(report.get('views_from') or '', '')}; {report['seconds']} s.</p>"]
    if report["evidence"]["gaps"]:
        items = "".join(f"<li>{escape(g)}</li>" for g in report["evidence"]["gaps"])
        parts.append(f'<div class="gaps"><b>Evidence incomplete, so no check can be valid:</b><ul>{items}</ul></div>')
    parts.append("<h2>Checks</h2>" + verdict_table(summary))
    parts.append("<h2>Counts</h2>" + table([_flat(report["counts"])]))
    if report.get("info_attempts"):
        parts.append("<h2>Attempts whose outcome the client did not know (info), resolved</h2>"
                     + table([report["info_attempts"]]))
    for name, c in checks.items():
        if c["examples"]:
            kinds = ", ".join(f"{escape(k)} {v}" for k, v in sorted(c.get("problems", {}).items()))
            parts.append(f"<h3>{escape(name)}: {c['count']} anomalies{f' ({kinds})' if kinds else ''}, "
                         f"first {len(c['examples'])}</h3>" + table(c["examples"]))
    if report.get("unrecognised") and report["unrecognised"]["count"]:
        parts.append(f"<h2>Records no workload wrote: {report['unrecognised']['count']}</h2>"
                     + table(report["unrecognised"]["examples"]))
    return f"<!doctype html><html><head><meta charset='utf-8'><title>txnlab verify</title><style>{STYLE}</style>" \
           f"</head><body>{''.join(parts)}</body></html>\n"


def verdict_table(rows: list[dict]) -> str:
    head = "".join(f"<th>{c}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{v if k == 'verdict' else _cell(v)}</td>" for k, v in r.items()) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _flat(counts: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in counts.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
