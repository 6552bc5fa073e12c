// A consumer group member that read a topic to its end, then the topic is deleted and created again under its name
// (a new topic id) and more records than the consumer had read are written to the new topic before it fetches again.
// The consumer learns the new topic id from its metadata but keeps its position from the deleted topic: that offset
// exists in the new topic, so it fetches from there, and the new topic's records below it are never read, with
// auto.offset.reset=earliest and no error. (When the new topic holds fewer records than the old position, the fetch is
// out of range and the position is reset to the earliest offset: nothing is lost then.)
//
// Usage: mvn -q compile exec:java -Dexec.args="HOST:PORT [REPLICAS]" (add -Dkafka.version=4.3.1 for another release)
//
// Exit 1: the symptom (a line starting SYMPTOM:), 0: every record of the new topic was read, 2: the run failed.
import java.time.Duration;
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
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Repro {
    static final int PARTITIONS = 2;
    static final int RECORDS = 20;          // to the first topic; to the new one AGAIN, fewer: the positions tell which
    static final int AGAIN = 30;            // end they stopped at (the old topic's, or the new topic's log end)
    static final long START = System.nanoTime();

    public static void main(String[] args) {
        if (args.length < 1 || args.length > 2) {
            System.err.println("usage: HOST:PORT [REPLICAS]   (mvn -q compile exec:java -Dexec.args=\"HOST:PORT 3\")");
            System.exit(2);
        }
        try {
            System.exit(run(args[0], args.length > 1 ? Short.parseShort(args[1]) : 1));
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
        String topic = "repro-skip-" + tag;
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Admin admin = Admin.create(common);
        KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig(bootstrap));
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig(bootstrap, "repro-" + tag));
        try {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, replicas))).all().get(30, TimeUnit.SECONDS);
            say("created " + topic + " (id " + topicId(admin, topic) + "); kafka-clients " + clientsVersion());
            consumer.subscribe(List.of(topic));
            feed(producer, topic, "a", RECORDS);
            int first = read(consumer, RECORDS, Duration.ofSeconds(30));
            consumer.commitSync();
            say("read and committed " + first + " records of the first topic; positions " + positions(consumer, topic));

            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            waitGone(admin, topic);
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, replicas))).all().get(30, TimeUnit.SECONDS);
            say("deleted " + topic + " and created it again (id " + topicId(admin, topic) + ")");
            feed(producer, topic, "b", AGAIN);
            say("wrote " + AGAIN + " records to the new topic before the consumer's next poll");
            int second = read(consumer, AGAIN, Duration.ofSeconds(15));
            if (second < AGAIN) {
                say("SYMPTOM: the consumer read " + second + " of the " + AGAIN + " records of the re-created topic "
                    + "(auto.offset.reset=earliest, positions now " + positions(consumer, topic) + "): it went on "
                    + "from its positions in the deleted topic, and the new topic's records below them were skipped");
                return 1;
            }
            say("read all " + second + " records of the re-created topic: no symptom");
            return 0;
        } finally {
            Duration close = Duration.ofSeconds(5);
            consumer.close(close);
            producer.close(close);
            admin.close(close);
        }
    }

    /** Records polled until `want` arrived or `limit` passed; how many. */
    static int read(KafkaConsumer<String, String> consumer, int want, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        int got = 0;
        while (got < want && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> ignored : consumer.poll(Duration.ofMillis(500))) {
                got++;
            }
        }
        return got;
    }

    static Map<TopicPartition, Long> positions(KafkaConsumer<String, String> consumer, String topic) {
        return Map.of(new TopicPartition(topic, 0), consumer.position(new TopicPartition(topic, 0)),
                      new TopicPartition(topic, 1), consumer.position(new TopicPartition(topic, 1)));
    }

    static void feed(KafkaProducer<String, String> producer, String topic, String prefix, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            producer.send(new ProducerRecord<>(topic, i % PARTITIONS, prefix + i, prefix + i)).get(30, TimeUnit.SECONDS);
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

    static Properties producerConfig(String bootstrap) {
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
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }
}
