"""What every workload process shares: its arguments, its history handle, pacing and stopping.

Owns: the WorkloadContext a workload's `run(ctx, args)` gets (Kafka connection from TXNLAB_KAFKA_*
variables, the history client, the seeded random generator, the stop flag set by SIGTERM or the
duration), and the one-outstanding-invoke discipline of a logical process.
Must not: start processes (the runner does) or decide what a history means (spark_analysis does).

A workload process is started as `python -m chaos.workloads NAME --socket ... --run-start-ns ...
--run-tag ... --process ... --seed ... [--duration S] [workload options]`; secrets travel in the
environment, never in argv.

Stalls. Every client call a workload makes runs inside `ctx.client_call(name, timeout_s)`. A call still
running at STALL_FACTOR times its own timeout (never less than STALL_FLOOR_S: a 0.5 s poll is not stuck
at 1 s on a loaded machine) is a stall: the client broke its own bound (e.g. librdkafka #5456, whose
send_offsets_to_transaction ignores its timeout). Time counts only while the process runs: a process
stopped by SIGSTOP (pause-workload, zombie-producer) does not age its calls. On a stall the watchdog thread
completes every outstanding invoke of the process as `info` (value.stalled = the call: its outcome is
unknown), records one `ok` observation f = "stall" {call, timeout_s, limit_s, seconds, thread, stack (the
stuck thread's Python stack, innermost last), client, client_version, library, library_version}, dumps
every thread's stack into the log, and exits the process with EXIT_STALL: the runner restarts it as an
orchestrator would (chaos/workloads/run.py). A stall is never silent.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import random
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from chaos.record.history import HistoryClient
from chaos.record.ids import first_attempt
from chaos.record.recovery import STALL_F
from cluster.access.connection import ConnectionSettings
from cluster.access.waiting import Deadline

EXIT_STALL = 75              # a client call stalled: the runner restarts the process (chaos/workloads/run.py)
READY_F = "ready"            # one `ok` of it: the process is ready, the method's clock may start (chaos/workloads/plans.py)
STALL_FACTOR = 2.0
STALL_FLOOR_S = 5.0
WATCH_TICK_S = 0.25


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--socket", required=True, help="the run's history socket")
    p.add_argument("--run-start-ns", type=int, required=True, help="CLOCK_MONOTONIC ns at run start")
    p.add_argument("--run-tag", required=True, help="short run tag, part of every id")
    p.add_argument("--process", required=True, help="this process's name in the history (e.g. txp-0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until SIGTERM")
    p.add_argument("--incarnation", type=int, default=0, help="how many times this process was started before "
                   "under its name (the runner's restarts): its attempts are numbered apart (chaos/record/ids.py)")


def process_connection(run_tag: str, process: str) -> ConnectionSettings:
    """The connection from TXNLAB_KAFKA_*, its client.id the process's name on the wire (`<run tag>.<process>`,
    as the KafkaJS workloads name theirs: a hold-requests fault's `clients` pattern selects one process) unless
    TXNLAB_KAFKA_CLIENT_ID says otherwise."""
    conn = ConnectionSettings.from_env()
    if "client_id" in ConnectionSettings.env_values():
        return conn
    return conn.model_copy(update={"client_id": f"{run_tag}.{process}"})


@dataclass
class WorkloadContext:
    """A workload process's view of its run."""
    conn: ConnectionSettings
    history: HistoryClient
    run_tag: str
    process: str
    rng: random.Random
    deadline: Deadline | None                # of the run's --duration
    first_attempt: int = 0                   # this incarnation's first attempt number (chaos/record/ids.py)
    stop: threading.Event = field(default_factory=threading.Event)
    client: dict = field(default_factory=dict)    # the Kafka client a workload drives (client_of), for stalls
    _outstanding: dict[str, dict] = field(default_factory=dict)    # history process -> its open invoke
    _watch: "CallWatch | None" = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "WorkloadContext":
        ctx = cls(conn=process_connection(args.run_tag, args.process),
                  history=HistoryClient(args.socket, args.run_start_ns),
                  run_tag=args.run_tag, process=args.process, rng=random.Random(f"{args.seed}/{args.process}"),
                  deadline=Deadline(args.duration) if args.duration > 0 else None,
                  first_attempt=first_attempt(args.incarnation))
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
        op = self.history.record(process or self.process, "invoke", f, value)
        self._outstanding[op["process"]] = op
        return op

    def complete(self, op_type: str, f: str, value: Any, process: str | None = None) -> dict:
        self._outstanding.pop(process or self.process, None)
        return self.history.record(process or self.process, op_type, f, value)

    # ---- bounded client calls -----------------------------------------------------------------------
    @contextmanager
    def client_call(self, name: str, timeout_s: float) -> Iterator[None]:
        """Run a client call under the watchdog (the module docstring: stalls)."""
        if self._watch is None:
            self._watch = CallWatch(self._stalled)
        with self._watch.call(name, timeout_s):
            yield

    def _stalled(self, stall: dict) -> None:
        """The watchdog's end of a stalled process: recorded, then exit EXIT_STALL (never returns)."""
        stall = {**stall, **self.client}
        try:
            for process, op in sorted(self._outstanding.copy().items()):
                value = op["value"] if isinstance(op["value"], dict) else {"value": op["value"]}
                self.complete("info", op["f"], {**value, "stalled": stall["call"], "error": (
                    f"stalled: {stall['call']} did not return in {stall['seconds']:g} s (its timeout "
                    f"{stall['timeout_s']:g} s)")}, process=process)
            self.observe(STALL_F, stall)
            self.history.close()
        finally:
            print(f"stall: {stall['call']} did not return in {stall['seconds']:g} s; exiting {EXIT_STALL}",
                  file=sys.stderr, flush=True)
            faulthandler.dump_traceback(all_threads=True)
            os._exit(EXIT_STALL)

    def observe(self, f: str, value: Any, process: str | None = None) -> dict:
        """A read-only observation: one `ok` operation without an invoke."""
        return self.history.record(process or self.process, "ok", f, value)

    def close(self) -> None:
        self.history.close()


def stall_limit(timeout_s: float) -> float:
    return max(STALL_FACTOR * timeout_s, STALL_FLOOR_S)


class CallWatch:
    """The client calls in flight, per thread, and the watchdog thread that ages them: `on_stall` gets the
    first one past its limit (its description: stall_of) and is expected not to return."""

    def __init__(self, on_stall: Callable[[dict], None], tick_s: float = WATCH_TICK_S):
        self.on_stall, self.tick_s = on_stall, tick_s
        self.calls: dict[int, dict] = {}           # thread id -> {call, timeout_s, limit_s, seconds}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def call(self, name: str, timeout_s: float) -> Iterator[None]:
        me = threading.get_ident()
        with self._lock:
            self.calls[me] = {"call": name, "timeout_s": timeout_s, "limit_s": stall_limit(timeout_s), "seconds": 0.0}
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="client-call-watch", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self.calls.pop(me, None)

    def age(self, step_s: float) -> tuple[int, dict] | None:
        """Add step_s to every call in flight; the first one now past its limit (thread id, entry), if any."""
        with self._lock:
            for thread_id, entry in self.calls.items():
                entry["seconds"] += step_s
                if entry["seconds"] >= entry["limit_s"]:
                    return thread_id, dict(entry)
        return None

    def _loop(self) -> None:
        last = time.monotonic()
        while True:
            time.sleep(self.tick_s)
            now = time.monotonic()
            step, last = min(now - last, 2 * self.tick_s), now    # a stopped process does not age its calls
            stalled = self.age(step)
            if stalled is not None:
                self.on_stall(stall_of(*stalled))
                return


def stall_of(thread_id: int, entry: dict) -> dict:
    """A stall's description: the call, its bound, and the stuck thread's name and Python stack."""
    frame = sys._current_frames().get(thread_id)
    names = {t.ident: t.name for t in threading.enumerate()}
    return {"call": entry["call"], "timeout_s": entry["timeout_s"], "limit_s": entry["limit_s"],
            "seconds": round(entry["seconds"], 1), "thread": names.get(thread_id, str(thread_id)),
            "stack": [line.rstrip() for line in traceback.format_stack(frame)] if frame is not None else []}


def confluent_client() -> dict:
    """The client of the confluent-kafka workloads, named as a stall records it."""
    import confluent_kafka
    return {"client": "confluent-kafka", "client_version": confluent_kafka.__version__, "library": "librdkafka",
            "library_version": confluent_kafka.libversion()[0]}


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
    if err is not None and callable(name):
        return f"{name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def delivery_to(offsets: dict[str, int], rid: str):
    """A delivery callback recording the offset of record `rid` (delivery reports carry no headers)."""
    def delivered(err, msg) -> None:
        if err is None:
            offsets[rid] = msg.offset()
    return delivered

