"""What every workload process shares: its arguments, its history handle, pacing and stopping.

Owns: the WorkloadContext a workload's `run(ctx, args)` gets (Kafka connection from TXNLAB_KAFKA_*
variables, the history client, the seeded random generator, the stop flag set by SIGTERM or the
duration), and the one-outstanding-invoke discipline of a logical process.
Must not: start processes (the runner does) or decide what a history means (spark_analysis does).

A workload process is started as `python -m chaos.workloads NAME --socket ... --run-start-ns ...
--run-tag ... --process ... --seed ... [--duration S] [workload options]`; secrets travel in the
environment, never in argv.
"""
from __future__ import annotations

import argparse
import faulthandler
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from chaos.history import HistoryClient
from cluster.connection import ConnectionSettings
from cluster.waiting import Deadline


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--socket", required=True, help="the run's history socket")
    p.add_argument("--run-start-ns", type=int, required=True, help="CLOCK_MONOTONIC ns at run start")
    p.add_argument("--run-tag", required=True, help="short run tag, part of every id")
    p.add_argument("--process", required=True, help="this process's name in the history (e.g. txp-0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until SIGTERM")


@dataclass
class WorkloadContext:
    """A workload process's view of its run."""
    conn: ConnectionSettings
    history: HistoryClient
    run_tag: str
    process: str
    rng: random.Random
    deadline: Deadline | None                # of the run's --duration
    stop: threading.Event = field(default_factory=threading.Event)
    _outstanding: dict | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "WorkloadContext":
        ctx = cls(conn=ConnectionSettings.from_env(), history=HistoryClient(args.socket, args.run_start_ns),
                  run_tag=args.run_tag, process=args.process, rng=random.Random(f"{args.seed}/{args.process}"),
                  deadline=Deadline(args.duration) if args.duration > 0 else None)
        signal.signal(signal.SIGTERM, lambda *_: ctx.stop.set())
        signal.signal(signal.SIGINT, lambda *_: ctx.stop.set())
        faulthandler.register(signal.SIGUSR1, all_threads=True)   # `kill -USR1 <pid>`: stacks into the log
        return ctx

    def stopping(self) -> bool:
        if self.deadline is not None and self.deadline.expired:
            self.stop.set()
        return self.stop.is_set()

    # ---- history, one outstanding invoke per logical process ---------------------------------------
    def invoke(self, f: str, value: Any, process: str | None = None) -> dict:
        return self.history.record(process or self.process, "invoke", f, value)

    def complete(self, op_type: str, f: str, value: Any, process: str | None = None) -> dict:
        return self.history.record(process or self.process, op_type, f, value)

    def observe(self, f: str, value: Any, process: str | None = None) -> dict:
        """A read-only observation: one `ok` operation without an invoke."""
        return self.history.record(process or self.process, "ok", f, value)

    def close(self) -> None:
        self.history.close()


class Pacer:
    """At most `rate` operations a second (0: as fast as possible), without drifting."""

    def __init__(self, rate: float, stop: threading.Event):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.stop = stop
        self.next = time.monotonic()

    def wait(self) -> None:
        if not self.interval:
            return
        self.next = max(self.next + self.interval, time.monotonic() - self.interval)
        delay = self.next - time.monotonic()
        if delay > 0:
            self.stop.wait(delay)


def error_text(exc: BaseException) -> str:
    """A short description of a client error for the history (confluent KafkaError aware)."""
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    if callable(name):
        return f"{name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def delivery_to(offsets: dict[str, int], rid: str):
    """A delivery callback recording the offset of record `rid` (delivery reports carry no headers)."""
    def delivered(err, msg) -> None:
        if err is None:
            offsets[rid] = msg.offset()
    return delivered

