"""Faults and backends without a cluster: target parsing and resolution with a fake admin, every kind
built from its parameters, what start and heal do on a backend and run that record calls (heal twice,
heal without start), and the docker backend against a fake Docker SDK client."""
from __future__ import annotations

import random
import time
import sys
from types import SimpleNamespace

import pytest
import kafka.errors as Errors
from kafka.errors import UnknownTopicOrPartitionError
from pydantic import ValidationError

from tests.unit.fakes import FakeBackend
from chaos.nemesis import backends, faults
from cluster.access.errors import TxnlabError
from chaos.nemesis.backends import Backend, BackendError, DockerBackend, LocalBackend
from chaos.nemesis.epoch_climb import EpochClimbError
from chaos.nemesis.fault_kinds import FAULT_KINDS, parse_params
from chaos.workloads.run import Run
from chaos.nemesis.faults import FaultEnv, FaultError, make_fault, network_toxic, parse_target, resolve_target
from chaos.nemesis.inject_hanging import InjectedHanging
from cluster.lab.local import LocalCluster
from cluster.lab.toxiproxy import add_toxic_on_links, toxic_names

TAG = "r1"
EXAMPLE_PARAMS = {
    "kill-broker": {"target": "node:2"}, "stop-broker": {"target": "node:2"}, "pause-broker": {"target": "node:2"},
    "rolling-restart": {"pause_between_s": 0}, "pause-workload": {"process": "txp-0"},
    "kill-workload": {"process": "txp-0"},
    "zombie-producer": {"process": "txp-0"}, "network": {"target": "node:2", "toxic": "blackhole"},
    "isolate-broker": {"target": "node:2", "scope": "inter"}, "hanging-transaction": {"topic": "{tag}-a"},
    "storm": {"topic": "{tag}-storm", "rate": 5},
    "hold-requests": {"target": "node:2", "apis": ["EndTxn"], "clients": ["{tag}.streams-*-producer"]},
    "set-feature": {"feature": "transaction.version", "level": 1},
    "climb-epoch": {"txn_id": "{tag}.txp-0", "to_epoch": 100, "process": "txp-0"},
    "migrate-group-protocol": {"processes": ["eos-0", "eos-1"], "pause_between_s": 0, "settle_s": 0},
    "recreate-topic": {"topic": "{tag}-in-b", "writer": "txp-0"},
}


@pytest.fixture(autouse=True)
def fake_recreate(monkeypatch):
    """The recreate-topic procedure replaced (tests/unit/test_incarnations.py has its steps, the live test its real
    run): the writer paused and resumed, the topic deleted and created again, as the state says."""
    def recreate(run, state, writer, group, catch_up_s, gap_s, progress, hold=(), hold_s=0.0):
        run.pause(writer)
        state.paused = state.deleted = state.created = True
        run.resume(writer)
        state.paused = False
        state.result.update(topic=state.topic, alias=f"{state.topic}~1")
        return dict(state.result)
    monkeypatch.setattr(faults, "recreate", recreate)
    monkeypatch.setattr(faults, "topic_partitions", lambda conn, topic: [0, 1])


@pytest.fixture(autouse=True)
def fake_climb(monkeypatch):
    """climb_epoch replaced (tests/unit/test_epoch_climb.py has the loop): the calls it got."""
    calls = []

    def climb(admin, txn_id, to_epoch, timeout_ms, limit_s, progress=None):
        calls.append((txn_id, to_epoch))
        return {"txn_id": txn_id, "producer_id": 7, "from_epoch": 1, "epoch": to_epoch, "inits": to_epoch,
                "retries": 0, "seconds": 0.1}
    monkeypatch.setattr(faults, "climb_epoch", climb)
    return calls


@pytest.fixture(autouse=True)
def fake_features(monkeypatch):
    """The cluster's finalized features, as Kafka's feature tool would read and change them (transaction.version at
    2); the calls it got."""
    levels, calls = {"transaction.version": 2}, []

    def finalized_level(conn, feature):
        calls.append(("read", feature))
        return levels[feature]

    def set_level(conn, feature, level, expected=None):
        calls.append(("set", feature, level, expected))
        was = levels[feature]
        if was != level and expected is not None and was != expected:
            raise RuntimeError(f"{feature} is at {was}, not {expected}")
        levels[feature] = level
        return was
    monkeypatch.setattr(faults, "finalized_level", finalized_level)
    monkeypatch.setattr(faults, "set_level", set_level)
    return SimpleNamespace(levels=levels, calls=calls)


# ---- fakes ------------------------------------------------------------------------------------------
class FakeAdmin:
    def __init__(self, controller=1, coordinator=3, leader=2):
        self.controller, self.coordinator, self.leader, self.asked = controller, coordinator, leader, []

    def __call__(self, conn):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def active_controller(self):
        self.asked.append(("controller",))
        return self.controller

    def coordinator_of(self, txn_id):
        self.asked.append(("coordinator", txn_id))
        return self.coordinator

    def leader_of(self, topic, partition):
        self.asked.append(("leader", topic, partition))
        return self.leader

    def group_type(self, group):
        self.asked.append(("type", group))
        return "consumer"


class FakeRun:
    """The part of chaos.workloads.run.Run faults use, with processes that only exist as names (the real last_spec and
    restart, over the fake start)."""
    last_spec = Run.last_spec
    restart = Run.restart

    def __init__(self, specs=()):
        self.info = SimpleNamespace(run_tag=TAG, seed=7, specs=[dict(s) for s in specs], topics=[f"{TAG}-in-b"])
        self.running = {s["process"] for s in specs}
        self.paused, self.calls = set(), []
        self.progress = lambda message: None
        self.history = SimpleNamespace(complete_outstanding=lambda process, reason: self.calls.append(
            ("complete", process, reason)))

    def start(self, spec, duration=0.0):
        self.calls.append(("start", spec))
        self.info.specs.append({"workload": spec.workload, "process": spec.process, "args": spec.args})
        self.running.add(spec.process)

    def stop(self, process, timeout=20.0):
        self.calls.append(("stop", process))
        self.running.discard(process)
        return True

    def pause(self, process):
        self.calls.append(("pause", process))
        self.paused.add(process)
        return process in self.running

    def kill(self, process):
        self.calls.append(("kill", process))
        alive = process in self.running
        self.running.discard(process)
        return alive

    def resume(self, process):
        self.calls.append(("resume", process))
        self.paused.discard(process)
        return process in self.running

    def alive(self):
        return sorted(self.running)


TXP_SPEC = {"workload": "txn-producer", "process": "txp-0", "args": ("--topics", "r1-a", "r1-b", "--on-fenced", "exit")}
PROCESSOR_SPECS = [{"workload": "processor", "process": f"eos-{i}", "args": ("--inputs", "r1-in", "--output", "r1-out")}
                   for i in (0, 1)]


def make_env(admin=None, run=None, nodes=(1, 2, 3), seed=5):
    def no_admin(conn):
        raise AssertionError("this target needs no admin")
    return FaultEnv(FakeBackend(nodes), run, conn=None, rng=random.Random(seed), tag=TAG, admin=admin or no_admin)


@pytest.fixture
def fake_hanging(monkeypatch):
    """inject_hanging and abort_hanging replaced; the calls they got."""
    calls = []
    injected = InjectedHanging("r1-a", 0, "txnlab-hanging-x", 42, 0, 3)

    def inject(conn, topic, partition, transactional_id=None):
        calls.append(("inject", topic, partition, transactional_id))
        return injected
    monkeypatch.setattr(faults, "inject_hanging", inject)
    monkeypatch.setattr(faults, "abort_hanging", lambda conn, tp, txn_id, producer_id: calls.append(
        ("abort", tp.topic, tp.partition, txn_id, producer_id)) or {"aborted": False})
    return calls


# ---- targets ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("node:2", faults.Target("node", node=2)),
    ("random", faults.Target("random")),
    ("controller", faults.Target("controller")),
    ("not-controller", faults.Target("not-controller")),
    ("coordinator:r1.eos-0", faults.Target("coordinator", txn_id="r1.eos-0")),
    ("not-coordinator:r1.txp-0", faults.Target("not-coordinator", txn_id="r1.txp-0")),
    ("leader:r1-a:4", faults.Target("leader", topic="r1-a", partition=4)),
])
def test_parse_target(text, expected):
    assert parse_target(text) == expected


@pytest.mark.parametrize("bad", ["node:x", "leader:t", "everything", "coordinator:", ""])
def test_a_bad_target_is_refused(bad):
    with pytest.raises(FaultError, match="bad target"):
        parse_target(bad)


def test_node_and_random_targets_need_no_admin():
    env = make_env()
    assert resolve_target(env, "node:3") == 3
    picks = [resolve_target(env, "random") for _ in range(20)]
    again = make_env()
    assert picks == [resolve_target(again, "random") for _ in range(20)]       # seeded
    assert set(picks) <= {1, 2, 3} and len(set(picks)) > 1
    with pytest.raises(FaultError, match="no node 4"):
        resolve_target(env, "node:4")


def test_admin_targets_are_resolved_with_the_run_tag():
    admin = FakeAdmin(controller=2, coordinator=3, leader=1)
    env = make_env(admin)
    assert resolve_target(env, "controller") == 2
    assert resolve_target(env, "coordinator:{tag}.eos-0") == 3
    assert resolve_target(env, "leader:{tag}-a:0") == 1
    assert ("coordinator", "r1.eos-0") in admin.asked and ("leader", "r1-a", 0) in admin.asked
    assert {resolve_target(env, "not-controller") for _ in range(20)} == {1, 3}
    assert {resolve_target(env, "not-coordinator:{tag}.txp-0") for _ in range(20)} == {1, 2}
    assert ("coordinator", "r1.txp-0") in admin.asked


def test_a_retriable_metadata_error_is_asked_again():
    admin = FakeAdmin(leader=0)
    answers = iter([UnknownTopicOrPartitionError("not yet"), None])

    def leader_of(topic, partition):
        error = next(answers)
        if error:
            raise error
        return admin.leader
    admin.leader_of = leader_of
    assert resolve_target(make_env(admin), "leader:{tag}-a:0") == 0          # node 0 is a node too


def test_unresolvable_admin_targets_say_why():
    with pytest.raises(FaultError, match="r1-a-0 has no leader"):
        resolve_target(make_env(FakeAdmin(leader=None)), "leader:{tag}-a:0")
    with pytest.raises(FaultError, match="no node but 1, the active controller, to choose"):
        resolve_target(make_env(FakeAdmin(controller=1), nodes=(1,)), "not-controller")
    with pytest.raises(FaultError, match=r"no node but 1, the coordinator of r1.txp-0, to choose"):
        resolve_target(make_env(FakeAdmin(coordinator=1), nodes=(1,)), "not-coordinator:{tag}.txp-0")


# ---- construction -----------------------------------------------------------------------------------------
def test_every_kind_of_the_catalog_is_a_fault_class():
    assert set(faults.FAULT_CLASSES) == set(FAULT_KINDS) == set(EXAMPLE_PARAMS)


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_every_kind_is_built_from_its_params(kind):
    fault = make_fault(kind, EXAMPLE_PARAMS[kind])
    assert fault.kind == kind and isinstance(fault.params, FAULT_KINDS[kind])


def test_bad_params_and_unknown_kinds_are_refused():
    with pytest.raises(ValidationError, match="target"):
        make_fault("kill-broker", {"target": "the-big-one"})
    with pytest.raises(ValidationError, match="extra"):
        make_fault("network", {"toxic": "latency", "latency": 5})
    with pytest.raises(KeyError, match="unknown fault kind"):
        make_fault("meteor", {})


# ---- heal: idempotent, safe without start ----------------------------------------------------------------
def _env_for(kind):
    return make_env(FakeAdmin(), run=FakeRun([TXP_SPEC, *PROCESSOR_SPECS]))


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_heal_twice_does_the_same_and_raises_nothing(kind, fake_hanging):
    env = _env_for(kind)
    fault = make_fault(kind, EXAMPLE_PARAMS[kind])
    started = fault.start(env)
    assert started
    first, second = fault.heal(env), fault.heal(env)
    assert first == second and "skipped" not in first
    if env.run.paused:
        pytest.fail(f"{kind} left {env.run.paused} paused")


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_heal_without_start_touches_no_node_or_process(kind, fake_hanging):
    env = _env_for(kind)
    fault = make_fault(kind, EXAMPLE_PARAMS[kind])
    fault.heal(env)
    assert {c[0] for c in env.backend.calls} <= {"heal_network", "start", "wait_registered"}
    assert env.run.calls == [] and not [c for c in fake_hanging if c[0] == "inject"]


def test_a_feature_is_set_and_set_back_to_the_level_read_before_the_journal_entry(fake_features):
    env = make_env()
    fault = make_fault("set-feature", {"level": 1})
    assert fault.undo_steps(env) == []                  # nothing read yet: nothing to set back
    fault.prepare(env)
    assert fault.undo_steps(env) == [{"step": "set-feature", "feature": "transaction.version", "level": 2,
                                      "expected": 1}]
    assert fault.start(env) == {"feature": "transaction.version", "from": 2, "to": 1}
    assert fake_features.levels["transaction.version"] == 1
    assert fault.heal(env) == {"feature": "transaction.version", "level": 2}
    assert fake_features.levels["transaction.version"] == 2
    assert fake_features.calls == [("read", "transaction.version"), ("set", "transaction.version", 1, 2),
                                   ("set", "transaction.version", 2, 1)]   # each change expects the level it left
    assert env.backend.calls == []                      # no node touched
    again = make_fault("set-feature", {"level": 1})     # someone upgraded meanwhile: the heal refuses, the level stays
    again.prepare(env)
    again.start(env)
    fake_features.levels["transaction.version"] = 0
    with pytest.raises(RuntimeError, match="at 0, not 1"):
        again.heal(env)
    assert fake_features.levels["transaction.version"] == 0
    with pytest.raises(ValidationError, match="level"):
        make_fault("set-feature", {"level": 3})
    with pytest.raises(ValidationError, match="feature"):
        make_fault("set-feature", {"feature": "metadata.version", "level": 1})


def test_broker_faults_act_on_the_resolved_node_and_heal_it():
    env = make_env(FakeAdmin(coordinator=3))
    fault = make_fault("kill-broker", {"target": "coordinator:{tag}.eos-0"})
    assert fault.start(env) == {"node": 3, "target": "coordinator:r1.eos-0", "signal": "SIGKILL"}
    assert fault.heal(env) == {"node": 3, "registered": True}
    assert env.backend.calls == [("kill", 3), ("start", 3), ("wait_registered", 3, env.heal_timeout)]

    env = make_env()
    pause = make_fault("pause-broker", {"target": "node:1"})
    pause.start(env), pause.heal(env)
    assert env.backend.calls == [("pause", 1), ("resume", 1), ("wait_registered", 1, env.heal_timeout)]


def test_a_failed_start_heals_only_what_it_may_have_done():
    env = make_env(FakeAdmin(leader=None))
    fault = make_fault("kill-broker", {"target": "leader:{tag}-a:0"})
    with pytest.raises(FaultError):
        fault.start(env)
    assert fault.heal(env) == {"node": None, "skipped": "not started"} and env.backend.calls == []


@pytest.mark.parametrize("params, toxic", [
    ({"toxic": "latency", "latency_ms": 300, "jitter_ms": 50},
     {"type": "latency", "attributes": {"latency": 300, "jitter": 50}}),
    ({"toxic": "blackhole"}, {"name": "blackhole", "type": "timeout", "attributes": {"timeout": 0}}),
    ({"toxic": "reset"}, {"type": "reset_peer", "attributes": {"timeout": 0}}),
    ({"toxic": "bandwidth", "rate_kb": 16}, {"type": "bandwidth", "attributes": {"rate": 16}}),
    ({"toxic": "latency", "latency_ms": 5000, "stream": "upstream", "toxicity": 0.5},
     {"type": "latency", "attributes": {"latency": 5000, "jitter": 0}, "streams": ("upstream",), "toxicity": 0.5}),
])
def test_network_toxics(params, toxic):
    env = make_env()
    fault = make_fault("network", {"target": "node:2", "scope": "client", **params})
    started = fault.start(env)
    assert env.backend.calls == [("add_toxic", 2, "client", toxic)]
    assert started["proxies"] == ["n2-client"] and started["toxiproxy"] == toxic
    assert fault.heal(env) == {"node": 2, "toxics_removed": "all"}


def test_isolate_heals_the_network_and_waits_for_the_node():
    env = make_env()
    fault = make_fault("isolate-broker", {"target": "node:2", "scope": "all"})
    assert fault.start(env)["proxies"] == ["n2-all"]
    fault.heal(env)
    assert env.backend.calls == [("isolate", 2, "all"), ("heal_network",), ("wait_registered", 2, env.heal_timeout)]


@pytest.mark.parametrize("clean, down", [(True, "stop"), (False, "kill")])
def test_rolling_restart_goes_node_by_node(clean, down):
    env = make_env()
    fault = make_fault("rolling-restart", {"clean": clean, "pause_between_s": 0})
    assert fault.start(env) == {"nodes": [1, 2, 3], "clean": clean}
    t = env.heal_timeout
    assert env.backend.calls == [c for n in (1, 2, 3) for c in ((down, n), ("start", n), ("wait_registered", n, t))]


# ---- workload faults ------------------------------------------------------------------------------------------
def test_zombie_producer_pauses_p_and_starts_its_successor_with_its_txn_id():
    env = make_env(run=FakeRun([TXP_SPEC]))
    fault = make_fault("zombie-producer", {"process": "txp-0"})
    assert fault.workload_args() == {"txp-0": ("--on-fenced", "exit")}
    started = fault.start(env)
    assert started["txn_id"] == "r1.txp-0" and started["successor"] == "txp-0-zombie"
    (_, paused), (_, spec) = env.run.calls
    assert paused == "txp-0" and (spec.workload, spec.process) == ("txn-producer", "txp-0-zombie")
    assert spec.args == ("--topics", "r1-a", "r1-b", "--on-fenced", "exit", "--txn-id", "r1.txp-0")
    assert fault.heal(env)["resumed"] is True and env.run.paused == set()
    assert "txp-0-zombie" in env.run.alive()


class GroupTypes(FakeAdmin):
    """ListGroups' type of the group: `types` in turn (the last one kept), or `error` raised."""
    def __init__(self, *types, error=None):
        super().__init__()
        self.types, self.error = list(types), error

    def group_type(self, group):
        self.asked.append(("type", group))
        if self.error is not None:
            raise self.error
        return self.types.pop(0) if len(self.types) > 1 else self.types[0]


def test_a_group_protocol_migration_rolls_each_processor_onto_the_other_protocol_and_back(monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda s: None)
    admin = GroupTypes("classic", "consumer")
    env = make_env(admin=admin, run=FakeRun(PROCESSOR_SPECS))
    fault = make_fault("migrate-group-protocol", {"processes": ["eos-0", "eos-1"], "settle_s": 5})
    started = fault.start(env)
    assert started["to"] == "consumer" and started["group"] == "r1.eos"       # the other one than eos-0's
    assert [(s["process"], s["to"]) for s in started["steps"]] == [("eos-0", "consumer"), ("eos-1", "consumer")]
    assert started["group_type"] == "consumer" and started["converted"] is True
    assert [c[:2] for c in env.run.calls] == [("stop", "eos-0"), ("complete", "eos-0"), ("start", env.run.calls[2][1]),
                                              ("stop", "eos-1"), ("complete", "eos-1"), ("start", env.run.calls[5][1])]
    moved = env.run.last_spec("eos-1").args
    assert moved == ("--inputs", "r1-in", "--output", "r1-out", "--group-protocol", "consumer", "--incarnation", "1")
    admin.types = ["classic"]
    healed = fault.heal(env)
    assert healed["back"] is True and healed["converted"] is True
    assert env.run.last_spec("eos-0").args[-4:] == ("--group-protocol", "classic", "--incarnation", "2")
    assert fault.heal(env) == healed and env.run.last_spec("eos-0").args[-1] == "2"    # rolled back once, not twice


def test_a_migration_says_unconverted_or_unknown_and_refuses_a_group_already_there(monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda s: None)
    env = make_env(admin=GroupTypes("classic"), run=FakeRun(PROCESSOR_SPECS))
    started = make_fault("migrate-group-protocol", {"processes": ["eos-0"], "settle_s": 0.05}).start(env)
    assert started["group_type"] == "classic" and started["converted"] is False     # the coordinator did not convert
    env = make_env(admin=GroupTypes(error=Errors.KafkaTimeoutError("no answer")), run=FakeRun(PROCESSOR_SPECS))
    started = make_fault("migrate-group-protocol", {"processes": ["eos-0"]}).start(env)
    assert started["converted"] is None and "KafkaTimeoutError" in started["group_type_error"]    # unknown, not no
    with pytest.raises(FaultError, match="already run on the classic protocol"):
        make_fault("migrate-group-protocol", {"processes": ["eos-0"], "to": "classic"}).start(
            make_env(admin=GroupTypes("classic"), run=FakeRun(PROCESSOR_SPECS)))
    with pytest.raises(FaultError, match="only a processor's group"):
        make_fault("migrate-group-protocol", {"processes": ["txp-0"]}).start(make_env(run=FakeRun([TXP_SPEC])))


class ExpiringAdmin(FakeAdmin):
    """DescribeTransactions answers that the id is known `known` more times, then that it is gone."""
    def __init__(self, known=2, error=None):
        super().__init__()
        self.known, self.error = known, error

    def transactional_id_known(self, txn_id):
        self.asked.append(("known", txn_id))
        if self.error is not None:
            raise self.error
        self.known -= 1
        return self.known >= 0


def expiring_zombie(admin, timeout_s=60.0):
    env = make_env(admin=admin, run=FakeRun([TXP_SPEC]))
    fault = make_fault("zombie-producer", {"process": "txp-0", "await_expiry": True, "expiry_timeout_s": timeout_s})
    fault.start(env)
    return env, fault


def test_a_zombie_awaiting_expiry_resumes_only_after_its_successor_stopped_and_the_id_is_gone(monkeypatch):
    monkeypatch.setattr(time, "sleep", lambda s: None)
    env, fault = expiring_zombie(ExpiringAdmin(known=2))
    healed = fault.heal(env)
    assert healed["stopped"] == ["txp-0-zombie"] and healed["txn_id"] == "r1.txp-0" and healed["txn_id_expired"] is True
    assert [c for c in env.run.calls if c[0] != "start"] == [("pause", "txp-0"), ("stop", "txp-0-zombie"),
                                                            ("resume", "txp-0")]
    assert env.admin.asked == [("known", "r1.txp-0")] * 3 and healed["resumed"] is True


def test_a_zombie_resumes_anyway_when_the_id_does_not_expire_and_the_heal_says_so(monkeypatch):
    env, fault = expiring_zombie(ExpiringAdmin(known=10 ** 6), timeout_s=0.05)
    healed = fault.heal(env)
    assert healed["txn_id_expired"] is False and env.run.paused == set()
    env, fault = expiring_zombie(ExpiringAdmin(error=Errors.KafkaTimeoutError("no answer")))
    healed = fault.heal(env)       # an unanswered question is not "expired"
    assert healed["txn_id_expired"] is None and "KafkaTimeoutError" in healed["expiry_error"]
    assert env.run.paused == set()


def test_climb_epoch_pauses_its_process_climbs_the_tagged_id_then_resumes_it(fake_climb):
    env = make_env(FakeAdmin(), run=FakeRun([TXP_SPEC]))
    fault = make_fault("climb-epoch", EXAMPLE_PARAMS["climb-epoch"])
    started = fault.start(env)
    assert fake_climb == [("r1.txp-0", 100)] and started["epoch"] == 100 and started["process"] == "txp-0"
    assert env.run.calls == [("pause", "txp-0"), ("resume", "txp-0")]
    assert fault.heal(env) == {"process": "txp-0", "resumed": False}     # nothing left to undo


def test_a_climb_that_fails_half_way_leaves_its_process_to_the_heal(monkeypatch):
    def fails(*args, **kwargs):
        raise EpochClimbError("reached epoch 900 of 32765 in 1 s")
    monkeypatch.setattr(faults, "climb_epoch", fails)
    env = make_env(FakeAdmin(), run=FakeRun([TXP_SPEC]))
    fault = make_fault("climb-epoch", EXAMPLE_PARAMS["climb-epoch"])
    with pytest.raises(EpochClimbError):
        fault.start(env)
    assert env.run.paused == {"txp-0"}
    assert fault.heal(env)["resumed"] is True and env.run.paused == set()
    assert make_fault("climb-epoch", {"txn_id": "x"}).undo_steps(env) == []       # no process: nothing to undo


def test_climb_epoch_params_stop_below_the_rotation_and_min_epoch_reads_only_end_txn():
    with pytest.raises(ValidationError, match="32765"):
        make_fault("climb-epoch", {"txn_id": "x", "to_epoch": 32766})
    with pytest.raises(ValidationError, match="min_epoch"):
        make_fault("hold-requests", {"apis": ["EndTxn", "Produce"], "clients": ["x"], "min_epoch": 32766})
    assert make_fault("hold-requests", {"apis": ["EndTxn"], "clients": ["x"], "min_epoch": 32766}).params.min_epoch \
        == 32766


def test_zombie_producer_keeps_an_explicit_txn_id():
    spec = {**TXP_SPEC, "process": "eos-1", "workload": "processor",
            "args": ("--txn-id", "shared", "--on-fenced", "exit")}
    successor = faults.zombie_successor(spec, TAG)
    assert successor.args == ("--on-fenced", "exit", "--txn-id", "shared")


@pytest.mark.parametrize("spec, message", [
    ({**TXP_SPEC, "args": ("--topics", "a", "b")}, "--on-fenced exit"),
    ({**TXP_SPEC, "args": ("--on-fenced", "exit", "--on-fenced", "reinit")}, "--on-fenced exit"),
    ({"workload": "storm", "process": "txp-0", "args": ()}, "zombie producer needs"),
])
def test_zombie_producer_refuses_a_process_it_cannot_fence(spec, message):
    env = make_env(run=FakeRun([spec]))
    fault = make_fault("zombie-producer", {"process": "txp-0"})
    with pytest.raises(FaultError, match=message):
        fault.start(env)
    assert env.run.calls == []
    with pytest.raises(FaultError, match="no workload process"):
        make_fault("zombie-producer", {"process": "txp-9"}).start(env)


def test_pause_workload_of_a_process_that_is_not_running():
    env = make_env(run=FakeRun([]))
    fault = make_fault("pause-workload", {"process": "txp-0"})
    with pytest.raises(FaultError, match="not running"):
        fault.start(env)
    assert fault.heal(env)["resumed"] is False


def test_workload_faults_need_a_run():
    with pytest.raises(FaultError, match="needs a run"):
        make_fault("storm", {"topic": "t"}).start(make_env())


def test_storm_starts_a_storm_process_and_stops_it():
    env = make_env(run=FakeRun([TXP_SPEC]))
    fault = make_fault("storm", {"topic": "{tag}-storm", "rate": 5})
    started = fault.start(env)
    (_, spec), = env.run.calls
    assert (spec.workload, spec.process, spec.args) == ("storm", started["process"], ("--topic", "r1-storm", "--rate", "5.0"))
    assert fault.heal(env) == {"process": started["process"], "stopped": True}


def test_hanging_transaction_is_aborted_by_its_producer_id(fake_hanging):
    env = make_env()
    fault = make_fault("hanging-transaction", {"topic": "{tag}-a", "partition": 0})
    assert fault.start(env)["producer_id"] == 42
    fault.heal(env)
    (_, topic, partition, txn_id), abort = fake_hanging
    assert (topic, partition) == ("r1-a", 0) and txn_id.startswith("txnlab-hanging-r1-")
    assert abort == ("abort", "r1-a", 0, txn_id, 42)


def test_hanging_transaction_half_injected_is_looked_up_by_its_txn_id(fake_hanging, monkeypatch):
    def fail(*args, **kwargs):
        fake_hanging.append(("inject", *args[1:3], kwargs["transactional_id"]))
        raise TimeoutError("produce timed out")
    monkeypatch.setattr(faults, "inject_hanging", fail)
    fault = make_fault("hanging-transaction", {"topic": "t", "partition": 1})
    with pytest.raises(TimeoutError):
        fault.start(make_env())
    fault.heal(make_env())
    assert fake_hanging[-1] == ("abort", "t", 1, fake_hanging[0][3], None)


# ---- backends ---------------------------------------------------------------------------------------------------
class FakeToxiproxy:
    api = "http://127.0.0.1:19700"

    def __init__(self):
        self.calls = []

    def add_toxic(self, proxy, name, toxic_type, stream, attributes, toxicity=1.0):
        self.calls.append((proxy, name, toxic_type, stream, attributes))

    def reset(self):
        self.calls.append(("reset",))


def test_local_backend_adds_toxics_on_the_nodes_links(tmp_path):
    backend = LocalBackend(LocalCluster.load(tmp_path, base_port=25000))
    backend.cluster.toxiproxy = toxiproxy = FakeToxiproxy()
    assert isinstance(backend, Backend) and backend.node_ids() == [1, 2, 3]
    links = backend.add_toxic(2, "client", {"type": "latency", "attributes": {"latency": 10}, "streams": ["downstream"]})
    assert links == ["n2-client"]
    assert toxiproxy.calls == [("n2-client", "txnlab-latency-downstream", "latency", "downstream", {"latency": 10})]
    assert backend.prometheus_url() == "http://127.0.0.1:25790"


class FakeContainer:
    def __init__(self, service, project, status, log):
        self.name, self.status, self.log = f"{project}-{service}-1", status, log
        self.labels = {backends.SERVICE_LABEL: service, backends.PROJECT_LABEL: project}

    def _do(self, action, status, *args):
        self.log.append((self.name, action, *args))
        self.status = status

    def kill(self, signal=None):
        self._do("kill", "exited", signal)

    def stop(self, timeout=None):
        self._do("stop", "exited", timeout)

    def start(self):
        self._do("start", "running")

    def pause(self):
        self._do("pause", "paused")

    def unpause(self):
        self._do("unpause", "running")


class FakeDocker:
    """docker.DockerClient's containers.list(all=True, filters={"label": [...]}), over fake containers."""

    def __init__(self, containers):
        self.all, self.filters = containers, []
        self.containers = self

    def list(self, **kwargs):
        assert kwargs["all"] is True                   # stopped containers too
        labels = kwargs["filters"]["label"]
        self.filters.append(labels)
        return [c for c in self.all if {f"{k}={v}" for k, v in c.labels.items()} >= set(labels)]


@pytest.fixture
def docker_stack():
    log = []
    containers = [FakeContainer(f"kafka-{n}", "txnlab", "running", log) for n in (1, 2, 3)]
    containers.append(FakeContainer("kafka-1", "other", "running", log))
    backend = DockerBackend(client=FakeDocker(containers), project="txnlab")
    backend.toxiproxy = FakeToxiproxy()
    return backend, log


def test_docker_backend_signals_the_compose_service_containers(docker_stack):
    backend, log = docker_stack
    assert isinstance(backend, Backend)
    backend.kill(2)
    backend.start(2)
    backend.start(2)                                   # running: nothing to do
    backend.pause(3)
    backend.resume(3)
    backend.resume(3)                                  # not paused: nothing to do
    backend.stop(1)
    assert log == [("txnlab-kafka-2-1", "kill", "SIGKILL"), ("txnlab-kafka-2-1", "start"),
                   ("txnlab-kafka-3-1", "pause"), ("txnlab-kafka-3-1", "unpause"),
                   ("txnlab-kafka-1-1", "stop", backends.DOCKER_STOP_TIMEOUT_S)]
    assert backend.client.filters[:2] == [["com.docker.compose.service=kafka-1", "com.docker.compose.project=txnlab"],
                                          ["com.docker.compose.service=kafka-2", "com.docker.compose.project=txnlab"]]
    # (the first: the stack's layout, read once from its node 1's labels)


def test_docker_backend_names_what_it_cannot_find(docker_stack):
    backend, _ = docker_stack
    with pytest.raises(BackendError, match="no node 7"):
        backend.kill(7)
    backend.project = "nope"
    with pytest.raises(BackendError, match="0 containers of compose service kafka-1 of compose project nope"):
        backend.kill(1)
    backend.project = None
    with pytest.raises(BackendError, match="2 containers .* name the compose project"):
        backend.kill(1)


def test_docker_backend_pause_needs_a_running_container(docker_stack):
    backend, log = docker_stack
    backend.kill(1)
    with pytest.raises(BackendError, match="not running"):
        backend.pause(1)


def test_docker_backend_heal_unpauses_starts_and_waits(docker_stack, monkeypatch):
    backend, log = docker_stack
    monkeypatch.setattr(backends, "registered_in_every_view",
                        lambda conn, node, addresses: log.append(("answers", addresses[node])) or True)
    monkeypatch.setattr(backends, "elect_preferred_leaders", lambda conn: log.append(("elect",)))
    backend.kill(1)
    backend.pause(2)
    log.clear()
    backend.heal(timeout=1)
    assert backend.toxiproxy.calls == [("reset",)]
    assert log == [("txnlab-kafka-1-1", "start"), ("txnlab-kafka-2-1", "unpause"),
                   *[("answers", f"127.0.0.1:1900{n}") for n in (1, 2, 3)], ("elect",)]


def test_docker_backend_isolates_with_the_same_toxics_as_the_local_cluster(docker_stack):
    backend, _ = docker_stack
    links = backend.isolate(2, "client")
    assert links == ["n2-client"]
    assert [c[:4] for c in backend.toxiproxy.calls] == [("n2-client", f"txnlab-isolate-{s}", "timeout", s)
                                                        for s in ("upstream", "downstream")]
    assert backend.describe()["toxiproxy"] == "http://127.0.0.1:19700"
    assert backend.prometheus_url() == "http://127.0.0.1:19790"


def test_docker_backend_without_the_sdk_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(TxnlabError, match=r"pip install 'txnlab\[docker\]'"):
        _ = DockerBackend().client


def test_docker_backend_takes_its_ports_from_the_stack_it_acts_on():
    """A stack of `txnlab docker up` at another base port: its containers carry their layout (a label)."""
    from cluster.lab import compose
    mine, other = compose.compose_layout(base_port=17000), compose.compose_layout(base_port=18000)
    containers = [FakeContainer("kafka-1", "a", "running", []), FakeContainer("kafka-1", "b", "running", []),
                  FakeContainer("kafka-1", "old", "running", [])]
    containers[0].labels[compose.LAYOUT_LABEL] = compose.layout_label(mine)
    containers[1].labels[compose.LAYOUT_LABEL] = compose.layout_label(other)
    backend = DockerBackend(client=FakeDocker(containers), project="a")
    assert backend.layout == mine and backend.toxiproxy.api == "http://127.0.0.1:17700"
    assert backend.node_address(2) == "127.0.0.1:17002" and backend.describe()["bootstrap"] == mine.bootstrap
    with pytest.raises(BackendError, match="name the compose project"):
        _ = DockerBackend(client=FakeDocker(containers)).layout                   # stacks of two layouts
    assert DockerBackend(client=FakeDocker(containers), project="old").layout == compose.compose_layout()


def test_an_existing_cluster_refuses_node_and_network_faults_and_heals_as_a_no_op():
    existing = SimpleNamespace(bootstrap="127.0.0.1:9", prometheus_url=None)
    backend = backends.ExistingBackend(existing, environ={})
    assert isinstance(backend, Backend) and backend.connection().bootstrap == "127.0.0.1:9"
    env = FaultEnv(backend, None, backend.connection(), random.Random(1), TAG)
    with pytest.raises(BackendError, match="cannot kill node 2 on an existing cluster"):
        make_fault("kill-broker", {"target": "node:2"}).act(env, 2)
    with pytest.raises(BackendError, match="latency toxic"):
        make_fault("network", {}).act(env, 1)
    backend.heal(), backend.heal_network(), backend.start(1), backend.resume(1)


def test_a_killed_workload_is_started_again_with_its_options_and_its_next_incarnation_at_heal_once():
    env = _env_for("kill-workload")
    fault = make_fault("kill-workload", {"process": "txp-0"})
    assert fault.start(env) == {"process": "txp-0", "signal": "SIGKILL"}
    assert "txp-0" not in env.run.alive()
    assert fault.heal(env) == {"process": "txp-0", "restarted": True}
    assert fault.heal(env) == {"process": "txp-0", "restarted": True}
    started = [c[1] for c in env.run.calls if c[0] == "start"]
    # the same options, and --incarnation 1: its attempts numbered apart from the killed one's (chaos/record/ids.py)
    assert [(s.process, s.args) for s in started] == [("txp-0", (*env.run.info.specs[0]["args"], "--incarnation", "1"))]


def test_killing_a_workload_that_is_not_running_says_so():
    env = _env_for("kill-workload")
    env.run.running.discard("txp-0")
    with pytest.raises(faults.FaultError, match="not running"):
        make_fault("kill-workload", {"process": "txp-0"}).start(env)


class StreamsAdmin(FakeAdmin):
    """A cluster where a Kafka Streams application's transactions are listed (ListTransactions per broker)."""

    def __init__(self, listed, group_coordinator=2, **kw):
        super().__init__(**kw)
        self.group_coordinator = group_coordinator
        self.client = SimpleNamespace(list_transactions=lambda broker_ids: {
            b: [SimpleNamespace(transactional_id=t) for t in listed if hash(t) % 3 + 1 == b] for b in broker_ids})

    def registered_brokers(self):
        return [1, 2, 3]

    def group_coordinator_of(self, group):
        self.asked.append(("group", group))
        return self.group_coordinator


def test_a_prefix_target_names_the_first_listed_transaction_and_avoids_the_group_coordinator_too():
    ids = ["r1.streams-b-1", "r1.streams-a-1", "other-1"]
    admin = StreamsAdmin(ids, coordinator=3, group_coordinator=2)
    assert resolve_target(make_env(admin), "coordinator:{tag}.streams-*") == 3
    assert ("coordinator", "r1.streams-a-1") in admin.asked
    admin = StreamsAdmin(ids, coordinator=3, group_coordinator=2)
    assert resolve_target(make_env(admin), "not-coordinator:{tag}.streams-*") == 1      # neither 3 nor 2
    assert ("group", "r1.streams") in admin.asked
    with pytest.raises(FaultError, match="no node but 2, 3, the coordinator of r1.streams-a-1 and of group r1.streams"):
        resolve_target(make_env(StreamsAdmin(ids, coordinator=3, group_coordinator=2), nodes=(2, 3)),
                       "not-coordinator:{tag}.streams-*")


def test_a_prefix_with_no_transaction_listed_yet_is_asked_again_until_the_timeout(monkeypatch):
    monkeypatch.setattr(faults, "RESOLVE_TIMEOUT_S", 0.5)
    with pytest.raises(FaultError):
        resolve_target(make_env(StreamsAdmin(["other-1"])), "coordinator:{tag}.streams-*")


def test_a_partial_upstream_toxic_is_named_and_added_on_that_stream_only():
    toxic = network_toxic(parse_params("network", {"toxic": "latency", "stream": "upstream", "toxicity": 0.5}))
    assert toxic_names(["n2-client"], toxic) == [("n2-client", "txnlab-latency-upstream")]
    added = []

    class Api:
        def add_toxic(self, *args):
            added.append(args)

    add_toxic_on_links(Api(), ["n2-client"], toxic)
    assert added == [("n2-client", "txnlab-latency-upstream", "latency", "upstream",
                      {"latency": 200, "jitter": 0}, 0.5)]


@pytest.mark.parametrize("params", [{"toxicity": 0}, {"toxicity": 1.5}, {"stream": "up"}])
def test_network_params_refuse_a_bad_stream_or_toxicity(params):
    with pytest.raises(ValidationError):
        parse_params("network", {"toxic": "latency", **params})


def test_hold_requests_puts_the_relay_in_front_of_the_node_and_takes_it_out_at_heal():
    env = make_env()
    fault = make_fault("hold-requests", EXAMPLE_PARAMS["hold-requests"])
    started = fault.start(env)
    assert started["node"] == 2 and started["clients"] == ["r1.streams-*-producer"] and started["apis"] == ["EndTxn"]
    first = fault.heal(env)
    assert first == {"node": 2, "rerouted_back": True, "held": [], "delivered_after_client_closed": []}
    assert fault.heal(env) == first
    assert env.backend.calls == [("reroute_client", 2, True), ("reroute_client", 2, None), ("reroute_client", 2, None)]
    assert fault.undo_steps(env) == [{"step": "remove-all-toxics"}]


def test_a_hold_of_the_markers_puts_a_relay_on_every_link_from_the_coordinator_and_takes_them_out_at_heal():
    env = make_env()
    fault = make_fault("hold-requests", {"target": "node:2", "link": "markers", "apis": ["WriteTxnMarkers"],
                                         "clients": ["broker-*-txn-marker-sender"], "hold_ms": 1000})
    started = fault.start(env)
    assert started["node"] == 2 and started["relay"] is None
    assert sorted(started["relays"].values()) == ["n1-repl-from-2", "n3-repl-from-2"]
    assert fault.heal(env) == {"node": 2, "rerouted_back": True, "held": [], "delivered_after_client_closed": []}
    assert env.backend.calls == [("reroute_link", 1, 2, True), ("reroute_link", 3, 2, True),
                                 ("reroute_link", 1, 2, None), ("reroute_link", 3, 2, None)]
    assert fault.relays == {} and fault.undo_steps(env) == [{"step": "remove-all-toxics"}]
    with pytest.raises(ValidationError, match="WriteTxnMarkers only"):
        make_fault("hold-requests", {"link": "markers", "apis": ["EndTxn"], "clients": ["x"]})
    with pytest.raises(ValidationError, match="never on a client link"):
        make_fault("hold-requests", {"apis": ["WriteTxnMarkers"], "clients": ["x"]})


def test_a_hold_whose_proxy_cannot_be_pointed_at_the_relay_stops_the_relay():
    env = make_env()

    def refuse(node, upstream):
        raise BackendError("no")

    env.backend.reroute_client = refuse
    fault = make_fault("hold-requests", EXAMPLE_PARAMS["hold-requests"])
    with pytest.raises(BackendError):
        fault.start(env)
    assert fault.relays == {}
