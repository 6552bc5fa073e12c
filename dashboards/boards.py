"""The Grafana dashboards, as code (grafana-foundation-sdk, Grafana 11.6 schema), rendered to grafana/*.json.

Owns: the four dashboards and every panel query: Transactions (LSO lag, stuck LSOs, open and hanging
transactions with their abort coordinates, coordinator states), Producer state (exporter beside the
brokers' JMX ProducerIdCount, growth, projection to the expiry horizon, top partitions), Exporter
health, and Chaos run (workload rates, LSO lag, open/hanging transactions, alerts; fault windows as
annotations tagged `txnlab-fault`). All are templated by datasource, cluster (the `cluster` label the
Prometheus scrape configs set) and topic.
Must not: import anything of txnlab's outside dashboards/ (it knows metric names only).
"""
from __future__ import annotations

import json

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from dashboards.rules import EPOCH_WARNING, PRODUCER_EPOCH_MAX, expiry, max_timeout

DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'cluster=~"$cluster"'
TSEL = 'cluster=~"$cluster", topic=~"$topic"'
MAX_TIMEOUT, EXPIRY = max_timeout(SEL), expiry(SEL)


# ---- building blocks -----------------------------------------------------------------------------------
def query(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        q = q.legend_format(legend)
    return q.instant().format(PromQueryFormat.TABLE) if instant else q.range()


def series(title: str, targets: list[prometheus.Dataquery], unit: str = "short", w: int = 12, h: int = 8,
           description: str = "") -> timeseries.Panel:
    panel = timeseries.Panel().title(title).datasource(DS).unit(unit).span(w).height(h).description(description)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def single(title: str, expr: str, unit: str = "short", w: int = 6, description: str = "") -> stat.Panel:
    return stat.Panel().title(title).datasource(DS).unit(unit).span(w).height(4).description(description) \
        .with_target(query(expr))


def rows(title: str, expr: str, unit: str = "short", w: int = 24, h: int = 8, description: str = "") -> table.Panel:
    return table.Panel().title(title).datasource(DS).unit(unit).span(w).height(h).description(description) \
        .with_target(query(expr, instant=True))


def board(uid: str, title: str, description: str, panels: list, topic: bool = True) -> gd.Dashboard:
    dash = gd.Dashboard(title).uid(uid).description(description).tags(["txnlab", "kafka", "transactions"]) \
        .time("now-30m", "now").refresh("30s").timezone("browser").editable() \
        .with_variable(gd.DatasourceVariable("datasource").label("Prometheus").type("prometheus")) \
        .with_variable(_label_variable("cluster", "kafkatxn_up", "cluster"))
    if topic:
        dash = dash.with_variable(_label_variable("topic", f"kafkatxn_partition_lso_lag{{{SEL}}}", "topic"))
    for panel in panels:
        dash = dash.with_row(panel) if isinstance(panel, gd.Row) else dash.with_panel(panel)
    return dash


def _label_variable(name: str, metric: str, label: str) -> gd.QueryVariable:
    return gd.QueryVariable(name).label(name.capitalize()).datasource(DS) \
        .query(f"label_values({metric}, {label})").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED) \
        .multi(True).include_all(True).all_value(".*")


# ---- the dashboards -----------------------------------------------------------------------------------
def transactions() -> gd.Dashboard:
    return board("txnlab-transactions", "txnlab / Transactions",
                 "LSO lag, stuck LSOs, open and hanging transactions, coordinator states (txnlab exporter).", [
        single("Hanging transactions", f"sum(kafkatxn_hanging_transactions{{{TSEL}}}) or vector(0)",
               description="Confirmed on two looks: an open transaction its coordinator does not track."),
        single("Partitions with LSO lag", f"count(kafkatxn_partition_lso_lag{{{TSEL}}} > 0) or vector(0)"),
        single("Open transactions (partitions)", f"sum(kafkatxn_topic_open_transactions{{{TSEL}}}) or vector(0)"),
        single("Oldest Ongoing transaction", f'time() - min(kafkatxn_transaction_oldest_start_timestamp_seconds'
               f'{{{SEL}, state="Ongoing"}})', unit="s"),
        series("LSO lag by partition", [query(f"kafkatxn_partition_lso_lag{{{TSEL}}} > 0", "{{topic}}-{{partition}}")],
               description="HWM - LSO: records read_committed consumers cannot read yet."),
        series("Partitions with a stuck LSO: seconds since it last advanced", [query(
            f"(time() - kafkatxn_partition_lso_last_advance_timestamp_seconds{{{TSEL}}}) "
            f"and on(topic, partition) (kafkatxn_partition_lso_lag{{{TSEL}}} > 0)", "{{topic}}-{{partition}}"),
            query(MAX_TIMEOUT, "transaction.max.timeout.ms", "B")], unit="s"),
        rows("Hanging transactions: abort coordinates (txnlab txn abort --topic T --partition P --producer-id ID)",
             f"kafkatxn_hanging_transaction_info{{{TSEL}}} * 1000", unit="dateTimeAsIso",
             description="Value: the producer's last write (Grafana dates are in ms). Abort with `txnlab txn abort`, or run `txnlab txn hanging`."),
        series("Open transactions by topic", [query(f"sum by (topic) (kafkatxn_topic_open_transactions{{{TSEL}}})",
                                                    "{{topic}}"),
                                              query(f"sum by (topic) (kafkatxn_late_transactions{{{TSEL}}})",
                                                    "late {{topic}}", "B")]),
        series("Coordinator transaction states", [query(f"sum by (state) (kafkatxn_transactions{{{SEL}}})", "{{state}}"),
                                                  query(f"sum(kafkatxn_transactions_over_timeout{{{SEL}}})",
                                                        "over their timeout", "B"),
                                                  query(f"sum(kafkatxn_transactions_near_timeout{{{SEL}}})",
                                                        "past half their timeout", "C"),
                                                  query(f"sum(kafkatxn_transactions_prepare_over_timeout{{{SEL}}})",
                                                        "in Prepare past their timeout", "D")]),
        series("Consumer groups with members: seconds since their committed offsets last moved",
               [query(f"(time() - kafkatxn_consumergroup_offsets_last_advance_timestamp_seconds{{{SEL}}}) "
                      f"and on(group) (kafkatxn_consumergroup_active{{{SEL}}} == 1)", "{{group}}")], unit="s",
               description="Back to 0 whenever the offsets move or nothing is readable past them."),
        series("Consumer groups: offsets carried by unended transactions, and failing commits",
               [query(f"kafkatxn_consumergroup_pending_offset_partitions{{{SEL}}}", "{{group}} pending partitions"),
                query(f"kafkatxn_consumergroup_commits_failing{{{SEL}}}", "{{group}} commits failing", "B")],
               description="Offsets that transactions keep carrying and that never land, while the offsets stand "
                           "still: the group's exactly-once commits keep failing (GroupCommitsFailing)."),
        series("Consumer-protocol groups (KIP-848): members, and members still reconciling",
               [query(f"kafkatxn_consumergroup_members{{{SEL}}}", "{{group}} members"),
                query(f"kafkatxn_consumergroup_members_reconciling{{{SEL}}}", "{{group}} reconciling", "B")],
               description="A member below the assignment epoch has not yet taken the assignment computed for it; "
                           "one that stays there holds partitions unread (ConsumerGroupDescribe)."),
    ])


def producer_state() -> gd.Dashboard:
    jmx = f"sum by (instance) (kafka_server_replicamanager_produceridcount{{{SEL}}})"
    exported = f"sum by (broker) (kafkatxn_broker_active_producers{{{SEL}}})"
    return board("txnlab-producer-state", "txnlab / Producer state",
                 "Producer ids held by brokers: growth until expiry is a heap risk (KIP-854, KIP-936).", [
        series("Active producers by broker (exporter)", [query(exported, "broker {{broker}}")]),
        series("ProducerIdCount by broker (JMX)", [query(jmx, "{{instance}}")]),
        series("Growth rate (producer ids / s)", [query(f"deriv(kafkatxn_broker_active_producers{{{SEL}}}[10m])",
                                                        "broker {{broker}}")]),
        series("Projected at the expiry horizon (producer.id.expiration.ms)",
               [query(f"predict_linear(kafkatxn_broker_active_producers{{{SEL}}}[30m], {EXPIRY})", "broker {{broker}}")]),
        rows("Top partitions by active producers", f"topk(10, kafkatxn_partition_active_producers{{{TSEL}}})"),
        single("Oldest producer state (s since last write)",
               f"time() - min(kafkatxn_partition_oldest_producer_timestamp_seconds{{{TSEL}}})", unit="s"),
        series(f"Highest producer epoch (the producer id rotates at {PRODUCER_EPOCH_MAX})", [
            query(f"max by (topic) (kafkatxn_topic_max_producer_epoch{{{TSEL}}})", "{{topic}}"),
            query(f"max(kafkatxn_transaction_max_producer_epoch{{{SEL}}})", "transactional ids in progress", "B")],
            w=18, description=f"ProducerEpochNearExhaustion warns above {EPOCH_WARNING}. Under transaction.version 2 "
            "every transaction end bumps the epoch; a partition keeps a rotated producer id's epoch until that id "
            "expires (producer.id.expiration.ms)."),
    ])


def exporter_health() -> gd.Dashboard:
    return board("txnlab-exporter", "txnlab / Exporter health", "Is the txnlab exporter seeing the cluster?", [
        single("Exporter reaches Kafka", f"min(kafkatxn_up{{{SEL}}})"),
        single("Collectors up", f"sum(kafkatxn_collector_up{{{SEL}}})"),
        single("Producer scan coverage", f'sum(kafkatxn_producer_scan_partitions{{{SEL}, result="scanned"}}) / '
               f'sum(kafkatxn_producer_scan_partitions{{{SEL}}})', unit="percentunit"),
        single("Seconds since the oldest collector success",
               f"time() - min(kafkatxn_collector_last_success_timestamp_seconds{{{SEL}}})", unit="s"),
        series("Collector duration", [query(f"kafkatxn_collector_duration_seconds{{{SEL}}}", "{{collector}}")], unit="s"),
        series("Collector errors per second", [query(
            f"sum by (collector, error) (rate(kafkatxn_collector_errors_total{{{SEL}}}[5m])) "
            f"or sum by (collector) (0 * kafkatxn_collector_up{{{SEL}}})", "{{collector}} {{error}}")]),
    ], topic=False)


def chaos_run() -> gd.Dashboard:
    dash = board("txnlab-chaos", "txnlab / Chaos run",
                 "A chaos experiment as it runs: workload rates, LSO lag, transactions, alerts; fault windows "
                 "are annotations tagged txnlab-fault.", [
        series("Records written per second by topic", [query(
            f"sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesinpersec_total{{{TSEL}}}[1m]))", "{{topic}}")],
            unit="wps", w=24),
        series("Max LSO lag by topic", [query(f"max by (topic) (kafkatxn_partition_lso_lag{{{TSEL}}})", "{{topic}}")]),
        series("Open and hanging transactions", [
            query(f"sum(kafkatxn_topic_open_transactions{{{TSEL}}})", "open"),
            query(f"sum(kafkatxn_hanging_transactions{{{TSEL}}}) or vector(0)", "hanging", "B")]),
        series("Alerts pending and firing", [query('sum by (alertname, alertstate) (ALERTS{alertname=~"HangingTransaction|'
                                                   'LSOStuck|OpenTransactionTooOld|ProducerStateGrowth|Coordinator.*|'
                                                   'TransactionMarkerQueue|Exporter.*"})', "{{alertname}} {{alertstate}}")]),
        series("Active producers", [query(f"sum(kafkatxn_broker_active_producers{{{SEL}}})", "producer ids")]),
    ])
    return dash.annotation(gd.AnnotationQuery().name("Faults").datasource(DataSourceRef(type_val="grafana", uid="-- Grafana --"))
                           .enable(True).icon_color("rgba(255, 96, 96, 0.4)")
                           .target(gd.AnnotationTarget().limit(200).match_any(True).tags(["txnlab-fault"]).type("tags")))


BOARDS = {"transactions": transactions, "producer-state": producer_state, "exporter-health": exporter_health,
          "chaos-run": chaos_run}


def render(name: str) -> str:
    return json.dumps(BOARDS[name]().build(), cls=JSONEncoder, sort_keys=True, indent=2) + "\n"
