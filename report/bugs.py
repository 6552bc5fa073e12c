"""`txnlab bugs`: a catalogued Kafka bug (chaos/bugs/) reproduced on the side it affects, and shown absent on the
side that fixes it, with the same experiment and the same faults.

Owns: running a bug's experiment `tries` times per side, the sides one after the other, each on a fresh
3-node local cluster of its own release and settings (purged before it starts and after its runs are
verified; both sides use the same ports, one at a time); capturing each run's Prometheus timelines and
alerts while its cluster is up; verifying a side's runs with Spark in one session before its cluster goes;
judging each run (reproduced: one of the bug's expected checks found anomalies, or a workload recorded one of
its expected errors; clean: every check valid and none of those errors);
the suite directory runs/<stamp>-<bug id>/ (suite.json with the sides as the report's levels, bug.json with
the judgement, tries.md its table of tries) and its report (report/build.py: report.html and report.json).
Must not: define bugs (chaos/bugs/*.yaml), experiments or checks; decide anything the verify report and the
stored timelines do not say.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from chaos.nemesis.backends import LocalBackend
from chaos.record.history import HistoryError, read_history
from chaos.record.recovery import recovery, stall_text
from chaos.catalog.bugs import BUG_SIDES, BugSpec, bug_side_spec, expected_anomalies, load_bug
from cluster.access.errors import TxnlabError
from cluster.lab.local import LocalCluster
from cluster.access.progress import Progress
from cluster.lab.versions import kafka_version, txnlab_home
from chaos.record import shapes, signatures
from report import build
from report.demo import DEMO_SPARK_BASE_PORT, run_in_suite, shared_spark, verify_runs
from report.stack import local_stack

BUGS_BASE_PORT = 25000          # the demo's: the two never run at once on one machine


class BugRunError(TxnlabError, ValueError):
    """A bug run that cannot start (checked before anything starts)."""


@dataclass
class BugOptions:
    tries: int = 1
    short: bool = True
    seed: int = 1
    runs_dir: Path = Path("runs")
    master: str = "local[*]"
    base_port: int = BUGS_BASE_PORT
    state_root: Path | None = None         # default $TXNLAB_HOME/bugs
    variant: str | None = None             # another pair of sides of the bug (chaos/catalog/bugs.py BugVariant); None: natural
    sides: tuple[str, ...] = BUG_SIDES     # the sides to run (one alone: its tries again, the other's left unrun)


def suite_title(bug: BugSpec) -> str:
    return f"{bug.id}{f' ({bug.variant})' if bug.variant else ''}: {bug.title}"


def expectation(bug: BugSpec) -> str:
    """What shows the bug, in words: "anomalies in open_at_end, ...", "a workload error naming X" and/or
    "a stall of send_offsets_to_transaction"."""
    parts = ([f"anomalies in {', '.join(bug.expect.checks)}"] if bug.expect.checks else []) + \
        ([f"a workload error naming {' or '.join(bug.expect.errors)}"] if bug.expect.errors else []) + \
        ([f"a stall of {' or '.join(bug.expect.stalls)}"] if bug.expect.stalls else [])
    return " or ".join(parts)


def side_label(bug: BugSpec, side: str) -> str:
    return f"{side}: {getattr(bug, side).label}"


def stalls_and_recovery(run_dir: Path) -> tuple[list[dict] | None, bool | str]:
    """The run's stalls (chaos/record/recovery.py's entries: process, call, library, when, restarted) and whether it
    recovered, from its history. Stalls None when the history cannot be read or was cut short with none seen:
    no stall seen is then no evidence of none."""
    try:
        history = read_history(run_dir)
    except HistoryError:
        return None, "unknown"
    found = recovery(history.ops)
    stalls = found["stalls"]
    return (None if history.truncated and not stalls else stalls), found["recovered"]


def judge(run_dir: Path, expected: list[str], errors: tuple[str, ...] = (), stalls: tuple[str, ...] = (),
          history: str | None = None, shaped: tuple[str, ...] = ()) -> dict:
    """One run's outcome from its verify report and its history: anomalies per check, the expected errors
    recorded (None: the history could not tell), the stalls (None: likewise), whether an expected check found
    anomalies, an expected error was recorded or an expected call stalled (reproduced), whether every check
    was valid and the history shows no expected error, and, for a bug that shows as a stall, no stall of any
    call and every fault recovered (clean: a client that hangs without a watchdog of ours, as Java's, shows as
    not recovered, never as silence), for a bug that shows as a history shape (`shaped`), its occurrences (reproduced
    when one occurred, clean only when the whole history shows none), and the most hanging transactions the exporter confirmed at once (from the
    captured timelines; None when not captured)."""
    seen = shapes.errors_seen(run_dir, tuple(errors))
    stalled, recovered = stalls_and_recovery(run_dir)
    report = build.verdict_of(run_dir)
    anomalies, problems = build.anomaly_counts(report)
    anomalous = any(expected_anomalies(anomalies, problems, check) for check in expected)
    shown = signatures.shown_in(run_dir, (history,)) if history and anomalous else None
    occurred = shapes.shapes_in(run_dir, shaped) if shaped else {}
    captured = json.loads((run_dir / "prometheus.json").read_text()) if (run_dir / "prometheus.json").exists() else {}
    hanging = [p[1] for s in captured.get("timelines", {}).get("hanging_transactions", {}).get("series", [])
               for p in s["points"]]
    stalled_expected = [st for st in stalled or [] if st["call"] in stalls]
    uncounted = [e for e in expected if ":" in e and anomalies.get(e.split(":")[0]) and e.split(":")[0] not in problems]
    gaps = report["gaps"] + (["the history cannot say which errors the workloads recorded"] if seen is None else []) \
        + [f"{e}: the verify report does not count {e.split(':')[0]}'s anomalies per problem (verified before "
           "txnlab counted them: verify the run again)" for e in uncounted] \
        + (["the history cannot say whether a client call stalled"] if stalled is None else []) \
        + ([f"recovery: {recovered}"] if stalls and recovered is not True else []) \
        + ([f"{history}: {shown}"] if isinstance(shown, str) else []) \
        + ([f"history shapes: {occurred}"] if isinstance(occurred, str) else [])
    seen_shapes = {} if isinstance(occurred, str) else {name: len(found) for name, found in occurred.items()}
    return {"run_dir": str(run_dir), "valid": report["valid"], "anomalies": anomalies, "problems": problems,
            "errors_seen": seen, "stalls": stalled, "recovered": recovered,
            "reproduced": (anomalous and (not history or not isinstance(shown, str) and shown.counts[history] > 0))
            or bool(seen) or bool(stalled_expected) or any(seen_shapes.values()),
            **({"history": shown._asdict() if isinstance(shown, signatures.Explained) else shown} if history else {}),
            **({"shapes": occurred} if shaped else {}),
            "clean": report["valid"] is True and seen == {} and (not stalls or stalled == [] and recovered is True)
            and (not shaped or not isinstance(occurred, str) and not any(seen_shapes.values())),
            "max_hanging": max(hanging) if hanging else None, "gaps": gaps}


class BugRun:
    def __init__(self, bug: str | BugSpec, options: BugOptions, progress: Progress = print):
        self.bug = bug if isinstance(bug, BugSpec) else load_bug(bug, options.variant)
        if options.tries < 1:
            raise BugRunError(f"tries must be >= 1, got {options.tries}")
        if not options.sides or set(options.sides) - set(BUG_SIDES):
            raise BugRunError(f"sides are {', '.join(BUG_SIDES)}, got {', '.join(options.sides) or 'none'}")
        self.options, self.say = options, progress
        self.short = options.short and self.bug.full_only is None      # a full_only bug runs in its full mode
        self.started = time.time()
        variant = f"-{self.bug.variant}" if self.bug.variant else ""
        self.dir = Path(options.runs_dir).resolve() / f"{time.strftime('%Y%m%d-%H%M%S')}-{self.bug.id.lower()}{variant}"
        self.dir.mkdir(parents=True, exist_ok=False)
        self.state_root = options.state_root or txnlab_home() / "bugs"
        self.spark = None                    # the shared Spark Connect server while run() runs
        levels = [side_label(self.bug, side) for side in BUG_SIDES]
        self.suite = {"id": self.dir.name, "started": self.started, "ended": None, "seed": options.seed,
                      "kafka_version": ", ".join(sorted({getattr(self.bug, s).kafka_version or kafka_version()
                                                         for s in BUG_SIDES})),
                      "title": suite_title(self.bug),
                      "experiments": [], "levels": levels,
                      "comparison": comparison(self.bug),
                      "runs": [], "verify_exit": {}, "errors": []}
        self.outcome = {"bug": self.bug.id, "variant": self.bug.variant, "url": self.bug.url, "links": self.bug.links, "title": self.bug.title, "fixed_in": self.bug.fixed_in,
                        "expected_checks": self.bug.expect.checks, "expected_errors": self.bug.expect.errors,
                        "short": self.short, "tries": options.tries, "sides_run": list(options.sides),
                        "sides": {side: {"label": getattr(self.bug, side).label, "runs": []} for side in BUG_SIDES}}

    def _step(self, message: str) -> None:
        self.say(f"[bugs {time.time() - self.started:5.0f}s] {message}")

    def _save(self) -> None:
        save(self.dir, self.suite, self.outcome)

    def run(self) -> dict:
        self._save()
        self.spark = shared_spark(self.state_root / "spark-connect", DEMO_SPARK_BASE_PORT, self.options.master,
                                  True, self._step)
        self._step(f"{self.bug.id} ({self.bug.title}): {self.options.tries} tr{'y' if self.options.tries == 1 else 'ies'} "
                   f"per side, {'short' if self.short else 'full'} mode, in {self.dir}")
        try:
            for side in BUG_SIDES:
                if side in self.options.sides:
                    self._side(side)
                else:
                    self._step(f"{side} side: not run (--sides {','.join(self.options.sides)})")
        finally:
            if self.spark is not None:
                self.spark.stop()
            self.suite["ended"] = time.time()
            self._summarise()
            self._save()
        self._step("building the report")
        report = build.write(self.dir)
        self._step(f"report: {self.dir / 'report.html'} (and report.json, bug.json)")
        return {**self.outcome, "report": report}

    def _side(self, side: str) -> None:
        """The side's tries on one cluster, or each on a cluster of its own (the bug's cluster_per_try), each cluster's
        runs verified in the shared Spark session while it is still up (verify reads the topics)."""
        state = self.state_root / side
        runs: list[Path] = []
        per_try = bool(self.bug.cluster_per_try)
        attempts = list(range(1, self.options.tries + 1))
        for batch in ([[a] for a in attempts] if per_try else [attempts]):
            cluster = self._cluster_up(side, state, fresh_for=batch[0] if per_try else None)
            if cluster is None:
                break
            try:
                made = [run_dir for attempt in batch if (run_dir := self._try(side, attempt, cluster, state))]
                runs += made
                verify_runs(self.suite, f"{side} try {batch[0]}" if per_try else side,
                            f"the {side} side" + (f", try {batch[0]}" if per_try else ""), made, self.options.master,
                            self._step, self.spark)
            finally:
                cluster.down(purge=True, progress=lambda m: None)
        self.outcome["sides"][side]["runs"] += [judge_by(self.bug, run_dir) for run_dir in runs]
        self._save()

    def _cluster_up(self, side: str, state: Path, fresh_for: int | None) -> LocalCluster | None:
        """The side's 3-node cluster, purged first (a left-over of an earlier run or try) and up; None when it did not
        come up (the outcome says so; the other side still runs)."""
        settings = getattr(self.bug, side)
        LocalCluster.load(state).down(purge=True, progress=lambda m: None)
        cluster = LocalCluster.load(state, nodes=3, base_port=self.options.base_port,
                                    broker_overrides=dict(settings.broker_config) or None,
                                    features=dict(settings.features) or None, kafka_version=settings.kafka_version,
                                    **local_stack())
        which = f" (a cluster of its own for try {fresh_for}: {self.bug.cluster_per_try})" if fresh_for == 1 else \
            f" (try {fresh_for}'s own)" if fresh_for else ""
        self._step(f"{side} side: {settings.label}: cluster coming up in {state}{which}")
        try:
            cluster.up(progress=lambda m: self._step(f"  {side}: {m}"), timeout=240)
        except Exception as exc:  # noqa: BLE001 - the other side still runs; the outcome says this one did not
            self.suite["errors"].append(f"{side} side: the cluster did not come up: {type(exc).__name__}: {exc}")
            self._step(f"  {side} side: the cluster did not come up: {exc}")
            cluster.down(purge=True, progress=lambda m: None)
            return None
        return cluster

    def _try(self, side: str, attempt: int, cluster: LocalCluster, state: Path) -> Path | None:
        spec = bug_side_spec(self.bug, side, state, self.options.base_port, self.short)
        name = f"{self.bug.id} try {attempt}"
        entry = {"experiment": name, "level": side_label(self.bug, side), "side": side, "try": attempt,
                 "run_dir": None, "error": None,
                 "expected_alerts": list(self.bug.expect.alerts) if side == "affected" else []}
        self.suite["runs"].append(entry)
        if name not in self.suite["experiments"]:
            self.suite["experiments"].append(name)
        self._step(f"{side} side, try {attempt}/{self.options.tries}: {spec.name} ({spec.duration_s:.0f} s)")
        run_dir = run_in_suite(spec, self.options.seed + attempt - 1, self.dir, side, entry,
                               lambda: LocalBackend(cluster), self.suite["errors"], f"{side} try {attempt}", self._step)
        self._save()
        return run_dir

    def _summarise(self) -> None:
        tally(self.outcome)
        self.outcome["errors"] = self.suite["errors"]
        for side in BUG_SIDES:
            runs = self.outcome["sides"][side]["runs"]
            self._step(f"{side}: " + ("; ".join(
                f"{Path(r['run_dir']).name}: {'valid' if r['valid'] is True else r['valid']}"
                + (f", anomalies {r['anomalies']}" if r["anomalies"] else "")
                + (f", errors {sorted(r['errors_seen'])}" if r.get("errors_seen") else "")
                + (f", stalled: {'; '.join(stall_text(st) for st in r['stalls'])}" if r.get("stalls") else "")
                + (f", recovered {r['recovered']}" if r.get("recovered") is not True else "") for r in runs) or "no run"))
        said = {"affected": f"reproduced on the affected side in {self.outcome['affected_reproduced']} of "
                            f"{self.options.tries}",
                "fixed": f"the fixed side clean in {self.outcome['fixed_clean']} of {self.options.tries}"}
        self._step(f"{self.bug.id}: " + ", ".join(said[side] if side in self.options.sides else f"the {side} side not run"
                                                  for side in BUG_SIDES))


def comparison(bug: BugSpec) -> dict:
    """The report's side-by-side heading: the bug, its fix and what shows it."""
    return {"title": f"{bug.id}: the affected side beside the fixed side",
            "note": f"{bug.description.strip()} Fixed in: {bug.fixed_in}. Expected on the affected side: "
                    f"{expectation(bug)}; on the fixed side: none."}


def judge_by(bug: BugSpec, run_dir: Path) -> dict:
    """judge() with what the bug's catalog entry expects."""
    return judge(run_dir, bug.expect.checks, tuple(bug.expect.errors), tuple(bug.expect.stalls), bug.expect.history,
                 tuple(bug.expect.shapes))


def save(suite_dir: Path, suite: dict, outcome: dict) -> None:
    """A bug suite's suite.json, bug.json and tries.md (tries_table)."""
    (suite_dir / build.SUITE_FILE).write_text(json.dumps(suite, indent=2, default=str) + "\n")
    (suite_dir / "bug.json").write_text(json.dumps(outcome, indent=2, default=str) + "\n")
    (suite_dir / TRIES_FILE).write_text(tries_table(outcome))


TRIES_FILE = "tries.md"


def tries_table(outcome: dict) -> str:
    """The suite's tries as a Markdown table (docs/bugs.md quotes them): per try its run's tag, the Kafka release of
    its cluster and of its Java clients (cluster.json), whether it reproduced the bug or was clean, its verdict,
    its anomalies per check (with their problems), its stalls, the most hanging transactions the exporter
    confirmed at once, for a bug shown by history shapes each shape's occurrences and, for one shown by errors, the
    expected errors the workloads recorded (how many operations, the first one's process and time)."""
    shaped = any("shapes" in run for side in BUG_SIDES for run in outcome["sides"][side]["runs"])
    erring = bool(outcome.get("expected_errors"))
    head = ["side", "try", "run tag", "Kafka", "Java clients", "reproduced", "clean", "verdict", "anomalies", "stalls",
            "hanging (max)"] + (["history shapes"] if shaped else []) + (["errors recorded"] if erring else [])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for side in BUG_SIDES:
        for number, run in enumerate(outcome["sides"][side]["runs"], 1):
            stored = Path(run["run_dir"]) / "cluster.json"
            cluster = json.loads(stored.read_text()) if stored.exists() else {}
            release = cluster.get("kafka_version") or "?"
            stalls = "?" if run.get("stalls") is None else ", ".join(sorted({s["call"] for s in run["stalls"]}))
            cells = [side, number, Path(run["run_dir"]).name.rsplit("-", 1)[-1], release,
                     cluster.get("java_clients") or release, "yes" if run["reproduced"] else "no",
                     "yes" if run["clean"] else "no", "valid" if run["valid"] is True else run["valid"],
                     _anomaly_cell(run), stalls or "none",
                     "-" if run.get("max_hanging") is None else f"{run['max_hanging']:g}"] \
                + ([_shapes_cell(run.get("shapes", {}))] if shaped else []) \
                + ([_errors_cell(run.get("errors_seen"))] if erring else [])
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    affected, fixed = (outcome["sides"][s]["runs"] for s in BUG_SIDES)
    lines.append(f"\nreproduced on the affected side in {sum(r['reproduced'] for r in affected)} of {len(affected)}, "
                 f"the fixed side clean in {sum(r['clean'] for r in fixed)} of {len(fixed)}")
    return "\n".join(lines) + "\n"


def _errors_cell(seen: dict[str, dict] | None) -> str:
    """"InvalidTxnStateException 2 (first streams-0 at 28.6 s)" or "none"; "?" when the history could not say."""
    if seen is None:
        return "?"
    return ", ".join(f"{name} {e['count']} (first {e['first_process']} at {e['first_s']:g} s)"
                     for name, e in sorted(seen.items())) or "none"


def _shapes_cell(found: dict[str, list[str]] | str) -> str:
    """"commit-waits 7" or "none"; "?" when the history could not say."""
    if isinstance(found, str):
        return "?"
    return ", ".join(f"{name} {len(seen)}" for name, seen in sorted(found.items()) if seen) or "none"


def _anomaly_cell(run: dict) -> str:
    """"streams_processing 3 (duplicate-output 1, unprocessed 2), open_at_end 1" or "none"."""
    problems = run.get("problems", {})

    def one(check: str, count: int) -> str:
        kinds = ", ".join(f"{p} {n}" for p, n in sorted(problems.get(check, {}).items()))
        return f"{check} {count}" + (f" ({kinds})" if kinds else "")
    return ", ".join(one(c, n) for c, n in sorted(run["anomalies"].items())) or "none"


def tally(outcome: dict) -> None:
    """The counts of an outcome from its judged runs."""
    affected, fixed = (outcome["sides"][s]["runs"] for s in BUG_SIDES)
    outcome["affected_reproduced"] = sum(r["reproduced"] for r in affected)
    outcome["fixed_clean"] = sum(r["clean"] for r in fixed)


def rejudge(suite_dir: Path, progress: Progress = print) -> dict:
    """A stored bug suite judged again by the catalog's bug as it is now (what shows a bug can be learnt after its
    runs): every run from its stored verify report and history, nothing run against a cluster; bug.json and the
    report rewritten, the outcome (with `rejudged`: when) returned."""
    suite_dir = Path(suite_dir).resolve()
    try:
        outcome = json.loads((suite_dir / "bug.json").read_text())
        suite = json.loads((suite_dir / build.SUITE_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise BugRunError(f"{suite_dir} is not a stored bug suite (bug.json, {build.SUITE_FILE}): {exc}") from None
    bug = load_bug(outcome["bug"], outcome.get("variant"))
    for side in BUG_SIDES:
        outcome["sides"][side]["runs"] = [judge_by(bug, in_suite(suite_dir, side, r["run_dir"]))
                                          for r in outcome["sides"][side]["runs"]]
    tally(outcome)
    outcome.update(expected_checks=bug.expect.checks, expected_errors=bug.expect.errors, rejudged=time.time())
    suite.update(comparison=comparison(bug), title=suite_title(bug))
    save(suite_dir, suite, outcome)
    report = build.write(suite_dir)
    progress(f"{bug.id}: reproduced on the affected side in {outcome['affected_reproduced']} of "
             f"{len(outcome['sides']['affected']['runs'])}, the fixed side clean in {outcome['fixed_clean']} of "
             f"{len(outcome['sides']['fixed']['runs'])} (judged again by {', '.join(bug.expect.checks)})")
    return {**outcome, "report": report}


def in_suite(suite_dir: Path, side: str, recorded: str) -> Path:
    """A try's run directory in its suite as the suite is now (SUITE/SIDE/RUN: a suite moved, copied or unpacked
    from the corpus is judged from its own runs), else where bug.json recorded it."""
    here = suite_dir / side / Path(recorded).name
    return here if here.is_dir() else Path(recorded)


def exit_code(outcome: dict) -> int:
    """0: every affected try reproduced the bug and every fixed try was clean; 1: not so; 2: a try or a
    verification did not run."""
    tries, run = outcome["tries"], outcome.get("sides_run", BUG_SIDES)
    if outcome.get("errors") or any(len(outcome["sides"][s]["runs"]) != tries for s in run):
        return 2
    return 0 if all(outcome[key] == tries for side, key in (("affected", "affected_reproduced"),
                                                             ("fixed", "fixed_clean")) if side in run) else 1
