"""Operator commands next to the exporter: `txnlab txn list | hanging | abort`.

Owns: one-shot use of the access layer and the hanging classifier for people at a terminal: list
in-progress transactions, find hanging ones (two collections, like the exporter), and abort one
transaction or every hanging one. Abort is the only write; it is a dry run unless `yes` is given,
and uses the producer epoch and coordinator epoch DescribeProducers reported (KIP-664).
Must not: keep state between invocations.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

from rich.console import Console
from rich.table import Table

from exporter.hanging import HangingTracker, OpenTransaction, Verdict, classify, late, open_transactions
from exporter.kafka_access import DESCRIBED_STATES, KafkaAccess, Partition, TransactionDescription


@dataclass(frozen=True)
class HangingReport:
    hanging: list[Verdict]
    late: list[OpenTransaction]
    open_transactions: int
    unresolved: int
    partitions_failed: int


def in_progress(access: KafkaAccess, every_state: bool = False) -> list[TransactionDescription]:
    """Coordinator-side transactions (DescribeTransactions), oldest first."""
    result = access.transactions(describe_states=None if every_state else DESCRIBED_STATES)
    return sorted(result.descriptions.values(), key=lambda d: (d.start_time_ms < 0, d.start_time_ms))


def find_hanging(access: KafkaAccess, confirm_after_s: float = 5.0,
                 progress: Callable[[str], None] = lambda msg: None) -> HangingReport:
    """Two collections confirm_after_s apart; hanging = suspect in both (as the exporter does)."""
    tracker = HangingTracker()
    for round_no in (1, 2):
        progress(f"collection {round_no}/2")
        producers = access.producers()
        transactions = access.transactions()
        txns = open_transactions(producers.producers)
        verdicts = classify(txns, transactions.listings, transactions.descriptions, transactions.unknown_ids,
                            transactions.coordinators_failed)
        confirmed = tracker.update(verdicts)
        if round_no == 1:
            time.sleep(confirm_after_s)
    timeouts = _max_timeouts(access, producers.leaders)
    return HangingReport(confirmed, late(txns, timeouts, int(time.time() * 1000)), len(txns),
                         sum(1 for v in verdicts if not v.resolved), producers.requested - len(producers.producers))


def _max_timeouts(access: KafkaAccess, leaders: dict[Partition, int]) -> dict[Partition, int]:
    configs = access.broker_configs(["transaction.max.timeout.ms"]).configs
    per_broker = {b: int(c["transaction.max.timeout.ms"]) for b, c in configs.items() if c}
    return {tp: per_broker[b] for tp, b in leaders.items() if b in per_broker}


def open_transaction_of(access: KafkaAccess, tp: Partition, producer_id: int) -> OpenTransaction:
    """The open transaction of producer_id on tp, from DescribeProducers; ValueError if there is none."""
    result = access.producers([tp])
    if result.errors:
        raise ValueError(f"cannot describe producers of {tp[0]}-{tp[1]}: {result.errors[0].error}")
    for txn in open_transactions(result.producers):
        if txn.producer_id == producer_id:
            return txn
    raise ValueError(f"producer {producer_id} has no open transaction on {tp[0]}-{tp[1]}")


def abort(access: KafkaAccess, txns: list[OpenTransaction], yes: bool,
          say: Callable[[str], None] = print) -> int:
    """Abort each transaction (WriteTxnMarkers) if yes, else only say what would be done. Returns count."""
    for txn in txns:
        what = (f"{txn.topic}-{txn.partition} producer {txn.producer_id} epoch {txn.producer_epoch} "
                f"coordinator epoch {txn.coordinator_epoch} start offset {txn.start_offset}")
        if not yes:
            say(f"would abort {what} (dry run; add --yes to abort)")
            continue
        access.abort_transaction((txn.topic, txn.partition), txn.producer_id, txn.producer_epoch,
                                 txn.coordinator_epoch)
        say(f"aborted {what}")
    return len(txns) if yes else 0


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
                        f"not scanned)")
    for col in ("partition", "producer", "epoch", "coordinator epoch", "start offset", "last write", "reason"):
        table.add_column(col)
    for v in report.hanging:
        t = v.txn
        table.add_row(f"{t.topic}-{t.partition}", str(t.producer_id), str(t.producer_epoch), str(t.coordinator_epoch),
                      str(t.start_offset), _age(t.last_timestamp_ms) + " ago", str(v.reason))
    console.print(table)


def report_json(report: HangingReport) -> dict:
    return {"hanging": [{**asdict(v.txn), "transactional_id": v.transactional_id, "reason": v.reason}
                        for v in report.hanging],
            "late": [asdict(t) for t in report.late], "open_transactions": report.open_transactions,
            "unresolved": report.unresolved, "partitions_failed": report.partitions_failed}


def descriptions_json(descriptions: list[TransactionDescription]) -> list[dict]:
    return [{**asdict(d), "partitions": sorted([t, p] for t, p in d.partitions)} for d in descriptions]
