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
lines, which Spark reads in parallel with an explicit schema; beside each sealed part its columnar twin
part-NNNNN.parquet (chaos/record/columnar.py), which Spark reads instead while the part is unchanged. Durable: flushed every FLUSH_S and fsynced
every FSYNC_S and on close. A crash leaves a readable prefix: the reader stops at a torn last line and
says so.

Seals: every part file ends with one seal line, written when the part is rolled and on close, so that a
reader can tell a complete history from a cut one (spark_analysis/evidence.py checks every seal):
    {"process": "history", "f": "seal", "type": "info", "value": {"part": n, "lines": lines of this part
     before the seal, "final": true only on the run's last part, "operations": operations written so far
     (on the final seal: the run's total), "dropped": lines the writer could not write so far}}
The writer also leaves <run>/history-format.json ({"seals": true}): a history with that file and no seal was
cut, not written before seals existed. A seal is not an operation: it is not counted, and iter_history/read_history skip it (HistoryRead.seals
has them). A line the writer cannot write (an I/O error, or a client's line that is not an operation)
is counted as dropped, into the next seal, and logged to <run>/logs/history.log; never dropped silently.
Must not: interpret operations beyond the process/type pairing (checks live in spark_analysis/).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from cluster.access.errors import TxnlabError

OP_TYPES = ("invoke", "ok", "fail", "info")
ROLL_LINES = 1_000_000
FLUSH_S = 0.2
FSYNC_S = 1.0
SOCKET_NAME = "history.sock"
SEAL_PROCESS, SEAL_F = "history", "seal"       # the seal line of a part file (spark_analysis/evidence.py)
FORMAT_NAME = "history-format.json"            # in <run>/: {"seals": true}: this writer seals
LOG_NAME = "history.log"                       # under <run>/logs/: what the writer could not write
LOGGED_DROPS = 20                              # log each of the first drops, then only the totals

log = logging.getLogger(__name__)


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


def seal_line(run_start_ns: int, part: int, lines: int, final: bool, operations: int, dropped: int = 0) -> bytes:
    """The seal that ends part file `part` (the format above)."""
    value = {"part": part, "lines": lines, "final": final, "operations": operations, "dropped": dropped}
    return encode(make_op(run_start_ns, SEAL_PROCESS, "info", SEAL_F, value))


def write_format_marker(run_dir: Path) -> None:
    """<run>/history-format.json: the history of this run is sealed."""
    (Path(run_dir) / FORMAT_NAME).write_text(json.dumps({"seals": True, "writer": "chaos/record/history.py"}) + "\n")


def is_seal(op: dict) -> bool:
    return op.get("process") == SEAL_PROCESS and op.get("f") == SEAL_F


class HistoryWriter:
    """The one writer of a run: appends operations from this process and from socket clients."""

    def __init__(self, run_dir: Path, run_start_ns: int | None = None, roll_lines: int = ROLL_LINES):
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / "history"
        self.dir.mkdir(parents=True, exist_ok=True)
        write_format_marker(self.run_dir)
        self.run_start_ns = run_start_ns if run_start_ns is not None else time.monotonic_ns()
        self.roll_lines = roll_lines
        self.socket_path: Path | None = None          # set by serve()
        self._lock = threading.Lock()
        self._part, self._lines = len(list(self.dir.glob("part-*.jsonl"))), 0
        self._file = self._open_part()
        self._open: dict[str, dict] = {}             # process -> outstanding invoke
        self._last_ok: dict[tuple[str, str], int] = {}   # (process, f) -> time of its last ok
        self._count = 0
        self._dropped = 0                             # lines that could not be written (into every seal)
        self._unflushed = 0                           # lines written to the buffer since the last flush
        self._closed = threading.Event()
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._twins: list[threading.Thread] = []
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
        _check_operation(op)
        with self._lock:
            if self._closed.is_set():
                raise HistoryError("history is closed")
            self._write(op, line)

    def _write(self, op: dict, line: bytes) -> None:
        """One operation line (the lock held); a line that cannot be written is counted as dropped."""
        try:
            self._file.write(line)
        except (OSError, ValueError) as exc:
            self._drop(f"{op.get('process')} {op.get('type')} {op.get('f')}: {type(exc).__name__}: {exc}")
            return
        self._track(op)
        self._count += 1
        self._lines += 1
        self._unflushed += 1
        if self._lines >= self.roll_lines:
            self._roll()

    def _track(self, op: dict) -> None:
        if op["type"] == "invoke":
            self._open[op["process"]] = op
        else:
            self._open.pop(op["process"], None)
            if op["type"] == "ok":
                self._last_ok[(op["process"], op["f"])] = op["time"]

    def last_ok(self, process: str, f: str) -> int | None:
        """The time of the process's last `ok` operation of f (None: none yet)."""
        with self._lock:
            return self._last_ok.get((process, f))

    def _drop(self, what: str, lines: int = 1) -> None:
        self._dropped += lines
        if self._dropped - lines < LOGGED_DROPS:
            self._log(f"dropped {lines} line(s), {self._dropped} so far: {what}")

    def _log(self, message: str) -> None:
        log.warning("history of %s: %s", self.run_dir, message)
        try:
            (self.run_dir / "logs").mkdir(exist_ok=True)
            with open(self.run_dir / "logs" / LOG_NAME, "a") as out:
                out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n")
        except OSError:
            pass                                      # the seal still carries the count

    def _seal(self, final: bool) -> None:
        """The part's last line: its line count, the operations and drops so far (the lock held)."""
        try:
            self._file.write(seal_line(self.run_start_ns, self._part, self._lines, final, self._count, self._dropped))
        except (OSError, ValueError) as exc:          # the part stays unsealed: verify says unknown
            self._log(f"cannot seal part {self._part}: {type(exc).__name__}: {exc}")

    def _roll(self) -> None:
        self._seal(final=False)
        self._sync()
        self._file.close()
        self._twin(self._file.name)
        self._part, self._lines = self._part + 1, 0
        self._file = self._open_part()

    def _twin(self, part: str) -> None:
        """The sealed part's columnar twin (chaos/record/columnar.py), written beside it in the background."""
        from chaos.record.columnar import write_twin
        thread = threading.Thread(target=write_twin, args=(Path(part),), name="history-twin", daemon=True)
        thread.start()
        self._twins.append(thread)

    def _sync(self) -> None:
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._unflushed = 0
        except OSError as exc:
            self._drop(f"flush of part {self._part} failed: {type(exc).__name__}: {exc}", self._unflushed)
            self._unflushed = 0

    def _flush_loop(self) -> None:
        last_sync = time.monotonic()
        while not self._closed.wait(FLUSH_S):
            with self._lock:
                if self._closed.is_set():
                    return
                if time.monotonic() - last_sync >= FSYNC_S:
                    self._sync()
                    last_sync = time.monotonic()
                    continue
                try:
                    self._file.flush()
                    self._unflushed = 0
                except OSError as exc:
                    self._drop(f"flush of part {self._part} failed: {type(exc).__name__}: {exc}", self._unflushed)
                    self._unflushed = 0

    @property
    def count(self) -> int:
        return self._count

    @property
    def dropped(self) -> int:
        return self._dropped

    def complete_outstanding(self, owner: str, reason: str) -> int:
        """Complete as info the outstanding invokes of process `owner` and of its sub-processes ("<owner>/...",
        e.g. its JVM's lifecycle): it was killed and will not complete them (a restart under the same name
        must not leave them open). Returns how many."""
        with self._lock:
            if self._closed.is_set():
                return 0
            return self._complete_open([p for p in sorted(self._open) if p == owner or p.startswith(owner + "/")],
                                       reason)

    def _complete_open(self, processes: list[str], reason: str) -> int:
        """Each process's outstanding invoke completed as info with `reason` (the lock held)."""
        for process in processes:
            invoke = self._open[process]
            value = dict(invoke["value"]) if isinstance(invoke["value"], dict) else {"value": invoke["value"]}
            value["reason"] = reason
            op = make_op(self.run_start_ns, process, "info", invoke["f"], value)
            self._write(op, encode(op))
        return len(processes)

    def outstanding(self) -> dict[str, dict]:
        with self._lock:
            return dict(self._open)

    # ---- socket clients --------------------------------------------------------------------------
    def serve(self) -> Path:
        """Accept workload processes on <run>/history.sock; returns the socket path."""
        self.socket_path = _socket_path(self.run_dir)
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
                if not line.endswith(b"\n"):         # the client died mid-line: no operation was sent
                    self._log(f"a client ended inside a line (its process died sending it): {line[:200]!r}")
                    return
                try:
                    op = json.loads(line)
                    _check_operation(op)
                except (ValueError, HistoryError) as exc:
                    with self._lock:
                        self._drop(f"a client's line is not an operation ({exc}): {line[:200]!r}")
                    continue
                with self._lock:
                    if self._closed.is_set():         # after the final seal: cannot be counted in it
                        self._log(f"a client sent a line after the history was closed: {line[:200]!r}")
                        return
                    self._write(op, line)

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
        with self._lock:                         # no line between the completions, the final seal and the end
            if self._closed.is_set():
                return 0
            completed = self._complete_open(sorted(self._open), reason)
            self._closed.set()
            self._seal(final=True)
            self._sync()
            self._file.close()
            self._twin(self._file.name)
            if self._dropped:
                self._log(f"closed with {self._dropped} dropped line(s) (in the final seal)")
        for thread in self._twins:
            thread.join()
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


def _check_operation(op: Any) -> None:
    """What a writer accepts: a well-formed operation, never a seal (only the writer seals)."""
    _check(op)
    if is_seal(op):
        raise HistoryError(f"process {SEAL_PROCESS!r} f {SEAL_F!r} is the writer's seal, not an operation")


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
    seals: list[dict] = field(default_factory=list)   # the parts' seal lines, in file order (not operations)


def iter_history(run_dir: Path) -> Iterator[dict]:
    """Operations in file order, seals skipped; stops at a torn line (a crash mid-write)."""
    yield from (op for op in _read(Path(run_dir), {"truncated": False}) if not is_seal(op))


def read_history(run_dir: Path) -> HistoryRead:
    state = {"truncated": False}
    read = HistoryRead([], False)
    for op in _read(Path(run_dir), state):
        (read.seals if is_seal(op) else read.ops).append(op)
    read.truncated = state["truncated"]
    return read


def whole_history(run_dir: Path) -> HistoryRead | str:
    """The run's whole history, or why it cannot be had: it cannot be read, or it was cut short (a missing end may
    hold what a reader looks for, so an absence in it is no evidence)."""
    try:
        read = read_history(run_dir)
    except HistoryError as exc:
        return f"it cannot be read: {exc}"
    return "it was cut short" if read.truncated else read


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
