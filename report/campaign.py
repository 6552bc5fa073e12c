"""`txnlab campaign`: the whole matrix as one command and one report, beside the gate (docs/campaign.md).

Owns: the campaign's cells (every built-in experiment on every client it applies to, Streams' and Flink's built-ins
among them; the core tests on every release of KAFKA_VERSIONS; every catalogued bug's two sides, and each variant's,
at N tries; the live tests that left the gate), running the pending ones by the machinery that exists (the demo's
suite per client: report/demo.py; report/bugs.py's BugRun; scripts/kafka_matrix.py; `pytest -m campaign`), its
directory (campaign.json: every cell's outcome, the commit and slice it ran in, its wall time; resumed: a cell done
is not run again) and its page (campaign.html: a client x experiment grid, the releases, the bugs, the tests), its
JSON twin (campaign.json) and its picture (campaign.png).
Must not: define experiments, checks, bugs or tests, nor judge a run (verify and the catalog do): a cell's grade
only reads their verdicts.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from chaos.runner.spec import SpecError, builtin_specs, load_spec
from chaos.record.shapes import LIVENESS_SHAPES
from chaos.catalog.bugs import bug_files, load_bug
from chaos.workloads import GROUP_PROTOCOLS
from chaos.workloads.native import REFERENCE, clients
from cluster.access.errors import TxnlabError
from cluster.access.progress import Progress
from cluster.lab.versions import REPO_ROOT, supported_kafka_versions, txnlab_home, txnlab_source

PARTS = ("experiments", "releases", "bugs", "tests")
STATE_FILE = "campaign.json"
PAGE_FILE = "campaign.html"
PICTURE_FILE = "campaign.png"
CAMPAIGN_BASE_PORT = 20000           # its clusters (the drill's at 16000), never a dev's, a demo's or the tests',
CAMPAIGN_DRILL_BASE_PORT = 16000     # and below the ephemeral port range (cluster/lab/layout.py refuses a plan inside it)
CAMPAIGN_OWN_BASE_PORT = 15000       # the experiments' with broker settings of their own
CAMPAIGN_SPARK_BASE_PORT = 31500     # its Spark Connect server at +30
# A cell's grade, from best to worst: what its page and picture colour it by.
SUITE_CELLS = 6                      # experiments per demo suite: an interruption loses at most one suite's cells
GRADES = ("valid", "named", "n/a", "unknown", "invalid", "error", "pending")
GOOD = {"valid", "named", "n/a"}     # the campaign holds when every cell is one of these


class CampaignError(TxnlabError, ValueError):
    """Campaign options that cannot run (checked before anything starts)."""


@dataclass
class CampaignOptions:
    directory: Path = Path("runs/campaign")
    parts: tuple[str, ...] = PARTS
    clients: tuple[str, ...] = ()          # () = every client
    experiments: tuple[str, ...] = ()      # () = every built-in
    versions: tuple[str, ...] = ()         # () = every release of KAFKA_VERSIONS
    bugs: tuple[str, ...] = ()             # () = every catalogued bug (with its variants)
    tests: tuple[str, ...] = ()            # () = every test module with tests that left the gate
    tries: int = 3
    seed: int = 1
    again: bool = False                    # run the selected cells again even when done
    regrade: bool = False                  # run nothing: grade the selected bug cells done again from their suites
    minutes: float | None = None           # start no cell after this many minutes (the rest stay pending)
    transaction_versions: tuple[int, ...] = (2,)   # the experiments' cells at each level (2: ids without a suffix)
    group_protocols: tuple[str, ...] = ("classic",)   # the groups' protocols (GROUP_PROTOCOLS; classic: ids without a suffix)
    experiment_tries: int = 1              # runs of each experiment cell, each its own seed (seed, seed + 1, ...)

    def resolved(self) -> "CampaignOptions":
        """The selection with its defaults filled in, each name checked: a CampaignError names what is unknown."""
        def chosen(given: tuple[str, ...], known: list[str], what: str) -> tuple[str, ...]:
            strange = [g for g in given if g not in known]
            if strange:
                raise CampaignError(f"unknown {what}: {', '.join(strange)} (known: {', '.join(known)})")
            return tuple(given) or tuple(known)
        if self.tries < 1 or self.experiment_tries < 1:
            raise CampaignError(f"tries must be >= 1, got {min(self.tries, self.experiment_tries)}")
        strange_protocols = [p for p in self.group_protocols if p not in GROUP_PROTOCOLS]
        if strange_protocols or not self.group_protocols:
            raise CampaignError(f"group protocols are {', '.join(GROUP_PROTOCOLS)}, got "
                                f"{', '.join(self.group_protocols) or 'none'}")
        strange_levels = [v for v in self.transaction_versions if v not in TRANSACTION_VERSIONS]
        if strange_levels or not self.transaction_versions:
            raise CampaignError(f"transaction.version levels are {', '.join(map(str, TRANSACTION_VERSIONS))}, got "
                                f"{', '.join(map(str, self.transaction_versions)) or 'none'}")
        return CampaignOptions(Path(self.directory), chosen(self.parts, list(PARTS), "parts"),
                               chosen(self.clients, list(clients()), "clients"),
                               chosen(self.experiments, list(builtin_specs()), "experiments"),
                               chosen(self.versions, supported_kafka_versions(), "Kafka releases"),
                               chosen(self.bugs, list(bug_files()), "bugs"),
                               chosen(self.tests, campaign_test_modules(), "test modules"), self.tries, self.seed,
                               self.again, self.regrade, self.minutes, tuple(dict.fromkeys(self.transaction_versions)),
                               tuple(dict.fromkeys(self.group_protocols)), self.experiment_tries)


TEST_FOLDERS = ("integration", "corpus")    # tests/<folder>: where tests that left the gate live


def campaign_test_modules() -> list[str]:
    """The test modules with tests that left the gate (marked `campaign`: the live ones tests/integration/conftest.py
    CAMPAIGN, the corpus's repeated tries), by name: test_corpus, test_flink, ..."""
    return sorted(campaign_test_paths())


def campaign_test_paths() -> dict[str, Path]:
    marked = re.compile(r"^\s*@CAMPAIGN\b|marks=CAMPAIGN\b|pytest\.mark\.campaign\b", re.M)
    return {p.stem: p for folder in TEST_FOLDERS for p in (REPO_ROOT / "tests" / folder).glob("test_*.py")
            if marked.search(p.read_text())}


# ---- the plan ------------------------------------------------------------------------------------------------
TRANSACTION_VERSIONS = (1, 2)        # the levels an experiment cell may run at (Kafka 4.0+; 2 is 4.x's default)


def level_of(cell: dict) -> int:
    """An experiment cell's transaction.version (cells of campaigns before the option ran at 2)."""
    return int(cell.get("transaction_version", 2))


def protocol_of(cell: dict) -> str:
    """An experiment cell's group protocol (cells of campaigns before the option ran classic)."""
    return str(cell.get("group_protocol", "classic"))


def level_suffix(level: int, protocol: str = "classic") -> str:
    """An experiment cell's id and row at a transaction.version other than the default's 2 (`@tv1`) and on a group
    protocol other than classic (`@consumer`)."""
    return ("" if level == 2 else f"@tv{level}") + ("" if protocol == "classic" else f"@{protocol}")


def cell_suffix(cell: dict) -> str:
    return level_suffix(level_of(cell), protocol_of(cell))


def try_of(cell: dict) -> int:
    """An experiment cell's try (1 unless the campaign ran each cell several times: `#K` ends the ids of the others)."""
    return int(cell.get("try", 1))


def try_suffix(k: int) -> str:
    return "" if k == 1 else f"#{k}"


def plan(options: CampaignOptions) -> list[dict]:
    """The selected cells in the order they run: {id, part, ...what names it}; an experiment a client has no
    workload of is planned as not applicable, with why."""
    cells: list[dict] = []
    if "experiments" in options.parts:
        from report.demo import not_applicable
        for k, client, protocol, level, name in itertools.product(
                range(1, options.experiment_tries + 1), options.clients, options.group_protocols,
                options.transaction_versions, options.experiments):
            cell = {"id": f"experiment/{name}/{client}{level_suffix(level, protocol)}{try_suffix(k)}",
                    "part": "experiments", "experiment": name, "client": client, "transaction_version": level,
                    "group_protocol": protocol, **({"try": k} if k > 1 else {})}
            try:
                load_spec(name, short=True, client=None if client == REFERENCE else client,
                          group_protocol=None if protocol == "classic" else protocol)
            except SpecError as exc:
                cell["not_applicable"] = not_applicable(name, client, protocol, exc)
            cells.append(cell)
    if "releases" in options.parts:
        cells += [{"id": f"release/{v}", "part": "releases", "release": v} for v in options.versions]
    if "bugs" in options.parts:
        for bug_id in options.bugs:
            cells.append({"id": f"bug/{bug_id}", "part": "bugs", "bug": bug_id, "variant": None})
            cells += [{"id": f"bug/{bug_id}/{v}", "part": "bugs", "bug": bug_id, "variant": v}
                      for v in load_bug(bug_id).variants]
    if "tests" in options.parts:          # a cell per module: an interruption loses one module's tests at most
        cells += [{"id": f"tests/{m}", "part": "tests", "module": m} for m in options.tests]
    return cells


# ---- grading what a cell's machinery said ----------------------------------------------------------------------
def experiment_outcome(run: dict) -> dict:
    """A demo report's run (report/build.py run_report) as a cell's outcome: its verdict, its recovery, the
    catalogued findings it matches (anomalies and stalls) or its history shows (report/build.py shape_bugs), graded: valid (valid, every fault recovered by itself),
    named (what went wrong is a catalogued finding: its anomalies match one, or a workload recovered only after a
    restart of a stall that matches one, or the history shows a finding whose shape is a process that cannot go on,
    shapes.LIVENESS_SHAPES, whether or not its faults read as recovered: a processor that stopped reading one topic
    while its other input flows commits on), invalid (an anomaly or a fault not recovered that no finding names),
    unknown (the evidence is incomplete: the verdict or the recovery is unknown, with the reasons, or a run that looks
    clean although one of its faults failed to start: what it was to test did not happen)."""
    from report.build import recovered_cell, stall_bugs
    verdict, recovered = run["verify"].get("valid"), recovered_cell(run)
    stalls = [st for f in run["recovery"].get("faults", []) for st in f.get("stalls") or []]
    stalled = sorted({b["id"] for st in stalls for b in stall_bugs(st)})
    catalogued = sorted({b["id"] for b in run.get("catalogued", [])})
    anomalies = sum(a["count"] for a in run.get("anomalies", []))
    restarted = isinstance(recovered, str) and recovered.startswith("after a restart")
    stuck = sorted({b["id"] for b in run.get("shown", []) if set(b.get("shapes") or ()) & set(LIVENESS_SHAPES)})
    verdict_named = verdict is True or (verdict is False and bool(catalogued))
    recovery_named = recovered is True or (restarted and bool(stalled)) or (recovered is False and bool(stuck))
    # a fault whose start failed was never tested: a clean run says nothing about it (silence is no evidence)
    unstarted = [f["kind"] for f in run["recovery"].get("faults", []) if f.get("started") is False]
    if verdict is True and recovered is True and unstarted:
        grade = "unknown"
    elif verdict is True and recovered is True and not stuck:
        grade = "valid"
    elif verdict_named and recovery_named:
        grade = "named"
    elif verdict is False or recovered is False or restarted:
        grade = "invalid"
    else:
        grade = "unknown"
    gaps = "; ".join(run["verify"].get("gaps") or [])
    detail = f"verdict {_word(verdict)}, recovered {_word(recovered)}, {anomalies} anomalies" + \
        (f"; {gaps}" if gaps and grade == "unknown" else "") + \
        (f"; did not start: {', '.join(unstarted)}" if unstarted else "")
    return {"grade": grade, "verdict": verdict, "recovered": recovered, "anomalies": anomalies,
            "causes": sorted({*catalogued, *stalled, *(b["id"] for b in run.get("shown", []))}), "detail": detail,
            "where": run["run_dir"]}


UNLIKELY = 0.05          # a timing-bound bug's tries: fewer reproductions than its rate makes this unlikely are no miss


def at_most(k: int, n: int, p: float) -> float:
    """The chance of k or fewer successes in n tries of chance p each (binomial)."""
    from math import comb
    return sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def bug_outcome(outcome: dict, code: int, rate: dict | None = None) -> dict:
    """A BugRun's outcome as a cell's: valid when every affected try reproduced the bug and every fixed try was
    clean (the catalogue holds); named when every fixed try was clean and the affected side's reproductions, fewer
    than its tries, are as many as a bug the catalog measured as timing-bound makes likely (`rate`: BugRate, its
    misses explained; at least a chance of UNLIKELY of so few: the cause named is that rate); invalid otherwise (a
    fixed try not clean, or fewer reproductions than the rate allows: the bug may have changed); error when a try
    or a verification did not run."""
    tries = outcome["tries"]
    reproduced, clean = outcome.get("affected_reproduced", 0), outcome.get("fixed_clean", 0)
    grade = {0: "valid", 1: "invalid"}.get(code, "error")
    detail = f"reproduced on {reproduced} of {tries} affected tries, clean on {clean} of {tries} fixed tries"
    if grade == "invalid" and rate and reproduced < tries and clean == tries:
        chance = at_most(reproduced, tries, rate["reproduced"] / rate["tries"])
        grade = "named" if chance >= UNLIKELY else "invalid"
        detail += (f"; timing-bound: the catalog measured {rate['reproduced']} of {rate['tries']} "
                   f"({rate['measured']}), at which {reproduced} or fewer of {tries} has a chance of {chance:.2f}"
                   + (f" (under {UNLIKELY:g}: not the catalog's rate)" if grade == "invalid" else "")
                   + f"; a miss: {rate['misses']}")
    return {"grade": grade, "detail": detail, "affected_reproduced": reproduced, "fixed_clean": clean, "tries": tries,
            "causes": [outcome["bug"]], "where": outcome["report"]["directory"]}


def junit_outcome(row: dict) -> dict:
    """A JUnit summary (scripts/kafka_matrix.py junit_summary, with `exit`) as a cell's outcome."""
    if not row.get("ran", True):
        return {"grade": "error", "detail": f"did not run: {row.get('error') or 'exit ' + str(row.get('exit'))}"}
    bad = row["failed"] + row["errors"]
    grade = "valid" if bad == 0 and row.get("exit", 0) == 0 and row["passed"] > 0 else "invalid"
    detail = f"{row['passed']} passed, {row['failed']} failed, {row['errors']} errors, {row['skipped']} skipped"
    return {"grade": grade, "detail": detail + (f": {', '.join(row['failing'])}" if row["failing"] else ""),
            "failing": row["failing"]}


def _word(value: object) -> str:
    return "yes" if value is True else "no" if value is False else str(value)


# ---- running ---------------------------------------------------------------------------------------------------
Runner = Callable[["Campaign", list[dict]], None]


class Campaign:
    """The selected cells of one campaign directory, the pending ones run (all with `again`), each recorded in
    campaign.json the moment it ends, so an interruption loses at most the cells in flight."""

    def __init__(self, options: CampaignOptions, progress: Progress = print,
                 runners: dict[str, Runner] | None = None):
        self.options = options.resolved()
        self.say = progress
        self.dir = self.options.directory.resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.started = time.time()
        self.state = load_state(self.dir)
        self.cells = plan(self.options)
        self.runners = {**RUNNERS, **(runners or {})}
        self.slice = {"started": self.started, "ended": None, "commit": _commit(), "command": _command(),
                      "cells": []}

    def pending(self) -> list[dict]:
        done = self.state["cells"]
        if self.options.regrade:            # the bug and experiment cells done, judged again from their stored suites
            return [c for c in self.cells if c["part"] in REGRADERS and done.get(c["id"], {}).get("status") == "done"
                    and (c["part"] == "bugs" or done[c["id"]].get("suite"))]
        return [c for c in self.cells if self.options.again or done.get(c["id"], {}).get("status") != "done"]

    def in_time(self) -> bool:
        """Whether a cell may start: within the slice's minutes (--minutes), if it has any; a cell not started
        stays pending for the next slice."""
        if self.options.minutes is None or time.time() - self.started < self.options.minutes * 60:
            return True
        self.step(f"{self.options.minutes:g} minutes are up: the cells not started stay pending")
        return False

    def step(self, message: str) -> None:
        self.say(f"[campaign {time.time() - self.started:6.0f}s] {message}")

    def record(self, cell: dict, outcome: dict, started: float, status: str = "done") -> None:
        """A cell's outcome, with when, how long and on which commit, saved at once."""
        entry = {**cell, "wall_s": round(time.time() - started, 1), **outcome, "status": status, "started": started,
                 "ended": time.time(), "commit": outcome.get("ran_commit", self.slice["commit"]),
                 "slice": len(self.state["slices"]) - 1}
        self.state["cells"][cell["id"]] = entry
        self.slice["cells"].append(cell["id"])
        self.save()
        index = len(self.slice["cells"])
        self.step(f"{index}/{self.total} {cell['id']}: {entry['grade']} ({entry.get('detail', '')}) "
                  f"in {entry['wall_s']:.0f} s")

    def save(self) -> None:
        save_state(self.dir, self.state, self.slice)

    def run(self) -> dict:
        todo = self.pending()
        self.total = len(todo)
        self.step(f"{self.dir}: {len(self.cells)} cells selected, {len(todo)} to run "
                  f"({len(self.cells) - len(todo)} done before) on {self.slice['commit']}")
        self.save()
        try:
            for part in PARTS:
                cells = [c for c in todo if c["part"] == part]
                for cell in [c for c in cells if c.get("not_applicable")]:
                    self.record(cell, {"grade": "n/a", "detail": cell["not_applicable"]}, time.time())
                runnable = [c for c in cells if not c.get("not_applicable")]
                if runnable:
                    (REGRADERS[part] if self.options.regrade else self.runners[part])(self, runnable)
        finally:
            self.slice["ended"] = time.time()
            self.save()
            write_page(self.dir, self.state)
        self.step(f"page: {self.dir / PAGE_FILE} (and {STATE_FILE}, {PICTURE_FILE})")
        return self.state


# The built-ins whose cells run in their full mode, with why: what the cell grades happens after the short run's end
FULL_MODE = {"flink-abandoned-job": "its job is back ~80 s into the run, after the short mode's 60 s (the budget of "
                                    "a short run cannot hold the sink's 30 s timeout, the abort and the job's "
                                    "return): the full run's 240 s see the job commit again",
             "epoch-exhaustion-timeout": "the climb to the edge of epoch exhaustion (32765) alone takes ~90 s: the "
                                         "short mode climbs to 3000 (the mechanism, not the edge)",
             "epoch-rotation-coordinator-killed": "the producer id rotates only at the edge (32766), ~90 s of climb: "
                                                  "the short mode climbs to 1000 (the mechanism, no rotation)"}


def run_experiments(campaign: Campaign, cells: list[dict]) -> None:
    """Per client (and set of broker settings an experiment asks for), its pending experiments as demo suites of
    SUITE_CELLS (their own clusters, every run verified, a
    report each; short mode, but FULL_MODE's); each run's verdict, recovery and named findings to its cell. A run that did not happen is an error cell
    (run again on resume)."""
    from report.demo import Demo, DemoOptions, own_broker_settings
    # one suite per client and set of broker settings (a suite's `own` cluster takes one set: DemoOptions.check)
    settings = {c["experiment"]: own_broker_settings(c["experiment"]) for c in cells}

    def key(cell: dict) -> tuple:
        return try_of(cell), cell["client"], settings[cell["experiment"]], level_of(cell), protocol_of(cell)
    keys = dict.fromkeys(key(c) for c in cells)
    groups = [[c for c in cells if key(c) == k] for k in keys]
    for mine in (group[i:i + SUITE_CELLS] for group in groups for i in range(0, len(group), SUITE_CELLS)):
        if not campaign.in_time():
            return
        client, level, protocol, started = mine[0]["client"], level_of(mine[0]), protocol_of(mine[0]), time.time()
        campaign.step(f"{client}{cell_suffix(mine[0])}{try_suffix(try_of(mine[0]))}: "
                      f"{', '.join(c['experiment'] for c in mine)} (one suite, verified)")
        options = DemoOptions(experiments=tuple(c["experiment"] for c in mine), clients=(client,),
                              full=tuple(c["experiment"] for c in mine if c["experiment"] in FULL_MODE),
                              transaction_versions=(level,), group_protocol=protocol, runs_dir=campaign.dir / "suites",
                              seed=campaign.options.seed + try_of(mine[0]) - 1,
                              base_port=CAMPAIGN_BASE_PORT, drill_base_port=CAMPAIGN_DRILL_BASE_PORT,
                              own_base_port=CAMPAIGN_OWN_BASE_PORT,
                              spark_base_port=CAMPAIGN_SPARK_BASE_PORT, state_root=txnlab_home() / "campaign")
        try:
            report = Demo(options, progress=lambda m: campaign.say(f"  {m}")).run()
        except TxnlabError as exc:
            for cell in mine:
                campaign.record(cell, {"grade": "error", "detail": str(exc)}, started, status="error")
            continue
        runs = {r["experiment"]: r for r in report["runs"]}
        for cell in mine:
            run = runs.get(cell["experiment"])
            if run is None or run.get("error"):
                why = (run or {}).get("error") or "; ".join(report["errors"]) or "the run did not happen"
                campaign.record(cell, {"grade": "error", "detail": why, "where": report["directory"]}, started,
                                status="error")
            else:                   # its own run's wall time (the suite's is its cells' together)
                ran = (run.get("window") or {}).get("end")
                own = {"wall_s": round(ran - run["started"], 1)} if ran and run.get("started") else {}
                campaign.record(cell, {**experiment_outcome(run), "suite": report["directory"], **own}, started)


def graded(cell: dict, outcome: dict) -> dict:
    """A bug cell's grade from its suite's outcome and its bug's measured rate (the catalog as it is now)."""
    from report.bugs import exit_code
    bug = load_bug(cell["bug"], cell["variant"])
    return bug_outcome(outcome, exit_code(outcome), bug.rate.model_dump() if bug.rate else None)


def regrade_bugs(campaign: Campaign, cells: list[dict]) -> None:
    """Each bug cell done, graded again by the catalog as it is now: its stored suite judged again (`txnlab bugs
    judge`: no cluster, nothing run) and its grade from that and the bug's measured rate, recorded in this slice."""
    from report.bugs import rejudge
    for cell in cells:
        if not campaign.in_time():
            return
        done = campaign.state["cells"][cell["id"]]           # its run's wall time and start are kept
        outcome = rejudge(Path(done["where"]), progress=lambda m: campaign.say(f"  {m}"))
        campaign.record(cell, {**graded(cell, outcome), "wall_s": done["wall_s"], "regraded": True,
                               "ran_commit": done.get("ran_commit", done["commit"]),
                               "regraded_at": campaign.slice["commit"]}, done["started"])


def regrade_experiments(campaign: Campaign, cells: list[dict]) -> None:
    """Each experiment cell done, graded again by the catalog as it is now: its stored suite's run reports built again
    (report/build.py build: the run's verify report, recovery and history as stored, the findings the catalog names
    now; no cluster, nothing run), recorded in this slice."""
    from report.build import build
    suites: dict[str, dict] = {}
    for cell in cells:
        if not campaign.in_time():
            return
        done = campaign.state["cells"][cell["id"]]
        if done["suite"] not in suites:
            suites[done["suite"]] = build(Path(done["suite"]))
        run = next((r for r in suites[done["suite"]]["runs"] if r["experiment"] == cell["experiment"]), None)
        if run is None:
            continue
        campaign.record(cell, {**experiment_outcome(run), "suite": done["suite"], "wall_s": done.get("wall_s"),
                               "regraded": True, "ran_commit": done.get("ran_commit", done["commit"]),
                               "regraded_at": campaign.slice["commit"]}, done["started"])


REGRADERS = {"bugs": regrade_bugs, "experiments": regrade_experiments}


def run_releases(campaign: Campaign, cells: list[dict]) -> None:
    """Each release's core tests by the release matrix's own command (scripts/kafka_matrix.py --versions V)."""
    result = txnlab_home() / "matrix" / "result.json"
    for cell in cells:
        if not campaign.in_time():
            return
        started = time.time()
        result.unlink(missing_ok=True)        # an earlier run's result is never taken for this one's
        code = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "kafka_matrix.py"), "--versions",
                               cell["release"]], cwd=REPO_ROOT, stdout=subprocess.DEVNULL).returncode
        try:
            [row] = json.loads(result.read_text())["rows"]
            if row["release"] != cell["release"]:
                raise ValueError(f"it is of Kafka {row['release']}")
        except (OSError, ValueError, KeyError) as exc:
            campaign.record(cell, {"grade": "error", "detail": f"no result of the release matrix (exit {code}): {exc}"},
                            started, status="error")
            continue
        outcome = {**junit_outcome({**row, "exit": code}), "minutes": row.get("minutes")}
        campaign.record(cell, outcome, started, status="error" if outcome["grade"] == "error" else "done")


def run_bugs(campaign: Campaign, cells: list[dict]) -> None:
    """Each catalogued bug's (or variant's) two sides at the campaign's tries (report/bugs.py BugRun)."""
    from report.bugs import BugOptions, BugRun
    for cell in cells:
        if not campaign.in_time():
            return
        started = time.time()
        options = BugOptions(tries=campaign.options.tries, seed=campaign.options.seed, runs_dir=campaign.dir / "bugs",
                             variant=cell["variant"])
        try:
            outcome = BugRun(cell["bug"], options, progress=lambda m: campaign.say(f"  {m}")).run()
        except TxnlabError as exc:
            campaign.record(cell, {"grade": "error", "detail": str(exc)}, started, status="error")
            continue
        result = graded(cell, outcome)
        campaign.record(cell, result, started, status="error" if result["grade"] == "error" else "done")


def run_tests(campaign: Campaign, cells: list[dict]) -> None:
    """The tests that left the gate (`pytest -m campaign`, docs/testing.md: live tests, the corpus's repeated tries),
    a module per cell, each with a JUnit report."""
    for cell in cells:
        if not campaign.in_time():
            return
        started = time.time()
        junit = campaign.dir / "tests" / f"junit-{cell['module']}-{int(started)}.xml"
        junit.parent.mkdir(parents=True, exist_ok=True)
        module = str(campaign_test_paths()[cell["module"]].relative_to(REPO_ROOT))
        code = subprocess.run([sys.executable, "-m", "pytest", "-m", "campaign", module, "-ra", f"--junitxml={junit}",
                               "-p", "no:cacheprovider"], cwd=REPO_ROOT, env={**os.environ, "CI": "true"}).returncode
        if not junit.exists():
            campaign.record(cell, {"grade": "error", "detail": f"pytest wrote no report (exit {code})"}, started,
                            status="error")
            continue
        outcome = junit_outcome({**junit_summary(junit), "exit": code})
        campaign.record(cell, {**outcome, "where": str(junit)}, started)


RUNNERS: dict[str, Runner] = {"experiments": run_experiments, "releases": run_releases, "bugs": run_bugs,
                              "tests": run_tests}


def junit_summary(path: Path) -> dict:
    """passed, failed, errors, skipped and the failing test ids of one JUnit XML report (the release matrix's
    rows, scripts/kafka_matrix.py, and the tests cell)."""
    import xml.etree.ElementTree as ET
    suites = ET.parse(path).getroot()
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failing = []
    for suite in suites.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failing.append(f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}")
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {"passed": passed, "failed": counts["failures"], "errors": counts["errors"],
            "skipped": counts["skipped"], "failing": failing}


# ---- the state file --------------------------------------------------------------------------------------------
def load_state(directory: Path) -> dict:
    path = Path(directory) / STATE_FILE
    if not path.exists():
        return {"created": time.time(), "cells": {}, "slices": []}
    try:
        state = json.loads(path.read_text())
    except ValueError as exc:
        raise CampaignError(f"{path} is not a campaign's state ({exc}): move it away to start afresh") from None
    if not isinstance(state.get("cells"), dict) or not isinstance(state.get("slices"), list):
        raise CampaignError(f"{path} is not a campaign's state (no cells or slices)")
    return state


def save_state(directory: Path, state: dict, current: dict | None = None) -> None:
    """campaign.json with the current slice in its list (replaced as it grows), written whole then renamed."""
    slices = [s for s in state["slices"] if s["started"] != (current or {}).get("started")]
    state["slices"] = slices + ([current] if current else [])
    state["summary"] = summary(state)
    tmp = Path(directory) / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(Path(directory) / STATE_FILE)


def summary(state: dict) -> dict:
    """Cells per grade, and whether the campaign holds (every cell valid, named or not applicable)."""
    grades = [c.get("grade", "pending") for c in state["cells"].values()]
    return {"cells": len(grades), "by_grade": {g: grades.count(g) for g in GRADES if g in grades},
            "holds": bool(grades) and all(g in GOOD for g in grades)}


def _commit() -> str:
    source = txnlab_source()
    head = source.get("head", "unknown")[:12]
    return head + (" (with local changes)" if source.get("changed") else "")


def _command(argv: list[str] | None = None) -> str:
    """The slice's command as a user types it: `txnlab ...`, whether run as the txnlab script or as
    `python -m txnlab.cli` (whose argv[0] is txnlab/cli.py)."""
    argv = sys.argv if argv is None else argv
    if argv and (argv[0].endswith("txnlab") or Path(argv[0]).parts[-2:] == ("txnlab", "cli.py")):
        return "txnlab " + shlex.join(argv[1:])
    return shlex.join(argv)


# ---- the page, its picture and the summary in Markdown ------------------------------------------------------------
COLOURS = {"valid": "#2da44e", "named": "#bf8700", "n/a": "#d0d7de", "unknown": "#8250df", "invalid": "#cf222e",
           "error": "#57606a", "pending": "#ffffff"}


def grid(state: dict) -> tuple[list[str], list[str], dict[tuple[str, str], dict]]:
    """(experiments, clients, {(experiment, client): cell}) of the experiment cells, the tries of one merged
    (merged_tries)."""
    cells = [c for c in state["cells"].values() if c["part"] == "experiments"]

    def row(cell: dict) -> str:          # an experiment; at transaction.version 1, on KIP-848, a row of its own
        return cell["experiment"] + cell_suffix(cell)
    experiments = sorted({row(c) for c in cells})
    order = list(clients())
    used = sorted({c["client"] for c in cells}, key=lambda c: order.index(c) if c in order else len(order))
    tries: dict[tuple[str, str], list[dict]] = {}
    for c in sorted(cells, key=try_of):
        tries.setdefault((row(c), c["client"]), []).append(c)
    return experiments, used, {key: merged_tries(mine) for key, mine in tries.items()}


def merged_tries(tries: list[dict]) -> dict:
    """One grid cell of a cell's tries: the worst grade of them (GRADES' order), every cause, each try's grade
    (`tries`, when there are several) and detail."""
    if len(tries) == 1:
        return tries[0]
    grades = [t.get("grade", "pending") for t in tries]
    return {"grade": max(grades, key=GRADES.index), "tries": grades,
            "causes": sorted({c for t in tries for c in t.get("causes", [])}),
            "detail": " | ".join(f"try {try_of(t)}: {t.get('detail', '')}" for t in tries if t.get("detail"))}


def cell_text(cell: dict | None) -> str:
    if cell is None:
        return "pending"
    if cell.get("tries"):                # several tries: how many of each grade, worst first
        counts = {g: cell["tries"].count(g) for g in reversed(GRADES) if g in cell["tries"]}
        causes = f": {', '.join(cell['causes'])}" if cell.get("causes") else ""
        return ", ".join(f"{g} {n}/{len(cell['tries'])}" for g, n in counts.items()) + causes
    if cell.get("grade") == "named":
        return f"named: {', '.join(cell.get('causes', []))}"
    if cell.get("grade") == "valid" and cell.get("causes"):
        return f"valid ({', '.join(cell['causes'])})"
    return cell.get("grade", "pending")


def save_picture(state: dict, path: Path) -> Path | None:
    """The experiment grid as a PNG (a square per cell, coloured by its grade); None when there is no such cell."""
    experiments, used, cells = grid(state)
    if not experiments:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2.2 + 1.9 * len(used), 0.9 + 0.42 * len(experiments)))
    for y, name in enumerate(experiments):
        for x, client in enumerate(used):
            cell = cells.get((name, client))
            grade = (cell or {}).get("grade", "pending")
            ax.add_patch(plt.Rectangle((x, y), 0.96, 0.9, color=COLOURS[grade], ec="#8c959f"))
            text = cell_text(cell)
            ax.text(x + 0.48, y + 0.45, text if len(text) <= 26 else text[:25] + "…", ha="center", va="center",
                    fontsize=7, color="white" if grade in ("valid", "invalid", "unknown", "error", "named") else "black")
    ax.set_xlim(0, len(used))
    ax.set_ylim(len(experiments), 0)
    ax.set_xticks([x + 0.48 for x in range(len(used))], used)
    ax.set_yticks([y + 0.45 for y in range(len(experiments))], experiments, fontsize=8)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    held = summary(state)
    ax.set_title(f"txnlab campaign: {held['cells']} cells, " +
                 ", ".join(f"{n} {g}" for g, n in held["by_grade"].items()), fontsize=9, pad=24)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _when(unix: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(unix)) if unix else "-"


def render(state: dict, picture: Path | None) -> str:
    """campaign.html: the verdict, the slices (commit, command, wall time), the grid, the releases, the bugs and
    the tests, each cell's detail on hover and in the tables."""
    import base64
    from html import escape
    from spark_analysis.page import STYLE, badge, table
    held = summary(state)
    head = [f"<h1>txnlab campaign {badge(held['holds'] if held['cells'] else 'unknown')}</h1>",
            "<p>" + escape(", ".join(f"{n} {g}" for g, n in held["by_grade"].items()) or "no cell yet") +
            ". A cell holds when valid, named (a catalogued finding explains it) or not applicable.</p>",
            "<h2>Slices</h2>", table([{"slice": i, "commit": s["commit"], "started": _when(s["started"]),
                                      "ended": _when(s["ended"]),
                                      "wall": f"{((s['ended'] or time.time()) - s['started']) / 60:.0f} min",
                                      "cells": len(s["cells"]), "command": s["command"]}
                                     for i, s in enumerate(state["slices"])])]
    experiments, used, cells = grid(state)
    if experiments:
        rows = []
        for name in experiments:
            tds = "".join(f'<td style="background:{COLOURS[(cells.get((name, c)) or {}).get("grade", "pending")]}33" '
                          f'title="{escape((cells.get((name, c)) or {}).get("detail", ""))}">'
                          f'{escape(cell_text(cells.get((name, c))))}</td>' for c in used)
            rows.append(f"<tr><th>{escape(name)}</th>{tds}</tr>")
        head += ["<h2>Experiments x clients</h2>", "<table><tr><th></th>" +
                 "".join(f"<th>{escape(c)}</th>" for c in used) + "</tr>" + "".join(rows) + "</table>"]
        if picture is not None and picture.exists():
            data = base64.b64encode(picture.read_bytes()).decode()
            head.append(f'<p><img alt="the grid" style="max-width:100%" src="data:image/png;base64,{data}"></p>')
    for part, title in (("experiments", "Every cell"), ("releases", "Kafka releases (the core tests)"),
                        ("bugs", "Catalogued bugs, both sides"), ("tests", "Tests that left the gate")):
        rows = [{"cell": c["id"], "grade": c.get("grade"), "detail": c.get("detail", ""),
                 "wall": f"{c.get('wall_s', 0):.0f} s", "commit": c.get("commit", "-"), "where": c.get("where") or "-"}
                for c in state["cells"].values() if c["part"] == part]
        if rows:
            head += [f"<h2>{title}</h2>", table(rows)]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>txnlab campaign</title><style>{STYLE}"
            f"</style></head><body>{''.join(head)}</body></html>\n")


def write_page(directory: Path, state: dict) -> Path:
    directory = Path(directory)
    picture = save_picture(state, directory / PICTURE_FILE)
    (directory / PAGE_FILE).write_text(render(state, picture))
    return directory / PAGE_FILE


def markdown(state: dict) -> str:
    """The campaign in Markdown (docs/campaign.md's dated sections): its slices, the grid, the other parts."""
    held = summary(state)
    lines = [f"{held['cells']} cells: " + ", ".join(f"{n} {g}" for g, n in held["by_grade"].items()) +
             (" — every cell holds." if held["holds"] else " — NOT every cell holds."), "",
             "| slice | commit | started | wall | cells | command |", "|---|---|---|---|---|---|"]
    for i, s in enumerate(state["slices"]):
        wall = ((s["ended"] or time.time()) - s["started"]) / 60
        lines.append(f"| {i} | {s['commit']} | {_when(s['started'])} | {wall:.0f} min | {len(s['cells'])} | "
                     f"`{s['command']}` |")
    experiments, used, cells = grid(state)
    if experiments:
        lines += ["", "| experiment | " + " | ".join(used) + " |", "|---|" + "---|" * len(used)]
        lines += [f"| {name} | " + " | ".join(cell_text(cells.get((name, c))) for c in used) + " |"
                  for name in experiments]
    others = [c for c in state["cells"].values() if c["part"] != "experiments"]
    if others:
        lines += ["", "| cell | grade | detail | wall | commit |", "|---|---|---|---|---|"]
        lines += [f"| {c['id']} | {c.get('grade')} | {c.get('detail', '')} | {c.get('wall_s', 0):.0f} s | "
                  f"{c.get('commit', '-')} |" for c in others]
    named = sorted({(c["id"], ", ".join(c.get("causes", []))) for c in state["cells"].values()
                    if c.get("grade") != "valid" and c["part"] == "experiments" and c.get("causes")})
    if named:
        lines += ["", "Named causes: " + "; ".join(f"{cid}: {why}" for cid, why in named) + "."]
    return "\n".join(lines) + "\n"
