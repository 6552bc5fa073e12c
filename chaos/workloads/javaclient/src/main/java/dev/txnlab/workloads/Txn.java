// What the two transactional roles share (chaos/workloads/transactional.py is the reference): their options, one
// KafkaProducer per logical process (initTransactions recorded as `init`), producing an attempt's writes with their
// ids and learning their offsets, and what an error means for the outcome, which is the Java client's own
// documented handling (KafkaProducer's javadoc):
//   - ProducerFencedException, InvalidProducerEpochException (fenced: another producer with our transactional.id
//     initialised, or the coordinator bumped our epoch aborting a timed-out transaction), OutOfOrderSequenceException,
//     AuthorizationException and the like (fatal: the producer cannot go on): close the producer, a new one next
//     time (its initTransactions fences this epoch and aborts what it left); `info` when it happened during the
//     commit, `fail` before it; with --on-fenced exit, fenced stops the process (value.fenced: a zombie must not
//     come back);
//   - a TimeoutException during commitTransaction: commit once more (the javadoc: safe to retry, the commit may
//     still be completing), then `ok` (value.retried) or, failing again, close the producer and `info`;
//   - any other KafkaException (abortable: a failed send, an expired batch, TransactionAbortableException, a stale
//     group generation in TxnOffsetCommit, a timeout before the commit): abortTransaction and `fail`; an abort that
//     fails is judged by its own error (value.after: the first one) and the producer closed, `fail`.
// Every client call runs under the watchdog (Watch.java), bounded by the request timeout the producer is given
// (request.timeout.ms, max.block.ms, delivery.timeout.ms). What kafka-clients does on its own (its retries, its epoch
// bumps) is its behaviour under test, never worked around.
package dev.txnlab.workloads;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;

import dev.txnlab.workloads.Main.Args;
import dev.txnlab.workloads.Main.Ctx;

final class Txn {
    static final double LINGER_MS = 5;       // transactional.py producer_config

    private Txn() {
    }

    /** The transactional options (transactional.py add_transactional_arguments) and the record size. */
    static final class Options {
        final int timeoutMs;
        final double requestS;
        final String txnId;
        final boolean onFencedExit;
        final int size;

        Options(Args a) {
            timeoutMs = a.int32("--transaction-timeout-ms", 10000);
            requestS = a.num("--request-timeout-s", 10.0);
            if (timeoutMs <= 0 || requestS <= 0) {
                Main.usage("--transaction-timeout-ms and --request-timeout-s must be positive");
            }
            txnId = a.str("--txn-id", a.str("--run-tag", "") + "." + a.str("--process", ""));
            onFencedExit = a.choice("--on-fenced", "reinit", "reinit", "exit").equals("exit");
            size = a.int32("--size", 100);
        }

        long requestMs() {
            return Math.max(1, (long) (requestS * 1000));
        }
    }

    /** The connection's properties, its client.id `<run tag>.<process>` unless TXNLAB_KAFKA_CLIENT_ID names one (as
     *  every workload names its clients: a hold-requests fault selects them by it), or exit 2 (a setting the client
     *  cannot use is a bad option, before any operation). */
    static Properties connection(Args a) {
        try {
            return Conn.properties(a.str("--run-tag", "") + "." + a.str("--process", ""));
        } catch (Conn.ConfigError e) {
            Main.usage(e.getMessage());
            return null;
        }
    }

    /** One planned record of an attempt. */
    static final class Write {
        final String topic;
        final int partition;
        final String id;
        final String key;          // null: none
        final boolean hasInput;    // a processor's output: input is its input's id (null when that had none)
        final String input;

        Write(String topic, int partition, String id, String key, boolean hasInput, String input) {
            this.topic = topic;
            this.partition = partition;
            this.id = id;
            this.key = key;
            this.hasInput = hasInput;
            this.input = input;
        }

        Map<String, Object> history() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("topic", topic);
            m.put("partition", partition);
            m.put("id", id);
            if (key != null) {
                m.put("key", key);
            }
            if (hasInput) {
                m.put("input", input);
            }
            return m;
        }
    }

    static List<Map<String, Object>> historyOf(List<Write> writes) {
        return writes.stream().map(Write::history).collect(java.util.stream.Collectors.toList());
    }

    /** What an error means (the header): the error itself or, for a KafkaException wrapping one (e.g. "Cannot
     *  execute transactional method because we are in an error state"), its cause decides fenced and fatal. */
    enum Kind { FENCED, FATAL, TIMEOUT, ABORTABLE }

    static Kind kind(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                return Kind.FENCED;
            }
            if (t instanceof OutOfOrderSequenceException || t instanceof AuthorizationException
                    || t instanceof AuthenticationException || t instanceof UnsupportedVersionException
                    || t instanceof InvalidTxnStateException || t instanceof IllegalStateException) {
                return Kind.FATAL;
            }
        }
        if (e instanceof TimeoutException) {
            return Kind.TIMEOUT;
        }
        return e instanceof KafkaException ? Kind.ABORTABLE : Kind.FATAL;
    }

    /** An error for the history: its class and message, and its cause's when it wraps one. */
    static String describe(Throwable e) {
        String text = e.getClass().getSimpleName() + ": " + e.getMessage();
        Throwable cause = e.getCause();
        if (cause != null && cause != e) {
            text += " (caused by " + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
        }
        return text;
    }

    /** An outcome of an attempt and what it adds to the invoke's value. */
    static final class Outcome {
        final String type;
        final Map<String, Object> extra;

        Outcome(String type, Map<String, Object> extra) {
            this.type = type;
            this.extra = extra;
        }
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /** A logical process's transactional producer; subclasses plan attempts and record them. */
    abstract static class Client {
        final Ctx c;
        final Options t;
        final Properties conn;
        KafkaProducer<byte[], byte[]> producer;

        Client(Ctx c, Options t, Properties conn) {
            this.c = c;
            this.t = t;
            this.conn = conn;
        }

        Properties producerProperties() {
            Properties p = new Properties();
            p.putAll(conn);
            p.put("transactional.id", t.txnId);
            p.put("enable.idempotence", "true");
            p.put("acks", "all");
            p.put("transaction.timeout.ms", String.valueOf(t.timeoutMs));
            p.put("linger.ms", String.valueOf((long) LINGER_MS));
            // every call bounded by the request timeout: a request, a blocking call (initTransactions,
            // commitTransaction, send's metadata wait), a record's delivery (at least linger + request: the client
            // refuses less)
            p.put("request.timeout.ms", String.valueOf(t.requestMs()));
            p.put("max.block.ms", String.valueOf(t.requestMs()));
            p.put("delivery.timeout.ms", String.valueOf(t.requestMs() + (long) LINGER_MS));
            p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
            p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
            return p;
        }

        /** A producer and its producer id (initTransactions), recorded as `init`; false: none this time. */
        boolean ensureProducer() {
            if (producer != null) {
                return true;
            }
            c.history.invoke("init", map("txn_id", t.txnId));
            KafkaProducer<byte[], byte[]> made = null;
            try {
                Properties props = producerProperties();
                made = c.watch.call("KafkaProducer", t.requestS, () -> new KafkaProducer<>(props));
                KafkaProducer<byte[], byte[]> p = made;
                c.watch.run("init_transactions", t.requestS, p::initTransactions);
            } catch (KafkaException e) {       // coordinator unavailable, timed out, a bad setting: later
                if (made != null) {
                    close(made);
                }
                c.history.complete("fail", "init", map("txn_id", t.txnId, "error", describe(e)));
                return false;
            }
            producer = made;
            c.history.complete("ok", "init", map("txn_id", t.txnId));
            return true;
        }

        /** The writes in one transaction (then beforeCommit, then commit, or a deliberate abort): the outcome
         *  and what it adds to the op. */
        Outcome transact(String attempt, List<Write> writes, Runnable beforeCommit, boolean abort) {
            long[] offsets = new long[writes.size()];
            java.util.Arrays.fill(offsets, -1);
            boolean committing = false;
            try {
                produce(attempt, writes, offsets);
                beforeCommit.run();
                if (abort) {
                    return abortDeliberately();
                }
                committing = true;
                c.watch.run("commit_transaction", t.requestS, producer::commitTransaction);
                return new Outcome("ok", map("offsets", offsets));
            } catch (RuntimeException e) {
                return afterError(e, committing, offsets);
            }
        }

        /** beginTransaction and the sends (one call for the watchdog, as the reference's "produce"), then flush;
         *  the first send error is thrown (offsets: each acknowledged write's). */
        private void produce(String attempt, List<Write> writes, long[] offsets) {
            Object lock = new Object();
            RuntimeException[] first = new RuntimeException[1];
            c.watch.run("produce", t.requestS, () -> {
                producer.beginTransaction();
                for (int i = 0; i < writes.size(); i++) {
                    Write w = writes.get(i);
                    RecordHeaders headers = new RecordHeaders();
                    for (Map.Entry<String, String> h : Ids.headers(w.id, attempt, c.process, w.input).entrySet()) {
                        headers.add(new RecordHeader(h.getKey(), h.getValue().getBytes(java.nio.charset.StandardCharsets.UTF_8)));
                    }
                    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(w.topic, w.partition,
                            w.key == null ? null : w.key.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                            Ids.encodeValue(w.id, attempt, c.process, w.hasInput, w.input, t.size), headers);
                    int index = i;
                    producer.send(record, (metadata, error) -> {
                        synchronized (lock) {
                            if (error != null) {
                                if (first[0] == null) {
                                    first[0] = error instanceof RuntimeException ? (RuntimeException) error
                                            : new KafkaException(error);
                                }
                            } else if (metadata != null && metadata.hasOffset()) {
                                offsets[index] = metadata.offset();
                            }
                        }
                    });
                }
            });
            c.watch.run("flush", t.requestS, producer::flush);
            synchronized (lock) {
                if (first[0] != null) {
                    throw first[0];
                }
            }
        }

        /** A deliberate abort; a timeout is retried once (a pause made it time out), so a producer fenced meanwhile
         *  learns it from the retry; one that fails is judged by its error. */
        private Outcome abortDeliberately() {
            try {
                try {
                    c.watch.run("abort_transaction", t.requestS, producer::abortTransaction);
                } catch (TimeoutException e) {
                    c.watch.run("abort_transaction", t.requestS, producer::abortTransaction);
                }
            } catch (RuntimeException e) {
                return new Outcome("fail", dropAfter(e, map("error", describe(e), "after", "deliberate abort")));
            }
            return new Outcome("fail", map("error", "deliberate abort"));
        }

        private Outcome afterError(RuntimeException e, boolean committing, long[] offsets) {
            Map<String, Object> error = map("error", describe(e));
            String outcome = committing ? "info" : "fail";
            Kind kind = kind(e);
            if (kind == Kind.ABORTABLE || (kind == Kind.TIMEOUT && !committing)) {
                try {
                    c.watch.run("abort_transaction", t.requestS, producer::abortTransaction);
                    return new Outcome("fail", error);
                } catch (RuntimeException again) {   // e.g. fenced, or fatal: a zombie learns it here, after a pause
                    error = map("error", describe(again), "after", describe(e));
                    outcome = "fail";
                    e = again;
                }
            } else if (kind == Kind.TIMEOUT) {      // during the commit: the javadoc's retry
                try {
                    c.watch.run("commit_transaction", t.requestS, producer::commitTransaction);
                    return new Outcome("ok", map("offsets", offsets, "retried", describe(e)));
                } catch (RuntimeException again) {
                    error = map("error", describe(again), "after", describe(e));
                    e = again;
                }
            }
            return new Outcome(outcome, dropAfter(e, error));
        }

        /** Closes the producer after e; a fenced one with --on-fenced exit stops the process. */
        Map<String, Object> dropAfter(Throwable e, Map<String, Object> extra) {
            drop();
            if (kind(e) == Kind.FENCED && t.onFencedExit) {
                extra.put("fenced", true);
                c.stop();
            }
            return extra;
        }

        void drop() {
            if (producer != null) {
                KafkaProducer<byte[], byte[]> p = producer;
                producer = null;
                close(p);
            }
        }

        private void close(KafkaProducer<byte[], byte[]> p) {
            try {
                c.watch.run("close", t.requestS, () -> p.close(Duration.ofMillis(t.requestMs())));
            } catch (RuntimeException e) {
                Main.log("producer close: " + describe(e));
            }
        }
    }
}
