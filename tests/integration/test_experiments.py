"""The built-in experiments in short mode on the real cluster, interrupted runs, and the zombie's fate."""
from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest
import yaml

from chaos.nemesis.backends import LocalBackend
from chaos.record.history import read_history
from chaos.record.ids import decode_value
from chaos.runner.experiment import Experiment
from chaos.runner.spec import builtin_specs, load_spec, parse_spec
from chaos.workloads.plans import option_value
from chaos.workloads import flink
from cluster.access.reads import read_to_end
from cluster.access.waiting import wait_until
from tests.integration.conftest import CAMPAIGN, TEST_BASE_PORT, cluster_state_dir
from tests.integration.test_workloads import assert_complete
from tests.cli import chaos_run, txnlab

BUILTINS = sorted(builtin_specs())
DRILL = {"hanging-transaction-drill"}
RECOVERING = {"coordinator-kill", "zombie-producer"}
STREAMS = {n for n in BUILTINS if n.startswith("streams-")}        # tests/integration/test_streams.py runs them
FLINK = {n for n in BUILTINS if n.startswith("flink-")}            # tests/integration/test_flink.py runs them


def assert_healed(cluster) -> None:
    left = cluster.unhealed()                 # nodes unregistered or paused, toxics (bench/heal_trials.py too)
    assert not left, left


def nemesis(ops: list[dict], f: str, op_type: str = "ok") -> list[dict]:
    return [op for op in ops if op["process"].startswith("nemesis") and op["f"] == f and op["type"] == op_type]


def drop_run_topics(cluster, result) -> None:
    """Experiments restart brokers: keep the shared cluster small so restarts stay quick."""
    from confluent_kafka.admin import AdminClient
    topics = list(result.summary.get("end_offsets", {}))
    if topics:
        admin = AdminClient(cluster.connection().confluent())      # kept alive until the futures resolve
        for future in admin.delete_topics(topics).values():
            future.result(30)


KEPT = {"zombie-producer"}        # read again by a later test of this module: its topics go at the module's end


@pytest.fixture(scope="module")
def short_runs(request, tmp_path_factory):
    """name -> its short run (run_short), each built-in run at most once in this module."""
    done = {}

    def get(name: str):
        if name not in done:
            cluster = request.getfixturevalue("drill_cluster" if name in DRILL else "cluster")
            done[name] = run_short(name, cluster, tmp_path_factory.mktemp(name),
                                   request.addfinalizer if name in KEPT else lambda drop: drop())
        return done[name]
    return get


# No built-in runs whole in the gate (docs/testing.md): each family's faults and what they prove are proven once
# elsewhere, the compositions are the campaign's (`experiment/<name>/<client>`, the tests cell). The network is the
# compose stack's latency toxic and isolation under franz-go (test_docker.py, verified valid; the local backend's
# toxics in test_fault_kinds.py and test_chaos_heal.py), a broker killed is coordinator-kill's on the compose stack
# (test_docker.py, Kafka's Java clients), a producer fenced is the demo's zombie (test_demo.py, verified valid:
# nothing the zombie wrote after its fence read), the hanging drill is its fault kind injected and healed by an
# abort on the drill cluster (test_fault_kinds.py), flagged within two intervals and cleared by the exporter
# (test_exporter_drill.py), its alerts fired (test_dashboards.py).
GATE: set[str] = set()


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in GATE else CAMPAIGN)
                                  for n in BUILTINS if n not in STREAMS | FLINK])
def test_builtin_experiment_short_mode(name, short_runs):
    short_runs(name)


def run_short(name: str, cluster, runs_dir, finalizer, seed: int = 11, spec=None):
    """One built-in experiment in short mode (or `spec`, a short variant of it), with what every short run must
    show; its result."""
    spec = spec or load_spec(name, short=True)
    started = time.monotonic()
    result = Experiment(spec, seed=seed, runs_dir=runs_dir, progress=print, backend=LocalBackend(cluster)).run()
    finalizer(lambda: drop_run_topics(cluster, result))
    elapsed = time.monotonic() - started
    ops = read_history(result.run_dir).ops
    workload_ops = [op for op in ops if not op["process"].startswith("nemesis")]
    faults, heals = nemesis(ops, "fault"), nemesis(ops, "heal")
    assert workload_ops and faults and len(heals) == len(nemesis(ops, "fault", "invoke")), (faults, heals)
    first_fault, last_heal = faults[0]["time"], max(op["time"] for op in heals)
    assert any(op["time"] < first_fault for op in workload_ops) and any(op["time"] > first_fault
                                                                        for op in workload_ops)
    assert last_heal > first_fault and nemesis(ops, "heal-all")
    assert result.error is None, result.error
    initialising = {op["process"] for op in workload_ops if op["f"] == "init"}
    committed = {op["process"] for op in workload_ops if op["type"] == "ok" and op["f"] in ("txn", "process")}
    assert initialising and initialising <= committed, f"never committed: {sorted(initialising - committed)}"
    assert_healed(cluster)
    # a short run's schedule is <= 90 s, its set-up and stop take the rest; on top, the wait for a Flink job's
    # first checkpoint before the clock starts (result.ready_s) and its drain when stopped (up to its --drain-s:
    # its group's offsets reach what it processed only then, chaos/workloads/flink.py)
    drain = max((float(option_value(w.options, "--drain-s") or flink.DRAIN_S) for w in spec.workloads
                 if w.workload == flink.F), default=0.0)
    limit = 100 + (result.ready_s or 0) + drain
    assert elapsed <= limit, f"short mode took {elapsed:.0f}s (at most {limit:.0f}s, ready after {result.ready_s}s)"
    assert [op for op in ops if op["f"] == "group_offsets"], "the group offsets sampler recorded nothing"
    assert len(result.recovery["faults"]) == len(nemesis(ops, "fault", "invoke")), result.recovery
    if name in RECOVERING:                    # every fault recovered, measured (the demo shows it)
        for fault in result.recovery["faults"]:
            # directly, or after the runner restarted a stalled client (librdkafka-5456: its send_offsets_to_
            # transaction never returns when the group coordinator dies; docs/bugs.md), the restart recorded
            assert fault["recovered"] is True and fault["seconds_to_commit_after_heal"] >= 0, fault
            for process in fault["restarted"]:
                assert [op for op in ops if op["process"] == process and op["f"] == "restart"], fault
    return result


def short_runs_of(names, cluster, runs_dir, finalizer) -> dict:
    """{name: (run dir, its history's operations)}: each built-in of `names` run once in short mode (run_short)."""
    done = {}
    for name in sorted(names):
        result = run_short(name, cluster, runs_dir, finalizer)
        done[name] = (result.run_dir, read_history(result.run_dir).ops)
    return done


@CAMPAIGN          # the gate's zombie: the demo's (test_demo.py), its verdict agreeing with txnlab verify
def test_zombie_is_fenced_and_nothing_it_wrote_afterwards_is_visible(cluster, conn, short_runs):
    result = short_runs("zombie-producer")                  # the built-in's short run above (or run now)
    assert_zombie_fenced(result.run_dir, conn)
    assert_healed(cluster)


def assert_zombie_fenced(run_dir, conn, old: str = "txp-0", new: str = "txp-0-zombie") -> None:
    """`old` of a zombie-producer run (its paused txp-0) was told it is fenced, committed nothing it began after
    `new`'s init (its successor's), and nothing it wrote after that is visible to read_committed on the run's
    topics (its end_offsets.json)."""
    ops = read_history(run_dir).ops
    fenced_at = min(op["time"] for op in ops if op["process"] == new and op["f"] == "init" and op["type"] == "ok")
    fenced = [op for op in ops if op["process"] == old and op["f"] == "txn" and op["type"] != "invoke"]
    assert any(op["value"].get("fenced") for op in fenced), f"the resumed {old} must see it is fenced"
    late_ids = {w["id"] for op in fenced if op["time"] > fenced_at and op["type"] != "ok" for w in op["value"]["writes"]}
    began = {op["value"]["attempt"]: op["time"] for op in ops
             if op["process"] == old and op["f"] == "txn" and op["type"] == "invoke"}
    # A commit sent before the pause completes (ok) when the process resumes: legitimate. A transaction
    # BEGUN after the zombie's init must never commit.
    assert not [op for op in fenced if began[op["value"]["attempt"]] > fenced_at and op["type"] == "ok"], \
        f"{old} committed a transaction it began after it was fenced"
    visible = set()
    for topic in json.loads((Path(run_dir) / "end_offsets.json").read_text()):
        visible |= {decode_value(r.value)["id"] for r in read_to_end(conn, topic, committed=True)}
    assert late_ids and not late_ids & visible


def interruptible_spec(tmp_path) -> dict:
    """Faults of several kinds active at once over a long window: a paused broker, latency on another,
    a paused workload process."""
    return {"name": "interrupt-me", "description": "interrupted on purpose",
            "cluster": {"local": {"state_dir": str(cluster_state_dir()), "base_port": TEST_BASE_PORT}},
            "workloads": [{"workload": "txn-producer", "instances": 2}], "duration_s": 60,
            "schedule": {"faults": [
                {"kind": "pause-broker", "at_s": 3, "duration_s": 50, "params": {"target": "node:1"}},
                {"kind": "network", "at_s": 4, "duration_s": 50, "params": {"target": "node:2", "toxic": "latency"}},
                {"kind": "isolate-broker", "at_s": 5, "duration_s": 50, "params": {"target": "node:3",
                                                                                     "scope": "client"}},
                {"kind": "pause-workload", "at_s": 6, "duration_s": 50, "params": {"process": "txp-1"}}]},
            "quiescence": {"timeout_s": 20}}


def at_a_terminal() -> None:
    """The child as a user's terminal starts it: Ctrl-C delivered. (A suite run as a background job inherits
    SIGINT ignored, and a process started so rightly ignores it: see chaos/runner/experiment.py.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@CAMPAIGN          # a signal mid-fault heals: the gate's is test_chaos_heal.py's SIGTERM (the runner raises it as Ctrl-C)
@pytest.mark.parametrize("trial", range(2))
def test_sigint_at_a_random_point_leaves_everything_healed(heal_after, tmp_path, trial):
    cluster = heal_after
    proc = chaos_run(interruptible_spec(tmp_path), tmp_path / "runs", preexec_fn=at_a_terminal)
    time.sleep(random.Random(trial).uniform(8, 20))          # a random point while the faults are active
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0, output
    assert_healed(cluster)
    run_dir = next((tmp_path / "runs").iterdir())
    ops = read_history(run_dir).ops
    assert nemesis(ops, "heal-all")
    assert_complete(ops)
    assert not any(pid_paused(p) for p in (run_dir / "pids").glob("*.json"))


def pid_paused(record_path) -> bool:
    import psutil
    try:
        return psutil.Process(json.loads(record_path.read_text())["pid"]).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


@CAMPAIGN          # the runner's unwinding heal: the gate's is test_chaos_heal.py's SIGTERM (raised in the runner)
@pytest.mark.parametrize("trial", range(2))
def test_an_exception_inside_the_runner_leaves_everything_healed(heal_after, tmp_path, trial):
    cluster = heal_after
    spec = parse_spec(interruptible_spec(tmp_path), "test")
    fail_at = random.Random(100 + trial).uniform(7, 20)

    class Failing(Experiment):
        def _report(self, run, now):
            if now >= fail_at:
                raise RuntimeError(f"boom at {now:.0f}s")

    with pytest.raises(RuntimeError, match="boom"):
        Failing(spec, seed=trial, runs_dir=tmp_path, progress=print, backend=LocalBackend(cluster)).run()
    assert_healed(cluster)
    run_dir = next(tmp_path.iterdir())
    assert (run_dir / "experiment.json").is_file() and nemesis(read_history(run_dir).ops, "heal-all")


def test_a_bad_spec_names_the_field_and_starts_nothing(tmp_path, cluster):
    bad = interruptible_spec(tmp_path)
    bad["schedule"]["faults"][1]["params"]["toxic"] = "earthquake"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    before = set(os.listdir(tmp_path))
    proc = txnlab("chaos", "run", str(path), "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert proc.returncode == 2
    assert "schedule.faults[1].params.toxic" in proc.stderr
    assert set(os.listdir(tmp_path)) == before                 # no run directory: nothing started
    wait_until(lambda: all(n["health"] == "up" for n in cluster.status()["nodes"]), 10, "cluster untouched")
