"""Peer of `txnlab verify`: the straightforward single-process Python checker of a txnlab run.

The baseline bench/verify_throughput.py times `txnlab verify` against. It does what anyone would write
first, in one process: read the whole history into Python dicts and sets, then read both of the run's
topics with confluent-kafka, assigning every partition from its beginning, once read_committed up to
the partition's recorded LSO and once read_uncommitted up to its recorded high watermark (the run's
end_offsets.json), with every record id seen held in a dict. Correct, deliberately not optimised:
memory grows with the number of records.

Reports one JSON object on stdout; the checks on the committed view:
  duplicates     ids seen at more than one offset
  aborted_reads  ids of `fail` attempts that are visible
  lost_writes    ids of `ok` attempts that are missing
(ids of `info` attempts may be either way; ids the history does not know are counted as unknown_ids).
The uncommitted view reports the same counts for information (aborted records are expected there).
valid: true when all three are zero, "unknown" when a view could not be read to its end offsets or the
history ends in a torn line. Exit code 0 valid, 1 anomalies, 2 unknown (as `txnlab verify`).
Connection: --bootstrap, else $TXNLAB_KAFKA_* (as every txnlab command).
Usage: .venv/bin/python bench/peers/naive_checker.py RUN_DIR [--bootstrap HOST:PORT]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from chaos.record.history import iter_history
from chaos.record.ids import HEADER_ID, decode_value
from cluster.access.connection import ConnectionSettings

STALL_S = 60.0          # a view gives up when no partition made progress for this long


def load_history(run_dir: Path) -> dict:
    """Every txn attempt's outcome and the ids it wrote, as sets of ids per outcome."""
    outcomes: dict[str, str] = {}                  # attempt -> "invoke" (still open) | ok | fail | info
    writes: dict[str, list[str]] = {}
    operations = 0
    for op in iter_history(run_dir):
        operations += 1
        if op["f"] != "txn" or not isinstance(op["value"], dict):
            continue
        attempt = op["value"]["attempt"]
        outcomes[attempt] = op["type"]
        writes[attempt] = [w["id"] for w in op["value"].get("writes", [])]
    ids: dict[str, set[str]] = {"ok": set(), "fail": set(), "info": set(), "invoke": set()}
    for attempt, outcome in outcomes.items():
        ids[outcome].update(writes[attempt])
    return {"operations": operations, "truncated": _history_truncated(run_dir, operations), "ids": ids,
            "attempts": {k: sum(1 for o in outcomes.values() if o == k) for k in ids}}


def _history_truncated(run_dir: Path, operations: int) -> bool:
    """iter_history stops quietly at a torn line: fewer operations than lines (seals are lines, not
    operations: one per part), or a last line without \\n."""
    lines, last, parts = 0, b"\n", 0
    for part in sorted((run_dir / "history").glob("part-*.jsonl")):
        parts += 1
        with open(part, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                lines += block.count(b"\n")
                last = block[-1:]
    return operations != lines - parts or last != b"\n"


def record_id(msg) -> str:
    for key, value in msg.headers() or []:
        if key == HEADER_ID:
            return value.decode()
    return decode_value(msg.value())["id"]


def read_view(conn: ConnectionSettings, ends: dict[tuple[str, int], int], isolation: str) -> dict:
    """Every record id below each partition's end offset at this isolation level: id -> times seen."""
    consumer = Consumer(conn.confluent(**{
        "group.id": f"naive-checker-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": isolation, "log_level": 3}))
    seen: dict[str, int] = {}
    pending = {tp: end for tp, end in ends.items() if end > 0}
    records = 0
    try:
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for (t, p) in pending])
        last_progress = time.monotonic()
        while pending and time.monotonic() - last_progress < STALL_S:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None or msg.offset() >= ends[(msg.topic(), msg.partition())]:
                    continue
                rid = record_id(msg)
                seen[rid] = seen.get(rid, 0) + 1
                records += 1
                last_progress = time.monotonic()
            for tp in consumer.position([TopicPartition(t, p) for (t, p) in pending]):
                if tp.offset >= pending[(tp.topic, tp.partition)]:
                    del pending[(tp.topic, tp.partition)]
                    last_progress = time.monotonic()
    finally:
        consumer.close()
    return {"seen": seen, "records": records, "unfinished": sorted(f"{t}/{p}" for (t, p) in pending)}


def judge(view: dict, history: dict) -> dict:
    seen, ids = view["seen"], history["ids"]
    return {"records": view["records"], "distinct_ids": len(seen),
            "duplicates": sum(1 for n in seen.values() if n > 1),
            "aborted_reads": sum(1 for rid in seen if rid in ids["fail"]),
            "lost_writes": sum(1 for rid in ids["ok"] if rid not in seen),
            "unknown_ids": sum(1 for rid in seen if not any(rid in group for group in ids.values())),
            "complete": not view["unfinished"], "unfinished_partitions": view["unfinished"]}


def end_offsets(run_dir: Path) -> tuple[dict, dict]:
    """(LSO per partition, HWM per partition) as recorded when the run finished."""
    recorded = json.loads((run_dir / "end_offsets.json").read_text())
    lso = {(t, int(p)): o["lso"] for t, parts in recorded.items() for p, o in parts.items()}
    hwm = {(t, int(p)): o["hwm"] for t, parts in recorded.items() for p, o in parts.items()}
    return lso, hwm


def check(run_dir: Path, conn: ConnectionSettings) -> dict:
    seconds: dict[str, float] = {}
    started = time.monotonic()
    history = load_history(run_dir)
    seconds["history"] = round(time.monotonic() - started, 2)
    lso, hwm = end_offsets(run_dir)
    views = {}
    for name, isolation, ends in (("committed", "read_committed", lso), ("uncommitted", "read_uncommitted", hwm)):
        began = time.monotonic()
        views[name] = judge(read_view(conn, ends, isolation), history)    # one view in memory at a time
        seconds[name] = round(time.monotonic() - began, 2)
    seconds["total"] = round(time.monotonic() - started, 2)
    committed = views["committed"]
    complete = committed["complete"] and views["uncommitted"]["complete"] and not history["truncated"]
    certain = committed["duplicates"] + committed["aborted_reads"]     # more reading cannot undo these
    valid: bool | str = False if certain else (committed["lost_writes"] == 0 if complete else "unknown")
    return {"run_dir": str(run_dir), "valid": valid,
            "duplicates": committed["duplicates"], "aborted_reads": committed["aborted_reads"],
            "lost_writes": committed["lost_writes"],
            "history": {"operations": history["operations"], "truncated": history["truncated"],
                        "attempts": history["attempts"],
                        "ids": {k: len(v) for k, v in history["ids"].items()}},
            "committed": committed, "uncommitted": views["uncommitted"], "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--bootstrap", help="Kafka bootstrap (default $TXNLAB_KAFKA_BOOTSTRAP)")
    args = parser.parse_args()
    conn = ConnectionSettings.from_env(bootstrap=args.bootstrap)
    result = check(args.run_dir, conn)
    print(json.dumps(result, indent=2))
    return {True: 0, False: 1}.get(result["valid"], 2)


if __name__ == "__main__":
    sys.exit(main())
