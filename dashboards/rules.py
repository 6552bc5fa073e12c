"""The Prometheus alerting rules for transactional health, as data rendered to alerts/txnlab.rules.yml.

Owns: every alert's expression, `for`, severity and runbook annotations (what it means, what to run),
and the two knobs a team sets once: the producer-state budget (producer ids per broker the heap can
hold) and the exporter's collection interval (staleness). Thresholds come from the brokers' own
configs as the exporter exports them (kafkatxn_broker_*), with Kafka's defaults when they are absent.
Must not: import anything of txnlab's (dashboards/ stands apart; it knows metric names only).
"""
from __future__ import annotations

from dataclasses import dataclass

import yaml

def broker_threshold(metric: str, kafka_default: int, selector: str = "") -> str:
    """A broker config the exporter exports, as a PromQL scalar; Kafka's default when it is missing."""
    return f"scalar(max({metric}{{{selector}}}) or vector({kafka_default}))" if selector else \
        f"scalar(max({metric}) or vector({kafka_default}))"


def max_timeout(selector: str = "") -> str:
    return broker_threshold("kafkatxn_broker_transaction_max_timeout_seconds", 900, selector)


def expiry(selector: str = "") -> str:
    return broker_threshold("kafkatxn_broker_producer_id_expiration_seconds", 86400, selector)


MAX_TIMEOUT, EXPIRY = max_timeout(), expiry()
RUNBOOK = "docs/alerts.md#"
PRODUCER_EPOCH_MAX = 32767      # Short.MAX_VALUE: the producer epoch is an int16; at this value the producer id rotates
EPOCH_WARNING = 30000           # ProducerEpochNearExhaustion: epochs above this are close to the rotation


@dataclass(frozen=True)
class Knobs:
    producer_budget: int = 200_000          # producer ids per broker before its heap is at risk
    exporter_interval_s: float = 15.0       # the exporter's collection.interval_seconds


def alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str, run: str) -> dict:
    return {"alert": name, "expr": expr, "for": for_, "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description, "runbook": run,
                            "runbook_url": RUNBOOK + name.lower()}}


def transaction_alerts() -> list[dict]:
    return [
        alert("HangingTransaction", "kafkatxn_hanging_transaction_info > 0", "0s", "critical",
              "Hanging transaction on {{ $labels.topic }}-{{ $labels.partition }}",
              "Producer {{ $labels.producer_id }} (epoch {{ $labels.producer_epoch }}) holds a transaction open "
              "from offset {{ $labels.start_offset }} that its coordinator does not track ({{ $labels.reason }}). "
              "read_committed consumers of this partition are stuck at the LSO until it is aborted.",
              "txnlab txn hanging; then txnlab txn abort --topic {{ $labels.topic }} --partition "
              "{{ $labels.partition }} --producer-id {{ $labels.producer_id }} --yes"),
        alert("LSOStuck",
              "(kafkatxn_partition_lso_lag > 0) and on(topic, partition) "
              f"((time() - kafkatxn_partition_lso_last_advance_timestamp_seconds) > {MAX_TIMEOUT})",
              "0s", "critical",
              "LSO of {{ $labels.topic }}-{{ $labels.partition }} stuck for longer than transaction.max.timeout.ms",
              "The last stable offset is {{ $value }} records behind the high watermark and has not moved for "
              "longer than any transaction may stay open: read_committed consumers are blocked.",
              "txnlab txn hanging (a hanging transaction?); txnlab txn list (a coordinator that cannot finish?)"),
        alert("OpenTransactionTooOld",
              f"(max by (coordinator) (time() - kafkatxn_transaction_oldest_start_timestamp_seconds{{state=\"Ongoing\"}})"
              f" > {MAX_TIMEOUT}) or (sum by (topic) (kafkatxn_late_transactions) > 0)",
              "1m", "warning",
              "A transaction has been open longer than transaction.max.timeout.ms",
              "{{ if $labels.coordinator }}Coordinator {{ $labels.coordinator }}{{ else }}Topic {{ $labels.topic }}"
              "{{ end }}: an open transaction is older than the longest timeout the brokers allow; its coordinator "
              "should have aborted it.",
              "txnlab txn list (oldest first); txnlab txn hanging"),
        alert("CoordinatorTransactionsOverTimeout", "sum by (coordinator) (kafkatxn_transactions_over_timeout) > 0",
              "2m", "warning",
              "Coordinator {{ $labels.coordinator }} holds transactions past their own timeout",
              "{{ $value }} Ongoing transactions are older than their transaction.timeout.ms and were not aborted: "
              "the coordinator's abort of expired transactions is not keeping up or is failing.",
              "txnlab txn list; the coordinator broker's server.log (TransactionCoordinator)"),
        alert("TransactionNearTimeout", "sum by (coordinator) (kafkatxn_transactions_near_timeout) > 0", "0s",
              "warning",
              "Coordinator {{ $labels.coordinator }}: transactions past half their own timeout",
              "{{ $value }} Ongoing transactions have been open for more than half their own transaction.timeout.ms: "
              "the coordinator aborts them when it passes. Either their producer is gone (a job killed and not "
              "restarted: read_committed consumers of their partitions wait at the LSO until then) or it cannot "
              "commit in time (a Flink sink whose commit comes after the timeout loses the checkpoint's records).",
              "txnlab txn list (oldest first: their transactional ids); start the producer or job again (the same "
              "transactional.id aborts them now), or give it a transaction.timeout.ms above its longest "
              "checkpoint-to-commit time"),
        alert("TransactionStuckInPrepare", "sum by (coordinator) (kafkatxn_transactions_prepare_over_timeout) > 0",
              "2m", "critical",
              "Coordinator {{ $labels.coordinator }}: transactions stuck in PrepareCommit/PrepareAbort",
              "{{ $value }} transactions whose end was decided are older than their own transaction.timeout.ms and "
              "their markers are not all written: the coordinator never times these out, their partitions' LSO "
              "stays behind them (read_committed consumers wait) and their producers are told "
              "CONCURRENT_TRANSACTIONS until the markers land (KAFKA-19999: a retried marker refused after a "
              "coordinator reload).",
              "txnlab txn list (state Prepare*: their transactional ids and partitions); the coordinator's "
              "server.log (TransactionMarkerChannelManager); the partitions' leaders (txnlab cluster status)"),
        alert("GroupCommitsFailing", "kafkatxn_consumergroup_commits_failing == 1", "1m", "critical",
              "Consumer group {{ $labels.group }}: its exactly-once commits keep failing",
              "The group has members and records to read, its transactions keep carrying its offsets, and its "
              "committed offsets have not moved for collection.group_commit_stall_seconds: its transactions abort "
              "or never end. The pipeline reads, writes and aborts in a loop: no output becomes visible to "
              "read_committed readers and the work is done again after every abort.",
              "txnlab txn list --all (its producers' transactional ids: their state and epoch); the application's "
              "log (fenced, INVALID_TXN_STATE, timeouts); TransactionStuckInPrepare, HangingTransaction"),
        alert("TransactionMarkerQueue",
              "max by (instance) (kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
              " + kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize) > 0",
              "5m", "warning",
              "Transaction markers queued on {{ $labels.instance }}",
              "The coordinator cannot deliver commit/abort markers (unknown partition leaders or failing "
              "appends): transactions stay open on their partitions and LSOs stall.",
              "txnlab cluster status; partition leadership of the topics in txnlab txn list"),
    ]


def producer_state_alerts(knobs: Knobs) -> list[dict]:
    return [alert(
        "ProducerStateGrowth",
        f"predict_linear(kafkatxn_broker_active_producers[30m], {EXPIRY}) > {knobs.producer_budget}",
        "15m", "warning",
        "Producer state on broker {{ $labels.broker }} heads past its budget",
        f"At the current growth rate, producer ids on this broker exceed {knobs.producer_budget} within the "
        "producer.id.expiration.ms horizon (ids expire only after it): broker heap at risk.",
        "Find the clients creating producers (short-lived idempotent producers); lower producer.id.expiration.ms "
        "or set producer.id.quota.window (KIP-936)"),
        alert("ProducerEpochNearExhaustion",
              f"(max by (topic) (kafkatxn_topic_max_producer_epoch) > {EPOCH_WARNING}) "
              f"or (max(kafkatxn_transaction_max_producer_epoch) > {EPOCH_WARNING})",
              "5m", "warning",
              "Producer epoch near exhaustion{{ if $labels.topic }} on topic {{ $labels.topic }}{{ end }}",
              "{{ if $labels.topic }}A producer of topic {{ $labels.topic }}{{ else }}A transactional id{{ end }} "
              f"is at producer epoch {{{{ $value }}}} of at most {PRODUCER_EPOCH_MAX}: there its producer id must "
              "rotate, the step where KAFKA-20090, KAFKA-20310 and KAFKA-20357 live. Under transaction.version 2 "
              "every transaction end bumps the epoch, so a busy transactional.id gets there in hours.",
              "kafkatxn_partition_max_producer_epoch of the topic (which partition); txnlab txn list --all (which "
              "transactional id, its producer and epoch); keep coordinator failovers away from the rotation and "
              "run brokers with those fixes")]


def exporter_alerts(knobs: Knobs) -> list[dict]:
    stale = int(max(60, 4 * knobs.exporter_interval_s))
    return [
        alert("ExporterDown", "up{job=\"txnlab-exporter\"} == 0 or absent(up{job=\"txnlab-exporter\"}) "
              "or kafkatxn_up == 0", "1m", "critical",
              "txnlab exporter down or not reaching Kafka",
              "Transaction, LSO and producer-state alerts are blind while this fires.",
              "txnlab cluster status; the exporter's /healthz and log"),
        alert("ExporterStale", f"time() - kafkatxn_collector_last_success_timestamp_seconds > {stale}", "1m",
              "warning", "Exporter collector {{ $labels.collector }} has not succeeded for over "
              f"{stale}s", "Cached transaction and producer-state series are stale.",
              "kafkatxn_collector_errors_total by error; the exporter's log")]


def rule_groups(knobs: Knobs = Knobs()) -> dict:
    return {"groups": [
        {"name": "txnlab-transactions", "rules": transaction_alerts()},
        {"name": "txnlab-producer-state", "rules": producer_state_alerts(knobs)},
        {"name": "txnlab-exporter", "rules": exporter_alerts(knobs)}]}


def render(knobs: Knobs = Knobs()) -> str:
    header = "# Generated by `python -m dashboards.build` from dashboards/rules.py: edit that, not this.\n"
    return header + yaml.safe_dump(rule_groups(knobs), sort_keys=False, width=120)
