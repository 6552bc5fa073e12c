"""Workload: Flink's exactly-once Kafka pipeline on a real Flink session cluster of local processes, as the team
of the notes txnlab began with runs it (chaos/workloads/flink_job/job.py: KafkaSource read_committed -> a count per
key in checkpointed keyed state -> KafkaSink EXACTLY_ONCE, a two-phase commit riding on the checkpoints).

One module, three roles, each a workload process of its own, so the faults that kill, pause and restart a
workload process (kill-workload, pause-workload) kill, pause and restart a Flink process:
  --role jobmanager   a JobManager (StandaloneSessionClusterEntrypoint); the first start chooses the cluster's
                      ports and writes its configuration (cluster/lab/flink_cluster.py); a restart comes back on them
                      without the jobs (no high availability, as most standalone set-ups)
  --role taskmanager  a TaskManager (its slots run the job's tasks and their Python workers)
A JobManager or TaskManager whose JVM exits unasked (Flink's fatal error handler) is started again after
RESTART_DELAY_S, as an orchestrator would; killing the workload process (kill-workload) kills it for good
until the fault's heal starts the process again.
  --role job          the job's client, as a team's deploy tooling: submits the job (`flink run -d -py`), then
                      watches it through the REST API and records what Flink did; when the JobManager lost the
                      job (it was killed), submits it again from the newest retained checkpoint; a restarted
                      client adopts the job still running under its name. When stopped it lets the job drain
                      (the inputs' LSO stable, then two checkpoints completed) and cancels it.
The JobManager and TaskManagers, when stopped, wait (up to STOP_WAIT_S) for the job's client to have drained
the job first. Their JVMs are Flink's own scripts from the PyFlink install (versions.env FLINK_VERSION), run in
this process's process group, so a killed or paused workload is a killed or paused Flink process.

History (f "flink", every role):
  <job>     ok flink {event: topology, application_id (the source's group), sources, sink, counts,
                      changelog: null, txn_prefix, engine: flink, flink_version, connector_version}   (first)
  <job>     invoke/ok/fail flink-submit {from_checkpoint} -> {job_id} | {error[, exit_code]}
  <job>     ok flink {event: state (job_id, from, to) | checkpoint (job_id, checkpoint, status COMPLETED|FAILED,
                      trigger_ms, ack_ms, duration_ms, savepoint[, failure]) | restored (job_id, checkpoint,
                      external_path) | failure (job_id, exception, task, time_ms, cause) | unreachable (error) |
                      reachable | adopted (job_id) | stopped (job_id, application_id, drained, seconds[, behind])}
  <job>     ok ready {job_id, checkpoint}: once, at the first completed checkpoint (the run's clock starts then)
  <jm|tm>   ok flink {event: started, role, rest, starts}; ok flink {event: log, line} for each ERROR of its console;
            ok flink {event: reaped, pids}: what its JVM left running when it exited (Python workers), killed
  <p>/jvm   the JVM's lifecycle (chaos/workloads/jvm.py)
The checks (spark_analysis/checks.py streams_processing, streams_state) judge the job as they judge a Kafka
Streams application: the topology event names its topics and its group, whose committed offsets (committed
by the source when a checkpoint completes) say which inputs it claims to have processed; it has no changelog.
Must not: signal any process but its own JVM or the job it submitted; write outside the cluster's folder.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Callable

from confluent_kafka import KafkaException
from kafka.errors import KafkaError

from chaos.workloads.base import READY_F, WorkloadContext
from chaos.workloads.jvm import JavaTool, Op, ToolEvents, reap_leftovers, stop_tools
from chaos.workloads.topics import partition_counts
from cluster.lab import flink_cluster, versions
from cluster.access.admin import ClusterAdmin
from cluster.access.errors import TxnlabError
from cluster.lab.install import install_flink
from cluster.lab.layout import render_properties
from cluster.access.reads import partition_offsets, read_to_end
from cluster.access.waiting import Deadline

F = "flink"
SUBMIT_F = "flink-submit"
ROLES = ("jobmanager", "taskmanager", "job")
TM_FIRST_S = 3.0            # then the JobManager waits this long for its TaskManagers to stop
STOP_WAIT_S = 33.0          # a JobManager or TaskManager waits this long for the job to drain (chaos/workloads/run.py
                            # gives the workloads STOP_TIMEOUT_S to stop; JavaTool then STOP_GRACE_S to the JVM)
START_WAIT_S = 120.0        # for the cluster's configuration, its REST API and a TaskManager
SUBMIT_TIMEOUT_S = 120.0
POLL_S = 0.5
RESTART_DELAY_S = 2.0       # a JobManager or TaskManager whose JVM exited unasked is started again after this
DRAIN_S = 30.0             # (job) when stopped, how long the job may drain by default (--drain-s)
DRAIN_POLL_S = 0.25
STABLE_S = 1.0              # the inputs' LSO unchanged this long: the feeder has stopped
DONE = "job.done"           # written in the cluster's folder by the job's client when it has drained the job
CLIENT_PID = "job.pid"      # the job's client's pid: while it lives, a stopped JobManager or TaskManager waits
LOG_LINE_LIMIT = 2000      # characters of an ERROR line kept (the KafkaCommitter's data-loss line is ~900)
ERROR_LINE = re.compile(r"^\d{4}-\d\d-\d\d \S+ ERROR ")


class FlinkWorkloadError(TxnlabError, ValueError):
    """A setting the flink workload cannot run with (reported before anything starts)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", choices=ROLES, required=True)
    p.add_argument("--inputs", nargs="+", default=[], help="(job) keyed input topics (txn-producer --keys writes them)")
    p.add_argument("--output", default=None, help="(job) the stateless step's topic: one record per input")
    p.add_argument("--counts", default=None, help="(job) the stateful step's topic: every count/sum update per key")
    p.add_argument("--keys", type=int, default=16, help="(job) the feeder's number of keys (txn-producer --keys)")
    p.add_argument("--group", default=None, help="the source's consumer group; default <run tag>.flink")
    p.add_argument("--txn-prefix", default=None, help="the sink's transactional id prefix; default the group")
    p.add_argument("--checkpoint-ms", type=int, default=2000, help="checkpoint interval")
    p.add_argument("--transaction-timeout-ms", type=int, default=60000, help="the sink's transaction.timeout.ms")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--slots", type=int, default=2, help="task slots per TaskManager")
    p.add_argument("--heartbeat-timeout-ms", type=int, default=10000, help="Flink's heartbeat.timeout")
    p.add_argument("--python-mode", choices=("thread", "process"), default="thread",
                   help="PyFlink's python.execution-mode: thread (Python in the TaskManager's JVM: quick to start; a "
                        "job submitted again to a TaskManager that ran one fails, docs/findings.md) or process (a "
                        "Python worker per slot: ~10 s more to start or restart)")
    p.add_argument("--drain-s", type=float, default=DRAIN_S, help="(job) when stopped, how long to let the job drain")


def check_args(args: argparse.Namespace) -> None:
    small = [f"--{name.replace('_', '-')}" for name in ("keys", "checkpoint_ms", "transaction_timeout_ms", "parallelism",
                                                         "slots", "heartbeat_timeout_ms") if getattr(args, name) < 1]
    if small:
        raise FlinkWorkloadError(f"{', '.join(small)} must be at least 1")
    if args.role == "job" and not (args.inputs and args.output and args.counts):
        raise FlinkWorkloadError("--role job needs --inputs, --output and --counts")
    for name in ("group", "txn_prefix"):
        if getattr(args, name) is not None and not getattr(args, name).strip():
            raise FlinkWorkloadError(f"--{name.replace('_', '-')} may not be empty")


def group(run_tag: str, args: argparse.Namespace | None) -> str:
    """The source's consumer group, by default "<run tag>.flink" (a run's groups start with its tag)."""
    return (args.group if args else None) or f"{run_tag}.flink"


def txn_prefix(run_tag: str, args: argparse.Namespace | None) -> str:
    """The sink's transactional id prefix (ids "<prefix>-<subtask>-<n>"), by default the group."""
    return (args.txn_prefix if args else None) or group(run_tag, args)


def home_dir(run_tag: str) -> Path:
    """The run's Flink cluster folder (cluster/lab/flink_cluster.py), under the run's scratch folder (TMPDIR)."""
    return Path(tempfile.gettempdir()) / f"txnlab-flink-{run_tag}"


def topology(run_tag: str, args: argparse.Namespace) -> dict:
    pins = versions.pinned()
    return {"event": "topology", "application_id": group(run_tag, args), "sources": list(args.inputs),
            "sink": args.output, "counts": args.counts, "changelog": None, "txn_prefix": txn_prefix(run_tag, args),
            "engine": "flink", "flink_version": pins["FLINK_VERSION"],
            "connector_version": pins["FLINK_KAFKA_CONNECTOR_VERSION"]}


def prepare(release: str | None, progress: Callable[[str], None]) -> None:
    """Before a run (chaos/runner/experiment.py): the pinned Flink install (a no-op when made at set-up)."""
    install_flink(progress)


def run(ctx: WorkloadContext, args: argparse.Namespace) -> None:
    check_args(args)
    install_flink(progress=lambda msg: None)
    home = home_dir(ctx.run_tag)
    if args.role == "job":
        JobClient(ctx, args, home).run()
    else:
        run_cluster_process(ctx, args, home)


# ---- JobManager and TaskManager --------------------------------------------------------------------------
class LogEvents(ToolEvents):
    """The console of a Flink process (its log, and a few lines of Flink's scripts): copied to this process's
    stderr (the run's logs/<process>.log); each ERROR line also becomes an observation."""

    def convert(self, line: str) -> list[Op]:
        sys.stderr.write(line)
        text = line.strip()
        return [Op("ok", F, {"event": "log", "line": text[:LOG_LINE_LIMIT]})] if ERROR_LINE.match(text) else []


def run_cluster_process(ctx: WorkloadContext, args: argparse.Namespace, home: Path) -> None:
    if args.role == "jobmanager":
        ports = flink_cluster.choose_ports(home, zlib.crc32(ctx.run_tag.encode()))
        flink_cluster.write_config(home, flink_cluster.settings(home, ports, args.slots, args.parallelism, args.heartbeat_timeout_ms,
                                                args.python_mode))
    else:
        deadline = Deadline(START_WAIT_S)
        while not (home / "conf" / "config.yaml").exists() and not ctx.stopping():
            if deadline.expired:
                raise FlinkWorkloadError(f"no Flink configuration in {home} after {START_WAIT_S:g} s: is the "
                                         "JobManager process of the run running?")
            ctx.stop.wait(POLL_S)
        ports = flink_cluster.recorded_ports(home)
    if ctx.stopping():
        return
    starts = 0
    while not ctx.stopping():
        if starts:                       # its JVM exited unasked (a fatal error): started again, as an orchestrator
            ctx.stop.wait(RESTART_DELAY_S)                                                       # would
            if ctx.stopping():
                return
        ctx.observe(F, {"event": "started", "role": args.role, "rest": ports.rest_url, "starts": starts})
        starts += 1
        # a Flink JVM whose shutdown hooks take over 5 s after SIGTERM is halted by its JvmShutdownSafeguard: -17
        tool = JavaTool(ctx, ctx.process, args.role, flink_cluster.process_command(args.role), LogEvents(),
                        env=flink_cluster.environment(home, ctx.process), stop_codes=(256 - 17,))
        if not tool.start([args.role]):
            return
        while tool.running() and not ctx.stopping():
            ctx.stop.wait(POLL_S)
        if not tool.running():
            tool.reap(Deadline(0))       # its exit recorded (<process>/jvm fail, the exit code and stderr's tail)
            left_behind(ctx)
            continue
        wait_for_drain(home)             # stopped by the run: the job's client drains the job first
        if args.role == "jobmanager":    # then the TaskManagers go (one that loses its JobManager first
            wait_for_taskmanagers(ports)  # while stopping exits by Flink's fatal error handler, code 239)
        stop_tools([tool])
        left_behind(ctx)


def left_behind(ctx: WorkloadContext) -> None:
    """A TaskManager's Python workers (process mode) outlive its JVM when it exits (halted, crashed): killed, and
    recorded."""
    killed = reap_leftovers()
    if killed:
        ctx.observe(F, {"event": "reaped", "pids": killed})


def wait_for_drain(home: Path) -> None:
    """Until the job's client says it drained the job, or is not running, or STOP_WAIT_S passed."""
    deadline = Deadline(STOP_WAIT_S)
    while not (home / DONE).exists() and client_alive(home) and not deadline.expired:
        time.sleep(0.2)


def wait_for_taskmanagers(ports: flink_cluster.Ports) -> None:
    deadline = Deadline(TM_FIRST_S)
    while not deadline.expired:
        try:
            if flink_cluster.Rest(ports, timeout_s=1.0).taskmanagers() == 0:
                return
        except flink_cluster.FlinkError:
            return
        time.sleep(0.2)


def client_alive(home: Path) -> bool:
    try:
        os.kill(int((home / CLIENT_PID).read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


# ---- the job's client ------------------------------------------------------------------------------------
class JobClient:
    def __init__(self, ctx: WorkloadContext, args: argparse.Namespace, home: Path):
        self.ctx, self.args, self.home = ctx, args, home
        self.name = flink_cluster.JOB_NAME.format(group=group(ctx.run_tag, args))
        self.job_id: str | None = None
        self.state: str | None = None
        self.seen_checkpoints: set[tuple[str, int]] = set()
        self.ready = False               # READY_F recorded: a checkpoint completed, the sink commits
        self.seen_failures: set[tuple] = set()
        self.restored: int | None = None
        self.reachable = True
        self.rest: flink_cluster.Rest | None = None
        self.admin: ClusterAdmin | None = None

    def run(self) -> None:
        self.ctx.observe(F, topology(self.ctx.run_tag, self.args))
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / DONE).unlink(missing_ok=True)
        (self.home / CLIENT_PID).write_text(f"{os.getpid()}\n")
        ports = self.wait_for_cluster()
        if ports is None:
            return
        self.rest = flink_cluster.Rest(ports)
        props = Path(tempfile.mkdtemp(prefix="txnlab-flink-job-")) / "kafka.properties"
        props.touch(mode=0o600)
        props.write_text(render_properties(self.ctx.conn.java_properties()))
        try:
            while not self.ctx.stopping():
                self.watch(ports, props)
                self.ctx.stop.wait(POLL_S)
            self.drain_and_cancel(ports, props)
        finally:
            props.unlink(missing_ok=True)
            props.parent.rmdir()
            if self.admin is not None:
                self.admin.close()
            (self.home / DONE).touch()

    def wait_for_cluster(self) -> flink_cluster.Ports | None:
        """The cluster's ports once its JobManager's REST API answers (None: stopped first). The job is submitted
        then, while the TaskManagers may still be starting: it waits for their slots."""
        deadline = Deadline(START_WAIT_S)
        while not self.ctx.stopping():
            ports = flink_cluster.recorded_ports(self.home)
            if ports is not None:
                try:
                    flink_cluster.Rest(ports).taskmanagers()
                    return ports
                except flink_cluster.FlinkError:
                    pass
            if deadline.expired:
                raise FlinkWorkloadError(f"no Flink JobManager answering after {START_WAIT_S:g} s ({self.home}): is "
                                         "the run's jobmanager process running?")
            self.ctx.stop.wait(POLL_S)
        return None

    # -- watching ------------------------------------------------------------------------------------------
    def watch(self, ports: flink_cluster.Ports, props: Path) -> None:
        try:
            jobs = self.rest.jobs()
        except flink_cluster.FlinkError as exc:
            if self.reachable:
                self.reachable = False
                self.ctx.observe(F, {"event": "unreachable", "error": str(exc)[:300]})
            return
        if not self.reachable:
            self.reachable = True
            self.ctx.observe(F, {"event": "reachable"})
        mine = {j["jid"]: j for j in jobs if j.get("name") == self.name}
        if self.job_id is None or self.job_id not in mine:
            running = [j for j in mine.values() if j.get("state") not in ("FAILED", "CANCELED", "FINISHED")]
            if running:                                     # a restarted client: adopt the job
                self.adopt(running[0]["jid"])
            elif self.job_id is not None or not mine:       # lost with its JobManager, or never submitted
                self.submit(ports, props)
            return
        self.note_state(mine[self.job_id].get("state"))
        if self.state in ("FAILED", "CANCELED", "FINISHED"):
            self.submit(ports, props)
            return
        self.note_checkpoints()
        self.note_failures()

    def adopt(self, job_id: str) -> None:
        self.job_id, self.state = job_id, None
        self.ctx.observe(F, {"event": "adopted", "job_id": job_id})

    def note_state(self, state: str | None) -> None:
        if state != self.state:
            self.ctx.observe(F, {"event": "state", "job_id": self.job_id, "from": self.state, "to": state})
            self.state = state

    def note_checkpoints(self) -> None:
        try:
            data = self.rest.call(f"/jobs/{self.job_id}/checkpoints")
        except flink_cluster.FlinkError:
            return
        restored = (data.get("latest") or {}).get("restored") or {}
        if restored.get("id") is not None and restored.get("restore_timestamp") != self.restored:
            self.restored = restored.get("restore_timestamp")
            self.ctx.observe(F, {"event": "restored", "job_id": self.job_id, "checkpoint": restored["id"],
                                 "external_path": restored.get("external_path")})
        for c in sorted(data.get("history") or [], key=lambda c: c.get("id", 0)):
            if c.get("status") in ("COMPLETED", "FAILED") and (self.job_id, c.get("id")) not in self.seen_checkpoints:
                self.seen_checkpoints.add((self.job_id, c.get("id")))
                self.ctx.observe(F, {"event": "checkpoint", "job_id": self.job_id, "checkpoint": c["id"],
                                     "status": c["status"], "trigger_ms": c.get("trigger_timestamp"),
                                     "ack_ms": c.get("latest_ack_timestamp"),
                                     "duration_ms": c.get("end_to_end_duration"),
                                     "savepoint": bool(c.get("is_savepoint")),
                                     **({"failure": c.get("failure_message")[:300]} if c.get("failure_message") else {})})
                if c["status"] == "COMPLETED" and not self.ready:     # the run's clock starts now (chaos/workloads/plans.py)
                    self.ready = True
                    self.ctx.observe(READY_F, {"job_id": self.job_id, "checkpoint": c["id"]})

    def note_failures(self) -> None:
        try:
            data = self.rest.call(f"/jobs/{self.job_id}/exceptions")
        except flink_cluster.FlinkError:
            return
        for entry in sorted((data.get("exceptionHistory") or {}).get("entries") or [],
                            key=lambda e: e.get("timestamp") or 0):
            key = (entry.get("timestamp"), entry.get("exceptionName"))
            if key in self.seen_failures:
                continue
            self.seen_failures.add(key)
            self.ctx.observe(F, {"event": "failure", "job_id": self.job_id,
                                 "exception": str(entry.get("exceptionName"))[:300],
                                 "task": entry.get("taskName"), "time_ms": entry.get("timestamp"),
                                 "cause": first_cause(entry.get("stacktrace") or "")})

    # -- submitting ----------------------------------------------------------------------------------------
    def submit(self, ports: flink_cluster.Ports, props: Path) -> None:
        checkpoint = flink_cluster.latest_checkpoint(self.home)
        self.ctx.invoke(SUBMIT_F, {"from_checkpoint": checkpoint})
        job_args = ["--name", self.name, "--inputs", ",".join(self.args.inputs), "--output", self.args.output,
                    "--counts", self.args.counts, "--group", group(self.ctx.run_tag, self.args),
                    "--txn-prefix", txn_prefix(self.ctx.run_tag, self.args), "--keys", str(self.args.keys),
                    "--checkpoint-ms", str(self.args.checkpoint_ms),
                    "--transaction-timeout-ms", str(self.args.transaction_timeout_ms),
                    "--properties", str(props), "--jar", str(versions.flink_connector_jar())]
        command = flink_cluster.run_command(ports, Path(__file__).parent / "flink_job" / "job.py", job_args, checkpoint)
        try:
            proc = subprocess.run(command, env=flink_cluster.environment(self.home, "client"), capture_output=True,
                                  text=True, timeout=SUBMIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.ctx.complete("fail", SUBMIT_F, {"from_checkpoint": checkpoint,
                                                 "error": f"flink run took over {SUBMIT_TIMEOUT_S:g} s"})
            return
        found = re.search(r"JobID ([0-9a-f]{32})", proc.stdout + proc.stderr)
        if proc.returncode != 0 or not found:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
            self.ctx.complete("fail", SUBMIT_F, {"from_checkpoint": checkpoint, "exit_code": proc.returncode,
                                                 "error": tail[-1500:]})
            self.ctx.stop.wait(2.0)
            return
        self.job_id, self.state = found.group(1), None
        self.ctx.complete("ok", SUBMIT_F, {"from_checkpoint": checkpoint, "job_id": self.job_id})

    # -- stopping ------------------------------------------------------------------------------------------
    def drain_and_cancel(self, ports: flink_cluster.Ports, props: Path) -> None:
        """Let the job take in every committed input before cancelling it (a job its JobManager lost, stopped
        just after it came back, is submitted again first, as while running): the inputs' LSO unchanged for
        STABLE_S and equal to their HWM (the feeder stopped, its last transaction ended), then the group's committed offsets past each partition's last committed
        record (the source commits them when a checkpoint completes, together with the sink's transactions),
        then one more checkpoint completed (that commit done). Flink's own record of what it processed is its
        checkpoint; the group's offsets say the same only once the job has drained, so the stop says whether it
        did (verify: a job not drained leaves what it processed untold)."""
        started = time.monotonic()
        deadline = Deadline(self.args.drain_s)
        targets, reached_ms, left = None, None, None
        phases: dict[str, float] = {}        # seconds from the stop to: the inputs' ends known, the offsets there
        while self.job_id is not None and not deadline.expired:
            try:
                self.watch(ports, props)
                if targets is None:
                    targets = self.last_inputs(deadline)
                    phases["inputs_s"] = round(time.monotonic() - started, 1)
                    continue
                if reached_ms is None:
                    left = self.behind(targets)
                    if not left:
                        reached_ms = time.time() * 1000
                        phases["offsets_s"] = round(time.monotonic() - started, 1)
                    continue
                self.note_checkpoints()
                history = self.rest.call(f"/jobs/{self.job_id}/checkpoints").get("history") or []
                if any(c.get("status") == "COMPLETED" and (c.get("trigger_timestamp") or 0) > reached_ms
                       for c in history):
                    break
            except (TxnlabError, OSError, KafkaException, KafkaError):
                pass
            finally:
                time.sleep(DRAIN_POLL_S)
        drained = reached_ms is not None and not deadline.expired
        self.note_checkpoints()
        if self.job_id is not None:
            try:
                self.rest.call(f"/jobs/{self.job_id}?mode=cancel", method="PATCH")
            except flink_cluster.FlinkError:
                pass
        value = {"event": "stopped", "job_id": self.job_id, "application_id": group(self.ctx.run_tag, self.args),
                 "drained": drained, "seconds": round(time.monotonic() - started, 1), **phases}
        if not drained:
            value["behind"] = left if left is not None else "the inputs' last records were not read"
        self.ctx.observe(F, value)

    def last_inputs(self, deadline: Deadline) -> dict[str, dict[int, int]]:
        """{topic: {partition: offset after its last committed record}} once the inputs' LSO held still with no
        transaction open (LSO = HWM): a feeder's last transaction, still committing after its SIGTERM, holds the LSO
        still too (seen in the CI of 68569d2: a 3.5 s commit, the drain done before it, its inputs processed by
        the job but not in the group's offsets when it was cancelled)."""
        counts = partition_counts(self.ctx.conn, list(self.args.inputs))
        lso = None
        while not deadline.expired:
            now = {t: partition_offsets(self.ctx.conn, t, list(range(n)), committed=True, timeout=3.0)
                   for t, n in counts.items()}
            hwm = {t: partition_offsets(self.ctx.conn, t, list(range(n)), committed=False, timeout=3.0)
                   for t, n in counts.items()}
            if now == lso and now == hwm:
                break
            lso = now
            time.sleep(STABLE_S)
        ends: dict[str, dict[int, int]] = {}
        for topic in counts:
            for record in read_to_end(self.ctx.conn, topic, committed=True, timeout=max(1.0, deadline.left())):
                ends.setdefault(topic, {})[record.partition] = max(ends.get(topic, {}).get(record.partition, 0),
                                                                  record.offset + 1)
        return ends

    def behind(self, targets: dict[str, dict[int, int]]) -> dict[str, dict[str, int]]:
        """Per input partition, how far the group's committed offset is behind its last committed record."""
        self.admin = self.admin or ClusterAdmin(self.ctx.conn, request_timeout_ms=5000)
        name = group(self.ctx.run_tag, self.args)
        committed = self.admin.group_offsets([name], set(targets)).get(name, {})
        left: dict[str, dict[str, int]] = {}
        for topic, parts in targets.items():
            for partition, end in parts.items():
                at = committed.get(topic, {}).get(str(partition), 0)
                if at < end:
                    left.setdefault(topic, {})[str(partition)] = end - at
        return left


def first_cause(stacktrace: str) -> str:
    """The innermost "Caused by:" line of a Java stack trace (else its first line), shortened."""
    causes = [line.strip()[len("Caused by: "):] for line in stacktrace.splitlines() if line.strip().startswith("Caused by: ")]
    return (causes[-1] if causes else stacktrace.strip().split("\n", 1)[0])[:300]
