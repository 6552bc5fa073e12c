"""The corpus tier: recorded real runs (tests/corpus/runs/*.tar.xz, indexed by corpus.yaml, made by
scripts/record_corpus.py) replayed without a cluster. One session fixture unpacks every run and verifies them all
offline from their archives in one `txnlab verify --offline` (the session's Spark Connect server, tests/conftest.py,
or spark-submit when it could not start), with a bootstrap nobody listens on: nothing is asked of any cluster."""
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


def entries() -> list[dict]:
    return (yaml.safe_load(INDEX.read_text()) or {}).get("runs", []) if INDEX.exists() else []


def entry_names() -> list[str]:
    return [e["name"] for e in entries()]


@dataclass
class Replayed:
    entry: dict
    run_dir: Path
    live: dict                    # the report of its live verification when it was recorded
    offline: dict | None          # its report verified offline now (None: the verification wrote none)


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
    runs = {e["name"]: (e, unpack(e["name"], base)) for e in entries()}
    env = {**os.environ, "TXNLAB_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-m", "txnlab.cli", "verify", *(str(d) for _, d in runs.values()),
                           "--offline", "--remote", "", "--examples", "50"],
                          capture_output=True, text=True, timeout=1500, env=env)
    found = {}
    for name, (entry, run_dir) in runs.items():
        report = run_dir / "verify" / "report.json"
        found[name] = Replayed(entry, run_dir, json.loads((run_dir / LIVE_REPORT).read_text()),
                               json.loads(report.read_text()) if report.exists() else None)
    return found, proc
