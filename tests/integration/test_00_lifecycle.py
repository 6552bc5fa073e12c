"""`txnlab cluster up | status --json | down` through the real command line, on a cluster of its own.

Runs first (file name) so that it never overlaps the shared session cluster on a 2-core machine.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from cluster.lab.supervisor import live_process, start_ticks
from tests.integration.conftest import cluster_state_dir

pytestmark = pytest.mark.kafka_core      # the version matrix's core (scripts/kafka_matrix.py)

BASE_PORT = 22000


def _txnlab(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "txnlab", *args], capture_output=True, text=True, timeout=timeout)


def _port_open(port):
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_up_status_down_leaves_nothing_behind():
    state = cluster_state_dir("test-lifecycle")
    common = ["--state-dir", str(state), "--base-port", str(BASE_PORT)]
    up = _txnlab("cluster", "up", *common)
    assert up.returncode == 0, up.stderr
    assert up.stdout.strip() == f"127.0.0.1:{BASE_PORT + 1},127.0.0.1:{BASE_PORT + 2},127.0.0.1:{BASE_PORT + 3}"
    try:
        status = json.loads(_txnlab("cluster", "status", "--json", *common).stdout)
        assert [n["health"] for n in status["nodes"]] == ["up", "up", "up"]
        assert sum(n["active_controller"] for n in status["nodes"]) == 1
        assert status["toxiproxy"]["health"] == status["prometheus"]["health"] == status["exporter"]["health"] == "up"
        pids = [n["pid"] for n in status["nodes"]] + [status[s]["pid"] for s in ("toxiproxy", "prometheus", "exporter")]
        procs = {pid: start_ticks(pid) for pid in pids}

        again = _txnlab("cluster", "up", *common)              # a no-op on a running cluster
        assert again.returncode == 0, again.stderr
        status2 = json.loads(_txnlab("cluster", "status", "--json", *common).stdout)
        assert [n["pid"] for n in status2["nodes"]] == pids[:3]
    finally:
        down = _txnlab("cluster", "down", "--purge", *common)
    assert down.returncode == 0, down.stderr
    assert not [pid for pid, ticks in procs.items() if live_process(pid, 0.0, ticks)]
    assert not [p for p in (BASE_PORT + 1, BASE_PORT + 101, BASE_PORT + 700, BASE_PORT + 790) if _port_open(p)]
    assert not state.exists()
