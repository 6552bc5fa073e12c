"""The corpus tier: recorded real runs and suites (tests/corpus/runs/*.tar.xz, indexed by corpus.yaml, made by
scripts/record_corpus.py) replayed without a cluster. One session fixture unpacks every entry and verifies their
runs offline from their archives in one `txnlab verify --offline` by spark-submit, with a bootstrap nobody listens
on: nothing is asked of any cluster. A suite's runs are corpus runs of their own, named SUITE/RUN. The gate verifies
one run per recorded shape: a bug suite's try that repeats an earlier try of its side (its verdict, its anomalies,
its finding) keeps its live report, and is verified offline by the campaign's corpus cell (`repeats`)."""
from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.cli import txnlab

CORPUS = Path(__file__).resolve().parent
INDEX = CORPUS / "corpus.yaml"
RUNS = CORPUS / "runs"
LIVE_REPORT = "live-report.json"          # scripts/record_corpus.py
EXAMPLES = 50                             # examples per check the offline verification keeps
REPLAY_TIMEOUT = 1500                     # seconds the offline verification of the gate's runs may take at most


def entries() -> list[dict]:
    """The index: a run's entry, or a suite's (its runs under `suite`: relative path -> their tag and live verdict)."""
    return (yaml.safe_load(INDEX.read_text()) or {}).get("runs", []) if INDEX.exists() else []


def run_entries() -> list[dict]:
    """Every recorded run: a run's entry, and each run of a suite as `SUITE/RUN` (the suite's what and command, the
    run's own tag, live verdict and `campaign` grade; `suite`: the suite's name, `path`: the run's in the suite)."""
    found = []
    for e in entries():
        if "suite" not in e:
            found.append(e)
            continue
        shared = {k: v for k, v in e.items() if k != "suite"}
        for path, run in e["suite"].items():
            found.append({**shared, **run, "name": f"{e['name']}/{Path(path).name}", "suite": e["name"], "path": path})
    return found


def entry_names() -> list[str]:
    return [e["name"] for e in run_entries()]


def repeats() -> list[str]:
    """The bug suites' tries that repeat an earlier try of the same side with the same recorded outcome (live
    verdict, anomalous checks, findings): the gate verifies one try per shape offline (a repeat is the campaign's,
    `test_every_repeated_try_verified_offline_gives_its_live_verdict`); a repeat's verify report is its live one.
    A suite indexed with `every_try: true` has none: each try's findings were learnt from more examples than its
    live verification kept (a history signature's naming depends on the examples it reads)."""
    seen, found = set(), []
    for e in run_entries():
        if "side" not in e or e.get("every_try"):
            continue
        shape = (e["suite"], e["side"], e["live"]["valid"], e.get("finding"), tuple(e.get("also", ())),
                 tuple(sorted(e["live"]["anomalies"])))
        if shape in seen:
            found.append(e["name"])
        seen.add(shape)
    return found


def verified_names() -> list[str]:
    """The runs the gate verifies offline: every run but the repeats."""
    skipped = set(repeats())
    return [n for n in entry_names() if n not in skipped]


def suite_names() -> list[str]:
    return [e["name"] for e in entries() if "suite" in e]


@dataclass
class Replayed:
    entry: dict
    run_dir: Path
    live: dict                    # the report of its live verification when it was recorded
    offline: dict | None          # its report verified offline now (None: the verification wrote none)
    suite_dir: Path | None = None  # the unpacked suite it belongs to


def unpack(name: str, into: Path) -> Path:
    with tarfile.open(RUNS / f"{name}.tar.xz") as tar:
        tar.extractall(into, filter="data")
    return into / name


def unpacked_runs(base: Path, suites: list[str] | None = None) -> dict[str, tuple[dict, Path, Path]]:
    """Every entry (or the named ones) unpacked under base: each run's name -> its entry, its directory and the
    directory of what it was packed in (its suite's, or its own)."""
    unpacked = {e["name"]: unpack(e["name"], base) for e in entries() if suites is None or e["name"] in suites}
    return {e["name"]: (e, unpacked[e["suite"]] / e["path"] if "suite" in e else unpacked[e["name"]],
                        unpacked[e.get("suite", e["name"])])
            for e in run_entries() if e.get("suite", e["name"]) in unpacked}


def verify_offline(run_dirs: list[Path]) -> subprocess.CompletedProcess:
    """One `txnlab verify --offline` of the runs by spark-submit on local[*] (`--remote ''`), its bootstrap one
    nobody listens on."""
    return txnlab("verify", *(str(d) for d in run_dirs), "--offline", "--remote", "", "--examples", str(EXAMPLES),
                  timeout=REPLAY_TIMEOUT, env={"TXNLAB_KAFKA_BOOTSTRAP": "127.0.0.1:9"})


@pytest.fixture(scope="session")
def replayed(tmp_path_factory) -> tuple[dict[str, Replayed], subprocess.CompletedProcess]:
    """The gate's runs verified offline in one `txnlab verify` by spark-submit on local[*]: the gate's proof of that
    backend (test_verify.py's comparison of it with a Connect server on live runs is the campaign's), each report
    held to the recorded live one; a repeat (`repeats`) keeps its live report as its verify report."""
    runs = unpacked_runs(tmp_path_factory.mktemp("corpus"))
    skipped = set(repeats())
    for name in skipped:
        report = runs[name][1] / "verify" / "report.json"
        report.parent.mkdir(exist_ok=True)
        shutil.copyfile(runs[name][1] / LIVE_REPORT, report)
    proc = verify_offline([d for name, (_, d, _) in runs.items() if name not in skipped])
    found = {}
    for name, (entry, run_dir, packed) in runs.items():
        report = run_dir / "verify" / "report.json"
        found[name] = Replayed(entry, run_dir, json.loads((run_dir / LIVE_REPORT).read_text()),
                               json.loads(report.read_text()) if report.exists() and name not in skipped else None,
                               packed if "suite" in entry else None)
    return found, proc
