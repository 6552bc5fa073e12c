"""bench/heal_trials.py's pure parts: choosing trials from a seed, spec copies, summaries, the markdown table,
and recognising the run's final heal on the stack."""
from __future__ import annotations

import importlib.util
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "heal_trials.py"


@pytest.fixture(scope="module")
def ht():
    spec = importlib.util.spec_from_file_location("heal_trials", BENCH)   # bench/ is not a package
    module = importlib.util.module_from_spec(spec)
    sys.modules["heal_trials"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("heal_trials", None)


EXPECTED = {"a-exp": 50.0, "b-exp": 45.0, "c-exp": 20.0}


def test_trials_are_round_robin_over_kinds_and_the_same_for_the_same_seed(ht):
    kinds = ["sigint", "sigterm", "sigkill", "exception"]
    trials = ht.choose_trials(kinds, 3, EXPECTED, seed=7)
    assert [t.kind for t in trials] == kinds * 3
    assert [t.n for t in trials] == list(range(1, 13))
    assert all(t.experiment in EXPECTED and 0 <= t.moment_s <= EXPECTED[t.experiment] for t in trials)
    assert trials == ht.choose_trials(kinds, 3, EXPECTED, seed=7)
    assert trials != ht.choose_trials(kinds, 3, EXPECTED, seed=8)
    assert ht.choose_trials(kinds, 3, dict(reversed(EXPECTED.items())), seed=7) == trials   # order-free


def test_a_partial_run_covers_every_kind(ht):
    trials = ht.choose_trials(["sigint", "sigkill"], 20, EXPECTED, seed=1)
    assert {t.kind for t in trials[:2]} == {"sigint", "sigkill"}


def test_layouts_pick_the_bench_cluster_and_its_ports(ht):
    assert ht.layout_key({}) == "" and ht.layout_key({"state_dir": "x"}) == ""
    assert ht.layout_key({"hanging_drill": True}) == "drill"
    custom = ht.layout_key({"broker_config": {"a": 1}})
    assert custom.startswith("custom-") and custom != ht.layout_key({"broker_config": {"a": 2}})
    assert ht.cluster_places({"drill", ""}, 23000) == {"": ("bench-heal-cluster", 23000),
                                                       "drill": ("bench-heal-cluster-drill", 25000)}
    assert ht.cluster_places({"drill"}, 23000) == {"drill": ("bench-heal-cluster-drill", 23000)}


def test_the_spec_copy_points_at_the_bench_cluster_and_keeps_the_experiments_settings(ht):
    data = {"name": "x", "cluster": {"local": {"hanging_drill": True, "broker_config": {"a": "1"}}}, "duration_s": 5}
    copied = ht.spec_copy(data, Path("/s"), 23000, 3)
    assert copied["cluster"]["local"] == {"hanging_drill": True, "broker_config": {"a": "1"}, "state_dir": "/s",
                                          "base_port": 23000, "nodes": 3}
    assert data["cluster"]["local"] == {"hanging_drill": True, "broker_config": {"a": "1"}}     # not changed
    assert ht.spec_copy({"cluster": {"local": {}}}, Path("/s"), 1, 3)["cluster"]["local"]["base_port"] == 1


def test_the_real_experiments_parse_and_point_at_the_copy(ht):
    experiments = ht.short_experiments()
    assert "hanging-transaction-drill" in experiments and experiments
    assert all(ht.expected_run_s(s) > s.duration_s for s in experiments.values())
    assert ht.largest_txn_timeout_s(experiments["producer-paused-past-timeout"]) == 5.0


def test_the_run_tag_is_the_run_directorys_last_part(ht):
    assert ht.run_tag_of(Path("/x/20261124-101010-broker-hard-bounce-r0a1b2c")) == "r0a1b2c"


def frame(filename, name, back=None):
    return SimpleNamespace(f_code=SimpleNamespace(co_filename=filename, co_name=name), f_back=back)


def test_the_final_heal_is_recognised_anywhere_up_the_stack(ht):
    heal = frame("/repo/chaos/runner/experiment.py", "_heal_everything", frame("/repo/chaos/runner/experiment.py", "_run"))
    inner = frame("/repo/cluster/lab/heal.py", "run_steps", frame("/repo/cluster/access/waiting.py", "wait_until", heal))
    assert ht.heal_began(inner) == "chaos/runner/experiment.py:_heal_everything"
    assert ht.heal_began(frame("/repo/chaos/workloads/run.py", "finish")) == "chaos/workloads/run.py:finish"
    body = frame("/repo/chaos/runner/experiment.py", "_timeline", frame("/repo/chaos/runner/experiment.py", "_body"))
    assert ht.heal_began(body) is None
    assert ht.heal_began(frame("/elsewhere/run.py", "finish")) is None


def record(n, kind, healed=True, failed=(), event="signalled", heal_s=12.0, trial_s=80.0, experiment="a-exp"):
    return {"n": n, "kind": kind, "experiment": experiment, "moment_s": 3.25, "healed": healed, "failed": list(failed),
            "event": event, "heal_s": heal_s if healed else None, "trial_s": trial_s}


TRIALS = [record(1, "sigint"), record(2, "sigkill", healed=False, failed=["processes", "lso"]),
          record(3, "sigint", event="ended-before-moment", heal_s=None, trial_s=100.0),
          record(4, "exception", event="landed-after-heal-began", heal_s=None)]


def test_summary_per_kind(ht):
    summary = ht.summarise(TRIALS, ["sigint", "sigterm", "sigkill", "exception"])
    assert summary["sigint"] == {"n": 2, "healed": 2, "failed": [], "ended_before_moment": 1,
                                 "exception_after_heal_began": 0, "heal_s_median": 12.0, "trial_s_mean": 90.0}
    assert summary["sigterm"]["n"] == 0 and summary["sigterm"]["heal_s_median"] is None
    assert summary["sigkill"]["failed"] == [{"trial": 2, "experiment": "a-exp", "failed": ["processes", "lso"]}]
    assert summary["exception"]["exception_after_heal_began"] == 1
    lines = ht.summary_lines(summary)
    assert any(line.startswith("sigkill") and "failed=1" in line for line in lines)
    assert "    trial 2 (a-exp): processes, lso" in lines


def test_the_markdown_table_lists_every_trial(ht):
    table = ht.markdown_table(TRIALS).splitlines()
    assert table[0] == "| # | kind | experiment | moment s | outcome | failed checks | heal s |"
    assert len(table) == 2 + len(TRIALS)
    assert table[2] == "| 1 | sigint | a-exp | 3.2 | healed (signalled) | - | 12.0 |"
    assert table[3] == "| 2 | sigkill | a-exp | 3.2 | NOT healed (signalled) | processes, lso | - |"
    assert "healed (landed-after-heal-began)" in table[5]


def test_runner_commands(ht, tmp_path):
    plain = ht.runner_argv("sigint", Path("s.yaml"), Path("runs"), 5, 3.0, tmp_path / "p.json")
    assert plain[1:] == ["-m", "txnlab.cli", "chaos", "run", "s.yaml", "--short", "--runs-dir", "runs", "--seed", "5"]
    wrapped = ht.runner_argv("exception", Path("s.yaml"), Path("runs"), 5, 3.0, tmp_path / "p.json")
    assert wrapped[1] == "-c" and "planted_main" in wrapped[2]
    assert wrapped[3:6] == ["3.0", str(tmp_path / "p.json"), "chaos"]


def test_the_planted_exception_is_raised_in_the_main_thread(ht, tmp_path, monkeypatch):
    import txnlab.cli
    import time

    def slow_main(argv):
        time.sleep(5)
        return 0
    monkeypatch.setattr(txnlab.cli, "main", slow_main)
    previous = signal.getsignal(signal.SIGALRM)
    try:
        with pytest.raises(RuntimeError, match="planted by bench/heal_trials.py"):
            ht.planted_main(0.05, str(tmp_path / "p.json"), [])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert '"event": "planted"' in (tmp_path / "p.json").read_text()


def test_run_facts_and_the_run_directories(ht, tmp_path):
    runs = tmp_path / "runs"
    assert ht.run_facts(runs) == {"run_dir": None, "experiment_json": False}
    run_dir = runs / "20261124-101010-x-r0a1b2c"
    (run_dir / "pids").mkdir(parents=True)
    assert ht.live_run_processes(runs) == (True, "none alive of 0 recorded")
    (run_dir / "experiment.json").write_text('{"faults": [{}, {}], "error": "KeyboardInterrupt: ", '
                                             '"quiescence": {}}')
    assert ht.run_facts(runs) == {"run_dir": str(run_dir), "experiment_json": True, "faults_started": 2,
                                  "error": "KeyboardInterrupt: ", "quiesced": None}
    (runs / "another").mkdir()
    ok, observed = ht.live_run_processes(runs)
    assert not ok and observed["run_dirs"] == ["20261124-101010-x-r0a1b2c", "another"]
