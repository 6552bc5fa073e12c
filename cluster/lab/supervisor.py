"""The one process supervisor: start detached processes, record their pids, signal only those.

Owns: pid records (a JSON file per process holding pid, start ticks, create time and command), liveness
checks that survive pid reuse (a pid counts as ours only if its start matches the record: its start in clock
ticks since boot, which a step of the wall clock does not move, or, for a record without them, its create
time), and the signals txnlab sends (TERM, KILL, STOP, CONT). Nothing here ever signals a process by name.
Must not: know what Kafka, Toxiproxy or Prometheus are.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from cluster.access.waiting import wait_until


GROUP_SIGNALS = (signal.SIGSTOP, signal.SIGCONT, signal.SIGKILL)


def send_signal(proc: psutil.Process, sig: signal.Signals) -> None:
    """sig to a process we started. STOP, CONT and KILL go to its whole process group when it leads one
    (every process the supervisor starts leads its own session): a workload and the JVMs it runs pause,
    resume and die together, so a paused Kafka Streams workload is a paused Streams instance. TERM goes to
    the process alone: it stops its children itself."""
    try:
        if sig in GROUP_SIGNALS and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
            return
    except ProcessLookupError:
        return
    proc.send_signal(sig)


def start_ticks(pid: int) -> int | None:
    """When process pid started, in clock ticks since boot (/proc/PID/stat's 22nd field), or None when it cannot
    be read. Unlike the create time (boot time + this, in wall-clock seconds) a step of the wall clock leaves it
    alone: a VM restored from a snapshot, or a clock set by its host, moved every create time by 17 s here
    (2026-12-01) and a soak's processes outlived its stop."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def live_process(pid: int, create_time: float, ticks: int | None = None) -> psutil.Process | None:
    """The live process `pid` if it is the one recorded (its start ticks match, or without them its create
    time), else None (gone, zombie, or the pid reused by another process)."""
    try:
        proc = psutil.Process(pid)
        same = start_ticks(pid) == ticks if ticks is not None else abs(proc.create_time() - create_time) <= 0.05
        if not same or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    create_time: float
    argv: list[str]
    log: str
    start_ticks: int | None = None          # None: a record of a txnlab before them (the create time decides)


class Supervisor:
    """Processes of one txnlab state directory, each known by a short name."""

    def __init__(self, pid_dir: Path):
        self.pid_dir = Path(pid_dir)
        self._children: dict[int, subprocess.Popen] = {}
        self._exit_codes: dict[int, int] = {}       # pid -> exit code, of children of this object that ended

    def record(self, name: str) -> ProcessRecord | None:
        path = self.pid_dir / f"{name}.json"
        try:
            return ProcessRecord(**json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.pid_dir.glob("*.json")) if self.pid_dir.exists() else []

    def start(self, name: str, argv: list[str], log: Path, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> ProcessRecord:
        """Start argv detached (own session, survives this process), output appended to log."""
        if self.is_running(name):
            raise RuntimeError(f"{name} is already running (pid {getattr(self.record(name), 'pid', '?')})")
        log.parent.mkdir(parents=True, exist_ok=True)
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=cwd, env=env, start_new_session=True)
        self._children[proc.pid] = proc
        rec = ProcessRecord(name, proc.pid, psutil.Process(proc.pid).create_time(), argv, str(log),
                            start_ticks(proc.pid))
        (self.pid_dir / f"{name}.json").write_text(json.dumps(asdict(rec)))
        return rec

    def process(self, name: str) -> psutil.Process | None:
        """The live process recorded under name, or None (gone, zombie, or pid reused)."""
        rec = self.record(name)
        if rec is None:
            return None
        self._reap(rec.pid)
        return live_process(rec.pid, rec.create_time, rec.start_ticks)

    def is_running(self, name: str) -> bool:
        return self.process(name) is not None

    def exit_code(self, name: str) -> int | None:
        """How the process recorded under name ended (negative: the signal), when this object started it and
        it has ended; None while it runs or when it is not our child (its code cannot be known)."""
        rec = self.record(name)
        if rec is None:
            return None
        self._reap(rec.pid)
        return self._exit_codes.get(rec.pid)

    def is_paused(self, name: str) -> bool:
        proc = self.process(name)
        try:
            return proc is not None and proc.status() == psutil.STATUS_STOPPED
        except psutil.Error:
            return False

    def signal(self, name: str, sig: signal.Signals) -> bool:
        """Send sig to the recorded process if it is still ours; False when it is not running."""
        proc = self.process(name)
        if proc is None:
            return False
        send_signal(proc, sig)
        return True

    def pause(self, name: str) -> bool:
        return self.signal(name, signal.SIGSTOP)

    def resume(self, name: str) -> bool:
        return self.signal(name, signal.SIGCONT)

    def kill(self, name: str, timeout: float = 10.0) -> None:
        """SIGKILL and wait until it is gone."""
        self.signal(name, signal.SIGKILL)
        self.wait_gone(name, timeout)

    def stop(self, name: str, timeout: float = 30.0) -> bool:
        """SIGCONT (a paused process cannot exit) then SIGTERM; SIGKILL after timeout. True when it exited by
        itself (or was not running), False when it had to be killed."""
        if not self.signal(name, signal.SIGCONT):
            return True
        self.signal(name, signal.SIGTERM)
        if not self.wait_gone(name, timeout, raise_on_timeout=False):
            self.kill(name)
            return False
        return True

    def forget(self, name: str) -> None:
        (self.pid_dir / f"{name}.json").unlink(missing_ok=True)

    def wait_gone(self, name: str, timeout: float, raise_on_timeout: bool = True) -> bool:
        try:
            wait_until(lambda: not self.is_running(name), timeout, f"{name} to exit", 0.1)
        except TimeoutError:
            if raise_on_timeout:
                raise
            return False
        return True

    def _reap(self, pid: int) -> None:
        """Collect the exit status of a child we started, so it does not linger as a zombie."""
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            self._exit_codes[pid] = child.returncode
            self._children.pop(pid, None)
        elif child is None:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
