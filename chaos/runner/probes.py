"""Steady-state probes of an experiment: PromQL against Prometheus, and direct admin checks.

Owns: evaluating probes (a phase's probes together), each polled for up to `within_s` until it has held
for `for_s` seconds (`expect` is checked by the spec's Probe.holds), `{tag}` in PromQL, and the admin
probes:
  brokers-registered        every node of the cluster is a registered broker
  lso-equals-hwm            on every topic of the run, LSO == HWM (no open transaction left)
  no-hanging-transactions   no transaction on the run's topics stays open (same producer, same first
                            offset, DescribeProducers) across two looks HANGING_CONFIRM_S apart: the
                            workloads' own short transactions are not hanging ones
Must not: change the cluster (probes only read), or import exporter/ (PromQL reads its series).
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from kafka.structs import TopicPartition

from chaos.nemesis.fault_kinds import with_tag
from cluster.access.admin import ClusterAdmin
from cluster.access.connection import ConnectionSettings
from cluster.access.reads import partition_ends
from cluster.lab.prometheus import Prometheus
from cluster.access.waiting import Deadline
from cluster.access.errors import TxnlabError

ERROR_GRACE_S = 10.0           # how long a probe that errors (rather than fails) is retried at least
HANGING_CONFIRM_S = 5.0        # an open transaction seen again this much later is held, not in flight


class ProbeError(TxnlabError, ValueError):
    """A probe that cannot be evaluated (unknown admin probe, no Prometheus configured)."""


@dataclass
class ProbeResult:
    name: str
    ok: bool
    observed: object
    detail: str = ""
    checked_at: float = field(default_factory=time.time)


def admin_check(kind: str, conn: ConnectionSettings, nodes: list[int], topics: list[str]) -> tuple[bool, object]:
    if kind == "brokers-registered":
        with ClusterAdmin(conn) as admin:
            registered = admin.registered_brokers()
        return sorted(registered) == sorted(nodes), registered
    if kind == "lso-equals-hwm":
        stuck = open_partitions(conn, topics)
        return not stuck, stuck
    if kind == "no-hanging-transactions":
        held = held_transactions(conn, topics)
        return not held, held
    raise ProbeError(f"unknown admin probe {kind!r}")


def open_partitions(conn: ConnectionSettings, topics: list[str]) -> list[str]:
    """Partitions of `topics` whose LSO is behind the HWM."""
    from chaos.workloads.topics import partition_counts
    stuck = []
    for topic, n in partition_counts(conn, topics).items():
        ends = partition_ends(conn, topic, list(range(n)))
        stuck += [f"{topic}-{p}" for p in range(n) if ends[str(p)]["lso"] < ends[str(p)]["hwm"]]
    return stuck


def held_transactions(conn: ConnectionSettings, topics: list[str], confirm_s: float = HANGING_CONFIRM_S,
                      sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    """Open transactions on `topics` still open, unchanged, `confirm_s` after they were first seen."""
    first = open_transactions(conn, topics)
    if not first:
        return []
    sleep(confirm_s)
    again = {(t["partition"], t["producer_id"], t["start_offset"]) for t in open_transactions(conn, topics)}
    return [t for t in first if (t["partition"], t["producer_id"], t["start_offset"]) in again]


def open_transactions(conn: ConnectionSettings, topics: list[str]) -> list[dict]:
    from chaos.workloads.topics import partition_counts
    tps = [TopicPartition(t, p) for t, n in partition_counts(conn, topics).items() for p in range(n)]
    if not tps:
        return []
    with ClusterAdmin(conn) as admin:
        states = admin.client.describe_producers(tps)
    return [{"partition": f"{tp.topic}-{tp.partition}", "producer_id": p.producer_id,
             "start_offset": p.current_transaction_start_offset}
            for tp, state in states.items() for p in state.active_producers if p.current_transaction_start_offset >= 0]


def evaluate_all(probes: list, conn: ConnectionSettings, nodes: list[int], topics: list[str],
                 prometheus_url: str | None, tag: str) -> list[ProbeResult]:
    """A phase's probes, evaluated at the same time."""
    if not probes:
        return []
    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        return list(pool.map(lambda p: evaluate(p, conn, nodes, topics, prometheus_url, tag), probes))


def evaluate(probe, conn: ConnectionSettings, nodes: list[int], topics: list[str], prometheus_url: str | None,
             tag: str = "") -> ProbeResult:
    """Poll the probe for up to within_s until it has held for for_s."""
    try:
        check = _checker(probe, conn, nodes, topics, prometheus_url, tag)
    except ProbeError as exc:
        return ProbeResult(probe.name, False, None, str(exc))
    grace, deadline = Deadline(ERROR_GRACE_S), Deadline(probe.for_s + probe.within_s)
    held_since, observed = None, None
    while True:
        failed = False
        try:
            ok, observed = check()
        except Exception as exc:  # noqa: BLE001 - a Kafka or Prometheus error is "does not hold yet"
            ok, observed, failed = False, f"{type(exc).__name__}: {exc}", True
        now = time.monotonic()
        if failed and not grace.expired:
            time.sleep(1.0)                      # a transient error (a fresh topic's leader) is asked again
            continue
        held_since = (held_since or now) if ok else None
        if held_since is not None and now - held_since >= probe.for_s:
            return ProbeResult(probe.name, True, observed)
        if deadline.expired:
            return ProbeResult(probe.name, False, observed, f"did not hold for {probe.for_s:.0f}s within "
                                                            f"{deadline.seconds:.0f}s")
        time.sleep(1.0)


def _checker(probe, conn, nodes, topics, prometheus_url, tag) -> Callable[[], tuple[bool, object]]:
    if probe.admin:
        return lambda: admin_check(probe.admin, conn, nodes, topics)
    if not prometheus_url:
        raise ProbeError(f"probe {probe.name!r} needs Prometheus (cluster.existing.prometheus_url)")
    query, prometheus = with_tag(probe.promql, tag), Prometheus(prometheus_url)

    def check() -> tuple[bool, object]:
        values = prometheus.values(query)
        return probe.holds(values), values
    return check
