"""report.json: one suite's (or one run's) report, built from what the runs stored, never from a live cluster.

Owns: reading a suite directory (suite.json + its runs) or a single run directory, and assembling per run
the experiment's outcome (probes, quiescence, faults as windows), the verification verdict and anomaly
examples exactly as `txnlab verify` wrote them (RUN/verify/report.json), the Prometheus timelines and
alerts the demo captured (RUN/prometheus.json), the alerts' detection latencies, the workloads' recovery
after each fault (chaos/record/recovery.py, from the history), and for suites run at several levels (the demo's
transaction.version levels, a bug's affected and fixed sides: suite.json `levels`, each run's `level`) the
side-by-side comparison. `write` puts report.json, the timeline
pictures and report.html in the suite directory.
Must not: run experiments, Spark or Prometheus queries: `txnlab report` must work on a stored run.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import yaml

from chaos.record.annotations import fault_windows
from chaos.record.history import read_history
from chaos.record import shapes, signatures
from chaos.record.ids import IdError, process_of
from chaos.record.recovery import recovery, restart_text, stall_text
from chaos.workloads.plans import option_value
from chaos.catalog.bugs import error_candidates, matching_anomaly_bugs, matching_bugs, shape_candidates
from chaos.workloads.native import CLIENT_OPTION, REFERENCE
from report import detection, series
from cluster.access.errors import TxnlabError

SUITE_FILE = "suite.json"
# The side-by-side section's heading and note when the suite does not bring its own (suite.json
# `comparison`): the demo's transaction.version levels.
COMPARISON = {
    "title": "transaction.version side by side (KIP-890)",
    "note": "The same experiments on clusters formatted at each level. Level 2 bumps the producer epoch at every "
            "transaction end (KIP-890 part 2), so a zombie's late writes are fenced by epoch; the drill cluster runs "
            "with partition verification off at both levels (that is what lets a transaction be injected at all), "
            "so the drill shows what the exporter and the alerts see when one hangs."}
EXAMPLES = 5
ATTEMPT_F = ("txn", "process")      # history f of a transaction attempt (chaos/workloads/confluent/transactional.py)


RULES_FILE = Path(__file__).resolve().parent.parent / "dashboards" / "alerts" / "txnlab.rules.yml"


def rule_holds() -> dict[str, str]:
    """How long each alert's condition must hold before it fires (`for`), from the rules Prometheus loads."""
    try:
        groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return {}
    return {r["alert"]: r.get("for", "0s") for g in groups for r in g["rules"] if "alert" in r}


class ReportError(TxnlabError, RuntimeError):
    """The directory holds no suite or run to report on."""


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def suite_of(directory: Path) -> dict:
    """suite.json, or a one-run suite for a plain run directory."""
    directory = Path(directory)
    suite = _json(directory / SUITE_FILE)
    if suite is not None:
        return with_levels(suite)
    if (directory / "history").is_dir():
        spec = _json(directory / "spec.json") or {}
        return {"id": directory.name, "levels": [None], "single_run": True,
                "runs": [{"experiment": spec.get("name", directory.name), "level": None, "run_dir": "."}]}
    raise ReportError(f"{directory} is neither a suite (no {SUITE_FILE}) nor a run directory (no history/)")


def tv_level(tv: int) -> str:
    """The demo's level name for a transaction.version."""
    return f"transaction.version={tv}"


def with_levels(suite: dict) -> dict:
    """A suite with `levels` and each run's `level`; a suite stored before levels had only the demo's
    transaction.version ones (`transaction_versions`, each run's `transaction_version`)."""
    if "levels" in suite:
        return suite
    return {**suite, "levels": [tv_level(v) for v in suite.get("transaction_versions", [])] or [None],
            "runs": [{**r, "level": tv_level(r["transaction_version"]) if r.get("transaction_version") else None}
                     for r in suite.get("runs", [])]}


def verdict_of(run_dir: Path) -> dict:
    """The verification as `txnlab verify` left it; "unknown" (with why) when it never ran or crashed."""
    found = _json(run_dir / "verify" / "report.json")
    if found is None:
        return {"valid": "unknown", "checks": {}, "gaps": ["not verified: no verify/report.json (the verification "
                                                           "did not run or did not finish)"], "counts": {}}
    checks = {name: {"valid": c["valid"], "count": c["count"], "description": c.get("description", ""),
                     **({"problems": c["problems"]} if c.get("problems") else {})}
              for name, c in found["checks"].items()}
    return {"valid": found["valid"], "checks": checks, "gaps": found["evidence"]["gaps"], "counts": found["counts"],
            "seconds": found.get("seconds"), "info_attempts": found.get("info_attempts")}


def anomalies_of(run_dir: Path) -> list[dict]:
    found = _json(run_dir / "verify" / "report.json") or {"checks": {}}
    return [{"check": name, "count": c["count"], "examples": c["examples"][:EXAMPLES]}
            for name, c in found["checks"].items() if c.get("count") and c.get("examples")]


def _windows(run_dir: Path, zero: float, tag: str | None) -> list[dict]:
    return [{"kind": w.kind, "label": w.label.replace("{tag}", tag or "{tag}"), "process": w.process, "start": w.start, "end": w.end,
             "start_s": round(w.start - zero, 1), "end_s": round(w.end - zero, 1)} for w in fault_windows(run_dir)]


def _workload(ops: list[dict]) -> dict:
    """Transaction attempts by outcome and fenced instances, from the history."""
    outcomes: dict[str, int] = {"ok": 0, "fail": 0, "info": 0}
    fenced = set()
    for op in ops:
        if op["process"].startswith("nemesis") or op["type"] == "invoke":
            continue
        value = op.get("value") or {}
        if isinstance(value, dict) and value.get("attempt") is not None and op["f"] in ATTEMPT_F:
            outcomes[op["type"]] = outcomes.get(op["type"], 0) + 1
        if isinstance(value, dict) and value.get("fenced"):
            fenced.add(op["process"])
    return {"attempts": outcomes, "fenced_processes": sorted(fenced)}


def job_events(ops: list[dict], zero: float) -> list[dict]:
    """What a Flink job did (chaos/workloads/flink.py), for the timeline and the run's page: each checkpoint at its
    trigger time (completed or failed), the job's restarts, its restores and submissions, the errors its
    JobManager and TaskManagers logged; seconds since the run's start."""
    out = []
    for op in ops:
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        if op["f"] == "flink-submit" and op["type"] == "ok":
            out.append({"kind": "submitted", "at_s": round(op["wall"] - zero, 1),
                        "detail": "from a checkpoint" if value.get("from_checkpoint") else "from the group's offsets"})
        if op["f"] != "flink" or op["type"] != "ok":
            continue
        event = value.get("event")
        if event == "checkpoint" and value.get("trigger_ms"):
            out.append({"kind": f"checkpoint-{str(value.get('status')).lower()}",
                        "at_s": round(value["trigger_ms"] / 1000 - zero, 1), "detail": f"#{value.get('checkpoint')}"})
        elif event == "state" and value.get("to") in ("RESTARTING", "FAILED", "RUNNING"):
            out.append({"kind": str(value["to"]).lower(), "at_s": round(op["wall"] - zero, 1), "detail": ""})
        elif event == "restored":
            out.append({"kind": "restored", "at_s": round(op["wall"] - zero, 1),
                        "detail": f"checkpoint #{value.get('checkpoint')}"})
        elif event == "log":              # an ERROR of a JobManager's or TaskManager's console, as Flink worded it
            line = str(value.get("line", ""))
            out.append({"kind": "error", "at_s": round(op["wall"] - zero, 1),
                        "detail": f"{op['process']}: {line.split(' - ', 1)[-1][:400]}"})
    return sorted(out, key=lambda e: e["at_s"])


def run_report(run_dir: Path, experiment: str, level: str | None, image: str | None,
               expected_alerts: tuple[str, ...] = ()) -> dict:
    """expected_alerts: alerts this run is meant to raise during every fault besides those of the fault's kind
    (report/detection.py EXPECTED), e.g. a bug's affected side."""
    run_dir = Path(run_dir)
    outcome = _json(run_dir / "experiment.json") or {}
    expected_alerts = (*expected_alerts, *(a for a in outcome.get("alerts", []) if a not in expected_alerts))
    spec = _json(run_dir / "spec.json") or {}
    ops = read_history(run_dir).ops
    zero = spec.get("started_wall") or min((op["wall"] for op in ops), default=0.0)
    windows = _windows(run_dir, zero, spec.get("run_tag"))
    captured = series.load(run_dir)
    probes = [{**p, "phase": phase} for phase in ("before", "after") for p in outcome.get(f"probes_{phase}", [])]
    timelines = {}
    workloads = {s.get("workload") for s in spec.get("specs", [])}
    for t in series.TIMELINES:
        if t.workload is not None and t.workload not in workloads:
            continue
        got = (captured or {}).get("timelines", {}).get(t.key)
        timelines[t.key] = {"title": t.title, "unit": t.unit, "query": got["query"] if got else None,
                            "series": got["series"] if got else [],
                            "error": (captured or {}).get("errors", {}).get(t.key, None if captured else
                                                                              "no prometheus.json in the run")}
    alerts = (captured or {}).get("alerts", [])
    holds = rule_holds()
    verified = verdict_of(run_dir)
    return {
        "experiment": experiment, "level": level, "run_dir": str(run_dir),
        "run": run_dir.name, "tag": spec.get("run_tag"), "started": zero,
        "window": {"start": (captured or {}).get("start", zero), "end": (captured or {}).get("end")},
        "steady": bool(outcome) and not outcome.get("error") and all(p["ok"] for p in probes),
        "error": outcome.get("error"), "probes": probes, "quiescence": outcome.get("quiescence", {}),
        "faults": windows, "workload": _workload(ops), "recovery": recovery(ops),
        "group_protocols": (_json(run_dir / "cluster.json") or {}).get("group_protocols") or {},
        "verify": verified, "anomalies": anomalies_of(run_dir), "catalogued": anomaly_bugs(run_dir, verified),
        "shown": shape_bugs(run_dir),
        "timelines": timelines, "job_events": job_events(ops, zero),
        "alerts": [vars(a) for a in detection.alert_spans(alerts)],
        "detections": [{**row, "rule_for": holds.get(row["alert"])}
                       for row in detection.as_rows(detection.detections(windows, alerts, expected_alerts,
                                                                             (captured or {}).get("end")))],
        "timeline_image": image,
    }


def overall(values: list) -> bool | str:
    if values and all(v is True for v in values):
        return True
    return False if any(v is False for v in values) else "unknown"


def _latency(d: dict) -> str:
    cleared = f", cleared +{d['cleared_s']:.0f}s" if d.get("cleared_s") is not None else ""
    if d["first_firing_s"] is not None:
        return f"{d['alert']} firing +{d['first_firing_s']:.0f}s{cleared}"
    if d["first_pending_s"] is not None:
        return f"{d['alert']} pending +{d['first_pending_s']:.0f}s{cleared}"
    hold = d.get("rule_for")
    return f"{d['alert']} not raised" + (f" (must hold {hold})" if hold and hold != "0s" else "")


def expected_alerts(run: dict) -> str:
    """The alerts its faults are meant to raise, with their latency (the first one per alert)."""
    seen: dict[str, str] = {}
    for d in run["detections"]:
        if d["expected"] and (d["alert"] not in seen or seen[d["alert"]].endswith("not raised")):
            seen[d["alert"]] = _latency(d)
    return "; ".join(seen.values()) or "none expected"


def other_alerts(run: dict) -> str:
    return ", ".join(sorted({d["alert"] for d in run["detections"] if not d["expected"] and d["detected"]})) or "-"


def anomaly_bugs(run_dir: Path, verified: dict) -> list[dict]:
    """The catalogued client bugs (chaos/bugs/) a run's anomalies match on the release of its Java clients
    (cluster.json's java_clients, else its kafka_version: the workloads ran the cluster's release), on the
    clients its workloads ran on, on the settings they ran with, or on its cluster (a broker's bug), a bug with
    a history signature only where the run's history shows it and explains every example its candidates share
    (chaos/record/signatures.py): [{id, url, title, java_clients}]."""
    cluster = _json(run_dir / "cluster.json") or {}
    release = cluster.get("java_clients") or cluster.get("kafka_version")
    reference = {REFERENCE_CLIENT} if REFERENCE in anomaly_clients(run_dir) else set()
    bugs = matching_anomaly_bugs(release, *anomaly_counts(verified), clients=run_clients(run_dir) | reference,
                                 args=run_args(run_dir), cluster=cluster)
    told = [bug.expect.history for bug in bugs if bug.expect.history]
    shown = signatures.shown_in(run_dir, tuple(told)) if told else signatures.Explained({}, [])
    named = not isinstance(shown, str) and not shown.unexplained
    return [{"id": bug.id, "url": bug.url, "title": bug.title, "java_clients": release} for bug in bugs
            if not bug.expect.history or named and shown.counts[bug.expect.history]]


def shape_bugs(run_dir: Path) -> list[dict]:
    """The catalogued findings that show in a run's history, not as anomalies (exactly-once may hold): the bug's
    affected client is one the run's workloads ran on (or, a broker's bug, the run's cluster is its affected side) and
    one of its history shapes (chaos/record/shapes.py) occurred, or the run is on one of its affected sides and a workload recorded one of its errors (`expect.errors`,
    shapes.errors_seen): [{id, url, title, occurrences}] (none when the history cannot say: the page's other sections
    say why)."""
    reference = {REFERENCE_CLIENT} if REFERENCE in process_clients(run_dir).values() else set()
    cluster = _json(run_dir / "cluster.json") or {}
    bugs = shape_candidates(run_clients(run_dir) | reference, cluster)
    found = shapes.shapes_in(run_dir, tuple({name for bug in bugs for name in bug.expect.shapes})) if bugs else {}
    shown = [] if isinstance(found, str) else [
        {"id": bug.id, "url": bug.url, "title": bug.title,
         "occurrences": [seen for name in bug.expect.shapes for seen in found[name]],
         "shapes": [name for name in bug.expect.shapes if found[name]]}
        for bug in bugs if any(found[name] for name in bug.expect.shapes)]
    erring = error_candidates(run_clients(run_dir) | reference, cluster)
    clients = process_clients(run_dir)
    for bug in erring:
        mine = None if not bug.expect.error_clients else \
            frozenset(p for p, client in clients.items() if client in bug.expect.error_clients)
        seen = shapes.errors_seen(run_dir, tuple(bug.expect.errors), mine)
        if seen:
            shown.append({"id": bug.id, "url": bug.url, "title": bug.title,
                          "occurrences": [f"{seen[name]['count']} operation{'s' * (seen[name]['count'] != 1)} recorded "
                                          f"{name} (the first: {seen[name]['first_process']} at "
                                          f"{seen[name]['first_s']:g} s)" for name in bug.expect.errors if name in seen]})
    return shown


def run_args(run_dir: Path) -> tuple[tuple[str, ...], ...]:
    """Each of a run's workload processes' arguments (spec.json)."""
    return tuple(tuple(s.get("args", [])) for s in (_json(run_dir / "spec.json") or {}).get("specs", []))


FRAMEWORK_CLIENTS = {"streams": "java", "java-copier": "java", "flink": "flink"}   # the JVM workloads' clients
REFERENCE_CLIENT = "confluent-kafka"      # the reference workloads' client, as the bug files name it


def process_clients(run_dir: Path) -> dict[str, str]:
    """Each workload process of a run and the Kafka client it ran on: its --client, else java for Kafka Streams and
    the Java copier (Kafka's Java clients), flink for Flink's, the reference's for every other workload."""
    specs = (_json(run_dir / "spec.json") or {}).get("specs", [])
    return {s["process"]: (option_value(s.get("args", []), CLIENT_OPTION) if CLIENT_OPTION in s.get("args", [])
                           else FRAMEWORK_CLIENTS.get(s["workload"], REFERENCE))
            for s in specs if "process" in s}


def run_clients(run_dir: Path) -> frozenset[str]:
    """The Kafka clients besides the reference a run's workload processes ran on (their --client)."""
    specs = (_json(run_dir / "spec.json") or {}).get("specs", [])
    return frozenset(option_value(s.get("args", []), CLIENT_OPTION) for s in specs
                     if CLIENT_OPTION in s.get("args", []))


def anomaly_clients(run_dir: Path) -> set[str]:
    """The clients of the processes whose records or transactions the run's anomaly examples name (an example's
    `attempt` or `id`: <run tag>.<process>.<transaction>[.<record>]): a reference client's bug is named on a run
    only by anomalies of the reference's own processes, never by another client's beside its observers."""
    clients, found = process_clients(run_dir), set()
    for anomaly in anomalies_of(run_dir):
        for example in (e for e in anomaly["examples"] if isinstance(e, dict)):
            try:
                found.add(clients.get(process_of(str(example.get("id") or example.get("attempt")))))
            except IdError:                        # an example naming no txnlab record (a foreign one, a count)
                continue
    return found - {None}


def anomaly_counts(verified: dict) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """A verdict_of's anomalies per check and, where verify counted them, per problem of a check."""
    checks = verified["checks"]
    return ({name: c["count"] for name, c in checks.items() if c.get("count")},
            {name: c["problems"] for name, c in checks.items() if c.get("problems")})


def stall_bugs(stall: dict) -> list[dict]:
    """The catalogued client bugs (chaos/bugs/) a stall matches: [{id, url}]."""
    return [{"id": bug.id, "url": bug.url} for bug in matching_bugs(stall)]


def stall_line(stall: dict) -> str:
    """'eos-1: send_offsets_to_transaction stalled (librdkafka 2.16.0), restarted at 37.4 s; catalogued as
    librdkafka-5456'."""
    bugs = ", ".join(b["id"] for b in stall_bugs(stall))
    return f"{stall_text(stall)} at {stall['at_s']} s, {restart_text(stall)}" + (f"; catalogued as {bugs}" if bugs else "")


def recovered_cell(run: dict) -> bool | str:
    """The summary's recovered column: True / False / "unknown", or "after a restart (...)" when a workload
    recovered only because the runner restarted it after a stall (the stalled calls and the bugs they match)."""
    found = run["recovery"]
    stalls = [st for f in found.get("faults", []) for st in f.get("stalls", [])]
    if found["recovered"] is not True or not any(f.get("restarted") for f in found.get("faults", [])):
        return found["recovered"]
    named = sorted({f"{st['process']}: {st['call']} stalled" + (
        f", {', '.join(b['id'] for b in stall_bugs(st))}" if stall_bugs(st) else "") for st in stalls})
    return f"after a restart ({'; '.join(named)})"


def summary_rows(runs: list[dict]) -> list[dict]:
    return [{"experiment": r["experiment"], "level": r["level"] or "-",
             "verdict": r["verify"]["valid"], "anomalies": sum(a["count"] for a in r["anomalies"]),
             "commit/abort/info": "/".join(str(r["workload"]["attempts"].get(k, 0)) for k in ("ok", "fail", "info")),
             "expected alerts": expected_alerts(r), "other alerts": other_alerts(r), "steady": r["steady"],
             "recovered": recovered_cell(r)}
            for r in runs]


def fault_name(f: dict) -> str:
    return f"{f['kind']} at {f['start_s']} s" + ("" if f["heal_ok"] is not False else " (heal failed)")


def fault_line(f: dict) -> str:
    """One fault's time to recover in a line (chaos run's stderr, the report page): the slowest workload's
    commit and the slowest group's advance after the heal (and after the start), or not recovered / unknown
    with why."""
    head = fault_name(f) + ("" if f["heal_s"] is None else f", healed at {f['heal_s']} s")
    stalls = "".join(f"; stall: {stall_line(st)}" for st in f.get("stalls") or [])
    if f["recovered"] is not True:
        why = "; ".join(f.get("why") or [])
        return f"{head}: {'not recovered' if f['recovered'] is False else 'unknown'}" + (f" ({why})" if why else "") \
            + stalls + zombie_text(f)
    moved = [f"{what} {f[f'seconds_to_{key}_after_heal']} s after heal ({f[f'seconds_to_{key}_after_start']} s "
             "after start)" for key, what in (("commit", "commits again"), ("advance", "group offsets advance"))
             if f.get(f"seconds_to_{key}_after_heal") is not None]
    restarted = f"recovered after a restart of {', '.join(f['restarted'])}, " if f.get("restarted") else ""
    return f"{head}: {restarted}" + (", ".join(moved) or "recovered (its workloads ended)") + stalls + zombie_text(f)


def zombie_text(f: dict) -> str:
    """A zombie that came back after the fault fenced it (recovery's zombie_returned), in a clause."""
    back = f.get("zombie_returned")
    if not back:
        return ""
    how = (f"a new producer made at {back['initialised_s']} s after a fatal error" if back.get("initialised_s") is not None
           else "its client re-initialised by itself")
    return (f"; the fenced zombie {back['process']} came back ({how}): it committed again at {back['first_commit_s']} s "
            f"({back['commits']} transaction(s) by quiescence)")


def recovery_rows(run: dict) -> list[dict]:
    """Per fault, per workload process and consumer group: seconds until it moved again (null: never did)."""
    rows = []
    for f in run["recovery"]["faults"]:
        fault = fault_name(f)
        for kind, key, entries in (("process", "commit", f["processes"]), ("group", "advance", f["groups"])):
            for name, e in entries.items():
                stalled = [st for st in f.get("stalls") or [] if st["process"] == name]
                status = "recovered after a restart" if e.get("restarted_s") is not None else e["status"]
                rows.append({"fault": fault, "heal_s": f["heal_s"], "kind": kind, "name": name,
                             "after_start_s": e[f"seconds_to_{key}_after_start"],
                             "after_heal_s": e[f"seconds_to_{key}_after_heal"], "status": status,
                             "stall": "; ".join(stall_line(st) for st in stalled),
                             "bugs": [b for st in stalled for b in stall_bugs(st)]})
    return rows


def side_by_side(runs: list[dict], levels: list, absent: list[dict] = ()) -> list[dict]:
    """Per experiment, what each level showed (only when the suite ran at several); a level where the experiment
    did not run says why (`absent`: suite entries without a run: not applicable, or failed before it began)."""
    if len([v for v in levels if v is not None]) < 2:
        return []
    rows = []
    for name in dict.fromkeys([*(r["experiment"] for r in runs), *(e["experiment"] for e in absent)]):
        by = {}
        for r in (r for r in runs if r["experiment"] == name):
            lag = [p[1] for s in r["timelines"]["lso_lag"]["series"] for p in s["points"]]
            stalls = [st for f in r["recovery"].get("faults", []) for st in f.get("stalls") or []]
            by[str(r["level"])] = {
                "verdict": r["verify"]["valid"], "anomalies": sum(a["count"] for a in r["anomalies"]),
                "anomalies_by_check": {a["check"]: a["count"] for a in r["anomalies"]},
                "attempts": r["workload"]["attempts"], "fenced_processes": len(r["workload"]["fenced_processes"]),
                "max_lso_lag": max(lag) if lag else None, "expected_alerts": expected_alerts(r),
                "other_alerts": other_alerts(r), "recovered": recovered_cell(r),
                "stalls": [f"{st['process']}: {st['call']}" for st in stalls],
                "open_at_end": len(r["quiescence"].get("open_partitions", [])), "steady": r["steady"],
                "anchor": run_anchor(r)}
        for e in (e for e in absent if e["experiment"] == name):
            by[str(e["level"])] = {"absent": e.get("not_applicable") or f"did not run: {e.get('error')}"}
        rows.append({"experiment": name, "levels": by})
    return rows


def run_anchor(run: dict) -> str:
    """The id of a run's section on the page."""
    return _slug(f"run-{run['level'] or 'run'}-{run['experiment']}")


def build(directory: Path) -> dict:
    directory = Path(directory)
    suite = suite_of(directory)
    runs, absent = [], []
    for entry in suite["runs"]:
        if not entry.get("run_dir"):        # not applicable to its level, or failed before its run began
            absent.append(entry)
            continue
        run_dir = (directory / entry["run_dir"]).resolve()
        level = entry.get("level")
        image = f"img/{_slug(level) if level else 'run'}-{_slug(entry['experiment'])}.png"
        runs.append(run_report(run_dir, entry["experiment"], level, image, tuple(entry.get("expected_alerts", ()))))
    levels = suite.get("levels", [None])
    return {"suite": suite.get("id", directory.name), "directory": str(directory), "built": time.time(),
            "started": suite.get("started"), "ended": suite.get("ended"), "kafka_version": suite.get("kafka_version"),
            "title": suite.get("title"), "levels": levels, "comparison": suite.get("comparison") or COMPARISON,
            "experiments": suite.get("experiments", [r["experiment"] for r in runs]),
            "errors": suite.get("errors", []),
            "valid": overall([r["verify"]["valid"] for r in runs]), "summary": summary_rows(runs),
            "side_by_side": side_by_side(runs, levels, absent), "runs": runs}


def _slug(text: str) -> str:
    """A file-name-safe form of a level or experiment name."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-") or "run"


def write(directory: Path) -> dict:
    """report.json, img/*.png and report.html in the directory; returns the report."""
    from report import html, plots                  # matplotlib only when pictures are drawn
    directory = Path(directory)
    report = build(directory)
    for run in report["runs"]:
        plots.save_timeline(run, directory / run["timeline_image"])
    (directory / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    (directory / "report.html").write_text(html.render(report, directory))
    return report
