"""Workload: one instance of a Kafka Streams exactly-once application (chaos/workloads/streams_app/, Java), as
teams run it: `processing.guarantee=exactly_once_v2`, several instances (one workload process each) sharing
one application.id, so its tasks move between them when one fails, pauses or restarts.

Topology (EosApp.java): the keyed input topics (a txn-producer with --keys writes them: every record of a
key in one partition number of both topics), then
  stateless  every input record -> one record on --output: {"input": <input id>, "instance"}
  stateful   per key, a running count and sum (amount of an input: 1 + the index its id ends with) in the
             persistent store "counts" (RocksDB; changelog topic "<application.id>-counts-changelog",
             values "<count>,<sum>,<input id>"), every update emitted to --counts:
             {"key", "count", "sum", "input"}
Everything the checks need is in the topics (why: Kafka Streams decides its transactions itself; what it
committed is what read_committed shows, paired by the input id each output carries, and the consumer group
<application.id>'s committed offsets say which inputs it claims to have processed): spark_analysis/checks.py
`streams_processing` and `streams_state`. The history holds what the application said:
  <process>       ok streams {event: topology, application_id, sources, sink, counts, changelog}  (first)
                  ok streams {event: started | state (from, to) | tasks (active, standby) |
                              progress (processed: records its stateless step handled, reprocessing after
                              an abort included) | error (error, causes: what a stream thread died of,
                              outermost first; the thread is replaced) | stopped, tool_ms}
  <process>/jvm   invoke jvm {tool, args}; ok | fail + {pid, exit_code, ...}            (chaos/workloads/jvm.py)
The application's settings, the connection's secrets included, go to the JVM in a properties file (0600,
deleted at exit), never on its command line. Its state directory is this process's own (a temporary folder
under the run's scratch folder (TMPDIR, chaos/workloads/run.py), removed at exit, by the next start under the same name
after a kill (a restarted instance restores its state from the changelog), or with the scratch folder when the
run finishes); it is also the JVM's java.io.tmpdir, where RocksDB unpacks its native library.
Must not: signal any process but its JVM (a paused workload is paused with its JVM: cluster/lab/supervisor.py
sends STOP and CONT to the process group).
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from chaos.workloads.base import WorkloadContext
from chaos.workloads.jvm import JavaTool, Op, ToolEvents, run_tools
from cluster.access.errors import TxnlabError
from cluster.lab.install import install_streams_app
from cluster.lab.java import java_command
from cluster.lab.layout import render_properties

MAIN = "dev.txnlab.streams.EosApp"
F = "streams"
STORE = "counts"                       # the state store's name in EosApp.java


class StreamsWorkloadError(TxnlabError, ValueError):
    """A setting the Streams workload cannot run with (reported before the JVM starts)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", nargs="+", required=True, help="keyed input topics (txn-producer --keys writes them)")
    p.add_argument("--output", required=True, help="the stateless step's topic: one record per input")
    p.add_argument("--counts", required=True, help="the stateful step's topic: every count/sum update per key")
    p.add_argument("--application-id", default=None, help="default <run tag>.streams (also the consumer group)")
    p.add_argument("--commit-interval-ms", type=int, default=100, help="Kafka Streams commit.interval.ms")
    p.add_argument("--transaction-timeout-ms", type=int, default=10000, help="the producers' transaction.timeout.ms")
    p.add_argument("--session-timeout-ms", type=int, default=10000, help="the consumer's session.timeout.ms (the "
                   "classic protocol's; on streams the broker's group.streams.session.timeout.ms rules)")
    p.add_argument("--group-protocol", choices=("classic", "streams"), default="classic",
                   help="Kafka Streams' rebalance protocol: classic, or streams (KIP-1071, Kafka 4.2+ with the "
                   "streams.version feature)")
    p.add_argument("--heap", default="384m", help="-Xmx of the JVM")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a Kafka Streams setting (repeatable; `producer.`/`consumer.` prefixes reach the clients), "
                        "e.g. producer.delivery.timeout.ms=6000")


def check_args(args: argparse.Namespace) -> None:
    small = [f"--{name.replace('_', '-')}" for name in ("commit_interval_ms", "transaction_timeout_ms",
                                                         "session_timeout_ms") if getattr(args, name) < 1]
    if small:
        raise StreamsWorkloadError(f"{', '.join(small)} must be at least 1")
    if args.application_id is not None and not args.application_id.strip():
        raise StreamsWorkloadError("--application-id may not be empty")
    extra_settings(args)


OWN = ("txnlab.", "application.id", "processing.guarantee", "state.dir", "bootstrap.servers", "security.",
       "sasl.", "ssl.")          # what the workload sets itself: its options, the run's connection


def extra_settings(args: argparse.Namespace) -> dict[str, str]:
    """--config KEY=VALUE pairs; a malformed one, or one of the settings the workload owns, is refused."""
    out = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise StreamsWorkloadError(f"--config {item!r}: expected KEY=VALUE")
        if key.startswith(OWN):
            raise StreamsWorkloadError(f"--config {key}: set by the workload itself (its options or the connection)")
        out[key.strip()] = value
    return out


def application_id(run_tag: str, args: argparse.Namespace | None) -> str:
    """--application-id, by default "<run tag>.streams" (a run's groups start with its tag: chaos/workloads/run.py)."""
    return (args.application_id if args else None) or f"{run_tag}.streams"


def changelog(app_id: str) -> str:
    """The store's changelog topic, as Kafka Streams names it."""
    return f"{app_id}-{STORE}-changelog"


def topology(run_tag: str, args: argparse.Namespace) -> dict:
    """The history's `topology` event: what the checks read and pair."""
    app = application_id(run_tag, args)
    return {"event": "topology", "application_id": app, "sources": list(args.inputs), "sink": args.output,
            "counts": args.counts, "changelog": changelog(app)}


def settings(ctx: WorkloadContext, args: argparse.Namespace, state_dir: Path) -> dict[str, str]:
    """The application's properties: the connection's (secrets included) and the Streams settings."""
    return {**ctx.conn.java_properties(),
            "application.id": application_id(ctx.run_tag, args), "processing.guarantee": "exactly_once_v2",
            "state.dir": str(state_dir), "commit.interval.ms": str(args.commit_interval_ms),
            "producer.transaction.timeout.ms": str(args.transaction_timeout_ms),
            **({"group.protocol": "streams"} if args.group_protocol == "streams" else
               {"consumer.session.timeout.ms": str(args.session_timeout_ms)}),
            "txnlab.inputs": ",".join(args.inputs), "txnlab.output": args.output, "txnlab.counts": args.counts,
            "txnlab.instance": ctx.process, **extra_settings(args)}


class StreamsEvents(ToolEvents):
    """EosApp's events ({"event", "time", ...}) -> `ok streams` observations; `time` becomes tool_ms."""

    def ops_of(self, event: dict) -> list[Op]:
        name = str(event["event"])
        fields = {k: v for k, v in event.items() if k not in ("event", "time")}
        return [Op("ok", F, {"event": name, **fields, "tool_ms": event.get("time")})]


def prepare(release: str | None, progress: Callable[[str], None]) -> None:
    """Before a run (chaos/runner/experiment.py): the app built against the release its workloads will run."""
    install_streams_app(release, progress)


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    check_args(args)
    jar = install_streams_app(progress=lambda msg: None)      # mvn once per release; a no-op when built
    ctx.observe(F, topology(ctx.run_tag, args))
    prefix = f"txnlab-streams-{ctx.run_tag}-{ctx.process}-"
    for stale in Path(tempfile.gettempdir()).glob(prefix + "*"):     # left by a killed predecessor
        shutil.rmtree(stale, ignore_errors=True)
    state = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        config = state / "app.properties"
        config.touch(mode=0o600)
        config.write_text(render_properties(settings(ctx, args, state / "state")))
        # java.io.tmpdir: where RocksDB unpacks its native library (left behind when the JVM is killed)
        argv = java_command(MAIN, [str(config)], args.heap, jvm=[f"-Djava.io.tmpdir={state}"], classpath=[jar])
        run_tools(ctx, [(JavaTool(ctx, ctx.process, "EosApp", argv, StreamsEvents()), [str(config)])])
    finally:
        shutil.rmtree(state, ignore_errors=True)
