"""The corpus of recorded real runs (tests/corpus/, docs/testing.md): pack a finished, archived and live-verified run
into it, re-record every entry from live runs, and keep the corpus within its size budget.

    .venv/bin/python scripts/record_corpus.py add NAME RUN_DIR --what "..." [--finding ID] [--command "..."]
    .venv/bin/python scripts/record_corpus.py add NAME SUITE_DIR --what "..." [--command "..."]   # a demo's suite
    .venv/bin/python scripts/record_corpus.py rerecord [NAME ...]     # each entry's command again, live
    .venv/bin/python scripts/record_corpus.py size                    # the corpus against its budget

A run enters the corpus with what a verification needs and nothing that is derived or bulky: its history
(the JSON parts: their Parquet twins are made again from them), the archived incarnations of topics it deleted, its run files (spec, cluster, end and group
offsets, experiment.json, the fault journal, the history format), its archive (both views, sealed), and its live
verify report as `live-report.json` (the verdict the corpus tests hold the offline one to). Logs and pid records
stay out. The entry in tests/corpus/corpus.yaml says what the run is, the command that made it, when the run was
made, when and at which commit it was packed, the catalogued finding it shows (if any) and its live verdict and
anomalies per check. A suite (a `txnlab demo` or `txnlab bugs run` folder: suite.json and its runs) enters whole:
its suite.json (a bug suite's bug.json too), its live page's JSON twin (`live-suite-report.json`) and each of
its runs as above, with their captured timelines (prometheus.json) so that `txnlab report` builds its page again
(and `txnlab bugs judge` judges a bug suite again); its index entry lists its runs, each with its tag and live verdict (a bug suite's with its side too, and the
finding it shows: the bug on an affected try that reproduced it, or the one its report names).
`rerecord` runs an entry's command (its `--runs-dir` replaced by a scratch folder; a cluster the command needs
must be up, as for any run), verifies the new run against its cluster, and packs it under the same name.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
INDEX = CORPUS / "corpus.yaml"
RUNS = CORPUS / "runs"
BUDGET_BYTES = 30 * 1024 * 1024
LIVE_REPORT = "live-report.json"
LIVE_SUITE_REPORT = "live-suite-report.json"   # a suite's report.json (its page's twin) as built live
KEPT_FILES = ("spec.json", "cluster.json", "end_offsets.json", "group_offsets.json", "experiment.json",
              "history-format.json", "prometheus.json")
SUITE_FILE = "suite.json"          # report/build.py SUITE_FILE
BUG_FILE = "bug.json"              # a bug suite's outcome (report/bugs.py save): `txnlab bugs judge` reads it
KEPT_DIRS = ("history", "archive", "faults", "incarnations")


def members(run_dir: Path) -> list[tuple[Path, str]]:
    """(file, name in the tarball) of what the corpus keeps of a run."""
    found = [(run_dir / f, f) for f in KEPT_FILES if (run_dir / f).exists()]
    for folder in KEPT_DIRS:
        for path in sorted((run_dir / folder).rglob("*")) if (run_dir / folder).is_dir() else []:
            if path.is_file() and not (folder == "history" and path.suffix != ".jsonl"):
                found.append((path, str(path.relative_to(run_dir))))
    return found


def live_report(run_dir: Path) -> Path:
    """The run's live verify report; refuses a run without a sealed archive or a live verification."""
    report = run_dir / "verify" / "report.json"
    if not (run_dir / "archive" / "manifest.json").exists():
        raise SystemExit(f"{run_dir}: no sealed archive (txnlab archive {run_dir} while its cluster is up)")
    if not report.exists() or json.loads(report.read_text()).get("views_from") != "kafka":
        raise SystemExit(f"{run_dir}: no live verify report (txnlab verify {run_dir} against its cluster)")
    return report


def suite_runs(suite_dir: Path) -> list[str]:
    """The run directories of a suite, relative to it (a run that never began has none)."""
    suite = json.loads((suite_dir / SUITE_FILE).read_text())
    found = []
    for entry in suite["runs"]:
        if entry.get("run_dir"):
            run = Path(entry["run_dir"])
            if run.is_absolute():
                raise SystemExit(f"{suite_dir}: run {run} is not named relative to its suite")
            found.append(str(run))
    if not found:
        raise SystemExit(f"{suite_dir}: the suite has no run")
    return found


def pack(name: str, directory: Path) -> Path:
    """RUNS/NAME.tar.xz of a run or a suite (each run's live report as its live-report.json); refuses a run without
    an archive or a live verification."""
    runs = suite_runs(directory) if (directory / SUITE_FILE).exists() else ["."]
    reports = {run: live_report(directory / run) for run in runs}
    RUNS.mkdir(parents=True, exist_ok=True)
    out = RUNS / f"{name}.tar.xz"
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w:xz", preset=9) as tar:
        if runs != ["."]:
            for kept in (SUITE_FILE, BUG_FILE):
                if (directory / kept).exists():
                    tar.add(directory / kept, arcname=f"{name}/{kept}", recursive=False)
            if (directory / "report.json").exists():        # the page's JSON twin as it was built live
                tar.add(directory / "report.json", arcname=f"{name}/{LIVE_SUITE_REPORT}", recursive=False)
        for run, report in reports.items():
            prefix = name if run == "." else f"{name}/{run}"
            for path, arcname in members(directory / run):
                tar.add(path, arcname=f"{prefix}/{arcname}", recursive=False)
            tar.add(report, arcname=f"{prefix}/{LIVE_REPORT}")
    tmp.replace(out)
    return out


def anomalies(report: dict) -> dict:
    """{check: count} of the checks that found anomalies (with their problems where verify counts them)."""
    found = {}
    for check, c in sorted(report["checks"].items()):
        if c.get("count"):
            found[check] = {"count": c["count"], **({"problems": c["problems"]} if c.get("problems") else {})}
    return found


def live_of(run_dir: Path) -> dict:
    """What a run's index entry says of it: its tag and its live verdict, anomalies and record counts."""
    report = json.loads((run_dir / "verify" / "report.json").read_text())
    return {"run_tag": json.loads((run_dir / "spec.json").read_text())["run_tag"],
            "live": {"valid": report["valid"], "anomalies": anomalies(report), "records": report["counts"].get("records")}}


def entry_of(name: str, directory: Path, what: str, finding: str | None, command: str | None) -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    entry = {"name": name, "what": what, "finding": finding, "command": command, "run_made": directory.name[:15],
             "packed": time.strftime("%Y-%m-%d"), "packed_at_commit": commit}
    if (directory / SUITE_FILE).exists():
        tries = bug_tries(directory)
        return {**entry, "suite": {run: {**live_of(directory / run), **tries.get(Path(run).name, {})}
                                   for run in suite_runs(directory)}}
    return {**entry, **live_of(directory), **also_of(directory, finding)}


def causes_of(run_dir: Path) -> list[str]:
    """The catalogued findings a run's report names (the campaign's grade of it: report/campaign.py)."""
    from report import build
    from report.campaign import experiment_outcome
    return experiment_outcome(build.run_report(run_dir, run_dir.name, None, None))["causes"]


def also_of(run_dir: Path, finding: str | None) -> dict:
    """`also`: the other catalogued findings a run's report names beside the one it was recorded for."""
    if finding is None:
        return {}
    others = [c for c in causes_of(run_dir) if c != finding]
    return {"also": others} if others else {}


def bug_tries(suite_dir: Path) -> dict[str, dict]:
    """A bug suite's tries by run name: their side, and the finding a try shows: the bug, when it reproduced it (as
    bug.json judged it), else the one catalogued finding its report names (a sibling bug met under the same
    experiment), else none; `also`: the other catalogued findings its report names beside the bug it reproduced
    (a sibling met in the same try). Empty for a demo's suite."""
    if not (suite_dir / BUG_FILE).exists():
        return {}
    outcome = json.loads((suite_dir / BUG_FILE).read_text())

    def shown(side: str, run: dict) -> dict:
        run_dir = suite_dir / side / Path(run["run_dir"]).name
        if run["reproduced"]:
            return {"finding": outcome["bug"], **also_of(run_dir, outcome["bug"])}
        causes = causes_of(run_dir)
        return {"finding": causes[0] if len(causes) == 1 else None}
    return {Path(r["run_dir"]).name: {"side": side, **shown(side, r)}
            for side, s in outcome["sides"].items() for r in s["runs"]}


def load_index() -> list[dict]:
    return (yaml.safe_load(INDEX.read_text()) or {}).get("runs", []) if INDEX.exists() else []


def save_index(entries: list[dict]) -> None:
    head = ("# The corpus of recorded real runs (docs/testing.md). Made by scripts/record_corpus.py: do not edit the\n"
            "# `live` part by hand, it is what the run's live verification said when it was recorded.\n")
    INDEX.write_text(head + yaml.safe_dump({"runs": sorted(entries, key=lambda e: e["name"])}, sort_keys=False,
                                           width=110, allow_unicode=True))


KEPT_KEYS = ("every_try",)          # what an index entry says by hand, kept when its entry is made again


def add(name: str, run_dir: Path, what: str, finding: str | None, command: str | None) -> None:
    out = pack(name, run_dir)
    before = next((e for e in load_index() if e["name"] == name), {})
    entry = entry_of(name, run_dir, what, finding, command)
    if "suite" in entry:
        entry = {**{k: v for k, v in entry.items() if k != "suite"},
                 **{k: before[k] for k in KEPT_KEYS if k in before}, "suite": entry["suite"]}
    entries = [e for e in load_index() if e["name"] != name] + [entry]
    save_index(entries)
    print(f"{out} ({out.stat().st_size / 1024:.0f} KiB); {size_line()}")


def rerecord(names: list[str]) -> int:
    """Each entry's command again (live), the new run verified against its cluster and packed under its name."""
    entries = {e["name"]: e for e in load_index()}
    for name in names or sorted(entries):
        entry = entries[name]
        if not entry.get("command"):
            print(f"{name}: no command recorded: re-record it by hand (`add`)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="txnlab-corpus-") as scratch:
            argv = with_runs_dir(runnable(shlex.split(entry["command"])), Path(scratch))
            print(f"{name}: {shlex.join(argv)}", file=sys.stderr)
            subprocess.run(argv, cwd=ROOT, check=False)
            made = sorted(p.parent for p in Path(scratch).rglob("history") if p.is_dir())
            if not made:
                print(f"{name}: the command made no run", file=sys.stderr)
                return 2
            run_dir = made[-1]
            subprocess.run([sys.executable, "-m", "txnlab.cli", "verify", str(run_dir)], cwd=ROOT, check=False)
            add(name, run_dir, entry["what"], entry.get("finding"), entry["command"])
    return 0


def runnable(argv: list[str]) -> list[str]:
    """`txnlab ...` as this Python's txnlab (the project's virtualenv need not be on PATH)."""
    return [sys.executable, "-m", "txnlab.cli", *argv[1:]] if argv[:1] == ["txnlab"] else argv


def with_runs_dir(argv: list[str], scratch: Path) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--runs-dir":
            skip = True
            continue
        out.append(arg)
    return [*out, "--runs-dir", str(scratch)]


def corpus_bytes() -> int:
    return sum(p.stat().st_size for p in RUNS.glob("*.tar.xz")) if RUNS.exists() else 0


def size_line() -> str:
    return f"corpus {corpus_bytes() / 1024 / 1024:.1f} MiB of its {BUDGET_BYTES / 1024 / 1024:.0f} MiB budget"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="record_corpus.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    a = sub.add_parser("add")
    a.add_argument("name")
    a.add_argument("run_dir", type=Path)
    a.add_argument("--what", required=True, help="what the run is, in a sentence")
    a.add_argument("--finding", default=None, help="the catalogued bug or named finding it shows")
    a.add_argument("--command", default=None, help="the command line that made it (for rerecord)")
    r = sub.add_parser("rerecord")
    r.add_argument("names", nargs="*")
    sub.add_parser("size")
    args = p.parse_args(argv)
    if args.action == "add":
        add(args.name, args.run_dir, args.what, args.finding, args.command)
        return 0
    if args.action == "rerecord":
        return rerecord(args.names)
    print(size_line())
    return 0 if corpus_bytes() <= BUDGET_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
