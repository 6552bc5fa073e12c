"""The checks: pure DataFrame -> DataFrame functions, each returning one row per anomaly it found.

Frames as in schemas.py: `committed` / `uncommitted` are `records` frames of the read_committed and
read_uncommitted views, `writes` what the history says each transactional attempt wrote and how it ended;
`index` (id_index) joins the two once per id for the per-id checks.
  duplicates            one id at two or more offsets of the committed view
  aborted_reads         an id of a `fail` attempt visible to read_committed (a leak)
  lost_writes           an id of an `ok` attempt missing from the committed view
  torn_transactions     an attempt (ok, fail or info alike) partly visible
  info_resolutions      every `info` attempt resolved: committed (all visible), aborted (none), torn
  nonmonotonic_sends    a producer's records out of order within a partition (first copy of each id)
  inconsistent_offsets  two reads disagree about one offset (the two views; the observers' polls)
  processing            exactly-once processing: each input covered by the group's committed offsets has
                        exactly one committed output, and no committed output lacks a covered input
  copies                the same for Kafka's TransactionalMessageCopier (values copied verbatim)
  open_transactions     partitions whose LSO stayed behind the HWM at the end
  unrecognised          records no txnlab workload wrote (foreign or malformed values): counted
Must not: read files or Kafka, or collect anything (verdict.py takes counts and a few examples).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

POSITION = ("topic", "partition", "offset")


def _visible(committed: DataFrame) -> DataFrame:
    return committed.where(F.col("id").isNotNull())


def id_index(committed: DataFrame, writes: DataFrame) -> DataFrame:
    """One row per id the history wrote or the committed view holds: the shuffle the per-id checks share.
    id, attempt, process, outcome, topic, partition (from the history; null for an id it never wrote),
    copies (committed records carrying the id), positions (up to 5 of them, sorted), producer (the
    records' own)."""
    seen = _visible(committed).groupBy("id").agg(
        F.count(F.lit(1)).alias("copies"), F.first("attempt", ignorenulls=True).alias("record_attempt"),
        F.first("producer", ignorenulls=True).alias("producer"),
        F.slice(F.sort_array(F.collect_list(F.struct(*POSITION))), 1, 5).alias("positions"))
    written = writes.where(F.col("id").isNotNull()).select("id", "attempt", "process", "outcome", "topic", "partition")
    return written.join(seen, on="id", how="full") \
        .select("id", F.coalesce("attempt", "record_attempt").alias("attempt"), "process", "outcome", "topic",
                "partition", F.coalesce("copies", F.lit(0)).alias("copies"), "positions", "producer",
                F.col("process").isNotNull().alias("written"))


def duplicates(index: DataFrame) -> DataFrame:
    return index.where(F.col("copies") > 1).select("id", "attempt", "copies", "positions")


def aborted_reads(index: DataFrame) -> DataFrame:
    return index.where((F.col("outcome") == "fail") & (F.col("copies") > 0)) \
        .select("id", "attempt", F.col("positions")[0].alias("at"))


def lost_writes(index: DataFrame) -> DataFrame:
    return index.where((F.col("outcome") == "ok") & (F.col("copies") == 0)).select("id", "attempt", "topic", "partition")


def _visibility(index: DataFrame) -> DataFrame:
    """Per attempt the history wrote: how many of its distinct ids the committed view holds."""
    return index.where(F.col("written")).groupBy("attempt", "process", "outcome") \
        .agg(F.count(F.lit(1)).alias("expected"), F.count(F.when(F.col("copies") > 0, 1)).alias("visible"))


def torn_transactions(index: DataFrame) -> DataFrame:
    return _visibility(index).where((F.col("visible") > 0) & (F.col("visible") < F.col("expected")))


def info_resolutions(index: DataFrame) -> DataFrame:
    """Not anomalies: what became of each attempt whose outcome the client could not know."""
    info = _visibility(index.where(F.col("outcome") == "info"))
    return info.withColumn("resolution", F.when(F.col("visible") == F.col("expected"), "committed")
                           .when(F.col("visible") == 0, "aborted").otherwise("torn"))


def nonmonotonic_sends(index: DataFrame) -> DataFrame:
    """Within (producer, topic, partition), offsets must follow (attempt number, index in the attempt);
    the first copy of each id counts (a later duplicate is a duplicate, not a reorder)."""
    first = index.where((F.col("copies") > 0) & F.col("producer").isNotNull()) \
        .select("id", "producer", F.col("positions")[0].alias("at")) \
        .select("id", "producer", "at.topic", "at.partition", "at.offset") \
        .withColumn("seq", F.struct(_id_part(1).alias("attempt_no"), _id_part(2).alias("index"))) \
        .where(F.col("seq.attempt_no").isNotNull() & F.col("seq.index").isNotNull())
    order = Window.partitionBy("producer", "topic", "partition").orderBy("offset")
    return first.withColumn("previous_id", F.lag("id").over(order)).withColumn("previous_seq", F.lag("seq").over(order)) \
        .where(F.col("previous_seq").isNotNull() & (F.col("seq") < F.col("previous_seq"))) \
        .select("producer", *POSITION, "id", "previous_id")


def _id_part(group: int):
    """attempt number (1) or index in the attempt (2) of a record id "<run>.<process>.<n>.<index>"."""
    return F.regexp_extract("id", r"\.(\d+)\.(\d+)$", group).try_cast("long")


def inconsistent_offsets(committed: DataFrame, uncommitted: DataFrame, observed: DataFrame) -> DataFrame:
    """reader, topic, partition, offset, id, other_id: what `reader` saw at an offset vs read_uncommitted.
    Both views meet in one aggregation by position (one shuffle, no sort), which the observers' polls
    (small) then join without shuffling it again."""
    def side(df: DataFrame, view: str) -> DataFrame:
        return df.select(*POSITION, F.lit(view).alias("side"), "id", "value_hash")

    def of(view: str, col: str):
        return F.first(F.when(F.col("side") == view, F.col(col)), ignorenulls=True)
    both = side(committed, "c").unionByName(side(uncommitted, "u")).groupBy(*POSITION).agg(
        F.max(F.col("side") == "c").alias("in_c"), F.max(F.col("side") == "u").alias("in_u"),
        of("c", "id").alias("id"), of("c", "value_hash").alias("hash"),
        of("u", "id").alias("other_id"), of("u", "value_hash").alias("other_hash"))
    c = both.where(F.col("in_c") & (~F.col("in_u") | ~F.col("hash").eqNullSafe(F.col("other_hash")))) \
        .select(F.lit("read_committed view").alias("reader"), *POSITION, "id", "other_id")
    seen = observed.join(both.select(*POSITION, "in_c", "in_u", "other_id"), on=list(POSITION), how="left")
    o = seen.where(F.col("in_u").isNull() | ~F.col("in_u") | ~F.col("id").eqNullSafe(F.col("other_id"))) \
        .select(F.concat(F.lit("observer "), F.col("process")).alias("reader"), *POSITION, "id", "other_id")
    rc = seen.where((F.col("isolation") == "read_committed") & ~F.coalesce(F.col("in_c"), F.lit(False))) \
        .select(F.concat(F.lit("read_committed observer "), F.col("process"), F.lit(" saw what read_committed does not")
                         ).alias("reader"), *POSITION, "id", F.lit(None).cast("string").alias("other_id"))
    return c.unionByName(o).unionByName(rc)


def _covered(committed: DataFrame, consumed: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """group, input: committed input records below the group's committed offset of their partition."""
    positions = consumed.join(group_offsets, on=["group", "topic", "partition"], how="inner")
    return _visible(committed).join(positions, on=["topic", "partition"], how="inner") \
        .where(F.col("offset") < F.col("committed")).select("group", F.col("id").alias("input")).distinct()


def processing(committed: DataFrame, writes: DataFrame, consumed: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """problem, group, input, outputs: unprocessed | duplicate-output | output-without-committed-input."""
    outputs = writes.where((F.col("f") == "process") & F.col("input").isNotNull()).select("id", "input", "group") \
        .join(_visible(committed).select("id").distinct(), on="id", how="inner") \
        .groupBy("group", "input").agg(F.sort_array(F.collect_set("id")).alias("outputs"))
    covered = _covered(committed, consumed, group_offsets)
    return _pairing(covered, outputs, "outputs")


def _pairing(covered: DataFrame, outputs: DataFrame, col: str) -> DataFrame:
    joined = covered.withColumn("covered", F.lit(True)).join(outputs, on=["group", "input"], how="full")
    problem = F.when(F.col("covered").isNull(), "output-without-committed-input") \
        .when(F.col(col).isNull(), "unprocessed").when(F.size(col) > 1, "duplicate-output")
    return joined.withColumn("problem", problem).where(F.col("problem").isNotNull()) \
        .select("problem", "group", "input", F.col(col).alias("outputs"))


def copies(committed: DataFrame, sends: DataFrame, copiers: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """Kafka's copier: each acknowledged input value below the group's offsets is copied exactly once."""
    acked = sends.join(copiers.select(F.col("input").alias("topic"), "group"), on="topic", how="inner")
    positions = acked.join(group_offsets, on=["group", "topic", "partition"], how="inner") \
        .where(F.col("offset") < F.col("committed")).select("group", F.col("id").alias("input")).distinct()
    out = committed.where((F.col("kind") == "copier") & F.col("text").isNotNull()).join(copiers.select(F.col("output").alias("topic"), "group"),
                                                          on="topic", how="inner") \
        .groupBy("group", F.col("text").alias("input")) \
        .agg(F.sort_array(F.collect_list(F.concat_ws("-", "topic", "partition", "offset"))).alias("outputs"))
    return _pairing(positions, out, "outputs")


def open_transactions(end_offsets: DataFrame) -> DataFrame:
    """topic, partition, lso, hwm of partitions whose LSO stayed behind the HWM."""
    return end_offsets.where(F.col("lso") < F.col("hwm"))


def unrecognised(records: DataFrame) -> DataFrame:
    return records.where(F.col("kind") == "foreign").select("view", *POSITION, "text")
