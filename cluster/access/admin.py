"""Cluster introspection through Kafka's admin protocol: brokers, leaders, coordinators, the controller.

Owns: the questions the chaos faults and tests ask of any cluster (local or remote): which brokers are
registered, the leader and ISR of a partition, the transaction coordinator of a transactional.id
(FindCoordinator), the active KRaft controller (DescribeQuorum). Read-only, but for the
preferred-leader election the local cluster's heal asks for.
Must not: start, stop or signal processes.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping

import kafka.errors as Errors

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeQuorumRequest
from kafka.protocol.metadata import CoordinatorType

from cluster.access.connection import ConnectionSettings
from cluster.access.diagnose import ClusterUnreachable, describe_failure
from cluster.access.waiting import wait_until

PREFERRED_ELECTION = 0  # ElectLeaders election type (1 would be unclean: never used here)


TXN_STATE_TOPIC = "__transaction_state"
IN_PROGRESS_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
ACL_PROBE_PREFIX = "txnlab-acl-probe-"
# Why a ListTransactions sweep may have missed the ids of a __transaction_state partition.
COORDINATOR_LEADERLESS = "coordinator_leaderless"        # the partition has no leader
COORDINATOR_UNANSWERED = "coordinator_unanswered"        # its leader did not answer the sweep
COORDINATOR_MOVED = "coordinator_moved"                  # its leader or leader epoch changed during the sweep


def coordinator_gaps(before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]],
                     answered: set[int]) -> dict[int, str]:
    """__transaction_state partition -> why a ListTransactions sweep may have missed its transactional ids,
    from the partitions' (leader, leader epoch) just before and just after the sweep and the brokers that
    answered it; empty when the sweep saw every coordinator (ListTransactions answers only for the
    partitions a broker leads, and a partition moving during the sweep may be listed on neither side). Pure."""
    gaps = {}
    for partition in sorted(set(before) | set(after)):
        first, last = before.get(partition, (-1, -1)), after.get(partition, (-1, -1))
        if first[0] < 0 or last[0] < 0:
            gaps[partition] = COORDINATOR_LEADERLESS
        elif first != last:
            gaps[partition] = COORDINATOR_MOVED
        elif first[0] not in answered:
            gaps[partition] = COORDINATOR_UNANSWERED
    return gaps


def acl_probe_id() -> str:
    """A transactional id nobody uses: DescribeTransactions of it answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    exactly when the principal may not describe any id (brokers check that ACL first), i.e. when
    ListTransactions would silently leave ids out."""
    return f"{ACL_PROBE_PREFIX}{uuid.uuid4().hex}"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode() as a signed 32-bit int (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def transaction_state_partition(transactional_id: str, num_partitions: int = 50) -> int:
    """The __transaction_state partition that owns transactional_id (abs(hashCode) % partitions).

    Kafka uses Utils.abs, which maps Integer.MIN_VALUE to 0 rather than overflowing."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterAdmin:
    """A read-only admin view of one cluster. Close it (or use `with`) when done. ClusterUnreachable, saying
    why (cluster.access.diagnose), when no broker answers within bootstrap_timeout_ms."""

    def __init__(self, conn: ConnectionSettings, request_timeout_ms: int = 10000, bootstrap_timeout_ms: int = 30000):
        self.conn = conn
        try:
            self.client = KafkaAdminClient(**conn.kafka_python(request_timeout_ms=request_timeout_ms,
                                                               bootstrap_timeout_ms=bootstrap_timeout_ms))
        except Errors.KafkaError as exc:
            raise ClusterUnreachable(describe_failure(
                conn, f"no broker of {conn.describe()} answered: {type(exc).__name__}")) from exc

    def __enter__(self) -> "ClusterAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    def registered_brokers(self) -> list[int]:
        """The registered, unfenced brokers (DescribeCluster). kafka-python 3.0.12's describe_cluster fails on a
        broker that answers DescribeCluster below v1 (Kafka before 3.7: KeyError 'endpoint_type', docs/findings.md);
        there the brokers of a Metadata answer, which in KRaft lists the unfenced ones."""
        try:
            return sorted(b["broker_id"] for b in self.client.describe_cluster()["brokers"] if not b.get("is_fenced"))
        except KeyError as exc:
            if exc.args != ("endpoint_type",):
                raise
        metadata = self.client._manager.run(self.client._get_cluster_metadata, [])
        return sorted(b["node_id"] for b in metadata["brokers"])

    def partitions(self, topic: str, unknown_grace_s: float = 5.0) -> list[PartitionState]:
        """A topic unknown to the broker asked is asked again for a few seconds: brokers apply a new topic's
        metadata at their own pace, so one that has not yet answers UNKNOWN_TOPIC_OR_PARTITION."""
        described = wait_until(lambda: self._described(topic), unknown_grace_s, f"topic {topic} described", 0.25,
                               ignore=(Errors.UnknownTopicOrPartitionError,), reraise=True)
        return sorted((PartitionState(topic, p["partition_index"], _leader(p["leader_id"]),
                                      tuple(p["replica_nodes"]), tuple(p["isr_nodes"]))
                       for p in described["partitions"]), key=lambda s: s.partition)

    def _described(self, topic: str) -> dict:
        described = self.client.describe_topics([topic])[0]
        if described.get("error_code"):
            raise Errors.for_code(described["error_code"])(f"describe {topic}")
        return described

    def group_offsets(self, groups: list[str], topics: set[str] | None = None) -> dict[str, dict[str, dict[str, int]]]:
        """{group: {topic: {partition (str): committed offset}}} of the groups (OffsetFetch), on `topics` only
        when given; partitions with no committed offset left out."""
        committed = self.client.list_group_offsets(groups) if groups else {}
        out: dict = {}
        for group, offsets in committed.items():
            for tp, meta in offsets.items():
                if meta.offset >= 0 and (topics is None or tp.topic in topics):
                    out.setdefault(group, {}).setdefault(tp.topic, {})[str(tp.partition)] = meta.offset
        return out

    def group_type(self, group: str) -> str | None:
        """The group's protocol as ListGroups tells it (classic, consumer, streams; Kafka 4.0 on), None when it is
        not listed or the broker does not tell."""
        return next((g.get("group_type") or None for g in self.client.list_groups() if g["group_id"] == group), None)

    def leader_of(self, topic: str, partition: int) -> int | None:
        return next((p.leader for p in self.partitions(topic) if p.partition == partition), None)

    def coordinator_of(self, transactional_id: str, timeout: float = 30.0) -> int:
        """The broker id of transactional_id's transaction coordinator (FindCoordinator, key type 1).

        Retries while the coordinator is not available yet (__transaction_state being created or
        loaded). kafka-python 3.0.12 exposes FindCoordinator only as a private coroutine; this is the
        one place that calls that coroutine (chaos/nemesis/_raw_produce.py and exporter/access/lanes.py also use
        the client's private `_manager`, to send requests kafka-python has no public call for)."""
        client = self.client
        found = wait_until(lambda: (client._manager.run(client._find_coordinator_id, transactional_id,
                                                        CoordinatorType.TRANSACTION),),
                           timeout, f"the coordinator of {transactional_id}", 0.3, reraise=True,
                           ignore=(Errors.CoordinatorNotAvailableError, Errors.CoordinatorLoadInProgressError,
                                   Errors.NotCoordinatorError))
        return found[0]

    def transactional_id_known(self, transactional_id: str) -> bool:
        """Whether transactional_id's coordinator still has it (DescribeTransactions; False on
        TRANSACTIONAL_ID_NOT_FOUND: never used, or expired after transactional.id.expiration.ms). Any other
        error raises: an unanswered question is not "gone"."""
        try:
            self.client.describe_transactions([transactional_id])
        except Errors.TransactionalIdNotFoundError:
            return False
        return True

    def group_coordinator_of(self, group: str, timeout: float = 30.0) -> int:
        """The broker id of consumer group `group`'s coordinator (FindCoordinator, key type 0), as coordinator_of."""
        client = self.client
        return wait_until(lambda: (client._manager.run(client._find_coordinator_id, group, CoordinatorType.GROUP),),
                          timeout, f"the coordinator of group {group}", 0.3, reraise=True,
                          ignore=(Errors.CoordinatorNotAvailableError, Errors.CoordinatorLoadInProgressError,
                                  Errors.NotCoordinatorError))[0]

    def elect_preferred_leaders(self) -> None:
        """Move leadership back to each partition's preferred replica (an admin action, not a read).

        Partitions already led by their preferred replica answer ELECTION_NOT_NEEDED: not an error."""
        self.client.elect_leaders(PREFERRED_ELECTION, raise_errors=False)

    def active_controller(self) -> int:
        """The leader of the KRaft metadata quorum (DescribeQuorum). kafka-python 3.0.12's describe_metadata_quorum
        fails on an answer below v2 (Kafka before 3.8: KeyError 'error_message', docs/findings.md): there the same
        request is sent and its answer read here."""
        try:
            quorum = self.client.describe_metadata_quorum()
        except KeyError as exc:
            if exc.args != ("error_message",):
                raise
            quorum = self.client._manager.run(self._describe_quorum)
        return int(quorum["topics"][0]["partitions"][0]["leader_id"])

    async def _describe_quorum(self) -> dict:
        topic = DescribeQuorumRequest.TopicData
        request = DescribeQuorumRequest(topics=[topic(topic_name="__cluster_metadata",
                                                      partitions=[topic.PartitionData(partition_index=0)])])
        response = await self.client._manager.send(request)
        errors = [Errors.for_code(response.error_code)] + [Errors.for_code(p.error_code) for t in response.topics
                                                           for p in t.partitions]
        if failed := [e for e in errors if e is not Errors.NoError]:
            raise failed[0]("DescribeQuorum")
        return response.to_dict()


def _leader(leader_id: int) -> int | None:
    return None if leader_id is None or leader_id < 0 else leader_id


def registered_brokers(conn: ConnectionSettings) -> list[int]:
    """The registered, unfenced brokers as the cluster sees them; [] while it cannot answer."""
    try:
        with ClusterAdmin(conn, request_timeout_ms=3000) as admin:
            return admin.registered_brokers()
    except Exception:  # noqa: BLE001 - not reachable (yet) is an answer here
        return []


def broker_view(conn: ConnectionSettings, address: str) -> set[int] | None:
    """The unfenced brokers the broker at address lists in its own Metadata answer (a fresh client asks its
    only bootstrap broker first); None when it does not answer. Kafka 4.x processes requests only once the
    broker is unfenced, so an answer is later than the controller listing it as registered (which a
    SIGKILLed broker stays for ~6 s)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    client = AdminClient(conn.confluent(**{"bootstrap.servers": address, "log_level": 0}))
    try:
        return set(client.list_topics(timeout=3).brokers)
    except KafkaException:
        return None


def broker_answers(conn: ConnectionSettings, address: str) -> bool:
    """True when the broker at address serves a metadata request itself."""
    return broker_view(conn, address) is not None


def registered_in_every_view(conn: ConnectionSettings, node: int, addresses: dict[int, str]) -> bool:
    """True when `node` answers at its address and every broker of `addresses` ({id: host:port}) that answers
    lists it unfenced, each asked on its own: brokers apply the controller's records at their own pace, so
    one broker counting a restarted node registered says nothing of the next a client asks (CI saw a healed
    coordinator confirmed by one broker and missing from another's answer a moment later)."""
    own = broker_view(conn, addresses[node])
    if own is None or node not in own:
        return False
    return all(view is None or node in view
               for view in (broker_view(conn, address) for other, address in addresses.items() if other != node))
