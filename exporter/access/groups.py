"""The committed offsets of consumer groups, through kafka-python's admin helpers on the background lane.

Owns: listing the groups (with the state and the type, classic, consumer (KIP-848) or streams (KIP-1071), ListGroups
tells), their committed offsets in one batched OffsetFetch
(one group at a time after a batch failed, so one bad group costs only itself), allowed topics only, and the
partitions whose transactional offsets are pending: a second OffsetFetch per coordinator with require_stable
(KIP-447), whose UNSTABLE_OFFSET_COMMIT marks a TxnOffsetCommit whose transaction has not ended. That answer
covers the partitions a group has committed before (Kafka lists a group's offsets from its committed ones).
The groups on the consumer protocol (KIP-848) are described too (ConsumerGroupDescribe v0 per coordinator: the
group and assignment epochs, each member's epoch). Each failure kept as an ItemError.
Must not: read what the groups could still read (fetches.py does) or hold results between calls.
"""
from __future__ import annotations

from typing import Callable, Iterator

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.group import OffsetFetchRequest

from exporter.access import schemas
from exporter.access.lanes import AdminLanes
from exporter.access.results import GroupMembers, GroupOffsetsResult, ItemError, error_name


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]  # a metaclass keyword
    """KIP-848's describe (API key 69), which kafka-python 3.0 does not carry: exporter/access/schemas."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    """Its answer (registered with kafka-python's parser by its definition)."""


class GroupOffsetRequests:
    """Committed offsets of every consumer group the filters allow."""

    def __init__(self, lanes: AdminLanes, topic_filter: Callable[[str], bool]):
        self.lanes = lanes
        self.topic_filter = topic_filter

    def group_offsets(self, group_filter: Callable[[str], bool] = lambda g: True) -> GroupOffsetsResult:
        """Committed offsets of every consumer group (allowed topics only)."""
        result = GroupOffsetsResult()
        admin = self.lanes.lease()
        try:
            self._fetch_group_offsets(admin, group_filter, result)
        finally:
            self.lanes.release(admin)
        return result

    def _fetch_group_offsets(self, admin: KafkaAdminClient, group_filter: Callable[[str], bool],
                             result: GroupOffsetsResult) -> None:
        try:
            listed = [g for g in admin.list_groups() if group_filter(g["group_id"])]
        except Errors.KafkaError as exc:
            result.errors.append(ItemError(error_name(exc), whole_request=True))
            return
        groups = sorted(g["group_id"] for g in listed)
        result.states = {g["group_id"]: g.get("group_state") or None for g in listed}
        result.types = {g["group_id"]: g.get("group_type") or None for g in listed}
        try:
            fetched = admin.list_group_offsets(groups) if groups else {}
        except Errors.KafkaError:
            fetched = self._group_offsets_one_by_one(admin, groups, result)
        for group, offsets in fetched.items():
            result.committed[group] = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()
                                       if meta.offset >= 0 and self.topic_filter(tp.topic)}
        if groups:
            self._fetch_pending(admin, groups, result)
        consumer = sorted(g for g in groups if result.types.get(g) == "consumer")
        if consumer:
            self._describe_consumer_groups(admin, consumer, result)

    def _describe_consumer_groups(self, admin: KafkaAdminClient, groups: list[str], result: GroupOffsetsResult) -> None:
        """result.members[group] for each consumer-protocol group its coordinator described; the others left out
        (unknown), their errors kept."""
        for group in self._answers(admin, groups, result, "describe", lambda ids: ConsumerGroupDescribeRequest(
                group_ids=ids, include_authorized_operations=False, min_version=0, max_version=0)):
            result.members[group.group_id] = GroupMembers(
                group.group_epoch, group.assignment_epoch, tuple(m.member_epoch for m in group.members))

    def _fetch_pending(self, admin: KafkaAdminClient, groups: list[str], result: GroupOffsetsResult) -> None:
        """result.pending[group]: the partitions whose offsets a transaction carries and has not ended; a group
        whose answer is missing (its coordinator failed) is left out of result.pending: unknown, not none."""
        for group in self._answers(admin, groups, result, "require_stable", lambda ids: OffsetFetchRequest(
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ids],
                require_stable=True, min_version=8, max_version=8)):   # v10 names topics by id only
            result.pending[group.group_id] = pending_partitions(group.topics, self.topic_filter)

    def _answers(self, admin: KafkaAdminClient, groups: list[str], result: GroupOffsetsResult, item: str,
                 request_for: Callable[[list[str]], object]) -> Iterator:
        """Each group's answer to request_for(its coordinator's groups), sent to every coordinator together; a
        failed coordinator (ItemError with `item` and the broker) or group (ItemError with the group) kept as
        errors, never answered."""
        try:
            responses = self.lanes.run(self._per_coordinator, admin, groups, request_for)
        except Errors.KafkaError as exc:
            result.errors.append(ItemError(error_name(exc), item=item))
            return
        for coordinator, response, failure in responses:
            if failure is not None:
                result.errors.append(ItemError(error_name(failure), broker=coordinator, item=item))
                continue
            for group in response.groups:
                if group.error_code:
                    result.errors.append(ItemError(error_name(Errors.for_code(group.error_code)()),
                                                   item=group.group_id))
                    continue
                yield group

    async def _per_coordinator(self, manager, admin: KafkaAdminClient, groups: list[str],
                               request_for: Callable[[list[str]], object]) -> list:
        """One request per group coordinator, for the groups it coordinates, all in flight together:
        (coordinator, response | None, error | None) each."""
        by_coordinator: dict[int, list[str]] = {}
        for group, coordinator in (await admin._find_coordinator_ids(groups)).items():
            by_coordinator.setdefault(coordinator, []).append(group)
        sends = [(c, self.lanes.send(manager, request_for(ids), c)) for c, ids in sorted(by_coordinator.items())]
        return await self.lanes.gather(manager, sends)

    @staticmethod
    def _group_offsets_one_by_one(admin: KafkaAdminClient, groups: list[str], result: GroupOffsetsResult) -> dict:
        """After a batched OffsetFetch failed: one group at a time, so one bad group costs only itself."""
        fetched = {}
        for group in groups:
            try:
                fetched.update(admin.list_group_offsets([group]))
            except Errors.KafkaError as exc:
                result.errors.append(ItemError(error_name(exc), item=group))
        return fetched


def pending_partitions(topics, topic_filter: Callable[[str], bool]) -> frozenset[tuple[str, int]]:
    """The partitions of one group's require_stable OffsetFetch answer marked UNSTABLE_OFFSET_COMMIT."""
    unstable = Errors.UnstableOffsetCommitError.errno
    return frozenset((t.name, p.partition_index) for t in topics if topic_filter(t.name)
                     for p in t.partitions if p.error_code == unstable)
