"""Human-readable views of the local cluster: the status table, log tails, the smoke summary.

Owns: presentation only; the data comes from LocalCluster.status() and the node log files.
"""
from __future__ import annotations

from collections import deque

from rich.console import Console
from rich.table import Table

from cluster.access.connection import ConnectionSettings
from cluster.lab.layout import ClusterLayout
from cluster.access.reads import committed_and_aborted

HEALTH_STYLE = {"up": "green", "paused": "yellow", "down": "red", "unregistered": "yellow"}


def print_status(status: dict, console: Console) -> None:
    table = Table(title=f"txnlab cluster {status['cluster_id'] or '(never started)'}, Kafka {status['kafka_version']}")
    for column in ("node", "pid", "health", "controller", "client", "jmx"):
        table.add_column(column)
    for node in status["nodes"]:
        style = HEALTH_STYLE.get(node["health"], "white")
        table.add_row(str(node["node"]), str(node["pid"] or "-"), f"[{style}]{node['health']}[/]",
                      "active" if node["active_controller"] else "", str(node["ports"]["client"]),
                      str(node["ports"]["jmx"]))
    console.print(table)
    for name in ("toxiproxy", "prometheus", "exporter"):
        svc = status[name]
        console.print(f"{name}: {svc['health']} (pid {svc['pid'] or '-'}, port {svc['port']})")
    console.print(f"bootstrap: {status['bootstrap']}")


def tail_logs(layout: ClusterLayout, node: int | None, lines: int) -> str:
    nodes = [node] if node else layout.node_ids
    out = []
    for n in nodes:
        path = layout.node_dir(n) / "logs" / "server.log"
        out.append(f"==> {path} <==\n")
        try:
            with open(path, errors="replace") as fh:
                out.extend(deque(fh, maxlen=lines))
        except FileNotFoundError:
            out.append("(no log yet)\n")
    return "".join(out)


def smoke_summary(conn: ConnectionSettings, console: Console, transactions: int = 20) -> dict:
    """Run the commit/abort smoke workload and print what each isolation level saw."""
    result = committed_and_aborted(conn, transactions)
    table = Table(title="transactional smoke workload")
    table.add_column("what")
    table.add_column("count", justify="right")
    for key, value in result.items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)
    return result
