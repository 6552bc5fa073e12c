"""History signatures: what a run's history shows caused an anomaly, where the anomaly's shape alone cannot tell
two catalogued bugs apart. A processed input with committed outputs of two processors of a group
(exactly_once_processing, duplicate-output) is kafkajs-kip-447's when a processor that had fallen out of the group
without knowing it committed offsets (a stale member's commit): one of the two outputs (the other may then be the
same processor's, once given the partition back), or a commit that moved the group's offset back to the input; and kafkajs-stale-seek's when a processor read the input again from a rewind's
seek made before it was given the partition back, over the offsets the other processor had committed since
(chaos/bugs/: a bug's `expect.history` names its signature). Each reads the history's `process` operations
(inputs, outputs, commit_offsets) and `seek` observations (assigned, revoked, rewind: the processor workloads of
chaos/workloads/)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple

from chaos.record.history import whole_history

Partition = tuple[str, int]


class ProcessingHistory:
    """A run's processors as their history tells them: each attempt's completion, each processor's seeks."""

    def __init__(self, ops: list[dict]):
        self.done = {op["value"]["attempt"]: op for op in ops if op["f"] == "process" and op["type"] != "invoke"}
        self.seeks = [op for op in ops if op["f"] == "seek" and op["value"].get("reason") in
                      ("revoked", "assigned", "rewind")]

    def said(self, process: str, partition: Partition, before: int, reasons=("revoked", "assigned")) -> list[dict]:
        """A processor's seeks of those reasons that name the partition, up to a time, in order."""
        return [op for op in self.seeks if op["process"] == process and op["time"] <= before
                and op["value"]["reason"] in reasons
                and partition in {(p["topic"], p["partition"]) for p in op["value"]["positions"]}]

    def last_word(self, process: str, partition: Partition, before: int) -> dict | None:
        """A processor's last assignment or revocation of the partition up to a time."""
        said = self.said(process, partition, before)
        return said[-1] if said else None

    def stale(self, op: dict, partition: Partition) -> bool:
        """Whether a processor's operation came while it had fallen out of the group without knowing it: its last
        word on the partition an assignment, and another processor assigned the partition after that."""
        mine = self.last_word(op["process"], partition, op["time"])
        if not mine or mine["value"]["reason"] != "assigned":
            return False
        others = {s["process"] for s in self.seeks} - {op["process"]}
        return any((theirs := self.last_word(other, partition, op["time"])) and theirs["value"]["reason"] == "assigned"
                   and theirs["time"] > mine["time"] for other in others)

    def commits(self, partition: Partition) -> list[dict]:
        """The committed attempts whose offsets include the partition's, in time order."""
        return sorted((op for op in self.done.values() if op["type"] in ("ok", "info") and any(
            (c["topic"], c["partition"]) == partition for c in op["value"].get("commit_offsets") or [])),
            key=lambda op: op["time"])

    @staticmethod
    def committed(op: dict, partition: Partition) -> int | None:
        """The offset an attempt committed for the partition (None: it committed none)."""
        return max((c["offset"] for c in op["value"].get("commit_offsets") or []
                    if (c["topic"], c["partition"]) == partition), default=None)

    def committed_twice(self, example: dict, one_processor: bool = False) -> tuple[list[dict], Partition, int] | str:
        """A duplicate-output example's two committed attempts (in time order), the input's partition and offset;
        or why the example is not two committed outputs of two processors (of two attempts of one processor too
        when `one_processor`). Verify found both outputs committed: an attempt whose client did not learn its commit's
        outcome (`info`, e.g. its EndTxn answered after the client gave up) is one of them as an acknowledged one
        (`ok`) is; a failed one (`fail`) is not."""
        ended = [self.done.get(a) for a in sorted({output.rsplit(".", 1)[0] for output in example["outputs"]})]
        if len(example["outputs"]) != 2 or len(ended) != 2 or None in ended or \
                any(op["type"] not in ("ok", "info") for op in ended) or \
                len({op["process"] for op in ended}) < (1 if one_processor else 2):
            return f"{example}: not two committed outputs of two {'attempts' if one_processor else 'processors'}"
        inputs = [i for op in ended for i in op["value"]["inputs"] if i["id"] == example["input"]]
        if len({(i["topic"], i["partition"], i["offset"]) for i in inputs}) != 1:
            return f"{example}: its two processors read it at different places {inputs}"
        return sorted(ended, key=lambda op: op["time"]), (inputs[0]["topic"], inputs[0]["partition"]), \
            inputs[0]["offset"]


def stale_member_commit(history: ProcessingHistory, example: dict) -> str | None:
    """kafkajs-kip-447: a processor that had fallen out of the group without knowing it (its last word on the
    partition still an assignment, another processor assigned it since) committed offsets the coordinator could
    not refuse: either one of the input's two outputs is such a stale member's commit, or, after the first output's
    commit, a stale member's commit moved the group's offset of the partition back to or below the input, and the
    later output read it from there. The later output may be the stale member's own, once given the partition back
    (the CI run r208b36: eos-1's stale commit of in-a 1 past the input, then eos-0's, the partition's owner, moved the
    group's offset back below it, and eos-1, given the partition again, read it from there). None when the example
    shows it, else why not."""
    found = history.committed_twice(example, one_processor=True)
    if isinstance(found, str):
        return found
    (first, later), partition, offset = found
    if history.stale(first, partition) or history.stale(later, partition):
        return None
    back = [op for op in history.commits(partition) if first["time"] < op["time"] < later["time"]
            and history.committed(op, partition) <= offset and history.stale(op, partition)]
    if back:
        return None
    return f"{example}: neither processor committed it after the other had been assigned {partition}, nor did " \
           f"a stale member's commit move the group's offset back to it"


def stale_seek(history: ProcessingHistory, example: dict) -> str | None:
    """kafkajs-stale-seek: the later of the two processors read the input again after it was given the partition
    (its last word on it before its commit an assignment that came after the other's commit of the input), from a
    rewind it had recorded before that assignment (its last rewind of the partition before it, none after) to an
    offset at or below the input's, or to the log start (offset null: the group had none committed), while the
    other's commit had moved the group's offset past the input: the seek made before the rebalance, not the
    committed offset, set where it read. None when the example shows it."""
    found = history.committed_twice(example)
    if isinstance(found, str):
        return found
    (first, later), partition, offset = found
    assigned = history.last_word(later["process"], partition, later["time"])
    if not assigned or assigned["value"]["reason"] != "assigned" or assigned["time"] <= first["time"]:
        return f"{example}: {later['process']} was not given {partition} after {first['process']} committed it"
    rewinds = history.said(later["process"], partition, later["time"], reasons=("rewind",))
    before = [op for op in rewinds if op["time"] < assigned["time"]]
    if not before or len(before) != len(rewinds):
        return f"{example}: {later['process']} recorded no rewind of {partition} before it was given it, or one after"
    [to] = [p["offset"] for p in before[-1]["value"]["positions"] if (p["topic"], p["partition"]) == partition]
    committed = history.committed(first, partition)
    if (to is not None and to > offset) or committed is None or committed <= offset:
        return f"{example}: the rewind's offset {to} of {partition} does not reach back to the input's {offset} " \
               f"that {first['process']} committed past ({committed})"
    return None


SIGNATURES: dict[str, Callable[[ProcessingHistory, dict], str | None]] = {
    "stale-member-commit": stale_member_commit, "stale-seek": stale_seek}


class Explained(NamedTuple):
    counts: dict[str, int]          # the examples each signature explains (an example counts for each that does)
    unexplained: list[str]          # why each example no signature explains is none of theirs


def explained(processing: dict, ops: list[dict], names: tuple[str, ...]) -> Explained | str:
    """Which of an exactly_once_processing check's duplicate-output examples each signature of `names` explains;
    or why the check is not duplicate outputs alone."""
    if set(processing.get("problems") or {}) != {"duplicate-output"}:
        return f"exactly_once_processing problems {processing.get('problems')}, not duplicate outputs alone"
    history, found = ProcessingHistory(ops), Explained({name: 0 for name in names}, [])
    for example in processing["examples"]:
        why = {name: SIGNATURES[name](history, example) for name in names}
        if all(why.values()):
            found.unexplained.append("; ".join(dict.fromkeys(why.values())))
        for name, reason in why.items():
            found.counts[name] += reason is None
    return found


def shown_in(run_dir: Path, names: tuple[str, ...]) -> Explained | str:
    """explained() on a run's own evidence (its verify report's exactly_once_processing examples, its history):
    nothing explained when the check found no anomaly; why the run cannot say when it has no verify report or its
    history cannot be read or was cut short (never a signature guessed from part of the evidence)."""
    report = run_dir / "verify" / "report.json"
    if not report.exists():
        return "not verified: no verify/report.json"
    processing = json.loads(report.read_text())["checks"].get("exactly_once_processing") or {}
    if not processing.get("count"):
        return Explained({name: 0 for name in names}, [])
    history = whole_history(run_dir)      # a missing end may hold the seeks or commits a signature needs
    if isinstance(history, str):
        return f"the history cannot say which processor read what: {history}"
    return explained(processing, history.ops, names)
