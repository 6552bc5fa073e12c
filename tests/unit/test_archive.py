"""A run's archive (chaos/record/archive.py) and what an offline verification trusts of it
(spark_analysis/evidence.py check_archive, load.read_archived_view): a sealed archive of both views is whole and
reads back as the rows Spark's Kafka source gives (ids from headers, values, nulls); an archive that is missing,
unsealed, cut, changed, miscounted, read short of its end, read to other ends than the run recorded, lacking a
partition, or taken after records were deleted makes the evidence incomplete, each with its own reason.
Messages here are confluent-kafka's Message as the archive reads them: their accessors only."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.record.archive import ARCHIVE_DIR, MANIFEST, seal_archive
from spark_analysis import load
from spark_analysis.evidence import Evidence, check_archive

TOPIC = "r1-t"
ENDS = {TOPIC: {"0": {"hwm": 4, "lso": 3}, "1": {"hwm": 0, "lso": 0}}}


class Msg:
    def __init__(self, offset: int, value: bytes | None, headers=None, partition: int = 0, key: bytes | None = None):
        self._offset, self._value, self._headers, self._partition, self._key = offset, value, headers, partition, key

    def topic(self): return TOPIC
    def partition(self): return self._partition
    def offset(self): return self._offset
    def key(self): return self._key
    def value(self): return self._value
    def headers(self): return self._headers
    def timestamp(self): return (1, 1_700_000_000_000 + self._offset)
    def error(self): return None


def ids(n: int) -> list:
    return [("txnlab.id", f"r1.txp-0.0.{n}".encode()), ("txnlab.attempt", b"r1.txp-0.0"), ("txnlab.producer", b"txp-0")]


# the read_uncommitted view holds 4 records, the read_committed one 3 (the last one aborted): as a consumer sees them
VIEWS = {"read_uncommitted": [Msg(0, b'{"id": "x"}', ids(0)), Msg(1, None, ids(1), key=b"k"), Msg(2, b"plain"),
                              Msg(3, b"aborted", ids(3))],
         "read_committed": [Msg(0, b'{"id": "x"}', ids(0)), Msg(1, None, ids(1), key=b"k"), Msg(2, b"plain")]}


def reader(short: dict | None = None):
    """read(isolation, ends) as the archive asks: one batch, and each partition's position at its end (or at
    `short[isolation]` for partition 0: the read stopped there)."""
    def read(isolation, ends):
        reached = {(t, p): e for t, parts in ends.items() for p, e in parts.items()}
        if short and isolation in short:
            reached[(TOPIC, 0)] = short[isolation]
        yield VIEWS[isolation], reached
    return read


def archived(tmp_path: Path, short: dict | None = None, start: int = 0) -> Path:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    seal_archive(run, ENDS, lambda: {TOPIC: {0: start, 1: 0}}, reader(short), "test")
    return run


def gaps(run: Path, ends: dict = ENDS) -> list[str]:
    evidence = Evidence(end_offsets=ends)
    check_archive(run, evidence)
    return evidence.gaps


def manifest_of(run: Path) -> dict:
    return json.loads((run / ARCHIVE_DIR / MANIFEST).read_text())


def test_a_sealed_archive_is_whole(tmp_path):
    run = archived(tmp_path)
    assert gaps(run) == []
    views = manifest_of(run)["views"]
    assert views["committed"]["rows"] == 3 and views["uncommitted"]["rows"] == 4
    assert views["committed"]["partitions"][TOPIC]["0"] == {"end": 3, "rows": 3, "reached": 3}
    assert not list(run.glob(".archive-*"))                     # no work folder left


def test_archived_rows_read_back_as_kafka_rows(spark, tmp_path):
    run = archived(tmp_path)
    raw = load.read_archived_view(spark, run, "read_uncommitted")
    assert raw.columns == list(load.KAFKA_COLUMNS)
    rows = {r["offset"]: r for r in load.records_of(raw, "uncommitted", run_tag="r1").collect()}
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[0]["id"] == "r1.txp-0.0.0" and rows[0]["kind"] == "txnlab" and rows[0]["producer"] == "txp-0"
    assert rows[1]["text"] is None and rows[1]["key"] == "k"          # a null value stays null
    assert rows[2]["kind"] == "foreign" and rows[2]["text"] == "plain"  # no headers: null, not an empty list
    committed = load.read_archived_view(spark, run, "read_committed")
    assert sorted(r["offset"] for r in committed.collect()) == [0, 1, 2]


def test_an_archive_made_again_replaces_the_old_one_whole(tmp_path):
    run = archived(tmp_path)
    first = manifest_of(run)["written_at"]
    archived(tmp_path)
    assert manifest_of(run)["written_at"] > first and gaps(run) == []


def test_no_archive(tmp_path):
    (tmp_path / "run").mkdir()
    assert gaps(tmp_path / "run") == ["the run has no archive (archive/): archive it while its cluster is up "
                                      "(txnlab archive RUN), or verify it against the cluster"]


def test_an_unsealed_archive(tmp_path):
    run = archived(tmp_path)
    (run / ARCHIVE_DIR / MANIFEST).unlink()
    assert gaps(run) == ["archive/ has no manifest.json: the archive was never sealed"]


def test_a_manifest_not_json_or_of_another_format(tmp_path):
    run = archived(tmp_path)
    (run / ARCHIVE_DIR / MANIFEST).write_text("{")
    assert gaps(run)[0].startswith("manifest.json is not JSON")
    (run / ARCHIVE_DIR / MANIFEST).write_text(json.dumps({"format": 9}))
    assert gaps(run) == ["archive/manifest.json is not an archive manifest of format 1"]


@pytest.mark.parametrize("damage", ["cut", "changed", "missing"])
def test_a_view_file_cut_changed_or_missing(tmp_path, damage):
    run = archived(tmp_path)
    path = run / ARCHIVE_DIR / "committed.parquet"
    data = path.read_bytes()
    if damage == "cut":
        path.write_bytes(data[:-10])
    elif damage == "changed":
        path.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    else:
        path.unlink()
    found = gaps(run)
    assert len(found) == 1, found
    expected = "the archive's committed view (committed.parquet) is missing" if damage == "missing" else \
        "the archive's committed.parquet is cut or changed"
    assert found[0].startswith(expected), found


def test_a_miscounted_manifest(tmp_path):
    run = archived(tmp_path)
    manifest = manifest_of(run)
    manifest["views"]["uncommitted"]["partitions"][TOPIC]["0"]["rows"] = 3
    (run / ARCHIVE_DIR / MANIFEST).write_text(json.dumps(manifest))
    assert gaps(run) == ["the archive's uncommitted.parquet is miscounted: 4 rows in the file, the manifest says 4 "
                         "in all and 3 by partition"]


def test_a_read_that_stopped_before_its_end(tmp_path):
    run = archived(tmp_path, short={"read_committed": 2})
    assert gaps(run) == [f"{TOPIC}-0: the archive's committed view was read only to offset 2, not to its end 3"]


def test_ends_other_than_the_runs_and_a_partition_it_lacks(tmp_path):
    run = archived(tmp_path)
    other = {TOPIC: {"0": {"hwm": 5, "lso": 3}, "1": {"hwm": 0, "lso": 0}, "2": {"hwm": 0, "lso": 0}}}
    assert gaps(run, other) == [
        f"{TOPIC}-2: the archive's committed view lacks it",
        f"{TOPIC}-0: the archive's uncommitted view was read to 4, the run recorded HWM 5",
        f"{TOPIC}-2: the archive's uncommitted view lacks it"]


def test_records_deleted_before_the_archive(tmp_path):
    run = archived(tmp_path, start=2)
    assert gaps(run) == [f"{TOPIC}-0: the log started at 2 when it was archived: records were deleted"]
