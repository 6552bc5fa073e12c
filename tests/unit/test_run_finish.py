"""Starting and finishing a run: the wait for a plan's ready processes; every file it can write is written even
when one cannot be (no cluster needed)."""
from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from chaos.runner import experiment as ex
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.run import Run
from chaos.workloads.base import READY_F
from cluster.access.connection import ConnectionSettings


def test_a_run_whose_end_offsets_cannot_be_read_writes_its_other_files_and_says_which_is_missing(tmp_path,
                                                                                                 monkeypatch):
    run = Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path / "run", "r1", 7, "t")
    asked = []

    def unreadable():
        asked.append(1)
        raise RuntimeError("UNKNOWN_LEADER_EPOCH")
    monkeypatch.setattr(run, "_end_offsets", unreadable)
    monkeypatch.setattr(run, "_cluster_info", lambda: {"bootstrap": "127.0.0.1:1"})
    monkeypatch.setattr(run, "_group_offsets", lambda: {"r1.eos": {}})
    summary = run.finish()
    assert list(summary["not_written"]) == ["end_offsets.json"] and "UNKNOWN_LEADER_EPOCH" in str(summary)
    assert len(asked) == 3                                           # retried before giving up
    assert not (tmp_path / "run" / "end_offsets.json").exists()      # verify: `unknown`, never an empty guess
    assert json.loads((tmp_path / "run" / "spec.json").read_text())["seed"] == 7
    assert json.loads((tmp_path / "run" / "group_offsets.json").read_text()) == {"r1.eos": {}}
    assert (tmp_path / "run" / "cluster.json").exists() and run.finish() == {}


def test_a_finished_run_removes_its_workloads_scratch_folder_with_what_a_killed_one_left(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    run = Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path / "run", "r2", 7, "t")
    assert not list(tmp_path.glob("txnlab-run-*"))                   # nothing before a workload starts
    monkeypatch.setattr(run.supervisor, "start", lambda *args, **kwargs: None)
    run.start(WorkloadSpec("txn-producer", "txp-0"))
    (run.scratch / "txnlab-streams-r2-streams-1-x" / "state").mkdir(parents=True)   # a killed instance's state
    for name in ("_end_offsets", "_cluster_info", "_group_offsets"):
        monkeypatch.setattr(run, name, lambda: {})
    run.finish()
    assert not list(tmp_path.glob("txnlab-run-*"))



class _Admin:
    """What _cluster_info asks of the admin client, answered without a cluster."""
    def __init__(self, conn): pass
    def __enter__(self): return self
    def __exit__(self, *exc): return None
    def registered_brokers(self): return [1]
    def active_controller(self): return 0


def test_the_workloads_run_the_java_clients_release_when_it_is_not_the_clusters(tmp_path, monkeypatch):
    from cluster.lab.versions import KAFKA_VERSION_VARIABLE
    monkeypatch.setattr("chaos.workloads.run.ClusterAdmin", _Admin)
    for java_clients, expected in ((None, "4.3.1"), ("3.6.2", "3.6.2")):
        envs = []
        run = Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path / f"run-{expected}", "r3", 7, "t",
                  kafka_version="4.3.1", java_clients=java_clients)
        monkeypatch.setattr(run.supervisor, "start", lambda *args, envs=envs, **kwargs: envs.append(kwargs["env"]))
        run.start(WorkloadSpec("streams", "streams-0"))
        assert envs[0][KAFKA_VERSION_VARIABLE] == expected
        info = run._cluster_info()
        assert (info["kafka_version"], info["java_clients"]) == ("4.3.1", expected)


def test_the_run_notes_each_groups_protocols_in_the_order_seen_for_cluster_json(tmp_path, monkeypatch):
    """A migration's group is classic, then consumer, then classic again; a group of another run is not the run's."""
    monkeypatch.setattr("chaos.workloads.run.ClusterAdmin", _Admin)
    run = Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path / "run", "r3", 7, "t", kafka_version="4.4.0")
    listings = iter([[{"group_id": "r3.eos", "group_type": "classic"}, {"group_id": "r9.eos", "group_type": "classic"}],
                     [{"group_id": "r3.eos", "group_type": "classic"}],
                     [{"group_id": "r3.eos", "group_type": "consumer"}],
                     [{"group_id": "r3.eos", "group_type": "classic"}, {"group_id": "r3.old"}]])   # before 4.0: no type

    class Listing:
        client = SimpleNamespace(list_groups=lambda: next(listings))

        def group_offsets(self, groups, topics):
            return {}
    for _ in range(4):
        run._group_offsets(Listing())
    assert run._cluster_info()["group_protocols"] == {"r3.eos": ["classic", "consumer", "classic"], "r3.old": []}


def test_the_method_waits_for_a_plans_ready_processes_and_refuses_to_start_without_them(tmp_path, monkeypatch):
    """Plan.ready (a Flink job's first checkpoint): the clock starts once each named process recorded `ready`;
    one that exits first, or is not ready in time, stops the experiment before any fault (NotReadyError)."""
    run = Run(ConnectionSettings(bootstrap="127.0.0.1:1"), tmp_path / "run", "r3", 7, "t")
    runner = ex.Experiment.__new__(ex.Experiment)
    runner.result, runner.progress = ex.ExperimentResult("x", 7, None, []), lambda message: None
    alive = ["flink-job", "flink-jm"]
    monkeypatch.setattr(run, "alive", lambda: list(alive))
    later = threading.Timer(0.6, lambda: run.history.record("flink-job", "ok", READY_F, {"checkpoint": 1}))
    later.start()
    runner._await_ready(run, ["flink-job"])
    later.join()
    assert 0.5 <= runner.result.ready_s < 3
    assert run.history.last_ok(ex.NEMESIS, "ready") is not None      # the wait is in the history
    runner._await_ready(run, [])                                      # no plan names one: no wait
    alive.remove("flink-jm")
    with pytest.raises(ex.NotReadyError, match="flink-jm exited"):
        runner._await_ready(run, ["flink-jm"])
    alive.append("flink-jm")
    monkeypatch.setattr(ex, "READY_TIMEOUT_S", 0.5)
    with pytest.raises(ex.NotReadyError, match="not ready after 0.5 s"):
        runner._await_ready(run, ["flink-jm"])
    run.history.close()
