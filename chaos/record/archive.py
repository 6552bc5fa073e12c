"""A run's archive: what verify reads from the cluster, stored in the run directory, so that the run outlives
its cluster (`txnlab verify RUN --offline`, docs/verify.md "Runs that outlive their cluster").

Owns: reading both views of the run's topics (end_offsets.json's) from offset 0 up to the recorded ends,
read_committed to the LSO and read_uncommitted to the HWM, each as a Kafka consumer of that isolation level
sees it (aborted records and markers skipped by read_committed; nothing at or past the end kept), and storing
them as `archive/committed.parquet` and `archive/uncommitted.parquet` in the rows Spark's Kafka source gives
(key, value, topic, partition, offset, timestamp, timestampType, headers: spark_analysis/load.py reads them as
it reads Kafka); then `archive/manifest.json`, written last (its presence seals the archive): per view its
file's sha256, bytes and rows, and per partition the end it was read to, the rows it holds, the position the
read reached and where the log started, asked after the views were read (records deleted before or while they
were read show there). Files are written under temporary names and renamed; an archive made again replaces
the old one only once complete.
A topic deleted during the run (the recreate-topic fault) leaves its last incarnation's records, archived the same
way before the deletion, in `incarnations/<topic>~<n>/` (write_incarnation; its manifest also says what the fault
saw: topic ids, the consuming group's offsets, the deletion confirmed).
What the archive does not hold is everything else verify reads: those are the run's own files already
(history, end_offsets.json, group_offsets.json, spec.json).
Must not: judge anything (spark_analysis/evidence.py decides whether an archive is complete), or keep more
than a batch of records in memory.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

from confluent_kafka import Consumer, TopicPartition

from cluster.access.connection import ConnectionSettings
from cluster.access.errors import TxnlabError
from cluster.access.reads import QUIET, log_start_offsets, partition_offsets
from cluster.access.waiting import Deadline

ARCHIVE_DIR = "archive"
INCARNATIONS_DIR = "incarnations"      # RUN/incarnations/<topic>~<n>/: a deleted topic's records (write_incarnation)
MANIFEST = "manifest.json"
FORMAT = 1
# view -> (isolation level, which recorded end bounds it): spark_analysis/load.py VIEWS reads the same
VIEWS = {"committed": ("read_committed", "lso"), "uncommitted": ("read_uncommitted", "hwm")}
BATCH = 20_000                       # records per Parquet row group (and at most in memory)
IDLE_S = 60.0                        # a view's read that reaches no further for this long stops; the manifest says where
# confluent-kafka's timestamp types -> Kafka's (Spark's timestampType: 0 CreateTime, 1 LogAppendTime)
TIMESTAMP_TYPE = {1: 0, 2: 1}


class ArchiveError(TxnlabError):
    """The run cannot be archived (no end offsets recorded): nothing written."""


def arrow_schema():
    """The rows of Spark's Kafka source (includeHeaders), as spark_analysis/load.py reads them."""
    import pyarrow as pa
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                      ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC")),
                      ("timestampType", pa.int32()), ("headers", pa.list_(header))])


def archive_dir(run_dir: Path) -> Path:
    return Path(run_dir) / ARCHIVE_DIR


def recorded_ends(run_dir: Path) -> dict[str, dict[str, dict[str, int]]]:
    path = Path(run_dir) / "end_offsets.json"
    if not path.exists():
        raise ArchiveError(f"{path} is missing: the run never recorded where its topics end (it did not finish)")
    ends = json.loads(path.read_text())
    if not ends:
        raise ArchiveError(f"{path} records no topic: nothing to archive")
    return ends


def write_archive(run_dir: Path, conn: ConnectionSettings, progress: Callable[[str], None] = lambda m: None) -> Path:
    """Read both views of the run's topics to their recorded ends into RUN/archive/ (replacing an older archive
    only once this one is sealed); its manifest's path."""
    ends = recorded_ends(run_dir)
    hwms = {t: partition_offsets(conn, t, sorted(int(p) for p in parts), committed=False) for t, parts in ends.items()}

    def read(isolation: str, view: dict[str, dict[int, int]]):
        # a partition that now ends before its recorded end (truncated, re-created) is read as far as it goes: no
        # wait for what is not there; the manifest then says where the read stopped
        return read_view(conn, isolation, {t: {p: min(e, hwms[t][p]) for p, e in parts.items()}
                                           for t, parts in view.items()})

    def starts() -> dict[str, dict[int, int]]:
        return {t: log_start_offsets(conn, t, sorted(int(p) for p in parts)) for t, parts in ends.items()}
    return seal_archive(run_dir, ends, starts, read, conn.describe(), progress)


Reader = Callable[[str, dict], Iterable[tuple[list, dict]]]


def seal_archive(run_dir: Path, ends: dict, starts: Callable[[], dict[str, dict[int, int]]], read: Reader,
                 source: str, progress: Callable[[str], None] = lambda m: None, final: Path | None = None,
                 extra: dict | None = None) -> Path:
    """Both views' files from `read(isolation, ends)` (batches of messages with the position each partition
    reached), then the manifest with `starts()` (where each log starts, asked once the views are read) and
    `extra`'s fields, in a folder of its own renamed to `final` (RUN/archive/ by default) once complete."""
    run_dir = Path(run_dir)
    final = final or archive_dir(run_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = final.parent / f".{final.name}-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    try:
        views = {}
        for view, (isolation, end) in VIEWS.items():
            began, bounds = time.monotonic(), view_ends(ends, end)
            views[view] = write_view(work, view, isolation, bounds, read(isolation, bounds))
            progress(f"archive: {view} view, {views[view]['rows']} records ({time.monotonic() - began:.1f}s)")
        manifest = {"format": FORMAT, "written_at": time.time(), "cluster": source, "views": views,
                    "log_start": {t: {str(p): o for p, o in s.items()} for t, s in starts().items()},
                    **(extra or {})}
        _write_atomic(work / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        old = final.parent / f".{final.name}-old-{uuid.uuid4().hex[:8]}"
        if final.exists():
            final.rename(old)
        work.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        return final / MANIFEST
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_incarnation(run_dir: Path, conn: ConnectionSettings, topic: str, alias: str, ends: dict[str, dict[str, int]],
                      extra: dict, progress: Callable[[str], None] = lambda m: None) -> Path:
    """An incarnation of `topic` about to be deleted (chaos/nemesis/recreate_topic.py), archived whole while nothing
    writes it: both views to `ends` ({partition: {lso, hwm}}) into RUN/incarnations/<alias>/, in the archive's
    format, its manifest with `extra` (the fault's facts: topic ids, the group's offsets); its manifest's path.
    The records keep their topic's name; spark_analysis/load.py reads them under `alias`."""
    parts = sorted(int(p) for p in ends)

    def read(isolation: str, view: dict[str, dict[int, int]]):
        return read_view(conn, isolation, view, idle=20.0)
    return seal_archive(run_dir, {topic: ends}, lambda: {topic: log_start_offsets(conn, topic, parts)}, read,
                        conn.describe(), progress, final=incarnation_dir(run_dir, alias),
                        extra={"topic": topic, "alias": alias, **extra})


def incarnation_dir(run_dir: Path, alias: str) -> Path:
    return Path(run_dir) / INCARNATIONS_DIR / alias


def mark_incarnation(manifest: Path, **facts) -> None:
    """Add facts to an incarnation's manifest (its deletion, once every broker confirmed it)."""
    data = json.loads(Path(manifest).read_text())
    _write_atomic(Path(manifest), json.dumps({**data, **facts}, indent=1, sort_keys=True) + "\n")


def view_ends(ends: dict, end: str) -> dict[str, dict[int, int]]:
    return {t: {int(p): o[end] for p, o in parts.items()} for t, parts in ends.items()}


def write_view(folder: Path, view: str, isolation: str, ends: dict[str, dict[int, int]],
               batches: Iterable[tuple[list, dict]]) -> dict:
    """One view's Parquet file from its batches, and what the manifest says of it."""
    import pyarrow.parquet as pq
    name = f"{view}.parquet"
    tmp = folder / f".{name}.tmp"
    partitions = {t: {str(p): {"end": e, "rows": 0, "reached": 0} for p, e in parts.items()} for t, parts in ends.items()}
    rows = 0
    with pq.ParquetWriter(tmp, arrow_schema(), compression="zstd") as writer:
        for batch, reached in batches:
            for msg in batch:
                partitions[msg.topic()][str(msg.partition())]["rows"] += 1
            rows += len(batch)
            if batch:
                writer.write_table(to_table(batch))
            for (topic, p), at in reached.items():
                partitions[topic][str(p)]["reached"] = at
    os.replace(tmp, folder / name)
    data = (folder / name).read_bytes()
    return {"file": name, "isolation": isolation, "rows": rows, "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "partitions": partitions}


def read_view(conn: ConnectionSettings, isolation: str, ends: dict[str, dict[int, int]], idle: float = IDLE_S):
    """Batches of the records of every partition below its end, as (messages, {(topic, p): position reached}),
    until every partition's position reaches its end, or no position moved for `idle` seconds (the last
    positions then say where the read stopped)."""
    consumer = Consumer(conn.confluent(**QUIET, **{
        "group.id": f"txnlab-archive-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.partition.eof": False, "isolation.level": isolation, "auto.offset.reset": "earliest"}))
    try:
        pending = {(t, p): e for t, parts in ends.items() for p, e in parts.items() if e > 0}
        reached = {(t, p): 0 for t, parts in ends.items() for p in parts}
        consumer.assign([TopicPartition(t, p, 0) for t, p in pending])
        deadline = Deadline(idle)
        while pending and not deadline.expired:
            batch = [m for m in consumer.consume(BATCH, 0.5) if _keep(m, pending)]
            before = dict(reached)
            for tp in consumer.position([TopicPartition(t, p) for t, p in pending]):
                if tp.offset >= 0:
                    reached[(tp.topic, tp.partition)] = min(tp.offset, pending[(tp.topic, tp.partition)])
            if reached != before:
                deadline = Deadline(idle)
            pending = {k: e for k, e in pending.items() if reached[k] < e}
            yield batch, dict(reached)
    finally:
        consumer.close()


def _keep(msg, pending: dict) -> bool:
    """A record below its partition's end (an error event is dropped: the position says what was read)."""
    if msg.error() is not None:
        return False
    end = pending.get((msg.topic(), msg.partition()))
    return end is not None and msg.offset() < end


def to_table(batch: list):
    import pyarrow as pa
    columns: dict[str, list] = {"key": [], "value": [], "topic": [], "partition": [], "offset": [], "timestamp": [],
               "timestampType": [], "headers": []}
    for m in batch:
        kind, ts = m.timestamp()
        columns["key"].append(m.key())
        columns["value"].append(m.value())
        columns["topic"].append(m.topic())
        columns["partition"].append(m.partition())
        columns["offset"].append(m.offset())
        columns["timestamp"].append(ts if kind in TIMESTAMP_TYPE else None)
        columns["timestampType"].append(TIMESTAMP_TYPE.get(kind))
        hs = m.headers()
        columns["headers"].append([{"key": k, "value": v} for k, v in hs] if hs is not None else None)
    return pa.Table.from_pydict(columns, schema=arrow_schema())


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
