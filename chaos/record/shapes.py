"""History shapes: a catalogued finding that shows as a behaviour in a run's history, not as an anomaly verify counts
(exactly-once holds). commit-waits (franz-go-tv2-wait): a transaction that took COMMIT_WAIT_S or more from its
invoke to its commit while no fault was active; zombie-revived (KAFKA-18019): a fenced zombie its client brought
back by itself after it was resumed; stuck-producer (kafkajs-expired-id-stuck): a producer that, no fault
active, fails every transaction until the end; recreated-topic-commits-stuck (java-txn-offset-commit-stale-topic-id):
a processor that stopped committing at a transaction carrying offsets of a topic deleted and created again;
recreated-topic-unread (franz-go-recreated-topic-unread): a processor holding partitions of such a topic that reads
none of its records again. Each returns its occurrences in a history, each described in a
line; a bug's `expect.shapes` names the shapes that show it (chaos/bugs/). And the errors a history's operations
recorded by name (errors_seen: a bug's `expect.errors`, KAFKA-20785's InvalidTxnStateException)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from chaos.record.annotations import windows_of
from chaos.record.history import HistoryError, read_history, whole_history
from chaos.record.recovery import COMMIT_F, INIT_F, ended_at, ends_as_meant, faults_of, horizon_of, recovery

STUCK_TRIES = 3          # failed transactions, none committed, with no fault active: a producer that cannot go on
STUCK_S = 5.0
RECREATED_STUCK_S = 10.0  # a transaction's offsets sent for a re-created topic: the Java processor's max.block.ms
COMMIT_WAIT_S = 4.0      # franz-go waits for MetadataMinAge (5 s) before it retries; the other clients' max is ~1.3 s


def _s(ns: int) -> str:
    return f"{ns / 1e9:.2f} s"


def committed_transactions(ops: list[dict]) -> list[tuple[dict, dict]]:
    """(invoke, ok) of each transaction a producer committed (not one it aborted on purpose), in history order."""
    invoked = {op["value"]["attempt"]: op for op in ops if op["f"] == "txn" and op["type"] == "invoke"}
    return [(invoked[op["value"].get("attempt")], op) for op in ops
            if op["f"] == "txn" and op["type"] == "ok" and op["value"].get("attempt") in invoked
            and not op["value"].get("abort")]


def commit_waits(ops: list[dict]) -> list[str]:
    """Committed transactions that took COMMIT_WAIT_S or more from their invoke to their commit, no fault active
    at any time between."""
    windows = windows_of(ops)
    found = []
    for began, op in committed_transactions(ops):
        if op["time"] - began["time"] < COMMIT_WAIT_S * 1e9:
            continue
        if any(w.start <= op["wall"] and w.end >= began["wall"] for w in windows):
            continue
        found.append(f"{op['process']}: transaction {op['value']['attempt']} took {_s(op['time'] - began['time'])} "
                     f"({_s(began['time'])}-{_s(op['time'])}), no fault active")
    return found


def zombie_revived(ops: list[dict]) -> list[str]:
    """A zombie-producer fault's fenced process that its client brought back by itself: it committed again after the
    heal resumed it with no new producer made by the workload first (recovery's zombie_returned without
    initialised_s): the library re-initialised the producer id on its own (KIP-360), as KAFKA-18019 describes for a
    zombie whose transactional id expired."""
    found = []
    for fault in recovery(ops)["faults"]:
        back = fault.get("zombie_returned")
        if back and back.get("initialised_s") is None:
            found.append(f"{back['process']}: fenced at {fault['start_s']} s, resumed at {fault['heal_s']} s, committed "
                         f"again at {back['first_commit_s']} s with no new producer ({back['commits']} transaction(s))")
    return found


def stuck_producers(ops: list[dict]) -> list[str]:
    """A transactional process that, once every fault was healed, failed every transaction or initialisation it tried
    (STUCK_TRIES or more, over STUCK_S or more), ended none as it meant to (a commit, a deliberate abort) until
    quiescence, and never said it ended: a producer its client keeps trying with a producer id the coordinator no
    longer maps (a KafkaJS producer whose transactional id expired while it was paused, or idle), or one whose every
    InitProducerId the coordinator refuses (KAFKA-20090: its transaction stuck at the last epoch), not a fault's
    passing effect."""
    horizon = horizon_of(ops)
    ended = ended_at(ops)
    since = max((f["heal"] for f in faults_of(ops) if f["heal"] is not None), default=0)
    tried: dict[str, list[dict]] = {}
    for op in ops:
        if ((op["f"] in COMMIT_F or op["f"] == INIT_F) and op["type"] != "invoke" and since < op["time"] < horizon
                and not op["process"].startswith("nemesis")):
            tried.setdefault(op["process"], []).append(op)
    found = []
    for process, attempts in sorted(tried.items()):
        failed = [op for op in attempts if op["type"] == "fail" and not ends_as_meant(op)]
        if (len(failed) < STUCK_TRIES or any(ends_as_meant(op) for op in attempts)
                or failed[-1]["time"] - failed[0]["time"] < STUCK_S * 1e9 or ended.get(process, horizon + 1) <= horizon):
            continue
        last = str((failed[-1].get("value") or {}).get("error", ""))[:120]
        inits = {op["f"] == INIT_F for op in failed}
        what = ("initialisation(s)" if inits == {True} else "transaction(s)" if inits == {False}
                else "transaction(s) and initialisation(s)")
        found.append(f"{process}: {len(failed)} {what} failed from {_s(failed[0]['time'])} to quiescence "
                     f"({_s(horizon)}), none committed, no fault active; the last: {last}")
    return found


def recreated_topic_commits_stuck(ops: list[dict]) -> list[str]:
    """A processor whose transaction carried offsets of a topic a recreate-topic fault had deleted and created again
    before it began (chaos/nemesis/recreate_topic.py), and that then committed nothing more until quiescence: that
    transaction never ended, or ended failing RECREATED_STUCK_S or more after it began. Kafka's Java producer 4.4.0
    sends TxnOffsetCommit with the deleted topic's id and retries UNKNOWN_TOPIC_ID with it for ever
    (java-txn-offset-commit-stale-topic-id)."""
    horizon = horizon_of(ops)
    recreated = _recreations(ops)
    if not recreated:
        return []
    ends = {(op.get("value") or {}).get("attempt"): op for op in ops if op["f"] == "process" and op["type"] != "invoke"}
    last_commit = {op["process"]: op["time"] for op in ops
                   if op["f"] == "process" and op["type"] == "ok" and op["time"] < horizon}
    found = []
    for op in ops:
        value = op.get("value") or {}
        if op["f"] != "process" or op["type"] != "invoke":
            continue
        topics = {c.get("topic") for c in value.get("commit_offsets") or []}
        topic = next((t for at, t in recreated if at < op["time"] and t in topics), None)
        end = ends.get(value.get("attempt"))
        if topic is None or end is not None and (end["type"] == "ok" or end["time"] - op["time"] < RECREATED_STUCK_S * 1e9):
            continue
        if last_commit.get(op["process"], -1) > op["time"]:
            continue
        how = "never ended" if end is None else \
            f"ended {end['type']} at {_s(end['time'])}: {str((end.get('value') or {}).get('after') or (end.get('value') or {}).get('error'))[:160]}"
        found.append(f"{op['process']}: transaction {value.get('attempt')} with offsets of {topic} (created again "
                     f"before it) began at {_s(op['time'])} and {how}; nothing committed after it until quiescence "
                     f"({_s(horizon)})")
    return found


def recreated_topic_unread(ops: list[dict]) -> list[str]:
    """A processor that holds partitions of a topic a recreate-topic fault deleted and created again (assigned to it,
    and not revoked, at quiescence) and read no record of that topic from the re-creation to quiescence, while a
    writer committed records to it: franz-go v1.22.3 does not adopt a re-created topic's new id and fetches it with
    the old one, UNKNOWN_TOPIC_ID, until the application purges the topic (franz-go-recreated-topic-unread)."""
    horizon = horizon_of(ops)
    found = []
    for at, topic in _recreations(ops):
        written = sum(1 for op in ops if op["f"] == "txn" and op["type"] == "ok" and at < op["time"] < horizon
                      for w in (op.get("value") or {}).get("writes") or [] if w.get("topic") == topic)
        if not written:
            continue
        held: dict[str, set[int]] = {}
        for op in ops:
            value = op.get("value") or {}
            if op["f"] != "seek" or op["type"] != "ok" or op["time"] >= horizon or value.get("reason") not in (
                    "assigned", "revoked"):
                continue
            parts = {p.get("partition") for p in value.get("positions") or [] if p.get("topic") == topic}
            mine = held.setdefault(op["process"], set())
            held[op["process"]] = mine | parts if value["reason"] == "assigned" else mine - parts
        readers = {op["process"] for op in ops if op["f"] == "process" and op["type"] == "invoke" and at < op["time"]
                   and any(i.get("topic") == topic for i in (op.get("value") or {}).get("inputs") or [])}
        for process, parts in sorted(held.items()):
            if parts and process not in readers:
                found.append(f"{process}: holds {topic} partitions {sorted(parts)} and read none of its records from "
                             f"its re-creation ({_s(at)}) to quiescence ({_s(horizon)}), while {written} were "
                             "committed to it")
    return found


def _recreations(ops: list[dict]) -> list[tuple[int, str]]:
    """(time, topic) of each recreate-topic fault that completed."""
    return [(op["time"], str((op.get("value") or {}).get("topic"))) for op in ops if op["f"] == "fault"
            and op["type"] == "ok" and (op.get("value") or {}).get("kind") == "recreate-topic"]


SHAPES: dict[str, Callable[[list[dict]], list[str]]] = {"commit-waits": commit_waits, "zombie-revived": zombie_revived,
                                                        "stuck-producer": stuck_producers,
                                                        "recreated-topic-commits-stuck": recreated_topic_commits_stuck,
                                                        "recreated-topic-unread": recreated_topic_unread}
LIVENESS_SHAPES = ("stuck-producer", "recreated-topic-commits-stuck", "recreated-topic-unread")     # shapes of a process that cannot go on: they explain a fault not recovered from


def shapes_in(run_dir: Path, names: tuple[str, ...]) -> dict[str, list[str]] | str:
    """Each shape of `names` in a run's history, its occurrences; why the run cannot say when its history cannot
    be read or was cut short (a missing end may hold an occurrence, or the end of one)."""
    history = whole_history(run_dir)
    if isinstance(history, str):
        return f"the history cannot say what happened: {history}"
    return {name: SHAPES[name](history.ops) for name in names}


def errors_seen(run_dir: Path, names: tuple[str, ...], processes: frozenset[str] | None = None) -> dict[str, dict] | None:
    """Per expected error name found in the run's history: how many operations recorded an error naming it
    (in their `error` text or its causes), and the first one's process and time (s since the run started); only
    the operations of `processes` when given. None when the history cannot be read or was cut short: no error seen
    is then no evidence of none."""
    seen: dict[str, dict] = {}
    if not names:
        return seen
    try:
        history = read_history(run_dir)
    except HistoryError:
        return None
    for op in history.ops:
        value = op.get("value")
        if processes is not None and op["process"] not in processes:
            continue
        if not isinstance(value, dict) or not ({"error", "causes"} & value.keys()):
            continue
        text = json.dumps({k: value.get(k) for k in ("error", "causes")}, default=str)
        for name in names:
            if name in text:
                entry = seen.setdefault(name, {"count": 0, "first_process": op["process"],
                                               "first_s": round(op["time"] / 1e9, 1)})
                entry["count"] += 1
    return None if history.truncated and not seen else seen
