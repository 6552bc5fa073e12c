"""Recovery and liveness of a run: after each fault, how long until exactly-once processing moves again.

Owns: a pure reading of a run's history (no cluster, no files but the history):
  - a commit is a workload's `ok` transaction: `txn` (txp-*, feeder), `process` (eos-*), or a `copy` event
    that copied records (java-copier-*: one per committed transaction);
  - a process has ended when it said so: a `fenced` failure (--on-fenced exit), a copier's
    `ShutdownComplete`, or its `<name>/jvm` completing; or when a fault's heal stopped it (the heal's ok value
    names it in `stopped`: a zombie's successor stopped so that its transactional id expires);
  - the run's group offsets are the `group_offsets` observations (process "observer-groups", ok,
    {group: {topic: {partition: offset}}}, sampled every ~2 s by chaos/workloads/run.py; a sample that failed is an
    ok `group_offsets_error` {error}), so a group "advances" at the first sample in which any partition's
    committed offset is above the last sample at or before the reference time (resolution: the sampling
    interval; with no successful sample at or before it, the first one after it is the base);
  - a zombie-producer fault's fenced process (its start's `process`) that commits after the heal came back as a
    live producer: the fault's `zombie_returned` (liveness cannot call that recovered or not: it is named);
  - for every fault (a nemesis-<n> process: `fault` invoke = its start, `heal` ok or fail = its heal), per
    workload process that existed by the heal and had not ended before the start, the seconds from the
    start and from the heal to its next commit, and per group the seconds from the start and from the
    heal until its offsets advance; per fault the slowest of them (the time until every one moved again).
The horizon is the start of quiescence (the `quiescence` operation of process "nemesis"; else the last
operation): quiescence stops the workloads and heals everything, so what commits then is no recovery.
Stalls and restarts: a workload whose client call stalled recorded an `ok` `stall` observation (the call,
its bound, the client library and version, the stack) and exited; the runner recorded an `ok` `restart`
of it when it started it again (chaos/workloads/run.py). A stall belongs to the last fault that started at or before its
call began, or to the first fault when the call was already running as it started (per fault: `stalls`, each with the time of the process's next restart, null when none came before the
horizon); a process whose first commit after the heal came after such a restart recovered "after a restart"
(its entry's `restarted_s`; the fault's `restarted` names them). A stalled process never restarted and never
committing again is not recovered, and why names the stalled call.
A fault is recovered (True) when every process commits again after its heal (or ended: a fenced zombie, a
copier done with its input) and every group advances (or all its members ended) before the horizon; False
when one did not though the run went on for UNOBSERVED_S or more after the heal and the history shows it
(the process recorded operations after the heal; the group's offsets were sampled after the heal, until
SAMPLE_GAP_S before the horizon, and after its members' first commit after the heal), or the fault was never
healed; "unknown", with why, when the heal came so late (within UNOBSERVED_S of the horizon) that nothing could be seen after it, or the evidence
after the heal is missing (a process silent after it, group samples that failed or stopped): silence is
never evidence. A heal that failed still counts as the heal's time (the workloads may route around a
broker that stayed down). A run is recovered when all its faults are (so a run without faults is), not
when one is not, else "unknown". Safety is spark_analysis's verdict; this is liveness only.
Must not: read the cluster, or judge safety.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from pathlib import Path

from chaos.record.history import read_history

GROUP_OBSERVER = "observer-groups"
GROUP_F = "group_offsets"
GROUP_ERROR_F = "group_offsets_error"   # a sample that failed: a gap, never "no advance"
STALL_F = "stall"          # a client call stalled (the workloads' watchdog: chaos/workloads/base.py)
RESTART_F = "restart"      # the runner started a stalled process again (chaos/workloads/run.py)
COMMIT_F = ("txn", "process", "copy")
INIT_F = "init"           # a transactional workload made a producer (initTransactions), chaos/workloads/
ZOMBIE_FAULT = "zombie-producer"   # its start names the process it fenced (chaos/nemesis/faults.py)
NS = 1e9
UNOBSERVED_S = 1.0         # a heal this close to the horizon leaves nothing to see after it
SAMPLE_GAP_S = 6.0         # group offsets last sampled longer before the horizon: the rest is not seen


DELIBERATE_ABORT = "deliberate abort"    # the error every client's workload records for a transaction it aborted on
#                                         purpose and whose abort completed (with "after" when the abort itself failed)


def is_commit(op: dict) -> bool:
    if op["type"] != "ok" or op["f"] not in COMMIT_F:
        return False
    value = op.get("value") or {}
    return op["f"] != "copy" or (isinstance(value, dict) and (value.get("copied") or 0) > 0)


def is_deliberate_abort(op: dict) -> bool:
    """A transaction its producer aborted on purpose, the abort completed: the producer did what it meant to."""
    value = op.get("value")
    return (op["type"] == "fail" and op["f"] in COMMIT_F and isinstance(value, dict)
            and value.get("error") == DELIBERATE_ABORT and "after" not in value)


def ends_as_meant(op: dict) -> bool:
    """A commit, or a deliberate abort that completed: what shows a producer at work (one that aborts every
    transaction on purpose, an experiment's choice, shows it by its aborts)."""
    return is_commit(op) or is_deliberate_abort(op)


def ended_at(ops: list[dict]) -> dict[str, int]:
    """process -> the time it said it stopped (first such operation)."""
    ended: dict[str, int] = {}
    for op in ops:
        value: dict = op["value"] if isinstance(op.get("value"), dict) else {}
        process = op["process"]
        if op["f"] == "heal" and op["type"] == "ok" and process.startswith("nemesis-"):
            for stopped in value.get("stopped") or ():
                ended.setdefault(stopped, op["time"])
            continue
        if process.endswith("/jvm") and op["f"] == "jvm" and op["type"] != "invoke":
            process = process[:-len("/jvm")]
        elif not ((op["type"] in ("fail", "info") and value.get("fenced"))
                  or (op["f"] == "copy" and value.get("event") == "ShutdownComplete")):
            continue
        ended.setdefault(process, op["time"])
    return ended


def faults_of(ops: list[dict]) -> list[dict]:
    """Each nemesis-<n>'s fault: kind, start (invoke), whether it started, heal (completion) and heal_ok."""
    found: dict[str, dict] = {}
    for op in ops:
        process = op["process"]
        if not process.startswith("nemesis-"):
            continue
        value = op.get("value") or {}
        if op["f"] == "fault" and op["type"] == "invoke":
            found[process] = {"process": process, "kind": value.get("kind", "fault"), "start": op["time"],
                              "started": None, "heal": None, "heal_ok": None, "victim": None}
        elif process in found and op["f"] == "fault" and op["type"] != "invoke":
            found[process]["started"] = op["type"] == "ok"
            found[process]["victim"] = value.get("process") if value.get("kind") == ZOMBIE_FAULT else None
        elif process in found and op["f"] == "heal" and op["type"] in ("ok", "fail"):
            found[process].update(heal=op["time"], heal_ok=op["type"] == "ok")
    return sorted(found.values(), key=lambda f: f["start"])


def horizon_of(ops: list[dict]) -> int:
    marks = [op["time"] for op in ops if op["process"] == "nemesis" and op["f"] == "quiescence"]
    return min(marks) if marks else max((op["time"] for op in ops), default=0)


def group_members(group: str, commits: dict[str, list[dict]]) -> set[str]:
    """Processes of a group: those whose commits name it (processor), else by name (<tag>.java-copier ->
    java-copier-*)."""
    named = {p for p, ops in commits.items() if any((op.get("value") or {}).get("group") == group for op in ops)}
    if named:
        return named
    short = group.split(".", 1)[-1]
    return {p for p in commits if p == short or p.startswith(short + "-")}


def _seconds(later: int | None, earlier: int | None) -> float | None:
    return None if later is None or earlier is None else round((later - earlier) / NS, 1)


def _first_commit(times: list[int], after: int | None, horizon: int) -> int | None:
    if after is None:
        return None
    i = bisect_left(times, after)
    return times[i] if i < len(times) and times[i] <= horizon else None


def _last_commit(times: list[int], horizon: int) -> int | None:
    i = bisect_left(times, horizon + 1)
    return times[i - 1] if i else None


def _first_advance(samples: list[tuple[int, dict]], group: str, after: int | None, horizon: int) -> int | None:
    if after is None:
        return None
    base: dict | None = None                     # None: no successful sample at or before `after`
    for t, offsets in samples:
        if t > horizon:
            break
        mine = offsets.get(group) or {}
        flat = {(topic, p): o for topic, parts in mine.items() for p, o in parts.items()}
        if t <= after:
            base = flat or base or {}
        elif base is None:
            base = flat or None                  # the first sample after it is the base
        elif any(o > base.get(key, -1) for key, o in flat.items()):
            return t
    return None


def _group_gap(group: str, samples: list[tuple[int, dict]], failed: list[int], heal: int, horizon: int,
               moved: int | None) -> str | None:
    """Why the samples cannot show that the group's offsets stayed put from the heal to the horizon (`moved`: its
    members' first commit after the heal, None when none committed: no sample before it can show its offsets)."""
    seen = [t for t, offsets in samples if heal < t <= horizon and offsets.get(group)]
    errors = sum(1 for t in failed if heal < t <= horizon)
    failures = f" ({errors} sample(s) failed)" if errors else ""
    if not seen:
        return "no sample of its offsets after the heal" + failures
    if horizon - seen[-1] > SAMPLE_GAP_S * NS:
        return f"its offsets were last sampled {_seconds(horizon, seen[-1])} s before quiescence" + failures
    if moved is not None and seen[-1] < moved:
        return (f"its members first committed again {_seconds(moved, heal)} s after the heal, after its last sample "
                f"before quiescence ({_seconds(horizon, seen[-1])} s before it)") + failures
    return None


def _process_entry(times: list[int], start: int, heal: int | None, horizon: int, ended: bool, last_op: int,
                   late: bool) -> dict:
    after_heal = _first_commit(times, heal, horizon)
    entry = {"seconds_to_commit_after_start": _seconds(_first_commit(times, start, horizon), start),
             "seconds_to_commit_after_heal": _seconds(after_heal, heal), "status": _status(after_heal, ended, late)}
    if entry["status"] == "not recovered" and heal is not None and last_op <= heal:
        entry.update(status="unknown", why="it recorded nothing after the heal")
    return entry


def _group_entry(group: str, samples: list[tuple[int, dict]], failed: list[int], start: int, heal: int | None,
                 horizon: int, gone: bool, late: bool, moved: int | None) -> dict:
    advanced = _first_advance(samples, group, heal, horizon)
    entry = {"seconds_to_advance_after_start": _seconds(_first_advance(samples, group, start, horizon), start),
             "seconds_to_advance_after_heal": _seconds(advanced, heal), "status": _status(advanced, gone, late)}
    if entry["status"] == "not recovered" and heal is not None:
        if gap := _group_gap(group, samples, failed, heal, horizon, moved):
            entry.update(status="unknown", why=gap)
    return entry


def stalls_of(ops: list[dict]) -> list[dict]:
    """Every stall, in time order: {process, time, value (the stall's description)}."""
    return [{"process": op["process"], "time": op["time"], "value": op.get("value") or {}} for op in ops
            if op["f"] == STALL_F and op["type"] == "ok"]


def call_began(stall: dict) -> int:
    """When the stalled call began (the stall's time less the seconds it had run)."""
    return stall["time"] - int((stall["value"].get("seconds") or 0) * NS)


def fault_of_stall(stall: dict, starts: list[int]) -> int | None:
    """The index of the fault a stall belongs to: the last one that started at or before its call began; for a
    call that began before any fault, the first fault if it started while the call ran (the kill landed on a
    call in flight); None for a stall no fault explains."""
    began = call_began(stall)
    before = [n for n, start in enumerate(starts) if start <= began]
    if before:
        return before[-1]
    return 0 if starts and starts[0] <= stall["time"] else None


def restarts_of(ops: list[dict], kind: str = "ok") -> dict[str, list[int]]:
    """process -> the times the runner restarted it (sorted); kind "fail": the times a restart failed."""
    found: dict[str, list[int]] = defaultdict(list)
    for op in ops:
        if op["f"] == RESTART_F and op["type"] == kind:
            found[op["process"]].append(op["time"])
    return found


def _restart_errors(ops: list[dict]) -> dict[tuple[str, int], str]:
    return {(op["process"], op["time"]): str(op["value"].get("error")) for op in ops
            if op["f"] == RESTART_F and op["type"] == "fail"}


def _stall_entry(stall: dict, ops: list[dict], horizon: int) -> dict:
    """The stall with the time of its process's next restart (`restarted_s`), else why its restart failed."""
    v, process = stall["value"], stall["process"]
    restarted = _first_commit(restarts_of(ops).get(process, []), stall["time"], horizon)
    failed = _first_commit(restarts_of(ops, "fail").get(process, []), stall["time"], horizon) \
        if restarted is None else None
    return {"process": stall["process"], "call": v.get("call"), "at_s": _seconds(stall["time"], 0),
            "seconds": v.get("seconds"), "timeout_s": v.get("timeout_s"), "client": v.get("client"),
            "client_version": v.get("client_version"), "library": v.get("library"),
            "library_version": v.get("library_version"), "restarted_s": _seconds(restarted, 0),
            "restart_error": _restart_errors(ops).get((process, failed)) if failed is not None else None}


def stall_text(stall: dict) -> str:
    """'eos-1: send_offsets_to_transaction stalled (librdkafka 2.16.0)'."""
    library = " ".join(str(x) for x in (stall.get("library"), stall.get("library_version")) if x)
    return f"{stall['process']}: {stall['call']} stalled" + (f" ({library})" if library else "")


def restart_text(stall: dict) -> str:
    """'restarted at 33.0 s', 'its restart failed: <error>' or 'never restarted'."""
    if stall.get("restarted_s") is not None:
        return f"restarted at {stall['restarted_s']} s"
    return f"its restart failed: {stall['restart_error']}" if stall.get("restart_error") else "never restarted"


def _verdict(fault: dict) -> dict:
    """The fault's recovered (True/False/"unknown"), why, and the slowest commit and advance after start and heal."""
    named = [(p, e, "never committed") for p, e in fault["processes"].items()] + \
            [(f"group {g}", e, "offsets never advanced") for g, e in fault["groups"].items()]
    statuses = {e["status"] for _, e, _ in named}
    why = ["never healed"] if fault["heal_s"] is None else []
    stalled = {st["process"]: st for st in fault.get("stalls", [])}
    for name, e, never in named:
        if e["status"] == "not recovered":
            st = stalled.get(name)
            why.append(f"{name}: {never} after the heal" + (
                f" ({stall_text(st).split(': ', 1)[1]}, {restart_text(st)})"
                if st else ""))
        elif e["status"] in ("unknown", "unobserved"):
            why.append(f"{name}: {e.get('why') or 'healed too close to quiescence to see anything after it'}")
    slowest = {}
    for key, group in (("commit", fault["processes"]), ("advance", fault["groups"])):
        for since in ("start", "heal"):
            found = [e[f"seconds_to_{key}_after_{since}"] for e in group.values() if e["status"] == "recovered"]
            slowest[f"seconds_to_{key}_after_{since}"] = max(found) if found else None
    recovered = (False if fault["heal_s"] is None or "not recovered" in statuses else
                 "unknown" if statuses & {"unobserved", "unknown"} else True)
    return {**slowest, "recovered": recovered, "why": why}


def recovery(ops: list[dict]) -> dict:
    """{horizon_s, faults: [{process, kind, start_s, heal_s, heal_ok, processes: {p: {...}}, groups: {g: {...}},
    recovered, why, seconds_to_commit/advance_after_start/heal, stalls, restarted}], stalls (every stall of the
    run, under a fault or not), recovered}; times in seconds since the run started."""
    horizon = horizon_of(ops)
    commits: dict[str, list[dict]] = defaultdict(list)
    first_seen: dict[str, int] = {}
    last_op: dict[str, int] = {}
    for op in ops:
        first_seen.setdefault(op["process"], op["time"])
        owner = op["process"].split("/", 1)[0]               # <name>/jvm speaks for <name> too
        last_op[owner] = max(last_op.get(owner, op["time"]), op["time"])
        if op["f"] in COMMIT_F and not op["process"].startswith("nemesis"):
            commits[op["process"]].append(op)
    commit_times = {p: sorted(op["time"] for op in found if is_commit(op)) for p, found in commits.items()}
    # a producer's work: its commits and its completed deliberate aborts (the zombie's return counts commits only)
    work_times = {p: sorted(op["time"] for op in found if ends_as_meant(op)) for p, found in commits.items()}
    init_times: dict[str, list[int]] = defaultdict(list)
    for op in ops:
        if op["f"] == INIT_F and op["type"] == "ok":
            init_times[op["process"]].append(op["time"])
    ended = ended_at(ops)
    stalls = stalls_of(ops)
    observed = [op for op in ops if op["process"] == GROUP_OBSERVER]
    samples = [(op["time"], op["value"]) for op in observed if op["f"] == GROUP_F and op["type"] == "ok"]
    failed = [op["time"] for op in observed if op["f"] == GROUP_ERROR_F]
    groups = sorted({g for _, offsets in samples for g in offsets})
    out = []
    faults = faults_of(ops)
    owners = [fault_of_stall(st, [f["start"] for f in faults]) for st in stalls]
    for n, fault in enumerate(faults):
        start, heal = fault["start"], fault["heal"]
        mine = [_stall_entry(st, ops, horizon) for st, owner in zip(stalls, owners)
                if owner == n]
        reference = heal if heal is not None else start
        late = heal is not None and heal > horizon - UNOBSERVED_S * NS
        processes = {p: _process_entry(work_times[p], start, heal, horizon, ended.get(p, horizon + 1) <= horizon,
                                       last_op[p], late)
                     for p in sorted(work_times)
                     if first_seen[p] <= reference and ended.get(p, horizon + 1) >= start}  # there, not gone before
        by_group = {}
        for g in groups:
            members = group_members(g, commits)
            gone = bool(members) and all(ended.get(m, horizon + 1) <= horizon for m in members)
            moved = [t for m in members if (t := _first_commit(work_times.get(m, []), heal, horizon)) is not None]
            by_group[g] = _group_entry(g, samples, failed, start, heal, horizon, gone, late, min(moved, default=None))
        restarted = _restarted_first(processes, work_times, mine, heal, horizon)
        found = {"process": fault["process"], "kind": fault["kind"], "started": fault["started"],
                 "start_s": _seconds(start, 0), "heal_s": _seconds(heal, 0), "heal_ok": fault["heal_ok"],
                 "processes": processes, "groups": by_group, "stalls": mine, "restarted": restarted,
                 "zombie_returned": _zombie_returned(fault["victim"], commit_times, init_times, heal, horizon)}
        out.append({**found, **_verdict(found)})
    last = {p: _last_commit(times, horizon) for p, times in sorted(work_times.items())}
    verdicts = {f["recovered"] for f in out}
    return {"horizon_s": _seconds(horizon, 0), "faults": out,
            "stalls": [_stall_entry(st, ops, horizon) for st in stalls],
            "recovered": False if False in verdicts else "unknown" if "unknown" in verdicts else True,
            "last_commit_s": {p: _seconds(t, 0) for p, t in last.items()}}


def _zombie_returned(victim: str | None, commit_times: dict[str, list[int]], init_times: dict[str, list[int]],
                     heal: int | None, horizon: int) -> dict | None:
    """A zombie-producer fault's fenced process that committed again after the heal resumed it (a zombie that came
    back as a live producer: KAFKA-18019's scenario after its transactional id expired): its first such commit, how
    many by the horizon, and when the workload made a new producer before it (`initialised_s`: its `init`, after a
    fatal error; null when the client went on by itself, re-initialising inside the library: KIP-360); None when it
    did not (it was refused and ended, or stayed silent)."""
    if victim is None or heal is None:
        return None
    after = [t for t in commit_times.get(victim, []) if heal < t < horizon]
    if not after:
        return None
    inits = [t for t in init_times.get(victim, []) if heal < t < after[0]]
    return {"process": victim, "first_commit_s": _seconds(after[0], 0), "commits": len(after),
            "initialised_s": _seconds(inits[0], 0) if inits else None}


def _restarted_first(processes: dict[str, dict], commit_times: dict[str, list[int]], stalls: list[dict],
                     heal: int | None, horizon: int) -> list[str]:
    """The processes that stalled under this fault and whose first commit after the heal came after their
    restart (each entry gets `restarted_s`, that restart's time)."""
    restarted = []
    for st in stalls:
        entry = processes.get(st["process"])
        if entry is None or st["restarted_s"] is None or entry["status"] != "recovered":
            continue
        moved = _first_commit(commit_times[st["process"]], heal, horizon)
        if moved is not None and moved / NS >= st["restarted_s"] - 0.05 and st["process"] not in restarted:
            entry["restarted_s"] = st["restarted_s"]
            restarted.append(st["process"])
    return restarted


def _status(advanced: int | None, ended: bool, late: bool) -> str:
    if advanced is not None:
        return "recovered"
    return "ended" if ended else "unobserved" if late else "not recovered"


FAULT_SUMMARY = ("process", "kind", "start_s", "heal_s", "heal_ok", "recovered", "seconds_to_commit_after_start",
                 "seconds_to_commit_after_heal", "seconds_to_advance_after_start", "seconds_to_advance_after_heal", "why",
                 "stalls", "restarted", "zombie_returned")


def summary(found: dict) -> dict:
    """A recovery (or of_run's {"error"}) without the per-process and per-group detail: `chaos run`'s JSON."""
    if "faults" not in found:
        return {"recovered": "unknown", "error": found.get("error", "no recovery computed")}
    return {"recovered": found["recovered"], "horizon_s": found["horizon_s"],
            "faults": [{key: f.get(key) for key in FAULT_SUMMARY} for f in found["faults"]]}


def of_run(run_dir: Path) -> dict:
    """The run's recovery, or {"error": ...}: liveness is a report, never a reason to lose experiment.json."""
    try:
        return recovery(read_history(Path(run_dir)).ops)
    except Exception as exc:  # noqa: BLE001 - e.g. no history at all (the run never started)
        return {"error": f"{type(exc).__name__}: {exc}"}
