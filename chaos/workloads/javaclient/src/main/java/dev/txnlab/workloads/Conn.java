// The Kafka connection from TXNLAB_KAFKA_* variables (cluster/access/connection.py names them) as Java client properties,
// and the topic facts a workload reads once at its start (partition counts, through an Admin client).
// SASL's JAAS configuration is built in memory and TLS material read from its files into the properties: a secret
// is never printed (the Properties are never logged) and never on a command line.
package dev.txnlab.workloads;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;

import dev.txnlab.workloads.Main.Ctx;

final class Conn {
    static final double LIST_TIMEOUT_S = 30.0;    // chaos/workloads/topics.py LIST_TIMEOUT_S

    /** A connection setting the client cannot use. */
    static final class ConfigError extends Exception {
        ConfigError(String message) {
            super(message);
        }
    }

    private Conn() {
    }

    static String env(String name) {
        String v = System.getenv("TXNLAB_KAFKA_" + name);
        return v == null || v.isEmpty() ? null : v;
    }

    /** The properties every workload client starts from, named `clientId` on the wire unless TXNLAB_KAFKA_CLIENT_ID
     *  names them. */
    static Properties properties(String clientId) throws ConfigError {
        String bootstrap = env("BOOTSTRAP");
        if (bootstrap == null) {
            throw new ConfigError("TXNLAB_KAFKA_BOOTSTRAP is not set");
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", env("CLIENT_ID") != null ? env("CLIENT_ID") : clientId);
        String protocol = env("SECURITY_PROTOCOL") != null ? env("SECURITY_PROTOCOL") : "PLAINTEXT";
        if (!List.of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL").contains(protocol)) {
            throw new ConfigError("TXNLAB_KAFKA_SECURITY_PROTOCOL '" + protocol
                    + "': one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL");
        }
        p.put("security.protocol", protocol);
        if (protocol.startsWith("SASL_")) {
            sasl(p);
        }
        if (protocol.endsWith("SSL")) {
            tls(p);
        }
        return p;
    }

    private static void sasl(Properties p) throws ConfigError {
        String mechanism = env("SASL_MECHANISM");
        String module;
        if ("PLAIN".equals(mechanism)) {
            module = "org.apache.kafka.common.security.plain.PlainLoginModule";
        } else if ("SCRAM-SHA-256".equals(mechanism) || "SCRAM-SHA-512".equals(mechanism)) {
            module = "org.apache.kafka.common.security.scram.ScramLoginModule";
        } else {
            throw new ConfigError("TXNLAB_KAFKA_SASL_MECHANISM '" + mechanism + "': one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512");
        }
        String user = env("SASL_USERNAME") != null ? env("SASL_USERNAME") : "";
        String password = env("SASL_PASSWORD");
        if (password == null && env("SASL_PASSWORD_FILE") != null) {
            password = read("SASL_PASSWORD_FILE").strip();      // cluster/access/connection.py strips it alike
        }
        p.put("sasl.mechanism", mechanism);
        p.put("sasl.jaas.config", module + " required username=" + jaasQuoted(user) + " password="
                + jaasQuoted(password != null ? password : "") + ";");
    }

    /** A JAAS option value: quoted, its quotes and backslashes escaped (Kafka's JaasConfig reads it so). */
    private static String jaasQuoted(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static void tls(Properties p) throws ConfigError {
        if (env("TLS_CA_FILE") != null) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", env("TLS_CA_FILE"));
        }
        if (env("TLS_CERT_FILE") != null || env("TLS_KEY_FILE") != null) {
            if (env("TLS_CERT_FILE") == null || env("TLS_KEY_FILE") == null) {
                throw new ConfigError("TXNLAB_KAFKA_TLS_CERT_FILE and TLS_KEY_FILE go together");
            }
            // A PEM keystore from strings: the chain and the (PKCS#8) key, as the files hold them.
            p.put("ssl.keystore.type", "PEM");
            p.put("ssl.keystore.certificate.chain", read("TLS_CERT_FILE"));
            p.put("ssl.keystore.key", read("TLS_KEY_FILE"));
            if (env("TLS_KEY_PASSWORD") != null) {
                p.put("ssl.key.password", env("TLS_KEY_PASSWORD"));
            }
        }
        if ("false".equalsIgnoreCase(env("TLS_VERIFY_HOSTNAME"))) {
            p.put("ssl.endpoint.identification.algorithm", "");
        }
    }

    private static String read(String variable) throws ConfigError {
        try {
            return Files.readString(Path.of(env(variable)), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConfigError("TXNLAB_KAFKA_" + variable + ": cannot read " + env(variable) + ": " + e.getMessage());
        }
    }

    /** The topics' partition counts, read once (an Admin client's DescribeTopics); a missing topic: exit 1. */
    static Map<String, Integer> partitionCounts(Ctx c, Properties conn, List<String> topics) {
        Map<String, Integer> counts = new HashMap<>();
        String failure = c.watch.call("list_topics", LIST_TIMEOUT_S, () -> {
            Properties props = new Properties();
            props.putAll(conn);
            props.put("client.id", conn.getProperty("client.id") + "-admin");
            props.put("request.timeout.ms", "10000");
            props.put("default.api.timeout.ms", String.valueOf((long) (LIST_TIMEOUT_S * 1000) - 2000));
            try (Admin admin = Admin.create(props)) {
                Map<String, TopicDescription> found = admin.describeTopics(topics).allTopicNames()
                        .get((long) (LIST_TIMEOUT_S * 1000) - 2000, TimeUnit.MILLISECONDS);
                for (TopicDescription d : found.values()) {
                    counts.put(d.name(), d.partitions().size());
                }
                return null;
            } catch (Exception e) {
                return Txn.describe(e instanceof java.util.concurrent.ExecutionException && e.getCause() != null
                        ? e.getCause() : e);
            }
        });
        List<String> missing = new ArrayList<>();
        for (String t : topics) {
            if (counts.getOrDefault(t, 0) == 0) {
                missing.add(t);
            }
        }
        if (failure != null || !missing.isEmpty()) {
            Main.log("topics " + missing + " do not exist or could not be read (create them first, e.g. `txnlab chaos "
                    + "workload` does): " + failure);
            c.exit(1);
        }
        return counts;
    }

    static Duration seconds(double s) {
        return Duration.ofMillis((long) (s * 1000));
    }
}
