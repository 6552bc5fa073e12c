// The exactly-once processor (plan processor; chaos/workloads/processor.py is the reference), written the way
// Kafka's docs describe consume-transform-produce: a KafkaConsumer in a group (read_committed, no auto-commit), and
// each poll of at most --batch records one transaction of the KafkaProducer: one output per input (partition =
// input partition mod output partitions), the batch's offsets (last + 1 per partition) sent with
// sendOffsetsToTransaction(offsets, consumer.groupMetadata()) (KIP-447: a stale member's commit is refused), then
// commitTransaction. After a `fail` or `info` it rewinds every partition of the batch the consumer still owns to the
// group's committed offset (consumer.committed; the beginning when none), so the batch is read again.
// History: init, process invoke {attempt, producer, txn_id, group, inputs: [{topic, partition, offset, id}],
// writes: [{topic, partition, id, input}], commit_offsets: [{topic, partition, offset}]} / ok (+ offsets) | fail |
// info, and `seek` observations {isolation, reason: assigned | revoked | rewind, positions: [{topic, partition,
// offset|null}]} where its polls start over (the rebalance listener's; a rewind's committed offsets).
// A rewind whose committed offsets cannot be read: `rewind-error` per try, then `workload-error` {error, action:
// "rejoin the group"} and the consumer subscribes again (never reads on past an aborted batch).
// Must not: auto-commit offsets, or process a record outside a transaction.
package dev.txnlab.workloads;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;

import dev.txnlab.workloads.Main.Args;
import dev.txnlab.workloads.Main.Ctx;

final class Processor extends Txn.Client {
    static final Map<String, Integer> ARGS = Map.of("--inputs", -1, "--output", 1, "--group", 1, "--batch", 1,
            "--size", 1, "--group-protocol", 1);
    static final String F = "process";
    static final double POLL_S = 0.5;          // processor.py POLL_S
    static final int REWIND_TRIES = 3;         // reads of the committed offsets before a rewind rejoins the group
    static final double REWIND_PAUSE_S = 1.0;

    private final List<String> inputs;
    private final String output;
    private final String group;
    private final int batch;
    private final boolean consumerProtocol;   // --group-protocol consumer: KIP-848 (session and heartbeat: the broker's)
    private int outPartitions;
    private long attemptNo;
    private KafkaConsumer<byte[], byte[]> consumer;

    private Processor(Ctx c, Txn.Options t, Properties conn, List<String> inputs, String output, String group, int batch,
                      boolean consumerProtocol) {
        super(c, t, conn);
        this.inputs = inputs;
        this.output = output;
        this.group = group;
        this.batch = batch;
        this.consumerProtocol = consumerProtocol;
        this.attemptNo = c.firstAttempt;
    }

    static void run(Args a) {
        if (!a.has("--inputs") || !a.has("--output")) {
            Main.usage("the following arguments are required: --inputs, --output");
        }
        int batch = a.int32("--batch", 50);
        if (batch <= 0) {
            Main.usage("argument --batch: a positive number of records");
        }
        String group = a.str("--group", a.str("--run-tag", "") + ".eos");
        String protocol = a.str("--group-protocol", "classic");
        if (!protocol.equals("classic") && !protocol.equals("consumer")) {
            Main.usage("argument --group-protocol: classic or consumer, not " + protocol);
        }
        Txn.Options t = new Txn.Options(a);
        Properties conn = Txn.connection(a);
        Ctx c = Ctx.open(a);
        Processor p = new Processor(c, t, conn, a.list("--inputs"), a.str("--output", ""), group, batch,
                                    protocol.equals("consumer"));
        int code = 0;
        try {
            p.outPartitions = Conn.partitionCounts(c, conn, List.of(p.output)).get(p.output);
            p.consumer = c.watch.call("KafkaConsumer", t.requestS, () -> {
                KafkaConsumer<byte[], byte[]> made = new KafkaConsumer<>(p.consumerProperties());
                made.subscribe(p.inputs, p.listener());
                return made;
            });
            while (!c.stopping()) {
                if (!p.ensureProducer()) {
                    c.await(1.0);
                    continue;
                }
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = c.watch.call("consume", POLL_S, () -> p.consumer.poll(Conn.seconds(POLL_S)));
                } catch (KafkaException e) {
                    Main.log("poll: " + Txn.describe(e));
                    c.await(POLL_S);
                    continue;
                }
                if (!records.isEmpty()) {
                    p.process(records);
                }
            }
        } catch (RuntimeException | Error e) {   // the workload's own failure: exit 1 (an open invoke: the writer's info)
            Main.log("processor failed: " + Txn.describe(e));
            e.printStackTrace();
            code = 1;
        } finally {
            p.drop();
            if (p.consumer != null) {
                try {
                    c.watch.run("close", t.requestS, () -> p.consumer.close(Duration.ofMillis(t.requestMs())));
                } catch (RuntimeException e) {
                    Main.log("consumer close: " + Txn.describe(e));
                }
            }
        }
        c.exit(code);
    }

    private Properties consumerProperties() {
        Properties p = new Properties();
        p.putAll(conn);
        p.put("group.id", group);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        if (consumerProtocol) {
            p.put("group.protocol", "consumer");
        } else {
            p.put("session.timeout.ms", "10000");
        }
        p.put("max.poll.records", String.valueOf(batch));
        p.put("request.timeout.ms", String.valueOf(t.requestMs()));
        p.put("default.api.timeout.ms", String.valueOf(t.requestMs()));
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        return p;
    }

    /** The rebalance listener: where this consumer's polls of the partitions start over (spark_analysis:
     *  poll_skip). It runs inside poll (or close), on the main thread, between transactions; History holds an
     *  observation made while an invoke is open for its completion anyway. */
    private ConsumerRebalanceListener listener() {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                seeked("revoked", positions(partitions, null));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                seeked("assigned", positions(partitions, null));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                seeked("revoked", positions(partitions, null));
            }
        };
    }

    private static List<Map<String, Object>> positions(Collection<TopicPartition> partitions, Map<TopicPartition, Long> offsets) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        List<Map<String, Object>> out = new ArrayList<>();
        for (TopicPartition tp : sorted) {
            out.add(Txn.map("topic", tp.topic(), "partition", tp.partition(), "offset", offsets == null ? null : offsets.get(tp)));
        }
        return out;
    }

    private void seeked(String reason, List<Map<String, Object>> positions) {
        c.history.observe("seek", Txn.map("isolation", "read_committed", "reason", reason, "positions", positions));
    }

    /** The txnlab id of a consumed record (its txnlab.id header; null without one: observer.py record_id_of). */
    private static String idOf(ConsumerRecord<byte[], byte[]> r) {
        for (Header h : r.headers()) {
            if (Ids.HEADER_ID.equals(h.key()) && h.value() != null) {
                return new String(h.value(), StandardCharsets.UTF_8);
            }
        }
        return null;
    }

    private void process(ConsumerRecords<byte[], byte[]> records) {
        String attempt = Ids.attemptId(c.runTag, c.process, attemptNo);
        List<Map<String, Object>> in = new ArrayList<>();
        List<Txn.Write> writes = new ArrayList<>();
        TreeMap<String, TreeMap<Integer, Long>> ends = new TreeMap<>();
        int n = 0;
        for (ConsumerRecord<byte[], byte[]> r : records) {
            String id = idOf(r);
            in.add(Txn.map("topic", r.topic(), "partition", r.partition(), "offset", r.offset(), "id", id));
            writes.add(new Txn.Write(output, r.partition() % outPartitions, Ids.recordId(c.runTag, c.process, attemptNo, n++),
                    null, true, id));
            ends.computeIfAbsent(r.topic(), k -> new TreeMap<>()).merge(r.partition(), r.offset() + 1, Math::max);
        }
        attemptNo++;
        List<Map<String, Object>> commitOffsets = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        ends.forEach((topic, parts) -> parts.forEach((partition, offset) -> {
            commitOffsets.add(Txn.map("topic", topic, "partition", partition, "offset", offset));
            offsets.put(new TopicPartition(topic, partition), new OffsetAndMetadata(offset));
        }));
        Map<String, Object> value = Txn.map("attempt", attempt, "producer", c.process, "txn_id", t.txnId,
                "group", group, "inputs", in, "writes", Txn.historyOf(writes), "commit_offsets", commitOffsets);
        c.history.invoke(F, value);
        Txn.Outcome outcome = transact(attempt, writes, () -> c.watch.run("send_offsets_to_transaction", t.requestS,
                () -> producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata())), false);
        Map<String, Object> done = new LinkedHashMap<>(value);
        done.putAll(outcome.extra);
        c.history.complete(outcome.type, F, done);
        if (!outcome.type.equals("ok")) {
            rewind(offsets.keySet());
        }
    }

    /** Back to the committed offsets of the batch's partitions (processor.py rewind). */
    private void rewind(Set<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> committed = null;
        for (int attempt = 1; attempt <= REWIND_TRIES; attempt++) {
            try {
                committed = c.watch.call("committed", t.requestS,
                        () -> consumer.committed(partitions, Duration.ofMillis(t.requestMs())));
                break;
            } catch (KafkaException e) {
                c.history.observe("rewind-error", Txn.map("error", Txn.describe(e), "attempt", attempt));
                if (attempt == REWIND_TRIES || c.await(REWIND_PAUSE_S)) {
                    c.history.observe("workload-error", Txn.map("error", "rewind failed: " + Txn.describe(e),
                            "action", "rejoin the group"));
                    c.watch.run("unsubscribe", t.requestS, () -> {
                        consumer.unsubscribe();
                        consumer.subscribe(inputs, listener());
                    });
                    return;
                }
            }
        }
        Set<TopicPartition> assigned = new HashSet<>(consumer.assignment());
        List<TopicPartition> seeked = new ArrayList<>();
        Map<TopicPartition, Long> at = new HashMap<>();
        for (TopicPartition tp : partitions) {
            if (assigned.contains(tp)) {
                seeked.add(tp);
                OffsetAndMetadata o = committed == null ? null : committed.get(tp);
                if (o != null && o.offset() >= 0) {
                    at.put(tp, o.offset());
                }
            }
        }
        seeked("rewind", positions(seeked, at));
        for (TopicPartition tp : seeked) {
            if (at.containsKey(tp)) {
                consumer.seek(tp, at.get(tp));
            } else {
                consumer.seekToBeginning(List.of(tp));
            }
        }
    }
}
