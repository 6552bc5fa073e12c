"""Bounded client calls (chaos/workloads/base.py): a call past twice its timeout is a stall, recorded and ended
with EXIT_STALL; the runner's restart of a stalled process (chaos/workloads/run.py); recovery's reading of stalls and
restarts (chaos/record/recovery.py); a stall matched to the catalog (chaos/catalog/bugs.py, report/build.py, report/bugs.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from chaos.record.history import HistoryWriter, read_history
from chaos.record.recovery import recovery
from chaos.workloads import base
from chaos.record.recovery import STALL_F
from chaos.workloads.base import EXIT_STALL, CallWatch, stall_limit
from cluster.lab.clients import CLIENTS
from cluster.lab.supervisor import Supervisor
from tests.unit.test_recovery import commit, fault, op, quiescence, run


def test_a_call_is_a_stall_at_twice_its_timeout_never_below_the_floor():
    assert stall_limit(10.0) == 20.0 and stall_limit(0.5) == base.STALL_FLOOR_S
    watch = CallWatch(on_stall=lambda stall: None)
    watch.calls[1] = {"call": "send_offsets_to_transaction", "timeout_s": 10.0, "limit_s": 20.0, "seconds": 0.0}
    assert watch.age(19.9) is None
    thread_id, entry = watch.age(0.2)
    assert thread_id == 1 and entry["call"] == "send_offsets_to_transaction" and entry["seconds"] == pytest.approx(20.1)


def test_the_watchdog_names_the_stuck_call_and_its_stack_and_a_finished_call_is_forgotten(monkeypatch):
    monkeypatch.setattr(base, "STALL_FLOOR_S", 0.05)
    stalls: list[dict] = []
    done = threading.Event()
    watch = CallWatch(on_stall=lambda stall: (stalls.append(stall), done.set()), tick_s=0.01)
    with watch.call("flush", 0.02):
        pass                                             # returned in time: never a stall
    assert watch.calls == {}

    def stuck_in_commit() -> None:
        with watch.call("commit_transaction", 0.05):
            done.wait(5)
    worker = threading.Thread(target=stuck_in_commit, name="committer")
    worker.start()
    worker.join(5)
    [stall] = stalls
    assert stall["call"] == "commit_transaction" and stall["timeout_s"] == 0.05 and stall["thread"] == "committer"
    assert stall["seconds"] >= 0.1 and any("stuck_in_commit" in line for line in stall["stack"])


def test_a_stopped_process_does_not_age_its_calls():
    """The loop adds at most two ticks per look: a SIGSTOP of a minute is not a minute of a call's time."""
    watch = CallWatch(on_stall=lambda stall: None, tick_s=0.25)
    watch.calls[1] = {"call": "consume", "timeout_s": 0.5, "limit_s": 5.0, "seconds": 0.0}
    step = min(60.0, 2 * watch.tick_s)                  # what _loop adds after a 60 s gap
    assert watch.age(step) is None and watch.calls[1]["seconds"] == 0.5


STALLING_WORKLOAD = textwrap.dedent("""
    import sys, time
    from chaos.workloads import base
    from chaos.workloads.base import WorkloadContext
    from chaos.record.history import HistoryClient
    base.STALL_FLOOR_S = 0.2
    ctx = WorkloadContext(conn=None, history=HistoryClient(sys.argv[1], int(sys.argv[2])), run_tag="r1",
                          process="eos-0", rng=None, deadline=None)
    ctx.client = {"client": "confluent-kafka", "library": "librdkafka", "library_version": "2.16.0"}
    ctx.invoke("process", {"attempt": "r1.eos-0.0"})
    with ctx.client_call("send_offsets_to_transaction", 0.1):
        time.sleep(30)                                   # a call that ignores its timeout
    print("returned")
""")


def test_a_stalled_workload_completes_its_attempt_as_info_records_the_stall_and_exits_75(tmp_path):
    history = HistoryWriter(tmp_path)
    socket = history.serve()
    script = tmp_path / "stalling_workload.py"
    script.write_text(STALLING_WORKLOAD)
    proc = subprocess.run([sys.executable, str(script), str(socket), str(history.run_start_ns)],
                          capture_output=True, text=True, timeout=20)
    history.close()
    assert proc.returncode == EXIT_STALL and "returned" not in proc.stdout
    ops = [o for o in read_history(tmp_path).ops if o["process"] == "eos-0"]
    assert [(o["type"], o["f"]) for o in ops] == [("invoke", "process"), ("info", "process"), ("ok", STALL_F)]
    info, stall = ops[1]["value"], ops[2]["value"]
    assert info["attempt"] == "r1.eos-0.0" and info["stalled"] == "send_offsets_to_transaction"
    assert stall["call"] == "send_offsets_to_transaction" and stall["library"] == "librdkafka"
    assert stall["library_version"] == "2.16.0" and stall["thread"] == "MainThread"
    assert any("time.sleep(30)" in line for line in stall["stack"])


def test_supervisor_knows_how_its_children_ended(tmp_path):
    sup = Supervisor(tmp_path / "pids")
    sup.start("stalled", [sys.executable, "-c", "import sys; sys.exit(75)"], tmp_path / "a.log")
    sup.start("running", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "b.log")
    sup.wait_gone("stalled", 10)
    assert sup.exit_code("stalled") == 75 and sup.exit_code("running") is None and sup.exit_code("nobody") is None
    sup.kill("running")
    assert sup.exit_code("running") == -9


def test_the_runner_restarts_a_stalled_process_after_the_delay_and_records_it(tmp_path, monkeypatch):
    from chaos.workloads.plans import WorkloadSpec
    from chaos.workloads.run import Run
    the_run = Run(conn=None, run_dir=tmp_path, run_tag="r1", seed=1, name="t")
    started: list[WorkloadSpec] = []
    monkeypatch.setattr(the_run, "start", lambda spec, duration=0.0: started.append(spec))
    the_run.info.specs.append({"workload": "processor", "process": "eos-0", "args": ["--inputs", "a"]})
    the_run.info.specs.append({"workload": "processor", "process": "eos-1", "args": ["--inputs", "a"]})
    the_run.history.record("eos-0", "invoke", "process", {"attempt": "x"})
    the_run.supervisor.start("eos-0", [sys.executable, "-c", "import sys; sys.exit(75)"], tmp_path / "l0.log")
    the_run.supervisor.start("eos-1", [sys.executable, "-c", "import sys; sys.exit(1)"], tmp_path / "l1.log")
    began = time.monotonic()
    the_run.restart_stalled(delay_s=0.5)
    deadline = time.monotonic() + 10
    while not started and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)                                       # eos-1 (exit 1, no stall) must stay down
    the_run.stop_restarting()
    the_run.history.close()
    assert started == [WorkloadSpec("processor", "eos-0", ("--inputs", "a", "--incarnation", "1"))]
    assert time.monotonic() - began >= 0.5
    ops = [o for o in read_history(tmp_path).ops if o["process"] == "eos-0"]
    assert [(o["type"], o["f"], o["value"].get("reason")) for o in ops] == [
        ("invoke", "process", None), ("info", "process", "stalled"), ("ok", "restart", "stall")]
    assert ops[2]["value"]["restarts"] == 1 and ops[2]["value"]["exit_code"] == EXIT_STALL


def stall(t: float, process: str, seconds: float = 20.0, call: str = "send_offsets_to_transaction") -> dict:
    return op(t, process, "ok", "stall", call=call, seconds=seconds, timeout_s=10.0, client="confluent-kafka",
              library="librdkafka", library_version="2.16.0")


def test_a_process_that_commits_only_after_its_restart_recovered_after_a_restart():
    found = recovery(run(commit(1, "eos-0", "process"), commit(1, "feeder"), fault(10, 18), commit(19, "feeder"),
                         stall(31, "eos-0"), op(33, "eos-0", "ok", "restart", reason="stall"),
                         commit(36, "eos-0", "process"), fault(40, 45, n=1), commit(46, "eos-0", "process"),
                         commit(46, "feeder"), quiescence(55)))
    first, second = found["faults"]
    assert first["recovered"] is True and first["restarted"] == ["eos-0"]
    assert first["processes"]["eos-0"]["restarted_s"] == 33.0 and first["processes"]["eos-0"]["status"] == "recovered"
    [entry] = first["stalls"]
    assert (entry["process"], entry["call"], entry["at_s"], entry["restarted_s"]) == \
        ("eos-0", "send_offsets_to_transaction", 31.0, 33.0)
    assert "feeder" not in first["restarted"]
    assert second["stalls"] == [] and second["restarted"] == []       # the restart was the first fault's


def test_a_stall_belongs_to_the_fault_under_which_its_call_began():
    found = recovery(run(commit(1, "eos-0", "process"), fault(10, 16), fault(25, 28, n=1), stall(31, "eos-0"),
                         op(33, "eos-0", "ok", "restart", reason="stall"), commit(35, "eos-0", "process"),
                         quiescence(50)))
    assert [len(f["stalls"]) for f in found["faults"]] == [1, 0]      # began at 11 s: under the first fault


def test_a_stalled_process_never_restarted_is_not_recovered_and_why_names_the_call():
    found = recovery(run(commit(1, "eos-0", "process"), fault(10, 18), stall(31, "eos-0"), quiescence(55)))
    [f] = found["faults"]
    assert f["recovered"] is False and f["stalls"][0]["restarted_s"] is None
    assert any("send_offsets_to_transaction stalled (librdkafka 2.16.0), never restarted" in w for w in f["why"])


def test_a_stall_matches_the_catalogued_librdkafka_bug_by_call_and_library():
    from report.build import stall_bugs, stall_line
    entry = {"process": "eos-1", "call": "send_offsets_to_transaction", "at_s": 31.0, "library": "librdkafka",
             "library_version": "2.16.0", "restarted_s": 33.0}
    assert [b["id"] for b in stall_bugs(entry)] == ["librdkafka-5456"]
    assert stall_bugs({**entry, "library": "kafka-clients"}) == [] and stall_bugs({**entry, "call": "flush"}) == []
    assert stall_line(entry) == ("eos-1: send_offsets_to_transaction stalled (librdkafka 2.16.0) at 31.0 s, "
                                 "restarted at 33.0 s; catalogued as librdkafka-5456")


def test_the_summary_says_recovered_after_a_restart_and_names_the_bug():
    from report.build import recovered_cell
    ops = run(commit(1, "eos-0", "process"), fault(10, 18), stall(31, "eos-0"),
              op(33, "eos-0", "ok", "restart", reason="stall"), commit(36, "eos-0", "process"), quiescence(55))
    assert recovered_cell({"recovery": recovery(ops)}) == \
        "after a restart (eos-0: send_offsets_to_transaction stalled, librdkafka-5456)"
    plain = run(commit(1, "eos-0", "process"), fault(10, 18), commit(20, "eos-0", "process"), quiescence(55))
    assert recovered_cell({"recovery": recovery(plain)}) is True


def test_a_stall_of_the_expected_call_reproduces_a_client_bug_and_any_stall_is_not_clean(tmp_path):
    from report.bugs import judge
    from tests.unit.test_bugs import with_checks
    from tests.unit.test_report import stored_run
    run_dir = with_checks(stored_run(tmp_path, "gc-kill", 1), duplicate=0)
    assert judge(run_dir, [], (), ("send_offsets_to_transaction",))["reproduced"] is False
    with HistoryWriter(run_dir) as history:           # appended, as the stalled workload would
        history.record("txp-0", "ok", "stall", {"call": "send_offsets_to_transaction", "seconds": 20.0,
                                                "library": "librdkafka"})
    got = judge(run_dir, [], (), ("send_offsets_to_transaction",))
    assert got["reproduced"] is True and got["clean"] is False and got["valid"] is True
    assert got["stalls"][0]["call"] == "send_offsets_to_transaction"
    other = judge(run_dir, [], (), ("commit_transaction",))
    assert other["reproduced"] is False and other["clean"] is False      # a stall of another call: not clean either
    assert judge(run_dir, ["duplicate"])["clean"] is True      # a bug that shows in the checks: stalls not asked


def test_a_call_already_running_when_the_first_fault_started_belongs_to_that_fault():
    found = recovery(run(commit(1, "eos-0", "process"), fault(10, 16), stall(29.9, "eos-0"),
                         op(32, "eos-0", "ok", "restart", reason="stall"), commit(34, "eos-0", "process"),
                         quiescence(50)))
    [f] = found["faults"]                                 # the call began at 9.9 s, the kill came at 10 s
    assert len(f["stalls"]) == 1 and f["restarted"] == ["eos-0"]
    lone = recovery(run(commit(1, "eos-0", "process"), stall(25, "eos-0"), fault(30, 35), quiescence(50)))
    assert lone["faults"][0]["stalls"] == [] and len(lone["stalls"]) == 1      # no fault explains it: the run's


def test_a_restart_that_fails_is_recorded_with_its_error_and_the_restarter_goes_on(tmp_path, monkeypatch):
    from chaos.workloads.run import Run

    def refuse(spec, duration=0.0):
        raise OSError("no such file: processor")
    the_run = Run(conn=None, run_dir=tmp_path, run_tag="r1", seed=1, name="t")
    monkeypatch.setattr(the_run, "start", refuse)
    for name in ("eos-0", "eos-1"):
        the_run.info.specs.append({"workload": "processor", "process": name, "args": []})
        the_run.supervisor.start(name, [sys.executable, "-c", "import sys; sys.exit(75)"], tmp_path / f"{name}.log")
    the_run.restart_stalled(delay_s=0.1)
    deadline = time.monotonic() + 10
    failed = []
    while len(failed) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        failed = [o for o in read_history(tmp_path).ops if o["f"] == "restart"]
    the_run.stop_restarting()
    the_run.history.close()
    ops = [o for o in read_history(tmp_path).ops if o["f"] == "restart"]
    assert sorted(o["process"] for o in ops) == ["eos-0", "eos-1"]       # the first failure did not end the loop
    assert all(o["type"] == "fail" and o["value"]["error"] == "OSError: no such file: processor" for o in ops)


def test_a_stalled_process_whose_restart_failed_is_not_recovered_and_why_says_so():
    found = recovery(run(commit(1, "eos-0", "process"), fault(10, 18), stall(31, "eos-0"),
                         op(33, "eos-0", "fail", "restart", reason="stall", error="OSError: gone"), quiescence(55)))
    [f] = found["faults"]
    assert f["recovered"] is False and f["stalls"][0]["restart_error"] == "OSError: gone"
    assert any("its restart failed: OSError: gone" in w for w in f["why"])


def test_a_process_restarted_late_is_awaited_until_it_commits_again(tmp_path):
    from chaos.record.recovery import COMMIT_F
    from chaos.workloads.run import Run
    the_run = Run(conn=None, run_dir=tmp_path, run_tag="r1", seed=1, name="t")
    try:
        the_run.supervisor.start("eos-0", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "l.log")
        the_run.history.record("eos-0", "ok", "process", {"attempt": "r1.eos-0.0"})       # before its stall
        the_run.restarted_at["eos-0"] = the_run.history.record("eos-0", "ok", "restart", {"reason": "stall"})["time"]
        the_run.pending_restarts.add("eos-1")                                               # about to restart
        assert the_run.awaiting_restart(COMMIT_F) == ["eos-0", "eos-1"]
        the_run.history.record("eos-0", "invoke", "process", {"attempt": "r1.eos-0.1000000000"})
        the_run.history.record("eos-0", "ok", "process", {"attempt": "r1.eos-0.1000000000"})
        the_run.pending_restarts.discard("eos-1")
        assert the_run.awaiting_restart(COMMIT_F) == []
        assert the_run.history.last_ok("eos-0", "process") is not None and the_run.history.last_ok("eos-0", "txn") is None
        the_run.restarted_at["eos-0"] = the_run.history.record("eos-0", "ok", "restart", {"reason": "stall"})["time"]
        the_run.supervisor.kill("eos-0")
        assert the_run.awaiting_restart(COMMIT_F) == []         # restarted again but gone: nothing to wait for
    finally:
        the_run.supervisor.kill("eos-0")
        the_run.history.close()


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node.js (scripts/setup.sh installs it)")
def test_a_kafkajs_call_is_a_stall_only_past_its_retry_waits():
    """KafkaJS retries a call on its own, each wait twice the last up to 30 s: its watchdog (chaos/workloads/kafkajs/
    watch.js) bounds a call at twice its request timeout plus that wait (watch.test.js, run with `node --test`)."""
    proc = subprocess.run(["node", "--test", "watch.test.js"], cwd=CLIENTS["kafkajs"].source, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "# pass 1" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
