"""partition_offsets asks again while a new leader's high watermark catches up, and no longer than its timeout."""
from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from cluster.access import reads, waiting
from cluster.access.connection import ConnectionSettings

CONN = ConnectionSettings(bootstrap="127.0.0.1:1")


class Answer:
    def __init__(self, offset):
        self.offset = offset


def scripted(answers):
    class Admin:
        calls = 0

        def __init__(self, conf):
            pass

        def list_offsets(self, request, isolation_level=None, request_timeout=None):
            Admin.calls += 1
            outcome = answers.pop(0) if len(answers) > 1 else answers[0]
            futures = {}
            for tp in request:
                f = Future()
                if isinstance(outcome, Answer):
                    f.set_result(outcome)
                else:
                    f.set_exception(KafkaException(KafkaError(outcome)))
                futures[tp] = f
            return futures
    return Admin


def test_a_new_leader_catching_up_is_asked_again(monkeypatch):
    admin = scripted([KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, Answer(42)])
    monkeypatch.setattr(reads, "AdminClient", admin)
    monkeypatch.setattr(waiting.time, "sleep", lambda s: None)
    assert reads.partition_offsets(CONN, "t", [0, 1], committed=True) == {0: 42, 1: 42}
    assert admin.calls == 3


def test_other_errors_and_a_spent_timeout_raise(monkeypatch):
    monkeypatch.setattr(reads, "AdminClient", scripted([KafkaError.TOPIC_AUTHORIZATION_FAILED]))
    with pytest.raises(KafkaException):
        reads.partition_offsets(CONN, "t", [0], committed=False)
    monkeypatch.setattr(reads, "AdminClient", scripted([KafkaError.OFFSET_NOT_AVAILABLE]))
    monkeypatch.setattr(waiting.time, "sleep", lambda s: None)
    with pytest.raises(KafkaException):
        reads.partition_offsets(CONN, "t", [0], committed=True, timeout=0.05)
