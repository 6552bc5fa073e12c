"""An input topic deleted and created again under its name while an exactly-once processor group consumes it
(the recreate-topic fault, fault_kinds.RecreateTopicParams): the same name, a new topic id (KIP-516), offsets from 0.

Owns the fault's procedure, in the order an operator resetting a topic follows, each step recorded:
  1. the topic's writer paused between two transactions (SIGSTOP, then the topic's LSO equal to its high watermark
     and unchanged a moment later: no transaction of it open on the topic; else resumed and paused again);
  2. the incarnation archived whole (chaos/record/archive.py write_incarnation: both views, its topic id), since
     nothing of it can be read once deleted and the verification needs every record;
  3. the group's committed offsets awaited past the last committed record of every partition (`caught_up`:
     everything the incarnation holds is processed and committed, so no commit of it can come later; at most
     catch_up_s, and recorded as not caught up otherwise: the verification then cannot tell what the group had
     processed of it), added to the manifest;
  4. the topic's id and ends read again, and the deletion refused (the archive removed, the writer resumed by the heal)
     when either changed since the archive: someone else's write would be deleted unseen; then the topic deleted,
     gone from every broker's metadata; the manifest then says `deleted` (with the history
     time), the one fact that makes the verification read the archived incarnation under its alias
     (`<topic>~<n>`: a name no Kafka topic can have);
  5. after gap_s, the topic created again with its partition count and the cluster's defaults, led everywhere;
  6. the writer resumed, and `hold`'s processes (paused just before the deletion) hold_s after it: consumers that
     meet the new topic only once it holds records.
What Kafka does meanwhile is what the run measures: both group coordinators delete the committed offsets of a
deleted topic's partitions; a consumer learns of the new topic id by its metadata (KIP-848's assignments and
TxnOffsetCommit v5, KIP-1319, name topics by id), or not, and may fetch the new incarnation from a position of the
old one.
Must not: write to the topic, or act on anything but the run's own topic, writer and group.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from chaos.record.archive import INCARNATIONS_DIR, mark_incarnation, write_incarnation
from chaos.record.history import now_ns
from chaos.workloads.run import Run
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.errors import TxnlabError
from cluster.access.reads import partition_ends, topic_partitions
from cluster.access.smoke import delete_topic, ensure_topic, topic_id
from cluster.access.waiting import Deadline

BOUNDARY_TRIES = 40
SETTLE_S = 0.3           # after a SIGSTOP: what the writer had already sent reaches its leaders


class RecreateError(TxnlabError, RuntimeError):
    """The topic could not be brought to a state where deleting it is meaningful (no writer boundary found)."""


@dataclass
class Recreation:
    """What the procedure did so far: the heal reads it (resume the writer, create the topic if it is gone)."""
    topic: str
    partitions: int = 0
    paused: bool = False
    held: list[str] = field(default_factory=list)     # processes paused until after the re-creation
    deleted: bool = False
    created: bool = False
    result: dict = field(default_factory=dict)


def settled(ends: dict[str, dict[str, int]]) -> bool:
    """No transaction open on the topic: every partition's LSO at its high watermark."""
    return all(o["lso"] == o["hwm"] for o in ends.values())


def pause_between_transactions(run: Run, writer: str, read: Callable[[], dict], tries: int = BOUNDARY_TRIES) -> dict:
    """Pause `writer` where no transaction of it is open on the topic (`read()`: its ends); the ends there."""
    for attempt in range(tries):
        if not run.pause(writer):
            raise RecreateError(f"the topic's writer {writer} is not running")
        time.sleep(SETTLE_S)
        first = read()
        if settled(first):
            time.sleep(SETTLE_S)
            if read() == first:
                return {"ends": first, "boundary_tries": attempt + 1}
        run.resume(writer)
        time.sleep(0.05 + 0.05 * (attempt % 5))          # a little further along its transactions
    raise RecreateError(f"{writer} was open on the topic at each of {tries} pauses: no transaction boundary found")


def group_caught_up(conn: ConnectionSettings, group: str, topic: str, after: dict[str, int],
                    limit_s: float) -> tuple[bool, dict[str, int]]:
    """Whether `group`'s committed offsets passed every partition's last committed record (`after`: {partition:
    its offset + 1}; the high watermark is one further, past the commit marker, which a consumer's committed
    offset need not pass) within limit_s, and the offsets last read ({partition: offset})."""
    deadline, offsets = Deadline(limit_s), {}
    with ClusterAdmin(conn) as admin:
        while True:
            offsets = admin.group_offsets([group], {topic}).get(group, {}).get(topic, {})
            if all(offsets.get(p, 0) >= end for p, end in after.items()):
                return True, offsets
            if deadline.expired:
                return False, offsets
            time.sleep(0.5)


def next_alias(run_dir: Path, topic: str) -> str:
    """<topic>~<n>, n counting the topic's incarnations archived before ('~' is no character of a topic name)."""
    done = list((Path(run_dir) / INCARNATIONS_DIR).glob(f"{topic}~*"))
    return f"{topic}~{len(done) + 1}"


def recreate(run: Run, state: Recreation, writer: str, group: str, catch_up_s: float, gap_s: float,
             progress: Callable[[str], None], hold: tuple[str, ...] = (), hold_s: float = 0.0) -> dict:
    """Steps 1-6 of the module docstring on `state.topic`; the result the history records."""
    conn, topic = run.conn, state.topic
    parts = topic_partitions(conn, topic)
    if not parts:
        raise RecreateError(f"topic {topic} does not exist: nothing to delete")
    state.partitions = len(parts)
    out = state.result
    out.update(topic=topic, writer=writer, group=group, partitions=len(parts), topic_id=topic_id(conn, topic))
    state.paused = True
    boundary = pause_between_transactions(run, writer, lambda: partition_ends(conn, topic, parts))
    ends = boundary["ends"]
    out.update(boundary_tries=boundary["boundary_tries"], ends=ends)
    alias = next_alias(run.dir, topic)
    manifest = write_incarnation(run.dir, conn, topic, alias, ends, {
        "topic_id": out["topic_id"], "group": group, "ends": ends, "paused_at": now_ns(run.history.run_start_ns),
        "deleted": False}, progress)
    out.update(alias=alias, archived=str(manifest.parent.relative_to(run.dir)))
    after = {p: last + 1 for p, last in last_committed(manifest).items()}
    caught_up, offsets = group_caught_up(conn, group, topic, after, catch_up_s)
    out.update(caught_up=caught_up, group_offsets=offsets)
    mark_incarnation(manifest, group_offsets=offsets, caught_up=caught_up)
    try:
        for process in hold:
            state.held.append(process)
            if not run.pause(process):
                raise RecreateError(f"{process} (to hold) is not running")
        unchanged(topic, (out["topic_id"], ends), (topic_id(conn, topic), partition_ends(conn, topic, parts)))
    except RecreateError:                # nothing deleted: no incarnation for the verification to read
        shutil.rmtree(manifest.parent, ignore_errors=True)
        raise
    delete_topic(conn, topic)
    state.deleted = True
    mark_incarnation(manifest, deleted=True, deleted_at=now_ns(run.history.run_start_ns))
    if gap_s:
        time.sleep(gap_s)
    create_again(conn, state)
    out.update(new_topic_id=topic_id(conn, topic))
    out["resumed"] = run.resume(writer)
    state.paused = False
    if state.held:
        time.sleep(hold_s)
        out["held"] = {p: run.resume(p) for p in state.held}
        state.held = []
    return out


def unchanged(topic: str, archived: tuple, now: tuple) -> None:
    """Refuse (RecreateError) to delete a topic that is no longer the one archived: another id (someone re-created it),
    or other ends (someone wrote to it: those records would be deleted unseen)."""
    if now != archived:
        raise RecreateError(f"{topic} changed since it was archived (topic id and ends {archived[0]} {archived[1]}, now "
                            f"{now[0]} {now[1]}): not deleted")


def last_committed(manifest: Path) -> dict[str, int]:
    """{partition: offset of its last committed record} of an archived incarnation (its committed view)."""
    import pyarrow.parquet as pq
    data = json.loads(Path(manifest).read_text())
    table = pq.read_table(Path(manifest).parent / data["views"]["committed"]["file"], columns=["partition", "offset"])
    grouped = table.group_by("partition").aggregate([("offset", "max")])
    return {str(p): o for p, o in zip(grouped["partition"].to_pylist(), grouped["offset_max"].to_pylist())} \
        if grouped.num_rows else {}


def create_again(conn: ConnectionSettings, state: Recreation) -> None:
    ensure_topic(conn, state.topic, partitions=state.partitions)
    state.created = True
