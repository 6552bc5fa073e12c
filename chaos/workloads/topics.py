"""Topic facts workloads need: partition counts (read once at start)."""
from __future__ import annotations

from confluent_kafka.admin import AdminClient

from cluster.access.connection import ConnectionSettings
from cluster.access.errors import TxnlabError


LIST_TIMEOUT_S = 30.0


class TopicError(TxnlabError, ValueError):
    """A workload topic that does not exist."""


def partition_counts(conn: ConnectionSettings, topics: list[str], timeout: float = LIST_TIMEOUT_S) -> dict[str, int]:
    metadata = AdminClient(conn.confluent()).list_topics(timeout=timeout).topics
    missing = [t for t in topics if t not in metadata or metadata[t].error is not None]
    if missing:
        raise TopicError(f"topics {missing} do not exist (create them first, e.g. `txnlab chaos workload` does)")
    return {t: len(metadata[t].partitions) for t in topics}
