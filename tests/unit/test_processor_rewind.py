"""The processor's rewind: a failure to read the committed offsets is the workload's own error, and it
never reads on past the aborted batch (it rejoins the group instead). (A stalled call: tests/unit/test_stalls.py.)
No broker: a scripted consumer and producer."""
from __future__ import annotations

import threading
from contextlib import nullcontext
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from chaos.workloads.confluent import processor as processor_module
from chaos.workloads.confluent.processor import Processor

BATCH = {"commit_offsets": [{"topic": "in", "partition": 0, "offset": 7}]}


class ScriptedConsumer:
    def __init__(self, failures: int):
        self.failures, self.calls = failures, []

    def committed(self, tps, timeout):
        self.calls.append("committed")
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE))
        return [TopicPartition(tp.topic, tp.partition, 5) for tp in tps]

    def assignment(self):
        return [TopicPartition("in", 0)]

    def seek(self, tp):
        self.calls.append(("seek", tp.offset))

    def unsubscribe(self):
        self.calls.append("unsubscribe")

    def subscribe(self, topics, on_assign=None, on_revoke=None):
        self.calls.append(("subscribe", tuple(topics)))


def processor(failures: int) -> tuple[Processor, list]:
    seen: list = []
    proc = Processor.__new__(Processor)          # no broker: only what rewind uses
    proc.ctx = SimpleNamespace(observe=lambda f, value: seen.append((f, value)), stop=threading.Event(),
                               client_call=lambda name, timeout_s: nullcontext())
    proc.args = SimpleNamespace(request_timeout_s=1.0, inputs=["in"])
    proc.consumer = ScriptedConsumer(failures)
    return proc, seen


def test_a_rewind_that_reads_the_committed_offsets_seeks_there(monkeypatch):
    monkeypatch.setattr(processor_module, "REWIND_PAUSE_S", 0.0)
    proc, seen = processor(failures=1)
    proc.rewind(BATCH)
    assert proc.consumer.calls == ["committed", "committed", ("seek", 5)]
    assert [f for f, _ in seen] == ["rewind-error", "seek"]


def test_a_rewind_that_cannot_read_them_is_a_workload_error_and_rejoins_instead_of_reading_on(monkeypatch):
    monkeypatch.setattr(processor_module, "REWIND_PAUSE_S", 0.0)
    proc, seen = processor(failures=processor_module.REWIND_TRIES)
    proc.rewind(BATCH)
    assert proc.consumer.calls == ["committed"] * processor_module.REWIND_TRIES + ["unsubscribe", ("subscribe", ("in",))]
    assert [f for f, _ in seen] == ["rewind-error"] * processor_module.REWIND_TRIES + ["workload-error"]
    assert "COORDINATOR_NOT_AVAILABLE" in seen[-1][1]["error"] and seen[-1][1]["action"] == "rejoin the group"

