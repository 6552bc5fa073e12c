"""Benchmark (the heal issue): a chaos run always heals what it broke, even when txnlab itself dies.

Trials of four kinds, --trials of each, interleaved round robin (a partial run still covers every kind),
each a random built-in experiment (one with a short mode) in short mode, cut at a random moment, uniform in
[0, STARTUP_ALLOWANCE_S + the short duration_s]:
  sigint, sigterm  the signal to the runner (`python -m txnlab.cli chaos run SPEC --short`, its own session,
                   started with SIGINT, SIGTERM and SIGHUP at their defaults, as from a terminal); the runner
                   heals and exits by itself;
  sigkill          kill -9 of the runner, then `txnlab chaos heal --cluster STATE_DIR` (what a user who lost
                   the run directory does);
  exception        the runner started through planted_main (`python -c`): a SIGALRM timer raises
                   RuntimeError("planted by bench/heal_trials.py") in its main thread at the moment, unless the
                   run's final heal already began (a frame of Experiment._heal_everything or Run.finish on the
                   stack): then nothing is raised and the trial says so (an exception inside the heal is
                   another fault).
A run that ended before its moment is recorded as such; every trial then runs every check, each polled
until it holds or its timeout (how long it took and what it saw last are kept): the runner exited; every
node running, registered and not paused, no toxic on any proxy (LocalCluster.unhealed); no process of the
run alive (RUN_DIR/pids, create times matched; the run dir the only one under the trial's runs dir); no
journal entry left (the cluster's and the run's faults/); no Ongoing/Prepare* transaction of the run's
transactional ids (ListTransactions on every broker) and LSO == HWM on every partition of the run's topics,
both within the run's largest transaction.timeout.ms plus QUIESCE_MARGIN_S. Healed = all hold; heal time =
the signal (or planted moment) to the last check holding. After the checks the bench removes the run's
topics, and after a failed trial it cleans up (stops what is left of the run, `chaos heal --cluster`, the
cluster's heal) so the next trial starts clean; none of that is counted as healing.
Clusters: its own 3-node local cluster with the usual stack (exporter, Prometheus: the probes need them),
.txnlab/bench-heal-cluster on --base-port (23000), started once and reused; an experiment with broker
settings of its own (the hanging-transaction drill) runs on a second one, .txnlab/bench-heal-cluster-drill
on --base-port + 2000 (clear of the test clusters' ports), started when first needed. Both are stopped
at the end by their pid records (cluster down, data kept) unless --keep-cluster.
Owns: nothing beyond this benchmark. Must not: touch other clusters, or stop processes it did not start.
Usage: .venv/bin/python bench/heal_trials.py [--trials 20] [--kinds sigint,sigterm,sigkill,exception]
       [--seed 1] [--base-port 23000] [--keep-cluster] [--out FILE] [--markdown FILE]
Progress goes to stderr, a line per trial; the results JSON to runs/heal-trials-<time>.json (or --out),
rewritten after every trial; each trial's spec, runner output and run directory under runs/heal-trials-<time>/.
A Ctrl-C (or SIGTERM) of the bench stops the current trial's runner (SIGTERM: it heals; then `chaos heal`)
and writes what it has.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import importlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from chaos.nemesis.journal import FAULTS_DIR, read_journal
from chaos.runner.spec import STARTUP_ALLOWANCE_S, builtin_specs, parse_spec
from cluster.access.admin import IN_PROGRESS_STATES, ClusterAdmin
from cluster.lab.local import LocalCluster
from cluster.lab.supervisor import Supervisor, live_process
from cluster.lab.versions import REPO_ROOT, txnlab_home, txnlab_source
from cluster.access.waiting import Deadline

KINDS = ("sigint", "sigterm", "sigkill", "exception")
SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}
PLANTED = "planted by bench/heal_trials.py"
HEAL_FRAMES = (("chaos/runner/experiment.py", "_heal_everything"), ("chaos/workloads/run.py", "finish"))
STATE_DIR = "bench-heal-cluster"
QUIESCE_MARGIN_S = 30.0          # past the largest transaction.timeout.ms: the coordinator's abort sweep
RUNNER_EXIT_S = 300.0            # after the moment: the runner's heal (180 s at most) and finish
HEAL_COMMAND_S = 300.0
CHECK_TIMEOUTS_S = {"brokers": 60.0, "toxics": 10.0, "processes": 20.0, "journal": 10.0}
STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:7.1f}s] {message}", file=sys.stderr, flush=True)


# ---- choosing trials (pure) ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
    n: int
    kind: str
    experiment: str
    moment_s: float
    seed: int


def choose_trials(kinds: list[str], per_kind: int, expected_s: dict[str, float], seed: int) -> list[Trial]:
    """per_kind trials of each kind, round robin over kinds, each a random experiment (expected_s: name ->
    expected run seconds) at a random moment in [0, its expected seconds]; the same seed, the same trials."""
    rng = random.Random(seed)
    names = sorted(expected_s)
    trials = []
    for _ in range(per_kind):
        for kind in kinds:
            name = rng.choice(names)
            trials.append(Trial(len(trials) + 1, kind, name, round(rng.uniform(0, expected_s[name]), 1),
                                rng.randrange(2**31)))
    return trials


def expected_run_s(spec: Any) -> float:
    """A short run's expected length: the set-up allowance and the method (probes after and quiescence
    may follow, but a moment past the method cuts nothing the others do not)."""
    return STARTUP_ALLOWANCE_S + spec.duration_s


def layout_key(local: dict) -> str:
    """Which bench cluster a spec's cluster.local needs: "" (the plain one), "drill" (hanging_drill alone),
    else "custom-<hash>" of its broker_config and features."""
    extra = {k: local.get(k) or {} for k in ("broker_config", "features")}
    if not any(extra.values()):
        return "drill" if local.get("hanging_drill") else ""
    extra["hanging_drill"] = bool(local.get("hanging_drill"))
    return "custom-" + hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8]


def cluster_places(keys: set[str], base_port: int) -> dict[str, tuple[str, int]]:
    """key -> (state dir name under .txnlab, base port): the plain cluster at base_port, the others 2000 apart."""
    ordered = sorted(keys, key=lambda k: (k != "", k))
    return {key: (STATE_DIR + (f"-{key}" if key else ""), base_port + 2000 * i) for i, key in enumerate(ordered)}


def spec_copy(data: dict, state_dir: Path, base_port: int, nodes: int) -> dict:
    """The spec document with cluster.local pointed at a bench cluster (its own broker settings kept)."""
    out = copy.deepcopy(data)
    local = dict((out.get("cluster") or {}).get("local") or {})
    out["cluster"] = {"local": {**local, "state_dir": str(state_dir), "base_port": base_port, "nodes": nodes}}
    return out


def run_tag_of(run_dir: Path) -> str:
    """A run directory is <time>-<name>-<run tag> (chaos/workloads/run.py new_run_dir)."""
    return Path(run_dir).name.rsplit("-", 1)[-1]


def heal_began(frame: Any) -> str | None:
    """The frame of the run's final heal (HEAL_FRAMES) on the stack from frame up, as file:function."""
    while frame is not None:
        code = frame.f_code
        for path, name in HEAL_FRAMES:
            if code.co_name == name and code.co_filename.replace(os.sep, "/").endswith(path):
                return f"{path}:{name}"
        frame = frame.f_back
    return None


# ---- summaries (pure) ----------------------------------------------------------------------------------
def summarise(trials: list[dict], kinds: list[str]) -> dict:
    """Per kind: n, healed, failed (trial, experiment, failed checks), ended before the moment, exceptions
    that landed after the heal began, median heal and mean trial seconds."""
    out = {}
    for kind in kinds:
        mine = [t for t in trials if t["kind"] == kind]
        heals = [t["heal_s"] for t in mine if t.get("heal_s") is not None]
        out[kind] = {"n": len(mine), "healed": sum(bool(t["healed"]) for t in mine),
                     "failed": [{"trial": t["n"], "experiment": t["experiment"], "failed": t["failed"]}
                                for t in mine if not t["healed"]],
                     "ended_before_moment": sum(t["event"] == "ended-before-moment" for t in mine),
                     "exception_after_heal_began": sum(t["event"] == "landed-after-heal-began" for t in mine),
                     "heal_s_median": round(statistics.median(heals), 1) if heals else None,
                     "trial_s_mean": round(statistics.mean(t["trial_s"] for t in mine), 1) if mine else None}
    return out


def summary_lines(summary: dict) -> list[str]:
    lines = []
    for kind, s in summary.items():
        lines.append(f"{kind:9} n={s['n']:3}  healed={s['healed']:3}  failed={len(s['failed'])}  ended before the "
                     f"moment={s['ended_before_moment']}  exception after the heal began="
                     f"{s['exception_after_heal_began']}  median heal {s['heal_s_median']} s  mean trial "
                     f"{s['trial_s_mean']} s")
        lines += [f"    trial {f['trial']} ({f['experiment']}): {', '.join(f['failed'])}" for f in s["failed"]]
    return lines


def outcome(trial: dict) -> str:
    return ("healed" if trial["healed"] else "NOT healed") + f" ({trial['event']})"


def markdown_table(trials: list[dict]) -> str:
    """Every trial as a row of a markdown table (docs/benchmarks.md)."""
    rows = ["| # | kind | experiment | moment s | outcome | failed checks | heal s |", "|---|---|---|---|---|---|---|"]
    for t in trials:
        heal = "-" if t.get("heal_s") is None else f"{t['heal_s']:.1f}"
        rows.append(f"| {t['n']} | {t['kind']} | {t['experiment']} | {t['moment_s']:.1f} | {outcome(t)} | "
                    f"{', '.join(t['failed']) or '-'} | {heal} |")
    return "\n".join(rows) + "\n"


# ---- the exception wrapper (runs inside the runner process) --------------------------------------------
def planted_main(at_s: float, record: str, argv: list[str]) -> int:
    """txnlab.cli main(argv) with a RuntimeError(PLANTED) raised in the main thread at_s seconds from now,
    unless the run's final heal began by then; what happened is written to record (JSON)."""
    started = time.time()

    def alarm(_signum: int, frame: Any) -> None:
        began = heal_began(frame)
        where = f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}"
        Path(record).write_text(json.dumps({"event": "landed-after-heal-began" if began else "planted",
                                            "heal_frame": began, "frame": where, "at": time.time(),
                                            "after_s": round(time.time() - started, 2)}))
        if not began:
            raise RuntimeError(PLANTED)

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, max(at_s, 0.001))
    from txnlab.cli import main
    return main(argv)


WRAPPER = ("import sys; sys.path.insert(0, {bench!r}); import heal_trials; "
           "sys.exit(heal_trials.planted_main(float(sys.argv[1]), sys.argv[2], sys.argv[3:]))")


def runner_argv(kind: str, spec: Path, runs_dir: Path, seed: int, moment_s: float, record: Path) -> list[str]:
    cli = ["chaos", "run", str(spec), "--short", "--runs-dir", str(runs_dir), "--seed", str(seed)]
    if kind == "exception":
        return [sys.executable, "-c", WRAPPER.format(bench=str(Path(__file__).resolve().parent)),
                str(moment_s), str(record), *cli]
    return [sys.executable, "-m", "txnlab.cli", *cli]


def at_a_terminal() -> None:
    """The runner as a user's terminal starts it: SIGINT (and SIGTERM, SIGHUP) at their defaults, even when
    the bench runs as a background job (which inherits SIGINT ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


# ---- clusters --------------------------------------------------------------------------------------------
class Clusters:
    """The bench clusters by layout key, each started (up) when first needed and kept for later trials."""

    def __init__(self, places: dict[str, tuple[str, int]]):
        self.places, self.up_ones = places, {}

    def get(self, key: str, local: Any) -> LocalCluster:
        if key not in self.up_ones:
            from report.stack import local_stack
            name, port = self.places[key]
            cluster = LocalCluster.load(txnlab_home() / name, base_port=port, nodes=3,
                                        broker_overrides=local.broker_overrides(),
                                        features=local.feature_overrides(), **local_stack())
            say(f"bench cluster {cluster.layout.state_dir} (base port {port}): up")
            cluster.up(progress=lambda m: say(f"  {m}"), timeout=240)
            if read_journal(cluster.layout.state_dir / FAULTS_DIR).entries:
                say(f"  an earlier run left journal entries: {heal_command(cluster)['lines']}")
            self.up_ones[key] = cluster
        return self.up_ones[key]

    def down(self) -> None:
        for cluster in self.up_ones.values():
            cluster.down(progress=say)


def heal_command(cluster: LocalCluster) -> dict:
    """`txnlab chaos heal --cluster STATE_DIR`: its exit code, stdout lines and seconds."""
    started = time.monotonic()
    argv = [sys.executable, "-m", "txnlab.cli", "chaos", "heal", "--cluster", str(cluster.layout.state_dir)]
    try:
        proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=HEAL_COMMAND_S)
        rc, lines = proc.returncode, proc.stdout.strip().splitlines()
    except subprocess.TimeoutExpired:
        rc, lines = None, [f"timed out after {HEAL_COMMAND_S:.0f}s"]
    return {"rc": rc, "lines": lines, "seconds": round(time.monotonic() - started, 1)}


# ---- one trial: the runner --------------------------------------------------------------------------------
def start_runner(argv: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=at_a_terminal)


def exited_within(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=max(seconds, 0.0))
        return True
    except subprocess.TimeoutExpired:
        return False


def drive(trial: Trial, proc: subprocess.Popen, started_wall: float, record: Path,
          cluster: LocalCluster) -> dict:
    """Cut the run as the trial's kind says; the event, when it was cut (wall), the heal command's result."""
    out: dict = {"event": "signalled", "cut_at": None, "heal_command": None}
    if trial.kind == "exception":
        exited = exited_within(proc, trial.moment_s + RUNNER_EXIT_S)
        planted = json.loads(record.read_text()) if record.exists() else None
        out.update(event=planted["event"] if planted else "ended-before-moment",
                   cut_at=planted["at"] if planted else None, planted=planted)
    elif exited_within(proc, started_wall + trial.moment_s - time.time()):
        out["event"], exited = "ended-before-moment", True
    else:
        proc.send_signal(SIGNALS[trial.kind])
        out["cut_at"] = time.time()
        exited = exited_within(proc, RUNNER_EXIT_S)
    if not exited:
        out["event"] = "runner-did-not-exit"
        proc.kill()
        proc.wait()
    if trial.kind == "sigkill" and out["event"] == "signalled" or out["event"] == "runner-did-not-exit":
        out["heal_command"] = heal_command(cluster)
    return out


def stop_runner(proc: subprocess.Popen, cluster: LocalCluster) -> dict:
    """The bench is interrupted: SIGTERM to the runner (it heals), SIGKILL if it does not exit, then
    `chaos heal --cluster`. Signals to the bench are ignored meanwhile."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if proc.poll() is None:
        proc.terminate()
        if not exited_within(proc, RUNNER_EXIT_S):
            proc.kill()
            proc.wait()
    return heal_command(cluster)


def run_facts(runs_dir: Path) -> dict | None:
    """How far the run got, from its experiment.json (written by the runner's final heal; none after a
    kill -9 or when the run did not start): faults started, its error, LSO == HWM at its quiescence."""
    dirs = run_dirs(runs_dir)
    path = dirs[0] / "experiment.json" if len(dirs) == 1 else None
    if path is None or not path.is_file():
        return {"run_dir": str(dirs[0]) if dirs else None, "experiment_json": False}
    data = json.loads(path.read_text())
    return {"run_dir": str(dirs[0]), "experiment_json": True, "faults_started": len(data.get("faults") or []),
            "error": data.get("error"), "quiesced": (data.get("quiescence") or {}).get("lso_equals_hwm")}


# ---- one trial: the checks ---------------------------------------------------------------------------------
def poll_check(name: str, probe: Callable[[], tuple[bool, object]], timeout: float) -> dict:
    """Ask probe until it holds or timeout; an exception is "not yet" (its text the observation)."""
    started, deadline = time.monotonic(), Deadline(timeout)
    while True:
        try:
            ok, observed = probe()
        except Exception as exc:  # noqa: BLE001 - a broker still coming back: asked again
            ok, observed = False, f"{type(exc).__name__}: {exc}"
        if ok or deadline.expired:
            return {"name": name, "ok": bool(ok), "observed": observed, "timeout_s": timeout,
                    "seconds": round(time.monotonic() - started, 2), "at": time.time()}
        deadline.sleep(1.0)


def run_dirs(runs_dir: Path) -> list[Path]:
    return sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []


def live_run_processes(runs_dir: Path) -> tuple[bool, object]:
    """No process recorded in the run's pids/ alive, and the run dir the only dir under runs_dir."""
    dirs = run_dirs(runs_dir)
    supervisor = Supervisor(dirs[0] / "pids") if dirs else None
    records = [supervisor.record(name) for name in supervisor.names()] if supervisor else []
    alive = [f"{r.name} (pid {r.pid})" for r in records if r and live_process(r.pid, r.create_time, r.start_ticks)]
    if len(dirs) > 1:
        return False, {"alive": alive, "run_dirs": [d.name for d in dirs]}
    return not alive, alive or f"none alive of {len(records)} recorded"


def journal_left(cluster: LocalCluster, run_dir: Path | None) -> tuple[bool, object]:
    dirs = [cluster.layout.state_dir / FAULTS_DIR] + ([run_dir / FAULTS_DIR] if run_dir else [])
    left = {}
    for directory in dirs:
        found = read_journal(directory)
        if found.entries or found.problems:
            left[str(directory)] = [e["id"] for e in found.entries] + found.problems
    return not left, left or f"no entry in {', '.join(str(d) for d in dirs)}"


def open_run_transactions(cluster: LocalCluster, tag: str) -> tuple[bool, object]:
    """ListTransactions on every registered broker: the run's transactional ids (<tag>.*) still in progress."""
    with ClusterAdmin(cluster.connection()) as admin:
        listed = admin.client.list_transactions(broker_ids=admin.registered_brokers())
    states = {str(getattr(t.state, "value", t.state)) for ts in listed.values() for t in ts}
    open_ = sorted(f"{t.transactional_id} {getattr(t.state, 'value', t.state)} (broker {b})"
                   for b, ts in listed.items() for t in ts if t.transactional_id.startswith(f"{tag}.")
                   and str(getattr(t.state, "value", t.state)) in IN_PROGRESS_STATES)
    return not open_, open_ or f"none open (states seen: {', '.join(sorted(states)) or '-'})"


def run_topics(cluster: LocalCluster, run_dir: Path, tag: str) -> list[str]:
    """The run's topics: spec.json's, and every topic named <tag>-* (spec.json is written only at the end)."""
    from confluent_kafka.admin import AdminClient
    spec = run_dir / "spec.json"
    listed = json.loads(spec.read_text()).get("topics", []) if spec.is_file() else []
    names = AdminClient(cluster.connection().confluent()).list_topics(timeout=30).topics
    return sorted(set(listed) | {t for t in names if t.startswith(f"{tag}-")})


def lso_behind(cluster: LocalCluster, topics: list[str]) -> tuple[bool, object]:
    from chaos.runner.probes import open_partitions
    stuck = open_partitions(cluster.connection(), topics)
    return not stuck, stuck or f"LSO == HWM on {len(topics)} topics"


def largest_txn_timeout_s(spec: Any) -> float:
    """The largest transaction.timeout.ms of the spec's processes (their options parsed as
    `python -m chaos.workloads` parses them, defaults included), in seconds."""
    from chaos.workloads import WORKLOADS
    from chaos.workloads.base import add_common_arguments
    largest = 0
    for process in spec.processes():
        parser = argparse.ArgumentParser(add_help=False)
        add_common_arguments(parser)
        importlib.import_module(WORKLOADS[process.workload]).add_arguments(parser)
        parsed = parser.parse_args(["--socket", "s", "--run-start-ns", "0", "--run-tag", "t",
                                    "--process", process.process, *process.args])
        largest = max(largest, getattr(parsed, "transaction_timeout_ms", 0) or 0)
    return largest / 1000.0


def given(name: str, ok: bool, observed: object) -> dict:
    """A check decided without polling."""
    return {"name": name, "ok": ok, "observed": observed, "timeout_s": 0, "seconds": 0.0, "at": time.time()}


def nodes_left(cluster: LocalCluster) -> tuple[bool, object]:
    left = {k: v for k, v in cluster.unhealed().items() if k != "toxics"}
    return not left, left or "every node running, registered and not paused"


def toxics_left(cluster: LocalCluster) -> tuple[bool, object]:
    toxics = cluster.toxiproxy.toxics()
    return not toxics, toxics or "no toxic on any proxy"


def checks(cluster: LocalCluster, runs_dir: Path, spec: Any, runner_rc: int | None) -> list[dict]:
    """Every check of a trial, one after the other, each polled until it holds or its timeout."""
    dirs = run_dirs(runs_dir)
    run_dir = dirs[0] if len(dirs) == 1 else None
    out = [given("runner", runner_rc is not None, f"exit code {runner_rc}"),
           poll_check("brokers", lambda: nodes_left(cluster), CHECK_TIMEOUTS_S["brokers"]),
           poll_check("toxics", lambda: toxics_left(cluster), CHECK_TIMEOUTS_S["toxics"]),
           poll_check("processes", lambda: live_run_processes(runs_dir), CHECK_TIMEOUTS_S["processes"]),
           poll_check("journal", lambda: journal_left(cluster, run_dir), CHECK_TIMEOUTS_S["journal"])]
    if run_dir is None:
        return out + [given("transactions", True, f"no run directory ({len(dirs)} under {runs_dir}): no run tag, "
                                                  "nothing the run opened")]
    tag, quiesce = run_tag_of(run_dir), largest_txn_timeout_s(spec) + QUIESCE_MARGIN_S
    out.append(poll_check("transactions", lambda: open_run_transactions(cluster, tag), quiesce))
    out.append(poll_check("topics", lambda: (True, run_topics(cluster, run_dir, tag)), 30))
    topics = out[-1]["observed"] if out[-1]["ok"] else []
    out.append(poll_check("lso", lambda: lso_behind(cluster, topics), quiesce))
    return out


def drop_topics(cluster: LocalCluster, topics: list[str]) -> str:
    """The run's topics deleted (restarts stay quick on a cluster that runs many trials)."""
    from confluent_kafka.admin import AdminClient
    if not topics:
        return "no topics"
    admin = AdminClient(cluster.connection().confluent())      # kept alive until the futures resolve
    try:
        for future in admin.delete_topics(topics, operation_timeout=60).values():
            future.result(60)
        return f"deleted {len(topics)} topics"
    except Exception as exc:  # noqa: BLE001 - recorded; the next trial does not depend on it
        return f"deleting topics failed: {type(exc).__name__}: {exc}"


def clean_up(cluster: LocalCluster, runs_dir: Path) -> dict:
    """After a failed trial, what the next one needs: the run's processes stopped (pid records), the
    journal healed (`chaos heal --cluster`), the cluster healed. Not counted as healing."""
    done: dict = {}
    for run_dir in run_dirs(runs_dir):
        supervisor = Supervisor(run_dir / "pids")
        alive = [name for name in supervisor.names() if supervisor.is_running(name)]
        for name in alive:
            supervisor.stop(name, timeout=10)
        done["stopped"] = done.get("stopped", []) + alive
    if read_journal(cluster.layout.state_dir / FAULTS_DIR).entries:
        done["heal_command"] = heal_command(cluster)
    if left := cluster.unhealed():
        done["cluster_heal"] = left
        try:
            cluster.heal(timeout=180)
        except Exception as exc:  # noqa: BLE001 - recorded; the next trial's runner refuses or fails visibly
            done["cluster_heal_error"] = f"{type(exc).__name__}: {exc}"
    return done


# ---- one trial ------------------------------------------------------------------------------------------------
def prepare(trial: Trial, clusters: Clusters, out_dir: Path) -> tuple[LocalCluster, Any, Path]:
    """The trial's directory and spec copy (pointed at the bench cluster its layout needs, up)."""
    data = yaml.safe_load(builtin_specs()[trial.experiment].read_text())
    local = (data.get("cluster") or {}).get("local") or {}
    key = layout_key(local)
    cluster = clusters.get(key, parse_spec(data, trial.experiment, short=True).cluster.local)
    trial_dir = out_dir / f"{trial.n:03d}-{trial.kind}-{trial.experiment}"
    trial_dir.mkdir(parents=True, exist_ok=True)
    copied = spec_copy(data, cluster.layout.state_dir, cluster.layout.base_port, len(cluster.layout.node_ids))
    (trial_dir / "spec.yaml").write_text(yaml.safe_dump(copied, sort_keys=False))
    return cluster, parse_spec(copied, str(trial_dir / "spec.yaml"), short=True), trial_dir


def run_trial(trial: Trial, clusters: Clusters, out_dir: Path) -> dict:
    """One trial, start to cleanup: its record (see the module docstring)."""
    cluster, spec, trial_dir = prepare(trial, clusters, out_dir)     # a cluster's start-up is not the trial's
    started = time.monotonic()
    runs_dir, record = trial_dir / "runs", trial_dir / "planted.json"
    started_wall = time.time()
    proc = start_runner(runner_argv(trial.kind, trial_dir / "spec.yaml", runs_dir, trial.seed, trial.moment_s, record),
                        trial_dir / "runner.log")
    try:
        cut = drive(trial, proc, started_wall, record, cluster)
    except BaseException:
        say(f"trial {trial.n} interrupted: stopping its runner (pid {proc.pid}) and healing")
        say(f"  chaos heal: {stop_runner(proc, cluster)['lines']}")
        raise
    result = {**asdict(trial), "source": txnlab_source("chaos", "cluster", "txnlab"),
              "cluster": str(cluster.layout.state_dir), "trial_dir": str(trial_dir),
              "runner_rc": proc.returncode, "runner_s": round(time.time() - started_wall, 1), **cut}
    if trial.kind == "exception":            # the traceback's last line when it ended the runner
        tail = (trial_dir / "runner.log").read_text(errors="replace").splitlines()[-5:]
        result["planted_ended_runner"] = f"RuntimeError: {PLANTED}" in tail
    result["run"] = run_facts(runs_dir)
    result["checks"] = checks(cluster, runs_dir, spec, proc.returncode)
    result["failed"] = [c["name"] for c in result["checks"] if not c["ok"]]
    result["healed"] = not result["failed"]
    cut_at = cut["cut_at"]
    last_held = max(c["at"] for c in result["checks"])
    result["heal_s"] = round(last_held - cut_at, 1) if cut_at and result["healed"] else None
    topics = next((c["observed"] for c in result["checks"] if c["name"] == "topics"), [])
    result["topics_dropped"] = drop_topics(cluster, topics if isinstance(topics, list) else [])
    if not result["healed"]:
        result["cleanup"] = clean_up(cluster, runs_dir)
    result["trial_s"] = round(time.monotonic() - started, 1)
    return result


# ---- the whole bench ----------------------------------------------------------------------------------------
def short_experiments() -> dict[str, Any]:
    """The built-in experiments that have a short mode: name -> their short spec."""
    out = {}
    for name, path in builtin_specs().items():
        data = yaml.safe_load(path.read_text())
        if data.get("short"):
            out[name] = parse_spec(data, str(path), short=True)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=20, help="trials per kind")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    p.add_argument("--seed", type=int, default=1, help="chooses experiments, moments and the runs' seeds")
    p.add_argument("--base-port", type=int, default=23000)
    p.add_argument("--keep-cluster", action="store_true", help="leave the bench clusters running at the end")
    p.add_argument("--out", type=Path, help="the results JSON (default runs/heal-trials-<time>.json)")
    p.add_argument("--markdown", type=Path, help="also write every trial as a markdown table here")
    args = p.parse_args(argv)
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not args.kinds or set(args.kinds) - set(KINDS):
        p.error(f"--kinds must be among {', '.join(KINDS)}, got {args.kinds}")
    return args


def write_results(result: dict, path: Path, kinds: list[str]) -> None:
    result["summary"] = summarise(result["trials"], kinds)
    result["elapsed_seconds"] = round(time.monotonic() - STARTED, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(temp, path)


def exit_on_signals() -> None:
    """SIGTERM and SIGHUP end the bench like Ctrl-C does (the current runner stopped and healed)."""
    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def bench(args: argparse.Namespace, result: dict, path: Path, out_dir: Path) -> None:
    experiments = short_experiments()
    trials = choose_trials(args.kinds, args.trials, {n: expected_run_s(s) for n, s in experiments.items()}, args.seed)
    keys = {layout_key(yaml.safe_load(builtin_specs()[t.experiment].read_text())["cluster"].get("local") or {})
            for t in trials}
    clusters = Clusters(cluster_places(keys, args.base_port))
    result["setup"].update(clusters={k or "plain": list(v) for k, v in clusters.places.items()},
                           planned=[asdict(t) for t in trials])
    try:
        for trial in trials:
            record = run_trial(trial, clusters, out_dir)
            result["trials"].append(record)
            write_results(result, path, args.kinds)
            failed = "" if record["healed"] else f" failed: {', '.join(record['failed'])}"
            say(f"trial {trial.n}/{len(trials)} {trial.kind:9} {trial.experiment:28} at {trial.moment_s:5.1f}s: "
                f"{outcome(record)}{failed} ({record['trial_s']:.0f}s)")
    finally:
        if not args.keep_cluster:
            clusters.down()
        else:
            say(f"kept running: {', '.join(str(c.layout.state_dir) for c in clusters.up_ones.values())}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    exit_on_signals()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = args.out or REPO_ROOT / "runs" / f"heal-trials-{stamp}.json"
    out_dir = REPO_ROOT / "runs" / f"heal-trials-{stamp}"
    result = {"command": ".venv/bin/python bench/heal_trials.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "machine": {"cpus": os.cpu_count()},
              "setup": {"seed": args.seed, "kinds": args.kinds, "trials_per_kind": args.trials,
                        "trial_dirs": str(out_dir)}, "trials": []}
    try:
        bench(args, result, path, out_dir)
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        write_results(result, path, args.kinds)
        print("\n".join(summary_lines(result["summary"])))
        if args.markdown:
            args.markdown.write_text(markdown_table(result["trials"]))
        say(f"results in {path}")


if __name__ == "__main__":
    main()
