package dev.txnlab.streams;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * txnlab's Kafka Streams exactly-once app, run as several JVMs by the streams workload
 * (chaos/workloads/streams.py).
 *
 * <pre>java -cp &lt;release libs&gt;/*:txnlab-streams.jar dev.txnlab.streams.EosApp &lt;properties-file&gt;</pre>
 *
 * Settings: keys starting with "txnlab." are the app's own (txnlab.inputs, txnlab.output, txnlab.counts,
 * txnlab.instance, txnlab.progress.ms); every other key goes to the StreamsConfig unchanged. The file may
 * hold passwords: its content is never printed.
 *
 * Topology (String keys and values), one sub-topology over all input topics:
 *   stateless: each input record -> one record to txnlab.output, same key, {"input":"<id>","instance":"<I>"}
 *   stateful:  groupByKey().aggregate() into the RocksDB store "counts" (changelog
 *              "<application.id>-counts-changelog"), value "<count>,<sum>,<id>", each update to
 *              txnlab.counts as {"key":"<key>","count":<count>,"sum":<sum>,"input":"<id>"}
 * where id is the input value's "id" field and a record adds 1 + (integer after the id's last '.') to sum.
 *
 * Events: one JSON object a line on stdout (the only thing written there), each with "event" and "time":
 * started, state, tasks, progress, error, stopped. SIGTERM: close (10 s), "stopped", exit 0; the app
 * stopping by itself (ERROR or NOT_RUNNING): "stopped", exit 1; bad arguments or settings: "error", exit 2.
 */
public final class EosApp {

    private static final String PREFIX = "txnlab.";
    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]*)\"");
    private static final long PROGRESS_HEARTBEAT_MS = 10_000;
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    /** The real stdout, for events only: System.out itself is sent to stderr (see main). */
    private static final PrintStream EVENTS =
            new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    /** Records the stateless step has handled since start (again after an abort too: a throughput count). */
    private static final AtomicLong processed = new AtomicLong();

    /** Set once "stopped" is printed: it is the last event, whatever thread would print after it. */
    private static boolean finished;

    private EosApp() {
    }

    public static void main(String[] args) throws Exception {
        // Nothing but events on stdout: a library printing to System.out lands on stderr.
        System.setOut(System.err);
        // Our shutdown hook still logs while closing: keep log4j2's own hook from stopping logging first.
        if (System.getProperty("log4j2.shutdownHookEnabled") == null) {
            System.setProperty("log4j2.shutdownHookEnabled", "false");
        }
        if (args.length != 1) {
            fail("usage: EosApp <properties-file>");
        }
        Properties file = new Properties();
        try (Reader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            file.load(in);
        } catch (Exception e) {
            fail("cannot read the properties file: " + e.getClass().getName());
        }

        // The app's own settings; everything else is the StreamsConfig, with a few defaults.
        List<String> inputs = new ArrayList<>();
        for (String topic : required(file, "inputs").split(",")) {
            if (!topic.isBlank()) {
                inputs.add(topic.trim());
            }
        }
        String output = required(file, "output");
        String counts = required(file, "counts");
        String instance = required(file, "instance");
        long progressMs = 1000;
        try {
            progressMs = Long.parseLong(file.getProperty(PREFIX + "progress.ms", "1000").trim());
        } catch (NumberFormatException e) {
            fail("txnlab.progress.ms is not a number");
        }
        if (inputs.isEmpty() || progressMs <= 0) {
            fail(inputs.isEmpty() ? "txnlab.inputs names no topic" : "txnlab.progress.ms must be > 0");
        }
        Properties config = new Properties();
        for (String key : file.stringPropertyNames()) {
            if (!key.startsWith(PREFIX)) {
                config.setProperty(key, file.getProperty(key));
            }
        }
        config.putIfAbsent(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        config.putIfAbsent(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        config.putIfAbsent(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");   // every update goes downstream
        config.putIfAbsent(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");

        // The topology.
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> source = builder.stream(inputs, Consumed.with(Serdes.String(), Serdes.String()));
        source.mapValues(value -> {
            processed.incrementAndGet();
            return "{\"input\":" + str(inputId(value)) + ",\"instance\":" + str(instance) + "}";
        }).to(output, Produced.with(Serdes.String(), Serdes.String()));
        source.groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                .aggregate(() -> "0,0,", (key, value, aggregate) -> {
                    String[] parts = aggregate.split(",", 3);
                    String id = inputId(value);
                    long count = Long.parseLong(parts[0]) + 1;
                    long sum = Long.parseLong(parts[1]) + amount(id);
                    return count + "," + sum + "," + (id == null ? "" : id);
                }, Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
                .toStream()
                .mapValues((key, aggregate) -> {
                    String[] parts = aggregate.split(",", 3);
                    String id = parts[2].isEmpty() ? null : parts[2];
                    return "{\"key\":" + str(key) + ",\"count\":" + parts[0] + ",\"sum\":" + parts[1]
                            + ",\"input\":" + str(id) + "}";
                })
                .to(counts, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams;
        try {
            streams = new KafkaStreams(builder.build(), config);
        } catch (Exception e) {            // a bad StreamsConfig (ConfigException): its message, no values dumped
            fail(e.getClass().getName() + ": " + e.getMessage());
            return;
        }

        // Stopping: SIGTERM (the shutdown hook) or the app stopping by itself (the main thread below);
        // whichever comes first closes, prints "stopped" and decides the exit status.
        AtomicBoolean stopping = new AtomicBoolean();
        CountDownLatch stoppedByItself = new CountDownLatch(1);
        CountDownLatch notRunning = new CountDownLatch(1);     // the state event NOT_RUNNING is printed
        streams.setStateListener((to, from) -> {
            emit("{\"event\":\"state\",\"from\":" + str(from.name()) + ",\"to\":" + str(to.name()) + timeField() + "}");
            if (to == KafkaStreams.State.RUNNING) {
                emitTasks(streams);
            }
            if ((to == KafkaStreams.State.ERROR || to == KafkaStreams.State.NOT_RUNNING) && !stopping.get()) {
                stoppedByItself.countDown();
            }
            if (to == KafkaStreams.State.NOT_RUNNING) {
                notRunning.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"event\":\"error\",\"error\":" + str(e.getClass().getName() + ": " + e.getMessage())
                    + ",\"causes\":" + causes(e) + timeField() + "}");
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (!stopping.compareAndSet(false, true)) {
                return;                    // the main thread is exiting (status 1) and has printed "stopped"
            }
            close(streams, notRunning);
            Runtime.getRuntime().halt(0);  // a JVM ended by SIGTERM would otherwise exit 143
        }, "txnlab-shutdown"));

        // Progress: when the count changed since the last event, and at least every 10 s.
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "txnlab-progress");
            thread.setDaemon(true);
            return thread;
        });
        long[] last = {-1, 0};             // the last count printed, and when
        timer.scheduleAtFixedRate(() -> {
            long count = processed.get();
            long now = System.currentTimeMillis();
            if (count != last[0] || now - last[1] >= PROGRESS_HEARTBEAT_MS) {
                emit("{\"event\":\"progress\",\"processed\":" + count + ",\"time\":" + now + "}");
                last[0] = count;
                last[1] = now;
            }
        }, progressMs, progressMs, TimeUnit.MILLISECONDS);

        emit("{\"event\":\"started\",\"instance\":" + str(instance)
                + ",\"application_id\":" + str(config.getProperty(StreamsConfig.APPLICATION_ID_CONFIG))
                + ",\"kafka_version\":" + str(kafkaVersion()) + timeField() + "}");
        streams.start();

        stoppedByItself.await();
        if (stopping.compareAndSet(false, true)) {
            close(streams, notRunning);
            System.exit(1);
        }
    }

    /**
     * Closes within CLOSE_TIMEOUT, leaving the consumer group (the other instances take over the tasks at
     * once, not after the session timeout), then prints "stopped": last, after the NOT_RUNNING state event
     * (close() returns on the state change, the listener may still be printing it).
     * KafkaStreams.CloseOptions: deprecated from 4.2 on, but the one API every release from 4.0 has.
     */
    @SuppressWarnings("deprecation")
    private static void close(KafkaStreams streams, CountDownLatch notRunning) {
        try {
            if (!streams.close(new KafkaStreams.CloseOptions().timeout(CLOSE_TIMEOUT).leaveGroup(true))) {
                System.err.println("EosApp: KafkaStreams did not close within " + CLOSE_TIMEOUT);
            } else {
                notRunning.await(1, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            emitLast("{\"event\":\"stopped\"" + timeField() + "}");
        }
    }

    /** The tasks this instance runs now (called when it becomes RUNNING). */
    private static void emitTasks(KafkaStreams streams) {
        List<String> active = new ArrayList<>();
        List<String> standby = new ArrayList<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) {
                active.add(task.taskId().toString());
            }
            for (TaskMetadata task : thread.standbyTasks()) {
                standby.add(task.taskId().toString());
            }
        }
        emit("{\"event\":\"tasks\",\"active\":" + strings(active) + ",\"standby\":" + strings(standby)
                + timeField() + "}");
    }

    /**
     * The Kafka clients' version: AppInfoParser.getVersion(), whose class moved to
     * org.apache.kafka.common.utils.internals in Kafka 4.4 (the app is built against every release).
     */
    private static String kafkaVersion() {
        for (String name : List.of("org.apache.kafka.common.utils.AppInfoParser",
                                   "org.apache.kafka.common.utils.internals.AppInfoParser")) {
            try {
                return (String) Class.forName(name).getMethod("getVersion").invoke(null);
            } catch (ReflectiveOperationException | LinkageError e) {
                // not in this release: the other name
            }
        }
        return "unknown";
    }

    /** The input record's id: its JSON value's "id" string, null when there is none. */
    static String inputId(String value) {
        if (value == null) {
            return null;
        }
        Matcher m = ID.matcher(value);
        return m.find() ? m.group(1) : null;
    }

    /** What a record adds to its key's sum: 1 + the integer after the id's last '.', 0 without one. */
    static long amount(String id) {
        if (id == null) {
            return 0;
        }
        try {
            return 1 + Long.parseLong(id.substring(id.lastIndexOf('.') + 1));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private static String required(Properties file, String name) {
        String value = file.getProperty(PREFIX + name);
        if (value == null || value.isBlank()) {
            fail("missing " + PREFIX + name);
        }
        return value.trim();
    }

    /** An error before the app runs: printed as an event, exit status 2. */
    private static void fail(String error) {
        emit("{\"event\":\"error\",\"error\":" + str(error) + timeField() + "}");
        System.exit(2);
    }

    /** The one way to stdout: a whole line, flushed; nothing after "stopped". */
    private static synchronized void emit(String json) {
        if (!finished) {
            EVENTS.print(json + "\n");
            EVENTS.flush();
        }
    }

    private static synchronized void emitLast(String json) {
        emit(json);
        finished = true;
    }

    private static String timeField() {
        return ",\"time\":" + System.currentTimeMillis();
    }

    private static String strings(List<String> values) {
        List<String> sorted = new ArrayList<>(values);
        sorted.sort(null);
        StringBuilder out = new StringBuilder("[");
        for (String value : sorted) {
            out.append(out.length() > 1 ? "," : "").append(str(value));
        }
        return out.append("]").toString();
    }

    /** The exception's causes, outermost first, as a JSON list of "class: message" (what a thread died of is
     *  often two or three causes deep: StreamsException, KafkaException, then the broker's error). */
    static String causes(Throwable error) {
        StringBuilder out = new StringBuilder("[");
        List<Throwable> seen = new ArrayList<>(List.of(error));
        for (Throwable cause = error.getCause(); cause != null && !seen.contains(cause); cause = cause.getCause()) {
            seen.add(cause);
            out.append(out.length() > 1 ? "," : "").append(str(cause.getClass().getName() + ": " + cause.getMessage()));
        }
        return out.append("]").toString();
    }

    /** A JSON string literal (null -> null): quotes, backslashes and control characters escaped. */
    static String str(String value) {
        if (value == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder(value.length() + 2).append('"');
        for (char c : value.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
