"""The workloads of clients other than confluent-kafka: a program of their own (Kafka's Java clients: Java, franz-go:
Go, KafkaJS: Node.js), built or installed at set-up (cluster/lab/clients.py), speaking docs/workload-protocol.md over
the run's socket.

Owns: the clients a transactional workload may run on (clients(): the reference confluent-kafka, then
cluster/lab/clients.py's CLIENTS), reading `--client` off a workload's arguments, and exec'ing the client's program
with the rest of them in this process (same pid: the runner stops, pauses and kills it as any workload).
Must not: translate what the program writes (it writes the history itself) or install anything.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

from chaos.workloads import TRANSACTIONAL_WORKLOADS
from cluster.lab.clients import CLIENTS, native_clients
from cluster.access.errors import TxnlabError

REFERENCE = "confluent"                     # the Python workloads (confluent-kafka, librdkafka)
CLIENT_OPTION = "--client"


class ClientError(TxnlabError, ValueError):
    """A client a workload cannot run on, or whose program is not installed."""


def clients() -> tuple[str, ...]:
    return (REFERENCE, *native_clients())


def split_client(workload: str, argv: list[str]) -> tuple[str, list[str]]:
    """The --client of a workload's arguments (last one wins; default the reference) and the others."""
    client, rest, i = REFERENCE, [], 0
    while i < len(argv):
        if argv[i] == CLIENT_OPTION and i + 1 < len(argv):
            client, i = argv[i + 1], i + 2
        elif argv[i].startswith(CLIENT_OPTION + "="):
            client, i = argv[i].split("=", 1)[1], i + 1
        else:
            rest.append(argv[i])
            i += 1
    check_client(workload, client)
    return client, rest


def check_client(workload: str, client: str) -> None:
    if client not in clients():
        raise ClientError(f"client {client!r}: one of {', '.join(clients())}")
    if client != REFERENCE and workload not in TRANSACTIONAL_WORKLOADS:
        raise ClientError(f"workload {workload!r} runs on {REFERENCE} only; {client} runs "
                          f"{', '.join(TRANSACTIONAL_WORKLOADS)}")


def prepare_client(client: str, progress: Callable[[str], None] = print) -> None:
    """The client's program built for its current sources (once, then a no-op: cluster/lab/clients.py), before a run
    starts anything that needs it."""
    if client != REFERENCE:
        CLIENTS[client].install(progress)


def exec_client(name: str, workload: str, argv: list[str]) -> None:
    """Replace this process with the client's program (never returns)."""
    client = CLIENTS[name]
    command = client.command()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], [*command, workload, *argv], {**os.environ, **client.environment()})
