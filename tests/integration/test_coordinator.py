"""Our coordinator lookup agrees with Kafka's own TransactionsCommand and with the hash rule; a coordinator tells
a transactional id it has from one it never had (ClusterAdmin.transactional_id_known)."""
from __future__ import annotations

import re

import pytest
from confluent_kafka import Producer

from cluster.access.admin import transaction_state_partition
from cluster.lab.java import run_tool

pytestmark = pytest.mark.kafka_core      # the version matrix's core (scripts/kafka_matrix.py)


def _describe_with_kafka_tool(bootstrap: str, txn_id: str) -> dict[str, str]:
    out = run_tool("org.apache.kafka.tools.TransactionsCommand",
                   ["--bootstrap-server", bootstrap, "describe", "--transactional-id", txn_id]).stdout
    header, row = [line for line in out.splitlines() if line.strip()][:2]
    return dict(zip(re.split(r"\s{2,}|\t", header.strip()), re.split(r"\s{2,}|\t", row.strip())))


def test_coordinator_of_matches_transactions_command(conn, admin):
    for i in range(6):
        txn_id = f"coord-check-{i}"
        producer = Producer(conn.confluent(**{"transactional.id": txn_id, "log_level": 3}))
        producer.init_transactions(60)
        ours = admin.coordinator_of(txn_id)
        theirs = _describe_with_kafka_tool(conn.bootstrap, txn_id)
        assert theirs["TransactionalId"] == txn_id
        assert int(theirs["CoordinatorId"]) == ours
        partition = transaction_state_partition(txn_id, 50)
        assert admin.leader_of("__transaction_state", partition) == ours
        assert admin.transactional_id_known(txn_id) is True     # what a zombie's heal asks until the id expires
    assert admin.transactional_id_known("coord-check-never-used") is False
