"""What the transactional workloads share: one producer per logical process, writing a planned
attempt's records in a transaction, and the one rule for what an error means for its outcome.

Owns: init_transactions (recorded as an `init` operation), producing an attempt's writes with their
ids in value and headers, delivery offsets, commit with one retry on a retriable error, and the
outcome of a failure:
  - an abortable error: abort, outcome `fail` (the commit, if asked, was refused); an abort that fails
    is judged by its own error (a producer paused past a fencing learns it is fenced here);
  - a retriable error during commit: commit once more, `ok` or else `info`;
  - anything else (fenced, fatal, timed out): drop the producer (the next init_transactions fences it
    and aborts what it left), outcome `info` during the commit, `fail` before it (nothing asked to commit);
    with --on-fenced exit, a producer fenced by another one stops the process (a zombie must not come back).
Every client call runs under the workload's watchdog (base.py: a call past twice its timeout is a stall,
recorded, and the process exits to be restarted).
Must not: plan attempts or record them (the workloads do).
"""
from __future__ import annotations

import argparse
from typing import Callable

from confluent_kafka import KafkaError, KafkaException, Producer

from chaos.record.ids import encode_value, headers
from chaos.workloads.confluent import librdkafka_log
from chaos.workloads.base import WorkloadContext, confluent_client, delivery_to, error_text
from chaos.workloads.native import REFERENCE
from cluster.access.errors import TxnlabError


# Our producer epoch is stale: another producer with our transactional.id initialised (or, with
# transaction.version 2, the coordinator bumped the epoch when it aborted our timed-out transaction).
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def add_transactional_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transaction-timeout-ms", type=int, default=10000)
    p.add_argument("--request-timeout-s", type=float, default=10.0, help="how long a commit may take")
    p.add_argument("--txn-id", default=None, help="transactional.id (default <run tag>.<process>)")
    p.add_argument("--on-fenced", choices=("reinit", "exit"), default="reinit",
                   help="after being fenced by another producer: init again (fencing it back) or exit")


class TransactionalArgumentsError(TxnlabError, ValueError):
    """Transactional workload options the client would refuse."""


def check_transactional_arguments(args: argparse.Namespace) -> None:
    """librdkafka refuses a socket timeout above the transaction timeout + 100 ms (the producer is never
    created, every init fails): refused here, before any process starts (spec validation runs this, with
    `args.client` the client the process runs on: another client's program has no such rule)."""
    if getattr(args, "client", REFERENCE) != REFERENCE:
        return
    if args.request_timeout_s * 1000 > args.transaction_timeout_ms + 100:
        raise TransactionalArgumentsError(
            f"--request-timeout-s {args.request_timeout_s:g} exceeds --transaction-timeout-ms "
            f"{args.transaction_timeout_ms} + 100 ms: the client refuses it (socket.timeout.ms <= "
            "transaction.timeout.ms + 100); lower --request-timeout-s")


class TransactionalClient:
    """Subclasses set self.txn_id and call transact(value, before_commit)."""

    producer_config: dict = {"linger.ms": 5}     # batching knobs (a benchmark batches harder)

    def __init__(self, ctx: WorkloadContext, args: argparse.Namespace):
        self.ctx, self.args = ctx, args
        self.txn_id = getattr(args, "txn_id", None) or f"{ctx.run_tag}.{ctx.process}"
        self.producer: Producer | None = None
        self.offsets: dict[str, int] = {}
        ctx.client = confluent_client()

    def call(self, name: str, timeout_s: float | None = None):
        """A client call under the watchdog, bounded by its own timeout (default: the request timeout)."""
        return self.ctx.client_call(name, self.args.request_timeout_s if timeout_s is None else timeout_s)

    def ensure_producer(self) -> bool:
        if self.producer is not None:
            return True
        self.ctx.invoke("init", {"txn_id": self.txn_id})
        try:
            with self.call("Producer"):
                producer = Producer(self.ctx.conn.confluent(**{
                    "transactional.id": self.txn_id, "enable.idempotence": True,
                    **librdkafka_log("eos,msg,protocol,broker,topic,queue"),
                    **self.producer_config, "transaction.timeout.ms": self.args.transaction_timeout_ms,
                    "socket.timeout.ms": int(self.args.request_timeout_s * 1000)}))
            with self.call("init_transactions", self.args.request_timeout_s * 3):
                producer.init_transactions(self.args.request_timeout_s * 3)
        except KafkaException as exc:        # coordinator unavailable, fenced, timed out: later
            self.ctx.complete("fail", "init", {"txn_id": self.txn_id, "error": error_text(exc)})
            return False
        self.producer = producer
        self.ctx.complete("ok", "init", {"txn_id": self.txn_id})
        return True

    def transact(self, value: dict, before_commit: Callable[[], None] = lambda: None,
                 abort: bool = False) -> tuple[str, dict]:
        """Write value["writes"] in one transaction; returns the outcome and what to add to the op. Every call
        it makes is bounded by the request timeout, under the watchdog."""
        return self._attempt(value, before_commit, abort)

    def _attempt(self, value: dict, before_commit: Callable[[], None], abort: bool) -> tuple[str, dict]:
        self.offsets = {}
        committing = False
        timeout = self.args.request_timeout_s
        try:
            self._produce(value)
            before_commit()
            if abort:
                return self._abort_deliberately(timeout)
            committing = True
            with self.call("commit_transaction", timeout):
                self.producer.commit_transaction(timeout)
            return "ok", {"offsets": self._offsets_of(value)}
        except KafkaException as exc:
            return self._after_error(exc, committing, value)

    def _abort_deliberately(self, timeout: float) -> tuple[str, dict]:
        """A deliberate abort; a retriable error (a pause made it time out) is retried once, so a producer
        fenced meanwhile learns it from the retry instead of silently starting over."""
        try:
            with self.call("abort_transaction", timeout):
                self.producer.abort_transaction(timeout)
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            with self.call("abort_transaction", timeout):
                self.producer.abort_transaction(timeout)  # its error, if any, is judged by _after_error
        return "fail", {"error": "deliberate abort"}

    def _offsets_of(self, value: dict) -> list[int]:
        return [self.offsets.get(w["id"], -1) for w in value["writes"]]

    def _produce(self, value: dict) -> None:
        with self.call("produce"):                    # begin_transaction and produce: local, but calls all the same
            self.producer.begin_transaction()
            for w in value["writes"]:
                extra = {"input": w["input"]} if "input" in w else None
                self.producer.produce(
                    w["topic"], partition=w["partition"], key=w.get("key"),
                    headers=headers(w["id"], value["attempt"], self.ctx.process, w.get("input")),
                    value=encode_value(w["id"], value["attempt"], self.ctx.process, self.args.size, extra=extra),
                    on_delivery=delivery_to(self.offsets, w["id"]))
        with self.call("flush"):
            self.producer.flush(self.args.request_timeout_s)

    def _after_error(self, exc: KafkaException, committing: bool, value: dict) -> tuple[str, dict]:
        err = exc.args[0]
        error = {"error": error_text(exc)}
        outcome = "info" if committing else "fail"
        if err.code() not in FENCED and err.txn_requires_abort():
            try:
                with self.call("abort_transaction"):
                    self.producer.abort_transaction(self.args.request_timeout_s)
                return "fail", error
            except KafkaException as again:   # e.g. fenced: a zombie learns it here, after a pause
                err, error, outcome = again.args[0], {"error": error_text(again), "after": error["error"]}, "fail"
        elif err.code() not in FENCED and committing and err.retriable():
            try:
                with self.call("commit_transaction"):
                    self.producer.commit_transaction(self.args.request_timeout_s)
                return "ok", {"offsets": self._offsets_of(value), "retried": error["error"]}
            except KafkaException as again:
                err, error = again.args[0], {"error": error_text(again)}   # judge the latest error
        self.producer = None
        if err.code() in FENCED and getattr(self.args, "on_fenced", "reinit") == "exit":
            error["fenced"] = True
            self.ctx.stop.set()              # a fenced instance is a zombie: it must stop, not fence back
        return outcome, error
