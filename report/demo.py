"""`txnlab demo`: the main job. A suite of experiments on real local clusters, verified, then reported.

Owns: the default suite and the demo's clusters (per transaction.version level a 3-node cluster, a
1-node drill cluster for the hanging-transaction drill and, for experiments asking for broker settings of their
own (cluster.local.broker_config), a 3-node cluster with them, each with its exporter and Prometheus loading the
alert rules; their own state dirs and ports, so a dev or test cluster is never touched); running each
experiment in its short mode (or its full one, when asked), capturing its Prometheus timelines and alerts while the cluster is up,
verifying the level's runs with Spark in one session before its clusters go, tearing down (all, or all but
the last level's with keep), on a normal end, an error and Ctrl-C alike; the suite directory
(runs/<id>-demo/suite.json, the runs under tv<N>/) and the report (report/build.py).
Must not: define experiments (chaos/experiments/), checks (spark_analysis/) or the report's content.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from chaos.nemesis.backends import LocalBackend
from chaos.record.history import read_history
from chaos.runner.experiment import Experiment
from chaos.runner.spec import ExperimentSpec, SpecError, load_spec
from chaos.workloads import GROUP_PROTOCOL_WORKLOADS
from chaos.workloads.native import REFERENCE, clients
from cluster.lab.layout import DRILL_BROKER_CONFIG
from cluster.lab.local import LocalCluster
from cluster.lab.versions import kafka_version, txnlab_home
from cluster.access.errors import TxnlabError
from cluster.access.progress import Progress
from report import build, series
from report.build import tv_level
from report.stack import local_stack

DEFAULT_SUITE = ("coordinator-kill", "zombie-producer", "hanging-transaction-drill", "producer-state-storm",
                 "streams-instance-restart")
TRANSACTION_VERSIONS = (1, 2)
DEMO_BASE_PORT = 25000
DRILL_BASE_PORT = 26000
OWN_BASE_PORT = 27000             # the cluster of the experiments that ask for broker settings of their own
DEMO_SPARK_BASE_PORT = 31300      # the verifications' Spark Connect server at +30 (txnlab spark up's is 31200)
CLIENTS_COMPARISON = {
    "title": "clients side by side",
    "note": "The same experiments, each run once per Kafka client on the same cluster: the client's transactional "
            "producers and exactly-once processors (chaos/workloads/native.py; their feeders and observers stay on "
            "confluent-kafka, so what they see is judged apart), every run verified by the same Spark job. "
            "An experiment with no such workload is not applicable to a client (docs/clients.md)."}
SETTLE_S = 6.0            # a scrape (5 s) and a rule evaluation after the run, before its timelines are read


@dataclass
class DemoOptions:
    experiments: tuple[str, ...] = DEFAULT_SUITE
    transaction_versions: tuple[int, ...] = (2,)
    runs_dir: Path = Path("runs")
    keep: bool = False
    seed: int = 1
    verify: bool = True
    master: str = "local[*]"
    base_port: int = DEMO_BASE_PORT
    drill_base_port: int = DRILL_BASE_PORT
    own_base_port: int = OWN_BASE_PORT
    spark_base_port: int = DEMO_SPARK_BASE_PORT       # its Spark Connect server listens at +30
    state_root: Path = field(default_factory=lambda: txnlab_home() / "demo")
    clients: tuple[str, ...] = (REFERENCE,)           # each experiment once per client (chaos/workloads/native.py)
    full: tuple[str, ...] = ()                        # experiments run in their full mode (the others short)
    group_protocol: str = "classic"                   # the groups' (GROUP_PROTOCOLS; spec.with_group_protocol)

    def check(self) -> None:
        unknown = [v for v in self.transaction_versions if v not in TRANSACTION_VERSIONS]
        if unknown or not self.transaction_versions:
            raise DemoError(f"transaction.version must be among {TRANSACTION_VERSIONS}, got {unknown or 'none'}")
        strange = [c for c in self.clients if c not in clients()]
        if strange or not self.clients or len(set(self.clients)) != len(self.clients):
            raise DemoError(f"clients must be distinct ones of {', '.join(clients())}, got {list(self.clients)}")
        own = {name: settings for name in self.experiments if (settings := own_broker_settings(name))}
        if len(set(own.values())) > 1:
            raise DemoError("experiments asking for broker settings of their own must ask for the same ones in one "
                            f"suite (a level's clusters stay up until its runs are verified): {own}")

    def levels(self) -> list[tuple[int, str]]:
        """(transaction.version, client) of each level, in the order they run."""
        return [(tv, client) for tv in self.transaction_versions for client in self.clients]

    def level(self, tv: int, client: str) -> str:
        """A level's name: its transaction.version's (the one client is the reference), its client's (one
        transaction.version), or both."""
        if self.clients == (REFERENCE,):
            return tv_level(tv)
        return client if len(self.transaction_versions) == 1 else f"{tv_level(tv)} {client}"

    def subdir(self, tv: int, client: str) -> str:
        return f"tv{tv}" if self.clients == (REFERENCE,) else f"tv{tv}-{client}"


def not_applicable(name: str, client: str, protocol: str, exc: SpecError) -> str:
    """Why an experiment does not run on a client (or on a group protocol), from the spec's refusal."""
    workloads = [m for p, m in exc.problems if p == "workloads"]
    if protocol != "classic" and any("whose group could run" in m for m in workloads):
        return f"{name} runs no {' or '.join(GROUP_PROTOCOL_WORKLOADS[protocol])}, whose group the {protocol} " \
               "protocol is about"
    if any("to run on" in m for m in workloads):
        return (f"{name} runs no txn-producer or processor, the roles a client's workloads play: nothing of {client} "
                "to test")
    return "; ".join(dict.fromkeys(m for _, m in exc.problems))     # e.g. KafkaJS has no KIP-848


def own_broker_settings(experiment: str) -> tuple[tuple[str, str], ...]:
    """The broker settings a built-in asks its cluster for (sorted; none: it runs on the level's main cluster): a suite
    runs the experiments that ask for settings on one `own` cluster, so they must ask for the same. A SpecError names
    the experiment before anything starts."""
    local = load_spec(experiment, short=True).cluster.local
    if local is None or not local.broker_config or local.hanging_drill:
        return ()
    return tuple(sorted((k, str(v)) for k, v in local.broker_overrides().items()))


class DemoError(TxnlabError, ValueError):
    """Demo options that cannot run (checked before anything starts)."""


class Demo:
    def __init__(self, options: DemoOptions, progress: Progress = print):
        options.check()
        self.options, self.say = options, progress
        self.started = time.time()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.dir = Path(options.runs_dir).resolve() / f"{stamp}-demo"
        self.dir.mkdir(parents=True, exist_ok=False)
        self.suite = {"id": self.dir.name, "started": self.started, "ended": None, "seed": options.seed,
                      "kafka_version": kafka_version(), "experiments": list(options.experiments),
                      "transaction_versions": list(options.transaction_versions), "clients": list(options.clients),
                      "levels": [options.level(tv, c) for tv, c in options.levels()], "runs": [], "verify_exit": {},
                      "errors": [], "group_protocol": options.group_protocol}
        if options.clients != (REFERENCE,):
            self.suite["comparison"] = CLIENTS_COMPARISON
        self.clusters: dict[str, LocalCluster] = {}
        self.total = len(options.experiments) * len(options.levels())

    # ---- progress ---------------------------------------------------------------------------------------
    def _step(self, message: str) -> None:
        self.say(f"[demo {time.time() - self.started:5.0f}s] {message}")

    def _save(self) -> None:
        (self.dir / build.SUITE_FILE).write_text(json.dumps(self.suite, indent=2) + "\n")

    # ---- clusters ----------------------------------------------------------------------------------------
    def _cluster(self, which: str, tv: int, broker_config: dict[str, str] | None = None) -> LocalCluster:
        """The level's `which` cluster: main, drill (1 node, the drill's settings) or own (3 nodes, the
        broker_config of the experiments that ask for settings of their own: one set per suite, DemoOptions.check)."""
        key = f"tv{tv}-{which}"
        if key in self.clusters:
            return self.clusters[key]
        self._stop_other_levels(tv)
        drill = which == "drill"
        port = {"drill": self.options.drill_base_port, "own": self.options.own_base_port}.get(which)
        state = self.options.state_root / key
        # a kept cluster of an earlier demo, or the data of one cut short: always start afresh (a formatted
        # node keeps its transaction.version)
        LocalCluster.load(state).down(purge=True, progress=lambda m: None)
        cluster = LocalCluster.load(state, nodes=1 if drill else 3,
                                    base_port=port or self.options.base_port,
                                    broker_overrides=dict(DRILL_BROKER_CONFIG) if drill else broker_config or None,
                                    features={"transaction.version": str(tv)}, **local_stack())
        self._step(f"{which} cluster (transaction.version={tv}) coming up in {state}")
        self.clusters[key] = cluster
        try:
            cluster.up(progress=lambda m: self._step(f"  {which}: {m}"), timeout=240)
        except BaseException:
            self._down(key)        # never run on a cluster that did not come up: the next experiment tries again
            raise
        return cluster

    def _stop_other_levels(self, tv: int) -> None:
        """Another level's clusters use the same ports: they go first (a kept demo's too)."""
        for key in [k for k in self.clusters if not k.startswith(f"tv{tv}-")]:
            self._down(key)
        root = self.options.state_root
        for state in sorted(root.glob("tv*-*")) if root.exists() else []:
            if not state.name.startswith(f"tv{tv}-") and state.name not in self.clusters:
                leftover = LocalCluster.load(state)
                if leftover.supervisor.names():
                    leftover.down(purge=True, progress=lambda m: None)

    def _down(self, key: str) -> None:
        cluster = self.clusters.pop(key)
        self._step(f"tearing down {key}")
        cluster.down(purge=True, progress=lambda m: None)

    # ---- the suite ---------------------------------------------------------------------------------------
    def run(self) -> dict:
        self._save()
        self._step(f"suite {self.dir}: {', '.join(self.options.experiments)} under transaction.version "
                   f"{', '.join(map(str, self.options.transaction_versions))}")
        interrupted = None
        self.spark = shared_spark(self.options.state_root / "spark-connect", self.options.spark_base_port,
                                  self.options.master, self.options.verify, self._step)
        try:
            for tv in self.options.transaction_versions:
                for client in self.options.clients:
                    runs = [self._experiment(name, tv, client) for name in self.options.experiments]
                    if self.options.verify:
                        self._verify(tv, client, [r for r in runs if r is not None])
                last = tv == self.options.transaction_versions[-1]
                if not (self.options.keep and last):
                    for key in [k for k in self.clusters if k.startswith(f"tv{tv}-")]:
                        self._down(key)
        except KeyboardInterrupt as exc:
            interrupted = exc
            self.suite["errors"].append("interrupted (Ctrl-C): the report covers the runs that finished")
        finally:
            if not self.options.keep or interrupted:
                for key in list(self.clusters):
                    self._down(key)
            if self.spark is not None:
                self.spark.stop()
            self.suite["ended"] = time.time()
            self._save()
        self._step("building the report")
        report = build.write(self.dir)
        self._step(f"report: {self.dir / 'report.html'} (and report.json)")
        if interrupted:
            raise interrupted
        return report

    def _experiment(self, name: str, tv: int, client: str) -> Path | None:
        index = len(self.suite["runs"]) + 1
        what = f"transaction.version={tv}" + ("" if client == REFERENCE else f", client {client}")
        entry = {"experiment": name, "transaction_version": tv, "client": client,
                 "level": self.options.level(tv, client), "cluster": None, "run_dir": None, "error": None}
        self.suite["runs"].append(entry)
        protocol = self.options.group_protocol
        try:
            spec = load_spec(name, short=name not in self.options.full,
                             client=None if client == REFERENCE else client,
                             group_protocol=None if protocol == "classic" else protocol)
        except SpecError as exc:     # no workload of a client's, or a protocol it lacks: the cell says so, nothing runs
            entry["not_applicable"] = not_applicable(name, client, protocol, exc)
            self._step(f"experiment {index}/{self.total}: {name} ({what}): not applicable")
            self._save()
            return None
        local = spec.cluster.local
        which = "drill" if local is not None and local.hanging_drill else "own" if local and local.broker_config else "main"
        entry["cluster"] = which
        self._save()
        self._step(f"experiment {index}/{self.total}: {name} ({what}, {spec.duration_s:.0f} s)")
        run_dir = run_in_suite(spec, self.options.seed, self.dir, self.options.subdir(tv, client), entry,
                               lambda: LocalBackend(self._cluster(which, tv, local.broker_overrides() if local else None)),
                               self.suite["errors"],
                               f"{name} ({what})", self._step)
        self._save()
        return run_dir

    def _verify(self, tv: int, client: str, run_dirs: list[Path]) -> None:
        key, what = str(tv), f"transaction.version={tv}"
        if client != REFERENCE:
            key, what = f"{tv}-{client}", f"{what}, client {client}"
        verify_runs(self.suite, key, what, run_dirs, self.options.master, self._step, self.spark)
        self._save()


def run_in_suite(spec: ExperimentSpec, seed: int, suite_dir: Path, subdir: str, entry: dict,
                 backend: Callable[[], LocalBackend], errors: list[str], what: str, say: Progress) -> Path | None:
    """One experiment of a suite, on the backend `backend()` brings up, into suite_dir/subdir: the entry gets
    its run_dir (relative to suite_dir) and error, the timelines are captured while the cluster is up, a
    failure (the cluster's included) goes to `errors` as "what: error" and the suite goes on; Ctrl-C does not."""
    try:
        up = backend()
        experiment = Experiment(spec, seed, suite_dir / subdir, progress=lambda m: say(f"  {m}"), backend=up)
        try:
            result = experiment.run()
        finally:
            run_dir = experiment.result.run_dir
            if run_dir is not None:
                entry["run_dir"] = str(run_dir.relative_to(suite_dir))
                capture_timelines(up, run_dir, lambda m: say(f"  {m}"))
        entry["error"] = result.error
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one experiment's failure is reported; the suite goes on
        entry["error"] = f"{type(exc).__name__}: {exc}"
        errors.append(f"{what}: {entry['error']}")
        say(f"  {what} failed: {entry['error']}")
    return suite_dir / entry["run_dir"] if entry["run_dir"] else None


def shared_spark(state_dir: Path, base_port: int, master: str, verify: bool, say: Progress):
    """The session's Spark Connect server (spark_analysis/standalone.py SharedConnect), started now so it warms
    up while the experiments run; None when nothing is verified or a master was given (spark-submit on it)."""
    if not verify or master != "local[*]":
        return None
    from spark_analysis.standalone import SharedConnect
    return SharedConnect(state_dir, base_port, say).start()


def verify_runs(suite: dict, key: str, what: str, run_dirs: list[Path], master: str, say: Progress,
                spark=None) -> None:
    """`txnlab verify` over runs of one level in one Spark session (its clusters still up), through the shared
    Connect server `spark` when there is one; its exit code goes to suite["verify_exit"][key], a verification
    that could not run to suite["errors"]."""
    if not run_dirs:
        return
    from spark_analysis import submit
    remote = spark.remote() if spark is not None else ""
    say(f"verifying {len(run_dirs)} run(s) of {what} with Spark (one session{', ' + remote if remote else ''})")
    try:
        code = submit.run(run_dirs, None, remote=remote, master=master)
    except (submit.SetupError, submit.ConnectServerUnreachable) as exc:     # no verdict: unknown, said
        code = 2
        suite["errors"].append(f"verification of {what} did not run: {exc}")
    suite["verify_exit"][key] = code
    say(f"verification of {what} done (exit {code})")


def capture_timelines(backend: LocalBackend, run_dir: Path, say: Progress) -> None:
    """The run's Prometheus timelines and alerts into RUN/prometheus.json while its cluster is up (the
    report draws them later); a failure is said, and the report says the timelines are missing."""
    try:
        spec = json.loads((run_dir / "spec.json").read_text())
        end = max((op["wall"] for op in read_history(run_dir).ops), default=time.time())
        data = series.capture(backend.prometheus_url(), run_dir, spec["run_tag"], spec["started_wall"] - 5,
                              end + SETTLE_S, settle_s=SETTLE_S)
        if data["errors"]:
            say(f"timelines missing: {data['errors']}")
    except Exception as exc:  # noqa: BLE001 - the report says the timelines are missing
        say(f"could not capture the timelines: {exc}")


def exit_code(report: dict) -> int:
    """As `txnlab verify`: 0 every run valid, 1 anomalies found, 2 unknown or an error."""
    if report["valid"] is True and not report["errors"]:
        return 0
    return 1 if report["valid"] is False else 2
