"""Loading a run for the checks: its history (JSON lines, or their columnar twins) and its topics, straight from
Kafka or (`--offline`) from the run's archive of them.

Owns: reading <run>/history/*.jsonl with the explicit schema (PERMISSIVE: a damaged line becomes a
`_corrupt_record`, counted, never a crash), or instead a part's current columnar twin (twin_of); the frames derived from it (writes, acknowledged offsets, observed reads,
consumer polls and seeks, the copiers' topics); reading a topic in both isolation levels with Spark's Kafka connector,
bounded by the end offsets the run recorded (read_committed to the LSO, read_uncommitted to the HWM), or the
same rows from the run's archive (chaos/record/archive.py wrote them; evidence.check_archive says whether whole);
turning Kafka rows into the `records` frame (schemas.py). All of it lazy: nothing record-sized reaches
the driver.
Must not: decide what is an anomaly (checks.py), or import chaos/ (what the siblings share travels as
data: the history and the record values).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_analysis.schemas import HISTORY, HISTORY_COLUMNS, RECORD_VALUE, TRANSACTIONAL_F

HEADER_ID, HEADER_ATTEMPT, HEADER_PRODUCER = "txnlab.id", "txnlab.attempt", "txnlab.producer"   # chaos/record/ids.py
HEADER_INPUT = "txnlab.input"
STORM_F = "produce"                   # the storm's idempotent sends and the VerifiableProducer's (java_copier.py)
# a record id of run R: "R.<process>.<attempt number>.<index>" (chaos/record/ids.py); any run when R is not known
ID_PATTERN = r"^{run}\.[A-Za-z0-9_-]+\.[0-9]+\.[0-9]+$"
ANY_RUN = "[A-Za-z0-9-]+"
COPIER_TOOL = "TransactionalMessageCopier"
PRODUCER_TOOL = "VerifiableProducer"


# ---- frames read more than once ---------------------------------------------------------------------------
def is_connect(obj) -> bool:
    """A Spark Connect session or frame (no SparkContext on this side)."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def keep(df: DataFrame, level, checkpoint: bool = True) -> DataFrame:
    """`df` computed once for the queries that read it: persisted at `level`; on Spark Connect, for a small run
    (`checkpoint`), a lazy local checkpoint at `level` instead, which the queries then name by an id (a Connect
    client sends a persisted frame's whole plan again in every query that reads it, and the server analyses it
    again each time: seconds on a small run, little on a large one). A checkpoint's blocks are freed only when
    the server's JVM collects it after the session ends, a persisted frame's by `let_go`: a Connect server
    checkpointing a 10^6-record run's frames ran out of memory in its checks (and the next verification in
    its history read), where persisted ones are the classic job's way at every size.
    Use the frame returned; `let_go` it when done."""
    if checkpoint and is_connect(df):
        return df.localCheckpoint(eager=False, storageLevel=level)
    return df.persist(level)


def keep_all(frames: list[DataFrame], level, checkpoint: bool = True) -> list[DataFrame]:
    """keep() of each frame; checkpoints on Spark Connect all at once: a lazy checkpoint is a round trip in which
    the server plans the frame (and, with adaptive execution, runs the shuffles under it), so the frames'
    round trips overlap from a thread each."""
    if len(frames) < 2 or not checkpoint or not is_connect(frames[0]):
        return [keep(df, level, checkpoint) for df in frames]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(frames), thread_name_prefix="keep") as pool:
        return list(pool.map(lambda df: keep(df, level), frames))


def let_go(df: DataFrame) -> None:
    """Free what keep() holds (a shared Connect server serves the next run)."""
    df.unpersist()


# ---- the history --------------------------------------------------------------------------------------
TWIN_KEY = b"txnlab.twin"          # chaos/record/columnar.py: the twin's Parquet metadata, about its source part


def history_parts(run_dir: Path) -> list[Path]:
    return sorted((Path(run_dir) / "history").glob("part-*.jsonl"))


def twin_of(part: Path) -> dict | None:
    """The columnar twin of a JSON part (chaos/record/columnar.py: part-NNNNN.parquet beside it) when it was made from
    the part as it is now (its name, size and mtime): its metadata (lines and seals it holds, ...) with `path`
    and `rows` (the Parquet footer's count, which must equal its `lines`); None: read the JSON (no twin, an
    unreadable or stale one)."""
    twin = Path(part).with_suffix(".parquet")
    try:
        import pyarrow.parquet as pq
        meta = pq.read_metadata(twin)
        said = json.loads((meta.metadata or {}).get(TWIN_KEY, b"{}"))
        st = Path(part).stat()
    except Exception:  # noqa: BLE001 - no twin, or one that cannot be read: the JSON is read
        return None
    if (said.get("source"), said.get("bytes"), said.get("mtime_ns")) != (Path(part).name, st.st_size, st.st_mtime_ns) \
            or said.get("lines") != meta.num_rows:
        return None
    return {**said, "path": str(twin), "rows": meta.num_rows}


def history_is_columnar(run_dir: Path) -> bool:
    """Every part of the history has a current columnar twin (Spark reads no JSON of it)."""
    parts = history_parts(run_dir)
    return bool(parts) and all(twin_of(part) is not None for part in parts)


def read_history(spark: SparkSession, run_dir: Path) -> DataFrame:
    """Every line of every part: from its columnar twin where it has a current one (no JSON parsing), else
    from its JSON lines with the explicit schema (PERMISSIVE: a damaged line is a `_corrupt_record`)."""
    parts = history_parts(run_dir)
    if not parts:
        return spark.createDataFrame([], HISTORY)
    twins = {part: twin_of(part) for part in parts}
    frames = []
    columnar = [t["path"] for t in twins.values() if t is not None]
    if columnar:
        frames.append(spark.read.schema(HISTORY_COLUMNS).parquet(*columnar)
                      .withColumn("_corrupt_record", F.lit(None).cast("string")))
    lines = [str(part) for part, twin in twins.items() if twin is None]
    if lines:
        frames.append(spark.read.schema(HISTORY).option("mode", "PERMISSIVE")
                      .option("columnNameOfCorruptRecord", "_corrupt_record").json(lines))
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def corrupt_lines(ops: DataFrame) -> DataFrame:
    return ops.where(F.col("_corrupt_record").isNotNull())


def writes_of(ops: DataFrame) -> DataFrame:
    """One row per record a txnlab workload wrote, with its attempt's outcome (null: none recorded): the
    transactional attempts' writes (f txn, process) and the storm's idempotent sends (f produce with an
    attempt: one record each; Kafka's VerifiableProducer sends carry no attempt and are not txnlab records)."""
    valid = ops.where(F.col("_corrupt_record").isNull() & F.col("value.attempt").isNotNull()
                      & F.col("f").isin(*TRANSACTIONAL_F, STORM_F))
    invoked = valid.where(F.col("type") == "invoke")
    transactional = invoked.where(F.col("f").isin(*TRANSACTIONAL_F)).select(
        F.col("value.attempt").alias("attempt"), F.col("process"), F.col("f"), F.col("value.group").alias("group"),
        F.explode_outer("value.writes").alias("w"))
    storm = invoked.where(F.col("f") == STORM_F).select(
        F.col("value.attempt").alias("attempt"), F.col("process"), F.col("f"), F.lit(None).cast("string").alias("group"),
        F.struct(F.col("value.topic").alias("topic"), F.col("value.partition").alias("partition"),
                 F.col("value.id").alias("id"), F.lit(None).cast("string").alias("input")).alias("w"))
    outcomes = valid.where(F.col("type") != "invoke").groupBy(F.col("value.attempt").alias("attempt")) \
        .agg(F.first("type").alias("outcome"))
    return transactional.unionByName(storm).join(outcomes, on="attempt", how="left").select(
        "attempt", "process", "f", "outcome", F.col("w.id").alias("id"), F.col("w.topic").alias("topic"),
        F.col("w.partition").alias("partition"), F.col("w.input").alias("input"), "group")


def acknowledged(ops: DataFrame) -> DataFrame:
    """Every write a producer was acknowledged at an offset: topic, partition, offset, id (txnlab: the record
    id; Kafka's VerifiableProducer: its value) of the `ok` transactional attempts (their `offsets`, one per
    write, -1 unknown) and the `ok` sends of the storm and the VerifiableProducer (their `offset`)."""
    ok = ops.where(F.col("_corrupt_record").isNull() & (F.col("type") == "ok"))
    transactional = ok.where(F.col("f").isin(*TRANSACTIONAL_F) & F.col("value.offsets").isNotNull()) \
        .select(F.arrays_zip(F.col("value.writes"), F.col("value.offsets")).alias("z")) \
        .select(F.explode("z").alias("z")) \
        .select(F.col("z.writes.topic").alias("topic"), F.col("z.writes.partition").alias("partition"),
                F.col("z.offsets").alias("offset"), F.col("z.writes.id").alias("id"))
    sends = ok.where((F.col("f") == STORM_F) & F.col("value.offset").isNotNull()).select(
        F.col("value.topic").alias("topic"), F.col("value.partition").alias("partition"),
        F.col("value.offset").alias("offset"), F.col("value.id").alias("id"))
    return transactional.unionByName(sends).where((F.col("offset") >= 0) & F.col("id").isNotNull())


def observed_reads(ops: DataFrame) -> DataFrame:
    """What the observer consumers polled: isolation, topic, partition, offset, id."""
    polls = ops.where((F.col("f") == "poll") & (F.col("type") == "ok") & F.col("value.records").isNotNull())
    return polls.select(F.col("process"), F.col("value.isolation").alias("isolation"),
                        F.explode("value.records").alias("r")) \
        .select("process", "isolation", "r.topic", "r.partition", "r.offset", "r.id")


def consumer_polls(ops: DataFrame) -> DataFrame:
    """Every record every recorded consumer polled, one row each: consumer (process), isolation, topic,
    partition, offset, id, time (of the poll), pos (index in the poll). The observers' polls and the
    processor's batches (its `process` invokes: one read_committed poll each)."""
    observer = ops.where((F.col("f") == "poll") & (F.col("type") == "ok") & F.col("value.records").isNotNull()) \
        .select("process", F.col("value.isolation").alias("isolation"), "time",
                F.posexplode("value.records").alias("pos", "r"))
    processor = ops.where((F.col("f") == "process") & (F.col("type") == "invoke") & F.col("value.inputs").isNotNull()) \
        .select("process", F.lit("read_committed").alias("isolation"), "time",
                F.posexplode("value.inputs").alias("pos", "r"))
    return observer.unionByName(processor) \
        .select(F.col("process").alias("consumer"), "isolation", "r.topic", "r.partition", "r.offset", "r.id",
                "time", "pos")


def consumer_seeks(ops: DataFrame) -> DataFrame:
    """Where a consumer's polls of a partition start over (its `seek` observations): consumer, isolation,
    topic, partition, offset (where the next poll begins; null: unknown), time, reason."""
    seeks = ops.where((F.col("f") == "seek") & (F.col("type") == "ok") & F.col("value.positions").isNotNull())
    return seeks.select(F.col("process").alias("consumer"), F.col("value.isolation").alias("isolation"), "time",
                        F.col("value.reason").alias("reason"), F.explode("value.positions").alias("p")) \
        .select("consumer", "isolation", "p.topic", "p.partition", "p.offset", "time", "reason")


def consumed_inputs(ops: DataFrame) -> DataFrame:
    """The processor's consumed input positions per group: group, topic, partition (distinct)."""
    done = ops.where((F.col("f") == "process") & (F.col("type") == "invoke") & F.col("value.group").isNotNull())
    return done.select(F.col("value.group").alias("group"), F.explode("value.inputs").alias("i")) \
        .select("group", "i.topic", "i.partition").distinct()


COPIER_SCHEMA = "input string, output string, group string"


def copier_started() -> Column:
    """An operation that started a TransactionalMessageCopier (its `jvm` invoke)."""
    return (F.col("f") == "jvm") & (F.col("type") == "invoke") & (F.col("value.tool") == COPIER_TOOL)


def copier_of() -> Column:
    """The struct (input, output, group) a copier's `jvm` invoke names in its arguments."""
    args = F.col("value.args")
    return F.struct(_arg_after(args, "--input-topic").alias("input"),
                    _arg_after(args, "--output-topic").alias("output"),
                    _arg_after(args, "--consumer-group").alias("group"))


STREAMS_SCHEMA = "application_id string, sources array<string>, sink string, counts string, changelog string"


def streams_declared() -> Column:
    """An exactly-once application's `topology` event: a Kafka Streams workload's (chaos/workloads/streams.py) or
    a Flink job's (chaos/workloads/flink.py: no changelog; its group is its source's)."""
    return F.col("f").isin("streams", "flink") & (F.col("type") == "ok") & (F.col("value.event") == "topology")


def flink_drained() -> Column:
    """A Flink job's client stopped it drained (chaos/workloads/flink.py): the group's offsets are final."""
    return (F.col("f") == "flink") & (F.col("type") == "ok") & (F.col("value.event") == "stopped") & \
        F.col("value.drained").eqNullSafe(True)


def streams_of() -> Column:
    """The struct (application_id, sources, sink, counts, changelog) of a `topology` event."""
    v = F.col("value")
    return F.struct(v["application_id"].alias("application_id"), v["sources"].alias("sources"),
                    v["sink"].alias("sink"), v["counts"].alias("counts"), v["changelog"].alias("changelog"))


def copier_topics(ops: DataFrame) -> DataFrame:
    """(input, output, group) of every TransactionalMessageCopier the run started (small)."""
    return ops.where(copier_started()).select(copier_of().alias("c")).select("c.*").distinct()


def _arg_after(args: Column, flag: str) -> Column:
    at = F.array_position(args, flag).cast("int")
    return F.when(at > 0, F.try_element_at(args, at + 1))


# ---- Kafka --------------------------------------------------------------------------------------------
FETCH_MAX_WAIT_MS = 10             # ms; Kafka's 500 ms default was paid once per topic partition and view


def kafka_options(java_properties: dict[str, str]) -> dict[str, str]:
    """Connection settings as the connector's `kafka.`-prefixed options."""
    return {f"kafka.{k}": v for k, v in java_properties.items()}


def consumer_group(options: dict[str, str], isolation: str) -> str:
    """The group id of a view's consumers: the same for the same connection and isolation level, so that a
    long-lived Spark (a Connect server) reuses the consumers its Kafka connector pooled for an earlier
    verification (its pool is keyed by group id and partition only: a new group id per query, the connector's
    default, connected a new consumer to every partition each time: ~0.1 s per partition and view). The
    settings are hashed without the password; the connector's own prefix keeps ACLs written for it valid.
    The consumers never join the group nor commit (assign mode, no auto commit)."""
    said = {k: re.sub(r'password="[^"]*"', "", v) for k, v in sorted(options.items())}
    digest = hashlib.sha256(json.dumps([said, isolation]).encode()).hexdigest()[:16]
    return f"spark-kafka-relation-txnlab-{digest}"


VIEWS = (("read_committed", "lso"), ("read_uncommitted", "hwm"))       # each view is read up to its end offset
# a run's archive (chaos/record/archive.py): each view's file in RUN/archive/, the rows Spark's Kafka source gives
ARCHIVE_DIR, ARCHIVE_MANIFEST = "archive", "manifest.json"
ARCHIVE_VIEWS = {"read_committed": "committed", "read_uncommitted": "uncommitted"}
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def view_ends(end_offsets: dict[str, dict[str, dict[str, int]]], end: str) -> dict[str, dict[str, int]]:
    """{topic: {partition: offset}} of one recorded end ("lso" or "hwm") from end_offsets.json's content."""
    return {t: {p: o[end] for p, o in parts.items()} for t, parts in end_offsets.items()}


def read_view(spark: SparkSession, options: dict[str, str], ends: dict[str, dict[str, int]],
              isolation: str) -> DataFrame:
    """Every record of the topics in `ends` from offset 0 up to the given end offset per partition.
    fetch.max.wait.ms is FETCH_MAX_WAIT_MS, not Kafka's 500 ms: every partition's task waited that long once
    at its end (a 3,300-record run of 42 partitions: 12-17 s per view, 1.5-1.9 s with 10 ms). A short wait
    cannot pass over a record: an empty fetch that did not move the consumer's position is polled again
    (the connector fails the task after its poll timeout, never skips), and records it moves past are the
    ones the view does not show (aborted data, transaction markers)."""
    assign = {topic: sorted(int(p) for p in parts) for topic, parts in ends.items()}
    return spark.read.format("kafka").options(**options) \
        .option("assign", json.dumps(assign)) \
        .option("startingOffsets", json.dumps({t: {str(p): -2 for p in ps} for t, ps in assign.items()})) \
        .option("endingOffsets", json.dumps({t: {str(p): int(o) for p, o in parts.items()}
                                             for t, parts in ends.items()})) \
        .option("kafka.isolation.level", isolation) \
        .option("kafka.group.id", consumer_group(options, isolation)) \
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS)) \
        .option("includeHeaders", "true") \
        .option("failOnDataLoss", "false") \
        .load()


INCARNATIONS_DIR = "incarnations"   # chaos/record/archive.py: RUN/incarnations/<topic>~<n>/, a deleted topic's records


def incarnation_dirs(run_dir: Path) -> list[Path]:
    return sorted(p for p in (Path(run_dir) / INCARNATIONS_DIR).glob("*") if p.is_dir() and not p.name.startswith("."))


def read_incarnations(spark: SparkSession, run_dir: Path, incarnations: Sequence[dict],
                      isolation: str) -> DataFrame | None:
    """One view of every archived incarnation (evidence.check_incarnations found them whole), its rows' topic
    replaced by the incarnation's alias (<topic>~<n>): to the checks a topic of its own, apart from the topic
    that now carries the name. None without incarnations."""
    frames = [spark.read.parquet(str(Path(run_dir).resolve() / INCARNATIONS_DIR / m["alias"] /
                                     m["views"][ARCHIVE_VIEWS[isolation]]["file"]))
              .select(*KAFKA_COLUMNS).withColumn("topic", F.lit(m["alias"])) for m in incarnations]
    return reduce(DataFrame.unionByName, frames) if frames else None


def incarnation_of(records: DataFrame, incarnations: Sequence[dict]) -> DataFrame | None:
    """topic, partition, id, alias: where each record id of an incarnation was (from a `records` frame holding
    them: the uncommitted view), to move the history's references to it (relabel). None without incarnations."""
    if not incarnations:
        return None
    names = [(m["alias"], m["topic"]) for m in incarnations]
    aliases = records.sparkSession.createDataFrame(names, "alias string, origin string")
    return records.where(F.col("id").isNotNull()).join(F.broadcast(aliases), F.col("topic") == F.col("alias")) \
        .select(F.col("origin").alias("topic"), "partition", "id", "alias") \
        .groupBy("topic", "partition", "id").agg(F.min("alias").alias("alias"))


def relabel(df: DataFrame, moved: DataFrame | None) -> DataFrame:
    """A history frame's references (topic, partition, id) to a record of a deleted incarnation renamed to its
    alias (incarnation_of); the others unchanged. The record's id says which incarnation it was: offsets start
    again at 0 in the new one, and a consumer may return records of the old one after it was deleted."""
    if moved is None:
        return df
    return df.join(moved, on=["topic", "partition", "id"], how="left") \
        .withColumn("topic", F.coalesce(F.col("alias"), F.col("topic"))).select(*df.columns)


def relabel_by_time(df: DataFrame, incarnations: Sequence[dict]) -> DataFrame:
    """A history frame without ids (the consumers' seeks): a reference to a topic recorded before one of its
    incarnations' deletion was confirmed goes to the earliest such incarnation."""
    if not incarnations:
        return df
    topic: Column | None = None
    for m in sorted(incarnations, key=lambda m: m["deleted_at"]):
        hit = (F.col("topic") == m["topic"]) & (F.col("time") < F.lit(m["deleted_at"]))
        topic = F.when(hit, F.lit(m["alias"])) if topic is None else topic.when(hit, F.lit(m["alias"]))
    assert topic is not None
    return df.withColumn("topic", topic.otherwise(F.col("topic")))


def read_archived_view(spark: SparkSession, run_dir: Path, isolation: str) -> DataFrame:
    """One view of the run's topics as its archive holds it (evidence.check_archive found it whole): the same
    rows, in the same columns, as read_view reads from Kafka."""
    manifest = json.loads((Path(run_dir) / ARCHIVE_DIR / ARCHIVE_MANIFEST).read_text())
    entry = manifest["views"][ARCHIVE_VIEWS[isolation]]
    return spark.read.parquet(str(Path(run_dir).resolve() / ARCHIVE_DIR / entry["file"])).select(*KAFKA_COLUMNS)


# Where a txnlab workload puts each header (chaos/record/ids.py headers): read there first
HEADER_AT = {HEADER_ID: 0, HEADER_ATTEMPT: 1, HEADER_PRODUCER: 2, HEADER_INPUT: 3}


def _header(name: str) -> Column:
    """The string value of header `name` (the first, if repeated), null when absent. Taken straight from the
    position a txnlab workload writes it at (HEADER_AT) when it is there and no earlier header has its name;
    otherwise found by a scan of the headers (a lambda Spark runs interpreted, per record: about a second per
    view of 10^6 records)."""
    headers = F.coalesce(F.col("headers"), F.array())
    found = F.try_element_at(F.filter(headers, lambda h: h["key"] == name), F.lit(1))["value"].cast("string")
    at = HEADER_AT.get(name)
    if at is None:
        return found

    def key(i: int) -> Column:
        return F.try_element_at(headers, F.lit(i + 1))["key"]
    there = reduce(Column.__and__, [key(i) != name for i in range(at)], key(at) == name)
    return F.when(there, F.try_element_at(headers, F.lit(at + 1))["value"].cast("string")).otherwise(found)


def well_formed(run_tag: str | None) -> str:
    """The regular expression a record id of this run matches (of any run when the tag is unknown)."""
    return ID_PATTERN.format(run=re.escape(run_tag) if run_tag else ANY_RUN)


def records_of(raw: DataFrame, view: str, copier_inputs: Sequence[str] = (), copier_outputs: Sequence[str] = (),
               run_tag: str | None = None, streams_outputs: Sequence[str] = ()) -> DataFrame:
    """Kafka rows -> the `records` frame. A txnlab workload's record carries its id, attempt, producer (and a
    processor's output its input) in headers (chaos/record/ids.py), read without parsing the value; a record without
    a well-formed id header has its value parsed as JSON (null when it is not). Only a well-formed id of
    this run makes a record txnlab's: foreign JSON with an `id`, or an empty or foreign `txnlab.id`
    header, stays foreign. A copier's output is a verbatim copy (kind copier, no id: a copied txnlab record
    is not a second copy of its id); on its input, Kafka's VerifiableProducer values are kind copier. A Kafka
    Streams application's output, counts and changelog records (`streams_outputs`) are kind streams, no id:
    Kafka Streams copies the input's headers, txnlab.id included, to what it writes."""
    text = F.col("value").cast("string")
    pattern = well_formed(run_tag)
    hid = _header(HEADER_ID)
    header_ok = F.coalesce(hid.rlike(pattern), F.lit(False))
    parsed = F.when(~header_ok, F.from_json(text, RECORD_VALUE, {"mode": "PERMISSIVE"}))
    value_ok = F.coalesce(parsed["id"].rlike(pattern), F.lit(False))
    copy = F.col("topic").isin(*copier_outputs)
    derived = F.col("topic").isin(*streams_outputs)
    rid = F.when(copy | derived, None).when(header_ok, hid).when(value_ok, parsed["id"])
    key = F.col("key").cast("string") if "key" in raw.columns else F.lit(None).cast("string")  # Kafka rows have it

    def field(header: str, name: str) -> Column:
        return F.when(rid.isNull(), None).when(header_ok, _header(header)).otherwise(parsed[name])
    kind = F.when(rid.isNotNull(), F.lit("txnlab")).when(derived, F.lit("streams")) \
        .when((copy | F.col("topic").isin(*copier_inputs)) & text.isNotNull(), F.lit("copier")).otherwise(F.lit("foreign"))
    return raw.select(
        F.lit(view).alias("view"), "topic", "partition", "offset", key.alias("key"), rid.alias("id"),
        field(HEADER_ATTEMPT, "attempt").alias("attempt"), field(HEADER_PRODUCER, "producer").alias("producer"),
        field(HEADER_INPUT, "input").alias("input"),
        F.when(rid.isNull(), text).alias("text"), kind.alias("kind"), F.xxhash64("value").alias("value_hash"))
