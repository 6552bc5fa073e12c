"""The history's columnar twin (chaos/record/columnar.py): one per sealed part, holding its lines as Spark's JSON
reader reads them, none for a part with a line that does not fit; a reader takes it only while its part is
unchanged (spark_analysis/load.py twin_of); the twin's schema and Spark's HISTORY are one contract."""
from __future__ import annotations

import json
import os

import pyarrow.parquet as pq

from chaos.record.columnar import arrow_schema, write_twin
from chaos.record.history import HistoryWriter
from spark_analysis.load import history_parts, twin_of


def test_the_twin_schema_is_sparks_history_schema():
    from pyspark.sql.pandas.types import to_arrow_schema
    from spark_analysis.schemas import HISTORY, HISTORY_COLUMNS
    assert to_arrow_schema(HISTORY_COLUMNS).equals(arrow_schema())
    assert [f.name for f in HISTORY.fields] == [*(f.name for f in HISTORY_COLUMNS.fields), "_corrupt_record"]


def written(tmp_path, ops: int, roll: int):
    writer = HistoryWriter(tmp_path, roll_lines=roll)
    for i in range(ops):
        writer.record(f"txp-{i % 2}", "invoke" if i % 2 == 0 else "ok", "txn",
                      {"attempt": f"a{i // 2}", "writes": [{"topic": "t", "partition": i % 3, "id": f"r.{i}"}],
                       "offsets": [i], "stack": ["not in the schema: ignored"]})
    writer.close()
    return history_parts(tmp_path)


def test_every_sealed_part_gets_a_twin_of_all_its_lines_seal_included(tmp_path):
    parts = written(tmp_path, 7, roll=3)
    assert [p.name for p in parts] == ["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]
    for part in parts:
        twin = twin_of(part)
        lines = [json.loads(line) for line in part.read_text().splitlines()]
        assert twin is not None and twin["rows"] == twin["lines"] == len(lines) and twin["seals"] == 1
        assert json.loads(twin["last_line"]) == lines[-1] and lines[-1]["f"] == "seal"
        rows = pq.read_table(twin["path"]).to_pylist()
        assert [(r["time"], r["process"], r["type"], r["f"]) for r in rows] == \
            [(o["time"], o["process"], o["type"], o["f"]) for o in lines]
        for row, line in zip(rows, lines):
            if line["f"] == "txn":
                assert row["value"]["attempt"] == line["value"]["attempt"]
                assert row["value"]["writes"] == [w | {"input": None} for w in line["value"]["writes"]]
                assert row["value"]["offsets"] == line["value"]["offsets"]


def test_a_part_changed_after_its_twin_is_read_as_json(tmp_path):
    part = written(tmp_path, 4, roll=100)[0]
    assert twin_of(part) is not None
    stat = part.stat()
    with open(part, "ab") as out:                     # a line appended: another size
        out.write(b'{"time": 1}\n')
    assert twin_of(part) is None
    part.write_bytes(part.read_bytes()[:stat.st_size])
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))        # the same bytes, touched: still stale
    assert twin_of(part) is None
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert twin_of(part) is not None
    part.with_suffix(".parquet").write_bytes(b"not parquet")
    assert twin_of(part) is None


def test_a_part_with_a_line_that_does_not_fit_gets_no_twin(tmp_path):
    history = tmp_path / "history"
    history.mkdir()
    for name, line in (("damaged", b'{"time": 1, "process": "p", "type": "ok", "f": "txn"\n'),
                       ("other-type", b'{"time": 1, "process": "p", "type": "ok", "f": "txn", "value": {"attempt": 5}}\n'),
                       ("fits", b'{"time": 1, "process": "p", "type": "ok", "f": "txn", "value": {"attempt": "5"}}\n')):
        part = history / f"{name}.jsonl"
        part.write_bytes(line)
        assert (write_twin(part) is not None) == (name == "fits"), name
        assert part.with_suffix(".parquet").exists() == (name == "fits")
    assert not list(history.glob(".*tmp"))


def test_a_large_part_is_split_into_row_groups_of_about_row_group_bytes(tmp_path, monkeypatch):
    """Spark splits a Parquet file between tasks only at its row groups: a part of big operations (thousands of
    record ids each) gets groups of ~ROW_GROUP_BYTES, not one; a small part stays one group."""
    from chaos.record import columnar
    writer = HistoryWriter(tmp_path / "big")
    for i in range(40):
        writer.record("txp-0", "invoke", "txn", {"attempt": f"a{i}", "writes": [
            {"topic": "t", "partition": j % 6, "id": f"r.txp-0.{i}.{j}"} for j in range(2_000)]})
    writer.close()
    [part] = history_parts(tmp_path / "big")
    monkeypatch.setattr(columnar, "ROW_GROUP_BYTES", 256 << 10)
    meta = pq.read_metadata(columnar.write_twin(part))
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    assert meta.num_rows == 42 and len(groups) >= 6, [g.num_rows for g in groups]   # the format line, 40, the seal
    assert max(g.total_byte_size for g in groups) <= 2 * columnar.ROW_GROUP_BYTES
    [small] = written(tmp_path / "small", 7, roll=100)
    assert pq.read_metadata(twin_of(small)["path"]).num_row_groups == 1
    assert columnar.row_group_rows(10, columnar.ROW_GROUP_BYTES // 2) == columnar.ROW_GROUP_ROWS
    assert columnar.row_group_rows(10, columnar.ROW_GROUP_BYTES * 100) == 1


def test_a_large_runs_columnar_history_is_read_where_needed_and_never_kept(tmp_path, spark):
    """job.history_frame: a large run whose parts all have current twins is read straight from them by each query
    (not kept: a kept copy wrote and read back every record id); a small run's history, or one with a part Spark
    must read as JSON, is kept (and let go after)."""
    from pyspark import StorageLevel
    from spark_analysis import job, load
    parts = written(tmp_path, 6, roll=4)
    lines = sum(len(p.read_text().splitlines()) for p in parts)
    assert len(parts) == 2 and load.history_is_columnar(tmp_path)
    ops, kept = job.history_frame(spark, tmp_path, 10_000_000)
    assert not kept and ops.storageLevel == StorageLevel(False, False, False, False, 1) and ops.count() == lines
    ops, kept = job.history_frame(spark, tmp_path, 5_000)
    assert kept and ops.storageLevel.useDisk and ops.count() == lines
    load.let_go(ops)
    with open(parts[1], "ab") as out:                 # a part changed after its twin: its JSON is read
        out.write(b'{"time": 1}\n')
    assert not load.history_is_columnar(tmp_path)
    ops, kept = job.history_frame(spark, tmp_path, 10_000_000)
    assert kept and ops.count() == lines + 1
    load.let_go(ops)
    assert not load.history_is_columnar(tmp_path / "nothing")
