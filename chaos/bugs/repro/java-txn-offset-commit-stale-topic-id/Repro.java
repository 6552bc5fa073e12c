// A consume-transform-produce loop with KafkaProducer.sendOffsetsToTransaction whose input topic is deleted and
// created again under its name while it runs. With kafka-clients 4.4.0 the producer sends TxnOffsetCommit v6 with the
// deleted topic's id (from its own metadata), the broker answers UNKNOWN_TOPIC_ID, and the producer resends the same
// request until sendOffsetsToTransaction times out (max.block.ms) and the application cannot commit again. With
// 4.3.1 (TxnOffsetCommit by topic name) the loop commits on the new topic.
//
// Usage: mvn -q compile exec:java -Dexec.args="HOST:PORT [REPLICAS]" (add -Dkafka.version=4.3.1 for the release before)
//
// Exit 1: the symptom (a line starting SYMPTOM:), 0: the loop committed on the re-created topic, 2: the run failed.
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Repro {
    static final int PARTITIONS = 2;
    static final int BLOCK_MS = 10_000;
    static final long START = System.nanoTime();

    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 2) {
            System.err.println("usage: HOST:PORT [REPLICAS]   (mvn -q compile exec:java -Dexec.args=\"HOST:PORT 3\")");
            System.exit(2);
        }
        String bootstrap = args[0];
        short replicas = args.length > 1 ? Short.parseShort(args[1]) : 1;
        try {
            System.exit(run(bootstrap, replicas));
        } catch (Exception e) {
            say("the run failed: " + e + (e.getCause() != null ? " (cause: " + e.getCause() + ")" : ""));
            System.exit(2);
        }
    }

    static void say(String line) {
        System.out.printf("[%6.2fs] %s%n", (System.nanoTime() - START) / 1e9, line);
        System.out.flush();
    }

    static int run(String bootstrap, short replicas) throws Exception {
        String tag = UUID.randomUUID().toString().substring(0, 8);
        String input = "repro-in-" + tag, output = "repro-out-" + tag, group = "repro-" + tag;
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Admin admin = Admin.create(common);
        KafkaProducer<String, String> feeder = new KafkaProducer<>(feederConfig(bootstrap));
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig(bootstrap, group));
        KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig(bootstrap, tag));
        try {
            admin.createTopics(List.of(new NewTopic(input, PARTITIONS, replicas), new NewTopic(output, PARTITIONS, replicas)))
                .all().get(30, TimeUnit.SECONDS);
            say("created " + input + " (id " + topicId(admin, input) + ") and " + output + "; kafka-clients "
                + clientsVersion());
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            feed(feeder, input, 20, "a");
            int before = process(consumer, producer, output, 20, Duration.ofSeconds(30));
            say("processed and committed " + before + " records of the first topic");

            admin.deleteTopics(List.of(input)).all().get(30, TimeUnit.SECONDS);
            waitGone(admin, input);
            admin.createTopics(List.of(new NewTopic(input, PARTITIONS, replicas))).all().get(30, TimeUnit.SECONDS);
            say("deleted " + input + " and created it again (id " + topicId(admin, input) + ")");
            // the consumer meets the re-created topic while it is empty (its position, past the old topic's end, is
            // out of range and reset to the earliest offset), then records arrive
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            while (System.nanoTime() < until) {
                if (!consumer.poll(Duration.ofMillis(200)).isEmpty()) throw new IllegalStateException("records before the feed");
            }
            feed(feeder, input, 20, "b");
            try {
                int after = process(consumer, producer, output, 1, Duration.ofSeconds(40));
                say("processed and committed " + after + " records of the re-created topic: no symptom");
                return 0;
            } catch (TimeoutException e) {
                say("SYMPTOM: sendOffsetsToTransaction did not complete within max.block.ms (" + BLOCK_MS
                    + " ms) for offsets of the re-created topic: " + e.getMessage());
                say("(the producer's DEBUG log shows each TxnOffsetCommit with the deleted topic's id, answered "
                    + "UNKNOWN_TOPIC_ID, resent until the call gave up)");
                return 1;
            }
        } finally {     // bounded: a producer with the TxnOffsetCommit still pending would wait on it for ever
            Duration close = Duration.ofSeconds(5);
            producer.close(close);
            consumer.close(close);
            feeder.close(close);
            admin.close(close);
        }
    }

    /** Consume-transform-produce until `want` records were processed and committed; the count. TimeoutException when
     *  sendOffsetsToTransaction times out (after which the transaction is aborted, which may time out too). */
    static int process(KafkaConsumer<String, String> consumer, KafkaProducer<String, String> producer, String output,
                       int want, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        int done = 0;
        while (done < want && System.nanoTime() < deadline) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
            if (records.isEmpty()) continue;
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : records) {
                producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value()));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            long began = System.nanoTime();
            try {
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            } catch (TimeoutException e) {
                say("sendOffsetsToTransaction(" + offsets + ") timed out after "
                    + String.format("%.1f", (System.nanoTime() - began) / 1e9) + " s");
                try {
                    producer.abortTransaction();
                } catch (RuntimeException again) {
                    say("abortTransaction failed too: " + again);
                }
                throw e;
            }
            producer.commitTransaction();
            done += records.count();
        }
        if (done < want) throw new IllegalStateException("processed " + done + " of " + want + " records in " + limit);
        return done;
    }

    static void feed(KafkaProducer<String, String> feeder, String topic, int n, String prefix) throws Exception {
        for (int i = 0; i < n; i++) {
            feeder.send(new ProducerRecord<>(topic, i % PARTITIONS, prefix + i, prefix + i)).get(30, TimeUnit.SECONDS);
        }
    }

    /** kafka-clients' release, from the properties file its jar carries. */
    static String clientsVersion() throws Exception {
        Properties p = new Properties();
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        }
        return p.getProperty("version", "unknown");
    }

    static String topicId(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic).topicId().toString();
    }

    static void waitGone(Admin admin, String topic) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            if (!names.contains(topic)) return;
            Thread.sleep(200);
        }
        throw new IllegalStateException(topic + " still listed 30 s after its deletion");
    }

    static Properties feederConfig(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "40000");
        return p;
    }

    static Properties consumerConfig(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    static Properties producerConfig(String bootstrap, String tag) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "repro-" + tag);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(BLOCK_MS));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return p;
    }
}
