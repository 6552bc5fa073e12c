"""How a transactional workload judges a client error: the outcome it records and whether it stops."""
import argparse
import threading
from contextlib import nullcontext
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from chaos.workloads.confluent.transactional import TransactionalClient


class Producer:
    """Answers abort/commit with the given exceptions (None: succeeds) and records the calls."""

    def __init__(self, abort=None, commit=None):
        self.abort, self.commit, self.calls = abort, commit, []

    def abort_transaction(self, timeout):
        self.calls.append("abort")
        if self.abort:
            raise self.abort

    def commit_transaction(self, timeout):
        self.calls.append("commit")
        if self.commit:
            raise self.commit


def client(producer, on_fenced="exit"):
    ctx = SimpleNamespace(run_tag="t", process="txp-0", stop=threading.Event(),
                          client_call=lambda name, timeout_s: nullcontext())
    args = argparse.Namespace(request_timeout_s=1.0, on_fenced=on_fenced, txn_id=None)
    c = TransactionalClient(ctx, args)
    c.producer = producer
    return c


def error(code, **flags):
    return KafkaException(KafkaError(code, "test", **flags))


VALUE = {"writes": [{"id": "a"}]}


def test_abortable_error_aborts_and_records_fail():
    c = client(Producer())
    outcome, extra = c._after_error(error(KafkaError._TIMED_OUT, txn_requires_abort=True), True, VALUE)
    assert (outcome, c.producer.calls, c.ctx.stop.is_set()) == ("fail", ["abort"], False)
    assert "fenced" not in extra


def test_a_fenced_abort_after_an_abortable_error_stops_a_zombie():
    producer = Producer(abort=error(KafkaError._FENCED, fatal=True))
    c = client(producer)
    outcome, extra = c._after_error(error(KafkaError._TIMED_OUT, txn_requires_abort=True), True, VALUE)
    assert outcome == "fail" and extra["fenced"] and c.ctx.stop.is_set() and c.producer is None
    assert extra["after"].startswith("_TIMED_OUT")


def test_fenced_with_reinit_drops_the_producer_but_keeps_running():
    c = client(Producer(), on_fenced="reinit")
    outcome, extra = c._after_error(error(KafkaError.PRODUCER_FENCED, fatal=True), True, VALUE)
    assert (outcome, c.producer, c.ctx.stop.is_set(), "fenced" in extra) == ("info", None, False, False)


def test_retriable_commit_error_is_retried_once_and_judged_by_the_retry():
    c = client(Producer(commit=error(KafkaError.INVALID_PRODUCER_EPOCH)))
    outcome, extra = c._after_error(error(KafkaError.REQUEST_TIMED_OUT, retriable=True), True, VALUE)
    assert outcome == "info" and extra["fenced"] and c.ctx.stop.is_set()


def test_retriable_commit_error_that_commits_on_retry_is_ok():
    producer = Producer()
    c = client(producer)
    c.offsets = {"a": 7}
    outcome, extra = c._after_error(error(KafkaError.REQUEST_TIMED_OUT, retriable=True), True, VALUE)
    assert (outcome, extra["offsets"], producer.calls) == ("ok", [7], ["commit"])


def test_an_error_before_the_commit_is_fail_not_info():
    c = client(Producer())
    outcome, _ = c._after_error(error(KafkaError._TRANSPORT), False, VALUE)
    assert outcome == "fail" and c.producer is None


class AbortingProducer(Producer):
    """A producer whose aborts fail with the given exceptions, in order."""

    def __init__(self, *aborts):
        super().__init__()
        self.aborts = list(aborts)

    def begin_transaction(self):
        pass

    def produce(self, *args, **kwargs):
        pass

    def flush(self, timeout):
        return 0

    def abort_transaction(self, timeout):
        self.calls.append("abort")
        if self.aborts:
            raise self.aborts.pop(0)


def test_a_deliberate_abort_that_times_out_is_retried_and_a_fencing_then_stops_a_zombie():
    c = client(AbortingProducer(error(KafkaError._TIMED_OUT, retriable=True), error(KafkaError._FENCED, fatal=True)))
    producer = c.producer
    outcome, extra = c.transact({"writes": [], "attempt": "a"}, abort=True)
    assert producer.calls == ["abort", "abort"] and outcome == "fail" and extra["fenced"] and c.ctx.stop.is_set()


def test_a_deliberate_abort_that_succeeds_on_retry_is_a_plain_fail():
    c = client(AbortingProducer(error(KafkaError._TIMED_OUT, retriable=True)))
    outcome, extra = c.transact({"writes": [], "attempt": "a"}, abort=True)
    assert (outcome, extra) == ("fail", {"error": "deliberate abort"}) and not c.ctx.stop.is_set()


def test_librdkafka_logs_errors_only_unless_told_and_its_debug_contexts_only_at_debug(monkeypatch):
    from chaos.workloads.confluent import CLIENT_LOG_VARIABLE, librdkafka_log
    monkeypatch.delenv(CLIENT_LOG_VARIABLE, raising=False)
    assert librdkafka_log("eos,msg") == {"log_level": 3}
    monkeypatch.setenv(CLIENT_LOG_VARIABLE, "info")
    assert librdkafka_log("eos,msg") == {"log_level": 6}
    monkeypatch.setenv(CLIENT_LOG_VARIABLE, "DEBUG")
    assert librdkafka_log("eos,msg") == {"log_level": 7, "debug": "eos,msg"}
    monkeypatch.setenv(CLIENT_LOG_VARIABLE, "chatty")              # unknown: the default, never librdkafka's own
    assert librdkafka_log("eos,msg") == {"log_level": 3}
