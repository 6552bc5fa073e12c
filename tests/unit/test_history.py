"""The history writer and reader: pairing, completion at shutdown, socket clients, crash prefixes, seals and
dropped lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from chaos.record.history import HistoryClient, HistoryError, HistoryWriter, iter_history, read_history
from cluster.access.waiting import wait_until


def test_ops_are_appended_in_order_and_read_back(tmp_path):
    with HistoryWriter(tmp_path) as writer:
        writer.record("txp-0", "invoke", "txn", {"attempt": "a.txp-0.0"})
        writer.record("txp-0", "ok", "txn", {"attempt": "a.txp-0.0"})
        writer.record("obs-rc", "ok", "poll", {"records": []})
    read = read_history(tmp_path)
    assert not read.truncated
    assert [(op["process"], op["type"], op["f"]) for op in read.ops] == \
        [("txp-0", "invoke", "txn"), ("txp-0", "ok", "txn"), ("obs-rc", "ok", "poll")]
    times = [op["time"] for op in read.ops]
    assert times == sorted(times) and times[0] >= 0 and all(op["wall"] > 1e9 for op in read.ops)


def test_outstanding_invokes_become_info_at_shutdown(tmp_path):
    writer = HistoryWriter(tmp_path)
    writer.record("txp-0", "invoke", "txn", {"attempt": "a.txp-0.0"})
    writer.record("txp-1", "invoke", "txn", {"attempt": "a.txp-1.0"})
    writer.record("txp-1", "fail", "txn", {"attempt": "a.txp-1.0"})
    assert writer.close() == 1
    ops = read_history(tmp_path).ops
    assert ops[-1]["process"] == "txp-0" and ops[-1]["type"] == "info"
    assert ops[-1]["value"] == {"attempt": "a.txp-0.0", "reason": "shutdown"}
    with pytest.raises(HistoryError, match="closed"):
        writer.record("txp-0", "invoke", "txn", {})


def test_bad_operations_are_refused(tmp_path):
    with HistoryWriter(tmp_path) as writer:
        with pytest.raises(HistoryError, match="type must be one of"):
            writer.record("p", "done", "txn", {})
        with pytest.raises(HistoryError, match="lacks"):
            writer.append({"process": "p", "type": "ok"})
    assert read_history(tmp_path).ops == []


def test_segments_roll_and_read_in_order(tmp_path):
    with HistoryWriter(tmp_path, roll_lines=3) as writer:
        for i in range(8):
            writer.record("p", "ok", "poll", {"i": i})
    assert len(list((tmp_path / "history").glob("part-*.jsonl"))) == 3
    assert [op["value"]["i"] for op in iter_history(tmp_path)] == list(range(8))


def test_socket_clients_share_the_one_writer(tmp_path):
    writer = HistoryWriter(tmp_path)
    path = writer.serve()
    clients = [HistoryClient(path, writer.run_start_ns) for _ in range(3)]
    for n, client in enumerate(clients):
        client.record(f"w{n}", "invoke", "txn", {"n": n})
        if n != 2:
            client.record(f"w{n}", "ok", "txn", {"n": n})
    wait_until(lambda: writer.count == 5, 5, "5 ops at the writer", interval=0.05)
    for client in clients:
        client.close()
    assert writer.close() == 1
    ops = read_history(tmp_path).ops
    assert sorted((op["process"], op["type"]) for op in ops) == [
        ("w0", "invoke"), ("w0", "ok"), ("w1", "invoke"), ("w1", "ok"), ("w2", "info"), ("w2", "invoke")]
    assert not path.exists()


def test_a_client_killed_mid_line_loses_only_its_torn_tail(tmp_path):
    writer = HistoryWriter(tmp_path)
    path = writer.serve()
    script = textwrap.dedent(f"""
        import socket, os
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect({str(path)!r})
        s.sendall(b'{{"time":1,"wall":2,"process":"w","type":"invoke","f":"txn","value":{{}}}}\\n')
        s.sendall(b'{{"time":2,"wall":3,"process":"w","type":"ok","f":"t')
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    wait_until(lambda: writer.count == 1, 5, "the complete line", interval=0.05)
    writer.close()
    assert [op["type"] for op in read_history(tmp_path).ops] == ["invoke", "info"]


def test_a_crash_mid_write_leaves_a_readable_prefix(tmp_path):
    script = textwrap.dedent(f"""
        import os
        from chaos.record.history import HistoryWriter
        w = HistoryWriter({str(tmp_path)!r})
        for i in range(100):
            w.record("p", "ok", "poll", {{"i": i}})
        w._file.write(b'{{"time": 5, "process": "p", "ty')
        w._file.flush()
        os._exit(9)
    """)
    proc = subprocess.run([sys.executable, "-c", script], timeout=30, cwd=os.getcwd())
    assert proc.returncode == 9
    read = read_history(tmp_path)
    assert read.truncated and [op["value"]["i"] for op in read.ops] == list(range(100))


def test_history_is_readable_while_it_is_written(tmp_path):
    writer = HistoryWriter(tmp_path)
    writer.record("p", "invoke", "txn", {})
    # the flusher pushes buffered lines to the file every 0.2 s, while the writer is open
    wait_until(lambda: read_history(tmp_path).ops, 5, "the op in the file", interval=0.05)
    assert [op["type"] for op in read_history(tmp_path).ops] == ["invoke"]
    writer.close()


def test_no_history_is_an_error(tmp_path):
    with pytest.raises(HistoryError, match="no history"):
        read_history(tmp_path)


def test_a_deep_run_directory_still_gets_a_socket(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    writer = HistoryWriter(deep)
    path = writer.serve()
    client = HistoryClient(path, writer.run_start_ns)
    client.record("p", "ok", "poll", {})
    wait_until(lambda: writer.count == 1, 5, "the op", interval=0.05)
    client.close()
    writer.close()
    assert not path.exists() and not path.parent.exists() and len(read_history(deep).ops) == 1


def test_a_deep_run_directory_without_clients_leaves_no_socket_directory(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    with HistoryWriter(deep) as writer:
        writer.record("p", "ok", "poll", {})
    assert list((tmp_path / "tmp").iterdir()) == [] and len(read_history(deep).ops) == 1


# ---- seals: every part ends with its line count; the final one with the run's operations ------------------
def raw_lines(run_dir):
    return {p.name: [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted((run_dir / "history").glob("part-*.jsonl"))}


def test_the_closed_history_ends_with_its_final_seal_which_is_not_an_operation(tmp_path):
    with HistoryWriter(tmp_path) as writer:
        writer.record("txp-0", "invoke", "txn", {"attempt": "a.txp-0.0"})
        writer.record("txp-0", "ok", "txn", {"attempt": "a.txp-0.0"})
        writer.record("txp-1", "invoke", "txn", {"attempt": "a.txp-1.0"})
    lines = raw_lines(tmp_path)["part-00000.jsonl"]
    assert (lines[-1]["process"], lines[-1]["type"], lines[-1]["f"]) == ("history", "info", "seal")
    assert lines[-1]["value"] == {"part": 0, "lines": 4, "final": True, "operations": 4, "dropped": 0}
    read = read_history(tmp_path)
    assert len(read.ops) == 4 == writer.count and not read.truncated
    assert [s["value"] for s in read.seals] == [lines[-1]["value"]]
    assert all(op["f"] != "seal" for op in read.ops) and all(op["f"] != "seal" for op in iter_history(tmp_path))


def test_every_rolled_part_is_sealed_with_its_own_line_count(tmp_path):
    with HistoryWriter(tmp_path, roll_lines=3) as writer:
        for i in range(8):
            writer.record("p", "ok", "poll", {"i": i})
    parts = raw_lines(tmp_path)
    assert [[op["f"] for op in ops].count("seal") for ops in parts.values()] == [1, 1, 1]
    assert [ops[-1]["value"] for ops in parts.values()] == [
        {"part": 0, "lines": 3, "final": False, "operations": 3, "dropped": 0},
        {"part": 1, "lines": 3, "final": False, "operations": 6, "dropped": 0},
        {"part": 2, "lines": 2, "final": True, "operations": 8, "dropped": 0}]
    assert writer.count == 8


def test_a_roll_right_before_close_leaves_a_last_part_with_only_its_final_seal(tmp_path):
    with HistoryWriter(tmp_path, roll_lines=2) as writer:
        for i in range(4):
            writer.record("p", "ok", "poll", {"i": i})
    parts = list(raw_lines(tmp_path).values())
    assert len(parts) == 3 and parts[-1] == [parts[-1][0]]
    assert parts[-1][0]["value"] == {"part": 2, "lines": 0, "final": True, "operations": 4, "dropped": 0}


def test_a_clients_garbage_line_is_counted_as_dropped_and_its_next_lines_still_written(tmp_path):
    writer = HistoryWriter(tmp_path)
    path = writer.serve()
    client = HistoryClient(path, writer.run_start_ns)
    client._sock.sendall(b'{"not": "an operation"}\n')
    client._sock.sendall(b'{"time":1,"process":"history","type":"info","f":"seal","value":{}}\n')   # a forged seal
    client.record("w", "ok", "poll", {"n": 1})
    wait_until(lambda: writer.count == 1, 5, "the good line", interval=0.05)
    client.close()
    writer.close()
    read = read_history(tmp_path)
    assert [op["value"] for op in read.ops] == [{"n": 1}]
    assert read.seals[-1]["value"]["dropped"] == 2 and writer.dropped == 2
    assert "dropped 1 line(s), 2 so far" in (tmp_path / "logs" / "history.log").read_text()


def test_a_line_that_cannot_be_written_is_counted_in_the_seal_and_logged(tmp_path):
    writer = HistoryWriter(tmp_path)
    real = writer._file

    class Failing:
        def write(self, line):
            if b'"boom"' in line:
                raise OSError(28, "No space left on device")
            return real.write(line)

        def __getattr__(self, name):
            return getattr(real, name)

    writer._file = Failing()
    writer.record("p", "ok", "poll", {"i": 1})
    writer.record("p", "ok", "poll", {"boom": 1})
    writer.record("p", "ok", "poll", {"i": 2})
    writer.close()
    read = read_history(tmp_path)
    assert [op["value"] for op in read.ops] == [{"i": 1}, {"i": 2}] and writer.count == 2
    assert read.seals[-1]["value"] == {"part": 0, "lines": 2, "final": True, "operations": 2, "dropped": 1}
    assert "No space left on device" in (tmp_path / "logs" / "history.log").read_text()


def test_only_the_writer_seals(tmp_path):
    with HistoryWriter(tmp_path) as writer:
        with pytest.raises(HistoryError, match="seal"):
            writer.record("history", "info", "seal", {"part": 0})
    assert len(read_history(tmp_path).seals) == 1
