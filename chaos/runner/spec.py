"""The experiment spec: one YAML document says what a chaos run does; it is validated before anything runs.

Owns: the spec model (pydantic, unknown keys rejected at every level), loading a file or a built-in
(chaos/experiments/<name>.yaml), the short mode, and SpecError: one message naming the file and the
field path of every problem (`schedule.faults[2].kind: unknown fault 'kil-broker'; ...`), never a value.
Must not: reach a cluster, start a process or read the environment: loading a spec is pure. The fault
kinds and their parameters are chaos/nemesis/fault_kinds.py's; the processes and topics of a workload are
chaos/workloads/plans.py's plan(); this module checks a spec against both and decides nothing else.

The model:

    name: broker-hard-bounce              # [a-z0-9-]; a built-in's name is its file stem
    description: what it breaks and why
    cluster:                              # exactly one of
      local: {state_dir, base_port, nodes, broker_config: {k: v}, features: {k: v}, hanging_drill: false}
      compose: {project: txnlab}          # the docker-compose stack, up already (Docker SDK: pip install docker)
      existing: {bootstrap: "host:9092", disposable: true, prometheus_url: "http://host:9090"}
    workloads:                            # >= 1, planned as `txnlab chaos workload` plans them alone
      - {workload: txn-producer, instances: 2, options: ["--records", "5"], client: franz-go,
         client_options: {confluent: ["--request-timeout-s", "3.1"]}}   # a client's own, after options
    duration_s: 300                       # the method: workloads run while faults start and heal
    schedule:                             # explicit faults and/or a seeded random schedule (schedule.py)
      faults: [{kind: kill-broker, at_s: 20, duration_s: 10, params: {target: controller}}]
      random: {mix: {kill-broker: 3, pause-broker: 1}, start_s: 10, interval_s: [5, 15],
               duration_s: [5, 10], params: {kill-broker: {target: random}}}
    probes:                               # steady state: before the method, after quiescence
      before: [{name: exporter-up, promql: kafkatxn_up, expect: "== 1"}]
      after: [{name: lso, admin: lso-equals-hwm, within_s: 10}]
    quiescence: {timeout_s: 60}           # heal all, let transactions finish, wait for LSO == HWM
    restart: {on_stall: true, delay_s: 2} # a workload whose client call stalled is started again (chaos/workloads/run.py)
    alerts: [TransactionNearTimeout]      # alerts its faults should raise (the report: latency, clearing)
    short: {duration_s: 45, schedule: ..., workloads: ..., quiescence: ...}   # load_spec(short=True)
    java_clients: 3.7.2                   # the JVM workloads' Kafka clients and Streams (default: the cluster's)

Meaning:
- An existing cluster must say `disposable: true`: faults kill, pause and cut off its brokers. Its
  connection security comes from the TXNLAB_KAFKA_* environment, never from the spec.
- `{tag}` in targets, topics, processes' transactional ids and PromQL is the run tag; a `{tag}` topic
  or transactional id must be one the workloads create (`{tag}-a`, `{tag}.txp-0`, ...).
- Every fault starts and heals within duration_s (a fault of duration 0 heals at once). The random
  schedule picks kinds by weight; the next fault starts after the previous one healed plus an interval.
- A probe is PromQL (`expect`: `== 0`, `< 5`, `>= 1`, ... met by every sample, an empty result meets
  none; or `empty` / `nonempty`) or one admin check; it must hold for `for_s`, starting within
  `within_s`. A phase's probes run together: it lasts at most max(within_s + for_s).
- A workload's `client` is the Kafka client its own processes run on: confluent (confluent-kafka, the reference),
  franz-go or kafkajs for txn-producer and processor (chaos/workloads/native.py); `txnlab chaos run --client`
  sets it for every transactional workload of a spec.
- `short` replaces duration_s (and schedule, workloads, quiescence if given) for quick runs; a short
  run may take at most SHORT_LIMIT_S by `time_budget_s()`.
"""
from __future__ import annotations

import argparse
import copy
import difflib
import importlib
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from chaos.nemesis.fault_kinds import FAULT_KINDS, MigrateGroupProtocolParams, Params, ZombieProducerParams, parse_params
from chaos.workloads.plans import WorkloadSpec
from chaos.workloads.plans import group_of, option_value, plan
from chaos.workloads import GROUP_PROTOCOL_WORKLOADS, NO_CONSUMER_PROTOCOL, TRANSACTIONAL_WORKLOADS, WORKLOADS
from chaos.workloads.base import add_common_arguments
from chaos.workloads.native import REFERENCE, check_client, split_client
from cluster.lab.layout import HANGING_DRILL_BROKER_CONFIG, HANGING_DRILL_FEATURES, MAX_NODES
from cluster.access.errors import TxnlabError
from cluster.lab.versions import kafka_version

EXPERIMENTS_DIR = Path(__file__).parents[1] / "experiments"
STARTUP_ALLOWANCE_S = 10.0       # topics created and workload processes started, before the method
SHORT_LIMIT_S = 90.0
EXPECT_RE = re.compile(r"^\s*(?:(==|!=|<=|>=|<|>)\s*(-?\d+(?:\.\d+)?)|(empty|nonempty))\s*$")
Problem = tuple[str, str]
AdminProbe = Literal["brokers-registered", "lso-equals-hwm", "no-hanging-transactions"]
ADMIN_PROBES = get_args(AdminProbe)


class SpecError(TxnlabError, ValueError):
    """A spec that cannot run; `problems` holds (field path, message) pairs, the message names them all."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source, self.problems = source, problems
        lines = [f"{path}: {message}" if path else message for path, message in problems]
        super().__init__(f"invalid experiment spec {source}:\n  " + "\n  ".join(lines))


def _fail(problems: list[Problem]) -> None:
    """Raise the problems found by a model-level check, paths relative to that model (see _problems)."""
    if problems:
        raise PydanticCustomError("spec", "{summary}", {"summary": "; ".join(m for _, m in problems),
                                                        "problems": problems})


def _unknown(what: str, value: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(value, choices, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown {what} {value!r}{hint}; one of {', '.join(choices)}"


def _kafka_value(value: Any) -> Any:
    """YAML scalars as Kafka config strings (true -> "true", 5 -> "5")."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value) if isinstance(value, (int, float)) else value


def _one_of(what: str, choices: dict[str, Any]) -> AfterValidator:
    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(_unknown(what, value, list(choices)))
        return value
    return AfterValidator(check)


KafkaValue = Annotated[str, BeforeValidator(_kafka_value)]
FaultKind = Annotated[str, _one_of("fault", FAULT_KINDS)]
WorkloadName = Annotated[str, _one_of("workload", WORKLOADS)]


def _supported_release(version: str | None) -> str | None:
    """A release named in a spec: one of versions.env KAFKA_VERSIONS (UnsupportedVersion is a ValueError)."""
    return None if version is None else kafka_version(version)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- cluster -----------------------------------------------------------------------------------------
class LocalClusterSpec(_Strict):
    """The local launcher's cluster; unset fields keep the cluster's current layout."""
    state_dir: Path | None = None
    base_port: int | None = Field(None, ge=1024, le=64000)
    nodes: int | None = Field(None, ge=1, le=MAX_NODES)
    broker_config: dict[str, KafkaValue] = {}
    features: dict[str, KafkaValue] = {}
    hanging_drill: bool = False
    kafka_version: str | None = None      # the release a new cluster runs (versions.env KAFKA_VERSIONS)

    _supported = field_validator("kafka_version")(lambda cls, v: _supported_release(v))

    def broker_overrides(self) -> dict[str, str]:
        """Per-run broker settings: the drill's (when hanging_drill) under broker_config."""
        return {**(HANGING_DRILL_BROKER_CONFIG if self.hanging_drill else {}), **self.broker_config}

    def feature_overrides(self) -> dict[str, str]:
        return {**(HANGING_DRILL_FEATURES if self.hanging_drill else {}), **self.features}


class ExistingClusterSpec(_Strict):
    """A cluster txnlab does not run; security settings come from TXNLAB_KAFKA_*."""
    bootstrap: str = Field(pattern=r"^[^\s,]+:\d+(,[^\s,]+:\d+)*$")
    disposable: bool = Field(False, validate_default=True)
    prometheus_url: str | None = Field(None, pattern=r"^https?://")

    @field_validator("disposable")
    @classmethod
    def _disposable(cls, value: bool) -> bool:
        if not value:
            raise ValueError("an existing cluster must be marked disposable: true (experiments kill, pause "
                             "and cut off its brokers)")
        return value


class ComposeClusterSpec(_Strict):
    """txnlab's docker-compose stack, already up (`docker compose up -d`): node i is service kafka-<i>."""
    project: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9_-]*$")


class ClusterSpec(_Strict):
    local: LocalClusterSpec | None = None
    compose: ComposeClusterSpec | None = None
    existing: ExistingClusterSpec | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "ClusterSpec":
        if sum(x is not None for x in (self.local, self.compose, self.existing)) != 1:
            _fail([("", "give exactly one of local, compose or existing")])
        return self

    @property
    def has_prometheus(self) -> bool:
        return self.local is not None or self.compose is not None or bool(self.existing and self.existing.prometheus_url)


# ---- workloads ---------------------------------------------------------------------------------------
class _Refusing(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print and exit
        raise ValueError(message)


def _check_options(process: WorkloadSpec) -> None:
    """Parse a planned process's options as `python -m chaos.workloads` will, and run the workload's own
    check_args on them when it has one (ValueError or TxnlabError if it would refuse)."""
    parser = _Refusing(prog=process.workload, add_help=False)
    add_common_arguments(parser)
    module = importlib.import_module(WORKLOADS[process.workload])
    module.add_arguments(parser)
    client, options = split_client(process.workload, list(process.args))  # every client takes the reference's options
    args = parser.parse_args(["--socket", "s", "--run-start-ns", "0", "--run-tag", "t", "--process", process.process,
                              *options])
    args.client = client          # a rule of the reference client's library alone (librdkafka's) asks which one runs
    if hasattr(module, "check_args"):
        module.check_args(args)


class WorkloadEntry(_Strict):
    workload: WorkloadName
    instances: int = Field(1, ge=1, le=64)
    options: list[str] = []
    placement: Literal["kafka", "apart"] = "kafka"     # its topics' leaders (chaos/workloads/plans.py Plan.leader_shifts)
    client: str = REFERENCE                            # the Kafka client its processes run on (chaos/workloads/native.py)
    # options only for a client, after `options` (the last of a flag wins): a setting one client's library bounds
    # (librdkafka's socket.timeout.ms <= transaction.timeout.ms + 100) while the experiment wants it on the others
    client_options: dict[str, list[str]] = {}

    @property
    def run_options(self) -> list[str]:
        """The options its processes run with: `options`, then its client's own."""
        return [*self.options, *self.client_options.get(self.client, [])]

    @model_validator(mode="after")
    def _options_parse(self) -> "WorkloadEntry":
        try:
            check_client(self.workload, self.client)
            for named in self.client_options:
                check_client(self.workload, named)
        except TxnlabError as exc:
            _fail([("client", str(exc))])
        try:
            for process in self.processes():
                _check_options(process)
        except (ValueError, TxnlabError) as exc:
            _fail([("options", str(exc))])
        try:
            self.plan().leader_shifts(self.placement)
        except TxnlabError as exc:
            _fail([("placement", str(exc))])
        return self

    def plan(self):
        """This workload's plan (chaos/workloads/plans.py), topics and processes named with `{tag}`."""
        return plan(self.workload, "{tag}", self.instances, self.run_options, client=self.client)

    def topics(self) -> dict[str, int]:
        """Topic -> partitions, named with `{tag}` (as chaos/workloads/plans.py plans this workload)."""
        return self.plan().topics

    def processes(self) -> list[WorkloadSpec]:
        """The workload's processes, as chaos/workloads/plans.py plans them (`{tag}` for the run tag)."""
        return self.plan().specs


# ---- schedule ----------------------------------------------------------------------------------------
def _params_problems(kind: str, params: dict[str, Any] | None, prefix: str) -> list[Problem]:
    try:
        parse_params(kind, params)
    except ValidationError as exc:
        return [(_join(prefix, path), message) for path, message in _problems(exc)]
    return []


class FaultEntry(_Strict):
    kind: FaultKind
    at_s: float = Field(ge=0)
    duration_s: float = Field(ge=0)
    params: dict[str, Any] = {}

    @model_validator(mode="after")
    def _params_valid(self) -> "FaultEntry":
        _fail(_params_problems(self.kind, self.params, "params"))
        return self

    def parsed(self) -> Params:
        return parse_params(self.kind, self.params)


Weight = Annotated[float, Field(gt=0)]


class RandomSchedule(_Strict):
    """Seeded random faults: kinds by weight, each lasting duration_s, interval_s apart."""
    mix: dict[FaultKind, Weight] = Field(min_length=1)
    start_s: float = Field(0.0, ge=0)
    interval_s: tuple[float, float] = Field((10.0, 30.0))
    duration_s: tuple[float, float] = Field((5.0, 15.0))
    params: dict[str, dict[str, Any]] = {}

    @field_validator("interval_s", "duration_s")
    @classmethod
    def _range(cls, value: tuple[float, float], info) -> tuple[float, float]:
        low = 1.0 if info.field_name == "interval_s" else 0.0
        if not low <= value[0] <= value[1]:
            raise ValueError(f"give [min, max] with {low:g} <= min <= max")
        return value

    @model_validator(mode="after")
    def _kinds_and_params(self) -> "RandomSchedule":
        problems = [(f"params.{kind}", "a kind with params must be in mix") for kind in self.params
                    if kind not in self.mix]
        if not problems:
            for kind in self.mix:
                problems += _params_problems(kind, self.params.get(kind), f"params.{kind}")
        _fail(problems)
        return self

    def parsed(self, kind: str) -> Params:
        return parse_params(kind, self.params.get(kind))


class ScheduleSpec(_Strict):
    faults: list[FaultEntry] = []
    random: RandomSchedule | None = None


# ---- probes ------------------------------------------------------------------------------------------
class Probe(_Strict):
    name: str = Field(min_length=1)
    promql: str | None = None
    admin: AdminProbe | None = None
    expect: str | None = None
    for_s: float = Field(0.0, ge=0)
    within_s: float = Field(0.0, ge=0)

    @field_validator("expect")
    @classmethod
    def _expect_syntax(cls, value: str | None) -> str | None:
        if value is not None and not EXPECT_RE.match(value):
            raise ValueError("a comparison (==, !=, <, <=, >, >= and a number, e.g. '== 0') or empty / nonempty")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> "Probe":
        if (self.promql is None) == (self.admin is None):
            _fail([("", "give exactly one of promql or admin")])
        if self.promql is not None and self.expect is None:
            _fail([("expect", "a PromQL probe needs expect (e.g. '== 0', 'empty')")])
        if self.admin is not None and self.expect is not None:
            _fail([("expect", f"the admin probe {self.admin} takes no expect: it passes or fails")])
        return self

    def holds(self, samples: list[float]) -> bool:
        """Whether a PromQL result (its sample values) meets `expect`."""
        op, number, vector = EXPECT_RE.match(self.expect or "").groups()
        if vector:
            return (len(samples) > 0) == (vector == "nonempty")
        compare = {"==": float.__eq__, "!=": float.__ne__, "<": float.__lt__, "<=": float.__le__,
                   ">": float.__gt__, ">=": float.__ge__}[op]
        return bool(samples) and all(compare(float(s), float(number)) for s in samples)


class ProbesSpec(_Strict):
    before: list[Probe] = []
    after: list[Probe] = []


class QuiescenceSpec(_Strict):
    timeout_s: float = Field(60.0, gt=0, le=3600)


class RestartSpec(_Strict):
    """What the runner does with a workload process whose client call stalled (chaos/workloads/run.py): start it again
    after delay_s, as an orchestrator's liveness probe would (on_stall: false leaves it dead). A process
    restarted late, not yet committing again when the run's duration ends, gets up to settle_s more before
    quiescence (chaos/runner/experiment.py): the run does not cut an orchestrator's restart short."""
    on_stall: bool = True
    delay_s: float = Field(2.0, ge=0, le=600)
    settle_s: float = Field(45.0, ge=0, le=600)


class ShortMode(_Strict):
    """What a short run replaces (load_spec(short=True))."""
    duration_s: float = Field(gt=0)
    schedule: ScheduleSpec | None = None
    workloads: list[WorkloadEntry] | None = Field(None, min_length=1)
    quiescence: QuiescenceSpec | None = None


# ---- the experiment ----------------------------------------------------------------------------------
class ExperimentSpec(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=60)
    description: str = ""
    cluster: ClusterSpec
    workloads: list[WorkloadEntry] = Field(min_length=1)
    duration_s: float = Field(gt=0, le=86400)
    schedule: ScheduleSpec = ScheduleSpec()
    probes: ProbesSpec = ProbesSpec()
    quiescence: QuiescenceSpec = QuiescenceSpec()
    restart: RestartSpec = RestartSpec()
    # alerts (dashboards/alerts) its faults are meant to raise besides those of their kinds (report/detection.py):
    # the report gives each one's latency and clearing, or says it was not raised
    alerts: list[Annotated[str, Field(pattern=r"^[A-Z][A-Za-z]+$")]] = []
    short: ShortMode | None = None
    # the Kafka release whose Java clients and Kafka Streams the JVM workloads run (their jars and the Streams
    # app built against them); None: the cluster's release (a local cluster), else the pin
    java_clients: str | None = None

    _java_clients_supported = field_validator("java_clients")(lambda cls, v: _supported_release(v))

    @model_validator(mode="after")
    def _consistent(self) -> "ExperimentSpec":
        _fail(_process_collisions(self.workloads) or [*_fault_problems(self), *_probe_problems(self)])
        return self

    def topics(self) -> dict[str, int]:
        """Every topic the workloads create (`{tag}` in the names)."""
        return {topic: n for w in self.workloads for topic, n in w.topics().items()}

    def processes(self) -> list[WorkloadSpec]:
        return [p for w in self.workloads for p in w.processes()]

    def time_budget_s(self) -> float:
        """The longest a run of this spec may take: start, probes, method, quiescence."""
        return (STARTUP_ALLOWANCE_S + _phase_s(self.probes.before) + self.duration_s + self.quiescence.timeout_s
                + _phase_s(self.probes.after))


def _phase_s(probes: list[Probe]) -> float:
    """The longest a phase of probes (run together) may take."""
    return max((p.within_s + p.for_s for p in probes), default=0.0)


def fits(at_s: float, duration_s: float, end_s: float) -> bool:
    """Whether a fault starting at at_s and lasting duration_s starts before end_s and heals by it."""
    return at_s < end_s and at_s + duration_s <= end_s


def _process_collisions(workloads: list[WorkloadEntry]) -> list[Problem]:
    seen: dict[str, int] = {}
    problems = []
    for i, entry in enumerate(workloads):
        for process in entry.processes():
            if process.process in seen:
                problems.append((f"workloads[{i}]", f"process {process.process} is also started by "
                                                    f"workloads[{seen[process.process]}]"))
            seen.setdefault(process.process, i)
    return problems


class _Refs:
    """What fault parameters may name: the planned topics, processes and transactional ids."""

    def __init__(self, spec: ExperimentSpec):
        self.topics = spec.topics()
        self.workload_of = {p.process: p.workload for p in spec.processes()}
        self.args_of = {p.process: p.args for p in spec.processes()}
        self.txn_ids = {_txn_id(p) for p in spec.processes() if p.workload in TRANSACTIONAL_WORKLOADS}
        # Kafka Streams names its transactional ids "<application.id>-<process id>-<thread>" itself
        self.txn_prefixes = {f"{option_value(p.args, '--application-id') or '{tag}.streams'}-"
                             for p in spec.processes() if p.workload == "streams"}
        # Flink's KafkaSink names them "<prefix>-<subtask>-<n>" (chaos/workloads/flink.py: the prefix is the group)
        self.txn_prefixes |= {f"{option_value(p.args, '--txn-prefix') or option_value(p.args, '--group') or '{tag}.flink'}-"
                              for p in spec.processes() if p.workload == "flink"}
        self.groups = {group_of(p) for p in spec.processes()} - {None}
        self.nodes = spec.cluster.local.nodes if spec.cluster.local else None

    def topic(self, topic: str, partition: int | None = None) -> str | None:
        if "{tag}" not in topic:
            return None
        if topic not in self.topics:
            return f"{topic} is not a topic of the workloads; they create {', '.join(self.topics)}"
        if partition is not None and partition >= self.topics[topic]:
            return f"{topic} has partitions 0..{self.topics[topic] - 1}"
        return None


def _txn_id(process: WorkloadSpec) -> str:
    args = list(process.args)
    return args[args.index("--txn-id") + 1] if "--txn-id" in args else f"{{tag}}.{process.process}"


def _target_problem(target: str, refs: _Refs) -> str | None:
    where, _, rest = target.partition(":")
    if where == "group-coordinator" and "{tag}" in rest and not (
            rest in refs.groups or rest.endswith("*") and any(g.startswith(rest[:-1]) for g in refs.groups)):
        return f"no workload process is in consumer group {rest}; theirs: {', '.join(sorted(refs.groups)) or 'none'}"
    if where in ("coordinator", "not-coordinator") and "{tag}" in rest and rest.endswith("*"):
        prefix = rest[:-1]
        if not any(t.startswith(prefix) for t in refs.txn_ids) and \
                not any(s.startswith(prefix) or prefix.startswith(s) for s in refs.txn_prefixes):
            return (f"no workload process has a transactional.id starting with {prefix}; theirs: "
                    f"{', '.join(sorted(refs.txn_ids | {s + '*' for s in refs.txn_prefixes}))}")
        return None
    if where in ("coordinator", "not-coordinator") and "{tag}" in rest and rest not in refs.txn_ids:
        return f"no workload process has transactional.id {rest}; theirs: {', '.join(sorted(refs.txn_ids))}"
    if where == "leader":
        topic, _, partition = rest.rpartition(":")
        return refs.topic(topic, int(partition))
    if where == "node" and refs.nodes is not None and not 1 <= int(rest) <= refs.nodes:
        return f"the local cluster has nodes 1..{refs.nodes}"
    return None


def _reference_problems(params: Params, refs: _Refs) -> list[Problem]:
    """Problems of one fault's parameters against what the workloads plan (paths relative to params)."""
    found: list[tuple[str, str | None]] = []
    if hasattr(params, "target"):
        found.append(("target", _target_problem(params.target, refs)))
    if hasattr(params, "topic"):
        found.append(("topic", refs.topic(params.topic, getattr(params, "partition", None))))
    if getattr(params, "process", None) is not None:        # climb-epoch's is optional
        found.append(("process", _process_problem(params, refs)))
    if isinstance(params, MigrateGroupProtocolParams):
        found += [(f"processes.{i}", _migrated_problem(process, refs)) for i, process in enumerate(params.processes)]
    return [(path, message) for path, message in found if message]


def _migrated_problem(process: str, refs: _Refs) -> str | None:
    """A process a group-protocol migration cannot move: none such, not a processor, or on a client without KIP-848."""
    if process not in refs.workload_of:
        return _unknown("process", process, list(refs.workload_of))
    if refs.workload_of[process] != "processor":
        return f"{process} is a {refs.workload_of[process]} process: only a processor's group moves to the consumer protocol"
    client = option_value(refs.args_of[process], "--client")
    if client in NO_CONSUMER_PROTOCOL:
        return f"its client, {client}, has no KIP-848 consumer protocol to move to ({NO_CONSUMER_PROTOCOL[client]})"
    return None


def _process_problem(params: Params, refs: _Refs) -> str | None:
    process = params.process
    if process not in refs.workload_of:
        return _unknown("process", process, list(refs.workload_of))
    if isinstance(params, ZombieProducerParams) and refs.workload_of[process] not in TRANSACTIONAL_WORKLOADS:
        return f"{process} is not a transactional producer (a {refs.workload_of[process]} process)"
    return None


def _fault_problems(spec: ExperimentSpec) -> list[Problem]:
    refs, end = _Refs(spec), spec.duration_s
    problems: list[Problem] = []
    for i, fault in enumerate(spec.schedule.faults):
        where = f"schedule.faults[{i}]"
        if fault.at_s >= end:
            problems.append((f"{where}.at_s", f"starts at {fault.at_s:g} s, not before duration_s {end:g} s"))
        elif not fits(fault.at_s, fault.duration_s, end):
            problems.append((f"{where}.duration_s", f"heals at {fault.at_s + fault.duration_s:g} s, after "
                                                    f"duration_s {end:g} s"))
        problems += _kind_problems(spec, fault.kind, f"{where}.kind")
        problems += [(f"{where}.params.{p}", m) for p, m in _reference_problems(fault.parsed(), refs)]
    return problems + _random_problems(spec, refs)


def _random_problems(spec: ExperimentSpec, refs: _Refs) -> list[Problem]:
    random = spec.schedule.random
    if random is None:
        return []
    problems: list[Problem] = []
    if not fits(random.start_s, random.duration_s[0], spec.duration_s):
        problems.append(("schedule.random.start_s", f"no random fault fits: it must start before duration_s "
                                                    f"{spec.duration_s:g} s and heal by then"))
    for kind in random.mix:
        problems += _kind_problems(spec, kind, f"schedule.random.mix.{kind}")
        problems += [(f"schedule.random.params.{kind}.{p}", m)
                     for p, m in _reference_problems(random.parsed(kind), refs)]
    return problems


def _kind_problems(spec: ExperimentSpec, kind: str, path: str) -> list[Problem]:
    local = spec.cluster.local
    if kind == "hanging-transaction" and local is not None and not local.hanging_drill:
        return [(path, "hanging-transaction needs a drill cluster: cluster.local.hanging_drill: true")]
    return []


def _probe_problems(spec: ExperimentSpec) -> list[Problem]:
    if spec.cluster.has_prometheus:
        return []
    return [(f"probes.{phase}[{i}].promql", "a PromQL probe needs a Prometheus: set cluster.existing.prometheus_url")
            for phase in ("before", "after") for i, probe in enumerate(getattr(spec.probes, phase))
            if probe.promql is not None]


# ---- loading -----------------------------------------------------------------------------------------
def _join(base: str, sub: str) -> str:
    if not base or not sub:
        return base or sub
    return base + sub if sub.startswith("[") else f"{base}.{sub}"


def _loc_path(loc: tuple) -> str:
    path = ""
    for part in loc:
        if part != "[key]":            # a dict key's own error: the key is the path's last part
            path = _join(path, f"[{part}]" if isinstance(part, int) else str(part))
    return path


def _problems(exc: ValidationError) -> list[Problem]:
    """(field path, message) of every error; never the input value."""
    problems: list[Problem] = []
    for err in exc.errors():
        base = _loc_path(err["loc"])
        if err["type"] == "spec":
            problems += [(_join(base, sub), message) for sub, message in err["ctx"]["problems"]]
        elif err["type"] == "extra_forbidden":
            problems.append((base, "unknown key"))
        else:
            problems.append((base, err["msg"].removeprefix("Value error, ")))
    return problems


def builtin_specs() -> dict[str, Path]:
    """The built-in suite: name (file stem) -> file."""
    return {path.stem: path for path in sorted(EXPERIMENTS_DIR.glob("*.yaml"))}


def load_spec(path_or_name: str | Path, short: bool = False, client: str | None = None,
              compose: str | None = None, group_protocol: str | None = None) -> ExperimentSpec:
    """A spec file, or a built-in by name, validated in both modes; short=True returns the short one; a
    `client` runs its transactional workloads on that client (with_client); `compose` runs it on that compose
    project's stack instead of its local cluster (with_compose); `group_protocol` its processors' groups on that
    protocol (with_group_protocol)."""
    path = Path(path_or_name)
    if not path.is_file():
        builtins = builtin_specs()
        if str(path_or_name) not in builtins:
            raise SpecError(str(path_or_name), [("", f"no such file, nor a built-in; built-ins: "
                                                     f"{', '.join(builtins)}")])
        path = builtins[str(path_or_name)]
    data = _read_yaml(path)
    data = with_client(data, client) if client else data
    data = with_group_protocol(data, group_protocol) if group_protocol else data
    return parse_spec(with_compose(data, compose) if compose else data, str(path), short)


COMPOSE_NODES = 3       # the compose stack's (cluster/lab/compose.py)


def with_compose(data: dict[str, Any], project: str) -> dict[str, Any]:
    """The spec document on the compose stack of `project` in place of its local cluster; SpecError when the
    local cluster it asks for is one the stack is not (broker settings, features, the drill's, other nodes)."""
    data = copy.deepcopy(data)
    local = (data.get("cluster") or {}).get("local")
    if local is None:
        raise SpecError(str(data.get("name", "<spec>")), [("cluster", "only an experiment on the local cluster can run "
                                                          "on the compose stack instead")])
    asks = [key for key in ("broker_config", "features") if local.get(key)]
    asks += ["hanging_drill"] if local.get("hanging_drill") else []
    asks += ["nodes"] if local.get("nodes") not in (None, COMPOSE_NODES) else []
    if asks:
        raise SpecError(str(data.get("name", "<spec>")), [(f"cluster.local.{key}", "the compose stack has its own "
                                                          "settings: this experiment needs a local cluster")
                                                         for key in asks])
    data["cluster"] = {"compose": {"project": project}}
    return data


def _entries_of(data: dict[str, Any], kinds: tuple[str, ...], why: str) -> list[dict[str, Any]]:
    """The workload entries of `kinds` in a spec document and its short mode (to change in place); SpecError naming
    `why` they were wanted when there is none."""
    entries = [e for doc in (data, data.get("short") or {}) for e in (doc.get("workloads") or [])
               if isinstance(e, dict) and e.get("workload") in kinds]
    if not entries:
        raise SpecError(str(data.get("name", "<spec>")), [("workloads", f"no {' or '.join(kinds)} workload {why}")])
    return entries


def with_client(data: dict[str, Any], client: str) -> dict[str, Any]:
    """The spec document with every transactional workload (TRANSACTIONAL_WORKLOADS, its short mode's too) on
    `client`; SpecError when it has none (the client would not be tested)."""
    data = copy.deepcopy(data)
    for entry in _entries_of(data, TRANSACTIONAL_WORKLOADS, f"to run on {client}"):
        entry["client"] = client
    return data


def with_group_protocol(data: dict[str, Any], protocol: str) -> dict[str, Any]:
    """The spec document with the groups of every workload `protocol` is about (its short mode's too) on it (classic;
    consumer: a processor's, KIP-848; streams: Kafka Streams', KIP-1071), after their own options (the last of a flag
    wins); SpecError when it has none. A client without the protocol is refused by the spec's validation (the
    processor's check_args)."""
    data = copy.deepcopy(data)
    for entry in _entries_of(data, GROUP_PROTOCOL_WORKLOADS[protocol], f"whose group could run on the {protocol} "
                             "protocol"):
        entry["options"] = [*(entry.get("options") or []), "--group-protocol", protocol]
    return data


def parse_spec(data: dict[str, Any], source: str = "<spec>", short: bool = False) -> ExperimentSpec:
    """Validate a spec document (the YAML's mapping); SpecError names every problem."""
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(source, _problems(exc)) from None
    if spec.short is None:
        if short:
            raise SpecError(source, [("short", "this spec has no short mode")])
        return spec
    short_spec = _short_spec(data, source)
    return short_spec if short else spec


def _short_spec(data: dict[str, Any], source: str) -> ExperimentSpec:
    overrides = {k: v for k, v in data["short"].items() if v is not None}
    try:
        spec = ExperimentSpec.model_validate({**data, **overrides, "short": None})
    except ValidationError as exc:
        raise SpecError(source, [_in_short(path, message, overrides) for path, message in _problems(exc)]) from None
    if spec.time_budget_s() > SHORT_LIMIT_S:
        raise SpecError(source, [("short.duration_s", f"a short run may take {spec.time_budget_s():g} s (start "
                                                      f"{STARTUP_ALLOWANCE_S:g} + probes + duration + quiescence), "
                                                      f"over the {SHORT_LIMIT_S:g} s limit")])
    return spec


def _in_short(path: str, message: str, overrides: dict[str, Any]) -> Problem:
    first = re.split(r"[.\[]", path, maxsplit=1)[0]
    return (_join("short", path) if first in overrides else path, f"{message} (in short mode)")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SpecError(str(path), [("", f"cannot read: {exc.strerror}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError(str(path), [("", _yaml_problem(exc))]) from None
    if not isinstance(loaded, dict):
        raise SpecError(str(path), [("", f"must be a mapping of keys (name, cluster, workloads, ...), got "
                                         f"{type(loaded).__name__}")])
    return loaded


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what, without the snippet of the file (it could show a value)."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"not valid YAML: {where}{getattr(exc, 'problem', None) or type(exc).__name__}"
