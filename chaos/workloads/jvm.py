"""A JVM run by a workload process: Kafka's Java tools (java_copier.py) and the Kafka Streams application
(streams.py) print one JSON event per stdout line; this module starts such a JVM by its own pid, turns its
lines into history operations as they come (ToolEvents, one subclass per program), records its lifecycle
under "<name>/jvm" (invoke jvm {tool, args}; ok: exit 0, or stopped by its SIGTERM | fail + {pid, exit_code, stopped, signal,
stderr_tail}), and stops it: SIGTERM, SIGKILL after STOP_GRACE_S, its output read to the end first.
Must not: signal any process but the JVMs it started, or decide what the events mean beyond converting them.
"""
from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
from typing import IO, Callable, NamedTuple

import psutil

from chaos.workloads.base import WorkloadContext
from cluster.access.waiting import Deadline

LINE_LIMIT = 500                     # characters of an unreadable stdout line kept in the history
STDERR_TAIL = 10                     # stderr lines kept for a failed JVM's completion
STOP_GRACE_S = 8.0                   # SIGTERM -> SIGKILL (the runner kills this process after 20 s)
DRAIN_S = 10.0                       # how long to wait for a dead JVM's output to be read


class Op(NamedTuple):
    """One history operation of a tool's event process."""
    type: str
    f: str
    value: dict


# ---- event -> operation conversion (pure, per program) -----------------------------------------------
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



# ---- one JVM ---------------------------------------------------------------------------------------------
def emit(ctx: WorkloadContext, process: str, op: Op) -> None:
    if op.type == "invoke":
        ctx.invoke(op.f, op.value, process=process)
    else:
        ctx.complete(op.type, op.f, op.value, process=process)


class JavaTool:
    """One tool process: started and stopped by its own pid, its stdout recorded by a reader thread
    under `name`, its lifecycle under "<name>/jvm"."""

    def __init__(self, ctx: WorkloadContext, name: str, tool: str, argv: list[str], events: ToolEvents,
                 env: dict[str, str] | None = None, stop_codes: tuple[int, ...] = ()):
        self.ctx, self.name, self.tool, self.argv, self.events, self.env = ctx, name, tool, argv, events, env
        self.stop_codes = (128 + signal.SIGTERM, -signal.SIGTERM, *stop_codes)   # its exits when stopped by TERM
        self.jvm = f"{name}/jvm"
        self.proc: subprocess.Popen | None = None
        self.stopped = False
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.readers: list[threading.Thread] = []

    def start(self, tool_args: list[str]) -> bool:
        self.ctx.invoke("jvm", {"tool": self.tool, "args": tool_args}, process=self.jvm)
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=self.env)
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
        stopped_as_asked = self.stopped and code in self.stop_codes
        self.ctx.complete("ok" if code == 0 or stopped_as_asked else "fail", "jvm", value, process=self.jvm)


def reap_leftovers() -> list[int]:
    """SIGKILL what a JVM of this process left behind: every other member of this process's own process group
    (the supervisor starts each workload process as the leader of a group of its own: cluster/lab/supervisor.py), e.g.
    the Python workers of a Flink TaskManager, orphaned when its JVM exits. Nothing when this process does not
    lead its group (run by hand from a shell: the group is the shell's). Returns the pids killed."""
    me = os.getpid()
    if os.getpgrp() != me:
        return []
    killed = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != me and os.getpgid(proc.pid) == me:
                proc.kill()
                killed.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return killed


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
