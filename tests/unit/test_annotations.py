"""Fault windows from a run's history, and their Grafana annotations."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from chaos.record.annotations import TAG, fault_windows, post_to_grafana


def op(process, op_type, f, wall, **value):
    return {"time": int(wall * 1e9), "wall": wall, "process": process, "type": op_type, "f": f, "value": value}


def write_history(tmp_path, ops):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "part-00000.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    return tmp_path


def test_each_fault_is_paired_with_its_heal_and_an_unhealed_one_ends_with_the_run(tmp_path):
    run = write_history(tmp_path, [
        op("nemesis-0", "invoke", "fault", 100.0, kind="kill-broker", params={"target": "node:2"}),
        op("txp-0", "invoke", "txn", 101.0),
        op("nemesis-1", "invoke", "fault", 102.0, kind="network", params={"target": "node:1", "toxic": "latency"}),
        op("nemesis-0", "ok", "fault", 100.5, kind="kill-broker"),
        op("nemesis-0", "invoke", "heal", 110.0, kind="kill-broker"),
        op("nemesis-0", "ok", "heal", 112.0, kind="kill-broker"),
        op("nemesis", "ok", "probe", 115.0, name="x"),
        op("txp-0", "ok", "txn", 120.0),
    ])
    windows = fault_windows(run)
    assert [(w.process, w.kind, w.start, w.end) for w in windows] == [
        ("nemesis-0", "kill-broker", 100.0, 112.0), ("nemesis-1", "network", 102.0, 120.0)]
    assert windows[1].label == "network target=node:1, toxic=latency"


def test_windows_are_posted_as_tagged_region_annotations(tmp_path, monkeypatch):
    received = []

    class Grafana(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.headers.get("Authorization"),
                             json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"id": 1}')

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Grafana)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TXNLAB_GRAFANA_TOKEN", "t0ken")
    run = write_history(tmp_path, [op("nemesis-0", "invoke", "fault", 10.0, kind="pause-broker", params={}),
                                   op("nemesis-0", "ok", "heal", 25.5, kind="pause-broker")])
    try:
        assert post_to_grafana(fault_windows(run), f"http://127.0.0.1:{server.server_port}/", "run-1") == 1
    finally:
        server.shutdown()
    path, auth, body = received[0]
    assert path == "/api/annotations" and auth == "Bearer t0ken"
    assert body == {"time": 10000, "timeEnd": 25500, "tags": [TAG, "pause-broker", "run-1"], "text": "run-1: pause-broker"}
