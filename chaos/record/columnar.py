"""The history's columnar twin: each sealed part-NNNNN.jsonl beside a part-NNNNN.parquet of the same lines, so
that Spark reads the history without parsing JSON (a 10^7-record history is ~1.3 GB of JSON lines).

Owns: the twin's Arrow schema (every operation field a check reads: spark_analysis/schemas.py HISTORY reads
the same names and types, tests/unit/test_columnar.py holds the two together), writing a twin from a sealed
part (pyarrow's JSON reader with that schema, fields it does not name ignored), and what a twin says of its
source in its Parquet metadata (`txnlab.twin`, a JSON object): the JSON part's name (`source`), `bytes` and
`mtime_ns`, its `lines` and `seals` (seal lines) and its `last_line`. The twin holds every line of its part, the seal included, as Spark's JSON reader reads them.
The JSON lines stay the history (human-readable, what every other reader reads); a twin is only a faster form
of them: written after the part was sealed and fsynced, under a temporary name then renamed, never when a line
does not fit the schema exactly (then Spark reads that part's JSON, whose PERMISSIVE parsing counts damaged
lines); a reader uses it only while its source is unchanged (spark_analysis/load.py twin_of), otherwise it
reads the JSON.
Must not: be needed: without pyarrow (the lab's install without verify) no twin is written.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

TWIN_KEY = b"txnlab.twin"
SUFFIX = ".parquet"
# A row group holds about this many bytes of the part's Arrow data (at most ROW_GROUP_ROWS rows): Spark splits a
# Parquet file between tasks only at row groups, and one group of a 10^6-record run's 408 operations (5,000 record
# ids each) was read by one task while the other core waited
ROW_GROUP_BYTES = 8 << 20
ROW_GROUP_ROWS = 256 * 1024


def row_group_rows(rows: int, nbytes: int) -> int:
    """Rows per row group for a table of `rows` rows and `nbytes` bytes: ~ROW_GROUP_BYTES each, at least one row."""
    if rows <= 0 or nbytes <= ROW_GROUP_BYTES:
        return ROW_GROUP_ROWS
    return max(1, min(ROW_GROUP_ROWS, rows * ROW_GROUP_BYTES // nbytes))


def arrow_schema():
    """The operation as the checks read it (spark_analysis/schemas.py HISTORY without its _corrupt_record)."""
    import pyarrow as pa
    write = pa.struct([("topic", pa.string()), ("partition", pa.int32()), ("id", pa.string()), ("input", pa.string())])
    position = pa.struct([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                          ("id", pa.string())])
    value = pa.struct([
        ("attempt", pa.string()), ("producer", pa.string()), ("txn_id", pa.string()), ("group", pa.string()),
        ("abort", pa.bool_()), ("writes", pa.list_(write)), ("offsets", pa.list_(pa.int64())),
        ("inputs", pa.list_(position)), ("commit_offsets", pa.list_(position)), ("error", pa.string()),
        ("fenced", pa.bool_()), ("reason", pa.string()), ("isolation", pa.string()), ("records", pa.list_(position)),
        ("positions", pa.list_(position)),
        ("id", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
        ("tool", pa.string()), ("args", pa.list_(pa.string())),
        ("event", pa.string()), ("application_id", pa.string()), ("sources", pa.list_(pa.string())),
        ("sink", pa.string()), ("counts", pa.string()), ("changelog", pa.string()), ("processed", pa.int64()),
        ("drained", pa.bool_()),
    ])
    return pa.schema([("time", pa.int64()), ("wall", pa.float64()), ("process", pa.string()), ("type", pa.string()),
                      ("f", pa.string()), ("value", value)])


def twin_path(part: Path) -> Path:
    return Path(part).with_suffix(SUFFIX)


def source_stamp(part: Path) -> dict:
    st = Path(part).stat()
    return {"source": Path(part).name, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def write_twin(part: Path) -> Path | None:
    """part-NNNNN.parquet from the sealed part-NNNNN.jsonl; None (and no file) when pyarrow is missing or a line
    does not fit the schema exactly (a damaged line, a field of another type): the JSON part is then read."""
    try:
        import pyarrow.compute as pc
        import pyarrow.json as pj
        import pyarrow.parquet as pq
    except ImportError:
        return None
    part = Path(part)
    stamp = source_stamp(part)
    try:
        table = pj.read_json(part, parse_options=pj.ParseOptions(explicit_schema=arrow_schema(),
                                                                 unexpected_field_behavior="ignore"),
                             read_options=pj.ReadOptions(block_size=16 << 20))
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors (ArrowInvalid, OSError): the JSON stays the only form
        log.info("no columnar twin of %s: %s", part, exc)
        return None
    from chaos.record.history import SEAL_F, SEAL_PROCESS      # history.py writes twins: imported here, not at the top
    is_seal = pc.and_(pc.equal(table["process"], SEAL_PROCESS), pc.equal(table["f"], SEAL_F))
    seals = int(pc.sum(pc.cast(pc.fill_null(is_seal, False), "int64")).as_py() or 0)
    with open(part, "rb") as source:                # its last line (the part's seal), for a reader of the twin alone
        source.seek(max(0, stamp["bytes"] - 4096))
        last = source.read().rstrip(b"\n").rsplit(b"\n", 1)[-1].decode(errors="replace")
    meta = {**stamp, "lines": table.num_rows, "seals": seals, "last_line": last}
    table = table.replace_schema_metadata({TWIN_KEY: json.dumps(meta).encode()})
    out, tmp = twin_path(part), part.with_name(f".{part.stem}.parquet.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_rows(table.num_rows, table.nbytes))
        if source_stamp(part) != stamp:              # the part changed while it was read: no twin
            tmp.unlink(missing_ok=True)
            return None
        os.replace(tmp, out)
    except OSError as exc:
        log.warning("cannot write the columnar twin of %s: %s", part, exc)
        tmp.unlink(missing_ok=True)
        return None
    return out

