"""The seeded fault schedule: deterministic, merged with explicit faults in time order, never past the end.
No sleeps, no clock: the scheduler is pure."""
from __future__ import annotations

import random
import threading
import time

import pytest

from chaos.runner.schedule import ScheduledFault, build_schedule, describe
from chaos.runner.spec import builtin_specs, load_spec, parse_spec
from tests.unit.test_spec import minimal_spec

SEEDS = range(40)


def random_spec(faults: list[dict] | None = None, duration_s: float = 120):
    return parse_spec(minimal_spec(duration_s=duration_s, schedule={
        "faults": faults or [],
        "random": {"mix": {"kill-broker": 3, "pause-broker": 1, "network": 1}, "start_s": 5, "interval_s": [3, 9],
                   "duration_s": [2, 6], "params": {"network": {"scope": "client", "latency_ms": 50}}}}))


@pytest.fixture(autouse=True)
def no_clock(monkeypatch):
    """The scheduler must not wait or read the time: refused in the test's own thread, where the scheduler runs;
    another thread of the process (a Spark session's py4j worker, a history's flush thread left by an earlier test)
    keeps the real clock."""
    mine = threading.current_thread()

    def refusing(name):
        real = getattr(time, name)

        def refuse(*args):
            if threading.current_thread() is not mine:
                return real(*args)
            raise AssertionError("the scheduler slept or read the clock")
        return refuse
    for name in ("sleep", "time", "monotonic"):
        monkeypatch.setattr(time, name, refusing(name))


def test_same_seed_same_schedule_and_different_seeds_differ():
    spec = random_spec()
    assert build_schedule(spec, 7) == build_schedule(spec, 7) == build_schedule(random_spec(), 7)
    schedules = {tuple(build_schedule(spec, seed)) for seed in SEEDS}
    assert len(schedules) == len(SEEDS)


def test_only_its_own_generator_is_used():
    spec = random_spec()
    random.seed(1)
    first = build_schedule(spec, 3)
    state = random.getstate()
    random.seed(2)
    assert build_schedule(spec, 3) == first
    random.setstate(state)
    build_schedule(spec, 3)
    assert random.getstate() == state


def test_random_faults_keep_their_ranges_never_overlap_and_end_in_time():
    for seed in SEEDS:
        faults = build_schedule(random_spec(), seed)
        assert faults[0].at_s == 5.0 and len(faults) > 5
        for before, after in zip(faults, faults[1:]):
            assert 3 - 0.1 <= after.at_s - before.heal_at_s <= 9 + 0.1
        assert all(2 <= f.duration_s <= 6 and f.heal_at_s <= 120 for f in faults)


def test_explicit_and_random_faults_merge_in_time_order_explicit_first_at_a_tie():
    explicit = [{"kind": "zombie-producer", "at_s": 60, "duration_s": 10, "params": {"process": "txp-1"}},
                {"kind": "stop-broker", "at_s": 5, "duration_s": 1}]
    faults = build_schedule(random_spec(explicit), seed=11)
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)
    assert [f.origin for f in faults[:2]] == ["explicit", "random"] and faults[0].kind == "stop-broker"
    assert [f for f in faults if f.origin == "explicit"][1] == ScheduledFault(     # the parameters' defaults said
        60, 10, "zombie-producer", {"process": "txp-1", "await_expiry": False, "expiry_timeout_s": 60.0})
    assert [f for f in faults if f.origin == "random"] == build_schedule(random_spec(), seed=11)


def test_parameters_carry_their_defaults_and_the_spec_s_values():
    faults = build_schedule(random_spec(), seed=5)
    by_kind = {f.kind: f.params for f in faults}
    assert by_kind["kill-broker"] == {"target": "random"}
    assert by_kind["network"] == {"target": "random", "scope": "client", "toxic": "latency", "latency_ms": 50,
                                  "jitter_ms": 0, "rate_kb": 64, "stream": "both", "toxicity": 1.0}


def test_nothing_starts_or_heals_after_the_end_in_any_builtin():
    for name in builtin_specs():
        for short in (False, True):
            spec = load_spec(name, short=short)
            for seed in range(10):
                faults = build_schedule(spec, seed)
                assert faults, (name, short)
                assert all(0 <= f.at_s < spec.duration_s and f.heal_at_s <= spec.duration_s for f in faults)


def test_a_spec_without_faults_has_an_empty_schedule():
    spec = parse_spec(minimal_spec(schedule={}))
    assert build_schedule(spec, 1) == [] and describe([]) == ["no faults"]


def test_describe_gives_one_line_per_fault():
    faults = build_schedule(load_spec("coordinator-kill"), seed=0)
    lines = describe(faults)
    assert len(lines) == len(faults) == 4
    assert lines[0].split() == ["20.0s", "->", "30.0s", "kill-broker", "explicit", "target=coordinator:{tag}.eos-0"]



def test_a_fault_started_late_still_lasts_its_duration_from_its_start():
    from chaos.runner.experiment import heal_deadline
    assert heal_deadline(100.0, 6, 60, now=106.0) == 166.0          # on time: its scheduled heal
    assert heal_deadline(100.0, 6, 60, now=230.0) == 290.0          # after a 124 s climb-epoch: 60 s from its start
    assert heal_deadline(100.0, 5, 0, now=105.0) == 105.0
