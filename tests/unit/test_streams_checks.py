"""The Kafka Streams checks (checks.streams_processing, checks.streams_state) on tiny frames: a clean run of
the topology, and each anomaly planted once, reported once; a Flink job (no changelog) judged the same way."""
from __future__ import annotations

import json

import pytest

from spark_analysis import checks, load

COLS = "view string, topic string, partition int, offset long, key string, id string, attempt string, " \
       "producer string, input string, text string, kind string, value_hash long"
GROUPS = "group string, topic string, partition int, committed long"
APP = ("app", ["in"], "out", "cnt", "app-counts-changelog")


def inp(offset, rid, key, partition=0):
    return ("committed", "in", partition, offset, key, rid, rid.rsplit(".", 1)[0], rid.split(".")[1], None, None,
            "txnlab", offset)


def derived(topic, offset, key, text, partition=0):
    return ("committed", topic, partition, offset, key, None, None, None, None, text, "streams", offset)


def out(offset, rid, key):
    return derived("out", offset, key, json.dumps({"input": rid, "instance": "streams-0"}))


def update(offset, key, count, total, rid, partition=0):
    return derived("cnt", offset, key, json.dumps({"key": key, "count": count, "sum": total, "input": rid}), partition)


def stored(offset, key, count, total, rid):
    return derived("app-counts-changelog", offset, key, f"{count},{total},{rid}")


# three inputs below the committed offset 3 (amount = 1 + the id's last index), one above it
INPUTS = [inp(0, "r.p.0.0", "k1"), inp(1, "r.p.0.1", "k1"), inp(2, "r.p.1.0", "k2"), inp(3, "r.p.1.1", "k2")]
CLEAN = INPUTS + [out(0, "r.p.0.0", "k1"), out(1, "r.p.0.1", "k1"), out(2, "r.p.1.0", "k2"),
                  update(0, "k1", 1, 1, "r.p.0.0"), update(1, "k1", 2, 3, "r.p.0.1"), update(2, "k2", 1, 1, "r.p.1.0"),
                  stored(0, "k1", 1, 1, "r.p.0.0"), stored(1, "k1", 2, 3, "r.p.0.1"), stored(2, "k2", 1, 1, "r.p.1.0")]


def run_checks(spark, rows, app=APP):
    committed = spark.createDataFrame(rows, COLS)
    streams = spark.createDataFrame([app], load.STREAMS_SCHEMA)
    groups = spark.createDataFrame([("app", "in", 0, 3)], GROUPS)
    processing = checks.streams_processing(committed, streams, groups).collect()
    state = checks.streams_state(committed, streams, groups).collect()
    return ([(r["problem"], r["input"], r["outputs"]) for r in processing],
            [(r["key"], r["problems"]) for r in state])


def test_a_clean_run_has_no_anomaly(spark):
    assert run_checks(spark, CLEAN) == ([], [])


def test_a_double_count_is_one_anomaly_of_its_key(spark):
    processing, state = run_checks(spark, CLEAN + [update(3, "k1", 3, 5, "r.p.0.1")])
    assert processing == []
    assert state == [("k1", ["repeated-input", "final-count", "final-sum", "changelog"])]


def test_a_lost_update_is_one_anomaly_of_its_key(spark):
    rows = [r for r in CLEAN if r[1] != "cnt" or r[3] != 0] + [update(5, "k1", 2, 3, "r.p.0.1")]  # 1st update lost
    rows = [r for r in rows if not (r[1] == "cnt" and r[3] == 1)]
    processing, state = run_checks(spark, rows)
    assert processing == []
    assert state == [("k1", ["sequence", "sum"])]


def test_a_state_behind_its_changelog_and_a_split_key(spark):
    rows = CLEAN + [stored(3, "k2", 2, 2, "r.p.1.0")]                  # changelog ahead of the updates
    assert run_checks(spark, rows)[1] == [("k2", ["changelog"])]
    rows = [r for r in CLEAN if not (r[1] == "cnt" and r[3] == 1)] + [update(0, "k1", 2, 3, "r.p.0.1", partition=1)]
    assert run_checks(spark, rows)[1] == [("k1", ["split"])]


@pytest.mark.parametrize("extra, expected", [
    ([out(3, "r.p.0.0", "k1")], [("duplicate-output", "r.p.0.0", ["out-0-0", "out-0-3"])]),
    ([out(3, "r.p.1.1", "k2")], [("output-without-committed-input", "r.p.1.1", ["out-0-3"])]),
])
def test_stateless_step_anomalies(spark, extra, expected):
    assert run_checks(spark, CLEAN + extra)[0] == expected


def test_an_unprocessed_input(spark):
    rows = [r for r in CLEAN if not (r[1] == "out" and r[3] == 2)]
    assert run_checks(spark, rows)[0] == [("unprocessed", "r.p.1.0", None)]


FLINK_JOB = ("app", ["in"], "out", "cnt", None)          # a Flink job: its state in checkpoints, no changelog
FLINK_CLEAN = [r for r in CLEAN if r[1] != "app-counts-changelog"]


def test_a_flink_job_without_changelog_is_judged_on_its_outputs_and_counts_alone(spark):
    assert run_checks(spark, FLINK_CLEAN, FLINK_JOB) == ([], [])
    lost = [r for r in FLINK_CLEAN if not (r[1] in ("out", "cnt") and r[3] == 1)]   # one input's outputs lost
    processing, state = run_checks(spark, lost, FLINK_JOB)
    assert processing == [("unprocessed", "r.p.0.1", None)]
    assert state == [("k1", ["final-count", "final-sum"])]
