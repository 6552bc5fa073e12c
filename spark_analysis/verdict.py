"""From the checks' anomaly frames to the verdict: `valid` true | false | "unknown" per check and overall,
counts, and a few examples of each anomaly.

Owns: the list of checks and what each needs, running them over loaded frames (the shared frames
persisted once), the report.json structure, and the exit code (0 valid, 1 anomalies, 2 unknown).
A check with anomalies is false; without, true when the evidence is complete and "unknown" otherwise,
never true then. Only counts and `examples` rows (a bounded `limit`) reach the driver.
Must not: read files or Kafka (load.py, evidence.py), or render HTML (page.py).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any, Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_analysis import checks, load

UNKNOWN = "unknown"
UNRECOGNISED = "unrecognised"       # collected with the checks: records no txnlab workload wrote


@dataclass
class Frames:
    committed: DataFrame
    uncommitted: DataFrame
    writes: DataFrame
    observed: DataFrame
    consumed: DataFrame
    group_offsets: DataFrame
    acked: DataFrame            # where producers were acknowledged (load.acknowledged)
    copiers: DataFrame
    streams: DataFrame          # the run's Kafka Streams applications and Flink jobs (load.STREAMS_SCHEMA)
    end_offsets: DataFrame
    polls: DataFrame            # every consumer's polled records (load.consumer_polls)
    seeks: DataFrame            # where their polls start over (load.consumer_seeks)


@dataclass(frozen=True)
class Shared:
    """The frames several checks read, computed and persisted once per run."""
    index: DataFrame            # checks.id_index: per id
    positions: DataFrame        # checks.position_index: per offset
    streams: DataFrame | None   # checks.consumer_positions: the consumers' polls ranked in the views
    skips: DataFrame | None     # checks.poll_skips of streams (poll_skip and unseen); None: no polls recorded


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    anomalies: Callable[[Frames, Shared], DataFrame]     # (frames, shared) -> anomaly rows
    needs: str | None = None        # a kind of workload the run must have for the check to apply (NEEDS)


# What a check may need, and how the report says a run lacks it. A check whose workloads the run does not have
# is not planned at all (each check is tens of DataFrame operations for Spark to analyse): valid, count 0,
# with `applies: false` and why.
NEEDS = {"processors": "no exactly-once processor in this run", "copiers": "no Kafka copier in this run",
         "streams": "no Kafka Streams application or Flink job in this run",
         "polls": "no consumer's polls recorded in this run (observers, processors)"}


CHECKS = (
    Check("duplicate", "one id at two or more offsets of the read_committed view",
          lambda f, s: checks.duplicates(s.index)),
    Check("aborted_read", "an id of an aborted (fail) attempt visible to read_committed: a leak",
          lambda f, s: checks.aborted_reads(s.index)),
    Check("lost_write", "an acknowledged write (a committed attempt's, an acknowledged idempotent send) missing "
          "from the read_committed view",
          lambda f, s: checks.lost_writes(s.index)),
    Check("torn_transaction", "an attempt (ok, fail or info) of which only a part is visible",
          lambda f, s: checks.torn_transactions(s.index)),
    Check("nonmonotonic_send", "a producer's records out of order within a partition",
          lambda f, s: checks.nonmonotonic_sends(s.index)),
    Check("inconsistent_offsets", "two reads disagree about what one offset holds (the two views, a producer's "
          "acknowledgement, the observers' polls)",
          lambda f, s: checks.inconsistent_offsets(s.positions, f.observed)),
    Check("exactly_once_processing", "each consumed input has exactly one committed output (paired by the "
          "output's own input reference) and the group's committed offsets cover exactly the inputs whose "
          "outputs committed",
          lambda f, s: checks.processing(f.committed, f.writes, f.consumed, f.group_offsets), "processors"),
    Check("exactly_once_copy", "Kafka's TransactionalMessageCopier: each input record below the group's offsets "
          "copied exactly once (by value)",
          lambda f, s: checks.copies(f.committed, f.copiers, f.group_offsets), "copiers"),
    Check("streams_processing", "Kafka Streams or Flink, stateless step: each input below the application's committed "
          "offsets has exactly one committed output, and no committed output names another input",
          lambda f, s: checks.streams_processing(f.committed, f.streams, f.group_offsets), "streams"),
    Check("streams_state", "Kafka Streams or Flink, stateful step: per key the committed count updates are exactly "
          "1..n, the sums follow, the last count and sum match the committed inputs and (Streams) the changelog's "
          "last value",
          lambda f, s: checks.streams_state(f.committed, f.streams, f.group_offsets), "streams"),
    Check("open_at_end", "transactions still open after quiescence (LSO < HWM at the end)",
          lambda f, s: checks.open_transactions(f.end_offsets)),
    Check("unaccounted", "a record of this run in the log that no write of the history accounts for",
          lambda f, s: checks.unaccounted(f.uncommitted, f.writes)),
    Check("poll_skip", "a consumer's successive polls of a partition passed over records its isolation level's "
          "view holds (observers and processor instances; a recorded seek starts over)",
          lambda f, s: s.skips, "polls"),
    Check("nonmonotonic_poll", "a consumer polled an offset at or below the one it polled just before, with no "
          "recorded seek between",
          lambda f, s: checks.nonmonotonic_polls(s.streams), "polls"),
    Check("unseen", "an acknowledged write no read_committed consumer polled although one polled its partition "
          "past it (not already a poll_skip)",
          lambda f, s: checks.unseen(s.index, f.polls, s.skips), "polls"),
)


HOLES, INFO, RECORDS = "holes", "info attempts", "records"        # collected before the checks, every row kept


def applies(needs: str | None, present: set[str] | None) -> bool:
    """Whether what a check needs (NEEDS) is among the kinds of workloads the run has (None: all)."""
    return needs is None or present is None or needs in present


def run_checks(frames: Frames, examples: int, progress: Callable[[str], None] = lambda m: None,
               present: set[str] | None = None, checkpoint: bool = True) -> dict:
    """Every check over complete evidence: {name: {valid, count, examples, description}} plus the info
    resolutions, unrecognised records and the views' record counts, in two Spark jobs (collect_all).
    Acknowledged offsets the log no longer holds (checks.holes) are missing evidence: every check unknown,
    with the holes as `gaps`. `present`: the kinds of workloads the run has (NEEDS; None: all); a check
    needing another is not run (`applies: false`). `checkpoint`: on Spark Connect the shared frames are lazy
    local checkpoints (load.keep: small runs), else persisted."""
    names = ("committed", "uncommitted", "writes")
    frames = replace(frames, **dict(zip(names, load.keep_all([getattr(frames, n) for n in names],
                                                             StorageLevel.MEMORY_AND_DISK, checkpoint))))
    persisted = [frames.committed, frames.uncommitted, frames.writes]
    try:
        return _checks(frames, examples, progress, present, persisted, checkpoint)
    finally:                                     # a shared server (Spark Connect) serves the next run: let go
        for df in persisted:
            load.let_go(df)


def _checks(frames: Frames, examples: int, progress: Callable[[str], None], present: set[str] | None,
            persisted: list[DataFrame], checkpoint: bool) -> dict:
    polls = applies("polls", present)                  # the consumers' streams are a sort of both views
    streams = checks.consumer_positions(frames.polls, frames.seeks, frames.committed, frames.uncommitted) \
        if polls else None
    index, positions = load.keep_all([checks.id_index(frames.committed, frames.writes),
                                      checks.position_index(frames.committed, frames.uncommitted, frames.acked)],
                                     StorageLevel.MEMORY_AND_DISK, checkpoint)
    shared = Shared(index=index, positions=positions,
                    streams=streams, skips=checks.poll_skips(streams) if polls else None)
    persisted += [shared.index, shared.positions]
    views = frames.committed.groupBy().agg(F.lit("read_committed").alias("view"), F.count(F.lit(1)).alias("n")) \
        .unionByName(frames.uncommitted.groupBy().agg(F.lit("read_uncommitted").alias("view"),
                                                       F.count(F.lit(1)).alias("n")))
    # first the small results of the shared frames alone: this job fills the caches the checks read (in one job
    # with the checks, its stages computed the same uncached frames side by side: slower)
    first = collect_all({}, examples, every_row={
        HOLES: checks.holes(shared.positions, frames.end_offsets), RECORDS: views,
        INFO: checks.info_resolutions(shared.index).groupBy("resolution").count()})
    records = {r["view"]: r["n"] for r in first[RECORDS][1]}
    gaps = hole_gaps(first[HOLES][1])
    if gaps:
        return {**unknown_checks(gaps), "records": records}
    started = time.monotonic()
    applying = [c for c in CHECKS if applies(c.needs, present)]
    found = collect_all({**{check.name: check.anomalies(frames, shared) for check in applying},
                         UNRECOGNISED: checks.unrecognised(frames.committed.unionByName(frames.uncommitted))},
                        examples)
    progress(f"the {len(applying)} checks that apply ran in one Spark job: {time.monotonic() - started:.1f} s")
    results = {}
    for check in CHECKS:
        if check not in applying:
            results[check.name] = {"valid": True, "count": 0, "description": check.description, "examples": [],
                                   "applies": False, "why": NEEDS[check.needs]}
            continue
        count, kept, problems = found[check.name]
        results[check.name] = {"valid": count == 0, "count": count, "description": check.description,
                               "examples": kept, **({"problems": problems} if problems else {})}
        progress(f"check {check.name}: {'ok' if count == 0 else f'{count} anomalies'}")
    count, kept, _ = found[UNRECOGNISED]
    info = {"committed": 0, "aborted": 0, "torn": 0} | {r["resolution"]: r["count"] for r in first[INFO][1]}
    return {"checks": results, "info_attempts": info, "unrecognised": {"count": count, "examples": kept},
            "records": records}


def collect_all(frames: dict[str, DataFrame], examples: int,
                every_row: dict[str, DataFrame] | None = None) -> dict[str, tuple[int, list[dict], dict[str, int]]]:
    """Each frame's row count, its first `examples` rows (ordered by their content) and its rows counted per
    `problem` (a check's kind of anomaly, for frames with that column: {} otherwise), and every row of the
    (small) `every_row` frames, all in ONE Spark job: every row becomes (frame name, the row as JSON), counted
    and ranked per name and per problem. A job per check and per count cost about a second of scheduling each on
    a small run; only counts and the kept rows (the examples and each problem's first) reach the driver."""
    every_row = every_row or {}
    as_json = [df.select(F.lit(name).alias("frame"), F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("row"))
               for name, df in {**frames, **every_row}.items()]     # struct("*"): no schema asked of a Connect server
    per_frame = Window.partitionBy("frame")
    per_problem = Window.partitionBy("frame", "problem")
    kept = reduce(DataFrame.unionByName, as_json) \
        .withColumn("problem", F.get_json_object("row", "$.problem")) \
        .withColumn("count", F.count(F.lit(1)).over(per_frame)) \
        .withColumn("n", F.row_number().over(per_frame.orderBy("row"))) \
        .withColumn("problem_count", F.count(F.lit(1)).over(per_problem)) \
        .withColumn("problem_n", F.row_number().over(per_problem.orderBy("row"))) \
        .where((F.col("n") <= max(examples, 1)) | F.col("frame").isin(*every_row)
               | (F.col("problem").isNotNull() & (F.col("problem_n") == 1)))
    found: dict[str, tuple[int, list, dict]] = {name: (0, [], {}) for name in {**frames, **every_row}}
    for row in kept.orderBy("frame", "n").collect():
        count, rows_, problems = found[row["frame"]]
        if row["problem"] is not None:
            problems = {**problems, row["problem"]: row["problem_count"]}
        found[row["frame"]] = (row["count"], rows_ + [json.loads(row["row"])] if row["n"] <= max(examples, 1)
                               or row["frame"] in every_row else rows_, problems)
    return {name: (count, rows_ if name in every_row else rows_[:examples], problems)
            for name, (count, rows_, problems) in found.items()}


def hole_gaps(found: list[dict[str, Any]]) -> list[str]:
    """One evidence gap per partition with holes (checks.holes rows)."""
    return [f"{r['topic']}-{r['partition']}: {r['count']} acknowledged offset(s) inside the recorded range are not "
            f"in the log (e.g. {', '.join(str(o) for o in r['offsets'])}): records were deleted or compacted away"
            for r in sorted(found, key=lambda r: (r["topic"], r["partition"]))]


def unknown_checks(gaps: list[str]) -> dict:
    return {"checks": {c.name: {"valid": UNKNOWN, "count": None, "description": c.description, "examples": []}
                       for c in CHECKS},
            "info_attempts": None, "unrecognised": None, "gaps": gaps}


def overall(report_checks: dict[str, dict]) -> bool | str:
    values = [c["valid"] for c in report_checks.values()]
    if any(v is False for v in values):
        return False
    return UNKNOWN if any(v == UNKNOWN for v in values) else True


def exit_code(valid: bool | str) -> int:
    return 0 if valid is True else 1 if valid is False else 2
