"""Workload: a transactional producer (confluent-kafka) with a stable transactional.id.

Each transaction attempt writes K records spread over the partitions of two topics, then commits, or
deliberately aborts a configurable share. History (f = "txn"):
  invoke {attempt, producer, txn_id, abort: bool, writes: [{topic, partition, id[, key]}]}
  ok     the same + offsets: [offset per write]           commit acknowledged
  fail   the same + error                                  aborted, or certainly not committed
  info   the same + error                                  commit outcome unknown (timeout, fenced, fatal)
What an error means for the outcome: chaos/workloads/confluent/transactional.py.
Must not: retry a transaction under the same attempt id (a retry is a new attempt).
"""
from __future__ import annotations

import argparse
import zlib

from chaos.record.ids import attempt_id, record_id
from chaos.workloads.base import Pacer, WorkloadContext
from chaos.workloads.topics import LIST_TIMEOUT_S, partition_counts
from chaos.workloads.confluent.transactional import (TransactionalArgumentsError, TransactionalClient,
                                           add_transactional_arguments, check_transactional_arguments)

F = "txn"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topics", nargs=2, required=True, metavar=("TOPIC_A", "TOPIC_B"))
    p.add_argument("--records", type=int, default=6, help="records per transaction (K)")
    p.add_argument("--abort-share", type=float, default=0.2, help="share of transactions deliberately aborted")
    p.add_argument("--rate", type=float, default=20.0, help="transactions per second (0: unbounded)")
    p.add_argument("--size", type=int, default=100, help="approximate record size in bytes")
    p.add_argument("--keys", type=int, default=0, help="K > 0: keyed records, keys k0..k<K-1> from each id, a key "
                   "always in partition (key number mod partitions) of either topic (what a Kafka Streams "
                   "application's grouping needs); 0: no keys, random partitions")
    add_transactional_arguments(p)


def check_args(args: argparse.Namespace) -> None:
    check_transactional_arguments(args)
    if args.keys < 0:
        raise TransactionalArgumentsError(f"--keys {args.keys}: 0 (no keys) or a number of keys")


def key_number(rid: str, keys: int) -> int:
    """The key number of a record id: stable across processes and runs (CRC-32, as Spark's crc32)."""
    return zlib.crc32(rid.encode()) % keys


class TransactionalWorker(TransactionalClient):
    """One producer and its attempts."""

    def __init__(self, ctx: WorkloadContext, args: argparse.Namespace):
        super().__init__(ctx, args)
        with self.call("list_topics", LIST_TIMEOUT_S):
            self.partitions = partition_counts(ctx.conn, args.topics)
        self.attempt_no = ctx.first_attempt

    def plan(self, attempt: str) -> list[dict]:
        writes = []
        for i in range(self.args.records):
            topic = self.args.topics[i % 2]
            rid = record_id(self.ctx.run_tag, self.ctx.process, self.attempt_no, i)
            if self.args.keys > 0:
                number = key_number(rid, self.args.keys)
                writes.append({"topic": topic, "partition": number % self.partitions[topic], "id": rid,
                               "key": f"k{number}"})
            else:
                writes.append({"topic": topic, "partition": self.ctx.rng.randrange(self.partitions[topic]), "id": rid})
        return writes

    def one_attempt(self) -> None:
        attempt = attempt_id(self.ctx.run_tag, self.ctx.process, self.attempt_no)
        value = {"attempt": attempt, "producer": self.ctx.process, "txn_id": self.txn_id,
                 "abort": self.ctx.rng.random() < self.args.abort_share, "writes": self.plan(attempt)}
        self.attempt_no += 1
        self.ctx.invoke(F, value)
        op_type, extra = self.transact(value, abort=value["abort"])
        self.ctx.complete(op_type, F, {**value, **extra})


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    worker = TransactionalWorker(ctx, args)
    pacer = Pacer(args.rate, ctx.stop)
    while not ctx.stopping():
        if worker.ensure_producer():
            worker.one_attempt()
        else:
            ctx.stop.wait(1.0)
        pacer.wait()
