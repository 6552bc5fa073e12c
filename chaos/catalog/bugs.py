"""The bug catalog: chaos/bugs/<id>.yaml, each a real bug of Kafka or of a Kafka client with the sides that have it
and do not, and the one experiment whose faults trigger it (docs/bugs.md).

Owns: the bug document's model (BugSpec, its sides, expectations, rate and variants), loading a bug by id or file,
each side's experiment spec (bug_side_spec), and matching what a run showed (anomalies, a stall, a history shape)
to the catalogued bugs that name it. Must not: reach a cluster, start a process or read the environment, like the
experiment spec it builds on (chaos/runner/spec.py: the model, parse_spec, SpecError).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from chaos.record.shapes import SHAPES
from chaos.record.signatures import SIGNATURES
from chaos.runner.spec import (ExperimentSpec, KafkaValue, SpecError, WorkloadEntry, _fail, _problems, _read_yaml,
                               _Strict, _supported_release, builtin_specs, parse_spec)


# ---- the bug catalog: chaos/bugs/<id>.yaml -----------------------------------------------------------
# A bug document: a real bug of Kafka (a JIRA issue) or of a Kafka client (e.g. librdkafka's GitHub issue), the
# release, settings or client it affects beside those that fix it (or do not have it), and one experiment
# (without `cluster`) whose faults trigger it; each side runs it on a local cluster of its own.
#     id: KAFKA-14402 | librdkafka-5456     title, url (the upstream issue), links (related ones), description,
#     fixed_in
#     affected: {label, kafka_version, broker_config, features, client, workloads, java_clients}
#     fixed: {label, ...}
#             client: {name, library, version}: the client the side's workloads drive, named as a stall records
#             it (chaos/workloads/base.py); workloads: the side's own workloads in place of the experiment's
#             (a client bug's other side is another client under the same faults); java_clients: the release
#             of Kafka's Java clients and Kafka Streams the JVM workloads run, when not the cluster's (a bug of the
#             client, not the broker, has sides that differ there)
#     expect: {checks: [...], errors: [...], stalls: [...], alerts: [...]}   verify checks of which one finds
#             anomalies on the affected side (check:problem: one kind of a check's anomalies, e.g.
#             streams_processing:duplicate-output), or errors (exception class names) a workload recorded there, or
#             client calls that stalled there (a stall's `call`); alerts it should raise
#     affects_java_clients: [3.5.2, ...]   for a bug of the Java clients: the releases that have it (a report
#             names the bug on a run with those clients whose anomalies show in expect.checks)
#     rate: {reproduced, tries, measured, misses}   for a timing-bound bug: how often its affected side showed it
#             when measured, by what, and what a try that misses it meets instead (a variant states its own)
#     experiment: {name, workloads, duration_s, schedule, probes, quiescence, restart, short}, or
#             {same_as: KAFKA-14402}: another catalogued bug's experiment, when its faults trigger this bug too, or
#             {same_as: zombie-returns-after-expiry}: a built-in experiment's (its cluster and description left out)
#     full_only: why    its experiment always runs in its full mode (the short one cannot reach the bug)
#     variants: {name: {description, fixed_in, affected, fixed}}   other pairs of sides under the same experiment
#             (`txnlab bugs run ID --variant NAME`): e.g. the bug still reached on a fixed release with its fix
#             turned off; `affected` and `fixed` are the bug's natural sides (the releases before and after its fix,
#             with their defaults)
BUGS_DIR = Path(__file__).parents[1] / "bugs"
BUG_SIDES = ("affected", "fixed")


class BugClient(_Strict):
    """The Kafka client a side's workloads drive: the client (confluent-kafka, java), the library under it
    (librdkafka, kafka-clients) and its version, as a workload's stall names them."""
    name: str = Field(min_length=1)
    library: str | None = None
    version: str | None = None


class BugSide(_Strict):
    """One side of a bug: the Kafka release and the broker settings and features of its cluster, and the client
    and workloads when they are what differs."""
    label: str = Field(min_length=1)
    kafka_version: str | None = None
    broker_config: dict[str, KafkaValue] = {}
    features: dict[str, KafkaValue] = {}
    client: BugClient | None = None
    workloads: list[WorkloadEntry] | None = Field(None, min_length=1)
    java_clients: str | None = None     # the release of the JVM workloads' clients, when not the cluster's

    _java_clients_supported = field_validator("java_clients")(lambda cls, v: _supported_release(v))


class BugExpect(_Strict):
    """What shows the bug on the affected side: anomalies in one of `checks` (verify's), or one of `errors`
    (an exception's class name, e.g. org.apache.kafka.common.errors.InvalidTxnStateException) in an error a
    workload recorded in the history (a client call's failure, a Kafka Streams thread's uncaught exception
    and its causes), or a stall of one of `stalls` (a client call that did not return within twice its own
    timeout: chaos/workloads/base.py). `history` names the history signature (chaos/record/signatures.py)
    that tells this bug's duplicate outputs from another's of the same shape: its anomalies are this bug's only
    where the run's history shows it. `shapes` names history shapes (chaos/record/shapes.py) that show a bug that
    is a behaviour, not an anomaly (exactly-once may hold): the affected side shows one, the fixed side none."""
    checks: list[Annotated[str, Field(pattern=r"^[a-z_]+(:[a-z-]+)?$")]] = []    # check, or check:problem
    errors: list[str] = []
    stalls: list[str] = []
    alerts: list[str] = []          # alerts the affected side's faults should raise (the report marks them expected)
    history: str | None = None
    shapes: list[str] = []
    # the clients whose recorded errors show it (none: any): a broker's answer only some clients can get (KAFKA-20785:
    # those that speak transaction.version 2), the same error name from another client being another matter
    error_clients: list[str] = []

    @model_validator(mode="after")
    def _shows_something(self) -> "BugExpect":
        if not self.checks and not self.errors and not self.stalls and not self.shapes:
            _fail([("", "name the checks, the errors, the stalled calls or the history shapes that show the bug")])
        unknown = [name for name in self.shapes if name not in SHAPES]
        if unknown:
            _fail([("shapes", f"unknown history shapes {unknown} (known: {', '.join(SHAPES)})")])
        if self.history is not None:
            if self.history not in SIGNATURES:
                _fail([("history", f"unknown history signature {self.history!r} (known: {', '.join(SIGNATURES)})")])
            if self.checks != ["exactly_once_processing:duplicate-output"]:
                _fail([("history", "a history signature tells duplicate outputs apart: checks must be "
                                   f"exactly_once_processing:duplicate-output, got {self.checks}")])
        return self


class BugRate(_Strict):
    """How often the affected side showed a timing-bound bug when measured, and why a try misses it: a campaign
    cell whose affected tries reproduced it in some but not all tries (the fixed side clean in every one) names
    this rate as the cause of the misses (report/campaign.py bug_outcome)."""
    reproduced: int = Field(ge=1)
    tries: int = Field(ge=1)
    measured: str = Field(min_length=1)      # when and by which command
    misses: str = Field(min_length=1)        # what a try that misses it met instead

    @model_validator(mode="after")
    def _a_rate(self) -> "BugRate":
        if self.reproduced > self.tries:
            _fail([("reproduced", f"{self.reproduced} reproductions in {self.tries} tries")])
        return self


class BugVariant(_Strict):
    """Another pair of sides for a bug's experiment, and why it is worth running."""
    description: str = Field(min_length=1)
    fixed_in: str | None = None         # the bug's own when not given
    affected: BugSide
    fixed: BugSide
    rate: BugRate | None = None         # its own measured rate (a variant never takes its bug's)


class BugCause(_Strict):
    """Where in the client's (or Kafka's) source the cause lies: a file, the function, the release it was read at,
    and what that code does."""
    file: str = Field(min_length=1)
    function: str = Field(min_length=1)
    release: str = Field(min_length=1)
    does: str = Field(min_length=1)


class BugUpstream(_Strict):
    """The bug as its maintainers would file it (`txnlab bugs export`): their project, a title in their terms, what
    a user of the client expects and sees, where the cause lies, whether and where it was reported. Every number a
    bundle's README adds comes from the runs in the bundle, not from here."""
    project: str = Field(min_length=1)           # e.g. "franz-go (github.com/twmb/franz-go)"
    title: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    expected: str = Field(min_length=1)
    actual: str = Field(min_length=1)
    cause: list[BugCause] = Field(min_length=1)
    reported: str = "not reported upstream"
    log_patterns: list[str] = []                 # regular expressions of the client's log lines that show it


class BugSpec(_Strict):
    # a Kafka JIRA key, a client's issue (librdkafka-5456), or a named trap without an issue number
    # (flink-transaction-timeout: a documented misconfiguration, its url the documentation's warning; kafkajs-kip-447:
    # a client's missing protocol feature, its url the client's documentation of the call; franz-go's: the
    # documentation of the setting or the call whose behaviour it is)
    id: str = Field(pattern=r"^(KAFKA-\d+|[a-z][a-z0-9-]*)$")
    title: str = Field(min_length=1)
    url: str = Field(pattern=r"^https://(issues\.apache\.org/jira/browse/KAFKA-\d+|github\.com/[\w.-]+/[\w.-]+/"
                             r"(issues|pull)/\d+|nightlies\.apache\.org/flink/\S+|kafka\.js\.org/docs/\S+|pkg\.go\.dev/\S+)$")
    links: list[str] = []
    description: str = ""
    fixed_in: str = Field(min_length=1)
    affected: BugSide
    fixed: BugSide
    expect: BugExpect
    experiment: dict[str, Any]
    variants: dict[str, BugVariant] = {}
    # the releases whose Java clients (Kafka Streams) have this client bug: a run on one of them whose anomalies
    # show in expect.checks is named as this bug in its report (matching_anomaly_bugs)
    affects_java_clients: list[str] = []
    variant: str | None = None          # the variant whose sides `affected` and `fixed` are (load_bug), None: natural
    rate: BugRate | None = None         # the affected side's measured rate, when the bug is timing-bound
    upstream: BugUpstream | None = None  # for its maintainers: what `txnlab bugs export` bundles
    # why its experiment runs in its full mode whatever the run asks (the short one cannot reach the bug: KAFKA-20090's
    # climb to the edge of epoch exhaustion alone takes longer than a short run may)
    full_only: str | None = None
    # why each try needs a cluster of its own (purged, up, the try, purged) where a try leaves the cluster unlike a
    # fresh one (KAFKA-20090: a reproduced try's transaction stays stuck at epoch 32767, and the coordinator's timeout
    # sweep then throws on it every pass, so a later try on that broker cannot meet the bug): tries independent
    cluster_per_try: str | None = None

    _releases_supported = field_validator("affects_java_clients")(
        lambda cls, versions: [_supported_release(v) for v in versions])

    @property
    def client_bug(self) -> bool:
        """A client's bug (its affected side names a client library), not Kafka's."""
        return self.affected.client is not None and not self.id.startswith("KAFKA-")


def bug_files() -> dict[str, Path]:
    """The catalog: id (KAFKA-14402, librdkafka-5456: a file's stem, Kafka's JIRA keys in capitals) -> file."""
    return {path.stem.upper() if path.stem.startswith("kafka-") else path.stem: path
            for path in sorted(BUGS_DIR.glob("*.yaml"))}


def load_bug(path_or_id: str | Path, variant: str | None = None) -> BugSpec:
    """A bug document by file or id (any case), its experiment checked on both sides of every pair (the natural
    one and each variant) in both modes; with `variant`, the bug whose sides are that variant's. SpecError names
    every problem."""
    path = Path(path_or_id)
    if not path.is_file():
        found = {bug_id.lower(): file for bug_id, file in bug_files().items()}
        if str(path_or_id).lower() not in found:
            raise SpecError(str(path_or_id), [("", f"no such file, nor a catalogued bug; the catalog: "
                                                   f"{', '.join(bug_files())}")])
        path = found[str(path_or_id).lower()]
    data = _read_yaml(path)
    if isinstance(data.get("experiment"), dict) and "same_as" in data["experiment"]:
        data["experiment"] = _experiment_of(data["experiment"], path)
    try:
        bug = BugSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(str(path), _problems(exc)) from None
    if "cluster" in bug.experiment:
        raise SpecError(str(path), [("experiment.cluster", "each side brings its own cluster: leave it out")])
    if bug.variant is not None:
        raise SpecError(str(path), [("variant", "chosen when the bug is run (--variant), not written in its file")])
    pairs: dict[str | None, BugSpec] = {None: bug, **{name: with_variant(bug, name) for name in bug.variants}}
    for pair in pairs.values():
        for side in BUG_SIDES:
            for short in (False, True):
                bug_side_spec(pair, side, Path("bug-state"), 20000, short)
    if variant not in pairs:
        raise SpecError(str(path), [("variant", f"{bug.id} has no variant {variant!r}; its variants: "
                                                f"{', '.join(bug.variants) or 'none'}")])
    return pairs[variant]


def _experiment_of(reference: dict[str, Any], path: Path) -> dict[str, Any]:
    """`experiment: {same_as: KAFKA-14402}`: the experiment of another catalogued bug, whose faults also trigger
    this one, or `{same_as: zombie-returns-after-expiry}`: a built-in experiment's, without its cluster (the sides
    give it) and description (one experiment, written once)."""
    other = str(reference["same_as"])
    found = {bug_id.lower(): file for bug_id, file in bug_files().items()}
    builtins = builtin_specs()
    if len(reference) == 1 and other in builtins and other.lower() not in found:
        document = _read_yaml(builtins[other])
        return {key: value for key, value in document.items() if key not in ("cluster", "description")}
    if len(reference) != 1 or other.lower() not in found:
        raise SpecError(str(path), [("experiment.same_as", f"names a catalogued bug or a built-in experiment and "
                                                            f"nothing beside it; the catalog: {', '.join(bug_files())}")])
    experiment = _read_yaml(found[other.lower()]).get("experiment")
    if not isinstance(experiment, dict) or "same_as" in experiment:
        raise SpecError(str(path), [("experiment.same_as", f"{other}'s experiment must be written in its own file")])
    return experiment


def with_variant(bug: BugSpec, name: str) -> BugSpec:
    """The bug with a variant's sides (and fix) in place of its natural ones."""
    chosen = bug.variants[name]
    return bug.model_copy(update={"affected": chosen.affected, "fixed": chosen.fixed, "variant": name,
                                  "fixed_in": chosen.fixed_in or bug.fixed_in, "rate": chosen.rate})


def expected_anomalies(anomalies: dict[str, int], problems: dict[str, dict[str, int]], expected: str) -> int:
    """The anomalies a bug's expected check finds: all of the check's ("streams_processing"), or only those of one
    of its problems ("streams_processing:duplicate-output", when the check also holds anomalies of other causes)."""
    check, _, problem = expected.partition(":")
    return problems.get(check, {}).get(problem, 0) if problem else anomalies.get(check, 0)


def matching_anomaly_bugs(java_clients: str | None, anomalies: dict[str, int],
                          problems: dict[str, dict[str, int]], clients: frozenset[str] = frozenset(),
                          args: tuple[tuple[str, ...], ...] = (), cluster: dict | None = None) -> list[BugSpec]:
    """The catalogued bugs a run's anomalies match: one of the bug's expected checks found anomalies, and the
    run's Java clients' release is one the bug affects (affects_java_clients), or the bug's affected client is one
    the run's workloads ran on (`clients`: their --client, chaos/workloads/native.py), or the bug is a setting (no
    affected client: the Flink timeout trap) and the run's workload processes ran with its affected side's
    settings (`args`: each process's arguments, spec.json; set_as), or the bug is a broker's and the run's cluster
    is one of its affected sides' (`cluster`: the run's cluster.json; broker_side_of)."""
    return [bug for bug in catalog()
            if ((java_clients and java_clients in bug.affects_java_clients)
                or (bug.affected.client is not None and bug.affected.client.name in clients)
                or (bug.affected.client is None and set_as(bug.affected, args))
                or broker_side_of(bug, cluster or {}))
            and any(expected_anomalies(anomalies, problems, check) for check in bug.expect.checks)]


def broker_side_of(bug: BugSpec, cluster: dict) -> bool:
    """Whether a run's cluster (its cluster.json: kafka_version, broker_config, features) is the affected side of
    one of the bug's pairs (its natural sides and its variants') that differ in the cluster alone (a broker's bug:
    KAFKA-14402's release before partition verification, or with it off): the side's release, and each of its
    broker settings and features as the run's cluster was brought up with (a run that did not record them
    matches only a side that names none). Settings compare as Kafka config strings (KafkaValue)."""
    def cluster_of(side: BugSide) -> tuple:
        return side.kafka_version, side.broker_config, side.features

    def is_brokers(affected: BugSide, fixed: BugSide) -> bool:
        return (affected.client is None and fixed.client is None and affected.java_clients == fixed.java_clients
                and affected.workloads == fixed.workloads and cluster_of(affected) != cluster_of(fixed))

    def runs_on(side: BugSide) -> bool:
        config, features = cluster.get("broker_config") or {}, cluster.get("features") or {}
        return (side.kafka_version is not None and side.kafka_version == cluster.get("kafka_version")
                and side.broker_config.items() <= config.items() and side.features.items() <= features.items())
    pairs = [(bug.affected, bug.fixed), *((v.affected, v.fixed) for v in bug.variants.values())]
    return any(is_brokers(a, f) and runs_on(a) for a, f in pairs)


def set_as(side: BugSide, args: tuple[tuple[str, ...], ...]) -> bool:
    """Whether a run's processes ran with a side's workload settings: each of its workloads' options (a flag and
    its value, e.g. --transaction-timeout-ms 8000) among some process's arguments. A side without options matches
    nothing (it would name every run)."""
    wanted = [setting for w in side.workloads or [] for setting in _settings(w.run_options)]
    return bool(wanted) and all(any(a[i:i + len(pair)] == pair for a in args for i in range(len(a)))
                                for pair in wanted)


def _settings(options: list[str]) -> list[tuple[str, ...]]:
    """A workload's options as settings: a flag with its value (the token after it that is no flag), or alone."""
    found = []
    for i, token in enumerate(options):
        if token.startswith("--"):
            value = options[i + 1:i + 2]
            found.append((token, *value) if value and not value[0].startswith("--") else (token,))
    return found


def shape_candidates(clients: frozenset[str], cluster: dict | None = None) -> list[BugSpec]:
    """The catalogued bugs shown by history shapes (`expect.shapes`) whose affected client, on its natural sides or a
    variant's, is one a run's workloads ran on (`clients`: the bug files' client names), or that are a broker's bug
    whose affected side the run's cluster is (`cluster`: cluster.json; broker_side_of: KAFKA-20090's stuck producer on
    4.2.2): the bugs its history may show."""
    return [bug for bug in catalog() if bug.expect.shapes and (any(
        side.client is not None and side.client.name in clients
        for side in (bug.affected, *(variant.affected for variant in bug.variants.values())))
        or (cluster is not None and broker_side_of(bug, cluster)))]


def error_candidates(clients: frozenset[str], cluster: dict) -> list[BugSpec]:
    """The catalogued bugs shown by a workload's errors (`expect.errors`) a run may show: their affected client is one
    the run's workloads ran on (`clients`: their --client), or the bug is a broker's and the run's cluster is one of
    its affected sides' (`cluster`: cluster.json; broker_side_of)."""
    return [bug for bug in catalog() if bug.expect.errors
            and ((bug.affected.client is not None and bug.affected.client.name in clients)
                 or broker_side_of(bug, cluster))]


def matching_bugs(stall: dict) -> list[BugSpec]:
    """The catalogued client bugs a stall matches: one of its expected stalled calls, in the library its affected
    side names (a stall records its call and library: chaos/workloads/base.py)."""
    return [bug for bug in catalog() if stall.get("call") in bug.expect.stalls and bug.affected.client is not None
            and bug.affected.client.library == stall.get("library")]


@lru_cache(maxsize=1)
def catalog() -> tuple[BugSpec, ...]:
    """Every catalogued bug with its natural sides, loaded once per process (the files do not change under it)."""
    return tuple(load_bug(path) for path in bug_files().values())


def bug_side_spec(bug: BugSpec, side: str, state_dir: Path, base_port: int, short: bool) -> ExperimentSpec:
    """The bug's experiment on one side's local cluster (state_dir, base_port); short: its short mode."""
    settings: BugSide = getattr(bug, side)
    local = {"state_dir": str(state_dir), "base_port": base_port, "broker_config": settings.broker_config,
             "features": settings.features, "kafka_version": settings.kafka_version}
    experiment = dict(bug.experiment)
    if settings.java_clients is not None:
        experiment["java_clients"] = settings.java_clients
    if settings.workloads is not None:          # the side's own workloads, in both modes
        workloads = [w.model_dump(exclude_defaults=True) for w in settings.workloads]
        experiment["workloads"] = workloads
        if isinstance(experiment.get("short"), dict):
            experiment["short"] = {**experiment["short"], "workloads": None}
    return parse_spec({**experiment, "cluster": {"local": local}}, f"{bug.id} ({side} side)", short)
