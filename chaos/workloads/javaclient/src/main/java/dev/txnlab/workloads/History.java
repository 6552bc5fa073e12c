// The run's history socket (docs/workload-protocol.md "The history socket"): one JSON operation per line over a
// Unix stream socket, whole lines from any thread, one invoke outstanding per logical process. Observations the
// client's callbacks make while the process has an invoke outstanding (a rebalance listener firing mid-transaction)
// wait for its completion and are written right after it: the history pairs an invoke with the process's next
// operation. Also JSON itself, written by hand (values are maps, lists, strings, numbers, booleans, null).
// Owns: the line format {"time", "wall", "process", "type", "f", "value"} with time = CLOCK_MONOTONIC ns
// (System.nanoTime on Linux, the clock Python's time.monotonic_ns reads) minus --run-start-ns.
// Must not: decide what to record (the workloads do) or retry a write (a lost socket is the run's to notice).
package dev.txnlab.workloads;

import java.io.IOException;
import java.math.BigDecimal;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class History {
    private final SocketChannel channel;
    private final long runStartNs;
    private final String process;
    private String openF;                              // the process's open invoke, null: none
    private Map<String, Object> openValue;
    private final List<Object[]> waiting = new ArrayList<>();   // {f, value}: observed while the invoke was open
    private boolean broken;
    private boolean closed;

    private History(SocketChannel channel, long runStartNs, String process) {
        this.channel = channel;
        this.runStartNs = runStartNs;
        this.process = process;
    }

    static History connect(String path, long runStartNs, String process) throws IOException {
        SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
        channel.connect(UnixDomainSocketAddress.of(path));
        return new History(channel, runStartNs, process);
    }

    /** The process is about to act. */
    synchronized void invoke(String f, Map<String, Object> value) {
        openF = f;
        openValue = value;
        write("invoke", f, value);
    }

    /** The outcome (ok, fail, info) of the process's open invoke, then what was observed meanwhile. */
    synchronized void complete(String type, String f, Map<String, Object> value) {
        openF = null;
        openValue = null;
        write(type, f, value);
        flushWaiting();
    }

    /** An `ok` without an invoke: at once, or with an invoke open, right after its completion. */
    synchronized void observe(String f, Object value) {
        if (openF != null) {
            waiting.add(new Object[] {f, value});
            return;
        }
        write("ok", f, value);
    }

    /** A stall: the open invoke completed as info (its outcome is unknown), the stall recorded, the socket closed. */
    synchronized void stalled(Map<String, Object> stall) {
        if (openF != null) {
            Map<String, Object> value = new LinkedHashMap<>(openValue);
            value.put("stalled", stall.get("call"));
            value.put("error", "stalled: " + stall.get("call") + " did not return in " + shortNumber(stall.get("seconds"))
                    + " s (its timeout " + shortNumber(stall.get("timeout_s")) + " s)");
            String f = openF;
            openF = null;
            openValue = null;
            write("info", f, value);
        }
        flushWaiting();
        write("ok", "stall", stall);
        closeChannel();
    }

    synchronized void close() {
        flushWaiting();
        closeChannel();
    }

    private void flushWaiting() {
        for (Object[] o : waiting) {
            write("ok", (String) o[0], o[1]);
        }
        waiting.clear();
    }

    private void closeChannel() {
        if (!closed) {
            closed = true;
            try {
                channel.close();
            } catch (IOException e) {
                Main.log("history socket close: " + e);
            }
        }
    }

    private void write(String type, String f, Object value) {
        long time = System.nanoTime() - runStartNs;
        Instant now = Instant.now();
        StringBuilder line = new StringBuilder(256);
        line.append("{\"time\":").append(time).append(",\"wall\":").append(now.getEpochSecond()).append('.')
                .append(String.format("%06d", now.getNano() / 1000)).append(",\"process\":");
        quote(line, process);
        line.append(",\"type\":");
        quote(line, type);
        line.append(",\"f\":");
        quote(line, f);
        line.append(",\"value\":");
        json(line, value);
        line.append("}\n");
        if (closed || broken) {
            return;
        }
        ByteBuffer buf = ByteBuffer.wrap(line.toString().getBytes(StandardCharsets.UTF_8));
        try {
            while (buf.hasRemaining()) {
                channel.write(buf);
            }
        } catch (IOException e) {
            broken = true;
            Main.log("history socket write failed: " + e);
        }
    }

    // ---- JSON ----------------------------------------------------------------------------------------

    static String json(Object value) {
        StringBuilder out = new StringBuilder();
        json(out, value);
        return out.toString();
    }

    @SuppressWarnings("unchecked")
    static void json(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String) {
            quote(out, (String) value);
        } else if (value instanceof Boolean || value instanceof Integer || value instanceof Long
                || value instanceof Short || value instanceof Byte) {
            out.append(value);
        } else if (value instanceof Number) {
            out.append(number(value));
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                quote(out, e.getKey());
                out.append(':');
                json(out, e.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection) {
            out.append('[');
            boolean first = true;
            for (Object o : (Collection<Object>) value) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                json(out, o);
            }
            out.append(']');
        } else if (value instanceof long[]) {
            out.append('[');
            long[] a = (long[]) value;
            for (int i = 0; i < a.length; i++) {
                out.append(i == 0 ? "" : ",").append(a[i]);
            }
            out.append(']');
        } else {
            quote(out, value.toString());
        }
    }

    /** A float as JSON: plain digits (never 1.5E9), null when not finite. */
    static String number(Object n) {
        if (!(n instanceof Double || n instanceof Float)) {
            return String.valueOf(n);
        }
        double d = ((Number) n).doubleValue();
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            return "null";
        }
        return BigDecimal.valueOf(d).toPlainString();
    }

    /** A number as Python's `{:g}` writes it in a message: 10, 10.5. */
    static String shortNumber(Object n) {
        if (n instanceof Number && ((Number) n).doubleValue() == Math.rint(((Number) n).doubleValue())) {
            return String.valueOf(((Number) n).longValue());
        }
        return number(n);
    }

    /** A JSON string as Python's json.dumps writes it (ensure_ascii: non-ASCII as \\uXXXX). */
    static void quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                case '\b': out.append("\\b"); break;
                case '\f': out.append("\\f"); break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    static String quote(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2);
        quote(out, s);
        return out.toString();
    }
}
