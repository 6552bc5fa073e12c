"""The fault journal and the independent heal steps, without a cluster: entries written to both copies,
updated and cleared, atomic writes, torn files reported, pids matched by create time, heal steps that
fail skipping none of the others, and the runner marking a fault healed only once its heal succeeded."""
from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from types import SimpleNamespace

import psutil
import pytest

from tests.unit.fakes import FakeBackend
from chaos.nemesis import journal as journal_module
from chaos.runner.experiment import ActiveFault, Experiment
from chaos.nemesis.faults import FaultEnv, make_fault
from chaos.nemesis.journal import (FAULTS_DIR, Journal, active_faults_message, heal_journal, journal_dirs, read_journal,
                           write_atomic)
from cluster.lab.heal import HealError, heal_cluster, run_steps
from cluster.lab.supervisor import live_process, start_ticks
from cluster.access.waiting import wait_until

ENTRY = {"id": "r1-nemesis-0", "kind": "pause-broker", "params": {"target": "node:1"}, "phase": "starting",
         "steps": [{"step": "resume-node", "node": 1}], "backend": {"backend": "local", "state_dir": "/x"}}


@pytest.fixture
def two(tmp_path):
    dirs = journal_dirs(tmp_path / "run", {"backend": "local", "state_dir": str(tmp_path / "state")})
    return Journal(dirs), dirs


def test_an_entry_is_written_to_both_copies_updated_and_cleared(two):
    journal, dirs = two
    assert dirs[0].parts[-2:] == ("run", FAULTS_DIR) and dirs[1].parts[-2:] == ("state", FAULTS_DIR)
    journal.write(ENTRY)
    for d in dirs:
        [entry] = read_journal(d).entries
        assert entry["steps"] == ENTRY["steps"] and entry["copies"] == [str(x) for x in dirs]
    journal.write({**ENTRY, "phase": "started", "steps": [{"step": "resume-node", "node": 2}]})
    assert [e["steps"][0]["node"] for d in dirs for e in read_journal(d).entries] == [2, 2]
    assert "pause-broker (r1-nemesis-0)" in active_faults_message(dirs[1].parent)
    journal.clear(ENTRY["id"])
    assert all(read_journal(d).entries == [] for d in dirs) and active_faults_message(dirs[1].parent) is None
    assert [p.name for d in dirs for p in d.iterdir()] == []              # no temporary files left


def test_a_write_that_fails_half_way_leaves_the_previous_entry(tmp_path, monkeypatch):
    path = tmp_path / "e.json"
    write_atomic(path, {"a": 1})

    def broken_replace(src, dst):
        raise OSError("disk gone")
    monkeypatch.setattr(journal_module.os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1} and os.listdir(tmp_path) == ["e.json"]


def test_a_torn_entry_is_reported_by_name(tmp_path):
    (tmp_path / "r1-nemesis-0.json").write_text('{"id": "r1-nemesis-0", "kind": "pau')
    (tmp_path / "r1-nemesis-1.json").write_text('{"id": "r1-nemesis-1"}')
    found = read_journal(tmp_path)
    assert found.entries == [] and len(found.problems) == 2
    assert "r1-nemesis-0.json: unreadable journal entry (torn or partial write?)" in found.problems[0]
    assert "missing kind, steps" in found.problems[1]
    report = heal_journal(tmp_path, backend=object())
    assert not report.ok and "NOT healed" in report.lines()[0]


def test_a_pid_counts_only_while_its_create_time_matches():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        created = psutil.Process(proc.pid).create_time()
        assert live_process(proc.pid, created).pid == proc.pid
        assert live_process(proc.pid, created - 10) is None         # the pid reused by another process
        ticks = start_ticks(proc.pid)
        assert live_process(proc.pid, created - 17, ticks).pid == proc.pid   # the wall clock stepped: still it
        assert live_process(proc.pid, created, ticks - 1) is None     # another start: another process
    finally:
        proc.kill()
        proc.wait()
    assert live_process(proc.pid, created) is None


def test_resume_process_signals_only_the_recorded_process(tmp_path):
    proc = subprocess.Popen(["sleep", "30"])
    try:
        ps = psutil.Process(proc.pid)
        ps.suspend()
        wait_until(lambda: ps.status() == psutil.STATUS_STOPPED, 5, "stopped")
        stale = {"step": "resume-process", "name": "txp-1", "pid": proc.pid, "create_time": ps.create_time() - 10}
        journal_module.resume_process(stale)
        time.sleep(0.2)
        assert ps.status() == psutil.STATUS_STOPPED
        journal_module.resume_process({**stale, "create_time": ps.create_time()})
        wait_until(lambda: ps.status() != psutil.STATUS_STOPPED, 5, "resumed")
    finally:
        proc.kill()
        proc.wait()


def test_a_failing_step_skips_none_of_the_others_and_is_retried():
    calls = []

    def flaky():
        calls.append("flaky")
        if calls.count("flaky") < 2:
            raise RuntimeError("once")

    def broken():
        calls.append("broken")
        raise RuntimeError("always")
    failures = run_steps([("broken", broken), ("flaky", flaky), ("fine", lambda: calls.append("fine"))], pause=0)
    assert failures == {"broken": "RuntimeError: always"}
    assert calls == ["broken"] * 3 + ["flaky"] * 2 + ["fine"]


def test_the_cluster_heal_resumes_every_node_when_the_toxics_cannot_be_removed():
    done = []

    def no_toxiproxy():
        raise ConnectionError("toxiproxy down")
    with pytest.raises(HealError) as caught:
        heal_cluster([1, 2], reset_toxics=no_toxiproxy, resume=lambda n: done.append(("resume", n)),
                     start=lambda n: done.append(("start", n)), wait_serving=lambda n, t: done.append(("wait", n)),
                     elect=lambda: done.append("elect"), timeout=5)
    assert list(caught.value.failures) == ["remove toxics"]
    assert done == [("resume", 1), ("start", 1), ("resume", 2), ("start", 2), ("wait", 1), ("wait", 2), "elect"]


def test_heal_keeps_only_the_failed_steps_and_a_second_heal_finds_nothing(two):
    journal, dirs = two
    journal.write(ENTRY)
    toxics = {**ENTRY, "id": "r1-nemesis-1", "kind": "network",
              "steps": [{"step": "remove-toxics", "toxics": [["kafka-2-client", "txnlab-latency-upstream"]]}]}
    journal.write(toxics)
    backend = FakeBackend(toxiproxy_up=False)
    report = heal_journal(dirs[0], backend, attempts=2)
    assert report.healed == ["r1-nemesis-0"] and list(report.failed) == ["r1-nemesis-1"] and not report.ok
    assert ("resume", 1) in backend.calls and backend.calls[-1][0] == "heal"
    assert [e["id"] for e in read_journal(dirs[1]).entries] == ["r1-nemesis-1"]   # both copies updated
    assert "toxiproxy down" in read_journal(dirs[0]).entries[0]["heal_errors"][
        "remove-toxics 1 toxics on kafka-2-client"]
    backend.toxiproxy_up = True
    assert heal_journal(dirs[1], backend).healed == ["r1-nemesis-1"]
    again = heal_journal(dirs[0], backend)
    assert again.nothing_to_do and again.ok and again.lines() == ["no active faults in the journal: nothing to heal"]


def test_a_feature_set_by_a_dead_run_is_set_back_from_the_journal(two, monkeypatch):
    journal, dirs = two
    journal.write({**ENTRY, "id": "r1-nemesis-2", "kind": "set-feature", "params": {"level": 1},
                   "steps": [{"step": "set-feature", "feature": "transaction.version", "level": 2, "expected": 1}]})
    calls = []
    monkeypatch.setattr(journal_module, "set_level",
                        lambda conn, feature, level, expected: calls.append((conn, feature, level, expected)))
    backend = FakeBackend()
    report = heal_journal(dirs[0], backend)
    assert report.healed == ["r1-nemesis-2"]
    assert calls == [(backend.connection(), "transaction.version", 2, 1)]     # only from the level the fault set


def test_steps_before_and_after_a_start(tmp_path):
    backend = SimpleNamespace(node_ids=lambda: [1, 2, 3],
                              toxic_names=lambda node, scope, toxic: [(f"n{node}", f"txnlab-{toxic['type']}-up")])
    env = FaultEnv(backend, None, None, random.Random(1), "r1")
    pause = make_fault("pause-broker", {"target": "random"})
    assert pause.undo_steps(env) == [{"step": "resume-nodes"}]
    pause.node = 2
    assert pause.undo_steps(env) == [{"step": "resume-node", "node": 2}]
    network = make_fault("network", {"target": "node:2", "toxic": "latency"})
    assert network.undo_steps(env) == [{"step": "remove-all-toxics"}]
    network.node = 2
    assert network.undo_steps(env) == [{"step": "remove-toxics", "toxics": [["n2", "txnlab-latency-up"]]}]
    hanging = make_fault("hanging-transaction", {"topic": "{tag}-a"})
    assert hanging.undo_steps(env) == []
    hanging.prepare(env)
    [step] = hanging.undo_steps(env)
    assert step["topic"] == "r1-a" and step["transactional_id"] == hanging.txn_id and step["producer_id"] is None


class FakeHistory:
    def __init__(self):
        self.ops = []

    def record(self, process, op_type, f, value):
        self.ops.append((process, op_type, f))


def test_a_fault_is_marked_healed_only_after_its_heal_succeeded(tmp_path):
    fault = make_fault("pause-broker", {"target": "node:1"})
    attempts = []

    def heal(env):
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("broker still stopped")
        return {"signal": "SIGCONT"}
    fault.heal = heal
    journal = Journal([tmp_path])
    journal.write(ENTRY)
    experiment = Experiment.__new__(Experiment)
    experiment.journal, experiment.progress = journal, lambda msg: None
    active = ActiveFault(SimpleNamespace(kind="pause-broker"), fault, {}, 0.0, "nemesis-0", entry=ENTRY["id"])
    run = SimpleNamespace(history=FakeHistory())
    assert experiment._heal_fault(active, run, None) is False and not active.healed
    assert read_journal(tmp_path).entries                                  # kept for the retry
    assert experiment._heal_fault(active, run, None) is True and active.healed
    assert experiment._heal_fault(active, run, None) is True and len(attempts) == 2
    assert read_journal(tmp_path).entries == []
    assert [op[1] for op in run.history.ops] == ["invoke", "fail", "invoke", "ok"]
    assert isinstance(active.lock, type(threading.Lock()))


def test_cluster_up_refuses_while_faults_are_journaled(tmp_path, capsys):
    from txnlab.cli import main
    Journal([tmp_path / FAULTS_DIR]).write(ENTRY)
    assert main(["cluster", "up", "--state-dir", str(tmp_path), "--base-port", "25000"]) == 2
    assert f"txnlab chaos heal --cluster {tmp_path}" in capsys.readouterr().err.replace("\n", "")
    assert not (tmp_path / "pids").exists()                                  # nothing started


def runner_of(proc: subprocess.Popen) -> dict:
    return {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()}


def test_a_dead_runners_workload_processes_are_stopped_first_and_a_live_runs_entries_are_not_touched(two, tmp_path,
                                                                                                     monkeypatch):
    journal, dirs = two
    from cluster.lab.supervisor import Supervisor
    run_dir = tmp_path / "run"
    workloads = Supervisor(run_dir / "pids")
    for name in ("txp-0", "proc-0"):
        workloads.start(name, ["sleep", "60"], run_dir / "logs" / f"{name}.log")
    workloads.pause("txp-0")                                  # a paused one must be resumed to exit
    runner = subprocess.Popen(["sleep", "60"])
    try:
        live = runner_of(runner)
        journal.write({**ENTRY, "runner": live})
        journal.write({"id": "r1-workloads", "kind": "workloads", "runner": live, "backend": ENTRY["backend"],
                       "steps": [{"step": "stop-run-processes", "run_dir": str(run_dir)}]})
        assert f"in progress on this cluster (runner pid {runner.pid})" in active_faults_message(dirs[1].parent)
        backend = FakeBackend(toxiproxy_up=False)
        untouched = heal_journal(dirs[0], backend)
        assert untouched.in_progress == {"r1-nemesis-0": runner.pid, "r1-workloads": runner.pid}
        assert not untouched.ok and backend.calls == [] and workloads.is_running("txp-0")
        assert "not touched r1-workloads: its run is in progress" in "\n".join(untouched.lines())
    finally:
        runner.kill()
        runner.wait()
    assert "still active on this cluster: pause-broker (r1-nemesis-0), workloads" in active_faults_message(
        dirs[1].parent)
    order = []
    original = journal_module.stop_run_processes
    monkeypatch.setattr(journal_module, "stop_run_processes", lambda step: (order.append("workloads"), original(step)))
    backend = FakeBackend(toxiproxy_up=False)
    backend.resume = lambda node: order.append(f"resume {node}")
    healed = heal_journal(dirs[0], backend)
    assert healed.ok and healed.healed == ["r1-workloads", "r1-nemesis-0"] and order == ["workloads", "resume 1"]
    assert not any(workloads.is_running(name) for name in workloads.names())
    assert all(read_journal(d).entries == [] for d in dirs)


def test_force_heals_under_a_live_runner(two):
    journal, dirs = two
    runner = subprocess.Popen(["sleep", "60"])
    try:
        journal.write({**ENTRY, "runner": runner_of(runner)})
        backend = FakeBackend(toxiproxy_up=False)
        forced = heal_journal(dirs[0], backend, force=True)
        assert forced.ok and forced.healed == ["r1-nemesis-0"] and ("resume", 1) in backend.calls
    finally:
        runner.kill()
        runner.wait()


def test_a_docker_entry_is_healed_through_the_compose_project_it_names():
    """After a kill -9 of a runner on the compose stack, `chaos heal` rebuilds the backend from the journal entry
    alone: the DockerBackend of the entry's compose project (the gate proves its heal steps live in test_docker's
    runs; the whole kill -9 on the stack is the campaign's: docs/testing.md)."""
    from chaos.nemesis.backends import DockerBackend
    entry = {"id": "r1-nemesis-0", "backend": {"backend": "docker", "project": "txnlab-test", "services": ["kafka-1"]}}
    backend = journal_module.backend_of(entry)
    assert isinstance(backend, DockerBackend) and backend.project == "txnlab-test"
    with pytest.raises(journal_module.JournalError, match="names no backend txnlab knows"):
        journal_module.backend_of({"id": "r1-nemesis-1", "backend": {"backend": "kubernetes"}})
