"""Workload: an exactly-once processor (consume-transform-produce) instance.

A read_committed consumer in a group reads the input topics; each batch is one transaction: one output
record per input record (carrying the input's id), the consumed offsets sent to the transaction with
the consumer's group metadata (KIP-447, so a rebalance fences stale instances), then commit. Several
instances share the group. On an abortable error: abort and rewind every partition of the batch to its
committed offset; on fencing or a fatal error: a new producer (init_transactions) and the same rewind.
History (f = "process"):
  invoke {attempt, producer, txn_id, group, inputs: [{topic, partition, offset, id}],
          writes: [{topic, partition, id, input}], commit_offsets: [{topic, partition, offset}]}
  ok (+ offsets) | fail (+ error) | info (+ error: commit outcome unknown)
Where the consumer's polls of a partition start over (observations, f = "seek", the observer's format):
  {isolation, reason: "assigned" | "revoked" | "rewind", positions: [{topic, partition, offset}]}
  offset: where the next poll begins (a rewind's committed offset); null when unknown (an assignment
  starts at the group's committed offset, a rewind to the beginning at the log start)
A rewind whose committed offsets cannot be read: `rewind-error` per try, then `workload-error` {error,
action: "rejoin the group"} (the workload's own failure, never read on past an aborted batch).
Must not: auto-commit offsets, or process a record outside a transaction.
"""
from __future__ import annotations

import argparse

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from chaos.record.ids import attempt_id, record_id
from chaos.workloads import NO_CONSUMER_PROTOCOL
from chaos.workloads.confluent import librdkafka_log
from chaos.workloads.base import WorkloadContext, error_text
from chaos.workloads.confluent.observer import SEEK, record_id_of
from chaos.workloads.topics import LIST_TIMEOUT_S, partition_counts
from chaos.workloads.confluent.transactional import (TransactionalArgumentsError, TransactionalClient,
                                                     add_transactional_arguments, check_transactional_arguments)

F = "process"
PROCESSOR_PROTOCOLS = ("classic", "consumer")     # a processor's consumer group: JoinGroup/SyncGroup, or KIP-848
REWIND_TRIES = 3              # reads of the committed offsets before a rewind gives up and rejoins the group
REWIND_PAUSE_S = 1.0
POLL_S = 0.5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--group", default=None, help="consumer group (default <run tag>.eos)")
    p.add_argument("--batch", type=int, default=50, help="input records per transaction at most")
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--group-protocol", choices=PROCESSOR_PROTOCOLS, default="classic",
                   help="the consumer group protocol: classic, or consumer (KIP-848; its session and heartbeat "
                   "are the broker's group.consumer.* settings)")
    add_transactional_arguments(p)


def check_args(args: argparse.Namespace) -> None:
    """The hook spec validation runs with `args.client`: the transactional rules, and KIP-848 only where the client
    has it."""
    check_transactional_arguments(args)
    if args.group_protocol == "consumer" and getattr(args, "client", None) in NO_CONSUMER_PROTOCOL:
        raise TransactionalArgumentsError(f"--group-protocol consumer: {args.client} has no KIP-848 consumer "
                                          f"protocol ({NO_CONSUMER_PROTOCOL[args.client]})")


def consumer_protocol_config(protocol: str) -> dict:
    """librdkafka's settings of the group protocol: the classic one's 10 s session (every workload's), or KIP-848,
    whose session.timeout.ms librdkafka refuses (the broker's group.consumer.session.timeout.ms rules)."""
    return {"group.protocol": "consumer"} if protocol == "consumer" else {"session.timeout.ms": 10000}


class Processor(TransactionalClient):
    def __init__(self, ctx: WorkloadContext, args: argparse.Namespace):
        super().__init__(ctx, args)
        self.group = args.group or f"{ctx.run_tag}.eos"
        with self.call("list_topics", LIST_TIMEOUT_S):
            self.out_partitions = partition_counts(ctx.conn, [args.output])[args.output]
        self.attempt_no = ctx.first_attempt
        with self.call("Consumer"):
            self.consumer = Consumer(ctx.conn.confluent(**{
                "group.id": self.group, "isolation.level": "read_committed", "enable.auto.commit": False,
                "auto.offset.reset": "earliest", **librdkafka_log("cgrp,fetch,protocol"),
                **consumer_protocol_config(args.group_protocol),
                "socket.timeout.ms": int(args.request_timeout_s * 1000)}))
            self.subscribe()

    def subscribe(self) -> None:
        self.consumer.subscribe(self.args.inputs, on_assign=lambda c, tps: self.seeked("assigned", tps),
                                on_revoke=lambda c, tps: self.seeked("revoked", tps))

    def seeked(self, reason: str, tps: list[TopicPartition]) -> None:
        """Record where this consumer's polls of `tps` start over (spark_analysis: poll_skip)."""
        self.ctx.observe(SEEK, {"isolation": "read_committed", "reason": reason, "positions": [
            {"topic": tp.topic, "partition": tp.partition, "offset": tp.offset if reason == "rewind" and tp.offset >= 0
             else None} for tp in tps]})

    # ---- one batch = one transaction ---------------------------------------------------------------
    def plan(self, batch: list) -> dict:
        attempt = attempt_id(self.ctx.run_tag, self.ctx.process, self.attempt_no)
        inputs = [{"topic": m.topic(), "partition": m.partition(), "offset": m.offset(), "id": record_id_of(m)}
                  for m in batch]
        writes = [{"topic": self.args.output, "partition": i["partition"] % self.out_partitions,
                   "id": record_id(self.ctx.run_tag, self.ctx.process, self.attempt_no, n), "input": i["id"]}
                  for n, i in enumerate(inputs)]
        ends: dict[tuple[str, int], int] = {}
        for i in inputs:
            ends[(i["topic"], i["partition"])] = max(ends.get((i["topic"], i["partition"]), 0), i["offset"] + 1)
        self.attempt_no += 1
        return {"attempt": attempt, "producer": self.ctx.process, "txn_id": self.txn_id, "group": self.group,
                "inputs": inputs, "writes": writes,
                "commit_offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(ends.items())]}

    def process(self, batch: list) -> None:
        value = self.plan(batch)
        self.ctx.invoke(F, value)
        op_type, extra = self._transact(value)
        self.ctx.complete(op_type, F, {**value, **extra})
        if op_type != "ok":
            self.rewind(value)

    def _transact(self, value: dict) -> tuple[str, dict]:
        def send_offsets() -> None:
            offsets = [TopicPartition(o["topic"], o["partition"], o["offset"]) for o in value["commit_offsets"]]
            assert self.producer is not None
            with self.call("send_offsets_to_transaction"):
                self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                                          self.args.request_timeout_s)
        return self.transact(value, before_commit=send_offsets)

    def rewind(self, value: dict) -> None:
        """Back to the committed offsets of the batch's partitions (the batch will be read again). When they
        cannot be read (REWIND_TRIES times), reading on would skip the aborted batch: that is this workload's
        failure, recorded as such (f = "workload-error"), and the consumer leaves the group and joins again,
        so the partitions are read again from the group's committed offsets, by it or another member."""
        tps = [TopicPartition(o["topic"], o["partition"]) for o in value["commit_offsets"]]
        for attempt in range(1, REWIND_TRIES + 1):
            try:
                with self.call("committed"):
                    committed = self.consumer.committed(tps, timeout=self.args.request_timeout_s)
                break
            except KafkaException as exc:
                self.ctx.observe("rewind-error", {"error": error_text(exc), "attempt": attempt})
                if attempt == REWIND_TRIES or self.ctx.stop.wait(REWIND_PAUSE_S):
                    self.ctx.observe("workload-error", {"error": f"rewind failed: {error_text(exc)}",
                                                        "action": "rejoin the group"})
                    self.consumer.unsubscribe()
                    self.subscribe()
                    return
        assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        seeked = [tp for tp in committed if (tp.topic, tp.partition) in assigned]
        self.seeked("rewind", seeked)
        for tp in seeked:
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    processor = Processor(ctx, args)
    try:
        while not ctx.stopping():
            if not processor.ensure_producer():
                ctx.stop.wait(1.0)
                continue
            with processor.call("consume", POLL_S):
                batch = [m for m in processor.consumer.consume(num_messages=args.batch, timeout=POLL_S)
                         if m.error() is None]
            if batch:
                processor.process(batch)
    finally:
        with processor.call("close"):
            processor.consumer.close()
