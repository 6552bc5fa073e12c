"""The Fetch requests behind the readable lag of consumer groups: READ_COMMITTED reads of [committed, LSO).

Owns: one Fetch READ_COMMITTED per (partition, committed offset) range from its leader, at most max_bytes per
range and FETCH_MAX_BYTES per request, every broker at once with one Fetch in flight each, a range that
stopped at the end of a log segment read on for up to READ_ROUNDS Fetches, and every failed range's error kept
as an ItemError (the range then has no value).
Must not: count records (exporter/readable_lag.py does, on the batches handed to it) or keep what it read.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import kafka.errors as Errors
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import IsolationLevel

from exporter.access.lanes import AdminLanes
from exporter.access.metadata import MetadataCache
from exporter.access.results import ItemError, Partition, ReadableLagResult, chunks, error_name, item_error
from exporter.readable_lag import ReadableRange, pending_ranges, readable_by_group

FETCH_MAX_BYTES = 50 * 1024 * 1024    # bytes asked of one Fetch at most (the Java consumer's fetch.max.bytes)
FETCH_BY_NAME_MAX_VERSION = 12        # Fetch v13+ names topics by id
READ_ROUNDS = 4                       # Fetches per readable-lag range (each reads on where a log segment ended)


class ReadableLagFetches:
    """What a read_committed consumer at each group's committed offsets would still receive, read from the leaders."""

    def __init__(self, lanes: AdminLanes, cache: MetadataCache):
        self.lanes = lanes
        self.cache = cache

    def readable_lag(self, committed: dict[str, dict[Partition, int]], last_stable: dict[Partition, int],
                     max_bytes: int) -> ReadableLagResult:
        """Per group and partition, the records a read_committed consumer at the committed offset would
        still receive before the LSO (exporter/readable_lag.py counts them). Each distinct (partition,
        committed offset) with 0 < LSO - committed is read from its leader with Fetch READ_COMMITTED, at
        most max_bytes per range; a range that stopped at the end of a log segment is read on, up to
        READ_ROUNDS Fetches. A range whose Fetch failed has no value (its error is kept)."""
        ranges = pending_ranges(committed, last_stable, max_bytes)
        result = ReadableLagResult()
        todo = list(ranges.values())
        for _ in range(READ_ROUNDS):
            if not todo:
                break
            todo = [r for r in self._read_round(todo, result) if not r.complete and not r.cut]
        result.groups = readable_by_group(committed, last_stable, ranges)
        self.cache.forget_after(result.errors)
        return result

    def _read_round(self, todo: list[ReadableRange], result: ReadableLagResult) -> list[ReadableRange]:
        """One Fetch for each range, from where it was left; the ranges that advanced."""
        leaders = self.cache.metadata().leaders
        by_leader: dict[int, list[ReadableRange]] = defaultdict(list)
        for rng in todo:
            by_leader[leaders.get(rng.tp, -1)].append(rng)
        for rng in by_leader.pop(-1, []):
            self._range_failed(rng, ItemError("LeaderNotAvailable", topic=rng.tp[0], partition=rng.tp[1]), result)
        requests = {leader: self._fetch_batches(ranges) for leader, ranges in by_leader.items()}
        return self.lanes.run(self._fetch_ranges, requests, result)

    @staticmethod
    def _fetch_batches(ranges: list[ReadableRange]) -> list[list[ReadableRange]]:
        """One leader's ranges as Fetch requests that name each partition once (two committed offsets of a
        partition go in two requests) and ask for at most FETCH_MAX_BYTES together."""
        per_request = max(1, FETCH_MAX_BYTES // max(r.budget_left for r in ranges))
        layers: dict[int, list[ReadableRange]] = defaultdict(list)
        seen: dict[Partition, int] = defaultdict(int)
        for rng in ranges:
            layers[seen[rng.tp]].append(rng)
            seen[rng.tp] += 1
        return [request for layer in layers.values() for request in chunks(layer, per_request)]

    async def _fetch_ranges(self, m, requests: dict[int, list[list[ReadableRange]]],
                            result: ReadableLagResult) -> list[ReadableRange]:
        """Every broker at once, one Fetch in flight per broker (a response may be FETCH_MAX_BYTES)."""
        advanced: list[ReadableRange] = []
        for wave in range(max((len(reqs) for reqs in requests.values()), default=0)):
            sends = [((leader, reqs[wave]), self.lanes.send(m, self._fetch_request(reqs[wave]), leader))
                     for leader, reqs in requests.items() if wave < len(reqs)]
            result.fetch_requests += len(sends)
            for (leader, batch), response, exc in await self.lanes.gather(m, sends):
                advanced += self._read_fetch(leader, batch, response, exc, result)
        return advanced

    @staticmethod
    def _fetch_request(batch: list[ReadableRange]):
        topic_cls = FetchRequest.FetchTopic
        part_cls = topic_cls.FetchPartition
        parts: dict[str, list] = defaultdict(list)
        for rng in batch:
            parts[rng.tp[0]].append(part_cls(partition=rng.tp[1], fetch_offset=rng.next_offset,
                                             partition_max_bytes=rng.budget_left))
        isolation = int(IsolationLevel.READ_COMMITTED)
        return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=sum(r.budget_left for r in batch),
                            isolation_level=isolation, topics=[topic_cls(topic=t, partitions=ps) for t, ps in parts.items()],
                            min_version=FetchRequest.min_version_for_isolation_level(isolation),
                            max_version=FETCH_BY_NAME_MAX_VERSION)

    def _read_fetch(self, leader: int, batch: list[ReadableRange], response: Any, exc: BaseException | None,
                    result: ReadableLagResult) -> list[ReadableRange]:
        """Feed each partition's records to its range; the ranges that advanced."""
        failed = error_name(exc) if exc is not None else item_error(getattr(response, "error_code", 0) or 0)
        if failed:
            for rng in batch:
                self._range_failed(rng, ItemError(failed, broker=leader, topic=rng.tp[0], partition=rng.tp[1],
                                                  whole_request=exc is not None), result)
            return []
        by_tp = {rng.tp: rng for rng in batch}
        advanced = []
        for topic in response.responses:
            for p in topic.partitions:
                fed = by_tp.get((topic.topic, p.partition_index))
                if fed is not None and self._feed(leader, fed, p, result):
                    advanced.append(fed)
        return advanced

    def _feed(self, leader: int, rng: ReadableRange, partition: Any, result: ReadableLagResult) -> bool:
        err = item_error(partition.error_code)
        if not err:
            result.fetched_bytes += len(partition.records or b"")
            try:
                return rng.feed(partition.records, partition.aborted_transactions)
            except Errors.KafkaError as exc:         # a corrupt batch, a compression codec this Python lacks
                err = error_name(exc)
        self._range_failed(rng, ItemError(err, broker=leader, topic=rng.tp[0], partition=rng.tp[1]), result)
        return False

    @staticmethod
    def _range_failed(rng: ReadableRange, error: ItemError, result: ReadableLagResult) -> None:
        rng.error = error.error
        result.errors.append(error)
