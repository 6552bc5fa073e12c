"""From the checks' anomaly frames to the verdict: `valid` true | false | "unknown" per check and overall,
counts, and a few examples of each anomaly.

Owns: the list of checks and what each needs, running them over loaded frames (the shared frames
persisted once), the report.json structure, and the exit code (0 valid, 1 anomalies, 2 unknown).
A check with anomalies is false; without, true when the evidence is complete and "unknown" otherwise,
never true then. Only counts and `examples` rows (a bounded `limit`) reach the driver.
Must not: read files or Kafka (load.py, evidence.py), or render HTML (page.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row

from spark_analysis import checks

UNKNOWN = "unknown"


@dataclass
class Frames:
    committed: DataFrame
    uncommitted: DataFrame
    writes: DataFrame
    observed: DataFrame
    consumed: DataFrame
    group_offsets: DataFrame
    sends: DataFrame
    copiers: DataFrame
    end_offsets: DataFrame
    polls: DataFrame            # every consumer's polled records (load.consumer_polls)
    seeks: DataFrame            # where their polls start over (load.consumer_seeks)


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    anomalies: Callable[[Frames, DataFrame], DataFrame]     # (frames, id index) -> anomaly rows


CHECKS = (
    Check("duplicate", "one id at two or more offsets of the read_committed view",
          lambda f, index: checks.duplicates(index)),
    Check("aborted_read", "an id of an aborted (fail) attempt visible to read_committed: a leak",
          lambda f, index: checks.aborted_reads(index)),
    Check("lost_write", "an id of a committed (ok) attempt missing from the read_committed view",
          lambda f, index: checks.lost_writes(index)),
    Check("torn_transaction", "an attempt (ok, fail or info) of which only a part is visible",
          lambda f, index: checks.torn_transactions(index)),
    Check("nonmonotonic_send", "a producer's records out of order within a partition",
          lambda f, index: checks.nonmonotonic_sends(index)),
    Check("inconsistent_offsets", "two reads disagree about what one offset holds",
          lambda f, index: checks.inconsistent_offsets(f.committed, f.uncommitted, f.observed)),
    Check("exactly_once_processing", "each consumed input has exactly one committed output and the group's "
          "committed offsets cover exactly the inputs whose outputs committed",
          lambda f, index: checks.processing(f.committed, f.writes, f.consumed, f.group_offsets)),
    Check("exactly_once_copy", "Kafka's TransactionalMessageCopier: each acknowledged input copied exactly once",
          lambda f, index: checks.copies(f.committed, f.sends, f.copiers, f.group_offsets)),
    Check("open_at_end", "transactions still open after quiescence (LSO < HWM at the end)",
          lambda f, index: checks.open_transactions(f.end_offsets)),
    Check("poll_skip", "a consumer's successive polls of a partition passed over records its isolation level's "
          "view holds (observers and processor instances; a recorded seek starts over)",
          lambda f, index: checks.poll_skips(_positions(f))),
    Check("nonmonotonic_poll", "a consumer polled an offset at or below the one it polled just before, with no "
          "recorded seek between",
          lambda f, index: checks.nonmonotonic_polls(_positions(f))),
    Check("unseen", "an acknowledged write no read_committed consumer polled although one polled its partition "
          "past it (not already a poll_skip)",
          lambda f, index: checks.unseen(index, f.polls, checks.poll_skips(_positions(f)))),
)


def _positions(f: Frames) -> DataFrame:
    return checks.consumer_positions(f.polls, f.seeks, f.committed, f.uncommitted)


def rows(df: DataFrame, limit: int) -> list[dict[str, Any]]:
    return [_plain(r) for r in df.limit(limit).collect()]


def _plain(row: Row | Any) -> Any:
    if isinstance(row, Row):
        return {k: _plain(v) for k, v in row.asDict().items()}
    if isinstance(row, list):
        return [_plain(v) for v in row]
    return row


def run_checks(frames: Frames, examples: int, progress: Callable[[str], None] = lambda m: None) -> dict:
    """Every check over complete evidence: {name: {valid, count, examples, description}} plus the info
    resolutions and unrecognised records."""
    for df in (frames.committed, frames.uncommitted, frames.writes):
        df.persist(StorageLevel.MEMORY_AND_DISK)
    index = checks.id_index(frames.committed, frames.writes).persist(StorageLevel.MEMORY_AND_DISK)
    results = {}
    for check in CHECKS:
        started = time.monotonic()
        anomalies = check.anomalies(frames, index).persist(StorageLevel.MEMORY_AND_DISK)
        count = anomalies.count()
        results[check.name] = {"valid": count == 0, "count": count, "description": check.description,
                               "examples": rows(anomalies, examples) if count else [],
                               "seconds": round(time.monotonic() - started, 2)}
        anomalies.unpersist()
        progress(f"check {check.name}: {'ok' if count == 0 else f'{count} anomalies'}")
    extra = {"info_attempts": _info_counts(index),
             "unrecognised": _unrecognised(frames, examples)}
    return {"checks": results, **extra}


def _info_counts(index: DataFrame) -> dict[str, int]:
    counts = {"committed": 0, "aborted": 0, "torn": 0}
    for row in checks.info_resolutions(index).groupBy("resolution").count().collect():
        counts[row["resolution"]] = row["count"]
    return counts


def _unrecognised(frames: Frames, examples: int) -> dict:
    foreign = checks.unrecognised(frames.committed.unionByName(frames.uncommitted))
    count = foreign.count()
    return {"count": count, "examples": rows(foreign, examples) if count else []}


def unknown_checks(gaps: list[str]) -> dict:
    return {"checks": {c.name: {"valid": UNKNOWN, "count": None, "description": c.description, "examples": [],
                                "seconds": 0.0} for c in CHECKS},
            "info_attempts": None, "unrecognised": None, "gaps": gaps}


def overall(report_checks: dict[str, dict]) -> bool | str:
    values = [c["valid"] for c in report_checks.values()]
    if any(v is False for v in values):
        return False
    return UNKNOWN if any(v == UNKNOWN for v in values) else True


def exit_code(valid: bool | str) -> int:
    return 0 if valid is True else 1 if valid is False else 2
