"""Readable lag: what a read_committed consumer would still receive, counted on record batches built here
(kafka-python's own record builders), and the access layer's Fetch rounds against a tiny fake log."""
from __future__ import annotations

import struct
import time

import pytest
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

import kafka.errors as Errors
from cluster.access.connection import ConnectionSettings
from exporter.access.fetches import ReadableLagFetches
from exporter.kafka_access import FETCH_MAX_BYTES, ClusterMetadata, KafkaAccess
from exporter.readable_lag import ReadableRange, pending_ranges, readable_by_group
from tests.unit.test_exporter_access import done, drive

PARTITION = FetchResponse.FetchableTopicResponse.PartitionData
ABORTED = PARTITION.AbortedTransaction
TP = ("orders", 0)


class _ControlBuilder(DefaultRecordBatchBuilder):
    """Control batches are only written by brokers; kafka-python builds them with this one bit more."""

    def _get_attributes(self, include_compression_type=True):
        return super()._get_attributes(include_compression_type) | self.CONTROL_MASK


def _at(base: int, builder: DefaultRecordBatchBuilder) -> bytes:
    buffer = builder.build()
    struct.pack_into(">q", buffer, 0, base)          # BaseOffset, which the broker assigns
    return bytes(buffer)


def data(base: int, n: int, pid: int = -1, txn: bool = False, offsets: list[int] | None = None) -> bytes:
    """A batch of n records at base.. (or at the given offset deltas: a compacted batch with gaps)."""
    builder = DefaultRecordBatchBuilder(2, 0, txn, pid, 0 if pid >= 0 else -1, 0 if pid >= 0 else -1, 1 << 20)
    for delta in offsets if offsets is not None else range(n):
        builder.append(delta, timestamp=0, key=None, value=b"v" * 20, headers=[])
    return _at(base, builder)


def marker(base: int, pid: int, commit: bool) -> bytes:
    builder = _ControlBuilder(2, 0, True, pid, 0, -1, 1 << 20)
    builder.append(0, timestamp=0, key=struct.pack(">hh", 0, int(commit)), value=struct.pack(">hi", 0, 0), headers=[])
    return _at(base, builder)


def read(log: list[bytes], start: int, lso: int, aborted=(), budget: int = 1 << 20) -> ReadableRange:
    rng = ReadableRange(TP, start, lso, budget)
    rng.feed(b"".join(log), [ABORTED(producer_id=pid, first_offset=first) for pid, first in aborted])
    return rng


# A committed transaction, an aborted one, a committed one: 0-2 data, 3 COMMIT, 4-5 aborted, 6 ABORT,
# 7-10 data, 11 COMMIT; LSO 12. A read_committed consumer from 0 receives 7 records.
EOS_LOG = [data(0, 3, 7, True), marker(3, 7, True), data(4, 2, 7, True), marker(6, 7, False),
           data(7, 4, 7, True), marker(11, 7, True)]
EOS_ABORTED = [(7, 4)]


def test_a_caught_up_exactly_once_group_has_nothing_left_to_read():
    rng = read(EOS_LOG, 11, 12, EOS_ABORTED)          # committed = last record + 1: only the marker is left
    assert (rng.readable, rng.complete, rng.cut) == (0, True, False)
    groups = readable_by_group({"eos": {TP: 11}}, {TP: 12}, {(TP, 11): rng})
    assert groups.lag == {"eos": {TP: 0}} and groups.estimated == {"eos": set()}


@pytest.mark.parametrize("committed, pending", [(7, 4), (9, 2), (0, 7), (1, 6)])
def test_committed_records_pending_are_counted(committed, pending):
    assert read(EOS_LOG, committed, 12, EOS_ABORTED).readable == pending


def test_records_of_an_aborted_transaction_in_the_range_are_not_counted():
    assert read(EOS_LOG, 3, 12, EOS_ABORTED).readable == 4            # 4-5 aborted, 3 and 6 markers
    assert read(EOS_LOG, 5, 12, EOS_ABORTED).readable == 4            # from inside the aborted transaction
    assert read(EOS_LOG, 3, 12, aborted=()).readable == 6             # no aborted list: a consumer would see them


def test_only_the_aborted_producer_is_skipped_and_its_abort_marker_ends_that():
    log = [data(0, 2, 7, True), data(2, 2, 8, True), marker(4, 7, False), marker(5, 8, True),
           data(6, 3, 7, True), marker(9, 7, True), data(10, 1)]       # 10: a plain non-transactional record
    assert read(log, 0, 11, aborted=[(7, 0)]).readable == 2 + 3 + 1


def test_a_range_the_byte_budget_cuts_is_an_upper_bound_and_flagged():
    budget = len(EOS_LOG[0]) + len(EOS_LOG[1]) + 10          # the first transaction and its marker, no more
    rng = read(EOS_LOG, 0, 12, EOS_ABORTED, budget=budget)
    assert rng.cut and not rng.complete and rng.next_offset == 4
    assert rng.readable == 3 + (12 - 4)                       # LSO - committed minus the one marker read
    assert read(EOS_LOG, 0, 12, EOS_ABORTED).readable == 7 < rng.readable
    groups = readable_by_group({"slow": {TP: 0}}, {TP: 12}, {(TP, 0): rng})
    assert groups.lag == {"slow": {TP: 11}} and groups.estimated == {"slow": {TP}}


def test_a_batch_larger_than_the_whole_budget_reads_nothing():
    rng = read(EOS_LOG, 0, 12, EOS_ABORTED, budget=20)
    assert rng.cut and rng.next_offset == 0 and rng.readable == 12


def test_a_compacted_batch_is_walked_and_a_v1_batch_is_counted():
    compacted = data(0, 0, offsets=[0, 2, 5])                 # offsets 0, 2, 5 left, 6 offsets spanned
    assert read([compacted], 1, 6).readable == 2
    legacy = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for offset in range(4):
        legacy.append(offset, timestamp=0, key=None, value=b"old")
    rng = read([bytes(legacy.build())], 1, 4)
    assert (rng.readable, rng.complete) == (3, True)


def test_ranges_are_only_read_where_lso_is_ahead_and_once_per_partition_and_offset():
    committed = {"a": {TP: 11, ("orders", 1): 5}, "b": {TP: 11}, "c": {TP: 12}, "d": {("gone", 0): 3}}
    ranges = pending_ranges(committed, {TP: 12, ("orders", 1): 5}, 100)
    assert sorted(ranges) == [(TP, 11)]
    groups = readable_by_group(committed, {TP: 12, ("orders", 1): 5}, {})
    assert groups.lag["c"] == {TP: 0} and groups.lag["a"] == {("orders", 1): 0}
    assert groups.unknown == {"a": {TP}, "b": {TP}, "c": set(), "d": {("gone", 0)}}


# ---- the access layer's Fetch rounds, against a fake log --------------------------------------------------
class FakeLogAccess(KafkaAccess):
    """Answers Fetch like a leader: from the log segment holding the fetch offset, whole batches up to
    partition_max_bytes, and EOS_LOG's aborted transaction. logs: partition -> segments (lists of batches);
    leaders: partition -> broker."""

    def __init__(self, logs: dict, leaders: dict, down: set[int] = frozenset()):
        super().__init__(ConnectionSettings(bootstrap="127.0.0.1:1"))
        self.logs, self.leaders, self.down = logs, leaders, down
        self.aborted = [ABORTED(producer_id=pid, first_offset=first) for pid, first in EOS_ABORTED]
        self.sent: list[tuple[int, object]] = []
        self.metadata_cache.metadata, self.lanes.run, self.lanes.send = self.metadata, self._run, self._send

    def metadata(self, *args, **kwargs) -> ClusterMetadata:
        return ClusterMetadata({1: "a:1", 2: "b:1"}, self.leaders, 1, time.monotonic())

    def _run(self, coro_fn, *args, **kwargs):
        return drive(coro_fn(None, *args))

    def _send(self, manager, request, node_id=None, timeout_ms=None):
        self.sent.append((node_id, request))
        if node_id in self.down:
            return done(error=Errors.KafkaConnectionError("down"))
        return done(FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=[
                self._answer((t.topic, p.partition), p.fetch_offset, p.partition_max_bytes) for p in t.partitions])
            for t in request.topics]))

    def _answer(self, tp, offset: int, max_bytes: int):
        segment = next(s for s in self.logs[tp] if _last_offset(s[-1]) >= offset)
        out = b""
        for batch in segment:
            if _last_offset(batch) >= offset and len(out) + len(batch) <= max_bytes:
                out += batch
        return PARTITION(partition_index=tp[1], error_code=0, high_watermark=-1, last_stable_offset=-1,
                         aborted_transactions=self.aborted, records=out)


def _last_offset(batch: bytes) -> int:
    base, = struct.unpack_from(">q", batch, 0)
    delta, = struct.unpack_from(">i", batch, 23)
    return base + delta


def test_a_range_over_two_log_segments_is_read_on_and_exact():
    access = FakeLogAccess({TP: [EOS_LOG[:3], EOS_LOG[3:]]}, {TP: 1})
    result = access.readable_lag({"g": {TP: 0}}, {TP: 12}, 1 << 20)
    assert result.groups.lag == {"g": {TP: 7}} and result.groups.estimated == {"g": set()}
    assert [request.topics[0].partitions[0].fetch_offset for _, request in access.sent] == [0, 6]
    assert result.fetch_requests == 2 and result.fetched_bytes == sum(map(len, EOS_LOG)) and not result.errors


def test_two_offsets_of_one_partition_go_in_two_requests_each_naming_it_once():
    access = FakeLogAccess({TP: [EOS_LOG], ("orders", 1): [EOS_LOG]}, {TP: 1, ("orders", 1): 1})
    committed = {"a": {TP: 0, ("orders", 1): 11}, "b": {TP: 11}, "c": {TP: 11}}
    result = access.readable_lag(committed, {TP: 12, ("orders", 1): 12}, 1 << 20)
    assert result.groups.lag == {"a": {TP: 7, ("orders", 1): 0}, "b": {TP: 0}, "c": {TP: 0}}
    named = [sorted((t.topic, p.partition) for t in request.topics for p in t.partitions) for _, request in access.sent]
    assert named == [[TP, ("orders", 1)], [TP]]
    assert all(request.isolation_level == 1 for _, request in access.sent)


def test_requests_to_a_leader_ask_for_at_most_the_consumer_default_fetch_max_bytes():
    budget = FETCH_MAX_BYTES // 2
    ranges = [ReadableRange(("t", p), 0, 1, budget) for p in range(5)]
    assert [len(request) for request in ReadableLagFetches._fetch_batches(ranges)] == [2, 2, 1]


def test_a_failed_broker_leaves_its_partitions_without_a_value_and_no_topic_total():
    access = FakeLogAccess({TP: [EOS_LOG], ("orders", 1): [EOS_LOG]}, {TP: 1, ("orders", 1): 2}, down={2})
    result = access.readable_lag({"g": {TP: 0, ("orders", 1): 0}}, {TP: 12, ("orders", 1): 12}, 1 << 20)
    assert result.groups.lag == {"g": {TP: 7}} and result.groups.unknown == {"g": {("orders", 1)}}
    assert [(e.broker, e.partition, e.whole_request) for e in result.errors] == [(2, 1, True)]
