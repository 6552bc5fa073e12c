"""Raw batches and requests read back through kafka-python's own decoders; the injector's and the
flood's decisions as pure functions."""
from __future__ import annotations

import kafka.errors as Errors
import pytest
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition

from chaos.nemesis import _raw_produce as raw
from chaos.nemesis.inject_hanging import (NO_SUCH_SETTING, broker_configs, transaction_timeout_ms, verification_blocks_injection,
                           verification_enabled_message)
from chaos.nemesis.producer_flood import assign_round_robin, ids_per_partition, produce_requests

Partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def _read_batch(data: bytes) -> DefaultRecordBatch:
    records = MemoryRecords(data)
    batch = records.next_batch()
    assert batch is not None and records.next_batch() is None   # exactly one batch
    return batch


def test_transactional_batch_round_trips_with_producer_state():
    batch = _read_batch(raw.build_batch(4711, 3, 0, [b"v0", b"v1"], transactional=True, timestamp_ms=1000))
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4711, 3, 0)
    assert batch.validate_crc()
    assert [(r.offset, r.value, r.timestamp) for r in batch] == [(0, b"v0", 1000), (1, b"v1", 1000)]


def test_idempotent_batch_is_not_transactional_and_keeps_its_sequence():
    batch = _read_batch(raw.build_batch(12, 0, 5, [b"x"], transactional=False))
    assert not batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_offset_delta) == (12, 0, 5, 0)


def test_produce_request_stays_below_version_12_and_keeps_transactional_id():
    tp = TopicPartition("t", 2)
    request = raw.produce_request({tp: raw.build_batch(1, 0, 0, [b"v"], True)}, transactional_id="txn-a")
    assert BrokerVersionData(api_versions={ProduceRequest.API_KEY: (0, 13)}).api_version(request) == 11
    decoded = ProduceRequest.decode(request.encode(version=11), version=11)
    assert (decoded.transactional_id, decoded.acks) == ("txn-a", -1)
    part = decoded.topic_data[0].partition_data[0]
    assert (decoded.topic_data[0].name, part.index) == ("t", 2)
    assert _read_batch(part.records).producer_id == 1


def test_produce_request_refuses_a_broker_without_versions_3_to_11():
    request = raw.produce_request({TopicPartition("t", 0): raw.build_batch(1, 0, 0, [b"v"], False)})
    with pytest.raises(Errors.IncompatibleBrokerVersion):
        BrokerVersionData(api_versions={ProduceRequest.API_KEY: (12, 13)}).api_version(request)


def test_init_producer_id_never_picks_the_unstable_version_6():
    request = raw.init_producer_id_request(None, 0)
    assert BrokerVersionData(api_versions={InitProducerIdRequest.API_KEY: (0, 6)}).api_version(request) == 5
    assert request.transactional_id is None and request.producer_id == -1


def _produce_response(error_code: int, base_offset: int, message: str | None = None) -> ProduceResponse:
    part = Partition(index=0, error_code=error_code, base_offset=base_offset, error_message=message)
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[part])])


def test_produce_offsets_returns_base_offsets_and_raises_broker_errors():
    assert raw.produce_offsets(_produce_response(0, 42)) == {TopicPartition("t", 0): 42}
    with pytest.raises(Errors.InvalidTxnStateError, match="produce to t-0: not verified"):
        raw.produce_offsets(_produce_response(48, -1, "not verified"))


def test_producer_id_of_reads_id_and_epoch_or_raises():
    assert raw.producer_id_of(InitProducerIdResponse(error_code=0, producer_id=9, producer_epoch=2)) == \
        raw.ProducerIdAndEpoch(9, 2)
    with pytest.raises(Errors.CoordinatorLoadInProgressError):
        raw.producer_id_of(InitProducerIdResponse(error_code=14, producer_id=-1, producer_epoch=-1))


@pytest.mark.parametrize("value,blocks", [
    ("false", False), ("FALSE", False), (" false ", False),
    ("true", True), (None, True), ("", True), ("maybe", True), (NO_SUCH_SETTING, False),
])
def test_only_an_explicit_false_or_no_such_setting_lets_the_injection_through(value, blocks):
    assert verification_blocks_injection(value) is blocks


def test_refusal_message_names_kip_890_and_the_drill_cluster():
    message = verification_enabled_message(3, None)
    assert "KIP-890" in message and "unknown" in message and "txnlab cluster up --hanging-drill" in message


class _DescribedConfigs:
    """Stands in for KafkaAdminClient.describe_configs: answers what kafka-python would return."""

    def __init__(self, answer: dict):
        self.answer = answer
        self.asked: list = []

    def describe_configs(self, resources, config_filter):
        self.asked.append(([(r.resource_type.name, r.name, r.configs) for r in resources], config_filter))
        return self.answer


def test_broker_configs_asks_the_broker_and_names_what_it_has_no_setting_for():
    client = _DescribedConfigs({"broker": {"2": {"a": {"value": "false", "config_type": "BOOLEAN"},
                                                 "c": {"value": None, "config_type": "UNKNOWN"}}}})
    assert broker_configs(client, 2, ("a", "b", "c")) == {"a": "false", "b": NO_SUCH_SETTING, "c": NO_SUCH_SETTING}
    assert client.asked == [([("BROKER", "2", ["a", "b", "c"])], "all")]
    assert broker_configs(_DescribedConfigs({}), 2, ("a",)) == {}      # a refused resource: all unknown
    # Kafka 3.5 with a server.properties line it does not know: only UNKNOWN entries say nothing of the others
    unknown_only = _DescribedConfigs({"broker": {"2": {"c": {"value": None, "config_type": "UNKNOWN"}}}})
    assert broker_configs(unknown_only, 2, ("a", "c")) == {}


@pytest.mark.parametrize("broker_max,expected", [("15000", 15000), ("900000", 60000), (None, 60000), ("x", 60000)])
def test_transaction_timeout_is_capped_by_the_broker_max(broker_max, expected):
    assert transaction_timeout_ms(broker_max) == expected


def test_round_robin_assignment_and_counts_agree():
    producers = [raw.ProducerIdAndEpoch(i, 0) for i in range(7)]
    assigned = assign_round_robin([4, 5, 6], producers, offset=1)
    assert [p for p, _ in assigned] == [5, 6, 4, 5, 6, 4, 5]
    assert ids_per_partition([4, 5, 6], 7) == {4: 3, 5: 2, 6: 2}
    assert ids_per_partition([4, 5, 6], 0) == {4: 0, 5: 0, 6: 0}


def test_flood_requests_carry_one_batch_per_partition_each_routed_to_its_leader():
    producers = [raw.ProducerIdAndEpoch(100 + i, 0) for i in range(5)]
    leaders = {0: 1, 1: 2, 2: 1}
    requests = list(produce_requests("t", assign_round_robin([0, 1, 2], producers), leaders))
    seen = []
    for request, leader in requests:
        parts = request.topic_data[0].partition_data
        assert len({p.index for p in parts}) == len(parts)               # one batch per partition
        assert {leaders[p.index] for p in parts} == {leader}
        seen += [(p.index, _read_batch(p.records).producer_id) for p in parts]
    assert sorted(seen) == [(0, 100), (0, 103), (1, 101), (1, 104), (2, 102)]
    assert all(request.transactional_id is None and request.acks == 1 for request, _ in requests)
