"""Cluster metadata for the exporter's requests: brokers, partition leaders, the __transaction_state leaders,
and the cache every other family reads them from.

Owns: the Metadata request (asked of every known broker in turn while a deadline lasts), its parsing (allowed
topics only), the cache (metadata_max_age_s; refreshed early, at most every metadata_min_refresh_s, after an
error hinted that leadership moved; kept when a refresh fails) and the coordinator map read on its own.
Must not: send any other request, or decide when a collection runs (exporter/service.py does).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import kafka.errors as Errors
from kafka.protocol.metadata.metadata import MetadataRequest

from cluster.access.admin import TXN_STATE_TOPIC
from cluster.access.waiting import wait_until
from exporter.access.lanes import BACKGROUND, AdminLanes
from exporter.access.results import (ClusterMetadata, CoordinatorMap, ItemError, KafkaUnavailable, Partition,
                                     error_name, item_error)

METADATA_RETRY_S = 0.25               # a first Metadata request that reached no broker is asked again after this
CONNECTION_ERRORS = (Errors.KafkaConnectionError, Errors.NodeNotReadyError, Errors.RequestTimedOutError)


def _coordinator_map(response: Any) -> CoordinatorMap:
    for topic in response.topics:
        if topic.name != TXN_STATE_TOPIC:
            continue
        err = item_error(topic.error_code)
        if err == error_name(Errors.UnknownTopicOrPartitionError):
            return CoordinatorMap(exists=False)
        if err:
            return CoordinatorMap(error=err)
        return CoordinatorMap({p.partition_index: (p.leader_id, p.leader_epoch) for p in topic.partitions})
    return CoordinatorMap(error="absent from the Metadata response")      # e.g. not authorized to see it


def metadata_candidates(manager: Any) -> list:
    """Who to ask for Metadata, in order: the client's least loaded broker, every other broker it knows,
    each bootstrap server (ids as the client names them), once each."""
    cluster = manager.cluster
    ids = [manager.least_loaded_node(), *(b.node_id for b in cluster.brokers()),
           *(b.node_id for b in cluster.bootstrap_brokers())]
    return list(dict.fromkeys(i for i in ids if i is not None))


class MetadataCache:
    """The cluster's metadata as last read, and the Metadata requests that read it."""

    def __init__(self, lanes: AdminLanes, topic_filter: Callable[[str], bool], metadata_max_age_s: float,
                 metadata_min_refresh_s: float):
        self.lanes = lanes
        self.topic_filter = topic_filter
        self.metadata_max_age_s = metadata_max_age_s
        self._metadata: ClusterMetadata | None = None
        self._metadata_stale = False             # an error hinted that leadership moved: refresh, rate-limited
        self.metadata_min_refresh_s = metadata_min_refresh_s

    def metadata(self, refresh: bool = False, lane: str = BACKGROUND, deadline: float | None = None) -> ClusterMetadata:
        """Brokers and partition leaders of allowed topics; cached for metadata_max_age_s. After an error
        hinted that leadership moved it is refreshed, but at most once per metadata_min_refresh_s (one
        offline partition must not cost a full Metadata request on every scrape). When a refresh fails
        the cached metadata is kept (KafkaUnavailable only when there is none)."""
        cached = self._metadata
        if cached and not refresh and not self._metadata_due(cached):
            return cached
        deadline = deadline if deadline is not None else time.monotonic() + self.lanes.timeout_ms / 1000
        # a first request that reached no broker (every one down or backing off) is asked again until the deadline
        retried = CONNECTION_ERRORS if cached is None else ()
        try:
            response = wait_until(lambda: self.lanes.run(self._fetch_metadata, None, deadline, lane=lane),
                                  max(0.0, deadline - time.monotonic()), "a Metadata answer", METADATA_RETRY_S,
                                  ignore=retried, reraise=True)
        except Errors.KafkaError as exc:
            if cached is not None:
                return cached
            self.lanes.close(lane)           # start over from the bootstrap servers next time
            raise KafkaUnavailable(self.lanes.why_unavailable(f"metadata request failed: {error_name(exc)}")) from exc
        self._metadata, self._metadata_stale = self._parse_metadata(response), False
        return self._metadata

    def _metadata_due(self, cached: ClusterMetadata) -> bool:
        age = time.monotonic() - cached.fetched_at
        return age >= self.metadata_max_age_s or (self._metadata_stale and age >= self.metadata_min_refresh_s)

    async def _fetch_metadata(self, m, topics: list[str] | None = None, deadline: float | None = None):
        """A Metadata response from the first broker that answers: the client's pick, then every other broker
        it knows, then each bootstrap server, while the deadline lasts. A broker that is down (refused,
        reset, backing off after a failure) is passed over, so one dead broker never makes a live cluster
        look unreachable; any other error (authorization, authentication) is raised at once."""
        request = MetadataRequest(topics=None if topics is None else [
                                      MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                                  allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        deadline = deadline if deadline is not None else time.monotonic() + self.lanes.timeout_ms / 1000
        error: BaseException = Errors.NodeNotReadyError("no broker known")
        for node in metadata_candidates(m):
            [(_, response, exc)] = await self.lanes.gather(m, [(None, self.lanes.send(m, request, node))], deadline)
            if exc is None:
                return response
            error = exc
            if not isinstance(exc, CONNECTION_ERRORS) or time.monotonic() >= deadline:
                break
        raise error if isinstance(error, Errors.KafkaError) else Errors.KafkaError(error_name(error))

    def _parse_metadata(self, response: Any) -> ClusterMetadata:
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        leaders: dict[Partition, int] = {}
        for topic in response.topics:
            if topic.error_code or not self.topic_filter(topic.name):
                continue
            for p in topic.partitions:
                leaders[(topic.name, p.partition_index)] = p.leader_id
        return ClusterMetadata(brokers=brokers, leaders=leaders, controller=getattr(response, "controller_id", -1),
                               fetched_at=time.monotonic(), coordinators=_coordinator_map(response))

    def coordinator_map(self) -> CoordinatorMap:
        """The __transaction_state leaders now (a Metadata request for that topic alone)."""
        try:
            return _coordinator_map(self.lanes.run(self._fetch_metadata, [TXN_STATE_TOPIC]))
        except Errors.KafkaError as exc:
            return CoordinatorMap(error=error_name(exc))

    def forget_after(self, errors: list[ItemError]) -> None:
        if errors:
            self._metadata_stale = True      # leadership moved or a broker is gone: refresh (rate-limited)
