"""Every fault healed even when txnlab dies: SIGTERM heals like Ctrl-C; after a kill -9 of the runner,
`txnlab chaos heal RUN_DIR` heals from the fault journal (brokers resumed, the run's workload processes
stopped, toxics removed), is a no-op the second time, and a heal step that fails (Toxiproxy stopped) skips none of the
others and stays in the journal until a later heal succeeds."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from chaos.nemesis.backends import LocalBackend
from chaos.nemesis.journal import FAULTS_DIR, WORKLOADS, heal_journal, read_journal
from cluster.lab.supervisor import Supervisor
from cluster.access.waiting import wait_until
from tests.integration.test_experiments import assert_healed, interruptible_spec
from tests.cli import chaos_run, txnlab


def long_pauses_spec(tmp_path: Path) -> dict:
    """interruptible_spec's paused broker, latency and paused transactional producer, active for long."""
    spec = {**interruptible_spec(tmp_path), "name": "kill-me", "duration_s": 300}
    faults = [f for f in spec["schedule"]["faults"] if f["kind"] != "isolate-broker"]
    spec["schedule"] = {"faults": [{**f, "duration_s": 280} for f in faults]}
    return spec


@pytest.fixture
def healed_cluster(cluster):
    """The cluster; afterwards, whatever a test left: the killed runs' workload processes stopped, missing
    pieces (Toxiproxy) started again, the cluster's fault journal healed, and the cluster heal."""
    runs: list[Path] = []
    yield cluster, runs
    for run_dir in runs:
        supervisor = Supervisor(run_dir / "pids")          # the run's own pid records: only its processes
        for name in supervisor.names():
            supervisor.stop(name, timeout=10)
    cluster.up(progress=print, timeout=180)
    heal_journal(cluster.layout.state_dir / FAULTS_DIR, LocalBackend(cluster), progress=print)
    cluster.heal()


def start_run(tmp_path: Path, spec: dict) -> tuple[subprocess.Popen, Path]:
    proc = chaos_run(spec, tmp_path / "runs")
    faults = len(spec["schedule"]["faults"])

    def all_started() -> Path | None:
        assert proc.poll() is None, proc.communicate()[0]
        run_dirs = list((tmp_path / "runs").glob("*")) if (tmp_path / "runs").exists() else []
        if not run_dirs:
            return None
        entries = [e for e in read_journal(run_dirs[0] / FAULTS_DIR).entries if e["kind"] != WORKLOADS]
        done = len(entries) == faults and all(e["phase"] == "started" for e in entries)
        return run_dirs[0] if done else None
    return proc, wait_until(all_started, 240, "every fault started and journaled", interval=0.5)


def chaos_heal(*args: str) -> subprocess.CompletedProcess:
    done = txnlab("chaos", "heal", *args, timeout=600)
    print(done.stdout, done.stderr)
    return done


def journal_left(cluster, run_dir: Path) -> list[str]:
    return [e["kind"] for d in (run_dir, cluster.layout.state_dir) for e in read_journal(d / FAULTS_DIR).entries]


def paused(run_dir: Path, process: str) -> bool:
    return Supervisor(run_dir / "pids").is_paused(process)


def test_sigterm_mid_fault_heals_everything_and_exits_non_zero(healed_cluster, tmp_path):
    cluster, runs = healed_cluster
    proc, run_dir = start_run(tmp_path, interruptible_spec(tmp_path))
    runs.append(run_dir)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "SIGTERM" in output
    assert_healed(cluster)
    assert journal_left(cluster, run_dir) == []
    assert not any(paused(run_dir, name) for name in Supervisor(run_dir / "pids").names())
    assert json.loads((run_dir / "experiment.json").read_text())["error"].startswith("Terminated")


def test_after_a_kill_9_chaos_heal_resumes_the_broker_and_the_producer_and_a_failed_step_stays_journaled(
        healed_cluster, tmp_path):
    """One run killed -9 with a paused broker, a toxic and a paused producer: `chaos heal` with Toxiproxy stopped
    resumes the broker and stops the run's processes (no step skipped) and keeps the toxics' removal journaled;
    with Toxiproxy back a second heal removes them, a third finds nothing to heal."""
    cluster, runs = healed_cluster
    proc, run_dir = start_run(tmp_path, long_pauses_spec(tmp_path))
    runs.append(run_dir)
    proc.kill()                                               # SIGKILL: no heal of its own
    proc.communicate(timeout=30)
    assert cluster.supervisor.is_paused(cluster.node_name(1)) and paused(run_dir, "txp-1")
    assert cluster.toxiproxy.toxics()
    assert sorted(journal_left(cluster, run_dir)) == sorted(["pause-broker", "network", "pause-workload",
                                                             "workloads"] * 2)
    workloads = Supervisor(run_dir / "pids")
    assert workloads.names() and all(workloads.is_running(name) for name in workloads.names())
    status = txnlab("cluster", "status", "--state-dir", str(cluster.layout.state_dir), timeout=120)
    assert status.returncode == 3 and "chaos heal --cluster" in status.stderr.replace("\n", "")

    cluster.supervisor.stop("toxiproxy", timeout=10)                   # by its recorded pid
    assert not cluster.supervisor.is_running("toxiproxy")
    failed = chaos_heal(str(run_dir), "--timeout", "10")      # no Toxiproxy: the waits can only time out
    assert failed.returncode == 1
    assert "NOT healed" in failed.stdout and "remove-toxics" in failed.stdout
    assert cluster.supervisor.is_running(cluster.node_name(1))          # resumed all the same (the brokers
    assert not cluster.supervisor.is_paused(cluster.node_name(1))       # reach each other only through Toxiproxy)
    assert [name for name in workloads.names() if workloads.is_running(name)] == []
    assert journal_left(cluster, run_dir) == ["network", "network"]

    cluster.up(progress=print, timeout=180)                             # starts the missing Toxiproxy
    healed = chaos_heal(str(run_dir))
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert "cluster healed" in healed.stdout
    assert_healed(cluster)
    assert journal_left(cluster, run_dir) == []
    again = chaos_heal(str(run_dir))
    assert again.returncode == 0 and "nothing to heal" in again.stdout
    assert chaos_heal("--cluster", str(cluster.layout.state_dir)).returncode == 0
