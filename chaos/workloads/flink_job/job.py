"""The flink workload's job: a PyFlink DataStream program, Flink's exactly-once Kafka pipeline as teams write it.
Run by `flink run -py` (chaos/workloads/flink.py) with the Flink install's Python, not txnlab's: it imports
nothing of txnlab.

  KafkaSource (read_committed, the group's committed offsets, else the earliest; offsets committed to the
  group when a checkpoint completes) over the keyed input topics (txn-producer --keys writes them)
  -> key: "k" + CRC-32(id) mod --keys, as the feeder chose it (chaos/workloads/confluent/txn_producer.py key_number)
  -> per key (keyed state, checkpointed every --checkpoint-ms): for each input two records
       --output  {"input": <input id>, "instance": "subtask-<i>" (process mode; thread mode: "flink")}
       --counts  {"key", "count", "sum", "input"}   the running count and sum (amount: 1 + the index the
                                                    input's id ends with), as the Kafka Streams app's
  -> KafkaSink, DeliveryGuarantee.EXACTLY_ONCE: one transaction per subtask and checkpoint, pre-committed
     when the checkpoint is taken, committed when it completes; transactional ids "<--txn-prefix>-<subtask>-
     <n>"; transaction.timeout.ms from --transaction-timeout-ms; each sink subtask writes one partition
     (FlinkFixedPartitioner), so a key's updates stay in one partition in order.
An input record whose value carries no id: its output names input null and it is not counted.
The connection's settings come in a properties file (--properties, 0600, written by the workload); the shaded
connector's JAAS login modules are named with its shaded package.
"""
import argparse
import json
import zlib

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import CheckpointingMode, KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.connectors.kafka import (DeliveryGuarantee, KafkaOffsetResetStrategy, KafkaOffsetsInitializer,
                                                 KafkaRecordSerializationSchema, KafkaSink, KafkaSource)
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.java_gateway import get_gateway

SHADED = "org.apache.flink.kafka.shaded."


def arguments():
    p = argparse.ArgumentParser(prog="txnlab flink job")
    p.add_argument("--name", required=True)
    p.add_argument("--inputs", required=True, help="comma-separated input topics")
    p.add_argument("--output", required=True)
    p.add_argument("--counts", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--txn-prefix", required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--checkpoint-ms", type=int, required=True)
    p.add_argument("--transaction-timeout-ms", type=int, required=True)
    p.add_argument("--properties", required=True)
    p.add_argument("--jar", required=True)
    return p.parse_args()


def read_properties(path):
    props = {}
    with open(path) as handle:
        for line in handle:
            key, sep, value = line.rstrip("\n").partition("=")
            if sep and key:
                props[key] = value.replace("org.apache.kafka.common.security.", SHADED + "org.apache.kafka.common.security.") \
                    if key == "sasl.jaas.config" else value
    return props


def key_of(input_id, keys):
    return "k%d" % (zlib.crc32(input_id.encode()) % keys)


def amount(input_id):
    index = input_id.rsplit(".", 1)[-1]
    return 1 + int(index) if index.isdigit() else 0


class Count(KeyedProcessFunction):
    def open(self, ctx: RuntimeContext):
        self.state = ctx.get_state(ValueStateDescriptor("counts", Types.PICKLED_BYTE_ARRAY()))
        try:
            self.instance = "subtask-%d" % ctx.get_index_of_this_subtask()
        except AttributeError:      # PyFlink 2.2.1 in thread mode: its Java context lacks getIndexOfThisSubtask
            self.instance = "flink"

    def process_element(self, value, ctx):
        key, input_id = value
        yield json.dumps({"input": input_id, "instance": self.instance}, separators=(",", ":"))
        if input_id is None:
            return
        count, total = self.state.value() or (0, 0)
        count, total = count + 1, total + amount(input_id)
        self.state.update((count, total))
        yield json.dumps({"key": key, "count": count, "sum": total, "input": input_id}, separators=(",", ":"))


def main():
    a = arguments()
    props = read_properties(a.properties)
    bootstrap = props.pop("bootstrap.servers")

    def parse(text):
        try:
            input_id = json.loads(text).get("id")
        except (ValueError, AttributeError):
            input_id = None
        input_id = input_id if isinstance(input_id, str) else None
        return (key_of(input_id, a.keys) if input_id else "", input_id)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_jars("file://" + a.jar)
    env.enable_checkpointing(a.checkpoint_ms, CheckpointingMode.EXACTLY_ONCE)
    source = KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics(*a.inputs.split(",")) \
        .set_group_id(a.group) \
        .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets(KafkaOffsetResetStrategy.EARLIEST)) \
        .set_value_only_deserializer(SimpleStringSchema()) \
        .set_property("isolation.level", "read_committed").set_property("commit.offsets.on.checkpoint", "true")
    counts_prefix = '{"key"'
    serializer = KafkaRecordSerializationSchema.builder() \
        .set_topic_selector(lambda text: a.counts if text.startswith(counts_prefix) else a.output) \
        .set_value_serialization_schema(SimpleStringSchema())
    partitioner = get_gateway().jvm.org.apache.flink.streaming.connectors.kafka.partitioner.FlinkFixedPartitioner()
    serializer._j_builder.setPartitioner(partitioner)     # PyFlink's builder has no setter of its own
    sink = KafkaSink.builder().set_bootstrap_servers(bootstrap).set_record_serializer(serializer.build()) \
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).set_transactional_id_prefix(a.txn_prefix) \
        .set_property("transaction.timeout.ms", str(a.transaction_timeout_ms))
    for key, value in props.items():
        source = source.set_property(key, value)
        sink = sink.set_property(key, value)
    env.from_source(source.build(), WatermarkStrategy.no_watermarks(), "inputs") \
        .map(parse, output_type=Types.TUPLE([Types.STRING(), Types.STRING()])) \
        .key_by(lambda pair: pair[0], key_type=Types.STRING()) \
        .process(Count(), output_type=Types.STRING()) \
        .sink_to(sink.build())
    env.execute_async(a.name)


if __name__ == "__main__":
    main()
