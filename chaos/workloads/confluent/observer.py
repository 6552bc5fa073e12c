"""Workload: an observer consumer that records everything it polls.

read_committed or read_uncommitted, assigned every partition of the given topics from the beginning
(no group, no commits). History (observations, `ok` without invoke):
  f = "seek"  {isolation, reason: "start", positions: [{topic, partition, offset: 0}]}   once, before polling:
              where each partition's polls must begin (spark_analysis: poll_skip / nonmonotonic_poll)
  f = "poll"  {isolation, records: [{topic, partition, offset, id}]}   per non-empty poll; id null for a
              record txnlab did not write
Must not: commit offsets or join a group (it must not disturb what it watches).
"""
from __future__ import annotations

import argparse

from confluent_kafka import Consumer, KafkaException, TopicPartition

from chaos.record.ids import HEADER_ID
from chaos.workloads.base import WorkloadContext, confluent_client, error_text
from chaos.workloads.topics import LIST_TIMEOUT_S, partition_counts

F = "poll"
POLL_S = 0.5
CLOSE_S = 10.0       # close() takes no timeout: the watchdog's bound for it
SEEK = "seek"        # where a consumer's next poll of a partition begins (null offset: unknown)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topics", nargs="+", required=True)
    p.add_argument("--isolation", choices=("read_committed", "read_uncommitted"), default="read_committed")
    p.add_argument("--batch", type=int, default=500, help="records per poll at most")


def record_id_of(msg) -> str | None:
    for key, value in msg.headers() or []:
        if key == HEADER_ID:
            return value.decode()
    return None


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    ctx.client = confluent_client()
    with ctx.client_call("list_topics", LIST_TIMEOUT_S):
        counts = partition_counts(ctx.conn, args.topics)
    consumer = Consumer(ctx.conn.confluent(**{"group.id": f"{ctx.run_tag}.{ctx.process}", "log_level": 3,
                                              "isolation.level": args.isolation, "enable.auto.commit": False,
                                              "enable.partition.eof": False}))
    assignment = [TopicPartition(t, p, 0) for t, n in counts.items() for p in range(n)]
    ctx.observe(SEEK, {"isolation": args.isolation, "reason": "start",
                       "positions": [{"topic": tp.topic, "partition": tp.partition, "offset": 0} for tp in assignment]})
    consumer.assign(assignment)
    try:
        while not ctx.stopping():
            try:
                with ctx.client_call("consume", POLL_S):
                    batch = consumer.consume(num_messages=args.batch, timeout=POLL_S)
            except KafkaException as exc:
                ctx.observe("poll-error", {"isolation": args.isolation, "error": error_text(exc)})
                continue
            records = [{"topic": m.topic(), "partition": m.partition(), "offset": m.offset(), "id": record_id_of(m)}
                       for m in batch if m.error() is None]
            if records:
                ctx.observe(F, {"isolation": args.isolation, "records": records})
    finally:
        with ctx.client_call("close", CLOSE_S):
            consumer.close()
