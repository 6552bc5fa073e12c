"""Workload: a producer-state storm — short-lived idempotent producers at a set rate.

Each producer (confluent-kafka, enable.idempotence) gets a fresh producer id, writes one record and is
closed: the broker keeps its producer state until producer.id.expiration.ms, the memory leak of
applications that create a producer per request. History (f = "produce"):
  invoke {attempt, producer, id, topic, partition}   ok + offset   info + error (may have been written)
Runs `concurrency` producers at a time (threads, each a history process <process>-t<k>).
Must not: reuse a producer (each one is the point).
"""
from __future__ import annotations

import argparse
import threading

from confluent_kafka import KafkaException, Producer

from chaos.record.ids import attempt_id, encode_value, headers, record_id
from chaos.workloads.base import Pacer, WorkloadContext, confluent_client
from chaos.workloads.topics import LIST_TIMEOUT_S, partition_counts

F = "produce"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=float, default=10.0, help="new producers per second")
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--request-timeout-s", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=8, help="producers alive at once (each a history process)")


def one_producer(ctx: WorkloadContext, args: argparse.Namespace, process: str, n: int, partitions: int) -> None:
    attempt = attempt_id(ctx.run_tag, process, n)
    rid = record_id(ctx.run_tag, process, n, 0)
    value = {"attempt": attempt, "producer": process, "id": rid, "topic": args.topic, "partition": n % partitions}
    ctx.invoke(F, value, process)
    result: dict = {}
    with ctx.client_call("Producer", args.request_timeout_s):
        producer = Producer(ctx.conn.confluent(**{"enable.idempotence": True, "log_level": 3, "linger.ms": 0,
                                                  "message.timeout.ms": int(args.request_timeout_s * 1000)}))
    try:
        with ctx.client_call("produce", args.request_timeout_s):
            producer.produce(args.topic, partition=value["partition"], headers=headers(rid, attempt, process),
                             value=encode_value(rid, attempt, process, args.size),
                             on_delivery=lambda err, msg: result.update(error=err, offset=msg.offset()))
        with ctx.client_call("flush", args.request_timeout_s * 2):
            producer.flush(args.request_timeout_s * 2)
    except (KafkaException, BufferError) as exc:
        result = {"error": exc}
    if result.get("error") is None and "offset" in result:
        ctx.complete("ok", F, {**value, "offset": result["offset"]}, process)
    else:
        # A delivery error after retries, or no report in time: the record may still have been appended.
        error = str(result["error"]) if result.get("error") is not None else "no delivery report before the timeout"
        ctx.complete("info", F, {**value, "error": error}, process)


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    """`concurrency` threads, each a history process `<process>-t<k>`, sharing the rate."""
    ctx.client = confluent_client()
    with ctx.client_call("list_topics", LIST_TIMEOUT_S):
        partitions = partition_counts(ctx.conn, [args.topic])[args.topic]
    threads = [threading.Thread(target=_thread, args=(ctx, args, f"{ctx.process}-t{k}", partitions), daemon=True)
               for k in range(max(1, args.concurrency))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _thread(ctx: WorkloadContext, args: argparse.Namespace, process: str, partitions: int) -> None:
    pacer = Pacer(args.rate / max(1, args.concurrency), ctx.stop)
    n = ctx.first_attempt
    while not ctx.stopping():
        one_producer(ctx, args, process, n, partitions)
        n += 1
        pacer.wait()
