"""Per-item error handling of the access layer, on hand-built kafka-python responses (no broker)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from kafka.future import Future
from kafka.protocol.admin.transactions import DescribeProducersResponse, DescribeTransactionsResponse, \
    ListTransactionsResponse
from kafka.protocol.consumer.offsets import IsolationLevel, ListOffsetsResponse
from kafka.protocol.metadata.metadata import MetadataResponse

import kafka.errors as Errors
from cluster.access.connection import ConnectionSettings
from exporter.kafka_access import GroupOffsetsResult, ItemError, KafkaAccess, KafkaUnavailable, OffsetsResult, ProducersResult, TransactionsResult, chunks

NOT_LEADER = Errors.NotLeaderForPartitionError.errno
UNKNOWN_TP = Errors.UnknownTopicOrPartitionError.errno
TXN_ID_NOT_FOUND = Errors.TransactionalIdNotFoundError.errno
LOADING = Errors.CoordinatorLoadInProgressError.errno


def drive(coro):
    """Run a coroutine whose awaits are all on completed futures."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("coroutine awaited an unfinished future")


def done(value=None, error=None) -> Future:
    future = Future()
    return future.failure(error) if error else future.success(value)


class ScriptedAccess(KafkaAccess):
    """KafkaAccess whose sends are answered from a script: node id -> list of (response | exception)."""

    def __init__(self, script: dict[int, list]):
        super().__init__(ConnectionSettings(bootstrap="127.0.0.1:1"), producers_batch=2)
        self.script = script
        self.sent: list[tuple[int, object]] = []
        self.lanes.send = self._send                 # every family sends through the one AdminLanes

    def _send(self, manager, request, node_id=None, timeout_ms=None):
        self.sent.append((node_id, request))
        answer = self.script[node_id].pop(0)
        return done(error=answer) if isinstance(answer, Exception) else done(answer)


def producers_response(*partitions):
    part = DescribeProducersResponse.TopicResponse.PartitionResponse
    state = part.ProducerState
    return DescribeProducersResponse(throttle_time_ms=0, topics=[DescribeProducersResponse.TopicResponse(
        name="t", partitions=[part(partition_index=i, error_code=code, error_message=None, active_producers=[
            state(producer_id=pid, producer_epoch=0, last_sequence=0, last_timestamp=1, coordinator_epoch=-1,
                  current_txn_start_offset=start) for pid, start in producers]) for i, code, producers in partitions])])


def test_describe_producers_keeps_good_partitions_and_counts_bad_ones():
    access = ScriptedAccess({1: [producers_response((0, 0, [(10, -1), (11, 5)]), (1, NOT_LEADER, []))],
                             2: [Errors.KafkaConnectionError("broker down")]})
    result = ProducersResult()
    drive(access.partition_requests._describe_producers(None, {1: [("t", 0), ("t", 1)], 2: [("t", 2)]}, result))
    assert [p.producer_id for p in result.producers[("t", 0)]] == [10, 11]
    assert result.producers[("t", 0)][1].txn_start_offset == 5
    assert ("t", 1) not in result.producers and ("t", 2) not in result.producers
    errors = {(e.topic, e.partition): e for e in result.errors}
    assert errors[("t", 1)].error == "NOT_LEADER_FOR_PARTITION" and not errors[("t", 1)].whole_request
    assert errors[("t", 2)].whole_request and errors[("t", 2)].broker == 2


def test_describe_producers_batches_per_broker():
    access = ScriptedAccess({1: [producers_response((0, 0, []), (1, 0, [])), producers_response((2, 0, []))]})
    result = ProducersResult()
    drive(access.partition_requests._describe_producers(None, {1: [("t", 0), ("t", 1), ("t", 2)]}, result))
    assert len(access.sent) == 2 and sorted(result.producers) == [("t", 0), ("t", 1), ("t", 2)]
    assert chunks(list(range(5)), 2) == [[0, 1], [2, 3], [4]]


def offsets_response(*partitions):
    topic = ListOffsetsResponse.ListOffsetsTopicResponse
    part = topic.ListOffsetsPartitionResponse
    return ListOffsetsResponse(throttle_time_ms=0, topics=[topic(name="t", partitions=[
        part(partition_index=i, error_code=code, timestamp=-1, offset=offset, leader_epoch=0)
        for i, code, offset in partitions])])


def test_list_offsets_asks_both_isolation_levels_at_once_and_keeps_per_partition_errors():
    access = ScriptedAccess({1: [offsets_response((0, 0, 42), (1, UNKNOWN_TP, -1)), offsets_response((0, 0, 50))]})
    result = OffsetsResult()
    drive(access.partition_requests._list_offsets(None, {1: [("t", 0), ("t", 1)]}, time.monotonic() + 5, result))
    assert result.last_stable == {("t", 0): 42} and result.high_watermark == {("t", 0): 50}
    assert [(e.partition, e.error) for e in result.errors] == [(1, "UNKNOWN_TOPIC_OR_PARTITION")]
    assert [r.isolation_level for _, r in access.sent] == [IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED]


def test_a_broker_with_an_earlier_scrape_request_unanswered_is_not_asked_again():
    access = ScriptedAccess({1: [offsets_response((0, 0, 7)), offsets_response((0, 0, 9))]})
    access.partition_requests._pending[2] = Future()     # broker 2 froze during an earlier scrape
    result = OffsetsResult()
    drive(access.partition_requests._list_offsets(None, {1: [("t", 0)], 2: [("t", 1)]}, time.monotonic() + 5, result))
    assert [node for node, _ in access.sent] == [1, 1]
    assert result.last_stable == {("t", 0): 7} and result.brokers_failed == {2}
    assert [(e.partition, e.error) for e in result.errors] == [(1, "EarlierRequestPending")]


def list_response(code, *states):
    state = ListTransactionsResponse.TransactionState
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[
        state(transactional_id=tid, producer_id=pid, transaction_state=st) for tid, pid, st in states])


def describe_response(*states):
    st = DescribeTransactionsResponse.TransactionState
    topic = st.TopicData
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        st(error_code=code, transactional_id=tid, transaction_state=state, transaction_timeout_ms=60000,
           transaction_start_time_ms=5, producer_id=pid, producer_epoch=1,
           topics=[topic(topic="t", partitions=[0])]) for code, tid, state, pid in states])


def test_list_transactions_tolerates_a_loading_coordinator_and_a_dead_broker():
    access = ScriptedAccess({1: [list_response(0, ("a", 7, "Ongoing"), ("b", 8, "Empty"))],
                             2: [list_response(LOADING)], 3: [Errors.KafkaTimeoutError("slow")]})
    result = TransactionsResult()
    drive(access.transaction_requests._list_transactions(None, [1, 2, 3], result))
    assert [(t.transactional_id, t.coordinator) for t in result.listings] == [("a", 1), ("b", 1)]
    assert result.coordinators_failed == {2, 3}
    assert {e.broker: e.whole_request for e in result.errors} == {2: False, 3: True}


def test_describe_transactions_unknown_id_does_not_hide_the_others():
    access = ScriptedAccess({1: [describe_response((0, "a", "Ongoing", 7), (TXN_ID_NOT_FOUND, "gone", "", -1))]})
    result = TransactionsResult()
    drive(access.transaction_requests._describe_transactions(None, {1: ["a", "gone"]}, result))
    assert result.descriptions["a"].partitions == frozenset({("t", 0)})
    assert result.descriptions["a"].state == "Ongoing" and result.descriptions["a"].producer_id == 7
    assert result.unknown_ids == {"gone"}
    assert [e.item for e in result.errors] == ["gone"]
    assert not result.coordinators_failed                 # an id that ended since its listing misses nothing


def test_an_id_its_coordinator_could_not_describe_leaves_that_coordinator_s_counts_incomplete():
    access = ScriptedAccess({1: [describe_response((0, "a", "Ongoing", 7), (LOADING, "moving", "", -1))],
                             2: [describe_response((0, "b", "Ongoing", 8))]})
    result = TransactionsResult()
    drive(access.transaction_requests._describe_transactions(None, {1: ["a", "moving"], 2: ["b"]}, result))
    assert sorted(result.descriptions) == ["a", "b"] and result.coordinators_failed == {1}
    assert [(e.broker, e.item, e.error) for e in result.errors] == [(1, "moving", "COORDINATOR_LOAD_IN_PROGRESS")]


def test_many_batches_to_one_broker_go_in_waves_and_none_is_lost():
    partitions = [("t", i) for i in range(13)]
    access = ScriptedAccess({1: [producers_response((i, 0, [(i, -1)])) for i in range(13)]})
    access.partition_requests.producers_batch = 1
    result = ProducersResult()
    drive(access.partition_requests._describe_producers(None, {1: partitions}, result))
    assert sorted(result.producers) == partitions and not result.errors and len(access.sent) == 13


def test_a_request_the_client_cannot_route_fails_its_item_not_the_collection():
    class Cluster:
        updates = 0

        def request_update(self):
            Cluster.updates += 1

    class Manager:
        cluster = Cluster()

        def send(self, request, node_id=None, request_timeout_ms=None):
            if node_id == 2:
                raise Errors.UnknownBrokerIdError(2)
            return done(producers_response((0, 0, [])))

    access = KafkaAccess(ConnectionSettings(bootstrap="127.0.0.1:1"))
    result = ProducersResult()
    drive(access.partition_requests._describe_producers(Manager(), {1: [("t", 0)], 2: [("t", 1)]}, result))
    assert ("t", 0) in result.producers
    assert [(e.partition, e.whole_request) for e in result.errors] == [(1, True)]
    assert Cluster.updates == 1


class FakeClient:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


def test_a_client_dropped_while_another_thread_uses_it_is_closed_only_when_that_use_ends():
    access = KafkaAccess(ConnectionSettings(bootstrap="127.0.0.1:1"))
    first = access.lanes._admins["background"] = FakeClient()
    leased = access.lanes.lease()             # a scrape is running on it
    access.close()                            # the background thread saw a metadata failure
    assert leased is first and not first.closed and "background" not in access.lanes._admins
    second = access.lanes._admins["background"] = FakeClient()     # the next call bootstraps a new client
    access.lanes.release(leased)
    assert first.closed and not second.closed
    access.close()                            # nobody uses the new one: closed at once
    assert second.closed and not access.lanes._leases and not access.lanes._retired


class CountingMetadata(KafkaAccess):
    """KafkaAccess whose Metadata requests are counted (and fail when told to)."""

    def __init__(self, **kwargs):
        super().__init__(ConnectionSettings(bootstrap="127.0.0.1:1"), **kwargs)
        self.fetches, self.fail = 0, False
        self.lanes.run = self._run                   # the metadata cache runs its requests on the one AdminLanes

    def _run(self, coro_fn, *args, lane="background"):
        self.fetches += 1
        if self.fail:
            raise Errors.KafkaTimeoutError("no answer")
        return MetadataResponse(brokers=[], topics=[], controller_id=1, cluster_id="c", throttle_time_ms=0)


def test_metadata_refresh_after_errors_is_rate_limited_and_a_failed_refresh_keeps_the_cache():
    access = CountingMetadata(metadata_max_age_s=300, metadata_min_refresh_s=60)
    first = access.metadata()
    access.metadata_cache.forget_after([ItemError("LeaderNotAvailable", topic="t", partition=0)])
    assert access.metadata() is first and access.fetches == 1          # an offline partition: no refetch yet
    object.__setattr__(first, "fetched_at", first.fetched_at - 61)
    access.fail = True
    assert access.metadata() is first and access.fetches == 2          # due, failed: the cache is kept
    access.fail = False
    assert access.metadata() is not first and access.fetches == 3


class KnownBrokers:
    """A kafka-python manager as far as choosing whom to ask: it prefers node 3, knows 1-3 and a bootstrap."""

    class cluster:
        brokers = staticmethod(lambda: [SimpleNamespace(node_id=n) for n in (1, 2, 3)])
        bootstrap_brokers = staticmethod(lambda: [SimpleNamespace(node_id="bootstrap-0")])

    least_loaded_node = staticmethod(lambda: 3)


def metadata_response(controller=1):
    return MetadataResponse(brokers=[], topics=[], controller_id=controller, cluster_id="c", throttle_time_ms=0)


def test_metadata_is_asked_of_every_known_broker_in_turn_until_one_answers_but_an_auth_error_stops_at_once():
    down = Errors.KafkaConnectionError("reset by peer")
    one_dead = ScriptedAccess({3: [down], 1: [metadata_response(controller=2)]})
    assert drive(one_dead.metadata_cache._fetch_metadata(KnownBrokers)).controller_id == 2
    assert [node for node, _ in one_dead.sent] == [3, 1]
    backing_off = ScriptedAccess({3: [Errors.NodeNotReadyError(3)], 1: [down], 2: [down],
                                  "bootstrap-0": [metadata_response()]})
    assert drive(backing_off.metadata_cache._fetch_metadata(KnownBrokers)).controller_id == 1
    assert [node for node, _ in backing_off.sent] == [3, 1, 2, "bootstrap-0"]
    denied = ScriptedAccess({3: [Errors.TopicAuthorizationFailedError("no Describe")]})
    with pytest.raises(Errors.TopicAuthorizationFailedError):
        drive(denied.metadata_cache._fetch_metadata(KnownBrokers))
    assert len(denied.sent) == 1
    all_down = ScriptedAccess({n: [down] for n in (1, 2, 3, "bootstrap-0")})
    with pytest.raises(Errors.KafkaConnectionError):
        drive(all_down.metadata_cache._fetch_metadata(KnownBrokers))
    assert len(all_down.sent) == 4


def test_a_first_metadata_request_that_reached_no_broker_is_asked_again_until_its_deadline_not_after_auth_errors():
    class FirstFails(CountingMetadata):
        def __init__(self, errors):
            super().__init__(request_timeout_s=1.0)
            self.errors = list(errors)
            self.lanes.why_unavailable = self._why_unavailable

        def _run(self, coro_fn, *args, lane="background"):
            if self.errors:
                self.fetches += 1
                raise self.errors.pop(0)
            return super()._run(coro_fn, *args, lane=lane)

        def _why_unavailable(self, what):
            return what

    dead_first = FirstFails([Errors.KafkaConnectionError("reset by peer")])
    assert dead_first.metadata().controller == 1 and dead_first.fetches == 2
    denied = FirstFails([Errors.SaslAuthenticationFailedError("bad password")])
    with pytest.raises(KafkaUnavailable, match="SASL_AUTHENTICATION_FAILED"):
        denied.metadata()
    assert denied.fetches == 1                                     # not retried
    always_down = FirstFails([Errors.KafkaConnectionError("refused")] * 100)
    begun = time.monotonic()
    with pytest.raises(KafkaUnavailable, match="KafkaConnectionError"):
        always_down.metadata()
    assert 2 <= always_down.fetches <= 5 and time.monotonic() - begun < 1.5      # within one request timeout


def test_pending_partitions_are_those_require_stable_marks_unstable_of_allowed_topics():
    from exporter.access.groups import pending_partitions
    NS, unstable = SimpleNamespace, Errors.UnstableOffsetCommitError.errno      # 88
    topics = [NS(name="in", partitions=[NS(partition_index=0, error_code=unstable),
                                        NS(partition_index=1, error_code=0)]),
              NS(name="hidden", partitions=[NS(partition_index=0, error_code=unstable)])]
    assert pending_partitions(topics, lambda t: t != "hidden") == frozenset({("in", 0)})


def test_a_group_whose_require_stable_answer_is_missing_is_left_out_of_pending_not_said_empty():
    NS = SimpleNamespace

    class Admin:
        async def _find_coordinator_ids(self, groups):
            return {"a": 1, "b": 1, "c": 2}

    unstable = NS(name="in", partitions=[NS(partition_index=0, error_code=Errors.UnstableOffsetCommitError.errno)])
    answer = NS(groups=[NS(group_id="a", error_code=0, topics=[unstable]), NS(group_id="b", error_code=0, topics=[]),
                        NS(group_id="c?", error_code=Errors.GroupAuthorizationFailedError.errno, topics=[])])
    access = ScriptedAccess({1: [answer], 2: [Errors.KafkaConnectionError("coordinator down")]})
    access.lanes.run = lambda fn, *args: drive(fn(None, *args))
    result = GroupOffsetsResult()
    access.group_requests._fetch_pending(Admin(), ["a", "b", "c"], result)
    assert result.pending == {"a": frozenset({("in", 0)}), "b": frozenset()}        # c: unknown, not none
    assert [(e.broker, e.item) for e in result.errors] == [(None, "c?"), (2, "require_stable")]
    assert all(r.require_stable and (r._min_version, r._max_version) == (8, 8) for _, r in access.sent)   # v10: ids


def test_consumer_protocol_groups_are_described_per_coordinator_and_a_missing_answer_stays_unknown():
    from exporter.access.groups import ConsumerGroupDescribeResponse as R
    member = R.DescribedGroup.Member
    empty = member.Assignment(topic_partitions=[])
    group = R.DescribedGroup(error_code=0, error_message=None, group_id="a", group_state="Reconciling",
                             group_epoch=7, assignment_epoch=7, assignor_name="uniform", authorized_operations=0,
                             members=[member(member_id=m, instance_id=None, rack_id=None, member_epoch=e,
                                             client_id=m, client_host="/127.0.0.1", subscribed_topic_names=["in"],
                                             subscribed_topic_regex=None, assignment=empty, target_assignment=empty)
                                      for m, e in (("m1", 7), ("m2", 5))])
    missing = R.DescribedGroup(error_code=Errors.GroupIdNotFoundError.errno, error_message="not a consumer group",
                               group_id="b", group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                               authorized_operations=0, members=[])
    wire = R(throttle_time_ms=0, groups=[group, missing]).encode(version=0)
    answer = R.decode(wire, version=0)                         # the schema reads what it writes: the flexible form

    class Admin:
        async def _find_coordinator_ids(self, groups):
            return {"a": 1, "b": 1, "c": 2}

    access = ScriptedAccess({1: [answer], 2: [Errors.KafkaConnectionError("coordinator down")]})
    access.lanes.run = lambda fn, *args: drive(fn(None, *args))
    result = GroupOffsetsResult()
    access.group_requests._describe_consumer_groups(Admin(), ["a", "b", "c"], result)
    assert list(result.members) == ["a"]                       # b and c: unknown, not "no members"
    a = result.members["a"]
    assert (a.group_epoch, a.assignment_epoch, a.member_epochs, a.reconciling) == (7, 7, (7, 5), 1)
    assert [(e.error, e.broker, e.item) for e in result.errors] == [
        ("GROUP_ID_NOT_FOUND", None, "b"), ("KafkaConnectionError", 2, "describe")]
    assert sorted(r.group_ids for _, r in access.sent) == [["a", "b"], ["c"]]
