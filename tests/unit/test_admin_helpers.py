"""Java's String.hashCode, the __transaction_state partition rule, and when a node counts as registered."""
from __future__ import annotations

import pytest

from cluster.access import admin
from cluster.access.admin import java_string_hash, transaction_state_partition


@pytest.mark.parametrize("text,expected", [
    ("", 0), ("a", 97), ("abc", 96354), ("hello world", 1794106052),
    ("polygenelubricants", -2147483648), ("é", 233), ("😀", 1772899),
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_partition_rule_handles_negative_and_min_value_hashes():
    assert transaction_state_partition("polygenelubricants", 50) == 0   # Utils.abs(MIN_VALUE) == 0
    assert transaction_state_partition("abc", 50) == 96354 % 50
    negative = next(s for s in (f"id-{i}" for i in range(1000)) if java_string_hash(s) < 0)
    assert transaction_state_partition(negative, 50) == abs(java_string_hash(negative)) % 50


class _Describing:
    """A stand-in for kafka-python's admin client: answers describe_topics from a script."""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def describe_topics(self, topics):
        self.calls += 1
        return [self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]]


UNKNOWN = {"error_code": 3, "partitions": []}
KNOWN = {"error_code": 0, "partitions": [{"partition_index": 0, "leader_id": 2, "replica_nodes": [2, 1],
                                          "isr_nodes": [2, 1]}]}


def _admin(client):
    from cluster.access.admin import ClusterAdmin
    admin = ClusterAdmin.__new__(ClusterAdmin)
    admin.client = client
    return admin


def test_a_topic_a_broker_does_not_know_yet_is_asked_again():
    client = _Describing([UNKNOWN, UNKNOWN, KNOWN])
    assert [(p.partition, p.leader) for p in _admin(client).partitions("t")] == [(0, 2)] and client.calls == 3


def test_a_topic_that_stays_unknown_is_an_error_after_the_grace():
    import kafka.errors as Errors
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        _admin(_Describing([UNKNOWN])).partitions("t", unknown_grace_s=0.3)


@pytest.mark.parametrize("views, expected", [
    ({1: {1, 2, 3}, 2: {1, 2, 3}, 3: {1, 2, 3}}, True),
    ({1: {1, 2, 3}, 2: {1, 2, 3}, 3: {2, 3}}, False),       # broker 3 has not applied the unfence yet
    ({1: {2, 3}, 2: {1, 2, 3}, 3: {1, 2, 3}}, False),       # the node's own view lags
    ({1: None, 2: {1, 2, 3}, 3: {1, 2, 3}}, False),         # the node itself does not answer
    ({1: {1, 2, 3}, 2: None, 3: {1, 2, 3}}, True),          # a paused broker has no view to wait for
])
def test_a_node_counts_as_registered_only_when_every_answering_broker_lists_it(monkeypatch, views, expected):
    addresses = {n: f"127.0.0.1:900{n}" for n in views}
    asked = []
    monkeypatch.setattr(admin, "broker_view", lambda conn, address: asked.append(address) or
                        views[int(address[-1])])
    assert admin.registered_in_every_view(None, 1, addresses) is expected
    assert asked[0] == addresses[1]
