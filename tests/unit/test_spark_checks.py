"""The verification checks on tiny DataFrames built here: per anomaly a planted case, a clean case and a
null/malformed case, asserting on the check's output rows."""
from __future__ import annotations

import json

import pytest

from spark_analysis import checks, load
from spark_analysis.schemas import HISTORY

RECORD_COLS = "view string, topic string, partition int, offset long, id string, attempt string, producer string, " \
              "input string, text string, kind string, value_hash long"
WRITE_COLS = "attempt string, process string, f string, outcome string, id string, topic string, partition int, " \
             "input string, group string"


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
def sent(*rids, partition=0):
    """The history's transactional writes of these ids (to t-partition)."""
    return [write(rid, "ok", partition=partition) for rid in rids]


def test_nonmonotonic_send_planted(spark):
    got = checks.nonmonotonic_sends(index(spark, [rec(0, "r.p.1.0"), rec(1, "r.p.2.0"), rec(2, "r.p.1.1")],
                                          sent("r.p.1.0", "r.p.2.0", "r.p.1.1")))
    assert [(r["id"], r["previous_id"], r["offset"]) for r in got.collect()] == [("r.p.1.1", "r.p.2.0", 2)]


def test_nonmonotonic_send_clean_and_null(spark):
    clean = [rec(0, "r.p.1.0"), rec(1, "r.p.1.1"), rec(2, "r.p.2.0"), rec(3, "r.q.0.0"), rec(4, "r.p.1.0")]
    history = sent("r.p.1.0", "r.p.1.1", "r.p.2.0", "r.q.0.0")
    assert ids(checks.nonmonotonic_sends(index(spark, clean, history))) == []    # a later duplicate is not a reorder
    assert ids(checks.nonmonotonic_sends(index(spark, [rec(0, None, text="a"), rec(1, None, text="b")], []))) == []
    odd = [rec(0, "r.p.3.0"), ("committed", "t", 0, 1, "not-an-id", None, "p", None, None, "txnlab", 1)]
    assert ids(checks.nonmonotonic_sends(index(spark, odd, sent("r.p.3.0") + [
        ("r.p.3", "p", "txn", "ok", "not-an-id", "t", 0, None, None)]))) == []   # no crash


def test_a_duplicate_in_a_lower_partition_is_a_duplicate_not_a_reorder(spark):
    # r.p.1.0 and r.p.2.0 written to t-1 in order; a second copy of r.p.2.0 lands in t-0 before r.p.1.0's
    # first copy would sort: judged by its copy in t-1, where the history wrote it
    committed = [rec(0, "r.p.1.0", partition=1), rec(1, "r.p.2.0", partition=1), rec(0, "r.p.2.0", partition=0)]
    idx = index(spark, committed, sent("r.p.1.0", "r.p.2.0", partition=1))
    assert ids(checks.nonmonotonic_sends(idx)) == []
    assert ids(checks.duplicates(idx)) == ["r.p.2.0"]
    assert [(r["at"]["partition"], r["at"]["offset"]) for r in idx.where("id = 'r.p.2.0'").collect()] == [(1, 1)]


def test_storm_sends_are_no_transactional_order_and_no_info_resolution(spark):
    # each storm send is a new producer: a send that landed late is no reorder, its info no transaction
    storm = [write("r.s-t0.2.0", "ok", f="produce"), write("r.s-t0.3.0", "info", f="produce")]
    idx = index(spark, [rec(0, "r.s-t0.3.0"), rec(1, "r.s-t0.2.0")], storm)
    assert ids(checks.nonmonotonic_sends(idx)) == [] and checks.info_resolutions(idx).count() == 0
    assert ids(checks.lost_writes(index(spark, [], storm))) == ["r.s-t0.2.0"]     # an acknowledged send lost


# ---- inconsistent offsets -------------------------------------------------------------------------------
OBS_COLS = "process string, isolation string, topic string, partition int, offset long, id string"


ACKED_COLS = "topic string, partition int, offset long, id string"


def inconsistent(spark, committed, uncommitted, observed, acked=()):
    pos = checks.position_index(committed, uncommitted, spark.createDataFrame(list(acked), ACKED_COLS))
    return checks.inconsistent_offsets(pos, observed)


def test_inconsistent_offsets_planted(spark):
    committed = records(spark, [rec(3, "r.p.0.0"), rec(7, "r.p.0.5")])
    uncommitted = records(spark, [rec(3, "r.p.0.9", view="uncommitted"), rec(4, "r.p.0.1", view="uncommitted"),
                                  rec(9, "r.p.1.0", view="uncommitted")])
    observed = spark.createDataFrame([("obs-ru", "read_uncommitted", "t", 0, 4, "r.p.0.2"),
                                      ("obs-rc", "read_committed", "t", 0, 9, "r.p.1.0")], OBS_COLS)
    got = {(r["reader"].split(" ")[0], r["offset"]) for r in inconsistent(spark, committed, uncommitted, observed).collect()}
    # 3: the views disagree; 7: only read_committed has it; 4: the observer saw another id; 9: a
    # read_committed observer saw what the committed view does not hold
    assert got == {("read_committed", 3), ("read_committed", 7), ("observer", 4)} | {("read_committed", 9)}


def test_an_acknowledgement_at_an_offset_holding_another_record_is_inconsistent(spark):
    both = [rec(0, "r.p.0.0"), rec(1, "r.p.0.1"), rec(2, None, text="v.7", kind="copier")]
    committed, uncommitted = records(spark, both), records(spark, [r[:0] + ("uncommitted",) + r[1:] for r in both])
    none = spark.createDataFrame([], OBS_COLS)
    acked = [("t", 0, 0, "r.p.0.1"),                          # acknowledged at 0, the log holds r.p.0.0 there
             ("t", 0, 1, "r.p.0.1"), ("t", 0, 1, "r.p.9.9"),  # two writes acknowledged at one offset
             ("t", 0, 2, "v.7")]                              # a VerifiableProducer value where it was acked
    got = sorted((r["offset"], r["id"], r["other_id"]) for r in inconsistent(spark, committed, uncommitted, none, acked)
                 .where("reader = 'acknowledged write'").collect())
    assert got == [(0, "r.p.0.1", "r.p.0.0"), (1, "r.p.9.9", "r.p.0.1")]


def test_inconsistent_offsets_clean_and_null(spark):
    same = [rec(1, "r.p.0.0"), rec(2, None, text="foreign", value_hash=42)]
    committed = records(spark, same)
    uncommitted = records(spark, [r[:0] + ("uncommitted",) + r[1:] for r in same] + [rec(3, "r.p.1.0", view="uncommitted")])
    observed = spark.createDataFrame([("obs", "read_uncommitted", "t", 0, 2, None),
                                      ("obs", "read_committed", "t", 0, 1, "r.p.0.0")], OBS_COLS)
    acked = [("t", 0, 1, "r.p.0.0"), ("t", 0, 3, "r.p.1.0"), ("t", 0, 8, "r.p.2.0")]   # 8: beyond the views
    assert inconsistent(spark, committed, uncommitted, observed, acked).count() == 0


def test_holes_acknowledged_offsets_inside_the_range_the_log_lacks(spark):
    uncommitted = records(spark, [rec(o, f"r.p.0.{o}", view="uncommitted") for o in (0, 1, 4)])
    acked = spark.createDataFrame([("t", 0, o, f"r.p.0.{o}") for o in (0, 1, 2, 3, 4, 9)], ACKED_COLS)
    ends = spark.createDataFrame([("t", 0, 5, 6)], "topic string, partition int, lso long, hwm long")
    pos = checks.position_index(records(spark, []), uncommitted, acked)
    # 2 and 3 are gone from inside the range; 9 is beyond the recorded HWM (a lost write, not a hole)
    assert [(r["partition"], r["count"], r["offsets"]) for r in checks.holes(pos, ends).collect()] == [(0, 2, [2, 3])]
    assert checks.holes(checks.position_index(records(spark, []), uncommitted, acked.where("offset != 2 and offset != 3")),
                        ends).count() == 0


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


def test_processing_pairs_outputs_by_their_own_input(spark):
    inputs = [rec(o, f"r.f.0.{o}", topic="in") for o in range(3)]
    outs = [rec(0, "r.x.0.0", topic="out", inp="r.f.0.0"), rec(1, "r.x.0.1", topic="out", inp="r.f.0.1"),
            rec(2, "r.x.0.2", topic="out", inp="r.f.0.2"),
            rec(3, "r.x.7.0", topic="out", inp="r.f.0.2")]     # an output the history does not account for
    history = [write("r.x.0.0", "ok", f="process", topic="out", inp="r.f.0.0", group="g"),
               write("r.x.0.1", "ok", f="process", topic="out", inp="r.f.0.2", group="g"),   # says another input
               write("r.x.0.2", "ok", f="process", topic="out", inp="r.f.0.2", group="g")]
    got = checks.processing(records(spark, inputs + outs), writes(spark, history),
                            spark.createDataFrame([("g", "in", 0)], CONSUMED_COLS),
                            spark.createDataFrame([("g", "in", 0, 3)], GROUP_COLS))
    assert sorted((r["problem"], r["input"], tuple(r["outputs"])) for r in got.collect()) == [
        ("duplicate-output", "r.f.0.2", ("r.x.0.2", "r.x.7.0")), ("input-mismatch", "r.f.0.1", ("r.x.0.1",))]


# ---- Kafka's copier -------------------------------------------------------------------------------------
COPIERS_COLS = "input string, output string, group string"


def copy_case(spark, output_texts, committed_offset=3, inputs=None):
    ins = inputs if inputs is not None else [rec(i, None, topic="cin", text=f"v.{i}", kind="copier") for i in range(4)]
    outs = [rec(i, None, topic="cout", text=t, kind="copier") for i, t in enumerate(output_texts)]
    return checks.copies(records(spark, ins + outs), spark.createDataFrame([("cin", "cout", "cg")], COPIERS_COLS),
                         spark.createDataFrame([("cg", "cin", 0, committed_offset)], GROUP_COLS))


def problems(df):
    return {(r["problem"], r["input"]) for r in df.collect()}


def test_copy_planted(spark):
    assert problems(copy_case(spark, ["v.0", "v.0", "v.3"])) == {
        ("duplicate-output", "v.0"), ("unprocessed", "v.1"), ("unprocessed", "v.2"),
        ("output-without-committed-input", "v.3")}
    twice = [rec(0, None, topic="cin", text="v.5", kind="copier"), rec(1, None, topic="cin", text="v.5", kind="copier")]
    assert problems(copy_case(spark, ["v.5"], inputs=twice)) == {("unprocessed", "v.5")}   # 2 equal values, 1 copy


def test_copy_clean_and_null(spark):
    assert copy_case(spark, ["v.0", "v.1", "v.2"]).count() == 0
    assert copy_case(spark, ["v.0", "v.1", "v.2", None]).count() == 0


def test_copy_judges_what_its_input_holds_whoever_wrote_it(spark):
    # an uncertain VerifiableProducer send that landed (v.1: no acknowledgement in the history), and a storm
    # record on the copier's input (a txnlab id), copied verbatim: its copy has no id, the same value
    storm = rec(2, "r.s-t0.4.0", topic="cin", value_hash=77)
    inputs = [rec(0, None, topic="cin", text="v.0", kind="copier"), rec(1, None, topic="cin", text="v.1", kind="copier"),
              storm]
    copied = rec(2, None, topic="cout", text='{"id":"r.s-t0.4.0"}', kind="copier", value_hash=77)
    got = checks.copies(records(spark, inputs + [rec(0, None, topic="cout", text="v.0", kind="copier"),
                                                 rec(1, None, topic="cout", text="v.1", kind="copier"), copied]),
                        spark.createDataFrame([("cin", "cout", "cg")], COPIERS_COLS),
                        spark.createDataFrame([("cg", "cin", 0, 3)], GROUP_COLS))
    assert got.count() == 0


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
    got = {(r["topic"], r["offset"]): (r["id"], r["kind"])
           for r in load.records_of(raw, "committed", copier_outputs=["cout"]).collect()}
    assert got == {("t", 0): ("r.p.0.1", "txnlab"), ("t", 1): ("r.p.0.2", "txnlab"), ("t", 2): (None, "foreign"),
                   ("t", 3): (None, "foreign"), ("cout", 0): (None, "copier")}


def test_records_of_takes_ids_from_headers_before_the_value(spark):
    headers = [("txnlab.id", b"r.p.1.0"), ("txnlab.attempt", b"r.p.1"), ("txnlab.producer", b"p")]
    raw = spark.createDataFrame([
        ("t", 0, 0, json.dumps({"id": "other", "attempt": "x", "producer": "y"}).encode(), headers),
        ("t", 0, 1, json.dumps({"id": "r.q.0.0", "attempt": "r.q.0", "producer": "q"}).encode(), [("k", b"v")]),
        # a repeated header: the first counts; a header without a value: null
        ("t", 0, 2, b"{}", [("k", b"v"), ("txnlab.id", b"r.p.2.0"), ("txnlab.id", b"r.p.9.9"), ("txnlab.attempt", None),
                            ("txnlab.producer", b"p"), ("txnlab.producer", b"z")]),
        # a header at the place a txnlab workload writes it (load.HEADER_AT) is not the first of its name
        ("t", 0, 3, b"{}", [("txnlab.attempt", b"r.p.4"), ("txnlab.attempt", b"r.p.x"), ("txnlab.id", b"r.p.4.0")])],
        RAW_COLS)
    got = {r["offset"]: (r["id"], r["attempt"], r["producer"], r["kind"]) for r in load.records_of(raw, "c").collect()}
    assert got == {0: ("r.p.1.0", "r.p.1", "p", "txnlab"), 1: ("r.q.0.0", "r.q.0", "q", "txnlab"),
                   2: ("r.p.2.0", None, "p", "txnlab"), 3: ("r.p.4.0", "r.p.4", None, "txnlab")}


def test_only_a_well_formed_id_of_this_run_makes_a_record_txnlab(spark):
    def value(rid):
        return json.dumps({"id": rid, "attempt": "x", "producer": "y", "input": "r7.p.0.0"}).encode()
    mine = [("txnlab.id", b"r7.eos-0.3.1"), ("txnlab.attempt", b"r7.eos-0.3"), ("txnlab.producer", b"eos-0"),
            ("txnlab.input", b"r7.txp-0.2.4")]
    raw = spark.createDataFrame([
        ("t", 0, 0, b"{}", mine),
        ("t", 0, 1, json.dumps({"id": 17, "amount": 3}).encode(), None),      # foreign JSON with an id
        ("t", 0, 2, json.dumps({"id": "order-17"}).encode(), None),
        ("t", 0, 3, value("r8.p.0.0"), None),                                 # another run's record
        ("t", 0, 4, b"plain", [("txnlab.id", b"")]),                          # an empty id header
        ("t", 0, 5, value("r7.p.0.1"), [("txnlab.id", b"junk")]),             # a foreign header, our value
        ("cin", 0, 0, value("r7.s-t0.1.0"), None),                            # a storm record on a copier input
        ("cout", 0, 0, value("r7.s-t0.1.0"), None)], RAW_COLS)               # ... and its verbatim copy
    got = {(r["topic"], r["offset"]): (r["id"], r["kind"], r["input"])
           for r in load.records_of(raw, "c", ["cin"], ["cout"], run_tag="r7").collect()}
    assert got == {("t", 0): ("r7.eos-0.3.1", "txnlab", "r7.txp-0.2.4"), ("t", 1): (None, "foreign", None),
                   ("t", 2): (None, "foreign", None), ("t", 3): (None, "foreign", None),
                   ("t", 4): (None, "foreign", None), ("t", 5): ("r7.p.0.1", "txnlab", "r7.p.0.0"),
                   ("cin", 0): ("r7.s-t0.1.0", "txnlab", "r7.p.0.0"), ("cout", 0): (None, "copier", None)}


def history_of(tmp_path, spark, lines):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "part-00000.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return load.read_history(spark, tmp_path)


def test_storm_sends_are_writes_and_every_acknowledged_offset_is_listed(spark, tmp_path):
    def op(process, type_, f, value, time=1):
        return {"time": time, "wall": 1.0, "process": process, "type": type_, "f": f, "value": value}
    send = {"attempt": "r.s-t0.0", "producer": "s-t0", "id": "r.s-t0.0.0", "topic": "t", "partition": 1}
    writes2 = [{"topic": "t", "partition": 0, "id": "r.p.0.0"}, {"topic": "t", "partition": 0, "id": "r.p.0.1"}]
    ops = history_of(tmp_path, spark, [
        op("p", "invoke", "txn", {"attempt": "r.p.0", "writes": writes2}),
        op("p", "ok", "txn", {"attempt": "r.p.0", "writes": writes2, "offsets": [4, -1]}),
        op("s-t0", "invoke", "produce", send), op("s-t0", "ok", "produce", {**send, "offset": 9}),
        op("s-t1", "invoke", "produce", {**send, "attempt": "r.s-t1.0", "id": "r.s-t1.0.0"}),
        op("s-t1", "info", "produce", {**send, "attempt": "r.s-t1.0", "id": "r.s-t1.0.0", "error": "timed out"}),
        op("java-vp", "ok", "produce", {"id": "17", "topic": "cin", "partition": 0, "offset": 3})])
    assert sorted((r["id"], r["f"], r["outcome"], r["partition"]) for r in load.writes_of(ops).collect()) == [
        ("r.p.0.0", "txn", "ok", 0), ("r.p.0.1", "txn", "ok", 0), ("r.s-t0.0.0", "produce", "ok", 1),
        ("r.s-t1.0.0", "produce", "info", 1)]
    assert sorted(tuple(r) for r in load.acknowledged(ops).collect()) == [
        ("cin", 0, 3, "17"), ("t", 0, 4, "r.p.0.0"), ("t", 1, 9, "r.s-t0.0.0")]


def test_unaccounted_records_of_this_run_the_history_never_wrote(spark):
    log = [rec(0, "r.p.0.0", view="uncommitted"), rec(1, "r.p.5.0", view="uncommitted"),
           rec(2, "r.p.5.0", view="uncommitted"), rec(3, "r.zz.0.0", view="uncommitted"),
           rec(4, None, text="foreign", view="uncommitted")]
    got = checks.unaccounted(records(spark, log), writes(spark, [write("r.p.0.0", "ok"), write("r.p.1.0", "fail")]))
    assert sorted((r["id"], r["kind"], r["copies"]) for r in got.collect()) == [
        ("r.p.5.0", "txn", 2), ("r.zz.0.0", "unknown process", 1)]


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


# ---- the consumers' polls: poll-skip, nonmonotonic-poll, unseen -----------------------------------------
POLL_COLS = "consumer string, isolation string, topic string, partition int, offset long, id string, time long, pos int"
SEEK_COLS = "consumer string, isolation string, topic string, partition int, offset long, time long, reason string"
RC, RU = "read_committed", "read_uncommitted"
# partition t-0: 3 and 4 an aborted transaction's records, 5 its marker: the committed view holds
# 0 1 2 6 7 8 9, the uncommitted view 0 1 2 3 4 6 7 8 9
COMMITTED_OFFSETS, UNCOMMITTED_OFFSETS = [0, 1, 2, 6, 7, 8, 9], [0, 1, 2, 3, 4, 6, 7, 8, 9]


def stream(spark, events):
    """events: (consumer, isolation, time, [offsets]) a poll, or (consumer, isolation, time, "seek", offset|None)."""
    polls = [(c, iso, "t", 0, o, None, t, i) for c, iso, t, *rest in events if rest[0] != "seek"
             for i, o in enumerate(rest[0])]
    seeks = [(c, iso, "t", 0, rest[1], t, "test") for c, iso, t, *rest in events if rest[0] == "seek"]
    return spark.createDataFrame(polls, POLL_COLS), spark.createDataFrame(seeks, SEEK_COLS)


def positions(spark, events):
    polls, seeks = stream(spark, events)
    return checks.consumer_positions(polls, seeks, records(spark, [rec(o, f"r.p.0.{o}") for o in COMMITTED_OFFSETS]),
                                     records(spark, [rec(o, f"r.p.0.{o}", view="uncommitted") for o in UNCOMMITTED_OFFSETS]))


def skips(spark, events):
    return sorted((r["consumer"], r["previous"], r["sought"], r["offset"], r["count"], r["skipped"])
                  for r in checks.poll_skips(positions(spark, events)).collect())


def backwards(spark, events):
    return sorted((r["consumer"], r["previous"], r["offset"]) for r in checks.nonmonotonic_polls(positions(spark, events)).collect())


CLEAN = [("rc", RC, 0, "seek", 0), ("rc", RC, 1, [0, 1, 2]), ("rc", RC, 2, [6, 7]), ("rc", RC, 3, [8, 9]),
         ("ru", RU, 0, "seek", 0), ("ru", RU, 1, [0, 1, 2, 3]), ("ru", RU, 2, [4, 6, 7, 8, 9])]


def test_polls_clean_sequences_have_no_anomaly(spark):
    assert skips(spark, CLEAN) == [] and backwards(spark, CLEAN) == []
    assert skips(spark, [("x", RC, 1, [])]) == []            # nothing polled: nothing to judge


def test_poll_skip_reports_the_skipped_offsets_of_its_view(spark):
    events = [("rc", RC, 1, [0, 1]), ("rc", RC, 2, [7, 8]),              # 2 and 6 passed over (3, 4 aborted)
              ("start", RC, 0, "seek", 0), ("start", RC, 1, [1, 2]),      # from 0 (seek) to 1: 0 skipped
              ("ru", RU, 1, [0, 1, 2]), ("ru", RU, 2, [4, 6])]           # read_uncommitted must return 3
    assert skips(spark, events) == [("rc", 1, None, 7, 2, [2, 6]), ("ru", 2, None, 4, 1, [3]),
                                    ("start", None, 0, 1, 1, [0])]
    assert backwards(spark, events) == []


def test_a_rewind_or_reassignment_across_a_recorded_seek_is_no_anomaly(spark):
    events = [("p", RC, 1, [0, 1, 2, 6]), ("p", RC, 2, "seek", 2), ("p", RC, 3, [2, 6, 7]),      # rewind to 2
              ("p", RC, 4, "seek", None), ("p", RC, 5, [1, 2]),          # reassigned at an unrecorded position
              ("p", RC, 6, "seek", None), ("p", RC, 7, [9])]             # ... or ahead of it (another member read)
    assert skips(spark, events) == [] and backwards(spark, events) == []


def test_a_rewind_that_lands_after_its_seek_is_a_skip(spark):
    assert skips(spark, [("p", RC, 1, [0, 1]), ("p", RC, 2, "seek", 1), ("p", RC, 3, [6])]) == [("p", None, 1, 6, 2, [1, 2])]


def test_nonmonotonic_poll_backwards_or_repeated_without_a_seek(spark):
    events = [("p", RC, 1, [0, 1, 2, 6]), ("p", RC, 2, [2, 6, 7]),       # back from 6 to 2, no seek recorded
              ("q", RC, 1, [0, 1]), ("q", RC, 2, [1, 2])]                # 1 again
    assert backwards(spark, events) == [("p", 6, 2), ("q", 1, 1)]
    assert skips(spark, events) == []


def test_poll_skip_limits_the_listed_offsets_but_counts_all(spark, monkeypatch):
    monkeypatch.setattr(checks, "LISTED", 2)
    assert skips(spark, [("p", RU, 1, [0]), ("p", RU, 2, [7])]) == [("p", 0, None, 7, 5, [1, 2])]     # 1 2 3 4 6


def unseen_of(spark, events, write_rows):
    polls, seeks = stream(spark, events)
    committed = [rec(o, f"r.p.{o}.0") for o in COMMITTED_OFFSETS]
    idx = index(spark, committed, write_rows)
    found = checks.poll_skips(checks.consumer_positions(polls, seeks, records(spark, committed), records(spark, [])))
    return sorted((r["id"], r["offset"], r["polled_to"]) for r in checks.unseen(idx, polls, found).collect())


def test_unseen_an_acknowledged_write_nobody_polled_though_a_consumer_passed_it(spark):
    # a group: a polled 0-2, then b, assigned past 6 (the group's offsets skipped it), polled 7 and 8
    events = [("a", RC, 1, [0, 1, 2]), ("a", RC, 2, "seek", None), ("b", RC, 3, "seek", None), ("b", RC, 4, [7, 8])]
    ws = [write(f"r.p.{o}.0", "ok") for o in (0, 1, 2, 6, 7, 8)]
    assert unseen_of(spark, events, ws) == [("r.p.6.0", 6, 8)]


def test_not_unseen_unread_past_or_unacknowledged_or_a_poll_skip(spark):
    events = [("a", RC, 1, [0, 1, 2, 6, 7])]
    ws = [write("r.p.8.0", "ok"), write("r.p.9.0", "ok"), write("r.p.6.0", "fail")]     # nobody read past 8
    assert unseen_of(spark, events, ws) == []
    # only a read_committed consumer's reads count, and a write in a poll-skip's gap is the poll-skip's
    ru_only = [("u", RU, 1, [0, 1, 2, 6, 7, 8, 9])]
    assert unseen_of(spark, ru_only, [write("r.p.6.0", "ok")]) == []
    skipping = [("a", RC, 1, [0, 1, 2]), ("a", RC, 2, [7, 8])]
    assert unseen_of(spark, skipping, [write("r.p.6.0", "ok")]) == []


def test_consumer_polls_and_seeks_from_the_history(spark, tmp_path):
    def op(process, type_, f, value, time):
        return {"time": time, "wall": 1.0, "process": process, "type": type_, "f": f, "value": value}
    lines = [
        op("obs-rc", "ok", "seek", {"isolation": RC, "reason": "start", "positions": [{"topic": "t", "partition": 0, "offset": 0}]}, 1),
        op("obs-rc", "ok", "poll", {"isolation": RC, "records": [{"topic": "t", "partition": 0, "offset": 0, "id": "x"},
                                                                 {"topic": "t", "partition": 0, "offset": 1, "id": None}]}, 2),
        op("eos-0", "ok", "seek", {"isolation": RC, "reason": "assigned", "positions": [{"topic": "in", "partition": 2, "offset": None}]}, 3),
        op("eos-0", "invoke", "process", {"attempt": "r.eos-0.0", "inputs": [{"topic": "in", "partition": 2, "offset": 5, "id": "y"}]}, 4),
        op("eos-0", "fail", "process", {"attempt": "r.eos-0.0", "inputs": [{"topic": "in", "partition": 2, "offset": 5, "id": "y"}]}, 5),
    ]
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "part-00000.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ops = load.read_history(spark, tmp_path)
    assert sorted(tuple(r) for r in load.consumer_polls(ops).collect()) == [
        ("eos-0", RC, "in", 2, 5, "y", 4, 0), ("obs-rc", RC, "t", 0, 0, "x", 2, 0), ("obs-rc", RC, "t", 0, 1, None, 2, 1)]
    assert sorted(tuple(r) for r in load.consumer_seeks(ops).collect()) == [
        ("eos-0", RC, "in", 2, None, 3, "assigned"), ("obs-rc", RC, "t", 0, 0, 1, "start")]


# ---- what reaches the driver: counts, examples and counts per problem in one job ----------------------
def test_collect_all_counts_each_problem_beyond_the_examples(spark):
    from spark_analysis.verdict import collect_all
    rows = [("unprocessed", f"in.{i}") for i in range(5)] + [("duplicate-output", "in.9"), ("unprocessed", "in.7")]
    found = collect_all({"streams": spark.createDataFrame(rows, "problem string, input string"),
                         "plain": spark.createDataFrame([(1,), (2,)], "id int"),
                         "none": spark.createDataFrame([], "problem string, input string")}, examples=2,
                        every_row={"small": spark.createDataFrame([(7,), (8,), (9,)], "n int")})
    count, kept, problems = found["streams"]
    assert count == 7 and problems == {"unprocessed": 6, "duplicate-output": 1}
    assert kept == [{"problem": "duplicate-output", "input": "in.9"}, {"problem": "unprocessed", "input": "in.0"}]
    assert found["plain"] == (2, [{"id": 1}, {"id": 2}], {})
    assert found["none"] == (0, [], {})
    assert found["small"] == (3, [{"n": 7}, {"n": 8}, {"n": 9}], {})
