"""The corpus tier: recorded real runs and suites (tests/corpus/runs/*.tar.xz, indexed by corpus.yaml, made by
scripts/record_corpus.py) replayed without a cluster. One session fixture unpacks every entry and verifies all their
runs offline from their archives in one `txnlab verify --offline` by spark-submit, with a bootstrap nobody listens
on: nothing is asked of any cluster. A suite's runs are corpus runs of their own, named SUITE/RUN."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

CORPUS = Path(__file__).resolve().parent
INDEX = CORPUS / "corpus.yaml"
RUNS = CORPUS / "runs"
LIVE_REPORT = "live-report.json"          # scripts/record_corpus.py
EXAMPLES = 50                             # examples per check the offline verification keeps


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


@pytest.fixture(scope="session")
def replayed(tmp_path_factory) -> tuple[dict[str, Replayed], subprocess.CompletedProcess]:
    """Every run verified offline in one `txnlab verify` by spark-submit on local[*] (`--remote ''`): the gate's
    proof of that backend (test_verify.py's comparison of it with a Connect server on live runs is the campaign's),
    each report held to the recorded live one."""
    base = tmp_path_factory.mktemp("corpus")
    unpacked = {e["name"]: unpack(e["name"], base) for e in entries()}
    runs = {e["name"]: (e, unpacked[e["suite"]] / e["path"] if "suite" in e else unpacked[e["name"]])
            for e in run_entries()}
    env = {**os.environ, "TXNLAB_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-m", "txnlab.cli", "verify", *(str(d) for _, d in runs.values()),
                           "--offline", "--remote", "", "--examples", str(EXAMPLES)],
                          capture_output=True, text=True, timeout=1500, env=env)
    found = {}
    for name, (entry, run_dir) in runs.items():
        report = run_dir / "verify" / "report.json"
        found[name] = Replayed(entry, run_dir, json.loads((run_dir / LIVE_REPORT).read_text()),
                               json.loads(report.read_text()) if report.exists() else None,
                               unpacked[entry["suite"]] if "suite" in entry else None)
    return found, proc
