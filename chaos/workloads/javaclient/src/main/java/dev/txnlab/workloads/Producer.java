// The transactional producer (plan txn-producer; chaos/workloads/txn_producer.py is the reference): each attempt
// writes --records records over the partitions of two topics in one transaction (keyed with --keys K: key k<n>,
// partition n mod partitions; else a seeded random partition), then commits, or deliberately aborts an
// --abort-share of them. History: init invoke / ok | fail, then txn invoke {attempt, producer, txn_id, abort,
// writes: [{topic, partition, id[, key]}]} / ok (+ offsets) | fail (+ error) | info (+ error).
// What an error means for the outcome: Txn.java. Must not: retry a transaction under the same attempt id.
package dev.txnlab.workloads;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import dev.txnlab.workloads.Main.Args;
import dev.txnlab.workloads.Main.Ctx;

final class Producer extends Txn.Client {
    static final Map<String, Integer> ARGS = Map.of("--topics", 2, "--records", 1, "--abort-share", 1, "--rate", 1,
            "--size", 1, "--keys", 1);
    static final String F = "txn";

    private final List<String> topics;
    private final int records;
    private final int keys;
    private final double abortShare;
    private Map<String, Integer> partitions;
    private long attemptNo;

    private Producer(Ctx c, Txn.Options t, Properties conn, List<String> topics, int records, int keys, double abortShare) {
        super(c, t, conn);
        this.topics = topics;
        this.records = records;
        this.keys = keys;
        this.abortShare = abortShare;
        this.attemptNo = c.firstAttempt;
    }

    static void run(Args a) {
        if (!a.has("--topics")) {
            Main.usage("the following arguments are required: --topics");
        }
        int records = a.int32("--records", 6);
        double abortShare = a.num("--abort-share", 0.2);
        double rate = a.num("--rate", 20.0);
        int keys = a.int32("--keys", 0);
        if (keys < 0) {
            Main.usage("--keys " + keys + ": 0 (no keys) or a number of keys");
        }
        Txn.Options t = new Txn.Options(a);
        Properties conn = Txn.connection(a);
        Ctx c = Ctx.open(a);
        Producer p = new Producer(c, t, conn, a.list("--topics"), records, keys, abortShare);
        int code = 0;
        try {
            p.partitions = Conn.partitionCounts(c, conn, p.topics);
            Main.Pacer pacer = new Main.Pacer(rate);
            while (!c.stopping()) {
                if (p.ensureProducer()) {
                    p.oneAttempt();
                } else {
                    c.await(1.0);
                }
                pacer.pace(c);
            }
        } catch (RuntimeException | Error e) {   // the workload's own failure: exit 1 (an open invoke: the writer's info)
            Main.log("txn-producer failed: " + Txn.describe(e));
            e.printStackTrace();
            code = 1;
        } finally {
            p.drop();
        }
        c.exit(code);
    }

    private List<Txn.Write> plan() {
        List<Txn.Write> writes = new ArrayList<>(records);
        for (int i = 0; i < records; i++) {
            String topic = topics.get(i % 2);
            String rid = Ids.recordId(c.runTag, c.process, attemptNo, i);
            if (keys > 0) {
                int n = Ids.keyNumber(rid, keys);
                writes.add(new Txn.Write(topic, n % partitions.get(topic), rid, "k" + n, false, null));
            } else {
                writes.add(new Txn.Write(topic, c.rng.nextInt(partitions.get(topic)), rid, null, false, null));
            }
        }
        return writes;
    }

    private void oneAttempt() {
        String attempt = Ids.attemptId(c.runTag, c.process, attemptNo);
        boolean abort = c.rng.nextDouble() < abortShare;
        List<Txn.Write> writes = plan();
        attemptNo++;
        Map<String, Object> value = Txn.map("attempt", attempt, "producer", c.process, "txn_id", t.txnId,
                "abort", abort, "writes", Txn.historyOf(writes));
        c.history.invoke(F, value);
        Txn.Outcome outcome = transact(attempt, writes, () -> { }, abort);
        Map<String, Object> done = new LinkedHashMap<>(value);
        done.putAll(outcome.extra);
        c.history.complete(outcome.type, F, done);
    }
}
