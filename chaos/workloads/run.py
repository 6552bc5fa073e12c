"""A run: its directory, its one history writer, and the workload processes it starts, stops and pauses.

Owns: the run directory layout (history/, spec.json, cluster.json, end_offsets.json, group_offsets.json, archive/,
logs/, pids/) and its workloads' scratch folder (their TMPDIR, removed when the run finishes),
starting each workload as its own process (`python -m chaos.workloads ...`, through the one process
supervisor, so it can be stopped, killed or paused by pid), and finishing a run: stop every workload,
complete outstanding invokes as info, record the end offsets (HWM and LSO) of every topic the run used
and the committed offsets of the run's consumer groups (those named "<run tag>.*"), then archive both views
of those topics to those ends (archive/: chaos/record/archive.py; `txnlab verify --offline`); while the workloads
run, a sampler thread records those groups' committed offsets every GROUP_SAMPLE_S into the history
(process "observer-groups", ok `group_offsets` {group: {topic: {partition: offset}}}, or ok
`group_offsets_error` {error} when a sample failed; chaos/record/recovery.py reads them), and notes each group's
protocol as ListGroups tells it (cluster.json's `group_protocols`: {group: [type, ...]} in the order seen).
Restarts, as an orchestrator would: with `restart_stalled(delay_s)`, a workload process that exits with
EXIT_STALL (a client call stalled: chaos/workloads/base.py) is started again after delay_s under the same
name and options (so the same transactional.id: its init_transactions fences the stuck producer's epoch), its
outstanding invokes completed as info first; each restart is recorded as an `ok` observation of that
process, f = "restart" {reason: "stall", exit_code, delay_s, restarts: how many so far}.
Must not: decide what a run should do (experiment specs and schedules are the runner's, issue 5), or
check the history (spark_analysis/ does).
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
import secrets
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from chaos.record.history import HistoryError, HistoryWriter
from chaos.record.recovery import GROUP_ERROR_F, GROUP_F, GROUP_OBSERVER, RESTART_F
from chaos.workloads import CLIENT_LOG_VARIABLE
from chaos.workloads.base import EXIT_STALL
from chaos.workloads.plans import WorkloadSpec, without_option
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.lab.heal import run_steps
from cluster.access.reads import partition_ends
from cluster.access.smoke import ensure_topic
from cluster.lab.supervisor import Supervisor
from cluster.lab.versions import JAVA_CLIENTS_VARIABLE, KAFKA_VERSION_VARIABLE, REPO_ROOT, pinned
from cluster.access.waiting import Deadline
from chaos.workloads.topics import partition_counts
from cluster.access.progress import Progress


GROUP_SAMPLE_S = 2.0
RESTART_CHECK_S = 0.5
STOP_TIMEOUT_S = 50.0      # how long a stopped workload may take to exit (a Flink job drains first: chaos/workloads/flink.py)


@dataclass
class RunInfo:
    run_tag: str
    seed: int
    name: str
    started_wall: float
    topics: list[str] = field(default_factory=list)
    specs: list[dict] = field(default_factory=list)
    params: dict = field(default_factory=dict)


def new_run_dir(base: Path, name: str, run_tag: str) -> Path:
    path = Path(base) / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{run_tag}"
    path.mkdir(parents=True, exist_ok=False)
    return path


def new_run_tag() -> str:
    return "r" + secrets.token_hex(3)


class Run:
    """One run against one cluster. Use as a context manager: leaving it always finishes the run."""

    def __init__(self, conn: ConnectionSettings, run_dir: Path, run_tag: str, seed: int, name: str,
                 progress: Progress = lambda msg: None, kafka_version: str | None = None,
                 java_clients: str | None = None, settings: dict | None = None):
        """kafka_version: the release the cluster runs, when txnlab knows it (a local cluster); java_clients:
        the release whose jars the workloads' Java clients and Kafka Streams run, default kafka_version (else
        the pin); settings: the broker settings and features the cluster was brought up with, when txnlab
        brought it up ({broker_config, features}). All recorded in cluster.json."""
        self.conn, self.dir, self.progress = conn, Path(run_dir), progress
        self.kafka_version = kafka_version
        self.settings = settings or {}
        self.java_clients = java_clients or kafka_version
        self.java_clients_asked = java_clients            # the Java-client workloads run this release, else the pin
        self.info = RunInfo(run_tag, seed, name, time.time())
        self.history = HistoryWriter(self.dir)
        self.socket = self.history.serve()
        self.supervisor = Supervisor(self.dir / "pids")
        # the workloads' temporary files (TMPDIR), made when the first one starts: a Streams instance's state
        # and RocksDB's native library among them; removed when the run finishes, also what a killed workload
        # never removed itself
        self.scratch: Path | None = None
        self.finished = False
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None
        self._restarting = threading.Event()           # set: the restarter stops
        self._restarter: threading.Thread | None = None
        self.pending_restarts: set[str] = set()
        self.restarted_at: dict[str, int] = {}          # process -> history time of its last restart after a stall
        self._groups_seen: set[str] = set()           # the run's consumer groups listed so far
        self.group_protocols: dict[str, list[str]] = {}   # group -> its protocols (ListGroups' type) in the order seen

    # ---- topics ------------------------------------------------------------------------------------
    def create_topics(self, topics: dict[str, int], leader_shifts: dict[str, int] | None = None) -> None:
        """leader_shifts: topic -> shift of its partitions' preferred leaders (cluster/access/smoke.py ensure_topic);
        the others get Kafka's default assignment."""
        for topic, partitions in topics.items():
            ensure_topic(self.conn, topic, partitions=partitions, leader_shift=(leader_shifts or {}).get(topic))
            self.use_topics([topic])
        self.progress(f"topics ready: {', '.join(topics)}")

    def use_topics(self, topics: list[str]) -> None:
        self.info.topics += [t for t in topics if t not in self.info.topics]

    # ---- workload processes ---------------------------------------------------------------------------
    def start(self, spec: WorkloadSpec, duration: float = 0.0) -> None:
        argv = [sys.executable, "-m", "chaos.workloads", spec.workload, "--socket", str(self.socket),
                "--run-start-ns", str(self.history.run_start_ns), "--run-tag", self.info.run_tag,
                "--process", spec.process, "--seed", str(self.info.seed), "--duration", str(duration), *spec.args]
        if self.scratch is None:
            self.scratch = Path(tempfile.mkdtemp(prefix=f"txnlab-run-{self.info.run_tag}-"))
        env = {**_base_env(), **self.conn.to_env(), "TMPDIR": str(self.scratch)}
        if self.java_clients:
            env[KAFKA_VERSION_VARIABLE] = self.java_clients
        if self.java_clients_asked:
            env[JAVA_CLIENTS_VARIABLE] = self.java_clients_asked
        self.supervisor.start(spec.process, argv, self.dir / "logs" / f"{spec.process}.log", cwd=REPO_ROOT, env=env)
        self.info.specs.append(asdict(spec))

    def alive(self) -> list[str]:
        return [name for name in self.supervisor.names() if self.supervisor.is_running(name)]

    def last_spec(self, process: str) -> WorkloadSpec | None:
        """What the run last started under `process`."""
        specs = [s for s in self.info.specs if s["process"] == process]
        return WorkloadSpec(specs[-1]["workload"], process, tuple(specs[-1]["args"])) if specs else None

    def restart(self, process: str, options: dict[str, str] | None = None) -> None:
        """Start `process` again with its last options (`options` given new values, e.g. {"--group-protocol":
        "consumer"}) and its next --incarnation (its ids apart from the earlier ones': chaos/record/ids.py);
        KeyError: the run never started it."""
        spec = self.last_spec(process)
        if spec is None:
            raise KeyError(process)
        incarnation = sum(1 for s in self.info.specs if s["process"] == process)
        args = without_option(spec.args, "--incarnation")
        for name, value in (options or {}).items():
            args = (*without_option(args, name), name, value)
        self.start(WorkloadSpec(spec.workload, process, (*args, "--incarnation", str(incarnation))))

    # ---- restarts after a stall ---------------------------------------------------------------------
    def restart_stalled(self, delay_s: float) -> None:
        """Restart every workload process that exits with EXIT_STALL, delay_s after it ended (module docstring),
        until stop_restarting (or stop_all)."""
        if self._restarter is None:
            self._restarter = threading.Thread(target=self._restart_loop, args=(delay_s,), name="restarter",
                                               daemon=True)
            self._restarter.start()

    def stop_restarting(self) -> None:
        self._restarting.set()
        if self._restarter is not None:
            self._restarter.join(timeout=15)

    def _restart_loop(self, delay_s: float) -> None:
        handled: set[int] = set()                       # pids whose exit was dealt with
        restarts: dict[str, int] = {}
        while not self._restarting.wait(RESTART_CHECK_S):
            for name in self.supervisor.names():
                rec = self.supervisor.record(name)
                if rec is None or rec.pid in handled or self.supervisor.exit_code(name) != EXIT_STALL:
                    continue
                handled.add(rec.pid)
                self.pending_restarts.add(name)
                try:
                    if self._restarting.wait(delay_s):
                        return
                    restarts[name] = restarts.get(name, 0) + 1
                    self._restart_after_stall(name, delay_s, restarts[name])
                finally:
                    self.pending_restarts.discard(name)

    def _restart_after_stall(self, name: str, delay_s: float, count: int) -> None:
        try:
            self.history.complete_outstanding(name, "stalled")
            self.restart(name)
            op = self.history.record(name, "ok", RESTART_F, {"reason": "stall", "exit_code": EXIT_STALL,
                                                             "delay_s": delay_s, "restarts": count})
            self.restarted_at[name] = op["time"]
            self.progress(f"{name}: a client call stalled; restarted after {delay_s:g} s (restart {count})")
        except HistoryError:
            return                                       # the history is closed: the run is over
        except Exception as exc:                         # noqa: BLE001 - a failed restart is recorded, never lost
            error = f"{type(exc).__name__}: {exc}"
            try:
                self.history.record(name, "fail", RESTART_F, {"reason": "stall", "exit_code": EXIT_STALL,
                                                              "delay_s": delay_s, "restarts": count, "error": error})
            except HistoryError:
                return
            self.progress(f"{name}: a client call stalled; its restart failed: {error}")

    def awaiting_restart(self, commit_f: tuple[str, ...]) -> list[str]:
        """Processes about to be restarted after a stall, or restarted and running but without an `ok` of
        commit_f since (chaos/runner/experiment.py lets them come back before quiescence)."""
        waiting = set(self.pending_restarts)
        for name, at in list(self.restarted_at.items()):
            since = max((t for t in (self.history.last_ok(name, f) for f in commit_f) if t is not None), default=-1)
            if since < at and self.supervisor.is_running(name):
                waiting.add(name)
        return sorted(waiting)

    def stop(self, process: str, timeout: float = 20.0) -> bool:
        """SIGTERM (the process ends its work and exits), SIGKILL after `timeout`: True when it exited by itself."""
        return self.supervisor.stop(process, timeout=timeout)

    def stop_all(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Every workload, resumed first (a stopped process cannot exit), all at once; the restarter and the
        group sampler first."""
        self.stop_restarting()
        self.stop_sampling_groups()
        names = self.supervisor.names()
        for name in names:
            self.supervisor.resume(name)
        if names:
            with ThreadPoolExecutor(max_workers=len(names)) as pool:
                list(pool.map(lambda name: self.supervisor.stop(name, timeout=timeout), names))

    def kill(self, process: str) -> bool:
        """SIGKILL a workload process with the processes it started; its outstanding invokes (its JVM's too)
        completed as info, as it will never complete them. False when it was not running."""
        if not self.supervisor.is_running(process):
            return False
        self.supervisor.kill(process)
        self.history.complete_outstanding(process, "killed")
        return True

    def pause(self, process: str) -> bool:
        return self.supervisor.pause(process)

    def resume(self, process: str) -> bool:
        return self.supervisor.resume(process)

    def wait(self, seconds: float, tick: Callable[[float], None] | None = None) -> None:
        """Let the workloads run; returns early when every one of them has ended."""
        deadline = Deadline(seconds)
        while not deadline.expired and (self.alive() or self.pending_restarts):
            deadline.sleep(1.0)
            if tick:
                tick(deadline.left())

    # ---- group offsets over time ----------------------------------------------------------------------
    def sample_group_offsets(self, every_s: float = GROUP_SAMPLE_S) -> None:
        """Record the run's groups' committed offsets every `every_s` until stop_sampling_groups (or stop_all)."""
        if self._sampler is None:
            self._sampler = threading.Thread(target=self._sample_loop, args=(every_s,), name="group-sampler",
                                             daemon=True)
            self._sampler.start()

    def stop_sampling_groups(self) -> None:
        self._sampling.set()
        if self._sampler is not None:
            self._sampler.join(timeout=15)

    def _sample_loop(self, every_s: float) -> None:
        admin: ClusterAdmin | None = None
        try:
            while not self._sampling.wait(every_s):
                try:
                    admin = admin or ClusterAdmin(self.conn, request_timeout_ms=5000, bootstrap_timeout_ms=5000)
                    self.history.record(GROUP_OBSERVER, "ok", GROUP_F, self._group_offsets(admin))
                except HistoryError:
                    return                                 # the history is closed: the run is over
                except Exception as exc:  # noqa: BLE001 - a broker down mid-sample: a gap, then a fresh client
                    if admin is not None:
                        admin.close()
                    admin = None
                    self._record_gap(exc)
        finally:
            if admin is not None:
                admin.close()

    def _record_gap(self, exc: Exception) -> None:
        """A failed sample is recorded (an observation, no invoke): recovery must tell a gap from "no advance"."""
        try:
            self.history.record(GROUP_OBSERVER, "ok", GROUP_ERROR_F, {"error": f"{type(exc).__name__}: {exc}"[:300]})
        except HistoryError:
            pass                                       # the history is closed: the run is over

    # ---- finishing --------------------------------------------------------------------------------------
    def finish(self) -> dict:
        """Stop every workload (resumed first, SIGTERM, then SIGKILL), close the history, record end offsets."""
        if self.finished:
            return {}
        self.finished = True
        self.stop_all()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        completed = self.history.close()
        summary: dict[str, object] = {"operations": self.history.count, "completed_at_shutdown": completed}
        files = {"spec.json": lambda: asdict(self.info), "cluster.json": self._cluster_info,
                 "end_offsets.json": self._end_offsets, "group_offsets.json": self._group_offsets}
        not_written = run_steps([(name, partial(self._write_from, name, make, summary)) for name, make in files.items()])
        if not_written:                      # each file on its own: verify says `unknown` for a missing one
            summary["not_written"] = not_written
            self.progress(f"run files not written: {not_written}")
        if "end_offsets" in summary:
            summary["archive"] = self._archive()
        self.progress(f"run finished: {summary['operations']} operations, {completed} completed as info at shutdown")
        return summary

    def _archive(self) -> str:
        """The run's archive (chaos/record/archive.py): what verify reads from the cluster, so that the run can be
        verified without it; "written", or why not (`txnlab verify --offline` then says unknown, and why)."""
        try:
            from chaos.record.archive import write_archive
        except ImportError as exc:           # the lab's install without verify has no pyarrow
            return f"not written: {exc}"
        try:
            write_archive(self.dir, self.conn, self.progress)
        except Exception as exc:  # noqa: BLE001 - the run's files stand; only the offline verification is lost
            self.progress(f"archive not written: {type(exc).__name__}: {exc}")
            return f"not written: {type(exc).__name__}: {exc}"
        return "written"

    def _write_from(self, name: str, make: Callable[[], object], summary: dict) -> None:
        data = make()
        self._write(name, data)
        if name == "end_offsets.json":
            summary["end_offsets"] = data

    def _end_offsets(self) -> dict:
        if not self.info.topics:
            return {}
        counts = partition_counts(self.conn, self.info.topics)
        return {topic: partition_ends(self.conn, topic, list(range(n))) for topic, n in counts.items()}

    def _group_offsets(self, admin: ClusterAdmin | None = None) -> dict:
        """{group: {topic: {partition: committed offset}}} of the run's groups on the run's topics."""
        if admin is None:
            with ClusterAdmin(self.conn) as admin:
                return self._group_offsets(admin)
        mine = [g for g in admin.client.list_groups() if g["group_id"].startswith(f"{self.info.run_tag}.")]
        # a group seen once is asked for every time: a listing that leaves it out (a broker just back that does
        # not answer ListGroups yet) would read as a group with no offsets (seen in a librdkafka-5456 try)
        self._groups_seen |= {g["group_id"] for g in mine}
        for g in mine:
            seen_types(self.group_protocols.setdefault(g["group_id"], []), g.get("group_type"))
        return admin.group_offsets(sorted(self._groups_seen), set(self.info.topics))

    def _cluster_info(self) -> dict:
        with ClusterAdmin(self.conn) as admin:
            brokers = admin.registered_brokers()
            controller = admin.active_controller()
        return {"connection": self.conn.describe(), "bootstrap": self.conn.bootstrap, "brokers": brokers,
                "active_controller": controller, "kafka_version": self.kafka_version,
                "java_clients": self.java_clients,
                "java_client_workloads": self.java_clients_asked or pinned()["KAFKA_VERSION"], "versions": pinned(),
                "group_protocols": self.group_protocols,
                **self.settings}

    def _write(self, name: str, data: object) -> None:
        (self.dir / name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def seen_types(seen: list[str], group_type: str | None) -> None:
    """Append a group's type as ListGroups told it (classic, consumer, streams; none before Kafka 4.0) when it differs
    from the last one seen: the protocols it ran on, in order (a migration's classic -> consumer -> classic)."""
    if group_type and (not seen or seen[-1] != group_type):
        seen.append(group_type)


def _base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "JAVA_HOME", "TXNLAB_HOME", "VIRTUAL_ENV", "TMPDIR",
            "LD_LIBRARY_PATH", KAFKA_VERSION_VARIABLE,   # LD_LIBRARY_PATH: a client library built by hand (docs/bugs.md)
            CLIENT_LOG_VARIABLE)
    return {k: v for k, v in os.environ.items() if k in keep}
