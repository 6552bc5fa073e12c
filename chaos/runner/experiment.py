"""The experiment runner: `txnlab chaos run SPEC|NAME`.

Owns: executing a validated experiment: bring up (local) or check (existing, disposable) the cluster,
start the workloads (and wait for those a plan names ready: a Flink job's first checkpoint), steady-state
probes before, the fault schedule on the run's clock (from then) with every fault
start and heal recorded in the history (each fault its own process "nemesis-<n>"; heals run beside
the schedule, so a slow restart delays no other fault; heal-all, quiescence and probes are "nemesis"), quiescence (heal everything, stop the
workloads so their transactions finish, wait until LSO == HWM on the run's topics or record which
partitions stay open), probes after, and experiment.json in the run directory.
ALWAYS heals: every fault that started is healed (idempotently) and the backend heals the cluster
(SIGCONT, toxics removed, nodes started) on a normal end, on an exception, on Ctrl-C, SIGTERM and SIGHUP
(a second signal does not cut the heal short); then the run is finished (workloads stopped, outstanding
operations completed as info, end offsets recorded). Each fault is journaled (chaos/nemesis/journal.py) before it
starts and its entry removed only once its heal succeeded, so after a kill -9 of the runner `txnlab chaos
heal RUN_DIR` heals what is left (and stops the run's workload processes: they are journaled too, from
before the first starts until all are stopped); a fault is healed only once (its heal retried at the end when it
failed), and every heal step runs whether the others failed or not.
Must not: validate specs (chaos/runner/spec.py), decide when faults happen (chaos/runner/schedule.py) or how
(chaos/nemesis/faults.py).
"""
from __future__ import annotations

import importlib
import json
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from chaos.runner import probes
from chaos.record import recovery
from chaos.workloads.native import REFERENCE, prepare_client
from chaos.nemesis.backends import Backend, LocalBackend
from chaos.nemesis.faults import Fault, FaultEnv, make_fault
from chaos.nemesis.journal import WORKLOADS, Journal, active_faults_message, journal_dirs, this_runner
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.run import Run, new_run_dir, new_run_tag
from chaos.runner.schedule import ScheduledFault, build_schedule, describe
from chaos.workloads.plans import plan
from chaos.runner.spec import ExperimentSpec
from chaos.workloads import WORKLOADS as WORKLOAD_MODULES
from chaos.workloads.base import READY_F
from cluster.access.errors import TxnlabError
from cluster.lab.heal import run_steps
from cluster.lab.install import install_kafka
from cluster.access.progress import Progress
from cluster.access.waiting import Deadline

NEMESIS = "nemesis"
READY_TIMEOUT_S = 180.0     # for the plans' ready processes (a Flink cluster, `flink run`, its first checkpoint)


class SteadyStateError(TxnlabError, RuntimeError):
    """The steady-state probes failed before the experiment: nothing was injected."""


class NotReadyError(TxnlabError, RuntimeError):
    """A workload process the method waits for (chaos/workloads/plans.py Plan.ready) was not ready in time: nothing was
    injected."""


def heal_deadline(run_started: float, at_s: float, duration_s: float, now: float) -> float:
    """When a fault starting now heals (monotonic seconds): duration_s after its scheduled start, or after now when it
    starts late (an earlier fault's start blocked the schedule: climb-epoch, rolling-restart): it still lasts its
    duration_s."""
    return max(run_started + at_s, now) + duration_s


@dataclass
class ActiveFault:
    scheduled: ScheduledFault
    fault: Fault
    started: dict
    heal_at: float
    process: str                             # this fault's logical process in the history: nemesis-<n>
    entry: str = ""                          # its journal entry: <run tag>-nemesis-<n>
    healed: bool = False                     # set only once a heal succeeded
    healer: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class ExperimentResult:
    name: str
    seed: int
    run_dir: Path | None
    schedule: list[dict]
    faults: list[dict] = field(default_factory=list)
    probes_before: list[dict] = field(default_factory=list)
    probes_after: list[dict] = field(default_factory=list)
    quiescence: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    recovery: dict = field(default_factory=dict)      # chaos/record/recovery.py: liveness after each fault
    restart_settle: dict = field(default_factory=dict)   # the wait for processes restarted late (_settle_restarts)
    alerts: list[str] = field(default_factory=list)      # the spec's: alerts its faults are meant to raise
    ready_s: float | None = None                          # the wait for the plans' ready processes (None: none)
    error: str | None = None

    @property
    def steady(self) -> bool:
        return all(p["ok"] for p in self.probes_before + self.probes_after) and not self.error


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C: heal, finish, exit (128 + signum)."""

    def __init__(self, signum: int):
        super().__init__(f"{signal.Signals(signum).name} received")
        self.signum = signum


HEAL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _signals(handlers: dict[signal.Signals, Any]):
    """Install handlers while inside (main thread only: elsewhere signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def _terminate_like_interrupt():
    """SIGTERM and SIGHUP interrupt the run as Ctrl-C does, so it heals before it exits. A signal the
    runner was started ignoring stays ignored (`nohup` ignores SIGHUP; a shell's background job, SIGINT:
    Python then installs no KeyboardInterrupt either)."""
    return _signals({sig: _raise_terminated for sig in (signal.SIGTERM, signal.SIGHUP)
                     if signal.getsignal(sig) is not signal.SIG_IGN})


def _no_interrupts():
    """While healing, a second Ctrl-C, SIGTERM or SIGHUP must not cut the heal short."""
    return _signals({sig: signal.SIG_IGN for sig in HEAL_SIGNALS})


def dry_run(spec: ExperimentSpec, seed: int) -> list[str]:
    """What would run: workloads and the resolved schedule, without touching anything."""
    lines = [f"experiment {spec.name} (seed {seed}, {spec.duration_s:.0f}s)"]
    lines += [f"  workload {w.workload} x{w.instances} {' '.join(w.run_options)}".rstrip()
              + (f" (client {w.client})" if w.client != REFERENCE else "") for w in spec.workloads]
    return lines + [f"  {line}" for line in describe(build_schedule(spec, seed))]


def make_backend(spec: ExperimentSpec, progress: Progress, local_stack: Mapping[str, Any] | None = None) -> Backend:
    """The spec's cluster; a local one is loaded with local_stack (LocalCluster.load's alert_rules and
    exporter_command, passed in from above: report/stack.py)."""
    if spec.cluster.local is not None:
        from cluster.lab.local import LocalCluster
        local = spec.cluster.local
        cluster = LocalCluster.load(local.state_dir, base_port=local.base_port, nodes=local.nodes,
                                    broker_overrides=local.broker_overrides() or None,
                                    features=local.feature_overrides() or None, kafka_version=local.kafka_version,
                                    **dict(local_stack or {}))
        if notice := active_faults_message(cluster.layout.state_dir):    # a paused broker would only time out
            raise TxnlabError(notice)
        cluster.up(progress=lambda m: progress(f"cluster: {m}"), timeout=240)
        return LocalBackend(cluster)
    if spec.cluster.compose is not None:
        from chaos.nemesis.backends import DockerBackend
        return DockerBackend(project=spec.cluster.compose.project)
    from chaos.nemesis.backends import ExistingBackend
    return ExistingBackend(spec.cluster.existing)


def prepare_workloads(spec: ExperimentSpec, release: str | None, progress: Progress) -> None:
    """What the spec's workloads need of a Kafka release's Java clients, made before the method starts, not while
    its clock runs (a workload module's `prepare(release, progress)`, e.g. the Streams app built against that
    release, the Flink install: once, then a no-op); release None: the pin's, made at set-up."""
    if release is not None:
        install_kafka(release, progress=lambda m: progress(f"java clients: {m}"))
    for name in sorted({w.workload for w in spec.workloads}):
        prepare = getattr(importlib.import_module(WORKLOAD_MODULES[name]), "prepare", None)
        if prepare is not None:
            prepare(release, lambda m, name=name: progress(f"{name}: {m}"))
    for client in sorted({w.client for w in spec.workloads}):
        prepare_client(client, lambda m: progress(f"client: {m}"))


class Experiment:
    def __init__(self, spec: ExperimentSpec, seed: int, runs_dir: Path, progress: Progress = print,
                 backend: Backend | None = None, local_stack: Mapping[str, Any] | None = None):
        self.spec, self.seed, self.runs_dir, self.progress = spec, seed, Path(runs_dir), progress
        self.schedule = build_schedule(spec, seed)
        self.backend = backend
        self.local_stack = local_stack
        self.active: list[ActiveFault] = []
        self.journal = Journal([])
        self.runner = this_runner()
        self.result = ExperimentResult(spec.name, seed, None, [asdict(s) for s in self.schedule], alerts=list(spec.alerts))

    # ---- the whole experiment ----------------------------------------------------------------------
    def run(self) -> ExperimentResult:
        with _terminate_like_interrupt():
            return self._run()

    def _run(self) -> ExperimentResult:
        self.backend = self.backend or make_backend(self.spec, self.progress, self.local_stack)
        tag = new_run_tag()
        run_dir = new_run_dir(self.runs_dir, self.spec.name, tag)
        self.result.run_dir = run_dir
        self.progress(f"run {run_dir}")
        described = self.backend.describe()
        self.journal = Journal(journal_dirs(run_dir, described))
        prepare_workloads(self.spec, self.spec.java_clients or described.get("kafka_version"), self.progress)
        run = Run(self.backend.connection(), run_dir, tag, self.seed, self.spec.name, self.progress,
                  kafka_version=described.get("kafka_version"), java_clients=self.spec.java_clients,
                  settings={k: described[k] for k in ("broker_config", "features") if k in described})
        env = FaultEnv.for_run(self.backend, run)
        try:
            self._body(run, env, tag)
        except BaseException as exc:         # Ctrl-C included: record, heal, finish, re-raise
            self.result.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            with _no_interrupts():
                self._heal_everything(run, env)
                self._close(run, run_dir)
        return self.result

    def _close(self, run: Run, run_dir: Path) -> None:
        """Finish the run, clear its workloads' journal entry once none runs, measure recovery, write
        experiment.json: each on its own (one that fails is named in the result's error, the rest run)."""
        def finish() -> None:
            self.result.summary = run.finish()

        def clear_workloads() -> None:
            if run.alive():
                raise RuntimeError(f"workload processes still running: {', '.join(run.alive())}")
            self.journal.clear(self._workloads_entry(run))

        def measure_recovery() -> None:
            self.result.recovery = recovery.of_run(run_dir)
        failed = run_steps([("finish the run", finish), ("clear the workloads' journal entry", clear_workloads),
                            ("recovery", measure_recovery)], attempts=1)
        if failed:
            self.result.error = self.result.error or "; ".join(f"{step}: {error}" for step, error in failed.items())
        self._write(run_dir)

    def _body(self, run: Run, env: FaultEnv, tag: str) -> None:
        run.info.params = {"experiment": self.spec.name, "seed": self.seed, "duration_s": self.spec.duration_s}
        ready = self._start_workloads(run, tag)
        self._await_ready(run, ready)
        if self.spec.restart.on_stall:
            run.restart_stalled(self.spec.restart.delay_s)
        run.sample_group_offsets()               # group offsets over time, for chaos/record/recovery.py
        self.result.probes_before = self._probes(self.spec.probes.before, run)
        if not all(p["ok"] for p in self.result.probes_before):
            raise SteadyStateError(f"steady state does not hold before the experiment: {self.result.probes_before}")
        self._timeline(run, env)
        self._settle_restarts(run)
        self._quiesce(run, env)
        self.result.probes_after = self._probes(self.spec.probes.after, run)

    # ---- workloads -------------------------------------------------------------------------------------
    def _start_workloads(self, run: Run, tag: str) -> list[str]:
        """Start every workload's topics and processes; the processes the method must wait for (Plan.ready)."""
        needed: dict[str, tuple[str, ...]] = {}        # options faults need on the processes they act on
        ready: list[str] = []
        for scheduled in self.schedule:
            for process, args in make_fault(scheduled.kind, scheduled.params).workload_args().items():
                needed[process] = needed.get(process, ()) + args
        self.journal.write({"id": self._workloads_entry(run), "kind": WORKLOADS, "run_dir": str(run.dir),
                            "run_tag": run.info.run_tag, "runner": self.runner, "backend": self.backend.describe(),
                            "steps": [{"step": "stop-run-processes", "run_dir": str(run.dir)}]})
        for entry in self.spec.workloads:
            the_plan = plan(entry.workload, tag, entry.instances, entry.run_options, client=entry.client)
            run.create_topics(the_plan.topics, the_plan.leader_shifts(entry.placement))
            run.use_topics(list(the_plan.tracked))
            for spec in the_plan.specs:
                run.start(WorkloadSpec(spec.workload, spec.process, spec.args + needed.get(spec.process, ())))
            ready += the_plan.ready
        self.progress(f"workloads started: {', '.join(run.alive())}")
        return ready

    def _await_ready(self, run: Run, processes: list[str]) -> None:
        """Until each of `processes` recorded an ok READY_F (a Flink job: its first checkpoint), so a fault's at_s
        counts from a workload at work, not from a start-up whose length a loaded machine decides; NotReadyError
        after READY_TIMEOUT_S or when one of them exited."""
        if not processes:
            return
        self.progress(f"waiting for {', '.join(processes)} to be ready")
        started, deadline = time.monotonic(), Deadline(READY_TIMEOUT_S)
        waiting = processes
        while waiting:
            gone = [p for p in waiting if p not in run.alive()]
            if gone or deadline.expired:
                raise NotReadyError(f"{', '.join(gone or waiting)} " + ("exited" if gone else f"not ready after "
                                    f"{READY_TIMEOUT_S:g} s") + " (its log in the run's logs/): nothing was injected")
            deadline.sleep(0.25)
            waiting = [p for p in waiting if run.history.last_ok(p, READY_F) is None]
        self.result.ready_s = round(time.monotonic() - started, 1)
        run.history.record(NEMESIS, "ok", "ready", {"processes": processes, "seconds": self.result.ready_s})
        self.progress(f"ready after {self.result.ready_s} s: the method's clock starts")

    @staticmethod
    def _workloads_entry(run: Run) -> str:
        """The journal entry of the run's workload processes (stopped by `chaos heal` if the runner dies)."""
        return f"{run.info.run_tag}-{WORKLOADS}"

    # ---- faults on the run's clock -----------------------------------------------------------------------
    def _timeline(self, run: Run, env: FaultEnv) -> None:
        started = time.monotonic()
        pending = list(self.schedule)
        last_report = 0.0
        while True:
            now = time.monotonic() - started
            if now >= self.spec.duration_s:
                break
            while pending and pending[0].at_s <= now:
                self._start_fault(pending.pop(0), run, env, started)
            for active in self.active:
                if active.healer is None and time.monotonic() >= active.heal_at:
                    active.healer = threading.Thread(target=self._heal_fault, args=(active, run, env), daemon=True)
                    active.healer.start()        # heals run beside the schedule: a slow restart delays nothing
            if now - last_report >= 5:
                last_report = now
                self._report(run, now)
            time.sleep(0.2)
        self._join_heals(run, env)

    def _join_heals(self, run: Run, env: FaultEnv) -> None:
        for active in self.active:
            if active.healer is not None:
                active.healer.join()
            self._heal_fault(active, run, env)

    def _start_fault(self, scheduled: ScheduledFault, run: Run, env: FaultEnv, started: float) -> None:
        fault = make_fault(scheduled.kind, scheduled.params)
        process = f"{NEMESIS}-{len(self.active)}"
        heal_at = heal_deadline(started, scheduled.at_s, scheduled.duration_s, time.monotonic())
        active = ActiveFault(scheduled, fault, {}, heal_at, process,
                             entry=f"{run.info.run_tag}-{process}")
        self.active.append(active)           # before the start: a signal inside it still gets it healed
        fault.prepare(env)
        self._journal(active, run, env, "starting")      # before the start: a kill -9 inside it is healable
        value = {"kind": scheduled.kind, "params": scheduled.params, "at_s": scheduled.at_s,
                 "duration_s": scheduled.duration_s}
        run.history.record(process, "invoke", "fault", value)
        try:
            try:
                done = fault.start(env)
            except Exception as exc:  # noqa: BLE001 - a fault that could not start is recorded, then healed
                run.history.record(process, "fail", "fault", {**value, "error": f"{type(exc).__name__}: {exc}"})
                done = {"error": str(exc)}
            else:
                run.history.record(process, "ok", "fault", {**value, **done})
            active.started = done
        finally:
            self._journal(active, run, env, "started")   # what the start did, however it ended
        self.progress(f"fault {scheduled.kind} {done}")
        self.result.faults.append({"kind": scheduled.kind, "at_s": scheduled.at_s, "started": done})

    def _journal(self, active: ActiveFault, run: Run, env: FaultEnv, phase: str) -> None:
        scheduled = active.scheduled
        self.journal.write({"id": active.entry, "run_dir": str(run.dir), "run_tag": run.info.run_tag,
                            "process": active.process, "kind": scheduled.kind, "params": scheduled.params,
                            "at_s": scheduled.at_s, "duration_s": scheduled.duration_s, "phase": phase,
                            "started": active.started, "backend": self.backend.describe(), "runner": self.runner,
                            "steps": active.fault.undo_steps(env)})

    def _heal_fault(self, active: ActiveFault, run: Run, env: FaultEnv) -> bool:
        """Heal one fault unless a heal of it already succeeded (one at a time); True when it is healed.
        A failed heal leaves the fault unhealed and journaled, to be retried."""
        with active.lock:
            if active.healed:
                return True
            value = {"kind": active.scheduled.kind, "started": active.started}
            run.history.record(active.process, "invoke", "heal", value)
            try:
                healed = active.fault.heal(env)
            except Exception as exc:  # noqa: BLE001 - retried by the final heal; the journal keeps it
                run.history.record(active.process, "fail", "heal", {**value, "error": f"{type(exc).__name__}: {exc}"})
                self.progress(f"heal of {active.scheduled.kind} failed (to be retried): {exc}")
                return False
            active.healed = True
            self.journal.clear(active.entry)
        run.history.record(active.process, "ok", "heal", {**value, **healed})
        self.progress(f"healed {active.scheduled.kind} {healed}")
        return True

    def _heal_faults(self, run: Run, env: FaultEnv) -> dict[str, str]:
        """Every fault not yet healed, each on its own; {fault: error} of those still not healed."""
        def heal(active: ActiveFault) -> None:
            if active.healer is not None:
                active.healer.join()
            if not self._heal_fault(active, run, env):
                raise RuntimeError("heal failed (see the history)")
        return run_steps([(f"{a.process} {a.scheduled.kind}", partial(heal, a)) for a in self.active], attempts=1)

    def _heal_everything(self, run: Run, env: FaultEnv) -> None:
        """Each step on its own: the faults' heals, every workload resumed, the backend's heal, then the
        faults' heals once more for any that failed (the cluster may be back now)."""
        self._heal_faults(run, env)
        run_steps([(f"resume {name}", partial(run.resume, name)) for name in run.supervisor.names()])
        try:
            run.history.record(NEMESIS, "invoke", "heal-all", {})
            self.backend.heal(timeout=180)
            run.history.record(NEMESIS, "ok", "heal-all", {})
        except Exception as exc:  # noqa: BLE001 - recorded; the caller sees the error in the result
            error = f"{type(exc).__name__}: {exc}"
            run_steps([("record", lambda: run.history.record(NEMESIS, "fail", "heal-all", {"error": error}))],
                      attempts=1)
            self.result.error = self.result.error or f"heal failed: {exc}"
        left = self._heal_faults(run, env)
        if left:
            self.result.error = self.result.error or f"faults not healed: {', '.join(left)}"
            self.progress(f"faults not healed: {', '.join(left)}; they stay in the journal: run "
                          f"`txnlab chaos heal {run.dir}`")

    def _report(self, run: Run, now: float) -> None:
        current = [a.scheduled.kind for a in self.active if not a.healed]
        self.progress(f"{now:5.0f}s/{self.spec.duration_s:.0f}s  faults: {', '.join(current) or '-'}  "
                      f"operations: {run.history.count}  processes: {len(run.alive())}")

    def _settle_restarts(self, run: Run) -> None:
        """A process restarted after a stall that has not committed again when the duration ends (its restart
        late in the run, its group still rebalancing) gets up to restart.settle_s more before quiescence, as an
        orchestrator's restart is not cut short; the wait is recorded (a nemesis `settle` observation: who
        was waited for, how long, who still had not committed) and said."""
        waiting = run.awaiting_restart(recovery.COMMIT_F)
        if not waiting:
            return
        self.progress(f"waiting up to {self.spec.restart.settle_s:g} s for {', '.join(waiting)}, restarted after "
                      f"a stall, to commit again before quiescence")
        started, deadline = time.monotonic(), Deadline(self.spec.restart.settle_s)
        left = waiting
        while left and not deadline.expired:
            deadline.sleep(0.5)
            left = run.awaiting_restart(recovery.COMMIT_F)
        settled = {"waited_for": waiting, "seconds": round(time.monotonic() - started, 1), "still_waiting": left}
        self.result.restart_settle = settled
        run.history.record(NEMESIS, "ok", "settle", settled)
        self.progress(f"after {settled['seconds']} s: " + (f"{', '.join(left)} still not committing" if left
                                                          else "every restarted process commits again"))

    # ---- quiescence and probes ----------------------------------------------------------------------------
    def _quiesce(self, run: Run, env: FaultEnv) -> None:
        self.progress("quiescence: healing, letting workloads finish their transactions")
        run.history.record(NEMESIS, "invoke", "quiescence", {})     # the recovery horizon (chaos/record/recovery.py)
        self.backend.heal(timeout=180)
        run.stop_all()
        deadline = Deadline(self.spec.quiescence.timeout_s)
        stuck = probes.open_partitions(run.conn, run.info.topics)
        while stuck and not deadline.expired:
            deadline.sleep(1.0)
            stuck = probes.open_partitions(run.conn, run.info.topics)
        self.result.quiescence = {"lso_equals_hwm": not stuck, "open_partitions": stuck}
        run.history.record(NEMESIS, "ok", "quiescence", self.result.quiescence)

    def _probes(self, items: list, run: Run) -> list[dict]:
        results = probes.evaluate_all(items, run.conn, self.backend.node_ids(), run.info.topics,
                                      self.backend.prometheus_url(), run.info.run_tag)
        for result in results:
            run.history.record(NEMESIS, "ok", "probe", asdict(result))
            self.progress(f"probe {result.name}: {'ok' if result.ok else 'FAILED'} ({result.observed})")
        return [asdict(r) for r in results]

    def _write(self, run_dir: Path) -> None:
        data = asdict(self.result)
        data["run_dir"] = str(run_dir)
        (run_dir / "experiment.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
