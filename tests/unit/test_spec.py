"""Experiment specs: every built-in validates in both modes, and each kind of bad spec is refused with a
message naming the field (and never a value)."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from cluster.lab.local import EXPORTER_INTERVAL_SECONDS
from exporter.config import CollectionSection

from chaos.runner.spec import SHORT_LIMIT_S, ExperimentSpec, LocalClusterSpec, Probe, SpecError, builtin_specs, load_spec, parse_spec
from chaos.catalog.bugs import BugSide, bug_files, bug_side_spec, load_bug

REQUIRED_BUILTINS = {"broker-hard-bounce", "broker-clean-bounce", "coordinator-kill", "controller-kill",
                     "zombie-producer", "producer-paused-past-timeout", "broker-isolated",
                     "hanging-transaction-drill", "producer-state-storm"}


def minimal_spec(**changes) -> dict:
    """A valid spec document: a txn-producer on the local cluster, one explicit fault; `changes` replace keys."""
    spec = {
        "name": "t", "cluster": {"local": {}}, "duration_s": 60,
        "workloads": [{"workload": "txn-producer", "instances": 2}],
        "schedule": {"faults": [{"kind": "kill-broker", "at_s": 10, "duration_s": 5, "params": {"target": "random"}}]},
        "probes": {"after": [{"name": "lso", "admin": "lso-equals-hwm"}]},
    }
    spec.update(copy.deepcopy(changes))
    return spec


def problems_of(data: dict, short: bool = False) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(data, "x.yaml", short=short)
    assert str(caught.value).startswith("invalid experiment spec x.yaml:")
    return str(caught.value)


# ---- the built-in suite ------------------------------------------------------------------------------
def test_the_suite_has_the_issue_s_experiments():
    assert REQUIRED_BUILTINS <= set(builtin_specs())
    assert len(builtin_specs()) >= 8


@pytest.mark.parametrize("name", sorted(builtin_specs()))
def test_every_builtin_loads_in_both_modes_and_short_fits_the_limit(name):
    full, short = load_spec(name), load_spec(name, short=True)
    assert full.name == short.name == name
    assert full.short is not None and short.short is None
    assert short.duration_s < full.duration_s
    assert short.time_budget_s() <= SHORT_LIMIT_S
    assert load_spec(builtin_specs()[name]) == full           # by path as by name


@pytest.mark.parametrize("short", [False, True])
def test_every_injected_hanging_transaction_is_held_past_the_exporter_s_worst_time_to_flag_it(short):
    """The exporter flags a hanging transaction at its second look: the next collection (every
    EXPORTER_INTERVAL_SECONDS, plus the cycle's own time) and a re-check hanging_confirm_seconds later."""
    worst = EXPORTER_INTERVAL_SECONDS + CollectionSection().hanging_confirm_seconds + 5       # 5 s: two cycles' time
    held = [(name, f.duration_s) for name in builtin_specs() for f in load_spec(name, short=short).schedule.faults
            if f.kind == "hanging-transaction"]
    assert held and all(duration >= worst for _, duration in held), (worst, held)


def test_a_builtin_with_random_faults_loads_the_same_from_a_dict():
    path = builtin_specs()["broker-hard-bounce"]
    assert parse_spec(yaml.safe_load(path.read_text())) == load_spec(path)


# ---- refused specs -----------------------------------------------------------------------------------
def fault(kind: str, at_s: float = 10, duration_s: float = 5, **params) -> dict:
    return {"schedule": {"faults": [{"kind": kind, "at_s": at_s, "duration_s": duration_s, "params": params}]}}


@pytest.mark.parametrize("changes, expected", [
    ({"schedul": {}}, "schedul: unknown key"),
    ({"cluster": {"local": {"nodez": 3}}}, "cluster.local.nodez: unknown key"),
    ({"cluster": {"local": {"nodes": 12}}}, "cluster.local.nodes: Input should be less than or equal to 9"),
    (fault("kil-broker"), "schedule.faults[0].kind: unknown fault 'kil-broker' (did you mean kill-broker?); "
                          "one of kill-broker, stop-broker"),
    (fault("network", scope="everything"), "schedule.faults[0].params.scope: Input should be 'client', 'inter' or"),
    (fault("kill-broker", tagret="random"), "schedule.faults[0].params.tagret: unknown key"),
    (fault("kill-broker", target="broker-2"), "schedule.faults[0].params.target: a target is node:N"),
    (fault("pause-workload"), "schedule.faults[0].params.process: Field required"),
    (fault("kill-broker", at_s=60), "schedule.faults[0].at_s: starts at 60 s, not before duration_s 60 s"),
    (fault("kill-broker", at_s=50, duration_s=20), "schedule.faults[0].duration_s: heals at 70 s, after duration_s"),
    (fault("kill-broker", at_s=-1), "schedule.faults[0].at_s: Input should be greater than or equal to 0"),
    ({"cluster": {"existing": {"bootstrap": "kafka:9092"}}}, "cluster.existing.disposable: an existing cluster must "
                                                              "be marked disposable: true"),
    ({"cluster": {"existing": {"bootstrap": "kafka:9092", "disposable": False}}}, "cluster.existing.disposable"),
    ({"cluster": {"existing": {"bootstrap": "kafka", "disposable": True}}}, "cluster.existing.bootstrap"),
    ({"cluster": {"local": {}, "existing": {"bootstrap": "k:1", "disposable": True}}},
     "cluster: give exactly one of local, compose or existing"),
    ({"cluster": {}}, "cluster: give exactly one of local, compose or existing"),
    ({"workloads": []}, "workloads: List should have at least 1 item"),
    ({"workloads": [{"workload": "txn-produce"}]}, "workloads[0].workload: unknown workload 'txn-produce' (did you"),
    ({"workloads": [{"workload": "txn-producer", "instances": 0}]}, "workloads[0].instances"),
    ({"workloads": [{"workload": "txn-producer", "options": ["--transaction-timout-ms", "5"]}]},
     "workloads[0].options: unrecognized arguments: --transaction-timout-ms"),
    ({"workloads": [{"workload": "observer"}]}, "workloads[0].options: observer alone needs the topics"),
    ({"workloads": [{"workload": "txn-producer", "placement": "apart"}]},
     "workloads[0].placement: placement 'apart': one of kafka, apart (apart for a workload with outputs"),
    ({"workloads": [{"workload": "streams", "placement": "near"}]}, "workloads[0].placement: Input should be"),
    ({"workloads": [{"workload": "txn-producer"}, {"workload": "txn-producer"}]},
     "workloads[1]: process txp-0 is also started by workloads[0]"),
    ({"duration_s": 0}, "duration_s: Input should be greater than 0"),
    ({"probes": {"after": [{"name": "p", "admin": "lso-equals-hwm", "promql": "up", "expect": "== 1"}]}},
     "probes.after[0]: give exactly one of promql or admin"),
    ({"probes": {"before": [{"name": "p"}]}}, "probes.before[0]: give exactly one of promql or admin"),
    ({"probes": {"after": [{"name": "p", "promql": "up"}]}}, "probes.after[0].expect: a PromQL probe needs expect"),
    ({"probes": {"after": [{"name": "p", "promql": "up", "expect": "about 3"}]}},
     "probes.after[0].expect: a comparison"),
    ({"probes": {"after": [{"name": "p", "admin": "lso-equals-hwm", "expect": "== 0"}]}},
     "probes.after[0].expect: the admin probe lso-equals-hwm takes no expect"),
    ({"probes": {"after": [{"name": "p", "admin": "lso-is-fine"}]}}, "probes.after[0].admin: Input should be"),
    ({"cluster": {"existing": {"bootstrap": "k:1", "disposable": True}},
      "probes": {"after": [{"name": "p", "promql": "up", "expect": "== 1"}]}},
     "probes.after[0].promql: a PromQL probe needs a Prometheus: set cluster.existing.prometheus_url"),
    ({"workloads": [{"workload": "txn-producer", "options": ["--transaction-timeout-ms", "5000"]}]},
     "workloads[0].options: --request-timeout-s 10 exceeds --transaction-timeout-ms 5000 + 100 ms: the client "
     "refuses it"),
    ({"cluster": {"local": {"kafka_version": "3.5.1"}}},
     "cluster.local.kafka_version: Kafka 3.5.1 is not supported: choose one of 3.5.2, 3.6.2, "),
])
def test_a_bad_spec_names_the_field(changes, expected):
    assert expected in problems_of(minimal_spec(**changes))


def test_a_clients_own_options_apply_to_that_client_only():
    """librdkafka's bound (socket.timeout.ms <= transaction.timeout.ms + 100) is its own: another client runs the
    options it refuses, and `client_options` gives librdkafka its own value of the flag, after the shared ones."""
    long_requests = ["--transaction-timeout-ms", "3000", "--request-timeout-s", "25"]
    entry = {"workload": "txn-producer", "options": long_requests}
    assert "exceeds --transaction-timeout-ms 3000 + 100 ms" in problems_of(minimal_spec(workloads=[entry]))
    java = parse_spec(minimal_spec(workloads=[{**entry, "client": "java"}])).workloads[0]
    assert java.run_options == long_requests
    both = {**entry, "client_options": {"confluent": ["--request-timeout-s", "3.1"]}}
    reference = parse_spec(minimal_spec(workloads=[both])).workloads[0]
    assert reference.run_options == [*long_requests, "--request-timeout-s", "3.1"]
    assert parse_spec(minimal_spec(workloads=[{**both, "client": "kafkajs"}])).workloads[0].run_options == long_requests
    assert "client: client 'rdkafka': one of" in problems_of(minimal_spec(workloads=[
        {**entry, "client": "java", "client_options": {"rdkafka": []}}]))


@pytest.mark.parametrize("changes, expected", [
    (fault("pause-workload", process="txp-9"), "schedule.faults[0].params.process: unknown process 'txp-9'"),
    (fault("zombie-producer", process="obs-rc"), "schedule.faults[0].params.process: obs-rc is not a transactional"),
    (fault("kill-broker", target="coordinator:{tag}.eos-0"), "schedule.faults[0].params.target: no workload process "
                                                             "has transactional.id {tag}.eos-0; theirs: {tag}.txp-0"),
    (fault("kill-broker", target="leader:{tag}-a:6"), "schedule.faults[0].params.target: {tag}-a has partitions 0..5"),
    (fault("kill-broker", target="node:4"), "schedule.faults[0].params.target: the local cluster has nodes 1..3"),
    (fault("storm", topic="{tag}-zz"), "schedule.faults[0].params.topic: {tag}-zz is not a topic of the workloads"),
    (fault("hanging-transaction", topic="{tag}-a"), "schedule.faults[0].kind: hanging-transaction needs a drill "
                                                    "cluster: cluster.local.hanging_drill: true"),
])
def test_fault_parameters_must_name_what_the_workloads_create(changes, expected):
    if "node:4" in str(changes):
        changes["cluster"] = {"local": {"nodes": 3}}
    assert expected in problems_of(minimal_spec(**changes))


def test_references_the_workloads_do_create_pass():
    processor = {"workloads": [{"workload": "processor", "instances": 2, "options": ["--batch", "20"]}],
                 "cluster": {"local": {"hanging_drill": True}}}
    for params in ({"target": "coordinator:{tag}.eos-1"}, {"target": "leader:{tag}-out:5"},
                   {"target": "leader:__transaction_state:3"}, {"target": "coordinator:someone-else"}):
        parse_spec(minimal_spec(**processor, **fault("kill-broker", **params)))
    parse_spec(minimal_spec(**processor, **fault("zombie-producer", process="feeder")))
    parse_spec(minimal_spec(**processor, **fault("hanging-transaction", topic="{tag}-in-a", partition=5)))
    # climb-epoch's process is optional (epoch-rotation-coordinator-killed pauses it with a fault of its own)
    parse_spec(minimal_spec(**processor, **fault("climb-epoch", duration_s=0, txn_id="{tag}.eos-0", to_epoch=100)))


def random_schedule(**changes) -> dict:
    section = {"mix": {"kill-broker": 2, "network": 1}, "start_s": 5, "interval_s": [5, 10], "duration_s": [2, 4],
               "params": {"network": {"latency_ms": 100}}}
    section.update(changes)
    return {"schedule": {"random": section}}


@pytest.mark.parametrize("changes, expected", [
    (random_schedule(mix={"kill-brokers": 1}, params={}), "schedule.random.mix.kill-brokers: unknown fault"),
    (random_schedule(mix={"kill-broker": 0}), "schedule.random.mix.kill-broker: Input should be greater than 0"),
    (random_schedule(mix={}), "schedule.random.mix: Dictionary should have at least 1 item"),
    (random_schedule(params={"network": {"scope": "nowhere"}}), "schedule.random.params.network.scope: Input should"),
    (random_schedule(params={"storm": {"topic": "{tag}-a"}}), "schedule.random.params.storm: a kind with params "
                                                              "must be in mix"),
    (random_schedule(mix={"pause-workload": 1}, params={}), "schedule.random.params.pause-workload.process: "
                                                            "Field required"),
    (random_schedule(mix={"pause-workload": 1}, params={"pause-workload": {"process": "txp-7"}}),
     "schedule.random.params.pause-workload.process: unknown process 'txp-7'"),
    (random_schedule(interval_s=[10, 5]), "schedule.random.interval_s: give [min, max] with 1 <= min <= max"),
    (random_schedule(interval_s=[0, 5]), "schedule.random.interval_s: give [min, max] with 1 <= min <= max"),
    (random_schedule(duration_s=[3]), "schedule.random.duration_s"),
    (random_schedule(start_s=59), "schedule.random.start_s: no random fault fits"),
    (random_schedule(seed=3), "schedule.random.seed: unknown key"),
])
def test_a_bad_random_schedule_names_the_field(changes, expected):
    assert expected in problems_of(minimal_spec(**changes))


def test_every_problem_is_named_at_once():
    message = problems_of(minimal_spec(schedul={}, duration_s=-1, cluster={}))
    for expected in ("schedul: unknown key", "duration_s: Input should be greater than 0", "cluster: give exactly"):
        assert expected in message


# ---- short mode --------------------------------------------------------------------------------------
@pytest.mark.parametrize("changes, expected", [
    ({"short": {"duration_s": 20, **fault("kill-broker", at_s=25)}},
     "short.schedule.faults[0].at_s: starts at 25 s, not before duration_s 20 s (in short mode)"),
    ({"short": {"duration_s": 8}},
     "schedule.faults[0].at_s: starts at 10 s, not before duration_s 8 s (in short mode)"),
    ({"short": {"duration_s": 80}}, "short.duration_s: a short run may take 150 s"),
    ({"short": {"duration_s": 20, "workloads": [{"workload": "storm"}]}, **fault("pause-workload", process="txp-0")},
     "schedule.faults[0].params.process: unknown process 'txp-0'; one of storm-0 (in short mode)"),
    ({"short": {"duration_s": 20, "workloads": [{"workload": "storm", "options": ["--bogus"]}]}},
     "short.workloads[0].options: unrecognized arguments: --bogus"),
    ({"short": {"duration_s": 20, "durations": 3}}, "short.durations: unknown key"),
    ({"short": {}}, "short.duration_s: Field required"),
])
def test_short_mode_is_validated_too(changes, expected):
    assert expected in problems_of(minimal_spec(**changes))


def test_short_mode_replaces_only_what_it_names():
    data = minimal_spec(short={"duration_s": 30, "quiescence": {"timeout_s": 20}}, quiescence={"timeout_s": 90})
    full, short = parse_spec(data), parse_spec(data, short=True)
    assert (full.duration_s, full.quiescence.timeout_s) == (60, 90)
    assert (short.duration_s, short.quiescence.timeout_s) == (30, 20)
    assert short.schedule == full.schedule and short.workloads == full.workloads


def test_short_mode_of_a_spec_without_one_is_refused():
    assert "short: this spec has no short mode" in problems_of(minimal_spec(), short=True)


# ---- files -------------------------------------------------------------------------------------------
def test_yaml_syntax_error_names_the_file_and_line_but_not_the_text(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: t\ncluster:\n  existing: {bootstrap: 'k:1', password: [hunter2\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert str(path) in message and "not valid YAML: line" in message and "hunter2" not in message


def test_unknown_top_level_key_in_a_file_names_file_and_key(tmp_path):
    path = tmp_path / "extra.yaml"
    path.write_text("name: t\ncluster: {local: {}}\nworkloads: [{workload: storm}]\nduration_s: 10\nmethod: []\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(path) in str(caught.value) and "method: unknown key" in str(caught.value)
    assert caught.value.problems == [("method", "unknown key")]


@pytest.mark.parametrize("text, expected", [("- a list\n", "must be a mapping"), ("", "got NoneType")])
def test_a_file_must_hold_a_mapping(tmp_path, text, expected):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=expected):
        load_spec(path)


def test_an_unknown_name_lists_the_builtins():
    with pytest.raises(SpecError, match="no such file, nor a built-in; built-ins: .*broker-hard-bounce"):
        load_spec("broker-hard-bounse")


def test_values_never_appear_in_messages():
    secret = "hunter2-secret"
    data = minimal_spec(cluster={"existing": {"bootstrap": f"{secret}", "disposable": True,
                                              "prometheus_url": f"ftp://u:{secret}@h"}})
    assert secret not in problems_of(data)


# ---- model behaviour ---------------------------------------------------------------------------------
@pytest.mark.parametrize("expect, samples, holds", [
    ("== 0", [0.0, 0.0], True), ("== 0", [0.0, 3.0], False), ("== 0", [], False), ("< 5", [4.9], True),
    (">= 1", [1.0], True), ("!= 0", [0.0], False), ("<= -1", [-2.0], True), ("> 0.5", [0.5], False),
    ("empty", [], True), ("empty", [1.0], False), ("nonempty", [0.0], True), (" nonempty ", [], False),
])
def test_probe_expectations(expect, samples, holds):
    assert Probe(name="p", promql="x", expect=expect).holds(samples) is holds


def test_local_cluster_overrides_with_the_hanging_drill_and_kafka_strings():
    local = LocalClusterSpec(hanging_drill=True, broker_config={"log.retention.ms": 1000, "x.enable": True},
                             features={"transaction.version": 2})
    assert local.broker_overrides() == {"transaction.partition.verification.enable": "false",
                                        "log.retention.ms": "1000", "x.enable": "true"}
    assert local.feature_overrides() == {"transaction.version": "2"}
    assert LocalClusterSpec().broker_overrides() == {} and LocalClusterSpec().feature_overrides() == {}
    assert LocalClusterSpec(kafka_version="4.1.1").kafka_version == "4.1.1" and LocalClusterSpec().kafka_version is None


def test_topics_and_processes_follow_the_solo_plan():
    spec = parse_spec(minimal_spec(workloads=[{"workload": "txn-producer"}, {"workload": "processor"}]))
    assert set(spec.topics()) == {"{tag}-a", "{tag}-b", "{tag}-in-a", "{tag}-in-b", "{tag}-out"}
    assert [p.process for p in spec.processes()] == ["txp-0", "obs-rc", "obs-ru", "feeder", "eos-0"]
    assert isinstance(spec, ExperimentSpec)


def test_the_compose_stack_is_a_cluster_of_its_own_with_a_docker_backend():
    from chaos.nemesis.backends import DockerBackend
    from chaos.runner.experiment import make_backend
    spec = parse_spec(minimal_spec(cluster={"compose": {"project": "txnlab"}}))
    backend = make_backend(spec, progress=lambda m: None)      # the Docker SDK is reached only when a fault acts
    assert isinstance(backend, DockerBackend) and backend.project == "txnlab"
    assert spec.cluster.has_prometheus
    with pytest.raises(SpecError, match="cluster.compose.project"):
        parse_spec(minimal_spec(cluster={"compose": {"project": "Bad Name"}}))


# ---- the bug catalog --------------------------------------------------------------------------------------
def test_every_catalogued_bug_loads_with_both_sides_in_both_modes():
    assert "KAFKA-14402" in bug_files()
    for bug_id in bug_files():
        bug = load_bug(bug_id.lower())
        assert bug.id == bug_id and bug.affected.label != bug.fixed.label
        for side in ("affected", "fixed"):
            spec = bug_side_spec(bug, side, Path("/tmp/s"), 24000, short=True)
            assert spec.cluster.local.state_dir == Path("/tmp/s") and spec.cluster.local.base_port == 24000


def test_kafka_14402s_natural_sides_are_the_releases_around_its_fix_with_their_defaults():
    bug = load_bug("KAFKA-14402")
    assert bug.variant is None and set(bug.variants) == {"verification-off"}
    affected, fixed = (bug_side_spec(bug, side, Path("/s"), 24000, short=False).cluster.local for side in ("affected", "fixed"))
    assert (affected.kafka_version, fixed.kafka_version) == ("3.5.2", "3.6.2")
    assert bug.affected.java_clients == bug.fixed.java_clients == "3.9.1"       # past KAFKA-16903, on both sides
    assert affected.broker_overrides() == fixed.broker_overrides() == {}
    assert affected.feature_overrides() == fixed.feature_overrides() == {}


def test_its_verification_off_variant_differs_only_in_partition_verification():
    bug = load_bug("KAFKA-14402", "verification-off")
    assert bug.variant == "verification-off" and bug.fixed_in == load_bug("KAFKA-14402").fixed_in
    affected, fixed = (bug_side_spec(bug, side, Path("/s"), 24000, short=False).cluster.local for side in ("affected", "fixed"))
    assert affected.broker_overrides() == {"transaction.partition.verification.enable": "false"}
    assert fixed.broker_overrides() == {}
    assert affected.feature_overrides() == fixed.feature_overrides() == {"transaction.version": "1"}
    assert affected.kafka_version == fixed.kafka_version == "4.3.1"


def test_kafka_17754_is_affected_on_the_newest_3x_and_fixed_by_transaction_version_2():
    bug = load_bug("KAFKA-17754")
    affected, fixed = (bug_side_spec(bug, side, Path("/s"), 24000, short=False).cluster.local for side in ("affected", "fixed"))
    assert (affected.kafka_version, fixed.kafka_version) == ("3.9.1", "4.0.2")
    assert fixed.feature_overrides() == {"transaction.version": "2"} and affected.feature_overrides() == {}
    tv1 = load_bug("KAFKA-17754", "tv1")
    assert tv1.affected.kafka_version == tv1.fixed.kafka_version == "4.3.1"


def test_kafka_16903s_sides_differ_only_in_the_streams_release_and_share_kafka_14402s_experiment():
    bug, other = load_bug("KAFKA-16903"), load_bug("KAFKA-14402")
    affected, fixed = (bug_side_spec(bug, side, Path("/s"), 24000, short=True) for side in ("affected", "fixed"))
    assert (affected.java_clients, fixed.java_clients) == ("3.7.2", "3.8.1")
    assert affected.cluster.local == fixed.cluster.local and affected.cluster.local.kafka_version == "4.4.0"
    assert bug.experiment == other.experiment and bug.expect.checks == ["streams_processing:unprocessed"]
    swapped = load_bug("KAFKA-16903", "client-or-broker")
    assert (swapped.affected.kafka_version, swapped.affected.java_clients) == ("4.3.1", "3.6.2")
    assert (swapped.fixed.kafka_version, swapped.fixed.java_clients) == ("3.6.2", "4.3.1")
    with pytest.raises(ValueError, match="java_clients\n  Value error, Kafka 2.8.0 is not supported"):
        BugSide(label="x", java_clients="2.8.0")


def test_a_bug_can_take_only_a_catalogued_bugs_own_experiment_or_a_built_in_one(tmp_path):
    bug = tmp_path / "kafka-1.yaml"
    base = {"id": "KAFKA-1", "title": "t", "url": "https://issues.apache.org/jira/browse/KAFKA-1", "fixed_in": "1",
            "affected": {"label": "a"}, "fixed": {"label": "b"}, "expect": {"checks": ["duplicate"]}}
    bug.write_text(yaml.safe_dump({**base, "experiment": {"same_as": "KAFKA-9"}}))
    with pytest.raises(SpecError, match="experiment.same_as: names a catalogued bug or a built-in experiment and "
                                        "nothing beside it"):
        load_bug(bug)
    bug.write_text(yaml.safe_dump({**base, "experiment": {"same_as": "KAFKA-16903"}}))
    with pytest.raises(SpecError, match="KAFKA-16903's experiment must be written in its own file"):
        load_bug(bug)
    bug.write_text(yaml.safe_dump({**base, "experiment": {"same_as": "kafka-14402"}}))
    assert load_bug(bug).experiment["name"] == "late-produce-after-abort"
    bug.write_text(yaml.safe_dump({**base, "experiment": {"same_as": "zombie-returns-after-expiry"}}))
    built_in = load_bug(bug).experiment           # without its cluster (the sides give it) and its description
    assert built_in["name"] == "zombie-returns-after-expiry" and not {"cluster", "description"} & built_in.keys()
    assert built_in["schedule"]["faults"][0]["params"]["await_expiry"] is True


def test_an_unknown_variant_names_the_bugs_variants():
    with pytest.raises(SpecError, match="KAFKA-14402 has no variant 'off'; its variants: verification-off"):
        load_bug("KAFKA-14402", "off")


@pytest.mark.parametrize("change, expected", [
    (lambda d: d.update(id="BUG-1"), "id: String should match pattern"),
    (lambda d: d["affected"].update(kafka_version="3.5.1"),
     "KAFKA-14402 (affected side):\n  cluster.local.kafka_version: Kafka 3.5.1 is not supported"),
    (lambda d: d["experiment"].update(cluster={"local": {}}), "experiment.cluster: each side brings its own cluster"),
    (lambda d: d["experiment"]["schedule"]["faults"][0].update(kind="kil-broker"), "schedule.faults[0].kind"),
    (lambda d: d["variants"]["verification-off"]["fixed"].update(kafka_version="9.9.9"),
     "KAFKA-14402 (fixed side):\n  cluster.local.kafka_version: Kafka 9.9.9 is not supported"),
    (lambda d: d.update(variant="verification-off"), "variant: chosen when the bug is run"),
    (lambda d: d.pop("expect"), "expect: Field required"),
    (lambda d: d.update(expect={"checks": []}), "expect: name the checks, the errors, the stalled calls or the history shapes that show the bug"),
])
def test_a_bad_bug_document_names_the_problem(tmp_path, change, expected):
    document = yaml.safe_load(bug_files()["KAFKA-14402"].read_text())
    change(document)
    path = tmp_path / "kafka-1.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(SpecError) as raised:
        load_bug(path)
    assert expected in str(raised.value)


def test_an_unknown_bug_lists_the_catalog():
    with pytest.raises(SpecError, match="nor a catalogued bug; the catalog: flink-transaction-timeout, "
                       "franz-go-recreated-topic-unread, franz-go-tv2-wait, java-recreated-topic-skip"):
        load_bug("KAFKA-1")


def test_a_group_coordinator_target_names_a_group_of_the_workloads_or_a_prefix_of_one():
    processor = [{"workload": "processor", "instances": 1}]
    for target in ("group-coordinator:{tag}.eos", "group-coordinator:{tag}.*", "group-coordinator:someone-else"):
        parse_spec(minimal_spec(workloads=processor, schedule={"faults": [
            {"kind": "kill-broker", "at_s": 10, "duration_s": 5, "params": {"target": target}}]}))
    found = problems_of(minimal_spec(workloads=processor, schedule={"faults": [
        {"kind": "kill-broker", "at_s": 10, "duration_s": 5, "params": {"target": "group-coordinator:{tag}.copier"}}]}))
    assert "no workload process is in consumer group {tag}.copier; theirs: {tag}.eos" in found
    copier = [{"workload": "java-copier", "options": ["--group", "{tag}.mine"]}]
    parse_spec(minimal_spec(workloads=copier, schedule={"faults": [
        {"kind": "kill-broker", "at_s": 10, "duration_s": 5, "params": {"target": "group-coordinator:{tag}.mine"}}]}))


def test_a_client_bug_runs_each_side_s_own_workloads_in_both_modes():
    bug = load_bug("LIBRDKAFKA-5456")                     # any case
    assert bug.id == "librdkafka-5456" and bug.client_bug and bug.expect.stalls == ["send_offsets_to_transaction"]
    assert bug.affected.client.library == "librdkafka" and not load_bug("KAFKA-14402").client_bug
    for short in (False, True):
        sides = {side: bug_side_spec(bug, side, Path("s"), 20000, short) for side in ("affected", "fixed")}
        assert [w.workload for w in sides["affected"].workloads] == ["processor"]
        assert [w.workload for w in sides["fixed"].workloads] == ["streams"]
        assert sides["affected"].schedule == sides["fixed"].schedule        # the same faults on both sides
    assert "librdkafka-5456" in bug_files()


def test_the_workloads_java_clients_are_made_before_the_method_once_per_release(monkeypatch):
    from chaos.runner import experiment
    from chaos.workloads import streams
    made = []
    monkeypatch.setattr(experiment, "install_kafka", lambda release, progress: made.append(("jars", release)))
    monkeypatch.setattr(streams, "install_streams_app", lambda release, progress: made.append(("streams", release)))
    spec = parse_spec(minimal_spec(workloads=[{"workload": "streams", "instances": 2},
                                              {"workload": "txn-producer"}], java_clients="3.7.2"))
    experiment.prepare_workloads(spec, spec.java_clients, progress=lambda m: None)
    assert made == [("jars", "3.7.2"), ("streams", "3.7.2")]
    made.clear()
    experiment.prepare_workloads(spec, None, progress=lambda m: None)      # the pin's: made at set-up, checked
    assert made == [("streams", None)]


def test_the_group_protocol_of_every_processor_is_chosen_per_run_and_refused_where_the_client_has_none():
    from chaos.runner.spec import with_group_protocol
    spec = load_spec("coordinator-kill", group_protocol="consumer")
    processors = [w for w in spec.workloads if w.workload == "processor"]
    assert processors and all(w.run_options[-2:] == ["--group-protocol", "consumer"] for w in processors)
    short = load_spec("coordinator-kill", short=True, group_protocol="consumer")
    assert all(w.run_options[-2:] == ["--group-protocol", "consumer"] for w in short.workloads
               if w.workload == "processor")
    assert all("--group-protocol" not in w.run_options for w in load_spec("coordinator-kill").workloads)
    with pytest.raises(SpecError, match="KafkaJS 2.2.4, its last release, speaks JoinGroup and SyncGroup only"):
        load_spec("coordinator-kill", client="kafkajs", group_protocol="consumer")
    with pytest.raises(SpecError, match="no processor workload"):
        with_group_protocol(minimal_spec(), "consumer")
    kip1071 = load_spec("streams-zombie", group_protocol="streams")          # Kafka Streams' own protocol
    assert all(w.run_options[-2:] == ["--group-protocol", "streams"] for w in kip1071.workloads
               if w.workload == "streams")
    with pytest.raises(SpecError, match="no streams workload"):
        load_spec("coordinator-kill", group_protocol="streams")
    with pytest.raises(SpecError, match="group-protocol"):       # the reference's parser knows only the two
        parse_spec(minimal_spec(workloads=[{"workload": "processor", "instances": 1,
                                            "options": ["--group-protocol", "streams"]}]))


def test_a_group_protocol_migration_names_processors_of_clients_with_kip_848():
    migrate = {"kind": "migrate-group-protocol", "at_s": 10, "duration_s": 20,
               "params": {"processes": ["eos-0", "txp-0", "eos-9"]}}
    said = problems_of(minimal_spec(workloads=[{"workload": "txn-producer", "instances": 1},
                                               {"workload": "processor", "instances": 1}],
                                    schedule={"faults": [migrate]}))
    assert "params.processes.0" not in said                                         # a processor: it moves
    assert "params.processes.1: txp-0 is a txn-producer process: only a processor's group moves" in said
    assert "params.processes.2: unknown process 'eos-9' (did you mean eos-0?)" in said
    with pytest.raises(SpecError, match=r"processes.0: its client, kafkajs, has no KIP-848"):
        load_spec("group-protocol-migration", client="kafkajs")
    assert [f.kind for f in load_spec("group-protocol-migration", client="franz-go").schedule.faults] == [
        "migrate-group-protocol"]
