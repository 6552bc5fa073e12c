"""`txnlab bugs export ID --suite DIR`: a catalogued bug as one self-contained folder (and its tarball) for the
maintainers of the client or of Kafka, who have neither txnlab nor its clusters.

Owns: choosing from a judged bug suite (a `txnlab bugs run` or campaign suite, or a corpus suite) one affected try
that showed the bug and one fixed try that stayed clean; copying both runs whole (history, archive of both views,
verification report, spec, cluster facts, logs when the run kept them) and rendering each run's page with its
timeline from them (report/build.py, no cluster); the README written from the bug's `upstream` section
(chaos/bugs/<id>.yaml: the maintainers' terms, the cause in their source) with every number taken from the runs in
the bundle (the suite's tallies, the tries' occurrences, counts and examples, history lines, log lines); the
standalone reproduction (chaos/bugs/repro/<id>/) when there is one.
Must not: reach a cluster, or say anything about a try that is not in the bundle.
"""
from __future__ import annotations

import json
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from chaos.catalog.bugs import BUG_SIDES, BUGS_DIR, BugSpec, load_bug
from chaos.record.history import read_history
from chaos.record.ids import IdError, attempt_of, process_of
from chaos.record.shapes import committed_transactions
from cluster.access.errors import TxnlabError
from cluster.access.progress import Progress

REPRO_DIR = BUGS_DIR / "repro"
SKIPPED = ("pids",)                       # what a run directory keeps that means nothing elsewhere
EXAMPLES = 5


class ExportError(TxnlabError):
    pass


@dataclass
class Chosen:
    side: str
    run: dict               # the try as the suite judged it (bug.json)
    source: Path            # its run directory in the suite


def chosen_tries(suite: Path, judged: dict) -> tuple[Chosen, Chosen]:
    """The first affected try that showed the bug and the first fixed try that stayed clean."""
    picked = []
    for side, wanted in zip(BUG_SIDES, ("reproduced", "clean")):
        runs = [r for r in judged["sides"][side]["runs"] if r.get(wanted)]
        if not runs:
            raise ExportError(f"{suite}: no {side} try is {wanted}: nothing to show a maintainer (run `txnlab bugs "
                              f"run {judged['bug']} --tries N` for a suite that has one)")
        picked.append(Chosen(side, runs[0], suite / side / Path(runs[0]["run_dir"]).name))
    for chosen in picked:
        if not (chosen.source / "history").is_dir():
            raise ExportError(f"{chosen.source}: the {chosen.side} try's run directory is not in the suite")
        if not any((chosen.source / name).exists() for name in ("verify/report.json", "live-report.json")):
            raise ExportError(f"{chosen.source}: the {chosen.side} try has no verification report: nothing to quote")
    return picked[0], picked[1]


def copy_run(source: Path, target: Path) -> Path:
    """The run whole but for its pid records; the verification as it was made live at verify/report.json (a corpus
    run keeps it as live-report.json)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*SKIPPED))
    live = target / "live-report.json"
    if not (target / "verify" / "report.json").exists() and live.exists():
        (target / "verify").mkdir(exist_ok=True)
        shutil.move(live, target / "verify" / "report.json")
    return target


def attempt_ops(ops: list[dict], attempt: str) -> list[dict]:
    """A history's operations of one transaction attempt (its invoke and its completion), as recorded."""
    return [op for op in ops if op["f"] == "txn" and op["value"].get("attempt") == attempt]


def transaction_account(ops: list[dict], attempt: str) -> list[str]:
    """One transaction told as its maintainers would read it, from a run's history (`ops`): when it began (seconds
    since the run's start), what it wrote where, and how it ended (committed with the offsets the client reported,
    failed with the client's error, or aborted on purpose)."""
    mine = attempt_ops(ops, attempt)
    if not mine:
        return [f"(transaction {attempt} is not in this run's history)"]
    lines = [f"producer {mine[0]['process']}, transactional.id {mine[0]['value'].get('txn_id')}, transaction {attempt}:"]
    for op in mine:
        v, at = op["value"], f"{op['time'] / 1e9:9.3f} s"
        writes = v.get("writes") or []
        if op["type"] == "invoke":
            lines.append(f"{at}  begins, {len(writes)} records: "
                         + ", ".join(f"{w['id']} to {w['topic']}-{w['partition']}" for w in writes))
        elif op["type"] == "ok":
            reported = "" if v.get("offsets") is None else ", the client reported: " + ", ".join(
                f"{w['id']} at {w['topic']}-{w['partition']} offset {o}" for w, o in zip(writes, v["offsets"]))
            lines.append(f"{at}  {'aborted on purpose' if v.get('abort') else 'committed'}{reported}")
        else:
            lines.append(f"{at}  {'failed' if op['type'] == 'fail' else 'outcome unknown'}: {v.get('error', '')}")
    return lines


def log_lines(run_dir: Path, patterns: list[str], limit: int = 8, within: tuple[str, list[str]] | None = None) -> list[str]:
    """The client's log lines that match the bug's patterns, when the run kept its logs. `within` (a process and the
    names a client gives the anomaly's partition): only that process's log, only lines naming the partition, from
    the first that matches the first pattern on (what the client did there, in order)."""
    found: list[str] = []
    if not patterns or not (run_dir / "logs").is_dir():
        return found
    rx, first = re.compile("|".join(patterns)), re.compile(patterns[0])
    logs = sorted((run_dir / "logs").rglob("*.log"))
    if within is not None:
        logs = [log for log in logs if log.stem == within[0]]
    for log in logs:
        started = within is None
        with log.open(errors="replace") as f:
            for line in f:
                if within is not None and not any(name in line for name in within[1]):
                    continue
                started = started or bool(first.search(line))
                if started and rx.search(line):
                    found.append(f"{log.name}: {line.rstrip()}")
                    if len(found) >= limit:
                        return found
    return found


def lost_partition(run_dir: Path) -> tuple[str, list[str]] | None:
    """The first lost write's producer process and its partition as clients name it in their logs (librdkafka
    `topic [p]`, Kafka's `topic-p`), from the run's verification; None without one."""
    report = json.loads((run_dir / "verify" / "report.json").read_text())
    for e in (report.get("checks", {}).get("lost_write") or {}).get("examples") or []:
        try:
            process = process_of(str(e.get("id") or e.get("attempt")))
        except IdError:
            continue
        if e.get("topic") is not None:
            return process, [f"{e['topic']} [{e['partition']}]", f"{e['topic']}-{e['partition']}"]
    return None


SHAPE_LINE = re.compile(r"transaction (?P<attempt>\S+) took (?P<took>[\d.]+) s")


def transaction_seconds(run_dir: Path) -> list[float]:
    """How long each committed transaction took, invoke to ok, from the run's history."""
    return [(ok["time"] - began["time"]) / 1e9 for began, ok in committed_transactions(read_history(run_dir).ops)]


HEADINGS = {"lost_write": "Committed records that a read_committed consumer does not read",
            "duplicate": "Records a read_committed consumer reads more than once",
            "inconsistent_offsets": "Acknowledged offsets that hold another record",
            "torn_transaction": "Transactions only partly readable",
            "aborted_read": "Records of aborted transactions read by a read_committed consumer",
            "exactly_once_processing": "Inputs with other than one committed output, or offsets committed past them"}


def said(check: str, e: dict) -> str:
    """One example of a check's finding in the client's users' terms (chaos/record/ids.py: a record's value carries
    its id, <run>.<producer>.<transaction>.<record>, and its transaction's)."""
    where = f"{e.get('topic')}-{e.get('partition')}"
    if check == "duplicate":
        at = ", ".join(f"{p['topic']}-{p['partition']} offset {p['offset']}" for p in e.get("positions", []))
        return f"record {e['id']} (transaction {e.get('attempt')}) is read {e.get('copies')} times: {at}"
    if check == "lost_write":
        return f"record {e['id']} of the committed transaction {e.get('attempt')} is not readable in {where}"
    if check == "inconsistent_offsets":
        return (f"the producer was told record {e['id']} is at {where} offset {e.get('offset')}; that offset holds "
                f"record {e.get('other_id')}")
    if check == "exactly_once_processing" and e.get("outputs"):
        return (f"input {e.get('input')} of group {e.get('group')} has {len(e['outputs'])} committed outputs "
                f"({e.get('problem')}): {', '.join(e['outputs'])}")
    if check == "torn_transaction":
        return (f"transaction {e.get('attempt')} ({e.get('outcome')}) wrote {e.get('expected')} records; "
                f"{e.get('visible')} are readable")
    return json.dumps(e, sort_keys=True)


def records_at(run_dir: Path, places: set[tuple[str, int, int]]) -> list[str]:
    """What each view of the archive holds at these offsets (both isolation levels, read to the run's end)."""
    import pyarrow.parquet as pq
    found = []
    for view, level in (("committed", "read_committed"), ("uncommitted", "read_uncommitted")):
        for row in pq.read_table(run_dir / "archive" / f"{view}.parquet",
                                 columns=["topic", "partition", "offset", "value"]).to_pylist():
            if (row["topic"], row["partition"], row["offset"]) in places:
                value = (row["value"] or b"").decode(errors="replace")
                found.append(f"{level} {row['topic']}-{row['partition']} offset {row['offset']}: {value}")
    return sorted(found, key=lambda line: (line.split(" ", 2)[1:], line))


def checks_evidence(bug: BugSpec, run_dir: Path) -> list[str]:
    """The bug's checks first, then any other the try failed: each example said plainly, the records the views hold
    at the offsets involved, each transaction involved told from the history (its records, the offsets reported or
    the client's error)."""
    report = json.loads((run_dir / "verify" / "report.json").read_text())
    failed = {n: c for n, c in report.get("checks", {}).items() if c.get("count")}
    expected = [c.split(":", 1)[0] for c in bug.expect.checks]      # a check, or a check:problem
    order = [n for n in expected if n in failed] + sorted(set(failed) - set(expected))
    out, places, attempts = [], set(), []
    for name in order:
        check = failed[name]
        mine = "the symptom" if name in expected else "seen beside it"
        out += ["", f"{HEADINGS.get(name, check.get('description', name))} ({mine}): {check['count']}", ""]
        for e in (check.get("examples") or [])[:EXAMPLES]:
            out.append(f"- {said(name, e)}")
            for p in e.get("positions", []):
                places.add((p["topic"], p["partition"], p["offset"]))
            if e.get("offset") is not None and e.get("topic"):
                places.add((e["topic"], e["partition"], e["offset"]))
            for rid in filter(None, (e.get("id"), e.get("other_id"), *(e.get("outputs") or []))):
                try:
                    attempt = attempt_of(rid)
                except IdError:                 # a record of no txnlab transaction: no history lines to show
                    continue
                if attempt not in attempts:
                    attempts.append(attempt)
    if places:
        out += ["", "What each view holds at those offsets (the run's archive):", "", "```",
                *records_at(run_dir, places), "```"]
    ops = read_history(run_dir).ops if attempts else []
    for attempt in attempts[:4]:
        out += ["", f"Transaction {attempt} as the run recorded it:", "", "```", *transaction_account(ops, attempt),
                "```"]
    return out


def side_facts(run_dir: Path) -> dict:
    cluster = json.loads((run_dir / "cluster.json").read_text())
    spec = json.loads((run_dir / "spec.json").read_text())
    return {"kafka": cluster.get("kafka_version"), "features": cluster.get("features") or {},
            "broker_config": cluster.get("broker_config") or {}, "brokers": len(cluster.get("brokers") or []),
            "versions": cluster.get("versions") or {}, "workloads": spec.get("specs") or [],
            "duration_s": (spec.get("params") or {}).get("duration_s")}


def evidence_section(bug: BugSpec, affected: Chosen, fixed: Chosen, a_dir: Path, f_dir: Path) -> list[str]:
    """What the affected try showed and the fixed try did not, each figure read from the bundled runs."""
    out = []
    shapes = affected.run.get("shapes") or {}
    for shape, lines in shapes.items():
        waits = [(m["attempt"], float(m["took"])) for m in map(SHAPE_LINE.search, lines) if m]
        if not waits:                   # a shape of another kind (a zombie come back, a producer stuck): its lines
            out += [f"In the affected try, the history shows {shape}:", "", *(f"- {line}" for line in lines), ""]
            continue
        out += [f"In the affected try, {len(lines)} transactions took {min(t for _, t in waits):.2f} s to "
                f"{max(t for _, t in waits):.2f} s with no fault active ({shape}):", ""]
        out += [f"- {line}" for line in lines]
        fixed_took = transaction_seconds(f_dir)
        if fixed_took:
            out += ["", f"In the fixed try, the longest of its {len(fixed_took)} committed transactions took "
                        f"{max(fixed_took):.2f} s."]
        slowest = max(waits, key=lambda w: w[1])[0]
        out += ["", f"The slowest transaction, {slowest}, as the run recorded it (seconds since the run's start):",
                "", "```", *transaction_account(read_history(a_dir).ops, slowest), "```"]
    out += checks_evidence(bug, a_dir)
    for stall in affected.run.get("stalls") or []:
        out += ["", f"A client call stalled: {json.dumps(stall, sort_keys=True)}"]
    for error, seen in (affected.run.get("errors_seen") or {}).items():
        out += ["", f"{error} recorded by {seen['count']} operation(s), the first by {seen['first_process']} at "
                    f"{seen['first_s']:g} s into the run" if isinstance(seen, dict) else f"Error seen {seen} time(s): {error}"]
    logs = log_lines(a_dir, bug.upstream.log_patterns if bug.upstream else [], within=lost_partition(a_dir))
    if logs:
        out += ["", "The client's log lines that show it:", "", "```", *logs, "```"]
    return out


def readme(bug: BugSpec, judged: dict, affected: Chosen, fixed: Chosen, a_dir: Path, f_dir: Path,
           repro: Path | None, bundle: Path) -> str:
    up = bug.upstream
    assert up is not None
    a, f = side_facts(a_dir), side_facts(f_dir)
    tallies = {side: judged["sides"][side]["runs"] for side in BUG_SIDES}
    reproduced = sum(bool(r.get("reproduced")) for r in tallies["affected"])
    clean = sum(bool(r.get("clean")) for r in tallies["fixed"])

    def setting(facts: dict) -> str:
        features = ", ".join(f"{k}={v}" for k, v in sorted(facts["features"].items())) or "the release's defaults"
        config = ", ".join(f"{k}={v}" for k, v in sorted(facts["broker_config"].items()))
        return (f"Apache Kafka {facts['kafka']} ({facts['brokers']} KRaft brokers on one host, loopback), features: "
                f"{features}" + (f"; broker settings: {config}" if config else ""))
    lines = [f"# {up.title}", "",
             f"For: {up.project}. Status: {up.reported}. Catalogued by txnlab as `{bug.id}`; links: {bug.url}"
             + "".join(f", {link}" for link in bug.links), "",
             "## Summary", "", up.summary.strip(), "",
             "## Environment", "",
             f"- Affected: {bug.affected.label}. {setting(a)}.",
             f"- Not affected: {bug.fixed.label}. {setting(f)}.",
             f"- Each try: {a['duration_s']:g} s of the workload the summary describes, then the end of its last "
             "transactions; every operation's call and result recorded with its time", "",
             "## Expected", "", up.expected.strip(), "",
             "## Actual", "", up.actual.strip(), "",
             f"Affected side: the symptom in {reproduced} of {len(tallies['affected'])} tries; fixed side: clean in "
             f"{clean} of {len(tallies['fixed'])} tries (this suite; the bundle holds one try of each).", "",
             *evidence_section(bug, affected, fixed, a_dir, f_dir), "",
             "## Where the cause lies", ""]
    lines += [f"- `{c.file}`, `{c.function}` ({c.release}): {' '.join(c.does.split())}" for c in up.cause]
    lines += ["", "## Reproduce", ""]
    if repro is not None:
        sources = [source for pattern in ("*.go", "*.js", "*.py", "*.java") for source in sorted(repro.glob(pattern))]
        usage = next((line.removeprefix("// ") for source in sources for line in source.read_text().splitlines()
                      if line.removeprefix("// ").startswith("Usage:")), "")
        setup = ("`npm ci` there, then " if (repro / "package.json").exists() else
                 "`pip install -r requirements.txt` there, then " if (repro / "requirements.txt").exists() else
                 "Maven there (its pom.xml fetches the client): " if (repro / "pom.xml").exists() else "")
        lines += [f"Without txnlab: `{repro.relative_to(bundle)}/` needs only a Kafka cluster and the client: "
                  f"{setup}{usage.removeprefix('Usage: ')}", ""]
    lines += [f"With txnlab: `txnlab bugs run {bug.id} --tries 3` runs both sides on local clusters and judges them.",
              "", "## In this bundle", "",
              f"- `affected/{a_dir.name}/` and `fixed/{f_dir.name}/`: each try's run directory: `history/` (every "
              "operation, JSON lines), `archive/` (both isolation levels' views of its topics, Parquet), "
              "`verify/report.json` (the verification), `report.html` (its page and timeline), `spec.json`, "
              "`cluster.json`, `experiment.json`; re-verify without a cluster with `txnlab verify DIR --offline`",
              "- `bug.json`: the suite's judgement of every try",
              "- record ids: every record's value is JSON whose `id` is <run tag>.<producer>.<transaction number>.<record "
              "number> (a transaction's id: its records' without the last part); topics are named <run tag>-<name>, "
              "a partition written <topic>-<partition>"]
    if repro is not None:
        lines.append(f"- `{repro.relative_to(bundle)}/`: the standalone reproduction's source")
    return "\n".join(lines) + "\n"


def export(bug_id: str, suite: Path, out_root: Path, progress: Progress = print) -> Path:
    """The bug's bundle folder (replaced if present) and its .tar.gz beside it; the folder."""
    from report import build
    judged_file = suite / "bug.json"
    if not judged_file.exists():
        raise ExportError(f"{suite} is not a bug suite (no bug.json): give a `txnlab bugs run` or campaign suite")
    judged = json.loads(judged_file.read_text())
    bug = load_bug(bug_id, judged.get("variant"))
    if judged.get("bug") != bug.id:
        raise ExportError(f"{suite} is a suite of {judged.get('bug')}, not of {bug.id}")
    if bug.upstream is None:
        raise ExportError(f"{bug.id} has no `upstream` section in chaos/bugs/{bug.id}.yaml: nothing to say to its "
                          "maintainers yet")
    affected, fixed = chosen_tries(suite, judged)
    bundle = out_root / bug.id
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    a_dir = copy_run(affected.source, bundle / "affected" / affected.source.name)
    f_dir = copy_run(fixed.source, bundle / "fixed" / fixed.source.name)
    for run_dir in (a_dir, f_dir):
        progress(f"{bug.id}: the page and timeline of {run_dir.parent.name}/{run_dir.name}")
        build.write(run_dir)
    shutil.copy(judged_file, bundle / "bug.json")
    repro = None
    if (REPRO_DIR / bug.id).is_dir():
        repro = bundle / "repro"
        shutil.copytree(REPRO_DIR / bug.id, repro, ignore=shutil.ignore_patterns("node_modules", "target"))
    (bundle / "README.md").write_text(readme(bug, judged, affected, fixed, a_dir, f_dir, repro, bundle))
    tarball = out_root / f"{bug.id}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(bundle, arcname=bug.id)
    progress(f"{bug.id}: {bundle} ({tarball.stat().st_size // 1024} KiB as {tarball.name})")
    return bundle
