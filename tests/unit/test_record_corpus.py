"""scripts/record_corpus.py: what a run keeps in the corpus (its history's JSON parts, run files, archive, fault
journal; never logs, pid records or the history's Parquet twins), the live report packed beside it, the refusal
of a run that is not archived or not verified live, and an entry's command re-run into a scratch folder."""
from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "record_corpus.py"
spec = importlib.util.spec_from_file_location("record_corpus", SCRIPT)
corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corpus)


def a_run(tmp_path: Path, views_from: str | None = "kafka", archived: bool = True) -> Path:
    run = tmp_path / "20261129-000000-x-r1"
    for name in ("history/part-00000.jsonl", "history/part-00000.parquet", "logs/eos-0.log", "pids/eos-0.json",
                 "faults/r1-workloads.json", "spec.json", "end_offsets.json", "group_offsets.json", "cluster.json"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text("{}")
    if archived:
        (run / "archive").mkdir()
        (run / "archive" / "manifest.json").write_text("{}")
        (run / "archive" / "committed.parquet").write_bytes(b"PAR1")
    if views_from is not None:
        (run / "verify").mkdir()
        (run / "verify" / "report.json").write_text(json.dumps({"views_from": views_from}))
    return run


def test_a_run_keeps_what_verifies_it_and_nothing_bulky(tmp_path):
    kept = sorted(name for _, name in corpus.members(a_run(tmp_path)))
    assert kept == ["archive/committed.parquet", "archive/manifest.json", "cluster.json", "end_offsets.json",
                    "faults/r1-workloads.json", "group_offsets.json", "history/part-00000.jsonl", "spec.json"]


def test_the_live_report_is_packed_beside_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "RUNS", tmp_path / "corpus")
    out = corpus.pack("a-run", a_run(tmp_path))
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert "a-run/live-report.json" in names and "a-run/history/part-00000.jsonl" in names
    assert not [n for n in names if "/logs/" in n or "/pids/" in n or n.endswith("part-00000.parquet")]


@pytest.mark.parametrize("views_from,archived", [(None, True), ("archive", True), ("kafka", False)])
def test_a_run_not_archived_or_not_verified_live_is_refused(tmp_path, monkeypatch, views_from, archived):
    monkeypatch.setattr(corpus, "RUNS", tmp_path / "corpus")
    with pytest.raises(SystemExit):
        corpus.pack("a-run", a_run(tmp_path, views_from, archived))
    assert not (tmp_path / "corpus").exists()                 # nothing written


def test_a_command_is_run_again_into_a_scratch_folder():
    argv = ["txnlab", "chaos", "run", "coordinator-kill", "--runs-dir", "runs", "--seed", "3"]
    assert corpus.with_runs_dir(argv, Path("/tmp/s")) == ["txnlab", "chaos", "run", "coordinator-kill", "--seed", "3",
                                                         "--runs-dir", "/tmp/s"]
