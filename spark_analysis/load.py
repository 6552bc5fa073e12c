"""Loading a run for the checks: its history (JSON lines) and its output topics straight from Kafka.

Owns: reading <run>/history/*.jsonl with the explicit schema (PERMISSIVE: a damaged line becomes a
`_corrupt_record`, counted, never a crash); the frames derived from it (writes, observed reads,
the Java tools' sends and topics); reading a topic in both isolation levels with Spark's Kafka connector,
bounded by the end offsets the run recorded (read_committed to the LSO, read_uncommitted to the HWM);
turning Kafka rows into the `records` frame (schemas.py). All of it lazy: nothing record-sized reaches
the driver.
Must not: decide what is an anomaly (checks.py), or import chaos/ (what the siblings share travels as
data: the history and the record values).
"""
from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_analysis.schemas import HISTORY, RECORD_VALUE, TRANSACTIONAL_F

HEADER_ID, HEADER_ATTEMPT, HEADER_PRODUCER = "txnlab.id", "txnlab.attempt", "txnlab.producer"   # chaos/ids.py
COPIER_TOOL = "TransactionalMessageCopier"
PRODUCER_TOOL = "VerifiableProducer"


# ---- the history --------------------------------------------------------------------------------------
def read_history(spark: SparkSession, run_dir: Path) -> DataFrame:
    parts = sorted(str(p) for p in (Path(run_dir) / "history").glob("part-*.jsonl"))
    if not parts:
        return spark.createDataFrame([], HISTORY)
    return spark.read.schema(HISTORY).option("mode", "PERMISSIVE") \
        .option("columnNameOfCorruptRecord", "_corrupt_record").json(parts)


def corrupt_lines(ops: DataFrame) -> DataFrame:
    return ops.where(F.col("_corrupt_record").isNotNull())


def writes_of(ops: DataFrame) -> DataFrame:
    """One row per record a transactional attempt wrote, with the attempt's outcome (null: none recorded)."""
    valid = ops.where(F.col("_corrupt_record").isNull() & F.col("f").isin(*TRANSACTIONAL_F)
                      & F.col("value.attempt").isNotNull())
    invoked = valid.where(F.col("type") == "invoke").select(
        F.col("value.attempt").alias("attempt"), F.col("process"), F.col("f"), F.col("value.group").alias("group"),
        F.explode_outer("value.writes").alias("w"))
    outcomes = valid.where(F.col("type") != "invoke").groupBy(F.col("value.attempt").alias("attempt")) \
        .agg(F.first("type").alias("outcome"))
    return invoked.join(outcomes, on="attempt", how="left").select(
        "attempt", "process", "f", "outcome", F.col("w.id").alias("id"), F.col("w.topic").alias("topic"),
        F.col("w.partition").alias("partition"), F.col("w.input").alias("input"), "group")


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


def tool_sends(ops: DataFrame) -> DataFrame:
    """Records Kafka's VerifiableProducer had acknowledged: id (the value), topic, partition, offset."""
    return ops.where((F.col("f") == "produce") & (F.col("type") == "ok") & F.col("value.id").isNotNull()) \
        .select(F.col("value.id").alias("id"), F.col("value.topic").alias("topic"),
                F.col("value.partition").alias("partition"), F.col("value.offset").alias("offset"))


def copier_topics(ops: DataFrame) -> DataFrame:
    """(input, output, group) of every TransactionalMessageCopier the run started (small)."""
    jvms = ops.where((F.col("f") == "jvm") & (F.col("type") == "invoke") & (F.col("value.tool") == COPIER_TOOL))
    args = F.col("value.args")
    return jvms.select(_arg_after(args, "--input-topic").alias("input"),
                       _arg_after(args, "--output-topic").alias("output"),
                       _arg_after(args, "--consumer-group").alias("group")).distinct()


def _arg_after(args: Column, flag: str) -> Column:
    at = F.array_position(args, flag).cast("int")
    return F.when(at > 0, F.try_element_at(args, at + 1))


# ---- Kafka --------------------------------------------------------------------------------------------
def kafka_options(java_properties: dict[str, str]) -> dict[str, str]:
    """Connection settings as the connector's `kafka.`-prefixed options."""
    return {f"kafka.{k}": v for k, v in java_properties.items()}


def read_view(spark: SparkSession, options: dict[str, str], ends: dict[str, dict[str, int]],
              isolation: str) -> DataFrame:
    """Every record of the topics in `ends` from offset 0 up to the given end offset per partition."""
    assign = {topic: sorted(int(p) for p in parts) for topic, parts in ends.items()}
    return spark.read.format("kafka").options(**options) \
        .option("assign", json.dumps(assign)) \
        .option("startingOffsets", json.dumps({t: {str(p): -2 for p in ps} for t, ps in assign.items()})) \
        .option("endingOffsets", json.dumps({t: {str(p): int(o) for p, o in parts.items()}
                                             for t, parts in ends.items()})) \
        .option("kafka.isolation.level", isolation) \
        .option("includeHeaders", "true") \
        .option("failOnDataLoss", "false") \
        .load()


def _header(name: str) -> Column:
    """The string value of header `name` (the first, if repeated), null when absent."""
    found = F.filter(F.coalesce(F.col("headers"), F.array()), lambda h: h["key"] == name)
    return F.try_element_at(found, F.lit(1))["value"].cast("string")


def records_of(raw: DataFrame, view: str, copier_topics: list[str] = ()) -> DataFrame:
    """Kafka rows -> the `records` frame. A txnlab workload's record carries its id, attempt and producer in
    headers (chaos/ids.py), read without parsing the value; a record without them has its value parsed
    as JSON (null when it is not)."""
    text = F.col("value").cast("string")
    hid, hattempt, hproducer = _header(HEADER_ID), _header(HEADER_ATTEMPT), _header(HEADER_PRODUCER)
    parsed = F.when(hid.isNull(), F.from_json(text, RECORD_VALUE, {"mode": "PERMISSIVE"}))
    rid = F.coalesce(hid, parsed["id"])
    kind = F.when(rid.isNotNull(), F.lit("txnlab")) \
        .when(F.col("topic").isin(*copier_topics) & text.isNotNull(), F.lit("copier")).otherwise(F.lit("foreign"))
    return raw.select(
        F.lit(view).alias("view"), "topic", "partition", "offset", rid.alias("id"),
        F.when(hid.isNotNull(), hattempt).otherwise(parsed["attempt"]).alias("attempt"),
        F.when(hid.isNotNull(), hproducer).otherwise(parsed["producer"]).alias("producer"),
        F.when(rid.isNull(), text).alias("text"), kind.alias("kind"), F.xxhash64("value").alias("value_hash"))
