"""Per-partition requests to partition leaders: offsets at scrape time, producer state in the background.

Owns: ListOffsets (LSO with READ_COMMITTED and HWM with READ_UNCOMMITTED, to every leader at once on the
scrape lane within one deadline, never queued behind a leader's earlier unanswered scrape request) and
DescribeProducers (batches of producers_batch partitions, in waves of IN_FLIGHT per broker), each partition's
error kept as an ItemError; a leaderless partition is an error, not a request.
Must not: read metadata other than through the MetadataCache it is handed, or hold results between calls
(beyond the scrape requests still unanswered).
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Iterable

from kafka.protocol.admin.transactions import DescribeProducersRequest
from kafka.protocol.consumer.offsets import IsolationLevel, ListOffsetsRequest, OffsetSpec

from exporter.access.lanes import SCRAPE, AdminLanes
from exporter.access.metadata import MetadataCache
from exporter.access.results import (ItemError, OffsetsResult, Partition, ProducerEntry, ProducersResult, chunks,
                                     error_name, item_error)

IN_FLIGHT = 5                         # requests in flight per broker connection (kafka-python's default cap)


def _by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        grouped[topic].append(partition)
    return grouped


def _leaderless(grouped: dict[int, list[Partition]], errors: list[ItemError]) -> None:
    for tp in grouped.pop(-1, []):
        errors.append(ItemError("LeaderNotAvailable", topic=tp[0], partition=tp[1]))


class PartitionRequests:
    """Offsets and producer state of every allowed partition, from its leader."""

    def __init__(self, lanes: AdminLanes, cache: MetadataCache, producers_batch: int):
        self.lanes = lanes
        self.cache = cache
        self.producers_batch = producers_batch
        self._pending: dict[int, Any] = {}       # broker -> a scrape request of an earlier scrape still unanswered

    # ---- offsets (scrape time) ------------------------------------------------------------------
    def offsets(self, timeout_s: float | None = None) -> OffsetsResult:
        """LSO (READ_COMMITTED) and HWM (READ_UNCOMMITTED) of every allowed partition: both isolation levels
        to every leader at once, on the scrape lane, all within ONE deadline (timeout_s, default the request
        timeout) that also covers a metadata refresh. A leader that has not answered by then, or still has
        an earlier scrape's request unanswered (a frozen broker: nothing new is queued behind it), is left
        out with a whole-request error: partial data in time, never a late scrape."""
        budget = timeout_s if timeout_s is not None else self.lanes.timeout_ms / 1000
        deadline = time.monotonic() + budget
        meta = self.cache.metadata(lane=SCRAPE, deadline=deadline - budget / 2)   # a refresh leaves half for offsets
        result = OffsetsResult(leaders=dict(meta.leaders))
        grouped = meta.partitions_by_leader(meta.leaders)
        _leaderless(grouped, result.errors)
        self.lanes.run(self._list_offsets, grouped, deadline, result, lane=SCRAPE)
        self.cache.forget_after(result.errors)
        return result

    async def _list_offsets(self, m, grouped: dict[int, list[Partition]], deadline: float,
                            result: OffsetsResult) -> None:
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        sends, busy = [], []
        for leader, tps in grouped.items():
            if not getattr(self._pending.get(leader), "is_done", True):
                busy.append((leader, tps))
                continue
            for isolation, into in ((IsolationLevel.READ_COMMITTED, result.last_stable),
                                    (IsolationLevel.READ_UNCOMMITTED, result.high_watermark)):
                future = self.lanes.send(m, self._list_offsets_request(tps, isolation), leader, left_ms)
                self._pending[leader] = future
                sends.append(((leader, tps, into), future))
        for leader, tps in busy:
            result.errors.extend(ItemError("EarlierRequestPending", broker=leader, topic=t, partition=p,
                                           whole_request=True) for t, p in tps)
        for (leader, tps, into), response, exc in await self.lanes.gather(m, sends, deadline):
            if exc is not None:
                result.errors.extend(ItemError(error_name(exc), broker=leader, topic=t, partition=p,
                                               whole_request=True) for t, p in tps)
                continue
            self._parse_offsets(leader, response, into, result.errors)

    @staticmethod
    def _parse_offsets(leader: int, response: Any, into: dict[Partition, int], errors: list[ItemError]) -> None:
        for topic in response.topics:
            for p in topic.partitions:
                err = item_error(p.error_code)
                if err:
                    errors.append(ItemError(err, broker=leader, topic=topic.name, partition=p.partition_index))
                else:
                    into[(topic.name, p.partition_index)] = p.offset

    @staticmethod
    def _list_offsets_request(tps: list[Partition], isolation: IsolationLevel):
        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        part_cls = topic_cls.ListOffsetsPartition
        topics = [topic_cls(name=t, partitions=[part_cls(partition_index=p, timestamp=OffsetSpec.LATEST)
                                                for p in parts]) for t, parts in _by_topic(tps).items()]
        return ListOffsetsRequest(replica_id=-1, isolation_level=int(isolation), topics=topics,
                                  min_version=ListOffsetsRequest.min_version_for_isolation_level(int(isolation)))

    # ---- producer state (background) --------------------------------------------------------------
    def producers(self, partitions: Iterable[Partition] | None = None) -> ProducersResult:
        """DescribeProducers on every allowed partition's leader, <= producers_batch per request."""
        meta = self.cache.metadata()
        wanted = list(meta.leaders if partitions is None else partitions)
        result = ProducersResult(leaders={tp: meta.leaders.get(tp, -1) for tp in wanted}, requested=len(wanted))
        grouped = meta.partitions_by_leader(wanted)
        _leaderless(grouped, result.errors)
        self.lanes.run(self._describe_producers, grouped, result)
        self.cache.forget_after(result.errors)
        return result

    async def _describe_producers(self, m, grouped: dict[int, list[Partition]], result: ProducersResult) -> None:
        """Batches to every broker at once, in waves of IN_FLIGHT per broker (the client refuses more)."""
        batches = {leader: chunks(sorted(tps), self.producers_batch) for leader, tps in grouped.items()}
        for wave in range(max((len(b) for b in batches.values()), default=0) // IN_FLIGHT + 1):
            sends = []
            for leader, leader_batches in batches.items():
                for batch in leader_batches[wave * IN_FLIGHT:(wave + 1) * IN_FLIGHT]:
                    request = DescribeProducersRequest(topics=[
                        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                        for t, ps in _by_topic(batch).items()])
                    sends.append(((leader, batch), self.lanes.send(m, request, leader)))
            await self._collect_producers(m, sends, result)

    async def _collect_producers(self, m, sends: list, result: ProducersResult) -> None:
        for (leader, batch), response, exc in await self.lanes.gather(m, sends):
            if exc is not None:
                result.errors.extend(ItemError(error_name(exc), broker=leader, topic=t, partition=p, whole_request=True)
                                     for t, p in batch)
                continue
            self._parse_producers(leader, response, result)

    @staticmethod
    def _parse_producers(leader: int, response: Any, result: ProducersResult) -> None:
        for topic in response.topics:
            for p in topic.partitions:
                err = item_error(p.error_code)
                if err:
                    result.errors.append(ItemError(err, broker=leader, topic=topic.name, partition=p.partition_index))
                    continue
                result.producers[(topic.name, p.partition_index)] = [
                    ProducerEntry(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                                  a.coordinator_epoch, a.current_txn_start_offset) for a in p.active_producers]
