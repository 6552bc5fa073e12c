"""Is the evidence complete? Checked before any Kafka record is read.

Owns: what makes a verdict `unknown` rather than true or false (docs/verify.md lists every reason):
  the run's files: no end_offsets.json (the run never finished) or one that records no topic; no
    group_offsets.json while the run has processors, copiers or Streams applications; either one not JSON;
  the history's completeness, from the seals chaos/record/history.py ends every part file with: no history; a
    part empty, cut (its last line not its seal) or holding other lines than its seal counts; parts not
    numbered 0..n-1 or none sealed final (a missing part); lines the writer dropped; fewer or more
    operations than the final seal's; a history without any seal and without history-format.json (written
    before seals existed);
  the history's own pairing (chaos/record/history.py's rule, per process in time order): an invoke without its
    completion, a completion without its invoke; a group the processors committed that
    group_offsets.json lacks; a topic the history wrote to that end_offsets.json lacks;
  the topics (check_topics): a recorded topic the cluster no longer has (or has with other partitions),
    a partition whose log no longer starts at 0 (records deleted) or whose HWM is now below the recorded
    one (truncated, or re-created), so the topics cannot be read to the recorded end offsets;
  the incarnations of topics the run deleted and created again (check_incarnations: each archived whole like
    the archive below, its deletion confirmed, its group's offsets at its end when it was deleted);
  or, verified offline, the run's archive of them (check_archive; chaos/record/archive.py writes it): none, or
    no manifest (not sealed), one not JSON or of another format; a view's file missing, or its bytes or
    sha256 not the manifest's (cut or changed), its Parquet rows not the manifest's, the manifest's partition
    rows not adding up to them (miscounted); a recorded partition the archive lacks, archived to another end
    than end_offsets.json's, or whose read stopped before its end; a log that no longer started at 0 when
    archived (records deleted).
Line counts, pairing and the history's summary (damaged lines, operations, committed groups, written topics,
copiers: summarise) are one Spark aggregation each (histories reach 10^7 lines): only one row per part file
or per operation type, counts, small sets and a few examples reach the driver, which reads only each part
file's last line itself.
Must not: read Kafka records (load.py), judge them (checks.py), or import chaos/ (the seal's shape
travels as data: SEAL_PROCESS, SEAL_F mirror chaos/record/history.py).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cluster.access.connection import ConnectionSettings
from cluster.access.reads import log_start_offsets, partition_offsets, topic_partitions
from spark_analysis import load
from spark_analysis.schemas import TRANSACTIONAL_F

SEAL_PROCESS, SEAL_F = "history", "seal"          # chaos/record/history.py
FORMAT_NAME = "history-format.json"                # chaos/record/history.py: {"seals": true}: the writer sealed
UNSEALED = "history written without seals (txnlab before issue 17's history seals): its completeness cannot " \
           "be established"
PAIRED_F = ("txn", "process", "init", "jvm", "fault", "heal", "heal-all", "quiescence")   # never observations
PART_NAME = re.compile(r"part-(\d+)\.jsonl$")
TAIL_BYTES = 1 << 16


@dataclass
class Evidence:
    end_offsets: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    group_offsets: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    has_group_offsets: bool = True                     # group_offsets.json exists (else group_offsets is {})
    run_tag: str | None = None                         # spec.json's: only ids of this run are txnlab records
    incarnations: list[dict] = field(default_factory=list)   # whole manifests of deleted topics' incarnations
    gaps: list[str] = field(default_factory=list)      # why the evidence is incomplete; empty: complete

    @property
    def complete(self) -> bool:
        return not self.gaps


def load_run_files(run_dir: Path) -> Evidence:
    evidence = Evidence()
    ends = _read_json(Path(run_dir) / "end_offsets.json", evidence)
    if ends is None:
        if not (Path(run_dir) / "end_offsets.json").exists():
            evidence.gaps.append("the run did not finish: no end_offsets.json (the history may be cut short)")
    elif not ends:
        evidence.gaps.append("end_offsets.json records no topic: nothing bounds what to read")
    else:
        evidence.end_offsets = ends
    groups = _read_json(Path(run_dir) / "group_offsets.json", evidence)
    evidence.group_offsets = groups or {}
    evidence.has_group_offsets = groups is not None
    spec = _read_json(Path(run_dir) / "spec.json", evidence)
    evidence.run_tag = spec.get("run_tag") if isinstance(spec, dict) else None
    if not load.history_parts(run_dir):
        evidence.gaps.append("no history under history/")
    return evidence


def _read_json(path: Path, evidence: Evidence):
    """The file's JSON; None when it is missing, or not JSON (a gap)."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        evidence.gaps.append(f"{path.name} is not JSON ({exc})")
        return None


def check_topics(conn: ConnectionSettings, evidence: Evidence) -> None:
    """Can every recorded partition still be read from offset 0 to its recorded end offsets?"""
    for topic, parts in sorted(evidence.end_offsets.items()):
        recorded = sorted(int(p) for p in parts)
        present = topic_partitions(conn, topic)
        if present is None:
            evidence.gaps.append(f"topic {topic} no longer exists")
            continue
        if present != recorded:
            evidence.gaps.append(f"topic {topic} has partitions {present}, the run recorded {recorded}")
            continue
        starts = log_start_offsets(conn, topic, recorded)
        hwms = partition_offsets(conn, topic, recorded, committed=False)
        for p in recorded:
            want = parts[str(p)]
            if starts[p] > 0:
                evidence.gaps.append(f"{topic}-{p}: the log starts at {starts[p]}: records were deleted")
            if hwms[p] < want["hwm"]:
                evidence.gaps.append(f"{topic}-{p}: HWM {hwms[p]} is below the recorded end offset {want['hwm']}")


def check_archive(run_dir: Path, evidence: Evidence) -> None:
    """Does the run's archive hold both views of every recorded partition, whole, to its recorded end?"""
    folder = Path(run_dir) / load.ARCHIVE_DIR
    manifest = _archive_manifest(folder, evidence)
    if manifest is None:
        return
    for view in load.ARCHIVE_VIEWS.values():
        entry = manifest.get("views", {}).get(view)
        if not isinstance(entry, dict):
            evidence.gaps.append(f"the archive's manifest has no {view} view")
            continue
        if _archived_file_gaps(folder, view, entry, evidence):
            continue
        _archived_partition_gaps(view, entry, evidence)
    for topic, parts in sorted(manifest.get("log_start", {}).items()):
        for p, start in sorted(parts.items(), key=lambda kv: int(kv[0])):
            if start > 0:
                evidence.gaps.append(f"{topic}-{p}: the log started at {start} when it was archived: records were "
                                     "deleted")


def check_incarnations(run_dir: Path, evidence: Evidence) -> None:
    """The incarnations of topics the run deleted (RUN/incarnations/<topic>~<n>/, chaos/record/archive.py
    write_incarnation): each archived whole (as check_archive asks of the archive), its deletion confirmed
    (else the topic may still hold the same records: read twice), and its group caught up when it was deleted
    (else what the group had processed of it cannot be told). The whole ones go to evidence.incarnations."""
    for folder in load.incarnation_dirs(run_dir):
        manifest = _archive_manifest(folder, evidence)
        if manifest is None:
            continue
        name, topic, ends = folder.name, manifest.get("topic"), manifest.get("ends")
        before = len(evidence.gaps)
        if not isinstance(topic, str) or not isinstance(ends, dict) or manifest.get("alias") != name:
            evidence.gaps.append(f"incarnation {name}: its manifest does not name its topic, alias and ends")
            continue
        if manifest.get("deleted") is not True:
            evidence.gaps.append(f"incarnation {name}: the deletion of {topic} was never confirmed (the fault stopped "
                                 "before every broker dropped it): the topic may hold these records still")
        if manifest.get("caught_up") is not True:
            evidence.gaps.append(f"incarnation {name}: group {manifest.get('group')} had not committed to the end of "
                                 f"{topic} when it was deleted (offsets {manifest.get('group_offsets')}, ends {ends}): "
                                 "what it processed of that incarnation cannot be told")
        for view in load.ARCHIVE_VIEWS.values():
            entry = manifest.get("views", {}).get(view)
            if not isinstance(entry, dict):
                evidence.gaps.append(f"incarnation {name}: no {view} view")
            elif not _archived_file_gaps(folder, view, entry, evidence):
                _archived_partition_gaps(view, entry, evidence, {topic: ends})
        for p, start in sorted(manifest.get("log_start", {}).get(topic, {}).items(), key=lambda kv: int(kv[0])):
            if start > 0:
                evidence.gaps.append(f"incarnation {name}: {topic}-{p} started at {start}: records were deleted")
        if len(evidence.gaps) == before:
            evidence.incarnations.append(manifest)


def _archive_manifest(folder: Path, evidence: Evidence) -> dict | None:
    path = folder / load.ARCHIVE_MANIFEST
    if not folder.is_dir():
        evidence.gaps.append(f"the run has no archive ({folder.name}/): archive it while its cluster is up "
                             "(txnlab archive RUN), or verify it against the cluster")
        return None
    if not path.exists():
        evidence.gaps.append(f"{folder.name}/ has no {path.name}: the archive was never sealed")
        return None
    manifest = _read_json(path, evidence)
    if manifest is not None and (not isinstance(manifest, dict) or manifest.get("format") != 1):
        evidence.gaps.append(f"{folder.name}/{path.name} is not an archive manifest of format 1")
        return None
    return manifest


def _archived_file_gaps(folder: Path, view: str, entry: dict, evidence: Evidence) -> bool:
    """Gaps of one view's file: missing, cut or changed (bytes, sha256), rows other than the manifest's."""
    import hashlib
    import pyarrow.parquet as pq
    path = folder / str(entry.get("file"))
    before = len(evidence.gaps)
    if not path.is_file():
        evidence.gaps.append(f"the archive's {view} view ({path.name}) is missing")
        return True
    data = path.read_bytes()
    if len(data) != entry.get("bytes") or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        evidence.gaps.append(f"the archive's {path.name} is cut or changed: {len(data)} bytes, its sha256 not the "
                             f"manifest's ({entry.get('bytes')} bytes)")
        return True
    rows = pq.read_metadata(path).num_rows
    said = sum(part.get("rows", 0) for parts in entry.get("partitions", {}).values() for part in parts.values())
    if rows != entry.get("rows") or said != rows:
        evidence.gaps.append(f"the archive's {path.name} is miscounted: {rows} rows in the file, the manifest says "
                             f"{entry.get('rows')} in all and {said} by partition")
    return len(evidence.gaps) > before


def _archived_partition_gaps(view: str, entry: dict, evidence: Evidence,
                             ends: dict[str, dict[str, dict[str, int]]] | None = None) -> None:
    """Each partition of `ends` (default the run's end_offsets.json) archived in `view` to its end."""
    end = dict(load.VIEWS)[next(i for i, v in load.ARCHIVE_VIEWS.items() if v == view)]
    for topic, parts in sorted((evidence.end_offsets if ends is None else ends).items()):
        for p, recorded in sorted(parts.items(), key=lambda kv: int(kv[0])):
            archived = entry.get("partitions", {}).get(topic, {}).get(str(p))
            if archived is None:
                evidence.gaps.append(f"{topic}-{p}: the archive's {view} view lacks it")
            elif archived.get("end") != recorded[end]:
                evidence.gaps.append(f"{topic}-{p}: the archive's {view} view was read to {archived.get('end')}, the "
                                     f"run recorded {end.upper()} {recorded[end]}")
            elif archived.get("reached", 0) < archived["end"]:
                evidence.gaps.append(f"{topic}-{p}: the archive's {view} view was read only to offset "
                                     f"{archived.get('reached')}, not to its end {archived['end']}")


# ---- the history's completeness -------------------------------------------------------------------------
@dataclass
class Part:
    """One part file as the driver sees it: its number, size, and its last line's seal (None: not a seal)."""
    number: int
    name: str
    size: int
    seal: dict | None
    last_line: str                     # "seal", "torn" (no newline at the end), "empty" or "other"


def read_parts(run_dir: Path) -> list[Part]:
    """Every part file's number, size and last line (read from its tail: never the whole file)."""
    parts = []
    for path in load.history_parts(run_dir):
        match = PART_NAME.search(path.name)
        if match is None:
            continue
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
        seal, last = _last_line(tail)
        parts.append(Part(int(match.group(1)), path.name, size, seal, last))
    return parts


def _last_line(tail: bytes) -> tuple[dict | None, str]:
    if not tail:
        return None, "empty"
    if not tail.endswith(b"\n"):
        return None, "torn"
    try:
        op = json.loads(tail[:-1].rsplit(b"\n", 1)[-1])
    except ValueError:
        return None, "other"
    if isinstance(op, dict) and op.get("process") == SEAL_PROCESS and op.get("f") == SEAL_F \
            and isinstance(op.get("value"), dict):
        return op["value"], "seal"
    return None, "other"


def part_line_counts(spark: SparkSession, run_dir: Path) -> dict[int, tuple[int, int]]:
    """{part number: (lines, seal lines)}: a part with a current columnar twin (load.twin_of) as its twin holds
    them (the Parquet footer's rows, the seals counted when it was written), the others counted by Spark per
    file (input_file_name); empty files have none."""
    counts, paths = {}, []
    for part in load.history_parts(run_dir):
        twin = load.twin_of(part)
        match = PART_NAME.search(part.name)
        if twin is not None and match is not None:
            counts[int(match.group(1))] = (twin["rows"], int(twin.get("seals") or 0))
        else:
            paths.append(str(part))
    if not paths:
        return counts
    lines = spark.read.text(paths).select(
        F.regexp_extract(F.input_file_name(), r"part-(\d+)\.jsonl$", 1).cast("int").alias("part"),
        F.get_json_object("value", "$.process").alias("process"), F.get_json_object("value", "$.f").alias("f"))
    seal = ((F.col("process") == SEAL_PROCESS) & (F.col("f") == SEAL_F)).cast("int")
    rows = lines.groupBy("part").agg(F.count(F.lit(1)).alias("lines"), F.coalesce(F.sum(seal), F.lit(0)).alias("seals"))
    return counts | {r["part"]: (r["lines"], r["seals"]) for r in rows.collect()}


def sealing_writer(run_dir: Path) -> bool:
    """Did a writer that seals write this history (<run>/history-format.json)?"""
    try:
        return json.loads((Path(run_dir) / FORMAT_NAME).read_text()).get("seals") is True
    except (OSError, ValueError, AttributeError):
        return False


def seal_gaps(parts: list[Part], counts: dict[int, tuple[int, int]], sealed: bool = True) -> list[str]:
    """Every part sealed as its last line, with the lines its seal counts; parts 0..n-1; one final seal, on the
    last part; nothing dropped; the operations the final seal counts. `counts` from part_line_counts; `sealed`:
    the writer says it seals (sealing_writer), so a history without any seal was cut, not written before seals."""
    if not parts:
        return ["no history under history/"]
    gaps = [f"history/{p.name} is empty (0 bytes)" for p in parts if p.size == 0]
    if not sealed and not any(p.seal for p in parts) and not any(seals for _, seals in counts.values()):
        torn = [f"history/{p.name} is cut: its last line is torn" for p in parts if p.last_line == "torn"]
        return gaps + torn + [UNSEALED] if any(p.size for p in parts) else gaps
    numbers = [p.number for p in parts]
    if numbers != list(range(len(parts))):
        gaps.append(f"history parts {numbers} are not numbered 0..{len(parts) - 1}: a part is missing")
    for p in parts:
        gaps += _part_gaps(p, counts.get(p.number, (0, 0)))
    finals = [p for p in parts if p.seal and p.seal.get("final")]
    if not finals:
        gaps.append("no history part is sealed final: the history's last part(s) are missing or cut")
    elif finals[-1] is not parts[-1] or len(finals) > 1:
        gaps.append(f"history/{finals[0].name} is sealed final but is not the last part {parts[-1].name}")
    dropped = max((int(p.seal.get("dropped") or 0) for p in parts if p.seal), default=0)
    if dropped:
        gaps.append(f"the history writer dropped {dropped} line(s) it could not write (logs/history.log)")
    operations = sum(lines - seals for lines, seals in counts.values())
    if finals and finals[-1].seal.get("operations") != operations:
        gaps.append(f"the history holds {operations} operation(s), its final seal counts "
                    f"{finals[-1].seal.get('operations')}")
    return gaps


def _part_gaps(part: Part, count: tuple[int, int]) -> list[str]:
    lines, seals = count
    if part.size == 0:
        return []
    if part.seal is None:
        return [f"history/{part.name} is cut: its last line is {'torn' if part.last_line == 'torn' else 'not its seal'}"]
    gaps = []
    if part.seal.get("part") != part.number:
        gaps.append(f"history/{part.name} ends with the seal of part {part.seal.get('part')}")
    if seals != 1:
        gaps.append(f"history/{part.name} has {seals} seal lines, one expected")
    if lines != int(part.seal.get("lines") or 0) + seals:
        gaps.append(f"history/{part.name} has {lines - seals} operation line(s), its seal counts "
                    f"{part.seal.get('lines')}")
    return gaps


def operations_of(ops: DataFrame) -> DataFrame:
    """The history frame (load.read_history) without damaged lines and seals."""
    return ops.where(F.col("_corrupt_record").isNull()
                     & ~((F.col("process") == SEAL_PROCESS) & (F.col("f") == SEAL_F)).eqNullSafe(True))


def pairing_gaps(ops: DataFrame) -> list[str]:
    """chaos/record/history.py's pairing, per process in time order: an invoke's next operation completes it (the
    writer completes every open invoke at close); a fail/info, or an ok of an f that is never an observation
    (PAIRED_F), follows its invoke. One aggregation; counts and one example of each reach the driver."""
    order = Window.partitionBy("process").orderBy("time", F.when(F.col("type") == "invoke", 0).otherwise(1))
    seq = operations_of(ops).select("process", "type", "f", "time", F.lag("type").over(order).alias("before"),
                                    F.lead("type").over(order).alias("after"))
    invoke = F.col("type") == "invoke"
    open_invoke = invoke & (F.col("after").isNull() | (F.col("after") == "invoke"))
    orphan = ~invoke & (F.col("type").isin("fail", "info") | F.col("f").isin(*PAIRED_F)) \
        & (F.col("before").isNull() | (F.col("before") != "invoke"))
    example = F.concat_ws(" ", F.lit("process"), "process", "type", "f", F.lit("at time"), F.col("time").cast("string"))
    row = seq.agg(F.sum(open_invoke.cast("int")).alias("open"), F.sum(orphan.cast("int")).alias("orphans"),
                  F.first(F.when(open_invoke, example), ignorenulls=True).alias("open_example"),
                  F.first(F.when(orphan, example), ignorenulls=True).alias("orphan_example")).first()
    gaps = []
    if row["open"]:
        gaps.append(f"{row['open']} invoke(s) without their completion (e.g. {row['open_example']}): "
                    "history lines are missing")
    if row["orphans"]:
        gaps.append(f"{row['orphans']} completion(s) without their invoke (e.g. {row['orphan_example']}): "
                    "history lines are missing")
    return gaps


@dataclass
class HistorySummary:
    """What the evidence checks and the job need from the history as counts and small sets, from ONE Spark
    aggregation (summarise): a query each cost about a second on a small run."""
    damaged: int = 0                                   # lines that are not JSON operations (torn, garbage)
    operations: int = 0                                # the others, without the seals
    attempts: dict[str, int] = field(default_factory=dict)     # completed transactional attempts per type
    has_consumers: bool = False                        # processors, copiers or Streams applications ran
    has_processors: bool = False                       # exactly-once processors ran (`process` invokes)
    has_polls: bool = False                            # a consumer's polls or seeks are recorded (load.consumer_polls)
    committed_groups: set[str] = field(default_factory=set)    # groups of `ok` process attempts
    written_topics: set[str] = field(default_factory=set)      # writes, sends, copier outputs
    copiers: list[tuple] = field(default_factory=list)         # (input, output, group) of each copier
    streams: list[tuple] = field(default_factory=list)         # load.STREAMS_SCHEMA of each Streams application
    flink_jobs: set[str] = field(default_factory=set)          # the groups of the Flink jobs (topology events)
    drained_jobs: set[str] = field(default_factory=set)        # those whose client recorded a drained stop


def summarise(ops: DataFrame) -> HistorySummary:
    """One aggregation over the history, grouped by operation type (a handful of rows reach the driver:
    counts, and distinct groups, topic sets and copier arguments, all small)."""
    damaged = F.col("_corrupt_record").isNotNull()
    op = ~damaged & ~((F.col("process") == SEAL_PROCESS) & (F.col("f") == SEAL_F)).eqNullSafe(True)
    invoke = F.col("type") == "invoke"
    attempt = F.col("f").isin(*TRANSACTIONAL_F) & ~invoke & F.col("value.attempt").isNotNull()
    consumer = op & ((invoke & ((F.col("f") == "process") | load.copier_started())) | load.streams_declared())
    committed = op & (F.col("f") == "process") & (F.col("type") == "ok") & F.col("value.group").isNotNull()
    polled = op & F.col("f").isin("poll", "seek") | (op & invoke & (F.col("f") == "process"))

    def count(condition):
        return F.coalesce(F.sum(condition.cast("int")), F.lit(0))
    rows = ops.groupBy("type").agg(
        count(damaged).alias("damaged"), count(op).alias("operations"), count(attempt).alias("attempts"),
        count(consumer).alias("consumers"), count(op & invoke & (F.col("f") == "process")).alias("processors"),
        count(polled).alias("polls"),
        F.collect_set(F.when(committed, F.col("value.group"))).alias("groups"),
        F.collect_set(F.when(op, F.array_sort(F.array_distinct(F.col("value.writes.topic"))))).alias("written"),
        F.collect_set(F.when(op & (F.col("f") == "produce"), F.col("value.topic"))).alias("sent"),
        F.collect_set(F.when(load.copier_started(), load.copier_of())).alias("copiers"),
        F.collect_set(F.when(load.streams_declared(), load.streams_of())).alias("streams"),
        F.collect_set(F.when(op & load.streams_declared() & (F.col("f") == "flink"),
                             F.col("value.application_id"))).alias("flink"),
        F.collect_set(F.when(op & load.flink_drained(), F.col("value.application_id"))).alias("drained")).collect()
    summary = HistorySummary()
    copiers, streams = set(), set()
    for r in rows:
        summary.damaged += r["damaged"]
        summary.operations += r["operations"]
        if r["attempts"]:
            summary.attempts[r["type"]] = r["attempts"]
        summary.has_consumers |= r["consumers"] > 0
        summary.has_processors |= r["processors"] > 0
        summary.has_polls |= r["polls"] > 0
        summary.committed_groups |= set(r["groups"])
        summary.written_topics |= {t for topics in r["written"] for t in topics if t is not None} | set(r["sent"])
        copiers |= {tuple(c) for c in r["copiers"]}
        summary.flink_jobs |= set(r["flink"])
        summary.drained_jobs |= set(r["drained"])
        streams |= {(s[0], tuple(s[1] or ()), *s[2:]) for s in r["streams"]}
    summary.copiers = sorted(copiers, key=lambda c: tuple(x or "" for x in c))
    summary.written_topics |= {output for _, output, _ in summary.copiers if output}
    summary.streams = [(app, list(sources), *rest) for app, sources, *rest in sorted(streams, key=str)]
    summary.written_topics |= {t for s in summary.streams for t in s[2:] if t}
    return summary


def workload_kinds(summary: HistorySummary) -> set[str]:
    """The kinds of workloads the run has that checks may need (verdict.NEEDS)."""
    return {kind for kind, present in (("processors", summary.has_processors), ("copiers", bool(summary.copiers)),
                                       ("streams", bool(summary.streams)), ("polls", summary.has_polls)) if present}


def group_gaps(summary: HistorySummary, evidence: Evidence) -> list[str]:
    """The processing checks judge against group_offsets.json: it must exist when the run has processors,
    copiers or Streams applications, and hold every group a processor committed in (an `ok` process attempt);
    a Flink job's offsets say what it processed only after its client drained it (its `stopped` event)."""
    if not evidence.has_group_offsets:
        return ["no group_offsets.json, but the run has consumers (processors, copiers, Streams): the processing checks would "
                "judge against no committed offsets"] if summary.has_consumers else []
    apps = {s[0] for s in summary.streams if s[0]}      # a Streams application's group is its application id
    return [f"group {g} committed (ok process attempts) but group_offsets.json does not record it"
            for g in sorted(summary.committed_groups - set(evidence.group_offsets))] + \
        [f"Kafka Streams application or Flink job {a}: group_offsets.json does not record its group, so what it processed "
         "cannot be told" for a in sorted(apps - set(evidence.group_offsets))] + \
        [f"Flink job {a}: its client recorded no drained stop (chaos/workloads/flink.py), so the group's offsets, "
         "committed by the source only when a checkpoint completes, may lag what the job committed: what it "
         "processed cannot be told" for a in sorted(summary.flink_jobs - summary.drained_jobs)]


def topic_gaps(summary: HistorySummary, evidence: Evidence) -> list[str]:
    """Every topic the history wrote to (writes, tool and storm sends, copier outputs) is in end_offsets.json."""
    if not evidence.end_offsets:
        return []                                      # already a gap (load_run_files)
    return [f"topic {t} was written to (history) but end_offsets.json does not record it: it would not be read"
            for t in sorted(summary.written_topics - set(evidence.end_offsets))]


def check_history(spark: SparkSession, run_dir: Path, ops: DataFrame, evidence: Evidence) -> HistorySummary:
    """Every history gap into evidence.gaps: damaged lines, seals and line counts, pairing, groups, written
    topics. Returns the history's summary (summarise) for the job."""
    summary = summarise(ops)
    new = [f"the history has {summary.damaged} damaged line(s) (torn or not JSON)"] if summary.damaged else []
    parts = read_parts(run_dir)
    new += seal_gaps(parts, part_line_counts(spark, run_dir), sealing_writer(run_dir)) if parts else []
    new += pairing_gaps(ops) + group_gaps(summary, evidence) + topic_gaps(summary, evidence)
    evidence.gaps += [gap for gap in new if gap not in evidence.gaps]
    return summary
