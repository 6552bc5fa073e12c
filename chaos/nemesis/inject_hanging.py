"""The hanging-transaction injector: a fault that leaves one partition with an open transaction its
coordinator does not know about, so the partition's LSO is stuck until an operator aborts it.

Owns: the safety check (refuse a cluster whose brokers verify transactional partitions, KIP-890) and
the injection itself: a real producer id and epoch from InitProducerId on the transactional id's
coordinator, then one transactional batch produced to the partition leader WITHOUT AddPartitionsToTxn.
Must not: touch any other partition or transactional id, change broker configs or features, or heal
the fault (a hanging transaction is aborted through cluster.access.abort, by the fault's heal in faults.py or
by `txnlab txn abort`). Writes nothing when it refuses.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import kafka.errors as Errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.structs import TopicPartition

from chaos.nemesis import _raw_produce as raw
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.waiting import wait_until
from cluster.access.errors import TxnlabError

VERIFICATION_CONFIG = "transaction.partition.verification.enable"
MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"
# A setting the broker answered about but has none of: its release predates it (Kafka 3.5 has no partition
# verification). It is left out of the answer, or, when a server.properties line names it, reported with
# config type UNKNOWN (and as sensitive, without its value).
NO_SUCH_SETTING = "<no such setting>"
WANTED_TRANSACTION_TIMEOUT_MS = 60000
INIT_PRODUCER_ID_TIMEOUT_S = 30.0


class InjectionError(TxnlabError, RuntimeError):
    """A hanging transaction could not be injected."""


class VerificationEnabledError(InjectionError):
    """The partition leader verifies transactional partitions (KIP-890): nothing can hang there."""


@dataclass(frozen=True)
class InjectedHanging:
    topic: str
    partition: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    start_offset: int


def verification_blocks_injection(value: str | None) -> bool:
    """True unless the broker says verification is off, or has no such setting (a release before KIP-890 part 1,
    Kafka 3.6, verifies nothing): an unknown value counts as on."""
    return value != NO_SUCH_SETTING and (value is None or value.strip().lower() != "false")


def transaction_timeout_ms(broker_max_ms: str | None) -> int:
    """The InitProducerId timeout: WANTED_TRANSACTION_TIMEOUT_MS, capped by transaction.max.timeout.ms."""
    if broker_max_ms is None or not broker_max_ms.strip().isdigit():
        return WANTED_TRANSACTION_TIMEOUT_MS
    return min(WANTED_TRANSACTION_TIMEOUT_MS, int(broker_max_ms))


def verification_enabled_message(broker_id: int, value: str | None) -> str:
    shown = "unknown" if value is None else value
    return (f"broker {broker_id} verifies transactional partitions (KIP-890, {VERIFICATION_CONFIG}={shown}), "
            "so a hanging transaction cannot be injected; start a drill cluster with "
            "`txnlab cluster up --hanging-drill` (verification off, transaction.version=1)")


def inject_hanging(conn: ConnectionSettings, topic: str, partition: int, transactional_id: str | None = None,
                   records: int = 1) -> InjectedHanging:
    """Leave an open transaction of `records` records on topic-partition that no coordinator tracks.

    A given transactional_id that a live producer uses is fenced by the InitProducerId (its epoch is
    bumped): pass a fresh one, or none to get a unique txnlab-hanging-* id."""
    if records < 1:
        raise ValueError("a hanging transaction needs at least one record")
    txn_id = transactional_id or f"txnlab-hanging-{uuid.uuid4().hex[:12]}"
    tp = TopicPartition(topic, partition)
    with ClusterAdmin(conn) as admin:
        leader = _leader(admin, topic, partition)
        configs = broker_configs(admin.client, leader, (VERIFICATION_CONFIG, MAX_TIMEOUT_CONFIG))
        if verification_blocks_injection(configs.get(VERIFICATION_CONFIG)):
            raise VerificationEnabledError(verification_enabled_message(leader, configs.get(VERIFICATION_CONFIG)))
        producer = init_transactional_producer(admin, txn_id, transaction_timeout_ms(configs.get(MAX_TIMEOUT_CONFIG)))
        start_offset = write_unannounced(admin, tp, leader, txn_id, producer, records)
    return InjectedHanging(topic, partition, txn_id, producer.producer_id, producer.epoch, start_offset)


def write_unannounced(admin: ClusterAdmin, tp: TopicPartition, leader: int, transactional_id: str,
                      producer: raw.ProducerIdAndEpoch, records: int) -> int:
    """Produce one transactional batch to the leader without AddPartitionsToTxn; its base offset."""
    values = [f"txnlab-hanging:{transactional_id}:{i}".encode() for i in range(records)]
    batch = raw.build_batch(producer.producer_id, producer.epoch, 0, values, transactional=True)
    response = raw.send(admin.client, raw.produce_request({tp: batch}, transactional_id=transactional_id), leader)
    return raw.produce_offsets(response)[tp]


def _leader(admin: ClusterAdmin, topic: str, partition: int) -> int:
    leader = admin.leader_of(topic, partition)
    if leader is None:
        raise InjectionError(f"{topic}-{partition} has no leader (missing partition, or leader offline)")
    return leader


def broker_configs(client: KafkaAdminClient, broker_id: int, names: tuple[str, ...]) -> dict[str, str | None]:
    """The named configs as broker broker_id reports them (DescribeConfigs). kafka-python drops a resource's
    error (e.g. not authorized): an empty answer leaves every name out (unknown). In an answer that names some of
    them, one the broker left out or typed UNKNOWN is NO_SUCH_SETTING."""
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id), list(names))
    described = client.describe_configs([resource], config_filter="all")
    entries = described.get("broker", {}).get(str(broker_id), {})
    if not any(entry.get("config_type") != "UNKNOWN" for entry in entries.values()):
        return {}
    return {name: NO_SUCH_SETTING if name not in entries or entries[name].get("config_type") == "UNKNOWN"
            else entries[name].get("value") for name in names}


def init_transactional_producer(admin: ClusterAdmin, transactional_id: str, timeout_ms: int) -> raw.ProducerIdAndEpoch:
    """InitProducerId on transactional_id's coordinator, retried while the coordinator is not ready."""
    def attempt() -> raw.ProducerIdAndEpoch:
        coordinator = admin.coordinator_of(transactional_id)
        request = raw.init_producer_id_request(transactional_id, timeout_ms)
        return raw.producer_id_of(raw.send(admin.client, request, coordinator))

    return wait_until(attempt, INIT_PRODUCER_ID_TIMEOUT_S, f"InitProducerId for {transactional_id}",
                      interval=0.3, error=InjectionError, ignore=(Errors.RetriableError,))
