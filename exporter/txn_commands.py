"""Operator commands next to the exporter: `txnlab txn list | hanging | abort`.

Owns: one-shot use of the access layer and the hanging classifier for people at a terminal: list
in-progress transactions, find hanging ones (two collections, like the exporter), and abort one
transaction or every hanging one. Abort is the only write, always through cluster.access.abort.abort_transaction
(which re-reads the partition and the coordinators as it writes and refuses a live or changed
transaction); it is a dry run unless `yes` is given (the dry run re-validates too). `--hanging` refuses
the whole batch when the hanging report is incomplete (an unresolved verdict, a partition not scanned).
Must not: keep state between invocations, or write to Kafka other than through cluster.access.abort.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from rich.console import Console
from rich.table import Table

from cluster.access.abort import AbortRefused, ExpectedTransaction, abort_transaction, open_transaction
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.diagnose import NotAuthorized, not_authorized
from exporter.hanging_verdicts import HangingTracker, OpenTransaction, Verdict, classify, evidence_of, late, open_transactions
from exporter.kafka_access import DESCRIBED_STATES, KafkaAccess, Partition, TransactionDescription

BOOTSTRAP_TIMEOUT_MS = 5000     # a terminal command says why it cannot reach the cluster within 10 s


@dataclass(frozen=True)
class HangingReport:
    hanging: list[Verdict]
    late: list[OpenTransaction]
    open_transactions: int
    unresolved: int
    partitions_failed: int
    incomplete: dict[str, int] = field(default_factory=dict)    # why the coordinator evidence was incomplete


def in_progress(access: KafkaAccess, every_state: bool = False) -> list[TransactionDescription]:
    """Coordinator-side transactions (DescribeTransactions), oldest first; NotAuthorized when the principal may
    describe no transactional id and none was listed (the empty list would say nothing)."""
    result = access.transactions(describe_states=None if every_state else DESCRIBED_STATES)
    if result.may_describe_any_id is False and not result.listings:   # ListTransactions hid every id, silently
        raise NotAuthorized(not_authorized(access.conn, "Describe", "transactional ids",
                                           "ListTransactions leaves out the ids it may not describe"))
    return sorted(result.descriptions.values(), key=lambda d: (d.start_time_ms < 0, d.start_time_ms))


def find_hanging(access: KafkaAccess, confirm_after_s: float = 5.0,
                 progress: Callable[[str], None] = lambda msg: None) -> HangingReport:
    """Two collections confirm_after_s apart; hanging = suspect in both (as the exporter does)."""
    tracker = HangingTracker()
    for round_no in (1, 2):
        progress(f"collection {round_no}/2")
        producers = access.producers()
        transactions = access.transactions()
        timeouts, now_ms = _max_timeouts(access, producers.leaders), int(time.time() * 1000)
        txns = open_transactions(producers.producers)
        verdicts = classify(txns, transactions, timeouts, now_ms)
        confirmed = tracker.update(verdicts, scanned=set(producers.producers))
        if round_no == 1:
            time.sleep(confirm_after_s)
    return HangingReport(confirmed, late(txns, timeouts, now_ms), len(txns),
                         sum(1 for v in verdicts if not v.resolved), producers.requested - len(producers.producers),
                         evidence_of(transactions).reasons())


def _max_timeouts(access: KafkaAccess, leaders: dict[Partition, int]) -> dict[Partition, int]:
    configs = access.broker_configs(["transaction.max.timeout.ms"]).configs
    per_broker = {b: int(c["transaction.max.timeout.ms"]) for b, c in configs.items() if c}
    return {tp: per_broker[b] for tp, b in leaders.items() if b in per_broker}


def abort_explicit(conn: ConnectionSettings, tp: Partition, producer_id: int, yes: bool, force: bool = False,
                   say: Callable[[str], None] = print) -> int:
    """Abort the transaction producer_id holds open on tp now (`txnlab txn abort --topic ...`)."""
    with ClusterAdmin(conn, bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS) as admin:
        txn = open_transaction(admin, tp[0], tp[1], producer_id)
        if txn is None:
            raise AbortRefused(f"producer {producer_id} has no open transaction on {tp[0]}-{tp[1]}")
        return abort(admin, [txn], yes, force, say)


def abort_hanging(access: KafkaAccess, confirm_after_s: float, yes: bool, force: bool = False,
                  say: Callable[[str], None] = print) -> int:
    """Abort every hanging transaction of a complete report (`txnlab txn abort --hanging`)."""
    txns = hanging_to_abort(find_hanging(access, confirm_after_s))
    with ClusterAdmin(access.conn, bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS) as admin:
        return abort(admin, [expected_of(t) for t in txns], yes, force, say)


def hanging_to_abort(report: HangingReport) -> list[OpenTransaction]:
    """The hanging transactions of report; AbortRefused when the report is incomplete."""
    if report.unresolved or report.partitions_failed:
        raise AbortRefused(f"the hanging report is incomplete ({report.unresolved} unresolved verdicts, "
                           f"{report.partitions_failed} partitions not scanned): nothing written; run again "
                           "when every coordinator and partition answers")
    return [v.txn for v in report.hanging]


def expected_of(txn: OpenTransaction) -> ExpectedTransaction:
    return ExpectedTransaction(txn.topic, txn.partition, txn.producer_id, txn.producer_epoch, txn.start_offset,
                               txn.coordinator_epoch)


def abort(admin: ClusterAdmin, txns: list[ExpectedTransaction], yes: bool, force: bool = False,
          say: Callable[[str], None] = print) -> int:
    """Re-validate and abort each transaction (only re-validate unless yes); how many were (or would be)
    aborted. Refusals do not stop the others; any refusal raises AbortRefused at the end."""
    refused = []
    for txn in txns:
        try:
            allowed = abort_transaction(admin, txn, force=force, dry_run=not yes)
        except AbortRefused as exc:
            refused.append(str(exc))
            continue
        forced = f" (forced: {allowed.forced})" if allowed.forced else ""
        say(f"aborted {txn.describe()}{forced}" if yes else
            f"would abort {txn.describe()}{forced} (dry run; add --yes to abort)")
    if refused:
        raise AbortRefused("; ".join(refused))
    if not txns:
        say("nothing to abort")
    return len(txns)


# ---- rendering ------------------------------------------------------------------------------------------
def _age(ms: int) -> str:
    return "-" if ms < 0 else f"{time.time() - ms / 1000:.1f}s"


def render_list(descriptions: list[TransactionDescription], console: Console) -> None:
    table = Table(title=f"{len(descriptions)} transactions")
    for col in ("transactional id", "coordinator", "state", "producer", "epoch", "age", "timeout", "partitions"):
        table.add_column(col)
    for d in descriptions:
        parts = ", ".join(f"{t}-{p}" for t, p in sorted(d.partitions))
        table.add_row(d.transactional_id, str(d.coordinator), d.state, str(d.producer_id), str(d.producer_epoch),
                      _age(d.start_time_ms), f"{d.timeout_ms / 1000:.0f}s", parts or "-")
    console.print(table)


def render_hanging(report: HangingReport, console: Console) -> None:
    table = Table(title=f"{len(report.hanging)} hanging, {len(report.late)} late of {report.open_transactions} "
                        f"open transactions ({report.unresolved} unresolved, {report.partitions_failed} partitions "
                        f"not scanned{_incomplete(report.incomplete)})")
    for col in ("partition", "producer", "epoch", "coordinator epoch", "start offset", "last write", "reason"):
        table.add_column(col)
    for v in report.hanging:
        t = v.txn
        table.add_row(f"{t.topic}-{t.partition}", str(t.producer_id), str(t.producer_epoch), str(t.coordinator_epoch),
                      str(t.start_offset), _age(t.last_timestamp_ms) + " ago", str(v.reason))
    console.print(table)


def _incomplete(reasons: dict[str, int]) -> str:
    gaps = {r: n for r, n in reasons.items() if n}
    return "; evidence incomplete: " + ", ".join(f"{r} ({n})" for r, n in sorted(gaps.items())) if gaps else ""


def report_json(report: HangingReport) -> dict:
    return {"hanging": [{**asdict(v.txn), "transactional_id": v.transactional_id, "reason": v.reason}
                        for v in report.hanging],
            "late": [asdict(t) for t in report.late], "open_transactions": report.open_transactions,
            "unresolved": report.unresolved, "partitions_failed": report.partitions_failed,
            "evidence_incomplete": report.incomplete}


def descriptions_json(descriptions: list[TransactionDescription]) -> list[dict]:
    return [{**asdict(d), "partitions": sorted([t, p] for t, p in d.partitions)} for d in descriptions]
