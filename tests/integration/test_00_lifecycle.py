"""`txnlab cluster up | status --json | down` through the real command line, on a cluster of its own.

Runs first (file name) so that it never overlaps the shared session cluster on a 2-core machine.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import psutil
import pytest

from tests.integration.conftest import cluster_state_dir

pytestmark = pytest.mark.kafka_core      # the version matrix's core (scripts/kafka_matrix.py)

BASE_PORT = 22000


def _txnlab(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "txnlab", *args], capture_output=True, text=True, timeout=timeout)


def _alive(pid, create_time):
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - create_time) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


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
        procs = {pid: psutil.Process(pid).create_time() for pid in pids}

        again = _txnlab("cluster", "up", *common)              # a no-op on a running cluster
        assert again.returncode == 0, again.stderr
        status2 = json.loads(_txnlab("cluster", "status", "--json", *common).stdout)
        assert [n["pid"] for n in status2["nodes"]] == pids[:3]
    finally:
        down = _txnlab("cluster", "down", "--purge", *common)
    assert down.returncode == 0, down.stderr
    assert not [pid for pid, created in procs.items() if _alive(pid, created)]
    assert not [p for p in (BASE_PORT + 1, BASE_PORT + 101, BASE_PORT + 700, BASE_PORT + 790) if _port_open(p)]
    assert not state.exists()
