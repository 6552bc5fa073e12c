"""The run history: one append-only log of every operation of every process of a run.

Owns: the operation format, the one writer of a run (which every workload process reaches over a Unix
socket in the run directory), the reader, and the completion rule at shutdown.

An operation is one JSON object per line:
    {"time": ns since run start (CLOCK_MONOTONIC, shared by all processes of the machine),
     "wall": unix seconds, "process": "txp-3", "type": "invoke" | "ok" | "fail" | "info",
     "f": "txn" | "poll" | "produce" | "fault" | ..., "value": {...}}
A logical process has at most one invoke outstanding (Jepsen's rule), so a completion pairs with the
process's last invoke; at shutdown the writer completes every outstanding invoke as `info`
(value.reason = "shutdown"): its outcome is unknown.

Files: <run>/history/part-00000.jsonl, part-00001.jsonl, ... rolled every ROLL_LINES lines: plain JSON
lines, which Spark reads in parallel with an explicit schema. Durable: flushed every FLUSH_S and fsynced
every FSYNC_S and on close. A crash leaves a readable prefix: the reader stops at a torn last line and
says so.
Must not: interpret operations beyond the process/type pairing (checks live in spark_analysis/).
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from cluster.errors import TxnlabError

OP_TYPES = ("invoke", "ok", "fail", "info")
ROLL_LINES = 1_000_000
FLUSH_S = 0.2
FSYNC_S = 1.0
SOCKET_NAME = "history.sock"


class HistoryError(TxnlabError, ValueError):
    """A malformed operation or history file."""


def now_ns(run_start_ns: int) -> int:
    return time.monotonic_ns() - run_start_ns


def make_op(run_start_ns: int, process: str, op_type: str, f: str, value: Any) -> dict:
    if op_type not in OP_TYPES:
        raise HistoryError(f"type must be one of {OP_TYPES}, got {op_type!r}")
    return {"time": now_ns(run_start_ns), "wall": round(time.time(), 6), "process": process, "type": op_type,
            "f": f, "value": value}


def encode(op: dict) -> bytes:
    return (json.dumps(op, separators=(",", ":"), default=str) + "\n").encode()


class HistoryWriter:
    """The one writer of a run: appends operations from this process and from socket clients."""

    def __init__(self, run_dir: Path, run_start_ns: int | None = None, roll_lines: int = ROLL_LINES):
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / "history"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_start_ns = run_start_ns if run_start_ns is not None else time.monotonic_ns()
        self.roll_lines = roll_lines
        self.socket_path = _socket_path(self.run_dir)
        self._lock = threading.Lock()
        self._part, self._lines = len(list(self.dir.glob("part-*.jsonl"))), 0
        self._file = self._open_part()
        self._open: dict[str, dict] = {}             # process -> outstanding invoke
        self._count = 0
        self._closed = threading.Event()
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flush", daemon=True)
        self._flusher.start()

    # ---- writing --------------------------------------------------------------------------------
    def _open_part(self):
        return open(self.dir / f"part-{self._part:05d}.jsonl", "ab", buffering=1 << 20)

    def append(self, op: dict) -> None:
        """Append one operation (validated) from this process."""
        self._append_line(op, encode(op))

    def record(self, process: str, op_type: str, f: str, value: Any) -> dict:
        op = make_op(self.run_start_ns, process, op_type, f, value)
        self.append(op)
        return op

    def _append_line(self, op: dict, line: bytes) -> None:
        _check(op)
        with self._lock:
            if self._closed.is_set():
                raise HistoryError("history is closed")
            self._track(op)
            self._file.write(line)
            self._count += 1
            self._lines += 1
            if self._lines >= self.roll_lines:
                self._roll()

    def _track(self, op: dict) -> None:
        if op["type"] == "invoke":
            self._open[op["process"]] = op
        else:
            self._open.pop(op["process"], None)

    def _roll(self) -> None:
        self._sync()
        self._file.close()
        self._part, self._lines = self._part + 1, 0
        self._file = self._open_part()

    def _sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def _flush_loop(self) -> None:
        last_sync = time.monotonic()
        while not self._closed.wait(FLUSH_S):
            with self._lock:
                if self._closed.is_set():
                    return
                self._file.flush()
                if time.monotonic() - last_sync >= FSYNC_S:
                    os.fsync(self._file.fileno())
                    last_sync = time.monotonic()

    @property
    def count(self) -> int:
        return self._count

    def outstanding(self) -> dict[str, dict]:
        with self._lock:
            return dict(self._open)

    # ---- socket clients --------------------------------------------------------------------------
    def serve(self) -> Path:
        """Accept workload processes on <run>/history.sock; returns the socket path."""
        if self.socket_path.exists():
            self.socket_path.unlink()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.socket_path))
        self._server.listen(64)
        self._spawn(self._accept_loop, "history-accept")
        return self.socket_path

    def _spawn(self, target, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._spawn(self._client_loop, "history-client", conn)

    def _client_loop(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                if not line.endswith(b"\n"):
                    return                            # the client died mid-line: drop the torn tail
                try:
                    self._append_line(json.loads(line), line)
                except (ValueError, HistoryError):
                    return                            # closed, or garbage: this client is done

    # ---- closing ------------------------------------------------------------------------------------
    def close(self, reason: str = "shutdown") -> int:
        """Stop accepting, complete outstanding invokes as info, fsync. Returns how many were completed."""
        if self._server is not None:
            self._server.close()
            self.socket_path.unlink(missing_ok=True)
            if self.socket_path.parent != self.run_dir.resolve():
                self.socket_path.parent.rmdir()
        for thread in self._threads[1:]:
            thread.join(timeout=2)               # let connected clients drain what they sent
        completed = 0
        for process, invoke in sorted(self.outstanding().items()):
            value = dict(invoke["value"]) if isinstance(invoke["value"], dict) else {"value": invoke["value"]}
            value["reason"] = reason
            self.record(process, "info", invoke["f"], value)
            completed += 1
        with self._lock:
            self._closed.set()
            self._sync()
            self._file.close()
        return completed

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed.is_set():
            self.close()


def _socket_path(run_dir: Path) -> Path:
    """<run>/history.sock, or one under a short temporary directory: a Unix socket path has ~107 bytes."""
    path = run_dir.resolve() / SOCKET_NAME
    if len(str(path).encode()) < 100:
        return path
    return Path(tempfile.mkdtemp(prefix="txnlab-history-")) / SOCKET_NAME


def _check(op: Any) -> None:
    if not isinstance(op, dict):
        raise HistoryError(f"an operation is a JSON object, got {type(op).__name__}")
    missing = {"time", "process", "type", "f", "value"} - op.keys()
    if missing:
        raise HistoryError(f"operation lacks {sorted(missing)}")
    if op["type"] not in OP_TYPES:
        raise HistoryError(f"operation type must be one of {OP_TYPES}, got {op['type']!r}")


class HistoryClient:
    """A workload process's handle on the run's writer (thread-safe)."""

    def __init__(self, socket_path: Path | str, run_start_ns: int):
        self.run_start_ns = run_start_ns
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(str(socket_path))
        self._lock = threading.Lock()

    def record(self, process: str, op_type: str, f: str, value: Any) -> dict:
        op = make_op(self.run_start_ns, process, op_type, f, value)
        line = encode(op)
        with self._lock:
            self._sock.sendall(line)
        return op

    def close(self) -> None:
        with self._lock:
            self._sock.close()


@dataclass
class HistoryRead:
    ops: list[dict]
    truncated: bool                    # a torn line ended the readable prefix


def iter_history(run_dir: Path) -> Iterator[dict]:
    """Operations in file order; stops at a torn line (a crash mid-write)."""
    yield from _read(Path(run_dir), {"truncated": False})


def read_history(run_dir: Path) -> HistoryRead:
    state = {"truncated": False}
    ops = list(_read(Path(run_dir), state))
    return HistoryRead(ops, state["truncated"])


def _read(run_dir: Path, state: dict) -> Iterator[dict]:
    parts = sorted((run_dir / "history").glob("part-*.jsonl"))
    if not parts:
        raise HistoryError(f"no history in {run_dir}")
    for part in parts:
        with open(part, "rb") as lines:
            for line in lines:
                try:
                    op = json.loads(line) if line.endswith(b"\n") else None
                    _check(op)
                except (ValueError, HistoryError):
                    state["truncated"] = True
                    return
                yield op
