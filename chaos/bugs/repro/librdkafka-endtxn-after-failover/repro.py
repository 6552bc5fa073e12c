"""A standalone reproduction of librdkafka (2.16.0, through confluent-kafka) made fatal by an abort: EndTxn(ABORT) for a
transaction whose partitions its coordinator never registered, answered INVALID_TXN_STATE.

A transactional producer commits a transaction (its coordinator then holds the transactional id in CompleteCommit),
begins the next one and produces a record. librdkafka sends AddPartitionsToTxn for the record's partition, but the
request never reaches the coordinator (the coordinator unreachable: its broker died, a network partition, a request
lost). librdkafka counts an AddPartitionsToTxn as registered once it is sent and keeps the count whatever the request's
fate (src/rdkafka_txnmgr.c, rd_kafka_txn_handle_AddPartitionsToTxn: it cannot tell whether the request was received).
The record cannot be sent without its partition registered; it times out, the transaction must be aborted, and the
application calls abort_transaction() once the coordinator answers again. librdkafka sends EndTxn(ABORT) because
it counted a registered partition; the coordinator, whose transaction is the committed one, answers
INVALID_TXN_STATE (an ABORT in CompleteCommit), which librdkafka treats as fatal: the producer must be closed and
made again. Kafka's Java producer sends EndTxn only after an AddPartitionsToTxn succeeded (KAFKA-5260).

The reproduction brings the unreachable coordinator about itself with Toxiproxy in front of the brokers' client
listeners (one proxy per broker, each broker advertising its proxy's address): while the second transaction's
record waits, the proxy of the producer's transaction coordinator drops every request sent to it (a `timeout`
toxic, timeout 0, upstream); the record's partition is led by another broker.

Usage: python repro.py --brokers HOST:PORT[,...] --toxiproxy http://HOST:PORT [--tries 3] [--topic NAME] [--debug]
It creates the topic (3 partitions, replication factor min(3, brokers)). Exit 1: the symptom was seen (the abort
fatal with INVALID_TXN_STATE); 0: not seen; 2: the run itself failed. --debug writes librdkafka's eos,protocol,broker
debug log to stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

SOCKET_TIMEOUT_MS = 3000
TRANSACTION_TIMEOUT_MS = 6000       # a message waits at most this long (message.timeout.ms is capped at it)
TOXIC = "librdkafka-repro-drop-requests"


class Failed(Exception):
    """The run itself could not be made (exit 2)."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, in 32-bit signed arithmetic."""
    data, h = text.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def transaction_coordinator(admin: AdminClient, transactional_id: str) -> int:
    """Kafka's rule (TransactionStateManager.partitionFor): the leader of __transaction_state partition
    abs(transactional_id.hashCode()) % its partition count."""
    partitions = admin.list_topics("__transaction_state", timeout=30).topics["__transaction_state"].partitions
    h = java_string_hash(transactional_id)
    return partitions[0 if h == -(1 << 31) else abs(h) % len(partitions)].leader


def toxiproxy(url: str, method: str, path: str, body: dict | None = None) -> object:
    request = urllib.request.Request(url.rstrip("/") + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def proxy_of(url: str, port: int) -> str:
    for name, proxy in toxiproxy(url, "GET", "/proxies").items():
        if proxy["listen"].rsplit(":", 1)[1] == str(port):
            return name
    raise Failed(f"no Toxiproxy proxy listens on port {port}")


def wait(producer: Producer, seconds: float) -> None:
    """Serve the producer's callbacks for `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        producer.poll(max(0.0, end - time.monotonic()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", required=True)
    p.add_argument("--toxiproxy", required=True, help="Toxiproxy's API, whose proxies front the brokers")
    p.add_argument("--tries", type=int, default=3)
    p.add_argument("--topic", default=f"librdkafka-endtxn-after-failover-{uuid.uuid4().hex[:8]}")
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()

    admin = AdminClient({"bootstrap.servers": args.brokers})
    brokers = admin.list_topics(timeout=30).brokers
    for future in admin.create_topics([NewTopic(args.topic, 3, min(3, len(brokers)))]).values():
        future.result(60)
    time.sleep(2)
    leaders = {n: m.leader for n, m in admin.list_topics(args.topic, timeout=30).topics[args.topic].partitions.items()}
    config = {"bootstrap.servers": args.brokers, "enable.idempotence": True, "linger.ms": 5,
              "socket.timeout.ms": SOCKET_TIMEOUT_MS, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS}
    if args.debug:
        config["debug"] = "eos,protocol,broker"
    seen = 0
    for t in range(args.tries):
        txn_id = f"{args.topic}-{t}"
        producer = Producer({**config, "transactional.id": txn_id})
        producer.init_transactions(30)
        coordinator = transaction_coordinator(admin, txn_id)
        partition = next((n for n, leader in sorted(leaders.items()) if leader != coordinator), None)
        if partition is None:
            raise Failed(f"every partition of {args.topic} is led by broker {coordinator}, the coordinator")
        proxy = proxy_of(args.toxiproxy, brokers[coordinator].port)
        producer.begin_transaction()                     # a committed transaction: the coordinator's CompleteCommit
        producer.produce(args.topic, f"t{t}-committed".encode(), partition=partition)
        producer.commit_transaction(30)
        reports: list[str] = []
        toxiproxy(args.toxiproxy, "POST", f"/proxies/{proxy}/toxics",
                  {"name": TOXIC, "type": "timeout", "stream": "upstream", "toxicity": 1.0, "attributes": {"timeout": 0}})
        try:
            producer.begin_transaction()
            producer.produce(args.topic, f"t{t}-aborted".encode(), partition=partition,
                             on_delivery=lambda err, msg, got=reports: got.append(str(err) if err else f"offset {msg.offset()}"))
            wait(producer, TRANSACTION_TIMEOUT_MS / 1000 + 2)     # AddPartitionsToTxn unanswered, the record times out
        finally:
            toxiproxy(args.toxiproxy, "DELETE", f"/proxies/{proxy}/toxics/{TOXIC}")
        print(f"try {t}: transactional id {txn_id} (coordinator broker {coordinator}, proxy {proxy}), partition "
              f"{partition} led by broker {leaders[partition]}; the second transaction's record: "
              f"{reports[0] if reports else 'no delivery report'}")
        try:
            producer.abort_transaction(30)
            print(f"try {t}: abort_transaction() returned: the producer goes on")
            producer.begin_transaction()
            producer.produce(args.topic, f"t{t}-after".encode(), partition=partition)
            producer.commit_transaction(30)
            print(f"try {t}: a third transaction committed")
        except KafkaException as exc:
            err = exc.args[0]
            print(f"try {t}: abort_transaction() failed: {err.name()}: {err.str()} (fatal: {err.fatal()})")
            if err.fatal() and "INVALID_TXN_STATE" in f"{err.name()} {err.str()}":
                seen += 1
    if seen:
        print(f"SYMPTOM: in {seen} of {args.tries} tries the abort was fatal, INVALID_TXN_STATE")
        return 1
    print(f"not seen: every abort of the {args.tries} tries returned")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:        # noqa: BLE001 - the run itself failed (Failed, a client's error)
        print(f"the run failed: {exc!r}", file=sys.stderr)
        sys.exit(2)
