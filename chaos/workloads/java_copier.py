"""Workload: Kafka's own Java clients as a second, independent client, recorded into the run history.

Two of Kafka's system-test tools (kafka-tools 4.3.1), each a JVM started by this process:
1. `VerifiableProducer` seeds the input topic with --messages records (acks=all, idempotent), values
   "<prefix>.<n>" (unique per run: the prefix is derived from the run tag), keys "0".."K-1" repeating so
   the records spread over the partitions; then it exits.
2. then --copiers `TransactionalMessageCopier` JVMs in one consumer group (--group-mode, so they
   rebalance; --use-group-metadata, the KIP-447 commit) copy input -> output, --transaction-size
   records a transaction, each with its own transactional.id "<run tag>.java-copier-<i>". A copier
   exits by itself once it has copied what its partitions held when they were assigned to it, so the
   copiers start only after the seeding is over.

History (JSON events on the tools' stdout, converted line by line, in order):
  java-vp          ok   produce {id: value, key, topic, partition, offset, tool_ms}   producer_send_success
                   invoke + info produce {id, key, topic[, error]}                     producer_send_error
                   ok   vp {event, ...}                         startup_complete, shutdown_complete, tool_data
  java-copier-<i>  ok   copy {event: stage, transactional_id, total_processed, consumed, remaining, copied,
                              tool_time}                        ProcessLoop, RebalanceComplete, ShutdownComplete
                        (the tool prints ProcessLoop every poll, 200 ms; one is recorded only when its counters
                        changed: one per committed transaction; `copied` = records committed since the copier's
                        previous event, so the last ShutdownComplete carries the last commit;
                        remaining null = not yet assigned, the tool prints Long.MAX_VALUE)
  any of them      ok   stdout {line, error}                    a line that is no event this tool prints
  <name>/jvm       invoke jvm {tool, args}; ok (exit 0) | fail (any other exit, or no start)
                        + {pid, exit_code, stopped (we sent SIGTERM), signal (killed by one), stderr_tail (exit != 0)}
The JVM lifecycle has its own logical process "<name>/jvm": its invoke stays open while the tool runs,
and the tool's events (observations, `ok` without invoke) would otherwise pair with it.
On stop (SIGTERM or --duration) every running JVM gets SIGTERM, SIGKILL after STOP_GRACE_S; its stdout
is read to the end before its exit is recorded, so the history holds everything the tools printed.

Names are fixed ("java-vp", "java-copier-<i>"): one java-copier workload per run.
Must not: signal any process but the JVMs it started (by their pids), or run against a cluster that
needs SASL or TLS: TransactionalMessageCopier 4.3.1 takes only --broker-list, no client config file.
"""
from __future__ import annotations

import argparse
import collections
import json
import signal
import subprocess
import sys
import tempfile
import threading
import zlib
from pathlib import Path
from typing import IO, Callable, NamedTuple

from chaos.workloads.base import WorkloadContext
from chaos.workloads.topics import partition_counts
from cluster.connection import ConnectionSettings
from cluster.java import java_command
from cluster.layout import render_properties
from cluster.versions import release
from cluster.waiting import Deadline
from cluster.errors import TxnlabError

PRODUCER_MAIN = "org.apache.kafka.tools.VerifiableProducer"
COPIER_MAIN = "org.apache.kafka.tools.TransactionalMessageCopier"
PRODUCER_PROCESS = "java-vp"
COPIER_PROCESS = "java-copier-{}"
LONG_MAX = 2**63 - 1                 # the copier's "remaining" before its first assignment
LINE_LIMIT = 500                     # characters of an unreadable stdout line kept in the history
STDERR_TAIL = 10                     # stderr lines kept for a failed JVM's completion
STOP_GRACE_S = 8.0                   # SIGTERM -> SIGKILL (the runner kills this process after 20 s)
DRAIN_S = 10.0                       # how long to wait for a dead JVM's output to be read


class JavaCopierError(TxnlabError, RuntimeError):
    """A setting this workload cannot run with (reported before any JVM starts)."""


class Op(NamedTuple):
    """One history operation of a tool's event process."""
    type: str
    f: str
    value: dict


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="topic the VerifiableProducer seeds and the copiers read")
    p.add_argument("--output", required=True, help="topic the copiers write (>= the input's partitions)")
    p.add_argument("--messages", type=int, default=2000, help="input records to seed")
    p.add_argument("--throughput", type=int, default=500, help="VerifiableProducer records/s (-1: unbounded)")
    p.add_argument("--keys", type=int, default=64, help="repeating keys 0..K-1 (0: no keys, sticky partitioning)")
    p.add_argument("--transaction-size", type=int, default=50, help="records per copier transaction")
    p.add_argument("--transaction-timeout-ms", type=int, default=60000)
    p.add_argument("--copiers", type=int, default=1, help="copier JVMs, one consumer group")
    p.add_argument("--group", default=None, help="the copiers' consumer group (default <run tag>.<process>)")
    p.add_argument("--random-aborts", action="store_true", help="copiers abort about a third of their transactions")
    p.add_argument("--heap", default="256m", help="-Xmx of each JVM")


# ---- event -> operation conversion (pure, per tool) --------------------------------------------------
def unreadable(text: str, error: str) -> Op:
    return Op("ok", "stdout", {"line": text[:LINE_LIMIT], "error": error})


class ToolEvents:
    """Turns one stdout line of a tool into history operations; a line it cannot read becomes an
    `ok stdout` observation, never an exception."""

    def convert(self, line: str) -> list[Op]:
        text = line.strip()
        if not text:
            return []
        try:
            event = json.loads(text)
        except ValueError:
            return [unreadable(text, "not JSON")]
        if not isinstance(event, dict):
            return [unreadable(text, "not a JSON object")]
        try:
            return self.ops_of(event)
        except (KeyError, TypeError, ValueError) as exc:
            return [unreadable(text, f"unexpected event: {type(exc).__name__}: {exc}")]

    def ops_of(self, event: dict) -> list[Op]:
        raise NotImplementedError


class ProducerEvents(ToolEvents):
    """VerifiableProducer 4.3.1: {"timestamp", "name", ...}, one line per acknowledged or failed send."""

    def ops_of(self, event: dict) -> list[Op]:
        name = event["name"]
        if name == "producer_send_success":
            placed = {"partition": int(event["partition"]), "offset": int(event["offset"])}
            return [Op("ok", "produce", {**self.record(event), **placed, "tool_ms": event.get("timestamp")})]
        if name == "producer_send_error":        # may or may not have been written: info
            record = self.record(event)
            error = f"{event.get('exception')}: {event.get('message')}"
            return [Op("invoke", "produce", record),
                    Op("info", "produce", {**record, "error": error, "tool_ms": event.get("timestamp")})]
        return [Op("ok", "vp", {"event": str(name), **{k: v for k, v in event.items() if k != "name"}})]

    @staticmethod
    def record(event: dict) -> dict:
        if event.get("value") is None:
            raise ValueError(f"{event['name']} without a value")
        return {"id": str(event["value"]), "key": event.get("key"), "topic": event["topic"]}


class CopierEvents(ToolEvents):
    """TransactionalMessageCopier 4.3.1: {"transactionalId", "stage", "time", "totalProcessed",
    "consumed", "remaining"}, one ProcessLoop line per poll (every 200 ms, busy or not)."""

    def __init__(self) -> None:
        self.last: tuple[int, int, int] | None = None

    def ops_of(self, event: dict) -> list[Op]:
        stage = str(event["stage"])
        counters = (int(event["totalProcessed"]), int(event["consumed"]), int(event["remaining"]))
        if stage == "ProcessLoop" and counters == self.last:
            return []
        copied = counters[0] - (self.last[0] if self.last else 0)
        self.last = counters
        total, consumed, remaining = counters
        return [Op("ok", "copy", {"event": stage, "transactional_id": event.get("transactionalId"),
                                  "total_processed": total, "consumed": consumed,
                                  "remaining": None if remaining == LONG_MAX else remaining,
                                  "copied": copied, "tool_time": event.get("time")})]


# ---- one JVM ---------------------------------------------------------------------------------------------
def emit(ctx: WorkloadContext, process: str, op: Op) -> None:
    if op.type == "invoke":
        ctx.invoke(op.f, op.value, process=process)
    else:
        ctx.complete(op.type, op.f, op.value, process=process)


class JavaTool:
    """One tool process: started and stopped by its own pid, its stdout recorded by a reader thread
    under `name`, its lifecycle under "<name>/jvm"."""

    def __init__(self, ctx: WorkloadContext, name: str, tool: str, argv: list[str], events: ToolEvents):
        self.ctx, self.name, self.tool, self.argv, self.events = ctx, name, tool, argv, events
        self.jvm = f"{name}/jvm"
        self.proc: subprocess.Popen | None = None
        self.stopped = False
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.readers: list[threading.Thread] = []

    def start(self, tool_args: list[str]) -> bool:
        self.ctx.invoke("jvm", {"tool": self.tool, "args": tool_args}, process=self.jvm)
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE)
        except OSError as exc:
            self.ctx.complete("fail", "jvm", {"tool": self.tool, "error": f"{type(exc).__name__}: {exc}"},
                              process=self.jvm)
            return False
        self._read(self.proc.stdout, self._record_events)
        self._read(self.proc.stderr, self._keep_stderr)
        return True

    def _read(self, stream: IO[bytes], handle: Callable[[str], None]) -> None:
        thread = threading.Thread(target=self._pump, args=(stream, handle), name=f"{self.name}-reader", daemon=True)
        thread.start()
        self.readers.append(thread)

    @staticmethod
    def _pump(stream: IO[bytes], handle: Callable[[str], None]) -> None:
        with stream:
            for raw in stream:
                handle(raw.decode("utf-8", "replace"))

    def _record_events(self, line: str) -> None:
        for op in self.events.convert(line):
            try:
                emit(self.ctx, self.name, op)
            except OSError:                   # the history is gone: keep draining so the JVM never blocks
                return

    def _keep_stderr(self, line: str) -> None:
        self.stderr_tail.append(line.rstrip()[:LINE_LIMIT])
        sys.stderr.write(line)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        if self.running():
            self.stopped = True
            self.proc.send_signal(signal.SIGTERM)

    def reap(self, deadline: Deadline) -> None:
        """Wait for the exit until deadline, then SIGKILL; read its output to the end; record the exit."""
        if self.proc is None:
            return
        try:
            self.proc.wait(deadline.left())
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for thread in self.readers:
            thread.join(DRAIN_S)
        self._record_exit(self.proc.returncode)

    def _record_exit(self, code: int) -> None:
        value = {"tool": self.tool, "pid": self.proc.pid, "exit_code": code, "stopped": self.stopped}
        if code < 0:
            value["signal"] = signal.Signals(-code).name
        if code != 0:
            value["stderr_tail"] = list(self.stderr_tail)
        self.ctx.complete("ok" if code == 0 else "fail", "jvm", value, process=self.jvm)


def run_tools(ctx: WorkloadContext, tools: list[tuple[JavaTool, list[str]]]) -> None:
    """Start the tools; record each exit as it happens; when the workload stops, stop the rest."""
    live = [tool for tool, tool_args in tools if tool.start(tool_args)]
    while live and not ctx.stopping():
        for tool in [t for t in live if not t.running()]:
            tool.reap(Deadline(0))
            live.remove(tool)
        ctx.stop.wait(0.2)
    stop_tools(live)


def stop_tools(tools: list[JavaTool]) -> None:
    """SIGTERM to all, then each gets until one shared deadline before SIGKILL."""
    for tool in tools:
        tool.terminate()
    deadline = Deadline(STOP_GRACE_S)
    for tool in tools:
        tool.reap(deadline)


# ---- the tools' command lines ------------------------------------------------------------------------------
def check_args(args: argparse.Namespace) -> None:
    small = [f"--{name.replace('_', '-')}" for name in ("messages", "transaction_size", "copiers")
             if getattr(args, name) < 1]
    if small:
        raise JavaCopierError(f"{', '.join(small)} must be at least 1")


def check_connection(conn: ConnectionSettings) -> None:
    if conn.security_protocol != "PLAINTEXT":
        raise JavaCopierError(f"java-copier needs a PLAINTEXT listener: TransactionalMessageCopier takes only "
                              f"--broker-list, no client properties ({conn.describe()})")


def check_topics(conn: ConnectionSettings, args: argparse.Namespace) -> None:
    counts = partition_counts(conn, [args.input, args.output])
    if counts[args.output] < counts[args.input]:
        raise JavaCopierError(f"output {args.output} has {counts[args.output]} partitions, fewer than input "
                              f"{args.input} ({counts[args.input]}): the copier keeps each record's partition")


def write_producer_config(conn: ConnectionSettings, folder: Path) -> Path:
    """The VerifiableProducer's client properties (config_flag): connection, acks=all, idempotence. Its own retries=0
    is overridden here (an idempotent producer refuses retries=0)."""
    props = {**conn.java_properties(), "acks": "all", "enable.idempotence": "true", "retries": str(2**31 - 1),
             "max.in.flight.requests.per.connection": "5"}
    path = folder / "verifiable-producer.properties"
    path.touch(mode=0o600)
    path.write_text(render_properties(props))
    return path


def value_prefix(run_tag: str, process: str) -> int:
    """The VerifiableProducer's integer --value-prefix: values "<prefix>.<n>" differ between runs."""
    return zlib.crc32(f"{run_tag}/{process}".encode()) & 0x7FFFFFFF


COMMAND_CONFIG_SINCE = (4, 2)       # before 4.2 the VerifiableProducer took only --producer.config (4.0.2, 4.1.1)


def config_flag(version: str | None = None) -> str:
    """The VerifiableProducer's client-properties option in the Kafka release its jars come from."""
    return "--command-config" if release(version) >= COMMAND_CONFIG_SINCE else "--producer.config"


def producer_args(ctx: WorkloadContext, args: argparse.Namespace, config: Path) -> list[str]:
    tool_args = ["--topic", args.input, "--bootstrap-server", ctx.conn.bootstrap, "--max-messages", str(args.messages),
                 "--throughput", str(args.throughput), "--acks", "-1", config_flag(), str(config),
                 "--value-prefix", str(value_prefix(ctx.run_tag, ctx.process))]
    return tool_args + (["--repeating-keys", str(args.keys)] if args.keys > 0 else [])


def copier_args(ctx: WorkloadContext, args: argparse.Namespace, index: int) -> list[str]:
    tool_args = ["--input-topic", args.input, "--input-partition", "0",      # required, ignored in group mode
                 "--output-topic", args.output, "--broker-list", ctx.conn.bootstrap,
                 "--transactional-id", f"{ctx.run_tag}.{COPIER_PROCESS.format(index)}",
                 "--consumer-group", args.group or f"{ctx.run_tag}.{ctx.process}",
                 "--transaction-size", str(args.transaction_size),
                 "--transaction-timeout", str(args.transaction_timeout_ms), "--group-mode", "--use-group-metadata"]
    return tool_args + (["--enable-random-aborts"] if args.random_aborts else [])


def tool(ctx: WorkloadContext, name: str, main: str, tool_args: list[str], events: ToolEvents,
         heap: str) -> tuple[JavaTool, list[str]]:
    return JavaTool(ctx, name, main.rsplit(".", 1)[-1], java_command(main, tool_args, heap), events), tool_args


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    check_args(args)
    check_connection(ctx.conn)
    check_topics(ctx.conn, args)
    with tempfile.TemporaryDirectory(prefix="txnlab-java-copier-") as tmp:
        config = write_producer_config(ctx.conn, Path(tmp))
        run_tools(ctx, [tool(ctx, PRODUCER_PROCESS, PRODUCER_MAIN, producer_args(ctx, args, config),
                             ProducerEvents(), args.heap)])
    if ctx.stopping():
        return
    run_tools(ctx, [tool(ctx, COPIER_PROCESS.format(i), COPIER_MAIN, copier_args(ctx, args, i), CopierEvents(),
                         args.heap) for i in range(args.copiers)])
