"""The checks: pure DataFrame -> DataFrame functions, each returning one row per anomaly it found.

Frames as in schemas.py: `committed` / `uncommitted` are `records` frames of the read_committed and
read_uncommitted views, `writes` what the history says each workload wrote and how it ended, `acked` where
producers were acknowledged; `index` (id_index) joins the committed view and the writes once per id for the
per-id checks, `positions` (position_index) both views and the acknowledgements once per offset.
  duplicates            one id at two or more offsets of the committed view
  aborted_reads         an id of a `fail` attempt visible to read_committed (a leak)
  lost_writes           an acknowledged write (an `ok` attempt's, an `ok` idempotent send) missing from the
                        committed view
  torn_transactions     an attempt (ok, fail or info alike) partly visible
  info_resolutions      every `info` transactional attempt resolved: committed (all visible), aborted, torn
  nonmonotonic_sends    a transactional producer's records out of order within a partition (the first copy
                        of each id in the partition it was written to)
  inconsistent_offsets  two reads disagree about one offset (the two views; a producer's acknowledgement;
                        the observers' polls)
  holes                 acknowledged offsets inside the recorded range the log no longer holds: not an
                        anomaly, missing evidence (the verdict is unknown)
  processing            exactly-once processing: each input covered by the group's committed offsets has
                        exactly one committed output (paired by the output record's own input reference),
                        no committed output lacks a covered input, none contradicts the history's input
  copies                the same for Kafka's TransactionalMessageCopier (values copied verbatim: by value)
  streams_processing    the same for a Kafka Streams application's stateless step (paired by the input id
                        each output carries; its group is its application id), or a Flink job's (its group:
                        its source's, whose offsets are committed when a checkpoint completes)
  streams_state         its stateful step, per key: the committed count updates are exactly 1..n in log order,
                        sums follow the inputs' amounts, the last count and sum equal the covered committed
                        inputs', and the changelog's last committed value equals the last update
  open_transactions     partitions whose LSO stayed behind the HWM at the end
  unrecognised          records no txnlab workload of this run wrote (foreign or malformed values): counted
  unaccounted           records of this run in the log that no write of the history accounts for
  poll_skips            Jepsen's poll-skip: a consumer instance's successive polled records of one partition
                        (history order; within a poll, its order) pass over records its view holds
                        (read_committed: the committed view; read_uncommitted: the uncommitted one)
  nonmonotonic_polls    Jepsen's nonmonotonic-poll: a polled offset at or below the one polled just before
  unseen                Jepsen's unseen: an acknowledged write no read_committed consumer polled although one
                        polled its partition past it (and no poll-skip of one already reports it)
The consumers are the observers (`poll`) and the processor instances (each `process` invoke's inputs: one
poll). A consumer's stream of a partition starts over at its recorded `seek`s (chaos/workloads/confluent/observer.py,
processor.py: the observer's start at 0, the processor's rewinds, assignments and revocations): a rewind is
no nonmonotonic poll, and the first poll after a seek must begin at the seek's position (after an
assignment, whose position is the group's committed offset and not recorded, it is not judged: what the
group's offsets skip is `processing`'s and `unseen`'s). A consumer that recorded no seek is one stream.
Jepsen's precommitted read does not apply: a read_committed consumer's read of a record whose transaction
never committed is `inconsistent_offsets` (not in the committed view) or `aborted_reads`; one whose
transaction did commit cannot be shown early, as the history records when the commit was acknowledged,
not when it was asked (the markers may be written before the acknowledgement is recorded); read_uncommitted
observers may read anything early.
Must not: read files or Kafka, or collect anything (verdict.py takes counts and a few examples).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_analysis.schemas import TRANSACTIONAL_F

POSITION = ("topic", "partition", "offset")


def _visible(committed: DataFrame) -> DataFrame:
    return committed.where(F.col("id").isNotNull())


def id_index(committed: DataFrame, writes: DataFrame) -> DataFrame:
    """One row per id the history wrote or the committed view holds: the shuffle the per-id checks share.
    id, attempt, process, f, outcome, topic, partition (from the history; null for an id it never wrote),
    copies (committed records carrying the id), positions (up to 5 of them, sorted), at (the first copy in
    the partition the history wrote it to, else the first copy: a duplicate in a lower partition does not
    move the original), producer (the records' own)."""
    seen = _visible(committed).groupBy("id").agg(
        F.count(F.lit(1)).alias("copies"), F.first("attempt", ignorenulls=True).alias("record_attempt"),
        F.first("producer", ignorenulls=True).alias("producer"),
        F.slice(F.sort_array(F.collect_list(F.struct(*POSITION))), 1, 5).alias("positions"))
    written = writes.where(F.col("id").isNotNull()).select("id", "attempt", "process", "f", "outcome", "topic", "partition")
    home = F.filter("positions", lambda p: (p["topic"] == F.col("topic")) & (p["partition"] == F.col("partition")))
    return written.join(seen, on="id", how="full") \
        .select("id", F.coalesce("attempt", "record_attempt").alias("attempt"), "process", "f", "outcome", "topic",
                "partition", F.coalesce("copies", F.lit(0)).alias("copies"), "positions",
                F.coalesce(F.try_element_at(home, F.lit(1)), F.try_element_at("positions", F.lit(1))).alias("at"),
                "producer", F.col("process").isNotNull().alias("written"))


def duplicates(index: DataFrame) -> DataFrame:
    return index.where(F.col("copies") > 1).select("id", "attempt", "copies", "positions")


def aborted_reads(index: DataFrame) -> DataFrame:
    return index.where((F.col("outcome") == "fail") & (F.col("copies") > 0)).select("id", "attempt", "at")


def lost_writes(index: DataFrame) -> DataFrame:
    """An acknowledged write (an `ok` transactional attempt's, or an `ok` idempotent send) not in the view."""
    return index.where((F.col("outcome") == "ok") & (F.col("copies") == 0)).select("id", "attempt", "topic", "partition")


def _visibility(index: DataFrame) -> DataFrame:
    """Per attempt the history wrote: how many of its distinct ids the committed view holds."""
    return index.where(F.col("written")).groupBy("attempt", "process", "outcome") \
        .agg(F.count(F.lit(1)).alias("expected"), F.count(F.when(F.col("copies") > 0, 1)).alias("visible"))


def torn_transactions(index: DataFrame) -> DataFrame:
    return _visibility(index).where((F.col("visible") > 0) & (F.col("visible") < F.col("expected")))


def info_resolutions(index: DataFrame) -> DataFrame:
    """Not anomalies: what became of each transactional attempt whose outcome the client could not know."""
    info = _visibility(index.where((F.col("outcome") == "info") & F.col("f").isin(*TRANSACTIONAL_F)))
    return info.withColumn("resolution", F.when(F.col("visible") == F.col("expected"), "committed")
                           .when(F.col("visible") == 0, "aborted").otherwise("torn"))


def nonmonotonic_sends(index: DataFrame) -> DataFrame:
    """Within (producer, topic, partition), a transactional producer's offsets must follow (attempt number,
    index in the attempt); the first copy of each id in the partition it was written to counts (a
    duplicate, even in a lower partition, is a duplicate, not a reorder). The storm's sends are each a new
    producer: no order between them."""
    first = index.where((F.col("copies") > 0) & F.col("producer").isNotNull() & F.col("f").isin(*TRANSACTIONAL_F)) \
        .select("id", "producer", "at") \
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


def position_index(committed: DataFrame, uncommitted: DataFrame, acked: DataFrame) -> DataFrame:
    """One row per offset either view holds or a producer was acknowledged at (one aggregation by position:
    one shuffle, no sort): in_c, in_u, in_a; id, hash (the committed view's record), other_id, other_hash,
    other (the uncommitted view's: its id, a copier value for a Java tool's record), acked_lo / acked_hi (the
    ids acknowledged there: two when two writes were acknowledged at one offset)."""
    def side(df: DataFrame, view: str) -> DataFrame:
        ident = F.coalesce(F.col("id"), F.when(F.col("kind") == "copier", F.col("text")))
        return df.select(*POSITION, F.lit(view).alias("side"), "id", "value_hash", ident.alias("ident"))

    def of(view: str, col: str):
        return F.first(F.when(F.col("side") == view, F.col(col)), ignorenulls=True)
    acks = acked.select(*POSITION, F.lit("a").alias("side"), "id", F.lit(None).cast("long").alias("value_hash"),
                        F.col("id").alias("ident"))
    a = F.when(F.col("side") == "a", F.col("id"))
    return side(committed, "c").unionByName(side(uncommitted, "u")).unionByName(acks).groupBy(*POSITION).agg(
        F.max(F.col("side") == "c").alias("in_c"), F.max(F.col("side") == "u").alias("in_u"),
        F.max(F.col("side") == "a").alias("in_a"),
        of("c", "id").alias("id"), of("c", "value_hash").alias("hash"),
        of("u", "id").alias("other_id"), of("u", "value_hash").alias("other_hash"), of("u", "ident").alias("other"),
        F.min(a).alias("acked_lo"), F.max(a).alias("acked_hi"))


def inconsistent_offsets(positions: DataFrame, observed: DataFrame) -> DataFrame:
    """reader, topic, partition, offset, id, other_id: what `reader` says an offset holds vs read_uncommitted:
    the committed view, a producer's acknowledgement (a write acknowledged at an offset that holds another
    record, or two writes acknowledged at one offset), the observers' polls (small: they join the position
    index without shuffling it again)."""
    c = positions.where(F.col("in_c") & (~F.col("in_u") | ~F.col("hash").eqNullSafe(F.col("other_hash")))) \
        .select(F.lit("read_committed view").alias("reader"), *POSITION, "id", "other_id")
    moved = F.col("in_a") & F.col("in_u") & (~F.col("acked_lo").eqNullSafe(F.col("other"))
                                             | ~F.col("acked_hi").eqNullSafe(F.col("other")))
    a = positions.where(moved).select(F.lit("acknowledged write").alias("reader"), *POSITION,
                                      F.when(F.col("acked_lo").eqNullSafe(F.col("other")), F.col("acked_hi"))
                                      .otherwise(F.col("acked_lo")).alias("id"), F.col("other").alias("other_id"))
    seen = observed.join(positions.where(F.col("in_c") | F.col("in_u")).select(*POSITION, "in_c", "in_u", "other_id"),
                         on=list(POSITION), how="left")
    o = seen.where(F.col("in_u").isNull() | ~F.col("in_u") | ~F.col("id").eqNullSafe(F.col("other_id"))) \
        .select(F.concat(F.lit("observer "), F.col("process")).alias("reader"), *POSITION, "id", "other_id")
    rc = seen.where((F.col("isolation") == "read_committed") & ~F.coalesce(F.col("in_c"), F.lit(False))) \
        .select(F.concat(F.lit("read_committed observer "), F.col("process"), F.lit(" saw what read_committed does not")
                         ).alias("reader"), *POSITION, "id", F.lit(None).cast("string").alias("other_id"))
    return c.unionByName(a).unionByName(o).unionByName(rc)


def holes(positions: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """topic, partition, count, offsets (the first 5): offsets a producer was acknowledged at, below the
    recorded HWM, that the read_uncommitted view does not hold: records gone from inside the range the run
    recorded (compaction, a damaged log; Spark's reader skips them): evidence missing, not an anomaly."""
    gone = positions.where(F.col("in_a") & ~F.col("in_u")) \
        .join(F.broadcast(end_offsets.select("topic", "partition", "hwm")), on=["topic", "partition"], how="inner") \
        .where(F.col("offset") < F.col("hwm"))
    return gone.groupBy("topic", "partition").agg(F.count(F.lit(1)).alias("count"),
                                                  F.slice(F.sort_array(F.collect_list("offset")), 1, 5).alias("offsets"))


def _covered(committed: DataFrame, consumed: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """group, input: committed input records below the group's committed offset of their partition."""
    positions = consumed.join(group_offsets, on=["group", "topic", "partition"], how="inner")
    return _visible(committed).join(positions, on=["topic", "partition"], how="inner") \
        .where(F.col("offset") < F.col("committed")).select("group", F.col("id").alias("input")).distinct()


def processing(committed: DataFrame, writes: DataFrame, consumed: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """problem, group, input, outputs: unprocessed | duplicate-output | output-without-committed-input |
    input-mismatch. The outputs are what the log holds: the committed records of this run on the
    processors' output topics, each paired by its own input reference (the record's `input`; the history's
    for a record without one, so an output the history does not account for still counts); an output whose
    input differs from the one the history says its attempt wrote it for is input-mismatch."""
    made = writes.where(F.col("f") == "process")
    topics = made.where(F.col("topic").isNotNull() & F.col("group").isNotNull()).select("topic", "group").distinct()
    said = made.where(F.col("input").isNotNull()).select("id", F.col("input").alias("said"),
                                                           F.col("group").alias("said_group"))
    logged = _visible(committed).join(F.broadcast(topics), on="topic", how="inner").select("id", "input", "group") \
        .join(said, on="id", how="left") \
        .select("id", F.coalesce("input", "said").alias("input"), F.coalesce("said_group", "group").alias("group"),
                "said").where(F.col("input").isNotNull())
    outputs = logged.groupBy("group", "input").agg(F.sort_array(F.collect_set("id")).alias("outputs"))
    mismatched = logged.where(F.col("said").isNotNull() & (F.col("said") != F.col("input"))) \
        .select(F.lit("input-mismatch").alias("problem"), "group", "input", F.array("id").alias("outputs")).distinct()
    return _pairing(_covered(committed, consumed, group_offsets), outputs, "outputs").unionByName(mismatched)


def _pairing(covered: DataFrame, outputs: DataFrame, col: str) -> DataFrame:
    joined = covered.withColumn("covered", F.lit(True)).join(outputs, on=["group", "input"], how="full")
    problem = F.when(F.col("covered").isNull(), "output-without-committed-input") \
        .when(F.col(col).isNull(), "unprocessed").when(F.size(col) > 1, "duplicate-output")
    return joined.withColumn("problem", problem).where(F.col("problem").isNotNull()) \
        .select("problem", "group", "input", F.col(col).alias("outputs"))


def copies(committed: DataFrame, copiers: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """problem, group, input, outputs: Kafka's copier copies values verbatim, so what its input topic holds
    below the group's committed offsets (whoever wrote it: the VerifiableProducer, an uncertain send that
    landed, a storm) must be in its output topic exactly as often, and nothing else. Paired by value hash:
    n equal input values need n copies."""
    def on(role: str) -> DataFrame:
        named = copiers.select(F.col(role).alias("topic"), "group")
        return committed.where(F.coalesce("id", "text").isNotNull()).join(F.broadcast(named), on="topic", how="inner")
    ins = on("input").join(group_offsets, on=["group", "topic", "partition"], how="inner") \
        .where(F.col("offset") < F.col("committed")).groupBy("group", "value_hash") \
        .agg(F.count(F.lit(1)).alias("n_in"), F.first(F.coalesce("id", "text")).alias("input"))
    outs = on("output").groupBy("group", "value_hash").agg(
        F.count(F.lit(1)).alias("n_out"), F.first("text").alias("copied"),
        F.sort_array(F.collect_list(F.concat_ws("-", "topic", "partition", "offset"))).alias("outputs"))
    problem = F.when(F.col("n_in").isNull(), "output-without-committed-input") \
        .when(F.col("n_out").isNull() | (F.col("n_out") < F.col("n_in")), "unprocessed") \
        .when(F.col("n_out") > F.col("n_in"), "duplicate-output")
    return ins.join(outs, on=["group", "value_hash"], how="full").withColumn("problem", problem) \
        .where(F.col("problem").isNotNull()) \
        .select("problem", "group", F.coalesce("input", "copied").alias("input"), "outputs")


# ---- Kafka Streams (chaos/workloads/streams.py) -----------------------------------------------------------
STREAMS_OUTPUT = "input string, instance string"
STREAMS_UPDATE = "key string, count long, sum long, input string"


def _amount(input_id):
    """What an input adds to its key's sum (EosApp.java): 1 + the index its id ends with, 0 without one."""
    index = F.regexp_extract(input_id, r"\.(\d+)$", 1)
    return F.when(index != "", index.cast("long") + 1).otherwise(F.lit(0).cast("long"))


def _on(committed: DataFrame, streams: DataFrame, role: str) -> DataFrame:
    """The committed records on each application's `role` topic(s) (sources: its inputs), with its group."""
    topics = streams.select(F.col("application_id").alias("group"),
                            (F.explode(role) if role == "sources" else F.col(role)).alias("topic"))
    return committed.join(F.broadcast(topics), on="topic", how="inner")


def streams_inputs(committed: DataFrame, streams: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """group, input, key, amount: the committed input records (of this run) below the application's committed
    offsets: what it claims to have processed."""
    return _on(_visible(committed), streams, "sources").join(group_offsets, on=["group", "topic", "partition"],
                                                             how="inner") \
        .where(F.col("offset") < F.col("committed")) \
        .select("group", F.col("id").alias("input"), "key", _amount(F.col("id")).alias("amount"))


def streams_processing(committed: DataFrame, streams: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """problem, group, input, outputs: the stateless step. Each input the application's offsets cover has
    exactly one committed record on its output topic (paired by the input id the output carries), and no
    committed output names an input they do not cover (unprocessed | duplicate-output |
    output-without-committed-input)."""
    made = _on(committed, streams, "sink").select(
        "group", F.from_json("text", STREAMS_OUTPUT)["input"].alias("input"),
        F.concat_ws("-", "topic", "partition", "offset").alias("output"))
    outputs = made.groupBy("group", "input").agg(F.sort_array(F.collect_list("output")).alias("outputs"))
    covered = streams_inputs(committed, streams, group_offsets).select("group", "input").distinct()
    return _pairing(covered, outputs, "outputs")


def streams_state(committed: DataFrame, streams: DataFrame, group_offsets: DataFrame) -> DataFrame:
    """group, key, problems, inputs, amount, updates, last (count, sum), changelog (count, sum): the stateful
    step, one row per key with every problem found:
      split           the key's committed updates are in more than one partition of the counts topic
      sequence        its committed updates, in log order, are not the counts 1..n (a gap: a lost update; a
                      repeat or a step back: a double count or a rollback)
      sum             an update's sum is not the previous sum plus its input's amount
      repeated-input  one input counted by two committed updates
      final-count     the last count differs from the number of covered committed inputs of the key
      final-sum       the last sum differs from the sum of their amounts
      changelog       the store's last committed changelog value (count, sum) differs from the last update (an
                      application with a changelog: Kafka Streams; a Flink job keeps its state in checkpoints)"""
    updates = _on(committed, streams, "counts").select(
        "group", "partition", "offset", F.from_json("text", STREAMS_UPDATE).alias("u")) \
        .select("group", "partition", "offset", "u.*")
    order = Window.partitionBy("group", "key").orderBy("partition", "offset")
    steps = updates.withColumn("n", F.row_number().over(order)) \
        .withColumn("previous_sum", F.coalesce(F.lag("sum").over(order), F.lit(0)))
    per_key = steps.groupBy("group", "key").agg(
        F.count(F.lit(1)).alias("updates"), F.countDistinct("partition").alias("partitions"),
        F.count(F.when(~F.col("count").eqNullSafe(F.col("n")), 1)).alias("out_of_sequence"),
        F.count(F.when(~F.col("sum").eqNullSafe(F.col("previous_sum") + _amount(F.col("input"))), 1)).alias("bad_sums"),
        F.countDistinct("input").alias("distinct_inputs"),
        F.max_by(F.struct("count", "sum"), F.struct("partition", "offset")).alias("last"))
    expected = streams_inputs(committed, streams, group_offsets).groupBy("group", "key").agg(
        F.countDistinct("input").alias("inputs"), F.sum("amount").alias("amount"))
    store = _on(committed, streams, "changelog").select(
        "group", "key", "partition", "offset", F.split("text", ",", 3).alias("v")) \
        .groupBy("group", "key").agg(F.max_by(F.struct(F.col("v")[0].try_cast("long").alias("count"),
                                                        F.col("v")[1].try_cast("long").alias("sum")),
                                              F.struct("partition", "offset")).alias("changelog"))
    stored = streams.select(F.col("application_id").alias("group"), F.col("changelog").isNotNull().alias("stored"))
    joined = per_key.join(expected, on=["group", "key"], how="full").join(store, on=["group", "key"], how="full") \
        .join(F.broadcast(stored), on="group", how="left")
    last_count, last_sum = F.coalesce(F.col("last.count"), F.lit(0)), F.coalesce(F.col("last.sum"), F.lit(0))
    found = F.array(
        F.when(F.col("partitions") > 1, F.lit("split")),
        F.when(F.col("out_of_sequence") > 0, F.lit("sequence")),
        F.when(F.col("bad_sums") > 0, F.lit("sum")),
        F.when(F.col("distinct_inputs") < F.col("updates"), F.lit("repeated-input")),
        F.when(last_count != F.coalesce(F.col("inputs"), F.lit(0)), F.lit("final-count")),
        F.when(last_sum != F.coalesce(F.col("amount"), F.lit(0)), F.lit("final-sum")),
        F.when(F.col("stored") & ~F.col("changelog").eqNullSafe(F.col("last")), F.lit("changelog")))
    return joined.withColumn("problems", F.filter(found, lambda p: p.isNotNull())) \
        .where(F.size("problems") > 0) \
        .select("group", "key", "problems", F.coalesce("inputs", F.lit(0)).alias("inputs"),
                F.coalesce("amount", F.lit(0)).alias("amount"), F.coalesce("updates", F.lit(0)).alias("updates"),
                "last", "changelog")


def open_transactions(end_offsets: DataFrame) -> DataFrame:
    """topic, partition, lso, hwm of partitions whose LSO stayed behind the HWM."""
    return end_offsets.where(F.col("lso") < F.col("hwm"))


def unrecognised(records: DataFrame) -> DataFrame:
    return records.where(F.col("kind") == "foreign").select("view", *POSITION, "text")


def unaccounted(uncommitted: DataFrame, writes: DataFrame) -> DataFrame:
    """id, attempt, producer, kind, copies, positions: a record of this run (a well-formed id of its run tag)
    in the log (read_uncommitted: committed or not) that no write of the history accounts for. kind: what
    its producer process writes in the history (txn, process, produce), else "unknown process"."""
    found = _visible(uncommitted).join(writes.select("id"), on="id", how="left_anti") \
        .groupBy("id", "attempt", "producer").agg(
            F.count(F.lit(1)).alias("copies"),
            F.slice(F.sort_array(F.collect_list(F.struct(*POSITION))), 1, 5).alias("positions"))
    kinds = writes.groupBy(F.col("process").alias("producer")).agg(F.first("f").alias("kind"))
    return found.join(F.broadcast(kinds), on="producer", how="left") \
        .select("id", "attempt", "producer", F.coalesce("kind", F.lit("unknown process")).alias("kind"), "copies",
                "positions")


# ---- the consumers' polls: Jepsen's poll-skip, nonmonotonic-poll and unseen ------------------------------
STREAM = ("consumer", "topic", "partition")     # one consumer instance's polls of one partition
LISTED = 100                                     # skipped offsets listed per poll-skip (all are counted)


def consumer_positions(polls: DataFrame, seeks: DataFrame, committed: DataFrame, uncommitted: DataFrame) -> DataFrame:
    """The consumers' streams and the two views in one frame, ranked in one sort per partition. Rows:
    consumer, isolation, topic, partition, time, pos, at (a polled record's offset; null for a seek or a view
    record), q (its offset: the polled offset, the seek's position, the view record's), v (1: a view
    record), lt / le: how many records of its isolation level's view (committed for read_committed,
    uncommitted for read_uncommitted) lie below / at or below q; a view record's lt is its rank in the view.
    A seek of unknown position (q null) has lt and le null."""
    view = committed.select(F.lit("read_committed").alias("isolation"), *POSITION) \
        .unionByName(uncommitted.select(F.lit("read_uncommitted").alias("isolation"), *POSITION)) \
        .select(F.lit(None).cast("string").alias("consumer"), "isolation", "topic", "partition",
                F.lit(None).cast("long").alias("time"), F.lit(None).cast("int").alias("pos"),
                F.lit(None).cast("long").alias("at"), F.col("offset").alias("q"), F.lit(1).alias("v"))
    polled = polls.select("consumer", "isolation", "topic", "partition", "time", F.col("pos").cast("int"),
                          F.col("offset").alias("at"), F.col("offset").alias("q"), F.lit(0).alias("v"))
    sought = seeks.select("consumer", "isolation", "topic", "partition", "time", F.lit(-1).alias("pos"),
                          F.lit(None).cast("long").alias("at"), F.col("offset").alias("q"), F.lit(0).alias("v"))
    rows = polled.unionByName(sought).unionByName(view)
    order = Window.partitionBy("isolation", "topic", "partition").orderBy("q")
    below = F.coalesce(F.sum("v").over(order.rangeBetween(Window.unboundedPreceding, -1)), F.lit(0))
    upto = F.coalesce(F.sum("v").over(order.rangeBetween(Window.unboundedPreceding, 0)), F.lit(0))
    known = rows.where(F.col("q").isNotNull()).withColumn("lt", below).withColumn("le", upto)
    unknown = rows.where(F.col("q").isNull()).withColumn("lt", F.lit(None).cast("long")) \
        .withColumn("le", F.lit(None).cast("long"))
    return known.unionByName(unknown)


def _poll_steps(positions: DataFrame) -> DataFrame:
    """Per polled record, what came before it in its consumer's stream of that partition (history order:
    time, then place in the poll): previous (the offset polled before; null after a seek or at the start),
    sought (the seek's position when a seek came before; null otherwise or when unknown), expected (the
    view rank the consumer had to read next: after the previous record, or at the seek; null: unknown)."""
    stream = Window.partitionBy(*STREAM).orderBy("time", "pos")
    following = F.when(F.col("at").isNotNull(), F.col("le")).otherwise(F.col("lt"))
    return positions.where(F.col("v") == 0) \
        .withColumn("previous", F.lag("at").over(stream)) \
        .withColumn("sought", F.when(F.lag("at").over(stream).isNull(), F.lag("q").over(stream))) \
        .withColumn("expected", F.lag(following).over(stream)) \
        .where(F.col("at").isNotNull())


def poll_skips(positions: DataFrame) -> DataFrame:
    """consumer, isolation, topic, partition, previous, sought, offset, count, skipped: a consumer's polls
    of a partition passed over `count` records its view holds between `previous` (or from `sought`) and
    `offset`, listed (the first LISTED) in `skipped`."""
    steps = _poll_steps(positions).withColumn("count", F.col("lt") - F.col("expected")) \
        .where(F.col("count") > 0)
    key = ("consumer", "isolation", "topic", "partition", "previous", "sought", "offset", "count")
    listed = steps.select(*key[:-2], F.col("at").alias("offset"), "count", F.explode(F.sequence(
        F.col("expected"), F.least(F.col("lt") - 1, F.col("expected") + LISTED - 1))).alias("rank"))
    ranks = positions.where(F.col("v") == 1).select("isolation", "topic", "partition", F.col("lt").alias("rank"),
                                                    F.col("q").alias("skipped"))
    return listed.join(ranks, on=["isolation", "topic", "partition", "rank"], how="left") \
        .groupBy(*key).agg(F.sort_array(F.collect_list("skipped")).alias("skipped"))


def nonmonotonic_polls(positions: DataFrame) -> DataFrame:
    """consumer, isolation, topic, partition, previous, offset: a consumer polled `offset` right after
    `previous` (no seek between) although offset <= previous: backwards, or the same offset again."""
    return _poll_steps(positions).where(F.col("previous").isNotNull() & (F.col("at") <= F.col("previous"))) \
        .select("consumer", "isolation", "topic", "partition", "previous", F.col("at").alias("offset"))


def unseen(index: DataFrame, polls: DataFrame, skips: DataFrame) -> DataFrame:
    """id, attempt, topic, partition, offset, polled_to: an acknowledged (`ok`) write, at its offset in the
    committed view, that no read_committed consumer polled although one of them polled that partition past
    it (up to `polled_to`). A write inside the gap of a read_committed poll-skip is that poll-skip's
    anomaly, reported there (one anomaly, one report)."""
    rc = polls.where(F.col("isolation") == "read_committed")
    reach = rc.groupBy("topic", "partition").agg(F.max("offset").alias("polled_to"))
    acked = index.where((F.col("outcome") == "ok") & (F.col("copies") > 0)) \
        .select("id", "attempt", "at").select("id", "attempt", "at.*")
    missed = acked.join(reach, on=["topic", "partition"], how="inner").where(F.col("offset") < F.col("polled_to")) \
        .join(rc.select(*POSITION).distinct(), on=list(POSITION), how="left_anti")
    gaps = skips.where(F.col("isolation") == "read_committed").select(
        F.col("topic").alias("g_topic"), F.col("partition").alias("g_partition"),
        F.coalesce(F.col("previous") + 1, F.col("sought")).alias("g_from"), F.col("offset").alias("g_to"))
    inside = (F.col("topic") == F.col("g_topic")) & (F.col("partition") == F.col("g_partition")) \
        & (F.col("offset") >= F.col("g_from")) & (F.col("offset") < F.col("g_to"))
    return missed.join(gaps, on=inside, how="left_anti").select("id", "attempt", *POSITION, "polled_to")
