"""A real Spark standalone cluster on this machine: one master and N workers from the PySpark install, each a
local process bound to 127.0.0.1 (`txnlab spark up|down|status`), for `txnlab verify --master spark://...`;
with `connect`, a Spark Connect server on it (or alone on local[*]) for `txnlab verify --remote sc://...`.

Owns: running the plan of cluster/lab/spark_layout.py (ports, command lines; the compose stack renders the same):
the daemons' environment here (its loopback settings, this Python, the repo on PYTHONPATH), starting them
through the one supervisor and waiting until the master reports every worker ALIVE, the cluster's state
(spark.json beside the pid records), its status from the master's JSON endpoint, and stopping: workers first,
then the master, by the pids we recorded, and any executor a worker left behind (its descendants).
Must not: run a job (submit.py does) or know what verify checks.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict
from pathlib import Path

import psutil
import requests

from cluster.access.progress import Progress
from cluster.lab.spark_layout import SparkClusterError, StandalonePlan, daemon_settings
from cluster.lab.supervisor import Supervisor
from cluster.lab.versions import txnlab_home
from cluster.access.waiting import NotYet, port_open, wait_until

START_TIMEOUT_S = 90.0


def daemon_environment(log_dir: Path) -> dict[str, str]:
    """Master and workers (and the executors they start): spark-submit's environment for the job (submit.py:
    this Python, the repo importable), with the daemons' loopback settings and their log folder."""
    from spark_analysis.submit import environment, pyspark_home
    env = environment(None) | daemon_settings() | {"SPARK_HOME": str(pyspark_home()), "SPARK_LOG_DIR": str(log_dir)}
    env.setdefault("SPARK_DAEMON_MEMORY", "512m")
    return env


def master_state(plan: StandalonePlan, timeout_s: float = 3.0) -> dict | None:
    """The master's own view (its web UI's /json/: status, workers with their state), None when it does not answer."""
    try:
        answer = requests.get(f"{plan.master_ui}/json/", timeout=timeout_s)
        answer.raise_for_status()
        return answer.json()
    except (requests.RequestException, ValueError):
        return None


def alive_workers(state: dict | None) -> list[dict]:
    return [w for w in (state or {}).get("workers", []) if w.get("state") == "ALIVE"]


class StandaloneCluster:
    """One standalone Spark cluster, known by its state directory (default <TXNLAB_HOME>/spark)."""

    def __init__(self, state_dir: Path | None = None, plan: StandalonePlan | None = None):
        self.state_dir = Path(state_dir or txnlab_home() / "spark").resolve()
        self.supervisor = Supervisor(self.state_dir / "pids")
        self._plan = plan

    @property
    def plan(self) -> StandalonePlan:
        """The plan given, else the one the running cluster was started with, else the default."""
        if self._plan is None:
            saved = self.state_dir / "spark.json"
            self._plan = StandalonePlan(**json.loads(saved.read_text())["plan"]) if saved.exists() \
                else StandalonePlan()
        return self._plan

    def names(self) -> list[str]:
        plan = self.plan
        return [*(["master", *(f"worker-{i}" for i in range(plan.workers))] if plan.standalone else []),
                *(["connect"] if plan.connect else [])]

    def running(self) -> list[str]:
        return [name for name in self.supervisor.names() if self.supervisor.is_running(name)]

    def up(self, progress: Progress = print) -> StandalonePlan:
        """Start the master, then the workers; return once the master reports every worker ALIVE. A cluster
        already running with this state directory is left as it is; a start that fails stops what it began."""
        if self.running():
            if sorted(self.running()) == sorted(self.names()) and self._answering(self.plan):
                progress(f"[spark] already running: {self.plan.connect_url or self.plan.master_url}")
                return self.plan
            raise SparkClusterError(f"a Spark cluster of {self.state_dir} is running ({', '.join(self.running())}) "
                                    f"but not as asked: `txnlab spark down` first")
        from spark_analysis.submit import pyspark_home
        plan, logs = self.plan, self.state_dir / "logs"
        if why := plan.ephemeral_clash():
            raise SparkClusterError(f"the Spark cluster's {why}")
        spark_class, env = str(pyspark_home() / "bin" / "spark-class"), daemon_environment(logs)
        (self.state_dir / "spark.json").parent.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "spark.json").write_text(json.dumps({"plan": asdict(plan), "master": plan.master_url,
                                                               "connect": plan.connect_url}))
        try:
            if plan.standalone:
                self._start_standalone(plan, spark_class, env, logs, progress)
            if plan.connect:
                self._start_connect(plan, env, logs, progress)
        except BaseException:
            self.down(progress=lambda line: None)
            raise
        return plan

    def _answering(self, plan: StandalonePlan) -> bool:
        return (not plan.standalone or len(alive_workers(master_state(plan))) == plan.workers) and \
            (not plan.connect or port_open(plan.connect_port, plan.host))

    def _start_connect(self, plan: StandalonePlan, env: dict[str, str], logs: Path, progress: Progress) -> None:
        """The Connect server, its master this cluster's (or local[*]); ready once its gRPC port listens (it opens
        it after its SparkContext started). Its JVM maps the Connect class archive, or, on local[*], writes it
        when it stops (to archive_writing, put in place by down()); its JIT is C1 only unless the plan says C2."""
        from spark_analysis.submit import (C1_ONLY, archive_options, archive_to_write, class_archive,
                                           connect_server_command)
        archive = class_archive("connect")      # written by a server on local[*] (its JVM runs the tasks too)
        writing = self.archive_writing(archive) if plan.local and archive_to_write(archive) else None
        if writing is not None:
            archive.parent.mkdir(parents=True, exist_ok=True)
            progress(f"[spark] first Connect server with this Spark and Java: its class archive is written when it "
                     f"stops ({archive}), later ones start faster")
        java = (*archive_options(archive, writing),
                *(() if plan.connect_c2 else C1_ONLY))
        # Spark's launcher gives a Connect server (like the Thrift server) SPARK_DAEMON_MEMORY over --driver-memory:
        # with the daemons' 512m every server ran on a 512 MB heap and died verifying 10^6 records
        env = {**env, "SPARK_DAEMON_MEMORY": plan.connect_memory}
        self.supervisor.start("connect", connect_server_command(plan.connect_master, plan.connect_port,
                                                                plan.connect_memory, java), logs / "connect.log", env=env)

        def listening() -> bool | NotYet:
            if not self.supervisor.is_running("connect"):
                raise SparkClusterError(f"the Spark Connect server exited while starting (log: {logs / 'connect.log'})")
            return port_open(plan.connect_port, plan.host) or NotYet(f"port {plan.connect_port} not listening yet")
        wait_until(listening, START_TIMEOUT_S, f"the Spark Connect server at {plan.connect_url}", 0.2,
                   error=SparkClusterError)
        progress(f"[spark] Connect server up: {plan.connect_url} (master {plan.connect_master})")

    def _start_standalone(self, plan: StandalonePlan, spark_class: str, env: dict[str, str], logs: Path,
                          progress: Progress) -> None:
        self.supervisor.start("master", plan.master_argv(spark_class), logs / "master.log", env=env)
        wait_until(lambda: (master_state(plan) or {}).get("status") == "ALIVE", START_TIMEOUT_S,
                   f"the Spark master at {plan.master_url} (log: {logs / 'master.log'})", 0.5,
                   error=SparkClusterError)
        progress(f"[spark] master up: {plan.master_url} (web UI {plan.master_ui})")
        for i in range(plan.workers):
            work = self.state_dir / f"work-{i}"
            work.mkdir(parents=True, exist_ok=True)
            self.supervisor.start(f"worker-{i}", plan.worker_argv(spark_class, i, str(work)),
                                  logs / f"worker-{i}.log", env=env)
        wait_until(lambda: self._all_alive(plan), START_TIMEOUT_S, f"{plan.workers} ALIVE workers", 0.5,
                   error=SparkClusterError)
        progress(f"[spark] {plan.workers} workers ALIVE ({plan.worker_cores} core(s), {plan.worker_memory} each)")

    def _all_alive(self, plan: StandalonePlan) -> bool | NotYet:
        dead = [n for n in self.names() if n != "connect" and not self.supervisor.is_running(n)]
        if dead:
            raise SparkClusterError(f"{', '.join(dead)} exited while starting (logs in {self.state_dir / 'logs'})")
        alive = len(alive_workers(master_state(plan)))
        return alive == plan.workers or NotYet(f"{alive} of {plan.workers} workers ALIVE")

    def archive_writing(self, archive: Path) -> Path:
        """Where this cluster's Connect server writes the Connect class archive at its exit (one per state
        directory: servers of other state directories may write theirs at the same time)."""
        tag = hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:8]
        return archive.with_name(f"{archive.stem}.{tag}.tmp")

    def down(self, progress: Progress = print) -> list[int]:
        """Stop the Connect server, the workers, then the master, by their recorded pids, and any executor a worker
        left behind. Returns the pids that were stopped. A Connect server writing the class archive at its exit
        is given ARCHIVE_EXIT_S; the archive is put in place only when it exited by itself and had served a
        verification that ran its checks (else it would hold the classes of its start alone)."""
        stopped = []
        for name in sorted(self.supervisor.names(), key=lambda n: (n != "connect", n == "master")):  # its clients first
            proc = self.supervisor.process(name)
            if proc is not None:
                descendants = _descendants(proc)
                writing = self._archive_written_by(proc) if name == "connect" else None
                useful = writing is not None and self._verified_since(proc)
                if useful:
                    progress(f"[spark] {name}: writing its class archive as it stops (once)")
                exited = self.supervisor.stop(name, timeout=ARCHIVE_EXIT_S if writing else 30.0)
                if writing is not None:
                    _put_in_place(writing, exited and useful)
                stopped += [proc.pid, *_stop_all(descendants)]
                progress(f"[spark] {name} stopped (pid {proc.pid})")
            self.supervisor.forget(name)
        return stopped

    def _verified_since(self, proc: psutil.Process) -> bool:
        """Whether a verification ran its checks through this cluster's Connect server since it started
        (submit.served_mark)."""
        from spark_analysis.submit import served_mark
        try:
            return served_mark(self.plan.connect_port).stat().st_mtime >= proc.create_time()
        except (OSError, psutil.Error):
            return False

    @staticmethod
    def _archive_written_by(proc: psutil.Process) -> Path | None:
        """The class archive the process writes at its exit (-XX:ArchiveClassesAtExit=...), None when none."""
        try:
            flags = [a for a in proc.cmdline() for a in a.split() if a.startswith("-XX:ArchiveClassesAtExit=")]
        except psutil.Error:
            return None
        return Path(flags[0].split("=", 1)[1]) if flags else None

    def status(self) -> dict:
        """What runs (pid per process), and the master's own view: its status and each worker's state."""
        plan = self.plan
        state = master_state(plan) if plan.standalone else None
        processes = {n: (p.pid if (p := self.supervisor.process(n)) else None) for n in self.names()}
        connect = None if not plan.connect else (
            "ALIVE" if processes.get("connect") and port_open(plan.connect_port, plan.host) else "not answering")
        return {"master": plan.master_url if plan.standalone else plan.connect_master,
                "web_ui": plan.master_ui if plan.standalone else None, "state_dir": str(self.state_dir),
                "connect": plan.connect_url, "connect_status": connect, "processes": processes,
                "status": (state or {}).get("status", "not answering") if plan.standalone else connect,
                "workers": [{"id": w.get("id"), "state": w.get("state"), "cores": w.get("cores"),
                             "memory_mb": w.get("memory")} for w in (state or {}).get("workers", [])],
                "applications": len((state or {}).get("activeapps", []))}


ARCHIVE_EXIT_S = 90.0      # a JVM writing its class archive (~230 MB) at its exit: 17 s measured on 2 idle cores


def _put_in_place(writing: Path, keep: bool) -> None:
    """The archive a Connect server wrote at its exit becomes the one later servers map when `keep`; one cut
    short (the server was killed) or of a server that verified nothing is deleted."""
    archive = writing.with_name(writing.name.split(".")[0] + ".jsa")
    if keep and writing.exists() and writing.stat().st_size > 0:
        os.replace(writing, archive)
    else:
        writing.unlink(missing_ok=True)


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _stop_all(processes: list[psutil.Process], timeout_s: float = 15.0) -> list[int]:
    """Executors a worker started (its descendants, by the pids seen before it was stopped): those still there
    after the worker's own shutdown are terminated, then killed."""
    left = [p for p in processes if p.is_running()]
    for p in left:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(left, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    return [p.pid for p in left]


class SharedConnect:
    """A local Spark Connect server the verifications of one session share (the demo's, a bug run's, the test
    suite's), so none of them pays a JVM start: started in the background (it warms up while the session does
    other work), `remote()` its sc:// URL once it listens, "" when it could not start (the caller then verifies
    with spark-submit, and says so), `stop()` by the pids it recorded. With $TXNLAB_SPARK_REMOTE set, that
    server is the session's and none is started."""

    def __init__(self, state_dir: Path, base_port: int, progress: Progress = print):
        from spark_analysis.submit import remote_from_env
        self.given = remote_from_env()
        self.cluster = StandaloneCluster(state_dir, StandalonePlan(base_port=base_port, connect=True, local=True))
        self.progress = progress
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> "SharedConnect":
        if self.given is None and self._thread is None:
            self._thread = threading.Thread(target=self._up, name="spark-connect", daemon=True)
            self._thread.start()
        return self

    def _up(self) -> None:
        try:
            self.cluster.up(progress=lambda line: None)
        except BaseException as exc:  # noqa: BLE001 - remote() says it; verification falls back to spark-submit
            self._error = exc

    def remote(self) -> str:
        if self.given is not None:
            return self.given
        if self._thread is None:
            return ""
        self._thread.join()
        if self._error is not None:
            self.progress(f"the shared Spark Connect server did not start ({self._error}); verifying with "
                          f"spark-submit")
            return ""
        return self.cluster.plan.connect_url or ""

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self.cluster.down(progress=lambda line: None)
