"""The process supervisor on real (tiny) processes: start, pause, resume, stop, pid-reuse safety."""
from __future__ import annotations

import json
import signal
import sys

import psutil
import pytest

from cluster.lab.supervisor import Supervisor, start_ticks
from cluster.access.waiting import wait_until

SLEEPER = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"]


@pytest.fixture
def supervisor(tmp_path):
    sup = Supervisor(tmp_path / "pids")
    yield sup
    for name in sup.names():
        sup.kill(name)


def test_start_pause_resume_stop(supervisor, tmp_path):
    rec = supervisor.start("sleeper", SLEEPER, tmp_path / "sleeper.log")
    assert supervisor.is_running("sleeper") and supervisor.names() == ["sleeper"]
    assert supervisor.pause("sleeper")
    wait_until(lambda: supervisor.is_paused("sleeper"), 5, "stopped state")
    supervisor.resume("sleeper")
    wait_until(lambda: not supervisor.is_paused("sleeper"), 5, "running state")
    supervisor.pause("sleeper")
    assert supervisor.stop("sleeper", timeout=5)   # a paused process is continued, then terminated: by itself
    assert not supervisor.is_running("sleeper")
    assert not psutil.pid_exists(rec.pid)          # exited and reaped, not a zombie


def test_stop_says_when_a_process_had_to_be_killed(supervisor, tmp_path):
    deaf = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)"]
    supervisor.start("deaf", deaf, tmp_path / "deaf.log")
    wait_until(lambda: "ready" in (tmp_path / "deaf.log").read_text(), 10, "the SIGTERM handler")
    assert supervisor.stop("deaf", timeout=0.5) is False and not supervisor.is_running("deaf")
    assert supervisor.stop("deaf") is True                      # not running: nothing to kill


def test_second_start_of_a_running_name_is_refused(supervisor, tmp_path):
    supervisor.start("one", SLEEPER, tmp_path / "one.log")
    with pytest.raises(RuntimeError, match="already running"):
        supervisor.start("one", SLEEPER, tmp_path / "one.log")


def test_a_reused_pid_is_not_ours(supervisor, tmp_path):
    rec = supervisor.start("victim", SLEEPER, tmp_path / "v.log")
    path = tmp_path / "pids" / "victim.json"
    data = json.loads(path.read_text())
    data["start_ticks"] -= 1000                    # as if the pid now belonged to another process
    path.write_text(json.dumps(data))
    assert not supervisor.is_running("victim")
    assert not supervisor.signal("victim", 9)
    del data["start_ticks"]                        # a record of a txnlab before them: its create time decides
    data["create_time"] -= 1000
    path.write_text(json.dumps(data))
    assert not supervisor.is_running("victim")
    assert psutil.Process(rec.pid).is_running()    # untouched
    psutil.Process(rec.pid).kill()


def test_a_step_of_the_wall_clock_leaves_our_processes_ours(supervisor, tmp_path):
    """The create time is boot time plus the start, in wall-clock seconds: a clock stepped 17 s (a VM restored
    from a snapshot, 2026-12-01) moves it, the start ticks since boot stay; the process is still ours and stops."""
    rec = supervisor.start("steady", SLEEPER, tmp_path / "s.log")
    assert rec.start_ticks is not None and rec.start_ticks == start_ticks(rec.pid)
    path = tmp_path / "pids" / "steady.json"
    data = json.loads(path.read_text())
    data["create_time"] += 17
    path.write_text(json.dumps(data))
    assert supervisor.is_running("steady")
    supervisor.kill("steady", 10)
    assert not psutil.pid_exists(rec.pid) or psutil.Process(rec.pid).status() == psutil.STATUS_ZOMBIE


def test_missing_or_corrupt_records_mean_not_running(supervisor, tmp_path):
    assert supervisor.process("nothing") is None
    (tmp_path / "pids").mkdir(exist_ok=True)
    (tmp_path / "pids" / "bad.json").write_text("{not json")
    assert not supervisor.is_running("bad")


def test_pause_resume_and_kill_reach_the_children_of_a_workload_but_term_only_it(supervisor, tmp_path):
    """A workload and the JVM it runs pause, resume and die together (the Streams instance is the JVM)."""
    child_pid = tmp_path / "child.pid"
    script = ("import subprocess, sys, time, signal\n"
              "signal.signal(signal.SIGTERM, lambda *_: None)\n"           # TERM must not reach the child
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(child_pid)!r}, 'w').write(str(c.pid))\n"
              "time.sleep(60)\n")
    supervisor.start("parent", [sys.executable, "-c", script], tmp_path / "parent.log")
    wait_until(lambda: child_pid.exists() and child_pid.read_text(), 10, "the child's pid")
    child = psutil.Process(int(child_pid.read_text()))
    assert supervisor.pause("parent")
    wait_until(lambda: child.status() == psutil.STATUS_STOPPED, 5, "the child stopped")
    assert supervisor.resume("parent")
    wait_until(lambda: child.status() != psutil.STATUS_STOPPED, 5, "the child resumed")
    supervisor.signal("parent", signal.SIGTERM)
    assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
    supervisor.kill("parent")
    wait_until(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, 5, "the child killed")
