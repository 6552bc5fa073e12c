"""The journal of active faults: what a heal needs, on disk, so every fault is healed even when txnlab dies.

Owns: one JSON file per fault of a run (`faults/<run tag>-nemesis-<n>.json`), and one for the run's workload
processes (`<run tag>-workloads.json`, written before the first starts, cleared once all are stopped: after a
kill -9 of the runner they would run on for ever), in the run directory and, for
a local cluster, in the cluster's state directory too (`<state_dir>/faults/`), so both `txnlab chaos heal
RUN_DIR` and `txnlab chaos heal --cluster STATE_DIR` find it. An entry is written before the fault starts
(with the steps that might be needed: Fault.undo_steps), rewritten once the start returned (the precise
steps) and removed only after the fault's heal succeeded; every write is a temporary file renamed over
the entry, so a reader sees the old or the new entry, never half of one (a torn file is reported, not
guessed at). Healing from it (`heal_journal`): each step of each entry on its own, retried (cluster/lab/heal.py
run_steps), the failed steps left in their entry with their errors; then the backend's heal of the whole
cluster. Steps: resume-node(s), start-node(s), remove-toxics, remove-all-toxics (also every
proxy back on its node, after a hold-requests fault), resume-process and
stop-process (a pid is signalled only while its create time matches the record), stop-run-processes (every
process recorded in a run's pids/), abort-hanging (the one re-validated abort, cluster/access/abort.py, through
chaos.nemesis.faults.abort_hanging). Every entry names its runner (pid and create time): the entries of a run whose
runner is alive are a run in progress, which a heal does not touch unless forced.
Must not: decide what a fault does or how a live run heals it (chaos/nemesis/faults.py, chaos/runner/experiment.py),
signal a process whose create time does not match, keep an entry whose heal did not succeed, or heal
under a live runner's feet unless forced.
"""
from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import psutil

from cluster.access.errors import TxnlabError
from cluster.access.smoke import ensure_topic
from cluster.lab.features import set_level
from cluster.lab.heal import HealError, run_steps
from cluster.access.progress import Progress
from cluster.lab.supervisor import Supervisor, live_process, send_signal, start_ticks

FAULTS_DIR = "faults"
VERSION = 1
STOP_TIMEOUT_S = 10.0
REQUIRED = ("id", "kind", "steps")
WORKLOADS = "workloads"                   # the kind of a run's workload-processes entry


def this_runner() -> dict:
    """The running process as an entry records its runner: pid, create time and start ticks."""
    return {"pid": os.getpid(), "create_time": psutil.Process(os.getpid()).create_time(),
            "start_ticks": start_ticks(os.getpid())}


def runner_alive(entry: dict) -> int | None:
    """The pid of the entry's runner while that very process still runs, else None."""
    runner = entry.get("runner") or {}
    if runner.get("pid") is None or runner["pid"] == os.getpid():
        return None
    return runner["pid"] if live_process(runner["pid"], runner.get("create_time", 0.0),
                                         runner.get("start_ticks")) else None


class JournalError(TxnlabError, RuntimeError):
    """A journal entry cannot be read or used; the message names the file and what to do."""


def journal_dirs(run_dir: Path, backend: dict) -> list[Path]:
    """Where a run's entries go: the run directory, and the local cluster's state directory."""
    dirs = [Path(run_dir) / FAULTS_DIR]
    if backend.get("backend") == "local" and backend.get("state_dir"):
        dirs.append(Path(backend["state_dir"]) / FAULTS_DIR)
    return dirs


def write_atomic(path: Path, data: dict) -> None:
    """path holds data, or (after any failure) what it held before: temp file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "w") as out:
            out.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


class Journal:
    """The entries of one run, each written to every one of dirs."""

    def __init__(self, dirs: list[Path]):
        self.dirs = [Path(d) for d in dirs]

    def write(self, entry: dict) -> None:
        entry = {**entry, "version": VERSION, "copies": [str(d) for d in self.dirs], "written": time.time()}
        for directory in self.dirs:
            write_atomic(directory / f"{entry['id']}.json", entry)

    def clear(self, entry_id: str) -> None:
        for directory in self.dirs:
            (directory / f"{entry_id}.json").unlink(missing_ok=True)


@dataclass
class Found:
    entries: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)       # entries that cannot be read, one line each


def read_journal(directory: Path) -> Found:
    """Every entry in directory (a faults/ folder); a torn or partial file is a problem, named, not skipped."""
    found = Found()
    for path in sorted(Path(directory).glob("*.json")):
        try:
            entry = json.loads(path.read_text())
            missing = [k for k in REQUIRED if k not in entry] if isinstance(entry, dict) else list(REQUIRED)
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
        except FileNotFoundError:
            continue                                  # cleared meanwhile
        except (ValueError, OSError) as exc:
            found.problems.append(f"{path}: unreadable journal entry (torn or partial write?): {exc}; heal that fault "
                                  "by hand (`txnlab chaos heal --cluster` heals the whole cluster), then delete the file")
        else:
            found.entries.append(entry)
    return found


def describe_entries(entries: list[dict]) -> str:
    return ", ".join(f"{e['kind']} ({e['id']})" for e in entries)


def active_faults_message(state_dir: Path) -> str | None:
    """What `txnlab cluster up|status` says when a chaos run left faults active on this cluster."""
    found = read_journal(Path(state_dir) / FAULTS_DIR)
    if not found.entries and not found.problems:
        return None
    what = describe_entries(found.entries) or f"{len(found.problems)} unreadable entries"
    live = sorted({pid for pid in map(runner_alive, found.entries) if pid})
    if live:
        return (f"a chaos run is in progress on this cluster (runner pid {', '.join(map(str, live))}): {what}; "
                "stop it (Ctrl-C, SIGTERM: it heals), or after it died run "
                f"`txnlab chaos heal --cluster {state_dir}`")
    return (f"faults or workloads of a chaos run are still active on this cluster: {what}; "
            f"run `txnlab chaos heal --cluster {state_dir}`")


# ---- healing without the runner ---------------------------------------------------------------------
def step_name(step: dict) -> str:
    """One line naming a step (unique within its entry): `remove-toxics 18 toxics on n2-client, ...`."""
    if step["step"] == "remove-toxics":
        proxies = sorted({proxy for proxy, _ in step["toxics"]})
        return f"remove-toxics {len(step['toxics'])} toxics on {', '.join(proxies)}"
    details = {k: v for k, v in step.items() if k not in ("step", "run_dir", "create_time", "start_ticks")}
    return step["step"] + (" " + " ".join(f"{k}={v}" for k, v in details.items()) if details else "")


def backend_of(entry: dict) -> Any:
    """The backend an entry was written for (its `backend`: Backend.describe())."""
    from chaos.nemesis import backends
    described = entry.get("backend") or {}
    kind = described.get("backend")
    if kind == "local":
        from cluster.lab.local import LocalCluster
        return backends.LocalBackend(LocalCluster.load(Path(described["state_dir"])))
    if kind == "docker":
        return backends.DockerBackend(project=described.get("project"))
    if kind == "existing":
        return backends.ExistingBackend(SimpleNamespace(bootstrap=described["bootstrap"],
                                                        prometheus_url=described.get("prometheus_url")))
    raise JournalError(f"journal entry {entry['id']} names no backend txnlab knows ({described!r})")


def _process(step: dict) -> psutil.Process | None:
    """The recorded workload process, only while it is the one recorded (start ticks, or create time)."""
    pid, create_time, ticks = step.get("pid"), step.get("create_time"), step.get("start_ticks")
    if pid is None and step.get("run_dir"):                 # journaled before its start recorded the pid
        record = Supervisor(Path(step["run_dir"]) / "pids").record(step["name"])
        pid, create_time, ticks = (record.pid, record.create_time, record.start_ticks) if record else (None,) * 3
    return live_process(pid, create_time, ticks) if pid is not None and create_time is not None else None


def resume_process(step: dict) -> None:
    proc = _process(step)
    if proc is not None:
        send_signal(proc, signal.SIGCONT)


def stop_process(step: dict) -> None:
    """SIGCONT (a stopped process cannot exit), SIGTERM, SIGKILL after STOP_TIMEOUT_S."""
    proc = _process(step)
    if proc is None:
        return
    send_signal(proc, signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT_S)
    except psutil.TimeoutExpired:
        send_signal(proc, signal.SIGKILL)


def stop_run_processes(step: dict) -> None:
    """Every process recorded in the run's pids/ (create time matched) stopped; raises if one is left."""
    supervisor = Supervisor(Path(step["run_dir"]) / "pids")
    for name in supervisor.names():
        supervisor.stop(name, timeout=STOP_TIMEOUT_S)
    left = [name for name in supervisor.names() if supervisor.is_running(name)]
    if left:
        raise JournalError(f"workload processes still running: {', '.join(left)}")


def abort_hanging_step(step: dict, backend: Any) -> None:
    from kafka.structs import TopicPartition
    from chaos.nemesis.faults import abort_hanging
    abort_hanging(backend.connection(), TopicPartition(step["topic"], step["partition"]), step["transactional_id"],
                  step.get("producer_id"))


def action_of(step: dict, backend: Any) -> Callable[[], object]:
    """What one step does, on backend."""
    kind = step["step"]
    on_nodes = {"resume-node": backend.resume, "start-node": backend.start}
    if kind in on_nodes:
        return partial(on_nodes[kind], step["node"])
    if kind in ("resume-nodes", "start-nodes"):
        act = on_nodes[kind[:-1]]
        return lambda: [act(node) for node in backend.node_ids()]
    if kind == "remove-toxics":
        return partial(backend.remove_toxics, [tuple(pair) for pair in step["toxics"]])
    if kind == "remove-all-toxics":
        return backend.heal_network
    if kind == "resume-process":
        return partial(resume_process, step)
    if kind == "stop-process":
        return partial(stop_process, step)
    if kind == "stop-run-processes":
        return partial(stop_run_processes, step)
    if kind == "abort-hanging":
        return partial(abort_hanging_step, step, backend)
    if kind == "create-topic":          # a deleted topic's heal (recreate-topic): created if missing, led everywhere
        return partial(ensure_topic, backend.connection(), step["topic"], partitions=step["partitions"])
    if kind == "set-feature":
        return partial(set_level, backend.connection(), step["feature"], step["level"], expected=step.get("expected"))
    raise JournalError(f"unknown journal step {kind!r}")


@dataclass
class HealReport:
    healed: list[str] = field(default_factory=list)            # entries whose every step succeeded (removed)
    failed: dict[str, dict[str, str]] = field(default_factory=dict)   # entry id -> {step: error} (kept)
    problems: list[str] = field(default_factory=list)          # unreadable entries
    cluster: dict[str, str] | None = None                      # the cluster heal's failures; None: not run
    in_progress: dict[str, int] = field(default_factory=dict)  # entry id -> pid of its live runner (untouched)

    @property
    def nothing_to_do(self) -> bool:
        return not (self.healed or self.failed or self.problems or self.in_progress)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.problems or self.cluster or self.in_progress)

    def lines(self) -> list[str]:
        out = [f"not touched {entry}: its run is in progress (runner pid {pid} is alive; Ctrl-C or SIGTERM "
               "makes it heal; `--force` heals under it)" for entry, pid in self.in_progress.items()]
        out += [f"healed {entry}" for entry in self.healed]
        for entry, steps in self.failed.items():
            out += [f"NOT healed {entry}: {name}: {error} (kept in the journal)" for name, error in steps.items()]
        out += [f"NOT healed: {problem}" for problem in self.problems]
        if self.cluster is not None:
            out += ["cluster healed"] if not self.cluster else [f"cluster heal: {name}: {error}"
                                                                 for name, error in self.cluster.items()]
        return out or ["no active faults in the journal: nothing to heal"]


def heal_entry(entry: dict, backend: Any, directory: Path, attempts: int = 3) -> dict[str, str]:
    """Run every step of entry on its own; clear it when all succeeded, else keep the failed steps in
    every copy. {step name: error} of the failed ones."""
    steps = entry["steps"]
    failures = run_steps([(step_name(s), action_of(s, backend)) for s in steps], attempts=attempts)
    journal = Journal([Path(d) for d in entry.get("copies") or [directory]])
    if failures:
        journal.write({**entry, "steps": [s for s in steps if step_name(s) in failures], "heal_errors": failures})
    else:
        journal.clear(entry["id"])
    return failures


def heal_journal(directory: Path, backend: Any = None, timeout: float = 120.0, progress: Progress = print,
                 attempts: int = 3, force: bool = False) -> HealReport:
    """Heal every entry of a faults/ directory (a run's workload processes stopped first, so they open
    no transaction meanwhile), then the whole cluster (backend, or the entries' own). The entries of a
    run whose runner is alive are left alone, and the cluster too, unless force. Idempotent: with no
    entries there is nothing to do and nothing is touched."""
    found = read_journal(directory)
    report = HealReport(problems=list(found.problems))
    if not force:
        report.in_progress = {e["id"]: pid for e in found.entries if (pid := runner_alive(e))}
    entries = sorted((e for e in found.entries if e["id"] not in report.in_progress),
                     key=lambda e: e["kind"] != WORKLOADS)
    if not entries:
        return report
    backend = backend or backend_of(entries[0])
    for entry in entries:
        progress(f"healing {entry['kind']} ({entry['id']}): {', '.join(step_name(s) for s in entry['steps']) or '-'}")
        failures = heal_entry(entry, backend, Path(directory), attempts)
        if failures:
            report.failed[entry["id"]] = failures
        else:
            report.healed.append(entry["id"])
    if report.in_progress:
        return report                      # the live run's faults are its own to heal
    progress("healing the whole cluster")
    try:
        backend.heal(timeout)
        report.cluster = {}
    except HealError as exc:
        report.cluster = exc.failures
    except Exception as exc:  # noqa: BLE001 - reported, the exit code says it
        report.cluster = {"heal": f"{type(exc).__name__}: {exc}"}
    return report
