"""Readable lag: how many records a read_committed consumer at a committed offset would still receive.

Owns: the read_committed consumer's filter applied to the raw record batches of a Fetch response (as
Kafka's consumer does it, CompletedFetch / kafka-python's PartitionRecords: control batches (transaction
markers) are never delivered; a transactional batch of a producer whose transaction the response's
aborted_transactions list says was aborted is skipped until that producer's ABORT marker), the per-range
byte budget, and turning the counted ranges into per-group values. Pure: no requests (access/fetches.py
fetches), no metric families (collectors.py builds them).

Why: the offset just before the LSO of a partition written by transactions is a commit marker, so
LSO - committed stays 1 for a consumer group that has read everything under exactly-once. The readable
lag of [committed, LSO) is its data records minus markers minus records of aborted transactions: 0 then.
A range read to its end is exact; a range the byte budget cut is an upper bound: the records counted
plus every offset not read, `data + (lso - next_offset)`.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from kafka.record import MemoryRecords

if TYPE_CHECKING:
    from exporter.kafka_access import Partition


@dataclass
class ReadableRange:
    """[start, lso) of one partition, as far as it was read; start is a committed offset."""
    tp: Partition
    start: int
    lso: int
    budget_bytes: int
    next_offset: int = field(init=False)     # first offset not read yet
    data_records: int = 0                    # records a read_committed consumer receives in [start, next_offset)
    bytes_read: int = 0                      # whole batches read, counted against budget_bytes
    cut: bool = False                        # the byte budget stopped the read
    error: str | None = None                 # why it could not be read (then it has no value)

    def __post_init__(self) -> None:
        self.next_offset = self.start

    @property
    def complete(self) -> bool:
        return self.next_offset >= self.lso

    @property
    def readable(self) -> int:
        """Exact when complete, else an upper bound: counted records plus every offset not read."""
        return self.data_records + max(0, self.lso - self.next_offset)

    @property
    def budget_left(self) -> int:
        return max(0, self.budget_bytes - self.bytes_read)

    def feed(self, records: bytes | None, aborted: Iterable[Any]) -> bool:
        """Count one Fetch response's records (READ_COMMITTED, fetched from next_offset with at most
        budget_left bytes) and its aborted_transactions (producer_id, first_offset). True if it advanced."""
        before = self.next_offset
        data = records or b""
        self.cut = len(data) >= self.budget_left
        reader = _AbortedReader(aborted)
        for batch in _batches(data):
            if batch.base_offset >= self.lso:
                break
            if _before(batch, self.next_offset):     # read, not counted: the aborted bookkeeping sees every batch
                reader.delivers(batch)
                continue
            if self.bytes_read + batch.size_in_bytes > self.budget_bytes:
                self.cut = True
                break
            self.bytes_read += batch.size_in_bytes
            self._consume(batch, reader)
        return self.next_offset > before

    def _consume(self, batch: Any, reader: _AbortedReader) -> None:
        if reader.delivers(batch):
            delivered, self.next_offset = _records_in(batch, self.next_offset, self.lso)
            self.data_records += delivered
        else:
            self.next_offset = batch.next_offset     # only v2 batches are ever skipped


class _AbortedReader:
    """The aborted-transaction bookkeeping of one Fetch response, as the consumer keeps it."""

    def __init__(self, aborted: Iterable[Any]):
        self._queue = deque(sorted(aborted or [], key=lambda txn: txn.first_offset))
        self._producers: set[int] = set()

    def delivers(self, batch: Any) -> bool:
        """Whether a read_committed consumer is handed this batch's records."""
        if batch.magic < 2:
            return True                          # v0/v1 predates transactions
        if batch.has_producer_id():
            while self._queue and self._queue[0].first_offset <= batch.last_offset:
                self._producers.add(self._queue.popleft().producer_id)
            if batch.is_control_batch and _is_abort_marker(batch):
                self._producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in self._producers:
                return False
        return not batch.is_control_batch


def _batches(data: bytes) -> Iterator[Any]:
    """Complete batches of a records buffer (a partial trailing batch, cut by the byte limit, is dropped)."""
    records = MemoryRecords(bytes(data))
    batch = records.next_batch()
    while batch is not None:
        yield batch
        batch = records.next_batch()


def _is_abort_marker(batch: Any) -> bool:
    marker = next(iter(batch), None)
    return marker is not None and marker.abort


def _before(batch: Any, offset: int) -> bool:
    return batch.magic >= 2 and batch.next_offset <= offset


def _records_in(batch: Any, lo: int, hi: int) -> tuple[int, int]:
    """(records of the batch with lo <= offset < hi, the offset after the batch). A v2 batch whose record
    count fills its offset span has no gaps, so this is arithmetic on the header; only a compacted batch
    (fewer records than offsets) is decompressed and walked."""
    if batch.magic < 2:
        offsets = [r.offset for r in batch]      # v0/v1: a compressed wrapper's header holds its last offset
        return sum(1 for o in offsets if lo <= o < hi), max(offsets, default=lo - 1) + 1
    if batch.records_count == batch.last_offset_delta + 1:
        first, last = max(lo, batch.base_offset), min(hi - 1, batch.last_offset)
        return max(0, last - first + 1), batch.next_offset
    return sum(1 for r in batch if lo <= r.offset < hi), batch.next_offset


# ---- what to read, and the values per group ----------------------------------------------------------------
def pending_ranges(committed: dict[str, dict[Partition, int]], lso: dict[Partition, int],
                   budget_bytes: int) -> dict[tuple[Partition, int], ReadableRange]:
    """One range per distinct (partition, committed offset) with 0 < LSO - committed."""
    ranges: dict[tuple[Partition, int], ReadableRange] = {}
    for offsets in committed.values():
        for tp, start in offsets.items():
            if tp in lso and start < lso[tp] and (tp, start) not in ranges:
                ranges[(tp, start)] = ReadableRange(tp, start, lso[tp], budget_bytes)
    return ranges


@dataclass
class GroupReadable:
    """Per group: readable lag by partition, the partitions where it is an upper bound, and the committed
    partitions without a value (no LSO, or the fetch failed)."""
    lag: dict[str, dict[Partition, int]] = field(default_factory=dict)
    estimated: dict[str, set[Partition]] = field(default_factory=dict)
    unknown: dict[str, set[Partition]] = field(default_factory=dict)


def readable_by_group(committed: dict[str, dict[Partition, int]], lso: dict[Partition, int],
                      ranges: dict[tuple[Partition, int], ReadableRange]) -> GroupReadable:
    """0 where committed >= LSO (nothing left to read), the range's value where it was read, none where
    there is no LSO or the range failed."""
    out = GroupReadable()
    for group, offsets in committed.items():
        lag, estimated, unknown = out.lag.setdefault(group, {}), set(), set()
        for tp, start in offsets.items():
            rng = ranges.get((tp, start))
            if tp in lso and start >= lso[tp]:
                lag[tp] = 0
            elif rng is None or rng.error:
                unknown.add(tp)
            else:
                lag[tp] = rng.readable
                if not rng.complete:
                    estimated.add(tp)
        out.estimated[group], out.unknown[group] = estimated, unknown
    return out
