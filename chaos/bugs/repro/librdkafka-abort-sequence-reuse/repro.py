"""A standalone reproduction of librdkafka (2.16.0, through confluent-kafka) losing a committed transaction's record.

A transactional producer's Produce request to a partition is written to the leader, which appends it, but its answer
never comes back (the leader dies, a connection resets, an answer is lost). librdkafka times the request out,
treats the message as possibly persisted and queues it again for a retry (src/rdkafka_request.c,
rd_kafka_handle_Produce_error: actions Refresh,MsgPossiblyPersisted). The application now aborts the transaction:
rd_kafka_abort_transaction purges the partition's queues (rd_kafka_purge with RD_KAFKA_PURGE_F_ABORT_TXN), and
rd_kafka_toppar_purge_queues advances the partition's epoch base msgid by the number of purged messages
("advancing epoch base msgid ... due to N message(s) in aborted transaction") without looking at their status. No
epoch bump is asked for: only rd_kafka_txn_set_abortable_error_with_bump sets txn_requires_epoch_bump, and neither a
transport error nor a timed-out request nor a deliberate abort calls it. The next transaction's first batch to the
partition therefore carries the sequence number of the purged batch, under the same producer id and epoch. When it
holds as many records, the broker takes it for a retry of the batch it appended, drops it and answers with that
batch's offset. librdkafka reports the record delivered at an offset that holds the aborted transaction's record,
the transaction commits, and a read_committed consumer never sees the committed record.

The reproduction brings the lost answer about itself with Toxiproxy in front of the brokers' client listeners (one
proxy per broker, each broker advertising its proxy's address): while a transaction's record is sent to partition 0,
the proxy of that partition's leader drops everything the broker sends back (a `timeout` toxic, timeout 0,
downstream), for longer than socket.timeout.ms; the producer's own transaction coordinator is a different broker.

Usage: python repro.py --brokers HOST:PORT[,...] --toxiproxy http://HOST:PORT [--tries 3] [--topic NAME] [--debug]
It creates the topic (3 partitions, replication factor min(3, brokers)). Exit 1: the symptom was seen (a committed
record missing); 0: not seen; 2: the run itself failed. --debug writes librdkafka's eos,msg,protocol,broker,topic,queue
debug log to stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

SOCKET_TIMEOUT_MS = 3000
TOXIC = "librdkafka-repro-drop-answers"


class Failed(Exception):
    """The run itself could not be made (exit 2)."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, in 32-bit signed arithmetic."""
    data, h = text.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def wait(producer: Producer, seconds: float) -> None:
    """Serve the producer's callbacks for `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        producer.poll(max(0.0, end - time.monotonic()))


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


def proxy_of(url: str, host: str, port: int) -> str:
    for name, proxy in toxiproxy(url, "GET", "/proxies").items():
        if proxy["listen"].rsplit(":", 1)[1] == str(port):
            return name
    raise Failed(f"no Toxiproxy proxy listens on port {port} (the broker advertised {host}:{port})")


def read(brokers: str, topic: str, partitions: list[int], isolation: str) -> dict[int, dict[int, str]]:
    """Every record of the partitions up to their end, in one isolation level: {partition: {offset: value}}."""
    consumer = Consumer({"bootstrap.servers": brokers, "group.id": f"{topic}-check", "enable.auto.commit": False,
                         "isolation.level": isolation})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen: dict[int, dict[int, str]] = {p: {} for p in partitions}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen[message.partition()][message.offset()] = message.value().decode()
        positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in partitions])}
        if all(positions[p] >= ends[p] for p in partitions):   # read_committed: the position passes the markers
            break
    consumer.close()
    return seen


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--brokers", required=True)
    p.add_argument("--toxiproxy", required=True, help="Toxiproxy's API, whose proxies front the brokers")
    p.add_argument("--tries", type=int, default=3)
    p.add_argument("--topic", default=f"librdkafka-abort-sequence-reuse-{uuid.uuid4().hex[:8]}")
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()

    admin = AdminClient({"bootstrap.servers": args.brokers})
    brokers = admin.list_topics(timeout=30).brokers
    for future in admin.create_topics([NewTopic(args.topic, 3, min(3, len(brokers)))]).values():
        future.result(60)
    time.sleep(2)
    config = {"bootstrap.servers": args.brokers, "enable.idempotence": True, "linger.ms": 5,
              "socket.timeout.ms": SOCKET_TIMEOUT_MS, "transaction.timeout.ms": 60000}
    if args.debug:
        config["debug"] = "eos,msg,protocol,broker,topic,queue"
    for attempt in range(20):           # a transactional id whose coordinator does not lead partition 0
        txn_id = f"{args.topic}-{attempt}"
        producer = Producer({**config, "transactional.id": txn_id})
        producer.init_transactions(30)
        coordinator = transaction_coordinator(admin, txn_id)
        leaders = {n: m.leader for n, m in admin.list_topics(args.topic, timeout=30).topics[args.topic].partitions.items()}
        if leaders[0] != coordinator:
            break
        producer.flush(5)
    else:
        raise Failed("every transactional id tried had its coordinator on partition 0's leader")
    control = next((n for n in (1, 2) if leaders[n] != leaders[0]), 1)
    leader = brokers[leaders[0]]
    proxy = proxy_of(args.toxiproxy, leader.host, leader.port)
    print(f"topic {args.topic}: partition 0 led by broker {leaders[0]} (proxy {proxy}), control partition "
          f"{control} by broker {leaders[control]}; transactional id {txn_id}, coordinator broker {coordinator}")

    delivered: dict[str, tuple[int, int] | str] = {}

    def report(err, msg) -> None:
        delivered[msg.value().decode()] = str(err) if err is not None else (msg.partition(), msg.offset())

    producer.begin_transaction()        # a first transaction, so that the producer is connected to both leaders
    producer.produce(args.topic, b"warm-up", partition=0, on_delivery=report)
    producer.produce(args.topic, b"warm-up-control", partition=control, on_delivery=report)
    producer.commit_transaction(30)
    committed: list[str] = []
    for t in range(args.tries):
        producer.begin_transaction()
        toxiproxy(args.toxiproxy, "POST", f"/proxies/{proxy}/toxics",
                  {"name": TOXIC, "type": "timeout", "stream": "downstream", "toxicity": 1.0,
                   "attributes": {"timeout": 0}})
        try:
            producer.produce(args.topic, f"t{t}-aborted".encode(), partition=0, on_delivery=report)
            wait(producer, SOCKET_TIMEOUT_MS / 1000 * 2)      # the request is written, unanswered, then timed out
            for _ in range(3):                                  # abort_transaction may time out: call it again
                try:
                    producer.abort_transaction(10)
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
                    print(f"try {t}: abort_transaction: {exc.args[0].str()}; calling it again")
        finally:
            toxiproxy(args.toxiproxy, "DELETE", f"/proxies/{proxy}/toxics/{TOXIC}")
        producer.poll(0)
        print(f"try {t}: t{t}-aborted's delivery report: {delivered.get(f't{t}-aborted', 'none yet')}; "
              "transaction aborted")
        producer.begin_transaction()
        producer.produce(args.topic, f"t{t}-committed".encode(), partition=0, on_delivery=report)
        producer.produce(args.topic, f"t{t}-control".encode(), partition=control, on_delivery=report)
        producer.commit_transaction(30)
        committed.append(f"t{t}")
        print(f"try {t}: the next transaction sent t{t}-committed (partition 0, delivered at "
              f"{delivered.get(f't{t}-committed')}) and t{t}-control (partition {control}, delivered at "
              f"{delivered.get(f't{t}-control')}) and committed")
    producer.flush(10)

    seen = read(args.brokers, args.topic, [0, control], "read_committed")
    raw = read(args.brokers, args.topic, [0], "read_uncommitted")[0]
    values = {v: (n, o) for n, records in seen.items() for o, v in records.items()}
    missing = [f"{t}-committed" for t in committed if f"{t}-committed" not in values]
    controls = sum(f"{t}-control" in values for t in committed)
    print(f"read_committed read {len(seen[0]) - 1} records of partition 0 besides the warm-up one, and {controls} "
          f"of {len(committed)} control records of partition {control}")
    for value in missing:
        at = delivered.get(value)
        holds = raw.get(at[1]) if isinstance(at, tuple) else None
        print(f"record {value} of a committed transaction is missing: delivered at offset "
              f"{at[1] if isinstance(at, tuple) else at} of partition 0, which holds {holds!r}")
    if missing:
        print(f"SYMPTOM: {len(missing)} of {len(committed)} committed records missing for a read_committed consumer")
        return 1
    print(f"not seen: each of the {len(committed)} committed records read")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:        # noqa: BLE001 - the run itself failed (Failed, a client's error)
        print(f"the run failed: {exc!r}", file=sys.stderr)
        sys.exit(2)
