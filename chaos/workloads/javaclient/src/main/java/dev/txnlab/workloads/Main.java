// The Java-client workloads of txnlab: a transactional producer and an exactly-once processor on Kafka's own Java
// clients (org.apache.kafka:kafka-clients, the release's jar from its libs folder), speaking
// docs/workload-protocol.md. Started with the arguments `python -m chaos.workloads NAME ...` was given:
//
//     java -cp txnlab-java-workloads.jar:.txnlab/dist/kafka-<version>/libs/* dev.txnlab.workloads.Main NAME [options]
//
// the Kafka connection in TXNLAB_KAFKA_* variables, never on the command line.
// Owns: the options (an unknown one or a bad value: a message on stderr, exit 2, before any operation), a process's
// view of its run (Ctx: history, watchdog, seeded random, first attempt, the stop flag set by SIGTERM/SIGINT or
// --duration), the exit codes, the client's log level, and the hidden `--check-ids FILE` entry (Ids.java).
// Must not: decide an outcome (Txn.java) or know a workload's steps (Producer.java, Processor.java).
package dev.txnlab.workloads;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

public final class Main {
    static final long INCARNATION_STRIDE = 1_000_000_000L;   // chaos/ids.py INCARNATION_STRIDE
    static final int EXIT_USAGE = 2;
    static final String PROGRAM = "txnlab-java-workloads";
    static final double STOP_WAIT_S = 40.0;                  // SIGTERM: how long the main loop may take to finish
    private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("HH:mm:ss.SSS ").withZone(ZoneOffset.UTC);

    private Main() {
    }

    public static void main(String[] argv) {
        quietClientLog();
        if (argv.length == 0) {
            usage("usage: " + PROGRAM + " {txn-producer,processor} [options]");
        }
        switch (argv[0]) {
            case "--check-ids":
                if (argv.length != 2) {
                    usage("usage: " + PROGRAM + " --check-ids VECTORS.json");
                }
                System.exit(Ids.checkVectors(argv[1]) ? 0 : 1);
                break;
            case "txn-producer":
                Producer.run(Args.parse(argv, Producer.ARGS));
                break;
            case "processor":
                Processor.run(Args.parse(argv, Processor.ARGS));
                break;
            default:
                usage("unknown workload '" + argv[0] + "': the Java client runs txn-producer and processor");
        }
    }

    /** The client's own log (slf4j -> log4j2 in a release's libs): warnings, to stderr, unless the command line
     *  names a log4j2 configuration (cluster/lab/java.py java_command does); TXNLAB_CLIENT_LOG may say error, warn,
     *  info or debug. Set before any Kafka class is loaded. */
    private static void quietClientLog() {
        if (System.getProperty("log4j2.configurationFile") == null) {
            System.setProperty("log4j2.configurationFile", "classpath:txnlab-java-workloads-log4j2.properties");
        }
    }

    static void log(String message) {
        System.err.println(STAMP.format(Instant.now()) + message);
        System.err.flush();
    }

    static void usage(String message) {
        System.err.println(PROGRAM + ": error: " + message);
        System.err.flush();
        System.exit(EXIT_USAGE);
    }

    /** The options as given (argparse's rules: `--name value...` or `--name=value`); the typed getters check them. */
    static final class Args {
        static final Map<String, Integer> COMMON = Map.of("--socket", 1, "--run-start-ns", 1, "--run-tag", 1,
                "--process", 1, "--seed", 1, "--duration", 1, "--incarnation", 1);
        static final Map<String, Integer> TRANSACTIONAL = Map.of("--transaction-timeout-ms", 1,
                "--request-timeout-s", 1, "--txn-id", 1, "--on-fenced", 1);

        final String workload;
        private final Map<String, List<String>> values = new HashMap<>();

        private Args(String workload) {
            this.workload = workload;
        }

        /** argv[0] is the workload; own: the workload's options and their arity (-1: one or more). */
        static Args parse(String[] argv, Map<String, Integer> own) {
            Map<String, Integer> arity = new HashMap<>(COMMON);
            arity.putAll(TRANSACTIONAL);
            arity.putAll(own);
            Args a = new Args(argv[0]);
            for (int i = 1; i < argv.length; ) {
                String name = argv[i];
                List<String> vals = new ArrayList<>();
                int eq = name.indexOf('=');
                if (name.startsWith("--") && eq > 0) {
                    vals.add(name.substring(eq + 1));
                    name = name.substring(0, eq);
                }
                Integer n = arity.get(name);
                if (n == null) {
                    usage("unrecognized arguments: " + argv[i]);
                }
                i++;
                if (vals.isEmpty()) {
                    while (i < argv.length && (n < 0 || vals.size() < n) && !argv[i].startsWith("--")) {
                        vals.add(argv[i]);
                        i++;
                    }
                }
                if (vals.isEmpty() || (n > 0 && vals.size() != n)) {
                    usage("argument " + name + ": expected " + (n < 0 ? "at least one argument" : n == 1 ? "one argument" : n + " arguments"));
                }
                a.values.put(name, vals);
            }
            List<String> missing = new ArrayList<>();
            for (String required : List.of("--socket", "--run-start-ns", "--run-tag", "--process")) {
                if (!a.values.containsKey(required)) {
                    missing.add(required);
                }
            }
            if (!missing.isEmpty()) {
                usage("the following arguments are required: " + String.join(", ", missing));
            }
            return a;
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        String str(String name, String def) {
            List<String> v = values.get(name);
            return v == null ? def : v.get(0);
        }

        List<String> list(String name) {
            List<String> v = values.get(name);
            return v == null ? List.of() : v;
        }

        double num(String name, double def) {
            List<String> v = values.get(name);
            if (v == null) {
                return def;
            }
            try {
                double d = Double.parseDouble(v.get(0));
                if (Double.isNaN(d) || Double.isInfinite(d)) {
                    throw new NumberFormatException();
                }
                return d;
            } catch (NumberFormatException e) {
                usage("argument " + name + ": invalid float value: '" + v.get(0) + "'");
                return def;
            }
        }

        long integer(String name, long def) {
            List<String> v = values.get(name);
            if (v == null) {
                return def;
            }
            try {
                return Long.parseLong(v.get(0).trim());
            } catch (NumberFormatException e) {
                usage("argument " + name + ": invalid int value: '" + v.get(0) + "'");
                return def;
            }
        }

        int int32(String name, int def) {
            long n = integer(name, def);
            if (n < Integer.MIN_VALUE || n > Integer.MAX_VALUE) {
                usage("argument " + name + ": invalid int value: '" + n + "'");
            }
            return (int) n;
        }

        String choice(String name, String def, String... choices) {
            String v = str(name, def);
            for (String c : choices) {
                if (c.equals(v)) {
                    return v;
                }
            }
            usage("argument " + name + ": invalid choice: '" + v + "' (choose from '" + String.join("', '", choices) + "')");
            return def;
        }
    }

    /** A workload process's view of its run (chaos/workloads/base.py WorkloadContext). */
    static final class Ctx {
        final String runTag;
        final String process;
        final Random rng;
        final long firstAttempt;
        final History history;
        final Watch watch;
        private final long deadlineNs;      // System.nanoTime() at --duration's end; 0: none
        private final AtomicBoolean stop = new AtomicBoolean();
        private final CountDownLatch stopped = new CountDownLatch(1);    // the stop flag, to wait on
        private final CountDownLatch finished = new CountDownLatch(1);   // the main loop is done, the history closed
        private volatile int exitCode;

        private Ctx(String runTag, String process, long seed, long incarnation, double duration, History history) {
            this.runTag = runTag;
            this.process = process;
            this.rng = new Random(fnv64a(seed + "/" + process));
            this.firstAttempt = incarnation * INCARNATION_STRIDE;
            this.history = history;
            this.watch = new Watch(history);
            this.deadlineNs = duration > 0 ? System.nanoTime() + (long) (duration * 1e9) : 0;
        }

        /** The common options checked, then the history socket connected (exit 1 when it cannot be), and
         *  SIGTERM/SIGINT made a stop: finish the transaction in flight, close the clients, exit 0. */
        static Ctx open(Args a) {
            long runStartNs = a.integer("--run-start-ns", 0);
            String runTag = a.str("--run-tag", "");
            String process = a.str("--process", "");
            if (runTag.contains(".") || process.contains(".")) {
                usage("run tag and process name may not contain '.': '" + runTag + "', '" + process + "'");
            }
            long seed = a.integer("--seed", 0);
            double duration = a.num("--duration", 0);
            long incarnation = a.integer("--incarnation", 0);
            if (incarnation < 0) {
                usage("argument --incarnation: a number of earlier starts (>= 0)");
            }
            History history;
            try {
                history = History.connect(a.str("--socket", ""), runStartNs, process);
            } catch (java.io.IOException e) {
                log("history socket " + a.str("--socket", "") + ": " + e);
                System.exit(1);
                return null;
            }
            Ctx c = new Ctx(runTag, process, seed, incarnation, duration, history);
            Runtime.getRuntime().addShutdownHook(new Thread(c::shutdown, "txnlab-stop"));
            return c;
        }

        /** SIGTERM, SIGINT, or our own System.exit: the main loop stops and finishes (at most STOP_WAIT_S). */
        private void shutdown() {
            stop();
            boolean done = false;
            try {
                done = finished.await((long) (STOP_WAIT_S * 1000), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (!done) {
                log("the workload did not finish within " + STOP_WAIT_S + " s of its stop");
                history.close();
            }
            Runtime.getRuntime().halt(done ? exitCode : 1);   // 0, not the JVM's 143 after a SIGTERM
        }

        void stop() {
            if (stop.compareAndSet(false, true)) {
                stopped.countDown();
            }
        }

        boolean stopping() {
            if (deadlineNs != 0 && System.nanoTime() - deadlineNs > 0) {
                stop();
            }
            return stop.get();
        }

        /** Sleeps seconds or until stopped; true when stopped. */
        boolean await(double seconds) {
            try {
                if (stopped.await((long) (seconds * 1e9), TimeUnit.NANOSECONDS)) {
                    return true;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return true;
            }
            return stopping();
        }

        /** The end of the process: the history closed (what waited for it written), then exit. */
        void exit(int code) {
            history.close();
            exitCode = code;
            finished.countDown();
            System.exit(code);      // during a SIGTERM's shutdown this blocks; the hook halts with exitCode
        }
    }

    /** FNV-1a 64 of s: the seed of a process's random generator (the franz-go workloads seed theirs alike). */
    static long fnv64a(String s) {
        long h = 0xcbf29ce484222325L;
        for (byte b : s.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        return h;
    }

    /** At most rate attempts a second (0: unbounded), without drifting (base.py Pacer). */
    static final class Pacer {
        private final long intervalNs;
        private long next = System.nanoTime();

        Pacer(double rate) {
            intervalNs = rate > 0 ? (long) (1e9 / rate) : 0;
        }

        void pace(Ctx c) {
            if (intervalNs == 0) {
                return;
            }
            long now = System.nanoTime();
            next += intervalNs;
            if (next - (now - intervalNs) < 0) {
                next = now - intervalNs;
            }
            long delay = next - now;
            if (delay > 0) {
                c.await(delay / 1e9);
            }
        }
    }
}
