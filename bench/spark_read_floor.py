"""What Spark's Kafka connector alone takes to read both views of a run, the two reads `txnlab verify` must make:
the floor under verify's time in Spark (bench/verify_throughput.py runs it beside verify).

    spark-submit ... bench/spark_read_floor.py RUN_DIR          (the benchmark builds the command: submit.spark_submit)

Reads the run's topics with load.read_view exactly as the job does (read_committed to the recorded LSOs,
read_uncommitted to the HWMs, the connection from $TXNLAB_KAFKA_*), touching each record's value and headers
(their lengths summed, so the bytes are fetched and decoded into rows) and nothing more: no parsing, no
checks. One Spark job for both views; prints one JSON line: records per view and the job's seconds (from
its start to its last row on the driver, without the session's start).
Owns: nothing beyond this measurement. Must not: write anything.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cluster.access.connection import ConnectionSettings
from spark_analysis import load
from spark_analysis.evidence import load_run_files

def main(run_dir: Path) -> int:
    evidence = load_run_files(run_dir)
    if not evidence.end_offsets:
        print(json.dumps({"error": f"{run_dir}: no end offsets: {evidence.gaps}"}))
        return 2
    spark = SparkSession.builder.appName("txnlab-bench-read-floor").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        options = load.kafka_options(ConnectionSettings.from_env().java_properties())
        started = time.monotonic()
        views = [load.read_view(spark, options, load.view_ends(evidence.end_offsets, end), isolation)
                 .select(F.lit(isolation).alias("view"), F.length("value").alias("bytes"),
                         F.size("headers").alias("headers"))
                 for isolation, end in load.VIEWS]
        rows = views[0].unionByName(views[1]).groupBy("view").agg(
            F.count(F.lit(1)).alias("records"), F.sum("bytes").alias("bytes"), F.sum("headers").alias("headers")).collect()
        seconds = time.monotonic() - started
    finally:
        spark.stop()
    print(json.dumps({"seconds": round(seconds, 2), "views": {r["view"]: {"records": r["records"], "bytes": r["bytes"],
                                                                          "headers": r["headers"]} for r in rows}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
