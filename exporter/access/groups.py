"""The committed offsets of consumer groups, through kafka-python's admin helpers on the background lane.

Owns: listing the groups, their committed offsets in one batched OffsetFetch (one group at a time after a
batch failed, so one bad group costs only itself), allowed topics only, each failure kept as an ItemError.
Must not: read what the groups could still read (fetches.py does) or hold results between calls.
"""
from __future__ import annotations

from typing import Callable

import kafka.errors as Errors
from kafka.admin import KafkaAdminClient

from exporter.access.lanes import AdminLanes
from exporter.access.results import GroupOffsetsResult, ItemError, error_name


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
            groups = sorted(g["group_id"] for g in admin.list_groups() if group_filter(g["group_id"]))
        except Errors.KafkaError as exc:
            result.errors.append(ItemError(error_name(exc), whole_request=True))
            return
        try:
            fetched = admin.list_group_offsets(groups) if groups else {}
        except Errors.KafkaError:
            fetched = self._group_offsets_one_by_one(admin, groups, result)
        for group, offsets in fetched.items():
            result.committed[group] = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()
                                       if meta.offset >= 0 and self.topic_filter(tp.topic)}

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
