"""Java's String.hashCode and the __transaction_state partition rule."""
from __future__ import annotations

import pytest

from cluster.admin import java_string_hash, transaction_state_partition


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
    from cluster.admin import ClusterAdmin
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
