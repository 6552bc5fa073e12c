"""report.html: a suite's report as one self-contained page (report.json is its twin).

Owns: the page: the overall verdict, the summary table, the side-by-side of the levels (the demo's
transaction.version levels, a bug's affected and fixed sides; when the suite ran at several), and per run the verification checks, anomaly examples, the timeline
picture (embedded, so the page travels alone), the alerts' detection latencies, the time each workload
took to recover from each fault, the faults and the steady-state probes.
Must not: compute anything report.json does not hold.
"""
from __future__ import annotations

import base64
import time
from html import escape
from pathlib import Path

from report.build import fault_line, recovery_rows, run_anchor
from spark_analysis.page import STYLE, badge, table, verdict_table

EXTRA_STYLE = """
.run{border-top:2px solid #d0d7de;margin-top:2rem;padding-top:.5rem}.muted{color:#57606a}
img.timeline{width:100%;max-width:1100px;border:1px solid #d0d7de}.cols{display:flex;gap:2rem;flex-wrap:wrap}
"""


def _when(unix: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix)) if unix else "-"


def _image(directory: Path, relative: str | None) -> str:
    path = directory / relative if relative else None
    if path is None or not path.exists():
        return '<p class="muted">no timeline picture</p>'
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img class="timeline" alt="timeline" src="data:image/png;base64,{data}">'


def _summary(report: dict) -> str:
    rows = [{**r, "verdict": badge(r["verdict"]), "recovered": _yes(r.get("recovered"))} for r in report["summary"]]
    return "<h2>Summary</h2>" + (verdict_table(rows) if rows else "")


def _yes(value: object) -> str:
    return "yes" if value is True else "no" if value is False else str(value or "-")


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value} s"


def _recovery(run: dict) -> str:
    """Per fault, how long each workload process took to commit again and each group's offsets to advance."""
    found = run["recovery"]
    rows = [{"fault": r["fault"], "healed at": "-" if r["heal_s"] is None else f"{r['heal_s']} s",
             "process / group": f"{r['kind']} {r['name']}",
             "moved again after heal": _seconds(r["after_heal_s"]) if r["heal_s"] is not None else "-",
             "after start": _seconds(r["after_start_s"]), "status": r["status"],
             "stalled call": r["stall"] or "-"} for r in recovery_rows(run)]
    bugs = {b["id"]: b["url"] for r in recovery_rows(run) for b in r["bugs"]}
    verdict = {True: "every workload and group moved again after every fault",
               False: "NOT recovered: after some fault a workload never committed again, or a group's offsets never "
                      f"advanced, before quiescence ({found['horizon_s']} s)"}.get(
        found["recovered"], "unknown: after some fault the history cannot show whether the workloads moved again")
    faults = "".join(f"<li>{escape(fault_line(f))}</li>" for f in found["faults"])
    return (f"<h3>Time to recover</h3><p class='muted'>{escape(verdict)} (a commit: a workload's committed "
            "transaction; a group: its committed offsets, sampled every ~2 s).</p>"
            + (f"<ul class='recovery'>{faults}</ul>" if faults else "<p class='muted'>no faults.</p>")
            + (table(rows) if rows else "")
            + ("<p>Stalled client calls match catalogued client bugs (docs/bugs.md): " + ", ".join(
                f"<a href='{escape(url)}'>{escape(bug_id)}</a>" for bug_id, url in sorted(bugs.items())) + "</p>"
               if bugs else ""))


def _side_by_side(report: dict) -> str:
    if not report["side_by_side"]:
        return ""
    levels = [str(v) for v in report["levels"]]
    metrics = [("verdict", "verdict"), ("anomalies_by_check", "anomalies by check"),
               ("attempts", "attempts ok/fail/info"), ("recovered", "recovered"), ("stalls", "stalls"),
               ("fenced_processes", "fenced processes"), ("max_lso_lag", "max LSO lag"),
               ("expected_alerts", "expected alerts"), ("other_alerts", "other alerts"),
               ("open_at_end", "partitions open at end"), ("steady", "steady state")]
    head = "<tr><th>experiment</th><th>measure</th>" + "".join(f"<th>{escape(v)}</th>" for v in levels) + "</tr>"
    body = ""
    for row in report["side_by_side"]:
        for i, (key, label) in enumerate(metrics):
            cells = ""
            for v in levels:
                cell = row["levels"].get(v, {})
                if "absent" in cell:          # one cell across the measures: why the experiment did not run here
                    cells += f"<td rowspan='{len(metrics)}' class='muted'>{escape(cell['absent'])}</td>" if i == 0 else ""
                    continue
                value = cell.get(key, "-")
                if key == "verdict":
                    link = f" <a href='#{escape(cell['anchor'])}'>run</a>" if cell.get("anchor") else ""
                    cells += f"<td>{badge(value)}{link}</td>"
                elif key == "attempts" and isinstance(value, dict):
                    cells += f"<td>{value.get('ok', 0)}/{value.get('fail', 0)}/{value.get('info', 0)}</td>"
                elif key == "anomalies_by_check" and isinstance(value, dict):
                    cells += f"<td>{escape(', '.join(f'{k} {n}' for k, n in value.items()) or 'none')}</td>"
                elif key == "stalls" and isinstance(value, list):
                    cells += f"<td>{escape('; '.join(value) or 'none')}</td>"
                else:
                    cells += f"<td>{escape(str(value))}</td>"
            first = f'<td rowspan="{len(metrics)}"><b>{escape(row["experiment"])}</b></td>' if i == 0 else ""
            body += f"<tr>{first}<td>{escape(label)}</td>{cells}</tr>"
    comparison = report["comparison"]
    return (f"<h2>{escape(comparison['title'])}</h2><p class='muted'>{escape(comparison['note'])}</p>"
            f"<table>{head}{body}</table>")


def _job_row(events: list[dict]) -> dict:
    """A Flink job's checkpoints and restarts in one row (build.job_events), the times in seconds of the run."""
    def at(kind: str) -> str:
        return ", ".join(f"{e['at_s']} s" + (f" ({e['detail']})" if e["detail"] else "")
                         for e in events if e["kind"] == kind) or "-"
    errors = list(dict.fromkeys(e["detail"] for e in events if e["kind"] == "error"))   # distinct, in order
    return {"checkpoints completed": sum(e["kind"] == "checkpoint-completed" for e in events),
            "failed": sum(e["kind"] == "checkpoint-failed" for e in events),
            "submitted": at("submitted"), "restarting": at("restarting"), "restored": at("restored"),
            "errors Flink logged": f"{len(errors)}: " + " | ".join(errors[:3]) if errors else "-"}


REFUSED_COMMIT = "Unable to commit transaction"   # Flink's KafkaCommitter: "... most likely signals data loss"


def _flink_commit_note(run: dict) -> str:
    """What verify says of Flink's refused commits: the line claims a likely loss, the topics tell."""
    refused = sum(1 for e in run.get("job_events", []) if e["kind"] == "error" and REFUSED_COMMIT in e["detail"])
    if not refused:
        return ""
    processing = run["verify"]["checks"].get("streams_processing", {})
    if run["verify"]["valid"] is True:
        said = ("verify found every input processed exactly once: no loss. Flink logs this also when a restored job "
                "commits again a transaction committed before its failure, on a cluster at transaction.version 2 "
                "(docs/findings.md)")
    elif processing.get("valid") is False:
        said = (f"verify counted {processing.get('count')} anomalies of processing "
                f"({processing.get('problems', {})}): the loss Flink warned of")
    elif processing.get("valid") is True:
        said = "verify found no input lost (the run's other anomalies are above)"
    else:
        said = "verify could not tell whether an input was lost (its evidence is incomplete: see the gaps above)"
    return (f"<p><b>Flink refused {refused} commit(s)</b> (\"{REFUSED_COMMIT} ... most likely signals data loss\"): "
            f"{escape(said)}.</p>")


def _groups_text(protocols: dict[str, list[str]]) -> str:
    """The run's groups and the protocols each ran on, in order (a migration: classic -> consumer -> classic)."""
    told = [f"{escape(group)} {escape(' -> '.join(types))}" for group, types in sorted(protocols.items()) if types]
    return f"; groups: {', '.join(told)}" if told else ""


def _run(run: dict, directory: Path) -> str:
    level = run["level"]
    title = f"{escape(run['experiment'])}" + (f" <span class='muted'>{escape(level)}</span>" if level else "")
    verify = run["verify"]
    parts = [f'<div class="run" id="{escape(run_anchor(run))}"><h2>{title} {badge(verify["valid"])}</h2>',
             f"<p class='muted'>run <code>{escape(run['run'])}</code>, started {_when(run['started'])}"
             + _groups_text(run.get("group_protocols") or {})
             + (f"; error: {escape(run['error'])}" if run["error"] else "") + "</p>"]
    if verify["gaps"]:
        items = "".join(f"<li>{escape(g)}</li>" for g in verify["gaps"])
        parts.append(f'<div class="gaps"><b>Evidence incomplete, so no check can be valid:</b><ul>{items}</ul></div>')
    checks = [{"check": name, "verdict": badge(c["valid"]), "anomalies": c["count"], "what it checks": c["description"]}
              for name, c in verify["checks"].items()]
    if checks:
        parts.append("<h3>Verification (Spark)</h3>" + verdict_table(checks))
    for bug in run.get("catalogued", []):
        parts.append(f"<p><b>Catalogued client bug:</b> these anomalies match <a href='{escape(bug['url'])}'>"
                     f"{escape(bug['id'])}</a> ({escape(bug['title'])}), a bug of the run's Java clients "
                     f"{escape(str(bug['java_clients']))} (docs/bugs.md).</p>")
    for bug in run.get("shown", []):
        items = "".join(f"<li>{escape(seen)}</li>" for seen in bug["occurrences"])
        parts.append(f"<p><b>Catalogued finding seen in the history:</b> <a href='{escape(bug['url'])}'>"
                     f"{escape(bug['id'])}</a> ({escape(bug['title'])}; docs/bugs.md):</p><ul>{items}</ul>")
    if run["anomalies"]:
        for a in run["anomalies"]:
            parts.append(f"<h3>{escape(a['check'])}: {a['count']} anomalies, first {len(a['examples'])}</h3>"
                         + table(a["examples"]))
    else:
        parts.append("<p><b>Anomaly examples:</b> none: no check found an anomaly.</p>")
    parts.append("<h3>Timeline</h3>" + _image(directory, run["timeline_image"]))
    detections = [{"fault": d["fault"], "alert": d["alert"], "expected": d["expected"], "rule holds for": d["rule_for"],
                   "pending after": "-" if d["first_pending_s"] is None else f"{d['first_pending_s']} s",
                   "firing after": "-" if d["first_firing_s"] is None else f"{d['first_firing_s']} s",
                   "cleared after": "-" if d.get("cleared_s") is None else f"{d['cleared_s']} s"}
                  for d in run["detections"]]
    parts.append("<h3>Alert detection latency</h3>" + (table(detections) if detections else
                 "<p class='muted'>no alert is expected for these faults and none went pending or firing.</p>"))
    parts.append(_recovery(run))
    if run.get("job_events"):
        parts.append("<h3>Flink job</h3>" + table([_job_row(run["job_events"])]) + _flink_commit_note(run))
    attempts = run["workload"]["attempts"]
    faults = [{"fault": f["label"], "from": f"{f['start_s']} s", "to": f"{f['end_s']} s"} for f in run["faults"]]
    probes = [{"phase": p["phase"], "probe": p["name"], "ok": p["ok"], "observed": p.get("observed")} for p in run["probes"]]
    parts.append('<div class="cols"><div><h3>Faults</h3>' + (table(faults) or "<p>none</p>") + "</div>"
                 "<div><h3>Workload</h3>" + table([{"committed": attempts.get("ok", 0), "aborted": attempts.get("fail", 0),
                                                   "unknown (info)": attempts.get("info", 0),
                                                   "fenced": ", ".join(run["workload"]["fenced_processes"]) or "-"}])
                 + "</div><div><h3>Steady-state probes</h3>" + (table(probes) or "<p>none</p>") + "</div></div></div>")
    return "".join(parts)


def render(report: dict, directory: Path) -> str:
    directory = Path(directory)
    levels = "; ".join(str(v) for v in report["levels"] if v is not None) or "as configured"
    head = [f"<h1>{escape(report.get('title') or 'txnlab report')} {badge(report['valid'])}</h1>",
            f"<p>Suite <code>{escape(report['suite'])}</code>: {len(report['runs'])} run(s) of "
            f"{escape(', '.join(report['experiments']))}; Kafka {escape(str(report.get('kafka_version') or '-'))}; "
            f"{escape(levels)}; {_when(report.get('started'))} to {_when(report.get('ended'))}."
            "</p>"]
    if report["errors"]:
        head.append('<div class="gaps"><b>Errors:</b><ul>' + "".join(f"<li>{escape(e)}</li>" for e in report["errors"])
                    + "</ul></div>")
    body = head + [_summary(report), _side_by_side(report)] + [_run(r, directory) for r in report["runs"]]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>txnlab report {escape(report['suite'])}</title>"
            f"<style>{STYLE}{EXTRA_STYLE}</style></head><body>{''.join(body)}</body></html>\n")
