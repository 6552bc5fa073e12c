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
import tempfile
import zlib
from pathlib import Path

from chaos.workloads.base import WorkloadContext
from chaos.workloads.jvm import JavaTool, Op, ToolEvents, run_tools
from chaos.workloads.topics import partition_counts
from cluster.access.connection import ConnectionSettings
from cluster.lab.java import java_command
from cluster.lab.layout import render_properties
from cluster.lab.versions import release
from cluster.access.errors import TxnlabError

PRODUCER_MAIN = "org.apache.kafka.tools.VerifiableProducer"
COPIER_MAIN = "org.apache.kafka.tools.TransactionalMessageCopier"
PRODUCER_PROCESS = "java-vp"
COPIER_PROCESS = "java-copier-{}"
LONG_MAX = 2**63 - 1                 # the copier's "remaining" before its first assignment


class JavaCopierError(TxnlabError, RuntimeError):
    """A setting this workload cannot run with (reported before any JVM starts)."""



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
