"""Workloads: processes that drive a cluster and record every operation in the run history.

Each module has `add_arguments(parser)` and `run(ctx, args)`; `python -m chaos.workloads NAME ...`
runs one (see base.py). WORKLOADS names them for the runner and the CLI.
The room: confluent/ (the reference client's workloads), one folder per other Kafka client (javaclient/,
franzgo/, kafkajs/: programs of their own, docs/workload-protocol.md; native.py execs them), the JVM
frameworks (streams.py with streams_app/, flink.py with flink_job/, java_copier.py, jvm.py), what all share (base.py,
topics.py), each workload's default plan (plans.py) and the run that hosts the processes (run.py).
Imports record/ only, besides itself.
"""
WORKLOADS = {
    "txn-producer": "chaos.workloads.confluent.txn_producer",
    "processor": "chaos.workloads.confluent.processor",
    "java-copier": "chaos.workloads.java_copier",
    "storm": "chaos.workloads.confluent.storm",
    "observer": "chaos.workloads.confluent.observer",
    "streams": "chaos.workloads.streams",
    "flink": "chaos.workloads.flink",
}
# The transactional roles: every client runs them (chaos/workloads/native.py), a zombie producer is one of them.
TRANSACTIONAL_WORKLOADS = ("txn-producer", "processor")
# The group protocols a run may put its groups on, each with the workloads whose group it is about: classic
# (JoinGroup/SyncGroup), consumer (KIP-848: a processor's consumer group), streams (KIP-1071: Kafka Streams' group).
GROUP_PROTOCOL_WORKLOADS = {"classic": ("processor", "streams"), "consumer": ("processor",), "streams": ("streams",)}
GROUP_PROTOCOLS = tuple(GROUP_PROTOCOL_WORKLOADS)
# Every client's own log level for the workloads (docs/clients.md): error by default; info or debug raise it.
CLIENT_LOG_VARIABLE = "TXNLAB_CLIENT_LOG"
# The clients whose processors cannot take the consumer protocol, and why.
NO_CONSUMER_PROTOCOL = {"kafkajs": "KafkaJS 2.2.4, its last release, speaks JoinGroup and SyncGroup only"}
