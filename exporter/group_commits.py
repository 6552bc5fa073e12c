"""Consumer groups whose exactly-once commits keep failing: committed offsets that stand still while the group
has records to read, its members keep putting offsets into transactions, and none of them lands.

Owns: per group, when its committed offsets last moved (or were last seen with nothing readable past them),
how many collections since then saw transactional offsets pending for it (OffsetFetch with require_stable
answering UNSTABLE_OFFSET_COMMIT: a TxnOffsetCommit whose transaction has not ended), and the verdict. Pure
functions and one small tracker; no Kafka calls, no metrics.

A group's commits are *failing* when all of these hold, each from complete evidence:
  - it has members (ListGroups: neither Empty nor Dead), so someone is consuming;
  - a read_committed consumer at its committed offsets would still receive records (readable lag > 0), so
    there is something to commit;
  - its committed offsets have not moved for `stall_seconds`;
  - during that stall at least PENDING_COLLECTIONS collections saw its transactional offsets pending: its
    transactions keep carrying offsets, and they abort (or never end) instead of committing.
It is not failing when nothing is readable past its offsets, its offsets moved within `stall_seconds`, it has
no members, or every collection of the stall read its pending offsets and too few saw any (then it stands
still without trying: a stopped consumer, told apart by readable lag and lag alerts). Anything else (the group
state, the readable lag or a pending read missing) leaves the verdict unknown: absent, never 0. A collection
that could not tell whether anything was readable (nothing readable would have ended the stall) starts the
window of evidence again: the verdict waits for `stall_seconds` of complete evidence after it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

Partition = tuple[str, int]
PENDING_COLLECTIONS = 2          # one look at a pending commit is every healthy transaction's; two in a stall are not
INACTIVE_STATES = frozenset({"Empty", "Dead"})    # ListGroups states of a group without members (every group type)


@dataclass(frozen=True)
class GroupSeen:
    """One collection's evidence about one group. None: that part of it could not be read."""
    committed: dict[Partition, int]
    readable: dict[Partition, int] | None     # readable lag of exactly known partitions (None: not computed)
    readable_complete: bool                    # every committed partition has an exact readable lag
    pending: frozenset[Partition] | None       # partitions with transactional offsets pending (None: unread)
    state: str | None                          # ListGroups' state (None: not told)


@dataclass(frozen=True)
class GroupCommits:
    """What the exporter says about one group's commits after a collection."""
    since: float                     # when its offsets last moved, or were last seen with nothing readable past them
    pending_partitions: int | None   # partitions with transactional offsets pending now (None: unread)
    active: bool | None              # it has members (None: its state was not told)
    failing: bool | None             # the verdict (None: unknown)


@dataclass
class _Track:
    offsets: dict[Partition, int]
    since: float                     # offsets last moved, or last seen with nothing readable past them
    window: float                    # since when every collection could tell whether anything was readable
    pending_seen: int = 0            # collections of the window that saw pending offsets
    pending_missed: int = 0          # collections of the window whose pending offsets could not be read


def has_work(seen: GroupSeen) -> bool | None:
    """True: a record is readable past the committed offsets; False: none (every partition known and 0);
    None for a group without committed offsets (of allowed topics): there is nothing to read past."""
    if seen.readable is None or not seen.committed:
        return None
    if any(v > 0 for v in seen.readable.values()):
        return True
    return False if seen.readable_complete else None


def active(state: str | None) -> bool | None:
    return None if not state else state not in INACTIVE_STATES


@dataclass
class GroupCommitTracker:
    """Per group, the evidence kept between collections; groups no longer listed are forgotten."""
    _tracks: dict[str, _Track] = field(default_factory=dict)

    def update(self, groups: dict[str, GroupSeen], now: float, stall_seconds: float) -> dict[str, GroupCommits]:
        self._tracks = {g: t for g, t in self._tracks.items() if g in groups}
        return {group: self._one(group, seen, now, stall_seconds) for group, seen in sorted(groups.items())}

    def _one(self, group: str, seen: GroupSeen, now: float, stall_seconds: float) -> GroupCommits:
        work = has_work(seen)
        track = self._tracks.get(group)
        if track is None or track.offsets != seen.committed or work is False:
            track = self._tracks[group] = _Track(dict(seen.committed), now, now)
        elif work is None:          # nothing readable now would have ended the stall: the window starts again
            track.window, track.pending_seen, track.pending_missed = now, 0, 0
        if seen.pending is None:
            track.pending_missed += 1
        elif seen.pending:
            track.pending_seen += 1
        is_active = active(seen.state)
        return GroupCommits(track.since, None if seen.pending is None else len(seen.pending), is_active,
                            failing(track, work, is_active, now, stall_seconds))


def failing(track: _Track, work: bool | None, is_active: bool | None, now: float, stall_seconds: float) -> bool | None:
    if work is False or now - track.since < stall_seconds or is_active is False:
        return False
    if work is None or is_active is None or now - track.window < stall_seconds:
        return None
    if track.pending_seen >= PENDING_COLLECTIONS:
        return True
    return None if track.pending_missed else False
