"""Recovery and liveness of a run: after each fault, how long until exactly-once processing moves again.

Owns: a pure reading of a run's history (no cluster, no files but the history):
  - a commit is a workload's `ok` transaction: `txn` (txp-*, feeder), `process` (eos-*), or a `copy` event
    that copied records (java-copier-*: one per committed transaction);
  - a process has ended when it said so: a `fenced` failure (--on-fenced exit), a copier's
    `ShutdownComplete`, or its `<name>/jvm` completing;
  - the run's group offsets are the `group_offsets` observations (process "observer-groups", ok,
    {group: {topic: {partition: offset}}}, sampled every ~2 s by chaos/run.py), so a group "advances" at
    the first sample in which any partition's committed offset is above the last sample at or before the
    reference time (resolution: the sampling interval);
  - for every fault (a nemesis-<n> process: `fault` invoke = its start, `heal` ok or fail = its heal), per
    workload process that existed by the heal and had not ended before the start, the seconds from the
    start and from the heal to its next commit, and per group the seconds from the start and from the
    heal until its offsets advance.
The horizon is the start of quiescence (the `quiescence` operation of process "nemesis"; else the last
operation): quiescence stops the workloads and heals everything, so what commits then is no recovery.
A fault is recovered (True) when every process commits again after its heal (or ended: a fenced zombie, a
copier done with its input) and every group advances (or all its members ended) before the horizon; False
when one did not though the run went on for UNOBSERVED_S or more after the heal, or the fault was never
healed; "unknown" when the heal came so late (within UNOBSERVED_S of the horizon) that nothing could be
seen after it. A heal that failed still counts as the heal's time (the workloads may route around a
broker that stayed down). A run is recovered when all its faults are (so a run without faults is), not
when one is not, else "unknown". Safety is spark_analysis's verdict; this is liveness only.
Must not: read the cluster, or judge safety.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from pathlib import Path

from chaos.history import read_history

GROUP_OBSERVER = "observer-groups"
GROUP_F = "group_offsets"
COMMIT_F = ("txn", "process", "copy")
NS = 1e9
UNOBSERVED_S = 1.0         # a heal this close to the horizon leaves nothing to see after it


def is_commit(op: dict) -> bool:
    if op["type"] != "ok" or op["f"] not in COMMIT_F:
        return False
    value = op.get("value") or {}
    return op["f"] != "copy" or (isinstance(value, dict) and (value.get("copied") or 0) > 0)


def ended_at(ops: list[dict]) -> dict[str, int]:
    """process -> the time it said it stopped (first such operation)."""
    ended: dict[str, int] = {}
    for op in ops:
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        process = op["process"]
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
                              "started": None, "heal": None, "heal_ok": None}
        elif process in found and op["f"] == "fault" and op["type"] != "invoke":
            found[process]["started"] = op["type"] == "ok"
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
    base: dict = {}
    for t, offsets in samples:
        if t > horizon:
            break
        mine = offsets.get(group) or {}
        flat = {(topic, p): o for topic, parts in mine.items() for p, o in parts.items()}
        if t <= after:
            base = flat or base
        elif any(o > base.get(key, -1) for key, o in flat.items()):
            return t
    return None


def recovery(ops: list[dict]) -> dict:
    """{horizon_s, faults: [{process, kind, start_s, heal_s, heal_ok, processes: {p: {...}}, groups: {g: {...}},
    recovered}], recovered}; times in seconds since the run started."""
    horizon = horizon_of(ops)
    commits: dict[str, list[dict]] = defaultdict(list)
    first_seen: dict[str, int] = {}
    for op in ops:
        first_seen.setdefault(op["process"], op["time"])
        if op["f"] in COMMIT_F and not op["process"].startswith("nemesis"):
            commits[op["process"]].append(op)
    commit_times = {p: sorted(op["time"] for op in found if is_commit(op)) for p, found in commits.items()}
    ended = ended_at(ops)
    samples = [(op["time"], op["value"]) for op in ops
               if op["process"] == GROUP_OBSERVER and op["f"] == GROUP_F and op["type"] == "ok"]
    groups = sorted({g for _, offsets in samples for g in offsets})
    out = []
    for fault in faults_of(ops):
        start, heal = fault["start"], fault["heal"]
        reference = heal if heal is not None else start
        late = heal is not None and heal > horizon - UNOBSERVED_S * NS
        processes = {}
        for p in sorted(commit_times):
            if first_seen[p] > reference or ended.get(p, horizon + 1) < start:
                continue                                 # not there yet at the heal, or gone before the fault
            after_heal = _first_commit(commit_times[p], heal, horizon)
            processes[p] = {"seconds_to_commit_after_start": _seconds(_first_commit(commit_times[p], start, horizon),
                                                                      start),
                            "seconds_to_commit_after_heal": _seconds(after_heal, heal),
                            "status": _status(after_heal, ended.get(p, horizon + 1) <= horizon, late)}
        by_group = {}
        for g in groups:
            members = group_members(g, commits)
            advanced = _first_advance(samples, g, heal, horizon)
            gone = bool(members) and all(ended.get(m, horizon + 1) <= horizon for m in members)
            by_group[g] = {"seconds_to_advance_after_start": _seconds(_first_advance(samples, g, start, horizon), start),
                           "seconds_to_advance_after_heal": _seconds(advanced, heal),
                           "status": _status(advanced, gone, late)}
        statuses = {v["status"] for v in [*processes.values(), *by_group.values()]}
        out.append({"process": fault["process"], "kind": fault["kind"], "started": fault["started"],
                    "start_s": _seconds(start, 0), "heal_s": _seconds(heal, 0), "heal_ok": fault["heal_ok"],
                    "processes": processes, "groups": by_group,
                    "recovered": (False if heal is None or "not recovered" in statuses else
                                  "unknown" if "unobserved" in statuses else True)})
    last = {p: _last_commit(times, horizon) for p, times in sorted(commit_times.items())}
    verdicts = {f["recovered"] for f in out}
    return {"horizon_s": _seconds(horizon, 0), "faults": out,
            "recovered": False if False in verdicts else "unknown" if "unknown" in verdicts else True,
            "last_commit_s": {p: _seconds(t, 0) for p, t in last.items()}}


def _status(advanced: int | None, ended: bool, late: bool) -> str:
    if advanced is not None:
        return "recovered"
    return "ended" if ended else "unobserved" if late else "not recovered"


def of_run(run_dir: Path) -> dict:
    """The run's recovery, or {"error": ...}: liveness is a report, never a reason to lose experiment.json."""
    try:
        return recovery(read_history(Path(run_dir)).ops)
    except Exception as exc:  # noqa: BLE001 - e.g. no history at all (the run never started)
        return {"error": f"{type(exc).__name__}: {exc}"}
