"""Which local ports a plan may bind: the kernel's ephemeral range (where every outgoing connection takes its local
port) is off limits to a plan's servers. Kafka's (layout.py), the compose stack's and Spark's (spark_layout.py) port
plans are checked by this one rule. Light on purpose: the exporter's core install imports it (no requests, no yaml).
Must not: bind, connect or start anything.
"""
from __future__ import annotations

from pathlib import Path


def ephemeral_clash(first: int, last: int) -> str | None:
    """Why ports first..last cannot be a plan's on this machine (they overlap the kernel's ephemeral ports), or None."""
    low, high = ephemeral_range()
    if first <= high and last >= low:
        return (f"ports {first}-{last} overlap this machine's ephemeral range {low}-{high} (net.ipv4."
                "ip_local_port_range), from which every outgoing connection takes its local port: one held there "
                f"makes a server's bind fail. Choose a base port of at most {low - (last - first) - 1}")
    return None


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default when unreadable)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999
