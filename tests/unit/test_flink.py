"""The flink workload's pure parts: its plan, its options, the Flink cluster's ports, settings and checkpoints
(cluster/lab/flink_cluster.py), what it records of Flink's console and exceptions."""
from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest

from chaos.workloads.plans import plan
from chaos.runner.spec import load_spec
from chaos.catalog.bugs import load_bug
from chaos.workloads import flink as workload
from cluster.lab import flink_cluster
from cluster.lab.layout import LOOPBACK


def options(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    workload.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_plan_is_a_keyed_feeder_a_jobmanager_taskmanagers_and_the_jobs_client():
    p = plan("flink", "rt", 2, ["--checkpoint-ms", "1000"])
    assert p.topics == {"rt-fin-a": 6, "rt-fin-b": 6, "rt-fout": 6, "rt-fcounts": 6}
    assert [s.process for s in p.specs] == ["flink-feeder", "flink-jm", "flink-tm-0", "flink-tm-1", "flink-job"]
    assert p.specs[0].args[-2:] == ("--keys", "16")
    job = p.specs[-1].args
    assert job[:2] == ("--role", "job") and job[-2:] == ("--checkpoint-ms", "1000")
    assert "--inputs" in job and job[job.index("--output") + 1] == "rt-fout"
    assert p.outputs == ("rt-fout", "rt-fcounts")
    assert p.ready == ("flink-job",)                     # the method's clock starts at the job's first checkpoint


def test_options_are_checked_before_anything_starts():
    workload.check_args(options("--role", "jobmanager"))
    for argv, message in [(("--role", "job"), "needs --inputs, --output and --counts"),
                          (("--role", "taskmanager", "--checkpoint-ms", "0"), "--checkpoint-ms must be at least 1"),
                          (("--role", "jobmanager", "--group", " "), "--group may not be empty")]:
        with pytest.raises(workload.FlinkWorkloadError, match=message):
            workload.check_args(options(*argv))
    assert workload.group("rt", options("--role", "job")) == "rt.flink"
    assert workload.txn_prefix("rt", options("--role", "job", "--group", "g")) == "g"
    assert workload.txn_prefix("rt", options("--role", "job", "--txn-prefix", "p")) == "p"


def test_the_topology_names_the_group_and_no_changelog():
    args = options("--role", "job", "--inputs", "a", "b", "--output", "o", "--counts", "c")
    top = workload.topology("rt", args)
    assert (top["application_id"], top["sources"], top["sink"], top["counts"], top["changelog"]) == \
        ("rt.flink", ["a", "b"], "o", "c", None)
    assert top["engine"] == "flink" and top["txn_prefix"] == "rt.flink"


def test_ports_are_chosen_once_free_and_recorded(tmp_path):
    first = flink_cluster.choose_ports(tmp_path / "home", 3)
    assert first.base in flink_cluster.FLINK_PORTS and (first.base - flink_cluster.FLINK_PORTS.start) % flink_cluster.PORT_BLOCK == 0
    assert flink_cluster.choose_ports(tmp_path / "home", 7) == first == flink_cluster.recorded_ports(tmp_path / "home")
    with socket.socket() as busy:                       # a block with one port taken is passed over
        busy.bind((LOOPBACK, first.base + 1))
        other = flink_cluster.choose_ports(tmp_path / "other", (first.base - flink_cluster.FLINK_PORTS.start) // flink_cluster.PORT_BLOCK)
    assert other.base != first.base
    assert flink_cluster.recorded_ports(tmp_path / "none") is None
    assert first.rest_url == f"http://{LOOPBACK}:{first.base + 1}"


def test_settings_bind_everything_to_loopback_and_retain_checkpoints(tmp_path):
    values = flink_cluster.settings(tmp_path, flink_cluster.Ports(31000), slots=2, parallelism=2, heartbeat_timeout_ms=10000)
    hosts = {k: v for k, v in values.items() if k.endswith(("address", "host", "bind-host"))}
    assert hosts and set(hosts.values()) == {LOOPBACK}
    assert values["rest.port"] == "31001" and values["taskmanager.data.bind-port"] == "31010-31015"
    assert values["execution.checkpointing.externalized-checkpoint-retention"] == "RETAIN_ON_CANCELLATION"
    assert values["execution.checkpointing.dir"] == (tmp_path / "checkpoints").as_uri()
    assert values["python.execution-mode"] == "thread"


def test_the_newest_retained_checkpoint(tmp_path):
    assert flink_cluster.latest_checkpoint(tmp_path) is None
    for job, n in (("a", 3), ("a", 12), ("b", 4)):
        (tmp_path / "checkpoints" / job / f"chk-{n}").mkdir(parents=True)
    (tmp_path / "checkpoints" / "a" / "chk-3" / "_metadata").write_text("x")
    assert flink_cluster.latest_checkpoint(tmp_path).endswith("a/chk-3")       # chk-12 and chk-4: not complete
    (tmp_path / "checkpoints" / "b" / "chk-4" / "_metadata").write_text("x")
    assert flink_cluster.latest_checkpoint(tmp_path).endswith("b/chk-4")


def test_only_errors_of_flinks_console_reach_the_history(capsys):
    events = workload.LogEvents()
    assert events.convert("2026-11-28 04:13:38,562 INFO  org.apache.flink.X [] - fine\n") == []
    [op] = events.convert("2026-11-28 04:13:38,562 ERROR org.apache.flink.connector.kafka.sink.internal."
                          "KafkaCommitter [] - Unable to commit transaction\n")
    assert op.f == "flink" and op.value["event"] == "log" and "Unable to commit" in op.value["line"]
    assert "fine" in capsys.readouterr().err                # every line goes to the process's log


def test_the_innermost_cause_of_a_java_stack_trace():
    trace = ("java.io.IOException: outer\n\tat x\nCaused by: a.B: middle\n\tat y\n"
             "Caused by: org.apache.kafka.common.errors.InvalidProducerEpochException: old epoch\n\tat z")
    assert workload.first_cause(trace) == "org.apache.kafka.common.errors.InvalidProducerEpochException: old epoch"
    assert workload.first_cause("java.lang.IllegalStateException: x\n\tat a") == "java.lang.IllegalStateException: x"


def test_the_built_in_flink_experiments_and_the_timeout_trap_load():
    for name in ("flink-taskmanager-kill", "flink-jobmanager-kill", "flink-coordinator-kill", "flink-abandoned-job"):
        for short in (False, True):
            spec = load_spec(name, short=short)
            assert [w.workload for w in spec.workloads] == ["flink"]
            assert not short or spec.time_budget_s() <= 90
    bug = load_bug("flink-transaction-timeout")
    timeouts = [w.options[w.options.index("--transaction-timeout-ms") + 1]
                for w in (bug.affected.workloads[0], bug.fixed.workloads[0])]
    assert timeouts == ["8000", "60000"]
    assert bug.expect.checks == ["streams_processing:unprocessed", "streams_state"]


def test_a_job_client_adopts_submits_again_and_records_checkpoints_once(tmp_path):
    """The client's REST bookkeeping against recorded answers: a job lost with its JobManager is submitted again,
    each completed checkpoint recorded once per job."""
    seen = []

    class Ctx:
        run_tag, process = "rt", "flink-job"

        def observe(self, f, value):
            seen.append(value if f == "flink" else {"event": f, **value})

    class Rest:
        def __init__(self, answers):
            self.answers = answers

        def call(self, path, method="GET"):
            return self.answers[path]

    client = workload.JobClient(Ctx(), options("--role", "job"), tmp_path)
    client.job_id = "j1"
    history = {"history": [{"id": 2, "status": "COMPLETED", "trigger_timestamp": 5},
                           {"id": 3, "status": "IN_PROGRESS"}, {"id": 1, "status": "FAILED", "failure_message": "x"}],
               "latest": {"restored": {"id": 7, "restore_timestamp": 9, "external_path": "file:/c/chk-7"}}}
    client.rest = Rest({"/jobs/j1/checkpoints": history})
    client.note_checkpoints()
    client.note_checkpoints()
    # the first completed checkpoint makes the client ready, once: the run's clock starts (chaos/workloads/plans.py)
    assert [(v["event"], v.get("checkpoint"), v.get("status")) for v in seen] == \
        [("restored", 7, None), ("checkpoint", 1, "FAILED"), ("checkpoint", 2, "COMPLETED"), ("ready", 2, None)]
    assert json.dumps(seen)                               # every value is JSON for the history


def test_the_demo_takes_the_flink_experiment_as_an_option(monkeypatch):
    from report import demo
    from txnlab import cli
    from txnlab.commands.suites import FLINK_DEMO
    taken = []

    class Stop(Exception):
        pass

    def capture(options, progress):
        taken.append(options.experiments)
        raise Stop
    monkeypatch.setattr(demo, "Demo", capture)
    for argv, expected in ((["demo"], demo.DEFAULT_SUITE), (["demo", "--with-flink"], (*demo.DEFAULT_SUITE, FLINK_DEMO)),
                           (["demo", "--experiments", "flink-taskmanager-kill", "--with-flink"], (FLINK_DEMO,))):
        args = cli.build_parser().parse_args(argv)
        with pytest.raises(Stop):
            args.func(args)
        assert taken[-1] == expected
    load_spec(FLINK_DEMO)                              # a built-in


def test_what_a_jvm_leaves_in_the_workload_s_process_group_is_killed_and_nothing_else(tmp_path):
    """reap_leftovers in a process leading its own group (as the supervisor starts workloads): its group's other
    members (a child that outlived its parent, as a TaskManager's Python workers) die; a process of another group
    does not."""
    import subprocess
    import sys
    import time
    import psutil
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    script = ("import subprocess, sys, json\n"
              "from chaos.workloads.jvm import reap_leftovers\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(json.dumps({'child': child.pid, 'killed': reap_leftovers()}))\n")
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              start_new_session=True, cwd=str(Path(__file__).resolve().parents[2]))
        got = json.loads(done.stdout)
        assert got["killed"] == [got["child"]]
        time.sleep(0.2)
        assert not psutil.pid_exists(got["child"]) or psutil.Process(got["child"]).status() == psutil.STATUS_ZOMBIE
        assert outsider.poll() is None                            # another group's process lives on
    finally:
        outsider.kill()
        outsider.wait()
