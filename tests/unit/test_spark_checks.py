"""The verification checks on tiny DataFrames built here: per anomaly a planted case, a clean case and a
null/malformed case, asserting on the check's output rows."""
from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from spark_analysis import checks, load
from spark_analysis.schemas import HISTORY

RECORD_COLS = "view string, topic string, partition int, offset long, id string, attempt string, producer string, " \
              "input string, text string, kind string, value_hash long"
WRITE_COLS = "attempt string, process string, f string, outcome string, id string, topic string, partition int, " \
             "input string, group string"


@pytest.fixture(scope="module")
def spark():
    session = (SparkSession.builder.master("local[1]").appName("txnlab-unit")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def rec(offset, rid, topic="t", partition=0, view="committed", inp=None, text=None, kind=None, value_hash=None):
    producer = rid.split(".")[1] if rid else None
    attempt = rid.rsplit(".", 1)[0] if rid else None
    kind = kind or ("txnlab" if rid else "foreign")
    return (view, topic, partition, offset, rid, attempt, producer, inp, text, kind,
            value_hash if value_hash is not None else hash((rid, text)) % 10**9)


def write(rid, outcome, f="txn", topic="t", partition=0, inp=None, group=None):
    attempt = rid.rsplit(".", 1)[0] if rid else "r.p.9"
    return (attempt, attempt.split(".")[1], f, outcome, rid, topic, partition, inp, group)


def records(spark, rows):
    return spark.createDataFrame(rows, RECORD_COLS)


def writes(spark, rows):
    return spark.createDataFrame(rows, WRITE_COLS)


def index(spark, committed_rows, write_rows):
    return checks.id_index(records(spark, committed_rows), writes(spark, write_rows))


def ids(df, column="id"):
    return sorted(r[column] for r in df.collect())


# ---- duplicates ---------------------------------------------------------------------------------------
def test_duplicate_planted(spark):
    got = checks.duplicates(index(spark, [rec(1, "r.p.0.0"), rec(5, "r.p.0.0"), rec(2, "r.p.0.1")],
                                  [write("r.p.0.0", "ok"), write("r.p.0.1", "ok")])).collect()
    assert [(r["id"], r["copies"], [p["offset"] for p in r["positions"]]) for r in got] == [("r.p.0.0", 2, [1, 5])]


def test_duplicate_clean_and_null(spark):
    assert ids(checks.duplicates(index(spark, [rec(1, "r.p.0.0"), rec(2, "r.p.0.1")], []))) == []
    foreign = [rec(1, None, text="x"), rec(2, None, text="x")]
    assert ids(checks.duplicates(index(spark, foreign, []))) == []


# ---- aborted reads --------------------------------------------------------------------------------------
def test_aborted_read_planted(spark):
    got = checks.aborted_reads(index(spark, [rec(3, "r.p.1.0"), rec(4, "r.p.2.0")],
                                     [write("r.p.1.0", "fail"), write("r.p.1.1", "fail"), write("r.p.2.0", "ok")]))
    rows = got.collect()
    assert [(r["id"], r["attempt"], r["at"]["offset"]) for r in rows] == [("r.p.1.0", "r.p.1", 3)]


def test_aborted_read_clean_and_null(spark):
    assert ids(checks.aborted_reads(index(spark, [rec(3, "r.p.2.0")], [write("r.p.1.0", "fail"),
                                                                         write("r.p.2.0", "ok")]))) == []
    nulls = [write(None, "fail"), write("r.p.3.0", None)]
    assert ids(checks.aborted_reads(index(spark, [rec(1, None, text="?"), rec(2, "r.p.3.0")], nulls))) == []


# ---- lost writes ----------------------------------------------------------------------------------------
def test_lost_write_planted(spark):
    got = checks.lost_writes(index(spark, [rec(0, "r.p.0.0")], [write("r.p.0.0", "ok"), write("r.p.0.1", "ok", partition=4)]))
    assert [(r["id"], r["attempt"], r["partition"]) for r in got.collect()] == [("r.p.0.1", "r.p.0", 4)]


def test_lost_write_clean_and_null(spark):
    assert ids(checks.lost_writes(index(spark, [rec(0, "r.p.0.0")], [write("r.p.0.0", "ok"),
                                                                       write("r.p.1.0", "fail")]))) == []
    # no outcome recorded (a cut history) is not a committed write; a null id is nothing
    assert ids(checks.lost_writes(index(spark, [], [write("r.p.2.0", None), write(None, "ok")]))) == []


# ---- torn transactions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("outcome", ["ok", "fail", "info"])
def test_torn_transaction_planted(spark, outcome):
    got = checks.torn_transactions(index(spark, [rec(0, "r.p.0.0")], [write("r.p.0.0", outcome), write("r.p.0.1", outcome)]))
    assert [(r["attempt"], r["outcome"], r["expected"], r["visible"]) for r in got.collect()] == [("r.p.0", outcome, 2, 1)]


def test_torn_transaction_clean_and_null(spark):
    whole = [write("r.p.0.0", "ok"), write("r.p.0.1", "ok"), write("r.p.1.0", "fail"), write("r.p.1.1", "fail")]
    assert ids(checks.torn_transactions(index(spark, [rec(0, "r.p.0.0"), rec(1, "r.p.0.1")], whole)), "attempt") == []
    # a record the history never wrote (foreign id) makes no attempt torn
    assert ids(checks.torn_transactions(index(spark, [rec(0, "x.q.5.0")], [write(None, "ok")])), "attempt") == []


def test_info_attempts_resolve_all_or_nothing(spark):
    ws = [write("r.p.0.0", "info"), write("r.p.0.1", "info"), write("r.p.1.0", "info"), write("r.p.2.0", "info"),
          write("r.p.2.1", "info")]
    got = checks.info_resolutions(index(spark, [rec(0, "r.p.0.0"), rec(1, "r.p.0.1"), rec(2, "r.p.2.0")], ws))
    assert {r["attempt"]: r["resolution"] for r in got.collect()} == {"r.p.0": "committed", "r.p.1": "aborted",
                                                                        "r.p.2": "torn"}


# ---- nonmonotonic sends ---------------------------------------------------------------------------------
def test_nonmonotonic_send_planted(spark):
    got = checks.nonmonotonic_sends(index(spark, [rec(0, "r.p.1.0"), rec(1, "r.p.2.0"), rec(2, "r.p.1.1")], []))
    assert [(r["id"], r["previous_id"], r["offset"]) for r in got.collect()] == [("r.p.1.1", "r.p.2.0", 2)]


def test_nonmonotonic_send_clean_and_null(spark):
    clean = [rec(0, "r.p.1.0"), rec(1, "r.p.1.1"), rec(2, "r.p.2.0"), rec(3, "r.q.0.0"), rec(4, "r.p.1.0")]
    assert ids(checks.nonmonotonic_sends(index(spark, clean, []))) == []    # a later duplicate is not a reorder
    assert ids(checks.nonmonotonic_sends(index(spark, [rec(0, None, text="a"), rec(1, None, text="b")], []))) == []
    odd = [rec(0, "r.p.3.0"), ("committed", "t", 0, 1, "not-an-id", None, "p", None, None, "txnlab", 1)]
    assert ids(checks.nonmonotonic_sends(index(spark, odd, []))) == []     # an id of another scheme: no crash


# ---- inconsistent offsets -------------------------------------------------------------------------------
OBS_COLS = "process string, isolation string, topic string, partition int, offset long, id string"


def test_inconsistent_offsets_planted(spark):
    committed = records(spark, [rec(3, "r.p.0.0"), rec(7, "r.p.0.5")])
    uncommitted = records(spark, [rec(3, "r.p.0.9", view="uncommitted"), rec(4, "r.p.0.1", view="uncommitted"),
                                  rec(9, "r.p.1.0", view="uncommitted")])
    observed = spark.createDataFrame([("obs-ru", "read_uncommitted", "t", 0, 4, "r.p.0.2"),
                                      ("obs-rc", "read_committed", "t", 0, 9, "r.p.1.0")], OBS_COLS)
    got = {(r["reader"].split(" ")[0], r["offset"]) for r in checks.inconsistent_offsets(committed, uncommitted, observed).collect()}
    # 3: the views disagree; 7: only read_committed has it; 4: the observer saw another id; 9: a
    # read_committed observer saw what the committed view does not hold
    assert got == {("read_committed", 3), ("read_committed", 7), ("observer", 4)} | {("read_committed", 9)}


def test_inconsistent_offsets_clean_and_null(spark):
    same = [rec(1, "r.p.0.0"), rec(2, None, text="foreign", value_hash=42)]
    committed = records(spark, same)
    uncommitted = records(spark, [r[:0] + ("uncommitted",) + r[1:] for r in same] + [rec(3, "r.p.1.0", view="uncommitted")])
    observed = spark.createDataFrame([("obs", "read_uncommitted", "t", 0, 2, None),
                                      ("obs", "read_committed", "t", 0, 1, "r.p.0.0")], OBS_COLS)
    assert checks.inconsistent_offsets(committed, uncommitted, observed).count() == 0


# ---- exactly-once processing ----------------------------------------------------------------------------
GROUP_COLS = "group string, topic string, partition int, committed long"
CONSUMED_COLS = "group string, topic string, partition int"


def processing_case(spark, outputs, committed_offset=3):
    inputs = [rec(0, "r.f.0.0", topic="in"), rec(1, "r.f.0.1", topic="in"), rec(2, "r.f.0.2", topic="in"),
              rec(3, "r.f.0.3", topic="in")]
    out_records = [rec(i, rid, topic="out", inp=inp) for i, (rid, inp, _) in enumerate(outputs)]
    out_writes = [write(rid, outcome, f="process", topic="out", inp=inp, group="g") for rid, inp, outcome in outputs]
    visible = [r for r, (_, _, outcome) in zip(out_records, outputs) if outcome == "ok"]
    return checks.processing(records(spark, inputs + visible), writes(spark, out_writes),
                             spark.createDataFrame([("g", "in", 0)], CONSUMED_COLS),
                             spark.createDataFrame([("g", "in", 0, committed_offset)], GROUP_COLS))


def test_processing_planted(spark):
    got = processing_case(spark, [("r.x.0.0", "r.f.0.0", "ok"), ("r.x.1.0", "r.f.0.1", "ok"),
                                  ("r.y.0.0", "r.f.0.1", "ok"), ("r.x.2.0", "r.f.0.3", "ok")])
    assert {(r["problem"], r["input"]) for r in got.collect()} == {
        ("duplicate-output", "r.f.0.1"), ("unprocessed", "r.f.0.2"), ("output-without-committed-input", "r.f.0.3")}


def test_processing_clean_and_null(spark):
    clean = [("r.x.0.0", "r.f.0.0", "ok"), ("r.x.0.1", "r.f.0.1", "ok"), ("r.x.0.2", "r.f.0.2", "ok"),
             ("r.x.1.0", "r.f.0.0", "fail")]         # an aborted second output of the same input is fine
    assert processing_case(spark, clean).count() == 0
    with_null = clean + [(None, None, "ok")]
    assert processing_case(spark, with_null).count() == 0


# ---- Kafka's copier -------------------------------------------------------------------------------------
SENDS_COLS = "id string, topic string, partition int, offset long"
COPIERS_COLS = "input string, output string, group string"


def copy_case(spark, output_texts, committed_offset=3):
    sends = spark.createDataFrame([(f"v.{i}", "cin", 0, i) for i in range(4)], SENDS_COLS)
    outs = [rec(i, None, topic="cout", text=t, kind="copier") for i, t in enumerate(output_texts)]
    return checks.copies(records(spark, outs), sends, spark.createDataFrame([("cin", "cout", "cg")], COPIERS_COLS),
                         spark.createDataFrame([("cg", "cin", 0, committed_offset)], GROUP_COLS))


def test_copy_planted(spark):
    got = copy_case(spark, ["v.0", "v.0", "v.3"])
    assert {(r["problem"], r["input"]) for r in got.collect()} == {
        ("duplicate-output", "v.0"), ("unprocessed", "v.1"), ("unprocessed", "v.2"),
        ("output-without-committed-input", "v.3")}


def test_copy_clean_and_null(spark):
    assert copy_case(spark, ["v.0", "v.1", "v.2"]).count() == 0
    assert copy_case(spark, ["v.0", "v.1", "v.2", None]).count() == 0


# ---- open at the end, unrecognised ----------------------------------------------------------------------
def test_open_transactions(spark):
    ends = spark.createDataFrame([("t", 0, 5, 9), ("t", 1, 4, 4), ("t", 2, None, 3)],
                                 "topic string, partition int, lso long, hwm long")
    assert [(r["partition"], r["lso"]) for r in checks.open_transactions(ends).collect()] == [(0, 5)]


def test_unrecognised_counts_foreign_records_only(spark):
    df = records(spark, [rec(0, "r.p.0.0"), rec(1, None, text="hello"), rec(2, None, text=None),
                         rec(3, None, text="v.1", kind="copier")])
    assert sorted(r["offset"] for r in checks.unrecognised(df).collect()) == [1, 2]


# ---- loading: Kafka rows -> records, history -> writes --------------------------------------------------
RAW_COLS = "topic string, partition int, offset long, value binary, headers array<struct<key:string,value:binary>>"


def test_records_of_parses_values_headers_and_survives_garbage(spark):
    value = json.dumps({"id": "r.p.0.1", "attempt": "r.p.0", "producer": "p", "pad": "xx"}).encode()
    raw = spark.createDataFrame([
        ("t", 0, 0, value, []),
        ("t", 0, 1, b"\xff\xfe not json", [("txnlab.id", b"r.p.0.2")]),
        ("t", 0, 2, b"{broken", None),
        ("t", 0, 3, None, None),
        ("cout", 0, 0, b"v.7", None)], RAW_COLS)
    got = {(r["topic"], r["offset"]): (r["id"], r["kind"]) for r in load.records_of(raw, "committed", ["cout"]).collect()}
    assert got == {("t", 0): ("r.p.0.1", "txnlab"), ("t", 1): ("r.p.0.2", "txnlab"), ("t", 2): (None, "foreign"),
                   ("t", 3): (None, "foreign"), ("cout", 0): (None, "copier")}


def test_records_of_takes_ids_from_headers_before_the_value(spark):
    headers = [("txnlab.id", b"r.p.1.0"), ("txnlab.attempt", b"r.p.1"), ("txnlab.producer", b"p")]
    raw = spark.createDataFrame([
        ("t", 0, 0, json.dumps({"id": "other", "attempt": "x", "producer": "y"}).encode(), headers),
        ("t", 0, 1, json.dumps({"id": "r.q.0.0", "attempt": "r.q.0", "producer": "q"}).encode(), [("k", b"v")])],
        RAW_COLS)
    got = {r["offset"]: (r["id"], r["attempt"], r["producer"], r["kind"]) for r in load.records_of(raw, "c").collect()}
    assert got == {0: ("r.p.1.0", "r.p.1", "p", "txnlab"), 1: ("r.q.0.0", "r.q.0", "q", "txnlab")}


def test_history_writes_carry_their_attempt_outcome_and_damage_is_counted(spark, tmp_path):
    lines = [
        {"time": 1, "wall": 1.0, "process": "p", "type": "invoke", "f": "txn",
         "value": {"attempt": "r.p.0", "writes": [{"topic": "t", "partition": 0, "id": "r.p.0.0"},
                                                  {"topic": "t", "partition": 1, "id": "r.p.0.1"}]}},
        {"time": 2, "wall": 2.0, "process": "p", "type": "ok", "f": "txn", "value": {"attempt": "r.p.0", "offsets": [4, 5]}},
        {"time": 3, "wall": 3.0, "process": "p", "type": "invoke", "f": "txn",
         "value": {"attempt": "r.p.1", "writes": [{"topic": "t", "partition": 0, "id": "r.p.1.0"}]}},
        {"time": 4, "wall": 4.0, "process": "obs", "type": "ok", "f": "poll",
         "value": {"isolation": "read_committed", "records": [{"topic": "t", "partition": 0, "offset": 4, "id": "r.p.0.0"}]}},
    ]
    (tmp_path / "history").mkdir()
    text = "\n".join(json.dumps(line) for line in lines) + "\n{\"time\": 5, \"process\": \"p\", \"ty"
    (tmp_path / "history" / "part-00000.jsonl").write_text(text)
    ops = load.read_history(spark, tmp_path).cache()
    assert load.corrupt_lines(ops).count() == 1
    got = {(r["id"], r["outcome"]) for r in load.writes_of(ops).collect()}
    assert got == {("r.p.0.0", "ok"), ("r.p.0.1", "ok"), ("r.p.1.0", None)}
    assert [(r["process"], r["offset"], r["id"]) for r in load.observed_reads(ops).collect()] == [("obs", 4, "r.p.0.0")]


def test_copier_topics_come_from_the_copier_jvm_arguments(spark, tmp_path):
    def jvm(tool, args):
        return {"time": 1, "wall": 1.0, "process": "jc/jvm", "type": "invoke", "f": "jvm",
                "value": {"tool": tool, "args": args}}
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "part-00000.jsonl").write_text("\n".join(json.dumps(op) for op in [
        jvm("TransactionalMessageCopier", ["--input-topic", "cin", "--output-topic", "cout", "--consumer-group", "g"]),
        jvm("TransactionalMessageCopier", ["--input-topic", "cin"]),
        jvm("VerifiableProducer", ["--topic", "cin"])]) + "\n")
    got = {tuple(r) for r in load.copier_topics(load.read_history(spark, tmp_path)).collect()}
    assert got == {("cin", "cout", "g"), ("cin", None, None)}


def test_an_empty_history_folder_reads_as_no_operations(spark, tmp_path):
    assert load.read_history(spark, tmp_path).schema == HISTORY
    assert load.read_history(spark, tmp_path).count() == 0
