// The ids every record carries (chaos/ids.py): record id "<attempt id>.<index>", attempt id
// "<run tag>.<process>.<attempt number>", in the value (compact JSON {"id","attempt","producer"[,"input"][,"pad"]},
// padded to about --size bytes) and in headers (txnlab.id, txnlab.attempt, txnlab.producer[, txnlab.input]); a keyed
// record's key k<n>, n = CRC-32 of its id mod the number of keys (chaos/workloads/txn_producer.py key_number).
// Also `Main --check-ids FILE`: these checked against the Python reference's vectors (tests/unit/test_client_ids.py
// writes them), with the tiny JSON reader that needs.
// Must not: know a Kafka client (the workloads turn these into records).
package dev.txnlab.workloads;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;

final class Ids {
    static final String HEADER_ID = "txnlab.id";
    static final String HEADER_ATTEMPT = "txnlab.attempt";
    static final String HEADER_PRODUCER = "txnlab.producer";
    static final String HEADER_INPUT = "txnlab.input";

    private Ids() {
    }

    static String attemptId(String run, String process, long n) {
        return run + "." + process + "." + n;
    }

    static String recordId(String run, String process, long n, int index) {
        return attemptId(run, process, n) + "." + index;
    }

    /** CRC-32 of the id (its UTF-8 bytes, as zlib.crc32 and Spark's crc32 read it), mod keys. */
    static int keyNumber(String rid, int keys) {
        CRC32 crc = new CRC32();
        crc.update(rid.getBytes(StandardCharsets.UTF_8));
        return (int) (crc.getValue() % keys);
    }

    /** chaos/ids.py encode_value; input null: none (a processor's output of an input without an id says
     *  "input":null, as the reference does, with hasInput). */
    static byte[] encodeValue(String rid, String attempt, String producer, boolean hasInput, String input, int size) {
        StringBuilder body = new StringBuilder(Math.max(size, 64));
        body.append("{\"id\":").append(History.quote(rid)).append(",\"attempt\":").append(History.quote(attempt))
                .append(",\"producer\":").append(History.quote(producer));
        if (hasInput) {
            body.append(",\"input\":").append(input == null ? "null" : History.quote(input));
        }
        int pad = size - (body.length() + 1) - 9;     // the reference: size - len(json without pad) - 9
        if (pad > 0) {
            body.append(",\"pad\":\"").append("x".repeat(pad)).append('"');
        }
        return body.append('}').toString().getBytes(StandardCharsets.UTF_8);
    }

    /** The headers, in order; txnlab.input only with an input id. */
    static Map<String, String> headers(String rid, String attempt, String producer, String input) {
        Map<String, String> h = new LinkedHashMap<>();
        h.put(HEADER_ID, rid);
        h.put(HEADER_ATTEMPT, attempt);
        h.put(HEADER_PRODUCER, producer);
        if (input != null) {
            h.put(HEADER_INPUT, input);
        }
        return h;
    }

    // ---- the vectors of the Python reference ---------------------------------------------------------

    /** True when every vector of the file comes out the same here; mismatches on stderr. */
    @SuppressWarnings("unchecked")
    static boolean checkVectors(String path) {
        List<Object> vectors;
        try {
            vectors = (List<Object>) new Reader(Files.readString(Path.of(path), StandardCharsets.UTF_8)).document();
        } catch (IOException | RuntimeException e) {
            System.err.println("check-ids: cannot read " + path + ": " + e);
            return false;
        }
        int bad = 0;
        for (Object o : vectors) {
            Map<String, Object> v = (Map<String, Object>) o;
            String run = (String) v.get("run");
            String process = (String) v.get("process");
            long attemptNo = ((Number) v.get("attempt_no")).longValue();
            int index = ((Number) v.get("index")).intValue();
            String input = (String) v.get("input");
            boolean hasInput = input != null && !input.isEmpty();
            int size = ((Number) v.get("size")).intValue();
            int keys = ((Number) v.get("keys")).intValue();
            String rid = recordId(run, process, attemptNo, index);
            String attempt = attemptId(run, process, attemptNo);
            bad += mismatch("record id", rid, v.get("record_id"));
            bad += mismatch("value of " + rid + " size " + size,
                    new String(encodeValue(rid, attempt, process, hasInput, hasInput ? input : null, size), StandardCharsets.UTF_8),
                    v.get("value"));
            bad += mismatch("key number of " + rid + " mod " + keys, (long) keyNumber(rid, keys),
                    ((Number) v.get("key_number")).longValue());
            bad += mismatch("headers of " + rid, History.json(headers(rid, attempt, process, hasInput ? input : null)),
                    History.json(v.get("headers")));
        }
        if (vectors.isEmpty()) {
            System.err.println("check-ids: no vectors in " + path);
            return false;
        }
        if (bad == 0) {
            System.out.println("ok: " + vectors.size() + " vectors");
        }
        return bad == 0;
    }

    private static int mismatch(String what, Object java, Object python) {
        if (java.equals(python)) {
            return 0;
        }
        System.err.println("mismatch: " + what + ":\n  java   " + java + "\n  python " + python);
        return 1;
    }

    /** JSON as the vectors file holds it: objects (key order kept), arrays, strings, integers, true/false/null. */
    static final class Reader {
        private final String s;
        private int i;

        Reader(String s) {
            this.s = s;
        }

        Object document() {
            Object v = value();
            blanks();
            if (i != s.length()) {
                throw error("trailing characters");
            }
            return v;
        }

        private Object value() {
            blanks();
            if (i >= s.length()) {
                throw error("unexpected end");
            }
            char c = s.charAt(i);
            if (c == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                blanks();
                if (peek('}')) {
                    return m;
                }
                do {
                    blanks();
                    String key = string();
                    blanks();
                    expect(':');
                    m.put(key, value());
                    blanks();
                } while (peek(','));
                expect('}');
                return m;
            }
            if (c == '[') {
                i++;
                List<Object> a = new ArrayList<>();
                blanks();
                if (peek(']')) {
                    return a;
                }
                do {
                    a.add(value());
                    blanks();
                } while (peek(','));
                expect(']');
                return a;
            }
            if (c == '"') {
                return string();
            }
            for (String word : new String[] {"true", "false", "null"}) {
                if (s.startsWith(word, i)) {
                    i += word.length();
                    return word.equals("null") ? null : Boolean.valueOf(word);
                }
            }
            int start = i;
            while (i < s.length() && "+-0123456789".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            if (start == i || (i < s.length() && ".eE".indexOf(s.charAt(i)) >= 0)) {
                throw error("not a value this reader knows");
            }
            return Long.parseLong(s.substring(start, i));
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': out.append('\n'); break;
                    case 'r': out.append('\r'); break;
                    case 't': out.append('\t'); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'u':
                        out.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default: out.append(e);
                }
            }
        }

        private void blanks() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private boolean peek(char c) {
            if (i < s.length() && s.charAt(i) == c) {
                i++;
                return true;
            }
            return false;
        }

        private void expect(char c) {
            if (!peek(c)) {
                throw error("expected '" + c + "'");
            }
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("JSON at " + i + ": " + what);
        }
    }
}
