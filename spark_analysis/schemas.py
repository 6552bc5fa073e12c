"""The shapes the checks work on: the history as Spark reads it, record values, and the normalised frames.

Owns: the explicit schema of a history line (chaos/record/history.py writes it; every field any workload puts
in `value` that a check reads), the schema of a txnlab record value (chaos/record/ids.py), and the column
contract of the frames the checks take:
  records   view, topic, partition, offset, key, id, attempt, producer, input, text, kind, value_hash
            (kind: "txnlab" a record with a well-formed id of this run, "copier" a value on a Java copier
             topic (input or output: the Java tools write plain values; outputs are verbatim copies),
             "streams" a record on a Kafka Streams application's output, counts or changelog topic (its
             value in text; Kafka Streams copies an input's headers to its outputs, so no id is taken),
             "foreign" anything else: not JSON, no id or another run's, another writer;
             input: a processor output's input id, from the record itself)
  writes    attempt, process, f, outcome, id, topic, partition, input, group
            (f: txn | process | produce (the storm's idempotent sends); outcome: ok | fail | info of the
             attempt; null when the history holds no completion)
  acked     topic, partition, offset, id: where producers were acknowledged (load.acknowledged)
  streams   application_id, sources, sink, counts, changelog: each Kafka Streams application of the run
            (load.STREAMS_SCHEMA; its consumer group is its application id)
Must not: read files or Kafka (load.py does), or decide anything (checks.py does).
"""
from __future__ import annotations

from pyspark.sql.types import (ArrayType, BooleanType, DoubleType, IntegerType, LongType, StringType, StructField,
                               StructType)

WRITE = StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                    StructField("id", StringType()), StructField("input", StringType())])
POSITION = StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                       StructField("offset", LongType()), StructField("id", StringType())])

OP_VALUE = StructType([
    StructField("attempt", StringType()), StructField("producer", StringType()),
    StructField("txn_id", StringType()), StructField("group", StringType()),
    StructField("abort", BooleanType()), StructField("writes", ArrayType(WRITE)),
    StructField("offsets", ArrayType(LongType())), StructField("inputs", ArrayType(POSITION)),
    StructField("commit_offsets", ArrayType(POSITION)), StructField("error", StringType()),
    StructField("fenced", BooleanType()), StructField("reason", StringType()),
    StructField("isolation", StringType()), StructField("records", ArrayType(POSITION)),
    StructField("positions", ArrayType(POSITION)),     # a consumer's `seek` (chaos/workloads/confluent/observer.py)
    # Kafka's Java tools (chaos/workloads/java_copier.py): VerifiableProducer sends and the JVM's args
    StructField("id", StringType()), StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("tool", StringType()), StructField("args", ArrayType(StringType())),
    # the Kafka Streams and Flink workloads' events (chaos/workloads/streams.py, flink.py): topology, progress
    StructField("event", StringType()), StructField("application_id", StringType()),
    StructField("sources", ArrayType(StringType())), StructField("sink", StringType()),
    StructField("counts", StringType()), StructField("changelog", StringType()), StructField("processed", LongType()),
    StructField("drained", BooleanType()),              # a Flink job's client's stop (chaos/workloads/flink.py)
])

HISTORY_COLUMNS = StructType([        # a history line; the columnar twin's schema (chaos/record/columnar.py writes it)
    StructField("time", LongType()), StructField("wall", DoubleType()), StructField("process", StringType()),
    StructField("type", StringType()), StructField("f", StringType()), StructField("value", OP_VALUE),
])
HISTORY = StructType([*HISTORY_COLUMNS.fields, StructField("_corrupt_record", StringType())])

RECORD_VALUE = StructType([StructField("id", StringType()), StructField("attempt", StringType()),
                           StructField("producer", StringType()), StructField("input", StringType())])

TRANSACTIONAL_F = ("txn", "process")     # history f of an attempt that writes records in a transaction
OUTCOMES = ("ok", "fail", "info")
