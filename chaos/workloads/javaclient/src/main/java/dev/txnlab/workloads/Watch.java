// Stalls (docs/workload-protocol.md "Stalls"): every client call runs under call(); one still running at twice its
// own timeout (at least 5 s) is a stall: the open invoke completed as info, `ok stall {call, timeout_s, limit_s,
// seconds, thread, stack, client, client_version, library, library_version}` recorded, every thread's stack
// into the log, and the process halts with 75 for the runner to start it again. Time counts only while the process
// runs: a tick ages the calls by at most two ticks, so a SIGSTOPped process does not age them.
// Must not: interrupt a call (the stall is the finding; the next incarnation's initTransactions fences this one).
package dev.txnlab.workloads;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

final class Watch {
    static final int EXIT_STALL = 75;          // chaos/workloads/base.py EXIT_STALL
    static final double STALL_FACTOR = 2.0;
    static final double STALL_FLOOR_S = 5.0;
    static final long TICK_MS = 250;

    private static final class InFlight {
        final String name;
        final double timeoutS;
        final double limitS;
        final Thread thread;
        double seconds;

        InFlight(String name, double timeoutS, Thread thread) {
            this.name = name;
            this.timeoutS = timeoutS;
            this.limitS = Math.max(STALL_FACTOR * timeoutS, STALL_FLOOR_S);
            this.thread = thread;
        }
    }

    private final History history;
    private final Map<Long, InFlight> calls = new LinkedHashMap<>();
    private long next;
    private Thread loop;

    Watch(History history) {
        this.history = history;
    }

    /** fn as the client call `name`, bounded by its own timeout, under the watchdog. */
    <T> T call(String name, double timeoutS, Supplier<T> fn) {
        long id;
        synchronized (this) {
            id = next++;
            calls.put(id, new InFlight(name, timeoutS, Thread.currentThread()));
            if (loop == null) {
                loop = new Thread(this::loop, "txnlab-call-watch");
                loop.setDaemon(true);
                loop.start();
            }
        }
        try {
            return fn.get();
        } finally {
            synchronized (this) {
                calls.remove(id);
            }
        }
    }

    void run(String name, double timeoutS, Runnable fn) {
        call(name, timeoutS, () -> {
            fn.run();
            return null;
        });
    }

    private void loop() {
        long last = System.nanoTime();
        while (true) {
            try {
                Thread.sleep(TICK_MS);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            double step = Math.min((now - last) / 1e9, 2 * TICK_MS / 1000.0);
            last = now;
            InFlight stalled = null;
            synchronized (this) {
                for (InFlight c : calls.values()) {
                    c.seconds += step;
                    if (c.seconds >= c.limitS && stalled == null) {
                        stalled = c;
                    }
                }
            }
            if (stalled != null) {
                stalled(stalled);
            }
        }
    }

    private void stalled(InFlight c) {
        List<String> stack = new ArrayList<>();
        for (StackTraceElement e : c.thread.getStackTrace()) {
            stack.add("at " + e);
        }
        Map<String, Object> stall = new LinkedHashMap<>();
        stall.put("call", c.name);
        stall.put("timeout_s", c.timeoutS);
        stall.put("limit_s", c.limitS);
        stall.put("seconds", Math.round(c.seconds * 10) / 10.0);
        stall.put("thread", c.thread.getName());
        stall.put("stack", stack);
        stall.putAll(clientInfo());
        try {
            history.stalled(stall);
        } finally {
            StringBuilder dump = new StringBuilder();
            dump.append("stall: ").append(c.name).append(" did not return in ").append(stall.get("seconds"))
                    .append(" s; exiting ").append(EXIT_STALL).append('\n');
            for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
                dump.append('"').append(t.getKey().getName()).append("\" ").append(t.getKey().getState()).append('\n');
                for (StackTraceElement e : t.getValue()) {
                    dump.append("    at ").append(e).append('\n');
                }
            }
            System.err.print(dump);
            System.err.flush();
            Runtime.getRuntime().halt(EXIT_STALL);
        }
    }

    /** The client as a stall names it: the release's kafka-clients, by its own version (what AppInfoParser
     *  reads, kafka/kafka-version.properties: AppInfoParser itself moved to an internals package in 4.x). */
    static Map<String, Object> clientInfo() {
        String version = "unknown";
        try (java.io.InputStream in = org.apache.kafka.clients.producer.KafkaProducer.class
                .getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                java.util.Properties props = new java.util.Properties();
                props.load(in);
                version = props.getProperty("version", version).trim();
            }
        } catch (java.io.IOException | RuntimeException e) {
            Main.log("kafka-clients version: " + e);
        }
        Map<String, Object> info = new LinkedHashMap<>();
        info.put("client", "kafka-clients");
        info.put("client_version", version);
        info.put("library", "kafka-clients");
        info.put("library_version", version);
        return info;
    }
}
